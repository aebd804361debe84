//! Starting the processes `session start` runs (agents) so that they die
//! with the daemon, and finding what a dead daemon's agents left.
//!
//! Each agent is started by the same child program as a gate
//! (`supervise::program`, through `supervise::start_process`): its own
//! process group's leader, confined before its first instruction, with
//! `PR_SET_PDEATHSIG(SIGKILL)`: when the daemon dies, SIGKILL included, the
//! kernel kills the agent. The kernel sends that signal when the *thread*
//! that forked the child exits, not the process: so every agent is forked
//! by one thread made for it, which lives as long as the daemon (a tokio
//! worker may hand its place to another thread and end, and the blocking
//! pool's threads end when idle: either would kill agents that are well).
//! The signal reaches the agent only, not what it started; those stay in
//! its process group, which the next daemon kills at start
//! (`leftover_group`). (The child program, the confinement and the death
//! signal are Linux's: on other platforms `supervise::start_process`
//! starts the agent with std's `Command`, its group's leader only, and an
//! agent outlives a daemon that died.)
//!
//! This module never kills a process it cannot tell is an agent's.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::mpsc;

type Job = Box<dyn FnOnce() + Send>;

/// The thread that forks agents: made on first use, never ended.
fn forker() -> std::io::Result<&'static mpsc::Sender<Job>> {
    static FORKER: OnceLock<mpsc::Sender<Job>> = OnceLock::new();
    if let Some(tx) = FORKER.get() {
        return Ok(tx);
    }
    let (tx, rx) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("gatehost-agent-forker".into())
        .spawn(move || {
            for job in rx {
                job();
            }
        })?;
    // Two first callers at once: one thread's sender wins; the other's
    // thread ends when its sender is dropped here (it forked nothing).
    Ok(FORKER.get_or_init(|| tx))
}

/// A running agent: its process, its pipes, and its place in the
/// supervisor's registry of the host's own children (so that the sweep of
/// gates' orphans, which runs after every gate where there are no
/// cgroups, never takes the agent for one), given up when this is
/// dropped, after the agent was waited on.
pub(super) type Agent = crate::supervise::Process;

/// What to start as an agent.
#[derive(Debug)]
pub(super) struct AgentCommand {
    /// The resolved program.
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// Added to (or replacing in) the daemon's own environment.
    pub env: Vec<(OsString, OsString)>,
    pub cwd: PathBuf,
}

/// An agent's environment: the daemon's (`daemon`), less the store's
/// password (`GATEHOST_STORE_PASSWORD`: the database is the daemon's, never
/// an agent's), with the agent's own (`own`) on top.
fn agent_env(
    daemon: impl Iterator<Item = (OsString, OsString)>,
    own: &[(OsString, OsString)],
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = daemon
        .filter(|(k, _)| k != crate::config::PASSWORD_ENV)
        .filter(|(k, _)| !own.iter().any(|(name, _)| name == k))
        .collect();
    env.extend(own.iter().cloned());
    env
}

/// Starts `cmd` (stdio piped) as an agent with the child program
/// (`supervise::program`, cloned as `[sandbox] spawn` says): in a process
/// group of its own, killed when the daemon dies, confined by `rules`
/// (applied in the child before its exec: the agent's first instruction
/// is confined); off Linux in its own process group only (see the module
/// doc). Called in a tokio runtime, which watches the agent.
pub(super) fn spawn(
    cmd: AgentCommand,
    rules: Option<crate::sandbox::confine::Prepared>,
    mode: crate::supervise::SpawnMode,
) -> std::io::Result<Agent> {
    let env = agent_env(std::env::vars_os(), &cmd.env);
    let (tx, rx) = mpsc::sync_channel(1);
    forker()?
        .send(Box::new(move || {
            let started = crate::supervise::start_process(
                &cmd.program,
                &cmd.args,
                &env,
                &cmd.cwd,
                rules.as_ref(),
                mode,
            );
            let _ = tx.send(started);
        }))
        .map_err(|_| std::io::Error::other("the agent forker thread is gone"))?;
    let started = rx
        .recv()
        .map_err(|_| std::io::Error::other("the agent forker thread is gone"))??;
    let pid = started.id();
    started.watch().inspect_err(|_| {
        // Not watched: not left running either.
        let _ = kill_group(pid);
    })
}

/// What a previous daemon's agent (its pid `pid`, started as `argv`) left:
/// the live processes of its process group.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Leftover {
    /// The agent itself still runs (it should have died with its daemon).
    pub leader_alive: bool,
    /// Other processes of its group (what it started).
    pub members: Vec<i32>,
}

