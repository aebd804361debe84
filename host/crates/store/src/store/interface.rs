//! What a store is: the contract every backend implements, in typed
//! records (the `rows` types) in and out. Two implement it: SQLite
//! (`store::sqlite`, the default) and PostgreSQL (`store::postgres`, issue
//! 51), each a module implementing these three traits; nothing above
//! `store` knows which.
//!
//! - [`Records`]: every read. Answered both by the backend (each call on
//!   its own, a consistent snapshot) and inside a transaction (seeing what
//!   the transaction wrote so far).
//! - [`RecordsTx`]: the typed operations of one write transaction, which
//!   commit together or not at all.
//! - [`Backend`]: a store as the daemon holds it: its reads, a way to run
//!   a transaction, and retention.
//!
//! The contract, for every backend:
//! - **Atomic.** Everything one transaction's body does (its writes and the
//!   events it appends, with their webhook deliveries) becomes visible at
//!   once when it commits, or not at all: a body that returns an error, or
//!   a commit that fails, leaves nothing. No reader ever sees an event
//!   before the state change it describes. Transactions are serialised
//!   (SQLite: `BEGIN IMMEDIATE` under one lock; PostgreSQL: one advisory
//!   lock taken by every transaction of every host): a body reads what it
//!   writes on, and no other write interleaves. The body runs exactly once
//!   (it is an `FnOnce`): a backend that must retry a conflict reports the
//!   error instead.
//! - **Cursors.** An event's cursor only grows, survives restarts and is
//!   never reused, even when the newest rows were deleted
//!   ([`Records::head_cursor`] never moves back).
//! - **Missing rows.** A read of one record answers `Ok(None)`; a list
//!   answers what there is. `put_session` inserts or replaces; `put_policy`,
//!   `record_*` and `put_damaged_policy` of a policy that is not there are an
//!   error (it vanished during an update), never a silent insert;
//!   `end_damaged_routine`, `mark_delivery` and `passkey_used` of a row that
//!   is not there change nothing and answer `Ok`; `put_routine` writes back
//!   a run read in the same transaction; `remove_*` answer whether
//!   something was removed; `insert_*` of an id already there is an error,
//!   but `insert_passkey`, which answers `false`.
//! - **Damage.** A typed column that does not decode makes its record
//!   damaged (`damage` says which column and why; the column is `None` or
//!   a placeholder), never an error of the whole read nor a default taken
//!   as stored. Writing a damaged record back whole is refused
//!   ([`StoreError::Damaged`]); `put_damaged_policy` and
//!   `end_damaged_routine` write only the columns they name. The columns are
//!   encoded and decoded by `store::codec`, shared by every backend.
//! - **Errors.** [`StoreError::is_unavailable`] (`Full`, `ReadOnly`,
//!   `Unreachable`) means the store cannot take writes now and a retry
//!   later may succeed (the
//!   API answers 503 with `Retry-After`, the engine keeps its state to try
//!   again): a backend maps its transient failures onto these. Every other
//!   error is final for that call. A backend's own error type never leaves
//!   its module (SQLite's `From<rusqlite::Error>` lives in `store::sqlite`,
//!   PostgreSQL's mapping in `store::postgres`).
//! - **Never** a gate, a process or a network call of the daemon's inside
//!   a transaction, and no lock held across an `.await` (the interface is
//!   synchronous).
//!
//! `store::conformance` holds tests written against this contract alone:
//! a new backend runs them with its own store.
//!
//! This module owns the traits and their contract only: it must never hold
//! SQL, state or a backend's type.

use super::routine_rows::RoutineRow;
use super::rows::{
    Delivery, EventFilter, EventRow, HostRequestRow, HostRequestState, HostStatus, Leadership,
    PasskeyRow, PolicyRow, PolicyStatus, SessionRow, StaleHost, StandingRow, TakenOver,
};
use super::tokens::{ClusterTokens, TokenName};
use super::{StoreError, StoreResult};
use crate::config::Retention;
use crate::model::event::Event;
use crate::model::routine::RunState;
use webauthn_rs::prelude::Passkey;

