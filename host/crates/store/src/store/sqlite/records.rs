//! The SQL that reads and writes the store's rows.

use super::decode::{event_from, policy_from, session_from};
use crate::store::codec;
use crate::store::rows::{Delivery, EventFilter, EventRow, PolicyRow, PolicyStatus, SessionRow};
use crate::store::{StoreError, StoreResult};
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};

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
pub(super) fn sessions_keyed(c: &Connection, digests: &[String]) -> StoreResult<Vec<String>> {
    if digests.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!(
        "SELECT id FROM sessions WHERE key_digest IN ({}) ORDER BY rowid",
        vec!["?"; digests.len()].join(",")
    );
    let mut st = c.prepare(&sql)?;
    st.query_map(params_from_iter(digests.iter()), |r| r.get(0))?
        .collect::<Result<Vec<String>, _>>()
        .map_err(StoreError::from)
}

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

/// How many policies of each stored status (an index scan of
/// `policies(status, …)`).
pub(super) fn count_policies(c: &Connection) -> StoreResult<Vec<(String, u64)>> {
    let mut st = c.prepare_cached("SELECT status, COUNT(*) FROM policies GROUP BY status")?;
    st.query_map([], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?.max(0) as u64))
    })
    .map_err(decode_err)?
    .collect::<Result<Vec<_>, _>>()
    .map_err(decode_err)
}

pub(super) fn put_session(c: &Connection, s: &SessionRow) -> StoreResult<()> {
    if let Some(d) = &s.damage {
        return Err(StoreError::Damaged {
            row: format!("session {}", s.id),
            column: d.column.clone(),
        });
    }
    let command = s
        .command
        .as_ref()
        .map(|c| codec::encode_plain("command", c))
        .transpose()?;
    c.prepare_cached("INSERT INTO sessions(id, label, cwd, workspace, state, turns, last_turn_cursor, last_message, heartbeat_at, notify_url, command, pid, created_at, updated_at, owner, key_digest, stale_at, workspace_dev, workspace_ino)
         VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)
         ON CONFLICT(id) DO UPDATE SET label=excluded.label, cwd=excluded.cwd, workspace=excluded.workspace,
           state=excluded.state, turns=excluded.turns, last_turn_cursor=excluded.last_turn_cursor,
           last_message=excluded.last_message, heartbeat_at=excluded.heartbeat_at, notify_url=excluded.notify_url,
           command=excluded.command, pid=excluded.pid, updated_at=excluded.updated_at, owner=excluded.owner,
           key_digest=excluded.key_digest, stale_at=excluded.stale_at,
           workspace_dev=excluded.workspace_dev, workspace_ino=excluded.workspace_ino")?.execute(params![
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
            s.stale_at,
            // Bit for bit: SQLite integers are signed.
            s.workspace_pin.map(|p| p.dev as i64),
            s.workspace_pin.map(|p| p.ino as i64),
        ],
    )?;
    Ok(())
}

/// The watchdog's three looks (see the functions below), each by a
/// partial index (a unit test reads their query plans).
pub(super) const SILENT_SESSIONS: &str =
    "SELECT * FROM sessions WHERE state != 'exited' AND stale_at IS NULL AND command IS NULL
       AND heartbeat_at < ?1 ORDER BY heartbeat_at LIMIT ?2";
// CROSS JOIN fixes the order (SQLite's rule): from the few stale
// sessions out, never from every watching policy in.
pub(super) const WATCHING_WITH_STALE_MEMBER: &str = "SELECT DISTINCT p.* FROM sessions s
       CROSS JOIN policy_members m ON m.session_id = s.id
       CROSS JOIN policies p ON p.id = m.policy_id
     WHERE s.stale_at IS NOT NULL AND p.status = 'watching' ORDER BY p.seq";
pub(super) const PAST_DEADLINE: &str =
    "SELECT * FROM policies WHERE deadline_at IS NOT NULL AND deadline_at <= ?1
       AND status NOT IN ('done', 'blocked', 'cancelled') ORDER BY deadline_at";

