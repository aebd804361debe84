//! A snapshot that costs what changed: with a [`Standing`] watch that can
//! vouch for the commit paths since the last snapshot, the new snapshot
//! is the last one's tree with only the paths the watch names read again
//! (nothing read when it names none); else everything is walked, as
//! [`super::snapshot_with`] does, and watched afresh.
//!
//! Owns: choosing between the two (and logging why it walked), patching
//! the last tree and diff at the paths read again, and what the watch
//! keeps for the next snapshot ([`super::standing::Basis`]).
//!
//! Must never: give another tree or diff than a full walk would give for
//! the same workspace (the tests compare them on every kind of change),
//! or take a file's content from anything but the read and the stat
//! cache: the watch says where to look, never what is there.

use super::read::{Found, Item, Reads, Snapshot, Watcher};
use super::snapshot::{Taken, TreeSnapshot, fingerprint_of_tree, take};
use super::standing::{Basis, Fallback, Standing, under};
use super::stat_cache::Stamp;
use super::{CommitError, Head, StatCache, Workspace, git, normalise_paths, resolve_head};
use crate::change::{ChangeKind, FileChange};
use gix::ObjectId;
use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::EntryKind;
use std::collections::HashSet;
use std::path::Path;

/// [`super::snapshot_with`], read as `standing` allows: only the paths it
/// names when it can vouch for the rest since the last snapshot, else
/// everything (and why, also logged). `standing` then watches the
/// commit paths for the next snapshot.
pub fn snapshot_standing(
    workspace: &Path,
    paths: &[String],
    cache: &mut StatCache,
    standing: &mut Standing,
) -> Result<(Taken, Fallback), CommitError> {
    let t0 = std::time::Instant::now();
    let ws = Workspace::open(workspace)?;
    let paths = normalise_paths(paths)?;
    let head = resolve_head(&ws.repo)?;
    let exclude = ws
        .common
        .symlink_metadata("info/exclude")
        .ok()
        .map(|m| Stamp::of(&m));
    let why = match standing.plan(&paths, exclude) {
        Ok(dirty) => match patched(&ws, &paths, &head, cache, standing, &dirty) {
            Ok(Ok((tree, changes))) => {
                tracing::debug!(
                    read_again = dirty.len(),
                    took_us = t0.elapsed().as_micros(),
                    "snapshot from the watch"
                );
                standing.set_basis(Basis {
                    head_tree: head.tree,
                    paths: paths.clone(),
                    tree,
                    changes: changes.clone(),
                    exclude,
                });
                return Ok(((snapshot_of(tree, &head, paths), Ok(changes)), None));
            }
            Ok(Err(why)) => why,
            Err(e) => format!("reading the paths it named failed ({e})"),
        },
        Err(why) => why,
    };
    let resting = standing.rest();
    let unwatched = resting.is_some();
    let why = resting.unwrap_or(why);
    tracing::info!(workspace = %workspace.display(), reason = %why, "the watch cannot vouch for the commit paths: walking them all");
    let reset = standing.reset();
    if unwatched {
        return Ok((take(&ws, paths, &head, cache, None, t0)?, Some(why)));
    }
    if let Err(e) = reset {
        tracing::warn!(error = %e, "cannot renew the watch: walking without one");
        let taken = take(&ws, paths, &head, cache, None, t0)?;
        return Ok((taken, Some(why)));
    }
    let taken = take(
        &ws,
        paths.clone(),
        &head,
        cache,
        Some(&*standing as &dyn Watcher),
        t0,
    )?;
    // A diff that could not be made is not patched: the next snapshot
    // walks again.
    if let Ok(changes) = &taken.1 {
        let tree = ObjectId::from_hex(taken.0.tree.as_bytes())
            .map_err(|e| CommitError::InvalidPrepared(format!("snapshot tree: {e}")))?;
        standing.set_basis(Basis {
            head_tree: head.tree,
            paths,
            tree,
            changes: changes.clone(),
            exclude,
        });
    }
    Ok((taken, Some(why)))
}

