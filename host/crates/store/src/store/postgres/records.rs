//! The SQL that reads and writes sessions, policies, events, webhook
//! deliveries and idempotency keys in PostgreSQL. Inserts of a key already
//! there are answered as errors without failing the transaction (`ON
//! CONFLICT DO NOTHING`, then the count): a body may go on after one, as on
//! SQLite. It must never decide a state (the engine does) nor decode a
//! column itself (`decode` and the codec do).

use super::bridge::{Param, Sql, col};
use super::decode::{all, event_from, policy_from, session_from};
use crate::store::codec;
use crate::store::rows::{Delivery, EventFilter, EventRow, PolicyRow, PolicyStatus, SessionRow};
use crate::store::{StoreError, StoreResult};

pub(super) fn get_session(c: &Sql<'_>, id: &str) -> StoreResult<Option<SessionRow>> {
    c.opt("SELECT * FROM sessions WHERE id = $1", &[&id])?
        .map(|r| session_from(&r))
        .transpose()
}

pub(super) fn list_sessions(c: &Sql<'_>) -> StoreResult<Vec<SessionRow>> {
    all(
        c.query(
            "SELECT * FROM sessions ORDER BY created_at, id COLLATE \"C\"",
            &[],
        )?,
        session_from,
    )
}

pub(super) fn open_publishes(c: &Sql<'_>) -> StoreResult<Vec<PolicyRow>> {
    all(
        c.query(
            "SELECT * FROM policies WHERE publish_open <> '[]' AND host IS NOT DISTINCT FROM gatehost_host() ORDER BY seq",
            &[],
        )?,
        policy_from,
    )
}

pub(super) fn sessions_keyed(c: &Sql<'_>, digests: &[String]) -> StoreResult<Vec<String>> {
    if digests.is_empty() {
        return Ok(Vec::new());
    }
    c.query(
        "SELECT id FROM sessions WHERE key_digest = ANY($1) ORDER BY rid",
        &[&digests],
    )?
    .iter()
    .map(|r| col(r, "id"))
    .collect()
}

pub(super) fn page_sessions(
    c: &Sql<'_>,
    cursor: i64,
    limit: usize,
) -> StoreResult<Vec<(i64, SessionRow)>> {
    c.query(
        "SELECT rid AS page_cursor, * FROM sessions WHERE rid > $1 ORDER BY rid LIMIT $2",
        &[&cursor, &(limit as i64)],
    )?
    .iter()
    .map(|r| Ok((col(r, "page_cursor")?, session_from(r)?)))
    .collect()
}

fn statuses_of(statuses: &[PolicyStatus]) -> Vec<&'static str> {
    statuses.iter().map(|s| s.as_str()).collect()
}

pub(super) fn page_policies(
    c: &Sql<'_>,
    statuses: &[PolicyStatus],
    cursor: i64,
    limit: usize,
    newest_first: bool,
) -> StoreResult<Vec<PolicyRow>> {
    let (cmp, order, cursor) = if newest_first {
        ("<", "DESC", if cursor <= 0 { i64::MAX } else { cursor })
    } else {
        (">", "ASC", cursor)
    };
    let limit = limit as i64;
    let rows = if statuses.is_empty() {
        c.query(
            &format!("SELECT * FROM policies WHERE seq {cmp} $1 ORDER BY seq {order} LIMIT $2"),
            &[&cursor, &limit],
        )?
    } else {
        c.query(
            &format!(
                "SELECT * FROM policies WHERE seq {cmp} $1 AND status = ANY($3)
                  ORDER BY seq {order} LIMIT $2"
            ),
            &[&cursor, &limit, &statuses_of(statuses)],
        )?
    };
    all(rows, policy_from)
}

/// How many policies of each stored status (an index scan of
/// `policies_status`).
pub(super) fn count_policies(c: &Sql<'_>) -> StoreResult<Vec<(String, u64)>> {
    let rows = c.query("SELECT status, COUNT(*) FROM policies GROUP BY status", &[])?;
    Ok(rows
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1).max(0) as u64))
        .collect())
}