/// Sessions not exited nor already stale, nor started by the daemon (their
/// process is their liveness), whose last word (report, hook call,
/// heartbeat, registration) is older than `cutoff` (ms), oldest first: by
/// the partial index `sessions_silent`, never a scan.
pub(super) fn silent_sessions(
    c: &Connection,
    cutoff: i64,
    limit: usize,
) -> StoreResult<Vec<SessionRow>> {
    let mut st = c.prepare_cached(SILENT_SESSIONS)?;
    st.query_map(params![cutoff, limit as i64], session_from)
        .map_err(decode_err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(decode_err)
}

/// Policies in `watching` with a stale member (`[daemon] on_stale`), by
/// the partial index `sessions_stale` and the member index.
pub(super) fn watching_with_stale_member(c: &Connection) -> StoreResult<Vec<PolicyRow>> {
    let mut st = c.prepare_cached(WATCHING_WITH_STALE_MEMBER)?;
    st.query_map([], policy_from)
        .map_err(decode_err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(decode_err)
}

/// Policies past their deadline that are not settled, by the partial
/// index `policies_deadline`.
pub(super) fn past_deadline(c: &Connection, now: i64) -> StoreResult<Vec<PolicyRow>> {
    let mut st = c.prepare_cached(PAST_DEADLINE)?;
    st.query_map(params![now], policy_from)
        .map_err(decode_err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(decode_err)
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

/// The statuses no task of the daemon drives: what the sweep never reads.
/// `policies_working`, the sweep's partial index, holds every other row
/// (the working states and a status that does not decode).
macro_rules! not_driven {
    () => {
        "status NOT IN ('watching', 'awaiting-ack', 'done', 'blocked', 'cancelled')"
    };
}
pub(super) const WORKING_INDEX: &str = concat!(
    "CREATE INDEX IF NOT EXISTS policies_working ON policies(seq) WHERE ",
    not_driven!()
);

/// The sweep's look (every few seconds): the policies in a working state
/// (queued ones only when `?1`) and those whose status does not decode,
/// oldest first, by the partial index `policies_working`: never a scan of
/// the watching (or settled) policies (a unit test reads its plan).
pub(super) const TO_SWEEP: &str = concat!(
    "SELECT * FROM policies WHERE ",
    not_driven!(),
    " AND (?1 OR status != 'queued') ORDER BY seq"
);

/// The policies the sweep looks at (see [`TO_SWEEP`]).
pub(super) fn to_sweep(c: &Connection, queued: bool) -> StoreResult<Vec<PolicyRow>> {
    let mut st = c.prepare_cached(TO_SWEEP)?;
    st.query_map(params![queued], policy_from)
        .map_err(decode_err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(decode_err)
}

/// Ids of the policies not settled (`done`, `blocked`, `cancelled`; a
/// status that does not decode is not settled) whose row does not decode
/// (a typed column included), oldest first. Rows are decoded one at a time
/// and dropped: the read never holds every policy.
pub(super) fn damaged_unsettled(c: &Connection) -> StoreResult<Vec<String>> {
    let mut st = c.prepare_cached(
        "SELECT * FROM policies WHERE status NOT IN ('done', 'blocked', 'cancelled') ORDER BY seq",
    )?;
    let mut rows = st.query([])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let p = policy_from(r).map_err(decode_err)?;
        if p.damage.is_some() {
            out.push(p.id);
        }
    }
    Ok(out)
}

/// The sessions recovery looks at, oldest first: those whose row does not
/// decode and those gatehost started that have not exited. Rows are
/// decoded one at a time and the rest dropped: the read never holds every
/// session.
pub(super) fn sessions_to_recover(c: &Connection) -> StoreResult<Vec<SessionRow>> {
    let mut st = c.prepare_cached("SELECT * FROM sessions ORDER BY created_at, id")?;
    let mut rows = st.query([])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let s = session_from(r).map_err(decode_err)?;
        if s.damage.is_some()
            || (s.command.is_some() && s.state != crate::store::rows::SessionState::Exited)
        {
            out.push(s);
        }
    }
    Ok(out)
}

/// The policies with `session_id` as a member that have not ended
/// (anything but done, blocked and cancelled), oldest first.
pub(super) fn live_with(c: &Connection, session_id: &str) -> StoreResult<Vec<PolicyRow>> {
    let mut st = c.prepare_cached(
        "SELECT p.* FROM policy_members m JOIN policies p ON p.id = m.policy_id
         WHERE m.session_id = ?1 AND p.status NOT IN ('done', 'blocked', 'cancelled') ORDER BY p.seq",
    )?;
    st.query_map(params![session_id], policy_from)
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
    c.prepare_cached("INSERT INTO policies(id, seq, spec, status, sessions, pending, watch_after, retries_used, gate_runs, verdict, plan, prepared, commit_sha, reason, parent_id, next_id, created_at, updated_at, gate_crashes, publish_open, deadline_at, infra_retries_used, review, nudge)
         VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24)")?.execute(params![
            p.id,
            p.seq,
            codec::encode("spec", &p.spec)?,
            p.status.as_str(),
            codec::encode_plain("sessions", &p.sessions)?,
            codec::encode_plain("pending", &p.pending)?,
            p.watch_after,
            p.retries_used,
            p.gate_runs,
            codec::encode_opt("verdict", p.verdict.as_ref())?,
            codec::encode_opt("plan", p.plan.as_ref())?,
            codec::encode_opt("prepared", p.prepared.as_ref())?,
            p.commit_sha,
            p.reason,
            p.parent_id,
            p.next_id,
            p.created_at,
            p.updated_at,
            p.gate_crashes,
            codec::encode_plain("publish_open", &p.publish_open)?,
            p.deadline_at,
            p.infra_retries_used,
            codec::encode_opt("review", p.review.as_ref())?,
            p.nudge
        ],
    )?;
    Ok(())
}

/// Writes a damaged policy's status, reason and time, and nothing else:
/// its other columns stay as they were found.
pub(super) fn put_damaged_policy(c: &Connection, p: &PolicyRow) -> StoreResult<()> {
    let n = c
        .prepare_cached("UPDATE policies SET status=?2, reason=?3, updated_at=?4 WHERE id=?1")?
        .execute(params![p.id, p.status.as_str(), p.reason, p.updated_at])?;
    if n != 1 {
        return Err(StoreError::Backend(format!(
            "policy {} vanished during an update",
            p.id
        )));
    }
    Ok(())
}

/// Writes bookkeeping columns of an undamaged policy (`sql` sets them
/// from `?2`…, `?1` is its id), never its status.
fn record(
    c: &Connection,
    p: &PolicyRow,
    sql: &str,
    values: &[&dyn rusqlite::ToSql],
) -> StoreResult<()> {
    if let Some(d) = &p.damage {
        return Err(StoreError::Damaged {
            row: format!("policy {}", p.id),
            column: d.column.clone(),
        });
    }
    let mut params: Vec<&dyn rusqlite::ToSql> = vec![&p.id];
    params.extend_from_slice(values);
    let n = c.prepare_cached(sql)?.execute(params.as_slice())?;
    if n != 1 {
        return Err(StoreError::Backend(format!(
            "policy {} vanished during an update",
            p.id
        )));
    }
    Ok(())
}

pub(super) fn record_next(c: &Connection, p: &PolicyRow) -> StoreResult<()> {
    record(
        c,
        p,
        "UPDATE policies SET next_id=?2 WHERE id=?1",
        &[&p.next_id],
    )
}

pub(super) fn record_prepared(c: &Connection, p: &PolicyRow) -> StoreResult<()> {
    record(
        c,
        p,
        "UPDATE policies SET prepared=?2, updated_at=?3 WHERE id=?1",
        &[
            &codec::encode_opt("prepared", p.prepared.as_ref())?,
            &p.updated_at,
        ],
    )
}

pub(super) fn record_publishes(c: &Connection, p: &PolicyRow) -> StoreResult<()> {
    let open = codec::encode_plain("publish_open", &p.publish_open)?;
    record(
        c,
        p,
        "UPDATE policies SET publish_open=?2 WHERE id=?1",
        &[&open],
    )
}

pub(super) fn put_policy(c: &Connection, p: &PolicyRow) -> StoreResult<()> {
    if let Some(d) = &p.damage {
        return Err(StoreError::Damaged {
            row: format!("policy {}", p.id),
            column: d.column.clone(),
        });
    }
    let n = c.prepare_cached("UPDATE policies SET status=?2, sessions=?3, pending=?4, watch_after=?5, retries_used=?6, gate_runs=?7,
           verdict=?8, plan=?9, prepared=?10, commit_sha=?11, reason=?12, next_id=?13, updated_at=?14, gate_crashes=?15, publish_open=?16,
           deadline_at=?17, infra_retries_used=?18, review=?19, nudge=?20 WHERE id=?1")?.execute(params![
            p.id,
            p.status.as_str(),
            codec::encode_plain("sessions", &p.sessions)?,
            codec::encode_plain("pending", &p.pending)?,
            p.watch_after,
            p.retries_used,
            p.gate_runs,
            codec::encode_opt("verdict", p.verdict.as_ref())?,
            codec::encode_opt("plan", p.plan.as_ref())?,
            codec::encode_opt("prepared", p.prepared.as_ref())?,
            p.commit_sha,
            p.reason,
            p.next_id,
            p.updated_at,
            p.gate_crashes,
            codec::encode_plain("publish_open", &p.publish_open)?,
            p.deadline_at,
            p.infra_retries_used,
            codec::encode_opt("review", p.review.as_ref())?,
            p.nudge
        ],
    )?;
    if n != 1 {
        return Err(StoreError::Backend(format!(
            "policy {} vanished during an update",
            p.id
        )));
    }
    Ok(())
}

