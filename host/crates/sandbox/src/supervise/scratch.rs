//! The bound on what one gate writes to its private scratch directory (its
//! `TMPDIR`): `[limits] gate_scratch_bytes`.
//!
//! The gate's child, between clone and exec and before it confines itself,
//! enters a mount namespace of its own and mounts a `tmpfs` of that size
//! over its scratch directory. Everything the gate's tree writes there is
//! held by that tmpfs: a write past the size fails with `ENOSPC`, the
//! pages are charged to the gate's memory cgroup (so `gate_memory_bytes`
//! bounds them too), nothing reaches the disk that holds the scratch root,
//! and the tmpfs is gone with the last process of the namespace (no
//! unmount to forget, none left after a SIGKILL of the host). The host's
//! mount namespace never sees it.
//!
//! How the namespace is made depends on the host's rights:
//! - with `CAP_SYS_ADMIN` (a root host, every host with `[sandbox] user`):
//!   `unshare(CLONE_NEWNS)`;
//! - without: `unshare(CLONE_NEWUSER | CLONE_NEWNS)`, mapping only the
//!   host's own uid and gid (as an unprivileged process may), so that the
//!   child may mount in its own namespace; files of other users then show
//!   as the overflow id (`nobody`) to the gate, and their access is
//!   unchanged. (A uid 0 without `CAP_SYS_ADMIN` may map itself only if it
//!   has `CAP_SETFCAP`: the kernel's rule; without, the mount falls back
//!   as below.)
//!
//! In both, every mount is made private first, so the tmpfs never
//! propagates back to the host. Where neither works (user namespaces
//! disabled, a seccomp filter, a spawn that cannot take this way), the
//! spawn is retried without the mount and the bound is not enforced,
//! which the host says once (as it does for a pids bound it cannot
//! apply). This module must never let the child run the program after a
//! failed step: a failure is reported before exec and nothing ran.

use std::ffi::CString;
use std::path::Path;

/// `/proc/self/...` files the child writes when it maps its ids.
const SETGROUPS: &std::ffi::CStr = c"/proc/self/setgroups";
const UID_MAP: &std::ffi::CStr = c"/proc/self/uid_map";
const GID_MAP: &std::ffi::CStr = c"/proc/self/gid_map";

/// One gate's scratch tmpfs, prepared by the host before the clone: plain
/// data and C strings the child passes to system calls.
#[derive(Debug)]
pub(super) struct ScratchMount {
    target: CString,
    options: CString,
    /// The id maps to write, when the child makes a user namespace first.
    maps: Option<IdMaps>,
}

#[derive(Debug)]
struct IdMaps {
    uid: CString,
    gid: CString,
}

/// How the child may get a mount namespace on this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Way {
    /// The host has `CAP_SYS_ADMIN`: a mount namespace alone.
    MountNamespace,
    /// It has not: a user namespace that maps its own ids, then a mount
    /// namespace owned by it.
    UserNamespace,
}

impl Way {
    /// The way for this process's rights.
    pub(super) fn for_this_host() -> Way {
        let admin = rustix::thread::capabilities(None)
            .map(|c| {
                c.effective
                    .contains(rustix::thread::CapabilitySet::SYS_ADMIN)
            })
            .unwrap_or(false);
        if admin {
            Way::MountNamespace
        } else {
            Way::UserNamespace
        }
    }
}

impl ScratchMount {
    /// A tmpfs of `bytes` over `dir`, owned by `owner` (the gate's uid and
    /// gid where it runs as another user; else the host's).
    pub(super) fn new(dir: &Path, bytes: u64, owner: Option<(u32, u32)>, way: Way) -> Option<Self> {
        let host = (
            rustix::process::geteuid().as_raw(),
            rustix::process::getegid().as_raw(),
        );
        Self::for_ids(dir, bytes, owner, way, host)
    }

    /// [`Self::new`] for a child that runs with the effective ids `host`
    /// (the ids a user namespace maps).
    pub(super) fn for_ids(
        dir: &Path,
        bytes: u64,
        owner: Option<(u32, u32)>,
        way: Way,
        host: (u32, u32),
    ) -> Option<Self> {
        use std::os::unix::ffi::OsStrExt;
        let target = CString::new(dir.as_os_str().as_bytes()).ok()?;
        // mode=0700: the gate's own, as the directory it covers; owned by
        // the gate's user where it runs as one (else by whoever mounts it:
        // the host, whose ids are the only ones a user namespace maps).
        let owned = match owner {
            Some((uid, gid)) => format!(",uid={uid},gid={gid}"),
            None => String::new(),
        };
        let options = CString::new(format!("size={bytes},mode=0700{owned}")).ok()?;
        let maps = match way {
            Way::MountNamespace => None,
            Way::UserNamespace => {
                let (host_uid, host_gid) = host;
                Some(IdMaps {
                    uid: CString::new(format!("{host_uid} {host_uid} 1")).ok()?,
                    gid: CString::new(format!("{host_gid} {host_gid} 1")).ok()?,
                })
            }
        };
        Some(ScratchMount {
            target,
            options,
            maps,
        })
    }

    /// Enters a mount namespace of the calling process's own and mounts the
    /// tmpfs, and grants the gate's confinement (when it has one) writes
    /// beneath it: Landlock ignores the rule the host put on the directory
    /// the tmpfs hides. Raw system calls only (async-signal-safe; no
    /// allocation, no lock). Returns the errno of the failed call.
    ///
    /// The caller's working directory must be set before (the kernel moves
    /// it into the new namespace; a directory entered after, by a
    /// descriptor the host opened, would lie outside it, and `getcwd` would
    /// fail in the gate).
    ///
    /// # Safety
    /// Only in a freshly cloned child before its exec, which is alone in
    /// its thread group and shares no file-system state (`CLONE_FS`) with
    /// the host: the namespaces it enters are its own.
    pub(super) unsafe fn apply(
        &self,
        confine: Option<&crate::sandbox::confine::Prepared>,
    ) -> Result<(), i32> {
        let errno = || {
            // SAFETY: reading this thread's errno.
            unsafe { *libc::__errno_location() }
        };
        let flags = match self.maps {
            Some(_) => libc::CLONE_NEWUSER | libc::CLONE_NEWNS,
            None => libc::CLONE_NEWNS,
        };
        // SAFETY: unshare with constant flags.
        if unsafe { libc::unshare(flags) } != 0 {
            return Err(errno());
        }
        if let Some(maps) = &self.maps {
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
        // takes none: every mount of the new namespace private, so nothing
        // mounted below propagates to the host's.
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
        // SAFETY: as above; the tmpfs over the gate's scratch directory.
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
    let errno = || {
        // SAFETY: reading this thread's errno.
        unsafe { *libc::__errno_location() }
    };
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

/// What a person reads when a gate's output says a write failed for
/// space and its scratch was bounded: the bound, named.
pub fn hint(bytes: u64) -> String {
    format!(
        "its scratch directory (TMPDIR) holds at most [limits] gate_scratch_bytes = {bytes} bytes"
    )
}
