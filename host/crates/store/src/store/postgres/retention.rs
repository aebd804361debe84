//! Retention in the PostgreSQL store: the SQLite backend's rules
//! (`sqlite::retention`), in PostgreSQL's SQL, in small transactions (each
//! under the write lock) so that requests are never held up for long.
//!
//! It must never delete a policy that is not settled, a routine run that
//! has not finished, a session a live policy has as a member, an event of a
//! live policy, an event a pending webhook delivery still has to send, or
//! a pending delivery; and it never moves the head cursor back (that is
//! the `event_head` counter, not the newest row).

use super::bridge::{Sql, col};
use super::{PgStore, records};
use crate::config::Retention;
use crate::store::{StoreResult, Swept};

/// Rows deleted per transaction.
const BATCH: i64 = 5_000;

/// The statuses no transition leaves but by an operator's cancel.
const SETTLED: &str = "('done', 'blocked', 'cancelled')";

fn ms(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn strings(rows: Vec<tokio_postgres::Row>) -> StoreResult<Vec<String>> {
    rows.iter().map(|r| col(r, "id")).collect()
}

impl PgStore {
    /// Applies `rules` as of `now` (ms), each batch its own transaction.
    pub(super) fn retain(&self, rules: &Retention, now: i64) -> StoreResult<Swept> {
        let mut swept = Swept::default();
        if !rules.enabled {
            return Ok(swept);
        }
        swept.policies = self.sweep_policies(rules, now)?;
        let old_sessions = now.saturating_sub(ms(rules.sessions_max_age));
        swept.sessions = self.batches(|c| {
            c.execute(
                &format!(
                    "DELETE FROM sessions WHERE id IN (
                       SELECT s.id FROM sessions s
                        WHERE s.state = 'exited' AND s.updated_at < $1
                          AND NOT EXISTS (
                            SELECT 1 FROM policy_members m JOIN policies p ON p.id = m.policy_id
                             WHERE m.session_id = s.id AND p.status NOT IN {SETTLED})
                        LIMIT $2)"
                ),
                &[&old_sessions, &BATCH],
            )
        })?;
        let old_deliveries = now.saturating_sub(ms(rules.deliveries_max_age));
        swept.deliveries = self.batches(|c| {
            c.execute(
                "DELETE FROM deliveries WHERE id IN (
                   SELECT id FROM deliveries
                    WHERE state IN ('delivered', 'failed') AND next_at < $1 LIMIT $2)",
                &[&old_deliveries, &BATCH],
            )
        })?;
        let old_routines = now.saturating_sub(ms(rules.routines_max_age));
        swept.routines = self.batches(|c| {
            let ids = strings(c.query(
                "SELECT id FROM routines
                  WHERE phase IN ('done', 'failed', 'cancelled') AND updated_at < $1 LIMIT $2",
                &[&old_routines, &BATCH],
            )?)?;
            c.execute(
                "DELETE FROM routine_steps WHERE routine_id = ANY($1)",
                &[&ids],
            )?;
            c.execute(
                "DELETE FROM routine_keys WHERE routine_id = ANY($1)",
                &[&ids],
            )?;
            c.execute("DELETE FROM routines WHERE id = ANY($1)", &[&ids])?;
            Ok(ids.len() as u64)
        })?;
        swept.events = self.sweep_events(rules, now)?;
        Ok(swept)
    }

    /// Runs `one` (a batch, in its own transaction) until it deletes less
    /// than a batch.
    fn batches(&self, one: impl Fn(&Sql<'_>) -> StoreResult<u64>) -> StoreResult<u64> {
        let mut total = 0u64;
        loop {
            let n = self.write(|tx| one(&tx.sql))?;
            total += n;
            if (n as i64) < BATCH {
                return Ok(total);
            }
        }
    }

    fn sweep_policies(&self, rules: &Retention, now: i64) -> StoreResult<u64> {
        // Beyond the count: the settled ones older than the newest N.
        let keep = i64::try_from(rules.policies_max_count).unwrap_or(i64::MAX);
        let skip = keep.saturating_sub(1);
        let below: i64 = self.reading(|c| {
            col(
                &c.one(
                    &format!(
                        "SELECT COALESCE((SELECT seq FROM policies WHERE status IN {SETTLED}
                           ORDER BY seq DESC LIMIT 1 OFFSET $1), 0) AS below"
                    ),
                    &[&skip],
                )?,
                "below",
            )
        })?;
        let cutoff = now.saturating_sub(ms(rules.policies_max_age));
        self.batches(|c| {
            let ids = strings(c.query(
                &format!(
                    "SELECT id FROM policies WHERE status IN {SETTLED}
                      AND (updated_at < $1 OR seq < $2) LIMIT $3"
                ),
                &[&cutoff, &below, &BATCH],
            )?)?;
            c.execute(
                "DELETE FROM policy_members WHERE policy_id = ANY($1)",
                &[&ids],
            )?;
            c.execute("DELETE FROM idempotency WHERE policy_id = ANY($1)", &[&ids])?;
            c.execute("DELETE FROM policies WHERE id = ANY($1)", &[&ids])?;
            Ok(ids.len() as u64)
        })
    }

    fn sweep_events(&self, rules: &Retention, now: i64) -> StoreResult<u64> {
        let head = self.reading(records::head_cursor)?;
        let keep = i64::try_from(rules.events_max_count).unwrap_or(i64::MAX);
        // Events below this cursor are beyond the count.
        let by_count = head.saturating_sub(keep).saturating_add(1);
        // Events are appended in time order: the first cursor at or after
        // the cutoff, by bisection over the cursor (no index on `at`).
        let cutoff = now.saturating_sub(ms(rules.events_max_age));
        let by_age = self.reading(|c| {
            let at_or_after = |cursor: i64| -> StoreResult<Option<(i64, i64)>> {
                c.opt(
                    "SELECT cursor, at FROM events WHERE cursor >= $1 ORDER BY cursor LIMIT 1",
                    &[&cursor],
                )?
                .map(|r| Ok((col(&r, "cursor")?, col(&r, "at")?)))
                .transpose()
            };
            let (mut lo, mut hi) = (0i64, head + 1);
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
                let cursors: Vec<i64> = tx
                    .sql
                    .query(
                        &format!(
                            "SELECT e.cursor FROM events e
                              WHERE e.cursor > $1 AND e.cursor < $2
                                AND NOT EXISTS (SELECT 1 FROM policies p
                                     WHERE p.id = e.policy_id AND p.status NOT IN {SETTLED})
                                AND NOT EXISTS (SELECT 1 FROM deliveries d
                                     WHERE d.event_cursor = e.cursor AND d.state = 'pending')
                              ORDER BY e.cursor LIMIT $3"
                        ),
                        &[&from, &below, &BATCH],
                    )?
                    .iter()
                    .map(|r| col(r, "cursor"))
                    .collect::<StoreResult<_>>()?;
                tx.sql
                    .execute("DELETE FROM events WHERE cursor = ANY($1)", &[&cursors])?;
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
