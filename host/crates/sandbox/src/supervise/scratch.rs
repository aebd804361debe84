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
//! propagates back to the host. The child's side (`ScratchMount::apply`)
//! is a step of the child program ([`super::program`], whose module doc
//! states what may run there); this module prepares its data. Where neither works (user namespaces
//! disabled, a seccomp filter, a spawn that cannot take this way), the
//! spawn is retried without the mount and the bound is not enforced,
//! which the host says once (as it does for a pids bound it cannot
//! apply). This module must never let the child run the program after a
//! failed step: a failure is reported before exec and nothing ran.

// Only Linux's `clone3` child mounts the tmpfs: elsewhere nothing here is
// used (and Linux's build, where all of it is, finds its dead code).
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

use std::ffi::CString;
use std::path::Path;

/// One gate's scratch tmpfs, prepared by the host before the clone: plain
/// data and C strings the child passes to system calls.
#[derive(Debug)]
pub(super) struct ScratchMount {
    pub(super) target: CString,
    pub(super) options: CString,
    /// The id maps to write, when the child makes a user namespace first.
    pub(super) maps: Option<IdMaps>,
}

#[derive(Debug)]
pub(super) struct IdMaps {
    pub(super) uid: CString,
    pub(super) gid: CString,
}

impl IdMaps {
    /// The maps a child writes for `way` on this host (`Some(None)`: it
    /// makes no user namespace).
    pub(super) fn for_way(way: Way) -> Option<Option<IdMaps>> {
        let host = (
            rustix::process::geteuid().as_raw(),
            rustix::process::getegid().as_raw(),
        );
        IdMaps::of_ids(way, host)
    }

    /// [`Self::for_way`] for a child that runs with the effective ids
    /// `host`.
    fn of_ids(way: Way, host: (u32, u32)) -> Option<Option<IdMaps>> {
        Some(match way {
            Way::MountNamespace => None,
            Way::UserNamespace => {
                let (host_uid, host_gid) = host;
                Some(IdMaps {
                    uid: CString::new(format!("{host_uid} {host_uid} 1")).ok()?,
                    gid: CString::new(format!("{host_gid} {host_gid} 1")).ok()?,
                })
            }
        })
    }
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
    #[cfg(target_os = "linux")]
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

    /// Elsewhere there are no mount namespaces: no child mounts a tmpfs
    /// (only Linux's `clone3` spawn does), so the way is never taken.
    #[cfg(not(target_os = "linux"))]
    pub(super) fn for_this_host() -> Way {
        Way::UserNamespace
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
        let maps = IdMaps::of_ids(way, host)?;
        Some(ScratchMount {
            target,
            options,
            maps,
        })
    }
}

/// What a person reads when a gate's output says a write failed for
/// space and its scratch was bounded: the bound, named.
pub fn hint(bytes: u64) -> String {
    format!(
        "its scratch directory (TMPDIR) holds at most [limits] gate_scratch_bytes = {bytes} bytes"
    )
}
