//! A run's overlay over its worktree, run for real: what the gate writes,
//! removes or changes lands in the run's own layer and the worktree is as
//! it was, the granted caches excepted; the host never sees the mount; a
//! place inside the overlay the child cannot enter runs the gate on the
//! worktree itself, and the overlay is told.

use super::*;
use std::os::unix::fs::PermissionsExt;

/// A worktree (`a`, `sub/c`, the cache `cache/old`) and empty layers.
struct Worktree {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    upper: std::path::PathBuf,
    work: std::path::PathBuf,
}

fn worktree() -> Worktree {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = std::fs::canonicalize(dir.path()).expect("canonical");
    let root = base.join("wt");
    std::fs::create_dir_all(root.join("sub")).expect("mkdir");
    std::fs::create_dir_all(root.join("cache")).expect("mkdir");
    std::fs::write(root.join("a"), "a\n").expect("write");
    std::fs::write(root.join("sub/c"), "c\n").expect("write");
    std::fs::write(root.join("cache/old"), "old\n").expect("write");
    let (upper, work) = (base.join("layers/upper"), base.join("layers/work"));
    std::fs::create_dir_all(&upper).expect("mkdir");
    std::fs::create_dir_all(&work).expect("mkdir");
    Worktree {
        _dir: dir,
        root,
        upper,
        work,
    }
}

/// Runs `sh -c script` in `rel` of the worktree, through `overlay`, with
/// a bounded scratch when `scratch` is given.
fn run_on(
    sup: &Supervisor,
    wt: &Worktree,
    overlay: &WorkOverlay,
    rel: &str,
    script: &str,
    scratch: Option<&Path>,
) -> ProcessRun {
    let env = env();
    let args = [OsString::from("-c"), OsString::from(script)];
    let cwd = wt.root.join(rel);
    let gate = GateLimits {
        scratch_bytes: scratch.map(|_| 1 << 20),
        ..GateLimits::NONE
    };
    runtime()
        .block_on(sup.run(ProcessSpec {
            cwd: &cwd,
            overlay: Some((overlay, Path::new(rel))),
            ..sh_spec(&args, &env, gate, scratch)
        }))
        .expect("spawned")
}

/// Issue 52: the settle after a run reads nothing when the gate's writes
/// never reached the worktree. A gate changes, removes, adds and
/// re-modes files, writes in a granted cache, and in its scratch (both
/// namespaces' mounts in one): the worktree holds exactly what it held
/// plus the cache's new file; the run's layer holds the rest; the gate
/// started in its directory inside the overlay; the host's mount table
/// never shows the overlay.
#[test]
fn a_gates_writes_land_in_its_overlay_and_the_worktree_keeps_only_the_caches() {
    let _one = HOST_CGROUP.lock().unwrap_or_else(|p| p.into_inner());
    let sup = Supervisor::new();
    assert_eq!(sup.cgroup_entry(), "clone3", "this host starts by clone3");
    let wt = worktree();
    let scratch = tempfile::tempdir().expect("tempdir");
    let overlay = WorkOverlay::new(
        &wt.root,
        &wt.upper,
        &wt.work,
        &[Path::new("cache"), Path::new("not-there")],
    )
    .expect("overlay");
    let script = "pwd; echo changed > ../a; chmod 600 ../a; rm c; mkdir ../new; \
                  echo n > ../new/f; echo built > ../cache/out; echo t > \"$TMP_AT/t\"; \
                  cat ../a; ls ..; grep -c gatehost-overlay /proc/self/mountinfo";
    let env_script = format!("TMP_AT={}; {script}", scratch.path().display());
    let run = run_on(
        &sup,
        &wt,
        &overlay,
        "sub",
        &env_script,
        Some(scratch.path()),
    );
    assert_eq!(run.termination, Termination::Exited(0), "{run:?}");
    let out = stdout(run);
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some(wt.root.join("sub").to_str().expect("utf-8")),
        "{out}"
    );
    assert_eq!(
        lines.next(),
        Some("changed"),
        "the gate saw its own write: {out}"
    );
    assert!(out.contains("new"), "{out}");
    assert_eq!(
        out.lines().last(),
        Some("1"),
        "one overlay in the child: {out}"
    );
    assert!(!overlay.bypassed(), "every process ran on the overlay");
    // The worktree: as it was, the cache's new file kept.
    assert_eq!(
        std::fs::read_to_string(wt.root.join("a")).expect("a"),
        "a\n"
    );
    let mode = std::fs::metadata(wt.root.join("a"))
        .expect("a")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644, "the mode is the worktree's");
    assert_eq!(
        std::fs::read_to_string(wt.root.join("sub/c")).expect("c"),
        "c\n"
    );
    assert!(
        !wt.root.join("new").exists(),
        "the new directory is the run's"
    );
    assert_eq!(
        std::fs::read_to_string(wt.root.join("cache/out")).expect("the cache keeps it"),
        "built\n"
    );
    assert_eq!(
        std::fs::read_to_string(wt.root.join("cache/old")).expect("old"),
        "old\n"
    );
    // The run's layer holds the rest.
    assert_eq!(
        std::fs::read_to_string(wt.upper.join("a")).expect("upper a"),
        "changed\n"
    );
    assert!(wt.upper.join("new/f").exists());
    assert!(
        !wt.upper.join("cache").join("out").exists(),
        "the cache is bound through"
    );
    // The scratch was the tmpfs's, not the disk's.
    assert!(!scratch.path().join("t").exists());
    // The host never saw the overlay.
    let host = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    assert!(!host.contains("gatehost-overlay"), "{host}");
}

/// A directory the child cannot enter inside the overlay (here a link
/// that leaves it, planted in the worktree) is never entered through the
/// link: the spawn runs on the worktree itself, as the host opened it,
/// and the overlay says it was bypassed; the next run still mounts it
/// (only a failed mount turns overlays off).
#[test]
fn a_place_the_child_cannot_enter_in_the_overlay_bypasses_it_and_says_so() {
    let _one = HOST_CGROUP.lock().unwrap_or_else(|p| p.into_inner());
    let sup = Supervisor::new();
    let wt = worktree();
    let outside = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(outside.path(), wt.root.join("away")).expect("symlink");
    let overlay = WorkOverlay::new(&wt.root, &wt.upper, &wt.work, &[]).expect("overlay");
    // The host's cwd is the worktree itself; the child's place "away" in
    // the overlay is the link.
    let env = env();
    let args = [OsString::from("-c"), OsString::from("pwd")];
    let run = runtime()
        .block_on(sup.run(ProcessSpec {
            cwd: &wt.root,
            overlay: Some((&overlay, Path::new("away"))),
            ..sh_spec(&args, &env, GateLimits::NONE, None)
        }))
        .expect("spawned");
    assert_eq!(run.termination, Termination::Exited(0));
    assert_eq!(stdout(run).trim(), wt.root.to_str().expect("utf-8"));
    assert!(overlay.bypassed(), "the run reached the worktree itself");
    let again = WorkOverlay::new(&wt.root, &wt.upper, &wt.work, &[]).expect("overlay");
    let run = run_on(&sup, &wt, &again, ".", "echo x > a; cat a", None);
    assert_eq!(stdout(run).trim(), "x");
    assert!(!again.bypassed(), "overlays are still mounted");
    assert_eq!(
        std::fs::read_to_string(wt.root.join("a")).expect("a"),
        "a\n"
    );
}
