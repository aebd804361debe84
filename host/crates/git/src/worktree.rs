//! Host-owned checkouts of snapshot trees, where a commit policy's gates
//! run.
//!
//! Owns: one directory per workspace and concurrent use, under the
//! worktree root (`[daemon] worktree_dir`), leased to one gate run at a
//! time, and brought to exactly a given tree before the run: every file of
//! the tree with its content and mode, symlinks as symlinks, and nothing
//! else but the caches the operator granted (`[daemon] worktree_caches`,
//! such as `target`), and those only between runs of policies the
//! operator attached on the same tree (a retry, a second gate of the same
//! snapshot): a sync to another tree empties them, since what a gate
//! wrote there is the agent's code's doing. What an earlier gate wrote anywhere else (an ignored
//! `__pycache__/`, a `.pytest_cache`) is removed before the next run, and
//! a policy the agent attached runs in worktrees of its own that keep
//! nothing: a gate's result depends only on its snapshot and the granted
//! caches, never on what another policy's gate (nor the agent's) left
//! behind. Incremental: a file is
//! rewritten only when the tree wants other content, or when it is not as
//! this module left it (its inode, size, mtime and ctime are remembered;
//! a gate can forge an mtime, not a ctime). A run whose gates all saw the
//! worktree through an overlay of their own ([`Lease::layers`],
//! [`Lease::overlaid`]) left it as the sync made it: it is settled at
//! once. After any other run the worktree is read whole
//! (every entry stat'ed) either before the next run, or right after a run
//! ([`settle`], off the turn-end's path): a worktree settled since its last
//! run is brought to the next tree by touching only the paths whose entry
//! differs between the two trees (a tree diff that skips equal subtrees),
//! nothing at all when the tree is the same. What `settle` trusts: that
//! nothing writes a worktree between the end of a run and the next lease
//! (the gates' processes are gone when their run returns, see
//! `supervise`; no other run holds the lease). The settle never holds a
//! run back (see [`settle`]'s module): it pauses while the host is
//! [`Worktrees::busy`], and a run on the same workspace takes its
//! worktree over, unsettled (read whole), rather than waiting for it.
//!
//! Must never: follow a symbolic link found in a worktree (a gate may have
//! planted it: every step goes through a cap-std handle on the worktree,
//! which does not resolve outside it, and links are removed, not entered),
//! write outside the worktree root, or read the agent's workspace (the
//! content comes from the repository's objects, written by the snapshot).

use crate::commit::Stamp;
use cap_std::fs::Dir;
use gix::ObjectId;
use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::EntryKind;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

mod apply;
mod checkout;
mod layers;
mod read;
mod settle;
mod view;

pub use layers::Layers;
use read::{Stop, sync_to};
pub use settle::{Busy, Settled, settle, settle_in_background};
pub use view::View;

/// Why a worktree could not be brought to a tree.
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    /// The worktrees' root (or a worktree's directory in it) could not be
    /// made, opened or locked.
    #[error("the worktree root {path}: {source}")]
    Root {
        /// The directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The snapshot's tree or blobs could not be read from the
    /// repository: gix's message.
    #[error("reading the snapshot from the repository: {0}")]
    Git(String),
    /// Writing or removing a file of the worktree failed.
    #[error("writing {path:?} in the worktree: {source}")]
    Io {
        /// The path, worktree-relative.
        path: String,
        /// The operating system's error.
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
    /// Shared with a settle in progress, which reads it.
    last: Option<(ObjectId, Arc<Wanted>)>,
    /// Read whole and brought to `last` after its last run ([`settle`]),
    /// nothing synced or run since: the next sync trusts `kept`.
    settled: bool,
}

/// A worktree directory's state among the host's.
enum Slot {
    /// Between runs: what it holds.
    Free(Manifest),
    /// Held by a [`Lease`].
    Leased,
    /// Held by a lease that is settling it ([`settle`]). A run on the
    /// same workspace takes it over rather than waiting: at once when its
    /// manifest is `parked` here (the settle is paused, or only reads);
    /// else it sets `stop` and waits for the settle's step in progress to
    /// end (it changes the worktree, with the manifest in hand).
    Settling {
        parked: Option<Manifest>,
        stop: Arc<AtomicBool>,
    },
}

/// How long a lease waits for a settle's step in progress before taking
/// another worktree (a step is one directory's changes, or the writing of
/// what a run removed: far less, but a stuck disk must not hold a run).
const SETTLE_WAIT: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Slots {
    map: Mutex<HashMap<PathBuf, Slot>>,
    /// Notified whenever a lease is returned, a settle parks its manifest,
    /// is asked to stop, or the host is no longer busy.
    returned: Condvar,
    /// Leases waiting for a settling worktree (seen by the tests).
    waiting: AtomicUsize,
    /// [`Busy`] guards alive: gates running, turn-ends being judged.
    busy: AtomicUsize,
    /// Settles paused for the host's work (seen by the tests).
    paused: AtomicUsize,
    /// A test's hook, called at every checkpoint of a settle.
    #[cfg(test)]
    #[allow(clippy::type_complexity)]
    checkpoint: Mutex<Option<Box<dyn FnMut(&Slots) + Send>>>,
}

impl Slots {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Slot>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }
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
    /// By worktree directory: its manifest, or whether it is leased.
    slots: Arc<Slots>,
}

