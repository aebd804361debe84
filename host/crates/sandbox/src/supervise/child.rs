//! A supervised child, whichever way it was started (born in its cgroup
//! by `spawn`, or by async-process), the host's ends of its pipes, and how
//! it is waited on with a bound. It owns waiting and reaping only; it must
//! never signal or kill (the supervisor does).

#[cfg(target_os = "linux")]
use super::spawn;
use std::time::Duration;

/// Waits up to `bound` for the child to end; `None`: it is still running.
///
/// When the timer fires, the child is looked at once more before it is
/// called late: a host that was stopped (SIGSTOP, a suspended VM, a
/// machine under load) wakes up with the timer and the child's exit both
/// due, and the timer may be seen first. A child that has already exited
/// did so in time, as far as anyone can tell: it is never judged "timed
/// out".
pub(super) async fn wait_for(
    child: &mut Child,
    bound: Duration,
) -> Option<std::io::Result<std::process::ExitStatus>> {
    match tokio::time::timeout(bound, child.status()).await {
        Ok(status) => Some(status),
        Err(_) => child.try_status(),
    }
}

pub(super) type Reader = Box<dyn futures_lite::AsyncRead + Send + Unpin>;
pub(super) type Writer = Box<dyn futures_lite::AsyncWrite + Send + Unpin>;

/// A supervised child, whichever way it was started, and the host's ends
/// of its pipes.
pub(super) struct Child {
    pub(super) process: Process,
    pub(super) stdin: Option<Writer>,
    pub(super) stdout: Option<Reader>,
    pub(super) stderr: Option<Reader>,
}

pub(super) enum Process {
    Spawned(async_process::Child),
    /// Born by `clone3` (Linux only).
    #[cfg(target_os = "linux")]
    Cloned(spawn::PidfdChild),
}

impl Child {
    pub(super) fn spawned(mut child: async_process::Child) -> Child {
        Child {
            stdin: child.stdin.take().map(|p| Box::new(p) as Writer),
            stdout: child.stdout.take().map(|p| Box::new(p) as Reader),
            stderr: child.stderr.take().map(|p| Box::new(p) as Reader),
            process: Process::Spawned(child),
        }
    }

    /// The pipes and the pidfd are watched by the tokio runtime's reactor.
    #[cfg(target_os = "linux")]
    pub(super) fn started(s: spawn::Started) -> std::io::Result<Child> {
        use tokio::net::unix::pipe;
        use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};
        spawn::in_runtime()?;
        let process = Process::Cloned(spawn::PidfdChild::new(s.pid, s.pidfd)?.holding(s.mount_ns));
        let stdin = match s.stdin {
            Some(w) => {
                Some(Box::new(pipe::Sender::from_owned_fd(w.into())?.compat_write()) as Writer)
            }
            None => None,
        };
        let reader = |r: std::io::PipeReader| -> std::io::Result<Reader> {
            Ok(Box::new(pipe::Receiver::from_owned_fd(r.into())?.compat()))
        };
        Ok(Child {
            stdin,
            stdout: Some(reader(s.stdout)?),
            stderr: Some(reader(s.stderr)?),
            process,
        })
    }

    pub(super) fn id(&self) -> i32 {
        match &self.process {
            Process::Spawned(c) => c.id() as i32,
            #[cfg(target_os = "linux")]
            Process::Cloned(c) => c.id(),
        }
    }

    pub(super) async fn status(&mut self) -> std::io::Result<std::process::ExitStatus> {
        #[cfg(all(test, target_os = "linux"))]
        if super::tests::BLIND_TO_EXITS.get() {
            // A test's stand-in for a host that has not yet seen the exit
            // it slept through: only `try_status` finds it.
            return std::future::pending().await;
        }
        match &mut self.process {
            Process::Spawned(c) => c.status().await,
            #[cfg(target_os = "linux")]
            Process::Cloned(c) => c.status().await,
        }
    }

    /// The exit status if the child has ended (and reaps it), without
    /// waiting; `None` while it runs.
    pub(super) fn try_status(&mut self) -> Option<std::io::Result<std::process::ExitStatus>> {
        match &mut self.process {
            Process::Spawned(c) => c.try_status().transpose(),
            #[cfg(target_os = "linux")]
            Process::Cloned(c) => c.try_status().transpose(),
        }
    }
}
