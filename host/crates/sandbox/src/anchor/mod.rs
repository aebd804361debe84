//! The workspace anchor: the one place that turns a workspace-relative path
//! into something a gate may use.
//!
//! The workspace is opened once as a `cap_std::fs::Dir`. Every path a gate
//! names (its cwd, files, later commit paths) is resolved beneath it,
//! component by component, following symlinks through that directory
//! handle. Absolute paths, `..` that leaves the root, and symlinks whose
//! target leaves the root are refused with `path escapes the workspace: P`.
//! The check is by resolution, never by string prefix, so a directory named
//! `..x` is fine and a symlink that stays inside is fine.
//!
//! The workspace itself is opened once, from its canonical path, without
//! following a symlink at any component ([`identity::open_dir_no_symlinks`]);
//! what it is and where it lies (its identity, the directories above it) is
//! read from that open handle, so the checks look at the very directory a
//! gate, plugin, judge or confined agent is given. A workspace pinned at
//! registration ([`WorkspaceAnchor::open_pinned`]) must still be the same
//! directory (device and inode), else nothing runs in it.
//!
//! This module must never hand out a host path for a workspace path without
//! resolving it first, and must never read the workspace through ambient
//! (non-`Dir`) file system calls.

pub mod identity;

pub use identity::{DirIdentity, Places};

use cap_std::fs::Dir;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Component, Path, PathBuf};

/// Most symlinks followed while resolving one path (as Linux's MAXSYMLINKS).
const MAX_SYMLINKS: usize = 40;

/// Why a workspace could not be opened, or a path in it resolved.
#[derive(Debug, thiserror::Error)]
pub enum AnchorError {
    /// The path (as given) leaves the workspace: absolute, through `..`
    /// above the root, or through a symlink pointing out.
    #[error("path escapes the workspace: {0}")]
    Escape(String),
    /// The workspace directory itself could not be resolved or opened.
    #[error("workspace {path} cannot be opened: {source}")]
    Open {
        /// The workspace path, shown.
        path: String,
        /// The operating system's error.
        source: io::Error,
    },
    /// Resolving the path (as given) followed more than 40 symlinks.
    #[error("too many levels of symlinks in the workspace path: {0}")]
    SymlinkLoop(String),
    /// The path (as given) names nothing in the workspace.
    #[error("not found in the workspace: {0}")]
    NotFound(String),
    /// A component of the path (as given) that must be a directory is not.
    #[error("not a directory in the workspace: {0}")]
    NotADirectory(String),
    /// Reading a path in the workspace (a symlink, a directory) failed
    /// otherwise.
    #[error("cannot read {path} in the workspace: {source}")]
    Io {
        /// The path in the workspace, shown.
        path: String,
        /// The operating system's error.
        source: io::Error,
    },
    /// The workspace path is not plain, or one of its components is (or
    /// became) a symlink: it is never opened through one.
    #[error("workspace {path} cannot be opened safely: {source}")]
    Unsafe {
        /// The workspace path, shown.
        path: String,
        /// What the no-symlink open refused.
        source: identity::OpenError,
    },
    /// The directory opened is not the one pinned at registration: the
    /// workspace was moved or replaced since.
    #[error(
        "workspace {path} is no longer the directory that was registered ({pinned}, now {found}): it was moved or replaced; register the session again"
    )]
    Replaced {
        /// The workspace path, shown.
        path: String,
        /// The identity recorded when the workspace was registered.
        pinned: DirIdentity,
        /// The identity of what the path opens now.
        found: DirIdentity,
    },
}

/// An opened workspace. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct WorkspaceAnchor {
    root: PathBuf,
    dir: Dir,
    /// The opened directory's identity, then those of the directories
    /// above it, read from the handle.
    lineage: Vec<DirIdentity>,
    /// A host worktree's run: the overlay its gates' processes see it
    /// through (see `supervise::WorkOverlay`).
    overlay: Option<std::sync::Arc<crate::supervise::WorkOverlay>>,
}

/// A directory inside the workspace, opened through the anchor, usable as a
/// child process's working directory without a window for the agent to swap
/// a path component between the check and the `chdir`: the child changes
/// into `/proc/self/fd/N`, the very directory the anchor opened.
#[derive(Debug)]
pub struct AnchoredDir {
    dir: Dir,
    relative: PathBuf,
}

