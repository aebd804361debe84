//! The worktrees, synced for real against git repositories.

use super::*;
use crate::supervise::reaper::TrackedCommand as _;
use std::os::unix::fs::PermissionsExt as _;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> String {
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

fn write(root: &Path, rel: &str, content: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, content).expect("write");
}

/// Every file under `dir` (links as `-> target`), sorted.
fn listing(dir: &Path) -> Vec<String> {
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

fn tree_of(ws: &Path) -> String {
    git(ws, &["rev-parse", "HEAD^{tree}"]).trim().to_string()
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
    // While leased, a second run on the same workspace gets another one.
    let other = trees
        .lease(&ws, Tenant::Operator)
        .expect("a second worktree");
    assert_ne!(other.path(), lease.path());
}

/// A repository whose tree ignores `__pycache__/` and `target/`.
fn ignoring_repo(t: &Path) -> PathBuf {
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
