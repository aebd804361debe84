//! The child program's rules, checked mechanically: a counting global
//! allocator (test builds only) sees every allocation made by a process
//! other than this test process while it shares this process's memory,
//! and a spawn through the `CLONE_VM` path with every step on must make
//! none. A planted allocation proves the guard can fail.

use super::super::cgroup::Cgroups;
use super::super::limits::{ChildLimits, LimitStep};
use super::super::scratch::{ScratchMount, Way};
use super::super::spawn::{self, Started};
use super::super::v1::{Controller, Hierarchy};
use super::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Read;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// The test build's allocator: the system's, counting while a [`Watch`]
/// is on the allocations and frees made by any process other than the
/// one that started watching. A child cloned with `CLONE_VM` runs this
/// code on this process's memory, so its counts land in these atomics.
struct Counting;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The pid of the watching process (0: nobody watches).
static WATCHER: AtomicI32 = AtomicI32::new(0);
static FOREIGN_ALLOCS: AtomicUsize = AtomicUsize::new(0);
static FOREIGN_FREES: AtomicUsize = AtomicUsize::new(0);

fn note(counter: &AtomicUsize) {
    let watcher = WATCHER.load(Ordering::SeqCst);
    if watcher == 0 {
        return;
    }
    // SAFETY: the raw getpid system call: the caller's own pid, never a
    // cached one (a child sharing this memory would share any cache).
    let pid = unsafe { libc::syscall(libc::SYS_getpid) } as i32;
    if pid != watcher {
        counter.fetch_add(1, Ordering::SeqCst);
    }
}

// SAFETY: every call is passed on to the system allocator unchanged; the
// counting touches atomics only (it never allocates).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(&FOREIGN_ALLOCS);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(&FOREIGN_ALLOCS);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(&FOREIGN_FREES);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(&FOREIGN_ALLOCS);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// One watch at a time (the counters are global).
static WATCHING: Mutex<()> = Mutex::new(());

/// Counts foreign allocations from its start until it is dropped.
struct Watch {
    _one: MutexGuard<'static, ()>,
}

impl Watch {
    fn start() -> Watch {
        let one = WATCHING.lock().unwrap_or_else(|p| p.into_inner());
        FOREIGN_ALLOCS.store(0, Ordering::SeqCst);
        FOREIGN_FREES.store(0, Ordering::SeqCst);
        WATCHER.store(std::process::id() as i32, Ordering::SeqCst);
        Watch { _one: one }
    }

    /// (allocations, frees) made by other processes so far.
    fn counts(&self) -> (usize, usize) {
        (
            FOREIGN_ALLOCS.load(Ordering::SeqCst),
            FOREIGN_FREES.load(Ordering::SeqCst),
        )
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        WATCHER.store(0, Ordering::SeqCst);
    }
}

/// What the child printed and how it ended.
struct Ran {
    stdout: String,
    stderr: String,
    /// Exit code (or 128 + signal).
    code: i32,
    /// The v1 hierarchies the child joined (` :memory:`-like names).
    joined: Vec<&'static str>,
    /// What the worktree and the run's layer held after (see
    /// [`overlay_seen`]).
    overlay: String,
}

/// After the every-step spawn: whether its write went to the run's layer
/// (not the worktree), its cache write to the worktree, and it started in
/// the worktree.
fn overlay_seen(wt: &Path, upper: &Path, stdout: &str) -> String {
    let read = |p: PathBuf| std::fs::read_to_string(p).unwrap_or_else(|_| "absent\n".into());
    format!(
        "worktree:{} cache:{} layer:{} cwd:{}",
        read(wt.join("kept")).trim(),
        read(wt.join("cache/out")).trim(),
        read(upper.join("kept")).trim(),
        stdout.contains(&format!("cwd {}\n", wt.display()))
    )
}

fn wait(started: Started) -> Ran {
    let Started {
        pidfd,
        mut stdout,
        mut stderr,
        ..
    } = started;
    let mut out = String::new();
    stdout.read_to_string(&mut out).expect("stdout");
    let mut err = String::new();
    stderr.read_to_string(&mut err).expect("stderr");
    let status = rustix::process::waitid(
        rustix::process::WaitId::PidFd(pidfd.as_fd()),
        rustix::process::WaitIdOptions::EXITED,
    )
    .expect("waitid")
    .expect("a status");
    let code = match (status.exit_status(), status.terminating_signal()) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        _ => -1,
    };
    Ran {
        stdout: out,
        stderr: err,
        code,
        overlay: String::new(),
        joined: Vec::new(),
    }
}

