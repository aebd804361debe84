//! The settle never holds a run back: paused for the host's work, taken
//! over by a run on the same workspace, never trusted unless finished.
//! Deterministic: the host is marked busy from the test (or at a chosen
//! checkpoint, by a hook), and the test waits for the settle to be seen
//! paused before it acts.

use super::super::tests::{git, listing, listing_but_git, mode_of, tree_of, write};
use super::super::*;
use super::*;
use std::os::unix::fs::PermissionsExt as _;
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

/// A repository of `dirs` directories of three files each, and a script.
fn repository(t: &Path, dirs: usize) -> PathBuf {
    let ws = t.join("ws");
    std::fs::create_dir(&ws).expect("mkdir");
    git(&ws, &["init", "-q", "-b", "main"]);
    for d in 0..dirs {
        for f in 0..3 {
            write(&ws, &format!("d{d:02}/f{f}.txt"), &format!("{d} {f}"));
        }
    }
    write(&ws, "run.sh", "echo");
    std::fs::set_permissions(ws.join("run.sh"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "one"]);
    ws
}

/// What a gate leaves in every directory: a file changed, one re-moded,
/// one removed, one added; the script made plain.
fn traces(w: &Path, dirs: usize) {
    for d in 0..dirs {
        write(w, &format!("d{d:02}/f0.txt"), "tampered");
        std::fs::set_permissions(
            w.join(format!("d{d:02}/f1.txt")),
            std::fs::Permissions::from_mode(0o755),
        )
        .expect("chmod");
        std::fs::remove_file(w.join(format!("d{d:02}/f2.txt"))).expect("rm");
        write(w, &format!("d{d:02}/extra/planted"), "planted");
    }
    std::fs::set_permissions(w.join("run.sh"), std::fs::Permissions::from_mode(0o644))
        .expect("chmod");
}

/// Exactly the repository's tree, modes included.
fn assert_exactly(w: &Path, ws: &Path, dirs: usize) {
    assert_eq!(listing(w), listing_but_git(ws));
    assert_eq!(mode_of(&w.join("run.sh")), 0o755);
    for d in 0..dirs {
        assert_eq!(mode_of(&w.join(format!("d{d:02}/f1.txt"))), 0o644);
    }
}

/// Until `what` holds, for at most ten seconds.
fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Marks the host busy at the settle's `n`th checkpoint (a gate starts
/// there); released by dropping the `Busy` returned.
fn busy_at_checkpoint(trees: &Worktrees, n: usize) -> Busy {
    let mut seen = 0;
    *trees.slots.checkpoint.lock().expect("hook") = Some(Box::new(move |slots: &Slots| {
        seen += 1;
        if seen == n {
            slots.busy.fetch_add(1, SeqCst);
        }
    }));
    // The guard the hook's mark is released by.
    Busy {
        slots: trees.slots.clone(),
    }
}

/// A repository of `dirs` directories in `t`, its worktree synced to its
/// tree and written to by a run (`traces`): the workspace, the worktrees,
/// the lease and the worktree's path, as a settle finds them.
fn after_a_run(t: &Path, dirs: usize) -> (PathBuf, Worktrees, Lease, PathBuf) {
    let ws = repository(t, dirs);
    let trees = Worktrees::new(t.join("worktrees"));
    let mut lease = trees.lease(&ws, Tenant::Operator).expect("lease");
    sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    let w = lease.path().to_path_buf();
    traces(&w, dirs);
    (ws, trees, lease, w)
}

fn is_leased(trees: &Worktrees, w: &Path) -> bool {
    matches!(trees.slots.lock().get(w), Some(Slot::Leased))
}

/// A settle paused while a gate runs: a run on the same workspace takes
/// the worktree over at once (it never waits), brings it to its own tree
/// exactly, and the settle, once resumed, stops without touching it.
#[test]
fn a_run_takes_over_a_paused_settle_without_waiting() {
    let t = tempfile::tempdir().expect("tempdir");
    let (ws, trees, lease, w) = after_a_run(t.path(), 4);
    // The next tree: a file changed, one removed, one added.
    write(&ws, "d00/f0.txt", "two");
    std::fs::remove_file(ws.join("d01/f0.txt")).expect("rm");
    write(&ws, "d09/new.txt", "new");
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "two"]);

    let gate = trees.busy();
    let wsr = ws.as_path();
    std::thread::scope(|s| {
        let settling = s.spawn(move || {
            let mut lease = lease;
            settle(&mut lease, wsr).expect("settle")
        });
        until("the settle pauses", || trees.slots.paused.load(SeqCst) == 1);
        assert!(!settling.is_finished());
        let started = Instant::now();
        let mut run = trees.lease(&ws, Tenant::Operator).expect("lease");
        assert_eq!(run.path(), w, "the settling worktree, taken over");
        assert_eq!(trees.slots.waiting.load(SeqCst), 0, "the run never waited");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(
            !run.manifest.settled,
            "a half-settled worktree is not trusted"
        );
        sync(&mut run, &ws, &tree_of(&ws)).expect("sync");
        assert_exactly(&w, &ws, 4);
        // The gate ends; the settle resumes only to stop.
        drop(gate);
        assert_eq!(settling.join().expect("thread"), Settled::HandedOver);
        assert!(
            is_leased(&trees, &w),
            "the settle left the run's lease alone"
        );
        assert_exactly(&w, &ws, 4);
        drop(run);
    });
    let again = trees.lease(&ws, Tenant::Operator).expect("lease");
    assert_eq!(again.path(), w, "returned by the run, free again");
}

