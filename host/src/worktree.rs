//! Host-owned checkouts of snapshot trees, where a commit policy's gates
//! run.
//!
//! Owns: one directory per workspace and concurrent use, under the
//! worktree root (`[daemon] worktree_dir`), leased to one gate run at a
//! time, and brought to exactly a given tree before the run: every file of
//! the tree with its content and mode, symlinks as symlinks, and nothing
//! else but the caches the operator granted (`[daemon] worktree_caches`,
//! such as `target`), and those only between runs of policies the
//! operator attached. What an earlier gate wrote anywhere else (an ignored
//! `__pycache__/`, a `.pytest_cache`) is removed before the next run, and
//! a policy the agent attached runs in worktrees of its own that keep
//! nothing: a gate's result depends only on its snapshot and the granted
//! caches, never on what another policy's gate (nor the agent's) left
//! behind. Incremental: a file is
//! rewritten only when the tree wants other content, or when it is not as
//! this module left it (its inode, size, mtime and ctime are remembered;
//! a gate can forge an mtime, not a ctime).
//!
//! Must never: follow a symbolic link found in a worktree (a gate may have
//! planted it: every step goes through a cap-std handle on the worktree,
//! which does not resolve outside it, and links are removed, not entered),
//! write outside the worktree root, or read the agent's workspace (the
//! content comes from the repository's objects, written by the snapshot).

use crate::commit::Stamp;
use cap_std::ambient_authority;
use cap_std::fs::{Dir, DirBuilder, OpenOptions, PermissionsExt};
use gix::ObjectId;
use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::EntryKind;
use rayon::prelude::*;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Why a worktree could not be brought to a tree.
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    #[error("the worktree root {path}: {source}")]
    Root {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading the snapshot from the repository: {0}")]
    Git(String),
    #[error("writing {path:?} in the worktree: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

fn io(path: &BStr) -> impl Fn(std::io::Error) -> WorktreeError + '_ {
    move |source| WorktreeError::Io {
        path: path.to_str_lossy().into_owned(),
        source,
    }
}

/// Whom a worktree serves, and so what it keeps between runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tenant {
    /// Policies the operator attached: the granted caches are kept
    /// between their runs (shared by the operator's policies of one
    /// workspace).
    Operator,
    /// Policies the agent attached: worktrees of their own, never the
    /// operator's, that keep nothing between runs.
    Agent,
}

/// What this module last wrote at a path, and how the file looked after.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Kept {
    kind: EntryKind,
    oid: ObjectId,
    stamp: Stamp,
}

/// What a worktree remembers between runs: what it wrote, and the last
/// tree it was brought to, read.
#[derive(Default)]
struct Manifest {
    kept: HashMap<BString, Kept>,
    last: Option<(ObjectId, Wanted)>,
}

/// What a sync did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SyncStats {
    /// Files and links written.
    pub written: usize,
    /// Files, links and directories removed (not in the tree, not a
    /// granted cache).
    pub removed: usize,
    /// Files left as they were.
    pub kept: usize,
}

/// The worktrees of one host. Cheap to clone.
#[derive(Clone)]
pub struct Worktrees {
    root: PathBuf,
    /// The gate user (`[sandbox] user`): owns the worktrees and what is
    /// written in them, so that its gates can write there.
    owner: Option<(u32, u32)>,
    /// The caches the operator granted (worktree-relative directories).
    caches: Arc<Vec<BString>>,
    /// By worktree directory: its manifest, or `None` while leased.
    slots: Arc<Mutex<HashMap<PathBuf, Option<Manifest>>>>,
}

/// One worktree, leased to one gate run; returned on drop.
pub struct Lease {
    path: PathBuf,
    manifest: Manifest,
    owner: Option<(u32, u32)>,
    /// What the sync keeps beyond the tree: the granted caches, or
    /// nothing.
    keep: Arc<Vec<BString>>,
    slots: Arc<Mutex<HashMap<PathBuf, Option<Manifest>>>>,
}

impl Lease {
    /// The worktree's directory (canonical).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.insert(self.path.clone(), Some(std::mem::take(&mut self.manifest)));
    }
}

impl Worktrees {
    /// Worktrees under `root` (made owner-only on first use).
    pub fn new(root: PathBuf) -> Worktrees {
        Worktrees {
            root,
            owner: None,
            caches: Arc::default(),
            slots: Arc::default(),
        }
    }

    /// Keeps `caches` (worktree-relative directories, checked by the
    /// configuration) between runs of the operator's policies.
    pub fn keeping(mut self, caches: &[String]) -> Worktrees {
        self.caches = Arc::new(caches.iter().map(|c| BString::from(c.as_str())).collect());
        self
    }