/// What the child checks of itself: the scratch writable, the rest of
/// the system's configuration unreadable, then its own state for the
/// test to assert.
const SCRIPT: &str = r#"set -e
echo in-scratch > "$TMPDIR/f"; cat "$TMPDIR/f"
echo in-overlay > kept; echo built > cache/out; echo "cwd $(pwd)"
if cat /etc/hostname >/dev/null 2>&1; then echo etc-readable; fi
echo "pgrp $(cut -d' ' -f5 /proc/$$/stat) pid $$"
cat /proc/self/limits /proc/self/cgroup /proc/self/status /proc/self/mounts
"#;

/// Spawns `sh -c SCRIPT` through the child program in `mode` with every
/// step on (a v2 cgroup by `CLONE_INTO_CGROUP`, v1 memory and pids joins,
/// RLIMIT_AS and RLIMIT_FSIZE, a user and mount namespace with a tmpfs,
/// Landlock with every capability dropped, the death signal, a process
/// group), counting the allocations of other processes during the spawn.
/// Says on stdout which steps this machine refuses (then skipped).
fn spawn_with_every_step(mode: SpawnMode, plant: bool) -> ((usize, usize), Ran) {
    spawn_with_every_step_by(mode, plant, false)
}

/// [`spawn_with_every_step`], by a child parked ahead (`parked`) if
/// `parked`: it joins its v1 cgroups first, then is woken with the plan.
fn spawn_with_every_step_by(
    mode: SpawnMode,
    plant: bool,
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))] parked: bool,
) -> ((usize, usize), Ran) {
    let dir = tempfile::tempdir().expect("tempdir");
    let scratch_dir = dir.path().join("tmp");
    std::fs::create_dir(&scratch_dir).expect("mkdir");
    // A worktree with a granted cache, and the run's layers.
    let base = std::fs::canonicalize(dir.path()).expect("canonical");
    let (wt, upper, work) = (base.join("wt"), base.join("upper"), base.join("work"));
    for d in [wt.join("cache"), upper.clone(), work.clone()] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    let work_overlay =
        super::super::WorkOverlay::new(&wt, &upper, &work, &[Path::new("cache")]).expect("overlay");

    let v2 = Cgroups::detect();
    let cg = v2.as_ref().map(|c| c.take().expect("a v2 cgroup"));
    let cg_dir = cg.as_ref().map(|c| c.open().expect("open the cgroup"));
    if cg.is_none() {
        println!("skipped: no cgroup v2 here, the child is not cloned into one");
    }

    let mut limits = ChildLimits::default();
    let mut v1 = Vec::new();
    let mut fds = Vec::new();
    let mut joined = Vec::new();
    for (controller, step, limit, name) in [
        (
            Controller::Memory,
            LimitStep::JoinMemory,
            1u64 << 30,
            ":memory:",
        ),
        (Controller::Pids, LimitStep::JoinPids, 64, ":pids:"),
    ] {
        match Hierarchy::detect(controller) {
            Some(h) => {
                let (d, fd) = h.take(limit).expect("a v1 cgroup");
                limits.join(std::os::fd::AsRawFd::as_raw_fd(&fd), step);
                fds.push(fd);
                v1.push((h, d));
                joined.push(name);
            }
            None => println!("skipped: no v1 {controller:?} hierarchy to join here"),
        }
    }
    limits.rlimit(libc::RLIMIT_AS as i32, 8 << 30, LimitStep::AddressSpace);
    limits.rlimit(libc::RLIMIT_FSIZE as i32, 1 << 20, LimitStep::FileSize);

    let ids = (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    );
    let scratch = ScratchMount::for_ids(&scratch_dir, 4 << 20, None, Way::UserNamespace, ids)
        .expect("a scratch mount");

    let read: Vec<PathBuf> = ["/usr", "/bin", "/lib", "/lib64", "/proc"]
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .collect();
    let base =
        crate::sandbox::confine::BaseGrants::open(6, &read, &[], &[PathBuf::from("/dev/null")])
            .expect("base grants");
    let plan = crate::sandbox::confine::Plan {
        abi: 6,
        base: &base,
        read: Vec::new(),
        write: vec![scratch_dir.clone()],
        workspace: None,
        network: false,
        drop_caps: true,
        user: None,
    };
    let prepared = plan.prepare().expect("landlock ABI 6 here");
    let overlay =
        super::super::overlay::Mount::new(&work_overlay, Path::new("."), Way::UserNamespace)
            .expect("an overlay mount");

    let args = [OsString::from("-c"), OsString::from(SCRIPT)];
    let env = [
        (OsString::from("PATH"), OsString::from("/usr/bin:/bin")),
        (
            OsString::from("TMPDIR"),
            scratch_dir.clone().into_os_string(),
        ),
    ];
    let exec = Exec {
        program: Path::new("/bin/sh"),
        args: &args,
        env: &env,
        cwd: dir.path(),
        piped_stdin: false,
        confine: Some(&prepared),
        limits: &limits,
        scratch: Some(&scratch),
        overlay: Some(&overlay),
        die_with_parent: true,
        mode,
    };
    let cgroup = cg_dir.as_ref().map(|d| d.as_fd());
    let watch = Watch::start();
    #[cfg(target_arch = "x86_64")]
    if parked {
        let mut p =
            super::super::parked::park(cgroup, &limits, std::mem::take(&mut fds)).expect("parked");
        p.joined(Duration::from_secs(5)).expect("joined");
        let unjoined = limits.without_joins();
        let exec = Exec {
            limits: &unjoined,
            ..exec
        };
        let started = spawn::start_parked(p, &exec);
        let counts = watch.counts();
        drop(watch);
        let mut ran = wait(started.unwrap_or_else(|e| panic!("the spawn failed: {e:?}")));
        ran.joined = joined;
        ran.overlay = overlay_seen(&wt, &upper, &ran.stdout);
        release(v1, v2, cg);
        return (counts, ran);
    }
    let started = if plant {
        spawn::start_planting_an_allocation(cgroup, &exec)
    } else {
        spawn::start(cgroup, &exec)
    };
    // The child has exec'd (or failed) once `start` returns: what it
    // allocated on this memory is counted by now.
    let counts = watch.counts();
    drop(watch);
    let mut ran = wait(started.unwrap_or_else(|e| panic!("the spawn failed: {e:?}")));
    ran.joined = joined;
    ran.overlay = overlay_seen(&wt, &upper, &ran.stdout);
    drop(fds);
    release(v1, v2, cg);
    (counts, ran)
}

