//! The policy engine: sessions, policies and their lifecycle.
//!
//! [`Engine`] is a thin facade: the shared core (the store, the bus, the
//! configuration in force, the stopping flag) and one of each service
//! (`engine/services.rs`), which owns its state and its methods; what the
//! API and CLI call stays callable on `Engine` by one-line delegations.
//!
//! It drives the state machine of [`machine`]
//! (`watching → queued → gating → done | nudging → watching | blocked`, and
//! for commit policies `… → awaiting-ack → committing → done | cancelled`):
//! every transition goes through `Policies::transition`, which stores the
//! state, its timestamp and the events describing it in one transaction;
//! the effects it names (running a gate, delivering a nudge, making the
//! commit) happen only after that transaction committed, and are re-driven
//! from the stored state after a restart or a failed task (`recover`, the
//! sweep).
//!
//! It must never decide a verdict from anything the agent can write
//! without detection, never let a gate outlive its policy's cancel, and
//! never publish an event whose state change is not stored.

mod ack;
mod acp;
mod agent_process;
pub mod attach;
mod busy;
pub mod chain;
mod changes;
mod cluster_bus;
mod commits;
mod confined_agent;
mod damage;
mod error;
mod fan_in;
mod gated;
mod judge;
pub mod keys;
mod leader;
mod lifecycle;
pub mod machine;
mod nudge;
mod on_snapshot;
pub(crate) mod outage;
pub mod passkeys;
mod pinned;
mod policy_diff;
mod reads;
mod reconfigure;
mod recovery;
mod retry;
mod review;
pub mod routine;
mod routines;
mod rules;
mod said;
mod services;
mod sessions;
pub mod standing;
mod started;
pub mod stored;
mod transition;
pub mod watchdog;

pub use attach::{AttachInput, GateOn, Then, WatchFrom};
pub use changes::{DiffSide, LineComment, MAX_COMMENT_BODY, MAX_COMMENTS, changes_nudge};
pub use error::{EngineError, EngineResult};
pub use keys::Caller;
pub use machine::PolicyEvent;
use machine::Step;
pub use nudge::{MAX_REJECT_COMMENT, reject_nudge, render_nudge};
pub use routines::{RoutineEvent, RoutineView};
pub use sessions::{RegisterInput, Registered, ReportKind, ReportOutcome};
pub use started::StartInput;

// The services of this half, named here so that their files import them
// from the engine (a parent), never from `services` (a sibling).
use services::{Policies, Reviews};

use crate::bus::Bus;
use crate::gate::GateRunner;
use crate::store::{
    EventFilter, EventRow, PolicyRow, PolicyStatus, SessionRow, Store, StoreError, Tx,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;

/// The engine. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    /// The configuration in force and the runner of its gates, swapped
    /// whole by a reload (`reconfigure`); a gate takes its own clone when
    /// it starts and keeps it to its end.
    runner: std::sync::RwLock<GateRunner>,
    bus: Bus,
    /// Set when the daemon begins to stop: long-polls answer at once.
    stopping: tokio::sync::watch::Sender<bool>,
    /// Whether the store answers: its outages, logged once each.
    outage: outage::Outage,
    /// The term this daemon leads the cluster in, if it does (`leader`).
    leader: leader::Leader,
    policies: services::Policies,
    reviews: services::Reviews,
    sessions: services::Sessions,
    agents: services::Agents,
    routines: services::Routines,
    settings: services::Settings,
}

/// The states a task of the daemon drives.
const WORKING: &[PolicyStatus] = &[
    PolicyStatus::Queued,
    PolicyStatus::Gating,
    PolicyStatus::Nudging,
    PolicyStatus::Committing,
    PolicyStatus::Reviewing,
];

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("store", &self.inner.store)
            .finish()
    }
}

/// The lane named `key` of `lanes` (made on first use): work that must
/// not overlap for one key (a workspace's commits, a reviewer's reviews)
/// holds it while it runs.
fn lane(
    lanes: &Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    key: &str,
) -> Arc<tokio::sync::Mutex<()>> {
    lanes
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(key.to_string())
        .or_default()
        .clone()
}

