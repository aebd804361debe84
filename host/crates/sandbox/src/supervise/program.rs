//! The child program: everything a process the host starts (a native
//! gate, a judge, an agent of `session start`) does between `clone3` and
//! `execve`, as one plan ([`Plan`]) built by the host before the clone and
//! one function ([`run`]) that carries it out in the child.
//!
//! # The rules of the child (stated here only)
//!
//! In the default mode (`[sandbox] spawn = "vfork"`) the child is cloned
//! with `CLONE_VM | CLONE_VFORK`, as `posix_spawn` does it: it runs on the
//! host's memory (its heap, its statics, the spawning thread's TLS) until
//! it execs, while the host's other threads keep running. So, in the
//! child:
//! - **no allocation**: the heap's locks and arenas are the host's; a
//!   `malloc` may wait forever on a lock another thread of the host holds,
//!   or corrupt an arena that thread is changing. Every byte the child
//!   uses (argv, envp, paths, the id maps, the tmpfs options, the Landlock
//!   ruleset and its rules) is allocated, and every path it can be given
//!   as a descriptor is resolved, by the host in [`Plan::new`];
//! - **no lock** (no `Mutex`, no `tracing`, no stdio of Rust's, no
//!   `OnceLock` that may block): a lock held by another thread of the host
//!   is never released in the child;
//! - **no panic, no unwinding**: a panic allocates, takes the panic hook's
//!   lock and would unwind into the host's frames on a stack that is not
//!   theirs. Every failure is a value: the child writes the failed step
//!   ([`ProgramStep`], [`crate::sandbox::confine::Step`] or
//!   [`super::limits::LimitStep`]) and its errno on a close-on-exec pipe
//!   and `_exit`s; the host reads the pipe (EOF: the exec happened);
//! - **no memory written but its own stack and errno**: nothing of the
//!   host's is changed in place;
//! - only **async-signal-safe system calls** (raw `libc`/`rustix`
//!   wrappers, which keep no state), because the child of a
//!   multi-threaded process has one thread and any lock may be held.
//!
//! With `[sandbox] spawn = "fork"` the child is a copy-on-write copy (no
//! `CLONE_VM`): the same program runs, the same rules hold (a copy of a
//! multi-threaded process is as fragile as a shared one), and the heap
//! the child might spoil would only be its own. It is the escape hatch if
//! the shared-memory child ever misbehaves on some kernel or libc.
//!
//! The rules are checked mechanically: the unit tests install a counting
//! allocator that sees the allocations of any process sharing the test's
//! memory, and spawn with every step on; a planted allocation proves the
//! guard can fail (`program_tests.rs`).
//!
//! This module must never let the program run after a failed step, and
//! never return into the host's code from the child.

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::limits::{ChildLimits, LimitStep};
use super::overlay;
use super::scratch::{IdMaps, ScratchMount};
use crate::sandbox::confine::Prepared;

pub(super) use super::spawn_mode::SpawnMode;

/// What to start, as the caller gives it.
pub(super) struct Exec<'a> {
    pub program: &'a Path,
    pub args: &'a [OsString],
    /// Exactly the environment the program gets.
    pub env: &'a [(OsString, OsString)],
    /// The working directory (opened by the host before the clone).
    pub cwd: &'a Path,
    /// A pipe for stdin; otherwise stdin is /dev/null.
    pub piped_stdin: bool,
    /// The confinement the child applies to itself before it execs.
    pub confine: Option<&'a Prepared>,
    /// The limits it applies first.
    pub limits: &'a ChildLimits,
    /// The scratch tmpfs it mounts next, in a mount namespace of its own.
    pub scratch: Option<&'a ScratchMount>,
    /// The worktree's overlay it mounts then, in the same namespace (and
    /// the working directory it enters in it, instead of `cwd`).
    pub overlay: Option<&'a overlay::Mount<'a>>,
    /// `PR_SET_PDEATHSIG(SIGKILL)`: killed when the spawning thread ends
    /// (an agent: see `engine::agent_process`).
    pub die_with_parent: bool,
    /// How it is cloned.
    pub mode: SpawnMode,
}

/// A step of the child program outside the limits and the confinement,
/// as the child reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(super) enum ProgramStep {
    /// `execve` itself (its errno is the start error, as std reports it).
    Exec = 0,
    WorkingDirectory = 64,
    Signals = 65,
    Stdio = 66,
    ProcessGroup = 67,
    DeathSignal = 68,
    /// The host exited before the death signal was set.
    ParentGone = 69,
}

