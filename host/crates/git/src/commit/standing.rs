//! The watch a daemon keeps on a workspace's commit paths between turns,
//! so that a snapshot costs what changed: each directory a snapshot's
//! read enters is watched (inotify, added by the descriptor the read
//! opened, never by a path the agent could swap), and the events that
//! come between two snapshots name where to look (`dirty`). The next
//! snapshot reads only there (see `incremental`); with nothing named it
//! reads nothing.
//!
//! Owns: one inotify instance per workspace, its watches (bounded by a
//! [`WatchBudget`], per workspace and host-wide), turning events into
//! repository-relative paths to read again, the files with several links
//! (always read again: inotify does not see a write through another
//! link), and the [`Basis`] the next snapshot patches (the last snapshot's
//! tree and diff, and what they were taken against).
//!
//! Must never: decide what a file holds (the read and the stat cache do),
//! or answer "look only there" when it could have missed something: a
//! queue overflow, a watch refused or past its budget, an unmount, a
//! watch the kernel dropped, an event it cannot place, a change on the
//! way to the commit paths, a new instance (a daemon restart): each is a
//! reason ([`Standing::plan`] errs with it) and the caller walks
//! everything, as before this watch existed. Writes through a shared
//! memory map raise no inotify event until the file is closed: a
//! mapping kept open across a turn-end is not seen (as git's fsmonitor).

use super::read::{Watcher, is_dot_git};
use super::stat_cache::Stamp;
use crate::change::FileChange;
use gix::ObjectId;
use gix::bstr::{BStr, BString, ByteSlice};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

#[cfg(target_os = "linux")]
#[path = "standing/queue.rs"]
mod queue;
#[cfg(not(target_os = "linux"))]
#[path = "standing/queue_none.rs"]
mod queue;
pub(super) use queue::Queue;

/// How many directories the watches may hold: per workspace, and across
/// every workspace of the host (`[limits] watch_dirs_per_workspace` and
/// `watch_dirs_total`). Past either, the watch stops adding watches and
/// cannot vouch: that snapshot and the next [`RESTING_SNAPSHOTS`] walk
/// everything without watching, as without a watch; the one after tries
/// again.
#[derive(Debug, Clone)]
pub struct WatchBudget {
    /// The most directories one workspace's watch holds.
    pub per_workspace: usize,
    /// The most directories all watches of the host hold together.
    pub total: usize,
    /// How many all watches of the host hold now (shared by them).
    pub held: Arc<AtomicUsize>,
}

impl WatchBudget {
    /// A budget of `per_workspace` and `total` directories, its own count.
    pub fn new(per_workspace: usize, total: usize) -> WatchBudget {
        WatchBudget {
            per_workspace,
            total,
            held: Arc::new(AtomicUsize::new(0)),
        }
    }
}

impl Default for WatchBudget {
    /// The defaults of `[limits]` (docs/daemon.md).
    fn default() -> WatchBudget {
        WatchBudget::new(DEFAULT_WATCH_DIRS_PER_WORKSPACE, DEFAULT_WATCH_DIRS_TOTAL)
    }
}

/// `[limits] watch_dirs_per_workspace`'s default: a workspace of 20,000
/// directories (about 2 million files at 100 a directory).
pub const DEFAULT_WATCH_DIRS_PER_WORKSPACE: usize = 20_000;
/// `[limits] watch_dirs_total`'s default (the kernel's own bound,
/// `fs.inotify.max_user_watches`, is often lower: past it a watch is
/// refused, ENOSPC, and that workspace walks).
pub const DEFAULT_WATCH_DIRS_TOTAL: usize = 100_000;

/// How many snapshots walk without a watch after one ran past its budget.
pub(super) const RESTING_SNAPSHOTS: u32 = 10;

/// What a watched directory is to the commit paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Walked: any change to one of its entries matters.
    Walked,
    /// On the way to commit paths: a change to one of the names on the
    /// way (or to the directory itself, or to its `.gitignore`) matters.
    OnTheWay,
}

#[derive(Debug)]
struct Watched {
    /// Repository-relative (`""` for the root).
    rel: BString,
    role: Role,
    /// The names on the way to commit paths (for [`Role::OnTheWay`]).
    next: BTreeSet<BString>,
    /// The directory itself went (`IN_DELETE_SELF`): its `IN_IGNORED` is
    /// expected.
    gone: bool,
}

