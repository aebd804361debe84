//! A gate's run seen through an overlay on its worktree: what the gate
//! writes, removes or changes there goes to a layer of the run's own,
//! and the worktree itself is as the host left it when the run ends.
//!
//! Owns: [`WorkOverlay`] (one run's layers and what they cover, opened by
//! the host), the per-spawn data the child mounts it with ([`Mount`]),
//! and the child's step ([`Mount::apply`]): in the gate's mount namespace
//! (the scratch's, see `scratch`), an `overlay` mount over the worktree
//! whose lower layer is the worktree and whose upper layer is the run's,
//! the granted caches bound through it from the worktree (so that what a
//! gate builds there is kept, as without the overlay), the working
//! directory entered inside it (resolved beneath its root, never through
//! a link that leaves it), and the gate's confinement granted the overlay
//! (Landlock's rules on the worktree's own inodes do not reach through
//! an overlay). The host's worktree module then need not read the
//! worktree back after the run: it is as the sync left it.
//!
//! Where a child cannot mount it (no overlay file system, an
//! unprivileged host whose kernel refuses it in a user namespace, a spawn
//! that cannot take the `clone3` way), the spawn is retried without and
//! the run is marked [`WorkOverlay::bypassed`]: its gates wrote the
//! worktree itself, which the host then reads whole, as before.
//!
//! Must never: let a process of the run reach the worktree's own inodes
//! with the overlay in place (the descriptors the child mounts with close
//! at its exec), follow a link out of the overlay for the working
//! directory or a cache's mountpoint, or claim a run was overlaid when
//! one of its processes was not.

// Only Linux's `clone3` child mounts it: elsewhere only the host's side
// is used (and every run is bypassed).
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

#[cfg(target_os = "linux")]
use super::limits::LimitStep;
#[cfg(target_os = "linux")]
use super::scratch::{IdMaps, Way};
#[cfg(target_os = "linux")]
use std::ffi::CStr;
use std::ffi::CString;
use std::io;
#[cfg(target_os = "linux")]
use std::os::fd::{OwnedFd, RawFd};
#[cfg(target_os = "linux")]
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// The most granted caches bound through one overlay (the child keeps a
/// descriptor of each on its stack).
pub(super) const MAX_CACHES: usize = 16;

/// One run's overlay over a worktree: its layers and the granted caches
/// bound through it, checked by the host before the run's first spawn.
///
/// The child names every layer by its path: a mount made from a
/// descriptor the host opened would lie in the host's mount namespace,
/// which the kernel refuses as a layer, a mountpoint or a bind's source.
/// So the paths must be the host's own (the worktree root's, which no gate
/// writes), and the overlay's option syntax must not need escaping in
/// them (no `,`, `:` or `\\`); a path that does is refused here.
#[derive(Debug)]
pub struct WorkOverlay {
    /// The worktree: the lower layer, and where the child mounts.
    root: CString,
    /// The overlay's options.
    options: CString,
    /// Each granted cache that is a directory of the worktree, reached
    /// without a link: its path relative to the worktree.
    caches: Vec<CString>,
    /// A process of the run saw the worktree itself.
    bypassed: AtomicBool,
}

impl WorkOverlay {
    /// The overlay of `worktree` (a directory only the host writes between
    /// runs) with the empty directories `upper` and `work` (on one file
    /// system, never inside the worktree), binding through each of
    /// `caches` (worktree-relative, at most [`MAX_CACHES`]) that is a
    /// directory there, reached without a link; one that is not is left
    /// to the overlay (what a gate writes there is not kept). Linux only:
    /// elsewhere `Unsupported`.
    #[cfg(not(target_os = "linux"))]
    pub fn new(_: &Path, _: &Path, _: &Path, _: &[&Path]) -> io::Result<Self> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "overlays are Linux's",
        ))
    }

    /// The overlay of `worktree` (see the other platforms' `new`).
    #[cfg(target_os = "linux")]
    pub fn new(worktree: &Path, upper: &Path, work: &Path, caches: &[&Path]) -> io::Result<Self> {
        let mut options = b"lowerdir=".to_vec();
        for (i, path) in [worktree, upper, work].into_iter().enumerate() {
            let bytes = path.as_os_str().as_bytes();
            if !path.is_absolute() || bytes.iter().any(|b| b",:\\".contains(b)) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{} cannot name an overlay's layer (relative, or holds ',', ':' or '\\')",
                        path.display()
                    ),
                ));
            }
            options.extend_from_slice(match i {
                0 => b"",
                1 => b",upperdir=",
                _ => b",workdir=",
            });
            options.extend_from_slice(bytes);
        }
        let lower = rustix::fs::open(
            worktree,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?;
        let mut kept = Vec::new();
        for rel in caches {
            match beneath(&lower, rel) {
                Ok(_) if kept.len() == MAX_CACHES => {
                    tracing::warn!(cache = %rel.display(), "more granted caches than an overlay binds through ({MAX_CACHES}): what a gate writes there is not kept");
                }
                Ok(_) => kept.push(cstring(rel.as_os_str().as_bytes())?),
                Err(e) => {
                    tracing::debug!(cache = %rel.display(), error = %e, "a granted cache is not bound through the gate's overlay");
                }
            }
        }
        Ok(WorkOverlay {
            root: cstring(worktree.as_os_str().as_bytes())?,
            options: cstring(&options)?,
            caches: kept,
            bypassed: AtomicBool::new(false),
        })
    }

    /// Whether a process of the run saw the worktree itself (its spawn
    /// could not mount the overlay): the worktree must then be read whole.
    pub fn bypassed(&self) -> bool {
        self.bypassed.load(Ordering::SeqCst)
    }

    /// Marks the run as having reached the worktree itself.
    pub fn bypass(&self) {
        self.bypassed.store(true, Ordering::SeqCst);
    }
}

