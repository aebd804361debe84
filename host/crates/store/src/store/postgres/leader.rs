//! The cluster's leader and what only it does (schema 3): one `leader`
//! row names the host that leads, its term (one more at every change of
//! leader) and its lease by the database's clock; the leader finds the
//! hosts whose lease and grace ran out (`stale`) and, where workspaces are
//! shared, moves a stale host's rows to itself (`taken`).
//!
//! Every statement here runs in a write transaction of a host (its own
//! claim checked first, `claim::check_claim`); a leader's write checks its
//! term ([`leads`]) before it acts, so a leader that was replaced (paused
//! past its lease, partitioned) changes nothing. A takeover sets
//! `gatehost.takeover` for its transaction only (`SET LOCAL`), which the
//! ownership trigger reads to let it move the dead host's rows.
//!
//! It owns this SQL; when to lead and what to do with what it finds is the
//! engine's (`engine::leader`). It must never compare a lease with this
//! machine's clock, nor move the rows of a host that is not stale.

use super::bridge::{Sql, col};
use crate::store::rows::{Leadership, StaleHost, TakenOver};
use crate::store::{StoreError, StoreResult};

/// Takes the leadership (none holds it, or its lease ran out) or renews
/// this host's, for `lease_ms`.
pub(super) fn lead(c: &Sql<'_>, lease_ms: i64, grace_ms: i64) -> StoreResult<Leadership> {
    let me = c.one("SELECT gatehost_host() AS me", &[])?;
    let Some(me) = col::<Option<String>>(&me, "me")? else {
        return Err(StoreError::Backend(
            "only a host's connection can lead the cluster".into(),
        ));
    };
    let took = c.opt(
        "UPDATE leader
            SET term = CASE WHEN host IS NOT DISTINCT FROM $1 THEN term ELSE term + 1 END,
                host = $1,
                lease_until = clock_timestamp() + CAST($2 AS BIGINT) * INTERVAL '1 millisecond'
          WHERE host IS NOT DISTINCT FROM $1 OR lease_until <= clock_timestamp()
         RETURNING term",
        &[&me, &lease_ms],
    )?;
    if let Some(row) = took {
        let term: i64 = col(&row, "term")?;
        let due = c.one(
            "SELECT CAST(EXTRACT(EPOCH FROM MIN(lease_until)
                        + CAST($2 AS BIGINT) * INTERVAL '1 millisecond' - clock_timestamp()) * 1000
                        AS BIGINT) AS due
               FROM hosts WHERE state = 'live' AND id <> $1",
            &[&me, &grace_ms],
        )?;
        return Ok(Leadership::Leads {
            term,
            next_due_ms: col(&due, "due")?,
        });
    }
    let row = c.one(
        "SELECT host, CAST(EXTRACT(EPOCH FROM lease_until - clock_timestamp()) * 1000 AS BIGINT)
                AS left_ms
           FROM leader",
        &[],
    )?;
    Ok(Leadership::Follows {
        leader: col::<Option<String>>(&row, "host")?.unwrap_or_default(),
        left_ms: col(&row, "left_ms")?,
    })
}

/// Whether this host leads in `term`, its lease running.
pub(super) fn leads(c: &Sql<'_>, term: i64) -> StoreResult<bool> {
    Ok(c.opt(
        "SELECT 1 AS one FROM leader
          WHERE host = gatehost_host() AND term = $1 AND lease_until > clock_timestamp()",
        &[&term],
    )?
    .is_some())
}

/// The unsettled policies of `host`, by id.
fn unsettled(c: &Sql<'_>, host: &str) -> StoreResult<Vec<String>> {
    c.query(
        "SELECT id FROM policies
          WHERE host = $1 AND status NOT IN ('done', 'blocked', 'cancelled') ORDER BY id",
        &[&host],
    )?
    .iter()
    .map(|r| col(r, "id"))
    .collect()
}

/// Marks stale every other live host whose lease ended more than
/// `grace_ms` ago: those marked.
pub(super) fn mark_stale(c: &Sql<'_>, grace_ms: i64) -> StoreResult<Vec<StaleHost>> {
    let rows = c.query(
        "UPDATE hosts SET state = 'stale', stale_at = clock_timestamp()
          WHERE state = 'live' AND id IS DISTINCT FROM gatehost_host()
            AND lease_until + CAST($1 AS BIGINT) * INTERVAL '1 millisecond' < clock_timestamp()
         RETURNING id, fence, machine, pid,
                   CAST(EXTRACT(EPOCH FROM heartbeat_at) * 1000 AS BIGINT) AS heartbeat_ms,
                   CAST(EXTRACT(EPOCH FROM lease_until) * 1000 AS BIGINT) AS lease_ms",
        &[&grace_ms],
    )?;
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        let id: String = col(r, "id")?;
        out.push(StaleHost {
            policies: unsettled(c, &id)?,
            fence: col(r, "fence")?,
            machine: col(r, "machine")?,
            pid: col(r, "pid")?,
            heartbeat_at: col(r, "heartbeat_ms")?,
            lease_until: col(r, "lease_ms")?,
            id,
        });
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// Moves the rows of the stale host `dead` to this host, and marks it
/// `taken`; `None` when `dead` is not stale (live again, already taken).
pub(super) fn take_over(c: &Sql<'_>, dead: &str) -> StoreResult<Option<TakenOver>> {
    let state = c.opt("SELECT state FROM hosts WHERE id = $1 FOR UPDATE", &[&dead])?;
    match state {
        Some(row) if col::<String>(&row, "state")? == "stale" => {}
        _ => return Ok(None),
    }
    let policies = unsettled(c, dead)?;
    c.one(
        "SELECT set_config('gatehost.takeover', $1, true) AS done",
        &[&dead],
    )?;
    let sessions = c
        .query(
            "UPDATE sessions SET host = gatehost_host() WHERE host = $1 RETURNING id",
            &[&dead],
        )?
        .iter()
        .map(|r| col(r, "id"))
        .collect::<StoreResult<Vec<String>>>()?;
    c.execute(
        "UPDATE policies SET host = gatehost_host() WHERE host = $1",
        &[&dead],
    )?;
    let routines = c
        .query(
            "UPDATE routines SET host = gatehost_host() WHERE host = $1 RETURNING id",
            &[&dead],
        )?
        .iter()
        .map(|r| col(r, "id"))
        .collect::<StoreResult<Vec<String>>>()?;
    let pending = c.one(
        "WITH moved AS (
             UPDATE deliveries SET host = gatehost_host() WHERE host = $1 RETURNING state)
         SELECT COUNT(*) FILTER (WHERE state = 'pending') AS n FROM moved",
        &[&dead],
    )?;
    let requests = c.execute(
        "UPDATE host_requests SET host = gatehost_host(), state = 'open'
          WHERE host = $1 AND state IN ('open', 'taken')",
        &[&dead],
    )?;
    c.one(
        "SELECT set_config('gatehost.takeover', '', true) AS done",
        &[],
    )?;
    c.execute(
        "UPDATE hosts SET state = 'taken', taken_by = gatehost_host() WHERE id = $1",
        &[&dead],
    )?;
    let fence = c.one("SELECT fence FROM hosts WHERE id = gatehost_host()", &[])?;
    Ok(Some(TakenOver {
        fence: col(&fence, "fence")?,
        policies,
        sessions,
        routines,
        deliveries: u64::try_from(col::<i64>(&pending, "n")?).unwrap_or(0),
        requests,
    }))
}