/// Gives back the cgroups of a spawn that has ended.
fn release(
    v1: Vec<(Hierarchy, super::super::v1::Dir)>,
    v2: Option<Cgroups>,
    cg: Option<super::super::cgroup::ProcessCgroup>,
) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for (h, d) in v1 {
        rt.block_on(h.release(d, Duration::from_secs(1)));
    }
    if let (Some(c), Some(cg)) = (v2, cg) {
        rt.block_on(c.release(cg, Duration::from_secs(1)));
    }
}

/// Every step was applied: each left its mark in what the child saw.
fn assert_every_step(ran: &Ran) {
    let out = &ran.stdout;
    assert_eq!(ran.code, 0, "stdout: {out}\nstderr: {}", ran.stderr);
    assert!(out.starts_with("in-scratch\n"), "{out}");
    assert_eq!(
        ran.overlay, "worktree:absent cache:built layer:in-overlay cwd:true",
        "{out}"
    );
    assert!(!out.contains("etc-readable"), "Landlock was not applied");
    let pgrp = out
        .lines()
        .find_map(|l| l.strip_prefix("pgrp "))
        .and_then(|l| l.split_once(" pid "))
        .expect("the pgrp line");
    assert_eq!(pgrp.0, pgrp.1, "not a process group of its own");
    assert!(
        out.lines()
            .any(|l| l.starts_with("Max file size") && l.contains("1048576")),
        "RLIMIT_FSIZE: {out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("Max address space") && l.contains("8589934592")),
        "RLIMIT_AS: {out}"
    );
    assert!(out.contains("gatehost-scratch"), "no tmpfs: {out}");
    assert!(out.contains("NoNewPrivs:\t1"), "{out}");
    assert!(out.contains("CapEff:\t0000000000000000"), "{out}");
    for hierarchy in &ran.joined {
        assert!(
            out.lines()
                .any(|l| l.contains(hierarchy) && l.contains("gatehost-")),
            "not in its v1 {hierarchy} cgroup: {out}"
        );
    }
}

#[test]
fn the_child_program_allocates_nothing_with_every_step_on() {
    let (counts, ran) = spawn_with_every_step(SpawnMode::Vfork, false);
    assert_every_step(&ran);
    assert_eq!(
        counts,
        (0, 0),
        "the child (sharing this process's memory) allocated or freed: (allocations, frees)"
    );
}

/// The same with a child parked ahead (`parked`): from its clone, through
/// its joins and its wait, to its exec, it allocates nothing.
#[cfg(target_arch = "x86_64")]
#[test]
fn a_parked_child_allocates_nothing_from_its_clone_to_its_exec() {
    let (counts, ran) = spawn_with_every_step_by(SpawnMode::Vfork, false, true);
    assert_every_step(&ran);
    assert_eq!(
        counts,
        (0, 0),
        "the parked child (sharing this process's memory) allocated or freed: (allocations, frees)"
    );
}

