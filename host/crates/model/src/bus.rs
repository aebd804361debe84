//! The event bus: event names, their short forms, and the wake-up signal
//! that long-polls wait on.
//!
//! The names are those of the typed events (`model::event`), one list per
//! family, spelled here, below the configuration that filters by them (a
//! webhook's `events`), and checked equal to the enum's by `model::event`'s
//! tests: a kind added to one and not the other fails them. Events themselves live in the store (appended in the transaction of the
//! state change they describe); this module only says which names exist and
//! tells waiting readers that the log grew. It must never hold events in
//! memory as the source of truth: a reader always reads the store by cursor.

use tokio::sync::watch;

/// Session events.
pub const SESSION_EVENTS: &[&str] = &[
    "session:registered",
    "session:turn-start",
    "session:turn-end",
    "session:awaiting-input",
    "session:exited",
    "session:policy-refused",
    "session:permission",
    "session:permission-escalated",
    "session:client-refused",
    "session:ungated",
];

/// Policy events, one per lifecycle transition and outcome.
pub const POLICY_EVENTS: &[&str] = &[
    "policy:attached",
    "policy:queued",
    "policy:gating",
    "policy:passed",
    "policy:failed",
    "policy:nudge",
    "policy:watching",
    "policy:blocked",
    "policy:commit-ready",
    "policy:approved",
    "policy:rejected",
    "policy:stale",
    "policy:committed",
    "policy:commit-failed",
    "policy:cancelled",
    "policy:done",
    "policy:next-refused",
    "policy:paused",
    "policy:expired",
    "policy:retry",
];

/// A policy's review chain (`review`): named in full only (`started`,
/// `verdict` may be other families' too).
pub const REVIEW_EVENTS: &[&str] = &[
    "review:started",
    "review:verdict",
    "review:repair",
    "review:shipped",
    "review:escalated",
];

/// A routine's run (`engine::routines`): named in full only.
pub const ROUTINE_EVENTS: &[&str] = &[
    "routine:started",
    "routine:step-started",
    "routine:awaiting-input",
    "routine:auto-allowed",
    "routine:escalated",
    "routine:resolved",
    "routine:step-done",
    "routine:step-restarted",
    "routine:done",
    "routine:failed",
    "routine:cancelled",
];

/// Daemon-wide events (no session, no policy): the configuration read
/// again, and a weakening of it held until a restart (the `live_config`
/// module). Named in full only: `rejected` is
/// also a policy's.
pub const CONFIG_EVENTS: &[&str] = &["config:reloaded", "config:rejected", "config:held"];

/// A fleet's hosts found dead or taken over (`engine::leader`): daemon-wide,
/// named in full only.
pub const HOST_EVENTS: &[&str] = &["host:stale", "host:taken-over"];

/// The tokens rotated (`gatehost token rotate`): daemon-wide, named in
/// full only.
pub const TOKEN_EVENTS: &[&str] = &["tokens:rotated"];

/// Standing policies added and removed (`engine::standing`): daemon-wide,
/// named in full only.
pub const STANDING_EVENTS: &[&str] = &["standing:added", "standing:removed"];

/// The operator's passkeys registered and removed (`engine::passkeys`):
/// daemon-wide, named in full only.
pub const PASSKEY_EVENTS: &[&str] = &[
    "passkey:registered",
    "passkey:removed",
    "passkey:renamed",
    "passkey:reset",
];

/// The watchdog's session events. Named in full only: `stale` is also a
/// policy's (`policy:stale`, its judged content changed).
pub const WATCHDOG_EVENTS: &[&str] = &["session:stale", "session:live"];

