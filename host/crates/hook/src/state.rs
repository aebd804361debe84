//! Standalone mode's per-session standing ([`Standing`]), kept in the
//! user's state directory (`$XDG_STATE_HOME/gatehost/hooks`, or
//! `--state-dir`), one small JSON file per agent session, so retries are
//! counted across the hook's processes.
//!
//! It owns the file's name (a hash of the agent and the session id: the id
//! is the CLI's, never a path), its lock (read-modify-write under an
//! exclusive lock on the file) and its atomic replacement. It must never
//! live in the workspace (the agent writes there), and an unreadable or
//! corrupt file is an error, never a fresh start: a fresh start would hand
//! the agent its retries again.

use super::adapter::AgentCli;
use super::decide::Standing;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Why a session's standing (or its stop ledger entry) could not be read
/// or saved.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// No `--state-dir` was given and the user has no state (or local
    /// data) directory.
    #[error("no state directory: set XDG_STATE_HOME or HOME, or pass --state-dir")]
    NoDir,
    /// Reading, writing or locking a state file or directory failed.
    #[error("hook state {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A state file does not decode (or a record could not be encoded).
    #[error(
        "hook state {path} is corrupt ({message}); remove it to start this session's count again"
    )]
    Corrupt {
        /// The state file.
        path: PathBuf,
        /// The decoder's message.
        message: String,
    },
    /// Another hook process still held the session's lock when this hook's
    /// deadline came.
    #[error("hook state {path}: still locked by another process at the hook's deadline")]
    Locked {
        /// The file that stayed locked.
        path: PathBuf,
    },
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record {
    agent: String,
    session_id: String,
    #[serde(flatten)]
    standing: Standing,
    /// [`followup_digest`] of the last block reason the session was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    followup: Option<String>,
    updated_at: u64,
}

/// One session's standing and the digest of the last block reason it was
/// sent (a prompt with that text is gatehost's own follow-up, not a
/// person's).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    /// Where the session stands in its retries.
    pub standing: Standing,
    /// [`followup_digest`] of the last block reason it was sent, if any.
    pub followup: Option<String>,
}

/// The digest a block reason is remembered by, and a prompt compared with
/// (surrounding white space aside).
pub fn followup_digest(text: &str) -> String {
    hex::encode(Sha256::digest(text.trim().as_bytes()))
}

/// The directory of the sessions' standings.
#[derive(Debug, Clone)]
pub struct StateDir {
    dir: PathBuf,
}

impl StateDir {
    /// `dir`, else the user's state directory's `gatehost/hooks`.
    pub fn open(dir: Option<&Path>) -> Result<StateDir, StateError> {
        let dir = match dir {
            Some(d) => d.to_path_buf(),
            None => dirs::state_dir()
                .or_else(dirs::data_local_dir)
                .ok_or(StateError::NoDir)?
                .join("gatehost")
                .join("hooks"),
        };
        Ok(StateDir { dir })
    }

    /// The directory (which may not exist until a standing is saved).
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The file of one agent session.
    fn file(&self, agent: AgentCli, session_id: &str) -> PathBuf {
        self.dir.join(session_file_name(agent, session_id))
    }

    /// Reads the session's standing, lets `f` decide the next one, and
    /// writes it, all under the session's lock.
    pub fn update<T>(
        &self,
        agent: AgentCli,
        session_id: &str,
        f: impl FnOnce(Standing) -> (Standing, T),
    ) -> Result<T, StateError> {
        self.update_session(agent, session_id, |session| {
            let (standing, out) = f(session.standing);
            let followup = session.followup.clone();
            (Session { standing, followup }, out)
        })
    }

