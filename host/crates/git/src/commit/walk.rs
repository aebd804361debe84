//! The walk of the workspace's directories for a read (see `read`): the
//! commit paths followed down from the root without crossing a symlink,
//! each directory listed once and its names taken a few at a time on the
//! walk's threads, ignored trees left unread unless `HEAD` tracks
//! something in them, nested repositories skipped, and, for a snapshot,
//! each directory watched before it is listed (`watch`).
//!
//! Must never: follow a symlink, open a FIFO or device, recurse past
//! [`MAX_WALK_DEPTH`], or write anything.

use super::excludes::Excludes;
use super::read::{Found, Item, Reads, io_err, is_dot_git, read_symlink};
use super::tracked::Tracked;
use super::{CommitError, CommitPathError};
use cap_std::fs::{Dir, Metadata, MetadataExt};
use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::EntryKind;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use tracing::{debug, warn};

/// The threads the workspace is walked on: rayon's, with stacks deep
/// enough for [`MAX_WALK_DEPTH`] levels of the walk's recursion (a
/// thread's default 2 MiB were not, in a debug build, for 256). Made
/// once; where it cannot be, the walk runs on rayon's global pool.
pub(super) fn walk_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("gatehost-walk-{i}"))
            .stack_size(WALK_STACK_BYTES)
            .build()
            .map_err(|e| warn!(error = %e, "cannot start the workspace walk's threads"))
            .ok()
    })
    .as_ref()
}

/// See [`walk_pool`]: address space, touched only as deep as a walk goes.
const WALK_STACK_BYTES: usize = 64 * 1024 * 1024;

pub(super) fn open_subdir(
    dir: &Dir,
    name: &OsStr,
    meta: &Metadata,
    rel: &BStr,
) -> Result<Dir, CommitError> {
    let sub = open_dir_listable(dir, name).map_err(io_err(rel))?;
    let opened = sub.dir_metadata().map_err(io_err(rel))?;
    if opened.dev() != meta.dev() || opened.ino() != meta.ino() {
        return Err(CommitError::ChangedWhileReading {
            path: rel.to_str_lossy().into_owned(),
        });
    }
    Ok(sub)
}

/// `dir`'s subdirectory `name`, opened for listing: one name (never `.`,
/// `..` nor a path), so one `openat` beneath `dir`, no symlink followed,
/// gives a descriptor [`names_of`] lists without opening it again (cap-std
/// opens an `O_PATH` descriptor, which `getdents` refuses: listing it
/// opened it twice more, a `fcntl` and three `close`s per directory).
/// Anything else, or off Linux, as cap-std opens it.
fn open_dir_listable(dir: &Dir, name: &OsStr) -> std::io::Result<Dir> {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{Mode, OFlags, openat};
        let bytes = name.as_bytes();
        if !bytes.is_empty() && bytes != b"." && bytes != b".." && !bytes.contains(&b'/') {
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let fd = openat(dir, name, flags, Mode::empty())?;
            return Ok(Dir::from_std_file(std::fs::File::from(fd)));
        }
    }
    dir.open_dir(name)
}

/// A directory's names, end to end in one buffer (no allocation per
/// name: 100,000 of them in a walk of 100,000 files).
#[derive(Default)]
struct Names {
    bytes: Vec<u8>,
    /// Where each name is in `bytes`.
    spans: Vec<std::ops::Range<usize>>,
}

impl Names {
    fn push(&mut self, name: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(name);
        self.spans.push(start..self.bytes.len());
    }

    fn name(&self, span: &std::ops::Range<usize>) -> &OsStr {
        OsStr::from_bytes(&self.bytes[span.clone()])
    }

    /// In byte order.
    fn sort(&mut self) {
        let bytes = &self.bytes;
        self.spans
            .sort_unstable_by(|a, b| bytes[a.clone()].cmp(&bytes[b.clone()]));
    }
}

