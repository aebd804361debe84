//! The worktrees, synced for real against git repositories.

use super::*;
use crate::supervise::reaper::TrackedCommand as _;
use std::os::unix::fs::PermissionsExt as _;
use std::process::Command;

pub(super) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "core.hooksPath=/dev/null",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .tracked_output()
        .expect("git");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(super) fn write(root: &Path, rel: &str, content: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, content).expect("write");
}

/// Every file under `dir` (links as `-> target`), sorted.
pub(super) fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            let rel = p.strip_prefix(dir).expect("under").display().to_string();
            let ft = e.file_type().expect("type");
            if ft.is_symlink() {
                out.push(format!(
                    "{rel} -> {}",
                    std::fs::read_link(&p).expect("link").display()
                ));
            } else if ft.is_dir() {
                stack.push(p);
            } else {
                out.push(format!(
                    "{rel}: {}",
                    std::fs::read_to_string(&p).unwrap_or_default().trim()
                ));
            }
        }
    }
    out.sort();
    out
}

pub(super) fn tree_of(ws: &Path) -> String {
    git(ws, &["rev-parse", "HEAD^{tree}"]).trim().to_string()
}

/// Settles `lease`, which no run takes over.
pub(super) fn settled(lease: &mut Lease, ws: &Path) -> SyncStats {
    match settle(lease, ws).expect("settle") {
        Settled::Done(stats) => stats,
        Settled::HandedOver => panic!("no run took the worktree over"),
    }
}

#[test]
fn a_worktree_holds_exactly_the_tree_and_keeps_only_granted_caches() {
    let t = tempfile::tempdir().expect("tempdir");
    let ws = t.path().join("ws");
    std::fs::create_dir(&ws).expect("mkdir");
    git(&ws, &["init", "-q", "-b", "main"]);
    write(&ws, "src/lib.rs", "fn a() {}");
    write(&ws, "run.sh", "echo hi");
    write(&ws, ".gitignore", "target/\n*.log\n");
    std::os::unix::fs::symlink("src/lib.rs", ws.join("link")).expect("symlink");
    std::fs::set_permissions(ws.join("run.sh"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "one"]);
    let trees = Worktrees::new(t.path().join("worktrees")).keeping(&["target".into()]);
    let mut lease = trees.lease(&ws, Tenant::Operator).expect("lease");
    let first = sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    assert_eq!(first.written, 4);
    let w = lease.path().to_path_buf();
    assert_eq!(
        listing(&w),
        [
            ".gitignore: target/\n*.log".to_string(),
            "link -> src/lib.rs".into(),
            "run.sh: echo hi".into(),
            "src/lib.rs: fn a() {}".into()
        ]
    );
    assert_eq!(
        std::fs::metadata(w.join("run.sh"))
            .expect("meta")
            .permissions()
            .mode()
            & 0o777,
        0o755
    );
    // Unchanged: nothing written.
    let again = sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    assert_eq!((again.written, again.removed, again.kept), (0, 0, 4));

    // A gate run leaves its traces: a changed file (same size, old
    // mtime), a helper file, a planted link where a directory is, a
    // build cache, a log.
    write(&w, "src/lib.rs", "fn b() {}");
    let old = std::fs::metadata(ws.join("src/lib.rs"))
        .expect("meta")
        .modified()
        .expect("mtime");
    std::fs::File::options()
        .write(true)
        .open(w.join("src/lib.rs"))
        .expect("open")
        .set_modified(old)
        .expect("set mtime");
    write(&w, "src/helper.rs", "fn helper() {}");
    write(&w, "target/debug/cache", "warm");
    write(&w, "out.log", "log");
    std::fs::remove_file(w.join("link")).expect("rm");
    std::os::unix::fs::symlink("/etc", w.join("link")).expect("plant");
    drop(lease);
    let mut lease = trees
        .lease(&ws, Tenant::Operator)
        .expect("the same worktree again");
    assert_eq!(lease.path(), w);
    let third = sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    assert_eq!(third.written, 2, "{third:?}");
    let l = listing(&w);
    assert!(l.contains(&"src/lib.rs: fn a() {}".to_string()), "{l:?}");
    assert!(l.contains(&"link -> src/lib.rs".to_string()), "{l:?}");
    assert!(!l.iter().any(|f| f.starts_with("src/helper.rs")), "{l:?}");
    // The granted cache stays warm; an ignored file that is not one
    // goes, as everything else the gate wrote.
    assert!(l.contains(&"target/debug/cache: warm".to_string()), "{l:?}");
    assert!(!l.iter().any(|f| f.starts_with("out.log")), "{l:?}");

    // Another tree: files follow it, a file becomes a directory.
    std::fs::remove_file(ws.join("run.sh")).expect("rm");
    write(&ws, "run.sh/inner", "now a dir");
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "two"]);
    sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    let l = listing(&w);
    assert!(l.contains(&"run.sh/inner: now a dir".to_string()), "{l:?}");
    // Another tree starts with the granted caches empty: what a gate
    // left there for one tree never decides another's run.
    assert!(!l.iter().any(|f| f.starts_with("target/")), "{l:?}");
    // While leased, a second run on the same workspace gets another one.
    let other = trees
        .lease(&ws, Tenant::Operator)
        .expect("a second worktree");
    assert_ne!(other.path(), lease.path());
}