pub(super) fn put_session(c: &Sql<'_>, s: &SessionRow) -> StoreResult<()> {
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
    let owner = match s.owner {
        crate::config::Trust::Operator => "operator",
        crate::config::Trust::Agent => "agent",
    };
    // Bit for bit: BIGINT is signed.
    let dev = s.workspace_pin.map(|p| p.dev as i64);
    let ino = s.workspace_pin.map(|p| p.ino as i64);
    // Queued: it goes out with the transaction's next read or before its
    // commit.
    c.defer_count(
        "INSERT INTO sessions(id, label, cwd, workspace, state, turns, last_turn_cursor,
           last_message, heartbeat_at, notify_url, command, pid, created_at, updated_at, owner,
           key_digest, stale_at, workspace_dev, workspace_ino)
         VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
         ON CONFLICT(id) DO UPDATE SET label=excluded.label, cwd=excluded.cwd,
           workspace=excluded.workspace, state=excluded.state, turns=excluded.turns,
           last_turn_cursor=excluded.last_turn_cursor, last_message=excluded.last_message,
           heartbeat_at=excluded.heartbeat_at, notify_url=excluded.notify_url,
           command=excluded.command, pid=excluded.pid, updated_at=excluded.updated_at,
           owner=excluded.owner, key_digest=excluded.key_digest, stale_at=excluded.stale_at,
           workspace_dev=excluded.workspace_dev, workspace_ino=excluded.workspace_ino",
        &[
            &s.id,
            &s.label,
            &s.cwd,
            &s.workspace,
            &s.state.as_str(),
            &s.turns,
            &s.last_turn_cursor,
            &s.last_message,
            &s.heartbeat_at,
            &s.notify_url,
            &command,
            &s.pid,
            &s.created_at,
            &s.updated_at,
            &owner,
            &s.key_digest,
            &s.stale_at,
            &dev,
            &ino,
        ],
        |_| Ok(()),
    )
}

/// The watchdog's three looks, each by a partial index (a unit test reads
/// their plans).
pub(super) const SILENT_SESSIONS: &str =
    "SELECT * FROM sessions WHERE state <> 'exited' AND stale_at IS NULL AND command IS NULL
       AND heartbeat_at < $1 AND host IS NOT DISTINCT FROM gatehost_host() ORDER BY heartbeat_at LIMIT $2";
pub(super) const WATCHING_WITH_STALE_MEMBER: &str = "SELECT DISTINCT p.* FROM sessions s
       JOIN policy_members m ON m.session_id = s.id
       JOIN policies p ON p.id = m.policy_id
     WHERE s.stale_at IS NOT NULL AND p.status = 'watching'
       AND p.host IS NOT DISTINCT FROM gatehost_host() ORDER BY p.seq";
pub(super) const PAST_DEADLINE: &str =
    "SELECT * FROM policies WHERE deadline_at IS NOT NULL AND deadline_at <= $1
       AND status NOT IN ('done', 'blocked', 'cancelled') AND host IS NOT DISTINCT FROM gatehost_host() ORDER BY deadline_at";

pub(super) fn silent_sessions(
    c: &Sql<'_>,
    cutoff: i64,
    limit: usize,
) -> StoreResult<Vec<SessionRow>> {
    all(
        c.query(SILENT_SESSIONS, &[&cutoff, &(limit as i64)])?,
        session_from,
    )
}

pub(super) fn watching_with_stale_member(c: &Sql<'_>) -> StoreResult<Vec<PolicyRow>> {
    all(c.query(WATCHING_WITH_STALE_MEMBER, &[])?, policy_from)
}

pub(super) fn past_deadline(c: &Sql<'_>, now: i64) -> StoreResult<Vec<PolicyRow>> {
    all(c.query(PAST_DEADLINE, &[&now])?, policy_from)
}

pub(super) fn get_policy(c: &Sql<'_>, id: &str) -> StoreResult<Option<PolicyRow>> {
    c.opt("SELECT * FROM policies WHERE id = $1", &[&id])?
        .map(|r| policy_from(&r))
        .transpose()
}

pub(super) fn list_policies(c: &Sql<'_>, statuses: &[PolicyStatus]) -> StoreResult<Vec<PolicyRow>> {
    let rows = if statuses.is_empty() {
        c.query("SELECT * FROM policies ORDER BY seq", &[])?
    } else {
        c.query(
            "SELECT * FROM policies WHERE status = ANY($1) ORDER BY seq",
            &[&statuses_of(statuses)],
        )?
    };
    all(rows, policy_from)
}

/// The sweep's look, by the partial index `policies_working` (the
/// statuses no task drives are never read; a unit test reads its plan).
pub(super) const TO_SWEEP: &str = "SELECT * FROM policies
     WHERE status NOT IN ('watching', 'awaiting-ack', 'done', 'blocked', 'cancelled')
       AND ($1 OR status <> 'queued') AND host IS NOT DISTINCT FROM gatehost_host() ORDER BY seq";

