//! Every event kind, an example built from the types, compared with the
//! golden JSON (`golden.json`, the shapes the daemon publishes) and
//! decoded back equal.

use super::examples::examples;
use super::*;
use serde_json::{Value, json};

fn s(v: &str) -> String {
    v.to_string()
}

/// The kind of `e` by an exhaustive match: a new kind does not compile
/// until it is named here (and then the test wants an example of it).
fn named(e: &Event) -> &'static str {
    use PolicyChange as P;
    use ReviewChange as R;
    match e {
        Event::Session(e) => match e {
            SessionEvent::Registered(_) => "session:registered",
            SessionEvent::TurnStart(_) => "session:turn-start",
            SessionEvent::TurnEnd(_) => "session:turn-end",
            SessionEvent::AwaitingInput(_) => "session:awaiting-input",
            SessionEvent::Exited(_) => "session:exited",
            SessionEvent::PolicyRefused(_) => "session:policy-refused",
            SessionEvent::Permission(_) => "session:permission",
            SessionEvent::PermissionEscalated(_) => "session:permission-escalated",
            SessionEvent::ClientRefused(_) => "session:client-refused",
            SessionEvent::Ungated(_) => "session:ungated",
        },
        Event::Watchdog(e) => match e {
            WatchdogEvent::Stale(_) => "session:stale",
            WatchdogEvent::Live(_) => "session:live",
        },
        Event::Policy(e) => match e.change {
            P::Attached(_) => "policy:attached",
            P::Queued(_) => "policy:queued",
            P::Gating(_) => "policy:gating",
            P::Passed(_) => "policy:passed",
            P::Failed(_) => "policy:failed",
            P::Nudge(_) => "policy:nudge",
            P::Watching(_) => "policy:watching",
            P::Blocked(_) => "policy:blocked",
            P::CommitReady(_) => "policy:commit-ready",
            P::Approved(_) => "policy:approved",
            P::Rejected(_) => "policy:rejected",
            P::Stale(_) => "policy:stale",
            P::Committed(_) => "policy:committed",
            P::CommitFailed(_) => "policy:commit-failed",
            P::Cancelled(_) => "policy:cancelled",
            P::Done(_) => "policy:done",
            P::NextRefused(_) => "policy:next-refused",
            P::Paused(_) => "policy:paused",
            P::Expired(_) => "policy:expired",
            P::Retry(_) => "policy:retry",
        },
        Event::Review(e) => match e.change {
            R::Started(_) => "review:started",
            R::Verdict(_) => "review:verdict",
            R::Repair(_) => "review:repair",
            R::Shipped(_) => "review:shipped",
            R::Escalated(_) => "review:escalated",
        },
        Event::Routine(e) => match e.kind {
            RoutineKind::Started => "routine:started",
            RoutineKind::StepStarted => "routine:step-started",
            RoutineKind::AwaitingInput => "routine:awaiting-input",
            RoutineKind::AutoAllowed => "routine:auto-allowed",
            RoutineKind::Escalated => "routine:escalated",
            RoutineKind::Resolved => "routine:resolved",
            RoutineKind::StepDone => "routine:step-done",
            RoutineKind::StepRestarted => "routine:step-restarted",
            RoutineKind::Done => "routine:done",
            RoutineKind::Failed => "routine:failed",
            RoutineKind::Cancelled => "routine:cancelled",
        },
        Event::Standing(e) => match e {
            StandingEvent::Added(_) => "standing:added",
            StandingEvent::Removed(_) => "standing:removed",
        },
        Event::Passkey(e) => match e {
            PasskeyEvent::Registered(_) => "passkey:registered",
            PasskeyEvent::Removed(_) => "passkey:removed",
            PasskeyEvent::Renamed(_) => "passkey:renamed",
            PasskeyEvent::Reset(_) => "passkey:reset",
        },
        Event::Config(e) => match e {
            ConfigEvent::Reloaded(_) => "config:reloaded",
            ConfigEvent::Rejected(_) => "config:rejected",
            ConfigEvent::Held(_) => "config:held",
        },
        Event::Host(e) => match e {
            HostEvent::Stale(_) => "host:stale",
            HostEvent::TakenOver(_) => "host:taken-over",
        },
        Event::Tokens(e) => match e {
            TokenEvent::Rotated(_) => "tokens:rotated",
        },
        Event::Hook(e) => match e {
            HookEvent::Capped(_) => "hook:capped",
            HookEvent::GateError(_) => "hook:gate-error",
        },
        Event::Unknown { .. } => "",
    }
}

fn encoded(events: &[Event]) -> Value {
    Value::Array(
        events
            .iter()
            .map(|e| json!({"type": e.kind(), "payload": e.payload().expect("encodes")}))
            .collect(),
    )
}

const GOLDEN: &str = include_str!("golden.json");

