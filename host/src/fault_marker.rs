//! The fault marker: how the next start of the daemon tells a death by a
//! fault of its own (an abort: `std::process::abort`, a stack overflow, a
//! fatal error in a library, which a gate's input could provoke) from a
//! kill from outside (SIGKILL, a reboot), which leaves no trace.
//!
//! It owns `<data dir>/fault.marker`: read and emptied at start, then
//! written by a signal handler on SIGABRT or SIGBUS. The handler must
//! never do anything but one async-signal-safe `write(2)` to a file
//! opened beforehand; the signal's default action (the process dies)
//! follows.

use std::io::Read;
use std::os::fd::IntoRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};

const FILE: &str = "fault.marker";

/// The marker's descriptor, for the signal handler (-1: not armed).
static FD: AtomicI32 = AtomicI32::new(-1);

fn note(text: &'static [u8]) {
    let fd = FD.load(Ordering::Relaxed);
    if fd >= 0 {
        // SAFETY: write(2) is async-signal-safe; `text` is a static
        // buffer and `fd` stays open for the life of the process.
        unsafe {
            libc::write(fd, text.as_ptr().cast(), text.len());
        }
    }
}

/// Returns what the previous life of the daemon on `data_dir` died of, if
/// it died of a fault (the signal's name), and arms the marker for this
/// life. Call once, early in `serve`.
pub fn arm(data_dir: &Path) -> std::io::Result<Option<String>> {
    let path = data_dir.join(FILE);
    let previous = match std::fs::symlink_metadata(&path) {
        Ok(m) if m.is_file() => {
            let mut text = String::new();
            std::fs::File::open(&path)?
                .take(256)
                .read_to_string(&mut text)?;
            let text = text.trim().to_string();
            (!text.is_empty()).then_some(text)
        }
        Ok(_) => {
            return Err(std::io::Error::other(format!(
                "{} is not a regular file",
                path.display()
            )));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)?;
    let old = FD.swap(file.into_raw_fd(), Ordering::Relaxed);
    if old >= 0 {
        // Armed before (tests call `arm` more than once): close the old one.
        // SAFETY: `old` came from `into_raw_fd` and is no longer used.
        unsafe { libc::close(old) };
    }
    static HANDLERS: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    HANDLERS
        .get_or_init(|| {
            for (signal, text) in [
                (libc::SIGABRT, b"SIGABRT\n" as &'static [u8]),
                (libc::SIGBUS, b"SIGBUS\n"),
            ] {
                // SAFETY: the action only calls write(2) (async-signal-safe);
                // the default action still runs after it (the process dies).
                unsafe { signal_hook_registry::register(signal, move || note(text)) }
                    .map_err(|e| e.to_string())?;
            }
            Ok(())
        })
        .clone()
        .map_err(std::io::Error::other)?;
    Ok(previous)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_is_reported_once_to_the_next_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(arm(dir.path()).expect("arm"), None);
        // As the handler would write it.
        note(b"SIGABRT\n");
        assert_eq!(arm(dir.path()).expect("arm"), Some("SIGABRT".into()));
        // Emptied at that start: a later death with no fault shows none.
        assert_eq!(arm(dir.path()).expect("arm"), None);
    }
}
