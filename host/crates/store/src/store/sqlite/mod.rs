//! The SQLite backend: one file, `<data>/gatehost.db` (WAL,
//! `synchronous=FULL`), behind the store's interface.
//!
//! It owns the connection (one, under a mutex), the schema and its
//! migrations (`schema`, and each table group's own: `routines`,
//! `standing`, `passkeys`), the SQL (`records` and those), the decoding of
//! its rows into the store's records (`decode`), retention's deletions
//! (`retention`), and the mapping of SQLite's errors onto [`StoreError`]
//! (a full disk, a read-only file: retry later). Every write transaction
//! is `BEGIN IMMEDIATE`, so writes are serialised and a body reads what it
//! writes on. Event cursors come from an `AUTOINCREMENT` key: they only
//! grow, survive restarts and are never reused.
//!
//! It must never let a rusqlite type or SQL text out of this module (the
//! structure tests check that no file above it names rusqlite), run a
//! gate, a process or a network call, or hold its lock across an `.await`.

pub(super) mod decode;
mod passkeys;
mod records;
mod retention;
mod routines;
mod schema;
mod standing;

use super::interface::{Backend, Records, RecordsTx, Swept, TxBody};
use super::routine_rows::RoutineRow;
use super::rows::{
    Delivery, EventFilter, EventRow, PasskeyRow, PolicyRow, PolicyStatus, SessionRow, StandingRow,
};
use super::{StoreError, StoreResult, now_ms};
use crate::config::Retention;
use crate::model::event::Event;
use crate::model::routine::RunState;
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};
use schema::{SCHEMA, migrate};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use webauthn_rs::prelude::Passkey;

/// The schema version this build writes; older files are migrated, newer
/// ones refused.
const SCHEMA_VERSION: i64 = 11;

/// The newest cursor ever given, from the events' AUTOINCREMENT sequence
/// (retention may have deleted the newest rows: the head never moves back).
const HEAD_CURSOR: &str =
    "SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0),
            COALESCE((SELECT MAX(cursor) FROM events), 0))";

/// The webhook URL of an event's session (a primary-key lookup).
const SESSION_WEBHOOK_URL: &str = "SELECT notify_url FROM sessions WHERE id = ?1";

/// The webhook URLs of a policy's members. Runs for every policy event: it
/// must look rows up by index, never scan a table (a unit test reads its
/// query plan).
const MEMBER_WEBHOOK_URLS: &str =
    "SELECT s.notify_url FROM policy_members m JOIN sessions s ON s.id = m.session_id
   WHERE m.policy_id = ?1 AND s.notify_url IS NOT NULL ORDER BY s.notify_url";

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode as C;
        let text = e.to_string();
        match e.sqlite_error_code() {
            Some(C::DiskFull) => StoreError::Full(text),
            Some(C::ReadOnly | C::CannotOpen | C::PermissionDenied) => StoreError::ReadOnly(text),
            // A failed write (EIO on ENOSPC surfaces as SQLITE_IOERR_WRITE
            // and friends) is treated like a full disk: retry later.
            Some(C::SystemIoFailure) => StoreError::Full(text),
            _ => StoreError::Backend(text),
        }
    }
}

/// The SQLite store: one connection under a mutex; callers never hold it
/// across an await (the interface is synchronous).
#[derive(Debug)]
pub(super) struct SqliteStore {
    conn: Mutex<Connection>,
    path: PathBuf,
}

