//! A worktree's run through an overlay: the layers a run's gates write
//! to instead of the worktree, and what the host trusts after such a run.
//!
//! Owns: the run's layer directories ([`Lease::layers`]: `upper` and
//! `work` under `.layers/` in the worktree root, made empty before the
//! run, owned by the host, the upper one with the worktree's owner and
//! mode, which the overlay's root shows), the granted caches made as
//! directories of the worktree before the run (so that they are bound
//! through the overlay and what a gate builds there is kept), and the end
//! of an overlaid run ([`Lease::overlaid`]): the worktree is as the sync
//! left it, so it is trusted as settled at once, and the layers are moved
//! aside and removed in the background (a cost of what the run wrote,
//! never of the worktree's size).
//!
//! Must never: trust a worktree after a run one of whose processes did
//! not see it through the overlay (the caller asks the overlay; see
//! `supervise::WorkOverlay::bypassed`), put the layers inside a worktree
//! (a gate would reach them), or follow a link when making a cache.

use super::{Lease, WorktreeError};
use cap_std::fs::Dir;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The layers of one run's overlay over a leased worktree.
#[derive(Debug)]
pub struct Layers {
    /// Where the run's writes land.
    pub upper: PathBuf,
    /// The overlay's own working directory (same file system).
    pub work: PathBuf,
    /// The granted caches made as directories of the worktree
    /// (worktree-relative), to bind through.
    pub caches: Vec<PathBuf>,
}

/// The directory of the layers, in the worktree root (never a worktree's
/// name: those never begin with a dot).
const LAYERS: &str = ".layers";

/// A unique name among this process's layers put aside.
fn aside_name() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!("gone-{}-{}", std::process::id(), N.fetch_add(1, Relaxed))
}

impl Lease {
    /// Empty layers for this run's overlay, and its granted caches made
    /// (an entry of the tree or anything not a directory at a cache's
    /// place leaves that cache unbound).
    pub fn layers(&self) -> Result<Layers, WorktreeError> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let root_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| WorktreeError::Root { path, source }
        };
        let Some(parent) = self.path.parent() else {
            return Err(WorktreeError::Root {
                path: self.path.clone(),
                source: std::io::ErrorKind::InvalidInput.into(),
            });
        };
        let name = self.path.file_name().unwrap_or(OsStr::new("worktree"));
        let layers = parent.join(LAYERS);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(&layers)
            .map_err(root_err(&layers))?;
        sweep_once(&layers);
        let base = layers.join(name);
        // What a run before left (a host that was killed): put aside.
        if std::fs::symlink_metadata(&base).is_ok() {
            let aside = layers.join(aside_name());
            std::fs::rename(&base, &aside).map_err(root_err(&base))?;
            remove_in_background(aside);
        }
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&base)
            .map_err(root_err(&base))?;
        let (upper, work) = (base.join("upper"), base.join("work"));
        for dir in [&upper, &work] {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(dir)
                .map_err(root_err(dir))?;
        }
        // The overlay's root shows the upper layer's owner and mode: the
        // worktree's.
        let meta = std::fs::metadata(&self.path).map_err(root_err(&self.path))?;
        std::fs::set_permissions(
            &upper,
            std::fs::Permissions::from_mode(meta.permissions().mode() & 0o7777),
        )
        .map_err(root_err(&upper))?;
        if let Some((uid, gid)) = self.owner {
            std::os::unix::fs::lchown(&upper, Some(uid), Some(gid)).map_err(root_err(&upper))?;
        }
        let mut caches = Vec::new();
        if !self.keep.is_empty() {
            let root = self.open_root()?;
            for cache in self.keep.iter() {
                let rel = Path::new(OsStr::from_bytes(cache));
                match make_cache(&root, rel, self.owner) {
                    Ok(()) => caches.push(rel.to_path_buf()),
                    Err(e) => {
                        tracing::debug!(cache = %rel.display(), error = %e, "a granted cache cannot be made in the worktree: what a gate writes there is not kept");
                    }
                }
            }
        }
        Ok(Layers {
            upper,
            work,
            caches,
        })
    }

    /// After a run whose every process saw the worktree through the
    /// overlay made with [`Lease::layers`]: the worktree is as the sync
    /// left it (the granted caches aside, which a sync keeps), so it is
    /// settled now, and returned; its layers are removed in the
    /// background.
    pub fn overlaid(mut self) {
        if self.manifest.last.is_some() {
            self.manifest.settled = true;
        }
        tracing::debug!(worktree = %self.path.display(), "the run's gates saw the worktree through an overlay: nothing to settle");
        if let Some(parent) = self.path.parent() {
            let name = self.path.file_name().unwrap_or(OsStr::new("worktree"));
            let base = parent.join(LAYERS).join(name);
            let aside = parent.join(LAYERS).join(aside_name());
            match std::fs::rename(&base, &aside) {
                Ok(()) => remove_in_background(aside),
                Err(e) => {
                    tracing::debug!(layers = %base.display(), error = %e, "a run's layers cannot be put aside (the next run's are made afresh)");
                }
            }
        }
    }
}

/// Makes the directory `rel` of the worktree (and those above it), owned
/// by `owner`, never through a link.
fn make_cache(root: &Dir, rel: &Path, owner: Option<(u32, u32)>) -> std::io::Result<()> {
    let mut at = PathBuf::new();
    for part in rel.components() {
        at.push(part);
        match root.symlink_metadata(&at) {
            Ok(m) if m.is_dir() => continue,
            Ok(_) => return Err(std::io::ErrorKind::AlreadyExists.into()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                root.create_dir(&at)?;
                if let Some((uid, gid)) = owner {
                    rustix::fs::chownat(
                        root,
                        &at,
                        Some(rustix::fs::Uid::from_raw(uid)),
                        Some(rustix::fs::Gid::from_raw(gid)),
                        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                    )?;
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Once per layers directory in this process: removes (in the
/// background) the layers another process put aside and did not remove
/// (a host stopped or killed while removing them).
fn sweep_once(layers: &Path) {
    static SWEPT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let mut swept = SWEPT.lock().unwrap_or_else(|p| p.into_inner());
    if swept.iter().any(|p| p == layers) {
        return;
    }
    swept.push(layers.to_path_buf());
    let ours = format!("gone-{}-", std::process::id());
    let Ok(entries) = std::fs::read_dir(layers) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("gone-") && !name.starts_with(&ours) {
            remove_in_background(entry.path());
        }
    }
}

/// Removes `dir` (layers put aside) on a thread of its own: its cost is
/// what the run wrote.
fn remove_in_background(dir: PathBuf) {
    let spawned = std::thread::Builder::new()
        .name("gatehost-layers".into())
        .spawn(move || {
            if let Err(e) = remove_all(&dir) {
                tracing::warn!(layers = %dir.display(), error = %e, "a run's layers cannot be removed");
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the removal of a run's layers");
    }
}

/// `remove_dir_all`, after opening up the overlay's work directory (which
/// it leaves with no permission).
fn remove_all(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let work = dir.join("work").join("work");
    if std::fs::symlink_metadata(&work).is_ok_and(|m| m.is_dir()) {
        std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o700))?;
    }
    std::fs::remove_dir_all(dir)
}
