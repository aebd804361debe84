//! The policy engine: sessions, policies and their lifecycle.
//!
//! It drives the state machine of [`machine`]
//! (`watching → queued → gating → done | nudging → watching | blocked`, and
//! for commit policies `… → awaiting-ack → committing → done | cancelled`):
//! every transition goes through [`Engine::transition`], which stores the
//! state, its timestamp and the events describing it in one transaction;
//! the effects it names (running a gate, delivering a nudge, making the
//! commit) happen only after that transaction committed, and are re-driven
//! from the stored state after a restart or a failed task (`recover`, the
//! sweep).
//!
//! It must never decide a verdict from anything the agent can write
//! without detection, never let a gate outlive its policy's cancel, and
//! never publish an event whose state change is not stored.

pub mod attach;
mod commits;
mod lifecycle;
pub mod machine;
mod sessions;
pub mod stored;

pub use attach::{AttachInput, GateOn, Then, WatchFrom};
pub use machine::PolicyEvent;
use machine::{Decision, Effect, Input, Step};
pub use sessions::{RegisterInput, ReportKind, StartInput};

use crate::bus::Bus;
use crate::gate::GateRunner;
use crate::store::{
    EventFilter, EventRow, PolicyRow, PolicyStatus, SessionRow, Store, StoreError, Tx, now_ms,
};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::task::AbortHandle;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Bad input; `field` names where.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    #[error("{0}")]
    NotFound(String),
    /// The request does not fit the current state (double ack, stale ack,
    /// cancel of a settled policy); `code` is machine-readable.
    #[error("{message}")]
    Conflict { code: &'static str, message: String },
    /// The credential may not do this (a session of another owner).
    #[error("{message}")]
    Forbidden { code: &'static str, message: String },
    /// The request could not be served now (a time bound); retrying may
    /// succeed. Nothing was changed.
    #[error("{message}")]
    Unavailable { code: &'static str, message: String },
    /// A stored row that does not decode (a damaged store, or one written
    /// by a newer gatehost): never read as `null`.
    #[error("policy {policy}: its stored {column} does not decode: {message}")]
    Corrupt {
        policy: String,
        column: &'static str,
        message: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub type EngineResult<T> = Result<T, EngineError>;

/// The engine. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    runner: GateRunner,
    bus: Bus,
    /// Policies gating at once (FIFO: tokio's semaphore is fair).
    gating: Arc<Semaphore>,
    /// Gate tasks by policy id, so that a cancel kills the gate.
    gate_tasks: Mutex<HashMap<String, AbortHandle>>,
    webhooks: Vec<String>,
    default_nudge: String,
    started: sessions::Started,
    /// When this daemon started: a publish recorded before this was our
    /// previous life's (its git locks may be cleared).
    boot_time: std::time::SystemTime,
    /// One commit at a time per workspace.
    commit_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Where commit policies' gates run on their snapshot.
    worktrees: crate::worktree::Worktrees,
    /// Per workspace: the blob ids of files read by its last snapshot.
    stat_caches: Mutex<HashMap<String, Arc<Mutex<crate::commit::StatCache>>>>,
    /// Set when the daemon begins to stop: long-polls answer at once.
    stopping: tokio::sync::watch::Sender<bool>,
    /// Policies with a nudge or commit task running.
    busy: Mutex<std::collections::HashSet<String>>,
}

/// The states a task of the daemon drives.
const WORKING: &[PolicyStatus] = &[
    PolicyStatus::Queued,
    PolicyStatus::Gating,
    PolicyStatus::Nudging,
    PolicyStatus::Committing,
];

/// Daemon deaths in a row during one policy's gate that settle it.
const POISON_AFTER: i64 = 2;

/// How often the sweep looks for policies left without a task.
const SWEEP_EVERY: Duration = Duration::from_secs(3);
/// A policy untouched for this long in a working state, with no task, was
/// left behind (a live transition schedules its task within milliseconds).
const SWEEP_AFTER_MS: i64 = 5_000;

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("store", &self.inner.store)
            .finish()
    }
}

/// A digest of an attach request, to tell a retry from another request.
fn request_digest(body: &Value) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(body.to_string().as_bytes()))
}

