//! Row types of the store and the SQL that reads and writes them.

use super::{StoreError, StoreResult};
use rusqlite::{Connection, OptionalExtension, Row, params, params_from_iter};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a session is doing, as last reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SessionState {
    Running,
    Idle,
    AwaitingInput,
    Exited,
}

impl SessionState {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::Running => "running",
            SessionState::Idle => "idle",
            SessionState::AwaitingInput => "awaiting-input",
            SessionState::Exited => "exited",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => SessionState::Running,
            "idle" => SessionState::Idle,
            "awaiting-input" => SessionState::AwaitingInput,
            "exited" => SessionState::Exited,
            _ => return None,
        })
    }
}

/// A policy's place in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyStatus {
    Watching,
    Queued,
    Gating,
    Nudging,
    AwaitingAck,
    Committing,
    Done,
    Blocked,
    Cancelled,
}

impl PolicyStatus {
    pub const ALL: [PolicyStatus; 9] = [
        PolicyStatus::Watching,
        PolicyStatus::Queued,
        PolicyStatus::Gating,
        PolicyStatus::Nudging,
        PolicyStatus::AwaitingAck,
        PolicyStatus::Committing,
        PolicyStatus::Done,
        PolicyStatus::Blocked,
        PolicyStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PolicyStatus::Watching => "watching",
            PolicyStatus::Queued => "queued",
            PolicyStatus::Gating => "gating",
            PolicyStatus::Nudging => "nudging",
            PolicyStatus::AwaitingAck => "awaiting-ack",
            PolicyStatus::Committing => "committing",
            PolicyStatus::Done => "done",
            PolicyStatus::Blocked => "blocked",
            PolicyStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        PolicyStatus::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// No transition leaves these (blocked only by cancel).
    pub fn is_settled(self) -> bool {
        matches!(
            self,
            PolicyStatus::Done | PolicyStatus::Blocked | PolicyStatus::Cancelled
        )
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SessionRow {
    pub id: String,
    pub label: Option<String>,
    pub cwd: String,
    pub workspace: String,
    pub state: SessionState,
    pub turns: i64,
    /// Cursor of its latest `session:turn-end` event.
    pub last_turn_cursor: Option<i64>,
    pub last_message: Option<String>,
    pub heartbeat_at: Option<i64>,
    pub notify_url: Option<String>,
    /// For sessions gatehost started: the argv it runs.
    pub command: Option<Vec<String>>,
    pub pid: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
    /// The credential that registered (or started) it: only that one may
    /// register it again.
    pub owner: crate::config::Trust,
    /// The SHA-256 digest (hex) of its key (`engine::keys`); `None` for a
    /// session stored before keys existed. Never sent to a client.
    #[serde(skip)]
    pub key_digest: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRow {
    pub id: String,
    pub seq: i64,
    /// The attach input as validated (agentproto `policy_attach` JSON).
    pub spec: Value,
    pub status: PolicyStatus,
    pub sessions: Vec<String>,
    /// Members whose turn-end (or exit) is still awaited.
    pub pending: Vec<String>,
    /// Only session events with a cursor above this one count.
    pub watch_after: i64,
    pub retries_used: i64,
    pub gate_runs: i64,
    /// The last gate report (outcome, reason, gates).
    pub verdict: Option<Value>,
    /// The commit plan recorded on green (paths, message, fingerprint).
    pub plan: Option<Value>,
    /// The commit object written but maybe not yet published.
    pub prepared: Option<Value>,
    pub commit_sha: Option<String>,
    pub reason: Option<String>,
    pub parent_id: Option<String>,
    pub next_id: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    /// Daemon deaths by a fault of its own (an abort, recorded by the
    /// fault marker; never a kill from outside) in a row that found its
    /// gate running: a poison input is settled at two instead of
    /// crash-looping the daemon.
    pub gate_crashes: i64,
    /// When publishes of the prepared commit began that never recorded
    /// their end (ms), each stored before any git lock was taken: a lock
    /// made just after one of them, by a life of the daemon that died in
    /// it, is that life's; any other lock is not.
    pub publish_open: Vec<i64>,
}

#[cfg(test)]
impl PolicyRow {
    /// A policy row for unit tests: `id` in `status` over `members`,
    /// nothing else set.
    pub(crate) fn sample(id: &str, status: PolicyStatus, members: &[&str]) -> PolicyRow {
        PolicyRow {
            id: id.into(),
            seq: 0,
            spec: serde_json::json!({}),
            status,
            sessions: members.iter().map(|s| s.to_string()).collect(),
            pending: vec![],
            watch_after: 0,
            retries_used: 0,
            gate_runs: 0,
            verdict: None,
            plan: None,
            prepared: None,
            commit_sha: None,
            reason: None,
            parent_id: None,
            next_id: None,
            created_at: 0,
            updated_at: 0,
            gate_crashes: 0,
            publish_open: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EventRow {
    pub cursor: i64,
    pub at: i64,
    #[serde(rename = "type")]
    pub kind: String,
    pub session_id: Option<String>,
    pub policy_id: Option<String>,
    pub payload: Value,
}

#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    pub since: i64,
    /// Full names (`session:turn-end`); empty = all.
    pub types: Vec<String>,
    pub session_ids: Vec<String>,
    pub policy_ids: Vec<String>,
    pub limit: usize,
}

#[derive(Debug, Clone)]
pub struct Delivery {
    pub id: i64,
    pub url: String,
    pub attempts: u32,
    pub event: EventRow,
}

fn json_col(r: &Row<'_>, idx: &str, what: &'static str) -> rusqlite::Result<Option<Value>> {
    let text: Option<String> = r.get(idx)?;
    match text {
        None => Ok(None),
        Some(t) => serde_json::from_str(&t).map(Some).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(
                0,
                rusqlite::types::Type::Text,
                Box::new(StoreError::Decode {
                    what,
                    message: e.to_string(),
                }),
            )
        }),
    }
}

fn list_col<T: serde::de::DeserializeOwned>(
    r: &Row<'_>,
    idx: &str,
    what: &'static str,
) -> rusqlite::Result<Vec<T>> {
    match json_col(r, idx, what)? {
        Some(v) => serde_json::from_value(v).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(
                0,
                rusqlite::types::Type::Text,
                Box::new(StoreError::Decode {
                    what,
                    message: e.to_string(),
                }),
            )
        }),
        None => Ok(Vec::new()),
    }
}

fn bad_enum(what: &str, value: &str) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        0,
        rusqlite::types::Type::Text,
        format!("unknown {what} '{value}'").into(),
    )
}

