//! What became of each agent session's last stop, kept where a script can
//! read it after a headless run (`claude -p`, `codex exec` print only the
//! agent's last answer and exit 0, whatever gatehost said):
//! `gatehost hook status AGENT:ID`.
//!
//! It owns the classification of a stop's answer ([`classify`], pure: a
//! pass, a send-back, or a stop *let through* without passing, and why)
//! and the record file, one per agent session under the hook state
//! directory's `outcomes/` (named as the standing's file is, by a hash:
//! the id is the CLI's, never a path), replaced atomically (not synced:
//! it decides nothing, and a damaged one is started afresh). Unlike the
//! standing it outlives the session's end: a script reads it after the CLI
//! has exited. Records older than [`KEPT_FOR`] are removed when a session
//! ends. It must never decide an answer: the record follows the answer.

use super::adapter::{AgentCli, Answer};
use super::decide::Input;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long an outcome is kept after its last stop.
pub const KEPT_FOR: Duration = Duration::from_secs(30 * 24 * 3600);

/// Why a stop was let through without its gates passing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LetThrough {
    /// The gate still failed and the session was out of retries.
    OutOfRetries,
    /// Daemon: the policy watching the session is blocked.
    PolicyBlocked,
    /// The gate could not run (or the daemon could not be asked), and the
    /// one block for it was spent.
    GateError,
    /// Daemon: no policy watches the session: nothing gated the stop.
    Ungated,
}

/// What one stop came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum StopOutcome {
    /// The gates passed (daemon: every policy watching the turn passed,
    /// awaits an ack, or was cancelled).
    Passed,
    /// The stop was refused: the agent was sent back with this reason.
    SentBack {
        /// The block reason, as the agent got it.
        reason: String,
    },
    /// The stop happened without a pass; `message` is what the user was
    /// shown.
    LetThrough {
        /// Why no pass was needed or possible.
        why: LetThrough,
        /// The message the CLI showed the user.
        message: String,
    },
}

impl StopOutcome {
    /// Whether the work of this stop was accepted by its gates.
    pub fn accepted(&self) -> bool {
        matches!(self, StopOutcome::Passed)
    }
}

/// A stop's outcome from what happened and the answer given for it.
pub fn classify(input: &Input, answer: &Answer) -> StopOutcome {
    match answer {
        Answer::Proceed => StopOutcome::Passed,
        Answer::Block(reason) => StopOutcome::SentBack {
            reason: reason.clone(),
        },
        Answer::StopWithMessage(message) => StopOutcome::LetThrough {
            why: match input {
                Input::Fail(_) | Input::Nudged(_) => LetThrough::OutOfRetries,
                Input::Blocked(_) => LetThrough::PolicyBlocked,
                Input::Ungated(_) => LetThrough::Ungated,
                // An error; and, fail closed, anything else that was let
                // through without a pass.
                Input::Error(_)
                | Input::Prompt
                | Input::OwnFollowUp
                | Input::Pass
                | Input::Running(_) => LetThrough::GateError,
            },
            message: message.clone(),
        },
    }
}

/// The record of a session's stops: the last one's outcome and counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StopRecord {
    /// `AGENT:ID`, as the daemon names the session.
    pub session: String,
    /// The CLI's name ([`AgentCli::name`]).
    pub agent: String,
    /// The CLI's own session id.
    pub session_id: String,
    /// The workspace of the last stop (the hook's `cwd`).
    pub cwd: PathBuf,
    /// When the last stop was answered (seconds since the epoch).
    pub at: u64,
    /// The last stop's outcome.
    #[serde(flatten)]
    pub last: StopOutcome,
    /// Stops answered in the session, whatever they came to.
    pub stops: u32,
    /// Of them, the stops refused ([`StopOutcome::SentBack`]).
    pub sent_back: u32,
    /// Of them, the stops let through without a pass
    /// ([`StopOutcome::LetThrough`]).
    pub let_through: u32,
}

/// Why a stop record could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum OutcomeError {
    /// Reading or writing a record or the `outcomes/` directory failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A record is not a regular file of at most 1 MiB, or does not decode
    /// as a [`StopRecord`] (or one could not be encoded).
    #[error("{path} does not decode ({message}); remove it")]
    Corrupt {
        /// The record's file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// No record matches what was asked ([`Outcomes::get`],
    /// [`Outcomes::last`]).
    #[error("no stop of {session} is on record in {dir}")]
    None {
        /// What was looked for: `AGENT:ID`, or "any session [in DIR]".
        session: String,
        /// The `outcomes/` directory looked in.
        dir: PathBuf,
    },
}