pub(super) fn to_sweep(c: &Sql<'_>, queued: bool) -> StoreResult<Vec<PolicyRow>> {
    all(c.query(TO_SWEEP, &[&queued])?, policy_from)
}

/// Ids of the unsettled policies whose row does not decode, oldest first.
pub(super) fn damaged_unsettled(c: &Sql<'_>) -> StoreResult<Vec<String>> {
    let rows = c.query(
        "SELECT * FROM policies WHERE status NOT IN ('done', 'blocked', 'cancelled')
           AND host IS NOT DISTINCT FROM gatehost_host() ORDER BY seq",
        &[],
    )?;
    let mut out = Vec::new();
    for r in &rows {
        let p = policy_from(r)?;
        if p.damage.is_some() {
            out.push(p.id);
        }
    }
    Ok(out)
}

/// The sessions recovery looks at: damaged ones and those gatehost started
/// that have not exited.
pub(super) fn sessions_to_recover(c: &Sql<'_>) -> StoreResult<Vec<SessionRow>> {
    let rows = c.query(
        "SELECT * FROM sessions WHERE host IS NOT DISTINCT FROM gatehost_host() ORDER BY created_at, id COLLATE \"C\"",
        &[],
    )?;
    let mut out = Vec::new();
    for r in &rows {
        let s = session_from(r)?;
        if s.damage.is_some()
            || (s.command.is_some() && s.state != crate::store::rows::SessionState::Exited)
        {
            out.push(s);
        }
    }
    Ok(out)
}

/// The policies with `session_id` as a member that have not ended, oldest
/// first.
pub(super) fn live_with(c: &Sql<'_>, session_id: &str) -> StoreResult<Vec<PolicyRow>> {
    all(
        c.query(
            "SELECT p.* FROM policy_members m JOIN policies p ON p.id = m.policy_id
              WHERE m.session_id = $1 AND p.status NOT IN ('done', 'blocked', 'cancelled')
              ORDER BY p.seq",
            &[&session_id],
        )?,
        policy_from,
    )
}

/// Inserts a policy (its `seq` already given) and its members; an id
/// already there is an error that leaves the transaction usable.
pub(super) fn insert_policy(c: &Sql<'_>, p: &PolicyRow) -> StoreResult<()> {
    // A policy is its sessions' host's: the trigger guards updates of
    // another host's rows, this the insert of one over its sessions.
    if let Some(r) = c.opt(
        "SELECT id, host FROM sessions WHERE id = ANY($1)
           AND host IS DISTINCT FROM gatehost_host() LIMIT 1",
        &[&p.sessions],
    )? {
        let (sid, host): (String, Option<String>) = (col(&r, "id")?, col(&r, "host")?);
        return Err(StoreError::NotOwner(format!(
            "session {sid} belongs to host {}: a policy over it is attached on that host",
            host.as_deref().unwrap_or("(none)")
        )));
    }
    let n = c.execute(
        "INSERT INTO policies(id, seq, spec, status, sessions, pending, watch_after, retries_used,
           gate_runs, verdict, plan, prepared, commit_sha, reason, parent_id, next_id, created_at,
           updated_at, gate_crashes, publish_open, deadline_at, infra_retries_used, review, nudge)
         VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18,
           $19, $20, $21, $22, $23, $24)
         ON CONFLICT DO NOTHING",
        &[
            &p.id,
            &p.seq,
            &codec::encode("spec", &p.spec)?,
            &p.status.as_str(),
            &codec::encode_plain("sessions", &p.sessions)?,
            &codec::encode_plain("pending", &p.pending)?,
            &p.watch_after,
            &p.retries_used,
            &p.gate_runs,
            &codec::encode_opt("verdict", p.verdict.as_ref())?,
            &codec::encode_opt("plan", p.plan.as_ref())?,
            &codec::encode_opt("prepared", p.prepared.as_ref())?,
            &p.commit_sha,
            &p.reason,
            &p.parent_id,
            &p.next_id,
            &p.created_at,
            &p.updated_at,
            &p.gate_crashes,
            &codec::encode_plain("publish_open", &p.publish_open)?,
            &p.deadline_at,
            &p.infra_retries_used,
            &codec::encode_opt("review", p.review.as_ref())?,
            &p.nudge,
        ],
    )?;
    if n != 1 {
        return Err(StoreError::Backend(format!(
            "policy {} is already there",
            p.id
        )));
    }
    for sid in &p.sessions {
        c.execute(
            "INSERT INTO policy_members(session_id, policy_id) VALUES($1, $2)
             ON CONFLICT DO NOTHING",
            &[sid, &p.id],
        )?;
    }
    Ok(())
}

