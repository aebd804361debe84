//! Starting a gate's process directly inside its cgroup, with
//! `clone3(CLONE_INTO_CGROUP | CLONE_PIDFD)`, and waiting on it through its
//! pidfd. The pidfd and the host's ends of the child's pipes are watched by
//! the tokio runtime's own reactor (no reactor thread is started for them).
//!
//! Moving a process between cgroups (a write to `cgroup.procs`) takes the
//! write side of the kernel's global `cgroup_threadgroup_rwsem`, which waits
//! for an RCU grace period when the lock is cold: 8 to 15 ms here, twice per
//! gate (in and back out), which was most of what a `gatehost hook` process
//! cost beyond a bare hook. A child created by `clone3` with
//! `CLONE_INTO_CGROUP` is born in its cgroup: no process moves, no grace
//! period, and no window in which it runs outside the cgroup.
//!
//! It owns the fork-and-exec itself, which `std::process::Command` cannot
//! do into a cgroup: everything the child needs (paths, argv, environment,
//! pipes, the sandbox's prepared confinement) is prepared before `clone3`;
//! between `clone3` and `execve` the child confines itself and puts its
//! descriptors in place with system calls that are async-signal-safe only,
//! and it never returns into the host's code: it execs or `_exit`s. On
//! x86_64 the child shares the host's memory until its exec, on a stack of
//! its own, with every signal handler cleared (`CLONE_VM | CLONE_VFORK |
//! CLONE_CLEAR_SIGHAND`, as `posix_spawn` does it): nothing of the host's
//! (the WASM engine, the daemon's caches) is copied or made copy-on-write
//! for a spawn. Elsewhere it is a fork-like copy. A confinement or exec error comes back
//! through a close-on-exec pipe (the step and the errno), as std does it. It must never be used for anything but a supervised gate: the
//! caller ([`super::Supervisor::run`]) owns the tree's clean-up.

use std::ffi::{CString, OsString};
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;

use super::limits::{ChildLimits, LimitStep};
use crate::sandbox::confine::{Prepared, Step, StepError};

/// `CLONE_INTO_CGROUP` (Linux 5.7): the child starts in the cgroup given by
/// `clone_args.cgroup`. (libc declares it as a C `int`, which cannot hold
/// it on every target.)
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

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
    /// The child could not be started or could not exec its program.
    Failed(io::Error),
    /// The child could not confine itself (and so never ran the program).
    Confine(StepError),
    /// The child could not apply a limit (and so never ran the program):
    /// the step and its errno.
    Limit(LimitStep, i32),
}

/// What to start.
pub(super) struct Exec<'a> {
    pub program: &'a Path,
    pub args: &'a [OsString],
    pub env: &'a [(OsString, OsString)],
    pub cwd: &'a Path,
    /// A pipe for stdin; otherwise stdin is /dev/null.
    pub piped_stdin: bool,
    /// The confinement the child applies to itself before it execs.
    pub confine: Option<&'a Prepared>,
    /// The limits it applies first.
    pub limits: &'a ChildLimits,
    /// The scratch tmpfs it mounts next, in a mount namespace of its own.
    pub scratch: Option<&'a super::scratch::ScratchMount>,
}

/// A started child: its pid, its pidfd, and the host's ends of its pipes.
#[derive(Debug)]
pub(super) struct Started {
    pub pid: i32,
    pub pidfd: OwnedFd,
    pub stdin: Option<std::io::PipeWriter>,
    pub stdout: std::io::PipeReader,
    pub stderr: std::io::PipeReader,
}

fn cstring(bytes: &[u8], what: &str) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} contains a NUL byte"),
        )
    })
}

