//! The daemon's durable store: sessions, policies, routines, standing
//! policies, passkeys, the event log and pending webhook deliveries, as
//! typed records (`rows`, `routine_rows`) behind one interface
//! (`interface`: [`Records`] for the reads, [`RecordsTx`] for the typed
//! operations of one transaction, [`Backend`] for a store as a whole,
//! with the contract every backend keeps).
//!
//! [`Store`] is the facade the engine holds: it reads as its backend's
//! [`Records`] and writes through [`Store::write`], whose body composes
//! typed operations ([`Tx`]) that commit together with the events they
//! publish, before any side effect runs and before any reader can see
//! them; what must run after the commit is queued with
//! [`Tx::after_commit`]. The typed JSON columns are encoded and decoded
//! once, at this edge, by `codec` (shared by every backend), and a row
//! into its record by `row_decode` (one rule for a damaged row, whichever
//! backend read it).
//!
//! Two backends implement it, each checked by `conformance`: `sqlite`
//! (one SQLite file, WAL, `synchronous=FULL`, in the data directory: the
//! default, for one host, nothing to set up; [`Store::open`]) and
//! `postgres` (one PostgreSQL database that many hosts can share, issue
//! 51; [`Store::open_postgres`], with [`pg_migrate`] and [`pg_status`] for
//! the command line). With PostgreSQL, other hosts write too:
//! [`Store::wakeups`] tells when they did (LISTEN/NOTIFY). Each owns its
//! connections, its schema and its
//! migrations, its SQL and the decoding of its rows; no SQL and no driver
//! type leaves it.
//!
//! It must never run a gate, a process or a network call of the daemon's,
//! and never hold its lock across an `.await`.

mod codec;
#[cfg(test)]
pub(crate) mod conformance;
mod interface;
mod postgres;
mod routine_rows;
mod row_decode;
mod rows;
mod sqlite;
pub mod tokens;

pub use interface::{Backend, Records, RecordsTx, SharedTokens, Swept, TxBody};
pub use postgres::{HostSpec, PgOptions, PgStatus, pg_migrate, pg_status};
pub use routine_rows::{RoutineRow, RoutineStepRow, StepStatus};
pub use rows::{
    Delivery, EventFilter, EventRow, HostRequestRow, HostRequestState, HostStatus, Leadership,
    PasskeyRow, PolicyRow, PolicyStatus, RowDamage, SessionRow, SessionState, StaleHost,
    StandingRow, TakenOver,
};

#[cfg(any(test, feature = "test-support"))]
pub use codec::counter as codec_counter;
/// Test only: a fresh PostgreSQL database per test (see its doc).
#[cfg(any(test, feature = "test-support"))]
pub use postgres::testdb as pg_testdb;

use crate::config::Retention;
use std::path::Path;

/// Why the store could not read or write: each backend maps its own
/// failures to these.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The disk (or the test hook's fault) refused a write for space: the
    /// backend's message. Retrying later may succeed.
    #[error("the data directory is full: {0}")]
    Full(String),
    /// The store's file or directory refused a write for permissions: the
    /// backend's message. Retrying later may succeed.
    #[error("the store cannot be written (read-only data directory?): {0}")]
    ReadOnly(String),
    /// The store file is not a database gatehost can read (or fails its
    /// integrity check); it is never replaced.
    #[error("the store file {path} is damaged: {message}")]
    Corrupt {
        /// The store file.
        path: String,
        /// What the backend found wrong.
        message: String,
    },
    /// The store file's schema is newer than this build's: a downgrade,
    /// refused rather than risking the newer data.
    #[error(
        "the store file {path} was written by a newer gatehost (schema {found}, this build knows {known})"
    )]
    TooNew {
        /// The store file.
        path: String,
        /// The schema version the file records.
        found: i64,
        /// The newest schema version this build knows.
        known: i64,
    },
    /// The database cannot be reached now (PostgreSQL: no connection could
    /// be made or it was lost, the server is shutting down or has too many
    /// connections, a serialization or deadlock failure): the backend's
    /// message, never a password. Retrying later may succeed.
    #[error("the database cannot be reached: {0}")]
    Unreachable(String),
    /// The store file or its directory could not be opened or made.
    #[error("cannot open the store {path}: {message}")]
    Open {
        /// The store file.
        path: String,
        /// The backend's message.
        message: String,
    },
    /// Any other failure of the backend, as its message.
    #[error("store error: {0}")]
    Backend(String),
    /// This host's claim was replaced (its id claimed again, by another
    /// process or after a takeover): it must stop acting, for good; a new
    /// process claims the id again. Why, for a person.
    #[error("this host no longer holds its claim: {0}")]
    Fenced(String),
    /// This host's lease is not renewed (the database cannot be reached
    /// for too long): it acts on nothing until a renewal succeeds.
    /// Retrying later may succeed.
    #[error("this host's lease is not renewed: {0}")]
    LeaseLapsed(String),
    /// The row belongs to another host, which alone changes it.
    #[error("{0}")]
    NotOwner(String),
    /// The host id is claimed by another live process.
    #[error("{0}")]
    HostTaken(String),
    /// A stored value (a row, a routine, a standing policy, a passkey) is
    /// not valid JSON of its type (a few encodes of such values say so too).
    #[error("stored {what} is not valid JSON: {message}")]
    Decode {
        /// What was being read (`row`, `routine`, …).
        what: &'static str,
        /// The decoder's message.
        message: String,
    },
    /// A typed column that does not encode as JSON (never stored as
    /// `null`).
    #[error("the {column} to store does not encode as JSON: {message}")]
    Encode {
        /// The column being written.
        column: &'static str,
        /// The encoder's message.
        message: String,
    },
    /// A write of a row that did not decode (its placeholders would
    /// overwrite what is stored).
    #[error("{row}: its stored {column} does not decode; it is not written back")]
    Damaged {
        /// The row, named for a person (`routine <id>`, `standing policy <id>`).
        row: String,
        /// Its column that did not decode.
        column: String,
    },
    /// The caller of a write refused it (its own error says why, and is
    /// what it answers): the transaction was rolled back, nothing kept.
    #[error("the transaction was rolled back")]
    RolledBack,
    /// An event whose payload does not encode.
    #[error("cannot store an event: {0}")]
    Event(#[from] crate::model::event::EventError),
}

