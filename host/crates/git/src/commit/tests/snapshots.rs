//! Snapshots: what the gate judged is what is committed, what changed
//! since a snapshot (with and without the stat cache), and the bounds on
//! what a commit or a change set reads.

use super::*;

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