/// The `outcomes/` directory of a hook state directory.
#[derive(Debug, Clone)]
pub struct Outcomes {
    dir: PathBuf,
}

impl Outcomes {
    /// The outcomes kept under `state_dir`.
    pub fn under(state_dir: &Path) -> Outcomes {
        Outcomes {
            dir: state_dir.join("outcomes"),
        }
    }

    /// The `outcomes/` directory itself (which may not exist yet).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn file(&self, agent: AgentCli, session_id: &str) -> PathBuf {
        self.dir
            .join(super::state::session_file_name(agent, session_id))
    }

    /// Adds a stop to the session's record (the caller holds the session's
    /// lock) and returns the record written.
    pub fn record(
        &self,
        agent: AgentCli,
        session_id: &str,
        cwd: &Path,
        outcome: StopOutcome,
    ) -> Result<StopRecord, OutcomeError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| OutcomeError::Io { path, source }
        };
        super::state::create_private_dir(&self.dir).map_err(io(&self.dir))?;
        let path = self.file(agent, session_id);
        let before = match read(&path) {
            Ok(r) => Some(r),
            Err(OutcomeError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                None
            }
            // A damaged record is replaced: it decides nothing.
            Err(e) => {
                tracing::warn!(error = %e, "a stop record that does not decode is started afresh");
                None
            }
        };
        let (stops, sent_back, let_through) = before
            .as_ref()
            .map_or((0, 0, 0), |r| (r.stops, r.sent_back, r.let_through));
        let record = StopRecord {
            session: format!("{}:{session_id}", agent.name()),
            agent: agent.name().to_string(),
            session_id: session_id.to_string(),
            cwd: cwd.to_path_buf(),
            at: now_secs(),
            stops: stops.saturating_add(1),
            sent_back: sent_back
                .saturating_add(u32::from(matches!(outcome, StopOutcome::SentBack { .. }))),
            let_through: let_through
                .saturating_add(u32::from(matches!(outcome, StopOutcome::LetThrough { .. }))),
            last: outcome,
        };
        let text = serde_json::to_vec_pretty(&record).map_err(|e| OutcomeError::Corrupt {
            path: path.clone(),
            message: e.to_string(),
        })?;
        // Replaced atomically (a reader sees the old record or the new),
        // but not synced to the disk: it decides nothing (a record damaged
        // by a crash is started afresh, above), and an fsync cost every
        // stop 0.7 to 5 ms (issue 52). The standing and the ledger, which
        // decide, are synced.
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir).map_err(io(&self.dir))?;
        tmp.write_all(&text).map_err(io(&path))?;
        tmp.persist(&path).map_err(|e| io(&path)(e.error))?;
        Ok(record)
    }

    /// The record of `agent`'s session `session_id`.
    pub fn get(&self, agent: AgentCli, session_id: &str) -> Result<StopRecord, OutcomeError> {
        match read(&self.file(agent, session_id)) {
            Err(OutcomeError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                Err(OutcomeError::None {
                    session: format!("{}:{session_id}", agent.name()),
                    dir: self.dir.clone(),
                })
            }
            other => other,
        }
    }

    /// Every record that decodes (others are skipped, with a log line).
    pub fn all(&self) -> Result<Vec<StopRecord>, OutcomeError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(OutcomeError::Io {
                    path: self.dir.clone(),
                    source,
                });
            }
        };
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            match read(&path) {
                Ok(r) => out.push(r),
                Err(e) => tracing::warn!(error = %e, "a stop record skipped"),
            }
        }
        Ok(out)
    }

    /// The most recent record, of a stop in `cwd` if given.
    pub fn last(&self, cwd: Option<&Path>) -> Result<StopRecord, OutcomeError> {
        let want = cwd.map(|c| std::fs::canonicalize(c).unwrap_or_else(|_| c.to_path_buf()));
        self.all()?
            .into_iter()
            .filter(|r| {
                want.as_ref().is_none_or(|w| {
                    std::fs::canonicalize(&r.cwd).unwrap_or_else(|_| r.cwd.clone()) == *w
                })
            })
            .max_by_key(|r| r.at)
            .ok_or_else(|| OutcomeError::None {
                session: match &want {
                    Some(w) => format!("any session in {}", w.display()),
                    None => "any session".to_string(),
                },
                dir: self.dir.clone(),
            })
    }

    /// Removes the records whose last stop is older than `age`; returns how
    /// many. Never follows a link.
    pub fn prune(&self, age: Duration) -> usize {
        let cutoff = now_secs().saturating_sub(age.as_secs());
        self.all()
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r.at < cutoff)
            .filter_map(|r| AgentCli::from_name(&r.agent).map(|a| self.file(a, &r.session_id)))
            .filter(|p| std::fs::remove_file(p).is_ok())
            .count()
    }
}