/// One worktree, leased to one gate run; returned on drop.
pub struct Lease {
    path: PathBuf,
    manifest: Manifest,
    owner: Option<(u32, u32)>,
    /// What the sync keeps beyond the tree: the granted caches, or
    /// nothing.
    keep: Arc<Vec<BString>>,
    /// What of a tree it holds (a worktree only ever holds one view).
    view: View,
    slots: Arc<Slots>,
    /// A settle that yielded: the worktree and its manifest are another
    /// lease's now.
    handed_over: bool,
}

impl Lease {
    /// The worktree's directory (canonical).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The worktree's directory, opened: every step of a sync or a read
    /// goes through this handle (it never resolves outside the worktree).
    fn open_root(&self) -> Result<Dir, WorktreeError> {
        Dir::open_ambient_dir(&self.path, cap_std::ambient_authority()).map_err(|source| {
            WorktreeError::Root {
                path: self.path.clone(),
                source,
            }
        })
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.handed_over {
            // A run holds the worktree now (see [`settle`]).
            return;
        }
        let manifest = std::mem::take(&mut self.manifest);
        self.slots
            .lock()
            .insert(self.path.clone(), Slot::Free(manifest));
        self.slots.returned.notify_all();
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

    /// The directory the worktrees are made in.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A worktree for `workspace` that no other run holds, made if needed,
    /// among those of `tenant`.
    pub fn lease(&self, workspace: &Path, tenant: Tenant) -> Result<Lease, WorktreeError> {
        self.lease_view(workspace, tenant, View::whole())
    }

    /// [`Worktrees::lease`] of a worktree that holds only `view` of the
    /// trees it is synced to (its own directories: never one of another
    /// view).
    pub fn lease_view(
        &self,
        workspace: &Path,
        tenant: Tenant,
        view: View,
    ) -> Result<Lease, WorktreeError> {
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
        let deadline = Instant::now() + SETTLE_WAIT;
        let mut slots = self.slots.lock();
        let (path, manifest) = loop {
            let waiting = Instant::now() < deadline;
            let slot = |n| root.join(format!("{key}-{class}{}{n}", view.key()));
            match choose(&slots, slot, waiting) {
                Choice::Take(path) => {
                    let Some(Slot::Free(manifest)) = slots.insert(path.clone(), Slot::Leased)
                    else {
                        unreachable!("chosen as free")
                    };
                    break (path, manifest);
                }
                Choice::New(path) => {
                    slots.insert(path.clone(), Slot::Leased);
                    break (path, Manifest::default());
                }
                Choice::TakeOver(path) => {
                    let Some(Slot::Settling {
                        parked: Some(mut manifest),
                        stop,
                    }) = slots.insert(path.clone(), Slot::Leased)
                    else {
                        unreachable!("chosen as parked")
                    };
                    stop.store(true, SeqCst);
                    // Never trusted: the settle did not finish.
                    manifest.settled = false;
                    self.slots.returned.notify_all();
                    tracing::debug!(worktree = %path.display(), "a settle in progress yields its worktree to a run");
                    break (path, manifest);
                }
                Choice::Wait(path) => {
                    if let Some(Slot::Settling { stop, .. }) = slots.get(&path) {
                        stop.store(true, SeqCst);
                    }
                    let wait = deadline.saturating_duration_since(Instant::now());
                    self.slots.waiting.fetch_add(1, SeqCst);
                    slots = self
                        .slots
                        .returned
                        .wait_timeout(slots, wait)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                    self.slots.waiting.fetch_sub(1, SeqCst);
                }
            }
        };
        drop(slots);
        let made = match std::fs::DirBuilder::new().mode(0o755).create(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            other => other,
        }
        .and_then(|()| match self.owner {
            Some((uid, gid)) => std::os::unix::fs::lchown(&path, Some(uid), Some(gid)),
            None => Ok(()),
        });
        if let Err(source) = made {
            self.slots.lock().insert(path.clone(), Slot::Free(manifest));
            self.slots.returned.notify_all();
            return Err(WorktreeError::Io {
                path: path.display().to_string(),
                source,
            });
        }
        Ok(Lease {
            path,
            manifest,
            owner: self.owner,
            keep,
            view,
            slots: self.slots.clone(),
            handed_over: false,
        })
    }

    /// Marks the host busy while the guard lives: a gate runs, or a
    /// turn-end is being snapshotted and judged. Settles in progress pause
    /// at their next step meanwhile (see [`settle`]).
    pub fn busy(&self) -> Busy {
        Busy::new(self.slots.clone())
    }
}

/// Which worktree a lease gets.
#[derive(Debug, PartialEq, Eq)]
enum Choice {
    /// This free one.
    Take(PathBuf),
    /// A new one, at this path.
    New(PathBuf),
    /// This settling one, its manifest parked: taken from the settle.
    TakeOver(PathBuf),
    /// None is free but this one is settling, in a step: ask it to stop,
    /// and wait for it.
    Wait(PathBuf),
}

/// The first free worktree among `path(0)`, `path(1)`, ...; else the first
/// settling one whose manifest is parked, to take over; else, if one is
/// settling and `waiting` (its wait is not over), to wait for it; else the
/// first unused path.
fn choose(
    slots: &HashMap<PathBuf, Slot>,
    path: impl Fn(usize) -> PathBuf,
    waiting: bool,
) -> Choice {
    let mut settling = None;
    for n in 0.. {
        let path = path(n);
        match slots.get(&path) {
            Some(Slot::Free(_)) => return Choice::Take(path),
            Some(Slot::Leased) => {}
            Some(Slot::Settling { parked, .. }) => {
                if settling
                    .as_ref()
                    .is_none_or(|(_, first)| !first && parked.is_some())
                {
                    settling = Some((path, parked.is_some()));
                }
            }
            None => {
                return match settling {
                    Some((settling, true)) => Choice::TakeOver(settling),
                    Some((settling, false)) if waiting => Choice::Wait(settling),
                    _ => Choice::New(path),
                };
            }
        }
    }
    unreachable!("an unbounded range always yields")
}

/// Every blob, link and gitlink of `tree`, by path, and its directories.
#[derive(Clone)]
struct Wanted {
    files: BTreeMap<BString, (EntryKind, ObjectId)>,
    dirs: BTreeSet<BString>,
}

/// `view` of it (see [`View`]).
fn wanted(repo: &gix::Repository, tree: ObjectId, view: &View) -> Result<Wanted, WorktreeError> {
    let git = |e: &dyn std::fmt::Display| WorktreeError::Git(e.to_string());
    let tree = repo.find_tree(tree).map_err(|e| git(&e))?;
    let mut recorder = gix::traverse::tree::Recorder::default();
    tree.traverse()
        .breadthfirst(&mut recorder)
        .map_err(|e| git(&e))?;
    let mut files = BTreeMap::new();
    let mut dirs = BTreeSet::new();
    for entry in recorder.records {
        let is_dir = matches!(entry.mode.kind(), EntryKind::Tree | EntryKind::Commit);
        if !view.holds(entry.filepath.as_bstr(), is_dir) {
            continue;
        }
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

/// Brings `lease`'s directory to exactly `tree` of the repository at
/// `workspace` (see the module doc). Blocking: run it off the runtime.
/// A worktree [`settle`]d since its last run is brought there by the
/// tree's difference from the last one; any other is read whole.
pub fn sync(lease: &mut Lease, workspace: &Path, tree: &str) -> Result<SyncStats, WorktreeError> {
    // A linked worktree's git directories are checked as a commit's are.
    let repo = crate::commit::open_repository(workspace)
        .map_err(|e| WorktreeError::Git(format!("cannot open the repository: {e}")))?;
    let tree = ObjectId::from_hex(tree.as_bytes())
        .map_err(|e| WorktreeError::Git(format!("tree {tree:?}: {e}")))?;
    let started = Instant::now();
    // Whatever happens next, a run follows: the worktree is no longer
    // known settled.
    let settled = std::mem::take(&mut lease.manifest.settled);
    let last = lease.manifest.last.take();
    // The granted caches carry only between runs of the same tree: what a
    // gate (the agent's code) left there for another tree is emptied, so
    // that one tree's code never decides another tree's verdict.
    let other_tree = last.as_ref().is_none_or(|(id, _)| *id != tree);
    let (how, result) = match last {
        // Settled (the last run saw it through an overlay, or it was read
        // back): the caches emptied alone, then by the difference.
        Some((id, mut wanted)) if settled && other_tree && !lease.keep.is_empty() => {
            if empty_caches(lease, &wanted)? {
                let to = Arc::make_mut(&mut wanted);
                match apply::to_tree(lease, &repo, workspace, id, to, tree) {
                    Ok(Some(stats)) => (
                        "by the trees' difference, the granted caches emptied for another tree",
                        Ok((stats, wanted)),
                    ),
                    Ok(None) => {
                        let keep = std::mem::take(&mut lease.keep);
                        let result = whole(lease, &repo, workspace, tree, None);
                        lease.keep = keep;
                        ("whole, the granted caches emptied for another tree", result)
                    }
                    Err(e) => ("by the trees' difference", Err(e)),
                }
            } else {
                let keep = std::mem::take(&mut lease.keep);
                let result = whole(lease, &repo, workspace, tree, Some((id, wanted)));
                lease.keep = keep;
                ("whole, the granted caches emptied for another tree", result)
            }
        }
        _ if other_tree && !lease.keep.is_empty() => {
            let keep = std::mem::take(&mut lease.keep);
            let result = whole(lease, &repo, workspace, tree, last);
            lease.keep = keep;
            ("whole, the granted caches emptied for another tree", result)
        }
        Some((id, wanted)) if settled && id == tree => {
            let kept = wanted.files.len();
            lease.manifest.last = Some((id, wanted));
            return Ok(SyncStats {
                kept,
                ..SyncStats::default()
            });
        }
        Some((id, mut wanted)) if settled => {
            // Shared with no settle: a settled worktree's settle is over.
            let to = Arc::make_mut(&mut wanted);
            match apply::to_tree(lease, &repo, workspace, id, to, tree) {
                Ok(Some(stats)) => ("by the trees' difference", Ok((stats, wanted))),
                // A granted cache on the way: read whole.
                Ok(None) => ("whole", whole(lease, &repo, workspace, tree, None)),
                Err(e) => ("by the trees' difference", Err(e)),
            }
        }
        // The tree read last time is not read again.
        last => ("whole", whole(lease, &repo, workspace, tree, last)),
    };
    tracing::debug!(how, us = started.elapsed().as_micros(), "worktree sync");
    match result {
        Ok((stats, wanted)) => {
            lease.manifest.last = Some((tree, wanted));
            Ok(stats)
        }
        Err(e) => {
            lease.manifest = Manifest::default();
            Err(e)
        }
    }
}

/// Empties the granted caches of a settled worktree (removes each, never
/// following a link) for a run of another tree; `false` (nothing
/// touched) when a cache's place overlaps what the tree `wanted` holds:
/// the caller then reads the worktree whole.
fn empty_caches(lease: &Lease, wanted: &Wanted) -> Result<bool, WorktreeError> {
    for cache in lease.keep.iter() {
        // The cache itself or anything under it, in the tree.
        let mut below = cache.clone();
        below.push(b'/');
        let first_after = |keys: &mut dyn Iterator<Item = &BString>| {
            keys.next()
                .is_some_and(|p| p == cache || p.starts_with(below.as_slice()))
        };
        let holds = first_after(&mut wanted.files.range(cache.clone()..).map(|(p, _)| p))
            || first_after(&mut wanted.dirs.range(cache.clone()..))
            || first_after(&mut wanted.files.range(below.clone()..).map(|(p, _)| p))
            || first_after(&mut wanted.dirs.range(below.clone()..));
        // A file or link of the tree on its way.
        let blocked = cache
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'/')
            .any(|(i, _)| wanted.files.contains_key(&BString::from(&cache[..i])));
        if holds || blocked {
            return Ok(false);
        }
    }
    let root = lease.open_root()?;
    for cache in lease.keep.iter() {
        let name = OsStr::from_bytes(cache);
        match root.symlink_metadata(name) {
            Ok(meta) => remove_any(&root, name, meta.is_dir(), cache.as_bstr())?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(cache.as_bstr())(e)),
        }
    }
    Ok(true)
}

/// Reads the worktree whole and brings it to `tree` (`last`: the tree it
/// was last brought to, read).
fn whole(
    lease: &mut Lease,
    repo: &gix::Repository,
    workspace: &Path,
    tree: ObjectId,
    last: Option<(ObjectId, Arc<Wanted>)>,
) -> Result<(SyncStats, Arc<Wanted>), WorktreeError> {
    let wanted = match last {
        Some((id, wanted)) if id == tree => wanted,
        _ => Arc::new(wanted(repo, tree, &lease.view)?),
    };
    let stats = sync_to(lease, workspace, &wanted, None).map_err(|stop| match stop {
        Stop::Failed(e) => e,
        Stop::Yielded => unreachable!("only a settle yields"),
    })?;
    Ok((stats, wanted))
}

#[cfg(test)]
mod tests;
