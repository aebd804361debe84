//! The routines' rows: a run (`routines`: its spec and its
//! `engine::routine::RunState`, both as JSON, with the columns the daemon
//! looks runs up by) and its steps (`routine_steps`: one row per step,
//! what each did). It owns their SQL; it must never decide a run's next
//! state (that is `engine::routine::decide`); the spec, the state and the
//! reason are decoded into their `model::routine` types once, when the
//! row is read (the store's codec).

use crate::model::routine::{RunReason, RunState};
use crate::store::routine_rows::{RoutineRow, RoutineStepRow, StepStatus};
use crate::store::{StoreError, StoreResult};
use rusqlite::{Connection, OptionalExtension, Row, params};

/// The tables (schema version 7), created at every open.
pub(super) const ROUTINE_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS routines(
    id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL UNIQUE,
    label TEXT,
    spec TEXT NOT NULL,
    state TEXT NOT NULL,
    phase TEXT NOT NULL,
    step_session TEXT,
    deadline_at INTEGER,
    pending_request TEXT,
    reason TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS routines_active ON routines(phase, seq)
  WHERE phase IN ('waiting', 'running', 'escalated');
CREATE INDEX IF NOT EXISTS routines_session ON routines(step_session)
  WHERE step_session IS NOT NULL AND phase IN ('running', 'escalated');
-- A run's idempotency key (`Idempotency-Key` on its start), with the
-- digest of the spec it started: the same key again answers the same run.
CREATE TABLE IF NOT EXISTS routine_keys(
    key TEXT PRIMARY KEY,
    routine_id TEXT NOT NULL,
    spec_digest TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS routine_keys_routine ON routine_keys(routine_id);
CREATE TABLE IF NOT EXISTS routine_steps(
    routine_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    label TEXT NOT NULL,
    status TEXT NOT NULL,
    session_id TEXT,
    restarts INTEGER NOT NULL DEFAULT 0,
    response TEXT,
    started_at INTEGER,
    ended_at INTEGER,
    PRIMARY KEY(routine_id, idx)
) WITHOUT ROWID;
";

/// A typed JSON column; one that does not decode is `None` with the
/// damage said.
fn json_col<T: crate::store::codec::Column>(
    r: &Row<'_>,
    col: &str,
    damage: &mut Option<String>,
) -> rusqlite::Result<Option<T>> {
    let text: String = r.get(col)?;
    Ok(match crate::store::codec::decode(&text) {
        Ok(v) => Some(v),
        Err(e) => {
            damage.get_or_insert_with(|| format!("its stored {col} does not decode: {e}"));
            None
        }
    })
}

fn routine_from(r: &Row<'_>) -> rusqlite::Result<RoutineRow> {
    let reason: Option<String> = r.get("reason")?;
    let mut damage = None;
    Ok(RoutineRow {
        id: r.get("id")?,
        label: r.get("label")?,
        spec: json_col(r, "spec", &mut damage)?,
        state: json_col(r, "state", &mut damage)?,
        phase: r.get("phase")?,
        step_session: r.get("step_session")?,
        deadline_at: r.get("deadline_at")?,
        pending_request: r.get("pending_request")?,
        reason: match crate::store::codec::decode_opt(reason.as_deref()) {
            Ok(v) => v,
            Err(e) => {
                damage.get_or_insert_with(|| format!("its stored reason does not decode: {e}"));
                None
            }
        },
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
        steps: Vec::new(),
        damage,
    })
}

fn step_from(r: &Row<'_>) -> rusqlite::Result<RoutineStepRow> {
    let status: String = r.get("status")?;
    let idx: i64 = r.get("idx")?;
    let restarts: i64 = r.get("restarts")?;
    Ok(RoutineStepRow {
        index: usize::try_from(idx).unwrap_or(usize::MAX),
        label: r.get("label")?,
        status: StepStatus::parse(&status).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                0,
                rusqlite::types::Type::Text,
                format!("unknown step status {status:?}").into(),
            )
        })?,
        session_id: r.get("session_id")?,
        restarts: u32::try_from(restarts).unwrap_or(u32::MAX),
        response: r.get("response")?,
        started_at: r.get("started_at")?,
        ended_at: r.get("ended_at")?,
    })
}

