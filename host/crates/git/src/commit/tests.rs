use super::*;
use crate::change::ChangeCaps;
use crate::supervise::reaper::TrackedCommand as _;
use std::collections::BTreeSet;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::process::Command;

// Concepts of their own: the index a commit leaves, a patch's hunks as
// data, publishing, what is refused, and snapshots.
mod index;
mod patch_hunks;
mod publish;
mod refusals;
mod snapshots;

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
