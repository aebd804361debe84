//! A process the host starts outside any gate (the agents the daemon runs:
//! `engine::agent_process`) on a platform other than Linux, where there is
//! no child program (`program`, `spawn`: Linux's). It is started by std's
//! `Command` (through async-process): its own process group, stdio piped,
//! exactly the given environment; no confinement (there is none to apply
//! here: `sandbox::confine::Prepared` has no value), no cgroup, no limits,
//! and **no death signal**: an agent outlives a daemon that died, and the
//! next daemon finds it by its group (`engine::agent_process`).
//!
//! It owns starting such a process, registering it with the reaper (so
//! that the sweep of gates' orphans never takes it for one) and waiting on
//! it; it never signals more than the process itself (its owner kills its
//! group).

use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};

use crate::supervise::SpawnMode;

/// The host's end of the process's stdin.
pub(super) type Writer = Box<dyn futures_lite::AsyncWrite + Send + Unpin>;
/// The host's end of its stdout or stderr.
pub(super) type Reader = Box<dyn futures_lite::AsyncRead + Send + Unpin>;

/// Started, not yet watched (the same steps as on Linux, where the watch
/// needs a tokio runtime).
#[derive(Debug)]
pub struct StartedProcess {
    child: async_process::Child,
    tracked: crate::supervise::reaper::Tracked,
}

/// Starts `program args…` in `cwd` with exactly `env`, stdio piped, in a
/// process group of its own. `confine` cannot hold a value here; `mode`
/// (how Linux's child program is cloned) does not apply to std's spawn.
pub fn start_process(
    program: &Path,
    args: &[OsString],
    env: &[(OsString, OsString)],
    cwd: &Path,
    confine: Option<&crate::sandbox::confine::Prepared>,
    mode: SpawnMode,
) -> io::Result<StartedProcess> {
    #[cfg(not(target_os = "linux"))]
    if let Some(prepared) = confine {
        match *prepared {}
    }
    // (Compiled on Linux for its tests only, as `process::std_start`,
    // where a confinement exists and this spawn cannot apply it.)
    #[cfg(target_os = "linux")]
    if confine.is_some() {
        return Err(io::Error::other("std's spawn cannot confine"));
    }
    let _ = mode;
    let mut cmd = std::process::Command::new(program);
    cmd.args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .process_group(0);
    let mut command = async_process::Command::from(cmd);
    // `From<std::process::Command>` forgets stdio: set it again.
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(false);
    let (child, tracked) =
        crate::supervise::reaper::Tracked::spawn(|| command.spawn(), |c| c.id())?;
    Ok(StartedProcess { child, tracked })
}

impl StartedProcess {
    /// Its pid (and its process group's id: it leads its group).
    pub fn id(&self) -> i32 {
        self.child.id() as i32
    }

    /// Takes the host's ends of the pipes. Dropped on error: the caller
    /// kills the process group.
    pub fn watch(self) -> io::Result<Process> {
        let StartedProcess { mut child, tracked } = self;
        let missing = || io::Error::other("a piped stream of the process is missing");
        let stdin = child.stdin.take().map(|p| Box::new(p) as Writer);
        let stdout = Box::new(child.stdout.take().ok_or_else(missing)?) as Reader;
        let stderr = Box::new(child.stderr.take().ok_or_else(missing)?) as Reader;
        Ok(Process {
            stdin,
            stdout: Some(stdout),
            stderr: Some(stderr),
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
    child: async_process::Child,
    _tracked: crate::supervise::reaper::Tracked,
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
        self.child.id() as i32
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
        if crate::supervise::kill(self.id(), rustix::process::Signal::KILL) {
            Ok(())
        } else {
            Err(io::Error::other("the process is gone"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_lite::future::block_on;
    use futures_lite::{AsyncReadExt, AsyncWriteExt};
    use std::os::unix::process::ExitStatusExt;

    fn sh(script: &str, env: &[(&str, &str)]) -> StartedProcess {
        let args = [OsString::from("-c"), OsString::from(script)];
        let env: Vec<(OsString, OsString)> =
            env.iter().map(|(k, v)| (k.into(), v.into())).collect();
        start_process(
            Path::new("/bin/sh"),
            &args,
            &env,
            Path::new("/"),
            None,
            SpawnMode::default(),
        )
        .expect("start /bin/sh")
    }

    async fn read_all(r: &mut Option<Reader>) -> String {
        let mut text = String::new();
        let reader = r.as_mut().expect("piped");
        reader.read_to_string(&mut text).await.expect("read");
        text
    }

    #[test]
    fn pipes_and_exactly_the_given_environment() {
        let started = sh(
            r#"echo "$GREETING ${HOME-unset} $(pwd)"; echo oops >&2; read line; echo "got $line""#,
            &[("GREETING", "hello")],
        );
        let mut p = started.watch().expect("watch");
        block_on(async {
            let mut stdin = p.stdin.take().expect("stdin piped");
            stdin.write_all(b"ping\n").await.expect("write");
            stdin.close().await.expect("close");
            drop(stdin);
            assert_eq!(read_all(&mut p.stdout).await, "hello unset /\ngot ping\n");
            assert_eq!(read_all(&mut p.stderr).await, "oops\n");
            assert_eq!(p.status().await.expect("status").code(), Some(0));
        });
        assert_eq!(p.try_status().expect("try").and_then(|s| s.code()), Some(0));
        // Reaped: killing it again is not an error.
        p.kill().expect("kill after the end");
    }

    #[test]
    fn its_own_process_group_and_killed_by_kill() {
        let started = sh("read line", &[]);
        let pid = started.id();
        let mut p = started.watch().expect("watch");
        assert_eq!(p.id(), pid);
        let pgid = rustix::process::getpgid(rustix::process::Pid::from_raw(pid))
            .expect("getpgid")
            .as_raw_nonzero()
            .get();
        assert_eq!(pgid, pid, "the leader of a group of its own");
        assert!(p.try_status().expect("try").is_none(), "still reading");
        p.kill().expect("kill");
        let status = block_on(p.status()).expect("status");
        assert_eq!(status.signal(), Some(libc::SIGKILL));
    }
}
