//! The snapshot a commit policy's gates judge, and the commit that is
//! exactly that snapshot.
//!
//! Owns: turning the current content of a policy's commit paths into git
//! objects once, before its gates run (the blobs, and the tree the commit
//! will have: `HEAD`'s tree with the commit paths taken from the workspace),
//! the diff of that tree against `HEAD` (what plugins and judges are
//! shown), the commit of exactly that tree on the parent it was taken on,
//! and which commit paths have changed in the workspace since.
//!
//! Must never: read the workspace when committing (the commit is the tree,
//! whatever the workspace holds by then), commit a snapshot on a branch
//! that moved since it was taken (that would undo the other commit), or run
//! any program.

use super::{
    CommitError, Committer, Prepared, StatCache, Workspace, check_message, git, normalise_paths,
    resolve_head, tracked_entries, write_commit, write_tree_with,
};
use crate::change::FileChange;
use gix::ObjectId;
use gix::bstr::ByteSlice;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::Path;

/// A snapshot taken for a gate run, stored with the policy's plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TreeSnapshot {
    /// The tree the commit will have (hex).
    pub tree: String,
    /// The commit the branch pointed at when it was taken (hex); `None`
    /// for an unborn branch.
    pub parent: Option<String>,
    /// The branch `HEAD` named, e.g. `refs/heads/main`.
    pub reference: String,
    /// The commit paths, normalised.
    pub paths: Vec<String>,
    /// The content's fingerprint (see [`super::fingerprint`]).
    pub fingerprint: String,
}

/// Reads the commit `paths` once, writes their blobs and the commit's tree
/// into the repository (no reference moves), and returns the snapshot with
/// its changes against `HEAD`, one entry per file.
pub fn snapshot(
    workspace: &Path,
    paths: &[String],
) -> Result<(TreeSnapshot, Result<Vec<FileChange>, String>), CommitError> {
    snapshot_with(workspace, paths, &mut StatCache::default())
}

/// [`snapshot`], files whose stamp `cache` knows unchanged taken from
/// their blob without being read; `cache` is refilled from this snapshot.
/// (A stale entry could only make the snapshot older than the workspace;
/// the gate still judges, and the commit still holds, the snapshot.)
pub fn snapshot_with(
    workspace: &Path,
    paths: &[String],
    cache: &mut StatCache,
) -> Result<(TreeSnapshot, Result<Vec<FileChange>, String>), CommitError> {
    snapshot_watched(workspace, paths, cache, None)
}

/// [`snapshot_with`], each directory it reads watched by `watch` before
/// it is listed: afterwards, [`super::Watch::unchanged`] says whether the
/// commit paths still hold what the snapshot took.
pub fn snapshot_watched(
    workspace: &Path,
    paths: &[String],
    cache: &mut StatCache,
    watch: Option<&super::Watch>,
) -> Result<(TreeSnapshot, Result<Vec<FileChange>, String>), CommitError> {
    let t0 = std::time::Instant::now();
    let ws = Workspace::open(workspace)?;
    let paths = normalise_paths(paths)?;
    let head = resolve_head(&ws.repo)?;
    take(
        &ws,
        paths,
        &head,
        cache,
        watch.map(|w| w as &dyn super::read::Watcher),
        t0,
    )
}

/// What a snapshot hands back: the snapshot, and its diff against `HEAD`
/// (or why that could not be made).
pub(super) type Taken = (TreeSnapshot, Result<Vec<FileChange>, String>);