#[test]
fn every_kind_has_an_example_named_by_the_exhaustive_match() {
    let mut seen: Vec<&str> = examples()
        .iter()
        .map(|e| {
            assert_eq!(named(e), e.kind(), "{e:?}");
            named(e)
        })
        .collect();
    seen.dedup();
    let mut all: Vec<&str> = Event::KINDS
        .iter()
        .flat_map(|f| f.iter().copied())
        .collect();
    let count = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), count, "a kind is named twice");
    let mut sorted = seen.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted, all, "every kind has an example");
    for (k, kind) in RoutineKind::ALL.iter().zip(RoutineKind::KINDS) {
        assert_eq!(k.as_str(), *kind);
    }
}

#[test]
fn every_example_encodes_to_the_golden_json_and_decodes_back_equal() {
    let golden: Value = serde_json::from_str(GOLDEN).expect("golden.json is JSON");
    let examples = examples();
    let now = encoded(&examples);
    if std::env::var_os("GATEHOST_WRITE_GOLDEN").is_some() {
        let text = serde_json::to_string_pretty(&now).expect("pretty") + "\n";
        std::fs::write(
            concat!(env!("CARGO_MANIFEST_DIR"), "/src/model/event/golden.json"),
            text,
        )
        .expect("write golden.json");
    }
    let (Value::Array(want), Value::Array(got)) = (&golden, &now) else {
        panic!("golden.json is a list");
    };
    assert_eq!(want.len(), got.len(), "as many golden entries as examples");
    for ((want, got), example) in want.iter().zip(got).zip(&examples) {
        assert_eq!(got, want, "{} encodes as documented", example.kind());
        let back = Event::decode(
            want["type"].as_str().expect("type"),
            want["payload"].clone(),
        );
        assert_eq!(&back, example, "{} decodes back", example.kind());
        let text = want["payload"].to_string();
        assert_eq!(
            Event::decode_text(example.kind(), &text).expect("json"),
            *example
        );
    }
}

#[test]
fn a_kind_from_a_newer_build_reads_as_unknown_and_publishes_as_stored() {
    let payload = json!({"sessionId": "s", "novel": [1, 2]});
    let e = Event::decode("session:teleported", payload.clone());
    assert_eq!(
        e,
        Event::Unknown {
            kind: s("session:teleported"),
            payload: payload.clone()
        }
    );
    assert_eq!(e.kind(), "session:teleported");
    assert_eq!(e.payload().expect("encodes"), payload);
}

#[test]
fn a_payload_that_does_not_decode_or_has_unknown_fields_is_kept_as_stored() {
    // A missing field: never a default.
    let missing = json!({"sessionId": "s", "state": "idle"});
    assert!(matches!(
        Event::decode("session:turn-end", missing.clone()),
        Event::Unknown { ref payload, .. } if *payload == missing
    ));
    // A field a newer build added: published as it was stored.
    let more = json!({"sessionId": "s", "state": "idle", "turn": 1, "message": null, "mood": "ok"});
    let e = Event::decode("session:turn-end", more.clone());
    assert!(matches!(e, Event::Unknown { .. }), "{e:?}");
    assert_eq!(e.payload().expect("encodes"), more);
    // A policy event without its head.
    assert!(matches!(
        Event::decode("policy:done", json!({})),
        Event::Unknown { .. }
    ));
    // Not JSON at all: the store's damaged row.
    assert!(matches!(
        Event::decode_text("policy:done", "{not json"),
        Err(EventError::NotJson { .. })
    ));
}

#[test]
fn the_policy_head_comes_with_every_policy_and_review_event() {
    for e in examples() {
        let payload = e.payload().expect("encodes");
        let is_policy = e.kind().starts_with("policy:") || e.kind().starts_with("review:");
        assert_eq!(e.policy().is_some(), is_policy, "{}", e.kind());
        if is_policy {
            assert_eq!(payload["policyId"], "pol-1");
            assert_eq!(payload["sessionIds"], json!(["claude-1"]));
        }
    }
}

/// The bus spells every family's names (below the configuration that
/// filters by them): they are exactly the enum's, in order, and the
/// standalone hook's notices (sent, never stored) are none of them.
#[test]
fn the_bus_names_exactly_the_kinds_of_every_stored_family() {
    use crate::bus;
    let pairs: [(&[&str], &[&str]); 10] = [
        (SessionEvent::KINDS, bus::SESSION_EVENTS),
        (WatchdogEvent::KINDS, bus::WATCHDOG_EVENTS),
        (PolicyChange::KINDS, bus::POLICY_EVENTS),
        (ReviewChange::KINDS, bus::REVIEW_EVENTS),
        (RoutineKind::KINDS, bus::ROUTINE_EVENTS),
        (StandingEvent::KINDS, bus::STANDING_EVENTS),
        (PasskeyEvent::KINDS, bus::PASSKEY_EVENTS),
        (ConfigEvent::KINDS, bus::CONFIG_EVENTS),
        (HostEvent::KINDS, bus::HOST_EVENTS),
        (TokenEvent::KINDS, bus::TOKEN_EVENTS),
    ];
    for (kinds, listed) in pairs {
        assert_eq!(kinds, listed, "the bus and the enum disagree");
    }
    let families = Event::KINDS.len();
    assert_eq!(families, pairs.len() + 1, "a family the bus does not list");
    for kind in HookEvent::KINDS {
        assert!(bus::full_type(kind).is_err(), "{kind} is never stored");
    }
}
