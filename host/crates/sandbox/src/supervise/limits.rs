//! Bounds on what one gate's process tree may take: memory, processes and
//! the size of each file it writes (`[limits] gate_memory_bytes`,
//! `gate_pids`, `gate_file_bytes`, `gate_scratch_bytes`), and how a run
//! that hit one is told.
//!
//! Each bound is enforced by the strongest means this host has:
//! - memory: the gate's cgroup v2 `memory.max` (with `memory.swap.max` 0)
//!   where the v2 `memory` controller is available to the host; else a
//!   per-gate cgroup in the v1 `memory` hierarchy (`memory.limit_in_bytes`,
//!   `memory.memsw.limit_in_bytes`), joined by the child before it
//!   confines itself; else `RLIMIT_AS` on each process (per process and
//!   counting address space, not memory: weaker);
//! - processes: the gate's cgroup v2 `pids.max`, else a per-gate cgroup in
//!   the v1 `pids` hierarchy; else not bounded (said once in the log);
//! - files: `RLIMIT_FSIZE` on each process (the size of any one file it
//!   writes);
//! - scratch: a tmpfs of `gate_scratch_bytes` over the gate's `TMPDIR`, in
//!   a mount namespace of the child's own ([`super::scratch`]).
//!
//! The child applies its part ([`ChildLimits`]) between clone and exec,
//! as a step of the child program ([`super::program`], whose module doc
//! states what may run there). This module never lets a limit it could
//! not apply go unnoticed: a failed step stops the spawn.

// The steps and the scratch bound of the `clone3` child are Linux's:
// elsewhere they are unused (and Linux's build finds its dead code).
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

use std::os::fd::RawFd;

/// The per-gate bounds, as configured; `None`: that bound is off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GateLimits {
    /// Bytes of memory the whole tree may use (`[limits] gate_memory_bytes`).
    pub memory: Option<u64>,
    /// Processes and threads the tree may hold at once (`[limits] gate_pids`).
    pub pids: Option<u64>,
    /// The largest file any process of the tree may write
    /// (`[limits] gate_file_bytes`).
    pub file_bytes: Option<u64>,
    /// The most the tree may hold in its private scratch directory, its
    /// `TMPDIR` (`[limits] gate_scratch_bytes`): see [`super::scratch`].
    pub scratch_bytes: Option<u64>,
}

/// Default `gate_pids`: a fork bomb stops long before the kernel's limits,
/// and a parallel build (cargo, make -j with threaded compilers: threads
/// count) has room.
pub const DEFAULT_GATE_PIDS: u64 = 1024;
/// Default `gate_file_bytes`.
pub const DEFAULT_GATE_FILE_BYTES: u64 = 1 << 30;
/// Default `gate_scratch_bytes`: room for a test suite's temporary files,
/// a package manager's unpacked downloads; held in memory (a tmpfs), and
/// charged to the gate's memory bound.
pub const DEFAULT_GATE_SCRATCH_BYTES: u64 = 1 << 30;
/// Default `gate_memory_bytes` where the machine's memory is unknown.
pub(super) const FALLBACK_GATE_MEMORY: u64 = 4 << 30;

impl GateLimits {
    /// No bound at all.
    pub const NONE: GateLimits = GateLimits {
        memory: None,
        pids: None,
        file_bytes: None,
        scratch_bytes: None,
    };
}

impl Default for GateLimits {
    /// Half the machine's memory, 1024 processes, 1 GiB per file, 1 GiB
    /// of scratch.
    fn default() -> Self {
        GateLimits {
            memory: Some(default_gate_memory()),
            pids: Some(DEFAULT_GATE_PIDS),
            file_bytes: Some(DEFAULT_GATE_FILE_BYTES),
            scratch_bytes: Some(DEFAULT_GATE_SCRATCH_BYTES),
        }
    }
}

