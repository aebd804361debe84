//! Decoding a stored row into the store's records (sessions, policies,
//! events), strictly, without letting one damaged row fail a read of many,
//! for both backends: each gives its rows as [`Columns`] (a column's value
//! by name, as an integer or a text, or why not), and the rule is here
//! once.
//!
//! It owns the rule for a row that does not decode (a column that is not
//! valid JSON, JSON of the wrong shape, an unknown state, a number stored
//! as text, a path that is not absolute): the row is still returned, with
//! [`RowDamage`] naming the first such column and why, and placeholders in
//! its other fields. A decode never yields a default that could be acted
//! on: the engine only blocks or cancels a damaged policy, and the store
//! refuses to write a damaged row back (all but a policy's status, reason
//! and time). A policy's JSON columns are decoded into their `model` types
//! here, once per read, by the store's codec (`codec`), with its strict
//! checks; every JSON column (typed or plain) is read by the codec, never
//! here.
//!
//! It must never write, never name a driver, and never fail a read for a
//! row whose key decodes.

use super::codec::{self, Column};
use super::rows::{EventRow, PolicyRow, PolicyStatus, RowDamage, SessionRow, SessionState};

/// One stored row as a backend reads it: a column's value by name, or why
/// it cannot be read as that type (in the driver's words). A NULL read as
/// a non-optional value is such a failure.
pub(super) trait Columns {
    /// An integer column.
    fn int(&self, column: &str) -> Result<i64, String>;
    /// An integer column that may be NULL.
    fn opt_int(&self, column: &str) -> Result<Option<i64>, String>;
    /// A text column.
    fn text(&self, column: &str) -> Result<String, String>;
    /// A text column that may be NULL.
    fn opt_text(&self, column: &str) -> Result<Option<String>, String>;
    /// Whether its rows carry the host whose work they are (a `host`
    /// column: a store many hosts share); without, a record's host is
    /// `None`.
    fn keeps_hosts(&self) -> bool;
}

/// Implements [`Columns`] for a backend's row type `$t` through its own
/// `fn get<T>(&self, column: &str) -> Result<T, String>` (which reads any
/// of the four types its driver can), its rows keeping hosts or not.
macro_rules! columns_by_get {
    ($t:ty, keeps_hosts: $hosts:expr) => {
        impl $crate::store::row_decode::Columns for $t {
            fn keeps_hosts(&self) -> bool {
                $hosts
            }

            fn int(&self, column: &str) -> Result<i64, String> {
                self.get(column)
            }

            fn opt_int(&self, column: &str) -> Result<Option<i64>, String> {
                self.get(column)
            }

            fn text(&self, column: &str) -> Result<String, String> {
                self.get(column)
            }

            fn opt_text(&self, column: &str) -> Result<Option<String>, String> {
                self.get(column)
            }
        }
    };
}
pub(super) use columns_by_get;

/// A row whose key column does not decode: it cannot be returned at all.
#[derive(Debug)]
pub(super) struct KeyError {
    /// The key column.
    pub column: &'static str,
    /// Why, in the driver's words.
    pub message: String,
}

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.column, self.message)
    }
}

impl std::error::Error for KeyError {}

/// A value [`Columns`] reads.
trait Cell: Sized {
    fn read(row: &dyn Columns, column: &str) -> Result<Self, String>;
}

impl Cell for i64 {
    fn read(row: &dyn Columns, column: &str) -> Result<Self, String> {
        row.int(column)
    }
}

impl Cell for Option<i64> {
    fn read(row: &dyn Columns, column: &str) -> Result<Self, String> {
        row.opt_int(column)
    }
}

impl Cell for String {
    fn read(row: &dyn Columns, column: &str) -> Result<Self, String> {
        row.text(column)
    }
}

impl Cell for Option<String> {
    fn read(row: &dyn Columns, column: &str) -> Result<Self, String> {
        row.opt_text(column)
    }
}

/// Reads the columns of one row, keeping the first that does not decode.
struct Reader<'r> {
    row: &'r dyn Columns,
    damage: Option<RowDamage>,
}

