//! Bringing a settled worktree from one tree to the next by their
//! difference alone.
//!
//! Owns: the tree diff between the tree a worktree holds and the next one
//! (equal subtrees skipped, so its cost follows what changed, not the
//! tree's size), and applying it: removing what went or changed, creating
//! the new directories, writing the new files.
//! Must never: be used on a worktree that is not known to hold exactly
//! its last tree (only [`super::settle`] makes one so), or touch a granted
//! cache (a difference that reaches one is left to the whole read).

use super::{Kept, Lease, SyncStats, Wanted, WorktreeError, checkout, holds_cache, in_cache};
use gix::ObjectId;
use gix::bstr::{BStr, BString, ByteSlice};
use gix::diff::tree::recorder::Change;
use gix::objs::tree::{EntryKind, EntryMode};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// What the difference asks of the worktree.
#[derive(Default)]
struct Plan {
    /// Paths to remove, and whether each is a directory.
    remove: Vec<(BString, bool)>,
    /// Directories to create.
    dirs: Vec<BString>,
    /// Files and links to write.
    write: Vec<(BString, EntryKind, ObjectId)>,
}

impl Plan {
    fn add(&mut self, path: BString, mode: EntryMode, oid: ObjectId) {
        match mode.kind() {
            // A submodule's place is an empty directory.
            EntryKind::Tree | EntryKind::Commit => self.dirs.push(path),
            kind => self.write.push((path, kind, oid)),
        }
    }

    fn remove(&mut self, path: BString, mode: EntryMode) {
        let is_dir = matches!(mode.kind(), EntryKind::Tree | EntryKind::Commit);
        self.remove.push((path, is_dir));
    }
}

/// The entries that differ between the trees `from` and `to`.
fn difference(
    repo: &gix::Repository,
    from: ObjectId,
    to: ObjectId,
) -> Result<Vec<Change>, WorktreeError> {
    let git = |e: &dyn std::fmt::Display| WorktreeError::Git(e.to_string());
    let lhs = repo.find_tree(from).map_err(|e| git(&e))?;
    let rhs = repo.find_tree(to).map_err(|e| git(&e))?;
    let kind = repo.object_hash();
    let mut recorder = gix::diff::tree::Recorder::default();
    gix::diff::tree(
        gix::objs::TreeRefIter::from_bytes(&lhs.data, kind),
        gix::objs::TreeRefIter::from_bytes(&rhs.data, kind),
        gix::diff::tree::State::default(),
        &repo.objects,
        &mut recorder,
    )
    .map_err(|e| git(&e))?;
    Ok(recorder.records)
}

fn plan(changes: Vec<Change>) -> Plan {
    let mut plan = Plan::default();
    for change in changes {
        match change {
            Change::Addition {
                entry_mode,
                oid,
                path,
                ..
            } => plan.add(path, entry_mode, oid),
            Change::Deletion {
                entry_mode, path, ..
            } => plan.remove(path, entry_mode),
            Change::Modification {
                previous_entry_mode,
                entry_mode,
                oid,
                path,
                ..
            } => match (previous_entry_mode.kind(), entry_mode.kind()) {
                // Their entries differ below (listed on their own), or a
                // submodule moved: its place stays an empty directory.
                (EntryKind::Tree, EntryKind::Tree) | (EntryKind::Commit, EntryKind::Commit) => {}
                _ => {
                    plan.remove(path.clone(), previous_entry_mode);
                    plan.add(path, entry_mode, oid);
                }
            },
        }
    }
    plan
}

/// Whether `path` lies under (or is) one of `dirs` (sorted).
fn under_any(dirs: &[BString], path: &BStr) -> bool {
    dirs.iter()
        .any(|d| path.len() > d.len() && path.starts_with(d.as_slice()) && path[d.len()] == b'/')
}

/// Brings `lease`'s settled worktree from the tree `from` (`wanted`) to
/// `to`, and `wanted` with it. `None` when the difference reaches a granted
/// cache (nothing is touched then: the caller reads the worktree whole).
pub(super) fn to_tree(
    lease: &mut Lease,
    repo: &gix::Repository,
    workspace: &std::path::Path,
    from: ObjectId,
    wanted: &mut Wanted,
    to: ObjectId,
) -> Result<Option<SyncStats>, WorktreeError> {
    let mut plan = plan(difference(repo, from, to)?);
    // Only what the worktree's view holds (its `wanted` holds no more).
    let view = &lease.view;
    plan.remove
        .retain(|(p, is_dir)| view.holds(p.as_bstr(), *is_dir));
    plan.dirs.retain(|p| view.holds(p.as_bstr(), true));
    plan.write.retain(|(p, ..)| view.holds(p.as_bstr(), false));
    let keep = lease.keep.clone();
    let touches_cache = |p: &BStr| in_cache(&keep, p) || holds_cache(&keep, p);
    if plan.remove.iter().any(|(p, _)| touches_cache(p.as_bstr()))
        || plan.dirs.iter().any(|p| touches_cache(p.as_bstr()))
        || plan.write.iter().any(|(p, ..)| touches_cache(p.as_bstr()))
    {
        return Ok(None);
    }
    let root = lease.open_root()?;
    let mut stats = SyncStats::default();
    // 1. What went or changed, the outermost only (a removed directory
    //    takes what it holds).
    plan.remove.sort();
    let removed_dirs: Vec<BString> = plan
        .remove
        .iter()
        .filter(|(_, is_dir)| *is_dir)
        .map(|(p, _)| p.clone())
        .collect();
    for (path, is_dir) in &plan.remove {
        if *is_dir {
            let prefix = {
                let mut p = path.clone();
                p.push(b'/');
                p
            };
            let gone: Vec<BString> = wanted
                .files
                .range(prefix.clone()..)
                .take_while(|(p, _)| p.starts_with(prefix.as_slice()))
                .map(|(p, _)| p.clone())
                .collect();
            for p in gone {
                wanted.files.remove(&p);
                lease.manifest.kept.remove(&p);
            }
            let gone: Vec<BString> = wanted
                .dirs
                .range(prefix.clone()..)
                .take_while(|p| p.starts_with(prefix.as_slice()))
                .cloned()
                .collect();
            for p in gone {
                wanted.dirs.remove(&p);
            }
            wanted.dirs.remove(path);
        } else {
            wanted.files.remove(path);
            lease.manifest.kept.remove(path);
        }
        if under_any(&removed_dirs, path.as_bstr()) {
            continue;
        }
        let name = OsStr::from_bytes(path);
        let gone = if *is_dir {
            root.remove_dir_all(name)
        } else {
            root.remove_file(name)
        };
        match gone {
            Ok(()) => stats.removed += 1,
            // Already gone with what held it (a link where a directory
            // was, say).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(super::io(path.as_bstr())(e)),
        }
    }
    // 2. The new directories, a parent before its children.
    plan.dirs.sort();
    checkout::make_dirs(&root, lease.owner, plan.dirs.iter())?;
    wanted.dirs.extend(plan.dirs);
    // 3. The new files.
    let files: Vec<(&BString, EntryKind, ObjectId)> =
        plan.write.iter().map(|(p, k, o)| (p, *k, *o)).collect();
    let written: HashMap<BString, Kept> =
        checkout::write_files(&root, workspace, lease.owner, &files)?
            .into_iter()
            .collect();
    stats.written = written.len();
    for (path, kind, oid) in plan.write {
        wanted.files.insert(path, (kind, oid));
    }
    lease.manifest.kept.extend(written);
    stats.kept = wanted.files.len() - stats.written;
    Ok(Some(stats))
}