/// A column a whole row holds (`None` only in a damaged row, which is
/// never written).
fn encode_some<T: crate::store::codec::Column>(
    r: &RoutineRow,
    column: &'static str,
    v: Option<&T>,
) -> StoreResult<String> {
    match v {
        Some(v) => crate::store::codec::encode(column, v),
        None => Err(StoreError::Damaged {
            row: format!("routine {}", r.id),
            column: column.into(),
        }),
    }
}

fn decode(e: rusqlite::Error) -> StoreError {
    if let rusqlite::Error::FromSqlConversionFailure(_, _, inner) = &e {
        return StoreError::Decode {
            what: "routine",
            message: inner.to_string(),
        };
    }
    StoreError::from(e)
}

fn with_steps(c: &Connection, mut r: RoutineRow) -> StoreResult<RoutineRow> {
    let mut st =
        c.prepare_cached("SELECT * FROM routine_steps WHERE routine_id = ?1 ORDER BY idx")?;
    let steps = st
        .query_map(params![r.id], step_from)
        .map_err(decode)?
        .collect::<Result<Vec<_>, _>>();
    match steps {
        Ok(steps) => r.steps = steps,
        // A step row that does not decode damages its run, not the list.
        Err(e) => {
            r.damage
                .get_or_insert_with(|| format!("a stored step does not decode: {e}"));
        }
    }
    Ok(r)
}

pub(super) fn get_routine(c: &Connection, id: &str) -> StoreResult<Option<RoutineRow>> {
    let row = c
        .prepare_cached("SELECT * FROM routines WHERE id = ?1")?
        .query_row(params![id], routine_from)
        .optional()
        .map_err(decode)?;
    row.map(|r| with_steps(c, r)).transpose()
}

fn many(c: &Connection, sql: &str, p: impl rusqlite::Params) -> StoreResult<Vec<RoutineRow>> {
    let rows = c
        .prepare_cached(sql)?
        .query_map(p, routine_from)
        .map_err(decode)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(decode)?;
    rows.into_iter().map(|r| with_steps(c, r)).collect()
}

/// Runs newest first, at most `limit`.
pub(super) fn list_routines(c: &Connection, limit: usize) -> StoreResult<Vec<RoutineRow>> {
    many(
        c,
        "SELECT * FROM routines ORDER BY seq DESC LIMIT ?1",
        params![limit as i64],
    )
}

/// Runs waiting for a step's `waitFor`, oldest first (by index).
pub(super) fn waiting_routines(c: &Connection) -> StoreResult<Vec<RoutineRow>> {
    many(
        c,
        "SELECT * FROM routines WHERE phase = 'waiting' ORDER BY seq",
        [],
    )
}

/// Whether an escalated run's deadline is at or before `now` (by index).
pub(super) fn past_deadline(c: &Connection, now: i64) -> StoreResult<bool> {
    Ok(c.prepare_cached(
        "SELECT 1 FROM routines WHERE phase = 'escalated' AND deadline_at <= ?1 LIMIT 1",
    )?
    .exists(params![now])?)
}

/// Escalated runs whose deadline is at or before `now` (by index).
pub(super) fn due_routines(c: &Connection, now: i64) -> StoreResult<Vec<RoutineRow>> {
    many(
        c,
        "SELECT * FROM routines WHERE phase = 'escalated' AND deadline_at <= ?1 ORDER BY seq",
        params![now],
    )
}

/// Runs not yet done, failed or cancelled, oldest first (by index).
pub(super) fn active_routines(c: &Connection) -> StoreResult<Vec<RoutineRow>> {
    many(
        c,
        "SELECT * FROM routines WHERE phase IN ('waiting', 'running', 'escalated') ORDER BY seq",
        [],
    )
}

/// The run whose current step runs in (or is escalated on) `session`.
pub(super) fn routine_on_session(c: &Connection, session: &str) -> StoreResult<Option<RoutineRow>> {
    let row = c
        .prepare_cached(
            "SELECT * FROM routines WHERE step_session = ?1
               AND phase IN ('running', 'escalated') ORDER BY seq LIMIT 1",
        )?
        .query_row(params![session], routine_from)
        .optional()
        .map_err(decode)?;
    row.map(|r| with_steps(c, r)).transpose()
}

