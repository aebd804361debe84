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
use std::sync::atomic::{AtomicU64, Ordering};
use tokio_postgres::types::{Format, IsNull, ToSql, Type};
use tokio_postgres::{Row, Statement};

/// A statement's parameter.
pub(super) type Param<'a> = &'a (dyn ToSql + Sync);

/// The backend's runtime: connections run on it; callers wait on their
/// own thread.
pub(super) struct Bridge {
    /// Always `Some` until dropped (taken to shut it down in the
    /// background).
    rt: Option<tokio::runtime::Runtime>,
    /// The round trips its connections' statements made (each call of
    /// [`Sql`] that waited for the server; a statement's preparation, once
    /// per connection, not counted): what the tests count.
    pub(super) trips: AtomicU64,
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
        Ok(Bridge {
            rt: Some(rt),
            trips: AtomicU64::new(0),
        })
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
/// It holds a queue of statements whose answers nothing waits for yet: a
/// write's `BEGIN` and its lock ([`Sql::with_prelude`]), and the writes a
/// transaction's body makes ([`Sql::defer_count`], [`Sql::defer_rows`]).
/// They go out with the next statement that needs its answer (a read), or
/// at [`Sql::flush`], in that statement's round trip: the client pipelines
/// them and the server runs them in order, each statement of READ
/// COMMITTED from its own snapshot, taken when it starts. Their answers
/// are checked in order, before that statement's is given: the first
/// failure is the answer (the statements after it cannot have run as
/// meant).
pub(super) struct Sql<'a> {
    bridge: &'a Bridge,
    client: &'a ClientWrapper,
    failed: Cell<bool>,
    queue: RefCell<Vec<Queued<'a>>>,
}

/// What a queued statement's answer is given to, once it comes: a check
/// of it, or where it is kept (an error fails the transaction).
type Then<'a, T> = Box<dyn FnOnce(T) -> StoreResult<()> + 'a>;

/// A statement waiting in [`Sql`]'s queue.
enum Queued<'a> {
    /// Statements without parameters (the simple protocol).
    Batch(String),
    /// A prepared statement, its parameters encoded; its count of rows.
    Count(Statement, Vec<Encoded>, Then<'a, u64>),
    /// A prepared statement, its parameters encoded; its rows.
    Rows(Statement, Vec<Encoded>, Then<'a, Vec<Row>>),
}

/// A queued statement's answer.
enum Answer {
    Done,
    Count(u64),
    Rows(Vec<Row>),
}

impl Queued<'_> {
    /// Sends it (on the future's first poll) and waits for its answer.
    async fn send(&self, c: &ClientWrapper) -> Result<Answer, tokio_postgres::Error> {
        match self {
            Queued::Batch(text) => c.batch_execute(text).await.map(|()| Answer::Done),
            Queued::Count(st, params, _) => c.execute(st, &refs(params)).await.map(Answer::Count),
            Queued::Rows(st, params, _) => c.query(st, &refs(params)).await.map(Answer::Rows),
        }
    }

    /// Gives `answer` to what waits for it.
    fn settle(self, answer: Answer) -> StoreResult<()> {
        match (self, answer) {
            (Queued::Count(_, _, then), Answer::Count(n)) => then(n),
            (Queued::Rows(_, _, then), Answer::Rows(rows)) => then(rows),
            _ => Ok(()),
        }
    }
}

fn refs(params: &[Encoded]) -> Vec<Param<'_>> {
    params.iter().map(|p| p as Param<'_>).collect()
}

/// A parameter encoded when its statement was queued (so that the queue
/// borrows nothing of its caller's): the bytes the driver would send.
#[derive(Debug)]
struct Encoded {
    bytes: Option<bytes::Bytes>,
    format: Format,
}

impl Encoded {
    fn of(p: Param<'_>, ty: &Type) -> StoreResult<Encoded> {
        let mut buf = bytes::BytesMut::new();
        let format = p.encode_format(ty);
        match p.to_sql_checked(ty, &mut buf) {
            Ok(IsNull::Yes) => Ok(Encoded {
                bytes: None,
                format,
            }),
            Ok(IsNull::No) => Ok(Encoded {
                bytes: Some(buf.freeze()),
                format,
            }),
            Err(e) => Err(StoreError::Backend(format!(
                "a parameter of type {ty} does not encode: {e}"
            ))),
        }
    }
}

impl ToSql for Encoded {
    fn to_sql(
        &self,
        _: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match &self.bytes {
            Some(b) => {
                out.extend_from_slice(b);
                Ok(IsNull::No)
            }
            None => Ok(IsNull::Yes),
        }
    }

    // Checked when it was encoded, against the same statement's types.
    fn accepts(_: &Type) -> bool {
        true
    }

    fn encode_format(&self, _: &Type) -> Format {
        self.format
    }