/// The body of a write transaction, as a backend runs it.
pub type TxBody<'a> = Box<dyn FnOnce(&mut dyn RecordsTx) -> StoreResult<()> + 'a>;

/// What one application of the retention rules deleted.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Swept {
    /// Event log entries deleted.
    pub events: u64,
    /// Webhook deliveries deleted.
    pub deliveries: u64,
    /// Session rows deleted.
    pub sessions: u64,
    /// Policy rows deleted.
    pub policies: u64,
    /// Routine runs deleted.
    pub routines: u64,
}

impl Swept {
    /// Whether nothing at all was deleted.
    pub fn is_empty(&self) -> bool {
        *self == Swept::default()
    }
}

/// Every read a backend answers, typed. Lists are in the order each says
/// (oldest first unless told); the looks the daemon makes often (the
/// watchdog's, the sweep's, a webhook's recipients) must be answered by an
/// index, never a scan of a table. With hosts sharing one store, the looks
/// that drive a host's own work (`silent_sessions`, `sessions_to_recover`,
/// `policies_with_open_publishes`, `policies_to_sweep`,
/// `damaged_policies`, `watching_with_stale_member`, `past_deadline`,
/// `watch_due`, the deliveries due, the active, waiting and overdue
/// routines) answer that host's rows only; every other read answers the
/// whole store.
pub trait Records {
    /// Whether the watchdog has anything to do at `now` (ms): a session
    /// silent since before `cutoff` (when the heartbeat timeout is set), a
    /// watching policy with a stale member, or a deadline due. A read, so
    /// that an idle look writes nothing and wakes no reader.
    fn watch_due(&self, cutoff: Option<i64>, now: i64) -> StoreResult<bool>;

    /// The session `id` (`AGENT:ID`), if registered.
    fn session(&self, id: &str) -> StoreResult<Option<SessionRow>>;

    /// Every session, in registration order.
    fn sessions(&self) -> StoreResult<Vec<SessionRow>>;

    /// The ids of the sessions whose key digest is among `digests` (by
    /// an index).
    fn sessions_keyed(&self, digests: &[String]) -> StoreResult<Vec<String>>;

    /// A page of sessions after `cursor`, each with its cursor.
    fn sessions_page(&self, cursor: i64, limit: usize) -> StoreResult<Vec<(i64, SessionRow)>>;

    /// Sessions silent since before `cutoff` (ms), neither exited nor
    /// already stale nor started by the daemon, at most `limit`, oldest
    /// first.
    fn silent_sessions(&self, cutoff: i64, limit: usize) -> StoreResult<Vec<SessionRow>>;

    /// The sessions recovery looks at: those whose row does not decode,
    /// and those gatehost started that have not exited (read one at a
    /// time, the others never held).
    fn sessions_to_recover(&self) -> StoreResult<Vec<SessionRow>>;

    /// Whether `session_id` has an event of type `kind` in the log.
    fn has_session_event(&self, session_id: &str, kind: &str) -> StoreResult<bool>;

    /// The policy `id`, if any.
    fn policy(&self, id: &str) -> StoreResult<Option<PolicyRow>>;

    /// Policies, oldest first; `statuses` empty means all.
    fn policies(&self, statuses: &[PolicyStatus]) -> StoreResult<Vec<PolicyRow>>;

    /// A page of policies by `seq` (`statuses` empty: all): oldest first
    /// after `cursor`, or newest first before it (0: from the newest).
    fn policies_page(
        &self,
        statuses: &[PolicyStatus],
        cursor: i64,
        limit: usize,
        newest_first: bool,
    ) -> StoreResult<Vec<PolicyRow>>;

    /// How many policies the store holds of each status, by the status as
    /// stored (a status that does not decode is counted under its text).
    fn policy_counts(&self) -> StoreResult<Vec<(String, u64)>>;