fn vanished(n: u64, id: &str) -> StoreResult<()> {
    if n == 1 {
        Ok(())
    } else {
        Err(StoreError::Backend(format!(
            "policy {id} vanished during an update"
        )))
    }
}

fn refuse_damaged(p: &PolicyRow) -> StoreResult<()> {
    match &p.damage {
        Some(d) => Err(StoreError::Damaged {
            row: format!("policy {}", p.id),
            column: d.column.clone(),
        }),
        None => Ok(()),
    }
}

/// Writes a damaged policy's status, reason and time, and nothing else.
pub(super) fn put_damaged_policy(c: &Sql<'_>, p: &PolicyRow) -> StoreResult<()> {
    update_policy(
        c,
        &p.id,
        "UPDATE policies SET status = $2, reason = $3, updated_at = $4 WHERE id = $1",
        &[&p.id, &p.status.as_str(), &p.reason, &p.updated_at],
    )
}

/// Writes bookkeeping columns of an undamaged policy (`sql` sets them from
/// `$2`…, `$1` is its id), never its status.
fn record(c: &Sql<'_>, p: &PolicyRow, sql: &str, values: &[Param<'_>]) -> StoreResult<()> {
    refuse_damaged(p)?;
    let mut params: Vec<Param<'_>> = vec![&p.id];
    params.extend_from_slice(values);
    update_policy(c, &p.id, sql, &params)
}

/// Queues `sql`, an update of the policy `id` (it goes out with the
/// transaction's next read or before its commit); a policy gone fails the
/// transaction.
fn update_policy(c: &Sql<'_>, id: &str, sql: &str, params: &[Param<'_>]) -> StoreResult<()> {
    let id = id.to_string();
    c.defer_count(sql, params, move |n| vanished(n, &id))
}

pub(super) fn record_next(c: &Sql<'_>, p: &PolicyRow) -> StoreResult<()> {
    record(
        c,
        p,
        "UPDATE policies SET next_id = $2 WHERE id = $1",
        &[&p.next_id],
    )
}

pub(super) fn record_prepared(c: &Sql<'_>, p: &PolicyRow) -> StoreResult<()> {
    let prepared = codec::encode_opt("prepared", p.prepared.as_ref())?;
    record(
        c,
        p,
        "UPDATE policies SET prepared = $2, updated_at = $3 WHERE id = $1",
        &[&prepared, &p.updated_at],
    )
}

pub(super) fn record_publishes(c: &Sql<'_>, p: &PolicyRow) -> StoreResult<()> {
    let open = codec::encode_plain("publish_open", &p.publish_open)?;
    record(
        c,
        p,
        "UPDATE policies SET publish_open = $2 WHERE id = $1",
        &[&open],
    )
}

pub(super) fn put_policy(c: &Sql<'_>, p: &PolicyRow) -> StoreResult<()> {
    refuse_damaged(p)?;
    update_policy(
        c,
        &p.id,
        "UPDATE policies SET status = $2, sessions = $3, pending = $4, watch_after = $5,
           retries_used = $6, gate_runs = $7, verdict = $8, plan = $9, prepared = $10,
           commit_sha = $11, reason = $12, next_id = $13, updated_at = $14, gate_crashes = $15,
           publish_open = $16, deadline_at = $17, infra_retries_used = $18, review = $19,
           nudge = $20
         WHERE id = $1",
        &[
            &p.id,
            &p.status.as_str(),
            &codec::encode_plain("sessions", &p.sessions)?,
            &codec::encode_plain("pending", &p.pending)?,
            &p.watch_after,
            &p.retries_used,
            &p.gate_runs,
            &codec::encode_opt("verdict", p.verdict.as_ref())?,
            &codec::encode_opt("plan", p.plan.as_ref())?,
            &codec::encode_opt("prepared", p.prepared.as_ref())?,
            &p.commit_sha,
            &p.reason,
            &p.next_id,
            &p.updated_at,
            &p.gate_crashes,
            &codec::encode_plain("publish_open", &p.publish_open)?,
            &p.deadline_at,
            &p.infra_retries_used,
            &codec::encode_opt("review", p.review.as_ref())?,
            &p.nudge,
        ],
    )
}

