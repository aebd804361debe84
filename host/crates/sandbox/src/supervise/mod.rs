//! Process supervision: spawn one program by argv, contain its whole tree,
//! bound its time and output, and leave nothing behind.
//!
//! Used by every process-based gate (shell and judge). Guarantees, whatever
//! the child does (hangs, ignores SIGTERM, forks a grandchild that keeps the
//! pipes open, calls `setsid`, floods output):
//! - it is spawned by argv, never through a shell, in a process group of
//!   its own, stdin closed or fed from memory, the environment exactly as
//!   given; where cgroups are available it is born in a cgroup of its own
//!   (`spawn`: `clone3(CLONE_INTO_CGROUP)`, no process moves), else the
//!   host steps into that cgroup for the spawn (a kernel or seccomp filter
//!   that refuses `clone3` into a cgroup), else process groups only;
//! - each output stream is read to its end into a tail buffer of at most
//!   `output_cap` bytes;
//! - on timeout the tree gets SIGTERM, then SIGKILL after `grace`;
//! - its memory, processes and file sizes are bounded (`limits`: cgroup
//!   v2 `memory.max` and `pids.max`, else v1 cgroups, else rlimits), and
//!   the run says which limit it is known to have hit; what it writes to
//!   its scratch directory is held by a tmpfs of a bounded size (`scratch`);
//!   where gates join v1 cgroups, a supervisor that keeps one (`ready`)
//!   makes the next gate's child ahead, already in them (`parked`), so
//!   that no process moves between cgroups at a gate's start;
//! - once the main process has ended (by itself or by the timeout) every
//!   process left in its group and in its cgroup is killed, the cgroup is
//!   removed, orphans re-parented to the host are swept, and `run` returns
//!   within timeout + grace + about half a second.
//!
//! The process group, the bounds on time and output, and the rlimits hold on
//! every Unix. The rest is Linux's: the `clone3` spawn (`spawn`), the
//! scratch tmpfs and the subreaper are compiled only there, and the cgroups
//! (v2 and v1) are found through `/proc/self/cgroup`, which no other system
//! has (the platform interface of the confinement itself is
//! [`crate::sandbox::platform`]). Elsewhere a gate is spawned by std's
//! `Command` into a process group of its own, its address space and file
//! sizes bounded by rlimits, and its tree killed by that group.
//!
//! It must never wait on an output pipe without a bound, and must never
//! return while a process it started may still be running.

mod capture;
mod cgroup;
mod child;
mod events;
mod limits;
mod mounts;
mod overlay;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod parked;
#[cfg_attr(not(target_os = "linux"), path = "process_std.rs")]
mod process;
#[cfg(target_os = "linux")]
mod program;
mod ready;
pub mod reaper;
mod scratch;
#[cfg(target_os = "linux")]
mod spawn;
mod spawn_mode;
mod spec;
mod start;
mod v1;

pub use capture::TailBuffer;
pub use limits::{
    DEFAULT_GATE_FILE_BYTES, DEFAULT_GATE_PIDS, DEFAULT_GATE_SCRATCH_BYTES, GateLimits, LimitHits,
    default_gate_memory,
};
pub use overlay::WorkOverlay;
pub use process::{Process, StartedProcess, start_process};
pub use scratch::hint as scratch_hint;
pub use spawn_mode::SpawnMode;
pub use spec::{Limits, ProcessRun, ProcessSpec, SpawnError, Termination};

use cgroup::{Cgroups, ProcessCgroup};
use child::{Child, wait_for};
use futures_lite::AsyncWriteExt;
use ready::{ParkedStart, Ready};
use rustix::process::Signal;
use start::Spawned;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long to wait for a killed process to be reaped before giving up.
const REAP_BOUND: Duration = Duration::from_millis(500);
/// How long to wait for the output pipes to close once the tree is dead.
const DRAIN_BOUND: Duration = Duration::from_millis(250);
/// How long to wait for a killed cgroup to empty.
const CGROUP_EMPTY_BOUND: Duration = Duration::from_millis(250);

/// Runs processes with the guarantees above. One per host.
#[derive(Debug)]
pub struct Supervisor {
    cgroups: Option<Cgroups>,
    /// How a child gets into its cgroup: one of the `INTO_*` values. It
    /// only ever steps down, when a way turns out not to work here.
    into: AtomicU8,
    /// How gates' memory and processes are bounded where the v2 cgroup
    /// cannot.
    enforcer: limits::Enforcer,
    /// How a child is cloned (`[sandbox] spawn`).
    mode: SpawnMode,
    /// Whether the next gate's start is made ahead where gates join v1
    /// cgroups (see `parked`); off once it turns out not to apply here.
    keep_ready: std::sync::atomic::AtomicBool,
    /// That start, once made.
    ready: Mutex<Option<Ready>>,
}