/// [`snapshot_watched`] of the open workspace `ws` at `head`, by a full
/// walk of the (normalised) `paths`.
pub(super) fn take(
    ws: &Workspace,
    paths: Vec<String>,
    head: &super::Head,
    cache: &mut StatCache,
    watch: Option<&dyn super::read::Watcher>,
    t0: std::time::Instant,
) -> Result<Taken, CommitError> {
    let repo = &ws.repo;
    let mut times = [t0; 5];
    let mut counts = (0, 0);
    let made = (|| {
        times[1] = std::time::Instant::now();
        let tracked = cache.tracked(repo, head.tree, &paths)?;
        times[2] = std::time::Instant::now();
        // HEAD's files the cache vouches for are kept as paths: the tree
        // is HEAD's edited where the workspace differs.
        let content = super::read::read_snapshot_with(
            ws,
            &paths,
            &tracked,
            super::read::Reads {
                cache: Some(cache),
                content_cap: None,
                skip_unchanged: true,
                watch,
            },
        )?;
        times[3] = std::time::Instant::now();
        counts = (content.files().count(), content.unchanged.len());
        // What the tree is made of (HEAD's tree, the paths, what differs
        // from it); the same as last time, it is the same tree, already
        // written.
        let mut key = Sha256::new();
        key.update(
            head.tree
                .map(|t| t.to_hex().to_string())
                .unwrap_or_default(),
        );
        for p in &paths {
            key.update(p.as_bytes());
            key.update([0]);
        }
        let mut ids = Vec::new();
        for item in content.files() {
            let id = item.oid(repo.object_hash())?;
            key.update(&item.path);
            key.update([0, item.kind as u8]);
            key.update(id.as_bytes());
            ids.push(id);
        }
        key.update([1]);
        for (path, _) in content.deleted(&tracked) {
            key.update(path);
            key.update([0]);
        }
        let key: [u8; 32] = key.finalize().into();
        let tree = match cache.last_tree {
            Some((k, tree)) if k == key && repo.has_object(tree) => tree,
            _ => {
                let tree = write_tree_with(repo, head, &tracked, &content, &ids)?;
                cache.last_tree = Some((key, tree));
                tree
            }
        };
        times[4] = std::time::Instant::now();
        let _ = cache.refill_keeping(&content.unchanged, &tracked, content.files().zip(ids));
        Ok::<_, CommitError>((tracked, content, tree))
    })();
    let (tracked, content, tree) = match made {
        Ok(made) => made,
        Err(e) => {
            cache.clear();
            return Err(e);
        }
    };
    // Its diff, for plugins and judges: a path that cannot be given to a
    // plugin does not stop the snapshot (the gates may not be plugins).
    let changes =
        super::changes::diff_content(repo, &tracked, &content, super::Detail::Hunks, None)
            .map_err(|e| e.to_string());
    tracing::debug!(
        open_us = (times[1] - times[0]).as_micros(),
        tracked_us = (times[2] - times[1]).as_micros(),
        read_us = (times[3] - times[2]).as_micros(),
        tree_us = (times[4] - times[3]).as_micros(),
        refill_diff_us = times[4].elapsed().as_micros(),
        listed = counts.0,
        unchanged = counts.1,
        "snapshot"
    );
    let tree_hex = tree.to_hex().to_string();
    Ok((
        TreeSnapshot {
            fingerprint: fingerprint_of_tree(&tree_hex),
            tree: tree_hex,
            parent: head.commit.map(|c| c.to_hex().to_string()),
            reference: head.reference.as_bstr().to_string(),
            paths,
        },
        changes,
    ))
}

/// A snapshot's fingerprint: its tree id (which covers every path, mode
/// and byte) in the fingerprint's 64-hex form.
pub(super) fn fingerprint_of_tree(tree: &str) -> String {
    hex::encode(Sha256::digest(
        [b"gatehost-snapshot-v1\0".as_slice(), tree.as_bytes()].concat(),
    ))
}

fn object_id(hex: &str, what: &str) -> Result<ObjectId, CommitError> {
    ObjectId::from_hex(hex.as_bytes())
        .map_err(|e| CommitError::InvalidPrepared(format!("{what} {hex:?}: {e}")))
}

