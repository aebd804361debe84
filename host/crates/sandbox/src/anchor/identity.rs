//! Where an opened directory is: its identity (device and inode), the
//! identities of the directories above it, and whether it is, holds or lies
//! inside one of the host's own places (data directory, tokens,
//! configuration, cache, scratch, worktrees).
//!
//! A workspace is opened once, by [`open_dir_no_symlinks`], which follows
//! no symlink at any component of its absolute path (`openat2` with
//! `RESOLVE_NO_SYMLINKS` on Linux, `O_NOFOLLOW_ANY` on macOS, or a walk of
//! `O_NOFOLLOW` opens where the kernel has neither). Every check is then made on what was opened: its
//! identity and its [`lineage`], read upwards from the descriptor through
//! `..`, never by resolving the path again. An agent that swaps a path
//! component for a symlink (or another directory) between the check and
//! the open gets an error, or the directory the checks looked at.
//!
//! This module must never decide anything from a path string alone, and
//! never follow a symlink while opening a workspace.

#[cfg(target_os = "linux")]
use rustix::fs::ResolveFlags;
use rustix::fs::{AtFlags, CWD, Mode, OFlags};
use rustix::io::Errno;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

/// A directory's (or file's) identity: what a path resolved to when it was
/// opened. Two opens of the same directory have the same identity; a
/// directory swapped in its place has another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DirIdentity {
    /// The device it is on (`st_dev`).
    pub dev: u64,
    /// Its inode number on that device (`st_ino`).
    pub ino: u64,
}

impl DirIdentity {
    /// The identity of an open descriptor (`fstat`).
    pub fn of(fd: BorrowedFd<'_>) -> io::Result<Self> {
        let st = rustix::fs::fstat(fd)?;
        Ok(Self::from_stat(&st))
    }

    // (`st_dev` is an `i32` on macOS: its bits are the identity.)
    #[allow(clippy::unnecessary_cast)]
    fn from_stat(st: &rustix::fs::Stat) -> Self {
        DirIdentity {
            dev: st.st_dev as u64,
            ino: st.st_ino,
        }
    }

    /// The identity of what `path` names now, following symlinks (for the
    /// host's own places, which the operator names).
    fn of_path(path: &Path) -> io::Result<Self> {
        let st = rustix::fs::statat(CWD, path, AtFlags::empty())?;
        Ok(Self::from_stat(&st))
    }
}

impl std::fmt::Display for DirIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "device {} inode {}", self.dev, self.ino)
    }
}

/// Why an absolute path could not be opened as a directory without
/// following a symlink.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The path (shown) is relative, or has `.` or `..` components.
    #[error("{0} is not an absolute path without `.` or `..` components")]
    NotPlain(String),
    /// A component of the path (shown) is a symlink, or became one while it
    /// was being opened.
    #[error(
        "a component of {0} is a symlink (or was swapped for one while it was opened); a workspace is opened without following any"
    )]
    Symlink(String),
    /// Opening a component failed otherwise.
    #[error("{path}: {source}")]
    Io {
        /// The path being opened, shown.
        path: String,
        /// The operating system's error.
        source: io::Error,
    },
}

/// How many times an `openat2` that a concurrent rename interrupted
/// (`EAGAIN`) is tried again before giving up.
#[cfg(target_os = "linux")]
const RENAME_RETRIES: usize = 8;

/// The flags of a handle that only names a directory, to walk from or to
/// stat: `O_PATH` where the system has it, else a read-only open (which
/// needs read permission on the directory).
#[cfg(target_os = "linux")]
const NAMING: OFlags = OFlags::PATH;
#[cfg(not(target_os = "linux"))]
const NAMING: OFlags = OFlags::RDONLY;

