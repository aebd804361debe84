use super::*;
use crate::change::ChangeCaps;
use crate::supervise::reaper::TrackedCommand as _;
use std::collections::BTreeSet;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::process::Command;

/// Runs the git CLI for setup and inspection, isolated from the machine's config.
pub(super) fn git_cmd(dir: &Path, extra: &[&str], args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .stdin(std::process::Stdio::null())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_OBJECT_DIRECTORY")
        .env_remove("GIT_AUTHOR_NAME")
        .env_remove("GIT_AUTHOR_EMAIL")
        .env_remove("GIT_COMMITTER_NAME")
        .env_remove("GIT_COMMITTER_EMAIL")
        .arg("--no-pager");
    for e in extra {
        cmd.arg("-c").arg(e);
    }
    cmd.args(args).tracked_output().expect("run git")
}

/// git with setup options that neutralise hooks and signing.
pub(super) fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_cmd(
        dir,
        &[
            "user.name=Setup",
            "user.email=setup@example.com",
            "core.hooksPath=/dev/null",
            "commit.gpgSign=false",
            "core.fsmonitor=false",
        ],
        args,
    );
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(super) fn write(ws: &Path, rel: &str, content: &str) {
    let p = ws.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

/// A repository on `main` with a.txt, b.txt, dir/keep.txt and dir/old.txt committed.
pub(super) fn repo() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path();
    git(ws, &["init", "-q", "-b", "main"]);
    write(ws, "a.txt", "a1\n");
    write(ws, "b.txt", "b1\n");
    write(ws, "dir/keep.txt", "keep\n");
    write(ws, "dir/old.txt", "old\n");
    git(ws, &["add", "-A"]);
    git(ws, &["commit", "-q", "-m", "initial"]);
    t
}

pub(super) fn paths(p: &[&str]) -> Vec<String> {
    p.iter().map(|s| s.to_string()).collect()
}

pub(super) fn commit(ws: &Path, p: &[&str], msg: &str) -> Prepared {
    let p = paths(p);
    let fp = fingerprint(ws, &p).unwrap();
    let prepared = prepare(ws, &p, msg, &fp).unwrap();
    publish(ws, &prepared).unwrap();
    prepared
}

pub(super) fn head(ws: &Path) -> String {
    git(ws, &["rev-parse", "HEAD"]).trim().to_owned()
}

/// `mode path` lines of `git ls-tree -r rev`.
fn ls_tree(ws: &Path, rev: &str) -> Vec<String> {
    git(ws, &["ls-tree", "-r", rev])
        .lines()
        .map(|l| {
            let (meta, path) = l.split_once('\t').unwrap();
            format!("{} {}", meta.split(' ').next().unwrap(), path)
        })
        .collect()
}

/// `mode id path` of `git ls-files -s` (stage 0 only) or of `git ls-tree -r`.
fn index_entries(ws: &Path, under: &str) -> Vec<String> {
    git(ws, &["ls-files", "-s", "--", under])
        .lines()
        .map(|l| {
            let (meta, path) = l.split_once('\t').unwrap();
            let f: Vec<&str> = meta.split(' ').collect();
            assert_eq!(f[2], "0", "{l}");
            format!("{} {} {path}", f[0], f[1])
        })
        .collect()
}

fn tree_entries(ws: &Path, under: &str) -> Vec<String> {
    git(ws, &["ls-tree", "-r", "HEAD", "--", under])
        .lines()
        .map(|l| {
            let (meta, path) = l.split_once('\t').unwrap();
            let f: Vec<&str> = meta.split(' ').collect();
            format!("{} {} {path}", f[0], f[2])
        })
        .collect()
}

#[test]
fn index_follows_the_commit_and_keeps_the_rest() {
    let t = repo();
    let ws = t.path();
    // A cache-tree that would go stale.
    git(ws, &["write-tree"]);
    write(ws, "a.txt", "a2\n");
    write(ws, "b.txt", "b2\n");
    write(ws, "untracked.txt", "u\n");
    commit(ws, &["a.txt"], "change a");
    let status = git(ws, &["status", "--porcelain"]);
    assert!(!status.contains("a.txt"), "{status}");
    assert!(status.contains(" M b.txt"), "{status}");
    assert!(status.contains("?? untracked.txt"), "{status}");
    assert_eq!(git(ws, &["diff", "--cached", "--name-only"]), "");
    assert_eq!(git(ws, &["show", ":a.txt"]), "a2\n");
    // The index writes the same tree as HEAD: no stale cache-tree.
    assert_eq!(
        git(ws, &["write-tree"]).trim(),
        git(ws, &["rev-parse", "HEAD^{tree}"]).trim()
    );
    // A plain git commit afterwards does not undo the change.
    git(ws, &["commit", "-q", "-am", "b"]);
    assert_eq!(git(ws, &["show", "HEAD:a.txt"]), "a2\n");
    assert_eq!(git(ws, &["show", "HEAD:b.txt"]), "b2\n");
}

#[test]
fn staged_changes_outside_the_commit_survive() {
    let t = repo();
    let ws = t.path();
    write(ws, "b.txt", "b staged\n");
    git(ws, &["add", "b.txt"]);
    // A staged version of a committed path is replaced by the committed one.
    write(ws, "a.txt", "a staged\n");
    git(ws, &["add", "a.txt"]);
    write(ws, "a.txt", "a2\n");
    commit(ws, &["a.txt"], "change a");
    assert_eq!(git(ws, &["diff", "--cached", "--name-only"]), "b.txt\n");
    assert_eq!(git(ws, &["show", ":b.txt"]), "b staged\n");
    assert_eq!(git(ws, &["show", ":a.txt"]), "a2\n");
    assert_eq!(git(ws, &["show", "HEAD:b.txt"]), "b1\n");
    let status = git(ws, &["status", "--porcelain"]);
    assert_eq!(status, "M  b.txt\n");
}

/// A file rewritten with the same size in the same second as the index was
/// written is "racily clean": git re-checks its content. After our index
/// rewrite (a newer index) it must still show as modified. Made exact with
/// `core.checkStat=minimal` (mtime seconds and size only) and `touch -d`.
#[test]
fn a_racily_clean_entry_stays_modified_after_the_index_is_rewritten() {
    let t = repo();
    let ws = t.path();
    git(ws, &["config", "core.checkStat", "minimal"]);
    git(ws, &["config", "core.trustctime", "false"]);
    let when = "@1700000000";
    let touch = |rel: &str| {
        let ok = Command::new("touch")
            .args(["-m", "-d", when])
            .arg(ws.join(rel))
            .tracked_status()
            .unwrap()
            .success();
        assert!(ok, "touch {rel}");
    };
    touch("b.txt");
    git(ws, &["update-index", "--refresh"]);
    write(ws, "b.txt", "b2\n");
    touch("b.txt");
    touch(".git/index");
    // Git itself sees it (the entry is racy against this index); without
    // optional locks, so that this status does not rewrite the index.
    let before = git(ws, &["--no-optional-locks", "status", "--porcelain"]);
    assert!(before.contains(" M b.txt"), "{before}");
    write(ws, "a.txt", "a2\n");
    commit(ws, &["a.txt"], "change a");
    let status = git(ws, &["status", "--porcelain"]);
    assert!(status.contains(" M b.txt"), "{status}");
    assert!(!status.contains("a.txt"), "{status}");
}

