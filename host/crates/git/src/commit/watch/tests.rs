//! The watch against a read of every file: it never says "unchanged" when
//! the read finds a change, and says it for what is outside the commit
//! paths or below an ignored directory.

use super::super::tests::{paths, repo, write};
use super::super::{StatCache, changed_since, snapshot_watched};
use super::Watch;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// A snapshot of `wanted` in `ws`, watched.
fn watched(ws: &Path, wanted: &[&str]) -> (super::super::TreeSnapshot, Watch) {
    let watch = Watch::new().expect("inotify");
    let mut cache = StatCache::trusting_any_age();
    let (snap, _) = snapshot_watched(ws, &paths(wanted), &mut cache, Some(&watch)).unwrap();
    (snap, watch)
}

/// Reads, writes outside the commit paths, and writes below an ignored
/// directory (not walked) leave the watch quiet, and the read agrees.
#[test]
fn what_is_outside_the_commit_paths_leaves_the_watch_quiet() {
    let t = repo();
    let ws = t.path();
    write(ws, ".gitignore", "build/\n");
    write(ws, "dir/build/out.o", "x\n");
    write(ws, "dir/sub/y.txt", "y\n");
    let (snap, watch) = watched(ws, &["a.txt", "dir"]);
    write(ws, "b.txt", "b2\n");
    write(ws, "c.txt", "new beside\n");
    write(ws, "dir/build/out2.o", "y\n");
    write(ws, "dir/build/out.o", "z\n");
    for f in ["a.txt", "dir/keep.txt", "dir/sub/y.txt"] {
        std::fs::read(ws.join(f)).unwrap();
    }
    assert_eq!(watch.unchanged(), Ok(()));
    assert!(changed_since(ws, &snap, None).unwrap().is_empty());
}

/// Each kind of change under the commit paths is seen, named, and found
/// by the read too.
#[test]
fn every_change_under_the_commit_paths_is_seen() {
    type Change = fn(&Path);
    let cases: [(&str, Change, &str); 8] = [
        (
            "an edit",
            |ws| write(ws, "dir/keep.txt", "KEEP\n"),
            "dir/keep.txt",
        ),
        (
            "a chmod",
            |ws| {
                let p = std::fs::Permissions::from_mode(0o755);
                std::fs::set_permissions(ws.join("dir/old.txt"), p).unwrap();
            },
            "dir/old.txt",
        ),
        (
            "a deletion",
            |ws| std::fs::remove_file(ws.join("a.txt")).unwrap(),
            "a.txt",
        ),
        (
            "a file in a subdirectory",
            |ws| write(ws, "dir/sub/new.txt", "n\n"),
            "dir/sub/new.txt",
        ),
        (
            "a new directory",
            |ws| write(ws, "dir/fresh/n.txt", "n\n"),
            "dir/fresh",
        ),
        (
            "the directory renamed",
            |ws| std::fs::rename(ws.join("dir"), ws.join("elsewhere")).unwrap(),
            "dir",
        ),
        (
            "a file turned into a symlink",
            |ws| {
                std::fs::remove_file(ws.join("a.txt")).unwrap();
                std::os::unix::fs::symlink("b.txt", ws.join("a.txt")).unwrap();
            },
            "a.txt",
        ),
        (
            "an ignore file",
            |ws| write(ws, "dir/sub/.gitignore", "*.txt\n"),
            "dir/sub/.gitignore",
        ),
    ];
    for (what, change, path) in cases {
        let t = repo();
        let ws = t.path();
        write(ws, "dir/sub/y.txt", "y\n");
        let (snap, watch) = watched(ws, &["a.txt", "dir"]);
        change(ws);
        let why = watch.unchanged().expect_err(what);
        assert!(why.starts_with(&format!("{path} changed")), "{what}: {why}");
        assert!(
            !changed_since(ws, &snap, None).unwrap().is_empty(),
            "{what}: the read finds it too"
        );
    }
}

/// A file with a second link can be written through a directory that is
/// not watched: the watch does not vouch for it.
#[test]
fn a_hard_linked_file_is_not_vouched_for() {
    let t = repo();
    let ws = t.path();
    let away = tempfile::tempdir().unwrap();
    std::fs::hard_link(ws.join("dir/keep.txt"), away.path().join("keep")).unwrap();
    let (_, watch) = watched(ws, &["dir"]);
    let why = watch.unchanged().expect_err("two links");
    assert!(why.contains("dir/keep.txt has 2 links"), "{why}");
}

/// Events the kernel dropped (its queue full of changes outside the
/// commit paths) may have held one under them: not vouched for.
#[test]
fn an_overflowed_queue_is_not_vouched_for() {
    let t = repo();
    let ws = t.path();
    let (_, watch) = watched(ws, &["dir"]);
    let queued: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Each write is at least one event (two names alternate: the kernel
    // merges an event only with the one queued just before it).
    for i in 0..queued + 10 {
        write(ws, ["x1", "x2"][i % 2], "x\n");
    }
    write(ws, "dir/keep.txt", "dropped\n");
    assert_eq!(
        watch.unchanged(),
        Err("more changes than the watch could queue".to_string())
    );
}