    tokio_postgres::types::to_sql_checked!();
}

impl<'a> Sql<'a> {
    pub(super) fn new(bridge: &'a Bridge, client: &'a ClientWrapper) -> Sql<'a> {
        Sql {
            bridge,
            client,
            failed: Cell::new(false),
            queue: RefCell::new(Vec::new()),
        }
    }

    /// As [`Sql::new`], with `prelude` queued: it goes out with the next
    /// statement, in its round trip.
    pub(super) fn with_prelude(
        bridge: &'a Bridge,
        client: &'a ClientWrapper,
        prelude: String,
    ) -> Sql<'a> {
        let sql = Sql::new(bridge, client);
        sql.queue.borrow_mut().push(Queued::Batch(prelude));
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

    /// Waits for `fut`, a statement's, on the calling thread (one round
    /// trip, counted).
    fn wait<T>(&self, fut: impl Future<Output = T>) -> T {
        self.bridge.trips.fetch_add(1, Ordering::Relaxed);
        self.bridge.wait(fut)
    }

    /// Waits for `fut`, a statement's; the queue, if anything waits in it,
    /// is sent before it, pipelined, and its answers are settled in order
    /// first (the first failure is the answer).
    fn run<T>(
        &self,
        fut: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> StoreResult<T> {
        let queued = self.queue.take();
        if queued.is_empty() {
            return self.noted(self.wait(fut));
        }
        let c = self.client;
        // `join_all` polls in order, and a statement's first poll queues
        // its message on the connection: they go out in this order, the
        // statement last.
        let (answers, out) = self.wait(futures::future::join(
            futures::future::join_all(queued.iter().map(|q| q.send(c))),
            fut,
        ));
        let mut first = None;
        for (q, answer) in queued.into_iter().zip(answers) {
            let settled = answer.map_err(from_pg).and_then(|a| q.settle(a));
            if let Err(e) = settled
                && first.is_none()
            {
                first = Some(e);
            }
        }
        if let Some(e) = first {
            self.failed.set(true);
            return Err(e);
        }
        self.noted(out)
    }

    /// Sends what waits in the queue and settles its answers (one round
    /// trip; none when it is empty).
    pub(super) fn flush(&self) -> StoreResult<()> {
        if self.queue.borrow().is_empty() {
            return Ok(());
        }
        self.run(async { Ok(()) })
    }

    /// Forgets what waits in the queue (a transaction rolled back: none of
    /// it is to run).
    pub(super) fn forget(&self) {
        self.queue.borrow_mut().clear();
    }

    /// `sql` prepared (cached per connection: a round trip the first time
    /// only) and `params` encoded for it, to be queued.
    fn queueable(&self, sql: &str, params: &[Param<'_>]) -> StoreResult<(Statement, Vec<Encoded>)> {
        // Not counted: cached after its first time on a connection.
        let st = self.noted(self.bridge.wait(self.client.prepare_cached(sql)))?;
        if st.params().len() != params.len() {
            return Err(StoreError::Backend(format!(
                "a statement of {} parameters given {}",
                st.params().len(),
                params.len()
            )));
        }
        let encoded = params
            .iter()
            .zip(st.params())
            .map(|(p, ty)| Encoded::of(*p, ty))
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((st, encoded))
    }

    /// Queues `sql`, a write whose answer nothing needs before the next
    /// read or the commit; `then` checks how many rows it changed (its
    /// error fails the transaction).
    pub(super) fn defer_count(
        &self,
        sql: &str,
        params: &[Param<'_>],
        then: impl FnOnce(u64) -> StoreResult<()> + 'a,
    ) -> StoreResult<()> {
        let (st, encoded) = self.queueable(sql, params)?;
        self.queue
            .borrow_mut()
            .push(Queued::Count(st, encoded, Box::new(then)));
        Ok(())
    }

    /// As [`Sql::defer_count`], `then` given the rows `sql` answers.
    pub(super) fn defer_rows(
        &self,
        sql: &str,
        params: &[Param<'_>],
        then: impl FnOnce(Vec<Row>) -> StoreResult<()> + 'a,
    ) -> StoreResult<()> {
        let (st, encoded) = self.queueable(sql, params)?;
        self.queue
            .borrow_mut()
            .push(Queued::Rows(st, encoded, Box::new(then)));
        Ok(())
    }

    /// The rows `sql` answers.
    pub(super) fn query(&self, sql: &str, params: &[Param<'_>]) -> StoreResult<Vec<Row>> {
        let c = self.client;
        self.run(async {
            let st = c.prepare_cached(sql).await?;
            c.query(&st, params).await
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

    /// Runs statements without parameters, in one round trip (after what
    /// waits in the queue, if anything).
    pub(super) fn batch(&self, sql: &str) -> StoreResult<()> {
        self.run(self.client.batch_execute(sql))
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