/// A policy as the API shows it.
pub fn policy_json(p: &PolicyRow) -> Value {
    let mut v = serde_json::to_value(p).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        m.insert("policyId".into(), Value::String(p.id.clone()));
    }
    v
}

impl Engine {
    /// Opens the engine over `store`. Call `recover` once the runtime runs.
    pub fn new(store: Store, runner: GateRunner) -> EngineResult<Engine> {
        let head = store.head_cursor()?;
        let config = runner.config().daemon.clone();
        Ok(Engine {
            inner: Arc::new(Inner {
                store,
                bus: Bus::new(head),
                gating: Arc::new(Semaphore::new(config.max_gating.max(1))),
                gate_tasks: Mutex::new(HashMap::new()),
                webhooks: config.webhook_url.into_iter().collect(),
                default_nudge: config.default_nudge,
                started: sessions::Started::default(),
                boot_time: std::time::SystemTime::now(),
                commit_locks: Mutex::new(HashMap::new()),
                stat_caches: Mutex::new(HashMap::new()),
                stopping: tokio::sync::watch::Sender::new(false),
                busy: Mutex::new(std::collections::HashSet::new()),
                worktrees: crate::worktree::Worktrees::new(
                    config.worktree_dir.clone().unwrap_or_else(|| {
                        std::env::temp_dir().join(format!(
                            "gatehost-worktrees-{}",
                            rustix::process::getuid().as_raw()
                        ))
                    }),
                )
                .owned_by(runner.sandbox().gate_user()),
                runner,
            }),
        })
    }

    /// The stat cache of `workspace`'s snapshots.
    pub(crate) fn stat_cache(&self, workspace: &str) -> Arc<Mutex<crate::commit::StatCache>> {
        self.inner
            .stat_caches
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(workspace.to_string())
            .or_default()
            .clone()
    }

