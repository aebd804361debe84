//! Starting a process with the child program ([`super::program`]):
//! `clone3`, directly inside a gate's cgroup where one is given
//! (`CLONE_INTO_CGROUP`), with a pidfd (`CLONE_PIDFD`), and waiting on it
//! through that pidfd. The pidfd and the host's ends of the child's pipes
//! are watched by the tokio runtime's own reactor (no reactor thread is
//! started for them).
//!
//! Moving a process between cgroups (a write to `cgroup.procs`) takes the
//! write side of the kernel's global `cgroup_threadgroup_rwsem`, which waits
//! for an RCU grace period when the lock is cold: 8 to 15 ms here, twice per
//! gate (in and back out), which was most of what a `gatehost hook` process
//! cost beyond a bare hook. A child created by `clone3` with
//! `CLONE_INTO_CGROUP` is born in its cgroup: no process moves, no grace
//! period, and no window in which it runs outside the cgroup.
//!
//! It owns the host's side of the fork-and-exec, which
//! `std::process::Command` cannot do into a cgroup: the pipes, the plan
//! ([`super::program::Plan`], built before `clone3`), the clone itself in
//! the mode `[sandbox] spawn` names, and reading the child's report. With
//! `"vfork"` on x86_64 the child shares the host's memory until its exec,
//! on a stack of its own, with every signal handler cleared (`CLONE_VM |
//! CLONE_VFORK | CLONE_CLEAR_SIGHAND`, as `posix_spawn` does it): nothing of
//! the host's (the WASM engine, the daemon's caches) is copied or made
//! copy-on-write for a spawn. With `"fork"`, and elsewhere, it is a
//! fork-like copy. What the child may do is the child program's to say.
//! A child started here must be waited on by its caller (the supervisor
//! owns a gate's tree's clean-up; an agent's owner waits on it).
//!
//! A child that mounts its scratch tmpfs does so in a mount namespace of
//! its own. When the last process in a mount namespace exits, the kernel
//! tears the namespace down (its mounts, the tmpfs) in that process's exit,
//! before its parent can see it end: 0.5 ms on an idle machine, 3 to 5 ms
//! on a loaded one (issue 52), paid by every gate after its program had
//! finished. So the host holds the namespace ([`Started::mount_ns`], opened
//! once the child has exec'd) and lets it go right after the reap, where
//! closing it costs about 0.1 ms. A child that ends before the host holds
//! it pays the teardown as before; nothing else differs (the namespace
//! goes as soon as the process is reaped, before its cgroup is emptied and
//! given back, so the tmpfs's pages are never charged to the next gate).

use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use super::limits::LimitStep;
use super::program::{self, ChildFds, Exec, Plan, ProgramStep, REPORT_LEN, SpawnMode};
use crate::sandbox::confine::{Step, StepError};

/// `CLONE_INTO_CGROUP` (Linux 5.7): the child starts in the cgroup given by
/// `clone_args.cgroup`. (libc declares it as a C `int`, which cannot hold
/// it on every target.)
pub(super) const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `CLONE_CLEAR_SIGHAND` (Linux 5.5, below `CLONE_INTO_CGROUP`'s 5.7):
/// every signal the host handles is back to its default in the child from
/// its first instruction, so no handler of the host's ever runs in it.
pub(super) const CLONE_CLEAR_SIGHAND: u64 = 0x1_0000_0000;

/// Why `clone3` could not start the child.
#[derive(Debug)]
pub(super) enum CloneError {
    /// This kernel or its seccomp filter cannot `clone3` into a cgroup at
    /// all (ENOSYS, EINVAL, EOPNOTSUPP): the caller falls back to another
    /// way from now on.
    Unsupported(io::Error),
    /// This spawn may not (EACCES, EPERM, EBUSY): the host may not write
    /// this cgroup's `cgroup.procs`, or a seccomp filter says EPERM. The
    /// caller falls back for this spawn only.
    Refused(io::Error),
    /// The child could not be started or could not exec its program (a
    /// failed step of the child program is named in the error).
    Failed(io::Error),
    /// The child could not confine itself (and so never ran the program).
    Confine(StepError),
    /// The child could not apply a limit (and so never ran the program):
    /// the step and its errno.
    Limit(LimitStep, i32),
}

impl CloneError {
    /// As one I/O error (for a caller without a way to fall back).
    pub(super) fn into_io(self) -> io::Error {
        match self {
            CloneError::Unsupported(e) | CloneError::Refused(e) | CloneError::Failed(e) => e,
            CloneError::Confine(e) => io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("cannot confine the process ({:?}): {}", e.step, e.errno),
            ),
            CloneError::Limit(step, errno) => io::Error::other(step.describe(errno)),
        }
    }
}