impl StoreError {
    /// True when retrying later may succeed (space or permissions
    /// returned, the database reachable again).
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            StoreError::Full(_)
                | StoreError::ReadOnly(_)
                | StoreError::Unreachable(_)
                | StoreError::LeaseLapsed(_)
        )
    }
}

/// A store operation's result.
pub type StoreResult<T> = Result<T, StoreError>;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The store: a backend behind the interface. It reads as the backend's
/// [`Records`] (`store.policy(id)`); it writes through [`Store::write`].
pub struct Store {
    /// PostgreSQL's wake-ups (other hosts' commits); dropped, and its
    /// listener with it, before the backend.
    wakeups: Option<postgres::Wakeups>,
    backend: Box<dyn Backend>,
    /// A test hook: a share of write transactions fails as a full disk
    /// would (none in the product).
    faults: gatehost_test_hooks::StoreFaults,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("at", &self.backend.location())
            .finish()
    }
}

impl std::ops::Deref for Store {
    type Target = dyn Records;

    fn deref(&self) -> &Self::Target {
        &*self.backend
    }
}

impl Store {
    /// Opens (creating if needed) the SQLite store `<dir>/gatehost.db`. A
    /// damaged file is an error naming it, never silently replaced.
    pub fn open(dir: &Path) -> StoreResult<Store> {
        Ok(Store::over(Box::new(sqlite::SqliteStore::open(dir)?)))
    }

    /// Opens the PostgreSQL store of `opts`: connects (TLS as its URL's
    /// `sslmode` says) and brings the schema up to this build's, under an
    /// advisory lock so that two hosts never migrate at once. A schema
    /// newer than this build's is refused ([`StoreError::TooNew`]); a
    /// database that cannot be reached is [`StoreError::Unreachable`].
    pub fn open_postgres(opts: &PgOptions) -> StoreResult<Store> {
        let pg = postgres::PgStore::open(opts)?;
        let wakeups = pg.wakeups(opts)?;
        let mut store = Store::over(Box::new(pg));
        store.wakeups = Some(wakeups);
        Ok(store)
    }

    /// Opens the PostgreSQL database of `opts` for the host `spec`: claims
    /// its id (a new fencing number; refused while another live process
    /// holds it) and renews its lease until the store is dropped or
    /// [`Store::release_host`] is called; every write checks the claim.
    pub fn open_postgres_as(opts: &PgOptions, spec: &HostSpec) -> StoreResult<Store> {
        let pg = postgres::PgStore::open_as(opts, spec)?;
        let wakeups = pg.wakeups(opts)?;
        let mut store = Store::over(Box::new(pg));
        store.wakeups = Some(wakeups);
        Ok(store)
    }

    /// The host this store works for and its fencing number, if any.
    pub fn host(&self) -> Option<(String, i64)> {
        self.backend.host()
    }

    /// Whether this process may act for its host now ([`Backend::acting`]).
    pub fn acting(&self) -> StoreResult<()> {
        self.backend.acting()
    }

    /// Told once, with why, when this host's claim is lost.
    pub fn claim_lost(&self) -> Option<tokio::sync::watch::Receiver<Option<String>>> {
        self.backend.claim_lost()
    }

    /// Ends this host's claim at a clean stop.
    pub fn release_host(&self) {
        self.backend.release_host();
    }

    /// The cluster's tokens ([`Backend::shared_tokens`]): `None` for
    /// SQLite.
    pub fn shared_tokens(&self) -> Option<&dyn SharedTokens> {
        self.backend.shared_tokens()
    }

