//! One decision per stop: the stop ledger. When one stop reaches gatehost
//! twice (Cursor runs Claude Code's project hooks beside its own; a gate
//! installed in two scopes under two commands), the second call answers
//! the first's decision instead of running the gates again and counting a
//! second retry.
//!
//! It owns a stop's identity ([`StopMark`]: the CLI's generation id, or
//! the transcript's path and length at the stop; [`StopMark::same_stop`]
//! is pure), and one small record per CLI session under the hook state
//! directory's `stops/`, named by a hash of the session id alone (not of
//! the CLI: the two registrations may be two adapters for one
//! conversation), held under an exclusive lock from before the verdict to
//! after the record, so a duplicate that arrives meanwhile waits for the
//! decision rather than running beside it.
//!
//! It must never replay a decision for a stop it cannot tell apart from
//! the next one: a stop with neither a generation id nor a transcript is
//! never deduplicated (each call is gated, as before), a decision older
//! than [`REPLAY_WINDOW`] is never replayed, and a decision is never
//! replayed to the registration that made it ([`Caller`]): a registration
//! runs once per stop, so the same one seeing the same mark again is the
//! next stop over a transcript the CLI has not written yet, which is
//! gated, not answered from the record (seen in CI: Copilot CLI 1.0.102's
//! never-fixed run got its first block replayed 7 times, to its own cap). It decides nothing itself: the
//! recorded answer is what the first call's gates and standing decided.

use super::adapter::{Answer, HookInput};
use super::outcome::StopOutcome;
use super::state::{Session, StateError, create_private_dir, lock_by};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long after a stop's decision a duplicate of it is answered with
/// it: longer than any CLI waits for its hooks (Claude Code and Codex:
/// 600 s), so a duplicate held up behind a slow gate still finds it.
pub const REPLAY_WINDOW: Duration = Duration::from_secs(15 * 60);

/// What tells one stop of a session from the next, as far as the CLI says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StopMark {
    /// A digest of the CLI's id of the generation that stopped (Cursor's
    /// `generation_id`): a new one for every stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<String>,
    /// A digest of the transcript's path and length at the stop: the
    /// transcript grows with every turn, so the next stop's differs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<String>,
}

impl StopMark {
    /// The mark of the stop `input` reports (the transcript's length is
    /// read now: a transcript that cannot be read gives no mark from it).
    pub fn of(input: &HookInput) -> StopMark {
        let generation = input
            .generation_id
            .as_deref()
            .filter(|g| !g.trim().is_empty())
            .map(|g| digest(&["generation", g]));
        let transcript = input.transcript_path.as_deref().and_then(|path| {
            let len = std::fs::metadata(path).ok()?.len();
            Some(digest(&[
                "transcript",
                &path.to_string_lossy(),
                &len.to_string(),
            ]))
        });
        StopMark {
            generation,
            transcript,
        }
    }

    /// Whether there is anything to tell this stop by.
    pub fn is_known(&self) -> bool {
        self.generation.is_some() || self.transcript.is_some()
    }

    /// Whether `self` and `other` are one stop: their generation ids when
    /// both have one (two generations are two stops, whatever the
    /// transcript), else their transcripts when both have one; never
    /// when nothing is shared to compare.
    pub fn same_stop(&self, other: &StopMark) -> bool {
        match (&self.generation, &other.generation) {
            (Some(a), Some(b)) => a == b,
            _ => match (&self.transcript, &other.transcript) {
                (Some(a), Some(b)) => a == b,
                _ => false,
            },
        }
    }
}

/// Which registration of gatehost a hook call is: its CLI and its whole
/// command line (program and arguments, as the CLI's settings give them).
/// Two registrations of one stop differ in one or the other (Cursor's
/// `stop` and Claude Code's `Stop`; one gate under two commands).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller(String);

