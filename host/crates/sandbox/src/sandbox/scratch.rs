//! Gates' private directories (a gate's `TMPDIR`, a judge's working
//! directory) under the scratch root: made owner-only (or the gate
//! user's) for one gate, locked while in use, removed when dropped, and
//! those a killed host left behind reclaimed at the next start.
//!
//! It must never remove a directory a living host holds (its lock), nor
//! follow a link while removing.

use super::{Sandbox, SandboxError};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// One gate's private directory (its `TMPDIR`, and a judge's working
/// directory), removed when dropped.
#[derive(Debug)]
pub struct Scratch {
    dir: PathBuf,
    /// The directory, open and locked (`flock`, exclusive) while it is in
    /// use: what a reclaim ([`Sandbox::reclaim_scratch`]) can lock was left
    /// by a process that died.
    _held: Option<std::fs::File>,
}

impl Scratch {
    /// Its `tmp/`: the gate's `TMPDIR`, writable by it.
    pub fn tmp(&self) -> PathBuf {
        self.dir.join("tmp")
    }

    /// Its `cwd/`: a judge's empty working directory (made only for a
    /// judge).
    pub fn cwd(&self) -> PathBuf {
        self.dir.join("cwd")
    }

    /// The directory itself (its `tmp/` and `cwd/`).
    pub fn dir_path(&self) -> PathBuf {
        self.dir.clone()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // remove_dir_all does not follow symlinks the gate left there.
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            tracing::warn!(dir = %self.dir.display(), error = %e, "cannot remove a gate's private directory");
        }
    }
}

impl Sandbox {
    /// A fresh owner-only directory with `tmp/` (and `cwd/` for a judge).
    pub(super) fn scratch(&self, judge: bool) -> Result<Scratch, SandboxError> {
        let root = self
            .scratch_root
            .as_ref()
            .ok_or_else(|| SandboxError::Scratch("no scratch directory (no cache dir)".into()))?;
        // Made (and its mode set) at start; recreated if someone removed it.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(if self.user.is_some() { 0o711 } else { 0o700 })
            .create(root)
            .map_err(|e| SandboxError::Scratch(format!("{}: {e}", root.display())))?;
        let dir = root.join(format!("g-{}", uuid::Uuid::new_v4().simple()));
        let mk = |p: &Path| {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(p)
                .map_err(|e| SandboxError::Scratch(format!("{}: {e}", p.display())))
        };
        mk(&dir)?;
        let held = std::fs::File::open(&dir)
            .and_then(|f| {
                rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive)?;
                Ok(f)
            })
            .map_err(|e| SandboxError::Scratch(format!("lock {}: {e}", dir.display())))?;
        let scratch = Scratch {
            dir,
            _held: Some(held),
        };
        mk(&scratch.tmp())?;
        if judge {
            mk(&scratch.cwd())?;
        }
        if let Some((uid, gid)) = self.user {
            for p in [scratch.dir.clone(), scratch.tmp(), scratch.cwd()] {
                if p.exists() {
                    rustix::fs::chown(
                        &p,
                        Some(rustix::fs::Uid::from_raw(uid)),
                        Some(rustix::fs::Gid::from_raw(gid)),
                    )
                    .map_err(|e| SandboxError::Scratch(format!("chown {}: {e}", p.display())))?;
                }
            }
        }
        Ok(scratch)
    }
}

/// A scratch directory younger than this is never reclaimed: it may be
/// between its `mkdir` and its lock.
const RECLAIM_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

impl Sandbox {
    /// Removes the private directories (`g-…` under the scratch root) that
    /// no living process holds: those of gates whose host was killed
    /// (SIGKILL, a crash) before it could remove them. A directory in use
    /// is locked by its host; one made in the last minute is left alone.
    /// Returns how many were removed; each is logged.
    pub fn reclaim_scratch(&self) -> usize {
        let Some(root) = &self.scratch_root else {
            return 0;
        };
        let Ok(entries) = std::fs::read_dir(root) else {
            return 0;
        };
        let now = std::time::SystemTime::now();
        let mut removed = 0;
        for e in entries.flatten() {
            let name = e.file_name();
            if !name.to_string_lossy().starts_with("g-") {
                continue;
            }
            let path = e.path();
            // Never through a link (the root is the host's own; a gate
            // user may not write it, but nothing is taken on trust).
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let young = meta
                .modified()
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .is_none_or(|age| age < RECLAIM_AFTER);
            if !meta.is_dir() || young {
                continue;
            }
            let Ok(dir) = rustix::fs::open(
                &path,
                rustix::fs::OFlags::RDONLY
                    | rustix::fs::OFlags::DIRECTORY
                    | rustix::fs::OFlags::NOFOLLOW
                    | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            ) else {
                continue;
            };
            if rustix::fs::flock(&dir, rustix::fs::FlockOperation::NonBlockingLockExclusive)
                .is_err()
            {
                continue;
            }
            match std::fs::remove_dir_all(&path) {
                Ok(()) => {
                    removed += 1;
                    tracing::info!(dir = %path.display(), "removed a gate's private directory that its dead host left");
                }
                Err(e) => {
                    tracing::warn!(dir = %path.display(), error = %e, "cannot remove a gate's private directory its dead host left");
                }
            }
        }
        removed
    }
}
