//! The events the daemon stores and publishes, as types: one [`Event`]
//! enum with a variant per family (sessions, the watchdog's, policies,
//! review chains, routines, standing policies, passkeys, the
//! configuration, a fleet's hosts), each family an enum of its kinds with a payload struct
//! per kind.
//!
//! It owns the one codec between an event and its stored and published
//! form, a kind (`policy:nudge`) and a payload (a JSON object):
//! [`Event::payload`] encodes, [`Event::decode`] decodes. A kind this build
//! does not know (a row a newer build wrote), or a payload that does not
//! decode into its kind's struct exactly, reads as [`Event::Unknown`] with
//! the payload as it was (logged, never replaced by a default), so what is
//! published is always what was stored. The bus's name lists come from
//! here ([`Event::KINDS`] and each family's `KINDS`).
//!
//! It must never read a payload by key outside this codec, nor hold
//! anything but data: no store, no clock, no engine.

#[macro_use]
mod codec;
mod daemon;
#[cfg(any(test, feature = "examples"))]
mod examples;
/// One example of every event kind (test builds only: the feature
/// `examples`, which gatehost's dev-dependency turns on).
#[cfg(any(test, feature = "examples"))]
pub use examples::examples;
mod policy;
mod routine;
mod session;
#[cfg(test)]
mod tests;

pub use codec::EventError;
pub use daemon::{
    ConfigEvent, ConfigHeld, ConfigRejected, ConfigReloaded, HostEvent, HostStale, HostTakenOver,
    Passkey, PasskeyEvent, PasskeysReset, Rotation, Standing, StandingEvent, TokenEvent, Trigger,
};
pub use policy::{
    Approved, Attached, BlockOutcome, Blocked, Cancelled, Change, ChangedAfter, CommitReady,
    Committed, DamageRef, Empty, Expired, GateSummary, GateSummaryItem, Gating, Nudge,
    PolicyChange, PolicyEvent, PolicyHead, Queued, Reasoned, Rejected, Retry, ReviewChange,
    ReviewEnded, ReviewEvent, ReviewRepair, ReviewStarted, ReviewVerdict, StaleAck, Watching,
};
pub use routine::{FailReason, InputSource, RoutineEvent, RoutineKind, RoutinePayload};
pub use session::{
    AnsweredBy, ClientRefused, HookEvent, HookNotice, Live, OnStaleName, Permission,
    PermissionEscalated, PolicyRefused, RefusedOrigin, Registered, Report, SessionEvent, Stale,
    Ungated, WatchdogEvent,
};

use serde_json::Value;

/// One stored event: its kind and its payload, typed.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A session's own events (`session:registered`, its reports, ACP
    /// permissions, refusals, an ungated stop).
    Session(SessionEvent),
    /// The watchdog's session events (`session:stale`, `session:live`).
    Watchdog(WatchdogEvent),
    /// A policy's lifecycle (`policy:*`).
    Policy(PolicyEvent),
    /// A policy's review chain (`review:*`).
    Review(ReviewEvent),
    /// A routine's run (`routine:*`).
    Routine(RoutineEvent),
    /// Standing policies added and removed (`standing:*`).
    Standing(StandingEvent),
    /// The operator's passkeys (`passkey:*`).
    Passkey(PasskeyEvent),
    /// The configuration read again, rejected or held (`config:*`).
    Config(ConfigEvent),
    /// A fleet's hosts found dead or taken over (`host:*`).
    Host(HostEvent),
    /// The tokens rotated (`tokens:rotated`).
    Tokens(TokenEvent),
    /// A standalone hook's notices (`hook:*`), sent and never stored.
    Hook(HookEvent),
    /// A kind this build does not know, or a payload that does not decode
    /// into its kind's struct: kept as stored.
    Unknown {
        /// The kind as stored (`policy:something-new`).
        kind: String,
        /// The payload as stored (`null` for a damaged row's).
        payload: Value,
    },
}

impl Event {
    /// Every kind this build knows, family by family.
    pub const KINDS: [&'static [&'static str]; 11] = [
        SessionEvent::KINDS,
        WatchdogEvent::KINDS,
        PolicyChange::KINDS,
        ReviewChange::KINDS,
        RoutineKind::KINDS,
        StandingEvent::KINDS,
        PasskeyEvent::KINDS,
        ConfigEvent::KINDS,
        HostEvent::KINDS,
        TokenEvent::KINDS,
        HookEvent::KINDS,
    ];

    /// Its kind, as stored and published (`policy:nudge`).
    pub fn kind(&self) -> &str {
        match self {
            Event::Session(e) => e.kind(),
            Event::Watchdog(e) => e.kind(),
            Event::Policy(e) => e.change.kind(),
            Event::Review(e) => e.change.kind(),
            Event::Routine(e) => e.kind.as_str(),
            Event::Standing(e) => e.kind(),
            Event::Passkey(e) => e.kind(),
            Event::Config(e) => e.kind(),
            Event::Host(e) => e.kind(),
            Event::Tokens(e) => e.kind(),
            Event::Hook(e) => e.kind(),
            Event::Unknown { kind, .. } => kind,
        }
    }

    /// Whether `kind` is one this build knows.
    pub fn known(kind: &str) -> bool {
        Event::KINDS.iter().any(|family| family.contains(&kind))
    }

    /// The policy's head (id, status, members) of a policy or review event.
    pub fn policy(&self) -> Option<&PolicyHead> {
        match self {
            Event::Policy(e) => Some(&e.head),
            Event::Review(e) => Some(&e.head),
            _ => None,
        }
    }
}
