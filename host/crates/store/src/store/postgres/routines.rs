//! The routines' rows in PostgreSQL: a run (`routines`: its spec and state
//! as JSON, with the columns the daemon looks runs up by) and its steps
//! (`routine_steps`). It owns their SQL; it must never decide a run's next
//! state (that is `engine::routine::decide`); the spec, the state and the
//! reason are decoded once, when the row is read (the store's codec).

use super::bridge::{Sql, col};
use crate::model::routine::{RunReason, RunState};
use crate::store::codec;
use crate::store::routine_rows::{RoutineRow, RoutineStepRow, StepStatus};
use crate::store::{StoreError, StoreResult};
use tokio_postgres::Row;

/// A typed JSON column; one that does not decode is `None` with the damage
/// said.
fn json_col<T: codec::Column>(
    r: &Row,
    column: &str,
    damage: &mut Option<String>,
) -> StoreResult<Option<T>> {
    let text: String = col(r, column)?;
    Ok(match codec::decode(&text) {
        Ok(v) => Some(v),
        Err(e) => {
            damage.get_or_insert_with(|| format!("its stored {column} does not decode: {e}"));
            None
        }
    })
}

fn routine_from(r: &Row) -> StoreResult<RoutineRow> {
    let reason: Option<String> = col(r, "reason")?;
    let mut damage = None;
    Ok(RoutineRow {
        id: col(r, "id")?,
        label: col(r, "label")?,
        spec: json_col(r, "spec", &mut damage)?,
        state: json_col(r, "state", &mut damage)?,
        phase: col(r, "phase")?,
        step_session: col(r, "step_session")?,
        deadline_at: col(r, "deadline_at")?,
        pending_request: col(r, "pending_request")?,
        reason: match codec::decode_opt(reason.as_deref()) {
            Ok(v) => v,
            Err(e) => {
                damage.get_or_insert_with(|| format!("its stored reason does not decode: {e}"));
                None
            }
        },
        created_at: col(r, "created_at")?,
        updated_at: col(r, "updated_at")?,
        steps: Vec::new(),
        damage,
    })
}

fn step_from(r: &Row) -> StoreResult<RoutineStepRow> {
    let status: String = col(r, "status")?;
    let idx: i64 = col(r, "idx")?;
    let restarts: i64 = col(r, "restarts")?;
    Ok(RoutineStepRow {
        index: usize::try_from(idx).unwrap_or(usize::MAX),
        label: col(r, "label")?,
        status: StepStatus::parse(&status).ok_or_else(|| StoreError::Decode {
            what: "routine",
            message: format!("unknown step status {status:?}"),
        })?,
        session_id: col(r, "session_id")?,
        restarts: u32::try_from(restarts).unwrap_or(u32::MAX),
        response: col(r, "response")?,
        started_at: col(r, "started_at")?,
        ended_at: col(r, "ended_at")?,
    })
}

/// A column a whole row holds (`None` only in a damaged row, never
/// written).
fn encode_some<T: codec::Column>(
    r: &RoutineRow,
    column: &'static str,
    v: Option<&T>,
) -> StoreResult<String> {
    match v {
        Some(v) => codec::encode(column, v),
        None => Err(StoreError::Damaged {
            row: format!("routine {}", r.id),
            column: column.into(),
        }),
    }
}

fn with_steps(c: &Sql<'_>, mut r: RoutineRow) -> StoreResult<RoutineRow> {
    let rows = c.query(
        "SELECT * FROM routine_steps WHERE routine_id = $1 ORDER BY idx",
        &[&r.id],
    )?;
    match rows.iter().map(step_from).collect::<StoreResult<Vec<_>>>() {
        Ok(steps) => r.steps = steps,
        // A step row that does not decode damages its run, not the list.
        Err(e) => {
            r.damage
                .get_or_insert_with(|| format!("a stored step does not decode: {e}"));
        }
    }
    Ok(r)
}

