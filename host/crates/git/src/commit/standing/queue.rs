//! The inotify instance of a [`super::Standing`] watch: adding a watch by
//! the descriptor a read opened, removing one, and reading the queued
//! events as [`Event`]s.
//!
//! Must never: resolve a path the agent could swap (a watch is added
//! through `/proc/self/fd/N`, which the kernel resolves to the inode the
//! read holds), or block (the instance is non-blocking).

use rustix::fs::inotify::{self, CreateFlags, ReadFlags};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

/// One inotify instance (closed off the caller's path when dropped).
#[derive(Debug)]
pub(crate) struct Queue {
    /// Always `Some` but in `drop`.
    fd: Option<OwnedFd>,
}

impl Drop for Queue {
    /// Closing an inotify descriptor waits for the kernel to let go of
    /// every watch (an RCU grace period): not on the caller's path.
    fn drop(&mut self) {
        if let Some(fd) = self.fd.take() {
            crate::commit::dispose("standing watch", fd);
        }
    }
}

/// One event, as the watch needs it.
pub(crate) struct Event {
    pub(crate) wd: i32,
    /// The entry's name in the watched directory (empty for the
    /// directory itself).
    pub(crate) name: Vec<u8>,
    /// `IN_IGNORED`: the kernel dropped the watch.
    pub(crate) ignored: bool,
    /// `IN_DELETE_SELF`: the directory itself went.
    pub(crate) deleted_self: bool,
    flags: ReadFlags,
}

impl Event {
    /// Why this event leaves nothing to vouch for (an overflow, an
    /// unmount).
    pub(crate) fn doubt(&self) -> Option<String> {
        if self.flags.contains(ReadFlags::QUEUE_OVERFLOW) {
            Some("the kernel's event queue overflowed (IN_Q_OVERFLOW)".into())
        } else if self.flags.contains(ReadFlags::UNMOUNT) {
            Some("a watched file system was unmounted (IN_UNMOUNT)".into())
        } else {
            None
        }
    }

    /// The event's kinds, for a log line.
    pub(crate) fn what(&self) -> String {
        format!("{:?}", self.flags)
    }
}

impl Queue {
    pub(crate) fn new() -> std::io::Result<Queue> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        Ok(Queue { fd: Some(fd) })
    }

    fn fd(&self) -> Result<&OwnedFd, String> {
        self.fd
            .as_ref()
            .ok_or_else(|| "the watch is closed".to_string())
    }

    /// Watches `dir` by its descriptor: the watch's number.
    pub(crate) fn add(&self, dir: &cap_std::fs::Dir) -> Result<i32, String> {
        let link = format!("/proc/self/fd/{}", dir.as_fd().as_raw_fd());
        inotify::add_watch(self.fd()?, link.as_str(), crate::commit::watch::mask()).map_err(|e| {
            match e {
                rustix::io::Errno::NOSPC => {
                    "the user's inotify watches are used up (ENOSPC, fs.inotify.max_user_watches)"
                        .to_string()
                }
                e => e.to_string(),
            }
        })
    }

    /// Stops watch `wd` (its `IN_IGNORED` follows).
    pub(crate) fn remove(&self, wd: i32) {
        if let Ok(fd) = self.fd() {
            let _ = inotify::remove_watch(fd, wd);
        }
    }

    /// Hands each queued event to `each`, until none is left.
    pub(crate) fn read(&self, each: &mut dyn FnMut(Event)) -> Result<(), String> {
        crate::commit::watch::each_event(self.fd()?, &mut |event| {
            let flags = event.events();
            each(Event {
                wd: event.wd(),
                name: event
                    .file_name()
                    .map(|n| n.to_bytes().to_vec())
                    .unwrap_or_default(),
                ignored: flags.contains(ReadFlags::IGNORED),
                deleted_self: flags.contains(ReadFlags::DELETE_SELF),
                flags,
            });
            Ok(())
        })
    }
}