/// Half of the machine's physical memory (so that one gate can never take
/// the memory the host and the rest of the machine need), or
/// [`FALLBACK_GATE_MEMORY`] where it cannot be read.
pub fn default_gate_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            let line = t.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib.saturating_mul(1024) / 2)
        })
        .filter(|b| *b > 0)
        .unwrap_or(FALLBACK_GATE_MEMORY)
}

/// Which limits a finished run is known to have hit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimitHits {
    /// Processes of the tree killed by the kernel for the memory limit,
    /// and that limit (0 kills: not hit, or not knowable: `RLIMIT_AS`
    /// makes allocations fail instead).
    pub oom_kills: u64,
    /// The memory limit in force (bytes).
    pub memory_limit: u64,
    /// Forks refused at the process limit, and that limit.
    pub forks_refused: u64,
    /// The process limit in force (processes of the tree).
    pub pids_limit: u64,
    /// The file size limit, when the main process was killed by SIGXFSZ.
    pub file_limit: Option<u64>,
}

impl LimitHits {
    /// Whether any limit is known to have been hit.
    pub fn any(&self) -> bool {
        self.oom_kills > 0 || self.forks_refused > 0 || self.file_limit.is_some()
    }

    /// What a person reads in the verdict's reason, e.g. "the memory limit
    /// was reached ([limits] gate_memory_bytes = 268435456): 1 process
    /// killed"; `None` when no limit is known to have been hit.
    pub fn describe(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.oom_kills > 0 {
            parts.push(format!(
                "the memory limit was reached ([limits] gate_memory_bytes = {}): {} process(es) killed",
                self.memory_limit, self.oom_kills
            ));
        }
        if self.forks_refused > 0 {
            parts.push(format!(
                "{} fork(s) refused at the process limit ([limits] gate_pids = {})",
                self.forks_refused, self.pids_limit
            ));
        }
        if let Some(n) = self.file_limit {
            parts.push(format!(
                "a file grew past [limits] gate_file_bytes ({n} bytes)"
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// Most descriptors a child joins (one per v1 hierarchy: memory, pids).
const MAX_JOINS: usize = 2;
/// Most resource limits a child sets (`RLIMIT_AS`, `RLIMIT_FSIZE`).
const MAX_RLIMITS: usize = 2;

/// What the child applies to itself before it confines itself: plain
/// data, built by the host before the clone.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ChildLimits {
    /// `cgroup.procs` of per-gate v1 cgroups, opened for writing by the
    /// host; the child writes "0" to each (itself), so every descendant is
    /// counted from its first instruction after exec.
    joins: [(RawFd, LimitStep); MAX_JOINS],
    n_joins: usize,
    /// (resource, value) set as both soft and hard limit.
    rlimits: [(i32, u64, LimitStep); MAX_RLIMITS],
    n_rlimits: usize,
}

/// A step of [`ChildLimits::apply`], as the child reports it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u32)]
pub(super) enum LimitStep {
    #[default]
    AddressSpace = 32,
    FileSize = 33,
    JoinMemory = 34,
    JoinPids = 35,
    /// The scratch tmpfs ([`super::scratch::ScratchMount`]).
    Scratch = 36,
    /// The worktree's overlay ([`super::overlay::Mount`]): its mount.
    Overlay = 37,
    /// A place inside it: the working directory, a cache's mountpoint.
    OverlayPath = 38,
}

impl LimitStep {
    pub(super) fn from_code(code: u32) -> Option<LimitStep> {
        Some(match code {
            32 => LimitStep::AddressSpace,
            33 => LimitStep::FileSize,
            34 => LimitStep::JoinMemory,
            35 => LimitStep::JoinPids,
            36 => LimitStep::Scratch,
            37 => LimitStep::Overlay,
            38 => LimitStep::OverlayPath,
            _ => return None,
        })
    }

    /// What could not be applied, for a person.
    pub(super) fn describe(self, errno: i32) -> String {
        let e = std::io::Error::from_raw_os_error(errno);
        match self {
            LimitStep::AddressSpace => {
                format!("cannot set RLIMIT_AS ([limits] gate_memory_bytes): {e}")
            }
            LimitStep::FileSize => {
                format!("cannot set RLIMIT_FSIZE ([limits] gate_file_bytes): {e}")
            }
            LimitStep::JoinMemory => format!("cannot join the gate's v1 memory cgroup: {e}"),
            LimitStep::JoinPids => format!("cannot join the gate's v1 pids cgroup: {e}"),
            LimitStep::Scratch => {
                format!("cannot mount the gate's scratch tmpfs ([limits] gate_scratch_bytes): {e}")
            }
            LimitStep::Overlay => {
                format!("cannot mount the overlay over the gate's worktree: {e}")
            }
            LimitStep::OverlayPath => {
                format!("cannot enter the gate's directory in its worktree's overlay: {e}")
            }
        }
    }
}

impl ChildLimits {
    pub(super) fn is_empty(&self) -> bool {
        self.n_joins == 0 && self.n_rlimits == 0
    }

    /// Has `cmd`'s child (std's fork-and-exec, the ways other than
    /// `clone3`) apply these limits before its exec.
    pub(super) fn before_exec_of(&self, cmd: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        if self.is_empty() {
            return;
        }
        let child = *self;
        // SAFETY: `apply` keeps the child program's rules (see
        // `super::program`), as a forked child of a multi-threaded process
        // requires.
        unsafe {
            cmd.pre_exec(move || {
                child
                    .apply()
                    .map_err(|(_, errno)| std::io::Error::from_raw_os_error(errno))
            });
        }
    }

    pub(super) fn join(&mut self, fd: RawFd, step: LimitStep) {
        if self.n_joins < MAX_JOINS {
            self.joins[self.n_joins] = (fd, step);
            self.n_joins += 1;
        }
    }

    pub(super) fn rlimit(&mut self, resource: i32, value: u64, step: LimitStep) {
        if self.n_rlimits < MAX_RLIMITS {
            self.rlimits[self.n_rlimits] = (resource, value, step);
            self.n_rlimits += 1;
        }
    }

    /// The v1 `cgroup.procs` descriptors the child writes itself to.
    pub(super) fn joins(&self) -> &[(RawFd, LimitStep)] {
        &self.joins[..self.n_joins]
    }

    /// The joins only (what a parked child does ahead: `super::parked`).
    pub(super) fn only_joins(&self) -> ChildLimits {
        ChildLimits {
            n_rlimits: 0,
            ..*self
        }
    }

    /// All but the joins (what a parked child, already joined, still
    /// applies when it is woken).
    pub(super) fn without_joins(&self) -> ChildLimits {
        ChildLimits {
            n_joins: 0,
            ..*self
        }
    }

    /// The (resource, value) pairs the child sets as both limits.
    pub(super) fn rlimits(&self) -> &[(i32, u64, LimitStep)] {
        &self.rlimits[..self.n_rlimits]
    }
}

impl ChildLimits {
    /// Applies the limits to the calling process (a step of Linux's child
    /// program, `super::program`, and of std's spawn's `pre_exec`): raw
    /// system calls only. Returns the failed step and its errno.
    ///
    /// # Safety
    /// Only in a freshly cloned or forked child before its exec (a join
    /// moves the whole calling process); see the module doc.
    pub(super) unsafe fn apply(&self) -> Result<(), (LimitStep, i32)> {
        for &(fd, step) in self.joins() {
            // SAFETY: a write of one byte from a static buffer to an open
            // descriptor.
            let n = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
            if n != 1 {
                return Err((step, errno()));
            }
        }
        for &(resource, value, step) in self.rlimits() {
            let lim = libc::rlimit {
                rlim_cur: value,
                rlim_max: value,
            };
            // SAFETY: setrlimit with a valid struct on the stack. The
            // resource is one of the RLIMIT_* constants (their type differs
            // between libcs, hence the cast).
            if unsafe { libc::setrlimit(resource as _, &lim) } != 0 {
                return Err((step, errno()));
            }
        }
        Ok(())
    }
}

/// This thread's errno, read as the child program may (no allocation:
/// an OS error is a code; no lock).
fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The host's means to bound gates (see the module doc), found once.
#[derive(Debug)]
pub(super) struct Enforcer {
    memory_v1: Option<super::v1::Hierarchy>,
    pids_v1: Option<super::v1::Hierarchy>,
    /// Each "this bound falls back" message is logged once per host.
    said: std::sync::Mutex<std::collections::BTreeSet<&'static str>>,
    /// How a child gets the mount namespace of its scratch tmpfs here.
    pub(super) scratch_way: super::scratch::Way,
    /// Set once a child could not mount it: not tried again.
    pub(super) scratch_off: std::sync::atomic::AtomicBool,
    /// A child could not mount a worktree's overlay: none tries again.
    pub(super) overlay_off: std::sync::atomic::AtomicBool,
}

/// One gate's bounds while it runs: the v1 cgroups it joins, their
/// descriptors (kept open until the spawn is done), and what the child
/// applies.
#[derive(Debug)]
pub(super) struct Applied<'a> {
    enforcer: &'a Enforcer,
    limits: GateLimits,
    v1: Vec<(&'a super::v1::Hierarchy, super::v1::Dir)>,
    _fds: Vec<std::os::fd::OwnedFd>,
    pub child: ChildLimits,
    /// Bounded by the gate's v2 cgroup (its counters are read from it).
    memory_v2: bool,
    pids_v2: bool,
}

impl Enforcer {
    /// Finds the v1 hierarchies (used only where v2 cannot bound a gate).
    pub(super) fn detect(v2: Option<&super::cgroup::Cgroups>) -> Enforcer {
        use super::v1::{Controller, Hierarchy};
        let (mem2, pids2) = v2.map(|c| c.controllers()).unwrap_or((false, false));
        Enforcer {
            memory_v1: (!mem2)
                .then(|| Hierarchy::detect(Controller::Memory))
                .flatten(),
            pids_v1: (!pids2)
                .then(|| Hierarchy::detect(Controller::Pids))
                .flatten(),
            said: Default::default(),
            scratch_way: super::scratch::Way::for_this_host(),
            scratch_off: Default::default(),
            overlay_off: Default::default(),
        }
    }

    /// Whether gates here join a v1 cgroup (the tests').
    #[cfg(test)]
    pub(super) fn joins_v1(&self) -> bool {
        self.memory_v1.is_some() || self.pids_v1.is_some()
    }

    /// No cgroup of either version: rlimits only (to test that way).
    pub(super) fn rlimits_only() -> Enforcer {
        Enforcer {
            memory_v1: None,
            pids_v1: None,
            said: Default::default(),
            scratch_way: super::scratch::Way::for_this_host(),
            scratch_off: Default::default(),
            overlay_off: Default::default(),
        }
    }

    pub(super) fn say_once(&self, what: &'static str, f: impl FnOnce()) {
        if self
            .said
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(what)
        {
            f();
        }
    }

    /// Sets up `limits` for one gate: in its v2 cgroup `cg` where the
    /// controllers are there, else v1 cgroups, else rlimits.
    pub(super) fn apply<'a>(
        &'a self,
        limits: GateLimits,
        v2: Option<&super::cgroup::Cgroups>,
        cg: Option<&mut super::cgroup::ProcessCgroup>,
    ) -> Applied<'a> {
        let mut a = Applied {
            enforcer: self,
            limits,
            v1: Vec::new(),
            _fds: Vec::new(),
            child: ChildLimits::default(),
            memory_v2: false,
            pids_v2: false,
        };
        if let (Some(c), Some(cg)) = (v2, cg) {
            let (mem, pids) = c.controllers();
            let want = (limits.memory.filter(|_| mem), limits.pids.filter(|_| pids));
            match cg.set_limits(mem, pids, want) {
                Ok(()) => {
                    a.memory_v2 = mem;
                    a.pids_v2 = pids;
                }
                Err(e) => self.say_once("v2", || {
                    tracing::warn!(error = %e, "cannot write a gate cgroup's memory.max or pids.max; falling back");
                }),
            }
        }
        if let Some(bytes) = limits.memory.filter(|_| !a.memory_v2)
            && !a.join(self.memory_v1.as_ref(), bytes, LimitStep::JoinMemory)
        {
            self.say_once("memory", || {
                tracing::info!("no memory cgroup for gates here: [limits] gate_memory_bytes is RLIMIT_AS on each process (address space, per process)");
            });
            // (The constants are `u32` on Linux's glibc, `i32` on macOS.)
            #[allow(clippy::unnecessary_cast)]
            a.child
                .rlimit(libc::RLIMIT_AS as i32, bytes, LimitStep::AddressSpace);
        }
        if let Some(n) = limits.pids.filter(|_| !a.pids_v2)
            && !a.join(self.pids_v1.as_ref(), n, LimitStep::JoinPids)
        {
            self.say_once("pids", || {
                tracing::warn!("no pids cgroup for gates here: [limits] gate_pids is not enforced");
            });
        }
        if let Some(n) = limits.file_bytes {
            // (The constants are `u32` on Linux's glibc, `i32` on macOS.)
            #[allow(clippy::unnecessary_cast)]
            a.child
                .rlimit(libc::RLIMIT_FSIZE as i32, n, LimitStep::FileSize);
        }
        a
    }
}

/// A gate's bounds made ahead of its start, with its child parked in its
/// v1 cgroups (`super::parked`): an [`Applied`] without its borrow of the
/// enforcer, kept by the supervisor until the gate comes.
#[derive(Debug)]
pub(super) struct Detached {
    limits: GateLimits,
    v1: Vec<(super::v1::Controller, super::v1::Dir)>,
    child: ChildLimits,
    memory_v2: bool,
    pids_v2: bool,
}

impl Detached {
    /// The limits these bounds were made for.
    pub(super) fn limits(&self) -> GateLimits {
        self.limits
    }
}

impl Enforcer {
    /// Bounds made ahead, back under this enforcer for their gate's
    /// start: the `cgroup.procs` of their v1 cgroups opened again, so that
    /// a child started another way than by waking the parked one (which
    /// has joined them) joins them too. Errs if one cannot be opened (the
    /// caller undoes the start made ahead, giving these bounds back).
    #[allow(clippy::result_large_err)]
    pub(super) fn attach_for_start(
        &self,
        d: Detached,
    ) -> Result<Applied<'_>, (std::io::Error, Applied<'_>)> {
        use super::v1::Controller;
        use std::os::fd::AsRawFd;
        let mut a = self.attach(d);
        a.child = a.child.without_joins();
        let mut opened = Vec::new();
        for (hier, dir) in &a.v1 {
            let step = match hier.controller() {
                Controller::Memory => LimitStep::JoinMemory,
                Controller::Pids => LimitStep::JoinPids,
            };
            match hier.open_procs(dir) {
                Ok(fd) => opened.push((fd, step)),
                Err(e) => return Err((e, a)),
            }
        }
        for (fd, step) in opened {
            a.child.join(fd.as_raw_fd(), step);
            a._fds.push(fd);
        }
        Ok(a)
    }

    /// Bounds made ahead, back under this enforcer (which made them), with
    /// no descriptor open: to be given back ([`Applied::put_back`]).
    pub(super) fn attach(&self, mut d: Detached) -> Applied<'_> {
        use super::v1::Controller;
        let mut v1 = Vec::new();
        for (controller, dir) in std::mem::take(&mut d.v1) {
            let hier = match controller {
                Controller::Memory => self.memory_v1.as_ref(),
                Controller::Pids => self.pids_v1.as_ref(),
            };
            match hier {
                Some(h) => v1.push((h, dir)),
                None => super::v1::Hierarchy::abandon(dir),
            }
        }
        Applied {
            enforcer: self,
            limits: d.limits,
            v1,
            _fds: Vec::new(),
            child: d.child,
            memory_v2: d.memory_v2,
            pids_v2: d.pids_v2,
        }
    }
}

