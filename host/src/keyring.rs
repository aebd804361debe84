//! The client side's store of session keys: the key the daemon answered
//! when a session was registered, kept so that later calls about that
//! session (a report, an attach) can present it.
//!
//! One owner-only file per daemon and session under the user's state
//! directory (`$XDG_STATE_HOME/gatehost/session-keys`, or
//! `$GATEHOST_SESSION_KEYS`): the CLI, the hooks and the MCP server of
//! one user share it. A key is only as private as that user's files: an
//! agent that runs as the same user as another can read its keys, which
//! is why supervised agents should run as users of their own (see
//! docs/security.md). It must never write outside its directory, follow a
//! link there, or print a key.

use sha2::{Digest, Sha256};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The environment variable naming the keyring's directory.
pub const KEYRING_VAR: &str = "GATEHOST_SESSION_KEYS";

#[derive(Debug, Clone)]
pub struct Keyring {
    dir: PathBuf,
}

impl Keyring {
    /// The keyring in `dir`.
    pub fn at(dir: impl Into<PathBuf>) -> Keyring {
        Keyring { dir: dir.into() }
    }

    /// `$GATEHOST_SESSION_KEYS`, else the user's state directory's
    /// `gatehost/session-keys`; `None` when there is neither.
    pub fn default_for_user() -> Option<Keyring> {
        if let Some(d) = std::env::var_os(KEYRING_VAR).filter(|d| !d.is_empty()) {
            return Some(Keyring::at(d));
        }
        dirs::state_dir()
            .or_else(dirs::data_local_dir)
            .map(|d| Keyring::at(d.join("gatehost").join("session-keys")))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn file(&self, server: &str, session: &str) -> PathBuf {
        let server = hex::encode(&Sha256::digest(server.trim().as_bytes())[..8]);
        let session = hex::encode(&Sha256::digest(session.as_bytes())[..16]);
        self.dir.join(server).join(session)
    }

    /// The key kept for `session` of the daemon at `server`, if any.
    pub fn get(&self, server: &str, session: &str) -> Option<String> {
        let path = self.file(server, session);
        // Never through a link: the file is ours or it is nothing.
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if !meta.is_file() {
            return None;
        }
        let text = std::fs::read_to_string(&path).ok()?;
        let key = text.trim();
        (!key.is_empty()).then(|| key.to_string())
    }

    /// Keeps `key` for `session` (replacing an older one), owner-only,
    /// written whole or not at all.
    pub fn put(&self, server: &str, session: &str, key: &str) -> std::io::Result<()> {
        let path = self.file(server, session);
        let parent = path
            .parent()
            .ok_or_else(|| std::io::Error::other("a key file has no directory"))?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
        let tmp = parent.join(format!(".{}.tmp", uuid::Uuid::new_v4().simple()));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        let written = f
            .write_all(format!("{key}\n").as_bytes())
            .and_then(|()| f.sync_all())
            .and_then(|()| std::fs::rename(&tmp, &path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_key_is_kept_per_daemon_and_session_owner_only() {
        let t = tempfile::tempdir().expect("tempdir");
        let k = Keyring::at(t.path().join("keys"));
        assert_eq!(k.get("http://127.0.0.1:1", "s1"), None);
        k.put("http://127.0.0.1:1", "s1", "gsk_a").expect("put");
        k.put("http://127.0.0.1:2", "s1", "gsk_b").expect("put");
        assert_eq!(k.get("http://127.0.0.1:1", "s1").as_deref(), Some("gsk_a"));
        assert_eq!(k.get("http://127.0.0.1:2", "s1").as_deref(), Some("gsk_b"));
        assert_eq!(k.get("http://127.0.0.1:1", "s2"), None);
        k.put("http://127.0.0.1:1", "s1", "gsk_c").expect("replace");
        assert_eq!(k.get("http://127.0.0.1:1", "s1").as_deref(), Some("gsk_c"));
        let file = k.file("http://127.0.0.1:1", "s1");
        let mode = std::fs::metadata(&file).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(file.parent().expect("dir"))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
    }

    #[test]
    fn a_planted_link_is_not_read_as_a_key() {
        let t = tempfile::tempdir().expect("tempdir");
        let k = Keyring::at(t.path().join("keys"));
        k.put("srv", "other", "gsk_x").expect("put");
        let file = k.file("srv", "s1");
        std::fs::write(t.path().join("elsewhere"), "gsk_planted").expect("write");
        std::os::unix::fs::symlink(t.path().join("elsewhere"), &file).expect("link");
        assert_eq!(k.get("srv", "s1"), None);
    }
}
