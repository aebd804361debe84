//! The host's file access for plugins: `workspace-files` (list the
//! workspace) and `read-files` (read many files in one call, in parallel).
//!
//! A plugin can read the workspace through its WASI preopen, one host call
//! per directory entry, open, read and close. These two imports do the same
//! work natively, through the same confinement: a `cap_std` handle on the
//! workspace the anchor opened, where `..` out, absolute paths and symbolic
//! links leaving the workspace do not resolve. They never write, never
//! follow a link while listing, never open anything but a regular file
//! (opens are non-blocking, so a FIFO planted by the agent cannot hang the
//! host), never hand back more bytes than the plugin's memory budget, and
//! never take more than 4,096 paths in one call (a host call is not
//! interrupted by the wall-clock bound; between calls it is checked).

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use rayon::prelude::*;
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};

/// More files than this and `workspace-files` refuses (the list alone
/// would be tens of MiB).
pub const MAX_LISTED_FILES: usize = 200_000;
/// More paths than this in one `read-files` call are refused: a host call
/// cannot be interrupted by the plugin's wall-clock bound, so each is kept
/// short (the bound is checked again between calls).
pub const MAX_PATHS_PER_CALL: usize = 4096;
/// Fewer files than this per pool task are not worth a hand-over.
const FILES_PER_TASK: usize = 8;

/// Why one file could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReadError {
    TooLarge,
    Unreadable(String),
}