impl ProgramStep {
    pub(super) fn from_code(code: u32) -> Option<ProgramStep> {
        Some(match code {
            0 => ProgramStep::Exec,
            64 => ProgramStep::WorkingDirectory,
            65 => ProgramStep::Signals,
            66 => ProgramStep::Stdio,
            67 => ProgramStep::ProcessGroup,
            68 => ProgramStep::DeathSignal,
            69 => ProgramStep::ParentGone,
            _ => return None,
        })
    }

    /// The error a start fails with at this step.
    pub(super) fn error(self, errno: i32) -> io::Error {
        let os = io::Error::from_raw_os_error(errno);
        let what = match self {
            ProgramStep::Exec => return os,
            ProgramStep::WorkingDirectory => "cannot enter the working directory",
            ProgramStep::Signals => "cannot reset the signal mask",
            ProgramStep::Stdio => "cannot put the standard streams in place",
            ProgramStep::ProcessGroup => "cannot make a process group",
            ProgramStep::DeathSignal => "cannot set the parent-death signal",
            ProgramStep::ParentGone => "the host exited while starting the process",
        };
        io::Error::new(os.kind(), format!("{what}: {os}"))
    }
}

/// What a child that failed writes on its report pipe: the step's code
/// and the errno, in native byte order.
pub(super) const REPORT_LEN: usize = 8;

/// Raw descriptors the child puts in place (the host keeps them open
/// until the child has exec'd).
#[derive(Debug, Clone, Copy)]
pub(super) struct ChildFds {
    pub stdin: RawFd,
    pub stdout: RawFd,
    pub stderr: RawFd,
    pub report: RawFd,
}

/// Everything the child uses, built by the host before the clone (see the
/// module doc): pointers into buffers this plan owns.
pub(super) struct Plan<'a> {
    program: CString,
    _argv: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    _envp: Vec<CString>,
    envp: Vec<*const libc::c_char>,
    /// The working directory, opened (`O_PATH`) by the host.
    cwd: OwnedFd,
    fds: ChildFds,
    limits: ChildLimits,
    scratch: Option<&'a ScratchMount>,
    overlay: Option<&'a overlay::Mount<'a>>,
    confine: Option<&'a Prepared>,
    /// The host's pid, for the death signal's check.
    die_with: Option<i32>,
    /// Test builds only: the child allocates once (to prove the
    /// allocation guard can fail).
    #[cfg(test)]
    pub(super) plant_allocation: bool,
}

fn cstring(bytes: &[u8], what: &str) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} contains a NUL byte"),
        )
    })
}