impl Caller {
    /// The caller running `agent`'s hook with `argv`.
    pub fn new<I, S>(agent: &str, argv: I) -> Caller
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let words: Vec<String> = argv
            .into_iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        let mut parts = vec!["caller", agent];
        parts.extend(words.iter().map(String::as_str));
        Caller(digest(&parts))
    }

    /// This process's.
    pub fn of_this_process(agent: &str) -> Caller {
        Caller::new(agent, std::env::args_os())
    }

    /// The caller as recorded in [`Decided::caller`]: a hex SHA-256 digest
    /// (16 bytes) of the CLI's name and the command line.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn digest(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    hex::encode(&h.finalize()[..16])
}

/// The decision given for a session's last marked stop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decided {
    /// The stop it was given for: a later call with the same mark is a
    /// duplicate, answered the same.
    pub mark: StopMark,
    /// The CLI whose hook decided (`claude`, `cursor`, …).
    pub agent: String,
    /// The registration that decided ([`Caller`]); empty in a record of
    /// an older gatehost.
    #[serde(default)]
    pub caller: String,
    /// What the deciding hook told its CLI, which a duplicate repeats.
    pub answer: Answer,
    /// The session's standing after the decision: a duplicate through
    /// another CLI's hook takes it as its own, so the next stop is counted
    /// from it whichever hook reaches it first.
    pub session: Session,
    /// What the stop came to, for the duplicate's `gatehost hook status`.
    pub outcome: StopOutcome,
    /// When it was decided (milliseconds since the epoch).
    pub at_ms: u64,
}

/// The `stops/` directory of a hook state directory.
#[derive(Debug, Clone)]
pub struct StopLedger {
    dir: PathBuf,
}

/// A session's ledger entry, held under its lock until recorded or
/// dropped.
#[derive(Debug)]
pub struct Held {
    _lock: File,
    dir: PathBuf,
    path: PathBuf,
    last: Option<Decided>,
}

impl StopLedger {
    /// The ledger in `state_dir`'s `stops/` (one file per session, named by
    /// a digest of its id); the directory is made by the first
    /// [`StopLedger::hold`].
    pub fn under(state_dir: &Path) -> StopLedger {
        StopLedger {
            dir: state_dir.join("stops"),
        }
    }

    fn file(&self, session_id: &str) -> PathBuf {
        let h = Sha256::digest(session_id.as_bytes());
        self.dir.join(format!("{}.json", hex::encode(&h[..16])))
    }

    /// Takes the session's entry (waiting at most until `deadline` for a
    /// hook deciding the same session) and reads its last decision. A
    /// record that does not decode is logged and treated as none: it only
    /// ever saves a second gate run.
    pub fn hold(&self, session_id: &str, deadline: Instant) -> Result<Held, StateError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StateError::Io { path, source }
        };
        create_private_dir(&self.dir).map_err(io(&self.dir))?;
        let path = self.file(session_id);
        let lock_path = path.with_extension("lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io(&lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                tracing::info!(
                    "another gatehost hook is deciding a stop of this session: waiting for its decision"
                );
                lock_by(&lock, &lock_path, deadline)?;
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io(&lock_path)(e)),
        }
        let last = match File::open(&path) {
            Ok(mut f) => {
                let mut text = String::new();
                f.read_to_string(&mut text).map_err(io(&path))?;
                match serde_json::from_str::<Decided>(&text) {
                    Ok(d) => Some(d),
                    Err(e) => {
                        tracing::warn!(path = %path.display(), error = %e, "a stop ledger record that does not decode is ignored");
                        None
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io(&path)(e)),
        };
        Ok(Held {
            _lock: lock,
            dir: self.dir.clone(),
            path,
            last,
        })
    }

    /// Removes entries last written more than [`REPLAY_WINDOW`] ago (and
    /// their locks); returns how many.
    pub fn prune(&self) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let mut pruned = 0;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|m| m.elapsed().ok())
                .is_some_and(|age| age > REPLAY_WINDOW);
            if old && std::fs::remove_file(&path).is_ok() {
                let _ = std::fs::remove_file(path.with_extension("lock"));
                pruned += 1;
            }
        }
        pruned
    }
}

