//! The PostgreSQL backend: the store's tables in one PostgreSQL database
//! (the URL's default schema), behind the store's interface, so that many
//! hosts can share one store (issue 51; this is its foundation: one host
//! or many, every write serialised cluster-wide).
//!
//! It owns the connection pool (tokio-postgres with deadpool, 8
//! connections, TLS by the URL's `sslmode`: `options`) and the runtime its
//! connections run on (`bridge`: the interface stays synchronous), the
//! schema and its migrations (`schema`, under an advisory lock), the SQL
//! (`records`, `routines`, `standing`, `passkeys`, `retention`), the
//! decoding of its rows (`decode`) and the mapping of the driver's errors
//! onto [`StoreError`] (`errors`: an outage is `Unreachable`, retry later),
//! the wake-ups across hosts (`listen`: a commit that appended events
//! notifies, a connection of its own listens),
//! the hosts sharing the database (`hosts`: claims, fencing numbers and
//! leases by the database's clock; `lease`: this process's deadline and
//! heartbeat; `claim`: a store opened for a host, every write of which
//! checks its claim; `leader`: the cluster's leader, dead hosts marked
//! stale and taken over), a write transaction's round trips (`transact`),
//! and `gatehost store`'s entry points (`status`).
//!
//! A store opened for a host (`Store::open_postgres_as`) works on the
//! whole cluster's records for what a person reads, and on its own rows
//! only for what its loops look for (the sweep, recovery, the watchdog,
//! deadlines, routines, webhook deliveries): each row carries the `host`
//! whose work it is, and the schema refuses an update of another host's.
//!
//! Every write transaction is `BEGIN` (READ COMMITTED) then
//! `pg_advisory_xact_lock` of one fixed key ([`WRITE_LOCK`]), as SQLite's
//! `BEGIN IMMEDIATE`: no write of any host interleaves, a body reads what
//! it writes on, and event cursors, taken from a one-row counter under
//! that lock, are given in commit order (a reader never sees cursor N+1
//! before the transaction holding N commits), never reused, never moved
//! back. A host's write then checks, in its own statement, that its
//! claim's fencing number is the current one and its lease runs (a host
//! whose id was claimed again writes nothing, ever again); a host's
//! `BEGIN`, lock and check travel in one round trip, and a body's writes
//! wait to go out with its next read or before the commit (`transact`).
//! A commit whose answer is lost with the connection is reported as
//! `Unreachable`;
//! whether it happened is then unknown (the commit ledger deals with that).
//!
//! It must never let a driver type or SQL text out of this module (the
//! structure tests check that no file above it names the driver), run a
//! gate, a process or a network call of the daemon's, hold a connection
//! across an `.await` of the caller, or show a password.

mod bridge;
mod claim;
mod decode;
mod errors;
mod hosts;
mod leader;
mod lease;
mod listen;
mod options;
mod passkeys;
mod records;
mod requests;
mod retention;
mod routines;
mod schema;
mod standing;
mod status;
#[cfg(any(test, feature = "test-support"))]
pub mod testdb;
mod tokens;
mod transact;
mod writes;

pub use hosts::HostSpec;
pub(super) use listen::Wakeups;
pub use options::PgOptions;
pub use status::{PgStatus, pg_migrate, pg_status};

use super::interface::{Backend, Records, Swept, TxBody};
use super::routine_rows::RoutineRow;
use super::rows::{
    Delivery, EventFilter, EventRow, HostRequestRow, HostStatus, PasskeyRow, PolicyRow,
    PolicyStatus, SessionRow, StandingRow,
};
use super::{StoreError, StoreResult};
use crate::config::Retention;
use bridge::{Bridge, Sql};
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, Runtime};
use errors::from_pool;
use lease::Lease;
use options::{CONNECT_TIMEOUT, Tls};
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The transaction-scoped advisory lock every write transaction takes
/// ("gatehost" in ASCII): writes are serialised across every host.
pub(super) const WRITE_LOCK: i64 = 0x6761_7465_686f_7374;

