//! Keeping `.git/index` in line with a published commit, for exactly the
//! committed paths, under `index.lock`.
//!
//! It owns the index update; it must never fail a publish (whatever goes
//! wrong is logged and leaves the index as it was).

use super::read::{is_dot_git, read_file};
use super::repo::{In, Record, Workspace, resolve_head, tracked_entries};
use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::EntryKind;
use gix::{ObjectId, Repository};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use tracing::{debug, warn};

/// Brings `.git/index` in line with the published `commit` for the committed paths.
/// Never fails the publish: whatever goes wrong or is refused is logged, and the index
/// is then left exactly as it was.
pub(super) fn sync_index(ws: &Workspace, record: &Record, commit: ObjectId) {
    match update_index(ws, record, commit) {
        Ok(IndexUpdate::Updated(n)) => {
            debug!(%commit, entries = n, "index updated for the committed paths");
        }
        Ok(IndexUpdate::Created) => debug!(%commit, "index created from the commit's tree"),
        Err(reason) => {
            warn!(%commit, %reason, "the index was left untouched; `git status` may show the committed paths as staged with their old content");
        }
    }
}

pub(super) enum IndexUpdate {
    /// An existing index was rewritten; the number of entries now set for the paths.
    Updated(usize),
    /// There was no index; one holding the commit's whole tree was written.
    Created,
}

/// The index, in the worktree's own git directory.
pub(super) const INDEX: &str = "index";

pub(super) fn update_index(
    ws: &Workspace,
    record: &Record,
    commit: ObjectId,
) -> Result<IndexUpdate, String> {
    let repo = &ws.repo;
    // Only when the work tree is still on this branch, at this commit.
    let head = resolve_head(repo).map_err(|e| format!("cannot read HEAD: {e}"))?;
    if head.reference != record.reference || head.commit != Some(commit) {
        return Err(format!(
            "HEAD no longer names {} at the published commit",
            record.reference.as_bstr()
        ));
    }
    let tree = head.tree.ok_or("the published commit has no tree")?;
    let index_path = ws.dirs.git_dir.join(INDEX);
    let shown = ws.label(In::Git, INDEX);
    // Held from before the read until the rename: git (or anyone honouring the lock)
    // cannot change the index in between. Dropping it removes `index.lock`.
    let lock = gix::lock::File::acquire_to_update_resource(
        &index_path,
        gix::lock::acquire::Fail::Immediately,
        None,
        0,
    )
    .map_err(|e| format!("cannot lock the index: {e}"))?;

    let meta = match ws.git.symlink_metadata(INDEX) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // No index yet (fresh repository): the commit's whole tree.
            let file = repo
                .index_from_tree(&tree)
                .map_err(|e| format!("cannot build an index from the tree: {e}"))?;
            commit_index(&file, lock)?;
            return Ok(IndexUpdate::Created);
        }
        Err(e) => return Err(format!("cannot stat {shown}: {e}")),
    };
    if meta.is_symlink() {
        return Err(format!("{shown} is a symlink, it is never followed"));
    }
    if !meta.is_file() {
        return Err(format!("{shown} is not a regular file"));
    }
    let (_, data) = read_file(
        &ws.git,
        OsStr::new(INDEX),
        &meta,
        INDEX.as_bytes().as_bstr(),
    )
    .map_err(|e| e.to_string())?;
    let hash = repo.object_hash();
    // The timestamp is only passed through, never written.
    let timestamp = gix::index::State::new(hash).timestamp();
    let options = gix::index::decode::Options {
        thread_limit: Some(1),
        ..Default::default()
    };
    let (mut state, checksum) = gix::index::State::from_bytes(&data, timestamp, hash, options)
        .map_err(|e| format!("cannot decode the index: {e}"))?;
    if let Some(expected) = checksum {
        let body = data
            .len()
            .checked_sub(hash.len_in_bytes())
            .and_then(|n| data.get(..n))
            .ok_or("the index is truncated")?;
        let mut hasher = gix::hash::hasher(hash);
        hasher.update(body);
        let actual = hasher
            .try_finalize()
            .map_err(|e| format!("cannot hash the index: {e}"))?;
        if actual != expected {
            return Err("the index checksum does not match its content".into());
        }
    }
    if state.link().is_some() {
        return Err("the index is split (core.splitIndex); not supported".into());
    }
    // Racy git: an entry whose file changed in the same second as the index
    // we read was "racily clean" there, and git checks such entries' content
    // rather than trusting their stat data. The index we write is newer, so
    // git would trust it and miss the change: smudge those entries (size 0),
    // as git does when it writes an index, so their content is checked again.
    if let Some(read_at) = meta
        .modified()
        .ok()
        .and_then(|t| t.into_std().duration_since(std::time::UNIX_EPOCH).ok())
    {
        for entry in state.entries_mut() {
            if u64::from(entry.stat.mtime.secs) >= read_at.as_secs() {
                entry.stat.size = 0;
            }
        }
    }
    if state.is_sparse() {
        return Err("the index is sparse (index.sparse); not supported".into());
    }

    let paths = if record.paths.is_empty() {
        changed_paths(repo, record.parent, tree)?
    } else {
        record.paths.clone()
    };
    let wanted = tracked_entries(repo, Some(tree), &paths).map_err(|e| e.to_string())?;
    for path in wanted.keys() {
        if path
            .split(|b| *b == b'/')
            .any(|c| c.is_empty() || c == b"." || c == b".." || is_dot_git(c))
        {
            return Err(format!("refusing to stage the path {path:?}"));
        }
    }
    // Files standing where the new entries need a directory are replaced too.
    let mut ancestors = BTreeSet::new();
    for path in wanted.keys() {
        for (i, b) in path.iter().enumerate() {
            if *b == b'/' {
                ancestors.insert(path[..i].as_bstr().to_owned());
            }
        }
    }
    let covered = |p: &BStr| -> bool {
        ancestors.contains(p)
            || paths.iter().any(|c| {
                let c = c.as_bytes();
                p.as_bytes() == c || (p.len() > c.len() && p.starts_with(c) && p[c.len()] == b'/')
            })
    };
    let unmerged = state
        .entries()
        .iter()
        .find(|e| e.stage() != gix::index::entry::Stage::Unconflicted && covered(e.path(&state)));
    if let Some(e) = unmerged {
        return Err(format!(
            "the index has unmerged entries for the committed path {:?}",
            e.path(&state)
        ));
    }
    state.remove_entries(|_, path, _| covered(path));
    for (path, (kind, id)) in wanted.iter() {
        state.dangerously_push_entry(
            gix::index::entry::Stat::default(),
            *id,
            gix::index::entry::Flags::empty(),
            (*kind).into(),
            path.as_bstr(),
        );
    }
    state.sort_entries();
    // The cached trees no longer describe the entries.
    state.remove_tree();
    let file = gix::index::File::from_state(state, index_path);
    commit_index(&file, lock)?;
    Ok(IndexUpdate::Updated(wanted.len()))
}