pub(super) fn list_events(c: &Connection, f: &EventFilter) -> StoreResult<Vec<EventRow>> {
    // One host, which keeps no host id: no event was written by a named
    // host.
    if f.host.is_some() {
        return Ok(Vec::new());
    }
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

/// The newest cursor ever given (see [`super::HEAD_CURSOR`]).
pub(super) fn head_cursor(c: &Connection) -> StoreResult<i64> {
    Ok(c.prepare_cached(super::HEAD_CURSOR)?
        .query_row([], |r| r.get(0))?)
}

pub(super) fn oldest_cursor(c: &Connection) -> StoreResult<Option<i64>> {
    Ok(c.query_row("SELECT MIN(cursor) FROM events", [], |r| r.get(0))?)
}

pub(super) fn has_session_event(c: &Connection, session_id: &str, kind: &str) -> StoreResult<bool> {
    Ok(
        c.prepare_cached(
            "SELECT EXISTS(SELECT 1 FROM events WHERE session_id = ?1 AND type = ?2)",
        )?
        .query_row(params![session_id, kind], |r| r.get(0))?,
    )
}

pub(super) fn idempotent(c: &Connection, key: &str) -> StoreResult<Option<(String, String)>> {
    Ok(
        c.prepare_cached("SELECT policy_id, request FROM idempotency WHERE key = ?1")?
            .query_row([key], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?,
    )
}

pub(super) fn due_urls(c: &Connection, now: i64) -> StoreResult<Vec<String>> {
    let mut st = c.prepare_cached(
        "SELECT DISTINCT url FROM deliveries WHERE state='pending' AND next_at <= ?1",
    )?;
    let urls = st
        .query_map([now], |r| r.get(0))?
        .collect::<Result<Vec<String>, _>>()?;
    Ok(urls)
}

pub(super) fn next_delivery_at(c: &Connection) -> StoreResult<Option<i64>> {
    Ok(
        c.prepare_cached("SELECT MIN(next_at) FROM deliveries WHERE state='pending'")?
            .query_row([], |r| r.get(0))?,
    )
}

pub(super) fn put_idempotent(
    c: &Connection,
    key: &str,
    request: &str,
    policy: &str,
) -> StoreResult<()> {
    c.prepare_cached(
        "INSERT INTO idempotency(key, request, policy_id, created_at) VALUES(?1, ?2, ?3, ?4)",
    )?
    .execute(params![key, request, policy, crate::store::now_ms()])?;
    Ok(())
}

pub(super) fn mark_delivery(
    c: &Connection,
    id: i64,
    state: &str,
    attempts: u32,
    next_at: i64,
    error: Option<&str>,
) -> StoreResult<()> {
    c.prepare_cached(
        "UPDATE deliveries SET state=?2, attempts=?3, next_at=?4, last_error=?5 WHERE id=?1",
    )?
    .execute(params![id, state, attempts, next_at, error])?;
    Ok(())
}