/// Connections in the pool.
const POOL_SIZE: usize = 8;

/// The PostgreSQL store: a pool of connections on its own runtime.
pub(super) struct PgStore {
    /// Dropped before the runtime its connections run on.
    pool: Pool,
    /// One write of this process at a time (the advisory lock serialises
    /// hosts; this keeps a process's waiting writers off the pool).
    writes: Mutex<()>,
    /// `postgres://user@host:port/database`, never a password.
    location: String,
    /// This process's claim, when it serves as a host (`open_as`): every
    /// write checks it.
    lease: Option<Arc<Lease>>,
    /// How the heartbeat makes its connection.
    parsed: options::Parsed,
    /// The newest cursor a write of this process committed (its own
    /// notifications are not wake-ups: `listen`).
    committed: Arc<AtomicI64>,
    bridge: Bridge,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("at", &self.location)
            .finish()
    }
}

/// Drops a connection out of the pool (closing it: the server rolls back
/// what it had open and releases its locks).
fn discard(obj: Object) {
    drop(Object::take(obj));
}

/// A connection that is discarded unless it is kept (a transaction's body
/// that panics leaves nothing open in the pool).
struct Discard(Option<Object>);

impl Drop for Discard {
    fn drop(&mut self) {
        if let Some(obj) = self.0.take() {
            discard(obj);
        }
    }
}