/// A started child: its pid, its pidfd, and the host's ends of its pipes.
#[derive(Debug)]
pub(super) struct Started {
    pub pid: i32,
    pub pidfd: OwnedFd,
    pub stdin: Option<std::io::PipeWriter>,
    pub stdout: std::io::PipeReader,
    pub stderr: std::io::PipeReader,
    /// The child's own mount namespace (its scratch), held from its exec
    /// until it is reaped (see the module's doc); `None` when it made none
    /// or ended first.
    pub mount_ns: Option<OwnedFd>,
}

/// Starts `exec` with the child program, inside the cgroup whose
/// directory is open as `cgroup` (if any), in a new process group of its
/// own, with exactly the given environment. Returns once the program has
/// been exec'd (or failed to be, or could not be confined).
pub(super) fn start(
    cgroup: Option<BorrowedFd<'_>>,
    exec: &Exec<'_>,
) -> Result<Started, CloneError> {
    start_planting(cgroup, exec, false, false)
}

/// [`start`], with a child that allocates once (to prove the test build's
/// allocation guard can fail).
#[cfg(test)]
pub(super) fn start_planting_an_allocation(
    cgroup: Option<BorrowedFd<'_>>,
    exec: &Exec<'_>,
) -> Result<Started, CloneError> {
    start_planting(cgroup, exec, true, false)
}

/// [`start`] outside a cgroup by the legacy `clone`, as where `clone3`
/// answers ENOSYS (to test that way here).
#[cfg(test)]
pub(super) fn start_by_legacy_clone(exec: &Exec<'_>) -> Result<Started, CloneError> {
    start_planting(None, exec, false, true)
}

/// [`start`] by a child parked ahead of need ([`super::parked`]): it is
/// woken with the plan instead of cloned.
#[cfg(target_arch = "x86_64")]
pub(super) fn start_parked(
    parked: super::parked::Parked,
    exec: &Exec<'_>,
) -> Result<Started, CloneError> {
    start_by(Launch::Parked(parked), exec, false)
}

/// How the child comes to be.
enum Launch<'a> {
    /// Cloned now, into `cgroup` if given; by the legacy `clone` if asked.
    Clone {
        cgroup: Option<BorrowedFd<'a>>,
        legacy: bool,
    },
    /// Woken: a child made ahead, already in its cgroups.
    #[cfg(target_arch = "x86_64")]
    Parked(super::parked::Parked),
}

fn start_planting(
    cgroup: Option<BorrowedFd<'_>>,
    exec: &Exec<'_>,
    plant: bool,
    legacy: bool,
) -> Result<Started, CloneError> {
    start_by(Launch::Clone { cgroup, legacy }, exec, plant)
}