impl AnchoredDir {
    /// The path a child process can `chdir` to. It names this open file
    /// descriptor, so it is valid only while `self` lives and only for a
    /// child spawned by this process.
    #[cfg(target_os = "linux")]
    pub fn proc_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.dir.as_fd().as_raw_fd()))
    }

    /// The path a child process can `chdir` to: where this open directory
    /// is now (`F_GETPATH`). macOS has no `/proc/self/fd`, so a component
    /// swapped between this call and the child's `chdir` is not caught
    /// here (native gates run on macOS only unconfined, `[sandbox]
    /// required = false`, which is unsafe anyway); `/dev/fd/N` if the
    /// kernel cannot say.
    #[cfg(not(target_os = "linux"))]
    pub fn proc_path(&self) -> PathBuf {
        #[cfg(target_vendor = "apple")]
        if let Ok(path) = rustix::fs::getpath(self.dir.as_fd()) {
            use std::os::unix::ffi::OsStringExt;
            return PathBuf::from(std::ffi::OsString::from_vec(path.into_bytes()));
        }
        PathBuf::from(format!("/dev/fd/{}", self.dir.as_fd().as_raw_fd()))
    }

    /// The workspace-relative path it was resolved to (`.` for the root).
    pub fn relative(&self) -> &Path {
        &self.relative
    }
}

impl WorkspaceAnchor {
    /// Opens `path` (which must be an existing directory) as the workspace:
    /// its canonical path is opened following no symlink at any component,
    /// so a component swapped for a symlink since it was resolved is an
    /// error, never another directory.
    pub fn open(path: &Path) -> Result<Self, AnchorError> {
        Self::open_pinned(path, None)
    }

    /// [`Self::open`], and, with a `pin` (the identity recorded when the
    /// workspace was registered), refused unless the opened directory is
    /// that same directory.
    pub fn open_pinned(path: &Path, pin: Option<DirIdentity>) -> Result<Self, AnchorError> {
        let root = std::fs::canonicalize(path).map_err(|source| AnchorError::Open {
            path: path.display().to_string(),
            source,
        })?;
        Self::open_exact(&root, pin)
    }

    /// [`Self::open_pinned`] of a path already canonical (a registered
    /// workspace's): not resolved again, so a symlink found at any of its
    /// components since is an error.
    pub fn open_exact(path: &Path, pin: Option<DirIdentity>) -> Result<Self, AnchorError> {
        let shown = || path.display().to_string();
        let open_err = |source| AnchorError::Open {
            path: shown(),
            source,
        };
        let root = path.to_path_buf();
        gatehost_test_hooks::before_workspace_open(&root);
        let fd = identity::open_dir_no_symlinks(&root).map_err(|source| match source {
            identity::OpenError::Io { source, .. } => open_err(source),
            source => AnchorError::Unsafe {
                path: shown(),
                source,
            },
        })?;
        let lineage = identity::lineage(std::os::fd::AsFd::as_fd(&fd)).map_err(open_err)?;
        if let Some(pinned) = pin
            && lineage[0] != pinned
        {
            return Err(AnchorError::Replaced {
                path: shown(),
                pinned,
                found: lineage[0],
            });
        }
        let dir = Dir::from_std_file(std::fs::File::from(fd));
        Ok(WorkspaceAnchor {
            root,
            dir,
            lineage,
            overlay: None,
        })
    }

    /// The same workspace, through a duplicate of the handle (for work
    /// handed to another thread).
    pub fn try_clone(&self) -> std::io::Result<Self> {
        Ok(WorkspaceAnchor {
            root: self.root.clone(),
            dir: self.dir.try_clone()?,
            lineage: self.lineage.clone(),
            overlay: self.overlay.clone(),
        })
    }

    /// The same workspace, a host worktree whose gates' processes see it
    /// through `overlay`.
    pub fn through(mut self, overlay: std::sync::Arc<crate::supervise::WorkOverlay>) -> Self {
        self.overlay = Some(overlay);
        self
    }

