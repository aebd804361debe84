//! A change set and a snapshot against what git itself reports for the
//! same workspace (issue 30): paths, modes and blob ids of every change
//! since `HEAD`, tracked and untracked, as `git add -A` into a scratch
//! index and `git diff --cached --raw` show them, and the snapshot's tree
//! as that index's `git write-tree` (the repository's own index
//! untouched).

use super::tests::{git, write};
use super::*;
use crate::change::{ChangeCaps, ChangeKind, FileChange};
use crate::supervise::reaper::TrackedCommand as _;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::process::Command;

/// (path, status, old mode, new mode, old id, new id) of one change.
type Row = (String, char, String, String, String, String);

const NONE_ID: &str = "0000000000000000000000000000000000000000";

/// What git reports: every change between `HEAD` and the workspace, as
/// `git add -A` would stage it (ignore rules, nested `.gitignore`s and
/// `info/exclude` honoured), renames not detected (a rename is a deletion
/// and an addition, as in a change set).
fn as_git_reports(ws: &Path) -> (Vec<Row>, String) {
    let index = tempfile::NamedTempFile::new().unwrap();
    let git_index = |args: &[&str]| {
        let out = Command::new("git")
            .args([
                "-c",
                "core.hooksPath=/dev/null",
                "-c",
                "core.fsmonitor=false",
            ])
            .args(args)
            .current_dir(ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_INDEX_FILE", index.path())
            .stdin(std::process::Stdio::null())
            .tracked_output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        out.stdout
    };
    git_index(&["read-tree", "HEAD"]);
    git_index(&["add", "-A"]);
    let raw = git_index(&[
        "diff",
        "--cached",
        "--raw",
        "-z",
        "--no-renames",
        "--abbrev=40",
        "HEAD",
    ]);
    let mut rows = Vec::new();
    let mut fields = raw.split(|b| *b == 0).filter(|f| !f.is_empty());
    while let Some(meta) = fields.next() {
        let meta = String::from_utf8(meta.to_vec()).unwrap();
        let path = String::from_utf8(fields.next().unwrap().to_vec()).unwrap();
        let f: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
        let status = f[4].chars().next().unwrap();
        rows.push((
            path,
            status,
            f[0].to_string(),
            f[1].to_string(),
            f[2].to_string(),
            f[3].to_string(),
        ));
    }
    rows.sort();
    let tree = String::from_utf8(git_index(&["write-tree"])).unwrap();
    (rows, tree.trim().to_string())
}

/// The same rows from a change set.
fn rows_of(changes: &[FileChange]) -> Vec<Row> {
    let side = |s: &Option<crate::change::Side>| match s {
        Some(s) => (format!("{:06o}", s.mode.unwrap()), s.id.clone().unwrap()),
        None => ("000000".to_string(), NONE_ID.to_string()),
    };
    let mut rows: Vec<Row> = changes
        .iter()
        .map(|c| {
            let status = match c.kind {
                ChangeKind::Added => 'A',
                ChangeKind::Deleted => 'D',
                ChangeKind::Modified => 'M',
                ChangeKind::Renamed => 'R',
            };
            let (om, oid) = side(&c.old);
            let (nm, nid) = side(&c.new);
            (c.path_lossy().into_owned(), status, om, nm, oid, nid)
        })
        .collect();
    rows.sort();
    rows
}

fn chmod(ws: &Path, rel: &str, mode: u32) {
    std::fs::set_permissions(ws.join(rel), std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A repository with every kind of change git tells apart.
fn mixed_repository() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path();
    git(ws, &["init", "-q", "-b", "main"]);
    write(ws, "a.txt", "a\n");
    write(ws, "to-rename.txt", "moved\n");
    write(ws, "run.sh", "echo hi\n");
    write(ws, "both.sh", "one\n");
    write(ws, "gone.txt", "bye\n");
    write(ws, "src/lib.rs", "fn a() {}\n");
    write(ws, "src/deep/mod.rs", "mod x;\n");
    write(ws, ".gitignore", "build/\n*.log\n");
    write(ws, "sub/.gitignore", "!keep.log\nlocal/\n");
    write(ws, "sub/file.txt", "sub\n");
    write(ws, "build/tracked.txt", "tracked though ignored\n");
    symlink("a.txt", ws.join("old-link")).unwrap();
    git(ws, &["add", "-A"]);
    git(ws, &["add", "-f", "build/tracked.txt"]);
    git(ws, &["commit", "-q", "-m", "start"]);
    // A rename (a deletion and an addition), content and mode changes.
    std::fs::rename(ws.join("to-rename.txt"), ws.join("src/renamed.txt")).unwrap();
    chmod(ws, "run.sh", 0o755);
    write(ws, "both.sh", "two\n");
    chmod(ws, "both.sh", 0o755);
    std::fs::remove_file(ws.join("gone.txt")).unwrap();
    write(ws, "src/lib.rs", "fn a() {}\nfn b() {}\n");
    // A tracked file under an ignored directory is still compared.
    write(ws, "build/tracked.txt", "changed\n");
    // Ignored trees (by the root's and by a nested .gitignore, by
    // info/exclude) and ignored files: none of them reported.
    for i in 0..20 {
        write(ws, &format!("build/out/{i}.o"), "obj\n");
    }
    write(ws, "sub/local/cache/x.bin", "x\n");
    write(ws, "trace.log", "log\n");
    write(ws, "sub/other.log", "log\n");
    write(ws, ".git/info/exclude", "secret.txt\n");
    write(ws, "secret.txt", "s3cret\n");
    // Re-included by the nested .gitignore.
    write(ws, "sub/keep.log", "kept\n");
    // An untracked tree, an untracked symlink, a symlink retargeted.
    write(ws, "newdir/a/b/c.txt", "c\n");
    write(ws, "newdir/d.txt", "d\n");
    symlink("src/lib.rs", ws.join("new-link")).unwrap();
    std::fs::remove_file(ws.join("old-link")).unwrap();
    symlink("run.sh", ws.join("old-link")).unwrap();
    t
}

#[test]
fn a_change_set_and_a_snapshot_equal_what_git_reports() {
    let t = mixed_repository();
    let ws = t.path();
    let (want, tree) = as_git_reports(ws);
    // The reference itself covers every case.
    let statuses: std::collections::BTreeSet<char> = want.iter().map(|r| r.1).collect();
    assert_eq!(statuses, ['A', 'D', 'M'].into_iter().collect(), "{want:?}");
    for must in [
        "src/renamed.txt",
        "to-rename.txt",
        "run.sh",
        "both.sh",
        "sub/keep.log",
        "new-link",
        "old-link",
        "newdir/a/b/c.txt",
        "build/tracked.txt",
    ] {
        assert!(want.iter().any(|r| r.0 == must), "{must} in {want:?}");
    }
    for never in [
        "build/out/0.o",
        "sub/local/cache/x.bin",
        "trace.log",
        "sub/other.log",
        "secret.txt",
    ] {
        assert!(!want.iter().any(|r| r.0 == never), "{never} in {want:?}");
    }
    let got = rows_of(&workspace_changes(ws, ChangeCaps::default()).unwrap());
    assert_eq!(got, want, "the change set");
    // A snapshot of every top-level name HEAD or the change holds (an
    // ignored name given as a commit path would be taken, as `git add
    // -f`): the tree git would write, and the same changes.
    let mut names: std::collections::BTreeSet<String> =
        git(ws, &["ls-tree", "--name-only", "HEAD"])
            .lines()
            .map(str::to_string)
            .collect();
    names.extend(
        want.iter()
            .map(|r| r.0.split('/').next().unwrap().to_string()),
    );
    let names: Vec<String> = names.into_iter().collect();
    let (snap, changes) = snapshot(ws, &names).unwrap();
    assert_eq!(snap.tree, tree, "the snapshot's tree");
    assert_eq!(rows_of(&changes.unwrap()), want, "the snapshot's changes");
    // With a warm stat cache, HEAD's unchanged files are left unlisted and
    // the tree is HEAD's edited where the workspace differs: the same tree
    // (written again, not taken from the last one).
    let mut cache = StatCache {
        racy_secs: -1_000_000,
        ..StatCache::default()
    };
    let (cold, _) = snapshot_with(ws, &names, &mut cache).unwrap();
    assert_eq!(cold.tree, tree, "the cold snapshot's tree");
    cache.last_tree = None;
    let (warm, changes) = snapshot_with(ws, &names, &mut cache).unwrap();
    assert_eq!(warm.tree, tree, "the warm snapshot's tree");
    assert_eq!(
        rows_of(&changes.unwrap()),
        want,
        "the warm snapshot's changes"
    );
    // The repository's own index was never touched by the reference.
    assert!(git(ws, &["diff", "--cached", "--name-only"]).is_empty());
}