/// One host's events after a cursor (`$1`, at most `$2`, the host `$3`),
/// by the index `events_host` (host, cursor): what [`list_events`] reads
/// for a filter of a host alone (a unit test reads its plan).
#[cfg(test)]
pub(super) const EVENTS_OF_HOST: &str =
    "SELECT * FROM events WHERE cursor > $1 AND host = $3 ORDER BY cursor LIMIT $2";

pub(super) fn list_events(c: &Sql<'_>, f: &EventFilter) -> StoreResult<Vec<EventRow>> {
    let limit = f.limit.max(1) as i64;
    let mut sql = String::from("SELECT * FROM events WHERE cursor > $1");
    let mut params: Vec<Param<'_>> = vec![&f.since, &limit];
    if let Some(host) = &f.host {
        params.push(host);
        sql.push_str(" AND host = $3");
    }
    if !f.types.is_empty() {
        params.push(&f.types);
        sql.push_str(&format!(" AND type = ANY(${})", params.len()));
    }
    if !f.policy_ids.is_empty() {
        params.push(&f.policy_ids);
        sql.push_str(&format!(" AND policy_id = ANY(${})", params.len()));
    }
    // A session's events are its own and those of every policy it is a
    // member of (a fan-in policy's events name its first member only).
    if !f.session_ids.is_empty() {
        params.push(&f.session_ids);
        let n = params.len();
        sql.push_str(&format!(
            " AND (session_id = ANY(${n}) OR policy_id IN \
             (SELECT policy_id FROM policy_members WHERE session_id = ANY(${n})))"
        ));
    }
    sql.push_str(" ORDER BY cursor LIMIT $2");
    all(c.query(&sql, &params)?, event_from)
}

fn delivery_from(r: &tokio_postgres::Row) -> StoreResult<Delivery> {
    let attempts: i64 = col(r, "attempts")?;
    Ok(Delivery {
        id: col(r, "did")?,
        url: col(r, "url")?,
        attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
        event: event_from(r)?,
    })
}

pub(super) fn due_deliveries_to(
    c: &Sql<'_>,
    url: &str,
    now: i64,
    limit: usize,
) -> StoreResult<Vec<Delivery>> {
    all(
        c.query(
            "SELECT d.id AS did, d.url AS url, d.attempts AS attempts, e.* FROM deliveries d
               JOIN events e ON e.cursor = d.event_cursor
              WHERE d.state = 'pending' AND d.url = $1 AND d.next_at <= $2
                AND d.host IS NOT DISTINCT FROM gatehost_host() ORDER BY d.next_at, d.id LIMIT $3",
            &[&url, &now, &(limit as i64)],
        )?,
        delivery_from,
    )
}

pub(super) fn due_deliveries(c: &Sql<'_>, now: i64, limit: usize) -> StoreResult<Vec<Delivery>> {
    all(
        c.query(
            "SELECT d.id AS did, d.url AS url, d.attempts AS attempts, e.* FROM deliveries d
               JOIN events e ON e.cursor = d.event_cursor
              WHERE d.state = 'pending' AND d.next_at <= $1 AND d.host IS NOT DISTINCT FROM gatehost_host()
              ORDER BY d.next_at, d.id LIMIT $2",
            &[&now, &(limit as i64)],
        )?,
        delivery_from,
    )
}

/// The newest cursor ever given: the counter (it never moves back).
pub(super) fn head_cursor(c: &Sql<'_>) -> StoreResult<i64> {
    col(&c.one("SELECT cursor FROM event_head", &[])?, "cursor")
}

pub(super) fn oldest_cursor(c: &Sql<'_>) -> StoreResult<Option<i64>> {
    col(&c.one("SELECT MIN(cursor) AS m FROM events", &[])?, "m")
}

pub(super) fn has_session_event(c: &Sql<'_>, session_id: &str, kind: &str) -> StoreResult<bool> {
    col(
        &c.one(
            "SELECT EXISTS(SELECT 1 FROM events WHERE session_id = $1 AND type = $2) AS e",
            &[&session_id, &kind],
        )?,
        "e",
    )
}

pub(super) fn idempotent(c: &Sql<'_>, key: &str) -> StoreResult<Option<(String, String)>> {
    c.opt(
        "SELECT policy_id, request FROM idempotency WHERE key = $1",
        &[&key],
    )?
    .map(|r| Ok((col(&r, "policy_id")?, col(&r, "request")?)))
    .transpose()
}