/// Born in it: `clone3(CLONE_INTO_CGROUP)`, no process moves.
const INTO_BY_CLONE: u8 = 0;
/// The host steps into the cgroup for the spawn and back out (two writes
/// to `cgroup.procs`), where `clone3` into a cgroup is refused (an old
/// kernel, a seccomp filter).
const INTO_BY_MOVING: u8 = 1;
/// Not at all: process groups and the sweep of live orphans.
const INTO_NONE: u8 = 2;

impl Default for Supervisor {
    fn default() -> Self {
        Self::new()
    }
}

impl Supervisor {
    /// Makes the host a child subreaper and detects cgroup v2 support.
    pub fn new() -> Self {
        reaper::become_subreaper();
        let cgroups = Cgroups::detect();
        match &cgroups {
            Some(_) => tracing::debug!("each gate runs in its own cgroup v2"),
            None => tracing::info!(
                "cgroup v2 not available to this host: gates are contained by process group and the subreaper sweep"
            ),
        }
        let enforcer = limits::Enforcer::detect(cgroups.as_ref());
        Supervisor {
            cgroups,
            into: AtomicU8::new(INTO_BY_CLONE),
            enforcer,
            mode: SpawnMode::default(),
            keep_ready: Default::default(),
            ready: Mutex::new(None),
        }
    }

    /// A supervisor that does not use cgroups (of either version) even
    /// where it could, to test the fallback: its gates' memory is bounded
    /// by `RLIMIT_AS`, their processes not at all.
    pub fn without_cgroups() -> Self {
        reaper::become_subreaper();
        Supervisor {
            cgroups: None,
            into: AtomicU8::new(INTO_NONE),
            enforcer: limits::Enforcer::rlimits_only(),
            mode: SpawnMode::default(),
            keep_ready: Default::default(),
            ready: Mutex::new(None),
        }
    }

    /// This supervisor, cloning its children as `mode` says
    /// (`[sandbox] spawn`).
    pub fn spawning(mut self, mode: SpawnMode) -> Self {
        self.mode = mode;
        self
    }

    /// A supervisor that puts each child into its cgroup by moving itself
    /// there for the spawn, as it does where `clone3` is refused (to test
    /// that way here).
    pub fn moving_into_cgroups() -> Self {
        let s = Self::new();
        s.into.store(INTO_BY_MOVING, Ordering::Relaxed);
        s
    }