/// The leftovers of the agent `pid`, from the process table. A process
/// with that pid whose command line is not `argv` is another program that
/// got the pid since (not the agent's: `None`); group members are the
/// agent's for sure (a pid is not given out again while a group of that
/// number has members).
pub(super) fn leftover_group(pid: i32, argv: &[String]) -> Option<Leftover> {
    let mut left = Leftover::default();
    let entries = std::fs::read_dir("/proc").ok()?;
    for e in entries.flatten() {
        let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // After the command's closing parenthesis: state ppid pgrp ...
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() == Some(&"Z") || fields.get(2).and_then(|g| g.parse().ok()) != Some(pid) {
            continue;
        }
        if p == pid {
            if !same_command(p, argv) {
                return None;
            }
            left.leader_alive = true;
        } else {
            left.members.push(p);
        }
    }
    Some(left)
}

/// Whether `/proc/pid/cmdline` is `argv` (its first word compared by
/// file name: the agent was started by its resolved path).
fn same_command(pid: i32, argv: &[String]) -> bool {
    let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let words: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    let name = |s: &str| {
        std::path::Path::new(s)
            .file_name()
            .map(|n| n.to_os_string())
    };
    words.len() == argv.len()
        && words.first().map(|w| name(w)) == argv.first().map(|a| name(a))
        && words[1..] == argv[1..]
}

/// SIGKILLs the process group `pgid` (the agent's, whose leader is gone).
pub(super) fn kill_group(pgid: i32) -> std::io::Result<()> {
    let group = rustix::process::Pid::from_raw(pgid)
        .ok_or_else(|| std::io::Error::other("not a process group"))?;
    rustix::process::kill_process_group(group, rustix::process::Signal::KILL)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_never_inherits_the_store_password() {
        let os = |k: &str, v: &str| (OsString::from(k), OsString::from(v));
        let daemon = vec![
            os("PATH", "/usr/bin"),
            os("GATEHOST_STORE_PASSWORD", "hunter2"),
            os("LANG", "C"),
        ];
        let env = agent_env(daemon.into_iter(), &[os("LANG", "C.UTF-8")]);
        assert_eq!(env, vec![os("PATH", "/usr/bin"), os("LANG", "C.UTF-8")]);
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    fn sleep() -> AgentCommand {
        AgentCommand {
            program: "/bin/sleep".into(),
            args: vec!["30".into()],
            env: Vec::new(),
            cwd: "/".into(),
        }
    }

    #[test]
    fn an_agent_leads_its_own_group_and_another_program_on_its_pid_is_not_it() {
        // (The death signal itself is proven by the whole-program test
        // that SIGKILLs a daemon.)
        let rt = runtime();
        let _in = rt.enter();
        let mut child = spawn(sleep(), None, Default::default()).expect("spawn");
        let pid = child.id();
        let left = leftover_group(pid, &["/bin/sleep".into(), "30".into()]).expect("ours");
        assert!(left.leader_alive);
        assert!(left.members.is_empty());
        assert_eq!(leftover_group(pid, &["sleep".into(), "31".into()]), None);
        assert_eq!(leftover_group(pid, &["bash".into(), "30".into()]), None);
        kill_group(pid).expect("kill");
        let _ = rt.block_on(child.status());
    }

    /// Where there are no cgroups, every gate's end sweeps the host's
    /// children it did not spawn as orphans. An agent is the daemon's own
    /// child too: it must outlive any number of gates (before: the first
    /// gate's sweep SIGKILLed every running agent).
    #[test]
    fn an_agent_outlives_the_sweep_after_a_gate_without_cgroups() {
        use crate::supervise::{GateLimits, Limits, ProcessSpec, Supervisor};
        use std::ffi::OsString;
        use std::path::Path;
        use std::time::Duration;
        let rt = runtime();
        let mut agent = {
            let _in = rt.enter();
            spawn(sleep(), None, Default::default()).expect("spawn")
        };
        let sup = Supervisor::without_cgroups();
        let env = vec![(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
        let args = [OsString::from("-c"), OsString::from("exit 0")];
        for _ in 0..2 {
            let run = rt
                .block_on(sup.run(ProcessSpec {
                    program: Path::new("/bin/sh"),
                    args: &args,
                    cwd: Path::new("/"),
                    env: &env,
                    stdin: None,
                    limits: Limits {
                        timeout: Duration::from_secs(10),
                        grace: Duration::from_millis(200),
                        output_cap: 1024,
                        gate: GateLimits::NONE,
                    },
                    confine: None,
                    scratch: None,
                    overlay: None,
                }))
                .expect("the gate ran");
            assert_eq!(run.termination, crate::supervise::Termination::Exited(0));
        }
        assert!(
            matches!(agent.try_status(), Ok(None)),
            "the sweep took the agent for an orphan: {:?}",
            agent.try_status()
        );
        kill_group(agent.id()).expect("kill");
        let _ = rt.block_on(agent.status());
    }
}