/// Opens the absolute `path` as a directory (read-only, close-on-exec)
/// without following a symlink at any of its components: a symlink
/// anywhere on the way, including the last component, is an error. The
/// path must be plain (absolute, no `.` or `..`): a canonical path is.
pub fn open_dir_no_symlinks(path: &Path) -> Result<OwnedFd, OpenError> {
    let shown = || path.display().to_string();
    let plain = path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if !plain {
        return Err(OpenError::NotPlain(shown()));
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    #[cfg(target_os = "linux")]
    {
        let resolve = ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        let mut tries = 0;
        loop {
            match rustix::fs::openat2(CWD, path, flags, Mode::empty(), resolve) {
                Ok(fd) => return Ok(fd),
                Err(Errno::AGAIN) if tries < RENAME_RETRIES => tries += 1,
                Err(Errno::NOSYS) => return walk_no_symlinks(path),
                Err(e) => return Err(classify(path, e)),
            }
        }
    }
    // A symlink at any component is ELOOP, as under RESOLVE_NO_SYMLINKS.
    #[cfg(target_vendor = "apple")]
    return rustix::fs::open(path, flags | OFlags::NOFOLLOW_ANY, Mode::empty())
        .map_err(|e| classify(path, e));
    #[cfg(not(any(target_os = "linux", target_vendor = "apple")))]
    return {
        let _ = flags;
        walk_no_symlinks(path)
    };
}

/// `path` resolved once to its canonical form, then opened by
/// [`open_dir_no_symlinks`] as a `cap_std` directory: a component swapped
/// for a symlink after the resolution is an error, never another place.
pub fn open_canonical_dir(path: &Path) -> io::Result<cap_std::fs::Dir> {
    let canonical = std::fs::canonicalize(path)?;
    let fd = open_dir_no_symlinks(&canonical).map_err(|e| match e {
        OpenError::Io { source, .. } => source,
        other => io::Error::new(io::ErrorKind::PermissionDenied, other.to_string()),
    })?;
    Ok(cap_std::fs::Dir::from_std_file(std::fs::File::from(fd)))
}

/// The same open as [`open_dir_no_symlinks`], one `O_NOFOLLOW` component at
/// a time from `/` (kernels before 5.6 have no `openat2`). (Not used on
/// macOS, which has `O_NOFOLLOW_ANY`; its test holds it there too.)
#[cfg_attr(target_vendor = "apple", allow(dead_code))]
fn walk_no_symlinks(path: &Path) -> Result<OwnedFd, OpenError> {
    let step = NAMING | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let mut at: OwnedFd =
        rustix::fs::open("/", step, Mode::empty()).map_err(|e| classify(path, e))?;
    let names: Vec<&OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect();
    for name in &names {
        at = rustix::fs::openat(&at, *name, step, Mode::empty()).map_err(|e| classify(path, e))?;
    }
    // From the `O_PATH` handle to a readable one, without a path again.
    rustix::fs::openat(
        &at,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| classify(path, e))
}

fn classify(path: &Path, e: Errno) -> OpenError {
    // A symlink met under RESOLVE_NO_SYMLINKS is ELOOP; one met as an
    // intermediate O_PATH|O_NOFOLLOW|O_DIRECTORY component is ENOTDIR,
    // which a plain file on the way also gives: tell them apart by looking.
    if e == Errno::LOOP || (e == Errno::NOTDIR && has_symlink_component(path)) {
        return OpenError::Symlink(path.display().to_string());
    }
    OpenError::Io {
        path: path.display().to_string(),
        source: e.into(),
    }
}

fn has_symlink_component(path: &Path) -> bool {
    path.ancestors()
        .any(|a| std::fs::symlink_metadata(a).is_ok_and(|m| m.file_type().is_symlink()))
}

/// The deepest lineage read: deeper than any real path (`PATH_MAX` allows
/// about 2,000 one-letter components).
const MAX_DEPTH: usize = 4096;

/// The identities of the directory `fd` and of each directory above it, up
/// to the root, read through `..` from the descriptor (never by path): the
/// first is `fd`'s own.
pub fn lineage(fd: BorrowedFd<'_>) -> io::Result<Vec<DirIdentity>> {
    let up = NAMING | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let mut out = vec![DirIdentity::of(fd)?];
    let mut at: OwnedFd = rustix::fs::openat(fd, "..", up, Mode::empty())?;
    loop {
        let id = DirIdentity::of(at.as_fd())?;
        // The root's `..` is itself (also a chroot's or a mount namespace's).
        if out.last() == Some(&id) {
            return Ok(out);
        }
        out.push(id);
        if out.len() > MAX_DEPTH {
            return Err(io::Error::other(format!(
                "more than {MAX_DEPTH} directories above the workspace"
            )));
        }
        at = rustix::fs::openat(&at, "..", up, Mode::empty())?;
    }
}

/// One of the host's own places, by identity: the place itself (when it
/// exists) and every existing directory above it.
#[derive(Debug, Clone)]
struct Place {
    path: PathBuf,
    itself: Option<DirIdentity>,
    above: Vec<DirIdentity>,
}

/// The host's own places, by identity, made once from their paths (the
/// operator's: configuration, data directory, tokens, cache, scratch,
/// worktrees). A place that does not exist yet is covered through the
/// directories above it, so a workspace that would hold it is refused.
#[derive(Debug, Clone, Default)]
pub struct Places {
    places: Vec<Place>,
}

impl Places {
    /// The identities of `paths` and of the directories above them, as
    /// they are now.
    pub fn of(paths: &[PathBuf]) -> Self {
        let places = paths
            .iter()
            .map(|p| {
                let absolute = std::path::absolute(p).unwrap_or_else(|_| p.clone());
                let itself = DirIdentity::of_path(&absolute).ok();
                let above = absolute
                    .ancestors()
                    .skip(1)
                    .filter_map(|a| DirIdentity::of_path(a).ok())
                    .collect();
                Place {
                    path: p.clone(),
                    itself,
                    above,
                }
            })
            .collect();
        Places { places }
    }

    /// The first place that the directory whose lineage is `lineage` (its
    /// own identity first) is, lies inside, or holds.
    pub fn overlapping(&self, lineage: &[DirIdentity]) -> Option<&Path> {
        let own = lineage.first()?;
        self.places
            .iter()
            .find(|p| p.itself.is_some_and(|i| lineage.contains(&i)) || p.above.contains(own))
            .map(|p| p.path.as_path())
    }

    /// True when no place is known (an empty configuration).
    pub fn is_empty(&self) -> bool {
        self.places.is_empty()
    }
}

/// True when the host path `path` (followed as the operator's own paths
/// are) is, or lies inside, the directory whose identity is `dir`; a path
/// that cannot be read is reported as inside (callers use this to refuse:
/// unclear means no). Read by identity: a workspace swapped since it was
/// opened does not change the answer.
pub fn path_is_inside(path: &Path, dir: DirIdentity) -> io::Result<bool> {
    let canonical = std::fs::canonicalize(path)?;
    Ok(canonical
        .ancestors()
        .any(|a| DirIdentity::of_path(a).is_ok_and(|i| i == dir)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn id(path: &Path) -> DirIdentity {
        DirIdentity::of_path(path).expect("stat")
    }

    #[test]
    fn a_plain_directory_opens_and_keeps_its_identity() {
        let t = tempfile::tempdir().expect("tempdir");
        let ws = std::fs::canonicalize(t.path())
            .expect("canonical")
            .join("ws");
        std::fs::create_dir(&ws).expect("mkdir");
        let fd = open_dir_no_symlinks(&ws).expect("open");
        assert_eq!(DirIdentity::of(fd.as_fd()).expect("fstat"), id(&ws));
    }

    #[test]
    fn a_symlink_at_any_component_is_refused_by_both_ways() {
        let t = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(t.path()).expect("canonical");
        std::fs::create_dir_all(root.join("real/ws")).expect("mkdir");
        symlink(root.join("real"), root.join("link")).expect("symlink");
        symlink(root.join("real/ws"), root.join("last")).expect("symlink");
        for path in [root.join("link/ws"), root.join("last")] {
            assert!(
                matches!(open_dir_no_symlinks(&path), Err(OpenError::Symlink(_))),
                "{}",
                path.display()
            );
            assert!(
                matches!(walk_no_symlinks(&path), Err(OpenError::Symlink(_))),
                "{}",
                path.display()
            );
        }
        let fd = walk_no_symlinks(&root.join("real/ws")).expect("walk");
        assert_eq!(
            DirIdentity::of(fd.as_fd()).expect("fstat"),
            id(&root.join("real/ws"))
        );
    }

    #[test]
    fn only_plain_absolute_paths_are_opened() {
        for p in ["relative", "/tmp/../tmp", "/tmp/x/.."] {
            assert!(
                matches!(
                    open_dir_no_symlinks(Path::new(p)),
                    Err(OpenError::NotPlain(_))
                ),
                "{p}"
            );
        }
    }

    #[test]
    fn the_lineage_runs_from_the_directory_to_the_root() {
        let t = tempfile::tempdir().expect("tempdir");
        let ws = std::fs::canonicalize(t.path())
            .expect("canonical")
            .join("a/b");
        std::fs::create_dir_all(&ws).expect("mkdir");
        let fd = open_dir_no_symlinks(&ws).expect("open");
        let lineage = lineage(fd.as_fd()).expect("lineage");
        let expected: Vec<DirIdentity> = ws.ancestors().map(id).collect();
        assert_eq!(lineage, expected);
    }

    #[test]
    fn the_lineage_follows_the_directory_after_it_moved() {
        let t = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(t.path()).expect("canonical");
        std::fs::create_dir_all(root.join("one/ws")).expect("mkdir");
        std::fs::create_dir_all(root.join("two")).expect("mkdir");
        let fd = open_dir_no_symlinks(&root.join("one/ws")).expect("open");
        std::fs::rename(root.join("one/ws"), root.join("two/ws")).expect("rename");
        let lineage = lineage(fd.as_fd()).expect("lineage");
        assert_eq!(lineage[1], id(&root.join("two")));
    }

    #[test]
    fn places_overlap_as_the_same_inside_or_holding() {
        let t = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(t.path()).expect("canonical");
        let data = root.join("home/data");
        std::fs::create_dir_all(data.join("inner")).expect("mkdir");
        std::fs::create_dir_all(root.join("home/work/ws")).expect("mkdir");
        let places = Places::of(&[data.clone(), root.join("home/not-yet/token")]);
        let of = |p: &Path| {
            let fd = open_dir_no_symlinks(p).expect("open");
            lineage(fd.as_fd()).expect("lineage")
        };
        assert_eq!(places.overlapping(&of(&data)), Some(data.as_path()));
        assert_eq!(
            places.overlapping(&of(&data.join("inner"))),
            Some(data.as_path())
        );
        assert_eq!(
            places.overlapping(&of(&root.join("home"))),
            Some(data.as_path())
        );
        assert_eq!(places.overlapping(&of(&root.join("home/work/ws"))), None);
        // A place that does not exist yet: its existing parent holds it.
        std::fs::create_dir_all(root.join("home/not-yet")).expect("mkdir");
        let later = Places::of(&[root.join("home/not-yet/token")]);
        assert!(later.overlapping(&of(&root.join("home/not-yet"))).is_some());
        assert!(later.overlapping(&of(&root.join("home/work"))).is_none());
    }

    #[test]
    fn a_host_path_is_inside_by_identity() {
        let t = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(t.path()).expect("canonical");
        std::fs::create_dir_all(root.join("ws/bin")).expect("mkdir");
        std::fs::write(root.join("ws/bin/tool"), "").expect("write");
        std::fs::write(root.join("tool"), "").expect("write");
        let ws = id(&root.join("ws"));
        assert!(path_is_inside(&root.join("ws/bin/tool"), ws).expect("inside"));
        assert!(!path_is_inside(&root.join("tool"), ws).expect("outside"));
        assert!(path_is_inside(&root.join("missing"), ws).is_err());
    }
}
