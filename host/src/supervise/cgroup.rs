//! Per-process-tree cgroup v2 containment.
//!
//! Each supervised process starts inside a fresh (or recycled, empty) child
//! cgroup of the host's own cgroup, born there (`clone3` with
//! `CLONE_INTO_CGROUP`, see `spawn`), so there is no window in which it
//! could fork outside it. Where `clone3` into a cgroup is refused, the host
//! itself steps into the cgroup for the duration of the spawn and back out
//! right after (`enter`, `leave`): a child is born in its parent's cgroup.
//! Every descendant, including one that calls `setsid` to leave the process
//! group, then stays countable and killable with `cgroup.kill`.
//!
//! Where the host may not create cgroups (no cgroup2 mount, no write
//! permission, a kernel without `cgroup.kill`), `Cgroups::detect` returns
//! `None` and the supervisor falls back to process groups plus the
//! subreaper sweep. This module never kills anything outside a cgroup it
//! created, never writes `cgroup.kill` to a cgroup that holds the host, and
//! removes every cgroup it created when the `Cgroups` is dropped.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Empty cgroups kept for reuse (never one that was killed: see
/// `Cgroups::release`).
const POOL_MAX: usize = 16;

/// The next cgroup's number, shared by every `Cgroups` of the process, so
/// that two supervisors in one process never pick the same name.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Where this host creates its per-gate cgroups.
#[derive(Debug)]
pub struct Cgroups {
    /// The host's own cgroup directory.
    parent: PathBuf,
    pool: Mutex<Vec<PathBuf>>,
}

/// One per-gate cgroup, given back with `Cgroups::release`.
#[derive(Debug)]
pub struct ProcessCgroup {
    path: PathBuf,
}

impl Cgroups {
    /// Finds the host's cgroup v2 directory and checks that a child cgroup
    /// with `cgroup.kill` can be made there. Nothing moves: whether a child
    /// can then be put into it is found at the first spawn, which falls
    /// back to process groups if it cannot. The probe is kept for the
    /// first gate.
    pub fn detect() -> Option<Cgroups> {
        let parent = host_cgroup()?;
        remove_stale(&parent);
        let cgroups = Cgroups {
            parent,
            pool: Mutex::new(Vec::new()),
        };
        let probe = cgroups.take().ok()?;
        if probe.path.join("cgroup.kill").exists() {
            cgroups.recycle(probe);
            Some(cgroups)
        } else {
            cgroups.discard(probe);
            None
        }
    }

