//! Whether the commit paths changed since a snapshot read them, known
//! without reading them again: each directory the snapshot's walk enters
//! is watched (inotify) before it is listed, so a write, a creation, a
//! deletion, a rename or a mode change after the snapshot saw a file is
//! an event. After a passing gate, no event means the workspace still
//! holds what the snapshot took, and the commit paths need not be walked
//! again for `changedAfterSnapshot` (100 ms at 100,000 files). (Where the
//! daemon keeps a watch between turns, `standing`, that one answers
//! instead; this one serves where none is kept.)
//!
//! Owns: the watches of one snapshot, and the answer "nothing watched
//! changed" or why it cannot say so (an event, a queue overflow, a watch
//! that could not be added, a hard-linked file, which can be written
//! through a directory not watched).
//!
//! Must never: decide what is committed (the commit is the snapshot's
//! tree, whatever this says), follow a symlink to a directory it did not
//! open, or answer "unchanged" when it could have missed something: every
//! doubt is a reason, and the caller reads the paths again. (Writes through
//! a shared memory map raise no inotify event: what reads again, `policy
//! status` and the ack, sees them.)

use gix::bstr::{BStr, BString, ByteSlice};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use std::collections::{BTreeSet, HashMap};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Mutex;

/// What a watched directory is to the snapshot.
#[derive(Debug)]
enum Role {
    /// Walked: any change to one of its entries (but `.git`) counts.
    Walked,
    /// On the way to the commit paths named: only a change to one of
    /// these names, or to the directory itself, counts.
    OnTheWay(BTreeSet<BString>),
}

#[derive(Debug)]
struct Watched {
    /// Repository-relative (`""` for the root), for the reason given.
    rel: BString,
    role: Role,
}

#[derive(Debug, Default)]
struct State {
    dirs: HashMap<i32, Watched>,
    /// The first reason the watch cannot vouch for anything.
    doubt: Option<String>,
}

/// The watches of one snapshot's read (see the module's doc).
#[derive(Debug)]
pub struct Watch {
    /// Always `Some` but in `drop`.
    fd: Option<OwnedFd>,
    state: Mutex<State>,
}

impl Drop for Watch {
    /// Closing an inotify descriptor waits for the kernel to let go of
    /// every watch (10-15 ms at 1,000 directories, an RCU grace period):
    /// not on the caller's path.
    fn drop(&mut self) {
        if let Some(fd) = self.fd.take() {
            super::dispose("watch", fd);
        }
    }
}

/// What the kernel must report for a directory's entries and itself
/// (also the standing watch's, `standing::queue`).
pub(crate) fn mask() -> WatchFlags {
    WatchFlags::MODIFY
        | WatchFlags::ATTRIB
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::ONLYDIR
}

impl Watch {
    /// A new inotify instance, nothing watched yet (fails when the
    /// user's instances are used up: then the caller reads again).
    pub fn new() -> std::io::Result<Watch> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        Ok(Watch {
            fd: Some(fd),
            state: Mutex::new(State::default()),
        })
    }

    fn fd(&self) -> Result<&OwnedFd, String> {
        self.fd
            .as_ref()
            .ok_or_else(|| "the watch is closed".to_string())
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn add(&self, dir: &cap_std::fs::Dir, rel: &BStr, next: Option<&str>) {
        // The descriptor's own link: the kernel resolves it to the inode
        // the walk holds.
        let link = format!("/proc/self/fd/{}", dir.as_fd().as_raw_fd());
        let wd = match self
            .fd()
            .and_then(|fd| inotify::add_watch(fd, link.as_str(), mask()).map_err(|e| e.to_string()))
        {
            Ok(wd) => wd,
            Err(e) => {
                self.doubt(format!("cannot watch {}: {e}", shown(rel)));
                return;
            }
        };
        let mut state = self.state();
        let watched = state.dirs.entry(wd).or_insert_with(|| Watched {
            rel: rel.to_owned(),
            role: Role::OnTheWay(BTreeSet::new()),
        });
        match (&mut watched.role, next) {
            (Role::OnTheWay(names), Some(next)) => {
                names.insert(next.into());
            }
            (role, None) => *role = Role::Walked,
            (Role::Walked, Some(_)) => {}
        }
    }

    /// Records why the watch cannot vouch for the paths (the first reason
    /// is kept).
    pub(super) fn doubt(&self, why: String) {
        self.state().doubt.get_or_insert(why);
    }

    /// `Ok` when nothing watched changed since it was watched; else why
    /// the paths must be read again. The events are read once: a second
    /// call sees only what came after the first.
    pub fn unchanged(&self) -> Result<(), String> {
        let state = self.state();
        if let Some(why) = &state.doubt {
            return Err(why.clone());
        }
        each_event(self.fd()?, &mut |event| {
            if event.events().contains(ReadFlags::QUEUE_OVERFLOW) {
                return Err("more changes than the watch could queue".into());
            }
            let name = event.file_name().map(|n| n.to_bytes()).unwrap_or_default();
            let Some(watched) = state.dirs.get(&event.wd()) else {
                return Err(format!(
                    "an event of an unknown watch ({:?})",
                    event.events()
                ));
            };
            let counts = match &watched.role {
                Role::Walked => !super::read::is_dot_git(name),
                Role::OnTheWay(names) => name.is_empty() || names.contains(name.as_bstr()),
            };
            if counts {
                let mut path = watched.rel.clone();
                if !name.is_empty() {
                    if !path.is_empty() {
                        path.push(b'/');
                    }
                    path.extend_from_slice(name);
                }
                return Err(format!(
                    "{} changed ({:?})",
                    shown(path.as_bstr()),
                    event.events()
                ));
            }
            Ok(())
        })
    }
}

/// Hands each event queued on the inotify instance `fd` to `each`, until
/// none is left or `each` answers why it stops (also the standing watch's,
/// `standing::queue`).
pub(crate) fn each_event(
    fd: &OwnedFd,
    each: &mut dyn FnMut(inotify::Event<'_>) -> Result<(), String>,
) -> Result<(), String> {
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 16 * 1024];
    let mut events = inotify::Reader::new(fd, &mut buf);
    loop {
        match events.next() {
            Ok(event) => each(event)?,
            Err(rustix::io::Errno::AGAIN) => return Ok(()),
            Err(e) => return Err(format!("cannot read the watch's events: {e}")),
        }
    }
}

impl super::read::Watcher for Watch {
    /// Watches `dir` (the directory the walk opened, by its descriptor:
    /// never a path the agent could swap) before it is listed.
    fn walked(&self, dir: &cap_std::fs::Dir, rel: &BStr) {
        self.add(dir, rel, None);
    }

    /// Watches `dir`, a directory on the way to the commit path `next`
    /// names in it, before `next` is looked up.
    fn on_the_way(&self, dir: &cap_std::fs::Dir, rel: &BStr, next: &str) {
        self.add(dir, rel, Some(next));
    }

    /// A file with several links can be written through a directory not
    /// watched: this watch then cannot vouch for anything.
    fn linked(&self, rel: &BStr, links: u64) {
        self.doubt(format!("{} has {links} links", shown(rel)));
    }
}

fn shown(rel: &BStr) -> String {
    if rel.is_empty() {
        ".".into()
    } else {
        rel.to_str_lossy().into_owned()
    }
}

#[cfg(test)]
mod tests;
