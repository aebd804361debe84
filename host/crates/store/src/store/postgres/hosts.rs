//! The hosts sharing one database (schema 2's `hosts` table): a host's
//! claim on its id (a new fencing number, issued by the database's
//! `host_fences` sequence, and a lease), the check of that claim inside
//! every write transaction, its renewal and release, and the list `gatehost
//! store check` shows.
//!
//! Every lease is judged by the database's clock (`clock_timestamp()`),
//! never by a host's: hosts whose clocks disagree still agree on who holds
//! what. A claim is taken in a write transaction (under the write lock,
//! after every write of the previous holder that got the lock first); a
//! renewal only moves the lease of the claim it names (`fence`), so a host
//! whose id was claimed again renews nothing and learns it lost.
//!
//! It owns this SQL and [`HostSpec`]'s rules; the in-process side of a
//! claim (the heartbeat, the local deadline) is `lease`. It must never
//! compare a lease with this machine's clock.

use super::bridge::{Sql, col};
use crate::store::rows::HostStatus;
use crate::store::{StoreError, StoreResult};
use std::time::Duration;

/// Who a daemon is in a fleet: its host id and its lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    /// The host id (`serve --host-id`, default the machine's name):
    /// letters, digits, `.`, `_` and `-`, at most 63 bytes.
    pub id: String,
    /// How long a claim lives without a renewal (`[store] lease`); the
    /// heartbeat renews it every third of it.
    pub lease: Duration,
    /// The machine's name, shown beside the claim.
    pub machine: String,
    /// The gatehost version, shown beside the claim.
    pub version: String,
}

impl HostSpec {
    /// Whether `id` can be a host id (what [`HostSpec::id`] says), or why
    /// not.
    pub fn check_id(id: &str) -> Result<(), String> {
        if id.is_empty() || id.len() > 63 {
            return Err(format!(
                "a host id has 1 to 63 characters ('{}' has {})",
                id.escape_default(),
                id.len()
            ));
        }
        if id.starts_with('-')
            || !id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            return Err(format!(
                "a host id is letters, digits, '.', '_' and '-', not starting with '-' ('{}')",
                id.escape_default()
            ));
        }
        Ok(())
    }

    /// The lease in whole milliseconds, as the SQL takes it.
    pub(super) fn lease_ms(&self) -> i64 {
        i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX)
    }
}

/// How a write transaction finds its host's claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Standing {
    /// The claim is the current one and its lease runs.
    Held,
    /// The claim is the current one but its lease ran out (no renewal for
    /// too long): nothing was taken over; a renewal restores it.
    Lapsed,
    /// Another claim replaced it (or the row is gone): why, for messages.
    Lost(String),
}

/// Takes the claim of `spec.id`: refused while another process's claim on
/// it is live, unless `lock_held` (this process holds the id's session
/// lock, so the previous holder's connections are all gone: it is dead).
/// Answers the new fencing number. Rows written before hosts existed
/// (their `host` NULL) are adopted by the first claim. Runs in a write
/// transaction.
pub(super) fn claim(c: &Sql<'_>, spec: &HostSpec, lock_held: bool) -> StoreResult<i64> {
    let before = c.opt(
        "SELECT state, machine, pid, fence, lease_until > clock_timestamp() AS live,
                CAST(EXTRACT(EPOCH FROM lease_until - clock_timestamp()) * 1000 AS BIGINT) AS left_ms
           FROM hosts WHERE id = $1 FOR UPDATE",
        &[&spec.id],
    )?;
    if let Some(row) = &before {
        let live: bool = col(row, "live")?;
        let state: String = col(row, "state")?;
        if live && state == "live" && !lock_held {
            let machine: String = col(row, "machine")?;
            let pid: i64 = col(row, "pid")?;
            let left: i64 = col(row, "left_ms")?;
            return Err(StoreError::HostTaken(format!(
                "host id '{}' is held by gatehost pid {pid} on {machine} (its lease runs {:.1} s more); stop it, wait for its lease to end, or choose another --host-id",
                spec.id,
                left as f64 / 1000.0
            )));
        }
    }
    let pid = i64::from(std::process::id());
    let row = c.one(
        "INSERT INTO hosts(id, fence, state, lease_until, heartbeat_at, claimed_at, machine, pid, version)
         VALUES($1, nextval('host_fences'), 'live',
                clock_timestamp() + CAST($2 AS BIGINT) * INTERVAL '1 millisecond', clock_timestamp(),
                clock_timestamp(), $3, $4, $5)
         ON CONFLICT(id) DO UPDATE SET fence = excluded.fence, state = 'live',
                lease_until = excluded.lease_until, heartbeat_at = excluded.heartbeat_at,
                claimed_at = excluded.claimed_at, machine = excluded.machine,
                pid = excluded.pid, version = excluded.version,
                stale_at = NULL, taken_by = NULL
         RETURNING fence",
        &[&spec.id, &spec.lease_ms(), &spec.machine, &pid, &spec.version],
    )?;
    let fence: i64 = col(&row, "fence")?;
    for table in ["sessions", "policies", "routines", "deliveries"] {
        c.execute(
            &format!("UPDATE {table} SET host = $1 WHERE host IS NULL"),
            &[&spec.id],
        )?;
    }
    Ok(fence)
}