/// A settle interrupted halfway (some directories fixed, others not)
/// hands over a manifest nothing trusts: a sync to the very tree it was
/// settling to reads the worktree whole and fixes the rest.
#[test]
fn an_interrupted_settle_leaves_nothing_trusted() {
    let dirs = 12;
    let t = tempfile::tempdir().expect("tempdir");
    let (ws, trees, lease, w) = after_a_run(t.path(), dirs);
    // The root read (1) and fixed (2), the directories below read (3 to
    // 14), five of them fixed (15 to 19): a gate starts at the 20th.
    let gate = busy_at_checkpoint(&trees, 20);
    std::thread::scope(|s| {
        let settling = s.spawn(|| {
            let mut lease = lease;
            settle(&mut lease, &ws).expect("settle")
        });
        until("the settle pauses", || trees.slots.paused.load(SeqCst) == 1);
        let fixed = (0..dirs)
            .filter(|d| !w.join(format!("d{d:02}/extra")).exists())
            .count();
        assert!(fixed > 0 && fixed < dirs, "halfway: {fixed} fixed");
        let mut run = trees.lease(&ws, Tenant::Operator).expect("lease");
        assert_eq!(run.path(), w);
        let stats = sync(&mut run, &ws, &tree_of(&ws)).expect("sync");
        // Read whole: the planted directories the settle had not reached
        // are found; every file the settle or the gate took away (each
        // directory's three, the script) is written.
        assert_eq!(stats.removed, dirs - fixed, "{stats:?}");
        assert_eq!(stats.written, 3 * dirs + 1, "{stats:?}");
        assert_exactly(&w, &ws, dirs);
        drop(gate);
        assert_eq!(settling.join().expect("thread"), Settled::HandedOver);
        assert_exactly(&w, &ws, dirs);
    });
}

/// A settle that meets a running gate pauses (nothing changed), resumes
/// once the gate ends, and finishes: the worktree is trusted settled.
#[test]
fn a_settle_yields_to_a_running_gate_and_finishes_after_it() {
    let t = tempfile::tempdir().expect("tempdir");
    let (ws, trees, lease, w) = after_a_run(t.path(), 3);
    let gate = trees.busy();
    let settling = std::thread::spawn({
        let ws = ws.clone();
        move || {
            let mut lease = lease;
            let done = settle(&mut lease, &ws).expect("settle");
            (done, lease.manifest.settled, lease)
        }
    });
    until("the settle pauses", || trees.slots.paused.load(SeqCst) == 1);
    assert!(
        w.join("d00/extra/planted").exists(),
        "nothing is done while the gate runs"
    );
    assert!(!settling.is_finished());
    drop(gate);
    let (done, trusted, lease) = settling.join().expect("thread");
    // Per directory: f0 and f1 written again, f2 written back; extra/.
    assert_eq!(
        done,
        Settled::Done(SyncStats {
            written: 3 * 3 + 1,
            removed: 3,
            kept: 0,
        })
    );
    assert!(trusted, "a finished settle is trusted");
    assert_exactly(&w, &ws, 3);
    drop(lease);
    let mut next = trees.lease(&ws, Tenant::Operator).expect("lease");
    let same = sync(&mut next, &ws, &tree_of(&ws)).expect("sync");
    assert_eq!((same.written, same.removed), (0, 0), "{same:?}");
}

/// The settle's threads take the lowest priority a thread may set itself.
#[cfg(target_os = "linux")]
#[test]
fn a_settle_thread_runs_at_nice_19() {
    let nice = std::thread::spawn(|| {
        lowest_priority();
        rustix::process::getpriority_process(Some(rustix::thread::gettid()))
    })
    .join()
    .expect("thread")
    .expect("getpriority");
    assert_eq!(nice, 19);
}