#[test]
fn directory_commit_replaces_its_index_entries() {
    let t = repo();
    let ws = t.path();
    std::fs::remove_file(ws.join("dir/old.txt")).unwrap();
    write(ws, "dir/new.txt", "new\n");
    write(ws, "dir/sub/deep.txt", "deep\n");
    write(ws, "dir/run.sh", "#!/bin/sh\n");
    std::fs::set_permissions(
        ws.join("dir/run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    symlink("keep.txt", ws.join("dir/rel")).unwrap();
    // A file staged where the commit now has a directory, and one staged inside.
    write(ws, "dir/staged.txt", "staged\n");
    git(ws, &["add", "dir/staged.txt"]);
    std::fs::remove_file(ws.join("dir/staged.txt")).unwrap();
    commit(ws, &["dir"], "dir");
    assert_eq!(git(ws, &["status", "--porcelain", "--", "dir"]), "");
    let index = index_entries(ws, "dir");
    assert_eq!(index, tree_entries(ws, "dir"));
    let modes: Vec<String> = index
        .iter()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            format!("{} {}", f[0], f[2])
        })
        .collect();
    assert_eq!(
        modes,
        vec![
            "100644 dir/keep.txt",
            "100644 dir/new.txt",
            "120000 dir/rel",
            "100755 dir/run.sh",
            "100644 dir/sub/deep.txt",
        ]
    );
    assert_eq!(git(ws, &["status", "--porcelain"]), "");
}

#[test]
fn deleted_file_leaves_the_index() {
    let t = repo();
    let ws = t.path();
    std::fs::remove_file(ws.join("b.txt")).unwrap();
    commit(ws, &["b.txt"], "remove b");
    assert_eq!(git(ws, &["ls-files"]), "a.txt\ndir/keep.txt\ndir/old.txt\n");
    assert_eq!(git(ws, &["status", "--porcelain"]), "");
    std::fs::remove_dir_all(ws.join("dir")).unwrap();
    commit(ws, &["dir"], "remove dir");
    assert_eq!(git(ws, &["ls-files"]), "a.txt\n");
    assert_eq!(git(ws, &["status", "--porcelain"]), "");
}

#[test]
fn root_commit_creates_the_index() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path();
    git(ws, &["init", "-q", "-b", "main"]);
    assert!(!ws.join(".git/index").exists());
    write(ws, "f.txt", "first\n");
    write(ws, "d/g.txt", "g\n");
    write(ws, "other.txt", "not committed\n");
    commit(ws, &["f.txt", "d"], "root");
    assert_eq!(git(ws, &["ls-files"]), "d/g.txt\nf.txt\n");
    assert_eq!(git(ws, &["status", "--porcelain"]), "?? other.txt\n");
}

#[test]
fn publishing_twice_keeps_the_index_right() {
    let t = repo();
    let ws = t.path();
    write(ws, "a.txt", "a2\n");
    let prepared = commit(ws, &["a.txt"], "change a");
    publish(ws, &prepared).unwrap();
    assert_eq!(git(ws, &["status", "--porcelain"]), "");
    // A record without paths (stored by an older version) still works.
    let legacy = Prepared {
        paths: Vec::new(),
        ..prepared.clone()
    };
    write(ws, "b.txt", "b staged\n");
    git(ws, &["add", "b.txt"]);
    std::fs::remove_file(ws.join(".git/index")).unwrap();
    publish(ws, &legacy).unwrap();
    // No index: recreated from the whole tree.
    assert_eq!(index_entries(ws, "."), tree_entries(ws, "."));
    git(ws, &["read-tree", "HEAD^"]);
    publish(ws, &legacy).unwrap();
    assert_eq!(git(ws, &["diff", "--cached", "--name-only"]), "");
    assert_eq!(git(ws, &["status", "--porcelain"]), " M b.txt\n");
}

#[test]
fn symlinked_index_is_never_followed() {
    let t = repo();
    let ws = t.path();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("index");
    std::fs::rename(ws.join(".git/index"), &target).unwrap();
    symlink(&target, ws.join(".git/index")).unwrap();
    let before = std::fs::read(&target).unwrap();
    write(ws, "a.txt", "a2\n");
    let prepared = commit(ws, &["a.txt"], "change a");
    assert_eq!(head(ws), prepared.commit.unwrap());
    assert_eq!(std::fs::read(&target).unwrap(), before);
    let meta = std::fs::symlink_metadata(ws.join(".git/index")).unwrap();
    assert!(meta.file_type().is_symlink());
}

#[test]
fn held_index_lock_is_respected() {
    let t = repo();
    let ws = t.path();
    std::fs::write(ws.join(".git/index.lock"), "someone else's").unwrap();
    let before = std::fs::read(ws.join(".git/index")).unwrap();
    write(ws, "a.txt", "a2\n");
    let prepared = commit(ws, &["a.txt"], "change a");
    assert_eq!(head(ws), prepared.commit.unwrap());
    assert_eq!(std::fs::read(ws.join(".git/index")).unwrap(), before);
    assert_eq!(
        std::fs::read_to_string(ws.join(".git/index.lock")).unwrap(),
        "someone else's"
    );
}

#[test]
fn split_index_and_conflicts_are_left_alone() {
    let t = repo();
    let ws = t.path();
    git(ws, &["update-index", "--split-index"]);
    let before = std::fs::read(ws.join(".git/index")).unwrap();
    write(ws, "a.txt", "a2\n");
    commit(ws, &["a.txt"], "change a");
    assert_eq!(std::fs::read(ws.join(".git/index")).unwrap(), before);
    git(ws, &["update-index", "--no-split-index"]);
    git(ws, &["reset", "-q"]);

    // An unmerged committed path.
    git(ws, &["checkout", "-q", "-b", "side"]);
    write(ws, "b.txt", "side\n");
    git(ws, &["commit", "-q", "-am", "side"]);
    git(ws, &["checkout", "-q", "main"]);
    write(ws, "b.txt", "main\n");
    git(ws, &["commit", "-q", "-am", "main"]);
    let merge = git_cmd(
        ws,
        &["user.name=x", "user.email=x@x", "core.hooksPath=/dev/null"],
        &["merge", "-q", "side"],
    );
    assert!(!merge.status.success());
    let before = std::fs::read(ws.join(".git/index")).unwrap();
    write(ws, "b.txt", "resolved\n");
    let prepared = commit(ws, &["b.txt"], "resolve");
    assert_eq!(head(ws), prepared.commit.unwrap());
    assert_eq!(std::fs::read(ws.join(".git/index")).unwrap(), before);
}