/// A directory `rel` beneath `dir`, opened `O_PATH` without following any
/// link.
#[cfg(target_os = "linux")]
fn beneath(dir: &OwnedFd, rel: &Path) -> io::Result<OwnedFd> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    Ok(rustix::fs::openat2(
        dir,
        rel,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )?)
}

#[cfg(target_os = "linux")]
fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path contains a NUL byte"))
}

/// What one spawn's child mounts: the run's overlay, the gate's working
/// directory in it, and the id maps of a user namespace when the child
/// makes one (no scratch made it first).
#[cfg(target_os = "linux")]
#[derive(Debug)]
pub(super) struct Mount<'a> {
    pub(super) overlay: &'a WorkOverlay,
    /// The working directory, relative to the worktree ("." for itself).
    cwd: CString,
    pub(super) maps: Option<IdMaps>,
}

#[cfg(target_os = "linux")]
impl<'a> Mount<'a> {
    pub(super) fn new(overlay: &'a WorkOverlay, cwd: &Path, way: Way) -> Option<Self> {
        let rel = if cwd.as_os_str().is_empty() {
            Path::new(".")
        } else {
            cwd
        };
        Some(Mount {
            overlay,
            cwd: cstring(rel.as_os_str().as_bytes()).ok()?,
            maps: IdMaps::for_way(way)?,
        })
    }

    /// Mounts the overlay over the worktree, binds the caches through it,
    /// enters the working directory inside it and grants the confinement
    /// (when the gate has one) everything beneath it. A step of the child
    /// program, in the mount namespace the child entered (private).
    /// Returns the failed step (the mount, or a place inside it) and its
    /// errno.
    ///
    /// # Safety
    /// Only in a freshly cloned child before its exec, in a mount
    /// namespace of its own (see `supervise::program`'s rules).
    pub(super) unsafe fn apply(
        &self,
        confine: Option<&crate::sandbox::confine::Prepared>,
    ) -> Result<(), (LimitStep, i32)> {
        // The caches as the worktree holds them, opened in this namespace
        // before the overlay covers them (closed on every way out).
        let mut caches = [-1 as RawFd; MAX_CACHES];
        // SAFETY: descriptors this child opens and closes; NUL-terminated
        // strings the overlay owns.
        let result = unsafe { self.mount(&mut caches, confine) };
        for fd in caches.into_iter().filter(|fd| *fd >= 0) {
            // SAFETY: closing a descriptor opened here.
            unsafe { libc::close(fd) };
        }
        result
    }

    /// [`Mount::apply`], its opened caches kept in `caches` for the
    /// caller to close.
    ///
    /// # Safety
    /// As [`Mount::apply`].
    unsafe fn mount(
        &self,
        caches: &mut [RawFd; MAX_CACHES],
        confine: Option<&crate::sandbox::confine::Prepared>,
    ) -> Result<(), (LimitStep, i32)> {
        let o = self.overlay;
        let path = |e| (LimitStep::OverlayPath, e);
        if !o.caches.is_empty() {
            // SAFETY: a NUL-terminated path; closed below.
            let lower = unsafe { open_dir(o.root.as_ptr()) }.map_err(path)?;
            for (slot, rel) in caches.iter_mut().zip(&o.caches) {
                // SAFETY: `lower` is open; a NUL-terminated path.
                match unsafe { open_beneath(lower, rel, libc::RESOLVE_NO_SYMLINKS) } {
                    Ok(fd) => *slot = fd,
                    Err(e) => {
                        // SAFETY: closing the descriptor opened above.
                        unsafe { libc::close(lower) };
                        return Err(path(e));
                    }
                }
            }
            // SAFETY: closing the descriptor opened above.
            unsafe { libc::close(lower) };
        }
        // SAFETY: mount with NUL-terminated strings the overlay owns.
        if unsafe {
            libc::mount(
                c"gatehost-overlay".as_ptr(),
                o.root.as_ptr(),
                c"overlay".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                o.options.as_ptr().cast(),
            )
        } != 0
        {
            return Err((LimitStep::Overlay, errno()));
        }
        // SAFETY: a NUL-terminated path: the overlay's root now.
        let root = unsafe { open_dir(o.root.as_ptr()) }.map_err(path)?;
        // SAFETY: `root` and `caches` are open; closed by the callers.
        let result = unsafe { self.inside(root, caches, confine) }.map_err(path);
        // SAFETY: closing the descriptor opened above.
        unsafe { libc::close(root) };
        result
    }