impl Engine {
    /// Opens the engine over `store`. Call `recover` once the runtime runs.
    pub fn new(store: Store, runner: GateRunner) -> EngineResult<Engine> {
        let head = store.head_cursor()?;
        let config = runner.config().daemon.clone();
        let worktrees =
            crate::worktree::Worktrees::new(config.worktree_dir.clone().unwrap_or_else(|| {
                std::env::temp_dir().join(format!(
                    "gatehost-worktrees-{}",
                    rustix::process::getuid().as_raw()
                ))
            }))
            .owned_by(runner.sandbox().gate_user())
            .keeping(&config.worktree_caches);
        let inner = Arc::new_cyclic(|hub| {
            let service = services::Service::new(hub);
            Inner {
                store,
                bus: Bus::new(head),
                stopping: tokio::sync::watch::Sender::new(false),
                outage: outage::Outage::default(),
                leader: leader::Leader::default(),
                policies: services::Policies {
                    service: service.clone(),
                    gating: Arc::new(Semaphore::new(config.max_gating.max(1))),
                    gate_tasks: Mutex::new(HashMap::new()),
                    busy: busy::Busy::default(),
                    commit_locks: Mutex::new(HashMap::new()),
                    boot_time: std::time::SystemTime::now(),
                    worktrees,
                    stat_caches: Mutex::new(HashMap::new()),
                    standings: Mutex::default(),
                    watch_held: Arc::default(),
                },
                reviews: services::Reviews {
                    service: service.clone(),
                    review_tasks: Mutex::new(HashMap::new()),
                    reviewer_lanes: Mutex::new(HashMap::new()),
                },
                sessions: services::Sessions {
                    service: service.clone(),
                    awake_since: std::sync::atomic::AtomicI64::new(0),
                },
                agents: services::Agents {
                    service: service.clone(),
                    started: services::Started::default(),
                    acp: services::Acp::default(),
                },
                routines: services::Routines {
                    service: service.clone(),
                    waits_dirty: std::sync::atomic::AtomicBool::new(true),
                },
                settings: services::Settings {
                    service,
                    reloading: Mutex::new(()),
                },
                runner: std::sync::RwLock::new(runner),
            }
        });
        Ok(Engine { inner })
    }

    /// The policy lifecycle.
    pub(crate) fn policies(&self) -> &services::Policies {
        &self.inner.policies
    }

    /// Review chains.
    pub(crate) fn reviews(&self) -> &services::Reviews {
        &self.inner.reviews
    }

    /// Sessions, their keys and the watchdog.
    pub(crate) fn sessions(&self) -> &services::Sessions {
        &self.inner.sessions
    }

    /// The agents this daemon runs.
    pub(crate) fn agents(&self) -> &services::Agents {
        &self.inner.agents
    }

    /// Routines and their runs (`routines(limit)` lists the runs).
    pub(crate) fn runs(&self) -> &services::Routines {
        &self.inner.routines
    }

    /// The operator's settings.
    pub(crate) fn settings(&self) -> &services::Settings {
        &self.inner.settings
    }

    // The facade: what the API and the CLI call, each delegating to the
    // service that owns it.
    services::delegate! {
        policies: Policies {
            async attach(input: AttachInput, caller: Caller, key: Option<attach::ClientKey>)
                -> EngineResult<PolicyRow>;
            attach_replayed(trust: crate::config::Trust, key: &attach::ClientKey)
                -> EngineResult<Option<PolicyRow>>;
            async policy_now(id: &str) -> EngineResult<PolicyRow>;
            async ack(id: &str, approve: bool, tree: Option<&str>, comment: Option<&str>, by: &str,
                proof: Option<&crate::passkey::Proof>) -> EngineResult<PolicyRow>;
            async request_changes(id: &str, tree: &str, comments: &[LineComment], by: &str)
                -> EngineResult<PolicyRow>;
            async policy_patch(id: &str, bounds: crate::commit::patch::PageBounds, since: Option<String>)
                -> EngineResult<policy_diff::PolicyPatch>;
            cancel(id: &str, by: &str) -> EngineResult<PolicyRow>;
            recover(fault: Option<&str>) -> EngineResult<()>;
            spawn_sweeper();
            spawn_retention();
        }
        sessions: Sessions {
            register(input: RegisterInput, caller: &keys::Caller) -> EngineResult<Registered>;
            report_counted(id: &str, kind: ReportKind, message: Option<String>,
                caller: &keys::Caller) -> EngineResult<ReportOutcome>;
            session_for(id: &str, caller: &keys::Caller) -> EngineResult<SessionRow>;
            listed_session(s: SessionRow, caller: &keys::Caller) -> SessionRow;
            readable_policies(list: Vec<PolicyRow>, caller: &keys::Caller)
                -> EngineResult<Vec<PolicyRow>>;
            policy_for(id: &str, caller: &keys::Caller) -> EngineResult<PolicyRow>;
            check_event_read(f: &mut EventFilter, caller: &keys::Caller) -> EngineResult<()>;
            spawn_watchdog();
            watch(now: i64) -> EngineResult<(watchdog::Look, Vec<(String, Step)>)>;
        }
        agents: Agents {
            start_session(input: StartInput) -> EngineResult<Registered>;
            resolve_permission(session: &str, request: &str, allow: bool, routine: Option<&str>)
                -> EngineResult<()>;
        }
        runs: Routines {
            start_routine(spec: routine::RoutineSpec) -> EngineResult<RoutineView>;
            start_routine_as(spec: routine::RoutineSpec, key: Option<String>, caller: &keys::Caller)
                -> EngineResult<RoutineView>;
            routine(id: &str) -> EngineResult<RoutineView>;
            routines(limit: usize) -> EngineResult<Vec<RoutineView>>;
            cancel_routine_as(id: &str, caller: &keys::Caller) -> EngineResult<RoutineView>;
            resolve_routine(id: &str, step: &str, response: String) -> EngineResult<RoutineView>;
            spawn_routine_ticker();
        }
        settings: Settings {
            add_standing(req: standing::StandingRequest) -> EngineResult<crate::store::StandingRow>;
            standing_policies() -> EngineResult<Vec<crate::store::StandingRow>>;
            remove_standing(id: &str) -> EngineResult<crate::store::StandingRow>;
            ack_requires() -> crate::config::AckRequires;
            passkeys() -> EngineResult<Vec<crate::store::PasskeyRow>>;
            usable_passkeys() -> EngineResult<Vec<crate::passkey::Registered>>;
            passkey_user() -> EngineResult<uuid::Uuid>;
            add_passkey(new: &crate::passkey::NewPasskey) -> EngineResult<()>;
            passkey_used(proof: &crate::passkey::Proof) -> EngineResult<()>;
            remove_passkey(id: &str, proof: &crate::passkey::Proof)
                -> EngineResult<crate::store::PasskeyRow>;
            rename_passkey(id: &str, name: &str, by: &str)
                -> EngineResult<crate::store::PasskeyRow>;
            reconfigure(config: crate::config::HostConfig, event: &crate::model::event::Event)
                -> EngineResult<()>;
            daemon_event(event: &crate::model::event::Event) -> EngineResult<i64>;
        }
    }

