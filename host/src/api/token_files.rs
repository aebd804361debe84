//! The token files a daemon writes in its data directory when its tokens
//! change (`gatehost token rotate`, or the cluster's tokens adopted on
//! PostgreSQL): owner-only (0600) and atomic (a fresh file in the same
//! directory, synced, then renamed over the old one, and the directory
//! synced), so that a reader (the CLI, a hook, `gatehost mcp`) finds the
//! old token or the new one, never a part. A symlink, a directory or any
//! other non-regular file at the path is refused, never followed or
//! replaced: someone put it there. Also the one generator of new tokens.
//!
//! It owns that writing and the generator; it must never write a file the
//! configuration named (those are the operator's) nor put a token's value
//! in an error or a log.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// A token file that cannot be read, made or written: its path and why
/// (never its content).
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("token file {path}: {message}")]
    File { path: String, message: String },
}

/// A new random token: 64 hexadecimal digits (two v4 UUIDs, 244 random
/// bits), as every token the daemon makes.
pub(crate) fn fresh_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Why a token file cannot be written at `path`: a symlink or another
/// non-regular file there (`None`: nothing there, or a regular file).
pub(crate) fn refusal(path: &Path) -> Option<TokenError> {
    let err = |message: String| TokenError::File {
        path: path.display().to_string(),
        message,
    };
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Some(err(
            "is a symbolic link: refused (never followed nor replaced); remove it".into(),
        )),
        Ok(m) if !m.file_type().is_file() => {
            Some(err("is not a regular file: refused; remove it".into()))
        }
        Ok(_) => None,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => Some(err(e.to_string())),
    }
}

/// Writes `value` (and a newline) to `path`, owner-only and atomically;
/// refuses a path that is a symlink or not a regular file.
pub(crate) fn write_token_file(path: &Path, value: &str) -> Result<(), TokenError> {
    let err = |message: String| TokenError::File {
        path: path.display().to_string(),
        message,
    };
    if let Some(e) = refusal(path) {
        return Err(e);
    }
    let dir = path
        .parent()
        .ok_or_else(|| err("has no directory".into()))?;
    let name = path
        .file_name()
        .ok_or_else(|| err("has no file name".into()))?;
    let temp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        uuid::Uuid::new_v4().simple()
    ));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&temp)?;
        f.write_all(format!("{value}\n").as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&temp, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(err(format!("cannot write: {e}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_token_file_is_replaced_whole_and_owner_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("agent.token");
        std::fs::write(&p, "old-token-0123456789\n").expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let token = fresh_token();
        assert_eq!(token.len(), 64);
        assert_ne!(token, fresh_token());
        write_token_file(&p, &token).expect("write");
        assert_eq!(
            std::fs::read_to_string(&p).expect("read"),
            format!("{token}\n")
        );
        let mode = std::fs::metadata(&p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // Nothing else left in the directory (no temp file).
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, ["agent.token"]);
        // A new file too.
        let q = dir.path().join("operator.token");
        write_token_file(&q, &token).expect("create");
        assert_eq!(
            std::fs::metadata(&q).expect("meta").permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn a_planted_symlink_or_directory_at_the_token_path_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "not a token\n").expect("write");
        let link = dir.path().join("operator.token");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        let secret = fresh_token();
        let err = write_token_file(&link, &secret).expect_err("refused");
        let msg = err.to_string();
        assert!(msg.contains("symbolic link"), "{msg}");
        assert!(!msg.contains(&secret), "no value in the error: {msg}");
        // Neither the link nor its target changed.
        assert!(
            std::fs::symlink_metadata(&link)
                .expect("meta")
                .file_type()
                .is_symlink()
        );
        assert_eq!(
            std::fs::read_to_string(&target).expect("read"),
            "not a token\n"
        );
        let sub = dir.path().join("agent.token");
        std::fs::create_dir(&sub).expect("mkdir");
        let err = write_token_file(&sub, &secret).expect_err("refused");
        assert!(err.to_string().contains("not a regular file"), "{err}");
        assert!(sub.is_dir());
    }
}