    /// [`StateDir::update`] of the whole [`Session`].
    pub fn update_session<T>(
        &self,
        agent: AgentCli,
        session_id: &str,
        f: impl FnOnce(&Session) -> (Session, T),
    ) -> Result<T, StateError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StateError::Io { path, source }
        };
        create_private_dir(&self.dir).map_err(io(&self.dir))?;
        let path = self.file(agent, session_id);
        let lock_path = path.with_extension("lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io(&lock_path))?;
        lock.lock().map_err(io(&lock_path))?;
        let session = match File::open(&path) {
            Ok(mut f) => {
                let mut text = String::new();
                f.read_to_string(&mut text).map_err(io(&path))?;
                let record: Record =
                    serde_json::from_str(&text).map_err(|e| StateError::Corrupt {
                        path: path.clone(),
                        message: e.to_string(),
                    })?;
                Session {
                    standing: record.standing,
                    followup: record.followup,
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Session::default(),
            Err(e) => return Err(io(&path)(e)),
        };
        let (next, out) = f(&session);
        if next != session {
            let record = Record {
                agent: agent.name().to_string(),
                session_id: session_id.to_string(),
                standing: next.standing,
                followup: next.followup,
                updated_at: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
            };
            let mut tmp = tempfile::NamedTempFile::new_in(&self.dir).map_err(io(&self.dir))?;
            let text = serde_json::to_vec(&record).map_err(|e| StateError::Corrupt {
                path: path.clone(),
                message: e.to_string(),
            })?;
            tmp.write_all(&text).map_err(io(&path))?;
            tmp.as_file().sync_all().map_err(io(&path))?;
            tmp.persist(&path).map_err(|e| io(&path)(e.error))?;
        }
        drop(lock);
        Ok(out)
    }

    /// Forgets an ended session: removes its standing and its lock file,
    /// under its lock. Returns whether there was a standing. (A call for
    /// the same session racing this one could hold the unlinked lock; none
    /// comes after the CLI said the session ended.) The CLI gives a
    /// session's end seconds: a lock still held at `deadline` (a stuck
    /// process of the same user) is [`StateError::Locked`], not a wait.
    pub fn forget(
        &self,
        agent: AgentCli,
        session_id: &str,
        deadline: std::time::Instant,
    ) -> Result<bool, StateError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StateError::Io { path, source }
        };
        let path = self.file(agent, session_id);
        let lock_path = path.with_extension("lock");
        let lock = match OpenOptions::new().write(true).open(&lock_path) {
            Ok(lock) => lock,
            // Never updated: nothing to forget.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io(&lock_path)(e)),
        };
        lock_by(&lock, &lock_path, deadline)?;
        let had = match std::fs::remove_file(&path) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(io(&path)(e)),
        };
        std::fs::remove_file(&lock_path).map_err(io(&lock_path))?;
        drop(lock);
        Ok(had)
    }
}

impl StateDir {
    /// Removes the standings (and their locks) untouched for longer than
    /// `older_than`: sessions that never said they ended (a killed CLI, a
    /// sub-agent's own count); returns how many. A session that comes back
    /// after that long starts its count again.
    pub fn prune(&self, older_than: std::time::Duration) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let mut pruned = 0;
        for entry in entries.flatten() {
            let path = entry.path();
            let is_standing = path.extension().is_some_and(|e| e == "json")
                && entry.file_type().is_ok_and(|t| t.is_file());
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|m| m.elapsed().ok())
                .is_some_and(|age| age > older_than);
            if is_standing && old && std::fs::remove_file(&path).is_ok() {
                let _ = std::fs::remove_file(path.with_extension("lock"));
                pruned += 1;
            }
        }
        pruned
    }
}

/// Takes `file`'s exclusive lock, trying again every few milliseconds
/// until `deadline`.
pub(super) fn lock_by(
    file: &File,
    path: &Path,
    deadline: std::time::Instant,
) -> Result<(), StateError> {
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(std::fs::TryLockError::WouldBlock) => {
                if std::time::Instant::now() >= deadline {
                    return Err(StateError::Locked {
                        path: path.to_path_buf(),
                    });
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(StateError::Io {
                    path: path.to_path_buf(),
                    source,
                });
            }
        }
    }
}

/// The file name of one agent session's records: the agent and a hash of
/// its id (the id is the CLI's, never a path).
pub(super) fn session_file_name(agent: AgentCli, session_id: &str) -> String {
    let digest = Sha256::digest(format!("{}:{session_id}", agent.name()));
    format!("{}-{}.json", agent.name(), hex::encode(&digest[..16]))
}