/// Starts `exec` inside the cgroup whose directory is open as `cgroup`, in
/// a new process group of its own, with exactly the given environment.
/// Returns once the program has been exec'd (or failed to be, or could not
/// be confined).
pub(super) fn clone_into(cgroup: BorrowedFd<'_>, exec: &Exec<'_>) -> Result<Started, CloneError> {
    let failed = CloneError::Failed;
    // Everything the child touches is built here, before clone3.
    let program =
        cstring(exec.program.as_os_str().as_bytes(), "the program path").map_err(failed)?;
    let mut argv_owned = vec![program.clone()];
    for a in exec.args {
        argv_owned.push(cstring(a.as_bytes(), "an argument").map_err(failed)?);
    }
    let mut envp_owned = Vec::with_capacity(exec.env.len());
    for (k, v) in exec.env {
        let mut kv = k.as_bytes().to_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        envp_owned.push(cstring(&kv, "an environment variable").map_err(failed)?);
    }
    let cwd = cstring(exec.cwd.as_os_str().as_bytes(), "the working directory").map_err(failed)?;
    let argv: Vec<*const libc::c_char> = argv_owned
        .iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp: Vec<*const libc::c_char> = envp_owned
        .iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();

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

    let mut pidfd: RawFd = -1;
    // SAFETY: clone_args is plain data; all zeroes is its documented
    // default.
    let mut args: libc::clone_args = unsafe { std::mem::zeroed() };
    args.flags = libc::CLONE_PIDFD as u64 | CLONE_INTO_CGROUP;
    args.pidfd = &mut pidfd as *mut RawFd as u64;
    args.exit_signal = libc::SIGCHLD as u64;
    args.cgroup = cgroup.as_raw_fd() as u64;
    let start = ChildStart {
        fds: ChildFds {
            stdin: stdin_child.as_raw_fd(),
            stdout: stdout_child.as_raw_fd(),
            stderr: stderr_child.as_raw_fd(),
            report: report_child.as_raw_fd(),
        },
        confine: exec.confine,
        limits: exec.limits,
        scratch: exec.scratch,
        program: program.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        cwd: cwd.as_ptr(),
    };
    let pid = clone_child(&mut args, &start);
    if pid < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ENOSYS | libc::EINVAL | libc::EOPNOTSUPP) => CloneError::Unsupported(e),
            Some(libc::EPERM | libc::EACCES | libc::EBUSY) => CloneError::Refused(e),
            _ => CloneError::Failed(e),
        });
    }
    let pid = pid as i32;
    // SAFETY: with CLONE_PIDFD a successful clone3 stored a new fd here.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
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
    if got == 0 {
        return Ok(Started {
            pid,
            pidfd,
            stdin: stdin_host,
            stdout: stdout_host,
            stderr: stderr_host,
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
    Err(match Step::from_code(step) {
        Some(step) => CloneError::Confine(StepError {
            step,
            errno: rustix::io::Errno::from_raw_os_error(errno),
        }),
        None => CloneError::Failed(io::Error::from_raw_os_error(errno)),
    })
}

/// What a child that failed writes on its report pipe: the confinement
/// step (0: setting up or exec) and the errno, in native byte order.
const REPORT_LEN: usize = 8;

/// Everything the child uses, built before the clone (pointers into this
/// thread's frame, which outlives the child's use of them: the child execs
/// or exits before `clone_child` returns, or works on a copy).
struct ChildStart<'a> {
    fds: ChildFds,
    confine: Option<&'a Prepared>,
    limits: &'a ChildLimits,
    scratch: Option<&'a super::scratch::ScratchMount>,
    program: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    cwd: *const libc::c_char,
}

/// The child's stack when it shares the host's memory: it only makes the
/// confinement's and the exec's system calls (a few hundred bytes of
/// frames); a guard page below it turns an overflow into a SIGSEGV of the
/// child, never a write into the host.
#[cfg(target_arch = "x86_64")]
const CHILD_STACK: usize = 64 * 1024;

/// `CLONE_CLEAR_SIGHAND` (Linux 5.5, below `CLONE_INTO_CGROUP`'s 5.7):
/// every signal the host handles is back to its default in the child from
/// its first instruction, so no handler of the host's ever runs in it.
#[cfg(target_arch = "x86_64")]
const CLONE_CLEAR_SIGHAND: u64 = 0x1_0000_0000;

/// Starts the child, as `posix_spawn` does: `CLONE_VM | CLONE_VFORK`, on a
/// stack of its own. The child shares the host's memory until it execs (no
/// page table is copied, and afterwards no page of the host's is
/// copy-on-write), and this thread waits until then. Returns the pid, or
/// -1 with errno set.
#[cfg(target_arch = "x86_64")]
fn clone_child(args: &mut libc::clone_args, start: &ChildStart<'_>) -> libc::c_long {
    let page = 4096;
    let len = CHILD_STACK + page;
    // SAFETY: a fresh anonymous private mapping, owned here and unmapped
    // below once the child no longer runs on it.
    let stack = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if stack == libc::MAP_FAILED {
        return -1;
    }
    // SAFETY: the lowest page of the mapping just made: the guard.
    if unsafe { libc::mprotect(stack, page, libc::PROT_NONE) } != 0 {
        // SAFETY: the mapping made above, not used by anyone.
        unsafe { libc::munmap(stack, len) };
        return -1;
    }
    args.flags |= libc::CLONE_VM as u64 | libc::CLONE_VFORK as u64 | CLONE_CLEAR_SIGHAND;
    args.stack = stack as u64 + page as u64;
    args.stack_size = CHILD_STACK as u64;
    let entry: unsafe extern "C" fn(*const ChildStart<'_>) -> ! = child_entry;
    let pid: libc::c_long;
    // SAFETY: the raw clone3 system call with a valid, fully initialised
    // clone_args of the size passed. In the parent it returns the pid (or
    // -errno). In the child (0), the kernel has switched to the new stack
    // (16-byte aligned: its top is page-aligned); the child calls
    // `child_entry(start)`, which never returns. The registers holding
    // `entry` and `start` survive the syscall (only rax, rcx and r11 do
    // not, and neither operand is given those). The parent's stack is not
    // touched (nostack).
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, {start}",
            "call {entry}",
            "ud2",
            "2:",
            entry = in(reg) entry,
            start = in(reg) start as *const ChildStart<'_>,
            inlateout("rax") libc::SYS_clone3 => pid,
            in("rdi") args as *const libc::clone_args,
            in("rsi") std::mem::size_of::<libc::clone_args>(),
            out("rcx") _,
            out("r11") _,
            options(nostack),
        );
    }
    // The child has exec'd or exited (CLONE_VFORK): its stack is free.
    // SAFETY: the mapping made above.
    unsafe { libc::munmap(stack, len) };
    if pid < 0 {
        // SAFETY: this thread's errno, as libc's syscall() would set it.
        unsafe { *libc::__errno_location() = (-pid) as i32 };
        return -1;
    }
    pid
}

