//! The SQL of the requests hosts send each other (schema 2's
//! `host_requests`): an operator's action on a policy received by a host
//! that does not own it, carried out by the owner. An insert notifies
//! the owner (`listen::REQUESTS`, payload its host id) and an outcome the
//! sender (`listen::ANSWERED`, payload the request's id), in the
//! transaction: the server delivers them at its commit, never for a
//! rollback. It owns that SQL; it must never decide what a request does
//! (the API's `forwarded`).

use super::bridge::{Sql, col};
use super::listen::{ANSWERED, REQUESTS};
use crate::store::rows::{HostRequestRow, HostRequestState};
use crate::store::{StoreError, StoreResult};

fn request_from(r: &tokio_postgres::Row) -> StoreResult<HostRequestRow> {
    let state: String = col(r, "state")?;
    Ok(HostRequestRow {
        id: col(r, "id")?,
        host: col(r, "host")?,
        policy_id: col(r, "policy_id")?,
        request: col(r, "request")?,
        from_host: col(r, "from_host")?,
        created_at: col(r, "created_at")?,
        state: HostRequestState::parse(&state).ok_or_else(|| StoreError::Decode {
            what: "host request",
            message: format!("state '{state}'"),
        })?,
        outcome: col(r, "outcome")?,
    })
}

pub(super) fn policy_host(c: &Sql<'_>, id: &str) -> StoreResult<Option<String>> {
    match c.opt("SELECT host FROM policies WHERE id = $1", &[&id])? {
        Some(r) => col(&r, "host"),
        None => Ok(None),
    }
}

/// This host's requests not carried out yet, oldest first (by the
/// partial index `host_requests_due`).
pub(super) fn due(c: &Sql<'_>) -> StoreResult<Vec<HostRequestRow>> {
    c.query(
        "SELECT * FROM host_requests WHERE host = gatehost_host()
           AND state IN ('open', 'taken') ORDER BY id",
        &[],
    )?
    .iter()
    .map(request_from)
    .collect()
}

pub(super) fn get(c: &Sql<'_>, id: i64) -> StoreResult<Option<HostRequestRow>> {
    c.opt("SELECT * FROM host_requests WHERE id = $1", &[&id])?
        .map(|r| request_from(&r))
        .transpose()
}

pub(super) fn insert(
    c: &Sql<'_>,
    host: &str,
    policy: &str,
    request: &str,
    now: i64,
) -> StoreResult<i64> {
    let id = col(
        &c.one(
            "INSERT INTO host_requests(host, policy_id, request, created_at, updated_at)
             VALUES($1, $2, $3, $4, $4) RETURNING id",
            &[&host, &policy, &request, &now],
        )?,
        "id",
    )?;
    c.one("SELECT pg_notify($1, $2)", &[&REQUESTS, &host])?;
    Ok(id)
}

pub(super) fn advance(
    c: &Sql<'_>,
    id: i64,
    from: HostRequestState,
    to: HostRequestState,
    outcome: Option<&str>,
    now: i64,
) -> StoreResult<bool> {
    let moved = c.execute(
        "UPDATE host_requests SET state = $3, outcome = COALESCE($4, outcome), updated_at = $5
          WHERE id = $1 AND state = $2",
        &[&id, &from.as_str(), &to.as_str(), &outcome, &now],
    )? == 1;
    if moved && to == HostRequestState::Done {
        c.one("SELECT pg_notify($1, $2)", &[&ANSWERED, &id.to_string()])?;
    }
    Ok(moved)
}