impl SqliteStore {
    /// Opens (creating if needed) `<dir>/gatehost.db`, migrating an older
    /// schema in place. A damaged file is an error naming it, never
    /// silently replaced.
    /// Opens (creating if needed) `<dir>/gatehost.db`. A damaged file is an
    /// error naming it, never silently replaced.
    pub(super) fn open(dir: &Path) -> StoreResult<SqliteStore> {
        let path = dir.join("gatehost.db");
        let shown = path.display().to_string();
        let open_err = |e: rusqlite::Error| StoreError::Open {
            path: shown.clone(),
            message: e.to_string(),
        };
        let conn = Connection::open(&path).map_err(open_err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(open_err)?;
        let corrupt = |e: rusqlite::Error| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt) => {
                StoreError::Corrupt {
                    path: shown.clone(),
                    message: e.to_string(),
                }
            }
            _ => StoreError::from(e),
        };
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(corrupt)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Open {
                path: shown,
                message: format!("cannot switch to WAL journaling (got {mode})"),
            });
        }
        conn.execute_batch("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;")
            .map_err(corrupt)?;
        let check: String = conn
            .query_row("PRAGMA quick_check", [], |r| r.get(0))
            .map_err(corrupt)?;
        if check != "ok" {
            return Err(StoreError::Corrupt {
                path: shown,
                message: check,
            });
        }
        conn.execute_batch(SCHEMA).map_err(corrupt)?;
        migrate(&conn).map_err(corrupt)?;
        // Version 7: routines and their steps (new tables only).
        conn.execute_batch(routines::ROUTINE_SCHEMA)
            .map_err(corrupt)?;
        // Version 8: standing policies (a new table only).
        conn.execute_batch(standing::STANDING_SCHEMA)
            .map_err(corrupt)?;
        // Version 9: the operator's passkeys (a new table only).
        conn.execute_batch(passkeys::PASSKEY_SCHEMA)
            .map_err(corrupt)?;
        conn.set_prepared_statement_cache_capacity(64);
        let found: Option<i64> = conn
            .query_row(
                "SELECT CAST(value AS INTEGER) FROM meta WHERE key='schema'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        match found {
            None => {
                conn.prepare_cached("INSERT INTO meta(key, value) VALUES('schema', ?1)")?
                    .execute(params![SCHEMA_VERSION.to_string()])?;
            }
            Some(v) if v > SCHEMA_VERSION => {
                return Err(StoreError::TooNew {
                    path: shown,
                    found: v,
                    known: SCHEMA_VERSION,
                });
            }
            Some(v) if v < SCHEMA_VERSION => {
                conn.prepare_cached("UPDATE meta SET value = ?1 WHERE key = 'schema'")?
                    .execute(params![SCHEMA_VERSION.to_string()])?;
            }
            Some(_) => {}
        }
        Ok(SqliteStore {
            conn: Mutex::new(conn),
            path,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` in one IMMEDIATE transaction: everything it writes commits
    /// together or not at all.
    pub(super) fn write<T>(
        &self,
        f: impl FnOnce(&mut SqliteTx<'_>) -> StoreResult<T>,
    ) -> StoreResult<T> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut w = SqliteTx { tx };
        let out = f(&mut w)?;
        w.tx.commit()?;
        Ok(out)
    }
}

/// One IMMEDIATE transaction of the SQLite store.
pub(super) struct SqliteTx<'c> {
    tx: Transaction<'c>,
}

impl SqliteTx<'_> {
    /// The transaction's connection (tests write damage and read query
    /// plans through it).
    #[cfg(test)]
    pub(super) fn conn(&self) -> &Connection {
        &self.tx
    }
}

/// Where the reads run: the store's connection (each read alone) or a
/// transaction's (seeing its writes).
trait Reads {
    fn reading<T>(&self, f: impl FnOnce(&Connection) -> StoreResult<T>) -> StoreResult<T>;
}

impl Reads for SqliteStore {
    fn reading<T>(&self, f: impl FnOnce(&Connection) -> StoreResult<T>) -> StoreResult<T> {
        f(&self.lock())
    }
}

impl Reads for SqliteTx<'_> {
    fn reading<T>(&self, f: impl FnOnce(&Connection) -> StoreResult<T>) -> StoreResult<T> {
        f(&self.tx)
    }
}

/// The reads of [`Records`], for a type that is [`Reads`]: the same SQL
/// on the store's connection and inside a transaction.
macro_rules! reads {
    () => {
        fn watch_due(&self, cutoff: Option<i64>, now: i64) -> StoreResult<bool> {
            self.reading(|c| {
                if let Some(t) = cutoff
                    && !records::silent_sessions(c, t, 1)?.is_empty()
                {
                    return Ok(true);
                }
                Ok(!records::watching_with_stale_member(c)?.is_empty()
                    || !records::past_deadline(c, now)?.is_empty())
            })
        }

        fn session(&self, id: &str) -> StoreResult<Option<SessionRow>> {
            self.reading(|c| records::get_session(c, id))
        }

        fn sessions(&self) -> StoreResult<Vec<SessionRow>> {
            self.reading(records::list_sessions)
        }

        fn sessions_keyed(&self, digests: &[String]) -> StoreResult<Vec<String>> {
            self.reading(|c| records::sessions_keyed(c, digests))
        }

        fn sessions_page(&self, cursor: i64, limit: usize) -> StoreResult<Vec<(i64, SessionRow)>> {
            self.reading(|c| records::page_sessions(c, cursor, limit))
        }

        fn silent_sessions(&self, cutoff: i64, limit: usize) -> StoreResult<Vec<SessionRow>> {
            self.reading(|c| records::silent_sessions(c, cutoff, limit))
        }

        fn sessions_to_recover(&self) -> StoreResult<Vec<SessionRow>> {
            self.reading(records::sessions_to_recover)
        }

        fn has_session_event(&self, session_id: &str, kind: &str) -> StoreResult<bool> {
            self.reading(|c| records::has_session_event(c, session_id, kind))
        }

        fn policy(&self, id: &str) -> StoreResult<Option<PolicyRow>> {
            self.reading(|c| records::get_policy(c, id))
        }

        fn policies(&self, statuses: &[PolicyStatus]) -> StoreResult<Vec<PolicyRow>> {
            self.reading(|c| records::list_policies(c, statuses))
        }

        fn policies_page(
            &self,
            statuses: &[PolicyStatus],
            cursor: i64,
            limit: usize,
            newest_first: bool,
        ) -> StoreResult<Vec<PolicyRow>> {
            self.reading(|c| records::page_policies(c, statuses, cursor, limit, newest_first))
        }

        fn policy_counts(&self) -> StoreResult<Vec<(String, u64)>> {
            self.reading(records::count_policies)
        }

        fn policies_with_open_publishes(&self) -> StoreResult<Vec<PolicyRow>> {
            self.reading(records::open_publishes)
        }

        fn policies_to_sweep(&self, queued: bool) -> StoreResult<Vec<PolicyRow>> {
            self.reading(|c| records::to_sweep(c, queued))
        }

        fn damaged_policies(&self) -> StoreResult<Vec<String>> {
            self.reading(records::damaged_unsettled)
        }

        fn watching_with_stale_member(&self) -> StoreResult<Vec<PolicyRow>> {
            self.reading(records::watching_with_stale_member)
        }

        fn past_deadline(&self, now: i64) -> StoreResult<Vec<PolicyRow>> {
            self.reading(|c| records::past_deadline(c, now))
        }

        fn live_with(&self, session_id: &str) -> StoreResult<Vec<PolicyRow>> {
            self.reading(|c| records::live_with(c, session_id))
        }

        fn idempotent(&self, key: &str) -> StoreResult<Option<(String, String)>> {
            self.reading(|c| records::idempotent(c, key))
        }

        fn events(&self, filter: &EventFilter) -> StoreResult<Vec<EventRow>> {
            self.reading(|c| records::list_events(c, filter))
        }

        fn head_cursor(&self) -> StoreResult<i64> {
            self.reading(records::head_cursor)
        }

        fn oldest_cursor(&self) -> StoreResult<Option<i64>> {
            self.reading(records::oldest_cursor)
        }

        fn due_deliveries(&self, now: i64, limit: usize) -> StoreResult<Vec<Delivery>> {
            self.reading(|c| records::due_deliveries(c, now, limit))
        }

        fn due_urls(&self, now: i64) -> StoreResult<Vec<String>> {
            self.reading(|c| records::due_urls(c, now))
        }

        fn due_deliveries_to(
            &self,
            url: &str,
            now: i64,
            limit: usize,
        ) -> StoreResult<Vec<Delivery>> {
            self.reading(|c| records::due_deliveries_to(c, url, now, limit))
        }

        fn next_delivery_at(&self) -> StoreResult<Option<i64>> {
            self.reading(records::next_delivery_at)
        }

        fn routine(&self, id: &str) -> StoreResult<Option<RoutineRow>> {
            self.reading(|c| routines::get_routine(c, id))
        }

        fn routines(&self, limit: usize) -> StoreResult<Vec<RoutineRow>> {
            self.reading(|c| routines::list_routines(c, limit))
        }

        fn active_routines(&self) -> StoreResult<Vec<RoutineRow>> {
            self.reading(routines::active_routines)
        }

        fn waiting_routines(&self) -> StoreResult<Vec<RoutineRow>> {
            self.reading(routines::waiting_routines)
        }

        fn routine_past_deadline(&self, now: i64) -> StoreResult<bool> {
            self.reading(|c| routines::past_deadline(c, now))
        }

        fn routines_past_deadline(&self, now: i64) -> StoreResult<Vec<RoutineRow>> {
            self.reading(|c| routines::due_routines(c, now))
        }

        fn routine_on_session(&self, session: &str) -> StoreResult<Option<RoutineRow>> {
            self.reading(|c| routines::routine_on_session(c, session))
        }

        fn routine_by_key(&self, key: &str) -> StoreResult<Option<(String, String)>> {
            self.reading(|c| routines::routine_by_key(c, key))
        }

        fn standing_policies(&self) -> StoreResult<Vec<StandingRow>> {
            self.reading(standing::list_standing)
        }

        fn standing_policy(&self, id: &str) -> StoreResult<Option<StandingRow>> {
            self.reading(|c| standing::get_standing(c, id))
        }

        fn passkeys(&self) -> StoreResult<Vec<PasskeyRow>> {
            self.reading(passkeys::list)
        }
    };
}

impl Records for SqliteStore {
    reads!();
}

impl Records for SqliteTx<'_> {
    reads!();
}

impl RecordsTx for SqliteTx<'_> {
    fn append_event(
        &mut self,
        event: &Event,
        session_id: Option<&str>,
        policy_id: Option<&str>,
        webhooks: &[String],
    ) -> StoreResult<i64> {
        let kind = event.kind();
        let payload = event.payload_text()?;
        let now = now_ms();
        self.tx.prepare_cached("INSERT INTO events(at, type, session_id, policy_id, payload) VALUES(?1, ?2, ?3, ?4, ?5)")?.execute(params![now, kind, session_id, policy_id, payload],
        )?;
        let cursor = self.tx.last_insert_rowid();
        // The global URLs, the session's own, and for a policy event every
        // member's (policy_members is written when the policy is inserted).
        let mut urls: Vec<String> = webhooks.to_vec();
        let mut found: Vec<String> = Vec::new();
        if let Some(sid) = session_id
            && let Some(url) = self
                .tx
                .prepare_cached(SESSION_WEBHOOK_URL)?
                .query_row(params![sid], |r| r.get::<_, Option<String>>(0))
                .optional()?
                .flatten()
        {
            found.push(url);
        }
        if let Some(pid) = policy_id {
            let mut st = self.tx.prepare_cached(MEMBER_WEBHOOK_URLS)?;
            for url in st.query_map(params![pid], |r| r.get::<_, String>(0))? {
                found.push(url?);
            }
        }
        for url in found {
            if !urls.contains(&url) {
                urls.push(url);
            }
        }
        for url in urls {
            self.tx.prepare_cached("INSERT OR IGNORE INTO deliveries(event_cursor, url, next_at, state) VALUES(?1, ?2, ?3, 'pending')")?.execute(params![cursor, url, now],
            )?;
        }
        Ok(cursor)
    }

    fn put_session(&mut self, s: &SessionRow) -> StoreResult<()> {
        records::put_session(&self.tx, s)
    }

    fn insert_policy(&mut self, p: &mut PolicyRow) -> StoreResult<()> {
        let seq: i64 = self
            .tx
            .prepare_cached("SELECT COALESCE(MAX(seq), 0) + 1 FROM policies")?
            .query_row([], |r| r.get(0))?;
        p.seq = seq;
        records::insert_policy(&self.tx, p)
    }

    fn put_policy(&mut self, p: &PolicyRow) -> StoreResult<()> {
        records::put_policy(&self.tx, p)
    }

    fn record_next(&mut self, p: &PolicyRow) -> StoreResult<()> {
        records::record_next(&self.tx, p)
    }

    fn record_prepared(&mut self, p: &PolicyRow) -> StoreResult<()> {
        records::record_prepared(&self.tx, p)
    }

    fn record_publishes(&mut self, p: &PolicyRow) -> StoreResult<()> {
        records::record_publishes(&self.tx, p)
    }

    fn put_damaged_policy(&mut self, p: &PolicyRow) -> StoreResult<()> {
        records::put_damaged_policy(&self.tx, p)
    }

    fn put_idempotent(&mut self, key: &str, request: &str, policy: &str) -> StoreResult<()> {
        records::put_idempotent(&self.tx, key, request, policy)
    }

    fn mark_delivery(
        &mut self,
        id: i64,
        state: &str,
        attempts: u32,
        next_at: i64,
        error: Option<&str>,
    ) -> StoreResult<()> {
        records::mark_delivery(&self.tx, id, state, attempts, next_at, error)
    }

    fn insert_routine_key(&mut self, key: &str, routine: &str, digest: &str) -> StoreResult<()> {
        routines::insert_routine_key(&self.tx, key, routine, digest)
    }

    fn insert_routine(&mut self, r: &RoutineRow) -> StoreResult<()> {
        routines::insert_routine(&self.tx, r)
    }

    fn put_routine(&mut self, r: &RoutineRow) -> StoreResult<()> {
        routines::put_routine(&self.tx, r)
    }

    fn end_damaged_routine(
        &mut self,
        id: &str,
        state: RunState,
        phase: &str,
        reason: &str,
        now: i64,
    ) -> StoreResult<()> {
        routines::end_damaged_routine(&self.tx, id, state, phase, reason, now)
    }

    fn insert_standing(&mut self, s: &StandingRow) -> StoreResult<()> {
        standing::insert_standing(&self.tx, s)
    }

    fn remove_standing(&mut self, id: &str) -> StoreResult<bool> {
        standing::remove_standing(&self.tx, id)
    }

    fn passkey_user(&mut self) -> StoreResult<uuid::Uuid> {
        passkeys::passkey_user(&self.tx)
    }

    fn insert_passkey(&mut self, id: &str, name: &str, p: &Passkey, now: i64) -> StoreResult<bool> {
        passkeys::insert_passkey(&self.tx, id, name, p, now)
    }

    fn passkey_used(&mut self, id: &str, p: &Passkey, now: i64) -> StoreResult<()> {
        passkeys::passkey_used(&self.tx, id, p, now)
    }

    fn remove_passkey(&mut self, id: &str) -> StoreResult<bool> {
        passkeys::remove_passkey(&self.tx, id)
    }

    fn rename_passkey(&mut self, id: &str, name: &str) -> StoreResult<bool> {
        passkeys::rename_passkey(&self.tx, id, name)
    }
}

impl Backend for SqliteStore {
    fn transaction(&self, body: TxBody<'_>) -> StoreResult<()> {
        self.write(|tx| body(tx))
    }

    fn apply_retention(&self, rules: &Retention, now: i64) -> StoreResult<Swept> {
        self.retain(rules, now)
    }

    fn location(&self) -> String {
        self.path.display().to_string()
    }

    #[cfg(any(test, feature = "test-support"))]
    fn stored_text(&self, table: &str, column: &str, id: &str) -> StoreResult<Option<String>> {
        self.reading(|c| {
            Ok(c.query_row(
                &format!("SELECT CAST({column} AS TEXT) FROM {table} WHERE id = ?1"),
                [id],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()?
            .flatten())
        })
    }

    #[cfg(any(test, feature = "test-support"))]
    fn damage_column(
        &self,
        table: &str,
        column: &str,
        id: Option<&str>,
        text: &str,
    ) -> StoreResult<usize> {
        self.write(|tx| {
            Ok(match id {
                Some(id) => tx.tx.execute(
                    &format!("UPDATE {table} SET {column} = ?1 WHERE id = ?2"),
                    params![text, id],
                )?,
                None => tx
                    .tx
                    .execute(&format!("UPDATE {table} SET {column} = ?1"), [text])?,
            })
        })
    }
}

#[cfg(test)]
mod columns_tests;
#[cfg(test)]
mod tests;