    /// The daemon is stopping: every long-poll answers now (as timed
    /// out: its client polls again, and finds the next daemon), so that
    /// the server's graceful shutdown does not wait for them.
    pub fn begin_shutdown(&self) {
        self.inner.stopping.send_replace(true);
    }

    /// Whether [`Engine::begin_shutdown`] was called.
    pub(crate) fn is_stopping(&self) -> bool {
        *self.inner.stopping.borrow()
    }

    /// Resolves once [`Engine::begin_shutdown`] was called.
    async fn stopped(&self) {
        let mut rx = self.inner.stopping.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The runner of the configuration in force now (a clone: it stays
    /// whole however the configuration changes after).
    pub fn runner(&self) -> GateRunner {
        self.inner
            .runner
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Puts `config` in force: the runner is swapped whole (a gate
    /// running keeps the clone it started with). Only `Settings`'s reload
    /// calls it, one at a time.
    pub(crate) fn put_config_in_force(&self, config: crate::config::HostConfig) {
        let mut runner = self.inner.runner.write().unwrap_or_else(|p| p.into_inner());
        *runner = runner.reconfigured(config);
    }

    /// The operator's webhooks of the configuration in force that receive
    /// events of type `kind` (each webhook's event filter).
    pub(crate) fn webhooks(&self, kind: &str) -> Vec<String> {
        self.runner()
            .config()
            .daemon
            .targets
            .iter()
            .filter(|t| t.events.contains(kind))
            .map(|t| t.url.clone())
            .collect()
    }

    /// Whether supervision runs (`[daemon] enabled`): when not, no gate
    /// starts and queued policies wait.
    pub(crate) fn supervising(&self) -> bool {
        self.runner().config().daemon.enabled
    }

    pub fn bus(&self) -> &Bus {
        &self.inner.bus
    }

    /// Whether the store answers (its outages, logged once each).
    pub(crate) fn outage(&self) -> &outage::Outage {
        &self.inner.outage
    }

    /// One transaction; readers are woken after it commits.
    pub(crate) fn write<T>(
        &self,
        f: impl FnOnce(&mut Tx<'_>) -> Result<T, EngineError>,
    ) -> EngineResult<T> {
        let mut refused = None;
        let out = self.inner.store.write(|tx| {
            f(tx).map_err(|e| match e {
                EngineError::Store(e) => e,
                e => {
                    refused = Some(e);
                    // Roll back: nothing of a refused request is kept.
                    StoreError::RolledBack
                }
            })
        });
        if let Some(e) = refused {
            return Err(e);
        }
        let out = match out {
            Ok(out) => {
                self.inner.outage.wrote();
                out
            }
            Err(e) => {
                self.inner.outage.failed(&e);
                return Err(e.into());
            }
        };
        self.inner.bus.published();
        Ok(out)
    }

    /// Appends `event` in `tx`, with the webhooks it goes to.
    pub(crate) fn append(
        &self,
        tx: &mut Tx<'_>,
        event: &crate::model::event::Event,
        session: Option<&str>,
        policy: Option<&str>,
    ) -> EngineResult<i64> {
        Ok(tx.append_event(event, session, policy, &self.webhooks(event.kind()))?)
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
            if p.status.is_settled() || machine::awaits_ack(p.status) {
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
}

#[cfg(test)]
mod tests;