/// Writes `file` into the held `lock` (`index.lock`) and renames it over the index.
pub(super) fn commit_index(
    file: &gix::index::File,
    mut lock: gix::lock::File,
) -> Result<(), String> {
    use std::io::Write as _;
    let mut bytes = Vec::new();
    file.write_to(&mut bytes, Default::default())
        .map_err(|e| format!("cannot encode the index: {e}"))?;
    lock.write_all(&bytes)
        .map_err(|e| format!("cannot write index.lock: {e}"))?;
    lock.commit()
        .map_err(|e| format!("cannot rename index.lock over the index: {}", e.error))?;
    Ok(())
}

/// For records without paths: every file path whose entry differs between the
/// parent's tree and `tree`.
pub(super) fn changed_paths(
    repo: &Repository,
    parent: Option<ObjectId>,
    tree: ObjectId,
) -> Result<Vec<String>, String> {
    let files = |tree: ObjectId| -> Result<BTreeMap<BString, (EntryKind, ObjectId)>, String> {
        let tree = repo.find_tree(tree).map_err(|e| e.to_string())?;
        let mut out = BTreeMap::new();
        for record in tree
            .traverse()
            .breadthfirst
            .files()
            .map_err(|e| e.to_string())?
        {
            if record.mode.kind() != EntryKind::Tree {
                out.insert(record.filepath, (record.mode.kind(), record.oid));
            }
        }
        Ok(out)
    };
    let old = match parent {
        Some(parent) => {
            let tree = repo
                .find_commit(parent)
                .map_err(|e| e.to_string())?
                .tree_id()
                .map_err(|e| e.to_string())?
                .detach();
            files(tree)?
        }
        None => BTreeMap::new(),
    };
    let new = files(tree)?;
    let mut out = BTreeSet::new();
    for (path, entry) in &old {
        if new.get(path) != Some(entry) {
            out.insert(path.clone());
        }
    }
    for path in new.keys() {
        if !old.contains_key(path) {
            out.insert(path.clone());
        }
    }
    out.into_iter()
        .map(|p| {
            // Checked for `.git` and `..` components with the other staged paths.
            String::from_utf8(p.into()).map_err(|_| "a changed path is not UTF-8".to_owned())
        })
        .collect()
}
