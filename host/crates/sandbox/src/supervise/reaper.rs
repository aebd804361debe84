//! The host as child subreaper, and the sweep of orphans.
//!
//! The host marks itself `PR_SET_CHILD_SUBREAPER`, so a descendant of a gate
//! whose parent dies is re-parented to the host instead of to init. After
//! each supervised process ends, `sweep` kills and reaps every child of the
//! host that is not tracked (spawned by the supervisor, or as a `Tracked`
//! child: the agents `session start` runs) and not inside a live gate's
//! cgroup: such a child can only be a gate's orphan. This is the
//! fallback where cgroups are not available, and also catches the zombies
//! that a `cgroup.kill` leaves re-parented to the host.
//!
//! It must never kill nor reap a tracked child: those are recorded in the
//! registry under the same lock as their spawn.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, Once};

/// Pids of the host's direct children that the supervisor spawned and still
/// waits on, and the cgroups of live gates.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    pub(crate) children: BTreeSet<i32>,
    pub(crate) live_cgroups: BTreeSet<PathBuf>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    children: BTreeSet::new(),
    live_cgroups: BTreeSet::new(),
});

/// Locks the registry (a poisoned lock is still usable: it holds plain sets).
pub(crate) fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// A direct child of the host that is not a gate's (an agent that
/// `session start` runs, a test's `git`): registered under the registry's
/// lock as it is spawned, so that the sweep of orphans never kills nor
/// reaps it; unregistered when this is dropped, after it was waited on.
#[derive(Debug)]
pub struct Tracked(i32);

impl Tracked {
    /// Runs `spawn` under the registry's lock and registers the pid
    /// (`pid_of`) of what it started.
    pub fn spawn<T>(
        spawn: impl FnOnce() -> std::io::Result<T>,
        pid_of: impl FnOnce(&T) -> u32,
    ) -> std::io::Result<(T, Tracked)> {
        let mut reg = registry();
        let child = spawn()?;
        let pid = pid_of(&child) as i32;
        reg.children.insert(pid);
        Ok((child, Tracked(pid)))
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        registry().children.remove(&self.0);
    }
}

/// `Command::output` and `Command::status` for the unit tests, tracked:
/// another test's gate that runs without cgroups sweeps the test
/// process's untracked children (it cannot tell them from orphans).
/// Compiled in every build (the unit tests of the crates above this one,
/// gatehost-git's and gatehost's, use it too), used by tests only.
pub trait TrackedCommand {
    /// [`std::process::Command::output`] (stdin null, stdout and stderr
    /// piped), its child registered while it runs.
    fn tracked_output(&mut self) -> std::io::Result<std::process::Output>;
    /// [`std::process::Command::status`], its child registered while it
    /// runs.
    fn tracked_status(&mut self) -> std::io::Result<std::process::ExitStatus>;
}

impl TrackedCommand for std::process::Command {
    fn tracked_output(&mut self) -> std::io::Result<std::process::Output> {
        use std::process::Stdio;
        self.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let (child, _tracked) = Tracked::spawn(|| self.spawn(), |c| c.id())?;
        child.wait_with_output()
    }

    fn tracked_status(&mut self) -> std::io::Result<std::process::ExitStatus> {
        let (mut child, _tracked) = Tracked::spawn(|| self.spawn(), |c| c.id())?;
        child.wait()
    }
}

static SUBREAPER: Once = Once::new();

/// Makes the host a child subreaper, once per process (Linux's
/// `PR_SET_CHILD_SUBREAPER`; elsewhere there is none, and an orphan that
/// left its gate's process group escapes the kill: said once).
pub fn become_subreaper() {
    SUBREAPER.call_once(|| {
        #[cfg(target_os = "linux")]
        if let Err(e) = rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
            tracing::warn!(error = %e, "cannot become child subreaper; orphans of gates may escape the sweep");
        }
        #[cfg(not(target_os = "linux"))]
        tracing::info!("no child subreaper on this platform: a gate's process that leaves its process group (setsid) escapes the kill of its tree");
    });
}

/// Kills and reaps orphans re-parented to the host. With `scan_live` the
/// whole process table is read to find live orphans (needed when cgroups
/// are unavailable); otherwise only zombies waiting on the host are reaped.
/// Returns how many orphans it killed or reaped.
pub fn sweep(scan_live: bool) -> usize {
    let mut count = 0;
    if scan_live {
        count += kill_live_orphans();
    }
    count + reap_zombie_orphans()
}

fn kill_live_orphans() -> usize {
    let me = std::process::id() as i32;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut killed = 0;
    let reg = registry();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if reg.children.contains(&pid) || parent_of(pid) != Some(me) {
            continue;
        }
        if in_live_cgroup(pid, &reg.live_cgroups) {
            continue;
        }
        // The pid is our own child, so it cannot be recycled until we reap it.
        if super::kill(pid, rustix::process::Signal::KILL) {
            tracing::info!(pid, "killed an orphan a gate left behind");
            killed += 1;
        }
    }
    killed
}

/// Reaps exited children that nobody waits on. Peeks with `WNOWAIT` first
/// so that a child the supervisor tracks is never reaped here.
fn reap_zombie_orphans() -> usize {
    let mut reaped = 0;
    for _ in 0..1024 {
        // SAFETY: `siginfo_t` is plain data: all zeroes is a valid value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid writes into `info`, a properly sized siginfo_t.
        let rc = unsafe {
            libc::waitid(
                libc::P_ALL,
                0,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        if rc != 0 {
            break; // ECHILD: no children at all.
        }
        // SAFETY: after a successful waitid, si_pid is valid (0 if none).
        let pid = unsafe { info.si_pid() };
        if pid == 0 {
            break;
        }
        let reg = registry();
        if reg.children.contains(&pid) {
            // A tracked child finished; its owner reaps it. We cannot see
            // past it with waitid, so the next sweep takes the rest.
            break;
        }
        drop(reg);
        // Our own exited, untracked child.
        if let Some(p) = rustix::process::Pid::from_raw(pid) {
            let _ = rustix::process::waitpid(Some(p), rustix::process::WaitOptions::NOHANG);
        }
        reaped += 1;
    }
    reaped
}

fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: skip past the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

fn in_live_cgroup(pid: i32, live: &BTreeSet<PathBuf>) -> bool {
    if live.is_empty() {
        return false;
    }
    let Ok(cg) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
        return false;
    };
    let Some(rel) = cg.lines().find_map(|l| l.strip_prefix("0::")) else {
        return false;
    };
    let rel = rel.trim().trim_start_matches('/');
    !rel.is_empty() && live.iter().any(|p| p.ends_with(rel))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_of_reads_the_ppid_of_a_real_process() {
        let me = std::process::id() as i32;
        let (mut child, _tracked) = Tracked::spawn(
            || std::process::Command::new("sleep").arg("5").spawn(),
            |c| c.id(),
        )
        .expect("spawn sleep");
        assert_eq!(parent_of(child.id() as i32), Some(me));
        child.kill().expect("kill");
        child.wait().expect("wait");
    }
}