impl<'r> Reader<'r> {
    fn new(row: &'r dyn Columns) -> Self {
        Reader { row, damage: None }
    }

    /// A plain column that must decode (the row's key).
    fn key<T: Cell>(&self, column: &'static str) -> Result<T, KeyError> {
        T::read(self.row, column).map_err(|message| KeyError { column, message })
    }

    fn note(&mut self, column: &str, message: impl std::fmt::Display) {
        if self.damage.is_none() {
            self.damage = Some(RowDamage {
                column: column.to_string(),
                message: message.to_string(),
            });
        }
    }

    /// A plain column; `placeholder` when it does not decode (noted).
    fn get<T: Cell>(&mut self, column: &str, placeholder: T) -> T {
        match T::read(self.row, column) {
            Ok(v) => v,
            Err(e) => {
                self.note(column, e);
                placeholder
            }
        }
    }

    /// A JSON column holding a `T` (NULL is damage too); `placeholder`
    /// when it does not decode (`codec`).
    fn typed<T: serde::de::DeserializeOwned>(&mut self, column: &str, placeholder: T) -> T {
        let text: Option<String> = self.get(column, None);
        match codec::decode_plain(text.as_deref()) {
            Ok(t) => t,
            Err(e) => {
                self.note(column, e);
                placeholder
            }
        }
    }

    /// A typed JSON column (`codec`), NULL (or `null`) being `None`;
    /// `None` when it does not decode (noted). `row`: the row's id.
    fn column<T: Column>(&mut self, row: &str, column: &'static str) -> Option<T> {
        let text: Option<String> = self.get(column, None);
        #[cfg(any(test, feature = "test-support"))]
        if text.as_deref().is_some_and(|t| t.trim() != "null") {
            codec::counter::note(row, column);
        }
        #[cfg(not(any(test, feature = "test-support")))]
        let _ = row;
        match codec::decode_opt(text.as_deref()) {
            Ok(v) => v,
            Err(e) => {
                self.note(column, e);
                None
            }
        }
    }

    /// A text column holding one of `parse`'s names.
    fn named<T>(&mut self, column: &str, parse: impl Fn(&str) -> Option<T>, placeholder: T) -> T {
        let text: String = self.get(column, String::new());
        match parse(&text) {
            Some(v) => v,
            None => {
                self.note(column, format_args!("unknown value '{text}'"));
                placeholder
            }
        }
    }
}

/// The host a row belongs to, where rows keep one.
fn host_of(c: &mut Reader<'_>) -> Option<String> {
    if c.row.keeps_hosts() {
        c.get("host", None)
    } else {
        None
    }
}

pub(super) fn session_from(r: &dyn Columns) -> Result<SessionRow, KeyError> {
    let mut c = Reader::new(r);
    let id: String = c.key("id")?;
    let text: Option<String> = c.get("command", None);
    let command = codec::decode_argv(text.as_deref()).unwrap_or_else(|e| {
        c.note("command", e);
        None
    });
    let cwd: String = c.get("cwd", String::new());
    let workspace: String = c.get("workspace", String::new());
    for (column, path) in [("cwd", &cwd), ("workspace", &workspace)] {
        if !std::path::Path::new(path).is_absolute() {
            c.note(column, format_args!("'{path}' is not an absolute path"));
        }
    }
    let mut s = SessionRow {
        host: host_of(&mut c),
        id,
        label: c.get("label", None),
        cwd,
        workspace,
        state: c.named("state", SessionState::parse, SessionState::Exited),
        turns: c.get("turns", 0),
        last_turn_cursor: c.get("last_turn_cursor", None),
        last_message: c.get("last_message", None),
        heartbeat_at: c.get("heartbeat_at", None),
        notify_url: c.get("notify_url", None),
        command,
        pid: c.get("pid", None),
        created_at: c.get("created_at", 0),
        updated_at: c.get("updated_at", 0),
        owner: c.named(
            "owner",
            |o| match o {
                "operator" => Some(crate::config::Trust::Operator),
                "agent" => Some(crate::config::Trust::Agent),
                _ => None,
            },
            crate::config::Trust::Agent,
        ),
        key_digest: c.get("key_digest", None),
        stale_at: c.get("stale_at", None),
        workspace_pin: match (
            c.get::<Option<i64>>("workspace_dev", None),
            c.get::<Option<i64>>("workspace_ino", None),
        ) {
            // Stored bit for bit (the backends' integers are signed).
            (Some(dev), Some(ino)) => Some(crate::anchor::DirIdentity {
                dev: dev as u64,
                ino: ino as u64,
            }),
            _ => None,
        },
        damage: None,
    };
    s.damage = c.damage;
    Ok(s)
}

