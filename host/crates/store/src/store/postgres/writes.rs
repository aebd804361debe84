//! The typed write operations of one PostgreSQL transaction
//! ([`RecordsTx`] for [`PgTx`]), each a call of the SQL of its table group
//! (`records`, `routines`, `standing`, `passkeys`). It must never open or
//! end a transaction itself (`PgStore::write` does, under the write lock).

use super::bridge::col;
use super::{PgTx, leader, passkeys, records, requests, routines, standing};
use crate::model::event::Event;
use crate::model::routine::RunState;
use crate::store::interface::RecordsTx;
use crate::store::routine_rows::RoutineRow;
use crate::store::rows::{
    HostRequestState, Leadership, PolicyRow, SessionRow, StaleHost, StandingRow, TakenOver,
};
use crate::store::{StoreError, StoreResult};
use webauthn_rs::prelude::Passkey;

impl RecordsTx for PgTx<'_> {
    fn lead(&mut self, lease_ms: i64, grace_ms: i64) -> StoreResult<Leadership> {
        leader::lead(&self.sql, lease_ms, grace_ms)
    }

    fn leads(&mut self, term: i64) -> StoreResult<bool> {
        leader::leads(&self.sql, term)
    }

    fn mark_stale_hosts(&mut self, grace_ms: i64) -> StoreResult<Vec<StaleHost>> {
        leader::mark_stale(&self.sql, grace_ms)
    }

    fn take_over(&mut self, dead: &str) -> StoreResult<Option<TakenOver>> {
        leader::take_over(&self.sql, dead)
    }

    fn append_event(
        &mut self,
        event: &Event,
        session_id: Option<&str>,
        policy_id: Option<&str>,
        webhooks: &[String],
    ) -> StoreResult<i64> {
        let payload = event.payload_text()?;
        // Its cursor is the counter's next, as this transaction knows it
        // (read after the write lock; a first append before any round
        // trip reads it now).
        if self.next.get().is_none() {
            self.sql.flush()?;
        }
        let Some(cursor) = self.next.get().map(|h| h + 1) else {
            return Err(StoreError::Backend(
                "the event counter was not read in this transaction".into(),
            ));
        };
        records::append_event(
            &self.sql,
            cursor,
            event.kind(),
            &payload,
            session_id,
            policy_id,
            webhooks,
        )?;
        self.next.set(Some(cursor));
        // Notified at the commit (`listen`): cursors grow within one.
        self.head = Some(cursor);
        Ok(cursor)
    }

    fn put_session(&mut self, s: &SessionRow) -> StoreResult<()> {
        records::put_session(&self.sql, s)
    }

    fn insert_policy(&mut self, p: &mut PolicyRow) -> StoreResult<()> {
        let row = self.sql.one(
            "SELECT COALESCE(MAX(seq), 0) + 1 AS next FROM policies",
            &[],
        )?;
        p.seq = col(&row, "next")?;
        records::insert_policy(&self.sql, p)
    }

    fn put_policy(&mut self, p: &PolicyRow) -> StoreResult<()> {
        records::put_policy(&self.sql, p)
    }

    fn record_next(&mut self, p: &PolicyRow) -> StoreResult<()> {
        records::record_next(&self.sql, p)
    }

    fn record_prepared(&mut self, p: &PolicyRow) -> StoreResult<()> {
        records::record_prepared(&self.sql, p)
    }

    fn record_publishes(&mut self, p: &PolicyRow) -> StoreResult<()> {
        records::record_publishes(&self.sql, p)
    }

    fn put_damaged_policy(&mut self, p: &PolicyRow) -> StoreResult<()> {
        records::put_damaged_policy(&self.sql, p)
    }

    fn put_idempotent(&mut self, key: &str, request: &str, policy: &str) -> StoreResult<()> {
        records::put_idempotent(&self.sql, key, request, policy)
    }

    fn mark_delivery(
        &mut self,
        id: i64,
        state: &str,
        attempts: u32,
        next_at: i64,
        error: Option<&str>,
    ) -> StoreResult<()> {
        records::mark_delivery(&self.sql, id, state, attempts, next_at, error)
    }

    fn insert_routine_key(&mut self, key: &str, routine: &str, digest: &str) -> StoreResult<()> {
        routines::insert_routine_key(&self.sql, key, routine, digest)
    }

    fn insert_routine(&mut self, r: &RoutineRow) -> StoreResult<()> {
        routines::insert_routine(&self.sql, r)
    }

    fn put_routine(&mut self, r: &RoutineRow) -> StoreResult<()> {
        routines::put_routine(&self.sql, r)
    }

    fn end_damaged_routine(
        &mut self,
        id: &str,
        state: RunState,
        phase: &str,
        reason: &str,
        now: i64,
    ) -> StoreResult<()> {
        routines::end_damaged_routine(&self.sql, id, state, phase, reason, now)
    }

    fn insert_standing(&mut self, s: &StandingRow) -> StoreResult<()> {
        standing::insert_standing(&self.sql, s)
    }

    fn remove_standing(&mut self, id: &str) -> StoreResult<bool> {
        standing::remove_standing(&self.sql, id)
    }

    fn passkey_user(&mut self) -> StoreResult<uuid::Uuid> {
        passkeys::passkey_user(&self.sql)
    }

    fn insert_passkey(&mut self, id: &str, name: &str, p: &Passkey, now: i64) -> StoreResult<bool> {
        passkeys::insert_passkey(&self.sql, id, name, p, now)
    }

    fn passkey_used(&mut self, id: &str, p: &Passkey, now: i64) -> StoreResult<()> {
        passkeys::passkey_used(&self.sql, id, p, now)
    }

    fn remove_passkey(&mut self, id: &str) -> StoreResult<bool> {
        passkeys::remove_passkey(&self.sql, id)
    }

    fn rename_passkey(&mut self, id: &str, name: &str) -> StoreResult<bool> {
        passkeys::rename_passkey(&self.sql, id, name)
    }

    fn insert_host_request(
        &mut self,
        host: &str,
        policy: &str,
        request: &str,
        now: i64,
    ) -> StoreResult<i64> {
        requests::insert(&self.sql, host, policy, request, now)
    }

    fn move_host_request(
        &mut self,
        id: i64,
        from: HostRequestState,
        to: HostRequestState,
        outcome: Option<&str>,
        now: i64,
    ) -> StoreResult<bool> {
        requests::advance(&self.sql, id, from, to, outcome, now)
    }
}