fn read(path: &Path) -> Result<StopRecord, OutcomeError> {
    let meta = std::fs::symlink_metadata(path).map_err(|source| OutcomeError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if !meta.is_file() || meta.len() > 1024 * 1024 {
        return Err(OutcomeError::Corrupt {
            path: path.to_path_buf(),
            message: "not a regular file of at most 1 MiB".into(),
        });
    }
    let text = std::fs::read(path).map_err(|source| OutcomeError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_slice(&text).map_err(|e| OutcomeError::Corrupt {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::tests::inputs;
    use crate::decide::{Standing, decide};

    /// Every stop the decision can answer, classified: a pass only when it
    /// proceeded, a send-back for every block, and every let-through named
    /// by what let it through.
    #[test]
    fn every_decided_stop_is_classified_by_what_let_it_through() {
        let standings = [
            Standing::Clear,
            Standing::Failing { blocks: 2 },
            Standing::ErrorShown { blocks: 0 },
            Standing::Exhausted,
        ];
        for s in standings {
            for i in inputs() {
                let d = decide(s, &i, 2);
                let o = classify(&i, &d.answer);
                match (&d.answer, &o) {
                    (Answer::Proceed, StopOutcome::Passed) => {}
                    (Answer::Block(r), StopOutcome::SentBack { reason }) => assert_eq!(r, reason),
                    (Answer::StopWithMessage(m), StopOutcome::LetThrough { why, message }) => {
                        assert_eq!(m, message);
                        let want = match i {
                            Input::Fail(_) | Input::Nudged(_) => LetThrough::OutOfRetries,
                            Input::Blocked(_) => LetThrough::PolicyBlocked,
                            Input::Error(_) => LetThrough::GateError,
                            Input::Ungated(_) => LetThrough::Ungated,
                            _ => panic!("{s:?} × {i:?} let through: {m}"),
                        };
                        assert_eq!(*why, want, "{s:?} × {i:?}");
                    }
                    other => panic!("{s:?} × {i:?}: {other:?}"),
                }
                assert_eq!(o.accepted(), d.answer == Answer::Proceed);
            }
        }
    }

    #[test]
    fn records_count_stops_survive_in_their_own_file_and_the_last_is_found() {
        let dir = tempfile::tempdir().expect("tmp");
        let o = Outcomes::under(dir.path());
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).expect("ws");
        let sent = StopOutcome::SentBack { reason: "r".into() };
        o.record(AgentCli::Claude, "a", &ws, sent).expect("record");
        let through = StopOutcome::LetThrough {
            why: LetThrough::OutOfRetries,
            message: "m".into(),
        };
        let r = o
            .record(AgentCli::Claude, "a", &ws, through.clone())
            .expect("record");
        assert_eq!((r.stops, r.sent_back, r.let_through), (2, 1, 1));
        assert_eq!(o.get(AgentCli::Claude, "a").expect("get"), r);
        assert!(matches!(
            o.get(AgentCli::Codex, "a"),
            Err(OutcomeError::None { .. })
        ));
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(o.file(AgentCli::Claude, "a")).expect("read"))
                .expect("json");
        assert_eq!(v["outcome"], "let-through");
        assert_eq!(v["why"], "out-of-retries");
        assert_eq!(v["session"], "claude:a");
        assert_eq!(o.last(Some(&ws)).expect("last").session_id, "a");
        assert!(o.last(Some(dir.path())).is_err(), "another workspace");
        // Old records go at a session's end; recent ones stay.
        assert_eq!(o.prune(KEPT_FOR), 0);
        let mut old = r.clone();
        old.at = 1;
        std::fs::write(
            o.file(AgentCli::Claude, "a"),
            serde_json::to_vec(&old).expect("json"),
        )
        .expect("write");
        assert_eq!(o.prune(KEPT_FOR), 1);
        assert!(o.get(AgentCli::Claude, "a").is_err());
    }

    #[test]
    fn a_record_that_is_a_link_is_never_read() {
        let dir = tempfile::tempdir().expect("tmp");
        let o = Outcomes::under(dir.path());
        std::fs::create_dir_all(o.dir()).expect("dir");
        let target = dir.path().join("elsewhere.json");
        std::fs::write(&target, "{}").expect("write");
        std::os::unix::fs::symlink(&target, o.file(AgentCli::Claude, "x")).expect("link");
        assert!(matches!(
            o.get(AgentCli::Claude, "x"),
            Err(OutcomeError::Corrupt { .. })
        ));
    }
}
