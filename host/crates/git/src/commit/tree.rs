//! The tree a commit or a snapshot gets: `HEAD`'s tree with the commit
//! paths taken from what was read of the workspace.
//!
//! Owns: writing the blobs read and the trees above what changed, by
//! editing `HEAD`'s tree where the workspace differs from it (so that an
//! unchanged subtree is never rewritten), and which of `HEAD`'s files the
//! read found gone. Must never: drop a gitlink (they are not read from the
//! workspace; `HEAD`'s are kept), or take a blob id it did not write or
//! find in the repository.

use super::CommitError;
use super::read::Snapshot;
use super::repo::{Head, git};
use super::tracked::Tracked;
use gix::bstr::{BStr, ByteSlice};
use gix::objs::tree::EntryKind;
use gix::{ObjectId, Repository};

impl Snapshot {
    /// `HEAD`'s entries under the read paths (`tracked`), other than
    /// gitlinks, that the read found neither listed nor unchanged: gone
    /// from the workspace. Counted first: when every entry was seen,
    /// nothing is looked up.
    pub(super) fn deleted<'a>(
        &self,
        tracked: &'a Tracked,
    ) -> Vec<(&'a BStr, &'a (EntryKind, ObjectId))> {
        let gitlinks = || {
            tracked
                .values()
                .filter(|(k, _)| *k == EntryKind::Commit)
                .count()
        };
        // Each file is listed once; `head` was looked up as it was read.
        let present = self.unchanged.len()
            + self
                .files()
                .filter(|item| item.head.is_some_and(|(k, _)| k != EntryKind::Commit))
                .count();
        if present + gitlinks() == tracked.len() {
            return Vec::new();
        }
        // By index in `tracked` (the unchanged files are kept by theirs).
        let mut seen = vec![false; tracked.len()];
        let listed = self.files().filter_map(|item| tracked.get_at(&item.path));
        for at in self
            .unchanged
            .iter()
            .copied()
            .chain(listed.map(|(at, _)| at))
        {
            if let Some(s) = seen.get_mut(at) {
                *s = true;
            }
        }
        tracked
            .iter()
            .zip(seen)
            .filter(|((_, (kind, _)), seen)| *kind != EntryKind::Commit && !seen)
            .map(|(entry, _)| entry)
            .collect()
    }
}

/// Writes the blobs of `content` and the tree `HEAD`'s tree becomes with
/// the read paths taken from it (gitlinks kept as in `HEAD`); returns the
/// tree.
pub(super) fn write_tree(
    repo: &Repository,
    head: &Head,
    tracked: &Tracked,
    content: &Snapshot,
) -> Result<ObjectId, CommitError> {
    let hash = repo.object_hash();
    let ids = content
        .files()
        .map(|item| item.oid(hash))
        .collect::<Result<Vec<_>, _>>()?;
    write_tree_with(repo, head, tracked, content, &ids)
}

/// [`write_tree`], given the blob id of every file listed (`ids`, in the
/// order of [`Snapshot::files`]); only the blobs that are neither `HEAD`'s
/// nor known are written. `HEAD`'s tree is edited only where the content
/// differs from it: its gone files removed, the listed files whose blob or
/// mode is not `HEAD`'s put in (the files left unlisted as `HEAD`'s stay
/// as they are).
pub(super) fn write_tree_with(
    repo: &Repository,
    head: &Head,
    tracked: &Tracked,
    content: &Snapshot,
    ids: &[ObjectId],
) -> Result<ObjectId, CommitError> {
    let mut editor = match head.tree {
        Some(tree) => repo.edit_tree(tree).map_err(git("edit tree"))?,
        None => repo.empty_tree().edit().map_err(git("edit tree"))?,
    };
    // Removed first: a file may take the place of a directory that went.
    for (path, _) in content.deleted(tracked) {
        editor
            .remove(path.as_bstr())
            .map_err(git("remove tree entry"))?;
    }
    for (item, &id) in content.files().zip(ids) {
        match item.known {
            // HEAD's blob: in the repository for good.
            _ if item.head.is_some_and(|(_, head)| head == id) => {}
            // Vouched for by the stat cache: the blob was written when the
            // file was read (checked, in case a `git gc` pruned it since).
            Some(_) if repo.has_object(id) => {}
            Some(_) => {
                return Err(CommitError::InvalidPrepared(format!(
                    "the blob of {:?} vanished from the repository; read it again",
                    item.path
                )));
            }
            None => {
                repo.write_blob(&item.data).map_err(git("write blob"))?;
            }
        }
        let kind = item.kind.entry_kind();
        if item.head != Some((kind, id)) {
            editor
                .upsert(item.path.clone(), kind, id)
                .map_err(git("add tree entry"))?;
        }
    }
    Ok(editor.write().map_err(git("write tree"))?.detach())
}