    /// Policies with a publish that began and never recorded its end.
    fn policies_with_open_publishes(&self) -> StoreResult<Vec<PolicyRow>>;

    /// What the sweep looks at: the policies in a working state (`queued`
    /// ones only when `queued`) and those whose status does not decode,
    /// oldest first, by an index (never a watching or settled one).
    fn policies_to_sweep(&self, queued: bool) -> StoreResult<Vec<PolicyRow>>;

    /// Ids of the policies not settled whose row does not decode, oldest
    /// first (rows decoded one at a time, never all held at once).
    fn damaged_policies(&self) -> StoreResult<Vec<String>>;

    /// Watching policies with a stale member.
    fn watching_with_stale_member(&self) -> StoreResult<Vec<PolicyRow>>;

    /// Unsettled policies whose deadline is at or before `now` (ms).
    fn past_deadline(&self, now: i64) -> StoreResult<Vec<PolicyRow>>;

    /// The policies with `session_id` as a member that have not ended
    /// (any status but done, blocked and cancelled; a row that does not
    /// decode with its damage said), oldest first: what a report of the
    /// session looks at (those judging its work, those watching it, whether
    /// the operator watches it), read once.
    fn live_with(&self, session_id: &str) -> StoreResult<Vec<PolicyRow>>;

    /// The policy an idempotency key made, and the request's digest.
    fn idempotent(&self, key: &str) -> StoreResult<Option<(String, String)>>;

    /// Events after `filter.since`, oldest first, at most `filter.limit`.
    fn events(&self, filter: &EventFilter) -> StoreResult<Vec<EventRow>>;

    /// The newest cursor ever given (0 when the log is empty); never moves
    /// back, even when the newest events were deleted.
    fn head_cursor(&self) -> StoreResult<i64>;

    /// The oldest event kept (retention deletes older ones); `None` when
    /// the log is empty.
    fn oldest_cursor(&self) -> StoreResult<Option<i64>>;

    /// Deliveries due at `now`, oldest first.
    fn due_deliveries(&self, now: i64, limit: usize) -> StoreResult<Vec<Delivery>>;

    /// The URLs with a delivery due at `now`.
    fn due_urls(&self, now: i64) -> StoreResult<Vec<String>>;

    /// Up to `limit` deliveries to `url` due at `now`, oldest first.
    fn due_deliveries_to(&self, url: &str, now: i64, limit: usize) -> StoreResult<Vec<Delivery>>;

    /// The next time a pending delivery is due, if any.
    fn next_delivery_at(&self) -> StoreResult<Option<i64>>;

    /// A routine run with its steps.
    fn routine(&self, id: &str) -> StoreResult<Option<RoutineRow>>;

    /// Runs newest first, at most `limit`.
    fn routines(&self, limit: usize) -> StoreResult<Vec<RoutineRow>>;

    /// Runs not yet done, failed or cancelled, oldest first.
    fn active_routines(&self) -> StoreResult<Vec<RoutineRow>>;

    /// Runs waiting for a step's `waitFor`, oldest first.
    fn waiting_routines(&self) -> StoreResult<Vec<RoutineRow>>;

    /// Whether an escalated run is past its deadline at `now`.
    fn routine_past_deadline(&self, now: i64) -> StoreResult<bool>;

    /// The escalated runs past their deadline at `now`, oldest first.
    fn routines_past_deadline(&self, now: i64) -> StoreResult<Vec<RoutineRow>>;

    /// The run whose current step runs in (or is escalated on) `session`.
    fn routine_on_session(&self, session: &str) -> StoreResult<Option<RoutineRow>>;

    /// The run an idempotency key started, and the digest of its spec.
    fn routine_by_key(&self, key: &str) -> StoreResult<Option<(String, String)>>;

    /// Every standing policy, oldest first.
    fn standing_policies(&self) -> StoreResult<Vec<StandingRow>>;

    /// The standing policy `id`, if any.
    fn standing_policy(&self, id: &str) -> StoreResult<Option<StandingRow>>;