/// `dir`'s names but `.` and `..`, as the file system lists them. On
/// Linux, a descriptor [`open_dir_listable`] opened is read in place from
/// its start, in pieces of [`LIST_BYTES`] (git's two `getdents` a
/// directory of 100 files, where cap-std's growing buffer took four); any
/// other (an `O_PATH` one) is listed by cap-std.
fn names_of(dir: &Dir, rel: &BStr) -> Result<Names, CommitError> {
    #[cfg(target_os = "linux")]
    match raw_names(dir) {
        Ok(names) => return Ok(names),
        // An `O_PATH` descriptor: not readable in place.
        Err(rustix::io::Errno::BADF) => {}
        Err(e) => return Err(io_err(rel)(e.into())),
    }
    let mut names = Names::default();
    for entry in dir.entries().map_err(io_err(rel))? {
        let entry = entry.map_err(io_err(rel))?;
        names.push(entry.file_name().as_bytes());
    }
    Ok(names)
}

/// See [`names_of`]: one directory entry is at most about 280 bytes.
#[cfg(target_os = "linux")]
const LIST_BYTES: usize = 32 * 1024;

#[cfg(target_os = "linux")]
fn raw_names(dir: &Dir) -> Result<Names, rustix::io::Errno> {
    use rustix::fs::{RawDir, SeekFrom, seek};
    // From the start, whoever read this descriptor before.
    seek(dir, SeekFrom::Start(0))?;
    let mut buf: Vec<u8> = Vec::with_capacity(LIST_BYTES);
    let mut names = Names::default();
    let mut entries = RawDir::new(dir, buf.spare_capacity_mut());
    while let Some(entry) = entries.next() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(name);
        }
    }
    Ok(names)
}

/// Reads one given path: `None` when absent.
pub(super) fn read_path(
    root: &Dir,
    common: &Dir,
    path: &str,
    tracked: &Tracked,
    reads: Reads<'_>,
) -> Result<Option<Found>, CommitError> {
    let components: Vec<&str> = path.split('/').collect();
    let Some((last, parents)) = components.split_last() else {
        return Err(CommitPathError::Empty.into());
    };
    let mut excludes = Excludes::new(common)?;
    excludes.push_dir(root, b"".as_bstr())?;
    let mut dir = root.try_clone().map_err(io_err(b".".as_bstr()))?;
    let mut rel = BString::default();
    // Whether a directory on the way is ignored: then, as for git, so is
    // everything below it but what HEAD tracks.
    let mut ignored = false;
    for component in parents {
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(component.as_bytes());
        ignored = ignored || excludes.is_ignored(rel.as_bstr(), true);
        if let Some(watch) = reads.watch {
            watch.on_the_way(&dir, parent_of(rel.as_bstr()), component);
        }
        let meta = match dir.symlink_metadata(component) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(rel.as_bstr())(e)),
        };
        if meta.is_symlink() {
            return Err(CommitError::PathBeyondSymlink {
                path: path.to_owned(),
                symlink: rel.to_str_lossy().into_owned(),
            });
        }
        if !meta.is_dir() {
            // A file where a directory would be: the path does not exist.
            return Ok(None);
        }
        dir = open_subdir(&dir, OsStr::new(component), &meta, rel.as_bstr())?;
        excludes.push_dir(&dir, rel.as_bstr())?;
    }
    let rel = BString::from(path);
    if let Some(watch) = reads.watch {
        watch.on_the_way(&dir, parent_of(rel.as_bstr()), last);
    }
    let name = OsStr::new(last);
    let meta = match dir.symlink_metadata(name) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(rel.as_bstr())(e)),
    };
    let mut items = Found::default();
    if meta.is_symlink() {
        let data = read_symlink(&dir, name, rel.as_bstr())?;
        let head = tracked.get(&rel).copied();
        items.items.push(Item::symlink(rel, data, head));
    } else if meta.is_file() {
        let head = tracked.get_at(&rel);
        items.regular(&dir, name, &meta, rel.as_bstr(), reads, head)?;
    } else if meta.is_dir() {
        if matches!(tracked.get(&rel), Some((EntryKind::Commit, _))) {
            return Ok(Some(items));
        }
        let sub = open_subdir(&dir, name, &meta, rel.as_bstr())?;
        if sub.symlink_metadata(".git").is_ok() {
            debug!(path, "skipping nested repository");
            return Ok(Some(items));
        }
        let ignored = ignored || excludes.is_ignored(rel.as_bstr(), true);
        walk_dir(
            &sub,
            rel,
            ignored,
            &mut excludes,
            tracked,
            reads,
            &mut items,
        )?;
    } else {
        return Err(CommitError::UnsupportedFileType {
            path: path.to_owned(),
        });
    }
    Ok(Some(items))
}