fn session_from(r: &Row<'_>) -> rusqlite::Result<SessionRow> {
    let state: String = r.get("state")?;
    let command = match json_col(r, "command", "session command")? {
        Some(v) => Some(serde_json::from_value(v).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
        })?),
        None => None,
    };
    Ok(SessionRow {
        id: r.get("id")?,
        label: r.get("label")?,
        cwd: r.get("cwd")?,
        workspace: r.get("workspace")?,
        state: SessionState::parse(&state).ok_or_else(|| bad_enum("session state", &state))?,
        turns: r.get("turns")?,
        last_turn_cursor: r.get("last_turn_cursor")?,
        last_message: r.get("last_message")?,
        heartbeat_at: r.get("heartbeat_at")?,
        notify_url: r.get("notify_url")?,
        command,
        pid: r.get("pid")?,
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
        owner: match r.get::<_, String>("owner")?.as_str() {
            "operator" => crate::config::Trust::Operator,
            "agent" => crate::config::Trust::Agent,
            other => return Err(bad_enum("session owner", other)),
        },
        key_digest: r.get("key_digest")?,
    })
}

fn policy_from(r: &Row<'_>) -> rusqlite::Result<PolicyRow> {
    let status: String = r.get("status")?;
    Ok(PolicyRow {
        id: r.get("id")?,
        seq: r.get("seq")?,
        spec: json_col(r, "spec", "policy spec")?.unwrap_or(Value::Null),
        status: PolicyStatus::parse(&status).ok_or_else(|| bad_enum("policy status", &status))?,
        sessions: list_col(r, "sessions", "policy sessions")?,
        pending: list_col(r, "pending", "policy pending set")?,
        watch_after: r.get("watch_after")?,
        retries_used: r.get("retries_used")?,
        gate_runs: r.get("gate_runs")?,
        verdict: json_col(r, "verdict", "policy verdict")?,
        plan: json_col(r, "plan", "commit plan")?,
        prepared: json_col(r, "prepared", "prepared commit")?,
        commit_sha: r.get("commit_sha")?,
        reason: r.get("reason")?,
        parent_id: r.get("parent_id")?,
        next_id: r.get("next_id")?,
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
        gate_crashes: r.get("gate_crashes")?,
        publish_open: list_col(r, "publish_open", "open publishes")?,
    })
}

