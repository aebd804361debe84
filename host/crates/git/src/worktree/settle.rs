//! The settle of a worktree after its run, off the critical path: it
//! never holds a run back, nor takes the host's CPU while a gate runs.
//!
//! Owns: [`settle`] (a worktree read whole and brought back to the tree
//! it was synced to, by steps with a checkpoint between each), where it
//! runs ([`settle_in_background`]: a small rayon pool of its own, whose
//! threads take the lowest CPU priority a thread may set on itself on
//! Linux, nice 19), and [`Busy`], the host's mark that a gate runs or a
//! turn-end is being judged. At a checkpoint a settle pauses while the
//! host is busy, its manifest parked in the lease's slot, and stops when
//! a run on the same workspace took its worktree over (see `choose` in
//! the parent module: the run takes the parked manifest at once, or asks
//! the settle to stop and waits for its step in progress, one directory's
//! changes, to end).
//!
//! Must never: leave a worktree trusted as settled unless the settle read
//! and fixed all of it (a settle that yields hands over a manifest marked
//! unsettled: the next sync reads the worktree whole, trusting only the
//! files whose stamps still match what this module wrote), change the
//! worktree while its manifest is parked (a run may own it by then), or
//! block rayon's global pool (its pauses would stall every other user).

use super::{Lease, Manifest, Slot, Slots, Stop, SyncStats, WorktreeError, sync_to};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::time::Instant;

/// The host is busy while one lives (see [`super::Worktrees::busy`]).
pub struct Busy {
    slots: Arc<Slots>,
}

impl Busy {
    pub(super) fn new(slots: Arc<Slots>) -> Busy {
        slots.busy.fetch_add(1, SeqCst);
        Busy { slots }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        // Under the lock: a settle checks `busy` under it before waiting.
        let _map = self.slots.lock();
        self.slots.busy.fetch_sub(1, SeqCst);
        self.slots.returned.notify_all();
    }
}

/// How a settle ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// Read whole and brought back to its tree: the next sync on the same
    /// tree touches nothing, on another only what differs.
    Done(SyncStats),
    /// Stopped at a checkpoint for a run on the same workspace, which
    /// holds the worktree now (and reads it whole).
    HandedOver,
}

/// A settle in progress: its checkpoints.
pub(super) struct Settler {
    slots: Arc<Slots>,
    path: std::path::PathBuf,
    stop: Arc<AtomicBool>,
}

impl Settler {
    fn checkpoint_hook(&self) {
        #[cfg(test)]
        if let Some(hook) = self
            .slots
            .checkpoint
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            hook(&self.slots);
        }
    }

    /// A checkpoint where nothing of the manifest is in hand (it is
    /// parked): waits while the host is busy; `Yielded` once the worktree
    /// is another's. Any thread.
    pub(super) fn pause(&self) -> Result<(), Stop> {
        self.checkpoint_hook();
        self.wait_while_busy()
    }

    fn wait_while_busy(&self) -> Result<(), Stop> {
        if self.stop.load(SeqCst) {
            return Err(Stop::Yielded);
        }
        if self.slots.busy.load(SeqCst) == 0 {
            return Ok(());
        }
        let mut map = self.slots.lock();
        self.slots.paused.fetch_add(1, SeqCst);
        while self.slots.busy.load(SeqCst) > 0 && !self.stop.load(SeqCst) {
            map = self
                .slots
                .returned
                .wait(map)
                .unwrap_or_else(|p| p.into_inner());
        }
        self.slots.paused.fetch_sub(1, SeqCst);
        drop(map);
        if self.stop.load(SeqCst) {
            return Err(Stop::Yielded);
        }
        Ok(())
    }

    /// Lends the lease's manifest to its slot: a run may take it from
    /// there (and the worktree with it) until [`Settler::unpark`].
    pub(super) fn park(&self, lease: &mut Lease) {
        let manifest = std::mem::take(&mut lease.manifest);
        let mut map = self.slots.lock();
        if let Some(Slot::Settling { parked, .. }) = map.get_mut(&self.path) {
            *parked = Some(manifest);
            self.slots.returned.notify_all();
        } else {
            // Not settling (cannot be): keep it in hand.
            lease.manifest = manifest;
        }
    }

    /// Takes the manifest back; `Yielded` when a run took it (the lease
    /// is then handed over: its drop leaves the slot to the run).
    pub(super) fn unpark(&self, lease: &mut Lease) -> Result<(), Stop> {
        let mut map = self.slots.lock();
        match map.get_mut(&self.path) {
            Some(Slot::Settling { parked, .. }) => {
                if let Some(manifest) = parked.take() {
                    lease.manifest = manifest;
                }
                Ok(())
            }
            _ => {
                lease.handed_over = true;
                Err(Stop::Yielded)
            }
        }
    }

    /// A checkpoint with the manifest in hand, before a step that changes
    /// the worktree: parked while the host is busy.
    pub(super) fn step(&self, lease: &mut Lease) -> Result<(), Stop> {
        self.checkpoint_hook();
        if self.stop.load(SeqCst) {
            return Err(Stop::Yielded);
        }
        if self.slots.busy.load(SeqCst) == 0 {
            return Ok(());
        }
        self.park(lease);
        let paused = self.wait_while_busy();
        self.unpark(lease)?;
        paused
    }
}