pub(super) fn due_urls(c: &Sql<'_>, now: i64) -> StoreResult<Vec<String>> {
    c.query(
        "SELECT DISTINCT url FROM deliveries WHERE state = 'pending' AND next_at <= $1
           AND host IS NOT DISTINCT FROM gatehost_host()",
        &[&now],
    )?
    .iter()
    .map(|r| col(r, "url"))
    .collect()
}

pub(super) fn next_delivery_at(c: &Sql<'_>) -> StoreResult<Option<i64>> {
    col(
        &c.one(
            "SELECT MIN(next_at) AS m FROM deliveries WHERE state = 'pending' AND host IS NOT DISTINCT FROM gatehost_host()",
            &[],
        )?,
        "m",
    )
}

pub(super) fn put_idempotent(
    c: &Sql<'_>,
    key: &str,
    request: &str,
    policy: &str,
) -> StoreResult<()> {
    let n = c.execute(
        "INSERT INTO idempotency(key, request, policy_id, created_at) VALUES($1, $2, $3, $4)
         ON CONFLICT DO NOTHING",
        &[&key, &request, &policy, &crate::store::now_ms()],
    )?;
    if n != 1 {
        return Err(StoreError::Backend(format!(
            "idempotency key {key} is already there"
        )));
    }
    Ok(())
}

pub(super) fn mark_delivery(
    c: &Sql<'_>,
    id: i64,
    state: &str,
    attempts: u32,
    next_at: i64,
    error: Option<&str>,
) -> StoreResult<()> {
    c.execute(
        "UPDATE deliveries SET state = $2, attempts = $3, next_at = $4, last_error = $5
          WHERE id = $1",
        &[&id, &state, &i64::from(attempts), &next_at, &error],
    )?;
    Ok(())
}

/// An event appended with its deliveries, in one statement: the cursor
/// from the counter, the row, and a delivery to each URL once, in this
/// order: the global webhooks (`$6`, as given), the session's own URL, and
/// for a policy event every member's (by URL). Its lookups go by the
/// sessions' key and the member index, never a scan (a unit test reads its
/// plan). It answers the cursor it took.
pub(super) const APPEND_EVENT: &str =
    "WITH c AS (UPDATE event_head SET cursor = cursor + 1 RETURNING cursor),
  e AS (INSERT INTO events(cursor, at, type, session_id, policy_id, payload)
        VALUES((SELECT cursor FROM c), $1, $2, $3, $4, $5) RETURNING cursor),
  urls AS (SELECT g.url, 0 AS src, g.n FROM unnest($6::text[]) WITH ORDINALITY AS g(url, n)
    UNION ALL SELECT s.notify_url, 1, 0 FROM sessions s WHERE s.id = $3 AND s.notify_url IS NOT NULL
    UNION ALL SELECT s.notify_url, 2, 0 FROM policy_members m JOIN sessions s ON s.id = m.session_id
      WHERE m.policy_id = $4 AND s.notify_url IS NOT NULL),
  firsts AS (SELECT DISTINCT ON (url) url, src, n FROM urls ORDER BY url, src, n),
  d AS (INSERT INTO deliveries(event_cursor, url, next_at, state)
        SELECT e.cursor, f.url, $1, 'pending' FROM e, firsts f
        ORDER BY f.src, f.n, f.url COLLATE \"C\"
        ON CONFLICT DO NOTHING)
  SELECT cursor FROM e";

/// Appends an event under the write lock, queued (it goes out with the
/// transaction's next read or before its commit): the next cursor from the
/// counter (commit order, never reused), which must be `cursor`, the one
/// the transaction expects (anything else fails it), the row, and its
/// deliveries.
pub(super) fn append_event(
    c: &Sql<'_>,
    cursor: i64,
    kind: &str,
    payload: &str,
    session_id: Option<&str>,
    policy_id: Option<&str>,
    webhooks: &[String],
) -> StoreResult<()> {
    let now = crate::store::now_ms();
    c.defer_rows(
        APPEND_EVENT,
        &[&now, &kind, &session_id, &policy_id, &payload, &webhooks],
        move |rows| {
            let took: i64 = match rows.as_slice() {
                [row] => col(row, "cursor")?,
                _ => {
                    return Err(StoreError::Backend(
                        "appending an event answered no cursor".into(),
                    ));
                }
            };
            if took == cursor {
                Ok(())
            } else {
                Err(StoreError::Backend(format!(
                    "an event took cursor {took} where its transaction expected {cursor}"
                )))
            }
        },
    )
}
