//! The engine's services and the state each one owns: the policy
//! lifecycle ([`Policies`]), review chains ([`Reviews`]), sessions
//! ([`Sessions`]), the agents the daemon runs ([`Agents`]), routines
//! ([`Routines`]) and the operator's settings ([`Settings`]). The
//! [`Engine`] facade holds one of each beside the shared core (store, bus,
//! configuration); a service reaches the others only through
//! [`Service::engine`], so what one owns is changed by its own methods
//! alone.
//!
//! It must never hold state two services write, and never keep the engine
//! alive by itself (a service holds a weak handle: the engine owns it).

use super::{Engine, Inner};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64};
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::Semaphore;
use tokio::task::AbortHandle;

/// A service's handle on the engine that owns it.
#[derive(Clone)]
pub(crate) struct Service(Weak<Inner>);

impl Service {
    pub(super) fn new(hub: &Weak<Inner>) -> Self {
        Service(hub.clone())
    }

    /// The engine this service belongs to. It lives as long as any of its
    /// services is reachable: a service is only ever called through it.
    pub(crate) fn engine(&self) -> Engine {
        match self.0.upgrade() {
            Some(inner) => Engine { inner },
            None => unreachable!("a service is reached only through its live engine"),
        }
    }
}

/// Lanes by key: work that must not overlap for one key holds its lane.
pub(crate) type Lanes = Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>;

/// The policy lifecycle: gating, commits, nudges, retries, snapshots.
pub(crate) struct Policies {
    pub(super) service: Service,
    /// Policies gating at once (FIFO: tokio's semaphore is fair).
    pub(super) gating: Arc<Semaphore>,
    /// Gate tasks by policy id, so that a cancel kills the gate.
    pub(super) gate_tasks: Mutex<HashMap<String, AbortHandle>>,
    /// Policies with a nudge or commit task running.
    pub(super) busy: super::busy::Busy,
    /// One commit at a time per workspace.
    pub(super) commit_locks: Lanes,
    /// When this daemon started: a publish recorded before this was our
    /// previous life's (its git locks may be cleared).
    pub(super) boot_time: std::time::SystemTime,
    /// Where commit policies' gates run on their snapshot.
    pub(super) worktrees: crate::worktree::Worktrees,
    /// Per workspace: the blob ids of files read by its last snapshot.
    pub(super) stat_caches: Mutex<HashMap<String, Arc<Mutex<crate::commit::StatCache>>>>,
    /// Per workspace and commit paths: the watch kept on them between
    /// turns (`None` until the first snapshot, or where none can be had).
    pub(super) standings: Mutex<super::on_snapshot::KeptWatches>,
    /// How many directories all those watches hold (`[limits]
    /// watch_dirs_total` bounds it).
    pub(super) watch_held: Arc<std::sync::atomic::AtomicUsize>,
}

/// Review chains: the reviews running and the reviewers' lanes.
pub(crate) struct Reviews {
    pub(super) service: Service,
    /// Review tasks by policy id (one at a time; a cancel kills a judge
    /// reviewing).
    pub(super) review_tasks: Mutex<HashMap<String, AbortHandle>>,
    /// One lane per reviewer session: its reviews are prompted and
    /// answered one at a time, in turn.
    pub(super) reviewer_lanes: Lanes,
}

/// Sessions: registration, reports, keys and the watchdog.
pub(crate) struct Sessions {
    pub(super) service: Service,
    /// When (ms) the watchdog last began to run without a gap: its start,
    /// or its wake after the daemon stood still (a stop, a suspend, a
    /// stall). A session's silence counts only from then.
    pub(super) awake_since: AtomicI64,
}

/// The agents this daemon started, ACP or not.
pub(crate) struct Agents {
    pub(super) service: Service,
    pub(super) started: Started,
    /// The ACP sessions this daemon drives.
    pub(super) acp: Acp,
}

/// Stdin of the sessions gatehost started and follows.
#[derive(Default)]
pub(crate) struct Started {
    pub(super) stdin: Mutex<HashMap<String, Box<dyn futures_lite::AsyncWrite + Send + Unpin>>>,
}

/// The live ACP sessions: where their prompts go, and the permission
/// requests waiting for the operator.
#[derive(Default)]
pub(crate) struct Acp {
    pub(super) prompts: Mutex<HashMap<String, tokio::sync::mpsc::UnboundedSender<String>>>,
    /// By (session, request id).
    pub(super) escalations: Mutex<HashMap<(String, String), tokio::sync::oneshot::Sender<Answer>>>,
    pub(super) next_request: std::sync::atomic::AtomicU64,
}

/// An escalation's answer: allowed or not, and the routine that gave it
/// (none: the operator).
pub(super) type Answer = (bool, Option<String>);

/// Routines and their runs.
pub(crate) struct Routines {
    pub(super) service: Service,
    /// Whether a session ended a turn or exited since the routines' tick
    /// last looked at the waiting runs (true at start).
    pub(super) waits_dirty: AtomicBool,
}

/// The operator's settings: standing and session policies, passkeys, the
/// configuration's reload.
pub(crate) struct Settings {
    pub(super) service: Service,
    /// One reload at a time.
    pub(super) reloading: Mutex<()>,
}

macro_rules! reach_the_engine {
    ($($service:ident),*) => {$(
        impl $service {
            /// The engine this service belongs to: the way to the shared
            /// core and to the other services.
            pub(crate) fn engine(&self) -> Engine {
                self.service.engine()
            }
        }
    )*};
}
reach_the_engine!(Policies, Reviews, Sessions, Agents, Routines, Settings);

/// The facade's delegations: under `accessor: Service { .. }`, each
/// `name(args) -> T;` is `pub fn name(&self, args) -> T` on [`Engine`],
/// calling `self.accessor().name(args)`, and each `async name(args) -> T;`
/// the same `async`, awaited (the service's method has the doc).
macro_rules! delegate {
    ($($acc:ident: $svc:ident { $($items:tt)* })*) => {
        $($crate::engine::services::delegate!(@items $acc $svc $($items)*);)*
    };
    (@items $acc:ident $svc:ident) => {};
    (@items $acc:ident $svc:ident
        async $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?; $($rest:tt)*) => {
        #[doc = concat!("`", stringify!($svc), "::", stringify!($name), "`, for the API and the CLI.")]
        pub async fn $name(&self, $($arg: $ty),*) $(-> $ret)? {
            self.$acc().$name($($arg),*).await
        }
        $crate::engine::services::delegate!(@items $acc $svc $($rest)*);
    };
    (@items $acc:ident $svc:ident
        $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?; $($rest:tt)*) => {
        #[doc = concat!("`", stringify!($svc), "::", stringify!($name), "`, for the API and the CLI.")]
        pub fn $name(&self, $($arg: $ty),*) $(-> $ret)? {
            self.$acc().$name($($arg),*)
        }
        $crate::engine::services::delegate!(@items $acc $svc $($rest)*);
    };
}
pub(super) use delegate;