    /// The overlay the gates' processes see it through, if any.
    pub fn overlay(&self) -> Option<&crate::supervise::WorkOverlay> {
        self.overlay.as_deref()
    }

    /// The opened directory's identity (device and inode).
    pub fn identity(&self) -> DirIdentity {
        self.lineage[0]
    }

    /// The first of the host's own `places` that the opened directory is,
    /// lies inside or holds, judged by identity from the open handle.
    pub fn overlapping<'p>(&self, places: &'p Places) -> Option<&'p Path> {
        places.overlapping(&self.lineage)
    }

    /// True when the directory `dir` (an operator's path, followed) is the
    /// opened workspace or a directory above it.
    pub fn is_at_or_below(&self, dir: &Path) -> bool {
        std::fs::metadata(dir).is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt;
            self.lineage.contains(&DirIdentity {
                dev: m.dev(),
                ino: m.ino(),
            })
        })
    }

    /// The canonical host path of the workspace root, as it was resolved
    /// when it was opened (for messages and for what only the operator's
    /// paths decide; the checks use the handle).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The workspace directory handle.
    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// Resolves a workspace-relative path to its normalised relative form,
    /// with every symlink followed, or refuses it if it leaves the
    /// workspace. Components that do not exist yet are kept as written
    /// (a commit may name a file the agent deleted).
    pub fn resolve(&self, path: &Path) -> Result<PathBuf, AnchorError> {
        let shown = path.display().to_string();
        let escape = || AnchorError::Escape(shown.clone());
        let mut pending: VecDeque<OsString> = VecDeque::new();
        push_components(&mut pending, path).ok_or_else(escape)?;
        let mut resolved: Vec<OsString> = Vec::new();
        let mut followed = 0usize;
        while let Some(part) = pending.pop_front() {
            if part == ".." {
                if resolved.pop().is_none() {
                    return Err(escape());
                }
                continue;
            }
            let candidate: PathBuf = resolved.iter().chain(std::iter::once(&part)).collect();
            match self.dir.symlink_metadata(&candidate) {
                Ok(meta) if meta.is_symlink() => {
                    followed += 1;
                    if followed > MAX_SYMLINKS {
                        return Err(AnchorError::SymlinkLoop(shown));
                    }
                    let target = self.dir.read_link_contents(&candidate).map_err(|source| {
                        AnchorError::Io {
                            path: candidate.display().to_string(),
                            source,
                        }
                    })?;
                    let relative_target = if target.is_absolute() {
                        // An absolute target is accepted only when it names a
                        // place under the workspace root; it is then
                        // resolved again from the root.
                        resolved.clear();
                        target
                            .strip_prefix(&self.root)
                            .map_err(|_| escape())?
                            .to_path_buf()
                    } else {
                        target
                    };
                    push_components(&mut pending, &relative_target).ok_or_else(escape)?;
                }
                Ok(_) => resolved.push(part),
                Err(e) if e.kind() == io::ErrorKind::NotFound => resolved.push(part),
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOTDIR.raw_os_error()) => {
                    resolved.push(part);
                }
                Err(source) => {
                    return Err(AnchorError::Io {
                        path: candidate.display().to_string(),
                        source,
                    });
                }
            }
        }
        Ok(resolved.into_iter().collect())
    }

    /// Resolves `path` and opens it as a directory through the anchor.
    pub fn open_dir(&self, path: &Path) -> Result<AnchoredDir, AnchorError> {
        let relative = self.resolve(path)?;
        let shown = path.display().to_string();
        let target = if relative.as_os_str().is_empty() {
            Path::new(".")
        } else {
            relative.as_path()
        };
        let dir = self.dir.open_dir(target).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => AnchorError::NotFound(shown.clone()),
            _ if e.raw_os_error() == Some(rustix::io::Errno::NOTDIR.raw_os_error()) => {
                AnchorError::NotADirectory(shown.clone())
            }
            // cap-std refuses, by its own resolution, anything that a race
            // made escape after our check.
            io::ErrorKind::PermissionDenied if is_cap_std_escape(&e) => {
                AnchorError::Escape(shown.clone())
            }
            _ => AnchorError::Io {
                path: shown.clone(),
                source: e,
            },
        })?;
        Ok(AnchoredDir {
            dir,
            relative: if relative.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                relative
            },
        })
    }

    /// True when a host path (a program, a configuration file) lies inside
    /// the workspace once symlinks are resolved, so the agent could edit it.
    /// A path that cannot be canonicalised is reported as inside: callers
    /// use this to refuse, so unclear means no.
    pub fn contains_host_path(&self, host_path: &Path) -> bool {
        self.holds_host_path(host_path).unwrap_or(true)
    }

    /// [`Self::contains_host_path`], telling a path that cannot be read
    /// (a missing program) from one inside the workspace.
    pub fn holds_host_path(&self, host_path: &Path) -> io::Result<bool> {
        identity::path_is_inside(host_path, self.identity())
    }
}

