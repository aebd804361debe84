//! Writing a tree's directories, files and links into a worktree: the
//! files in parallel, each blob read from the repository's objects by the
//! thread that writes it.
//!
//! Owns: creating what a sync decided is missing, owned by the gate user
//! when there is one, and remembering how each file looked once written.
//! Must never: replace or follow what is already there (a file is created
//! new, never opened if present; the caller removed what was in the way),
//! or write outside the worktree's handle.

use super::{Kept, WorktreeError, io};
use crate::commit::Stamp;
use cap_std::fs::{Dir, DirBuilder, OpenOptions, PermissionsExt};
use gix::ObjectId;
use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::EntryKind;
use rayon::prelude::*;
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Files handed to one writing task at a time (each task opens its own
/// view of the repository).
const CHUNK: usize = 64;

fn ids(owner: (u32, u32)) -> (rustix::fs::Uid, rustix::fs::Gid) {
    (
        rustix::fs::Uid::from_raw(owner.0),
        rustix::fs::Gid::from_raw(owner.1),
    )
}

/// Gives `rel` (never followed if a link) to `owner`, if any.
pub(super) fn chown_at(
    root: &Dir,
    owner: Option<(u32, u32)>,
    rel: &BStr,
) -> Result<(), WorktreeError> {
    if let Some(owner) = owner {
        let (uid, gid) = ids(owner);
        rustix::fs::chownat(
            root,
            Path::new(OsStr::from_bytes(rel)),
            Some(uid),
            Some(gid),
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(|e| io(rel)(e.into()))?;
    }
    Ok(())
}

/// Creates `dirs` (a parent before its children) with their parents.
pub(super) fn make_dirs<'a>(
    root: &Dir,
    owner: Option<(u32, u32)>,
    dirs: impl Iterator<Item = &'a BString>,
) -> Result<(), WorktreeError> {
    let mut builder = DirBuilder::new();
    builder.recursive(true);
    for d in dirs {
        root.create_dir_with(OsStr::from_bytes(d), &builder)
            .map_err(io(d.as_bstr()))?;
        chown_at(root, owner, d.as_bstr())?;
    }
    Ok(())
}

/// Writes each of `files` (their directories exist, nothing is at their
/// path) from the objects of the repository at `workspace`, in parallel
/// (each task opens the repository: its handles are not shared between
/// threads); how each looks once written.
pub(super) fn write_files(
    root: &Dir,
    workspace: &Path,
    owner: Option<(u32, u32)>,
    files: &[(&BString, EntryKind, ObjectId)],
) -> Result<Vec<(BString, Kept)>, WorktreeError> {
    if files.is_empty() {
        return Ok(Vec::new());
    }
    let open = || {
        crate::commit::open_repository(workspace)
            .map_err(|e| WorktreeError::Git(format!("cannot open the repository: {e}")))
    };
    let written: Vec<Vec<(BString, Kept)>> = files
        .par_chunks(CHUNK)
        .map_init(open, |repo, chunk| {
            let repo = repo
                .as_ref()
                .map_err(|e| WorktreeError::Git(e.to_string()))?;
            chunk
                .iter()
                .map(|(path, kind, oid)| {
                    let stamp = write_one(root, repo, owner, path.as_bstr(), *kind, *oid)?;
                    Ok((
                        (*path).clone(),
                        Kept {
                            kind: *kind,
                            oid: *oid,
                            stamp,
                        },
                    ))
                })
                .collect::<Result<Vec<_>, WorktreeError>>()
        })
        .collect::<Result<_, WorktreeError>>()?;
    Ok(written.into_iter().flatten().collect())
}

/// Writes one file or link; its stamp once written (and owned).
fn write_one(
    root: &Dir,
    repo: &gix::Repository,
    owner: Option<(u32, u32)>,
    path: &BStr,
    kind: EntryKind,
    oid: ObjectId,
) -> Result<Stamp, WorktreeError> {
    let name = Path::new(OsStr::from_bytes(path));
    let blob = repo
        .find_blob(oid)
        .map_err(|e| WorktreeError::Git(e.to_string()))?;
    if kind == EntryKind::Link {
        let target = Path::new(OsStr::from_bytes(&blob.data));
        root.symlink(target, name).map_err(io(path))?;
        chown_at(root, owner, path)?;
        let meta = root.symlink_metadata(name).map_err(io(path))?;
        return Ok(Stamp::of(&meta));
    }
    let mut file = root
        .open_with(name, OpenOptions::new().write(true).create_new(true))
        .map_err(io(path))?;
    file.write_all(&blob.data).map_err(io(path))?;
    let mode = if kind == EntryKind::BlobExecutable {
        0o755
    } else {
        0o644
    };
    file.set_permissions(cap_std::fs::Permissions::from_mode(mode))
        .map_err(io(path))?;
    if let Some(owner) = owner {
        let (uid, gid) = ids(owner);
        rustix::fs::fchown(&file, Some(uid), Some(gid)).map_err(|e| io(path)(e.into()))?;
    }
    // The file's own descriptor: its stamp after the last change made to
    // it (the ownership changes its ctime).
    let meta = file.metadata().map_err(io(path))?;
    Ok(Stamp::of(&meta))
}