    /// The caches bound, the working directory entered and the grant
    /// given, in the overlay whose root is `root`.
    ///
    /// # Safety
    /// As [`Mount::apply`]; `root` and the non-negative `caches` are open.
    unsafe fn inside(
        &self,
        root: RawFd,
        caches: &[RawFd; MAX_CACHES],
        confine: Option<&crate::sandbox::confine::Prepared>,
    ) -> Result<(), i32> {
        for (cache, rel) in caches.iter().zip(&self.overlay.caches) {
            // SAFETY: a NUL-terminated path; the descriptor is closed below.
            let at = unsafe { open_beneath(root, rel, libc::RESOLVE_NO_SYMLINKS) }?;
            let mut source = [0u8; PROC_FD_LEN];
            let mut target = [0u8; PROC_FD_LEN];
            // SAFETY: two descriptors open in this child, of this
            // namespace; strings on its stack.
            let bound = unsafe {
                libc::mount(
                    proc_fd_path(*cache, &mut source),
                    proc_fd_path(at, &mut target),
                    std::ptr::null(),
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                )
            };
            let e = errno();
            // SAFETY: closing the descriptor opened above.
            unsafe { libc::close(at) };
            if bound != 0 {
                return Err(e);
            }
        }
        // SAFETY: a NUL-terminated path; the descriptor is closed below.
        let cwd = unsafe { open_beneath(root, &self.cwd, 0) }?;
        // SAFETY: fchdir on the descriptor just opened.
        let entered = unsafe { libc::fchdir(cwd) };
        let e = errno();
        // SAFETY: closing the descriptor opened above.
        unsafe { libc::close(cwd) };
        if entered != 0 {
            return Err(e);
        }
        if let Some(prepared) = confine {
            // SAFETY: `root` is open; this child applies the confinement
            // next.
            unsafe { prepared.grant_write_beneath(root) }?;
        }
        Ok(())
    }
}

/// `open(path, O_PATH | O_DIRECTORY)`: the descriptor, or the errno.
///
/// # Safety
/// `path` is NUL-terminated.
#[cfg(target_os = "linux")]
unsafe fn open_dir(path: *const libc::c_char) -> Result<RawFd, i32> {
    // SAFETY: open with a NUL-terminated path.
    let fd = unsafe { libc::open(path, libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(errno());
    }
    Ok(fd)
}

/// `openat2(dir, rel, O_PATH | O_DIRECTORY, RESOLVE_BENEATH | extra)`:
/// the descriptor, or the errno.
///
/// # Safety
/// `dir` is an open descriptor; `rel` NUL-terminated.
#[cfg(target_os = "linux")]
unsafe fn open_beneath(dir: RawFd, rel: &CStr, extra: u64) -> Result<RawFd, i32> {
    // SAFETY: a zeroed plain struct of the kernel's layout.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS | extra;
    // SAFETY: openat2 with a live struct of its size and a NUL-terminated
    // path.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir,
            rel.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(errno());
    }
    Ok(fd as RawFd)
}

#[cfg(target_os = "linux")]
/// Room for `/proc/self/fd/` and any descriptor number, and the NUL.
const PROC_FD_LEN: usize = 32;

#[cfg(target_os = "linux")]
/// Writes `/proc/self/fd/FD` into `buf` (no allocation) and points at it.
fn proc_fd_path(fd: RawFd, buf: &mut [u8; PROC_FD_LEN]) -> *const libc::c_char {
    const PREFIX: &[u8] = b"/proc/self/fd/";
    buf[..PREFIX.len()].copy_from_slice(PREFIX);
    let mut digits = [0u8; 12];
    let mut n = fd.unsigned_abs();
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        buf[PREFIX.len() + i] = digits[len - 1 - i];
    }
    buf[PREFIX.len() + len] = 0;
    buf.as_ptr().cast()
}

#[cfg(target_os = "linux")]
fn errno() -> i32 {
    // SAFETY: reading this thread's errno.
    unsafe { *libc::__errno_location() }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_descriptors_proc_path_is_written_without_allocating() {
        for fd in [0, 7, 10, 123, 1_000_000, i32::MAX] {
            let mut buf = [0u8; PROC_FD_LEN];
            let p = proc_fd_path(fd, &mut buf);
            // SAFETY: the buffer is NUL-terminated by proc_fd_path.
            let s = unsafe { CStr::from_ptr(p) };
            assert_eq!(s.to_str().unwrap(), format!("/proc/self/fd/{fd}"));
        }
    }
}