    /// "cgroup" or "process-group": how trees are contained.
    pub fn containment(&self) -> &'static str {
        if self.cgroups.is_some() && self.into.load(Ordering::Relaxed) != INTO_NONE {
            "cgroup"
        } else {
            "process-group"
        }
    }

    /// How a child enters its cgroup: "clone3", "moving" or "none".
    pub fn cgroup_entry(&self) -> &'static str {
        match (self.cgroups.is_some(), self.into.load(Ordering::Relaxed)) {
            (true, INTO_BY_CLONE) => "clone3",
            (true, INTO_BY_MOVING) => "moving",
            _ => "none",
        }
    }

    /// Runs `spec` to its end under its limits and cleans up its whole
    /// tree; how it ended is in the [`ProcessRun`], the error only when it
    /// could not be started, confined or bounded.
    pub async fn run(&self, spec: ProcessSpec<'_>) -> Result<ProcessRun, SpawnError> {
        let start = Instant::now();
        let (cgroup, mut bounds, mut parked) = match self.take_ready(spec.limits.gate) {
            Some((cgroup, bounds, parked)) => (cgroup, bounds, Some(parked)),
            None => {
                let mut cgroup = self.cgroups.as_ref().and_then(|c| match c.take() {
                    Ok(cg) => Some(cg),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot create a cgroup; relying on the process group");
                        None
                    }
                });
                let bounds =
                    self.enforcer
                        .apply(spec.limits.gate, self.cgroups.as_ref(), cgroup.as_mut());
                (cgroup, bounds, None)
            }
        };
        let parked_pid = parked.as_ref().map(|p| p.pid());

        let mut cmd = std::process::Command::new(spec.program);
        cmd.args(spec.args)
            .env_clear()
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .current_dir(spec.cwd)
            .process_group(0);
        bounds.child.before_exec_of(&mut cmd);
        let mut command = async_process::Command::from(cmd);
        // `From<std::process::Command>` forgets stdio: set it again.
        command
            .stdin(if spec.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let spawned = {
            // Spawn and record under the registry lock, so that a sweep
            // running elsewhere never takes this child for an orphan, and so
            // that only one spawn at a time steps into a gate's cgroup.
            let mut reg = reaper::registry();
            let spawned = self.spawn(
                &spec,
                &mut command,
                cgroup.as_ref(),
                &bounds.child,
                &mut parked,
            );
            if let Ok(s) = &spawned {
                reg.children.insert(s.child.id());
                if let (Some(cg), Some(_)) = (&cgroup, s.entered) {
                    reg.live_cgroups.insert(cg.path().to_path_buf());
                }
            }
            // A parked child not woken (another way was taken) is killed
            // and reaped; one that failed has been reaped.
            drop(parked.take());
            if let Some(pid) = parked_pid
                && spawned.as_ref().map_or(true, |s| s.child.id() != pid)
            {
                reg.children.remove(&pid);
            }
            spawned
        };
        bounds.spawned();
        // The next gate's start, made while this one runs.
        self.make_ready(spec.limits.gate);
        let Spawned {
            mut child,
            entered,
            scratch_bytes,
        } = match spawned {
            Ok(c) => c,
            Err(e) => {
                if let (Some(c), Some(cg)) = (&self.cgroups, cgroup) {
                    c.release(cg, CGROUP_EMPTY_BOUND).await;
                }
                return Err(e);
            }
        };
        // A cgroup the child is not in (entering it failed) contains nothing:
        // give it back now, and sweep for live orphans below.
        let in_cgroup = entered.is_some();
        let mut cgroup = match (in_cgroup, cgroup, &self.cgroups) {
            (true, cg, _) => cg,
            (false, Some(cg), Some(c)) => {
                c.release(cg, CGROUP_EMPTY_BOUND).await;
                None
            }
            (false, _, _) => None,
        };
        let pid = child.id();
        // If this future is dropped before the end (a cancelled policy),
        // the guard kills the whole tree at once.
        let mut guard = KillOnDrop {
            pid,
            cgroup: cgroup.as_ref().map(|c| c.path().to_path_buf()),
            armed: true,
        };
        tracing::debug!(pid, program = %spec.program.display(), contained_by = if cgroup.is_some() { "cgroup" } else { "process-group" }, entered = entered.unwrap_or("no"), "spawned");

        let stdin_task = match (child.stdin.take(), spec.stdin) {
            (Some(mut pipe), Some(bytes)) => Some(tokio::spawn(async move {
                // A child that exits without reading gives EPIPE: not an error.
                let _ = pipe.write_all(&bytes).await;
                let _ = pipe.close().await;
            })),
            _ => None,
        };
        let cap = spec.limits.output_cap;
        let stdout_buf = Arc::new(Mutex::new(TailBuffer::new(cap)));
        let stderr_buf = Arc::new(Mutex::new(TailBuffer::new(cap)));
        let readers = [
            child
                .stdout
                .take()
                .map(|r| tokio::spawn(capture::capture_into(r, stdout_buf.clone()))),
            child
                .stderr
                .take()
                .map(|r| tokio::spawn(capture::capture_into(r, stderr_buf.clone()))),
        ];

        let mut timed_out = false;
        let status = match wait_for(&mut child, spec.limits.timeout).await {
            Some(status) => Some(status),
            None => {
                timed_out = true;
                tracing::info!(pid, timeout = ?spec.limits.timeout, "timed out: SIGTERM to the tree");
                signal_tree(pid, cgroup.as_ref(), Signal::TERM);
                match wait_for(&mut child, spec.limits.grace).await {
                    Some(status) => Some(status),
                    None => {
                        tracing::info!(pid, "still running after the grace period: SIGKILL");
                        signal_tree(pid, cgroup.as_ref(), Signal::KILL);
                        wait_for(&mut child, REAP_BOUND).await
                    }
                }
            }
        };
        let termination = match status {
            Some(Ok(s)) => match (s.code(), s.signal()) {
                (Some(code), _) => Termination::Exited(code),
                (None, Some(sig)) => Termination::Signaled(sig),
                (None, None) => Termination::Unreaped,
            },
            Some(Err(e)) => {
                tracing::warn!(pid, error = %e, "waiting on the child failed");
                Termination::Unreaped
            }
            None => Termination::Unreaped,
        };

        // The main process is gone (or unkillable): nothing of its tree may
        // outlive the gate. The cgroup is emptied first, so that what was
        // left in it is counted before anything else kills it; then the
        // process group (the whole tree where there is no cgroup).
        let limits = bounds.hits(cgroup.as_mut(), termination);
        if let Some(hit) = limits.describe() {
            tracing::info!(pid, program = %spec.program.display(), "{hit}");
        }
        let strays_killed = match (&self.cgroups, cgroup) {
            (Some(c), Some(cg)) => {
                let path = cg.path().to_path_buf();
                let n = c.release(cg, CGROUP_EMPTY_BOUND).await;
                reaper::registry().live_cgroups.remove(&path);
                bounds.release(CGROUP_EMPTY_BOUND).await;
                n
            }
            _ => bounds.release(CGROUP_EMPTY_BOUND).await,
        };
        signal_tree(pid, None, Signal::KILL);
        if termination != Termination::Unreaped {
            reaper::registry().children.remove(&pid);
        }
        reaper::sweep(!in_cgroup);

        if let Some(task) = stdin_task {
            task.abort();
        }
        let mut output_abandoned = false;
        for reader in readers.into_iter().flatten() {
            let abort = reader.abort_handle();
            if tokio::time::timeout(DRAIN_BOUND, reader).await.is_err() {
                abort.abort();
                output_abandoned = true;
            }
        }
        if output_abandoned {
            tracing::warn!(
                pid,
                "an output pipe stayed open after the tree was killed; stopped reading"
            );
        }
        drop(child);
        guard.armed = false;
        let take = |b: Arc<Mutex<TailBuffer>>| {
            let mut guard = b.lock().unwrap_or_else(|p| p.into_inner());
            std::mem::take(&mut *guard)
        };
        Ok(ProcessRun {
            termination,
            timed_out,
            stdout: take(stdout_buf),
            stderr: take(stderr_buf),
            elapsed: start.elapsed(),
            strays_killed,
            output_abandoned,
            cgroup_entry: entered,
            limits,
            scratch_bytes,
        })
    }
}