    /// Every registered passkey, oldest first.
    fn passkeys(&self) -> StoreResult<Vec<PasskeyRow>>;

    /// The host that owns policy `id` (`None`: no such policy, or a store
    /// of one host).
    fn policy_host(&self, id: &str) -> StoreResult<Option<String>> {
        let _ = id;
        Ok(None)
    }

    /// The requests other hosts sent this one and it has not carried out
    /// (open or taken), oldest first; none for a store of one host.
    fn host_requests_due(&self) -> StoreResult<Vec<HostRequestRow>> {
        Ok(Vec::new())
    }

    /// The request `id`, if any.
    fn host_request(&self, id: i64) -> StoreResult<Option<HostRequestRow>> {
        let _ = id;
        Ok(None)
    }

    /// The hosts that ever claimed an id in this store, by id (none for a
    /// store of one host).
    fn hosts(&self) -> StoreResult<Vec<HostStatus>> {
        Ok(Vec::new())
    }
}

/// The typed operations of one write transaction (see the module doc for
/// what commits together). It reads too ([`Records`]), seeing its own
/// writes.
pub trait RecordsTx: Records {
    /// Appends an event and queues its webhook deliveries (the global
    /// `webhooks`, the session's own URL and, for a policy event, every
    /// member's, each URL once); answers its cursor.
    fn append_event(
        &mut self,
        event: &Event,
        session_id: Option<&str>,
        policy_id: Option<&str>,
        webhooks: &[String],
    ) -> StoreResult<i64>;

    /// Inserts or replaces a session; refused for a row that did not
    /// decode.
    fn put_session(&mut self, s: &SessionRow) -> StoreResult<()>;

    /// Inserts a new policy (and its members), giving it the next `seq`
    /// (written into `p`).
    fn insert_policy(&mut self, p: &mut PolicyRow) -> StoreResult<()>;

    /// Writes `p` whole; refused for a row that did not decode.
    fn put_policy(&mut self, p: &PolicyRow) -> StoreResult<()>;

    /// Records the policy attached as `p`'s `next` (its `next_id`), and
    /// nothing else: bookkeeping of a step the lifecycle took, never a
    /// change of state. Refused for a row that did not decode.
    fn record_next(&mut self, p: &PolicyRow) -> StoreResult<()>;

    /// Records the commit prepared for `p` (or its absence, to prepare it
    /// again) and the time, and nothing else: never a change of state.
    /// Refused for a row that did not decode.
    fn record_prepared(&mut self, p: &PolicyRow) -> StoreResult<()>;

    /// Records `p`'s publishes under way (`publish_open`: opened before a
    /// publish takes a lock, closed once it ended), and nothing else:
    /// never a change of state. Refused for a row that did not decode.
    fn record_publishes(&mut self, p: &PolicyRow) -> StoreResult<()>;

    /// Writes only the status, reason and time of a policy whose row did
    /// not decode.
    fn put_damaged_policy(&mut self, p: &PolicyRow) -> StoreResult<()>;

    /// Records that `key` (with the request digest `request`) made `policy`.
    fn put_idempotent(&mut self, key: &str, request: &str, policy: &str) -> StoreResult<()>;

    /// A delivery's new state (`pending`, `delivered`, `failed`), attempts,
    /// next try and last error.
    fn mark_delivery(
        &mut self,
        id: i64,
        state: &str,
        attempts: u32,
        next_at: i64,
        error: Option<&str>,
    ) -> StoreResult<()>;

    /// Records that `key` started run `routine` of spec digest `digest`.
    fn insert_routine_key(&mut self, key: &str, routine: &str, digest: &str) -> StoreResult<()>;

    /// Inserts a new run (its `seq` is the next one) with its steps.
    fn insert_routine(&mut self, r: &RoutineRow) -> StoreResult<()>;

    /// Writes a run's row and its steps' rows (never a damaged one's: its
    /// placeholders would overwrite what is stored).
    fn put_routine(&mut self, r: &RoutineRow) -> StoreResult<()>;

