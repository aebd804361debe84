//! The client side's store of session keys: the key the daemon answered
//! when a session was registered, kept so that later calls about that
//! session (a report, an attach) can present it.
//!
//! One owner-only file per session id under the user's state directory
//! (`$XDG_STATE_HOME/gatehost/session-keys`, or `$GATEHOST_SESSION_KEYS`),
//! holding the newest few keys answered for that id (by one daemon after
//! another, or by daemons on other ports: a daemon restarted on a new port
//! keeps its sessions and their keys): all are presented, and a daemon
//! takes the one that is its own. The CLI, the hooks and the MCP server of
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

/// The keyring at one directory: the session keys kept for each session id,
/// one owner-only file per id.
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

    /// The directory the key files are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn file(&self, session: &str) -> PathBuf {
        self.dir
            .join(hex::encode(&Sha256::digest(session.as_bytes())[..16]))
    }

    /// The keys kept for `session`, newest first (none: an empty list).
    pub fn get(&self, session: &str) -> Vec<String> {
        let path = self.file(session);
        // Never through a link: the file is ours or it is nothing.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            return Vec::new();
        };
        if !meta.is_file() || meta.len() > 64 * 1024 {
            return Vec::new();
        }
        std::fs::read_to_string(&path)
            .map(|t| {
                t.lines()
                    .map(str::trim)
                    .filter(|k| !k.is_empty())
                    .take(KEPT)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The newest key of each of the `most` sessions kept most recently
    /// (newest first): what a client presents with a read that names no
    /// session (a listing, the events), so that it sees its own sessions.
    pub fn recent(&self, most: usize) -> Vec<String> {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut files: Vec<(std::time::SystemTime, PathBuf)> = dir
            .filter_map(Result::ok)
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .filter_map(|e| {
                // Never through a link, as `get`.
                let meta = std::fs::symlink_metadata(e.path()).ok()?;
                (meta.is_file() && meta.len() <= 64 * 1024)
                    .then(|| Some((meta.modified().ok()?, e.path())))?
            })
            .collect();
        files.sort_by_key(|f| std::cmp::Reverse(f.0));
        files
            .into_iter()
            .take(most)
            .filter_map(|(_, path)| {
                std::fs::read_to_string(path).ok().and_then(|t| {
                    t.lines()
                        .map(str::trim)
                        .find(|k| !k.is_empty())
                        .map(str::to_string)
                })
            })
            .collect()
    }

    /// Keeps `key` for `session`, first of the newest [`KEPT`],
    /// owner-only, written whole or not at all.
    pub fn put(&self, session: &str, key: &str) -> std::io::Result<()> {
        let path = self.file(session);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        let mut keys = vec![key.trim().to_string()];
        keys.extend(self.get(session).into_iter().filter(|k| k != key.trim()));
        keys.truncate(KEPT);
        let tmp = self
            .dir
            .join(format!(".{}.tmp", uuid::Uuid::new_v4().simple()));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        let written = f
            .write_all(format!("{}\n", keys.join("\n")).as_bytes())
            .and_then(|()| f.sync_all())
            .and_then(|()| std::fs::rename(&tmp, &path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }
}

/// How many keys are kept for one session id.
pub const KEPT: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn recent_answers_the_newest_key_of_the_sessions_kept_last_never_through_a_link() {
        let t = tempfile::tempdir().expect("tempdir");
        let k = Keyring::at(t.path().join("keys"));
        assert!(k.recent(10).is_empty(), "no directory: no keys");
        for (i, s) in ["s1", "s2", "s3"].iter().enumerate() {
            k.put(s, &format!("gsk_old{i}")).expect("put");
            k.put(s, &format!("gsk_new{i}")).expect("put");
            let when =
                std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000 + i as u64);
            std::fs::File::options()
                .write(true)
                .open(k.file(s))
                .and_then(|f| f.set_modified(when))
                .expect("mtime");
        }
        assert_eq!(k.recent(2), ["gsk_new2", "gsk_new1"]);
        assert_eq!(k.recent(10).len(), 3);
        let outside = t.path().join("outside");
        std::fs::write(&outside, "gsk_planted\n").expect("write");
        std::os::unix::fs::symlink(&outside, k.dir().join("link")).expect("link");
        assert!(!k.recent(10).contains(&"gsk_planted".to_string()));
    }

    #[test]
    fn the_newest_keys_are_kept_per_session_owner_only() {
        let t = tempfile::tempdir().expect("tempdir");
        let k = Keyring::at(t.path().join("keys"));
        assert!(k.get("s1").is_empty());
        k.put("s1", "gsk_a").expect("put");
        k.put("s1", "gsk_b").expect("put");
        k.put("s1", "gsk_a").expect("again");
        assert_eq!(k.get("s1"), ["gsk_a", "gsk_b"]);
        assert!(k.get("s2").is_empty());
        for i in 0..20 {
            k.put("s3", &format!("gsk_{i}")).expect("put");
        }
        let kept = k.get("s3");
        assert_eq!(kept.len(), KEPT);
        assert_eq!(kept[0], "gsk_19");
        let file = k.file("s1");
        let mode = std::fs::metadata(&file).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(k.dir())
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
    }

    #[test]
    fn a_planted_link_is_not_read_as_a_key() {
        let t = tempfile::tempdir().expect("tempdir");
        let k = Keyring::at(t.path().join("keys"));
        k.put("other", "gsk_x").expect("put");
        let file = k.file("s1");
        std::fs::write(t.path().join("elsewhere"), "gsk_planted").expect("write");
        std::os::unix::fs::symlink(t.path().join("elsewhere"), &file).expect("link");
        assert!(k.get("s1").is_empty());
    }
}