/// The guard can fail: a child that allocates once is seen allocating
/// exactly once while it shares the memory ("vfork"), and not at all as a
/// copy ("fork": its heap is its own, which is what the mode is for).
#[test]
fn a_planted_allocation_is_seen_exactly_when_the_child_shares_memory() {
    let (counts, ran) = spawn_with_every_step(SpawnMode::Vfork, true);
    assert_every_step(&ran);
    assert_eq!(counts, (1, 0), "(allocations, frees) seen");
    let (counts, ran) = spawn_with_every_step(SpawnMode::Fork, true);
    assert_every_step(&ran);
    assert_eq!(counts, (0, 0), "a forked child's heap is a copy");
}

/// A gate runs, and is confined, whichever way its child is cloned.
#[test]
fn a_gate_runs_confined_under_each_spawn_mode() {
    let base = crate::sandbox::confine::BaseGrants::open(
        6,
        &["/usr", "/bin", "/lib", "/lib64"]
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.exists())
            .collect::<Vec<_>>(),
        &[],
        &[],
    )
    .expect("base grants");
    let plan = crate::sandbox::Plan {
        abi: 6,
        base: &base,
        read: Vec::new(),
        write: Vec::new(),
        workspace: None,
        network: false,
        drop_caps: true,
        user: None,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let args = [
        OsString::from("-c"),
        OsString::from("cat /etc/hostname 2>/dev/null || echo denied"),
    ];
    let env = [(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
    for mode in [SpawnMode::Vfork, SpawnMode::Fork] {
        let sup = super::super::Supervisor::new().spawning(mode);
        let run = rt
            .block_on(sup.run(super::super::ProcessSpec {
                program: Path::new("/bin/sh"),
                args: &args,
                cwd: Path::new("/"),
                env: &env,
                stdin: None,
                limits: super::super::Limits {
                    timeout: Duration::from_secs(10),
                    grace: Duration::from_millis(200),
                    output_cap: 4096,
                    gate: super::super::GateLimits::NONE,
                },
                confine: Some(&plan),
                scratch: None,
                overlay: None,
            }))
            .expect("the gate ran");
        assert_eq!(
            run.termination,
            super::super::Termination::Exited(0),
            "{mode:?}"
        );
        let out = String::from_utf8(run.stdout.into_bytes()).expect("utf-8");
        assert_eq!(out, "denied\n", "{mode:?}: not confined");
        assert_eq!(run.cgroup_entry, Some("clone3"), "{mode:?}");
    }
}

/// A process started for an agent dies when the thread that started it
/// ends (the death signal, set by the child program after its
/// confinement).
#[test]
fn a_started_process_dies_with_the_thread_that_started_it() {
    let started = std::thread::spawn(|| {
        super::super::start_process(
            Path::new("/bin/sleep"),
            &[OsString::from("30")],
            &[],
            Path::new("/"),
            None,
            SpawnMode::Vfork,
        )
        .expect("started")
    })
    .join()
    .expect("the starting thread");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut process = {
        let _in = rt.enter();
        started.watch().expect("watched")
    };
    let status = rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(5), process.status()).await })
        .expect("killed within 5 s")
        .expect("a status");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
}

/// Where `clone3` answers ENOSYS, a process started outside a cgroup (an
/// agent) is started by the legacy `clone`, with the same program: its
/// confinement, its process group, its death signal.
#[test]
fn the_legacy_clone_runs_the_same_program() {
    let base = crate::sandbox::confine::BaseGrants::open(
        6,
        &["/usr", "/bin", "/lib", "/lib64", "/proc"]
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.exists())
            .collect::<Vec<_>>(),
        &[],
        &[],
    )
    .expect("base grants");
    let plan = crate::sandbox::confine::Plan {
        abi: 6,
        base: &base,
        read: Vec::new(),
        write: Vec::new(),
        workspace: None,
        network: false,
        drop_caps: true,
        user: None,
    };
    let prepared = plan.prepare().expect("landlock ABI 6 here");
    let args = [
        OsString::from("-c"),
        OsString::from(
            "cat /etc/hostname 2>/dev/null || echo denied; echo \"pgrp $(cut -d' ' -f5 /proc/$$/stat) pid $$\"",
        ),
    ];
    let env = [(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
    let limits = ChildLimits::default();
    let exec = Exec {
        program: Path::new("/bin/sh"),
        args: &args,
        env: &env,
        cwd: Path::new("/"),
        piped_stdin: false,
        confine: Some(&prepared),
        limits: &limits,
        scratch: None,
        overlay: None,
        die_with_parent: true,
        mode: SpawnMode::Vfork,
    };
    let ran = wait(spawn::start_by_legacy_clone(&exec).expect("started"));
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let mut lines = ran.stdout.lines();
    assert_eq!(lines.next(), Some("denied"), "not confined: {}", ran.stdout);
    let pgrp = lines
        .next()
        .and_then(|l| l.strip_prefix("pgrp "))
        .and_then(|l| l.split_once(" pid "))
        .expect("the pgrp line");
    assert_eq!(pgrp.0, pgrp.1, "not a process group of its own");
}
