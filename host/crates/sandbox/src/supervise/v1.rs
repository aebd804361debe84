//! Per-gate cgroups in a cgroup v1 hierarchy (`memory` or `pids`), for
//! hosts where those controllers are not available in cgroup v2 (a hybrid
//! mount: v2 at /sys/fs/cgroup/unified with no controllers, the
//! controllers bound to v1 hierarchies).
//!
//! A gate's v1 cgroup is made (or recycled, empty, from a small pool)
//! beneath the host's own cgroup of that hierarchy, named
//! `gatehost-PID-N` like the v2 ones, its limit written, and its
//! `cgroup.procs` opened by the host before the clone; the child writes
//! "0" to it before it confines itself (v1 has no `CLONE_INTO_CGROUP`), so
//! every descendant is in it. After the gate, whatever is left in it is
//! killed and it goes back to the pool; the event counter (`oom_kill`,
//! `max`) it had then is kept, so the next gate's hits are told apart.
//!
//! It never kills a process outside a cgroup it made, and removes the
//! cgroups of a host that died (its pid gone) when it starts. A cgroup
//! whose processes outlive a release's bound (a loaded host) is never
//! forgotten: it is removed once empty, at a later gate or at the drop.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Empty v1 cgroups kept for reuse, per hierarchy.
const POOL_MAX: usize = 16;

/// How long the drop of a `Hierarchy` waits for the cgroups still
/// emptying (as `cgroup::DOOMED_BOUND`).
const DOOMED_BOUND: Duration = Duration::from_secs(5);

static NEXT: AtomicU64 = AtomicU64::new(0);

/// Which v1 controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Controller {
    Memory,
    Pids,
}

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Pids => "pids",
        }
    }
}

/// The host's own cgroup in one v1 hierarchy, where it makes gates'.
#[derive(Debug)]
pub(super) struct Hierarchy {
    controller: Controller,
    parent: PathBuf,
    pool: Mutex<Vec<Dir>>,
    /// Cgroups still populated when their gate ended: each is removed
    /// once empty (see `reap_doomed`).
    doomed: Mutex<Vec<PathBuf>>,
}

/// One gate's v1 cgroup.
#[derive(Debug)]
pub(super) struct Dir {
    path: PathBuf,
    /// The limit last written.
    written: Option<u64>,
    /// The event counter when the gate started.
    baseline: u64,
}

impl Dir {
    /// The cgroup's directory.
    #[cfg(all(test, target_os = "linux"))]
    pub(super) fn path(&self) -> &Path {
        &self.path
    }
}

impl Hierarchy {
    /// The host's cgroup in the v1 hierarchy of `controller`, if one is
    /// mounted and the host may make cgroups there (a writable directory;
    /// whether a child can join is found at the first spawn).
    pub(super) fn detect(controller: Controller) -> Option<Hierarchy> {
        let parent = own_v1_cgroup(controller)?;
        if rustix::fs::access(&parent, rustix::fs::Access::WRITE_OK).is_err() {
            return None;
        }
        remove_stale(&parent);
        Some(Hierarchy {
            controller,
            parent,
            pool: Mutex::new(Vec::new()),
            doomed: Mutex::new(Vec::new()),
        })
    }

    pub(super) fn controller(&self) -> Controller {
        self.controller
    }

    /// An empty cgroup with `limit` written, and its `cgroup.procs` open
    /// for the child to join.
    pub(super) fn take(&self, limit: u64) -> io::Result<(Dir, OwnedFd)> {
        self.reap_doomed();
        let recycled = self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut dir = match recycled {
            Some(d) => d,
            None => {
                let n = NEXT.fetch_add(1, Ordering::Relaxed);
                let path = self
                    .parent
                    .join(format!("gatehost-{}-{n}", std::process::id()));
                std::fs::create_dir(&path)?;
                let baseline = read_counter(self.controller, &path);
                Dir {
                    path,
                    written: None,
                    baseline,
                }
            }
        };
        let ready = (|| {
            if dir.written != Some(limit) {
                write_limit(self.controller, &dir.path, limit)?;
                dir.written = Some(limit);
            }
            self.open_procs(&dir)
        })();
        match ready {
            Ok(fd) => Ok((dir, fd)),
            Err(e) => {
                let _ = std::fs::remove_dir(&dir.path);
                Err(e)
            }
        }
    }

