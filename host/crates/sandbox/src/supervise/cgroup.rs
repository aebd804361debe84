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
//! subreaper sweep. A host alone in its cgroup moves itself into a leaf
//! beneath it, so that its cgroup may enable the `memory` and `pids`
//! controllers for the gates' (see `enable_controllers`). This module
//! never moves a process but the host, never kills anything outside a
//! cgroup it created, never writes `cgroup.kill` to a cgroup that holds
//! the host, and removes every cgroup it created when the `Cgroups` is
//! dropped: a killed cgroup that is not empty yet when its gate ends (a
//! loaded host can take longer to end its processes than a gate waits) is
//! removed once empty, at a later gate or at the drop, never forgotten.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Empty cgroups kept for reuse (never one that was killed: see
/// `Cgroups::release`).
const POOL_MAX: usize = 16;

/// How long the drop of a `Cgroups` waits for the killed cgroups still
/// emptying (a one-shot `gatehost check` is about to exit): past it, what
/// is left is said and the next host's start removes it.
const DOOMED_BOUND: Duration = Duration::from_secs(5);

/// The next cgroup's number, shared by every `Cgroups` of the process, so
/// that two supervisors in one process never pick the same name.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Where this host creates its per-gate cgroups.
#[derive(Debug)]
pub(super) struct Cgroups {
    /// The host's own cgroup directory, where the gates' cgroups are made.
    parent: PathBuf,
    /// Where the host's process lives: `parent`, or the leaf beneath it
    /// that it moved into to enable the controllers (see
    /// `enable_controllers`).
    home: PathBuf,
    pool: Mutex<Vec<ProcessCgroup>>,
    /// Killed cgroups that were not empty yet when their gate ended: each
    /// is removed once empty (see `reap_doomed`).
    doomed: Mutex<Vec<PathBuf>>,
    /// The `memory` and `pids` controllers are enabled for the gates'
    /// cgroups (in the parent's `cgroup.subtree_control`).
    memory: bool,
    pids: bool,
}

/// One per-gate cgroup, given back with `Cgroups::release`. A recycled
/// one keeps the limits last written and its event counters as they were
/// when it was given back.
#[derive(Debug)]
pub(super) struct ProcessCgroup {
    path: PathBuf,
    /// (memory.max, pids.max) last written.
    written: Option<(Option<u64>, Option<u64>)>,
    /// `oom_kill` of `memory.events` and `max` of `pids.events` when the
    /// gate started.
    oom_base: u64,
    forks_base: u64,
}