impl<'a> Applied<'a> {
    /// The `cgroup.procs` descriptors the child joins by, handed to the
    /// caller (who keeps them open until the child has joined).
    pub(super) fn take_join_fds(&mut self) -> Vec<std::os::fd::OwnedFd> {
        std::mem::take(&mut self._fds)
    }

    /// These bounds without their borrow of the enforcer, to be kept
    /// until their gate comes ([`Enforcer::attach`]).
    pub(super) fn detach(mut self) -> Detached {
        Detached {
            limits: self.limits,
            v1: std::mem::take(&mut self.v1)
                .into_iter()
                .map(|(h, d)| (h.controller(), d))
                .collect(),
            child: self.child,
            memory_v2: self.memory_v2,
            pids_v2: self.pids_v2,
        }
    }

    /// Takes a v1 cgroup of `h` with `limit` for the child to join; false
    /// where there is none (or it cannot be made: said once).
    fn join(&mut self, h: Option<&'a super::v1::Hierarchy>, limit: u64, step: LimitStep) -> bool {
        use std::os::fd::AsRawFd;
        let Some(h) = h else { return false };
        match h.take(limit) {
            Ok((dir, fd)) => {
                self.child.join(fd.as_raw_fd(), step);
                self._fds.push(fd);
                self.v1.push((h, dir));
                true
            }
            Err(e) => {
                self.enforcer.say_once(
                    match step {
                        LimitStep::JoinMemory => "v1 memory",
                        _ => "v1 pids",
                    },
                    || tracing::warn!(error = %e, ?step, "cannot make a gate's v1 cgroup; falling back"),
                );
                false
            }
        }
    }