impl<'a> Plan<'a> {
    /// Builds the plan of `exec` with the child's ends of its pipes.
    pub(super) fn new(exec: &Exec<'a>, fds: ChildFds) -> io::Result<Plan<'a>> {
        let program = cstring(exec.program.as_os_str().as_bytes(), "the program path")?;
        let mut argv_owned = vec![program.clone()];
        for a in exec.args {
            argv_owned.push(cstring(a.as_bytes(), "an argument")?);
        }
        let mut envp_owned = Vec::with_capacity(exec.env.len());
        for (k, v) in exec.env {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            envp_owned.push(cstring(&kv, "an environment variable")?);
        }
        let pointers = |owned: &[CString]| -> Vec<*const libc::c_char> {
            owned
                .iter()
                .map(|c| c.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect()
        };
        use rustix::fs::{Mode, OFlags};
        let cwd = rustix::fs::open(
            exec.cwd,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Plan {
            argv: pointers(&argv_owned),
            envp: pointers(&envp_owned),
            program,
            _argv: argv_owned,
            _envp: envp_owned,
            cwd,
            fds,
            limits: *exec.limits,
            scratch: exec.scratch,
            overlay: exec.overlay,
            confine: exec.confine,
            die_with: exec
                .die_with_parent
                .then(|| rustix::process::getpid().as_raw_nonzero().get()),
            #[cfg(test)]
            plant_allocation: false,
        })
    }
}

/// Reads this thread's errno.
fn errno() -> i32 {
    // SAFETY: reading this thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Writes the failed step and its errno on the report pipe and exits.
fn report_failure(report: RawFd, step: u32, errno: i32) -> ! {
    let mut bytes = [0u8; REPORT_LEN];
    bytes[..4].copy_from_slice(&step.to_ne_bytes());
    bytes[4..].copy_from_slice(&errno.to_ne_bytes());
    // SAFETY: a write from a buffer on the stack, then _exit: the child
    // never returns into the host's code.
    unsafe {
        libc::write(report, bytes.as_ptr().cast(), bytes.len());
        libc::_exit(127)
    }
}

/// Runs the plan in the child: the limits, the working directory, the
/// scratch tmpfs, the confinement, the death signal, the signal state,
/// the standard streams, the process group, then `execve`. Never returns:
/// it execs, or reports the failed step and `_exit`s.
///
/// # Safety
/// Only in the child of a `clone3` (or fork) of the host, alone in its
/// thread group and sharing no file-system state with the host, with
/// `plan` built by [`Plan::new`] before the clone and alive until the
/// child execs or exits. It keeps the rules of the module doc.
pub(super) unsafe fn run(plan: &Plan<'_>) -> ! {
    let report = plan.fds.report;
    let fail = |step: ProgramStep| -> ! { report_failure(report, step as u32, errno()) };
    #[cfg(test)]
    if plan.plant_allocation {
        std::mem::forget(std::hint::black_box(Box::new(0u64)));
    }
    // The limits first: joining a v1 cgroup is done with the host's
    // rights, and nothing below (nor the program) runs unbounded.
    // SAFETY: this is such a child, before its exec.
    if let Err((step, errno)) = unsafe { plan.limits.apply() } {
        report_failure(report, step as u32, errno)
    }
    // The working directory before the scratch's mount namespace, which
    // takes it along (see `ScratchMount::apply`).
    // SAFETY: fchdir on the descriptor the plan holds open.
    if unsafe { libc::fchdir(plan.cwd.as_raw_fd()) } != 0 {
        fail(ProgramStep::WorkingDirectory);
    }
    // The scratch tmpfs and the worktree's overlay next, in a mount
    // namespace of the child's own: a mount needs the host's rights (or a
    // user namespace's), which the confinement gives up.
    let maps = match (plan.scratch, plan.overlay) {
        (Some(scratch), _) => Some(scratch.maps.as_ref()),
        (None, Some(overlay)) => Some(overlay.maps.as_ref()),
        (None, None) => None,
    };
    if let Some(maps) = maps {
        let step = match plan.scratch {
            Some(_) => LimitStep::Scratch,
            None => LimitStep::Overlay,
        };
        // SAFETY: this is such a child, alone and sharing no fs state.
        if let Err(errno) = unsafe { enter_mount_namespace(maps) } {
            report_failure(report, step as u32, errno)
        }
    }
    if let Some(mount) = plan.scratch {
        // SAFETY: this is such a child, in a namespace of its own.
        if let Err(errno) = unsafe { mount.apply(plan.confine) } {
            report_failure(report, LimitStep::Scratch as u32, errno)
        }
    }
    if let Some(mount) = plan.overlay {
        // SAFETY: this is such a child, in a namespace of its own.
        if let Err((step, errno)) = unsafe { mount.apply(plan.confine) } {
            report_failure(report, step as u32, errno)
        }
    }
    // Then the confinement, so that nothing below runs unconfined.
    if let Some(prepared) = plan.confine {
        // SAFETY: this child execs or exits next; nothing of the host's
        // runs after it.
        if let Err(e) = unsafe { prepared.apply() } {
            report_failure(report, e.step as u32, e.errno.raw_os_error())
        }
    }
    // A uid switch clears the death signal: set after the confinement.
    if let Some(host) = plan.die_with {
        // SAFETY: prctl with constant arguments.
        if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) } != 0 {
            fail(ProgramStep::DeathSignal);
        }
        // The host died before the prctl: nothing would kill the child.
        // SAFETY: getppid cannot fail.
        if unsafe { libc::getppid() } != host {
            report_failure(report, ProgramStep::ParentGone as u32, libc::ESRCH)
        }
    }
    // SAFETY: signal-state system calls on a zeroed set on the stack.
    unsafe {
        // The host ignores SIGPIPE (Rust's runtime does); the program must
        // get the default, as std gives it. Nothing is blocked in it.
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        if libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0 {
            fail(ProgramStep::Signals);
        }
        if libc::signal(libc::SIGPIPE, libc::SIG_DFL) == libc::SIG_ERR {
            fail(ProgramStep::Signals);
        }
    }
    let fds = plan.fds;
    for (fd, target) in [(fds.stdin, 0), (fds.stdout, 1), (fds.stderr, 2)] {
        // SAFETY: descriptor system calls on descriptors the host keeps
        // open until the exec.
        let ok = unsafe {
            if fd == target {
                // dup2 onto itself keeps close-on-exec: clear it.
                libc::fcntl(fd, libc::F_SETFD, 0) == 0
            } else {
                libc::dup2(fd, target) >= 0
            }
        };
        if !ok {
            fail(ProgramStep::Stdio);
        }
    }
    // SAFETY: setpgid on the calling process.
    if unsafe { libc::setpgid(0, 0) } != 0 {
        fail(ProgramStep::ProcessGroup);
    }
    // SAFETY: NUL-terminated strings and NULL-terminated arrays the plan
    // owns.
    unsafe {
        libc::execve(
            plan.program.as_ptr(),
            plan.argv.as_ptr(),
            plan.envp.as_ptr(),
        )
    };
    fail(ProgramStep::Exec)
}

/// `/proc/self/...` files the child writes when it maps its ids.
const SETGROUPS: &std::ffi::CStr = c"/proc/self/setgroups";
const UID_MAP: &std::ffi::CStr = c"/proc/self/uid_map";
const GID_MAP: &std::ffi::CStr = c"/proc/self/gid_map";

/// Enters a mount namespace of the calling process's own (and first a
/// user namespace mapping `maps`, when given), every mount in it private
/// so that nothing mounted below propagates to the host's. A step of
/// [`run`]. Returns the errno of the failed call.
///
/// The caller's working directory must be set before (the kernel moves
/// it into the new namespace; a directory entered after, by a descriptor
/// the host opened, would lie outside it, and `getcwd` would fail in the
/// gate).
///
/// # Safety
/// Only in a freshly cloned child before its exec, which is alone in its
/// thread group and shares no file-system state (`CLONE_FS`) with the
/// host: the namespaces it enters are its own.
pub(super) unsafe fn enter_mount_namespace(maps: Option<&IdMaps>) -> Result<(), i32> {
    let flags = match maps {
        Some(_) => libc::CLONE_NEWUSER | libc::CLONE_NEWNS,
        None => libc::CLONE_NEWNS,
    };
    // SAFETY: unshare with constant flags.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(errno());
    }
    if let Some(maps) = maps {
        for (file, text) in [
            (SETGROUPS, c"deny"),
            (UID_MAP, maps.uid.as_c_str()),
            (GID_MAP, maps.gid.as_c_str()),
        ] {
            // SAFETY: NUL-terminated strings prepared before the clone.
            unsafe { write_file(file, text) }?;
        }
    }
    // SAFETY: mount with NUL-terminated strings or NULL where the call
    // takes none: every mount of the new namespace private.
    if unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    } != 0
    {
        return Err(errno());
    }
    Ok(())
}