/// A repository whose tree ignores `__pycache__/` and `target/`.
pub(super) fn ignoring_repo(t: &Path) -> PathBuf {
    let ws = t.join("ws");
    std::fs::create_dir(&ws).expect("mkdir");
    git(&ws, &["init", "-q", "-b", "main"]);
    write(&ws, "test.py", "assert False");
    write(&ws, ".gitignore", "__pycache__/\ntarget/\n");
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "one"]);
    ws
}

/// Issue 24, item 3: what one gate writes in an ignored directory (an
/// unchecked-hash `.pyc` that makes a failing test pass) never reaches
/// the next run, unless the operator granted that directory as a
/// cache (before: every ignored file stayed).
#[test]
fn an_ignored_file_a_gate_planted_is_gone_before_the_next_run() {
    let t = tempfile::tempdir().expect("tempdir");
    let ws = ignoring_repo(t.path());
    let trees = Worktrees::new(t.path().join("worktrees")).keeping(&["target".into()]);
    let mut lease = trees.lease(&ws, Tenant::Operator).expect("lease");
    sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    let w = lease.path().to_path_buf();
    write(&w, "__pycache__/test.cpython-311.pyc", "planted");
    write(&w, "target/debug/warm", "warm");
    drop(lease);
    let mut lease = trees.lease(&ws, Tenant::Operator).expect("lease");
    assert_eq!(lease.path(), w);
    let stats = sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    assert_eq!(stats.removed, 1, "{stats:?}");
    let l = listing(&w);
    assert!(!l.iter().any(|f| f.starts_with("__pycache__")), "{l:?}");
    assert!(l.contains(&"target/debug/warm: warm".to_string()), "{l:?}");
}

/// Policies the agent attached run in worktrees of their own, which
/// keep nothing, not even a granted cache: what their gates wrote
/// never reaches the operator's policies, nor their own next run.
#[test]
fn the_agents_policies_share_no_worktree_with_the_operators() {
    let t = tempfile::tempdir().expect("tempdir");
    let ws = ignoring_repo(t.path());
    let trees = Worktrees::new(t.path().join("worktrees")).keeping(&["target".into()]);
    let mut agent = trees.lease(&ws, Tenant::Agent).expect("lease");
    sync(&mut agent, &ws, &tree_of(&ws)).expect("sync");
    let aw = agent.path().to_path_buf();
    write(&aw, "target/debug/planted", "the agent's");
    drop(agent);
    let mut operator = trees.lease(&ws, Tenant::Operator).expect("lease");
    assert_ne!(operator.path(), aw);
    sync(&mut operator, &ws, &tree_of(&ws)).expect("sync");
    assert!(
        !listing(operator.path())
            .iter()
            .any(|f| f.starts_with("target"))
    );
    drop(operator);
    let mut agent = trees.lease(&ws, Tenant::Agent).expect("lease");
    assert_eq!(agent.path(), aw);
    sync(&mut agent, &ws, &tree_of(&ws)).expect("sync");
    let l = listing(&aw);
    assert!(!l.iter().any(|f| f.starts_with("target")), "{l:?}");
}

