//! Whether the commit paths changed since a snapshot read them, on a
//! platform without inotify (every platform but Linux): it cannot be
//! known without reading them again, so no watch is ever made
//! ([`Watch::new`] errs, and [`Watch`] has no value). The caller then
//! reads the paths again, as it does on Linux when the user's inotify
//! instances are used up. (A kqueue or FSEvents implementation would go
//! here.)
//!
//! Must never: answer "unchanged".

use gix::bstr::BStr;

/// The watches of one snapshot's read: none can be made here.
#[derive(Debug)]
pub enum Watch {}

impl Watch {
    /// Always an error: this platform has no inotify.
    pub fn new() -> std::io::Result<Watch> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "no inotify on this platform: the commit paths are read again",
        ))
    }

    /// Unreachable: a watch cannot exist here.
    pub fn unchanged(&self) -> Result<(), String> {
        match *self {}
    }
}

impl super::read::Watcher for Watch {
    fn walked(&self, _dir: &cap_std::fs::Dir, _rel: &BStr) {
        match *self {}
    }

    fn on_the_way(&self, _dir: &cap_std::fs::Dir, _rel: &BStr, _next: &str) {
        match *self {}
    }

    fn linked(&self, _rel: &BStr, _links: u64) {
        match *self {}
    }
}