    /// Ends a run whose stored row is damaged (it cannot be decoded, so
    /// never written back whole): its state (the engine's terminal state),
    /// phase and reason (a person's words) are replaced, its step session,
    /// deadline and pending request cleared; its spec (and damage) stay.
    fn end_damaged_routine(
        &mut self,
        id: &str,
        state: RunState,
        phase: &str,
        reason: &str,
        now: i64,
    ) -> StoreResult<()>;

    /// Adds the standing policy `s`, ordered after the others.
    fn insert_standing(&mut self, s: &StandingRow) -> StoreResult<()>;

    /// Removes a standing policy; whether it was there.
    fn remove_standing(&mut self, id: &str) -> StoreResult<bool>;

    /// The operator's WebAuthn user id (made once, random, then kept: every
    /// passkey is registered for it).
    fn passkey_user(&mut self) -> StoreResult<uuid::Uuid>;

    /// Adds a passkey; false (nothing written) when its credential id is
    /// already registered.
    fn insert_passkey(&mut self, id: &str, name: &str, p: &Passkey, now: i64) -> StoreResult<bool>;

    /// After a use: its new counter and flags, and when.
    fn passkey_used(&mut self, id: &str, p: &Passkey, now: i64) -> StoreResult<()>;

    /// Removes a passkey; whether it was there.
    fn remove_passkey(&mut self, id: &str) -> StoreResult<bool>;

    /// Gives a passkey another name; whether it was there.
    fn rename_passkey(&mut self, id: &str, name: &str) -> StoreResult<bool>;

    /// Sends `request` (encoded by the engine) on policy `policy` to the
    /// host `host` that owns it: its number. Refused by a store of one
    /// host (there is no other).
    fn insert_host_request(
        &mut self,
        host: &str,
        policy: &str,
        request: &str,
        now: i64,
    ) -> StoreResult<i64> {
        let _ = (host, policy, request, now);
        Err(StoreError::Backend(
            "a store of one host has no other host to send a request to".into(),
        ))
    }

    /// Takes the cluster's leadership when no live leader holds it, or
    /// renews this host's, for `lease_ms` (the database's clock); `grace_ms`
    /// says when the leader should next look for dead hosts. A store of one
    /// host has no cluster: refused.
    fn lead(&mut self, lease_ms: i64, grace_ms: i64) -> StoreResult<Leadership> {
        let _ = (lease_ms, grace_ms);
        Err(StoreError::Backend(
            "a store of one host has no cluster to lead".into(),
        ))
    }

    /// Whether this host leads in `term`, its leader's lease running (by
    /// the database's clock): what every leader's write checks first.
    fn leads(&mut self, term: i64) -> StoreResult<bool> {
        let _ = term;
        Ok(false)
    }

    /// Marks `stale` every live host whose lease ended more than
    /// `grace_ms` ago (by the database's clock): those marked, once each.
    fn mark_stale_hosts(&mut self, grace_ms: i64) -> StoreResult<Vec<StaleHost>> {
        let _ = grace_ms;
        Ok(Vec::new())
    }

    /// Moves the rows of the stale host `dead` (its sessions, policies,
    /// routines, webhook deliveries and open requests) to this host and
    /// marks it `taken`: what moved, or `None` when `dead` is not stale.
    fn take_over(&mut self, dead: &str) -> StoreResult<Option<TakenOver>> {
        let _ = dead;
        Ok(None)
    }

    /// Moves request `id` from `from` to `to` (with its `outcome` when
    /// done): whether it was in `from` (nothing changes otherwise).
    fn move_host_request(
        &mut self,
        id: i64,
        from: HostRequestState,
        to: HostRequestState,
        outcome: Option<&str>,
        now: i64,
    ) -> StoreResult<bool> {
        let _ = (id, from, to, outcome, now);
        Ok(false)
    }
}