pub(super) fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn far() -> std::time::Instant {
        std::time::Instant::now() + std::time::Duration::from_secs(60)
    }

    #[test]
    fn forgetting_a_session_whose_lock_is_held_gives_up_at_the_deadline() {
        let t = tempfile::tempdir().unwrap();
        let s = StateDir::open(Some(t.path())).unwrap();
        s.update(AgentCli::Codex, "a", |_| (Standing::Exhausted, ()))
            .unwrap();
        // Another process (here: another open file description) holds the
        // session's lock and never lets go.
        let lock_path = s.file(AgentCli::Codex, "a").with_extension("lock");
        let holder = OpenOptions::new().write(true).open(&lock_path).unwrap();
        holder.lock().unwrap();
        let started = std::time::Instant::now();
        let deadline = started + std::time::Duration::from_millis(50);
        let e = s.forget(AgentCli::Codex, "a", deadline).unwrap_err();
        assert!(matches!(e, StateError::Locked { .. }), "{e}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "no wait past the deadline"
        );
        // Nothing was removed; once the lock is free it is forgotten.
        drop(holder);
        assert!(s.forget(AgentCli::Codex, "a", far()).unwrap());
    }

    #[test]
    fn a_standing_survives_between_processes_and_sessions_are_apart() {
        let t = tempfile::tempdir().unwrap();
        let s = StateDir::open(Some(&t.path().join("hooks"))).unwrap();
        let first = s
            .update(AgentCli::Claude, "a", |st| {
                (Standing::Failing { blocks: 1 }, st)
            })
            .unwrap();
        assert_eq!(first, Standing::Clear);
        let again = s.update(AgentCli::Claude, "a", |st| (st, st)).unwrap();
        assert_eq!(again, Standing::Failing { blocks: 1 });
        let other = s.update(AgentCli::Claude, "b", |st| (st, st)).unwrap();
        assert_eq!(other, Standing::Clear);
        let other_cli = s.update(AgentCli::Codex, "a", |st| (st, st)).unwrap();
        assert_eq!(other_cli, Standing::Clear);
    }

    #[test]
    fn the_last_follow_up_is_kept_beside_the_standing() {
        let t = tempfile::tempdir().unwrap();
        let s = StateDir::open(Some(t.path())).unwrap();
        let sent = Session {
            standing: Standing::Failing { blocks: 1 },
            followup: Some(followup_digest("fix it")),
        };
        s.update_session(AgentCli::Cursor, "c", |_| (sent.clone(), ()))
            .unwrap();
        // A Standing-only update keeps it.
        s.update(AgentCli::Cursor, "c", |_| (Standing::Exhausted, ()))
            .unwrap();
        let read = s
            .update_session(AgentCli::Cursor, "c", |now| (now.clone(), now.clone()))
            .unwrap();
        assert_eq!(read.standing, Standing::Exhausted);
        assert_eq!(read.followup, Some(followup_digest("  fix it\n")));
        assert_ne!(read.followup, Some(followup_digest("fix it again")));
    }

    #[test]
    fn an_ended_session_is_forgotten_and_starts_clear_if_it_comes_back() {
        let t = tempfile::tempdir().unwrap();
        let s = StateDir::open(Some(t.path())).unwrap();
        assert!(
            !s.forget(AgentCli::Gemini, "a", far()).unwrap(),
            "nothing yet"
        );
        s.update(AgentCli::Gemini, "a", |_| (Standing::Exhausted, ()))
            .unwrap();
        s.update(AgentCli::Gemini, "b", |_| (Standing::Exhausted, ()))
            .unwrap();
        assert!(s.forget(AgentCli::Gemini, "a", far()).unwrap());
        // Its standing and its lock are gone; the other session's are not.
        let left: Vec<String> = std::fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left.len(), 2, "{left:?}");
        assert!(left.iter().all(|n| n.starts_with("gemini-")), "{left:?}");
        let back = s.update(AgentCli::Gemini, "a", |st| (st, st)).unwrap();
        assert_eq!(back, Standing::Clear);
        let other = s.update(AgentCli::Gemini, "b", |st| (st, st)).unwrap();
        assert_eq!(other, Standing::Exhausted);
    }

    #[test]
    fn a_session_id_is_never_a_path_and_a_corrupt_file_is_an_error() {
        let t = tempfile::tempdir().unwrap();
        let s = StateDir::open(Some(t.path())).unwrap();
        s.update(AgentCli::Claude, "../../etc/x", |_| {
            (Standing::Exhausted, ())
        })
        .unwrap();
        let names: Vec<String> = std::fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".json"))
            .collect();
        assert_eq!(names.len(), 1);
        assert!(
            names[0].starts_with("claude-") && !names[0].contains(".."),
            "{names:?}"
        );
        std::fs::write(t.path().join(&names[0]), "{not json").unwrap();
        let e = s
            .update(AgentCli::Claude, "../../etc/x", |st| (st, ()))
            .unwrap_err();
        assert!(matches!(e, StateError::Corrupt { .. }), "{e}");
    }
}
