//! The synchronous bridge between the store's interface (synchronous, called
//! from the daemon's async code as SQLite is) and tokio-postgres (async).
//!
//! It owns the backend's own small tokio runtime (two worker threads named
//! `gatehost-pg`), on which every connection's task and the pool's timers
//! run, and [`Sql`], the synchronous face of one connection: a call enters
//! that runtime's context and waits for the client's future on the calling
//! thread with `futures::executor::block_on` (the client talks to its
//! connection task over channels, so any executor can poll it). It must
//! never call `Runtime::block_on` (which panics inside the daemon's
//! runtime), never be dropped blocking (its runtime is shut down in the
//! background), and never let a driver type out of `store::postgres`.

use super::errors::from_pg;
use crate::store::{StoreError, StoreResult};
use deadpool_postgres::ClientWrapper;
use std::cell::{Cell, RefCell};
use std::future::Future;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

/// A statement's parameter.
pub(super) type Param<'a> = &'a (dyn ToSql + Sync);

/// The backend's runtime: connections run on it; callers wait on their
/// own thread.
pub(super) struct Bridge {
    /// Always `Some` until dropped (taken to shut it down in the
    /// background).
    rt: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bridge(gatehost-pg)")
    }
}

impl Bridge {
    /// Starts the runtime (two worker threads, `gatehost-pg`).
    pub(super) fn new() -> StoreResult<Bridge> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("gatehost-pg")
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| {
                StoreError::Backend(format!("cannot start the PostgreSQL runtime: {e}"))
            })?;
        Ok(Bridge { rt: Some(rt) })
    }

    /// Runs `fut` to its end on the calling thread, inside the runtime's
    /// context (so that what it spawns, its sockets and its timers are the
    /// runtime's). Safe from inside any other runtime, of either flavour.
    pub(super) fn wait<F: Future>(&self, fut: F) -> F::Output {
        let _inside = self.rt.as_ref().map(|rt| rt.handle().enter());
        futures::executor::block_on(fut)
    }

    /// The runtime's handle (for a task of the store's own, as the
    /// listener's), if it still runs.
    pub(super) fn handle(&self) -> Option<tokio::runtime::Handle> {
        self.rt.as_ref().map(|rt| rt.handle().clone())
    }

    /// Runs `fut` on the runtime, in the background (a connection's task,
    /// a host's heartbeat); it ends with the runtime.
    pub(super) fn spawn<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        if let Some(rt) = &self.rt {
            drop(rt.spawn(fut));
        }
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which panics in async code: the
        // store may be dropped there.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// One connection, synchronously: each call prepares its statement (cached
/// per connection) and waits for its answer. It remembers whether a
/// statement failed, so that a transaction with a failed statement is
/// never committed (PostgreSQL would silently roll it back).
///
/// It can hold a prelude (statements without parameters, a write's `BEGIN`
/// and its lock: [`Sql::with_prelude`]) that goes out with its next
/// statement, in the same round trip: the client pipelines them (the
/// prelude's simple query first, then that statement's bind and execute),
/// and the server runs them in that order, each statement of READ
/// COMMITTED from its own snapshot, taken when it starts (after the
/// prelude's lock was granted).
pub(super) struct Sql<'a> {
    bridge: &'a Bridge,
    client: &'a ClientWrapper,
    failed: Cell<bool>,
    prelude: RefCell<Option<String>>,
}

