//! The next gate's start made ahead, where gates join cgroup v1
//! hierarchies (see `parked`): the supervisor keeps one, made while a gate
//! runs, for the limits of the last gate, and undoes it (its child killed
//! and reaped, its cgroups given back empty) when the next gate's limits
//! differ, when it could not join, and when the supervisor goes.
//!
//! It owns when a start is made, taken and undone; it never makes one in
//! a cgroup that is not empty (they come from the pools), and never lets
//! a parked child outlive the supervisor.

use super::{GateLimits, INTO_BY_CLONE, ProcessCgroup, Supervisor, limits, reaper};
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
use super::{SpawnMode, parked};
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
use std::time::Duration;

/// A gate's start made ahead: its cgroups taken, its bounds written, its
/// child parked in its v1 cgroups (`parked`).
#[derive(Debug)]
pub(super) struct Ready {
    pub(super) cgroup: Option<ProcessCgroup>,
    pub(super) bounds: limits::Detached,
    pub(super) parked: ParkedStart,
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub(super) type ParkedStart = parked::Parked;

/// Elsewhere no start is made ahead: no value of this type exists.
#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
#[derive(Debug)]
pub(super) enum ParkedStart {}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
impl ParkedStart {
    pub(super) fn pid(&self) -> i32 {
        match *self {}
    }
}

/// How long a gate waits for its parked child to finish joining (it
/// started at the end of the gate before: it is done unless gates come
/// faster than one RCU grace period, when a join is cheap anyway).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
const JOINED_BOUND: Duration = Duration::from_secs(2);

impl Supervisor {
    /// This supervisor, keeping the next gate's start made ahead where
    /// gates join cgroup v1 hierarchies (a long-lived host: the daemon, a
    /// bench), first for gates bounded by `limits`, then for the limits of
    /// the last gate run. A process that runs one gate and exits gains
    /// nothing by it (its first gate would wait for the same join).
    pub fn keeping_ready(self, limits: GateLimits) -> Self {
        self.keep_ready.store(true, Ordering::Relaxed);
        self.make_ready(limits);
        self
    }

    /// Whether a start made ahead is waiting for the next gate.
    pub fn has_ready_start(&self) -> bool {
        self.ready
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// The pid of the child parked for the next gate (the tests').
    #[cfg(all(test, target_arch = "x86_64"))]
    pub(super) fn parked_pid(&self) -> Option<i32> {
        self.ready
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|r| r.parked.pid())
    }

    /// Makes the next gate's start ahead (see `parked`) for gates bounded
    /// by `limits`, if this supervisor keeps one, none is waiting, and
    /// gates here join v1 cgroups (otherwise it stops trying).
    pub(super) fn make_ready(&self, limits: GateLimits) {
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        {
            if !self.keep_ready.load(Ordering::Relaxed)
                || self.mode != SpawnMode::Vfork
                || self.into.load(Ordering::Relaxed) != INTO_BY_CLONE
            {
                return;
            }
            let Some(c) = &self.cgroups else { return };
            let mut slot = self.ready.lock().unwrap_or_else(|p| p.into_inner());
            if slot.is_some() {
                return;
            }
            let mut cg = match c.take() {
                Ok(cg) => cg,
                Err(e) => {
                    tracing::debug!(error = %e, "cannot take a cgroup for a start made ahead");
                    return;
                }
            };
            let mut bounds = self.enforcer.apply(limits, Some(c), Some(&mut cg));
            if bounds.child.joins().is_empty() {
                // No v1 join here: a start costs no migration to make ahead.
                self.keep_ready.store(false, Ordering::Relaxed);
                drop(bounds);
                c.recycle(cg);
                return;
            }
            let fds = bounds.take_join_fds();
            let made = cg.open().and_then(|dir| {
                // Registered under the lock of its clone: the sweep of
                // orphans never takes it for one.
                let mut reg = reaper::registry();
                let p = parked::park(Some(dir.as_fd()), &bounds.child, fds)?;
                reg.children.insert(p.pid());
                Ok(p)
            });
            match made {
                Ok(parked) => {
                    *slot = Some(Ready {
                        cgroup: Some(cg),
                        bounds: bounds.detach(),
                        parked,
                    });
                }
                Err(e) => {
                    tracing::info!(error = %e, "cannot make a gate's start ahead: each gate joins its v1 cgroups as it starts");
                    self.keep_ready.store(false, Ordering::Relaxed);
                    bounds.put_back();
                    c.recycle(cg);
                }
            }
        }
        #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
        let _ = limits;
    }

    /// The start made ahead, if it is for `limits` and its child has
    /// joined its cgroups: its v2 cgroup, its bounds (ready for any way of
    /// starting: see `Enforcer::attach_for_start`) and its parked child.
    /// Otherwise it is undone, and `None`.
    pub(super) fn take_ready(
        &self,
        limits: GateLimits,
    ) -> Option<(Option<ProcessCgroup>, limits::Applied<'_>, ParkedStart)> {
        #[cfg_attr(
            not(all(target_os = "linux", target_arch = "x86_64")),
            allow(unused_mut)
        )]
        let mut ready = self
            .ready
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()?;
        if ready.bounds.limits() != limits || self.into.load(Ordering::Relaxed) != INTO_BY_CLONE {
            self.undo(ready);
            return None;
        }
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        if let Err(e) = ready.parked.joined(JOINED_BOUND) {
            tracing::warn!(error = %e, "a gate's start made ahead could not join its v1 cgroups; the gate joins them as it starts");
            self.undo(ready);
            return None;
        }
        let Ready {
            cgroup,
            bounds,
            parked,
        } = ready;
        match self.enforcer.attach_for_start(bounds) {
            Ok(bounds) => Some((cgroup, bounds, parked)),
            Err((e, bounds)) => {
                tracing::warn!(error = %e, "cannot open a v1 cgroup of a gate's start made ahead; the gate starts the usual way");
                self.give_back(cgroup, bounds, parked);
                None
            }
        }
    }

    /// Kills and reaps the parked child, and gives its cgroups back
    /// (empty now).
    fn undo(&self, ready: Ready) {
        let Ready {
            cgroup,
            bounds,
            parked,
        } = ready;
        self.give_back(cgroup, self.enforcer.attach(bounds), parked);
    }

    pub(super) fn give_back(
        &self,
        cgroup: Option<ProcessCgroup>,
        bounds: limits::Applied<'_>,
        parked: ParkedStart,
    ) {
        let pid = parked.pid();
        drop(parked);
        reaper::registry().children.remove(&pid);
        bounds.put_back();
        if let (Some(c), Some(cg)) = (&self.cgroups, cgroup) {
            c.recycle(cg);
        }
    }
}

impl Drop for Supervisor {
    /// The start made ahead, if any, is undone (its child killed).
    fn drop(&mut self) {
        let ready = self
            .ready
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(r) = ready {
            self.undo(r);
        }
    }
}