fn start_by(
    launch: Launch<'_>,
    exec: &Exec<'_>,
    #[cfg_attr(not(test), allow(unused_variables))] plant: bool,
) -> Result<Started, CloneError> {
    let failed = CloneError::Failed;
    // All of these are close-on-exec; the child's copies on 0, 1 and 2 are
    // made by dup2, which clears the flag.
    let (stdin_child, stdin_host): (OwnedFd, Option<std::io::PipeWriter>) = if exec.piped_stdin {
        let (r, w) = std::io::pipe().map_err(failed)?;
        (r.into(), Some(w))
    } else {
        (
            std::fs::File::open("/dev/null").map_err(failed)?.into(),
            None,
        )
    };
    let (stdout_host, stdout_child) = std::io::pipe().map_err(failed)?;
    let (stderr_host, stderr_child) = std::io::pipe().map_err(failed)?;
    let (mut report_host, report_child) = std::io::pipe().map_err(failed)?;
    // Everything the child touches is built here, before clone3.
    #[cfg_attr(not(test), allow(unused_mut))]
    let mut plan = Plan::new(
        exec,
        ChildFds {
            stdin: stdin_child.as_raw_fd(),
            stdout: stdout_child.as_raw_fd(),
            stderr: stderr_child.as_raw_fd(),
            report: report_child.as_raw_fd(),
        },
    )
    .map_err(failed)?;
    #[cfg(test)]
    {
        plan.plant_allocation = plant;
    }

    // A parked child runs on its `Parked`'s stack until it execs or exits:
    // kept until this returns (after the report is read).
    #[cfg(target_arch = "x86_64")]
    let mut keep: Option<super::parked::Parked> = None;
    let (pid, pidfd) = match launch {
        Launch::Clone { cgroup, legacy } => clone_now(cgroup, legacy, exec.mode, &plan)?,
        // The parked child has its own descriptor table once this returns:
        // the host's copies may close.
        #[cfg(target_arch = "x86_64")]
        Launch::Parked(parked) => keep.insert(parked).wake(&plan)?,
    };
    // The host's copies of the child's ends: closed, so that EOF on the
    // report pipe means exec, and EOF on stdout/stderr means the tree
    // closed them.
    drop((stdin_child, stdout_child, stderr_child, report_child));
    let mut report = [0u8; REPORT_LEN];
    let mut got = 0;
    while got < report.len() {
        match report_host.read(&mut report[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                // Unknown state of the child: kill and reap it, and fail.
                reap_killed(pid, pidfd.as_fd());
                return Err(CloneError::Failed(e));
            }
        }
    }
    // The child has exec'd or exited: the plan's descriptors may close.
    drop(plan);
    if got == 0 {
        let own_ns = exec.scratch.is_some() || exec.overlay.is_some();
        let mount_ns = own_ns.then(|| hold_mount_ns(pid)).flatten();
        return Ok(Started {
            pid,
            pidfd,
            stdin: stdin_host,
            stdout: stdout_host,
            stderr: stderr_host,
            mount_ns,
        });
    }
    // The child failed before or at exec, and has exited (or is exiting).
    let _ = rustix::process::waitid(
        rustix::process::WaitId::PidFd(pidfd.as_fd()),
        rustix::process::WaitIdOptions::EXITED,
    );
    if got < report.len() {
        return Err(CloneError::Failed(io::Error::other(
            "the child failed before exec",
        )));
    }
    let (step, errno) = report.split_at(4);
    let step = u32::from_ne_bytes(step.try_into().unwrap_or_default());
    let errno = i32::from_ne_bytes(errno.try_into().unwrap_or_default());
    if let Some(step) = LimitStep::from_code(step) {
        return Err(CloneError::Limit(step, errno));
    }
    if let Some(step) = Step::from_code(step) {
        return Err(CloneError::Confine(StepError {
            step,
            errno: rustix::io::Errno::from_raw_os_error(errno),
        }));
    }
    Err(CloneError::Failed(match ProgramStep::from_code(step) {
        Some(step) => step.error(errno),
        None => io::Error::from_raw_os_error(errno),
    }))
}

/// The mount namespace of the child `pid` (not reaped: its pid is not
/// reused), opened through `/proc`; `None` if it has ended already (its
/// namespaces are gone) or `/proc` cannot say.
fn hold_mount_ns(pid: i32) -> Option<OwnedFd> {
    rustix::fs::open(
        format!("/proc/{pid}/ns/mnt"),
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .ok()
}

/// Clones the child now (see [`start`]); returns its pid and pidfd.
fn clone_now(
    cgroup: Option<BorrowedFd<'_>>,
    legacy: bool,
    mode: SpawnMode,
    plan: &Plan<'_>,
) -> Result<(i32, OwnedFd), CloneError> {
    let mut pidfd: RawFd = -1;
    // SAFETY: clone_args is plain data; all zeroes is its documented
    // default.
    let mut args: libc::clone_args = unsafe { std::mem::zeroed() };
    args.flags = libc::CLONE_PIDFD as u64 | CLONE_CLEAR_SIGHAND;
    args.pidfd = &mut pidfd as *mut RawFd as u64;
    args.exit_signal = libc::SIGCHLD as u64;
    if let Some(cgroup) = cgroup {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = cgroup.as_raw_fd() as u64;
    }
    let pid = if legacy && cgroup.is_none() {
        clone_legacy(&mut pidfd, plan)
    } else {
        let pid = match mode {
            SpawnMode::Vfork => clone_sharing(&mut args, plan),
            SpawnMode::Fork => clone_copying(&mut args, plan),
        };
        let no_clone3 = pid < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS);
        // No clone3 at all (an old kernel, a seccomp filter that answers
        // ENOSYS, as Docker's default one does): outside a cgroup, the
        // legacy clone starts the same program.
        if no_clone3 && cgroup.is_none() {
            clone_legacy(&mut pidfd, plan)
        } else {
            pid
        }
    };
    if pid < 0 {
        return Err(clone_error(io::Error::last_os_error()));
    }
    // SAFETY: with CLONE_PIDFD a successful clone stored a new fd here.
    Ok((pid as i32, unsafe { OwnedFd::from_raw_fd(pidfd) }))
}