/// A store as the daemon holds it (`store::Store` is a facade over one).
pub trait Backend: Records + Send + Sync {
    /// Runs `body` once in one transaction and commits what it wrote; an
    /// error from `body` (or from the commit) rolls everything back and is
    /// answered as is.
    fn transaction(&self, body: TxBody<'_>) -> StoreResult<()>;

    /// Applies the retention `rules` as of `now` (ms), in small
    /// transactions (a crash in between leaves a consistent store with
    /// less deleted). It never deletes a policy that is not settled, a run
    /// that has not finished, a session a live policy has as a member, an
    /// event of a live policy, an event a pending delivery still sends or
    /// a pending delivery; and never moves the head cursor back.
    fn apply_retention(&self, rules: &Retention, now: i64) -> StoreResult<Swept>;

    /// Where the store lives, for messages (SQLite: its file; PostgreSQL:
    /// `postgres://user@host:port/database`, never a password).
    fn location(&self) -> String;

    /// The host this store works for and its claim's fencing number
    /// (PostgreSQL opened for a host); `None` for a store of one host.
    fn host(&self) -> Option<(String, i64)> {
        None
    }

    /// Whether this process may act for its host now (its claim held and
    /// its lease renewed in time): `Fenced` once it lost the claim,
    /// `LeaseLapsed` while it cannot renew. Checked before every write, and
    /// by the engine before an effect outside the store. A store of one
    /// host always may.
    fn acting(&self) -> StoreResult<()> {
        Ok(())
    }

    /// A receiver told once, with why, when this host's claim is lost (the
    /// daemon stops); `None` for a store of one host.
    fn claim_lost(&self) -> Option<tokio::sync::watch::Receiver<Option<String>>> {
        None
    }

    /// Ends this host's claim at a clean stop (its id can be claimed again
    /// at once); nothing for a store of one host.
    fn release_host(&self) {}

    /// The cluster's tokens, for a store that hosts share (PostgreSQL);
    /// `None` for a store of one host (SQLite), whose token files are the
    /// truth.
    fn shared_tokens(&self) -> Option<&dyn SharedTokens> {
        None
    }

    /// Test only: how many round trips its statements have made to a
    /// database server (`None`: an embedded store, which makes none).
    #[cfg(any(test, feature = "test-support"))]
    fn round_trips(&self) -> Option<u64> {
        None
    }

    /// Test only: the stored text of `column` of the row `id` of `table`
    /// (`None`: no such row), read without decoding the row.
    #[cfg(any(test, feature = "test-support"))]
    fn stored_text(&self, table: &str, column: &str, id: &str) -> StoreResult<Option<String>>;

    /// Test only: overwrites `column` of the row `id` of `table` (every
    /// row when `id` is `None`) with `text`, as damage on disk would;
    /// answers how many rows changed.
    #[cfg(any(test, feature = "test-support"))]
    fn damage_column(
        &self,
        table: &str,
        column: &str,
        id: Option<&str>,
        text: &str,
    ) -> StoreResult<usize>;
}

/// The cluster's two tokens in a store that hosts share (issue 51, "one
/// operator"; `store::tokens`): every host serves with the stored ones.
pub trait SharedTokens: Send + Sync {
    /// Both tokens; `None` when none are stored yet.
    fn cluster_tokens(&self) -> StoreResult<Option<ClusterTokens>>;

    /// Their generations `(agent, operator)` alone (a cheap look); `None`
    /// when none are stored yet.
    fn token_generations(&self) -> StoreResult<Option<(i64, i64)>>;

    /// Stores `agent` and `operator` (generation 1) where the cluster has
    /// none, in a write transaction of this host (of hosts starting at
    /// once, one stores them, the others find them), and answers what is
    /// stored.
    fn seed_cluster_tokens(&self, agent: &str, operator: &str) -> StoreResult<ClusterTokens>;

    /// Replaces the tokens named in `new` (each generation one more) in a
    /// write transaction of this host that also wakes every other host (a
    /// notification at its commit), and answers what is stored.
    fn rotate_cluster_tokens(&self, new: &[(TokenName, &str)]) -> StoreResult<ClusterTokens>;
}