/// What the last snapshot was, for the next to patch.
#[derive(Debug, Clone)]
pub(super) struct Basis {
    /// `HEAD`'s tree it was taken against.
    pub(super) head_tree: Option<ObjectId>,
    /// Its commit paths (normalised).
    pub(super) paths: Vec<String>,
    /// Its tree.
    pub(super) tree: ObjectId,
    /// Its diff against `HEAD`.
    pub(super) changes: Vec<FileChange>,
    /// `.git/info/exclude`'s stamp then (its rules decide what is read).
    pub(super) exclude: Option<Stamp>,
}

#[derive(Debug, Default)]
struct State {
    /// The budget ran out (the doubt says which).
    over_budget: bool,
    dirs: HashMap<i32, Watched>,
    /// Paths to read again (repository-relative).
    dirty: BTreeSet<BString>,
    /// Regular files with several links, read again every time.
    linked: BTreeSet<BString>,
    /// The first reason the watch cannot vouch.
    doubt: Option<String>,
}

/// The watch kept on one workspace's commit paths between snapshots (see
/// the module's doc).
#[derive(Debug)]
pub struct Standing {
    queue: Queue,
    state: Mutex<State>,
    budget: WatchBudget,
    basis: Option<Basis>,
    /// After a walk that ran past the budget: why, and how many more
    /// snapshots walk without watching (adding thousands of watches only
    /// to give up again would cost every turn).
    resting: Option<(String, u32)>,
    /// Set by a test: the next read of the events sees an overflow.
    #[cfg(test)]
    pub(super) overflow_next: std::sync::atomic::AtomicBool,
}

impl Drop for Standing {
    fn drop(&mut self) {
        self.release();
    }
}

/// Why a snapshot walked everything (or `None`: it read only what the
/// watch named).
pub type Fallback = Option<String>;