/// A failed clone's errno, as the caller acts on it.
pub(super) fn clone_error(e: io::Error) -> CloneError {
    match e.raw_os_error() {
        Some(libc::ENOSYS | libc::EINVAL | libc::EOPNOTSUPP) => CloneError::Unsupported(e),
        Some(libc::EPERM | libc::EACCES | libc::EBUSY) => CloneError::Refused(e),
        _ => CloneError::Failed(e),
    }
}

/// The child's stack when it shares the host's memory: it only makes the
/// child program's system calls (a few hundred bytes of frames); a guard
/// page below it turns an overflow into a SIGSEGV of the child, never a
/// write into the host.
#[cfg(target_arch = "x86_64")]
const CHILD_STACK: usize = 64 * 1024;

/// Starts the child, as `posix_spawn` does: `CLONE_VM | CLONE_VFORK`, on a
/// stack of its own. The child shares the host's memory until it execs (no
/// page table is copied, and afterwards no page of the host's is
/// copy-on-write), and this thread waits until then. Returns the pid, or
/// -1 with errno set.
#[cfg(target_arch = "x86_64")]
fn clone_sharing(args: &mut libc::clone_args, plan: &Plan<'_>) -> libc::c_long {
    let Ok(stack) = ChildStack::new() else {
        return -1;
    };
    args.flags |= libc::CLONE_VM as u64 | libc::CLONE_VFORK as u64;
    let entry: unsafe extern "C" fn(*const u8) -> ! = child_entry;
    // SAFETY: `child_entry` runs the plan, built before the clone and alive
    // until this returns (CLONE_VFORK: once the child has exec'd or exited).
    let pid = unsafe { clone3_on_stack(args, &stack, entry, (plan as *const Plan<'_>).cast()) };
    // The child has exec'd or exited (CLONE_VFORK): its stack is free.
    drop(stack);
    pid
}

/// A child's own stack in the host's memory: a mapping with a guard page
/// below it (an overflow is a SIGSEGV of the child, never a write into the
/// host), unmapped when dropped.
#[cfg(target_arch = "x86_64")]
#[derive(Debug)]
pub(super) struct ChildStack {
    base: usize,
}

#[cfg(target_arch = "x86_64")]
impl ChildStack {
    const PAGE: usize = 4096;
    const LEN: usize = CHILD_STACK + Self::PAGE;

    pub(super) fn new() -> io::Result<ChildStack> {
        // SAFETY: a fresh anonymous private mapping, owned by the value
        // made here and unmapped by its drop.
        let stack = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                Self::LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if stack == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let made = ChildStack {
            base: stack as usize,
        };
        // SAFETY: the lowest page of the mapping just made: the guard.
        if unsafe { libc::mprotect(stack, Self::PAGE, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(made)
    }
}

#[cfg(target_arch = "x86_64")]
impl Drop for ChildStack {
    /// Only once no child runs on it (it has exec'd or exited).
    fn drop(&mut self) {
        // SAFETY: the mapping made by `new`, used by nobody now.
        unsafe { libc::munmap(self.base as *mut libc::c_void, Self::LEN) };
    }
}

/// The raw `clone3` with the child on `stack`, calling `entry(arg)`, which
/// never returns. Returns the pid, or -1 with errno set.
///
/// # Safety
/// `args` must not ask for `CLONE_VM` without this stack being the
/// child's (it sets it); `entry` must keep the child program's rules
/// ([`super::program`]) and `arg` stay valid for as long as it uses it;
/// `stack` must outlive the child's use of it (its exec or exit).
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn clone3_on_stack(
    args: &mut libc::clone_args,
    stack: &ChildStack,
    entry: unsafe extern "C" fn(*const u8) -> !,
    arg: *const u8,
) -> libc::c_long {
    args.stack = (stack.base + ChildStack::PAGE) as u64;
    args.stack_size = CHILD_STACK as u64;
    let pid: libc::c_long;
    // SAFETY: the raw clone3 system call with a valid, fully initialised
    // clone_args of the size passed. In the parent it returns the pid (or
    // -errno). In the child (0), the kernel has switched to the new stack
    // (16-byte aligned: its top is page-aligned); the child calls
    // `entry(arg)`, which never returns. The registers holding `entry`
    // and `arg` survive the syscall (only rax, rcx and r11 do not, and
    // neither operand is given those). The parent's stack is not touched
    // (nostack).
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, {arg}",
            "call {entry}",
            "ud2",
            "2:",
            entry = in(reg) entry,
            arg = in(reg) arg,
            inlateout("rax") libc::SYS_clone3 => pid,
            in("rdi") args as *const libc::clone_args,
            in("rsi") std::mem::size_of::<libc::clone_args>(),
            out("rcx") _,
            out("r11") _,
            options(nostack),
        );
    }
    if pid < 0 {
        // SAFETY: this thread's errno, as libc's syscall() would set it.
        unsafe { *libc::__errno_location() = (-pid) as i32 };
        return -1;
    }
    pid
}

/// Elsewhere than on x86_64, `"vfork"` is a fork-like copy too.
#[cfg(not(target_arch = "x86_64"))]
fn clone_sharing(args: &mut libc::clone_args, plan: &Plan<'_>) -> libc::c_long {
    clone_copying(args, plan)
}

/// A fork-like `clone3` (no shared memory, the child on a copy of this
/// thread's stack): `[sandbox] spawn = "fork"`.
fn clone_copying(args: &mut libc::clone_args, plan: &Plan<'_>) -> libc::c_long {
    // SAFETY: the raw clone3 system call with a valid, fully initialised
    // clone_args of the size passed, without CLONE_VM nor a stack: the
    // child runs on its copy of this thread's stack. In the child (0)
    // only the child program runs, which never returns.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            args as *const libc::clone_args,
            std::mem::size_of::<libc::clone_args>(),
        )
    };
    if pid == 0 {
        // SAFETY: the freshly cloned child; `plan` is in its copy of this
        // thread's memory.
        unsafe { program::run(plan) }
    }
    pid
}

/// The legacy `clone`, fork-like (no `CLONE_VM`, the child on a copy of
/// this thread's stack), with a pidfd: where there is no `clone3`, and
/// only outside a cgroup. It cannot clear the signal handlers
/// (`CLONE_CLEAR_SIGHAND` is `clone3`'s): until its exec the child keeps
/// copies of the host's, which could only ever touch its own copy of the
/// host's memory.
fn clone_legacy(pidfd: &mut RawFd, plan: &Plan<'_>) -> libc::c_long {
    let flags = (libc::CLONE_PIDFD | libc::SIGCHLD) as libc::c_ulong;
    // SAFETY: the raw clone system call, fork-like: no CLONE_VM and no new
    // stack. With CLONE_PIDFD the kernel stores the pidfd where the third
    // argument (the parent's tid pointer on every 64-bit target but s390)
    // points, a live i32 here. In the child (0) only the child program
    // runs, which never returns.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            flags,
            0usize,
            pidfd as *mut RawFd,
            0usize,
            0usize,
        )
    };
    if pid == 0 {
        // SAFETY: the freshly cloned child; `plan` is in its copy of this
        // thread's memory.
        unsafe { program::run(plan) }
    }
    pid
}