fn many(
    c: &Sql<'_>,
    sql: &str,
    params: &[super::bridge::Param<'_>],
) -> StoreResult<Vec<RoutineRow>> {
    let rows = c.query(sql, params)?;
    rows.iter()
        .map(|r| with_steps(c, routine_from(r)?))
        .collect()
}

pub(super) fn get_routine(c: &Sql<'_>, id: &str) -> StoreResult<Option<RoutineRow>> {
    match c.opt("SELECT * FROM routines WHERE id = $1", &[&id])? {
        Some(r) => Ok(Some(with_steps(c, routine_from(&r)?)?)),
        None => Ok(None),
    }
}

pub(super) fn list_routines(c: &Sql<'_>, limit: usize) -> StoreResult<Vec<RoutineRow>> {
    many(
        c,
        "SELECT * FROM routines ORDER BY seq DESC LIMIT $1",
        &[&(limit as i64)],
    )
}

pub(super) fn waiting_routines(c: &Sql<'_>) -> StoreResult<Vec<RoutineRow>> {
    many(
        c,
        "SELECT * FROM routines WHERE phase = 'waiting' AND host IS NOT DISTINCT FROM gatehost_host() ORDER BY seq",
        &[],
    )
}

pub(super) fn past_deadline(c: &Sql<'_>, now: i64) -> StoreResult<bool> {
    Ok(c.opt(
        "SELECT 1 AS one FROM routines WHERE phase = 'escalated' AND deadline_at <= $1
           AND host IS NOT DISTINCT FROM gatehost_host() LIMIT 1",
        &[&now],
    )?
    .is_some())
}

pub(super) fn due_routines(c: &Sql<'_>, now: i64) -> StoreResult<Vec<RoutineRow>> {
    many(
        c,
        "SELECT * FROM routines WHERE phase = 'escalated' AND deadline_at <= $1
           AND host IS NOT DISTINCT FROM gatehost_host() ORDER BY seq",
        &[&now],
    )
}

pub(super) fn active_routines(c: &Sql<'_>) -> StoreResult<Vec<RoutineRow>> {
    many(
        c,
        "SELECT * FROM routines WHERE phase IN ('waiting', 'running', 'escalated')
           AND host IS NOT DISTINCT FROM gatehost_host() ORDER BY seq",
        &[],
    )
}

pub(super) fn routine_on_session(c: &Sql<'_>, session: &str) -> StoreResult<Option<RoutineRow>> {
    match c.opt(
        "SELECT * FROM routines WHERE step_session = $1
           AND phase IN ('running', 'escalated') ORDER BY seq LIMIT 1",
        &[&session],
    )? {
        Some(r) => Ok(Some(with_steps(c, routine_from(&r)?)?)),
        None => Ok(None),
    }
}

pub(super) fn routine_by_key(c: &Sql<'_>, key: &str) -> StoreResult<Option<(String, String)>> {
    c.opt(
        "SELECT routine_id, spec_digest FROM routine_keys WHERE key = $1",
        &[&key],
    )?
    .map(|r| Ok((col(&r, "routine_id")?, col(&r, "spec_digest")?)))
    .transpose()
}

pub(super) fn insert_routine_key(
    c: &Sql<'_>,
    key: &str,
    routine: &str,
    digest: &str,
) -> StoreResult<()> {
    let n = c.execute(
        "INSERT INTO routine_keys(key, routine_id, spec_digest) VALUES($1, $2, $3)
         ON CONFLICT DO NOTHING",
        &[&key, &routine, &digest],
    )?;
    if n != 1 {
        return Err(StoreError::Backend(format!(
            "routine key {key} is already there"
        )));
    }
    Ok(())
}

pub(super) fn insert_routine(c: &Sql<'_>, r: &RoutineRow) -> StoreResult<()> {
    let n = c.execute(
        "INSERT INTO routines(id, seq, label, spec, state, phase, step_session, deadline_at,
           pending_request, reason, created_at, updated_at)
         VALUES($1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM routines), $2, $3, $4, $5, $6, $7, $8,
           $9, $10, $11)
         ON CONFLICT DO NOTHING",
        &[
            &r.id,
            &r.label,
            &encode_some(r, "spec", r.spec.as_ref())?,
            &encode_some(r, "state", r.state.as_ref())?,
            &r.phase,
            &r.step_session,
            &r.deadline_at,
            &r.pending_request,
            &codec::encode_opt("reason", r.reason.as_ref())?,
            &r.created_at,
            &r.updated_at,
        ],
    )?;
    if n != 1 {
        return Err(StoreError::Backend(format!(
            "routine {} is already there",
            r.id
        )));
    }
    for s in &r.steps {
        put_routine_step(c, &r.id, s)?;
    }
    Ok(())
}

pub(super) fn put_routine(c: &Sql<'_>, r: &RoutineRow) -> StoreResult<()> {
    if let Some(d) = &r.damage {
        return Err(StoreError::Damaged {
            row: format!("routine {}", r.id),
            column: d.clone(),
        });
    }
    c.execute(
        "UPDATE routines SET label = $2, state = $3, phase = $4, step_session = $5,
           deadline_at = $6, pending_request = $7, reason = $8, updated_at = $9
         WHERE id = $1",
        &[
            &r.id,
            &r.label,
            &encode_some(r, "state", r.state.as_ref())?,
            &r.phase,
            &r.step_session,
            &r.deadline_at,
            &r.pending_request,
            &codec::encode_opt("reason", r.reason.as_ref())?,
            &r.updated_at,
        ],
    )?;
    for s in &r.steps {
        put_routine_step(c, &r.id, s)?;
    }
    Ok(())
}

pub(super) fn end_damaged_routine(
    c: &Sql<'_>,
    id: &str,
    state: RunState,
    phase: &str,
    reason: &str,
    now: i64,
) -> StoreResult<()> {
    let state_json = codec::encode("state", &state)?;
    let reason = codec::encode("reason", &RunReason::Said(reason.to_string()))?;
    c.execute(
        "UPDATE routines SET state = $2, phase = $3, step_session = NULL, deadline_at = NULL,
           pending_request = NULL, reason = $4, updated_at = $5
         WHERE id = $1",
        &[&id, &state_json, &phase, &reason, &now],
    )?;
    Ok(())
}

fn put_routine_step(c: &Sql<'_>, routine: &str, s: &RoutineStepRow) -> StoreResult<()> {
    c.execute(
        "INSERT INTO routine_steps(routine_id, idx, label, status, session_id, restarts,
           response, started_at, ended_at)
         VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9)
         ON CONFLICT(routine_id, idx) DO UPDATE SET label = excluded.label,
           status = excluded.status, session_id = excluded.session_id,
           restarts = excluded.restarts, response = excluded.response,
           started_at = excluded.started_at, ended_at = excluded.ended_at",
        &[
            &routine,
            &(s.index as i64),
            &s.label,
            &s.status.as_str(),
            &s.session_id,
            &i64::from(s.restarts),
            &s.response,
            &s.started_at,
            &s.ended_at,
        ],
    )?;
    Ok(())
}
