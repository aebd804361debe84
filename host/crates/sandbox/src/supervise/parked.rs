//! A gate's start made ahead of need, for hosts that bound gates by
//! cgroup v1 hierarchies ([`super::v1`]: memory and pids on a hybrid mount).
//!
//! Joining a v1 cgroup is a migration (a write to its `cgroup.procs`),
//! which takes the write side of the kernel's global
//! `cgroup_threadgroup_rwsem`. When no migration happened on the machine
//! in the last RCU grace period, that waits for one: 10 to 20 ms measured
//! on this project's machines, on every gate that starts after a pause.
//! v1 has no `CLONE_INTO_CGROUP`. So the supervisor parks the next gate's
//! child ahead: cloned (`CLONE_VM | CLONE_FILES`, on a stack of its own,
//! born in its v2 cgroup by `CLONE_INTO_CGROUP` where there is one), it
//! joins that gate's v1 cgroups, and waits. When the gate comes, the host
//! builds the child program's plan ([`super::program::Plan`]) as for any
//! start, hands it over and wakes the child, which takes a private copy of
//! the descriptor table (`unshare(CLONE_FILES)`: from then on it is the
//! child a `vfork`-like start makes, with a copy of the host's descriptors
//! as of now) and runs the plan: the rest of the limits, the scratch, the
//! confinement, `execve`. No process moves at the gate's start.
//!
//! The parked child keeps the child program's rules from its first
//! instruction (see `program`): no allocation, no lock, no panic, raw
//! system calls only, and it writes no memory of the host's but its own
//! stack and the [`Cell`] made for it. It waits in `poll` on an eventfd
//! (its wake-up) and a pidfd of the host: it exits when the host does, so
//! that it never keeps the host's memory and descriptors after it.
//!
//! This module must never wake a child whose cgroups held another gate's
//! process (a child is parked only in cgroups just taken from the pools,
//! which take back only emptied ones), and never let a parked child
//! outlive its [`Parked`]: dropping one unused kills and reaps its child.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::limits::{ChildLimits, LimitStep};
use super::program::{self, Plan};
use super::spawn::{ChildStack, CloneError};

/// The child is joining its v1 cgroups.
const JOINING: u32 = 0;
/// It has joined and waits to be woken.
const PARKED: u32 = 1;
/// It could not join (or unshare): `step` and `errno` say why; it exits.
const FAILED: u32 = 2;
/// The host has put the plan in place and woken it.
const WOKEN: u32 = 3;
/// It has its own descriptor table and runs the plan.
const RUNNING: u32 = 4;

/// `unshare(CLONE_FILES)` failed in the woken child (a step code of the
/// child's report, beside `program`'s and `limits`').
const STEP_UNSHARE: u32 = 70;

/// What the host and its parked child share: written by the host before
/// the clone and when it wakes the child, by the child only in its
/// atomics.
#[derive(Debug)]
struct Cell {
    state: AtomicU32,
    step: AtomicU32,
    errno: AtomicI32,
    /// The plan, set before `WOKEN` (a `*const Plan<'_>`).
    plan: AtomicPtr<u8>,
    /// The v1 joins (descriptors the host keeps open until `PARKED`).
    joins: ChildLimits,
    wake: RawFd,
    host: RawFd,
}

/// A child parked in a gate's cgroups, waiting for its plan. Dropped
/// unused, it kills and reaps the child.
#[derive(Debug)]
pub(super) struct Parked {
    pid: i32,
    /// `None` once handed to the started child.
    pidfd: Option<OwnedFd>,
    /// What the child reads until it runs the plan, and its stack (until
    /// it execs): both kept until this is dropped.
    cell: Box<Cell>,
    _stack: ChildStack,
    wake: OwnedFd,
    /// A pidfd of the host, which the child polls.
    _host: OwnedFd,
    /// The `cgroup.procs` descriptors, open until the child has joined.
    join_fds: Vec<OwnedFd>,
}