impl ScratchMount {
    /// Mounts the tmpfs, in the mount namespace the child entered
    /// ([`enter_mount_namespace`]), and grants the gate's confinement (when
    /// it has one) writes beneath it: Landlock ignores the rule the host
    /// put on the directory the tmpfs hides. A step of [`run`]. Returns
    /// the errno of the failed call.
    ///
    /// # Safety
    /// As [`enter_mount_namespace`], once it has been entered.
    pub(super) unsafe fn apply(
        &self,
        confine: Option<&crate::sandbox::confine::Prepared>,
    ) -> Result<(), i32> {
        // SAFETY: mount with NUL-terminated strings: the tmpfs over the
        // gate's scratch directory.
        if unsafe {
            libc::mount(
                c"gatehost-scratch".as_ptr(),
                self.target.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                self.options.as_ptr().cast(),
            )
        } != 0
        {
            return Err(errno());
        }
        if let Some(prepared) = confine {
            // SAFETY: open with a NUL-terminated path.
            let dir = unsafe {
                libc::open(
                    self.target.as_ptr(),
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                )
            };
            if dir < 0 {
                return Err(errno());
            }
            // SAFETY: the open descriptor above; this child applies the
            // confinement next.
            let granted = unsafe { prepared.grant_write_beneath(dir) };
            // SAFETY: closing the descriptor opened above.
            unsafe { libc::close(dir) };
            granted?;
        }
        Ok(())
    }
}

/// Writes `text` to `file`: open, write, close (raw system calls).
///
/// # Safety
/// Both are NUL-terminated strings.
unsafe fn write_file(file: &std::ffi::CStr, text: &std::ffi::CStr) -> Result<(), i32> {
    // SAFETY: open with a NUL-terminated path.
    let fd = unsafe { libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(errno());
    }
    let bytes = text.to_bytes();
    // SAFETY: a write from a live buffer of that length to the open fd.
    let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    let e = errno();
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::close(fd) };
    if n != bytes.len() as isize {
        return Err(if n < 0 { e } else { libc::EIO });
    }
    Ok(())
}

#[cfg(test)]
#[path = "program_tests.rs"]
mod tests;