    /// Marks a nudge or commit task of `id` running; false if one is.
    pub(crate) fn begin_task(&self, id: &str) -> bool {
        self.inner
            .busy
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_string())
    }

    pub(crate) fn end_task(&self, id: &str) {
        self.inner
            .busy
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
    }

    /// Self-healing: every few seconds, re-drives the policies a failed
    /// task left behind (a store or git error, a full disk): `gating` or
    /// `queued` with no gate task, `nudging` or `committing` with no task.
    /// Runs until the daemon stops.
    pub fn spawn_sweeper(&self) {
        let engine = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(SWEEP_EVERY) => {}
                    _ = engine.stopped() => return,
                }
                if let Err(e) = engine.sweep() {
                    tracing::warn!(error = %e, "the sweep could not read the store; it tries again");
                }
            }
        });
    }

    /// Applies `[retention]` at start and then every `every`, on the
    /// blocking pool (in small transactions), logging what it deleted.
    /// Runs until the daemon stops.
    pub fn spawn_retention(&self) {
        let rules = self.inner.runner.config().retention.clone();
        if !rules.enabled {
            tracing::info!("retention is off: events, deliveries, sessions and policies are kept");
            return;
        }
        let engine = self.clone();
        tokio::spawn(async move {
            loop {
                let (e2, r) = (engine.clone(), rules.clone());
                match tokio::task::spawn_blocking(move || {
                    e2.inner.store.apply_retention(&r, now_ms())
                })
                .await
                {
                    Ok(Ok(swept)) if swept.is_empty() => {}
                    Ok(Ok(swept)) => tracing::info!(
                        events = swept.events,
                        deliveries = swept.deliveries,
                        sessions = swept.sessions,
                        policies = swept.policies,
                        "retention deleted what no live policy needs"
                    ),
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "retention could not run; it tries again later")
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the retention task failed; it tries again later")
                    }
                }
                tokio::select! {
                    _ = tokio::time::sleep(rules.every) => {}
                    _ = engine.stopped() => return,
                }
            }
        });
    }

    fn sweep(&self) -> EngineResult<()> {
        let stale_before = now_ms() - SWEEP_AFTER_MS;
        let open = self.inner.store.policies(WORKING)?;
        for p in open.into_iter().filter(|p| p.updated_at < stale_before) {
            self.redrive(
                &p,
                "its gate task stopped on an error (the store, a full disk); it runs again",
            )?;
        }
        Ok(())
    }

    /// Starts what a policy in a working state needs when no task of this
    /// daemon drives it (after a restart, or a task that failed): a gate
    /// left `gating` is queued again (`reason` says why) and run; `queued`
    /// is run; `nudging` and `committing` resume. A policy whose gate task
    /// runs is left to it; nudge and commit tasks run once at a time.
    fn redrive(&self, p: &PolicyRow, reason: &str) -> EngineResult<()> {
        if matches!(p.status, PolicyStatus::Queued | PolicyStatus::Gating)
            && self.has_gate_task(&p.id)
        {
            return Ok(());
        }
        if p.status == PolicyStatus::Gating {
            tracing::warn!(policy = %p.id, %reason, "a policy was left gating");
        }
        let id = p.id.clone();
        let step = if p.status == PolicyStatus::Gating {
            // Stored: the gate runs again from `queued`.
            self.write(|tx| {
                let Some(mut p) = tx.policy(&id)? else {
                    return Ok(None);
                };
                self.transition(tx, &mut p, Input::Recover, |_| json!({"reason": reason}))
            })?
        } else {
            // Nothing to store: the task resumes from the state as it is.
            match machine::decide(p.status, Input::Recover) {
                Decision::Go(step) => Some(step),
                _ => None,
            }
        };
        if let Some(step) = step {
            self.perform(&id, &step);
        }
        Ok(())
    }

    /// Whether a gate task of this daemon runs (or is about to) for `id`.
    fn has_gate_task(&self, id: &str) -> bool {
        self.inner
            .gate_tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(id)
    }

    /// The daemon is stopping: every long-poll answers now (as timed
    /// out: its client polls again, and finds the next daemon), so that
    /// the server's graceful shutdown does not wait for them.
    pub fn begin_shutdown(&self) {
        self.inner.stopping.send_replace(true);
    }

    /// Resolves once [`Engine::begin_shutdown`] was called.
    async fn stopped(&self) {
        let mut rx = self.inner.stopping.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    pub fn runner(&self) -> &GateRunner {
        &self.inner.runner
    }

    pub fn bus(&self) -> &Bus {
        &self.inner.bus
    }

    /// One transaction; readers are woken after it commits.
    pub(crate) fn write<T>(
        &self,
        f: impl FnOnce(&mut Tx<'_>) -> Result<T, EngineError>,
    ) -> EngineResult<T> {
        let mut inner_err = None;
        let out = self.inner.store.write(|tx| match f(tx) {
            Ok(v) => Ok(Some(v)),
            Err(EngineError::Store(e)) => Err(e),
            Err(e) => {
                inner_err = Some(e);
                // Roll back: nothing of a refused request is kept.
                Err(StoreError::Sqlite("rolled back".into()))
            }
        });
        if let Some(e) = inner_err {
            return Err(e);
        }
        let out = out?;
        self.inner.bus.published();
        out.ok_or_else(|| EngineError::Store(StoreError::Sqlite("empty transaction".into())))
    }

    /// The one transition function: applies [`machine::decide`] to `p`
    /// and `input`, storing the new state, its timestamp and the events of
    /// the step (each with the usual fields and `payload(event)`) in `tx`,
    /// and attaching the `next` policy when the step says so. Returns the
    /// step, whose other effects the caller runs once `tx` committed
    /// ([`Engine::perform`]); `None` when the input changes nothing; a
    /// conflict when the state refuses it.
    pub(crate) fn transition(
        &self,
        tx: &mut Tx<'_>,
        p: &mut PolicyRow,
        input: Input,
        payload: impl Fn(PolicyEvent) -> Value,
    ) -> EngineResult<Option<Step>> {
        let step = match machine::decide(p.status, input) {
            Decision::Ignore => return Ok(None),
            Decision::Refuse(r) => {
                let message = match r {
                    machine::Refusal::NotAwaitingAck => format!(
                        "policy {} is {}, not awaiting-ack: nothing to approve or reject",
                        p.id,
                        p.status.as_str()
                    ),
                    machine::Refusal::Settled => {
                        format!("policy {} is already {}", p.id, p.status.as_str())
                    }
                };
                return Err(EngineError::Conflict {
                    code: r.code(),
                    message,
                });
            }
            Decision::Go(step) => step,
        };
        let from = p.status;
        p.status = step.to;
        p.updated_at = now_ms();
        tx.put_policy(p)?;
        for &event in step.events {
            self.policy_event(tx, event, p, payload(event))?;
        }
        if step.effects.contains(&Effect::ChainNext) {
            self.chain_next(tx, p)?;
        }
        tracing::debug!(policy = %p.id, from = from.as_str(), to = p.status.as_str(), ?input, "transition");
        Ok(Some(step))
    }

    /// Runs the effects of a stored step that happen outside the store
    /// (the nudge's delivery is the nudge task's own).
    pub(crate) fn perform(&self, id: &str, step: &Step) {
        for effect in step.effects {
            match effect {
                Effect::RunGate => self.schedule_gate(id),
                Effect::AbortGate => self.abort_gate(id),
                Effect::Nudge => self.spawn_nudge(id.to_string()),
                Effect::Commit => self.spawn_commit(id.to_string()),
                Effect::DeliverNudge | Effect::ChainNext => {}
            }
        }
    }

    /// Appends a policy event with the usual payload fields.
    pub(crate) fn policy_event(
        &self,
        tx: &mut Tx<'_>,
        kind: PolicyEvent,
        p: &PolicyRow,
        extra: Value,
    ) -> EngineResult<i64> {
        let kind = kind.as_str();
        let mut payload = json!({
            "policyId": p.id,
            "status": p.status.as_str(),
            "sessionIds": p.sessions,
        });
        if let (Value::Object(m), Value::Object(e)) = (&mut payload, extra) {
            m.extend(e);
        }
        Ok(tx.append_event(
            kind,
            p.sessions.first().map(String::as_str),
            Some(&p.id),
            &payload,
            &self.inner.webhooks,
        )?)
    }

    pub fn policy(&self, id: &str) -> EngineResult<PolicyRow> {
        self.inner
            .store
            .policy(id)?
            .ok_or_else(|| EngineError::NotFound(format!("no policy '{id}'")))
    }

    pub fn session(&self, id: &str) -> EngineResult<SessionRow> {
        self.inner
            .store
            .session(id)?
            .ok_or_else(|| EngineError::NotFound(format!("no session '{id}'")))
    }

    pub fn events(&self, filter: &EventFilter) -> EngineResult<Vec<EventRow>> {
        Ok(self.inner.store.events(filter)?)
    }

    /// Attaches a policy: validates everything, stores it with its
    /// `policy:attached` event, and queues its gate at once when its
    /// members have already ended their turn (`watchFrom: "latest"`).
    /// Attaches a policy written by `trust` (the credential that sent it).
    ///
    /// The checks (a plugin read, hashed and compiled; an adapter found)
    /// run on the blocking pool, never on a thread that serves requests,
    /// and are bounded by `[daemon] attach_timeout_ms`: past it the answer
    /// is `Unavailable` and nothing is stored, even when the checks finish
    /// later.
    ///
    /// With an idempotency key (the client's, scoped to its credential):
    /// the first attach with it stores the policy and the key in one
    /// transaction; a retry with the same key and the same request answers
    /// that policy and attaches nothing; the same key with another request
    /// is a conflict.
    pub async fn attach(
        &self,
        mut body: Value,
        trust: crate::config::Trust,
        key: Option<String>,
    ) -> EngineResult<PolicyRow> {
        let key = match (
            key,
            body.as_object_mut()
                .and_then(|m| m.remove("idempotencyKey")),
        ) {
            (Some(k), _) => Some(k),
            (None, Some(Value::String(k))) => Some(k),
            (None, Some(_)) => {
                return Err(EngineError::Invalid {
                    field: "idempotencyKey".into(),
                    message: "must be a string".into(),
                });
            }
            (None, None) => None,
        };
        let key = match key {
            Some(k)
                if k.is_empty()
                    || k.len() > 200
                    || !k.bytes().all(|b| (0x21..0x7f).contains(&b)) =>
            {
                return Err(EngineError::Invalid {
                    field: "idempotencyKey".into(),
                    message: "must be 1 to 200 printable ASCII characters, no spaces".into(),
                });
            }
            Some(k) => Some((format!("{trust:?}:{k}"), request_digest(&body))),
            None => None,
        };
        if let Some((k, digest)) = &key
            && let Some(p) = self.replayed(k, digest)?
        {
            return Ok(p);
        }
        let limit = self.inner.runner.config().daemon.attach_timeout;
        let engine = self.clone();
        let checks = tokio::task::spawn_blocking(move || {
            let mut input = attach::parse_input(body)?;
            input.set_attached_by(trust);
            let store = &engine.inner.store;
            attach::validate(&mut input, &engine.inner.runner, &|id| {
                Ok(store.session(id)?)
            })?;
            Ok::<_, EngineError>(input)
        });
        let input = match tokio::time::timeout(limit, checks).await {
            Ok(Ok(checked)) => checked?,
            Ok(Err(e)) => {
                return Err(EngineError::Unavailable {
                    code: "attach-failed",
                    message: format!("the attach checks stopped: {e}"),
                });
            }
            Err(_) => {
                tracing::warn!(
                    limit = %crate::gate::human_duration(limit),
                    "an attach was refused: its checks (a plugin loading?) outlasted [daemon] attach_timeout_ms"
                );
                return Err(EngineError::Unavailable {
                    code: "attach-timeout",
                    message: format!(
                        "the gate could not be checked within {} ([daemon] attach_timeout_ms; a plugin still loading?): nothing was attached, try again",
                        crate::gate::human_duration(limit)
                    ),
                });
            }
        };
        let (policy, fresh) = self.write(|tx| {
            if let Some((k, _)) = &key {
                // Another attach with this key won the race meanwhile.
                if let Some((id, _)) = tx.idempotent(k)? {
                    let p = tx.policy(&id)?.ok_or_else(|| {
                        EngineError::NotFound(format!("no policy '{id}' (idempotency key)"))
                    })?;
                    return Ok((p, false));
                }
            }
            let p = self.insert_policy(tx, &input, None)?;
            if let Some((k, digest)) = &key {
                tx.put_idempotent(k, digest, &p.id)?;
            }
            Ok((p, true))
        })?;
        if fresh && policy.status == PolicyStatus::Queued {
            self.schedule_gate(&policy.id);
        }
        Ok(policy)
    }

    /// The policy an earlier attach with this key made, when the request
    /// is the same; a conflict when it is not.
    fn replayed(&self, key: &str, digest: &str) -> EngineResult<Option<PolicyRow>> {
        let found = self.write(|tx| Ok(tx.idempotent(key)?))?;
        let Some((id, earlier)) = found else {
            return Ok(None);
        };
        if earlier != digest {
            return Err(EngineError::Conflict {
                code: "idempotency-key-reused",
                message: format!(
                    "this idempotency key already attached {id} with another request; use a new key for a new policy"
                ),
            });
        }
        tracing::info!(policy = %id, "attach replayed for its idempotency key");
        Ok(Some(self.policy(&id)?))
    }

    /// Inserts a validated policy in `tx`, publishing `policy:attached`
    /// (and `policy:queued` when nothing is left to wait for).
    fn insert_policy(
        &self,
        tx: &mut Tx<'_>,
        input: &AttachInput,
        parent: Option<&str>,
    ) -> EngineResult<PolicyRow> {
        let members = input.members();
        let head = tx.head_cursor()?;
        let (watch_after, count_ended) = match &input.watch_from {
            None => (head, true),
            Some(WatchFrom::Named(n)) if n == "latest" => (head, true),
            Some(WatchFrom::Named(_)) => (head, false),
            Some(WatchFrom::Cursor(c)) => (*c, false),
        };
        if watch_after > head {
            return Err(EngineError::Invalid {
                field: "watchFrom".into(),
                message: format!(
                    "cursor {watch_after} is beyond the newest event ({head}): nothing would ever be watched"
                ),
            });
        }
        let mut pending = Vec::new();
        let (mut ended_any, mut exited) = (false, Vec::new());
        for id in &members {
            let s = tx.session(id)?.ok_or_else(|| EngineError::Invalid {
                field: "sessionId".into(),
                message: format!("unknown session '{id}'"),
            })?;
            let ended = match s.last_turn_cursor {
                Some(c) if c > watch_after => true,
                Some(_) if count_ended => matches!(
                    s.state,
                    crate::store::SessionState::Idle | crate::store::SessionState::Exited
                ),
                _ => false,
            };
            if ended {
                ended_any = true;
            } else if s.state == crate::store::SessionState::Exited {
                // No turn-end can come from it: never waited for.
                exited.push(id.clone());
            } else {
                pending.push(id.clone());
            }
        }
        if parent.is_none() && !ended_any && pending.is_empty() && !exited.is_empty() {
            return Err(EngineError::Conflict {
                code: "exited",
                message: format!(
                    "every member has exited ({}) and none ended a turn after watchFrom: the policy could never gate",
                    exited.join(", ")
                ),
            });
        }
        let now = now_ms();
        let spec = serde_json::to_value(input).unwrap_or(Value::Null);
        let mut p = PolicyRow {
            id: format!("pol_{}", uuid::Uuid::new_v4().simple()),
            seq: 0,
            spec,
            status: PolicyStatus::Watching,
            sessions: members,
            pending,
            watch_after,
            retries_used: 0,
            gate_runs: 0,
            verdict: None,
            plan: None,
            prepared: None,
            commit_sha: None,
            reason: None,
            parent_id: parent.map(str::to_string),
            next_id: None,
            created_at: now,
            updated_at: now,
            gate_crashes: 0,
            publish_started_at: None,
        };
        tx.insert_policy(&mut p)?;
        self.policy_event(
            tx,
            PolicyEvent::Attached,
            &p,
            json!({
                "then": input.then,
                "label": input.label,
                "watchAfter": watch_after,
                "pending": p.pending,
                "parentId": parent,
            }),
        )?;
        if p.pending.is_empty() {
            self.transition(
                tx,
                &mut p,
                Input::TurnEnd {
                    more_pending: false,
                },
                |_| json!({"reason": "every member had already ended its turn"}),
            )?;
        }
        Ok(p)
    }

    /// Cancels a policy in any state but a terminal one (`done`,
    /// `cancelled`); its gate, if running, is killed. A commit being made
    /// stops before its branch moves; one published already in the same
    /// instant is reported by a `policy:committed` event on the cancelled
    /// policy.
    pub fn cancel(&self, id: &str, by: &str) -> EngineResult<PolicyRow> {
        let (p, step) = self.write(|tx| {
            let mut p = tx
                .policy(id)?
                .ok_or_else(|| EngineError::NotFound(format!("no policy '{id}'")))?;
            let from = p.status;
            let reason = format!("cancelled by {by}");
            p.reason = Some(reason.clone());
            let step = self.transition(
                tx,
                &mut p,
                Input::Cancel,
                |_| json!({"from": from.as_str(), "reason": reason}),
            )?;
            Ok((p, step))
        })?;
        if let Some(step) = step {
            self.perform(id, &step);
        }
        tracing::info!(policy = id, by, "policy cancelled");
        Ok(p)
    }

    fn abort_gate(&self, id: &str) {
        let handle = self
            .inner
            .gate_tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        if let Some(h) = handle {
            // Dropping the gate future kills its process tree (the
            // supervisor's guard) or drops the plugin's store.
            h.abort();
        }
    }

    /// Waits until the policy is settled or awaiting an ack, or `timeout`.
    /// Returns the policy and whether it is in such a state.
    pub async fn wait_policy(
        &self,
        id: &str,
        timeout: Duration,
    ) -> EngineResult<(PolicyRow, bool)> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut rx = self.inner.bus.subscribe();
        loop {
            let p = self.policy(id)?;
            if p.status.is_settled() || p.status == PolicyStatus::AwaitingAck {
                return Ok((p, true));
            }
            tokio::select! {
                changed = tokio::time::timeout_at(deadline, rx.changed()) => match changed {
                    Ok(Ok(())) => continue,
                    _ => return Ok((self.policy(id)?, false)),
                },
                _ = self.stopped() => return Ok((self.policy(id)?, false)),
            }
        }
    }

    /// Waits for events matching `filter` (at least one), or `timeout`.
    pub async fn wait_events(
        &self,
        filter: &EventFilter,
        timeout: Duration,
    ) -> EngineResult<Vec<EventRow>> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut rx = self.inner.bus.subscribe();
        loop {
            let events = self.events(filter)?;
            if !events.is_empty() {
                return Ok(events);
            }
            tokio::select! {
                changed = tokio::time::timeout_at(deadline, rx.changed()) => match changed {
                    Ok(Ok(())) => continue,
                    _ => return Ok(Vec::new()),
                },
                _ = self.stopped() => return Ok(Vec::new()),
            }
        }
    }

    /// Picks up every policy where it was left: gates that were queued or
    /// running are queued again and run, nudges re-delivered, commits
    /// reconciled. Sessions gatehost had started are marked exited.
    ///
    /// A policy found `gating` was running its gate when the daemon died.
    /// When the daemon died of a fault of its own (`fault`: the signal the
    /// fault marker recorded, an abort a gate's input could provoke; never
    /// a kill from outside) that is counted, and the second such death in
    /// a row (no verdict stored in between) settles it as `blocked` with a
    /// `policy:blocked` event instead of running the gate again: a gate
    /// input that kills the daemon must not crash-loop it.
    pub fn recover(&self, fault: Option<&str>) -> EngineResult<()> {
        if let Some(signal) = fault {
            tracing::error!(%signal, "the previous daemon died of a fault of its own; the gates it was running are counted");
        }
        self.recover_started_sessions()?;
        let open = self.inner.store.policies(WORKING)?;
        for p in open {
            // A gate this life started already (recovery of a started
            // session ended its turn) is left to its task.
            if p.status == PolicyStatus::Gating && !self.has_gate_task(&p.id) {
                self.recover_gating(&p.id, fault.is_some())?;
                continue;
            }
            self.redrive(&p, "the daemon restarted while the gate ran; it runs again")?;
        }
        Ok(())
    }

    fn recover_gating(&self, id: &str, fault: bool) -> EngineResult<()> {
        let step = self.write(|tx| {
            let Some(mut p) = tx.policy(id)? else {
                return Ok(None);
            };
            if fault {
                p.gate_crashes += 1;
            }
            let crashes = p.gate_crashes;
            if crashes >= POISON_AFTER {
                let reason = format!(
                    "the daemon died {crashes} times in a row while this policy's gate ran; it is not run again (a gate input that kills the daemon would crash-loop it)"
                );
                tracing::error!(policy = %id, crashes, "a poison policy is settled instead of gated again");
                p.reason = Some(reason.clone());
                return self.transition(tx, &mut p, Input::Poisoned, |_| {
                    json!({"outcome": "error", "reason": reason, "gateCrashes": crashes})
                });
            }
            tracing::warn!(policy = %id, crashes, "the daemon restarted while this policy's gate ran; it runs again");
            self.transition(tx, &mut p, Input::Recover, |_| {
                json!({"reason": "the daemon restarted while the gate ran; it runs again", "gateCrashes": crashes})
            })
        })?;
        if let Some(step) = step {
            self.perform(id, &step);
        }
        Ok(())
    }
}