/// Clones a child into `cgroup` (a v2 cgroup's directory, if any) that
/// joins the v1 cgroups of `joins` (whose descriptors `join_fds` holds
/// open) and waits to be woken ([`Parked::wake`]). Returns at once: the
/// join goes on in the child.
pub(super) fn park(
    cgroup: Option<BorrowedFd<'_>>,
    joins: &ChildLimits,
    join_fds: Vec<OwnedFd>,
) -> io::Result<Parked> {
    // SAFETY: eventfd with constant flags; a new descriptor or -1.
    let wake = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if wake < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the new descriptor just made, owned from here.
    let wake = unsafe { OwnedFd::from_raw_fd(wake) };
    let host = rustix::process::pidfd_open(
        rustix::process::getpid(),
        rustix::process::PidfdFlags::empty(),
    )?;
    let cell = Box::new(Cell {
        state: AtomicU32::new(JOINING),
        step: AtomicU32::new(0),
        errno: AtomicI32::new(0),
        plan: AtomicPtr::new(std::ptr::null_mut()),
        joins: joins.only_joins(),
        wake: wake.as_raw_fd(),
        host: host.as_raw_fd(),
    });
    let stack = ChildStack::new()?;
    let mut pidfd: RawFd = -1;
    // SAFETY: clone_args is plain data; all zeroes is its documented
    // default.
    let mut args: libc::clone_args = unsafe { std::mem::zeroed() };
    args.flags = (libc::CLONE_VM | libc::CLONE_FILES | libc::CLONE_PIDFD) as u64
        | super::spawn::CLONE_CLEAR_SIGHAND;
    args.pidfd = &mut pidfd as *mut RawFd as u64;
    args.exit_signal = libc::SIGCHLD as u64;
    if let Some(cgroup) = cgroup {
        args.flags |= super::spawn::CLONE_INTO_CGROUP;
        args.cgroup = cgroup.as_raw_fd() as u64;
    }
    let entry: unsafe extern "C" fn(*const u8) -> ! = parked_entry;
    let arg: *const Cell = &*cell;
    // SAFETY: `parked_entry` keeps the child program's rules; the cell and
    // the stack live in the `Parked` returned, whose drop kills and reaps
    // the child before they go (or after the child has exec'd).
    let pid = unsafe { super::spawn::clone3_on_stack(&mut args, &stack, entry, arg.cast()) };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Parked {
        pid: pid as i32,
        // SAFETY: with CLONE_PIDFD a successful clone3 stored a new fd here.
        pidfd: Some(unsafe { OwnedFd::from_raw_fd(pidfd) }),
        cell,
        _stack: stack,
        wake,
        _host: host,
        join_fds,
    })
}

impl Parked {
    /// The parked child's pid.
    pub(super) fn pid(&self) -> i32 {
        self.pid
    }

    /// Waits (at most `bound`) until the child has joined its cgroups;
    /// errs if it could not (or ended, or is not done by then).
    pub(super) fn joined(&mut self, bound: Duration) -> io::Result<()> {
        let state = self.wait_past(JOINING, bound)?;
        if state != PARKED {
            return Err(self.failure());
        }
        self.join_fds.clear();
        Ok(())
    }

    /// Hands `plan` to the joined child ([`Self::joined`]) and wakes it;
    /// returns its pid and pidfd once it has its own descriptor table (the
    /// host's copies of the child's ends may close then). The child runs
    /// on this value's stack until it execs or exits: the caller keeps
    /// this (and `plan`) until then (its report pipe's end).
    pub(super) fn wake(&mut self, plan: &Plan<'_>) -> Result<(i32, OwnedFd), CloneError> {
        self.cell.plan.store(
            (plan as *const Plan<'_>).cast_mut().cast(),
            Ordering::Release,
        );
        if self
            .cell
            .state
            .compare_exchange(PARKED, WOKEN, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(CloneError::Failed(io::Error::other(
                "the parked child is not waiting (not joined, or failed)",
            )));
        }
        let one = 1u64.to_ne_bytes();
        rustix::io::write(&self.wake, &one).map_err(|e| CloneError::Failed(e.into()))?;
        match self.wait_past(WOKEN, Duration::from_secs(5)) {
            Ok(RUNNING) => {}
            Ok(_) => return Err(CloneError::Failed(self.failure())),
            Err(e) => return Err(CloneError::Failed(e)),
        }
        let pidfd = self
            .pidfd
            .take()
            .ok_or_else(|| CloneError::Failed(io::Error::other("no pidfd")))?;
        Ok((self.pid, pidfd))
    }

    /// Waits while the state is `from`; returns the state after.
    fn wait_past(&self, from: u32, bound: Duration) -> io::Result<u32> {
        let deadline = Instant::now() + bound;
        loop {
            let now = self.cell.state.load(Ordering::Acquire);
            if now != from {
                return Ok(now);
            }
            if self.ended() {
                return Err(io::Error::other("the parked child ended"));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the parked child did not answer in time",
                ));
            }
            futex_wait(&self.cell.state, from, left.min(Duration::from_millis(10)));
        }
    }

    /// Whether the child has ended (without reaping it).
    fn ended(&self) -> bool {
        let Some(pidfd) = &self.pidfd else {
            return true;
        };
        matches!(
            rustix::process::waitid(
                rustix::process::WaitId::PidFd(pidfd.as_fd()),
                rustix::process::WaitIdOptions::EXITED
                    | rustix::process::WaitIdOptions::NOHANG
                    | rustix::process::WaitIdOptions::NOWAIT,
            ),
            Ok(Some(_))
        )
    }

    /// What the child said when it failed.
    fn failure(&self) -> io::Error {
        let step = self.cell.step.load(Ordering::Acquire);
        let errno = self.cell.errno.load(Ordering::Acquire);
        match LimitStep::from_code(step) {
            Some(step) => io::Error::other(step.describe(errno)),
            None if step == STEP_UNSHARE => io::Error::other(format!(
                "cannot unshare the descriptor table: {}",
                io::Error::from_raw_os_error(errno)
            )),
            None => io::Error::other("the parked child failed"),
        }
    }
}