impl<'a> Sql<'a> {
    pub(super) fn new(bridge: &'a Bridge, client: &'a ClientWrapper) -> Sql<'a> {
        Sql {
            bridge,
            client,
            failed: Cell::new(false),
            prelude: RefCell::new(None),
        }
    }

    /// As [`Sql::new`], with `prelude` sent ahead of the next statement,
    /// in its round trip.
    pub(super) fn with_prelude(
        bridge: &'a Bridge,
        client: &'a ClientWrapper,
        prelude: String,
    ) -> Sql<'a> {
        let sql = Sql::new(bridge, client);
        *sql.prelude.borrow_mut() = Some(prelude);
        sql
    }

    /// Whether a statement on it has failed.
    pub(super) fn failed(&self) -> bool {
        self.failed.get()
    }

    fn noted<T>(&self, r: Result<T, tokio_postgres::Error>) -> StoreResult<T> {
        r.map_err(|e| {
            self.failed.set(true);
            from_pg(e)
        })
    }

    /// Waits for `fut`, a statement's; the prelude, if one is still to
    /// go, is sent before it, pipelined (its failure is the answer: the
    /// statement after it cannot have run as meant).
    fn run<T>(
        &self,
        fut: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> StoreResult<T> {
        let prelude = self.prelude.borrow_mut().take();
        match prelude {
            None => self.noted(self.bridge.wait(fut)),
            Some(p) => {
                // `join` polls the prelude first: its message is queued
                // on the connection before the statement's.
                let (before, out) = self
                    .bridge
                    .wait(futures::future::join(self.client.batch_execute(&p), fut));
                self.noted(before)?;
                self.noted(out)
            }
        }
    }

    /// The rows `sql` answers.
    pub(super) fn query(&self, sql: &str, params: &[Param<'_>]) -> StoreResult<Vec<Row>> {
        let c = self.client;
        self.run(async {
            let st = c.prepare_cached(sql).await?;
            c.query(&st, params).await
        })
    }

    /// The rows of each statement of `statements`, sent together in one
    /// round trip (pipelined; the server runs them in this order): for
    /// statements none of which needs another's answer.
    pub(super) fn query_all(
        &self,
        statements: &[(&str, &[Param<'_>])],
    ) -> StoreResult<Vec<Vec<Row>>> {
        let c = self.client;
        self.run(async {
            // Prepared first (cached: no round trip after the first), so
            // that the queries go out in order, all at once.
            let prepared =
                futures::future::try_join_all(statements.iter().map(|(s, _)| c.prepare_cached(s)))
                    .await?;
            futures::future::try_join_all(
                prepared
                    .iter()
                    .zip(statements)
                    .map(|(st, (_, params))| c.query(st, params)),
            )
            .await
        })
    }

    /// The one row `sql` answers, if any (more is an error).
    pub(super) fn opt(&self, sql: &str, params: &[Param<'_>]) -> StoreResult<Option<Row>> {
        let c = self.client;
        self.run(async {
            let st = c.prepare_cached(sql).await?;
            c.query_opt(&st, params).await
        })
    }

    /// The one row `sql` answers (none is an error).
    pub(super) fn one(&self, sql: &str, params: &[Param<'_>]) -> StoreResult<Row> {
        let c = self.client;
        self.run(async {
            let st = c.prepare_cached(sql).await?;
            c.query_one(&st, params).await
        })
    }

    /// Runs `sql`; how many rows it changed.
    pub(super) fn execute(&self, sql: &str, params: &[Param<'_>]) -> StoreResult<u64> {
        let c = self.client;
        self.run(async {
            let st = c.prepare_cached(sql).await?;
            c.execute(&st, params).await
        })
    }

    /// Runs statements without parameters, in one round trip (after the
    /// prelude, if one is still to go).
    pub(super) fn batch(&self, sql: &str) -> StoreResult<()> {
        let text = match self.prelude.borrow_mut().take() {
            Some(p) => format!("{p}; {sql}"),
            None => sql.to_string(),
        };
        self.noted(self.bridge.wait(self.client.batch_execute(&text)))
    }
}

/// Column `name` of `row`, or an error naming it (never a panic).
pub(super) fn col<'r, T: tokio_postgres::types::FromSql<'r>>(
    row: &'r Row,
    name: &str,
) -> StoreResult<T> {
    row.try_get(name).map_err(|e| StoreError::Decode {
        what: "row",
        message: format!("{name}: {e}"),
    })
}