    /// `dir`'s `cgroup.procs`, open for a child to join by.
    pub(super) fn open_procs(&self, dir: &Dir) -> io::Result<OwnedFd> {
        use rustix::fs::{Mode, OFlags};
        Ok(rustix::fs::open(
            dir.path.join("cgroup.procs"),
            OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )?)
    }

    /// The events (OOM kills, refused forks) since the gate started.
    pub(super) fn hits(&self, dir: &Dir) -> u64 {
        read_counter(self.controller, &dir.path).saturating_sub(dir.baseline)
    }

    /// Kills what is left in `dir`, waits (bounded) until it is empty and
    /// keeps it for reuse. Returns how many processes were left in it.
    pub(super) async fn release(&self, dir: Dir, wait: Duration) -> usize {
        let left = pids(&dir.path);
        let deadline = Instant::now() + wait;
        let me = std::process::id() as i32;
        loop {
            let now = pids(&dir.path);
            if now.is_empty() {
                break;
            }
            if now.contains(&me) {
                tracing::error!(cgroup = %dir.path.display(), "the host is inside a gate's v1 cgroup; not reused");
                return left.len();
            }
            if Instant::now() >= deadline {
                tracing::warn!(cgroup = %dir.path.display(), "a gate's v1 cgroup is still populated; removed once empty");
                self.doomed
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(dir.path);
                return left.len();
            }
            for pid in now {
                super::kill(pid, rustix::process::Signal::KILL);
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        self.keep(dir);
        left.len()
    }

    /// Keeps the emptied `dir` for reuse (its counter read afresh), or
    /// removes it when the pool is full.
    fn keep(&self, mut dir: Dir) {
        dir.baseline = read_counter(self.controller, &dir.path);
        let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        if pool.len() < POOL_MAX {
            pool.push(dir);
        } else {
            drop(pool);
            let _ = std::fs::remove_dir(&dir.path);
        }
    }

    /// Gives back `dir`, whose processes have all been reaped: kept for
    /// reuse if it is empty, else killed and removed once empty.
    pub(super) fn put_back(&self, dir: Dir) {
        if !pids(&dir.path).is_empty() {
            return Self::abandon(dir);
        }
        self.keep(dir);
    }

    /// Removes the doomed cgroups that have emptied since, and kills
    /// again what is left in the others.
    fn reap_doomed(&self) {
        self.doomed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|path| match std::fs::remove_dir(path) {
                Ok(()) => false,
                Err(e) if e.kind() == io::ErrorKind::NotFound => false,
                Err(_) => {
                    for pid in pids(path) {
                        super::kill(pid, rustix::process::Signal::KILL);
                    }
                    true
                }
            });
    }

    /// The cgroups still emptying, not removed yet.
    #[cfg(all(test, target_os = "linux"))]
    pub(super) fn doomed(&self) -> Vec<PathBuf> {
        self.doomed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// For a gate abandoned mid-way: kills what is in `dir` now; the
    /// directory is removed once empty, by a short-lived thread.
    pub(super) fn abandon(dir: Dir) {
        for pid in pids(&dir.path) {
            super::kill(pid, rustix::process::Signal::KILL);
        }
        std::thread::spawn(move || {
            for _ in 0..100 {
                if std::fs::remove_dir(&dir.path).is_ok() {
                    return;
                }
                for pid in pids(&dir.path) {
                    super::kill(pid, rustix::process::Signal::KILL);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
    }
}

impl Drop for Hierarchy {
    /// Removes the spare cgroups, and the doomed ones once empty (waiting
    /// at most [`DOOMED_BOUND`] in all; what is left then is said, and
    /// the next host's start removes it).
    fn drop(&mut self) {
        for d in std::mem::take(&mut *self.pool.lock().unwrap_or_else(|p| p.into_inner())) {
            let _ = std::fs::remove_dir(&d.path);
        }
        let doomed = std::mem::take(&mut *self.doomed.lock().unwrap_or_else(|p| p.into_inner()));
        let deadline = Instant::now() + DOOMED_BOUND;
        for path in doomed {
            while let Err(e) = std::fs::remove_dir(&path) {
                if e.kind() == io::ErrorKind::NotFound {
                    break;
                }
                if Instant::now() >= deadline {
                    tracing::warn!(cgroup = %path.display(), error = %e, "a gate's v1 cgroup is still populated; the next host's start removes it");
                    break;
                }
                for pid in pids(&path) {
                    super::kill(pid, rustix::process::Signal::KILL);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

fn pids(path: &Path) -> Vec<i32> {
    std::fs::read_to_string(path.join("cgroup.procs"))
        .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Writes the limit. Memory: the swap-inclusive limit too, where swap is
/// accounted, so that the gate cannot spill into swap (raised first, as
/// the kernel wants it never below the memory limit).
fn write_limit(controller: Controller, path: &Path, limit: u64) -> io::Result<()> {
    match controller {
        Controller::Pids => std::fs::write(path.join("pids.max"), limit.to_string()),
        Controller::Memory => {
            let memsw = path.join("memory.memsw.limit_in_bytes");
            let swap = memsw.exists();
            if swap {
                std::fs::write(&memsw, "-1")?;
            }
            std::fs::write(path.join("memory.limit_in_bytes"), limit.to_string())?;
            if swap {
                std::fs::write(&memsw, limit.to_string())?;
            }
            Ok(())
        }
    }
}

/// The cgroup's cumulative count of limit events: `oom_kill` in
/// `memory.oom_control`, `max` in `pids.events`.
fn read_counter(controller: Controller, path: &Path) -> u64 {
    let (file, key) = match controller {
        Controller::Memory => ("memory.oom_control", "oom_kill"),
        Controller::Pids => ("pids.events", "max"),
    };
    std::fs::read_to_string(path.join(file))
        .ok()
        .and_then(|t| super::events::counter(&t, key))
        .unwrap_or(0)
}

/// The host's directory in the v1 hierarchy of `controller`: its mount
/// point (from /proc/self/mountinfo) joined with the host's path in it
/// (from /proc/self/cgroup).
fn own_v1_cgroup(controller: Controller) -> Option<PathBuf> {
    let name = controller.name();
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let (root, mount) = info.lines().find_map(|line| {
        // Fields: id parent maj:min root mount-point options ... - fstype source super
        let (left, right) = line.split_once(" - ")?;
        let mut r = right.split_whitespace();
        if r.next()? != "cgroup" {
            return None;
        }
        let options = r.nth(1)?;
        if !options.split(',').any(|o| o == name) {
            return None;
        }
        let mut l = left.split_whitespace();
        let root = l.nth(3)?;
        let mount = l.next()?;
        Some((PathBuf::from(root), PathBuf::from(mount)))
    })?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = own.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let _id = parts.next()?;
        let controllers = parts.next()?;
        let path = parts.next()?;
        controllers.split(',').any(|c| c == name).then_some(path)
    })?;
    // A mount of a sub-tree (a container's) shows paths relative to the
    // hierarchy's root; take the part beneath the mount's root.
    let rel = Path::new(rel.trim());
    let beneath = rel.strip_prefix(&root).unwrap_or(rel);
    let beneath = beneath.strip_prefix("/").unwrap_or(beneath);
    Some(mount.join(beneath))
}

/// Removes the `gatehost-PID-N` cgroups of a host that died (its pid no
/// longer exists), killing what is left in them first.
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
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let path = e.path();
        let deadline = Instant::now() + Duration::from_millis(500);
        while std::fs::remove_dir(&path).is_err() && Instant::now() < deadline {
            let left = pids(&path);
            if left.is_empty() && !path.exists() {
                break;
            }
            for pid in left {
                super::kill(pid, rustix::process::Signal::KILL);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