fn is_cap_std_escape(e: &io::Error) -> bool {
    e.to_string().contains("outside of the filesystem")
}

/// Queues the components of `path` at the front of `pending`, in order.
/// Returns `None` for an absolute path or a prefix (they always escape).
fn push_components(pending: &mut VecDeque<OsString>, path: &Path) -> Option<()> {
    let mut parts = Vec::new();
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => return None,
            Component::CurDir => {}
            Component::ParentDir => parts.push(OsString::from("..")),
            Component::Normal(name) => parts.push(name.to_os_string()),
        }
    }
    for part in parts.into_iter().rev() {
        pending.push_front(part);
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    struct Fixture {
        _outer: tempfile::TempDir,
        ws: PathBuf,
        outside: PathBuf,
    }

    /// outer/ws is the workspace; outer/outside is a sibling it must not reach.
    fn fixture() -> Fixture {
        let outer = tempfile::tempdir().expect("tempdir");
        let ws = outer.path().join("ws");
        let outside = outer.path().join("outside");
        std::fs::create_dir_all(ws.join("src/inner")).expect("mkdir");
        std::fs::create_dir_all(ws.join("..x")).expect("mkdir ..x");
        std::fs::create_dir_all(&outside).expect("mkdir outside");
        std::fs::write(ws.join("src/lib.rs"), "fn main() {}").expect("write");
        std::fs::write(outside.join("secret"), "s").expect("write");
        Fixture {
            _outer: outer,
            ws,
            outside,
        }
    }

    fn anchor(f: &Fixture) -> WorkspaceAnchor {
        WorkspaceAnchor::open(&f.ws).expect("open workspace")
    }

    fn assert_escape(result: Result<PathBuf, AnchorError>, path: &str) {
        match result {
            Err(AnchorError::Escape(p)) => {
                assert_eq!(p, path);
                let msg = AnchorError::Escape(p).to_string();
                assert_eq!(msg, format!("path escapes the workspace: {path}"));
            }
            other => panic!("{path}: expected an escape, got {other:?}"),
        }
    }

    #[test]
    fn plain_relative_paths_resolve_inside() {
        let f = fixture();
        let a = anchor(&f);
        assert_eq!(
            a.resolve(Path::new("src/lib.rs")).unwrap(),
            PathBuf::from("src/lib.rs")
        );
        assert_eq!(
            a.resolve(Path::new("./src/./inner/..")).unwrap(),
            PathBuf::from("src")
        );
        assert_eq!(a.resolve(Path::new("")).unwrap(), PathBuf::new());
        assert_eq!(
            a.resolve(Path::new("not/yet/there")).unwrap(),
            PathBuf::from("not/yet/there")
        );
    }

    #[test]
    fn absolute_paths_are_refused_even_inside_the_workspace() {
        let f = fixture();
        let a = anchor(&f);
        assert_escape(a.resolve(Path::new("/etc/passwd")), "/etc/passwd");
        let inside = f.ws.join("src").display().to_string();
        assert_escape(a.resolve(Path::new(&inside)), &inside);
    }

    #[test]
    fn dotdot_that_leaves_the_root_is_refused() {
        let f = fixture();
        let a = anchor(&f);
        assert_escape(a.resolve(Path::new("..")), "..");
        assert_escape(
            a.resolve(Path::new("../outside/secret")),
            "../outside/secret",
        );
        assert_escape(a.resolve(Path::new("src/../../ws/src")), "src/../../ws/src");
        // `..` that stays inside is fine.
        assert_eq!(
            a.resolve(Path::new("src/inner/../lib.rs")).unwrap(),
            PathBuf::from("src/lib.rs")
        );
    }

    #[test]
    fn a_directory_named_dotdot_x_is_an_ordinary_name() {
        let f = fixture();
        let a = anchor(&f);
        assert_eq!(a.resolve(Path::new("..x")).unwrap(), PathBuf::from("..x"));
        let d = a.open_dir(Path::new("..x")).expect("..x opens");
        assert_eq!(d.relative(), Path::new("..x"));
    }

    #[test]
    fn symlinks_that_stay_inside_are_followed() {
        let f = fixture();
        symlink("src/inner", f.ws.join("rel-in")).unwrap();
        symlink(f.ws.join("src"), f.ws.join("abs-in")).unwrap();
        symlink("../lib.rs", f.ws.join("src/inner/up-in")).unwrap();
        let a = anchor(&f);
        assert_eq!(
            a.resolve(Path::new("rel-in")).unwrap(),
            PathBuf::from("src/inner")
        );
        assert_eq!(
            a.resolve(Path::new("abs-in/lib.rs")).unwrap(),
            PathBuf::from("src/lib.rs")
        );
        assert_eq!(
            a.resolve(Path::new("src/inner/up-in")).unwrap(),
            PathBuf::from("src/lib.rs")
        );
        assert!(a.open_dir(Path::new("rel-in")).is_ok());
    }

    #[test]
    fn symlinks_that_leave_are_refused_at_any_component() {
        let f = fixture();
        symlink(&f.outside, f.ws.join("abs-out")).unwrap();
        symlink("../outside", f.ws.join("rel-out")).unwrap();
        symlink("../../../outside", f.ws.join("src/inner/deep-out")).unwrap();
        symlink("/", f.ws.join("src/root")).unwrap();
        let a = anchor(&f);
        assert_escape(a.resolve(Path::new("abs-out")), "abs-out");
        assert_escape(a.resolve(Path::new("abs-out/secret")), "abs-out/secret");
        assert_escape(a.resolve(Path::new("rel-out/secret")), "rel-out/secret");
        assert_escape(
            a.resolve(Path::new("src/inner/deep-out")),
            "src/inner/deep-out",
        );
        assert_escape(a.resolve(Path::new("src/root/etc")), "src/root/etc");
        match a.open_dir(Path::new("rel-out")) {
            Err(AnchorError::Escape(p)) => assert_eq!(p, "rel-out"),
            other => panic!("expected escape, got {other:?}"),
        }
    }

    #[test]
    fn a_chain_of_inside_links_that_ends_outside_is_refused() {
        let f = fixture();
        symlink("hop2", f.ws.join("hop1")).unwrap();
        symlink("src/../..", f.ws.join("hop2")).unwrap();
        let a = anchor(&f);
        assert_escape(a.resolve(Path::new("hop1/outside")), "hop1/outside");
    }

    #[test]
    fn symlink_loops_end_with_an_error() {
        let f = fixture();
        symlink("loop-b", f.ws.join("loop-a")).unwrap();
        symlink("loop-a", f.ws.join("loop-b")).unwrap();
        let a = anchor(&f);
        assert!(matches!(
            a.resolve(Path::new("loop-a")),
            Err(AnchorError::SymlinkLoop(_))
        ));
    }

    #[test]
    fn open_dir_reports_missing_and_non_directories() {
        let f = fixture();
        let a = anchor(&f);
        assert!(matches!(
            a.open_dir(Path::new("nope")),
            Err(AnchorError::NotFound(_))
        ));
        assert!(matches!(
            a.open_dir(Path::new("src/lib.rs")),
            Err(AnchorError::NotADirectory(_))
        ));
    }

    #[test]
    fn host_paths_inside_the_workspace_are_detected_through_links() {
        let f = fixture();
        let a = anchor(&f);
        assert!(a.contains_host_path(&f.ws.join("src/lib.rs")));
        assert!(!a.contains_host_path(&f.outside.join("secret")));
        let link = f.outside.join("into-ws");
        symlink(f.ws.join("src"), &link).unwrap();
        assert!(a.contains_host_path(&link));
    }
}
