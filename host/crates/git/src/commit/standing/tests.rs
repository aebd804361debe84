//! The watch kept between turns against a walk of everything: after each
//! step of a scripted series of changes (every kind), the snapshot taken
//! through the watch has the tree and the diff a fresh full walk has, and
//! it read only where the watch named (no fallback) unless it could not
//! vouch, then it walked and says why.

use super::super::tests::{commit, paths, repo, write};
use super::super::{Fallback, StatCache, snapshot_standing, snapshot_with};
use super::{Standing, WatchBudget};
use crate::change::FileChange;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// One workspace's watch and cache, as the daemon keeps them.
struct Kept {
    standing: Standing,
    cache: StatCache,
    paths: Vec<String>,
}

impl Kept {
    fn new(paths_: &[&str]) -> Kept {
        Kept {
            standing: Standing::new(WatchBudget::default()).expect("inotify"),
            // The racy window as the daemon has it: a file written in
            // the test's same clock tick as its read is never vouched for
            // by its stamp (the watch is what is tested here).
            cache: StatCache::default(),
            paths: paths(paths_),
        }
    }

    /// A snapshot through the watch, checked against a fresh full walk:
    /// why it walked everything, if it did.
    fn turn(&mut self, ws: &Path, step: &str) -> Fallback {
        let ((snap, changes), fallback) =
            snapshot_standing(ws, &self.paths, &mut self.cache, &mut self.standing)
                .unwrap_or_else(|e| panic!("{step}: the watched snapshot failed: {e}"));
        let (truth, truth_changes) =
            snapshot_with(ws, &self.paths, &mut StatCache::default()).expect("full walk");
        assert_eq!(snap, truth, "{step}: the watched snapshot's tree");
        let shown = |c: &Result<Vec<FileChange>, String>| {
            c.as_ref()
                .map(|c| {
                    c.iter()
                        .map(|c| (c.path.to_string(), c.hunks.clone()))
                        .collect::<Vec<_>>()
                })
                .map_err(Clone::clone)
        };
        assert_eq!(shown(&changes), shown(&truth_changes), "{step}: its diff");
        assert_eq!(changes, truth_changes, "{step}: its diff, every field");
        fallback
    }

    /// A turn that must have read only where the watch named.
    fn watched_turn(&mut self, ws: &Path, step: &str) {
        let fallback = self.turn(ws, step);
        assert_eq!(fallback, None, "{step}: read through the watch");
    }

    /// A turn that must have walked everything, for a reason saying `why`.
    fn walked_turn(&mut self, ws: &Path, step: &str, why: &str) {
        let fallback = self.turn(ws, step);
        let reason = fallback.unwrap_or_else(|| panic!("{step}: walked everything"));
        assert!(reason.contains(why), "{step}: {reason:?} says {why:?}");
    }
}