/// A cache granted deeper than the tree's directories is kept, and
/// what lies beside it on the way is not.
#[test]
fn a_nested_granted_cache_is_kept_and_its_neighbours_are_not() {
    let t = tempfile::tempdir().expect("tempdir");
    let ws = ignoring_repo(t.path());
    let trees = Worktrees::new(t.path().join("worktrees")).keeping(&["build/cache".into()]);
    let mut lease = trees.lease(&ws, Tenant::Operator).expect("lease");
    sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    let w = lease.path().to_path_buf();
    write(&w, "build/cache/object", "kept");
    write(&w, "build/other", "gone");
    write(&w, "build/cachet/x", "gone too");
    sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    let l = listing(&w);
    assert!(l.contains(&"build/cache/object: kept".to_string()), "{l:?}");
    assert!(
        !l.iter()
            .any(|f| f.contains("other") || f.contains("cachet")),
        "{l:?}"
    );
}

/// Every file of the workspace but `.git`, as [`listing`] shows them.
pub(super) fn listing_but_git(ws: &Path) -> Vec<String> {
    listing(ws)
        .into_iter()
        .filter(|l| !l.starts_with(".git/") && !l.starts_with(".git:"))
        .collect()
}

pub(super) fn mode_of(p: &Path) -> u32 {
    std::fs::symlink_metadata(p)
        .expect("meta")
        .permissions()
        .mode()
        & 0o777
}

/// Issue 30: a worktree settled after its run is brought to the next tree
/// by the trees' difference alone (a changed, a re-moded, a removed, a
/// retargeted and a new file, a file that became a directory and the
/// reverse), and ends up exactly as a whole read leaves it.
#[test]
fn a_settled_worktree_follows_the_next_tree_by_its_difference() {
    let t = tempfile::tempdir().expect("tempdir");
    let ws = t.path().join("ws");
    std::fs::create_dir(&ws).expect("mkdir");
    git(&ws, &["init", "-q", "-b", "main"]);
    write(&ws, "a.txt", "one");
    write(&ws, "same/kept.txt", "kept");
    write(&ws, "run.sh", "echo");
    write(&ws, "gone/x.txt", "x");
    write(&ws, "to_dir", "a file");
    write(&ws, "to_file/y.txt", "y");
    std::os::unix::fs::symlink("a.txt", ws.join("link")).expect("symlink");
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "one"]);
    let trees = Worktrees::new(t.path().join("worktrees"));
    let mut lease = trees.lease(&ws, Tenant::Operator).expect("lease");
    sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    let w = lease.path().to_path_buf();
    // The run leaves traces; settling undoes them.
    write(&w, "a.txt", "tampered");
    write(&w, "leftover/deep/file", "left");
    write(&w, "same/extra.txt", "extra");
    let undone = settled(&mut lease, &ws);
    assert_eq!((undone.written, undone.removed), (1, 2), "{undone:?}");
    assert_eq!(listing(&w), listing_but_git(&ws));
    // The same tree again: nothing to do.
    let same = sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    assert_eq!(
        (same.written, same.removed, same.kept),
        (0, 0, 7),
        "{same:?}"
    );
    settled(&mut lease, &ws);
    drop(lease);

    write(&ws, "a.txt", "two");
    std::fs::set_permissions(ws.join("run.sh"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    std::fs::remove_dir_all(ws.join("gone")).expect("rm");
    std::fs::remove_file(ws.join("to_dir")).expect("rm");
    write(&ws, "to_dir/z.txt", "z");
    std::fs::remove_dir_all(ws.join("to_file")).expect("rm");
    write(&ws, "to_file", "now a file");
    std::fs::remove_file(ws.join("link")).expect("rm");
    std::os::unix::fs::symlink("same/kept.txt", ws.join("link")).expect("symlink");
    write(&ws, "new/deep/n.txt", "n");
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "two"]);

    let mut lease = trees.lease(&ws, Tenant::Operator).expect("lease");
    assert_eq!(lease.path(), w, "the settled worktree is leased again");
    // Not something any run could do (nothing writes a worktree between
    // its settling and its next lease): a file only a whole read would
    // find, so that its staying shows the sync read only the difference.
    write(&w, "same/unseen.txt", "unseen");
    let next = sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    // a.txt, run.sh, to_dir/z.txt, to_file, link, new/deep/n.txt.
    assert_eq!(next.written, 6, "{next:?}");
    // a.txt, run.sh, gone, to_dir, to_file, link.
    assert_eq!(next.removed, 6, "{next:?}");
    assert_eq!(next.kept, 1, "{next:?}");
    let mut expected = listing_but_git(&ws);
    expected.push("same/unseen.txt: unseen".into());
    expected.sort();
    assert_eq!(listing(&w), expected);
    assert_eq!(mode_of(&w.join("run.sh")), 0o755);
    assert_eq!(mode_of(&w.join("a.txt")), 0o644);

    // No settling after this run: the next sync reads the worktree whole.
    let whole = sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    assert_eq!(whole.removed, 1, "{whole:?}");
    assert_eq!(listing(&w), listing_but_git(&ws));
}