/// Every regular file under `root`, relative, `/`-separated, sorted;
/// symbolic links are neither followed nor listed; `.git` is skipped.
pub fn list_files(root: &Dir) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut stack: Vec<(String, Dir)> = vec![(String::new(), root.try_clone().map_err(io)?)];
    while let Some((prefix, dir)) = stack.pop() {
        let Ok(entries) = dir.entries() else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            if kind.is_dir() && name != ".git" {
                // Listed as a directory, not a link. Were it swapped for a
                // link since, cap-std still keeps the open inside `root`.
                if let Ok(sub) = dir.open_dir(&name) {
                    stack.push((rel, sub));
                }
            } else if kind.is_file() {
                out.push(rel);
                if out.len() > MAX_LISTED_FILES {
                    return Err(format!(
                        "the workspace holds more than {MAX_LISTED_FILES} files"
                    ));
                }
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Reads `paths` (each at most `max_bytes`), in order, on rayon's pool.
/// Errors as a whole when more than `budget` bytes would be handed back
/// (no file is read once the budget is spent).
pub(crate) fn read_files(
    root: &Dir,
    paths: &[String],
    max_bytes: u64,
    budget: u64,
) -> Result<Vec<Result<Vec<u8>, ReadError>>, String> {
    if paths.len() > MAX_PATHS_PER_CALL {
        return Err(format!(
            "{} paths in one call; at most {MAX_PATHS_PER_CALL}",
            paths.len()
        ));
    }
    let total = AtomicU64::new(0);
    let over =
        || format!("the files asked for exceed the plugin's memory budget of {budget} bytes");
    let out: Vec<Option<Result<Vec<u8>, ReadError>>> = paths
        .par_iter()
        .with_min_len(FILES_PER_TASK)
        .map(|p| {
            let room = budget.saturating_sub(total.load(Ordering::Relaxed));
            // None: this file alone would overrun what is left.
            let r = read_one(root, p, max_bytes, room)?;
            let n = r.as_ref().map_or(0, |b| b.len() as u64);
            (total.fetch_add(n, Ordering::Relaxed) + n <= budget).then_some(r)
        })
        .collect();
    out.into_iter().map(|r| r.ok_or_else(over)).collect()
}

/// Reads one file, never allocating past `room` (what is left of the
/// plugin's memory budget): `None` when the file does not fit in it (a
/// sparse or growing file included), else the file or why not.
fn read_one(
    root: &Dir,
    path: &str,
    max_bytes: u64,
    room: u64,
) -> Option<Result<Vec<u8>, ReadError>> {
    read_within(root, path, max_bytes, room).transpose()
}

fn read_within(
    root: &Dir,
    path: &str,
    max_bytes: u64,
    room: u64,
) -> Result<Option<Vec<u8>>, ReadError> {
    let rel = path.trim_start_matches("./");
    let unreadable = |e: std::io::Error| ReadError::Unreadable(format!("{path}: {e}"));
    let mut options = OpenOptions::new();
    options
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
    let mut file = root.open_with(rel, &options).map_err(unreadable)?;
    let meta = file.metadata().map_err(unreadable)?;
    if !meta.is_file() {
        return Err(ReadError::Unreadable(format!("{path}: not a regular file")));
    }
    if meta.len() > max_bytes {
        return Err(ReadError::TooLarge);
    }
    if meta.len() > room {
        return Ok(None);
    }
    // Room for one byte more than the stat said: a regular file reads
    // short only at its end, so one `read` usually does it; a file that
    // grew meanwhile is read on, never past the cap nor the budget.
    let cap = max_bytes.min(room);
    let mut bytes = vec![0u8; meta.len() as usize + 1];
    let mut filled = 0;
    loop {
        let n = match file.read(&mut bytes[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(unreadable(e)),
        };
        filled += n;
        if filled as u64 > max_bytes {
            return Err(ReadError::TooLarge);
        }
        if filled as u64 > room {
            return Ok(None);
        }
        if n == 0 || filled < bytes.len() {
            break;
        }
        let grown = (bytes.len() * 2).min(cap.saturating_add(1) as usize);
        bytes.resize(grown.max(filled + 1), 0);
    }
    bytes.truncate(filled);
    Ok(Some(bytes))
}

fn io(e: std::io::Error) -> String {
    e.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cap_std::ambient_authority;

    fn workspace() -> (tempfile::TempDir, Dir) {
        let t = tempfile::tempdir().expect("tempdir");
        let ws = t.path().join("ws");
        std::fs::create_dir_all(ws.join("src/deep")).expect("mkdir");
        std::fs::create_dir_all(ws.join(".git")).expect("mkdir");
        std::fs::write(ws.join("a.txt"), "alpha").expect("write");
        std::fs::write(ws.join("src/b.rs"), "beta").expect("write");
        std::fs::write(ws.join("src/deep/c.rs"), "gamma").expect("write");
        std::fs::write(ws.join(".git/config"), "secret").expect("write");
        std::fs::write(t.path().join("outside.txt"), "outside").expect("write");
        std::os::unix::fs::symlink(t.path().join("outside.txt"), ws.join("out-link"))
            .expect("symlink");
        std::os::unix::fs::symlink(t.path(), ws.join("out-dir")).expect("symlink");
        std::os::unix::fs::symlink("a.txt", ws.join("in-link")).expect("symlink");
        let fifo =
            std::ffi::CString::new(ws.join("fifo").to_string_lossy().as_bytes()).expect("path");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let dir = Dir::open_ambient_dir(&ws, ambient_authority()).expect("open");
        (t, dir)
    }

    #[test]
    fn a_sparse_terabyte_file_never_makes_the_host_allocate_past_the_budget() {
        let (t, dir) = workspace();
        let big = std::fs::File::create(t.path().join("ws/sparse.bin")).expect("create");
        big.set_len(1 << 40).expect("a 1 TiB hole");
        // No per-file cap at all: only the memory budget stands.
        let err = read_files(&dir, &["sparse.bin".to_string()], u64::MAX, 128 << 20)
            .expect_err("over the budget");
        assert!(err.contains("memory budget"), "{err}");
        // A small file beside it still reads.
        let got = read_files(&dir, &["a.txt".to_string()], u64::MAX, 128 << 20).expect("read");
        assert!(got[0].is_ok());
    }

    #[test]
    fn lists_regular_files_only_without_following_links_or_git() {
        let (_t, dir) = workspace();
        assert_eq!(
            list_files(&dir).expect("list"),
            vec!["a.txt", "src/b.rs", "src/deep/c.rs"]
        );
    }

    #[test]
    fn reads_in_order_and_refuses_escapes_fifos_and_large_files() {
        let (_t, dir) = workspace();
        let paths: Vec<String> = [
            "a.txt",
            "./src/b.rs",
            "in-link",
            "../outside.txt",
            "/etc/passwd",
            "out-link",
            "out-dir/outside.txt",
            "fifo",
            "src",
            "missing",
            "src/deep/c.rs",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let got = read_files(&dir, &paths, 4, 1 << 20).expect("read");
        assert_eq!(got.len(), paths.len());
        assert_eq!(got[0], Err(ReadError::TooLarge), "alpha is 5 bytes");
        assert_eq!(got[1], Ok(b"beta".to_vec()));
        assert_eq!(got[2], Err(ReadError::TooLarge), "in-link is alpha");
        for (i, p) in paths.iter().enumerate().skip(3).take(7) {
            assert!(
                matches!(&got[i], Err(ReadError::Unreadable(m)) if m.starts_with(p.as_str())),
                "{p}: {:?}",
                got[i]
            );
        }
        assert_eq!(got[10], Err(ReadError::TooLarge));
        let got = read_files(&dir, &paths[..1], 5, 1 << 20).expect("read");
        assert_eq!(got, vec![Ok(b"alpha".to_vec())]);
    }

    #[test]
    fn many_files_are_read_in_order_within_the_budget_and_the_path_cap() {
        let t = tempfile::tempdir().expect("tempdir");
        let paths: Vec<String> = (0..500).map(|i| format!("f{i}")).collect();
        for p in &paths {
            std::fs::write(t.path().join(p), p).expect("write");
        }
        let dir = Dir::open_ambient_dir(t.path(), ambient_authority()).expect("open");
        let got = read_files(&dir, &paths, 100, 1 << 20).expect("read");
        let want: Vec<_> = paths.iter().map(|p| Ok(p.as_bytes().to_vec())).collect();
        assert_eq!(got, want);
        let total: u64 = paths.iter().map(|p| p.len() as u64).sum();
        let err = read_files(&dir, &paths, 100, total - 1).expect_err("over budget");
        assert!(err.contains("memory budget"), "{err}");
        assert!(read_files(&dir, &paths, 100, total).is_ok());
        let many = vec!["f1".to_string(); MAX_PATHS_PER_CALL + 1];
        let Err(err) = read_files(&dir, &many, 100, u64::MAX) else {
            panic!("{} paths were accepted", many.len());
        };
        assert!(err.contains("at most 4096"), "{err}");
        assert!(read_files(&dir, &many[1..], 100, u64::MAX).is_ok());
    }
}