impl Standing {
    /// A new watch, nothing watched and no basis yet (its first snapshot
    /// walks everything). Fails where inotify cannot be had.
    pub fn new(budget: WatchBudget) -> std::io::Result<Standing> {
        Ok(Standing {
            queue: Queue::new()?,
            state: Mutex::new(State::default()),
            budget,
            basis: None,
            resting: None,
            #[cfg(test)]
            overflow_next: std::sync::atomic::AtomicBool::new(false),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many directories it watches.
    pub fn watched(&self) -> usize {
        self.state().dirs.len()
    }

    /// About how many bytes of this process's memory its bookkeeping
    /// takes (the table of watched directories and their paths; the
    /// kernel's side, a mark per directory, is not counted here).
    pub fn footprint(&self) -> usize {
        let state = self.state();
        let slot = std::mem::size_of::<(i32, Watched)>() + 1;
        state.dirs.capacity() * slot
            + state
                .dirs
                .values()
                .map(|w| w.rel.capacity() + w.next.iter().map(|n| n.capacity() + 48).sum::<usize>())
                .sum::<usize>()
            + state
                .dirty
                .iter()
                .chain(state.linked.iter())
                .map(|p| p.capacity() + 48)
                .sum::<usize>()
    }

    /// Gives the host-wide budget back what this watch holds.
    fn release(&mut self) {
        let held = self.state().dirs.len();
        self.budget.held.fetch_sub(
            held.min(self.budget.held.load(Ordering::Relaxed)),
            Ordering::Relaxed,
        );
    }

    /// Forgets everything (a new instance, no watch, no basis): before a
    /// walk of everything, which watches afresh.
    pub(super) fn reset(&mut self) -> std::io::Result<()> {
        self.release();
        self.queue = Queue::new()?;
        *self.state() = State::default();
        self.basis = None;
        Ok(())
    }

    /// Before a walk of everything: `Some(why)` when it must not watch
    /// (the budget ran out lately; [`RESTING_SNAPSHOTS`] snapshots walk
    /// unwatched, then one tries again).
    pub(super) fn rest(&mut self) -> Option<String> {
        let over = {
            let state = self.state();
            state
                .over_budget
                .then(|| state.doubt.clone().unwrap_or_default())
        };
        if let Some(over) = over {
            self.resting = Some((over, RESTING_SNAPSHOTS));
        }
        match &mut self.resting {
            Some((over, left)) if *left > 0 => {
                *left -= 1;
                let said = format!("{over}; not watched again for {left} more snapshot(s)");
                if *left == 0 {
                    self.resting = None;
                }
                Some(said)
            }
            _ => None,
        }
    }

    pub(super) fn doubt(&self, why: String) {
        self.state().doubt.get_or_insert(why);
    }

    pub(super) fn basis(&self) -> Option<&Basis> {
        self.basis.as_ref()
    }

    /// After a snapshot: what the next one patches. The paths named so
    /// far were read (or the walk read everything): forgotten.
    pub(super) fn set_basis(&mut self, basis: Basis) {
        self.state().dirty.clear();
        self.basis = Some(basis);
    }

    /// Before reading `dirty` again: the files with several links under
    /// them are forgotten (the read says again which still have).
    pub(super) fn forget_linked_under(&self, dirty: &[BString]) {
        self.state()
            .linked
            .retain(|l| !dirty.iter().any(|d| under(l.as_bstr(), d.as_bstr())));
    }

    /// Reads the events so far: the paths to read again, or why the
    /// watch cannot vouch. `paths` and `exclude` are the next snapshot's
    /// (other paths, or other ignore rules, are another read).
    pub(super) fn plan(
        &self,
        paths: &[String],
        exclude: Option<Stamp>,
    ) -> Result<Vec<BString>, String> {
        let Some(basis) = &self.basis else {
            return Err("no watch yet (the workspace's first snapshot since the daemon started, or the last one could not be watched)".into());
        };
        self.drain(&basis.paths);
        let state = self.state();
        if let Some(why) = &state.doubt {
            return Err(why.clone());
        }
        if basis.paths != paths {
            return Err("the commit paths changed since the last snapshot".into());
        }
        if basis.exclude != exclude {
            return Err(".git/info/exclude changed since the last snapshot".into());
        }
        Ok(minimal(state.dirty.iter().chain(state.linked.iter())))
    }

    /// Whether anything may have changed under the commit paths since the
    /// last snapshot (without forgetting it): `Ok` when nothing did.
    pub fn unchanged(&self) -> Result<(), String> {
        let Some(basis) = &self.basis else {
            return Err("no snapshot watched".into());
        };
        self.drain(&basis.paths);
        let state = self.state();
        if let Some(why) = &state.doubt {
            return Err(why.clone());
        }
        if let Some(first) = state.dirty.iter().next() {
            return Err(format!(
                "{} changed ({} path(s) to read again)",
                shown(first.as_bstr()),
                state.dirty.len()
            ));
        }
        if let Some(first) = state.linked.iter().next() {
            return Err(format!("{} has several links", shown(first.as_bstr())));
        }
        Ok(())
    }

    /// [`Standing::unchanged`], for the snapshot of tree `tree` (hex): an
    /// error when the last snapshot it watched is another.
    pub fn unchanged_since(&self, tree: &str) -> Result<(), String> {
        match &self.basis {
            Some(b) if b.tree.to_hex() == tree => self.unchanged(),
            _ => Err("the watch has moved on to another snapshot".into()),
        }
    }

    /// Turns the events queued so far into paths to read again, or a
    /// doubt.
    fn drain(&self, paths: &[String]) {
        #[cfg(test)]
        if self.overflow_next.swap(false, Ordering::Relaxed) {
            self.doubt("the kernel's event queue overflowed (IN_Q_OVERFLOW)".into());
        }
        let mut state = self.state();
        let state = &mut *state;
        let read = self.queue.read(&mut |event| {
            if state.doubt.is_some() {
                return;
            }
            if let Some(why) = event.doubt() {
                state.doubt = Some(why);
                return;
            }
            let Some(watched) = state.dirs.get_mut(&event.wd) else {
                state.doubt = Some(format!("an event of an unknown watch ({})", event.what()));
                return;
            };
            if event.ignored {
                let watched = state.dirs.remove(&event.wd);
                self.budget.held.fetch_sub(1, Ordering::Relaxed);
                if let Some(w) = watched
                    && !w.gone
                {
                    state.doubt = Some(format!(
                        "the kernel dropped the watch of {} (IN_IGNORED)",
                        shown(w.rel.as_bstr())
                    ));
                }
                return;
            }
            if event.deleted_self {
                watched.gone = true;
            }
            let name = event.name.as_bstr();
            match watched.role {
                Role::Walked => {
                    if name.is_empty()
                        || name == ".gitignore"
                        || (is_dot_git(name) && !watched.rel.is_empty())
                    {
                        // The directory itself, its ignore rules, or a
                        // repository of its own: all of it again.
                        state.dirty.insert(watched.rel.clone());
                    } else if !is_dot_git(name) {
                        state.dirty.insert(joined(watched.rel.as_bstr(), name));
                    }
                }
                Role::OnTheWay => {
                    if !(name.is_empty() || name == ".gitignore" || watched.next.contains(name)) {
                        return;
                    }
                    let path = joined(watched.rel.as_bstr(), name);
                    if !name.is_empty() && paths.iter().any(|p| p.as_bytes() == path.as_slice()) {
                        // A commit path itself: read it again.
                        state.dirty.insert(path);
                    } else {
                        state.doubt = Some(format!(
                            "{} changed, on the way to the commit paths ({})",
                            shown(path.as_bstr()),
                            event.what()
                        ));
                    }
                }
            }
        });
        if let Err(why) = read {
            state.doubt.get_or_insert(why);
        }
    }

    fn add(&self, dir: &cap_std::fs::Dir, rel: &BStr, next: Option<&str>) {
        if self.state().doubt.is_some() {
            // It cannot vouch anyway: no more watches for nothing.
            return;
        }
        let wd = match self.queue.add(dir) {
            Ok(wd) => wd,
            Err(e) => {
                self.doubt(format!("cannot watch {}: {e}", shown(rel)));
                return;
            }
        };
        let mut state = self.state();
        let known = state.dirs.contains_key(&wd);
        if !known {
            let held = self.budget.held.fetch_add(1, Ordering::Relaxed) + 1;
            let mine = state.dirs.len() + 1;
            let over = if mine > self.budget.per_workspace {
                Some(format!(
                    "more than {} directories to watch in this workspace ([limits] watch_dirs_per_workspace)",
                    self.budget.per_workspace
                ))
            } else if held > self.budget.total {
                Some(format!(
                    "more than {} directories watched on this host ([limits] watch_dirs_total)",
                    self.budget.total
                ))
            } else {
                None
            };
            if let Some(why) = over {
                self.budget.held.fetch_sub(1, Ordering::Relaxed);
                self.queue.remove(wd);
                state.over_budget = true;
                state.doubt.get_or_insert(why);
                return;
            }
        }
        let watched = state.dirs.entry(wd).or_insert_with(|| Watched {
            rel: rel.to_owned(),
            role: Role::OnTheWay,
            next: BTreeSet::new(),
            gone: false,
        });
        // The same inode seen at another path (a directory renamed): its
        // events are now this path's.
        if watched.rel != rel {
            watched.rel = rel.to_owned();
            watched.next.clear();
            watched.role = Role::OnTheWay;
        }
        match next {
            Some(next) => {
                watched.next.insert(next.into());
            }
            None => watched.role = Role::Walked,
        }
    }
}

impl Watcher for Standing {
    fn walked(&self, dir: &cap_std::fs::Dir, rel: &BStr) {
        self.add(dir, rel, None);
    }

    fn on_the_way(&self, dir: &cap_std::fs::Dir, rel: &BStr, next: &str) {
        self.add(dir, rel, Some(next));
    }

    fn linked(&self, rel: &BStr, _links: u64) {
        self.state().linked.insert(rel.to_owned());
    }
}

/// A repository-relative path as said in a reason (`.` for the root).
fn shown(rel: &BStr) -> String {
    if rel.is_empty() {
        ".".into()
    } else {
        rel.to_str_lossy().into_owned()
    }
}

/// `rel/name` (`name` alone at the root).
fn joined(rel: &BStr, name: &BStr) -> BString {
    let mut path = rel.to_owned();
    if !name.is_empty() {
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(name);
    }
    path
}

/// Whether `path` is `dir` or below it.
pub(super) fn under(path: &BStr, dir: &BStr) -> bool {
    dir.is_empty()
        || path == dir
        || (path.len() > dir.len() && path.starts_with(dir) && path[dir.len()] == b'/')
}

/// The paths, each once, none below another.
fn minimal<'a>(paths: impl Iterator<Item = &'a BString>) -> Vec<BString> {
    // Sorted with `/` as the lowest byte, a path's descendants follow it
    // at once (`a`, `a/b`, `a.b`): one pass keeps the first of each run.
    let mut all: Vec<&BString> = paths.collect();
    all.sort_by_cached_key(|p| {
        p.iter()
            .map(|b| if *b == b'/' { 0 } else { *b })
            .collect::<Vec<u8>>()
    });
    all.dedup();
    let mut out: Vec<BString> = Vec::new();
    for p in all {
        if out
            .last()
            .is_none_or(|kept| !under(p.as_bstr(), kept.as_bstr()))
        {
            out.push(p.clone());
        }
    }
    out
}

// Linux only: elsewhere there is no watch to test (`queue_none`).
#[cfg(all(test, target_os = "linux"))]
#[path = "standing/tests.rs"]
mod tests;