    /// An empty cgroup: recycled from the pool or newly made.
    pub fn take(&self) -> io::Result<ProcessCgroup> {
        if let Some(path) = self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            return Ok(ProcessCgroup { path });
        }
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = self
            .parent
            .join(format!("gatehost-{}-{n}", std::process::id()));
        std::fs::create_dir(&path)?;
        Ok(ProcessCgroup { path })
    }

    /// Moves the host process into `cg` (so that what it spawns is born
    /// there). Call `leave` right after the spawn.
    pub fn enter(&self, cg: &ProcessCgroup) -> io::Result<()> {
        std::fs::write(cg.path.join("cgroup.procs"), std::process::id().to_string())
    }

    /// Moves the host process back into its own cgroup.
    pub fn leave(&self) -> io::Result<()> {
        std::fs::write(
            self.parent.join("cgroup.procs"),
            std::process::id().to_string(),
        )
    }

    /// Kills whatever is left in `cg`, waits (bounded) until it is empty,
    /// and keeps it for reuse. Returns how many processes were left in it.
    pub async fn release(&self, cg: ProcessCgroup, wait: Duration) -> usize {
        let me = std::process::id() as i32;
        let left = cg.pids();
        if left.is_empty() {
            self.recycle(cg);
            return 0;
        }
        if left.contains(&me) {
            // Never cgroup.kill a cgroup the host is in (a failed `leave`).
            tracing::error!(cgroup = %cg.path.display(), "the host is inside a gate cgroup; killing its members one by one");
            for pid in left.iter().filter(|p| **p != me) {
                super::kill(*pid, rustix::process::Signal::KILL);
            }
            return left.len() - 1;
        }
        if let Err(e) = std::fs::write(cg.path.join("cgroup.kill"), "1") {
            tracing::warn!(cgroup = %cg.path.display(), error = %e, "cgroup.kill failed");
            for pid in &left {
                super::kill(*pid, rustix::process::Signal::KILL);
            }
        }
        let deadline = Instant::now() + wait;
        while cg.populated() {
            if Instant::now() >= deadline {
                tracing::warn!(cgroup = %cg.path.display(), "cgroup still populated after kill");
                return left.len();
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // A cgroup that has been killed is never used again: the kernel
        // SIGKILLs at birth every child later born in it by
        // `clone3(CLONE_INTO_CGROUP)` (it compares the kill count of the
        // parent's cgroup, read before the target is known, with the
        // target's). Recycled, one leftover process of one gate made every
        // later gate of this host die at its start.
        self.discard(cg);
        left.len()
    }

    fn recycle(&self, cg: ProcessCgroup) {
        let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        if pool.len() < POOL_MAX {
            pool.push(cg.path);
        } else {
            drop(pool);
            self.discard(cg);
        }
    }

    fn discard(&self, cg: ProcessCgroup) {
        if let Err(e) = std::fs::remove_dir(&cg.path) {
            tracing::warn!(cgroup = %cg.path.display(), error = %e, "cannot remove cgroup");
        }
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        let pool = std::mem::take(&mut *self.pool.lock().unwrap_or_else(|p| p.into_inner()));
        for path in pool {
            let _ = std::fs::remove_dir(&path);
        }
    }
}

impl ProcessCgroup {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The cgroup's directory, opened to name it to `clone3`.
    pub fn open(&self) -> io::Result<std::os::fd::OwnedFd> {
        use rustix::fs::{Mode, OFlags};
        Ok(rustix::fs::open(
            &self.path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?)
    }

    /// The pids now in the cgroup.
    pub fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.path.join("cgroup.procs"))
            .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    }

    fn populated(&self) -> bool {
        std::fs::read_to_string(self.path.join("cgroup.events"))
            .map(|s| s.lines().any(|l| l.trim() == "populated 1"))
            .unwrap_or(false)
    }
}

/// The host's own cgroup directory, read once per process: a second
/// supervisor made while the first has the host stepped into a gate's
/// cgroup (the moving way) must not take that cgroup for the host's own.
pub(super) fn host_cgroup() -> Option<PathBuf> {
    static HOST: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        let mount = cgroup2_mount()?;
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?;
        Some(mount.join(rel.trim().trim_start_matches('/')))
    })
    .clone()
}

/// Removes the `gatehost-PID-N` cgroups left by a host that died (its pid
/// no longer exists). A host killed with SIGKILL leaves its running gates
/// behind: nobody will read their verdicts, so they are killed first
/// (`cgroup.kill`) and the cgroup removed once empty.
fn remove_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("gatehost-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let path = e.path();
            // Populated counts the cgroups beneath it too.
            let events = path.join("cgroup.events");
            let occupied = || {
                std::fs::read_to_string(&events)
                    .is_ok_and(|t| t.lines().any(|l| l.trim() == "populated 1"))
            };
            if occupied() {
                tracing::warn!(cgroup = %path.display(), "killing the gates a dead host left running");
                let _ = std::fs::write(path.join("cgroup.kill"), "1");
                let deadline = Instant::now() + std::time::Duration::from_millis(500);
                while occupied() && Instant::now() < deadline {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
            remove_tree(&path);
        }
    }
}

/// Removes an emptied cgroup and the cgroups beneath it, deepest first.
fn remove_tree(path: &Path) {
    if let Ok(entries) = std::fs::read_dir(path) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(path);
}

/// The mount point of the cgroup2 hierarchy, from /proc/self/mountinfo
/// (it is /sys/fs/cgroup on unified systems, /sys/fs/cgroup/unified on
/// hybrid ones).
fn cgroup2_mount() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|line| {
        // Fields: id parent maj:min root mount-point options ... - fstype source super
        let (left, right) = line.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        left.split_whitespace().nth(4).map(PathBuf::from)
    })
}
