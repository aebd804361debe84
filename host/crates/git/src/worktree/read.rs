//! Reading a worktree whole and bringing it to a tree: what a sync of a
//! worktree not known settled does, and what a settle does, by steps.
//!
//! Owns: the read of each directory, one depth at a time in parallel
//! (nothing is changed while reading), what is acted on after (removed,
//! written again, written), and a settle's checkpoints between its steps.
//! Must never: follow a link found in the worktree (every step goes through
//! the cap-std handle on it), or change the worktree while a settle's
//! manifest is parked (a run may own it by then).

use super::{
    Lease, Stamp, SyncStats, Wanted, WorktreeError, checkout, holds_cache, in_cache, io, join,
    remove_any, settle,
};
use cap_std::fs::Dir;
use gix::ObjectId;
use gix::bstr::{BString, ByteSlice};
use gix::objs::tree::EntryKind;
use rayon::prelude::*;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// What one directory of a worktree holds, against the tree.
#[derive(Default)]
struct Scan {
    /// Not in the tree and not a granted cache: to remove (`true`: a
    /// directory).
    remove: Vec<(BString, bool)>,
    /// The tree's files found here, and how each looks (kept if as this
    /// module wrote it, else written again).
    present: Vec<(BString, Stamp)>,
    /// The tree's directories found here, to read next.
    subdirs: Vec<BString>,
}

/// Reads the directory `prefix` of `root` (nothing is changed).
fn scan_dir(
    root: &Dir,
    prefix: &BString,
    wanted: &Wanted,
    keep: &[BString],
) -> Result<Scan, WorktreeError> {
    let dir = if prefix.is_empty() {
        root.try_clone().map_err(io(b"".as_bstr()))?
    } else {
        root.open_dir(OsStr::from_bytes(prefix))
            .map_err(io(prefix.as_bstr()))?
    };
    let mut scan = Scan::default();
    for entry in dir.entries().map_err(io(prefix.as_bstr()))? {
        let entry = entry.map_err(io(prefix.as_bstr()))?;
        let name = entry.file_name();
        let rel = join(prefix.as_bstr(), name.as_bytes());
        let meta = dir.symlink_metadata(&name).map_err(io(rel.as_bstr()))?;
        let file_type = meta.file_type();
        if file_type.is_dir() {
            if wanted.dirs.contains(&rel) || holds_cache(keep, rel.as_bstr()) {
                scan.subdirs.push(rel);
            } else if !in_cache(keep, rel.as_bstr()) {
                scan.remove.push((rel, true));
            }
            continue;
        }
        match wanted.files.get(&rel) {
            Some(_) => scan.present.push((rel, Stamp::of(&meta))),
            None if in_cache(keep, rel.as_bstr()) => {}
            None => scan.remove.push((rel, false)),
        }
    }
    Ok(scan)
}

/// Why [`sync_to`] stopped short.
pub(super) enum Stop {
    Failed(WorktreeError),
    /// A settle handed its worktree over to a run (see [`settle`]).
    Yielded,
}

impl From<WorktreeError> for Stop {
    fn from(e: WorktreeError) -> Stop {
        Stop::Failed(e)
    }
}

/// Reads the worktree whole and brings it to `wanted`. A settle's
/// (`settler`) steps are one directory each, with a checkpoint before
/// each: its manifest is parked in the lease's slot while the directories
/// of one depth are read (nothing is changed then), and taken back to act
/// on each.
pub(super) fn sync_to(
    lease: &mut Lease,
    workspace: &Path,
    wanted: &Wanted,
    settler: Option<&settle::Settler>,
) -> Result<SyncStats, Stop> {
    let root = lease.open_root()?;
    let mut stats = SyncStats::default();
    let mut kept: HashSet<BString> = HashSet::new();
    let mut present_dirs: HashSet<BString> = HashSet::new();
    // 1. Remove what the tree does not hold (unless a granted cache) and
    //    what is no longer as this module left it: directories of one
    //    depth are read in parallel, then acted on.
    let keep = lease.keep.clone();
    let mut level: Vec<BString> = vec![BString::default()];
    while !level.is_empty() {
        if let Some(s) = settler {
            s.park(lease);
        }
        let scans: Vec<Result<Scan, Stop>> = level
            .par_iter()
            .map(|prefix| {
                if let Some(s) = settler {
                    s.pause()?;
                }
                Ok(scan_dir(&root, prefix, wanted, &keep)?)
            })
            .collect();
        if let Some(s) = settler {
            s.unpark(lease)?;
        }
        let mut next = Vec::new();
        for scan in scans {
            let scan = scan?;
            if let Some(s) = settler {
                s.step(lease)?;
            }
            for (rel, is_dir) in scan.remove {
                remove_any(&root, OsStr::from_bytes(&rel), is_dir, rel.as_bstr())?;
                lease.manifest.kept.remove(&rel);
                stats.removed += 1;
            }
            for (rel, stamp) in scan.present {
                let as_written = lease.manifest.kept.get(&rel).is_some_and(|k| {
                    k.stamp == stamp && wanted.files.get(&rel) == Some(&(k.kind, k.oid))
                });
                if as_written {
                    stats.kept += 1;
                    kept.insert(rel);
                } else {
                    remove_any(&root, OsStr::from_bytes(&rel), false, rel.as_bstr())?;
                    lease.manifest.kept.remove(&rel);
                }
            }
            present_dirs.extend(scan.subdirs.iter().cloned());
            next.extend(scan.subdirs);
        }
        level = next;
    }
    if let Some(s) = settler {
        s.step(lease)?;
    }
    lease.manifest.kept.retain(|p, _| kept.contains(p));
    // 2. Write what is missing: directories first (sorted: a parent
    //    comes before its children), then files.
    let owner = lease.owner;
    checkout::make_dirs(
        &root,
        owner,
        wanted.dirs.iter().filter(|d| !present_dirs.contains(*d)),
    )?;
    let missing: Vec<(&BString, EntryKind, ObjectId)> = wanted
        .files
        .iter()
        .filter(|(path, _)| !kept.contains(*path))
        .map(|(path, (kind, oid))| (path, *kind, *oid))
        .collect();
    let written = checkout::write_files(&root, workspace, owner, &missing)?;
    stats.written += written.len();
    lease.manifest.kept.extend(written);
    Ok(stats)
}