/// Writes the commit of exactly `snap`'s tree on its parent, moving no
/// reference. Refused with [`CommitError::RefMoved`] when the branch is no
/// longer where the snapshot was taken (the gate must judge again).
pub fn prepare_snapshot(
    workspace: &Path,
    snap: &TreeSnapshot,
    message: &str,
    who: &Committer,
) -> Result<Prepared, CommitError> {
    check_message(message)?;
    let ws = Workspace::open(workspace)?;
    let repo = &ws.repo;
    let head = resolve_head(repo)?;
    let reference = head.reference.as_bstr().to_string();
    let parent = head.commit.map(|c| c.to_hex().to_string());
    let moved = || CommitError::RefMoved {
        reference: snap.reference.clone(),
        expected: snap.parent.clone(),
        actual: if reference == snap.reference {
            parent.clone()
        } else {
            Some(reference.clone())
        },
    };
    if reference != snap.reference {
        return Err(moved());
    }
    let mut tree = object_id(&snap.tree, "snapshot tree")?;
    repo.find_tree(tree)
        .map_err(git("read the snapshot tree"))?;
    if parent != snap.parent {
        // Another commit landed since the snapshot (another policy's, say).
        // If it touched none of the commit paths, the judged content of
        // those paths is committed on it; if it did, the gate must judge
        // again.
        let old_tree = match &snap.parent {
            Some(c) => Some(
                repo.find_commit(object_id(c, "snapshot parent")?)
                    .map_err(git("read the snapshot's parent"))?
                    .tree_id()
                    .map_err(git("read the snapshot's parent"))?
                    .detach(),
            ),
            None => None,
        };
        if tracked_entries(repo, old_tree, &snap.paths)?
            != tracked_entries(repo, head.tree, &snap.paths)?
        {
            return Err(moved());
        }
        let judged = tracked_entries(repo, Some(tree), &snap.paths)?;
        let mut editor = match head.tree {
            Some(t) => repo.edit_tree(t).map_err(git("edit tree"))?,
            None => repo.empty_tree().edit().map_err(git("edit tree"))?,
        };
        for p in &snap.paths {
            editor.remove(p).map_err(git("remove tree entry"))?;
        }
        for (path, (kind, id)) in judged.iter() {
            editor
                .upsert(path, *kind, *id)
                .map_err(git("add tree entry"))?;
        }
        tree = editor.write().map_err(git("write tree"))?.detach();
        tracing::info!(%reference, "the branch moved since the snapshot without touching its paths: the judged paths are committed on it");
    }
    write_commit(
        repo,
        workspace,
        &head,
        tree,
        snap.paths.clone(),
        message,
        who,
    )
}

/// The files under `snap`'s commit paths whose content or mode in the
/// workspace now differs from the snapshot (added, changed or deleted
/// since), sorted. Nothing is written. The files `cache` vouches for as
/// the snapshot has them are only counted, never listed nor hashed (this
/// runs after every passing gate of a commit policy: at 100,000 files,
/// listing every file and comparing two maps of them was most of the
/// turn-end's time).
pub fn changed_since(
    workspace: &Path,
    snap: &TreeSnapshot,
    cache: Option<&StatCache>,
) -> Result<Vec<String>, CommitError> {
    let ws = Workspace::open(workspace)?;
    let repo = &ws.repo;
    let tree = object_id(&snap.tree, "snapshot tree")?;
    // A snapshot of nothing changed is HEAD's tree, whose entries the
    // cache keeps.
    let in_snapshot = match cache.and_then(|c| c.tracked_of(tree, &snap.paths)) {
        Some(kept) => kept,
        None => std::sync::Arc::new(tracked_entries(repo, Some(tree), &snap.paths)?),
    };
    let content = super::read::read_snapshot_with(
        &ws,
        &snap.paths,
        &in_snapshot,
        super::read::Reads {
            cache,
            content_cap: None,
            skip_unchanged: cache.is_some(),
            watch: None,
        },
    )?;
    let hash = repo.object_hash();
    let mut changed: Vec<String> = Vec::new();
    // Each file listed carries the snapshot's entry at its path (`head`,
    // looked up as it was read): added, or other content or mode.
    for item in content.files() {
        if item.head != Some((item.kind.entry_kind(), item.oid(hash)?)) {
            changed.push(item.path.to_str_lossy().into_owned());
        }
    }
    for (path, _) in content.deleted(&in_snapshot) {
        changed.push(path.to_str_lossy().into_owned());
    }
    changed.sort();
    changed.dedup();
    Ok(changed)
}