/// Kills a gate's tree when its run is abandoned mid-way (the future was
/// dropped: its policy was cancelled). Synchronous: SIGKILL to the group
/// and `cgroup.kill`; the emptied cgroup is removed by a short-lived thread.
struct KillOnDrop {
    pid: i32,
    cgroup: Option<PathBuf>,
    armed: bool,
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        tracing::info!(
            pid = self.pid,
            "gate abandoned (cancelled): killing its process tree"
        );
        kill_group(self.pid, Signal::KILL);
        reaper::registry().children.remove(&self.pid);
        if let Some(path) = self.cgroup.take() {
            let _ = std::fs::write(path.join("cgroup.kill"), "1");
            std::thread::spawn(move || {
                let procs = path.join("cgroup.procs");
                for _ in 0..100 {
                    if std::fs::read_to_string(&procs).is_ok_and(|t| t.trim().is_empty()) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                let _ = std::fs::remove_dir(&path);
                reaper::registry().live_cgroups.remove(&path);
            });
        }
    }
}

/// Sends `sig` to the process group led by `pid` and to every process in
/// the cgroup (which includes those that left the group with `setsid`).
fn signal_tree(pid: i32, cgroup: Option<&ProcessCgroup>, sig: Signal) {
    kill_group(pid, sig);
    if let Some(cg) = cgroup {
        for member in cg.pids() {
            kill(member, sig);
        }
    }
}

/// Sends `sig` to the process group `pgid`; false if it could not (gone).
pub(crate) fn kill_group(pgid: i32, sig: Signal) -> bool {
    rustix::process::Pid::from_raw(pgid)
        .is_some_and(|p| rustix::process::kill_process_group(p, sig).is_ok())
}

/// Sends `sig` to the process `pid`; false if it could not (gone).
pub(crate) fn kill(pid: i32, sig: Signal) -> bool {
    rustix::process::Pid::from_raw(pid)
        .is_some_and(|p| rustix::process::kill_process(p, sig).is_ok())
}

/// A program name resolved on a PATH, or `None`.
///
/// Only absolute PATH entries are searched: a relative entry would resolve
/// against the workspace, which the agent controls.
pub fn find_on_path(name: &str, path_var: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    let path_var = path_var?;
    let absolute: Vec<PathBuf> = std::env::split_paths(path_var)
        .filter(|p| p.is_absolute())
        .collect();
    let joined = std::env::join_paths(absolute).ok()?;
    which::which_in(name, Some(joined), "/").ok()
}

// (Its tests hold Linux's ways: cgroups, clone3, namespaces.)
#[cfg(all(test, target_os = "linux"))]
mod tests;