fn snapshot_of(tree: ObjectId, head: &Head, paths: Vec<String>) -> TreeSnapshot {
    let tree = tree.to_hex().to_string();
    TreeSnapshot {
        fingerprint: fingerprint_of_tree(&tree),
        tree,
        parent: head.commit.map(|c| c.to_hex().to_string()),
        reference: head.reference.as_bstr().to_string(),
        paths,
    }
}

/// The last snapshot's tree and diff, patched where `dirty` says: the
/// tree and diff, or why the watch's basis does not fit `HEAD`.
fn patched(
    ws: &Workspace,
    paths: &[String],
    head: &Head,
    cache: &mut StatCache,
    standing: &Standing,
    dirty: &[BString],
) -> Result<Result<(ObjectId, Vec<FileChange>), String>, CommitError> {
    let Some(basis) = standing.basis().cloned() else {
        return Ok(Err("no basis".into()));
    };
    let repo = &ws.repo;
    // What the commit paths hold is the basis's; outside them, HEAD's.
    let (base, carried) = if basis.head_tree == head.tree {
        (basis.tree, basis.changes)
    } else if let Some(head_tree) = head.tree
        && same_under(repo, basis.tree, head_tree, paths)?
    {
        // HEAD moved to a commit of these very paths (the last snapshot,
        // committed): nothing differs from it yet.
        (head_tree, Vec::new())
    } else {
        return Ok(Err(
            "HEAD moved to a tree whose commit paths differ from the last snapshot's".into(),
        ));
    };
    if dirty.is_empty() {
        return Ok(Ok((base, carried)));
    }
    // HEAD's entries where the paths are read again: the read and the
    // diff need no others (looked up in HEAD's tree, never all of it).
    let dirty_str: Option<Vec<String>> = dirty
        .iter()
        .map(|d| d.to_str().ok().map(str::to_owned))
        .collect();
    let tracked = match dirty_str {
        Some(d) => std::sync::Arc::new(super::tracked_entries(repo, head.tree, &d)?),
        // A path that is not UTF-8: all of HEAD's entries (kept by the cache).
        None => cache.tracked(repo, head.tree, paths)?,
    };
    standing.forget_linked_under(dirty);
    let reads = Reads {
        cache: Some(cache),
        content_cap: None,
        skip_unchanged: false,
        watch: Some(standing as &dyn Watcher),
    };
    let mut found = Found::default();
    for d in dirty {
        let Some(path) = paths
            .iter()
            .find(|p| under(d.as_bstr(), p.as_bytes().as_bstr()))
        else {
            return Ok(Err(format!(
                "{d} is not under the commit paths (a watch out of place)"
            )));
        };
        let read = if d.as_slice() == path.as_bytes() {
            super::walk::read_path(&ws.root, &ws.common, path, &tracked, reads)?
        } else {
            super::walk::read_below(&ws.root, &ws.common, path, d.as_bstr(), &tracked, reads)?
        };
        if let Some(read) = read {
            found.items.extend(read.items);
        }
    }
    let items = found.items;
    let hash = repo.object_hash();
    let ids = items
        .iter()
        .map(|item| item.oid(hash))
        .collect::<Result<Vec<_>, _>>()?;
    let dirty_set: HashSet<&[u8]> = dirty.iter().map(|d| d.as_slice()).collect();
    let mut editor = repo.edit_tree(base).map_err(git("edit tree"))?;
    for d in dirty {
        editor
            .remove(d.as_bstr())
            .map_err(git("remove tree entry"))?;
    }
    // HEAD's gitlinks stay as they are (they are never read).
    for (path, (kind, id)) in tracked.iter() {
        if *kind == EntryKind::Commit && in_dirty(&dirty_set, path) {
            editor
                .upsert(path, *kind, *id)
                .map_err(git("add tree entry"))?;
        }
    }
    for (item, id) in items.iter().zip(&ids) {
        if item.known.is_none() && item.head.is_none_or(|(_, h)| h != *id) {
            repo.write_blob(&item.data).map_err(git("write blob"))?;
        } else if item.known.is_some() && !repo.has_object(*id) {
            return Err(CommitError::InvalidPrepared(format!(
                "the blob of {:?} vanished from the repository; read it again",
                item.path
            )));
        }
        editor
            .upsert(item.path.as_bstr(), item.kind.entry_kind(), *id)
            .map_err(git("add tree entry"))?;
    }
    let tree = editor.write().map_err(git("write tree"))?.detach();
    // The diff: the basis's outside what was read again, what was read
    // against HEAD's entries there.
    let unchanged: Vec<usize> = tracked
        .iter()
        .enumerate()
        .filter(|(_, (path, _))| !in_dirty(&dirty_set, path))
        .map(|(at, _)| at)
        .collect();
    let content = Snapshot {
        sections: vec![(String::new(), Some(items))],
        unchanged,
    };
    let fresh = super::changes::diff_content(repo, &tracked, &content, super::Detail::Hunks, None)?;
    let mut changes: Vec<FileChange> = carried
        .into_iter()
        .filter(|c| !in_dirty(&dirty_set, c.path.as_bstr()))
        .chain(fresh)
        .collect();
    order_as_walked(&mut changes);
    let bytes: usize = changes.iter().map(|c| c.hunks.len()).sum();
    if bytes > super::changes::MAX_DIFF_BYTES {
        return Err(CommitError::DiffTooLarge(super::changes::MAX_DIFF_BYTES));
    }
    remember(cache, &content);
    Ok(Ok((tree, changes)))
}