/// A settled worktree brought to another tree (one that even writes into
/// a granted cache) is read whole, and the granted caches are emptied:
/// what a gate wrote there for the first tree (a stamp that makes a build
/// tool skip its work) never reaches a run of the second.
#[test]
fn another_tree_reads_the_worktree_whole_and_empties_the_granted_caches() {
    let t = tempfile::tempdir().expect("tempdir");
    let ws = ignoring_repo(t.path());
    let trees = Worktrees::new(t.path().join("worktrees")).keeping(&["build/cache".into()]);
    let mut lease = trees.lease(&ws, Tenant::Operator).expect("lease");
    sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    let w = lease.path().to_path_buf();
    write(&w, "build/cache/object", "warm");
    settled(&mut lease, &ws);
    // The same tree again (a retry): the cache is kept.
    sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    assert!(listing(&w).contains(&"build/cache/object: warm".to_string()));
    settled(&mut lease, &ws);
    write(&ws, "build/cache/tracked", "in the tree");
    write(&ws, "build/other", "other");
    git(&ws, &["add", "-f", "-A"]);
    git(&ws, &["commit", "-qm", "two"]);
    write(&w, "stray", "seen only by a whole read");
    let stats = sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    assert_eq!(stats.written, 2, "{stats:?}");
    let l = listing(&w);
    assert!(
        !l.iter().any(|f| f.starts_with("build/cache/object")),
        "{l:?}"
    );
    assert!(
        l.contains(&"build/cache/tracked: in the tree".to_string()),
        "{l:?}"
    );
    assert!(!l.iter().any(|f| f.starts_with("stray")), "{l:?}");
    // What a run of this tree writes there is kept for its next run.
    write(&w, "build/cache/object", "warm again");
    settled(&mut lease, &ws);
    sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    assert!(listing(&w).contains(&"build/cache/object: warm again".to_string()));
}

/// Issue 52: a settled worktree brought to another tree that leaves the
/// granted caches alone has its caches emptied and follows the tree by
/// the difference: never read whole (what nothing wrote stays unread),
/// whatever the repository's size.
#[test]
fn another_tree_empties_the_caches_of_a_settled_worktree_without_reading_it() {
    let t = tempfile::tempdir().expect("tempdir");
    let ws = ignoring_repo(t.path());
    let trees = Worktrees::new(t.path().join("worktrees"))
        .keeping(&["build/cache".into(), "target".into()]);
    let mut lease = trees.lease(&ws, Tenant::Operator).expect("lease");
    sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    let w = lease.path().to_path_buf();
    write(&w, "build/cache/object", "warm");
    write(&w, "target/debug/bin", "built");
    settled(&mut lease, &ws);
    write(&ws, "new.txt", "new");
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "two"]);
    write(&w, "unread", "seen only by a whole read");
    let stats = sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    assert_eq!((stats.written, stats.removed), (1, 0), "{stats:?}");
    let l = listing(&w);
    assert!(l.contains(&"new.txt: new".to_string()), "{l:?}");
    assert!(
        !l.iter()
            .any(|f| f.starts_with("build/cache") || f.starts_with("target")),
        "the caches are emptied: {l:?}"
    );
    assert!(
        l.contains(&"unread: seen only by a whole read".to_string()),
        "{l:?}"
    );
}