    /// Worktrees owned by `owner` (uid, gid): the root becomes searchable
    /// (not listable) by others, each worktree and everything written in
    /// it belongs to `owner`.
    pub fn owned_by(mut self, owner: Option<(u32, u32)>) -> Worktrees {
        self.owner = owner;
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A worktree for `workspace` that no other run holds, made if needed,
    /// among those of `tenant`.
    pub fn lease(&self, workspace: &Path, tenant: Tenant) -> Result<Lease, WorktreeError> {
        use std::os::unix::fs::DirBuilderExt;
        let root_err = |source| WorktreeError::Root {
            path: self.root.clone(),
            source,
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(if self.owner.is_some() { 0o711 } else { 0o700 })
            .create(&self.root)
            .map_err(root_err)?;
        let root = std::fs::canonicalize(&self.root).map_err(root_err)?;
        let key = hex::encode(&Sha256::digest(workspace.as_os_str().as_bytes())[..8]);
        let (class, keep) = match tenant {
            Tenant::Operator => ("", self.caches.clone()),
            Tenant::Agent => ("a", Arc::default()),
        };
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        for n in 0.. {
            let path = root.join(format!("{key}-{class}{n}"));
            let manifest = match slots.get_mut(&path) {
                Some(None) => continue,
                Some(slot) => slot.take().unwrap_or_default(),
                None => {
                    slots.insert(path.clone(), None);
                    Manifest::default()
                }
            };
            let made = match std::fs::DirBuilder::new().mode(0o755).create(&path) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                other => other,
            }
            .and_then(|()| match self.owner {
                Some((uid, gid)) => std::os::unix::fs::lchown(&path, Some(uid), Some(gid)),
                None => Ok(()),
            });
            if let Err(source) = made {
                slots.insert(path.clone(), Some(manifest));
                return Err(WorktreeError::Io {
                    path: path.display().to_string(),
                    source,
                });
            }
            return Ok(Lease {
                path,
                manifest,
                owner: self.owner,
                keep,
                slots: self.slots.clone(),
            });
        }
        unreachable!("an unbounded range always yields")
    }
}

/// Every blob, link and gitlink of `tree`, by path, and its directories.
struct Wanted {
    files: BTreeMap<BString, (EntryKind, ObjectId)>,
    dirs: BTreeSet<BString>,
}

fn wanted(repo: &gix::Repository, tree: ObjectId) -> Result<Wanted, WorktreeError> {
    let git = |e: &dyn std::fmt::Display| WorktreeError::Git(e.to_string());
    let tree = repo.find_tree(tree).map_err(|e| git(&e))?;
    let mut recorder = gix::traverse::tree::Recorder::default();
    tree.traverse()
        .breadthfirst(&mut recorder)
        .map_err(|e| git(&e))?;
    let mut files = BTreeMap::new();
    let mut dirs = BTreeSet::new();
    for entry in recorder.records {
        match entry.mode.kind() {
            EntryKind::Tree => {
                dirs.insert(entry.filepath);
            }
            // A submodule's place is an empty directory, as git checks it out.
            EntryKind::Commit => {
                dirs.insert(entry.filepath);
            }
            kind => {
                files.insert(entry.filepath, (kind, entry.oid));
            }
        }
    }
    Ok(Wanted { files, dirs })
}

/// Whether `rel` is a granted cache or lies inside one.
fn in_cache(keep: &[BString], rel: &BStr) -> bool {
    keep.iter()
        .any(|k| rel == k.as_bstr() || (rel.starts_with(k) && rel.get(k.len()) == Some(&b'/')))
}

/// Whether a granted cache lies inside the directory `rel`.
fn holds_cache(keep: &[BString], rel: &BStr) -> bool {
    keep.iter()
        .any(|k| k.starts_with(rel) && k.get(rel.len()) == Some(&b'/'))
}

fn join(prefix: &BStr, name: &[u8]) -> BString {
    let mut p = BString::from(prefix.to_vec());
    if !p.is_empty() {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

/// Removes whatever is at `name` in `dir` (a directory with its content),
/// never following a link.
fn remove_any(dir: &Dir, name: &OsStr, is_dir: bool, rel: &BStr) -> Result<(), WorktreeError> {
    if is_dir {
        dir.remove_dir_all(name).map_err(io(rel))
    } else {
        dir.remove_file(name).map_err(io(rel))
    }
}

/// What one directory of a worktree holds, against the tree.
#[derive(Default)]
struct Scan {
    /// Not in the tree and not a granted cache: to remove (`true`: a
    /// directory).
    remove: Vec<(BString, bool)>,
    /// In the tree but not as written: to write again.
    rewrite: Vec<BString>,
    /// As written, and still wanted.
    kept: Vec<BString>,
    /// The tree's directories found here, to read next.
    subdirs: Vec<BString>,
}

/// Reads the directory `prefix` of `root` (nothing is changed).
fn scan_dir(
    root: &Dir,
    prefix: &BString,
    wanted: &Wanted,
    keep: &[BString],
    manifest: &HashMap<BString, Kept>,
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
            Some((kind, oid)) => {
                let unchanged = manifest.get(&rel).is_some_and(|k| {
                    k.kind == *kind && k.oid == *oid && k.stamp == Stamp::of(&meta)
                });
                if unchanged {
                    scan.kept.push(rel);
                } else {
                    scan.rewrite.push(rel);
                }
            }
            None if in_cache(keep, rel.as_bstr()) => {}
            None => scan.remove.push((rel, false)),
        }
    }
    Ok(scan)
}

/// Brings `lease`'s directory to exactly `tree` of the repository at
/// `workspace` (see the module doc). Blocking: run it off the runtime.
pub fn sync(lease: &mut Lease, workspace: &Path, tree: &str) -> Result<SyncStats, WorktreeError> {
    // A linked worktree's git directories are checked as a commit's are.
    let repo = crate::commit::open_repository(workspace)
        .map_err(|e| WorktreeError::Git(format!("cannot open the repository: {e}")))?;
    let tree = ObjectId::from_hex(tree.as_bytes())
        .map_err(|e| WorktreeError::Git(format!("tree {tree:?}: {e}")))?;
    // The tree read last time is not read again.
    let wanted = match lease.manifest.last.take() {
        Some((id, wanted)) if id == tree => wanted,
        _ => wanted(&repo, tree)?,
    };
    let result = sync_to(lease, &repo, &wanted);
    if result.is_ok() {
        lease.manifest.last = Some((tree, wanted));
    } else {
        lease.manifest = Manifest::default();
    }
    result
}

fn sync_to(
    lease: &mut Lease,
    repo: &gix::Repository,
    wanted: &Wanted,
) -> Result<SyncStats, WorktreeError> {
    let root = Dir::open_ambient_dir(&lease.path, ambient_authority()).map_err(|source| {
        WorktreeError::Root {
            path: lease.path.clone(),
            source,
        }
    })?;
    let mut stats = SyncStats::default();
    let mut kept: HashSet<BString> = HashSet::new();
    let mut present_dirs: HashSet<BString> = HashSet::new();
    // 1. Remove what the tree does not hold (unless a granted cache) and
    //    what is no longer as this module left it: directories of one
    //    depth are read in parallel, then acted on.
    let keep = lease.keep.clone();
    let mut level: Vec<BString> = vec![BString::default()];
    while !level.is_empty() {
        let manifest = &lease.manifest.kept;
        let scans: Vec<Result<Scan, WorktreeError>> = level
            .par_iter()
            .map(|prefix| scan_dir(&root, prefix, wanted, &keep, manifest))
            .collect();
        let mut next = Vec::new();
        for scan in scans {
            let scan = scan?;
            for (rel, is_dir) in scan.remove {
                remove_any(&root, OsStr::from_bytes(&rel), is_dir, rel.as_bstr())?;
                lease.manifest.kept.remove(&rel);
                stats.removed += 1;
            }
            for rel in scan.rewrite {
                remove_any(&root, OsStr::from_bytes(&rel), false, rel.as_bstr())?;
                lease.manifest.kept.remove(&rel);
            }
            stats.kept += scan.kept.len();
            kept.extend(scan.kept);
            present_dirs.extend(scan.subdirs.iter().cloned());
            next.extend(scan.subdirs);
        }
        level = next;
    }
    lease.manifest.kept.retain(|p, _| kept.contains(p));
    // 2. Write what is missing: directories first, then files.
    let builder = {
        let mut b = DirBuilder::new();
        b.recursive(true);
        b
    };
    let owner = lease.owner;
    let chown = |rel: &BStr| -> Result<(), WorktreeError> {
        if let Some((uid, gid)) = owner {
            rustix::fs::chownat(
                &root,
                Path::new(OsStr::from_bytes(rel)),
                Some(rustix::fs::Uid::from_raw(uid)),
                Some(rustix::fs::Gid::from_raw(gid)),
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            )
            .map_err(|e| io(rel)(e.into()))?;
        }
        Ok(())
    };
    // Sorted: a parent comes before its children.
    for d in wanted.dirs.iter().filter(|d| !present_dirs.contains(*d)) {
        root.create_dir_with(OsStr::from_bytes(d), &builder)
            .map_err(io(d.as_bstr()))?;
        chown(d.as_bstr())?;
    }
    for (path, (kind, oid)) in &wanted.files {
        if kept.contains(path) {
            continue;
        }
        let name = Path::new(OsStr::from_bytes(path));
        let blob = repo
            .find_blob(*oid)
            .map_err(|e| WorktreeError::Git(e.to_string()))?;
        match kind {
            EntryKind::Link => {
                let target = Path::new(OsStr::from_bytes(&blob.data));
                root.symlink(target, name).map_err(io(path.as_bstr()))?;
            }
            _ => {
                let mut file = root
                    .open_with(name, OpenOptions::new().write(true).create_new(true))
                    .map_err(io(path.as_bstr()))?;
                file.write_all(&blob.data).map_err(io(path.as_bstr()))?;
                let mode = if *kind == EntryKind::BlobExecutable {
                    0o755
                } else {
                    0o644
                };
                file.set_permissions(cap_std::fs::Permissions::from_mode(mode))
                    .map_err(io(path.as_bstr()))?;
            }
        }
        chown(path.as_bstr())?;
        let meta = root.symlink_metadata(name).map_err(io(path.as_bstr()))?;
        lease.manifest.kept.insert(
            path.clone(),
            Kept {
                kind: *kind,
                oid: *oid,
                stamp: Stamp::of(&meta),
            },
        );
        stats.written += 1;
    }
    Ok(stats)
}

#[cfg(test)]
mod tests;