impl Cgroups {
    /// Finds the host's cgroup v2 directory and checks that a child cgroup
    /// with `cgroup.kill` can be made there. Nothing moves: whether a child
    /// can then be put into it is found at the first spawn, which falls
    /// back to process groups if it cannot. The probe is kept for the
    /// first gate.
    pub(super) fn detect() -> Option<Cgroups> {
        let parent = host_cgroup()?;
        remove_stale(&parent);
        let (memory, pids) = enable_controllers(&parent);
        let home = MOVED.get().cloned().unwrap_or_else(|| parent.clone());
        let cgroups = Cgroups {
            parent,
            home,
            pool: Mutex::new(Vec::new()),
            doomed: Mutex::new(Vec::new()),
            memory,
            pids,
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

    /// Whether the gates' cgroups have the (memory, pids) controllers.
    pub(super) fn controllers(&self) -> (bool, bool) {
        (self.memory, self.pids)
    }

    /// An empty cgroup: recycled from the pool or newly made.
    pub(super) fn take(&self) -> io::Result<ProcessCgroup> {
        self.reap_doomed();
        if let Some(cg) = self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            return Ok(cg);
        }
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = self
            .parent
            .join(format!("gatehost-{}-{n}", std::process::id()));
        std::fs::create_dir(&path)?;
        let mut cg = ProcessCgroup {
            path,
            written: None,
            oom_base: 0,
            forks_base: 0,
        };
        if self.memory || self.pids {
            cg.limit_events();
        }
        Ok(cg)
    }

    /// Moves the host process into `cg` (so that what it spawns is born
    /// there). Call `leave` right after the spawn.
    pub(super) fn enter(&self, cg: &ProcessCgroup) -> io::Result<()> {
        std::fs::write(cg.path.join("cgroup.procs"), std::process::id().to_string())
    }

    /// Moves the host process back into its own cgroup.
    pub(super) fn leave(&self) -> io::Result<()> {
        std::fs::write(
            self.home.join("cgroup.procs"),
            std::process::id().to_string(),
        )
    }

    /// Kills whatever is left in `cg`, waits (bounded) until it is empty,
    /// and keeps it for reuse. Returns how many processes were left in it.
    pub(super) async fn release(&self, cg: ProcessCgroup, wait: Duration) -> usize {
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
                tracing::warn!(cgroup = %cg.path.display(), "cgroup still populated after kill; removed once empty");
                self.doom(cg);
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

    /// Keeps killed `cg`, not empty yet, to be removed once it is.
    fn doom(&self, cg: ProcessCgroup) {
        self.doomed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(cg.path);
    }

    /// Removes the killed cgroups that have emptied since they were kept.
    fn reap_doomed(&self) {
        self.doomed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|path| {
                populated(path)
                    || std::fs::remove_dir(path).is_err_and(|e| e.kind() != io::ErrorKind::NotFound)
            });
    }

    /// The killed cgroups not removed yet.
    #[cfg(all(test, target_os = "linux"))]
    pub(super) fn doomed(&self) -> Vec<PathBuf> {
        self.doomed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Keeps the emptied `cg` for reuse (or removes it, the pool full).
    pub(super) fn recycle(&self, cg: ProcessCgroup) {
        let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        if pool.len() < POOL_MAX {
            pool.push(cg);
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
    /// Removes the spare cgroups, and the killed ones once they are empty
    /// (waiting at most [`DOOMED_BOUND`] in all: a process the kernel
    /// cannot end is said, and its cgroup left to the next host's start).
    fn drop(&mut self) {
        let pool = std::mem::take(&mut *self.pool.lock().unwrap_or_else(|p| p.into_inner()));
        for cg in pool {
            let _ = std::fs::remove_dir(&cg.path);
        }
        let doomed = std::mem::take(&mut *self.doomed.lock().unwrap_or_else(|p| p.into_inner()));
        let deadline = Instant::now() + DOOMED_BOUND;
        for path in doomed {
            let _ = std::fs::write(path.join("cgroup.kill"), "1");
            while populated(&path) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            if let Err(e) = std::fs::remove_dir(&path) {
                tracing::warn!(cgroup = %path.display(), error = %e, "a killed gate's cgroup is still populated; the next host's start removes it");
            }
        }
    }
}

impl ProcessCgroup {
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// The cgroup's directory, opened to name it to `clone3`.
    #[cfg(target_os = "linux")]
    pub(super) fn open(&self) -> io::Result<std::os::fd::OwnedFd> {
        use rustix::fs::{Mode, OFlags};
        Ok(rustix::fs::open(
            &self.path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?)
    }

    /// Writes `memory.max` (and `memory.swap.max` 0, where swap is
    /// accounted) if `memory`, and `pids.max` if `pids` ("max": no bound),
    /// unless this cgroup already has these values.
    pub(super) fn set_limits(
        &mut self,
        memory: bool,
        pids: bool,
        want: (Option<u64>, Option<u64>),
    ) -> io::Result<()> {
        if self.written == Some(want) {
            return Ok(());
        }
        let value = |v: Option<u64>| v.map_or_else(|| "max".to_string(), |n| n.to_string());
        if memory {
            std::fs::write(self.path.join("memory.max"), value(want.0))?;
            let swap = self.path.join("memory.swap.max");
            if swap.exists() {
                std::fs::write(swap, "0")?;
            }
        }
        if pids {
            std::fs::write(self.path.join("pids.max"), value(want.1))?;
        }
        self.written = Some(want);
        Ok(())
    }

    /// The OOM kills and refused forks since the last call (or since the
    /// cgroup was made).
    pub(super) fn limit_events(&mut self) -> (u64, u64) {
        let read = |file: &str, key: &str| {
            std::fs::read_to_string(self.path.join(file))
                .ok()
                .and_then(|t| super::events::counter(&t, key))
                .unwrap_or(0)
        };
        let oom = read("memory.events", "oom_kill");
        let forks = read("pids.events", "max");
        let hits = (
            oom.saturating_sub(self.oom_base),
            forks.saturating_sub(self.forks_base),
        );
        (self.oom_base, self.forks_base) = (oom, forks);
        hits
    }

    /// The pids now in the cgroup.
    pub(super) fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.path.join("cgroup.procs"))
            .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    }

    fn populated(&self) -> bool {
        populated(&self.path)
    }
}

/// Whether the cgroup at `path` (or one beneath it) holds a process.
fn populated(path: &Path) -> bool {
    std::fs::read_to_string(path.join("cgroup.events"))
        .map(|s| s.lines().any(|l| l.trim() == "populated 1"))
        .unwrap_or(false)
}

/// The leaf cgroup a host alone in its cgroup moves into, so that its
/// cgroup may enable controllers for the gates' (a name `remove_stale`
/// never takes for a dead host's).
pub(super) const HOST_LEAF: &str = "gatehost-host";

/// Where this process moved itself (its leaf), once it has.
static MOVED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Enables the `memory` and `pids` controllers for the cgroups beneath
/// `parent` (the host's own), where they are available to it; returns
/// which are enabled. Where the host's cgroup is not the root and holds
/// processes, the kernel refuses ("no internal processes"). A host that
/// is the only process of its cgroup (a systemd service with
/// `Delegate=yes`, `systemd-run --scope`) then moves itself into a leaf
/// cgroup beneath it ([`HOST_LEAF`]) and enables them: the gates' cgroups
/// are the leaf's siblings. A cgroup shared with other processes (a login
/// shell's) is never rearranged: gates are bounded by the fallbacks (see
/// `limits`).
fn enable_controllers(parent: &Path) -> (bool, bool) {
    let read = |f: &str| std::fs::read_to_string(parent.join(f)).unwrap_or_default();
    let has = |text: &str, c: &str| text.split_whitespace().any(|w| w == c);
    let available = read("cgroup.controllers");
    let wanted: Vec<&str> = ["memory", "pids"]
        .into_iter()
        .filter(|c| has(&available, c))
        .collect();
    if wanted.is_empty() {
        tracing::debug!("no memory or pids controller in this host's cgroup v2");
        return (false, false);
    }
    let enabled = read("cgroup.subtree_control");
    let missing: Vec<String> = wanted
        .iter()
        .filter(|c| !has(&enabled, c))
        .map(|c| format!("+{c}"))
        .collect();
    let enable = || std::fs::write(parent.join("cgroup.subtree_control"), missing.join(" "));
    if !missing.is_empty()
        && let Err(e) = enable()
    {
        let busy = e.raw_os_error() == Some(libc::EBUSY);
        let moved = busy
            .then(|| move_into_leaf(parent, std::process::id()))
            .flatten();
        match (moved, busy) {
            (Some(leaf), _) => match enable() {
                Ok(()) => {
                    tracing::info!(cgroup = %parent.display(), leaf = %leaf.display(), "moved into a leaf cgroup of the host's own, so that cgroup v2 bounds gates' memory and processes");
                    let _ = MOVED.set(leaf);
                }
                Err(e) => {
                    // Back where it was: nothing gained by the move.
                    let _ =
                        std::fs::write(parent.join("cgroup.procs"), std::process::id().to_string());
                    let _ = std::fs::remove_dir(&leaf);
                    tracing::info!(cgroup = %parent.display(), error = %e, "cannot enable the memory and pids controllers for gates even from a leaf; falling back to v1 cgroups or rlimits");
                }
            },
            (None, true) => {
                tracing::info!(cgroup = %parent.display(), "the host's cgroup holds other processes, so cgroup v2 cannot bound gates' memory and processes here (\"no internal processes\"); gates' memory is bounded by a v1 cgroup or RLIMIT_AS, their processes by a v1 cgroup or not at all (run gatehost serve in a cgroup of its own, e.g. a systemd service with Delegate=yes)");
            }
            (None, false) => {
                tracing::info!(cgroup = %parent.display(), error = %e, "cannot enable the memory and pids controllers for gates; falling back to v1 cgroups or rlimits");
            }
        }
    }
    let enabled = read("cgroup.subtree_control");
    (has(&enabled, "memory"), has(&enabled, "pids"))
}

/// Moves `pid`, when it is the only process of the cgroup `parent`, into
/// the leaf [`HOST_LEAF`] beneath it (made if need be); returns the leaf,
/// or `None` where `parent` holds anything else or the move failed
/// (nothing moved then).
pub(super) fn move_into_leaf(parent: &Path, pid: u32) -> Option<PathBuf> {
    let procs = std::fs::read_to_string(parent.join("cgroup.procs")).ok()?;
    let members: Vec<&str> = procs.split_whitespace().collect();
    if members != [pid.to_string().as_str()] {
        return None;
    }
    let leaf = parent.join(HOST_LEAF);
    match std::fs::create_dir(&leaf) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(_) => return None,
    }
    match std::fs::write(leaf.join("cgroup.procs"), pid.to_string()) {
        Ok(()) => Some(leaf),
        Err(e) => {
            tracing::debug!(error = %e, leaf = %leaf.display(), "cannot move into a leaf cgroup");
            None
        }
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
