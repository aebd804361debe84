//! The repository's index after a commit: it follows the commit for the
//! committed paths and keeps everything else (staged changes, racily
//! clean entries, split indexes and conflicts), never through a symlink or
//! a held lock.

use super::*;

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