impl Held {
    /// The decision already given for the stop `mark` by another
    /// registration than `caller`, when it is that same stop and was
    /// decided within [`REPLAY_WINDOW`] of `now_ms`.
    pub fn decided(&self, mark: &StopMark, caller: &Caller, now_ms: u64) -> Option<&Decided> {
        self.last.as_ref().filter(|d| {
            d.mark.same_stop(mark)
                && d.caller != caller.as_str()
                && now_ms.saturating_sub(d.at_ms) <= REPLAY_WINDOW.as_millis() as u64
        })
    }

    /// Whether `caller` itself decided a stop with this same mark: the
    /// CLI's next stop over a transcript that has not grown.
    pub fn repeated_by(&self, mark: &StopMark, caller: &Caller) -> bool {
        self.last
            .as_ref()
            .is_some_and(|d| d.mark.same_stop(mark) && d.caller == caller.as_str())
    }

    /// Records the decision of this stop and lets go of the entry.
    pub fn record(self, decided: &Decided) -> Result<(), StateError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StateError::Io { path, source }
        };
        let text = serde_json::to_vec(decided).map_err(|e| StateError::Corrupt {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir).map_err(io(&self.dir))?;
        tmp.write_all(&text).map_err(io(&self.path))?;
        tmp.as_file().sync_all().map_err(io(&self.path))?;
        tmp.persist(&self.path)
            .map_err(|e| io(&self.path)(e.error))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::Standing;

    fn mark(generation: Option<&str>, transcript: Option<&str>) -> StopMark {
        StopMark {
            generation: generation.map(String::from),
            transcript: transcript.map(String::from),
        }
    }

    #[test]
    fn one_stop_is_told_by_its_generation_else_its_transcript_never_by_nothing() {
        let g1 = mark(Some("g1"), Some("t"));
        // Every pair of shapes: (a, b, same stop?).
        let cases = [
            (mark(Some("g1"), None), mark(Some("g1"), None), true),
            (mark(Some("g1"), None), mark(Some("g2"), None), false),
            // Two generations are two stops, even over one transcript.
            (g1.clone(), mark(Some("g2"), Some("t")), false),
            (g1.clone(), mark(Some("g1"), Some("t2")), true),
            // One side without a generation: the transcripts decide.
            (g1.clone(), mark(None, Some("t")), true),
            (g1.clone(), mark(None, Some("t2")), false),
            (mark(None, Some("t")), mark(None, Some("t")), true),
            // Nothing shared to compare: never one stop.
            (mark(Some("g1"), None), mark(None, Some("t")), false),
            (mark(None, None), mark(None, None), false),
            (mark(None, None), g1.clone(), false),
        ];
        for (a, b, same) in cases {
            assert_eq!(a.same_stop(&b), same, "{a:?} vs {b:?}");
            assert_eq!(b.same_stop(&a), same, "symmetric: {b:?} vs {a:?}");
        }
        assert!(!mark(None, None).is_known());
        assert!(mark(None, Some("t")).is_known());
    }

    #[test]
    fn the_transcript_mark_changes_when_the_transcript_grows() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("t.jsonl");
        std::fs::write(&path, "{}\n").unwrap();
        let input = HookInput {
            point: crate::HookPoint::Stop,
            session_id: "s".into(),
            cwd: t.path().into(),
            last_message: None,
            transcript_path: Some(path.clone()),
            loop_hint: None,
            prompt: None,
            generation_id: None,
            subagent: None,
        };
        let first = StopMark::of(&input);
        assert!(first.is_known() && first.generation.is_none());
        assert!(
            first.same_stop(&StopMark::of(&input)),
            "read twice: one stop"
        );
        std::fs::write(&path, "{}\n{}\n").unwrap();
        assert!(
            !first.same_stop(&StopMark::of(&input)),
            "grown: the next stop"
        );
        // A transcript that cannot be read gives nothing to tell it by.
        let gone = HookInput {
            transcript_path: Some(t.path().join("missing")),
            ..input
        };
        assert!(!StopMark::of(&gone).is_known());
    }

    fn cursor() -> Caller {
        Caller::new(
            "cursor",
            ["/bin/gatehost", "hook", "cursor", "--gates", "/g.json"],
        )
    }

    fn claude() -> Caller {
        Caller::new(
            "claude",
            ["/bin/gatehost", "hook", "claude", "--gates", "/g.json"],
        )
    }

    fn decided(mark: StopMark, at_ms: u64) -> Decided {
        Decided {
            mark,
            agent: "cursor".into(),
            caller: cursor().as_str().to_string(),
            answer: Answer::Block("fix it".into()),
            session: Session {
                standing: Standing::Failing { blocks: 1 },
                followup: None,
            },
            outcome: StopOutcome::SentBack {
                reason: "fix it".into(),
            },
            at_ms,
        }
    }

    #[test]
    fn a_decision_is_found_again_for_the_same_stop_within_the_window_only() {
        let t = tempfile::tempdir().unwrap();
        let ledger = StopLedger::under(t.path());
        let far = Instant::now() + Duration::from_secs(30);
        let m = mark(Some("g"), None);
        let held = ledger.hold("conv-1", far).unwrap();
        assert!(held.decided(&m, &claude(), 1_000).is_none(), "nothing yet");
        held.record(&decided(m.clone(), 1_000)).unwrap();

        let held = ledger.hold("conv-1", far).unwrap();
        assert_eq!(held.decided(&m, &claude(), 2_000).unwrap().agent, "cursor");
        assert!(
            held.decided(&mark(Some("g2"), None), &claude(), 2_000)
                .is_none()
        );
        let late = 1_000 + REPLAY_WINDOW.as_millis() as u64 + 1;
        assert!(
            held.decided(&m, &claude(), late).is_none(),
            "too old to replay"
        );
        // Never to the registration that decided it: the same mark seen
        // again by it is its CLI's next stop.
        assert!(held.decided(&m, &cursor(), 2_000).is_none());
        assert!(held.repeated_by(&m, &cursor()) && !held.repeated_by(&m, &claude()));
        let elsewhere = Caller::new(
            "cursor",
            ["/bin/gatehost", "hook", "cursor", "--gates", "/h.json"],
        );
        assert!(
            held.decided(&m, &elsewhere, 2_000).is_some(),
            "another command is another registration"
        );
        drop(held);
        // Another session's entry is apart; a session id is never a path.
        let other = ledger.hold("../../conv-1", far).unwrap();
        assert!(other.decided(&m, &claude(), 2_000).is_none());
    }

    #[test]
    fn a_duplicate_waits_for_the_decision_and_gives_up_at_its_deadline() {
        let t = tempfile::tempdir().unwrap();
        let ledger = StopLedger::under(t.path());
        let held = ledger
            .hold("conv", Instant::now() + Duration::from_secs(30))
            .unwrap();
        let started = Instant::now();
        let e = ledger
            .hold("conv", started + Duration::from_millis(50))
            .unwrap_err();
        assert!(matches!(e, StateError::Locked { .. }), "{e}");
        assert!(started.elapsed() < Duration::from_secs(5));
        held.record(&decided(mark(None, Some("t")), 5)).unwrap();
        let again = ledger
            .hold("conv", Instant::now() + Duration::from_secs(30))
            .unwrap();
        assert!(
            again
                .decided(&mark(None, Some("t")), &claude(), 6)
                .is_some()
        );
    }

    #[test]
    fn a_damaged_record_is_no_decision() {
        let t = tempfile::tempdir().unwrap();
        let ledger = StopLedger::under(t.path());
        let far = Instant::now() + Duration::from_secs(30);
        ledger
            .hold("c", far)
            .unwrap()
            .record(&decided(mark(Some("g"), None), 1))
            .unwrap();
        std::fs::write(ledger.file("c"), "{oops").unwrap();
        let held = ledger.hold("c", far).unwrap();
        assert!(held.decided(&mark(Some("g"), None), &claude(), 2).is_none());
    }
}