fn chmod(ws: &Path, rel: &str, mode: u32) {
    std::fs::set_permissions(ws.join(rel), std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Every kind of change, one turn each, then all at once: the watch's
/// answers are the walk's.
#[test]
fn the_watchs_snapshots_equal_a_full_walks_through_every_kind_of_change() {
    let t = repo();
    let ws = t.path();
    write(ws, ".gitignore", "*.log\nbuild/\n");
    write(ws, "dir/sub/deep.txt", "deep\n");
    write(ws, "dir/other/o.txt", "o\n");
    write(ws, "dir/build/out.o", "o\n");
    let mut kept = Kept::new(&["a.txt", "dir"]);
    kept.walked_turn(ws, "the first snapshot", "no watch yet");
    kept.watched_turn(ws, "nothing changed");
    assert!(
        kept.standing.watched() >= 4,
        "the directories walked are watched"
    );
    type Step = fn(&Path);
    let steps: &[(&str, Step)] = &[
        ("a modification", |ws| write(ws, "dir/keep.txt", "KEEP\n")),
        ("a commit path that is a file, modified", |ws| {
            write(ws, "a.txt", "a2\n");
        }),
        ("a creation", |ws| write(ws, "dir/new.txt", "new\n")),
        ("a creation in a new directory", |ws| {
            write(ws, "dir/fresh/one/two.txt", "two\n");
        }),
        ("a file in the new directory, after it was watched", |ws| {
            write(ws, "dir/fresh/one/three.txt", "three\n");
        }),
        ("a deletion", |ws| {
            std::fs::remove_file(ws.join("dir/old.txt")).expect("rm");
        }),
        ("chmod +x", |ws| chmod(ws, "dir/keep.txt", 0o755)),
        ("chmod -x", |ws| chmod(ws, "dir/keep.txt", 0o644)),
        ("a rename within a directory", |ws| {
            std::fs::rename(ws.join("dir/new.txt"), ws.join("dir/renamed.txt")).expect("mv");
        }),
        ("a rename across directories", |ws| {
            std::fs::rename(ws.join("dir/renamed.txt"), ws.join("dir/sub/moved.txt")).expect("mv");
        }),
        ("a directory renamed", |ws| {
            std::fs::rename(ws.join("dir/fresh"), ws.join("dir/sub/fresh2")).expect("mv");
        }),
        ("a file written in the renamed directory", |ws| {
            write(ws, "dir/sub/fresh2/one/two.txt", "TWO\n");
        }),
        ("a directory moved out of the commit paths", |ws| {
            std::fs::rename(ws.join("dir/sub/fresh2"), ws.join("gone")).expect("mv");
        }),
        ("a write in the directory moved out", |ws| {
            write(ws, "gone/one/two.txt", "ignored now\n");
        }),
        ("a directory replaced by a symlink", |ws| {
            std::fs::remove_dir_all(ws.join("dir/other")).expect("rm -r");
            std::os::unix::fs::symlink("../b.txt", ws.join("dir/other")).expect("ln -s");
        }),
        ("a symlink replaced by a directory", |ws| {
            std::fs::remove_file(ws.join("dir/other")).expect("rm");
            write(ws, "dir/other/back.txt", "back\n");
        }),
        ("an ignored file created", |ws| {
            write(ws, "dir/x.log", "log\n");
        }),
        ("a file under an ignored directory", |ws| {
            write(ws, "dir/build/out2.o", "o2\n");
        }),
        ("a .gitignore changed", |ws| {
            write(ws, "dir/.gitignore", "*.txt\n");
        }),
        ("a .gitignore removed", |ws| {
            std::fs::remove_file(ws.join("dir/.gitignore")).expect("rm");
        }),
        ("a nested repository appears", |ws| {
            std::fs::create_dir(ws.join("dir/sub/.git")).expect("mkdir");
        }),
        ("the nested repository goes", |ws| {
            std::fs::remove_dir(ws.join("dir/sub/.git")).expect("rmdir");
        }),
        ("a directory deleted", |ws| {
            std::fs::remove_dir_all(ws.join("dir/sub")).expect("rm -r");
        }),
        ("outside the commit paths", |ws| write(ws, "b.txt", "b2\n")),
        ("many at once", |ws| {
            for i in 0..20 {
                write(
                    ws,
                    &format!("dir/many/{}/f{i}.txt", i % 3),
                    &format!("{i}\n"),
                );
            }
            write(ws, "a.txt", "a3\n");
            std::fs::remove_file(ws.join("dir/keep.txt")).expect("rm");
            chmod(ws, "dir/many/0/f0.txt", 0o755);
        }),
    ];
    for (step, change) in steps {
        change(ws);
        kept.watched_turn(ws, step);
        kept.watched_turn(ws, &format!("nothing since {step}"));
    }
}

/// A file with two links changes through the one outside the watched
/// directories (inotify sees nothing): such files are read every turn.
#[test]
fn a_file_changed_through_a_hard_link_elsewhere_is_read_again() {
    let t = repo();
    let ws = t.path();
    write(ws, "elsewhere/h.txt", "one\n");
    std::fs::hard_link(ws.join("elsewhere/h.txt"), ws.join("dir/h.txt")).expect("ln");
    let mut kept = Kept::new(&["dir"]);
    kept.walked_turn(ws, "first", "no watch yet");
    assert!(
        kept.standing.unchanged().is_err(),
        "a linked file is never vouched for"
    );
    std::fs::write(ws.join("elsewhere/h.txt"), "two, through the other link\n").expect("write");
    kept.watched_turn(ws, "written through the other link");
    // (A link made later from a directory not watched, to a file read
    // with one link, is not seen: the kernel tells only watches of the
    // file itself. docs/daemon.md says so.)
}

/// An overflow of the kernel's queue (injected: a queue of a few events
/// cannot be had per instance without privileges) leaves nothing to
/// vouch for: everything is walked, the reason said, and the turn after
/// reads through the watch again.
#[test]
fn an_overflow_falls_back_to_a_full_walk_and_says_so() {
    let t = repo();
    let ws = t.path();
    let mut kept = Kept::new(&["a.txt", "dir"]);
    kept.walked_turn(ws, "first", "no watch yet");
    write(ws, "dir/keep.txt", "lost in the overflow\n");
    kept.standing
        .overflow_next
        .store(true, std::sync::atomic::Ordering::Relaxed);
    kept.walked_turn(ws, "overflowed", "IN_Q_OVERFLOW");
    write(ws, "dir/keep.txt", "after\n");
    kept.watched_turn(ws, "watched again");
}

/// A daemon restart between turns: a new watch has no basis, the first
/// snapshot walks and says why; its stat cache (kept) still spares reads.
#[test]
fn a_restart_between_turns_walks_everything_once() {
    let t = repo();
    let ws = t.path();
    let mut kept = Kept::new(&["dir"]);
    kept.walked_turn(ws, "first", "no watch yet");
    write(ws, "dir/keep.txt", "while the daemon was down\n");
    kept.standing = Standing::new(WatchBudget::default()).expect("inotify");
    kept.walked_turn(ws, "after a restart", "the daemon started");
    kept.watched_turn(ws, "then through the watch");
}

/// Past the budget (per workspace, or host-wide) the watch stops
/// watching and every snapshot walks, saying which budget; other paths,
/// another `.git/info/exclude`, a change on the way to the commit paths
/// or a HEAD that moved elsewhere walk too.
#[test]
fn what_the_watch_cannot_vouch_for_is_walked_and_said() {
    let t = repo();
    let ws = t.path();
    write(ws, "dir/a/1.txt", "1\n");
    write(ws, "dir/b/2.txt", "2\n");
    let mut kept = Kept::new(&["dir"]);
    kept.standing = Standing::new(WatchBudget::new(2, 100)).expect("inotify");
    kept.walked_turn(ws, "first", "no watch yet");
    kept.walked_turn(ws, "over its own budget", "watch_dirs_per_workspace");
    // It rests: the next snapshots walk without adding watches, then one
    // tries again.
    for left in (0..super::RESTING_SNAPSHOTS - 1).rev() {
        write(ws, "dir/a/1.txt", &format!("{left}\n"));
        kept.walked_turn(
            ws,
            "resting",
            &format!("([limits] watch_dirs_per_workspace); not watched again for {left} more"),
        );
        assert_eq!(kept.standing.watched(), 0, "no watch added while it rests");
    }
    kept.walked_turn(ws, "tried again", "no watch yet");
    assert!(kept.standing.watched() > 0, "watched again");
    kept.walked_turn(ws, "and over again", "watch_dirs_per_workspace");
    let host = WatchBudget::new(100, 4);
    host.held.store(3, std::sync::atomic::Ordering::Relaxed);
    kept.standing = Standing::new(host.clone()).expect("inotify");
    kept.walked_turn(ws, "first", "no watch yet");
    kept.walked_turn(ws, "over the host's budget", "watch_dirs_total");
    drop(std::mem::replace(
        &mut kept.standing,
        Standing::new(WatchBudget::default()).expect("inotify"),
    ));
    assert_eq!(
        host.held.load(std::sync::atomic::Ordering::Relaxed),
        3,
        "a watch dropped gives its share back"
    );
    kept.walked_turn(ws, "first", "no watch yet");
    kept.watched_turn(ws, "within the budget");
    write(ws, ".git/info/exclude", "*.txt\n");
    kept.walked_turn(ws, "the excludes", "info/exclude");
    kept.watched_turn(ws, "quiet");
    write(ws, ".git/info/exclude", "");
    kept.walked_turn(ws, "the excludes again", "info/exclude");
    kept.paths = paths(&["dir", "a.txt"]);
    kept.walked_turn(ws, "other paths", "commit paths changed");
    kept.watched_turn(ws, "quiet");
    std::fs::rename(ws.join("dir"), ws.join("dir2")).expect("mv");
    std::fs::create_dir(ws.join("dir")).expect("mkdir");
    kept.watched_turn(ws, "a commit path renamed, another made: read again");
    write(ws, "dir2/sub/s.txt", "s\n");
    kept.paths = paths(&["dir2/sub", "a.txt"]);
    kept.walked_turn(ws, "other paths", "commit paths changed");
    std::fs::rename(ws.join("dir2"), ws.join("dir3")).expect("mv");
    kept.walked_turn(
        ws,
        "a directory on the way renamed",
        "on the way to the commit paths",
    );
    std::fs::rename(ws.join("dir3"), ws.join("dir2")).expect("mv");
    kept.walked_turn(ws, "and back", "on the way to the commit paths");
    write(ws, ".gitignore", "*.md\n");
    kept.walked_turn(
        ws,
        "ignore rules on the way",
        "on the way to the commit paths",
    );
    kept.paths = paths(&["dir", "a.txt"]);
    kept.walked_turn(ws, "the paths again", "commit paths changed");
    // The last snapshot committed: HEAD moved to it, the watch still
    // vouches; a commit of other content of the paths does not.
    write(ws, "dir/c.txt", "c\n");
    kept.watched_turn(ws, "a file");
    commit(ws, &["dir", "a.txt"], "the snapshot");
    kept.watched_turn(ws, "HEAD moved to the snapshot's content");
    write(ws, "dir/c.txt", "c2\n");
    kept.watched_turn(ws, "changed after the commit");
    write(ws, "dir/d.txt", "d\n");
    commit(ws, &["dir"], "other content");
    write(ws, "dir/d.txt", "d2\n");
    kept.walked_turn(ws, "HEAD moved elsewhere", "HEAD moved");
}

/// `unchanged` (after a passing gate) says nothing changed only when no
/// event came since the snapshot, and names what did.
#[test]
fn unchanged_after_a_snapshot_names_what_changed() {
    let t = repo();
    let ws = t.path();
    let mut kept = Kept::new(&["dir"]);
    assert!(kept.standing.unchanged().is_err(), "no snapshot yet");
    kept.walked_turn(ws, "first", "no watch yet");
    assert_eq!(kept.standing.unchanged(), Ok(()));
    write(ws, "b.txt", "outside\n");
    assert_eq!(kept.standing.unchanged(), Ok(()));
    write(ws, "dir/keep.txt", "inside\n");
    let why = kept.standing.unchanged().expect_err("changed");
    assert!(why.contains("dir/keep.txt"), "{why}");
    assert!(
        kept.standing.unchanged().is_err(),
        "said again until the next snapshot"
    );
    kept.watched_turn(ws, "read");
    assert_eq!(kept.standing.unchanged(), Ok(()));
}

/// HEAD's gitlinks under a path read again stay as they are, and a name
/// that is not UTF-8 is read again as the walk reads it.
#[test]
fn gitlinks_and_names_that_are_not_utf8_read_again_as_the_walk_reads_them() {
    use std::os::unix::ffi::OsStrExt;
    let t = repo();
    let ws = t.path();
    let head = super::super::tests::head(ws);
    super::super::test_git::git(
        ws,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{head},dir/sub/module"),
        ],
    );
    write(ws, "dir/sub/x.txt", "x\n");
    super::super::test_git::git(ws, &["add", "dir/sub/x.txt"]);
    super::super::test_git::git(ws, &["commit", "-qm", "a gitlink"]);
    let mut kept = Kept::new(&["dir"]);
    kept.walked_turn(ws, "first", "no watch yet");
    write(ws, "dir/sub/x.txt", "x2\n");
    kept.watched_turn(ws, "beside the gitlink");
    std::fs::create_dir_all(ws.join("dir/sub/module")).expect("mkdir");
    write(ws, "dir/sub/module/inner.txt", "never read\n");
    kept.watched_turn(ws, "the gitlink's directory appears");
    std::fs::remove_dir_all(ws.join("dir/sub")).expect("rm -r");
    kept.watched_turn(ws, "the directory holding it deleted");
    let odd = ws.join(std::ffi::OsStr::from_bytes(b"dir/caf\xe9.txt"));
    std::fs::write(&odd, "latin-1\n").expect("write");
    kept.watched_turn(ws, "a name that is not UTF-8");
    std::fs::write(&odd, "latin-1, again\n").expect("write");
    kept.watched_turn(ws, "written again");
}