#[test]
fn commits_exactly_the_given_file() {
    let t = repo();
    let ws = t.path();
    let before = head(ws);
    write(ws, "a.txt", "a2\n");
    write(ws, "b.txt", "b2\n");
    write(ws, "untracked.txt", "u\n");
    let prepared = commit(ws, &["a.txt"], "change a");
    let after = head(ws);
    assert_eq!(prepared.commit.as_deref(), Some(after.as_str()));
    assert_eq!(prepared.parent.as_deref(), Some(before.as_str()));
    assert_eq!(prepared.reference, "refs/heads/main");
    assert_eq!(
        git(ws, &["show", "--name-only", "--format=", "HEAD"]),
        "a.txt\n"
    );
    assert_eq!(git(ws, &["show", "HEAD:a.txt"]), "a2\n");
    assert_eq!(git(ws, &["show", "HEAD:b.txt"]), "b1\n");
    assert_eq!(git(ws, &["rev-parse", "HEAD^"]).trim(), before);
    assert!(!git(ws, &["ls-tree", "-r", "--name-only", "HEAD"]).contains("untracked"));
    assert_eq!(
        git(ws, &["log", "-1", "--format=%B", "HEAD"]).trim(),
        "change a"
    );
    // Default identity: the repository config sets none.
    assert_eq!(
        git(ws, &["log", "-1", "--format=%an <%ae>|%cn <%ce>"]).trim(),
        "gatehost <gatehost@localhost>|gatehost <gatehost@localhost>"
    );
    let status = git(ws, &["status", "--porcelain"]);
    assert!(status.contains(" M b.txt"), "{status}");
    assert!(status.contains("?? untracked.txt"), "{status}");
    assert_eq!(std::fs::read_to_string(ws.join("b.txt")).unwrap(), "b2\n");
}

#[test]
fn never_uses_the_repository_identity() {
    // The agent writes .git/config: a user.name holding shell code must
    // never reach a commit or a reflog (issue 11).
    let t = repo();
    let ws = t.path();
    git(ws, &["config", "user.name", "$(touch /tmp/pwned)"]);
    git(ws, &["config", "user.email", "repo@example.com"]);
    write(ws, "a.txt", "a2\n");
    commit(ws, &["a.txt"], "change a");
    assert_eq!(
        git(ws, &["log", "-1", "--format=%an <%ae>|%cn <%ce>"]).trim(),
        "gatehost <gatehost@localhost>|gatehost <gatehost@localhost>"
    );
    // The host's configured identity is used.
    write(ws, "a.txt", "a3\n");
    let p = vec!["a.txt".to_string()];
    let fp = fingerprint(ws, &p).unwrap();
    let who = Committer {
        name: "Ops Bot".into(),
        email: "ops@example.com".into(),
    };
    let prepared = prepare_by(ws, &p, "as ops", &fp, &who).unwrap();
    publish_by(ws, &prepared, &who).unwrap();
    assert_eq!(
        git(ws, &["log", "-1", "--format=%an <%ae>"]).trim(),
        "Ops Bot <ops@example.com>"
    );
    assert!(Committer::check("a<b", "x@y").is_err());
    assert!(Committer::check("ok", "x\n@y").is_err());
    assert!(Committer::check("Ops Bot", "ops@example.com").is_ok());
}

#[test]
fn directory_path_adds_modifies_removes_and_keeps_modes() {
    let t = repo();
    let ws = t.path();
    let outside = tempfile::tempdir().unwrap();
    write(ws, ".gitignore", "*.log\n");
    git(ws, &["add", ".gitignore"]);
    git(ws, &["commit", "-q", "-m", "ignore logs"]);
    write(ws, "dir/keep.txt", "keep2\n");
    std::fs::remove_file(ws.join("dir/old.txt")).unwrap();
    write(ws, "dir/new.txt", "new\n");
    write(ws, "dir/sub/deep.txt", "deep\n");
    write(ws, "dir/debug.log", "noise\n");
    write(ws, "dir/sub/.gitignore", "secret\n");
    write(ws, "dir/sub/secret", "s\n");
    write(ws, "dir/run.sh", "#!/bin/sh\n");
    std::fs::set_permissions(
        ws.join("dir/run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    symlink(outside.path(), ws.join("dir/out")).unwrap();
    symlink("keep.txt", ws.join("dir/rel")).unwrap();
    write(ws, "a.txt", "not committed\n");
    commit(ws, &["dir"], "dir");
    let tree = ls_tree(ws, "HEAD");
    let under_dir: Vec<&String> = tree.iter().filter(|l| l.contains(" dir/")).collect();
    let mut names: Vec<String> = under_dir.iter().map(|s| (*s).clone()).collect();
    names.sort();
    assert_eq!(
        names,
        vec![
            "100644 dir/keep.txt",
            "100644 dir/new.txt",
            "100644 dir/sub/.gitignore",
            "100644 dir/sub/deep.txt",
            "100755 dir/run.sh",
            "120000 dir/out",
            "120000 dir/rel",
        ]
    );
    assert_eq!(
        git(ws, &["cat-file", "-p", "HEAD:dir/out"]),
        outside.path().to_str().unwrap()
    );
    assert_eq!(git(ws, &["cat-file", "-p", "HEAD:dir/rel"]), "keep.txt");
    assert_eq!(git(ws, &["show", "HEAD:dir/keep.txt"]), "keep2\n");
    assert_eq!(git(ws, &["show", "HEAD:a.txt"]), "a1\n");
}

#[test]
fn tracked_file_is_updated_even_when_ignored() {
    let t = repo();
    let ws = t.path();
    write(ws, "dir/tracked.log", "v1\n");
    git(ws, &["add", "dir/tracked.log"]);
    git(ws, &["commit", "-q", "-m", "log"]);
    write(ws, ".gitignore", "*.log\n");
    write(ws, "dir/tracked.log", "v2\n");
    write(ws, "dir/fresh.log", "x\n");
    commit(ws, &["dir"], "dir");
    assert_eq!(git(ws, &["show", "HEAD:dir/tracked.log"]), "v2\n");
    let names = git(ws, &["ls-tree", "-r", "--name-only", "HEAD"]);
    assert!(!names.contains("fresh.log"), "{names}");
    assert!(!names.contains(".gitignore"), "{names}");
}

#[test]
fn deleted_file_is_removed_and_nothing_to_commit() {
    let t = repo();
    let ws = t.path();
    std::fs::remove_file(ws.join("b.txt")).unwrap();
    commit(ws, &["b.txt"], "remove b");
    let names = git(ws, &["ls-tree", "-r", "--name-only", "HEAD"]);
    assert_eq!(names, "a.txt\ndir/keep.txt\ndir/old.txt\n");

    let before = head(ws);
    let p = paths(&["a.txt", "b.txt"]);
    let fp = fingerprint(ws, &p).unwrap();
    let prepared = prepare(ws, &p, "noop", &fp).unwrap();
    assert!(prepared.nothing_to_commit);
    assert_eq!(prepared.commit, None);
    assert_eq!(prepared.parent.as_deref(), Some(before.as_str()));
    publish(ws, &prepared).unwrap();
    assert_eq!(head(ws), before);
    assert_eq!(ref_state(ws, &prepared).unwrap(), RefState::AtParent);
}

#[test]
fn deleting_a_whole_directory() {
    let t = repo();
    let ws = t.path();
    std::fs::remove_dir_all(ws.join("dir")).unwrap();
    commit(ws, &["dir"], "drop dir");
    assert_eq!(
        git(ws, &["ls-tree", "-r", "--name-only", "HEAD"]),
        "a.txt\nb.txt\n"
    );
}

#[test]
fn unborn_head_gives_a_root_commit() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path();
    git(ws, &["init", "-q", "-b", "trunk"]);
    write(ws, "f.txt", "first\n");
    write(ws, "other.txt", "not committed\n");
    let prepared = commit(ws, &["f.txt"], "root");
    assert_eq!(prepared.parent, None);
    assert_eq!(prepared.reference, "refs/heads/trunk");
    assert_eq!(
        git(ws, &["rev-parse", "refs/heads/trunk"]).trim(),
        prepared.commit.clone().unwrap()
    );
    assert_eq!(git(ws, &["rev-list", "--count", "HEAD"]).trim(), "1");
    assert_eq!(
        git(ws, &["ls-tree", "-r", "--name-only", "HEAD"]),
        "f.txt\n"
    );
    assert_eq!(ref_state(ws, &prepared).unwrap(), RefState::AtCommit);
    // Publishing again is a no-op.
    publish(ws, &prepared).unwrap();
}

#[test]
fn unborn_head_with_nothing_to_commit() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path();
    git(ws, &["init", "-q", "-b", "main"]);
    let p = paths(&["missing.txt"]);
    let fp = fingerprint(ws, &p).unwrap();
    let prepared = prepare(ws, &p, "nothing", &fp).unwrap();
    assert!(prepared.nothing_to_commit);
    assert_eq!(ref_state(ws, &prepared).unwrap(), RefState::AtParent);
}

