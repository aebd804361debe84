//! Per-process-tree cgroup v2 containment.
//!
//! Each supervised process gets a fresh child cgroup of the host's own
//! cgroup. Moving the spawned process there right after spawn means every
//! descendant it forks, including one that calls `setsid` to leave the
//! process group, stays countable and killable with `cgroup.kill`.
//!
//! Where the host may not create cgroups (no cgroup2 mount, no write
//! permission, an old kernel without `cgroup.kill`), `Cgroups::detect`
//! returns `None` and the supervisor falls back to process groups plus the
//! subreaper sweep. This module never kills anything outside a cgroup it
//! created, and removes every cgroup it created.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Where this host creates its per-gate cgroups.
#[derive(Debug)]
pub struct Cgroups {
    parent: PathBuf,
    counter: AtomicU64,
}

/// One live per-gate cgroup; removed (after a kill) by `kill_and_remove`.
#[derive(Debug)]
pub struct ProcessCgroup {
    path: PathBuf,
}

impl Cgroups {
    /// Finds the host's cgroup v2 directory and checks that a child cgroup
    /// with `cgroup.kill` can be made there.
    pub fn detect() -> Option<Cgroups> {
        let mount = cgroup2_mount()?;
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?;
        let parent = mount.join(rel.trim_start_matches('/'));
        let probe = Cgroups {
            parent,
            counter: AtomicU64::new(0),
        };
        let test = probe.create_dir().ok()?;
        let usable = test.join("cgroup.kill").exists();
        let _ = std::fs::remove_dir(&test);
        usable.then_some(probe)
    }

    fn create_dir(&self) -> io::Result<PathBuf> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let path = self
            .parent
            .join(format!("gatehost-{}-{n}", std::process::id()));
        std::fs::create_dir(&path)?;
        Ok(path)
    }

    /// Creates a cgroup and moves `pid` into it.
    pub fn adopt(&self, pid: u32) -> io::Result<ProcessCgroup> {
        let path = self.create_dir()?;
        let cg = ProcessCgroup { path };
        std::fs::write(cg.path.join("cgroup.procs"), pid.to_string())?;
        Ok(cg)
    }
}

impl ProcessCgroup {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The pids now in the cgroup.
    pub fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.path.join("cgroup.procs"))
            .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    }

    /// Kills every process in the cgroup, waits (bounded) until it is empty
    /// and removes it. Returns how many processes were in it.
    pub async fn kill_and_remove(self, wait: Duration) -> usize {
        let count = self.pids().len();
        if let Err(e) = std::fs::write(self.path.join("cgroup.kill"), "1") {
            tracing::warn!(cgroup = %self.path.display(), error = %e, "cgroup.kill failed");
        }
        let deadline = Instant::now() + wait;
        loop {
            let populated = std::fs::read_to_string(self.path.join("cgroup.events"))
                .map(|s| s.lines().any(|l| l.trim() == "populated 1"))
                .unwrap_or(false);
            if !populated {
                break;
            }
            if Instant::now() >= deadline {
                tracing::warn!(cgroup = %self.path.display(), "cgroup still populated after kill");
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        if let Err(e) = std::fs::remove_dir(&self.path) {
            tracing::warn!(cgroup = %self.path.display(), error = %e, "cannot remove cgroup");
        }
        count
    }
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
