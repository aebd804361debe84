//! What the supervisor is given ([`ProcessSpec`] and its [`Limits`]) and
//! what it gives back ([`ProcessRun`], [`Termination`], [`SpawnError`]):
//! the types of [`Supervisor::run`](super::Supervisor::run), apart from
//! the run itself.

use super::{GateLimits, LimitHits, TailBuffer};
use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

/// Bounds applied to one supervised process.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// How long it may run, from the spawn, before its tree gets SIGTERM.
    pub timeout: Duration,
    /// How long after that SIGTERM the tree gets SIGKILL.
    pub grace: Duration,
    /// The most bytes kept of each of stdout and stderr (their tails).
    pub output_cap: usize,
    /// Memory, processes and file size of the whole tree.
    pub gate: GateLimits,
}

/// What to run.
#[derive(Debug)]
pub struct ProcessSpec<'a> {
    /// Absolute path of the program.
    pub program: &'a Path,
    /// Its arguments, after the program name (which is the program's path).
    pub args: &'a [OsString],
    /// Working directory, as a path the child can `chdir` to.
    pub cwd: &'a Path,
    /// The complete environment; nothing else is inherited.
    pub env: &'a [(OsString, OsString)],
    /// Bytes written to stdin, which is then closed; `None`: stdin is
    /// /dev/null.
    pub stdin: Option<Vec<u8>>,
    /// Its time, output and resource bounds.
    pub limits: Limits,
    /// The sandbox's confinement, applied to the spawning thread (and so
    /// inherited by the child) before the spawn; `None`: unconfined.
    pub confine: Option<&'a crate::sandbox::Plan<'a>>,
    /// The gate's private scratch directory (its `TMPDIR`), which
    /// `limits.gate.scratch_bytes` bounds; `None`: it has none.
    pub scratch: Option<&'a Path>,
    /// The run's overlay over its worktree and the working directory in
    /// it (relative to the worktree; `cwd` is the same directory in the
    /// worktree itself); `None`: the process runs on `cwd` itself. A spawn
    /// that cannot mount it runs on `cwd` and marks the overlay
    /// [`bypassed`](super::WorkOverlay::bypassed).
    pub overlay: Option<(&'a super::WorkOverlay, &'a Path)>,
}

/// How the main process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    /// It exited with this status code.
    Exited(i32),
    /// It was killed by this signal (the timeout's SIGTERM or SIGKILL
    /// among them).
    Signaled(i32),
    /// It could not be reaped within the bound after SIGKILL (a process
    /// stuck in the kernel). Never treated as success.
    Unreaped,
}

/// The result of one supervised run.
#[derive(Debug)]
pub struct ProcessRun {
    /// How the main process ended.
    pub termination: Termination,
    /// Whether the timeout fired (and the tree was signalled for it).
    pub timed_out: bool,
    /// The tail of what it wrote on stdout.
    pub stdout: TailBuffer,
    /// The tail of what it wrote on stderr.
    pub stderr: TailBuffer,
    /// From spawn to the end of the clean-up.
    pub elapsed: Duration,
    /// Processes of the tree still alive when the main process ended (counted
    /// where cgroups are available); all of them were killed.
    pub strays_killed: usize,
    /// True when an output pipe was still held open by something outside the
    /// tree after the clean-up, so reading stopped early.
    pub output_abandoned: bool,
    /// How the child entered its cgroup: "clone3" (born there), "moved"
    /// (the host stepped in for the spawn), or `None` (no cgroup).
    pub cgroup_entry: Option<&'static str>,
    /// The limits the tree is known to have hit.
    pub limits: LimitHits,
    /// The size of the tmpfs that held its scratch directory; `None`: its
    /// scratch was not bounded.
    pub scratch_bytes: Option<u64>,
}

/// Why a process could not be run at all (nothing of it is left running).
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The spawn itself failed (no such program, not executable, the
    /// working directory, a pipe).
    #[error("cannot start {program}: {source}")]
    Start {
        /// The program's path, shown.
        program: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The child could not apply its confinement (or it could not be
    /// prepared); it stopped before `execve`.
    #[error("the sandbox could not confine {program}: {reason}")]
    Confine {
        /// The program's path, shown.
        program: String,
        /// The step that failed and why.
        reason: String,
    },
    /// Its memory, process or file size bounds could not be set.
    #[error("cannot bound {program}: {reason}")]
    Limit {
        /// The program's path, shown.
        program: String,
        /// The bound that failed and why.
        reason: String,
    },
}