/// Which worktree a lease gets, for every state of the slots before it.
#[test]
fn a_lease_takes_a_free_worktree_takes_over_a_settling_one_or_makes_one() {
    let path = |n: usize| PathBuf::from(format!("/w/{n}"));
    let slots = |states: Vec<Slot>| -> HashMap<PathBuf, Slot> {
        states
            .into_iter()
            .enumerate()
            .map(|(n, s)| (path(n), s))
            .collect()
    };
    let free = || Slot::Free(Manifest::default());
    // In a step (its manifest in hand), or paused (parked).
    let stepping = || Slot::Settling {
        parked: None,
        stop: Arc::default(),
    };
    let parked = || Slot::Settling {
        parked: Some(Manifest::default()),
        stop: Arc::default(),
    };
    for waiting in [true, false] {
        assert_eq!(choose(&slots(vec![]), path, waiting), Choice::New(path(0)));
        assert_eq!(
            choose(&slots(vec![free()]), path, waiting),
            Choice::Take(path(0))
        );
        assert_eq!(
            choose(&slots(vec![Slot::Leased, free()]), path, waiting),
            Choice::Take(path(1))
        );
        for settling in [stepping(), parked()] {
            assert_eq!(
                choose(&slots(vec![settling, free()]), path, waiting),
                Choice::Take(path(1)),
                "a free worktree is taken before a settling one"
            );
        }
        assert_eq!(
            choose(&slots(vec![Slot::Leased]), path, waiting),
            Choice::New(path(1))
        );
        assert_eq!(
            choose(&slots(vec![parked()]), path, waiting),
            Choice::TakeOver(path(0)),
            "a paused settle's worktree is taken over at once"
        );
        assert_eq!(
            choose(&slots(vec![stepping(), parked()]), path, waiting),
            Choice::TakeOver(path(1)),
            "a parked one before one in a step"
        );
    }
    assert_eq!(
        choose(&slots(vec![stepping()]), path, true),
        Choice::Wait(path(0))
    );
    assert_eq!(
        choose(&slots(vec![Slot::Leased, stepping()]), path, true),
        Choice::Wait(path(1))
    );
    assert_eq!(
        choose(&slots(vec![stepping()]), path, false),
        Choice::New(path(1)),
        "past the wait, another worktree"
    );
}

/// A worktree whose settle is in a step (its manifest in hand) is asked
/// to stop and leased again once returned, not replaced by a new checkout.
#[test]
fn a_lease_stops_the_settle_in_a_step_and_waits_for_it() {
    let t = tempfile::tempdir().expect("tempdir");
    let ws = ignoring_repo(t.path());
    let trees = Worktrees::new(t.path().join("worktrees"));
    let mut lease = trees.lease(&ws, Tenant::Operator).expect("lease");
    sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    let w = lease.path().to_path_buf();
    // Marked settling, in a step, as `settle` does, from this thread; the
    // other lease is asked for while it is.
    let stop: Arc<AtomicBool> = Arc::default();
    trees.slots.lock().insert(
        w.clone(),
        Slot::Settling {
            parked: None,
            stop: stop.clone(),
        },
    );
    let waiting = std::thread::scope(|s| {
        let other = s.spawn(|| {
            trees
                .lease(&ws, Tenant::Operator)
                .map(|l| l.path().to_path_buf())
        });
        // Until the other lease waits (or, wrongly, got another one).
        while trees.slots.waiting.load(SeqCst) == 0 && !other.is_finished() {
            std::thread::yield_now();
        }
        assert!(stop.load(SeqCst), "the settle is asked to stop");
        drop(lease);
        other.join().expect("thread")
    })
    .expect("lease");
    assert_eq!(waiting, w);
}

/// A worktree of a view holds only its paths (and the directories on the
/// way), follows the next tree by the difference within the view, is read
/// whole back to the view, and is never the whole-tree worktree.
#[test]
fn a_worktree_of_a_view_holds_only_its_paths() {
    let t = tempfile::tempdir().expect("tempdir");
    let ws = t.path().join("ws");
    std::fs::create_dir(&ws).expect("mkdir");
    git(&ws, &["init", "-q", "-b", "main"]);
    write(&ws, "src/api/a.rs", "a");
    write(&ws, "src/api/deep/d.rs", "d");
    write(&ws, "src/web/b.rs", "b");
    write(&ws, "src/top.rs", "top");
    write(&ws, "Cargo.toml", "c");
    write(&ws, "README", "r");
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "one"]);
    let trees = Worktrees::new(t.path().join("worktrees"));
    let view = View::only(["src/api", "Cargo.toml"]);
    let mut lease = trees
        .lease_view(&ws, Tenant::Operator, view.clone())
        .expect("lease");
    let first = sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    assert_eq!(first.written, 3, "{first:?}");
    let w = lease.path().to_path_buf();
    let want = |more: &[&str]| {
        let mut v: Vec<String> = ["Cargo.toml: c", "src/api/a.rs: a", "src/api/deep/d.rs: d"]
            .iter()
            .chain(more)
            .map(|s| s.to_string())
            .collect();
        v.sort();
        v
    };
    assert_eq!(listing(&w), want(&[]));
    // A gate's leftover is undone, and nothing outside the view appears.
    write(&w, "src/web/planted.rs", "p");
    settled(&mut lease, &ws);
    assert_eq!(listing(&w), want(&[]));
    drop(lease);

    write(&ws, "src/api/new.rs", "n");
    write(&ws, "src/web/c.rs", "c");
    write(&ws, "README", "r2");
    std::fs::remove_file(ws.join("src/api/deep/d.rs")).expect("rm");
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "two"]);
    let mut lease = trees
        .lease_view(&ws, Tenant::Operator, view.clone())
        .expect("lease");
    assert_eq!(lease.path(), w, "the view's worktree is leased again");
    let next = sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    assert_eq!((next.written, next.removed), (1, 1), "{next:?}");
    assert_eq!(
        listing(&w),
        ["Cargo.toml: c", "src/api/a.rs: a", "src/api/new.rs: n"]
    );
    // Read whole (not settled since): still the view.
    let whole = sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    assert_eq!((whole.written, whole.removed), (0, 0), "{whole:?}");

    // The whole tree is another worktree, and so is another view.
    let everything = trees.lease(&ws, Tenant::Operator).expect("lease");
    assert_ne!(everything.path(), w);
    let other = trees
        .lease_view(&ws, Tenant::Operator, View::only(["src/web"]))
        .expect("lease");
    assert_ne!(other.path(), w);
    assert_ne!(other.path(), everything.path());
}

