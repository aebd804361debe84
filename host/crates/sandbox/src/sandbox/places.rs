//! The sandbox's directories: the scratch root (where it is by default
//! and how it is made, for gatehost's own user or shared with a gate
//! user), what a gate user may search or write, and read grants carved
//! around the host's private paths. It must never change the mode of a
//! directory it did not make, but the scratch root's own.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::SandboxConfig;

/// The first directory on the way to `path` (its ancestors and itself)
/// that `uid`/`gid` may not search, if any.
pub(super) fn untraversable(path: &Path, uid: u32, gid: u32) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let mut walked = PathBuf::new();
    for c in path.components() {
        walked.push(c);
        let Ok(m) = std::fs::metadata(&walked) else {
            return Some(walked);
        };
        let mode = m.mode();
        let ok = if m.uid() == uid {
            mode & 0o100 != 0
        } else if m.gid() == gid {
            mode & 0o010 != 0
        } else {
            mode & 0o001 != 0
        };
        if !ok {
            return Some(walked);
        }
    }
    None
}

/// Whether `uid`/`gid` may create files in the directory `dir`.
pub(super) fn writable_by(dir: &Path, uid: u32, gid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(dir).is_ok_and(|m| {
        let mode = m.mode();
        if m.uid() == uid {
            mode & 0o300 == 0o300
        } else if m.gid() == gid {
            mode & 0o030 == 0o030
        } else {
            mode & 0o003 == 0o003
        }
    })
}

/// Where gates' private directories are made: `scratch_dir`; else, with
/// a gate user, `<system temp dir>/gatehost-<uid>-scratch` (the user's
/// cache directory is in a home the gate user cannot enter, and making it
/// there would change the modes of directories that are the user's);
/// else `<user cache dir>/gatehost/scratch`.
pub fn scratch_root_of(config: &SandboxConfig) -> Option<PathBuf> {
    if let Some(dir) = &config.scratch_dir {
        return Some(dir.clone());
    }
    if config.user.is_some() {
        let uid = rustix::process::geteuid().as_raw();
        return Some(std::env::temp_dir().join(format!("gatehost-{uid}-scratch")));
    }
    dirs::cache_dir().map(|d| d.join("gatehost").join("scratch"))
}

/// Makes the scratch root for a gate user: it (and missing parents) made
/// 0711, searchable but not listable by the gate user; an existing root
/// must be a directory (not a link) of gatehost's own user that nobody
/// else may write (in a shared temp directory another user could have made
/// it first). Existing parents are never changed.
pub(super) fn make_shared_root(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o711)
        .create(dir)
        .map_err(|e| e.to_string())?;
    let meta = std::fs::symlink_metadata(dir).map_err(|e| e.to_string())?;
    let me = rustix::process::geteuid().as_raw();
    if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o022 != 0 {
        return Err(format!(
            "it is not a directory of uid {me} that only it may write (a {}, uid {}, mode {:o}); \
             remove it or name another",
            if meta.file_type().is_symlink() {
                "symbolic link"
            } else if meta.is_dir() {
                "directory"
            } else {
                "file"
            },
            meta.uid(),
            meta.mode() & 0o7777
        ));
    }
    if meta.mode() & 0o7777 != 0o711 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Makes `dir` (and its parents) exist, and `dir` owner-only.
pub(super) fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let meta = std::fs::metadata(dir)?;
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// The grants `wanted` with every protected path carved out: a grant that
/// holds a protected path is replaced by its children (recursively), minus
/// the protected one; a grant that is, or is inside, a protected path is
/// dropped. Grants that do not exist are dropped (Landlock rules need an
/// open file).
pub(super) fn grants_around(wanted: &[PathBuf], protected: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for w in wanted {
        let Ok(canonical) = std::fs::canonicalize(w) else {
            continue;
        };
        carve(&canonical, protected, &mut out, 0);
    }
    out.sort();
    out.dedup();
    out
}

fn carve(grant: &Path, protected: &[PathBuf], out: &mut Vec<PathBuf>, depth: usize) {
    if protected.iter().any(|p| grant.starts_with(p)) {
        return;
    }
    if !protected.iter().any(|p| p.starts_with(grant)) {
        out.push(grant.to_path_buf());
        return;
    }
    // Too deep to carve sensibly: leave the whole subtree out.
    if depth > 16 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(grant) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(canonical) = std::fs::canonicalize(e.path()) else {
            continue;
        };
        if canonical.parent() == Some(grant) {
            carve(&canonical, protected, out, depth + 1);
        } else {
            // A symlink to elsewhere: granted as its target, if allowed.
            if !protected
                .iter()
                .any(|p| p.starts_with(&canonical) || canonical.starts_with(p))
            {
                out.push(canonical);
            }
        }
    }
}