/// The run an idempotency key started, and the digest of its spec.
pub(super) fn routine_by_key(c: &Connection, key: &str) -> StoreResult<Option<(String, String)>> {
    Ok(
        c.prepare_cached("SELECT routine_id, spec_digest FROM routine_keys WHERE key = ?1")?
            .query_row(params![key], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?,
    )
}

/// Records that `key` started run `routine` of spec digest `digest`.
pub(super) fn insert_routine_key(
    c: &Connection,
    key: &str,
    routine: &str,
    digest: &str,
) -> StoreResult<()> {
    c.prepare_cached("INSERT INTO routine_keys(key, routine_id, spec_digest) VALUES(?1, ?2, ?3)")?
        .execute(params![key, routine, digest])?;
    Ok(())
}

pub(super) fn insert_routine(c: &Connection, r: &RoutineRow) -> StoreResult<()> {
    c.prepare_cached(
        "INSERT INTO routines(id, seq, label, spec, state, phase, step_session, deadline_at,
               pending_request, reason, created_at, updated_at)
             VALUES(?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM routines), ?2, ?3, ?4, ?5, ?6,
               ?7, ?8, ?9, ?10, ?11)",
    )?
    .execute(params![
        r.id,
        r.label,
        encode_some(r, "spec", r.spec.as_ref())?,
        encode_some(r, "state", r.state.as_ref())?,
        r.phase,
        r.step_session,
        r.deadline_at,
        r.pending_request,
        crate::store::codec::encode_opt("reason", r.reason.as_ref())?,
        r.created_at,
        r.updated_at
    ])?;
    for s in &r.steps {
        put_routine_step(c, &r.id, s)?;
    }
    Ok(())
}

/// Writes a run's row and its steps' rows (never a damaged one's:
/// its placeholders would overwrite what is stored).
pub(super) fn put_routine(c: &Connection, r: &RoutineRow) -> StoreResult<()> {
    if let Some(d) = &r.damage {
        return Err(StoreError::Damaged {
            row: format!("routine {}", r.id),
            column: d.clone(),
        });
    }
    c.prepare_cached(
        "UPDATE routines SET label = ?2, state = ?3, phase = ?4, step_session = ?5,
               deadline_at = ?6, pending_request = ?7, reason = ?8, updated_at = ?9
             WHERE id = ?1",
    )?
    .execute(params![
        r.id,
        r.label,
        encode_some(r, "state", r.state.as_ref())?,
        r.phase,
        r.step_session,
        r.deadline_at,
        r.pending_request,
        crate::store::codec::encode_opt("reason", r.reason.as_ref())?,
        r.updated_at
    ])?;
    for s in &r.steps {
        put_routine_step(c, &r.id, s)?;
    }
    Ok(())
}

/// Ends a run whose stored row is damaged (it cannot be decoded, so
/// never written back whole): its state (the engine's terminal
/// state), phase and reason (a person's words)
/// are replaced, its step session, deadline and pending request
/// cleared; its spec (and damage) stay as they are.
pub(super) fn end_damaged_routine(
    c: &Connection,
    id: &str,
    state: RunState,
    phase: &str,
    reason: &str,
    now: i64,
) -> StoreResult<()> {
    let state_json = crate::store::codec::encode("state", &state)?;
    let reason = crate::store::codec::encode("reason", &RunReason::Said(reason.to_string()))?;
    c.prepare_cached(
        "UPDATE routines SET state = ?2, phase = ?3, step_session = NULL,
               deadline_at = NULL, pending_request = NULL, reason = ?4, updated_at = ?5
             WHERE id = ?1",
    )?
    .execute(params![id, state_json, phase, reason, now])?;
    Ok(())
}

fn put_routine_step(c: &Connection, routine: &str, s: &RoutineStepRow) -> StoreResult<()> {
    c.prepare_cached(
        "INSERT OR REPLACE INTO routine_steps(routine_id, idx, label, status, session_id,
               restarts, response, started_at, ended_at)
             VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        routine,
        s.index as i64,
        s.label,
        s.status.as_str(),
        s.session_id,
        s.restarts as i64,
        s.response,
        s.started_at,
        s.ended_at
    ])?;
    Ok(())
}

#[cfg(test)]
#[path = "routines_tests.rs"]
mod tests;