/// Elsewhere: a fork-like `clone3` (no shared memory, the child on a copy
/// of this thread's stack).
#[cfg(not(target_arch = "x86_64"))]
fn clone_child(args: &mut libc::clone_args, start: &ChildStart<'_>) -> libc::c_long {
    // SAFETY: the raw clone3 system call with a valid, fully initialised
    // clone_args of the size passed. In the child (0) only `child_exec`
    // runs, which never returns.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            args as *const libc::clone_args,
            std::mem::size_of::<libc::clone_args>(),
        )
    };
    if pid == 0 {
        // SAFETY: the freshly cloned child; `start` points into its copy of
        // this thread's memory.
        unsafe { child_entry(start) }
    }
    pid
}

/// The child's first Rust frame.
///
/// # Safety
/// Only in the child of [`clone_child`], with `start` built by
/// [`clone_into`].
unsafe extern "C" fn child_entry(start: *const ChildStart<'_>) -> ! {
    // SAFETY: per the contract, `start` is valid for the child's life.
    unsafe { child_exec(&*start) }
}

/// Raw descriptors the child puts in place.
struct ChildFds {
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    report: RawFd,
}

/// The child's side of the spawn: async-signal-safe system calls only. It
/// may share the host's memory (see [`clone_child`]): it writes nothing
/// but its own stack and this thread's errno.
///
/// # Safety
/// Only in the child of `clone3`, with pointers to NUL-terminated strings
/// and NULL-terminated arrays that live in the (copied) memory.
unsafe fn child_exec(start: &ChildStart<'_>) -> ! {
    let &ChildStart {
        ref fds,
        confine,
        limits,
        scratch,
        program,
        argv,
        envp,
        cwd,
    } = start;
    // SAFETY: plain system calls on valid arguments; see the function's
    // contract.
    unsafe {
        let report_failure = |report: RawFd, step: u32, errno: i32| -> ! {
            let mut bytes = [0u8; REPORT_LEN];
            bytes[..4].copy_from_slice(&step.to_ne_bytes());
            bytes[4..].copy_from_slice(&errno.to_ne_bytes());
            libc::write(report, bytes.as_ptr().cast(), bytes.len());
            libc::_exit(127)
        };
        let fail = |report: RawFd| -> ! { report_failure(report, 0, *libc::__errno_location()) };
        // The limits first: joining a v1 cgroup is done with the host's
        // rights, and nothing below (nor the program) runs unbounded.
        if let Err((step, errno)) = limits.apply() {
            report_failure(fds.report, step as u32, errno)
        }
        // The working directory before the scratch's mount namespace, which
        // takes it along (see `ScratchMount::apply`).
        if libc::chdir(cwd) != 0 {
            fail(fds.report);
        }
        // The scratch tmpfs next: a mount needs the host's rights (or a
        // user namespace's), which the confinement gives up.
        if let Some(mount) = scratch
            && let Err(errno) = mount.apply(confine)
        {
            report_failure(fds.report, LimitStep::Scratch as u32, errno)
        }
        // Then the confinement, so that nothing below runs unconfined.
        if let Some(prepared) = confine
            && let Err(e) = prepared.apply()
        {
            report_failure(fds.report, e.step as u32, e.errno.raw_os_error())
        }
        // The host ignores SIGPIPE (Rust's runtime does); a gate must get
        // the default, as std gives it. Nothing is blocked in the gate.
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        if libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0 {
            fail(fds.report);
        }
        if libc::signal(libc::SIGPIPE, libc::SIG_DFL) == libc::SIG_ERR {
            fail(fds.report);
        }
        for (fd, target) in [(fds.stdin, 0), (fds.stdout, 1), (fds.stderr, 2)] {
            if fd == target {
                // dup2 onto itself keeps close-on-exec: clear it.
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    fail(fds.report);
                }
            } else if libc::dup2(fd, target) < 0 {
                fail(fds.report);
            }
        }
        if libc::setpgid(0, 0) != 0 {
            fail(fds.report);
        }
        libc::execve(program, argv, envp);
        fail(fds.report)
    }
}

/// Kills and reaps a child whose start went wrong half-way.
/// An error, instead of tokio's panic, where there is no tokio runtime to
/// watch a child's pidfd and pipes.
pub(super) fn in_runtime() -> io::Result<()> {
    tokio::runtime::Handle::try_current()
        .map(drop)
        .map_err(|e| io::Error::other(format!("a gate is waited on by a tokio runtime: {e}")))
}

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
        })
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
