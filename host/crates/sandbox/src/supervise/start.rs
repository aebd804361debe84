//! How the supervisor starts a child: born in its cgroup by `clone3` (the
//! child program applying the limits, the scratch tmpfs, the worktree's
//! overlay and the confinement itself), the host stepping into the cgroup
//! for a std spawn, or a std spawn alone; and what is retried without
//! when the child could not take a step that is only a bound (the
//! scratch) or a saving (the overlay, whose run is then told it was
//! bypassed).
//!
//! Must never: let a child that failed a step run its program, or leave a
//! run's overlay unmarked when a child runs on the worktree itself.

use super::{
    Child, INTO_BY_MOVING, INTO_NONE, ParkedStart, ProcessCgroup, ProcessSpec, SpawnError,
    Supervisor, limits,
};
#[cfg(target_os = "linux")]
use super::{INTO_BY_CLONE, program, spawn};
#[cfg(target_os = "linux")]
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;

impl Supervisor {
    /// Starts the child, inside `cgroup` where that works; returns how it
    /// entered it ("clone3", "moved"), or `None`: it is not inside. Called
    /// under the registry lock. (`bounds` is for the `clone3` child, which
    /// only Linux has.)
    #[cfg_attr(not(target_os = "linux"), allow(unused_variables))]
    pub(super) fn spawn(
        &self,
        spec: &ProcessSpec<'_>,
        command: &mut async_process::Command,
        cgroup: Option<&ProcessCgroup>,
        bounds: &limits::ChildLimits,
        parked: &mut Option<ParkedStart>,
    ) -> Result<Spawned, SpawnError> {
        let program = || spec.program.display().to_string();
        let want_scratch = spec.scratch.zip(spec.limits.gate.scratch_bytes);
        // Whatever way the spawn takes, a child that does not mount the
        // run's overlay runs on the worktree itself: said to the overlay.
        let bypass = || {
            if let Some((o, _)) = spec.overlay {
                o.bypass();
            }
        };
        if let (Some(cgroups), Some(cg)) = (&self.cgroups, cgroup) {
            // (Only Linux has cgroups, and only it spawns by `clone3`.)
            #[cfg_attr(not(target_os = "linux"), allow(unused_mut))]
            let mut way = self.into.load(Ordering::Relaxed);
            // A scratch mount the child could not make is retried without
            // (nothing ran: the child stopped before exec).
            #[cfg(target_os = "linux")]
            let mut scratch = want_scratch.and_then(|(dir, bytes)| {
                self.enforcer
                    .scratch_mount(dir, bytes, spec.confine.and_then(|p| p.user))
                    .map(|m| (m, bytes))
            });
            #[cfg(target_os = "linux")]
            let mut overlay = spec
                .overlay
                .and_then(|(o, cwd)| self.enforcer.overlay_mount(o, cwd));
            #[cfg(target_os = "linux")]
            while way == INTO_BY_CLONE {
                // The child confines itself between clone3 and exec, with
                // what is prepared here (no thread is made for the spawn).
                let prepared = match spec.confine.map(|plan| plan.prepare()).transpose() {
                    Ok(p) => p,
                    Err(reason) => {
                        return Err(SpawnError::Confine {
                            program: program(),
                            reason,
                        });
                    }
                };
                // A parked child has joined its v1 cgroups already.
                let woken = parked.take();
                let unjoined = bounds.without_joins();
                let exec = program::Exec {
                    program: spec.program,
                    args: spec.args,
                    env: spec.env,
                    cwd: spec.cwd,
                    piped_stdin: spec.stdin.is_some(),
                    confine: prepared.as_ref(),
                    limits: if woken.is_some() { &unjoined } else { bounds },
                    scratch: scratch.as_ref().map(|(m, _)| m),
                    overlay: overlay.as_ref(),
                    die_with_parent: false,
                    mode: self.mode,
                };
                let started = match woken {
                    #[cfg(target_arch = "x86_64")]
                    Some(p) => spawn::start_parked(p, &exec),
                    #[cfg(not(target_arch = "x86_64"))]
                    Some(p) => match p {},
                    None => cg
                        .open()
                        .map_err(spawn::CloneError::Refused)
                        .and_then(|dir| spawn::start(Some(dir.as_fd()), &exec)),
                };
                match started {
                    Ok(started) => {
                        if overlay.is_none() {
                            bypass();
                        }
                        let child =
                            Child::started(started).map_err(|source| SpawnError::Start {
                                program: program(),
                                source,
                            })?;
                        return Ok(Spawned {
                            child,
                            entered: Some("clone3"),
                            scratch_bytes: scratch.map(|(_, b)| b),
                        });
                    }
                    Err(spawn::CloneError::Limit(limits::LimitStep::Scratch, errno))
                        if scratch.is_some() =>
                    {
                        self.enforcer.scratch_failed(errno);
                        scratch = None;
                    }
                    Err(spawn::CloneError::Limit(limits::LimitStep::Overlay, errno))
                        if overlay.is_some() =>
                    {
                        self.enforcer.overlay_failed(errno);
                        overlay = None;
                    }
                    // This spawn's place in the overlay (it runs on the
                    // worktree itself, which the overlay is told).
                    Err(spawn::CloneError::Limit(limits::LimitStep::OverlayPath, errno))
                        if overlay.is_some() =>
                    {
                        tracing::warn!(error = %std::io::Error::from_raw_os_error(errno), "a gate's directory in its worktree's overlay cannot be entered: it runs on the worktree itself");
                        overlay = None;
                    }
                    Err(spawn::CloneError::Failed(source)) => {
                        return Err(SpawnError::Start {
                            program: program(),
                            source,
                        });
                    }
                    Err(spawn::CloneError::Limit(step, errno)) => {
                        return Err(SpawnError::Limit {
                            program: program(),
                            reason: step.describe(errno),
                        });
                    }
                    Err(spawn::CloneError::Confine(e)) => {
                        let reason = prepared
                            .as_ref()
                            .map(|p| p.describe(e))
                            .unwrap_or_else(|| format!("{e:?}"));
                        return Err(SpawnError::Confine {
                            program: program(),
                            reason,
                        });
                    }
                    Err(spawn::CloneError::Unsupported(e)) => {
                        tracing::info!(error = %e, "clone3 into a cgroup is not available here; gates enter their cgroup by moving the host for each spawn");
                        self.into.store(INTO_BY_MOVING, Ordering::Relaxed);
                        way = INTO_BY_MOVING;
                    }
                    Err(spawn::CloneError::Refused(e)) => {
                        tracing::debug!(error = %e, "clone3 into the gate's cgroup refused for this spawn (an unprivileged sandbox user); moving the host instead");
                        way = INTO_BY_MOVING;
                    }
                }
            }
            if want_scratch.is_some() {
                self.enforcer.scratch_unenforced();
            }
            bypass();
            if way == INTO_BY_MOVING {
                match cgroups.enter(cg) {
                    Ok(()) => {
                        let spawned = confined(spec, || command.spawn());
                        if let Err(e) = cgroups.leave() {
                            tracing::error!(error = %e, "cannot leave the gate's cgroup");
                        }
                        let child = spawned?.map_err(|source| SpawnError::Start {
                            program: program(),
                            source,
                        })?;
                        return Ok(Spawned {
                            child: Child::spawned(child),
                            entered: Some("moved"),
                            scratch_bytes: None,
                        });
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot enter a gate's cgroup; gates are contained by process group and the sweep of live orphans from now on");
                        self.into.store(INTO_NONE, Ordering::Relaxed);
                    }
                }
            }
        }
        if want_scratch.is_some() {
            self.enforcer.scratch_unenforced();
        }
        bypass();
        let child = confined(spec, || command.spawn())?.map_err(|source| SpawnError::Start {
            program: program(),
            source,
        })?;
        Ok(Spawned {
            child: Child::spawned(child),
            entered: None,
            scratch_bytes: None,
        })
    }
}

/// A started child: how it entered its cgroup ("clone3", "moved", or
/// `None`: it is not in one) and the size of its scratch tmpfs, if any.
pub(super) struct Spawned {
    pub(super) child: Child,
    pub(super) entered: Option<&'static str>,
    pub(super) scratch_bytes: Option<u64>,
}

/// Runs `spawn` on a thread confined by the spec's sandbox plan (or here,
/// unconfined).
fn confined<T: Send>(
    spec: &ProcessSpec<'_>,
    spawn: impl FnOnce() -> T + Send,
) -> Result<T, SpawnError> {
    match spec.confine {
        Some(plan) => plan
            .spawn_confined(spawn)
            .map_err(|reason| SpawnError::Confine {
                program: spec.program.display().to_string(),
                reason,
            }),
        None => Ok(spawn()),
    }
}