/// Issue 52: a run seen through an overlay leaves the worktree as the sync
/// made it. Its layers are made empty beside the worktrees (never in one),
/// the upper one with the worktree's mode, and the granted caches made as
/// directories (a cache whose place the tree holds as a file is not);
/// after the run the worktree is settled at once, so the next sync of the
/// same tree touches nothing, and the layers go.
#[test]
fn an_overlaid_run_leaves_the_worktree_settled_and_its_layers_go() {
    let t = tempfile::tempdir().expect("tempdir");
    let ws = t.path().join("ws");
    std::fs::create_dir(&ws).expect("mkdir");
    git(&ws, &["init", "-q", "-b", "main"]);
    write(&ws, "src/lib.rs", "fn a() {}");
    write(&ws, "blocked", "a file where a cache would go");
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "one"]);
    let trees = Worktrees::new(t.path().join("worktrees")).keeping(&[
        "target".into(),
        "src/.cache".into(),
        "blocked/x".into(),
    ]);
    let mut lease = trees.lease(&ws, Tenant::Operator).expect("lease");
    sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    let w = lease.path().to_path_buf();
    // Layers another host process put aside and never removed.
    let leftover = w.parent().expect("root").join(".layers/gone-1-0/upper");
    std::fs::create_dir_all(&leftover).expect("mkdir");
    let layers = lease.layers().expect("layers");
    assert!(!layers.upper.starts_with(&w) && !layers.work.starts_with(&w));
    assert_eq!(layers.upper.parent(), layers.work.parent());
    assert_eq!(
        std::fs::read_dir(&layers.upper).expect("upper").count(),
        0,
        "empty"
    );
    let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o7777;
    assert_eq!(mode(&layers.upper), mode(&w), "the overlay's root shows it");
    assert_eq!(
        layers.caches,
        [PathBuf::from("target"), PathBuf::from("src/.cache")]
    );
    assert!(w.join("target").is_dir() && w.join("src/.cache").is_dir());
    // What the run wrote to its layer (as the overlay would).
    std::fs::write(layers.upper.join("junk"), "x").expect("write");
    let base = layers.upper.parent().expect("base").to_path_buf();
    // A file no run could have left there (the overlay takes a gate's
    // writes): a whole read would remove it, a trusted sync never looks.
    std::fs::write(w.join("unread"), "x").expect("write");
    lease.overlaid();
    let mut lease = trees.lease(&ws, Tenant::Operator).expect("lease");
    assert_eq!(lease.path(), w, "the same worktree");
    let again = sync(&mut lease, &ws, &tree_of(&ws)).expect("sync");
    assert_eq!(
        again,
        SyncStats {
            kept: 2,
            ..SyncStats::default()
        },
        "settled: nothing read"
    );
    assert!(w.join("unread").exists(), "the worktree was read whole");
    let deadline = Instant::now() + Duration::from_secs(10);
    while base.exists()
        || std::fs::read_dir(base.parent().expect("layers"))
            .expect("ls")
            .count()
            > 0
    {
        assert!(Instant::now() < deadline, "the layers were not removed");
        std::thread::sleep(Duration::from_millis(20));
    }
}
