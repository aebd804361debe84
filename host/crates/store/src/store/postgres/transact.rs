//! A write transaction of the PostgreSQL store ([`PgStore::write`]):
//! `BEGIN` (READ COMMITTED) and the write lock, a host's check of its
//! claim (`claim::check_claim`), the body, and the commit with its
//! notification, or the rollback.
//!
//! It owns how few round trips that takes: a host's `BEGIN`, lock, read
//! of the event counter and check go in one (`Sql`'s queue, pipelined);
//! the body's writes are queued (`Sql::defer_count`, `Sql::defer_rows`)
//! and go out with its next read, the rest in one round trip before the
//! commit, whose answers are checked before the commit is sent; the
//! commit and its notification in one. A transaction of writes alone is
//! three round trips however many it writes. It must never commit a
//! transaction in which a statement failed or whose queued writes were not
//! all answered and checked, run the check in the lock's statement (that
//! one's snapshot predates the wait for the lock), or return a connection
//! with a transaction open to the pool.

use super::bridge::{Sql, col};
use super::errors::from_pg;
use super::{Discard, PgStore, PgTx, WRITE_LOCK, claim, discard, listen};
use crate::store::{StoreError, StoreResult};
use deadpool_postgres::Object;
use std::sync::atomic::Ordering;

impl PgStore {
    /// A pooled connection in a write transaction holding the write lock;
    /// a pooled connection found dead is replaced once (nothing ran yet).
    fn begin(&self) -> StoreResult<Object> {
        let begin = begin_sql();
        let mut retried = false;
        loop {
            let obj = self.pooled()?;
            match self.bridge.wait(obj.batch_execute(&begin)) {
                Ok(()) => return Ok(obj),
                Err(e) => {
                    discard(obj);
                    let e = from_pg(e);
                    if matches!(e, StoreError::Unreachable(_)) && !retried {
                        retried = true;
                        continue;
                    }
                    return Err(e);
                }
            }
        }
    }

    /// Runs `f` in one write transaction under the write lock: everything
    /// it writes commits together or not at all; a transaction in which a
    /// statement failed is rolled back, never committed. A host's write
    /// first checks its claim (`fenced`).
    pub(super) fn write<T>(
        &self,
        f: impl FnOnce(&mut PgTx<'_>) -> StoreResult<T>,
    ) -> StoreResult<T> {
        self.write_as(true, f)
    }

    /// [`PgStore::write`]; with `fenced` and a claim, nothing is written
    /// unless the claim is this process's to act on: its own deadline
    /// first (no round trip), then, inside the transaction, after the
    /// write lock, the database's record of the claim (`hosts::standing`:
    /// this fencing number, its lease running by the database's clock).
    /// Every write of every host takes that lock, so no claim changes
    /// between that check and the commit.
    ///
    /// A host's `BEGIN`, its lock and that check go in one round trip (the
    /// check is the statement the `BEGIN` is sent ahead of: `Sql`'s
    /// prelude); the check is still a statement of its own, after the
    /// lock's, so it reads the claim as it stands once the lock is held,
    /// a claim taken while this write waited included. A connection found
    /// dead at that first round trip is replaced once (nothing ran).
    pub(super) fn write_as<T>(
        &self,
        fenced: bool,
        f: impl FnOnce(&mut PgTx<'_>) -> StoreResult<T>,
    ) -> StoreResult<T> {
        let lease = self.lease.as_deref().filter(|_| fenced);
        if let Some(l) = lease
            && !gatehost_test_hooks::ignore_own_lease()
        {
            l.acting()?;
        }
        let _one = self.writes.lock().unwrap_or_else(|p| p.into_inner());
        let mut body = Some(f);
        let mut retried = false;
        loop {
            let mut held = Discard(Some(match lease {
                Some(_) => self.pooled()?,
                None => self.begin()?,
            }));
            let (out, end, clean) = {
                let Some(client) = held.0.as_deref() else {
                    return Err(StoreError::Backend(
                        "the transaction lost its connection".into(),
                    ));
                };
                let mut tx = PgTx {
                    sql: match lease {
                        Some(_) => Sql::with_prelude(&self.bridge, client, begin_sql()),
                        None => Sql::new(&self.bridge, client),
                    },
                    head: None,
                    next: Default::default(),
                };
                // The counter's read waits in the queue: it goes with the
                // claim's check, or with the body's first read.
                let checked = read_head(&tx).and_then(|()| match lease {
                    Some(l) => claim::check_claim(&tx.sql, l),
                    None => Ok(()),
                });
                if matches!(checked, Err(StoreError::Unreachable(_))) && !retried {
                    // Dropping `held` discards the dead connection.
                    retried = true;
                    continue;
                }
                let out = checked
                    .and_then(|()| match body.take() {
                        Some(f) => f(&mut tx),
                        None => Err(StoreError::Backend(
                            "the transaction's body already ran".into(),
                        )),
                    })
                    // The writes still queued, in their own round trip:
                    // their checks are settled before the commit is sent.
                    .and_then(|v| tx.sql.flush().map(|()| v));
                let end = match &out {
                    Ok(_) if tx.sql.failed() => {
                        let _ = tx.sql.batch("ROLLBACK");
                        Err(StoreError::Backend(
                            "a statement of the transaction failed: it was rolled back".into(),
                        ))
                    }
                    // With its notification, when it appended events.
                    Ok(_) => tx.sql.batch(&listen::commit_sql(tx.head)),
                    Err(_) => {
                        tx.sql.forget();
                        tx.sql.batch("ROLLBACK")
                    }
                };
                let clean = end.is_ok() && !tx.sql.failed();
                if clean
                    && out.is_ok()
                    && let Some(head) = tx.head
                {
                    self.committed.fetch_max(head, Ordering::AcqRel);
                }
                (out, end, clean)
            };
            if clean {
                // Back to the pool.
                held.0.take();
            }
            let out = out?;
            end?;
            return Ok(out);
        }
    }
}

/// Queues the read of the event counter into `tx.next`.
fn read_head(tx: &PgTx<'_>) -> StoreResult<()> {
    let next = tx.next.clone();
    tx.sql.defer_rows(
        "SELECT cursor FROM event_head",
        &[],
        move |rows| match rows.as_slice() {
            [row] => {
                next.set(Some(col(row, "cursor")?));
                Ok(())
            }
            _ => Err(StoreError::Backend(
                "the event counter's row is missing".into(),
            )),
        },
    )
}

/// A write transaction's first statements: `BEGIN` (READ COMMITTED) and
/// the write lock.
fn begin_sql() -> String {
    format!("BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock({WRITE_LOCK})")
}
