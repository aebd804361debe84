//! The daemon's durable store: one SQLite file (WAL, `synchronous=FULL`)
//! in the data directory, holding sessions, policies, routines, standing policies, the event
//! log and pending webhook deliveries.
//!
//! It owns the schema and the rule that makes the daemon crash-safe: every
//! state change and the events it publishes are written in ONE transaction,
//! committed before any side effect runs and before any reader can see the
//! event. Event cursors come from an `AUTOINCREMENT` key: they only grow,
//! survive restarts and are never reused.
//!
//! It must never run a gate, a process or a network call, and never hold
//! its lock across an `.await`.

mod codec;
mod decode;
mod records;
mod schema;
use schema::{SCHEMA, migrate};
mod passkeys;
mod retention;
mod routines;
mod rows;
mod standing;
pub use passkeys::PasskeyRow;
pub use retention::Swept;
pub use routines::{RoutineRow, RoutineStepRow, StepStatus};
pub use standing::StandingRow;

#[cfg(test)]
pub(crate) use codec::counter as codec_counter;
pub use rows::{
    Delivery, EventFilter, EventRow, PolicyRow, PolicyStatus, RowDamage, SessionRow, SessionState,
};

use crate::model::event::Event;
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

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

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the data directory is full: {0}")]
    Full(String),
    #[error("the store cannot be written (read-only data directory?): {0}")]
    ReadOnly(String),
    #[error("the store file {path} is damaged: {message}")]
    Corrupt { path: String, message: String },
    #[error(
        "the store file {path} was written by a newer gatehost (schema {found}, this build knows {known})"
    )]
    TooNew {
        path: String,
        found: i64,
        known: i64,
    },
    #[error("cannot open the store {path}: {message}")]
    Open { path: String, message: String },
    #[error("store error: {0}")]
    Sqlite(String),
    #[error("stored {what} is not valid JSON: {message}")]
    Decode { what: &'static str, message: String },
    /// A typed column that does not encode as JSON (never stored as
    /// `null`).
    #[error("the {column} to store does not encode as JSON: {message}")]
    Encode {
        column: &'static str,
        message: String,
    },
    /// A write of a row that did not decode (its placeholders would
    /// overwrite what is stored).
    #[error("{row}: its stored {column} does not decode; it is not written back")]
    Damaged { row: String, column: String },
    /// The caller of a write refused it (its own error says why, and is
    /// what it answers): the transaction was rolled back, nothing kept.
    #[error("the transaction was rolled back")]
    RolledBack,
    /// An event whose payload does not encode.
    #[error("cannot store an event: {0}")]
    Event(#[from] crate::model::event::EventError),
}

impl StoreError {
    /// True when retrying later may succeed (space or permissions returned).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Full(_) | StoreError::ReadOnly(_))
    }
}

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
            _ => StoreError::Sqlite(text),
        }
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// The store. Cheap operations under one mutex; callers never hold it
/// across an await (the API is synchronous).
pub struct Store {
    conn: Mutex<Connection>,
    path: PathBuf,
    /// A test hook (`GATEHOST_TEST_STORE_FAULTS`, a percentage): that
    /// share of write transactions fails as a full disk would, before
    /// anything is written, so that crash tests exercise every caller's
    /// handling of a store error. 0 (always, unless the variable is set).
    faults: u32,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Store {
    /// Opens (creating if needed) `<dir>/gatehost.db`. A damaged file is an
    /// error naming it, never silently replaced.
    pub fn open(dir: &Path) -> StoreResult<Store> {
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
        let faults = std::env::var("GATEHOST_TEST_STORE_FAULTS")
            .ok()
            .and_then(|v| v.parse::<u32>().ok())
            .map_or(0, |p| p.min(90));
        if faults > 0 {
            tracing::warn!(percent = faults, "test hook: store writes fail at random");
        }
        Ok(Store {
            conn: Mutex::new(conn),
            path,
            faults,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` in one IMMEDIATE transaction: everything it writes commits
    /// together or not at all.
    pub fn write<T>(&self, f: impl FnOnce(&mut Tx<'_>) -> StoreResult<T>) -> StoreResult<T> {
        if self.faults > 0 && fastrand::u32(0..100) < self.faults {
            return Err(StoreError::Full(
                "injected by GATEHOST_TEST_STORE_FAULTS".into(),
            ));
        }
        let (out, after) = {
            let mut conn = self.lock();
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let mut w = Tx {
                tx,
                after: Vec::new(),
            };
            let out = f(&mut w)?;
            let Tx { tx, after, .. } = w;
            tx.commit()?;
            (out, after)
        };
        // The store is released first: what runs after may write again.
        for f in after {
            f();
        }
        Ok(out)
    }

    /// Read-only access (a consistent snapshot).
    pub fn read<T>(&self, f: impl FnOnce(&Connection) -> StoreResult<T>) -> StoreResult<T> {
        let conn = self.lock();
        f(&conn)
    }

    /// Whether the watchdog has anything to do at `now` (ms): a session
    /// silent since before `cutoff` (when the heartbeat timeout is set), a
    /// watching policy with a stale member, or a deadline due. A read, so
    /// that an idle look writes nothing and wakes no reader.
    pub fn watch_due(&self, cutoff: Option<i64>, now: i64) -> StoreResult<bool> {
        self.read(|c| {
            if let Some(t) = cutoff
                && !records::silent_sessions(c, t, 1)?.is_empty()
            {
                return Ok(true);
            }
            Ok(!records::watching_with_stale_member(c)?.is_empty()
                || !records::past_deadline(c, now)?.is_empty())
        })
    }

    pub fn session(&self, id: &str) -> StoreResult<Option<SessionRow>> {
        self.read(|c| records::get_session(c, id))
    }

    pub fn sessions(&self) -> StoreResult<Vec<SessionRow>> {
        self.read(records::list_sessions)
    }

    /// The ids of the sessions whose key digest is among `digests` (by
    /// the `sessions_key` index).
    pub fn sessions_keyed(&self, digests: &[String]) -> StoreResult<Vec<String>> {
        self.read(|c| records::sessions_keyed(c, digests))
    }

    pub fn policy(&self, id: &str) -> StoreResult<Option<PolicyRow>> {
        let p = self.read(|c| records::get_policy(c, id))?;
        Ok(p)
    }

    /// A page of sessions after `cursor`, each with its cursor.
    pub fn sessions_page(&self, cursor: i64, limit: usize) -> StoreResult<Vec<(i64, SessionRow)>> {
        self.read(|c| records::page_sessions(c, cursor, limit))
    }

    /// A page of policies by `seq` (`statuses` empty: all): oldest first
    /// after `cursor`, or newest first before it (0: from the newest).
    pub fn policies_page(
        &self,
        statuses: &[PolicyStatus],
        cursor: i64,
        limit: usize,
        newest_first: bool,
    ) -> StoreResult<Vec<PolicyRow>> {
        self.read(|c| records::page_policies(c, statuses, cursor, limit, newest_first))
    }

    /// Policies with a publish that began and never recorded its end.
    pub fn policies_with_open_publishes(&self) -> StoreResult<Vec<PolicyRow>> {
        self.read(records::open_publishes)
    }

    /// What the sweep looks at: the policies in a working state (`queued`
    /// ones only when `queued`) and those whose status does not decode,
    /// oldest first, by a partial index (never a watching or settled one).
    pub fn policies_to_sweep(&self, queued: bool) -> StoreResult<Vec<PolicyRow>> {
        self.read(|c| records::to_sweep(c, queued))
    }

    /// Ids of the policies not settled whose row does not decode, oldest
    /// first (at start-up: rows are
    /// decoded one at a time, never all held at once).
    pub fn damaged_policies(&self) -> StoreResult<Vec<String>> {
        self.read(records::damaged_unsettled)
    }

    /// The sessions recovery looks at: those whose row does not decode,
    /// and those gatehost started that have not exited (read one at a
    /// time, the others never held).
    pub fn sessions_to_recover(&self) -> StoreResult<Vec<SessionRow>> {
        self.read(records::sessions_to_recover)
    }

    /// Ids of the policies with `session_id` as a member that have not
    /// ended, oldest first (by the member index).
    pub fn live_with(&self, session_id: &str) -> StoreResult<Vec<String>> {
        self.read(|c| records::live_with(c, session_id))
    }

    /// Policies, oldest first; `statuses` empty means all.
    pub fn policies(&self, statuses: &[PolicyStatus]) -> StoreResult<Vec<PolicyRow>> {
        self.read(|c| records::list_policies(c, statuses))
    }

    /// Events after `filter.since`, oldest first, at most `filter.limit`.
    pub fn events(&self, filter: &EventFilter) -> StoreResult<Vec<EventRow>> {
        self.read(|c| records::list_events(c, filter))
    }

    /// The newest cursor (0 when the log is empty).
    pub fn head_cursor(&self) -> StoreResult<i64> {
        self.read(|c| Ok(c.prepare_cached(HEAD_CURSOR)?.query_row([], |r| r.get(0))?))
    }

    /// The oldest event kept (retention deletes older ones); `None` when
    /// the log is empty.
    pub fn oldest_cursor(&self) -> StoreResult<Option<i64>> {
        self.read(|c| Ok(c.query_row("SELECT MIN(cursor) FROM events", [], |r| r.get(0))?))
    }

    /// Deliveries due at `now`, oldest first.
    pub fn due_deliveries(&self, now: i64, limit: usize) -> StoreResult<Vec<Delivery>> {
        self.read(|c| records::due_deliveries(c, now, limit))
    }

    /// The URLs with a delivery due at `now`.
    pub fn due_urls(&self, now: i64) -> StoreResult<Vec<String>> {
        self.read(|c| {
            let mut st = c.prepare_cached(
                "SELECT DISTINCT url FROM deliveries WHERE state='pending' AND next_at <= ?1",
            )?;
            let urls = st
                .query_map([now], |r| r.get(0))?
                .collect::<Result<Vec<String>, _>>()?;
            Ok(urls)
        })
    }

    /// Up to `limit` deliveries to `url` due at `now`, oldest first.
    pub fn due_deliveries_to(
        &self,
        url: &str,
        now: i64,
        limit: usize,
    ) -> StoreResult<Vec<Delivery>> {
        self.read(|c| records::due_deliveries_to(c, url, now, limit))
    }

    /// The next time a pending delivery is due, if any.
    pub fn next_delivery_at(&self) -> StoreResult<Option<i64>> {
        self.read(|c| {
            Ok(
                c.prepare_cached("SELECT MIN(next_at) FROM deliveries WHERE state='pending'")?
                    .query_row([], |r| r.get(0))?,
            )
        })
    }
}

/// One write transaction. Events appended through it become visible when
/// it commits, together with the state change they describe.
pub struct Tx<'c> {
    tx: Transaction<'c>,
    /// What runs once this transaction committed (never on a rollback).
    after: Vec<Box<dyn FnOnce() + Send>>,
}

impl Tx<'_> {
    /// Runs `f` once this transaction committed, after the store is
    /// released; never when it rolls back.
    pub fn after_commit(&mut self, f: impl FnOnce() + Send + 'static) {
        self.after.push(Box::new(f));
    }

    pub fn conn(&self) -> &Connection {
        &self.tx
    }

    /// Appends an event and queues its webhook deliveries (the global URLs,
    /// the session's own and, for a policy event, every member's), all
    /// inside this transaction.
    pub fn append_event(
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

    pub fn session(&self, id: &str) -> StoreResult<Option<SessionRow>> {
        records::get_session(&self.tx, id)
    }

    pub fn policy(&self, id: &str) -> StoreResult<Option<PolicyRow>> {
        records::get_policy(&self.tx, id)
    }

    pub fn policies(&self, statuses: &[PolicyStatus]) -> StoreResult<Vec<PolicyRow>> {
        records::list_policies(&self.tx, statuses)
    }

    /// Watching policies that have `session_id` as a member, oldest first.
    pub fn watching_with(&self, session_id: &str) -> StoreResult<Vec<PolicyRow>> {
        records::watching_with(&self.tx, session_id)
    }

    /// Sessions silent since before `cutoff` (ms), neither exited nor
    /// already stale, at most `limit`, oldest first.
    pub fn silent_sessions(&self, cutoff: i64, limit: usize) -> StoreResult<Vec<SessionRow>> {
        records::silent_sessions(&self.tx, cutoff, limit)
    }

    /// Watching policies with a stale member.
    pub fn watching_with_stale_member(&self) -> StoreResult<Vec<PolicyRow>> {
        records::watching_with_stale_member(&self.tx)
    }

    /// Unsettled policies whose deadline is at or before `now` (ms).
    pub fn past_deadline(&self, now: i64) -> StoreResult<Vec<PolicyRow>> {
        records::past_deadline(&self.tx, now)
    }

    /// Ids of the policies judging `session_id`'s work (queued, gating,
    /// nudging).
    pub fn judging_with(&self, session_id: &str) -> StoreResult<Vec<String>> {
        records::judging_with(&self.tx, session_id)
    }

    /// Ids of the policies with `session_id` as a member that have not
    /// ended.
    pub fn live_with(&self, session_id: &str) -> StoreResult<Vec<String>> {
        records::live_with(&self.tx, session_id)
    }

    /// Whether `session_id` has an event of type `kind` in the log.
    pub fn has_session_event(&self, session_id: &str, kind: &str) -> StoreResult<bool> {
        Ok(self
            .tx
            .prepare_cached(
                "SELECT EXISTS(SELECT 1 FROM events WHERE session_id = ?1 AND type = ?2)",
            )?
            .query_row(rusqlite::params![session_id, kind], |r| r.get(0))?)
    }

    pub fn put_session(&mut self, s: &SessionRow) -> StoreResult<()> {
        records::put_session(&self.tx, s)
    }

    /// Writes `p` whole; refused for a row that did not decode.
    pub fn put_policy(&mut self, p: &PolicyRow) -> StoreResult<()> {
        records::put_policy(&self.tx, p)
    }

    /// Records the policy attached as `p`'s `next` (its `next_id`), and
    /// nothing else: bookkeeping of a step the lifecycle took, never a
    /// change of state. Refused for a row that did not decode.
    pub fn record_next(&mut self, p: &PolicyRow) -> StoreResult<()> {
        records::record_next(&self.tx, p)
    }

    /// Records the commit prepared for `p` (or its absence, to prepare it
    /// again) and the time, and nothing else: never a change of state.
    /// Refused for a row that did not decode.
    pub fn record_prepared(&mut self, p: &PolicyRow) -> StoreResult<()> {
        records::record_prepared(&self.tx, p)
    }

    /// Records `p`'s publishes under way (`publish_open`: opened before a
    /// publish takes a lock, closed once it ended), and nothing else:
    /// never a change of state. Refused for a row that did not decode.
    pub fn record_publishes(&mut self, p: &PolicyRow) -> StoreResult<()> {
        records::record_publishes(&self.tx, p)
    }

    /// Writes only the status, reason and time of a policy whose row did
    /// not decode.
    pub fn put_damaged_policy(&mut self, p: &PolicyRow) -> StoreResult<()> {
        records::put_damaged_policy(&self.tx, p)
    }

    pub fn insert_policy(&mut self, p: &mut PolicyRow) -> StoreResult<()> {
        let seq: i64 = self
            .tx
            .prepare_cached("SELECT COALESCE(MAX(seq), 0) + 1 FROM policies")?
            .query_row([], |r| r.get(0))?;
        p.seq = seq;
        records::insert_policy(&self.tx, p)
    }

    /// The policy an idempotency key made, and the request's digest.
    pub fn idempotent(&self, key: &str) -> StoreResult<Option<(String, String)>> {
        Ok(self
            .tx
            .prepare_cached("SELECT policy_id, request FROM idempotency WHERE key = ?1")?
            .query_row([key], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?)
    }

    /// Records that `key` (with the request digest `request`) made `policy`.
    pub fn put_idempotent(&mut self, key: &str, request: &str, policy: &str) -> StoreResult<()> {
        self.tx
            .prepare_cached(
                "INSERT INTO idempotency(key, request, policy_id, created_at) VALUES(?1, ?2, ?3, ?4)",
            )?
            .execute(params![key, request, policy, now_ms()])?;
        Ok(())
    }

    pub fn head_cursor(&self) -> StoreResult<i64> {
        Ok(self
            .tx
            .prepare_cached(HEAD_CURSOR)?
            .query_row([], |r| r.get(0))?)
    }

    pub fn mark_delivery(
        &mut self,
        id: i64,
        state: &str,
        attempts: u32,
        next_at: i64,
        error: Option<&str>,
    ) -> StoreResult<()> {
        self.tx.prepare_cached("UPDATE deliveries SET state=?2, attempts=?3, next_at=?4, last_error=?5 WHERE id=?1")?.execute(params![id, state, attempts, next_at, error],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod columns_tests;
#[cfg(test)]
mod tests;