    /// Wake-ups for a rotation of the cluster's tokens by any host: the
    /// receiver changes at each such commit, and once each time the
    /// listener listens again after its connection was lost (a rotation
    /// may have been missed meanwhile). A host woken reads the tokens'
    /// generations again. `None` for SQLite. Starts the listener as
    /// [`Store::wakeups`] does.
    pub fn token_wakeups(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.wakeups
            .as_ref()
            .map(postgres::Wakeups::subscribe_tokens)
    }

    /// A store over `backend`.
    pub fn over(backend: Box<dyn Backend>) -> Store {
        Store {
            wakeups: None,
            backend,
            faults: gatehost_test_hooks::StoreFaults::from_env(),
        }
    }

    /// Wake-ups for the writes of other processes (hosts) sharing this
    /// store: the receiver changes at each commit of another host that
    /// appended events (its value: the newest cursor heard of), and once
    /// each time the listener listens again after its connection was
    /// lost (what was committed meanwhile is then read by cursor). A
    /// reader woken re-reads the store by cursor; a wake-up may be
    /// spurious, never the only record of an event. `None` for SQLite,
    /// whose writers are all in this process. PostgreSQL: the first call
    /// starts the listener (a connection of its own), which ends when the
    /// store is dropped; the sender is dropped then too.
    pub fn wakeups(&self) -> Option<tokio::sync::watch::Receiver<i64>> {
        self.wakeups.as_ref().map(postgres::Wakeups::subscribe)
    }

    /// Wake-ups for the requests hosts send each other (PostgreSQL's
    /// LISTEN/NOTIFY): the receiver changes at each request sent to this
    /// host, each request answered (by any host), and once each time the
    /// listener listens again. A woken host re-reads `host_requests`; a
    /// wake-up may be spurious, and a reader still looks now and then
    /// (a notification is never the only record). `None` for SQLite.
    pub fn request_wakeups(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.wakeups
            .as_ref()
            .map(postgres::Wakeups::subscribe_requests)
    }

    /// The test hook's draw: a write fails as on a full disk.
    fn fault(&self) -> StoreResult<()> {
        match self.faults.draw() {
            Some(why) => Err(StoreError::Full(why.into())),
            None => Ok(()),
        }
    }

    /// Runs `f` in one transaction: everything it writes commits together
    /// or not at all. What it queued with [`Tx::after_commit`] runs once
    /// committed, after the store is released.
    pub fn write<T>(&self, f: impl FnOnce(&mut Tx<'_>) -> StoreResult<T>) -> StoreResult<T> {
        self.fault()?;
        let mut out = None;
        let mut after = Vec::new();
        self.backend.transaction(Box::new(|ops| {
            let mut tx = Tx {
                ops,
                after: Vec::new(),
            };
            out = Some(f(&mut tx)?);
            after = tx.after;
            Ok(())
        }))?;
        // The store is released first: what runs after may write again.
        for f in after {
            f();
        }
        out.ok_or_else(|| StoreError::Backend("the transaction's body never ran".into()))
    }

    /// Applies the retention rules as of `now` (ms), in small
    /// transactions (see [`Backend::apply_retention`]).
    pub fn apply_retention(&self, rules: &Retention, now: i64) -> StoreResult<Swept> {
        self.fault()?;
        self.backend.apply_retention(rules, now)
    }

    /// Test only: the round trips its statements made to a database
    /// server (see [`Backend::round_trips`]).
    #[cfg(any(test, feature = "test-support"))]
    pub fn round_trips(&self) -> Option<u64> {
        self.backend.round_trips()
    }

    /// Test only: the stored text of a column, read without decoding its
    /// row (see [`Backend::stored_text`]).
    #[cfg(any(test, feature = "test-support"))]
    pub fn stored_text(&self, table: &str, column: &str, id: &str) -> StoreResult<Option<String>> {
        self.backend.stored_text(table, column, id)
    }

    /// Test only: damages a stored column (see [`Backend::damage_column`]).
    #[cfg(any(test, feature = "test-support"))]
    pub fn damage_column(
        &self,
        table: &str,
        column: &str,
        id: Option<&str>,
        text: &str,
    ) -> StoreResult<usize> {
        self.backend.damage_column(table, column, id, text)
    }
}

/// One write transaction, as [`Store::write`]'s body sees it: the
/// backend's typed operations ([`RecordsTx`], reached through it) and a
/// queue of what runs once it committed. Events appended through it become
/// visible when it commits, together with the state change they describe.
pub struct Tx<'a> {
    ops: &'a mut dyn RecordsTx,
    /// What runs once this transaction committed (never on a rollback).
    after: Vec<Box<dyn FnOnce() + Send>>,
}

impl Tx<'_> {
    /// Runs `f` once this transaction committed, after the store is
    /// released; never when it rolls back.
    pub fn after_commit(&mut self, f: impl FnOnce() + Send + 'static) {
        self.after.push(Box::new(f));
    }
}

impl<'a> std::ops::Deref for Tx<'a> {
    type Target = dyn RecordsTx + 'a;

    fn deref(&self) -> &Self::Target {
        self.ops
    }
}

impl std::ops::DerefMut for Tx<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.ops
    }
}