/// How many names of a directory one task of the walk takes: one each
/// cost an allocation and a task per file.
const WALK_CHUNK: usize = 16;

/// How deep the walk goes into the workspace's directories. The walk
/// recurses (frames per level, on the walk's threads): a chain of 3,000
/// nested directories, which the agent can make in a second, overflowed
/// a 2 MiB stack and aborted the host, a hook's crash the agent's CLI
/// takes for "no objection". Past it the read is refused (a gate error,
/// fail closed).
pub(super) const MAX_WALK_DEPTH: usize = 512;

/// Recursively collects the files of `dir` (repo-relative `rel`), sorted by path.
/// Below an ignored directory only files tracked in HEAD are taken.
pub(super) fn walk_dir(
    dir: &Dir,
    rel: BString,
    ignored_parent: bool,
    excludes: &mut Excludes,
    tracked: &Tracked,
    reads: Reads<'_>,
    items: &mut Found,
) -> Result<(), CommitError> {
    use rayon::prelude::*;
    if rel.iter().filter(|b| **b == b'/').count() >= MAX_WALK_DEPTH {
        let mut shown = rel.to_str_lossy().into_owned();
        shown.truncate(shown.floor_char_boundary(200));
        return Err(CommitError::TooDeep {
            path: shown,
            max: MAX_WALK_DEPTH,
        });
    }
    let pushed = excludes.push_dir(dir, rel.as_bstr())?;
    if let Some(watch) = reads.watch {
        watch.walked(dir, rel.as_bstr());
    }
    let mut names = names_of(dir, rel.as_bstr())?;
    names.sort();
    // Names on rayon's pool a few at a time (a directory with its own
    // copy of the ignore rules), the results put back in name order.
    let excludes_here: &Excludes = excludes;
    let parts: Vec<Result<Found, CommitError>> = names
        .spans
        .par_chunks(WALK_CHUNK)
        .map(|chunk| {
            let mut out = Found::default();
            for span in chunk {
                walk_entry(
                    dir,
                    &rel,
                    names.name(span),
                    ignored_parent,
                    excludes_here,
                    tracked,
                    reads,
                    &mut out,
                )?;
            }
            Ok(out)
        })
        .collect();
    if pushed {
        excludes.pop();
    }
    for part in parts {
        let part = part?;
        items.items.extend(part.items);
        items.unchanged.extend(part.unchanged);
    }
    Ok(())
}

/// One entry of a directory being walked (see [`walk_dir`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn walk_entry(
    dir: &Dir,
    rel: &BString,
    name: &OsStr,
    ignored_parent: bool,
    excludes: &Excludes,
    tracked: &Tracked,
    reads: Reads<'_>,
    items: &mut Found,
) -> Result<(), CommitError> {
    if is_dot_git(name.as_bytes()) {
        return Ok(());
    }
    // The path in the walker's reused buffer: a file the cache vouches
    // for costs no allocation (one per file was 100,000 a stop).
    let mut child = std::mem::take(&mut items.scratch);
    child.clear();
    child.extend_from_slice(rel);
    child.push(b'/');
    child.extend_from_slice(name.as_bytes());
    let taken = entry_at(
        dir,
        child.as_bstr(),
        name,
        ignored_parent,
        excludes,
        tracked,
        reads,
        items,
    );
    items.scratch = child;
    taken
}