/// After a run: reads the worktree whole and brings it back to the tree
/// it was synced to (what the run wrote, changed or removed is undone,
/// the granted caches kept), so that the next [`super::sync`] touches only
/// what the next tree changes. Blocking; meant to run once the run's
/// outcome is recorded, off the turn-end's path, on a pool that may block
/// ([`settle_in_background`]'s). It never holds a run back: it pauses
/// while the host is [`Busy`], and yields its worktree to a run on the
/// same workspace ([`Settled::HandedOver`]), which reads it whole. A
/// worktree that cannot be settled is read whole by the next sync.
pub fn settle(lease: &mut Lease, workspace: &Path) -> Result<Settled, WorktreeError> {
    let Some((tree, wanted)) = lease.manifest.last.clone() else {
        return Ok(Settled::Done(SyncStats::default()));
    };
    let settler = Settler {
        slots: lease.slots.clone(),
        path: lease.path.clone(),
        stop: Arc::default(),
    };
    lease.slots.lock().insert(
        lease.path.clone(),
        Slot::Settling {
            parked: None,
            stop: settler.stop.clone(),
        },
    );
    let started = Instant::now();
    let result = sync_to(lease, workspace, &wanted, Some(&settler));
    tracing::debug!(
        us = started.elapsed().as_micros(),
        ok = !matches!(result, Err(Stop::Failed(_))),
        "worktree settled"
    );
    match result {
        Ok(stats) => {
            lease.manifest.last = Some((tree, wanted));
            lease.manifest.settled = true;
            Ok(Settled::Done(stats))
        }
        // The manifest (unsettled: `sync` took the mark) is the run's, or
        // goes back to the slot with the lease, for the run waiting.
        Err(Stop::Yielded) => Ok(Settled::HandedOver),
        Err(Stop::Failed(e)) => {
            lease.manifest = Manifest::default();
            Err(e)
        }
    }
}

/// The settles' threads: as many as cores (a settle reads directories in
/// parallel), each at nice 19 on Linux, so that it takes only what the
/// machine leaves. Made once; where it cannot be, settles run on tokio's
/// blocking pool at the default priority.
fn settle_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("gatehost-settle-{i}"))
            .start_handler(|_| lowest_priority())
            .build()
            .map_err(|e| tracing::warn!(error = %e, "cannot start the settle's threads"))
            .ok()
    })
    .as_ref()
}

/// The calling thread at nice 19 (Linux: a thread's own; elsewhere
/// nothing).
fn lowest_priority() {
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 19) {
        tracing::debug!(error = %e, "a settle thread keeps its priority");
    }
}

/// Brings a run's worktree back to its tree in the background (see
/// [`settle`]), on the settles' own threads.
pub fn settle_in_background(lease: Lease, workspace: &str, policy_id: &str) {
    let (ws, policy_id) = (workspace.to_string(), policy_id.to_string());
    let job = move || {
        let mut lease = lease;
        match settle(&mut lease, Path::new(&ws)) {
            Ok(Settled::Done(stats)) => {
                tracing::debug!(policy = %policy_id, written = stats.written, removed = stats.removed, kept = stats.kept, "worktree settled after the run");
            }
            Ok(Settled::HandedOver) => {
                tracing::debug!(policy = %policy_id, "the worktree's settle yielded to a run on the same workspace (it reads the worktree whole)");
            }
            Err(e) => {
                tracing::warn!(policy = %policy_id, "the worktree could not be settled after the run (the next run reads it whole): {e}");
            }
        }
    };
    match settle_pool() {
        Some(pool) => pool.spawn(job),
        None => drop(tokio::task::spawn_blocking(job)),
    }
}

#[cfg(test)]
mod tests;
