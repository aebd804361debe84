//! A process the host starts with the child program outside any gate:
//! the agents the daemon runs (`engine::agent_process`). Same program as
//! a gate's ([`super::program`]): its own process group, exactly the
//! given environment, the confinement applied before its first
//! instruction, and (here) the parent-death signal; no cgroup, no limits.
//!
//! It owns starting such a process, registering it with the reaper (so
//! that the sweep of gates' orphans never takes it for one) and waiting on
//! it; it never signals more than the process itself (its owner kills its
//! group).

use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::process::ExitStatus;

/// The host's end of the process's stdin.
pub(super) type Writer = Box<dyn futures_lite::AsyncWrite + Send + Unpin>;
/// The host's end of its stdout or stderr.
pub(super) type Reader = Box<dyn futures_lite::AsyncRead + Send + Unpin>;
use super::program::{Exec, SpawnMode};
use super::spawn::{self, PidfdChild, Started};

// The start off Linux (`process_std.rs`), tested here too.
// (Its items are `pub` for that platform's re-exports: unreachable here.)
#[cfg(test)]
#[allow(unreachable_pub)]
#[path = "process_std.rs"]
mod std_start;

/// Started, not yet watched by a runtime: it may be handed from the
/// thread that started it (the one its death signal is bound to) to
/// another.
#[derive(Debug)]
pub struct StartedProcess {
    started: Started,
    tracked: super::reaper::Tracked,
}

/// Starts `program args…` in `cwd` with exactly `env`, stdio piped, in a
/// process group of its own, confined by `confine`, killed by the kernel
/// when the calling thread ends (`PR_SET_PDEATHSIG(SIGKILL)`, set after
/// the confinement: a uid switch would clear it).
pub fn start_process(
    program: &Path,
    args: &[OsString],
    env: &[(OsString, OsString)],
    cwd: &Path,
    confine: Option<&crate::sandbox::confine::Prepared>,
    mode: SpawnMode,
) -> io::Result<StartedProcess> {
    let limits = super::limits::ChildLimits::default();
    let exec = Exec {
        program,
        args,
        env,
        cwd,
        piped_stdin: true,
        confine,
        limits: &limits,
        scratch: None,
        overlay: None,
        die_with_parent: true,
        mode,
    };
    let (started, tracked) = super::reaper::Tracked::spawn(
        || spawn::start(None, &exec).map_err(spawn::CloneError::into_io),
        |s| s.pid.unsigned_abs(),
    )?;
    Ok(StartedProcess { started, tracked })
}

impl StartedProcess {
    /// Its pid (and its process group's id: it leads its group).
    pub fn id(&self) -> i32 {
        self.started.pid
    }

    /// Watched by the current tokio runtime from now on (errs outside
    /// one). Dropped on error: the caller kills the process group.
    pub fn watch(self) -> io::Result<Process> {
        use tokio::net::unix::pipe;
        use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};
        let StartedProcess { started, tracked } = self;
        let Started {
            pid,
            pidfd,
            stdin,
            stdout,
            stderr,
            mount_ns,
        } = started;
        let child = PidfdChild::new(pid, pidfd)?.holding(mount_ns);
        let stdin = match stdin {
            Some(w) => {
                Some(Box::new(pipe::Sender::from_owned_fd(w.into())?.compat_write()) as Writer)
            }
            None => None,
        };
        let reader = |r: std::io::PipeReader| -> io::Result<Reader> {
            Ok(Box::new(pipe::Receiver::from_owned_fd(r.into())?.compat()))
        };
        Ok(Process {
            stdin,
            stdout: Some(reader(stdout)?),
            stderr: Some(reader(stderr)?),
            child,
            _tracked: tracked,
        })
    }
}

/// A running process started by [`start_process`] and its pipes' host
/// ends; unregistered from the reaper when dropped (after it was waited
/// on).
pub struct Process {
    /// The host's end of its stdin, until the caller takes it.
    pub stdin: Option<Writer>,
    /// The host's end of its stdout, until the caller takes it.
    pub stdout: Option<Reader>,
    /// The host's end of its stderr, until the caller takes it.
    pub stderr: Option<Reader>,
    child: PidfdChild,
    _tracked: super::reaper::Tracked,
}

impl std::fmt::Debug for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Process")
            .field("pid", &self.child.id())
            .finish_non_exhaustive()
    }
}

impl Process {
    /// Its pid (and its process group's id).
    pub fn id(&self) -> i32 {
        self.child.id()
    }

    /// Waits for the process to end and reaps it (later calls return the
    /// same status).
    pub async fn status(&mut self) -> io::Result<ExitStatus> {
        self.child.status().await
    }

    /// The status if it has ended (reaping it), without waiting.
    pub fn try_status(&mut self) -> io::Result<Option<ExitStatus>> {
        self.child.try_status()
    }

    /// SIGKILLs the process itself (not its group), unless it was reaped.
    pub fn kill(&mut self) -> io::Result<()> {
        if matches!(self.child.try_status(), Ok(Some(_))) {
            return Ok(());
        }
        if super::kill(self.child.id(), rustix::process::Signal::KILL) {
            Ok(())
        } else {
            Err(io::Error::other("the process is gone"))
        }
    }
}