#[test]
fn fingerprint_tracks_content_mode_and_presence_only() {
    let t = repo();
    let ws = t.path();
    let p = paths(&["a.txt", "dir"]);
    let base = fingerprint(ws, &p).unwrap();
    assert_eq!(base.len(), 64);
    // Unrelated changes, ignored files, timestamps, path spelling: no change.
    write(ws, "b.txt", "other\n");
    write(ws, "c.txt", "untracked\n");
    write(ws, ".gitignore", "*.tmp\n");
    write(ws, "dir/x.tmp", "ignored\n");
    write(ws, "a.txt", "a1\n");
    assert_eq!(fingerprint(ws, &p).unwrap(), base);
    assert_eq!(
        fingerprint(ws, &paths(&["./dir/", "a.txt", "a.txt"])).unwrap(),
        base
    );
    // Content.
    write(ws, "a.txt", "a2\n");
    let content = fingerprint(ws, &p).unwrap();
    assert_ne!(content, base);
    write(ws, "a.txt", "a1\n");
    assert_eq!(fingerprint(ws, &p).unwrap(), base);
    // Mode.
    std::fs::set_permissions(
        ws.join("dir/keep.txt"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let mode = fingerprint(ws, &p).unwrap();
    assert_ne!(mode, base);
    std::fs::set_permissions(
        ws.join("dir/keep.txt"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    assert_eq!(fingerprint(ws, &p).unwrap(), base);
    // Presence: a new file, a deleted file.
    write(ws, "dir/new.txt", "");
    let added = fingerprint(ws, &p).unwrap();
    assert_ne!(added, base);
    std::fs::remove_file(ws.join("dir/new.txt")).unwrap();
    assert_eq!(fingerprint(ws, &p).unwrap(), base);
    std::fs::remove_file(ws.join("a.txt")).unwrap();
    let deleted = fingerprint(ws, &p).unwrap();
    assert_ne!(deleted, base);
    // Empty file vs absent file differ.
    write(ws, "a.txt", "");
    assert_ne!(fingerprint(ws, &p).unwrap(), deleted);
    // File vs symlink with the same bytes differ.
    std::fs::remove_file(ws.join("a.txt")).unwrap();
    write(ws, "a.txt", "target");
    let as_file = fingerprint(ws, &p).unwrap();
    std::fs::remove_file(ws.join("a.txt")).unwrap();
    symlink("target", ws.join("a.txt")).unwrap();
    assert_ne!(fingerprint(ws, &p).unwrap(), as_file);
    let all = [base, content, mode, added, deleted, as_file];
    let unique: BTreeSet<&String> = all.iter().collect();
    assert_eq!(unique.len(), all.len());
}

#[test]
fn prepare_refuses_stale_content() {
    let t = repo();
    let ws = t.path();
    let before = head(ws);
    write(ws, "a.txt", "approved\n");
    let p = paths(&["a.txt"]);
    let fp = fingerprint(ws, &p).unwrap();
    write(ws, "a.txt", "sneaky\n");
    match prepare(ws, &p, "msg", &fp) {
        Err(CommitError::Stale { expected, actual }) => {
            assert_eq!(expected, fp);
            assert_ne!(actual, fp);
        }
        other => panic!("expected Stale, got {other:?}"),
    }
    assert_eq!(head(ws), before);
    // Nothing unapproved was written to the object database.
    let sneaky = git(ws, &["hash-object", "a.txt"]);
    let out = git_cmd(ws, &[], &["cat-file", "-e", sneaky.trim()]);
    assert!(!out.status.success());
}

#[test]
fn hostile_repository_runs_nothing() {
    let t = repo();
    let ws = t.path();
    let evil = tempfile::tempdir().unwrap();
    let markers = evil.path().join("markers");
    std::fs::create_dir(&markers).unwrap();
    let script = |name: &str| -> String {
        let path = evil.path().join(name);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\ntouch '{}/{name}'\necho FILTERED\nexit 0\n",
                markers.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let hooks = [
        "pre-commit",
        "prepare-commit-msg",
        "commit-msg",
        "post-commit",
        "reference-transaction",
        "post-index-change",
    ];
    let hooks_dir = evil.path().join("hooks");
    std::fs::create_dir(&hooks_dir).unwrap();
    for hook in hooks {
        let s = script(&format!("repo-hook-{hook}"));
        std::fs::copy(&s, ws.join(".git/hooks").join(hook)).unwrap();
        std::fs::set_permissions(
            ws.join(".git/hooks").join(hook),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let s = script(&format!("hookspath-{hook}"));
        std::fs::copy(&s, hooks_dir.join(hook)).unwrap();
        std::fs::set_permissions(hooks_dir.join(hook), std::fs::Permissions::from_mode(0o755))
            .unwrap();
    }
    let included = evil.path().join("included.gitconfig");
    std::fs::write(
        &included,
        format!(
            "[core]\n\tfsmonitor = {}\n\tpager = {}\n[gpg]\n\tprogram = {}\n[commit]\n\tgpgSign = true\n",
            script("include-fsmonitor"),
            script("include-pager"),
            script("include-gpg"),
        ),
    )
    .unwrap();
    let config = format!(
        "[core]\n\tfsmonitor = {fsm}\n\tpager = {pager}\n\thooksPath = {hooks}\n\teditor = {editor}\n\tsshCommand = {ssh}\n\
         [filter \"evil\"]\n\tclean = {clean}\n\tsmudge = {smudge}\n\tprocess = {process}\n\trequired = true\n\
         [commit]\n\tgpgSign = true\n[gpg]\n\tprogram = {gpg}\n[tag]\n\tgpgSign = true\n\
         [include]\n\tpath = {inc}\n[user]\n\tname = Hostile Repo\n\temail = hostile@example.com\n",
        fsm = script("fsmonitor"),
        pager = script("pager"),
        hooks = hooks_dir.display(),
        editor = script("editor"),
        ssh = script("ssh"),
        clean = script("clean"),
        smudge = script("smudge"),
        process = script("process"),
        gpg = script("gpg"),
        inc = included.display(),
    );
    let mut existing = std::fs::read_to_string(ws.join(".git/config")).unwrap();
    existing.push_str(&config);
    std::fs::write(ws.join(".git/config"), existing).unwrap();
    write(ws, ".gitattributes", "* filter=evil\n");
    write(ws, "a.txt", "raw bytes\n");

    let prepared = commit(ws, &["a.txt", ".gitattributes"], "hostile");
    publish(ws, &prepared).unwrap();
    assert_eq!(ref_state(ws, &prepared).unwrap(), RefState::AtCommit);

    // Checked before any git command runs in the hostile repository.
    let ran: Vec<_> = std::fs::read_dir(&markers).unwrap().collect();
    assert!(ran.is_empty(), "programs ran: {ran:?}");

    let id = prepared.commit.clone().unwrap();
    // Inspect with the hostile features neutralised.
    let safe = [
        "core.hooksPath=/dev/null",
        "core.fsmonitor=false",
        "core.pager=cat",
        "include.path=/dev/null",
    ];
    let raw = git_cmd(ws, &safe, &["cat-file", "commit", &id]);
    let raw = String::from_utf8_lossy(&raw.stdout).into_owned();
    assert!(raw.starts_with("tree "), "{raw}");
    assert!(!raw.contains("gpgsig"), "{raw}");
    assert!(
        raw.contains("author gatehost <gatehost@localhost>"),
        "{raw}"
    );
    let blob = git_cmd(ws, &safe, &["cat-file", "blob", &format!("{id}:a.txt")]);
    assert_eq!(String::from_utf8_lossy(&blob.stdout), "raw bytes\n");
    let rev = git_cmd(ws, &safe, &["rev-parse", "refs/heads/main"]);
    assert_eq!(String::from_utf8_lossy(&rev.stdout).trim(), id);
    // The index was updated too (object-level comparison: no filter runs).
    let staged = git_cmd(ws, &safe, &["diff", "--cached", "--name-only"]);
    assert!(staged.status.success());
    assert_eq!(String::from_utf8_lossy(&staged.stdout), "");

    // Control: the planted programs are live, a plain git commit runs them.
    let _ = git_cmd(
        ws,
        &["user.name=x", "user.email=x@x"],
        &["commit", "-q", "--allow-empty", "-m", "x"],
    );
    let ran = std::fs::read_dir(&markers).unwrap().count();
    assert!(ran > 0, "the hostile setup should trigger plain git");
}

#[test]
fn only_locks_made_while_our_previous_life_published_are_cleared() {
    use std::time::{Duration, SystemTime};
    let t = repo();
    let ws = t.path();
    write(ws, "a.txt", "a2\n");
    let p = paths(&["a.txt"]);
    let fp = fingerprint(ws, &p).unwrap();
    let prepared = prepare(ws, &p, "a2", &fp).unwrap();
    let ours = prepared.commit.clone().unwrap();
    let lock = ws.join(".git/refs/heads/main.lock");
    let index_lock = ws.join(".git/index.lock");
    let age = |path: &Path, ago: u64| {
        let f = std::fs::File::options().write(true).open(path).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(ago))
            .unwrap();
    };
    // The previous life published from 1 h ago for a minute.
    let start = SystemTime::now() - Duration::from_secs(3600);
    let span = start..=start + Duration::from_secs(60);
    // Older than this daemon but made before that span (a person's git,
    // still alive): kept, and publishing fails.
    std::fs::write(&lock, "").unwrap();
    std::fs::write(&index_lock, "DIRC").unwrap();
    age(&lock, 7200);
    age(&index_lock, 7200);
    assert!(
        clear_stale_locks(ws, &prepared, std::slice::from_ref(&span))
            .unwrap()
            .is_empty()
    );
    assert!(lock.exists() && index_lock.exists());
    publish(ws, &prepared).expect_err("the branch is locked");
    // In the span but naming another value: someone else's, kept.
    std::fs::write(&lock, "0123456789012345678901234567890123456789\n").unwrap();
    age(&lock, 3590);
    assert!(
        clear_stale_locks(ws, &prepared, std::slice::from_ref(&span))
            .unwrap()
            .is_empty()
    );
    // In the span, empty or naming our commit: ours, removed (the index
    // lock too); the publish goes through.
    std::fs::write(&lock, format!("{ours}\n")).unwrap();
    age(&lock, 3590);
    age(&index_lock, 3590);
    // Two lives died publishing: a lock made in either span is theirs.
    let later = start + Duration::from_secs(600);
    let removed = clear_stale_locks(ws, &prepared, &[later..=later, span]).unwrap();
    assert_eq!(
        removed,
        vec![
            ".git/refs/heads/main.lock".to_string(),
            ".git/index.lock".to_string()
        ]
    );
    publish(ws, &prepared).unwrap();
    assert_eq!(Some(head(ws)), prepared.commit);
}

#[test]
fn publish_is_idempotent_and_detects_moved_ref() {
    let t = repo();
    let ws = t.path();
    write(ws, "a.txt", "a2\n");
    let p = paths(&["a.txt"]);
    let fp = fingerprint(ws, &p).unwrap();
    let prepared = prepare(ws, &p, "a2", &fp).unwrap();
    // Prepare moved nothing.
    assert_eq!(Some(head(ws)), prepared.parent);
    assert_eq!(ref_state(ws, &prepared).unwrap(), RefState::AtParent);
    // Survives a round trip through storage.
    let stored = serde_json::to_string(&prepared).unwrap();
    let restored: Prepared = serde_json::from_str(&stored).unwrap();
    assert_eq!(restored, prepared);
    publish(ws, &restored).unwrap();
    let id = prepared.commit.clone().unwrap();
    assert_eq!(head(ws), id);
    assert_eq!(ref_state(ws, &prepared).unwrap(), RefState::AtCommit);
    publish(ws, &prepared).unwrap();
    assert_eq!(head(ws), id);
    // Another commit on top.
    write(ws, "b.txt", "b2\n");
    git(ws, &["commit", "-q", "-am", "on top"]);
    assert_eq!(ref_state(ws, &prepared).unwrap(), RefState::Descends);
    publish(ws, &prepared).expect_err("branch moved on");
    // Reset elsewhere: to a commit that does not contain ours.
    git(
        ws,
        &[
            "checkout",
            "-q",
            "-b",
            "side",
            prepared.parent.as_deref().unwrap(),
        ],
    );
    git(ws, &["commit", "-q", "--allow-empty", "-m", "side"]);
    let side = head(ws);
    git(ws, &["update-ref", "refs/heads/main", &side]);
    assert_eq!(ref_state(ws, &prepared).unwrap(), RefState::Moved);
}

#[test]
fn publish_after_someone_else_moved_the_ref() {
    let t = repo();
    let ws = t.path();
    write(ws, "a.txt", "a2\n");
    let p = paths(&["a.txt"]);
    let fp = fingerprint(ws, &p).unwrap();
    let prepared = prepare(ws, &p, "a2", &fp).unwrap();
    write(ws, "b.txt", "b2\n");
    git(ws, &["commit", "-q", "-m", "concurrent", "b.txt"]);
    let theirs = head(ws);
    match publish(ws, &prepared) {
        Err(CommitError::RefMoved {
            reference,
            expected,
            actual,
        }) => {
            assert_eq!(reference, "refs/heads/main");
            assert_eq!(expected, prepared.parent);
            assert_eq!(actual.as_deref(), Some(theirs.as_str()));
        }
        other => panic!("expected RefMoved, got {other:?}"),
    }
    assert_eq!(head(ws), theirs);
    assert_eq!(ref_state(ws, &prepared).unwrap(), RefState::Moved);
}

#[test]
fn detached_head_and_non_repositories_are_refused() {
    let t = repo();
    let ws = t.path();
    let id = head(ws);
    git(ws, &["checkout", "-q", "--detach", &id]);
    let p = paths(&["a.txt"]);
    assert!(matches!(
        fingerprint(ws, &p),
        Err(CommitError::DetachedHead)
    ));
    assert!(matches!(
        prepare(ws, &p, "m", "00"),
        Err(CommitError::DetachedHead)
    ));

    // A subdirectory of a repository is not a repository root (no discovery upwards).
    let sub = ws.join("dir");
    assert!(matches!(
        fingerprint(&sub, &p),
        Err(CommitError::NotARepository { .. })
    ));
    // A gitfile that is not a linked worktree's is refused.
    let other = tempfile::tempdir().unwrap();
    std::fs::write(
        other.path().join(".git"),
        format!("gitdir: {}/.git\n", ws.display()),
    )
    .unwrap();
    assert!(matches!(
        fingerprint(other.path(), &p),
        Err(CommitError::ForeignGitDir { .. })
    ));
}

#[test]
fn symlinked_parent_directory_is_never_followed() {
    let t = repo();
    let ws = t.path();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("file"), "outside secret\n").unwrap();
    symlink(outside.path(), ws.join("link")).unwrap();
    let p = paths(&["link/file"]);
    assert!(matches!(
        fingerprint(ws, &p),
        Err(CommitError::PathBeyondSymlink { .. })
    ));
    assert!(matches!(
        prepare(ws, &p, "m", "00"),
        Err(CommitError::PathBeyondSymlink { .. })
    ));
    // Also a symlink to a directory inside the workspace, as git refuses it.
    symlink("dir", ws.join("inner")).unwrap();
    assert!(matches!(
        fingerprint(ws, &paths(&["inner/keep.txt"])),
        Err(CommitError::PathBeyondSymlink { .. })
    ));
    // The link itself is committed as a link, its target never read.
    let prepared = commit(ws, &["link"], "link");
    assert_eq!(
        ls_tree(ws, "HEAD")
            .iter()
            .filter(|l| l.ends_with(" link"))
            .count(),
        1
    );
    assert!(ls_tree(ws, "HEAD").contains(&"120000 link".to_owned()));
    assert!(prepared.commit.is_some());
}

#[test]
fn path_validation() {
    type Check = fn(&CommitPathError) -> bool;
    let refused: &[(&str, Check)] = &[
        ("", |e| matches!(e, CommitPathError::Empty)),
        ("./", |e| matches!(e, CommitPathError::Empty)),
        (".", |e| matches!(e, CommitPathError::Empty)),
        ("-rf", |e| matches!(e, CommitPathError::LeadingDash(_))),
        ("./-rf", |e| matches!(e, CommitPathError::LeadingDash(_))),
        (":(glob)*", |e| {
            matches!(
                e,
                CommitPathError::Glob(_) | CommitPathError::PathspecMagic(_)
            )
        }),
        (":!a", |e| matches!(e, CommitPathError::PathspecMagic(_))),
        ("../x", |e| matches!(e, CommitPathError::ParentComponent(_))),
        ("a/../../b", |e| {
            matches!(e, CommitPathError::ParentComponent(_))
        }),
        ("a/..", |e| matches!(e, CommitPathError::ParentComponent(_))),
        ("/etc/passwd", |e| matches!(e, CommitPathError::Absolute(_))),
        (".git/config", |e| {
            matches!(e, CommitPathError::GitComponent(_))
        }),
        ("a/.git", |e| matches!(e, CommitPathError::GitComponent(_))),
        (".GIT/hooks", |e| {
            matches!(e, CommitPathError::GitComponent(_))
        }),
        ("a\0b", |e| matches!(e, CommitPathError::Nul(_))),
        ("*.rs", |e| matches!(e, CommitPathError::Glob(_))),
        ("a?", |e| matches!(e, CommitPathError::Glob(_))),
        ("[ab]", |e| matches!(e, CommitPathError::Glob(_))),
        ("a\\b", |e| matches!(e, CommitPathError::Backslash(_))),
    ];
    for (input, check) in refused {
        match validate_commit_path(input) {
            Err(e) => assert!(check(&e), "{input:?} refused with the wrong error {e:?}"),
            Ok(v) => panic!("{input:?} accepted as {v:?}"),
        }
    }
    let accepted = [
        ("a", "a"),
        ("..x", "..x"),
        ("x..", "x.."),
        (".gitignore", ".gitignore"),
        (".github/workflows", ".github/workflows"),
        ("a/./b", "a/b"),
        ("./a//b/", "a/b"),
        ("src/main.rs", "src/main.rs"),
        ("a-b/-c", "a-b/-c"),
        ("dir with space/f", "dir with space/f"),
    ];
    for (input, want) in accepted {
        assert_eq!(
            validate_commit_path(input).as_deref(),
            Ok(want),
            "{input:?}"
        );
    }
    // prepare and fingerprint validate too.
    let t = repo();
    assert!(matches!(
        fingerprint(t.path(), &paths(&["../x"])),
        Err(CommitError::InvalidPath(CommitPathError::ParentComponent(
            _
        )))
    ));
    assert!(matches!(
        prepare(t.path(), &paths(&[".git/config"]), "m", "00"),
        Err(CommitError::InvalidPath(CommitPathError::GitComponent(_)))
    ));
}

#[test]
fn invalid_prepared_records_are_refused() {
    let t = repo();
    let ws = t.path();
    let parent = head(ws);
    let bogus = Prepared {
        commit: Some("0".repeat(40)),
        parent: Some(parent.clone()),
        reference: "refs/heads/main".into(),
        nothing_to_commit: false,
        paths: Vec::new(),
    };
    assert!(matches!(
        publish(ws, &bogus),
        Err(CommitError::InvalidPrepared(_))
    ));
    let not_branch = Prepared {
        commit: None,
        parent: Some(parent),
        reference: "HEAD".into(),
        nothing_to_commit: true,
        paths: Vec::new(),
    };
    assert!(matches!(
        ref_state(ws, &not_branch),
        Err(CommitError::InvalidPrepared(_))
    ));
}

// ---------------------------------------------------------------------------
// Snapshots: what the gate judged is what is committed

#[test]
fn the_commit_of_a_snapshot_is_its_tree_whatever_the_workspace_holds_after() {
    let t = repo();
    let ws = t.path();
    write(ws, "a.txt", "judged\n");
    write(ws, "dir/new.txt", "new\n");
    let (snap, changes) = snapshot(ws, &paths(&["a.txt", "dir"])).unwrap();
    let changes = changes.unwrap();
    let changed: Vec<&str> = changes.iter().filter_map(|c| c.path_str()).collect();
    assert_eq!(changed, ["a.txt", "dir/new.txt"]);
    assert_eq!(snap.parent.as_deref(), Some(head(ws).as_str()));
    assert_eq!(snap.reference, "refs/heads/main");
    // The tree is in the repository already, with the judged content.
    assert_eq!(
        git(ws, &["cat-file", "-p", &format!("{}:a.txt", snap.tree)]),
        "judged\n"
    );
    // The agent swaps content in after the gate read it.
    write(ws, "a.txt", "dbg!(swapped)\n");
    std::fs::remove_file(ws.join("dir/new.txt")).unwrap();
    write(ws, "dir/extra.txt", "extra\n");
    write(ws, "b.txt", "outside the commit paths\n");
    assert_eq!(
        changed_since(ws, &snap, None).unwrap(),
        ["a.txt", "dir/extra.txt", "dir/new.txt"]
    );
    let prepared = prepare_snapshot(ws, &snap, "gated", &Committer::default()).unwrap();
    publish(ws, &prepared).unwrap();
    assert_eq!(git(ws, &["rev-parse", "HEAD^{tree}"]).trim(), snap.tree);
    assert_eq!(git(ws, &["show", "HEAD:a.txt"]), "judged\n");
    assert_eq!(git(ws, &["show", "HEAD:dir/new.txt"]), "new\n");
    assert_eq!(git(ws, &["show", "HEAD:b.txt"]), "b1\n");
    // Nothing changed since: an empty list; unchanged content: nothing to commit.
    let (again, none) = snapshot(ws, &paths(&["dir/keep.txt"])).unwrap();
    assert!(none.unwrap().is_empty());
    assert!(changed_since(ws, &again, None).unwrap().is_empty());
    let p = prepare_snapshot(ws, &again, "m", &Committer::default()).unwrap();
    assert!(p.nothing_to_commit);
}

/// With a warm stat cache (whose files are left unlisted by the read),
/// what changed since a snapshot is what a read of every file finds: an
/// edit (same size), a chmod, a deletion and an addition, and nothing for
/// a file put back as the snapshot has it.
#[test]
fn what_changed_since_a_snapshot_is_the_same_with_a_warm_cache() {
    let t = repo();
    let ws = t.path();
    write(ws, "dir/new.txt", "new\n");
    write(ws, "dir/other.txt", "other\n");
    let mut cache = StatCache::trusting_any_age();
    let (snap, _) = snapshot_with(ws, &paths(&["a.txt", "dir"]), &mut cache).unwrap();
    assert!(cache.len() >= 3, "{}", cache.len());
    let both = |cache: &StatCache| {
        let warm = changed_since(ws, &snap, Some(cache)).unwrap();
        assert_eq!(warm, changed_since(ws, &snap, None).unwrap());
        warm
    };
    assert!(both(&cache).is_empty());
    write(ws, "dir/new.txt", "NEW\n");
    std::fs::set_permissions(
        ws.join("dir/other.txt"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::remove_file(ws.join("a.txt")).unwrap();
    write(ws, "dir/added.txt", "added\n");
    assert_eq!(
        both(&cache),
        ["a.txt", "dir/added.txt", "dir/new.txt", "dir/other.txt"]
    );
    write(ws, "dir/new.txt", "new\n");
    std::fs::set_permissions(
        ws.join("dir/other.txt"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    assert_eq!(both(&cache), ["a.txt", "dir/added.txt"]);
}

/// A snapshot of an unchanged workspace is `HEAD`'s tree: what changed
/// since it is found against the entries the cache keeps for `HEAD`
/// (with a subtree's object gone from the repository it is still found;
/// a read without the cache, which reads the tree, cannot), and is what a
/// read against the tree itself finds.
#[test]
fn what_changed_since_a_snapshot_of_heads_tree_uses_the_entries_kept() {
    let t = repo();
    let ws = t.path();
    let mut cache = StatCache::trusting_any_age();
    let wanted = paths(&["a.txt", "dir"]);
    let (snap, _) = snapshot_with(ws, &wanted, &mut cache).unwrap();
    assert_eq!(snap.tree, git(ws, &["rev-parse", "HEAD^{tree}"]).trim());
    let tree = ObjectId::from_hex(snap.tree.as_bytes()).unwrap();
    assert!(cache.tracked_of(tree, &snap.paths).is_some());
    assert!(changed_since(ws, &snap, Some(&cache)).unwrap().is_empty());
    write(ws, "a.txt", "edited\n");
    std::fs::remove_file(ws.join("dir/keep.txt")).unwrap();
    let warm = changed_since(ws, &snap, Some(&cache)).unwrap();
    assert_eq!(warm, ["a.txt", "dir/keep.txt"]);
    assert_eq!(warm, changed_since(ws, &snap, None).unwrap());
    let dir_tree = git(ws, &["rev-parse", "HEAD:dir"]);
    let (fan, rest) = dir_tree.trim().split_at(2);
    std::fs::remove_file(ws.join(".git/objects").join(fan).join(rest)).unwrap();
    assert!(changed_since(ws, &snap, None).is_err(), "the tree is read");
    assert_eq!(changed_since(ws, &snap, Some(&cache)).unwrap(), warm);
}

#[test]
fn a_snapshot_is_never_committed_over_a_commit_that_touched_its_paths() {
    let t = repo();
    let ws = t.path();
    write(ws, "a.txt", "judged\n");
    let (snap, _) = snapshot(ws, &paths(&["a.txt"])).unwrap();
    // Someone commits another path meanwhile: the judged a.txt is
    // committed on top of it, the other commit kept.
    write(ws, "b.txt", "by hand\n");
    git(ws, &["commit", "-q", "-m", "by hand", "--", "b.txt"]);
    let prepared = prepare_snapshot(ws, &snap, "gated", &Committer::default()).unwrap();
    publish(ws, &prepared).unwrap();
    assert_eq!(git(ws, &["show", "HEAD:a.txt"]), "judged\n");
    assert_eq!(git(ws, &["show", "HEAD:b.txt"]), "by hand\n");
    // A commit that touched the snapshot's paths: it would be undone.
    write(ws, "a.txt", "judged again\n");
    let (snap, _) = snapshot(ws, &paths(&["a.txt"])).unwrap();
    write(ws, "a.txt", "by hand\n");
    git(ws, &["commit", "-q", "-m", "by hand", "--", "a.txt"]);
    let err = prepare_snapshot(ws, &snap, "gated", &Committer::default()).unwrap_err();
    assert!(matches!(err, CommitError::RefMoved { .. }), "{err}");
    assert_eq!(git(ws, &["show", "HEAD:a.txt"]), "by hand\n");
}

#[test]
fn the_stat_cache_skips_unchanged_files_and_never_trusts_a_changed_one() {
    let t = repo();
    let ws = t.path();
    // No racy window in this test: files written now are trusted at once.
    let mut cache = StatCache {
        racy_secs: -1_000_000,
        ..StatCache::default()
    };
    write(ws, "dir/new.txt", "new\n");
    let (first, _) = snapshot_with(ws, &paths(&["dir", "a.txt"]), &mut cache).unwrap();
    assert_eq!(
        cache.len(),
        4,
        "a.txt, dir/keep.txt, dir/old.txt, dir/new.txt"
    );
    // Unchanged: the same tree, the files taken from the cache.
    let (second, changes) = snapshot_with(ws, &paths(&["dir", "a.txt"]), &mut cache).unwrap();
    let changes = changes.unwrap();
    assert_eq!(second.tree, first.tree);
    let changed: Vec<&str> = changes.iter().filter_map(|c| c.path_str()).collect();
    assert_eq!(
        changed,
        ["dir/new.txt"],
        "the diff still shows the change since HEAD"
    );
    assert!(changes[0].hunks.contains("+new"), "{}", changes[0].hunks);
    // Same size, mtime set back: the ctime moved, the file is read again.
    let path = ws.join("dir/new.txt");
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    std::fs::write(&path, "NEW\n").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let (third, _) = snapshot_with(ws, &paths(&["dir", "a.txt"]), &mut cache).unwrap();
    assert_ne!(third.tree, first.tree);
    assert_eq!(
        git(
            ws,
            &["cat-file", "-p", &format!("{}:dir/new.txt", third.tree)]
        ),
        "NEW\n"
    );
    // The default window: files changed in the last 2 s are never cached.
    let mut careful = StatCache::default();
    let _ = snapshot_with(ws, &paths(&["dir"]), &mut careful).unwrap();
    assert!(careful.entries.get(b"dir/new.txt").is_none());
}

#[test]
fn a_changed_path_that_is_not_utf8_is_never_hidden_from_plugins() {
    let t = repo();
    let ws = t.path();
    let name = std::ffi::OsStr::from_bytes(b"evil\xff.rs");
    std::fs::write(ws.join("dir").join(name), "dbg!(1)\n").unwrap();
    // The snapshot is made and its change set holds the name as its bytes
    // (the plugin edge, whose paths are strings, refuses it by name).
    let (snap, changes) = snapshot(ws, &paths(&["dir"])).unwrap();
    let changes = changes.unwrap();
    assert!(
        changes
            .iter()
            .any(|c| c.path.as_slice() == b"dir/evil\xff.rs" && c.path_str().is_none()),
        "{changes:?}"
    );
    assert!(
        crate::change::render(&changes).contains("\"b/dir/evil\\377.rs\""),
        "judges see it quoted as git quotes it"
    );
    assert!(!snap.tree.is_empty());
    // At the top level of a workspace gated live, the same.
    std::fs::write(ws.join(name), "dbg!(1)\n").unwrap();
    let err = workspace_changes(ws, ChangeCaps::default()).unwrap_err();
    assert!(matches!(err, CommitError::PathNotUtf8(_)), "{err}");
}

/// A daemon that died between moving the branch and updating the index,
/// then committed on top: recovering the first commit brings its paths
/// into the index (before, `git status` showed them deleted and untracked).
#[test]
fn a_published_commit_built_upon_gets_its_index_entries_on_recovery() {
    let t = repo();
    let ws = t.path();
    write(ws, "a.txt", "a2\n");
    let pa = paths(&["a.txt"]);
    let fp = fingerprint(ws, &pa).unwrap();
    let first = prepare(ws, &pa, "first", &fp).unwrap();
    let index_before = std::fs::read(ws.join(".git/index")).unwrap();
    publish(ws, &first).unwrap();
    // The death: the index as it was before the publish updated it.
    std::fs::write(ws.join(".git/index"), &index_before).unwrap();
    write(ws, "b.txt", "b\n");
    let pb = paths(&["b.txt"]);
    let fp = fingerprint(ws, &pb).unwrap();
    let second = prepare(ws, &pb, "second", &fp).unwrap();
    publish(ws, &second).unwrap();
    let status = |ws: &Path| git(ws, &["status", "--porcelain"]);
    assert!(status(ws).contains("a.txt"), "{}", status(ws));
    assert_eq!(ref_state(ws, &first).unwrap(), RefState::Descends);
    sync_index_to_branch(ws, &first).unwrap();
    assert_eq!(status(ws), "", "the index is in line with the branch");
}

/// Issue 24, item 7, and issue 30: a huge untracked file (a sparse 3 GiB
/// one, as the agent can make in an instant) is refused by size before
/// anything is read in a commit; in a change set for gates it is listed,
/// capped and unread (before: read whole, the daemon grew to 4.1 GiB).
#[test]
fn a_file_past_the_read_bound_is_refused_unread_by_a_commit_and_capped_in_a_change_set() {
    let t = repo();
    let ws = t.path();
    let big = std::fs::File::create(ws.join("huge.bin")).unwrap();
    big.set_len(3 * 1024 * 1024 * 1024).unwrap();
    match fingerprint(ws, &paths(&["huge.bin"])).unwrap_err() {
        CommitError::FileTooLarge { path, bytes, max } => {
            assert_eq!(path, "huge.bin");
            assert_eq!(bytes, 3 * 1024 * 1024 * 1024);
            assert_eq!(max, read::MAX_FILE_BYTES);
        }
        other => panic!("not refused by size: {other}"),
    }
    let changes = workspace_changes(ws, ChangeCaps::default()).unwrap();
    let huge = changes
        .iter()
        .find(|c| c.path == "huge.bin")
        .expect("listed");
    assert_eq!(
        huge.capped,
        Some(crate::change::Capped::File {
            bytes: 3 * 1024 * 1024 * 1024,
            cap: crate::change::DEFAULT_FILE_CAP
        })
    );
    assert_eq!(huge.kind, crate::change::ChangeKind::Added);
    // One under the cap is read.
    let fits = std::fs::File::create(ws.join("huge.bin")).unwrap();
    fits.set_len(1024).unwrap();
    let changes = workspace_changes(ws, ChangeCaps::default()).unwrap();
    let read = changes
        .iter()
        .find(|c| c.path == "huge.bin")
        .expect("listed");
    assert_eq!(read.capped, None, "{changes:?}");
}