impl Drop for Parked {
    /// Unused (its pidfd still here): kills and reaps the child before its
    /// stack and cell go. Used: the child has exec'd or exited by now (the
    /// caller read its report to the end), and runs on neither.
    fn drop(&mut self) {
        if let Some(pidfd) = self.pidfd.take() {
            let _ = rustix::process::pidfd_send_signal(&pidfd, rustix::process::Signal::KILL);
            let _ = rustix::process::waitid(
                rustix::process::WaitId::PidFd(pidfd.as_fd()),
                rustix::process::WaitIdOptions::EXITED,
            );
        }
    }
}

/// Waits on the futex `word` while it holds `expected`, at most `bound`.
fn futex_wait(word: &AtomicU32, expected: u32, bound: Duration) {
    let ts = libc::timespec {
        tv_sec: bound.as_secs() as libc::time_t,
        tv_nsec: bound.subsec_nanos() as libc::c_long,
    };
    // SAFETY: FUTEX_WAIT on a live, aligned u32 with a relative timeout on
    // the stack; it returns at once if the word no longer holds
    // `expected`.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
        )
    };
}

/// Wakes every waiter on the futex `word` (the raw system call: the
/// parked child may make no other kind of call).
fn futex_wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a live, aligned u32.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX) };
}

/// The parked child's first Rust frame: joins, parks, and once woken runs
/// the plan. Never returns.
///
/// # Safety
/// Only in the child of [`park`], with `cell` a live [`Cell`] until the
/// child has taken its plan and left `WOKEN`.
unsafe extern "C" fn parked_entry(cell: *const u8) -> ! {
    // SAFETY: per the contract.
    let cell = unsafe { &*cell.cast::<Cell>() };
    let fail = |step: u32, errno: i32| -> ! {
        cell.step.store(step, Ordering::Relaxed);
        cell.errno.store(errno, Ordering::Relaxed);
        cell.state.store(FAILED, Ordering::Release);
        futex_wake(&cell.state);
        // SAFETY: _exit ends the child without returning into the host.
        unsafe { libc::_exit(127) }
    };
    // SAFETY: a freshly cloned child before its exec: the joins move it
    // (it is alone in its thread group: no CLONE_THREAD).
    if let Err((step, errno)) = unsafe { cell.joins.apply() } {
        fail(step as u32, errno)
    }
    cell.state.store(PARKED, Ordering::Release);
    futex_wake(&cell.state);
    loop {
        let mut fds = [
            libc::pollfd {
                fd: cell.wake,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: cell.host,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: poll on two pollfds on this stack.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            // SAFETY: reading this thread's errno.
            if unsafe { *libc::__errno_location() } == libc::EINTR {
                continue;
            }
            // SAFETY: as above.
            unsafe { libc::_exit(127) }
        }
        if fds[1].revents != 0 {
            // The host is gone: nobody will wake this child.
            // SAFETY: as above.
            unsafe { libc::_exit(0) }
        }
        if fds[0].revents != 0 {
            break;
        }
    }
    if cell.state.load(Ordering::Acquire) != WOKEN {
        // SAFETY: as above.
        unsafe { libc::_exit(127) }
    }
    let plan = cell.plan.load(Ordering::Acquire).cast_const();
    // SAFETY: unshare with a constant flag: a private copy of the
    // descriptor table as it is now (the plan's descriptors open in it).
    if unsafe { libc::unshare(libc::CLONE_FILES) } != 0 {
        // SAFETY: reading this thread's errno.
        fail(STEP_UNSHARE, unsafe { *libc::__errno_location() })
    }
    cell.state.store(RUNNING, Ordering::Release);
    futex_wake(&cell.state);
    // SAFETY: the plan the host built and keeps alive until this child has
    // exec'd or exited; the child is alone in its thread group and shares
    // no file-system state (no CLONE_FS) nor descriptor table any more.
    unsafe { program::run(&*plan.cast::<Plan<'_>>()) }
}