pub(super) fn policy_from(r: &dyn Columns) -> Result<PolicyRow, KeyError> {
    let mut c = Reader::new(r);
    let id: String = c.key("id")?;
    // An unknown status reads as `blocked` (so that nothing drives it)
    // with its damage noted; the engine then stores `blocked` and says so.
    let status = c.named("status", PolicyStatus::parse, PolicyStatus::Blocked);
    #[cfg(any(test, feature = "test-support"))]
    codec::counter::note(&id, "row");
    let spec = c.column::<crate::model::attach::AttachInput>(&id, "spec");
    if spec.is_none() && c.damage.is_none() {
        c.note("spec", "missing");
    }
    let mut p = PolicyRow {
        host: host_of(&mut c),
        seq: c.get("seq", 0),
        spec: spec.unwrap_or_default(),
        status,
        sessions: c.typed("sessions", Vec::new()),
        pending: c.typed("pending", Vec::new()),
        watch_after: c.get("watch_after", 0),
        retries_used: c.get("retries_used", 0),
        gate_runs: c.get("gate_runs", 0),
        verdict: c.column(&id, "verdict"),
        plan: c.column(&id, "plan"),
        prepared: c.column(&id, "prepared"),
        commit_sha: c.get("commit_sha", None),
        reason: c.get("reason", None),
        parent_id: c.get("parent_id", None),
        next_id: c.get("next_id", None),
        created_at: c.get("created_at", 0),
        updated_at: c.get("updated_at", 0),
        gate_crashes: c.get("gate_crashes", 0),
        publish_open: c.typed("publish_open", Vec::new()),
        deadline_at: c.get("deadline_at", None),
        infra_retries_used: c.get("infra_retries_used", 0),
        review: c.column(&id, "review"),
        nudge: c.get("nudge", None),
        id,
        damage: None,
    };
    if p.sessions.is_empty() {
        c.note(
            "sessions",
            "the wrong shape: a policy has at least one member",
        );
    }
    // What the status says the row holds must be there.
    if p.plan.is_none()
        && matches!(
            p.status,
            PolicyStatus::AwaitingAck | PolicyStatus::Committing
        )
    {
        c.note(
            "plan",
            format_args!("missing, though the policy is {}", p.status.as_str()),
        );
    }
    if p.review.is_none() && p.status == PolicyStatus::Reviewing {
        c.note("review", "missing, though the policy is reviewing");
    }
    p.damage = c.damage;
    Ok(p)
}

pub(super) fn event_from(r: &dyn Columns) -> Result<EventRow, KeyError> {
    let mut c = Reader::new(r);
    let kind: String = c.get("type", String::new());
    let text: Option<String> = c.get("payload", None);
    let payload = codec::decode_payload(text.as_deref())
        .map_err(|e| c.note("payload", e))
        .ok();
    let cursor = c.key("cursor")?;
    let at = c.get("at", 0);
    let session_id = c.get("session_id", None);
    let policy_id = c.get("policy_id", None);
    let mut e = EventRow {
        host: host_of(&mut c),
        cursor,
        at,
        session_id,
        policy_id,
        event: codec::decode_event(kind, payload, c.damage.is_some()),
        damage: None,
    };
    e.damage = c.damage;
    Ok(e)
}