impl PgStore {
    /// Connects (no migration): the pool, on its runtime. Its connections
    /// work for `host` (the setting `gatehost.host`, which the schema's
    /// defaults and ownership trigger read), and a transaction left idle
    /// (a process stopped in the middle of one) is ended by the server
    /// after half the lease (1 to 5 s), so that it never holds the write
    /// lock for long.
    fn connect(opts: &PgOptions, host: Option<&HostSpec>) -> StoreResult<PgStore> {
        let mut parsed = opts.parse()?;
        let idle = host
            .map(|h| h.lease / 2)
            .unwrap_or(Duration::from_secs(5))
            .clamp(Duration::from_secs(1), Duration::from_secs(5));
        let mut settings = parsed
            .config
            .get_options()
            .map(str::to_string)
            .unwrap_or_default();
        settings.push_str(&format!(
            " -c idle_in_transaction_session_timeout={}",
            idle.as_millis()
        ));
        if let Some(h) = host {
            // A checked id: letters, digits, '.', '_' and '-' only.
            HostSpec::check_id(&h.id).map_err(|e| StoreError::Open {
                path: parsed.location.clone(),
                message: e,
            })?;
            settings.push_str(&format!(" -c {}={}", schema::HOST_SETTING, h.id));
        }
        parsed.config.options(settings.trim());
        let config = ManagerConfig::default();
        let manager = match parsed.tls {
            Tls::Off => Manager::from_config(parsed.config.clone(), tokio_postgres::NoTls, config),
            Tls::Prefer | Tls::Require => Manager::from_config(
                parsed.config.clone(),
                options::tls_connector(&parsed.location)?,
                config,
            ),
        };
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(CONNECT_TIMEOUT))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .recycle_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| StoreError::Open {
                path: parsed.location.clone(),
                message: e.to_string(),
            })?;
        Ok(PgStore {
            pool,
            writes: Mutex::new(()),
            location: parsed.location.clone(),
            lease: None,
            parsed,
            committed: Arc::new(AtomicI64::new(0)),
            bridge: Bridge::new()?,
        })
    }

    /// Connects and brings the schema up to this build's (under the
    /// migration lock); a newer schema is refused.
    pub(super) fn open(opts: &PgOptions) -> StoreResult<PgStore> {
        let store = PgStore::connect(opts, None)?;
        let (before, after) = store.migrate()?;
        tracing::info!(at = %store.location, before, after, "store opened on PostgreSQL");
        Ok(store)
    }

    /// The wake-ups of this store (`listen`): its own connection, on its
    /// runtime, made at the first subscription.
    pub(super) fn wakeups(&self, opts: &PgOptions) -> StoreResult<Wakeups> {
        let runtime = self
            .bridge
            .handle()
            .ok_or_else(|| StoreError::Backend("the PostgreSQL runtime has stopped".into()))?;
        let host = self.lease.as_ref().map(|l| l.id.clone());
        Wakeups::new(opts, runtime, self.committed.clone(), host)
    }

    /// Brings the schema up to this build's: `(before, after)`.
    fn migrate(&self) -> StoreResult<(i64, i64)> {
        let obj = self.pooled()?;
        let done = schema::migrate(&Sql::new(&self.bridge, &obj), &self.location);
        if done.is_err() {
            // Releases the migration lock with the connection.
            discard(obj);
        }
        done
    }

    /// A connection of the pool (made if needed, within the timeout).
    fn pooled(&self) -> StoreResult<Object> {
        self.bridge.wait(self.pool.get()).map_err(from_pool)
    }

    /// Runs the read `f` on a pooled connection; a connection found dead is
    /// replaced once (a read is idempotent), and one on which a statement
    /// failed is never reused.
    fn reading<T>(&self, f: impl Fn(&Sql<'_>) -> StoreResult<T>) -> StoreResult<T> {
        let mut retried = false;
        loop {
            let obj = self.pooled()?;
            let (out, failed) = {
                let sql = Sql::new(&self.bridge, &obj);
                (f(&sql), sql.failed())
            };
            if failed {
                discard(obj);
            }
            match out {
                Err(StoreError::Unreachable(_)) if !retried => retried = true,
                out => return out,
            }
        }
    }

    /// A read of several statements, from one snapshot.
    fn snapshot<T>(&self, f: impl Fn(&Sql<'_>) -> StoreResult<T>) -> StoreResult<T> {
        self.reading(|c| {
            c.batch("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?;
            let out = f(c);
            let end = c.batch(if out.is_ok() { "COMMIT" } else { "ROLLBACK" });
            let out = out?;
            end?;
            Ok(out)
        })
    }
}

/// One write transaction of the PostgreSQL store.
pub(super) struct PgTx<'c> {
    sql: Sql<'c>,
    /// The newest cursor it appended, notified at its commit.
    head: Option<i64>,
    /// The event counter as this transaction knows it: read after the
    /// write lock (which every append holds to its commit), then moved by
    /// its own appends, so that an append knows its cursor without asking
    /// (each append checks it was that one).
    next: std::rc::Rc<std::cell::Cell<Option<i64>>>,
}

/// Where the reads run: a pooled connection (each read alone) or a
/// transaction's (seeing its writes).
trait Reads {
    fn reading<T>(&self, f: impl Fn(&Sql<'_>) -> StoreResult<T>) -> StoreResult<T>;
    fn snapshot<T>(&self, f: impl Fn(&Sql<'_>) -> StoreResult<T>) -> StoreResult<T>;
}

impl Reads for PgStore {
    fn reading<T>(&self, f: impl Fn(&Sql<'_>) -> StoreResult<T>) -> StoreResult<T> {
        PgStore::reading(self, f)
    }

    fn snapshot<T>(&self, f: impl Fn(&Sql<'_>) -> StoreResult<T>) -> StoreResult<T> {
        PgStore::snapshot(self, f)
    }
}

impl Reads for PgTx<'_> {
    fn reading<T>(&self, f: impl Fn(&Sql<'_>) -> StoreResult<T>) -> StoreResult<T> {
        f(&self.sql)
    }

    fn snapshot<T>(&self, f: impl Fn(&Sql<'_>) -> StoreResult<T>) -> StoreResult<T> {
        f(&self.sql)
    }
}

/// The reads of [`Records`], for a type that is [`Reads`].
macro_rules! reads {
    () => {
        fn watch_due(&self, cutoff: Option<i64>, now: i64) -> StoreResult<bool> {
            self.snapshot(|c| {
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
            self.snapshot(|c| routines::get_routine(c, id))
        }

        fn routines(&self, limit: usize) -> StoreResult<Vec<RoutineRow>> {
            self.snapshot(|c| routines::list_routines(c, limit))
        }

        fn active_routines(&self) -> StoreResult<Vec<RoutineRow>> {
            self.snapshot(routines::active_routines)
        }

        fn waiting_routines(&self) -> StoreResult<Vec<RoutineRow>> {
            self.snapshot(routines::waiting_routines)
        }

        fn routine_past_deadline(&self, now: i64) -> StoreResult<bool> {
            self.reading(|c| routines::past_deadline(c, now))
        }

        fn routines_past_deadline(&self, now: i64) -> StoreResult<Vec<RoutineRow>> {
            self.snapshot(|c| routines::due_routines(c, now))
        }

        fn routine_on_session(&self, session: &str) -> StoreResult<Option<RoutineRow>> {
            self.snapshot(|c| routines::routine_on_session(c, session))
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

        fn policy_host(&self, id: &str) -> StoreResult<Option<String>> {
            self.reading(|c| requests::policy_host(c, id))
        }

        fn host_requests_due(&self) -> StoreResult<Vec<HostRequestRow>> {
            self.reading(requests::due)
        }

        fn host_request(&self, id: i64) -> StoreResult<Option<HostRequestRow>> {
            self.reading(|c| requests::get(c, id))
        }

        fn hosts(&self) -> StoreResult<Vec<HostStatus>> {
            self.reading(hosts::list)
        }
    };
}

impl Records for PgStore {
    reads!();
}

impl Records for PgTx<'_> {
    reads!();
}

impl Backend for PgStore {
    fn transaction(&self, body: TxBody<'_>) -> StoreResult<()> {
        self.write(|tx| body(tx))
    }

    fn apply_retention(&self, rules: &Retention, now: i64) -> StoreResult<Swept> {
        self.retain(rules, now)
    }

    fn location(&self) -> String {
        self.location.clone()
    }

    fn host(&self) -> Option<(String, i64)> {
        self.lease.as_ref().map(|l| (l.id.clone(), l.fence))
    }

    fn acting(&self) -> StoreResult<()> {
        match &self.lease {
            Some(l) => l.acting(),
            None => Ok(()),
        }
    }

    fn claim_lost(&self) -> Option<tokio::sync::watch::Receiver<Option<String>>> {
        self.lease.as_ref().map(|l| l.lost())
    }

    fn release_host(&self) {
        self.release();
    }

    fn shared_tokens(&self) -> Option<&dyn super::SharedTokens> {
        Some(self)
    }

    #[cfg(any(test, feature = "test-support"))]
    fn round_trips(&self) -> Option<u64> {
        Some(self.bridge.trips.load(std::sync::atomic::Ordering::Relaxed))
    }

    #[cfg(any(test, feature = "test-support"))]
    fn stored_text(&self, table: &str, column: &str, id: &str) -> StoreResult<Option<String>> {
        self.reading(|c| {
            match c.opt(
                &format!("SELECT CAST({column} AS TEXT) AS t FROM {table} WHERE id = $1"),
                &[&id],
            )? {
                Some(r) => bridge::col(&r, "t"),
                None => Ok(None),
            }
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
        // A typed column (BIGINT) cannot hold text in PostgreSQL: that
        // damage is refused as the error it is.
        self.write(|tx| {
            let n = match id {
                Some(id) => tx.sql.execute(
                    &format!("UPDATE {table} SET {column} = $1 WHERE id = $2"),
                    &[&text, &id],
                )?,
                None => tx
                    .sql
                    .execute(&format!("UPDATE {table} SET {column} = $1"), &[&text])?,
            };
            Ok(usize::try_from(n).unwrap_or(usize::MAX))
        })
    }
}

#[cfg(test)]
mod claim_tests;
#[cfg(test)]
mod decode_tests;
#[cfg(test)]
mod hosts_tests;
#[cfg(test)]
mod leader_tests;
#[cfg(test)]
mod options_tests;
#[cfg(test)]
mod owners_tests;
#[cfg(test)]
mod plans_tests;
#[cfg(test)]
mod queue_tests;
#[cfg(test)]
mod retention_tests;
#[cfg(test)]
mod tests;