/// How the claim `(id, fence)` stands now. Called in a write transaction,
/// in its own statement after the write lock's (a statement sees what
/// committed before it began: one that waited for the lock itself would
/// read the claim as it was before the wait).
pub(super) fn standing(c: &Sql<'_>, id: &str, fence: i64) -> StoreResult<Standing> {
    let row = c.opt(
        "SELECT fence, state, machine, pid, lease_until > clock_timestamp() AS live
           FROM hosts WHERE id = $1",
        &[&id],
    )?;
    let Some(row) = row else {
        return Ok(Standing::Lost(claim_gone(id)));
    };
    let now: i64 = col(&row, "fence")?;
    let state: String = col(&row, "state")?;
    if now != fence || state != "live" {
        let machine: String = col(&row, "machine")?;
        let pid: i64 = col(&row, "pid")?;
        return Ok(Standing::Lost(claimed_again(
            id, fence, now, pid, &machine, &state,
        )));
    }
    Ok(if col::<bool>(&row, "live")? {
        Standing::Held
    } else {
        Standing::Lapsed
    })
}

/// Why the claim `(id, fence)` is lost: the id was claimed again, as
/// `now` by `pid` on `machine` (or released: `state`).
pub(super) fn claimed_again(
    id: &str,
    fence: i64,
    now: i64,
    pid: i64,
    machine: &str,
    state: &str,
) -> String {
    format!(
        "host '{id}' was claimed again (fencing number {fence} → {now}, by pid {pid} on {machine}, {state})"
    )
}

/// Why the claim of `id` is lost: its row is gone.
pub(super) fn claim_gone(id: &str) -> String {
    format!("the claim of host '{id}' is no longer in the database")
}

/// The renewal of the claim `(id, fence)` (`$1`, `$2`) by `$3` ms: no row
/// changes when the claim was replaced.
pub(super) const RENEW: &str = "UPDATE hosts
    SET lease_until = clock_timestamp() + CAST($3 AS BIGINT) * INTERVAL '1 millisecond',
        heartbeat_at = clock_timestamp()
  WHERE id = $1 AND fence = $2 AND state = 'live'";

/// Ends the claim `(id, fence)` at once (a clean stop): the id can be
/// claimed again without waiting for the lease.
pub(super) fn release(c: &Sql<'_>, id: &str, fence: i64) -> StoreResult<bool> {
    Ok(c.execute(
        "UPDATE hosts SET state = 'stopped', lease_until = clock_timestamp()
          WHERE id = $1 AND fence = $2",
        &[&id, &fence],
    )? == 1)
}

/// The two keys of host `id`'s session lock: held by its claimant's
/// heartbeat connection while it lives (the server drops it with that
/// connection, a SIGKILL included). Two-key advisory locks never meet the
/// one-key ones of the writes and the migrations.
pub(super) const HOST_LOCK: &str = "SELECT pg_try_advisory_lock(1734440037, hashtext($1)) AS got";

/// Every host, by id.
pub(super) fn list(c: &Sql<'_>) -> StoreResult<Vec<HostStatus>> {
    list_by(
        c,
        "h.taken_by, COALESCE(l.host = h.id AND l.lease_until > clock_timestamp(), FALSE) AS leads
           FROM hosts h LEFT JOIN leader l ON TRUE",
    )
}

/// Every host, by id, in a database of schema 2 (no leader, nothing taken
/// yet: `gatehost store check` before a migration).
pub(super) fn list_v2(c: &Sql<'_>) -> StoreResult<Vec<HostStatus>> {
    list_by(
        c,
        "CAST(NULL AS TEXT) AS taken_by, FALSE AS leads FROM hosts h",
    )
}

/// Every host, by id, its leadership and taker read by `rest` (the
/// select list's end and the `FROM`).
fn list_by(c: &Sql<'_>, rest: &str) -> StoreResult<Vec<HostStatus>> {
    c.query(
        &format!(
            "SELECT h.id, h.fence, h.state, h.lease_until > clock_timestamp() AS live,
                CAST(EXTRACT(EPOCH FROM h.lease_until) * 1000 AS BIGINT) AS lease_ms,
                CAST(EXTRACT(EPOCH FROM h.heartbeat_at) * 1000 AS BIGINT) AS heartbeat_ms,
                h.machine, h.pid, h.version, {rest} ORDER BY h.id"
        ),
        &[],
    )?
    .iter()
    .map(|r| {
        Ok(HostStatus {
            id: col(r, "id")?,
            fence: col(r, "fence")?,
            state: col(r, "state")?,
            live: col(r, "live")?,
            lease_until: col(r, "lease_ms")?,
            heartbeat_at: col(r, "heartbeat_ms")?,
            machine: col(r, "machine")?,
            pid: col(r, "pid")?,
            version: col(r, "version")?,
            leads: col(r, "leads")?,
            taken_by: col(r, "taken_by")?,
        })
    })
    .collect()
}