/// The full name of an event type given in full (`session:turn-end`) or
/// short (`turn-end`; session and policy events only); an unknown name is
/// an error listing the known ones.
pub fn full_type(name: &str) -> Result<&'static str, String> {
    if let Some(full) = CONFIG_EVENTS
        .iter()
        .chain(HOST_EVENTS)
        .chain(TOKEN_EVENTS)
        .chain(STANDING_EVENTS)
        .chain(PASSKEY_EVENTS)
        .chain(WATCHDOG_EVENTS)
        .chain(REVIEW_EVENTS)
        .chain(ROUTINE_EVENTS)
        .find(|f| **f == name)
    {
        return Ok(full);
    }
    let all = SESSION_EVENTS.iter().chain(POLICY_EVENTS);
    for full in all.clone() {
        let short = full.split_once(':').map(|(_, s)| s).unwrap_or(full);
        if name == *full || name == short {
            return Ok(full);
        }
    }
    let known: Vec<&str> = all
        .map(|f| f.split_once(':').map(|(_, s)| s).unwrap_or(f))
        .chain(CONFIG_EVENTS.iter().copied())
        .chain(HOST_EVENTS.iter().copied())
        .chain(TOKEN_EVENTS.iter().copied())
        .chain(STANDING_EVENTS.iter().copied())
        .chain(PASSKEY_EVENTS.iter().copied())
        .chain(WATCHDOG_EVENTS.iter().copied())
        .chain(REVIEW_EVENTS.iter().copied())
        .chain(ROUTINE_EVENTS.iter().copied())
        .collect();
    Err(format!(
        "unknown event type '{name}' (known: {})",
        known.join(", ")
    ))
}

/// Tells waiting readers the newest cursor. Published only after the
/// transaction holding the events has committed.
#[derive(Debug)]
pub struct Bus {
    head: watch::Sender<i64>,
}

impl Bus {
    /// A bus whose head is `head` (the store's newest cursor at start).
    pub fn new(head: i64) -> Self {
        Bus {
            head: watch::Sender::new(head),
        }
    }

    /// Called after a commit that appended events: this daemon's, or
    /// (PostgreSQL) another host's, heard of by the store's listener.
    pub fn published(&self) {
        self.head.send_modify(|h| *h += 1);
    }

    /// A receiver woken at each [`Bus::published`]: a long-poll's wait for
    /// new events.
    pub fn subscribe(&self) -> watch::Receiver<i64> {
        self.head.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_full_names_both_resolve_for_session_and_policy_events() {
        assert_eq!(full_type("turn-end"), Ok("session:turn-end"));
        assert_eq!(full_type("session:turn-end"), Ok("session:turn-end"));
        assert_eq!(full_type("exited"), Ok("session:exited"));
        assert_eq!(full_type("commit-ready"), Ok("policy:commit-ready"));
        assert_eq!(full_type("policy:blocked"), Ok("policy:blocked"));
        assert_eq!(full_type("config:reloaded"), Ok("config:reloaded"));
        assert_eq!(full_type("config:rejected"), Ok("config:rejected"));
        // `rejected` is the policy's; config events are named in full.
        assert_eq!(full_type("rejected"), Ok("policy:rejected"));
        assert_eq!(full_type("paused"), Ok("policy:paused"));
        assert_eq!(full_type("session:stale"), Ok("session:stale"));
        assert_eq!(full_type("stale"), Ok("policy:stale"));
        assert_eq!(full_type("expired"), Ok("policy:expired"));
        assert_eq!(full_type("review:escalated"), Ok("review:escalated"));
        assert!(full_type("escalated").is_err());
        let err = full_type("turnend").expect_err("typo must be refused");
        assert!(err.contains("turn-end"), "{err}");
    }

    #[test]
    fn no_short_name_is_ambiguous() {
        let mut shorts: Vec<&str> = SESSION_EVENTS
            .iter()
            .chain(POLICY_EVENTS)
            .map(|f| f.split_once(':').map(|(_, s)| s).unwrap_or(f))
            .collect();
        let n = shorts.len();
        shorts.sort();
        shorts.dedup();
        assert_eq!(shorts.len(), n);
    }
}
