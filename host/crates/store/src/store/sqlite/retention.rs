//! Retention in the SQLite store: deleting what the daemon no longer needs, by age and count
//! (`[retention]`), in small transactions so that requests are never held
//! up for long.
//!
//! It owns the deletion rules. It must never delete a policy that is not
//! settled, a routine run that has not finished, a session a live policy has as a member, an event of a live
//! policy (the nudge task reads its `policy:nudge`), an event a pending
//! webhook delivery still has to send, or a pending delivery; and it never
//! moves the head cursor back (that comes from the events' sequence, not
//! from the newest row).

use super::{Reads, SqliteStore, SqliteTx};
use crate::config::Retention;
use crate::store::{Records, StoreResult, Swept};
use rusqlite::params;

/// Rows deleted per transaction.
const BATCH: i64 = 5_000;

/// The statuses no transition leaves but by an operator's cancel.
const SETTLED: &str = "('done', 'blocked', 'cancelled')";

fn ms(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl SqliteStore {
    /// Applies `rules` as of `now` (ms). Each batch is its own transaction:
    /// a crash in between leaves a consistent store with less deleted.
    pub(super) fn retain(&self, rules: &Retention, now: i64) -> StoreResult<Swept> {
        let mut swept = Swept::default();
        if !rules.enabled {
            return Ok(swept);
        }
        swept.policies = self.sweep_policies(rules, now)?;
        swept.sessions = self.batches(|tx| {
            Ok(tx.tx.execute(
                &format!(
                    "DELETE FROM sessions WHERE rowid IN (
                       SELECT s.rowid FROM sessions s
                        WHERE s.state = 'exited' AND s.updated_at < ?1
                          AND NOT EXISTS (
                            SELECT 1 FROM policy_members m JOIN policies p ON p.id = m.policy_id
                             WHERE m.session_id = s.id AND p.status NOT IN {SETTLED})
                        LIMIT ?2)"
                ),
                params![now.saturating_sub(ms(rules.sessions_max_age)), BATCH],
            )?)
        })?;
        swept.deliveries = self.batches(|tx| {
            Ok(tx.tx.execute(
                "DELETE FROM deliveries WHERE id IN (
                   SELECT id FROM deliveries
                    WHERE state IN ('delivered', 'failed') AND next_at < ?1 LIMIT ?2)",
                params![now.saturating_sub(ms(rules.deliveries_max_age)), BATCH],
            )?)
        })?;
        swept.routines = self.batches(|tx| {
            let cutoff = now.saturating_sub(ms(rules.routines_max_age));
            let ids: Vec<String> = {
                let mut st = tx.tx.prepare_cached(
                    "SELECT id FROM routines
                      WHERE phase IN ('done', 'failed', 'cancelled') AND updated_at < ?1 LIMIT ?2",
                )?;
                st.query_map(params![cutoff, BATCH], |r| r.get(0))?
                    .collect::<Result<_, _>>()?
            };
            for id in &ids {
                tx.tx
                    .prepare_cached("DELETE FROM routine_steps WHERE routine_id = ?1")?
                    .execute([id])?;
                tx.tx
                    .prepare_cached("DELETE FROM routine_keys WHERE routine_id = ?1")?
                    .execute([id])?;
                tx.tx
                    .prepare_cached("DELETE FROM routines WHERE id = ?1")?
                    .execute([id])?;
            }
            Ok(ids.len())
        })?;
        swept.events = self.sweep_events(rules, now)?;
        Ok(swept)
    }

    /// Runs `one` (a batch) until it deletes less than a batch.
    fn batches(
        &self,
        mut one: impl FnMut(&mut SqliteTx<'_>) -> StoreResult<usize>,
    ) -> StoreResult<u64> {
        let mut total = 0u64;
        loop {
            let n = self.write(&mut one)?;
            total += n as u64;
            if (n as i64) < BATCH {
                return Ok(total);
            }
        }
    }

    fn sweep_policies(&self, rules: &Retention, now: i64) -> StoreResult<u64> {
        // Beyond the count: the settled ones older than the newest N.
        let keep = i64::try_from(rules.policies_max_count).unwrap_or(i64::MAX);
        let below: i64 = self.reading(|c| {
            Ok(c.query_row(
                &format!(
                    "SELECT COALESCE((SELECT seq FROM policies WHERE status IN {SETTLED}
                       ORDER BY seq DESC LIMIT 1 OFFSET ?1), 0)"
                ),
                params![keep.saturating_sub(1)],
                |r| r.get(0),
            )?)
        })?;
        let cutoff = now.saturating_sub(ms(rules.policies_max_age));
        self.batches(|tx| {
            let ids: Vec<String> = {
                let mut st = tx.tx.prepare_cached(&format!(
                    "SELECT id FROM policies WHERE status IN {SETTLED}
                      AND (updated_at < ?1 OR seq < ?2) LIMIT ?3"
                ))?;
                st.query_map(params![cutoff, below, BATCH], |r| r.get(0))?
                    .collect::<Result<_, _>>()?
            };
            for id in &ids {
                tx.tx
                    .prepare_cached("DELETE FROM policy_members WHERE policy_id = ?1")?
                    .execute([id])?;
                tx.tx
                    .prepare_cached("DELETE FROM idempotency WHERE policy_id = ?1")?
                    .execute([id])?;
                tx.tx
                    .prepare_cached("DELETE FROM policies WHERE id = ?1")?
                    .execute([id])?;
            }
            Ok(ids.len())
        })
    }

    fn sweep_events(&self, rules: &Retention, now: i64) -> StoreResult<u64> {
        let head = self.head_cursor()?;
        let keep = i64::try_from(rules.events_max_count).unwrap_or(i64::MAX);
        // Events below this cursor are beyond the count.
        let by_count = head.saturating_sub(keep).saturating_add(1);
        // Events are appended in time order: the first cursor at or after
        // the cutoff, found by bisection over the cursor (no index on
        // `at` is needed).
        let cutoff = now.saturating_sub(ms(rules.events_max_age));
        let by_age = self.reading(|c| {
            let at_or_after = |cursor: i64| -> rusqlite::Result<Option<(i64, i64)>> {
                c.query_row(
                    "SELECT cursor, at FROM events WHERE cursor >= ?1 ORDER BY cursor LIMIT 1",
                    [cursor],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map(Some)
                .or_else(|e| match e {
                    rusqlite::Error::QueryReturnedNoRows => Ok(None),
                    e => Err(e),
                })
            };
            let (mut lo, mut hi) = (0i64, head + 1);
            // Invariant: every event below `lo` is older than the cutoff;
            // the first event at or after `hi` (if any) is not.
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                match at_or_after(mid)? {
                    Some((cursor, at)) if at < cutoff => lo = cursor + 1,
                    _ => hi = mid,
                }
            }
            Ok(lo)
        })?;
        let below = by_count.max(by_age);
        let mut from = 0i64;
        let mut total = 0u64;
        loop {
            let (n, last) = self.write(|tx| {
                let cursors: Vec<i64> = {
                    let mut st = tx.tx.prepare_cached(&format!(
                        "SELECT e.cursor FROM events e
                          WHERE e.cursor > ?1 AND e.cursor < ?2
                            AND NOT EXISTS (SELECT 1 FROM policies p
                                 WHERE p.id = e.policy_id AND p.status NOT IN {SETTLED})
                            AND NOT EXISTS (SELECT 1 FROM deliveries d
                                 WHERE d.event_cursor = e.cursor AND d.state = 'pending')
                          ORDER BY e.cursor LIMIT ?3"
                    ))?;
                    st.query_map(params![from, below, BATCH], |r| r.get(0))?
                        .collect::<Result<_, _>>()?
                };
                for c in &cursors {
                    tx.tx
                        .prepare_cached("DELETE FROM events WHERE cursor = ?1")?
                        .execute([c])?;
                }
                Ok((cursors.len(), cursors.last().copied()))
            })?;
            total += n as u64;
            match last {
                Some(l) if (n as i64) == BATCH => from = l,
                _ => return Ok(total),
            }
        }
    }
}