/// [`walk_entry`] with the entry's path (`child`).
#[allow(clippy::too_many_arguments)]
fn entry_at(
    dir: &Dir,
    child: &BStr,
    name: &OsStr,
    ignored_parent: bool,
    excludes: &Excludes,
    tracked: &Tracked,
    reads: Reads<'_>,
    items: &mut Found,
) -> Result<(), CommitError> {
    let meta = match dir.symlink_metadata(name) {
        Ok(m) => m,
        // Vanished since listing: it is simply not there.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(child)(e)),
    };
    let found = tracked.get_near_at(child, &mut items.head_hint);
    let head = found.map(|(_, entry)| entry);
    if meta.is_dir() {
        if matches!(head, Some((EntryKind::Commit, _))) {
            return Ok(());
        }
        let ignored = ignored_parent || excludes.is_ignored(child, true);
        let prefix = {
            let mut p = child.to_owned();
            p.push(b'/');
            p
        };
        let has_tracked = tracked.has_under(&prefix);
        if ignored && !has_tracked {
            return Ok(());
        }
        let sub = open_subdir(dir, name, &meta, child)?;
        if sub.symlink_metadata(".git").is_ok() {
            debug!(path = %child, "skipping nested repository");
            return Ok(());
        }
        let mut own = excludes.clone();
        return walk_dir(
            &sub,
            child.to_owned(),
            ignored,
            &mut own,
            tracked,
            reads,
            items,
        );
    }
    // A tracked file is taken, ignored or not (its rules are not matched).
    if head.is_none() && (ignored_parent || excludes.is_ignored(child, false)) {
        return Ok(());
    }
    if meta.is_symlink() {
        let data = read_symlink(dir, name, child)?;
        items
            .items
            .push(Item::symlink(child.to_owned(), data, head));
    } else if meta.is_file() {
        items.regular(dir, name, &meta, child, reads, found)?;
    } else {
        // Sockets, FIFOs, devices: never opened, never committed (git skips them too).
        warn!(path = %child, "skipping a file that is neither regular, directory nor symlink");
    }
    Ok(())
}

/// `rel` without its last component (`""` for a name at the root).
fn parent_of(rel: &BStr) -> &BStr {
    match rel.rfind_byte(b'/') {
        Some(i) => &rel[..i],
        None => b"".as_bstr(),
    }
}

/// What [`walk_dir`] would find at `sub` (a path strictly below the
/// commit path `path`, a directory), read alone: the same rules (ignored
/// directories, `HEAD`'s files and gitlinks, nested repositories) as a
/// walk of `path` applies on the way down, `None` when a walk would take
/// nothing there. A directory found is walked (and watched) whole.
pub(super) fn read_below(
    root: &Dir,
    common: &Dir,
    path: &str,
    sub: &BStr,
    tracked: &Tracked,
    reads: Reads<'_>,
) -> Result<Option<Found>, CommitError> {
    let mut excludes = Excludes::new(common)?;
    excludes.push_dir(root, b"".as_bstr())?;
    let mut dir = root.try_clone().map_err(io_err(b".".as_bstr()))?;
    let mut rel = BString::default();
    let mut ignored = false;
    // Down to the commit path, as `read_path` goes (explicit: its own
    // rules never exclude it).
    for component in path.split('/') {
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(component.as_bytes());
        ignored = ignored || excludes.is_ignored(rel.as_bstr(), true);
        let meta = match dir.symlink_metadata(component) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(rel.as_bstr())(e)),
        };
        if !meta.is_dir() || meta.is_symlink() {
            return Ok(None);
        }
        dir = open_subdir(&dir, OsStr::new(component), &meta, rel.as_bstr())?;
        excludes.push_dir(&dir, rel.as_bstr())?;
    }
    if matches!(tracked.get(&rel), Some((EntryKind::Commit, _)))
        || dir.symlink_metadata(".git").is_ok()
    {
        return Ok(None);
    }
    // Below it, as `walk_entry` goes, to `sub`'s directory.
    let names: Vec<&[u8]> = sub[path.len() + 1..].split_str("/").collect();
    let Some((last, parents)) = names.split_last() else {
        return Ok(None);
    };
    for component in parents {
        rel.push(b'/');
        rel.extend_from_slice(component);
        if is_dot_git(component) {
            return Ok(None);
        }
        let name = OsStr::from_bytes(component);
        let meta = match dir.symlink_metadata(name) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(rel.as_bstr())(e)),
        };
        if !meta.is_dir() || meta.is_symlink() {
            return Ok(None);
        }
        if matches!(tracked.get(&rel), Some((EntryKind::Commit, _))) {
            return Ok(None);
        }
        ignored = ignored || excludes.is_ignored(rel.as_bstr(), true);
        let mut prefix = rel.clone();
        prefix.push(b'/');
        if ignored && !tracked.has_under(&prefix) {
            return Ok(None);
        }
        dir = open_subdir(&dir, name, &meta, rel.as_bstr())?;
        if dir.symlink_metadata(".git").is_ok() {
            return Ok(None);
        }
        excludes.push_dir(&dir, rel.as_bstr())?;
    }
    let mut items = Found::default();
    walk_entry(
        &dir,
        &rel,
        OsStr::from_bytes(last),
        ignored,
        &excludes,
        tracked,
        reads,
        &mut items,
    )?;
    Ok(Some(items))
}