    /// Gives the v1 cgroups back, their processes all reaped (a start made
    /// ahead and undone): kept for reuse where empty.
    pub(super) fn put_back(mut self) {
        for (hier, dir) in std::mem::take(&mut self.v1) {
            hier.put_back(dir);
        }
    }

    /// Closes the host's copies of the `cgroup.procs` descriptors (once
    /// the child is started).
    pub(super) fn spawned(&mut self) {
        self._fds.clear();
    }

    /// The limits the ended run is known to have hit. Read before the
    /// cgroups are released.
    pub(super) fn hits(
        &self,
        cg: Option<&mut super::cgroup::ProcessCgroup>,
        termination: super::Termination,
    ) -> LimitHits {
        use super::v1::Controller;
        let mut h = LimitHits {
            memory_limit: self.limits.memory.unwrap_or(0),
            pids_limit: self.limits.pids.unwrap_or(0),
            ..LimitHits::default()
        };
        if let Some(cg) = cg.filter(|_| self.memory_v2 || self.pids_v2) {
            let (oom, forks) = cg.limit_events();
            if self.memory_v2 {
                h.oom_kills = oom;
            }
            if self.pids_v2 {
                h.forks_refused = forks;
            }
        }
        for (hier, dir) in &self.v1 {
            match hier.controller() {
                Controller::Memory => h.oom_kills += hier.hits(dir),
                Controller::Pids => h.forks_refused += hier.hits(dir),
            }
        }
        if termination == super::Termination::Signaled(libc::SIGXFSZ) {
            h.file_limit = self.limits.file_bytes;
        }
        h
    }

    /// Kills what is left in the v1 cgroups and gives them back; returns
    /// how many processes were left (the most of any of them: they hold
    /// the same tree).
    pub(super) async fn release(mut self, wait: std::time::Duration) -> usize {
        let mut left = 0;
        for (hier, dir) in std::mem::take(&mut self.v1) {
            left = left.max(hier.release(dir, wait).await);
        }
        left
    }
}

impl Drop for Applied<'_> {
    /// A gate abandoned mid-way (its future dropped): what is in its v1
    /// cgroups is killed.
    fn drop(&mut self) {
        for (_, dir) in std::mem::take(&mut self.v1) {
            super::v1::Hierarchy::abandon(dir);
        }
    }
}