fn event_from(r: &Row<'_>) -> rusqlite::Result<EventRow> {
    Ok(EventRow {
        cursor: r.get("cursor")?,
        at: r.get("at")?,
        kind: r.get("type")?,
        session_id: r.get("session_id")?,
        policy_id: r.get("policy_id")?,
        payload: json_col(r, "payload", "event payload")?.unwrap_or(Value::Null),
    })
}

fn decode_err(e: rusqlite::Error) -> StoreError {
    if let rusqlite::Error::FromSqlConversionFailure(_, _, inner) = &e {
        return StoreError::Decode {
            what: "row",
            message: inner.to_string(),
        };
    }
    StoreError::from(e)
}

pub(super) fn get_session(c: &Connection, id: &str) -> StoreResult<Option<SessionRow>> {
    c.prepare_cached("SELECT * FROM sessions WHERE id=?1")?
        .query_row(params![id], session_from)
        .optional()
        .map_err(decode_err)
}

pub(super) fn list_sessions(c: &Connection) -> StoreResult<Vec<SessionRow>> {
    let mut st = c.prepare_cached("SELECT * FROM sessions ORDER BY created_at, id")?;
    st.query_map([], session_from)
        .map_err(decode_err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(decode_err)
}

pub(super) fn open_publishes(c: &Connection) -> StoreResult<Vec<PolicyRow>> {
    let mut st =
        c.prepare_cached("SELECT * FROM policies WHERE publish_open != '[]' ORDER BY seq")?;
    st.query_map([], policy_from)
        .map_err(decode_err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(decode_err)
}

/// A page of sessions in registration order after `cursor` (a rowid),
/// with each one's cursor.
pub(super) fn page_sessions(
    c: &Connection,
    cursor: i64,
    limit: usize,
) -> StoreResult<Vec<(i64, SessionRow)>> {
    let mut st = c.prepare_cached(
        "SELECT rowid AS page_cursor, * FROM sessions WHERE rowid > ?1 ORDER BY rowid LIMIT ?2",
    )?;
    st.query_map(params![cursor, limit as i64], |r| {
        Ok((r.get("page_cursor")?, session_from(r)?))
    })
    .map_err(decode_err)?
    .collect::<Result<Vec<_>, _>>()
    .map_err(decode_err)
}

/// A page of policies (`statuses` empty: all) by `seq`: oldest first after
/// `cursor`, or newest first before it (`cursor` 0: from the newest).
pub(super) fn page_policies(
    c: &Connection,
    statuses: &[PolicyStatus],
    cursor: i64,
    limit: usize,
    newest_first: bool,
) -> StoreResult<Vec<PolicyRow>> {
    let status_filter = if statuses.is_empty() {
        String::new()
    } else {
        format!(
            " AND status IN ({})",
            statuses
                .iter()
                .map(|s| format!("'{}'", s.as_str()))
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    let (cmp, order, cursor) = if newest_first {
        ("<", "DESC", if cursor <= 0 { i64::MAX } else { cursor })
    } else {
        (">", "ASC", cursor)
    };
    let mut st = c.prepare_cached(&format!(
        "SELECT * FROM policies WHERE seq {cmp} ?1{status_filter} ORDER BY seq {order} LIMIT ?2"
    ))?;
    st.query_map(params![cursor, limit as i64], policy_from)
        .map_err(decode_err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(decode_err)
}

pub(super) fn put_session(c: &Connection, s: &SessionRow) -> StoreResult<()> {
    let command = s
        .command
        .as_ref()
        .map(|c| serde_json::to_string(c).unwrap_or_default());
    c.prepare_cached("INSERT INTO sessions(id, label, cwd, workspace, state, turns, last_turn_cursor, last_message, heartbeat_at, notify_url, command, pid, created_at, updated_at, owner, key_digest)
         VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
         ON CONFLICT(id) DO UPDATE SET label=excluded.label, cwd=excluded.cwd, workspace=excluded.workspace,
           state=excluded.state, turns=excluded.turns, last_turn_cursor=excluded.last_turn_cursor,
           last_message=excluded.last_message, heartbeat_at=excluded.heartbeat_at, notify_url=excluded.notify_url,
           command=excluded.command, pid=excluded.pid, updated_at=excluded.updated_at, owner=excluded.owner,
           key_digest=excluded.key_digest")?.execute(params![
            s.id,
            s.label,
            s.cwd,
            s.workspace,
            s.state.as_str(),
            s.turns,
            s.last_turn_cursor,
            s.last_message,
            s.heartbeat_at,
            s.notify_url,
            command,
            s.pid,
            s.created_at,
            s.updated_at,
            match s.owner {
                crate::config::Trust::Operator => "operator",
                crate::config::Trust::Agent => "agent",
            },
            s.key_digest,
        ],
    )?;
    Ok(())
}

pub(super) fn get_policy(c: &Connection, id: &str) -> StoreResult<Option<PolicyRow>> {
    c.prepare_cached("SELECT * FROM policies WHERE id=?1")?
        .query_row(params![id], policy_from)
        .optional()
        .map_err(decode_err)
}

pub(super) fn list_policies(
    c: &Connection,
    statuses: &[PolicyStatus],
) -> StoreResult<Vec<PolicyRow>> {
    if statuses.is_empty() {
        let mut st = c.prepare_cached("SELECT * FROM policies ORDER BY seq")?;
        return st
            .query_map([], policy_from)
            .map_err(decode_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(decode_err);
    }
    let marks = vec!["?"; statuses.len()].join(",");
    let mut st = c.prepare_cached(&format!(
        "SELECT * FROM policies WHERE status IN ({marks}) ORDER BY seq"
    ))?;
    st.query_map(
        params_from_iter(statuses.iter().map(|s| s.as_str())),
        policy_from,
    )
    .map_err(decode_err)?
    .collect::<Result<Vec<_>, _>>()
    .map_err(decode_err)
}

fn to_text(v: &Option<Value>) -> Option<String> {
    v.as_ref().map(Value::to_string)
}

pub(super) fn watching_with(c: &Connection, session_id: &str) -> StoreResult<Vec<PolicyRow>> {
    let mut st = c.prepare_cached(
        "SELECT p.* FROM policy_members m JOIN policies p ON p.id = m.policy_id
         WHERE m.session_id = ?1 AND p.status = 'watching' ORDER BY p.seq",
    )?;
    st.query_map(params![session_id], policy_from)
        .map_err(decode_err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(decode_err)
}

/// Ids of the policies with `session_id` as a member that are judging its
/// work: queued, gating or nudging.
pub(super) fn judging_with(c: &Connection, session_id: &str) -> StoreResult<Vec<String>> {
    let mut st = c.prepare_cached(
        "SELECT p.id FROM policy_members m JOIN policies p ON p.id = m.policy_id
         WHERE m.session_id = ?1 AND p.status IN ('queued', 'gating', 'nudging') ORDER BY p.seq",
    )?;
    st.query_map(params![session_id], |r| r.get(0))
        .map_err(decode_err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(decode_err)
}

pub(super) fn insert_policy(c: &Connection, p: &PolicyRow) -> StoreResult<()> {
    for sid in &p.sessions {
        c.prepare_cached(
            "INSERT OR IGNORE INTO policy_members(session_id, policy_id) VALUES(?1, ?2)",
        )?
        .execute(params![sid, p.id])?;
    }
    c.prepare_cached("INSERT INTO policies(id, seq, spec, status, sessions, pending, watch_after, retries_used, gate_runs, verdict, plan, prepared, commit_sha, reason, parent_id, next_id, created_at, updated_at, gate_crashes, publish_open)
         VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)")?.execute(params![
            p.id,
            p.seq,
            p.spec.to_string(),
            p.status.as_str(),
            serde_json::to_string(&p.sessions).unwrap_or_default(),
            serde_json::to_string(&p.pending).unwrap_or_default(),
            p.watch_after,
            p.retries_used,
            p.gate_runs,
            to_text(&p.verdict),
            to_text(&p.plan),
            to_text(&p.prepared),
            p.commit_sha,
            p.reason,
            p.parent_id,
            p.next_id,
            p.created_at,
            p.updated_at,
            p.gate_crashes,
            serde_json::to_string(&p.publish_open).unwrap_or_default()
        ],
    )?;
    Ok(())
}

pub(super) fn put_policy(c: &Connection, p: &PolicyRow) -> StoreResult<()> {
    let n = c.prepare_cached("UPDATE policies SET status=?2, sessions=?3, pending=?4, watch_after=?5, retries_used=?6, gate_runs=?7,
           verdict=?8, plan=?9, prepared=?10, commit_sha=?11, reason=?12, next_id=?13, updated_at=?14, gate_crashes=?15, publish_open=?16 WHERE id=?1")?.execute(params![
            p.id,
            p.status.as_str(),
            serde_json::to_string(&p.sessions).unwrap_or_default(),
            serde_json::to_string(&p.pending).unwrap_or_default(),
            p.watch_after,
            p.retries_used,
            p.gate_runs,
            to_text(&p.verdict),
            to_text(&p.plan),
            to_text(&p.prepared),
            p.commit_sha,
            p.reason,
            p.next_id,
            p.updated_at,
            p.gate_crashes,
            serde_json::to_string(&p.publish_open).unwrap_or_default()
        ],
    )?;
    if n != 1 {
        return Err(StoreError::Sqlite(format!(
            "policy {} vanished during an update",
            p.id
        )));
    }
    Ok(())
}

pub(super) fn list_events(c: &Connection, f: &EventFilter) -> StoreResult<Vec<EventRow>> {
    let mut sql = String::from("SELECT * FROM events WHERE cursor > ?");
    let mut args: Vec<rusqlite::types::Value> = vec![f.since.into()];
    let mut add_in = |col: &str, vals: &[String], sql: &mut String| {
        if !vals.is_empty() {
            sql.push_str(&format!(
                " AND {col} IN ({})",
                vec!["?"; vals.len()].join(",")
            ));
            args.extend(vals.iter().map(|v| rusqlite::types::Value::from(v.clone())));
        }
    };
    add_in("type", &f.types, &mut sql);
    add_in("policy_id", &f.policy_ids, &mut sql);
    // A session's events are its own and those of every policy it is a
    // member of (a fan-in policy's events name its first member only).
    if !f.session_ids.is_empty() {
        let marks = vec!["?"; f.session_ids.len()].join(",");
        sql.push_str(&format!(
            " AND (session_id IN ({marks}) OR policy_id IN \
             (SELECT policy_id FROM policy_members WHERE session_id IN ({marks})))"
        ));
        for _ in 0..2 {
            args.extend(
                f.session_ids
                    .iter()
                    .map(|v| rusqlite::types::Value::from(v.clone())),
            );
        }
    }
    sql.push_str(" ORDER BY cursor LIMIT ?");
    args.push((f.limit.max(1) as i64).into());
    let mut st = c.prepare_cached(&sql)?;
    st.query_map(params_from_iter(args), event_from)
        .map_err(decode_err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(decode_err)
}

pub(super) fn due_deliveries_to(
    c: &Connection,
    url: &str,
    now: i64,
    limit: usize,
) -> StoreResult<Vec<Delivery>> {
    let mut st = c.prepare_cached(
        "SELECT d.id AS did, d.url AS url, d.attempts AS attempts, e.* FROM deliveries d
         JOIN events e ON e.cursor = d.event_cursor
         WHERE d.state='pending' AND d.url = ?1 AND d.next_at <= ?2 ORDER BY d.next_at, d.id LIMIT ?3",
    )?;
    st.query_map(params![url, now, limit as i64], |r| {
        Ok(Delivery {
            id: r.get("did")?,
            url: r.get("url")?,
            attempts: r.get("attempts")?,
            event: event_from(r)?,
        })
    })
    .map_err(decode_err)?
    .collect::<Result<Vec<_>, _>>()
    .map_err(decode_err)
}

pub(super) fn due_deliveries(c: &Connection, now: i64, limit: usize) -> StoreResult<Vec<Delivery>> {
    let mut st = c.prepare_cached(
        "SELECT d.id AS did, d.url AS url, d.attempts AS attempts, e.* FROM deliveries d
         JOIN events e ON e.cursor = d.event_cursor
         WHERE d.state='pending' AND d.next_at <= ?1 ORDER BY d.next_at, d.id LIMIT ?2",
    )?;
    st.query_map(params![now, limit as i64], |r| {
        Ok(Delivery {
            id: r.get("did")?,
            url: r.get("url")?,
            attempts: r.get("attempts")?,
            event: event_from(r)?,
        })
    })
    .map_err(decode_err)?
    .collect::<Result<Vec<_>, _>>()
    .map_err(decode_err)
}