/// The shared-memory child's first Rust frame.
///
/// # Safety
/// Only in the child of [`clone_sharing`], with `plan` built before it.
#[cfg(target_arch = "x86_64")]
unsafe extern "C" fn child_entry(plan: *const u8) -> ! {
    // SAFETY: per the contract, `plan` is a `Plan` valid for the child's
    // life.
    unsafe { program::run(&*plan.cast::<Plan<'_>>()) }
}

/// An error, instead of tokio's panic, where there is no tokio runtime to
/// watch a child's pidfd and pipes.
pub(super) fn in_runtime() -> io::Result<()> {
    tokio::runtime::Handle::try_current()
        .map(drop)
        .map_err(|e| io::Error::other(format!("a gate is waited on by a tokio runtime: {e}")))
}

/// Kills and reaps a child whose start went wrong half-way.
fn reap_killed(pid: i32, pidfd: BorrowedFd<'_>) {
    super::kill(pid, rustix::process::Signal::KILL);
    let _ = rustix::process::waitid(
        rustix::process::WaitId::PidFd(pidfd),
        rustix::process::WaitIdOptions::EXITED,
    );
}

/// A child started by [`clone_into`], waited on through its pidfd, which
/// the tokio runtime's own reactor watches (no reactor thread of its own).
#[derive(Debug)]
pub(super) struct PidfdChild {
    pid: i32,
    pidfd: tokio::io::unix::AsyncFd<OwnedFd>,
    status: Option<ExitStatus>,
    /// [`Started::mount_ns`], closed once the child is reaped.
    mount_ns: Option<OwnedFd>,
}

impl PidfdChild {
    /// Errs (instead of panicking) outside a tokio runtime.
    pub(super) fn new(pid: i32, pidfd: OwnedFd) -> io::Result<PidfdChild> {
        in_runtime()?;
        // SAFETY: `pidfd` is an open OwnedFd moved into the AsyncFd, which
        // owns it (so it stays open and the same) until the AsyncFd drops.
        let pidfd = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE)
        }
        .map_err(io::Error::from)?;
        Ok(PidfdChild {
            pid,
            pidfd,
            status: None,
            mount_ns: None,
        })
    }

    /// Holds `mount_ns` (the child's, see [`Started::mount_ns`]) until the
    /// child is reaped.
    pub(super) fn holding(mut self, mount_ns: Option<OwnedFd>) -> PidfdChild {
        self.mount_ns = mount_ns;
        self
    }

    pub(super) fn id(&self) -> i32 {
        self.pid
    }

    /// Waits for the child to end and reaps it (once; later calls return
    /// the same status).
    pub(super) async fn status(&mut self) -> io::Result<ExitStatus> {
        loop {
            if let Some(s) = self.try_status()? {
                return Ok(s);
            }
            // Readable: the child has ended. A wake-up with nothing to
            // reap clears the readiness and waits again.
            self.pidfd.readable().await?.clear_ready();
        }
    }

    /// The status if the child has ended (reaping it), without waiting.
    pub(super) fn try_status(&mut self) -> io::Result<Option<ExitStatus>> {
        if let Some(s) = self.status {
            return Ok(Some(s));
        }
        let reaped = rustix::process::waitid(
            rustix::process::WaitId::PidFd(self.pidfd.get_ref().as_fd()),
            rustix::process::WaitIdOptions::EXITED | rustix::process::WaitIdOptions::NOHANG,
        )?;
        let Some(s) = reaped else {
            return Ok(None);
        };
        let raw = match (s.exit_status(), s.terminating_signal()) {
            (Some(code), _) => (code & 0xff) << 8,
            (None, Some(sig)) => sig | if s.dumped() { 0x80 } else { 0 },
            (None, None) => return Err(io::Error::other("waitid: no status")),
        };
        let status = ExitStatus::from_raw(raw);
        self.status = Some(status);
        // Reaped: its mount namespace (the scratch) goes now.
        self.mount_ns = None;
        Ok(Some(status))
    }
}

impl Drop for PidfdChild {
    /// A child dropped before it was waited on (its gate was abandoned and
    /// its tree killed): reaped now if it is already gone, else by the
    /// supervisor's next sweep of untracked zombies.
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = rustix::process::waitid(
                rustix::process::WaitId::PidFd(self.pidfd.get_ref().as_fd()),
                rustix::process::WaitIdOptions::EXITED | rustix::process::WaitIdOptions::NOHANG,
            );
        }
    }
}