/// The order a full walk lists changes in: every file present, by path
/// as the walk meets them (a directory's names sorted, a directory's
/// files before the name after it), then the deleted ones, as `HEAD`'s
/// tree holds them.
fn order_as_walked(changes: &mut [FileChange]) {
    changes.sort_by_cached_key(|c| {
        let walked: Vec<u8> = c
            .path
            .iter()
            .map(|b| if *b == b'/' { 0 } else { *b })
            .collect();
        match c.kind {
            ChangeKind::Deleted => (1, git_order(c.path.as_bstr())),
            _ => (0, walked),
        }
    });
}

/// A path as git's tree order sorts it (a file's path as it is; git's
/// order of full paths is byte order).
fn git_order(path: &BStr) -> Vec<u8> {
    path.to_vec()
}

/// Whether `path` is one of `dirty` or below one (each of its parents
/// looked up: no scan of `dirty` per path).
fn in_dirty(dirty: &HashSet<&[u8]>, path: &BStr) -> bool {
    dirty.contains(path.as_bytes())
        || path
            .iter()
            .enumerate()
            .any(|(i, b)| *b == b'/' && dirty.contains(&path.as_bytes()[..i]))
}

/// Whether trees `a` and `b` hold the same entries at each of `paths`.
fn same_under(
    repo: &gix::Repository,
    a: ObjectId,
    b: ObjectId,
    paths: &[String],
) -> Result<bool, CommitError> {
    let (a, b) = (
        repo.find_tree(a).map_err(git("read tree"))?,
        repo.find_tree(b).map_err(git("read tree"))?,
    );
    for path in paths {
        let at = |tree: &gix::Tree<'_>| -> Result<Option<(EntryKind, ObjectId)>, CommitError> {
            Ok(tree
                .lookup_entry(path.split('/'))
                .map_err(git("read tree"))?
                .map(|e| (e.mode().kind(), e.object_id())))
        };
        if at(&a)? != at(&b)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The stat cache learns the files read again (the others' entries stay).
fn remember(cache: &mut StatCache, content: &Snapshot) {
    let items: Vec<&Item> = content.files().collect();
    cache.remember(&items);
}
