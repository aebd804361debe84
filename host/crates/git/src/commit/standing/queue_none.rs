//! No inotify on this platform: a [`super::Standing`] watch cannot be
//! made ([`Queue::new`] errs), so every snapshot walks everything.
//!
//! Must never: be reached past `new`.

/// No instance can exist here.
#[derive(Debug)]
pub(crate) enum Queue {}

/// No event can exist here.
pub(crate) struct Event {
    pub(crate) wd: i32,
    pub(crate) name: Vec<u8>,
    pub(crate) ignored: bool,
    pub(crate) deleted_self: bool,
}

impl Event {
    pub(crate) fn doubt(&self) -> Option<String> {
        None
    }

    pub(crate) fn what(&self) -> String {
        String::new()
    }
}

impl Queue {
    pub(crate) fn new() -> std::io::Result<Queue> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "no inotify on this platform: every snapshot walks the commit paths",
        ))
    }

    pub(crate) fn add(&self, _dir: &cap_std::fs::Dir) -> Result<i32, String> {
        match *self {}
    }

    pub(crate) fn remove(&self, _wd: i32) {
        match *self {}
    }

    pub(crate) fn read(&self, _each: &mut dyn FnMut(Event)) -> Result<(), String> {
        match *self {}
    }
}
