//! Each record's API type serialises byte for byte as the stored record
//! did when the API answered with it (names, order, absent or null), for
//! records with every optional field set and with none set; and the
//! client reads the API's JSON back into the same value.

use super::ToWire;
use crate::engine;
use crate::exhaustive::variants;
use crate::model::as_given::AsGiven;
use crate::model::event::Event as TypedEvent;
use crate::model::report::RunReport;
use crate::model::routine::{FailReason, RunReason, RunState};
use crate::store::{
    EventRow, PolicyRow, PolicyStatus, RoutineRow, RoutineStepRow, RowDamage, SessionRow,
    SessionState, StandingRow, StepStatus,
};
use crate::wire;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

/// The record's JSON and its API type's JSON are the same text, and that
/// text decodes back into the API type it came from.
fn same<R, W>(record: R)
where
    R: ToWire<Wire = W> + Serialize + Clone + std::fmt::Debug,
    W: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let before = serde_json::to_string(&record).expect("the record encodes");
    let wire = record.clone().to_wire();
    let after = serde_json::to_string(&wire).expect("the API type encodes");
    assert_eq!(after, before, "{record:?}");
    let back: W = serde_json::from_str(&after).expect("the client decodes it");
    assert_eq!(back, wire);
}

fn damage() -> RowDamage {
    RowDamage {
        column: "spec".into(),
        message: "not valid JSON".into(),
    }
}

fn session(all: bool) -> SessionRow {
    let some = |v: &str| all.then(|| v.to_string());
    SessionRow {
        // A PostgreSQL host's row names its host; SQLite's none.
        host: some("alpha"),
        id: "claude:s1".into(),
        label: some("build"),
        cwd: "/w".into(),
        workspace: "/w".into(),
        state: SessionState::AwaitingInput,
        turns: 3,
        last_turn_cursor: all.then_some(41),
        last_message: some("done"),
        heartbeat_at: all.then_some(7),
        notify_url: some("http://127.0.0.1:1/n"),
        command: all.then(|| vec!["agent".to_string(), "--x".to_string()]),
        pid: all.then_some(99),
        created_at: 1,
        updated_at: 2,
        owner: crate::config::Trust::Operator,
        key_digest: some("ab12"),
        stale_at: all.then_some(5),
        damage: all.then(damage),
        workspace_pin: all.then_some(crate::anchor::DirIdentity { dev: 1, ino: 2 }),
    }
}

/// A daemon of one host (SQLite) answers no `host` at all; a PostgreSQL
/// host's records say which host owns them.
#[test]
fn the_host_is_answered_only_when_known() {
    let none = serde_json::to_value(session(false).to_wire()).expect("encodes");
    assert!(none.get("host").is_none(), "{none}");
    let named = serde_json::to_value(session(true).to_wire()).expect("encodes");
    assert_eq!(named["host"], "alpha");
    let none = serde_json::to_value(policy(false).to_wire()).expect("encodes");
    assert!(none.get("host").is_none(), "{none}");
    assert_eq!(
        serde_json::to_value(policy(true).to_wire()).expect("encodes")["host"],
        "alpha"
    );
    let e = serde_json::to_value(event(false).to_wire()).expect("encodes");
    assert_eq!(e["host"], "beta", "{e}");
    let e = serde_json::to_value(event(true).to_wire()).expect("encodes");
    assert!(e.get("host").is_none(), "{e}");
}

#[test]
fn a_session_is_answered_as_its_record_was() {
    for all in [false, true] {
        same::<_, wire::Session>(session(all));
        let text = serde_json::to_string(&ToWire::to_wire(session(all))).expect("encodes");
        assert!(!text.contains("keyDigest") && !text.contains("workspacePin"));
    }
}

#[test]
fn a_registration_is_answered_as_the_engine_answered_it() {
    for all in [false, true] {
        same::<_, wire::Registered>(engine::Registered {
            session: session(all),
            session_key: all.then(|| format!("gsk_{}", "0".repeat(64))),
        });
    }
}

fn policy(all: bool) -> PolicyRow {
    let mut row = PolicyRow::sample("pol_1", PolicyStatus::AwaitingAck, &["s1", "s2"]);
    row.seq = 4;
    row.pending = vec!["s2".into()];
    row.watch_after = 10;
    row.retries_used = 1;
    row.gate_runs = 2;
    row.created_at = 100;
    row.updated_at = 200;
    row.gate_crashes = 1;
    row.infra_retries_used = 1;
    row.host = all.then(|| "alpha".to_string());
    if all {
        row.verdict = Some(RunReport::error("the gate could not run".into()));
        row.plan = Some(
            serde_json::from_value(json!({
                "version": 1, "paths": ["src"], "message": "m", "fingerprint": "f",
                "requireHumanAck": true,
                "diffSummary": {"files": [{"path": "src/a.rs", "kind": "modified",
                    "added": 1, "removed": 0, "binary": false}], "added": 1, "removed": 0},
                "changedAfterSnapshot": ["README.md"],
            }))
            .expect("a plan"),
        );
        row.prepared = Some(
            serde_json::from_value(json!({
                "commit": "c0ffee", "parent": "beef", "reference": "refs/heads/main",
                "nothing_to_commit": false, "paths": ["src"],
            }))
            .expect("a prepared commit"),
        );
        row.commit_sha = Some("c0ffee".into());
        row.reason = Some("the gates passed".into());
        row.parent_id = Some("pol_0".into());
        row.next_id = Some("pol_2".into());
        row.publish_open = vec![5, 6];
        row.deadline_at = Some(9);
        row.review = Some(
            serde_json::from_value(json!({
                "phase": "reviewing", "cycle": 2, "maxCycles": 5, "shipTo": "await-ack",
                "diff": "d", "startedAfter": 3, "findings": "f", "nonce": "rv-0123456789ab",
            }))
            .expect("a chain record"),
        );
        row.nudge = Some("fix it".into());
        row.damage = Some(damage());
    }
    row
}

/// What the API answered for a policy before it had types of its own:
/// the row, then its id again as `policyId`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PolicyBefore {
    #[serde(flatten)]
    row: PolicyRow,
    policy_id: String,
}

#[test]
fn a_policy_is_answered_as_its_row_and_its_id_were() {
    for all in [false, true] {
        let row = policy(all);
        let before = serde_json::to_string(&PolicyBefore {
            policy_id: row.id.clone(),
            row: row.clone(),
        })
        .expect("encodes");
        let wire = ToWire::to_wire(row);
        let after = serde_json::to_string(&wire).expect("encodes");
        assert_eq!(after, before);
        assert!(!after.contains("fix it"), "the nudge is not sent: {after}");
        let back: wire::Policy = serde_json::from_str(&after).expect("decodes");
        assert_eq!(back, wire);
    }
}

#[test]
fn the_lists_of_states_name_every_variant() {
    use wire::{PolicyStatus as P, ReportKind as K, SessionState as S, StepStatus as T};
    variants!(P; P::Watching, P::Queued, P::Gating, P::Nudging, P::AwaitingAck,
        P::Committing, P::Reviewing, P::Done, P::Blocked, P::Cancelled)
    .assert_listed(&P::ALL);
    variants!(S; S::Running, S::Idle, S::AwaitingInput, S::Exited).assert_listed(&S::ALL);
    variants!(T; T::Pending, T::Running, T::Escalated, T::Done, T::Failed, T::Cancelled)
        .assert_listed(&T::ALL);
    variants!(K; K::TurnStart, K::TurnEnd, K::AwaitingInput, K::Exited, K::Heartbeat)
        .assert_listed(&K::ALL);
    // Each name is the serde name.
    for k in K::ALL {
        assert_eq!(json!(k), json!(k.as_str()));
    }
    for t in T::ALL {
        assert_eq!(json!(t), json!(t.as_str()));
    }
    for s in S::ALL {
        assert_eq!(json!(s), json!(s.as_str()));
    }
    for p in P::ALL {
        assert_eq!(json!(p), json!(p.as_str()));
    }
}

#[test]
fn every_status_and_state_has_the_stored_name() {
    for s in PolicyStatus::ALL {
        let w = ToWire::to_wire(s);
        assert_eq!(w.as_str(), s.as_str());
        assert_eq!(json!(w), json!(s));
        assert_eq!(wire::PolicyStatus::parse(s.as_str()), Some(w));
        assert_eq!(w.is_settled(), s.is_settled());
    }
    for w in wire::SessionState::ALL {
        let s = SessionState::parse(w.as_str()).expect("a stored state");
        assert_eq!(ToWire::to_wire(s), w);
        assert_eq!(json!(w), json!(s));
    }
    for s in [
        StepStatus::Pending,
        StepStatus::Running,
        StepStatus::Escalated,
        StepStatus::Done,
        StepStatus::Failed,
        StepStatus::Cancelled,
    ] {
        let w = ToWire::to_wire(s);
        assert_eq!((w.as_str(), json!(w)), (s.as_str(), json!(s)));
    }
    assert_eq!(
        wire::StepStatus::ALL.map(|s| s.as_str()),
        [
            "pending",
            "running",
            "escalated",
            "done",
            "failed",
            "cancelled"
        ]
    );
}

fn event(damaged: bool) -> EventRow {
    let payload = json!({"policyId": "p1", "status": "blocked", "sessionIds": ["s1"],
                         "outcome": "fail", "reason": "exited with code 1"});
    EventRow {
        host: (!damaged).then(|| "beta".to_string()),
        cursor: 7,
        at: 70,
        session_id: (!damaged).then(|| "s1".to_string()),
        policy_id: (!damaged).then(|| "p1".to_string()),
        event: if damaged {
            TypedEvent::Unknown {
                kind: "policy:blocked".into(),
                payload: serde_json::Value::Null,
            }
        } else {
            TypedEvent::decode("policy:blocked", payload)
        },
        damage: damaged.then(damage),
    }
}

#[test]
fn an_event_is_answered_as_its_row_was() {
    for damaged in [false, true] {
        same::<_, wire::Event>(event(damaged));
    }
    // A kind this build does not know is kept as sent.
    same::<_, wire::Event>(EventRow {
        event: TypedEvent::Unknown {
            kind: "future:kind".into(),
            payload: json!({"b": 1, "a": [true]}),
        },
        ..event(false)
    });
}

fn routine(all: bool) -> RoutineRow {
    let step = |i: usize, all: bool| RoutineStepRow {
        index: i,
        label: format!("step{i}"),
        status: if all {
            StepStatus::Escalated
        } else {
            StepStatus::Pending
        },
        session_id: all.then(|| "s1".to_string()),
        restarts: 1,
        response: all.then(|| "yes".to_string()),
        started_at: all.then_some(3),
        ended_at: all.then_some(4),
    };
    RoutineRow {
        id: "rtn_1".into(),
        label: all.then(|| "nightly".to_string()),
        spec: all.then(|| {
            serde_json::from_value(json!({"label": "nightly", "steps": [
                {"label": "a", "prompt": "p", "session": {"existing": "s1"}}]}))
            .expect("a spec")
        }),
        state: all.then_some(RunState::Escalated {
            step: 0,
            restarts: 1,
            deadline_ms: 9,
        }),
        phase: "escalated".into(),
        step_session: all.then(|| "s1".to_string()),
        deadline_at: all.then_some(9),
        pending_request: all.then(|| "perm-1".to_string()),
        reason: all.then_some(RunReason::Failed(FailReason::EscalationTimedOut)),
        created_at: 1,
        updated_at: 2,
        steps: vec![step(0, all), step(1, false)],
        damage: all.then(|| "its stored state does not decode: x".to_string()),
    }
}

#[test]
fn a_routine_is_answered_as_its_row_was() {
    for all in [false, true] {
        same::<_, wire::Routine>(routine(all));
    }
    same::<_, wire::Routine>(RoutineRow {
        reason: Some(RunReason::Said("the operator".into())),
        ..routine(true)
    });
}

#[test]
fn a_standing_policy_is_answered_as_its_row_was() {
    for all in [false, true] {
        same::<_, wire::StandingPolicy>(StandingRow {
            id: "std_1".into(),
            agents: if all { vec!["claude".into()] } else { vec![] },
            under: if all { vec!["/w".into()] } else { vec![] },
            label: all.then(|| "build".to_string()),
            policy: all.then(|| {
                AsGiven::parse(json!({"gate": {"command": "true"}, "then": "emit"}))
                    .expect("a policy")
            }),
            created_at: 5,
            damage: all.then(|| "its stored agents does not decode: x".to_string()),
        });
    }
}

/// A request body (one type for the API and the engine: `model::inputs`)
/// reads, writes back what it read, and refuses an unknown field.
fn same_request<T>(body: serde_json::Value)
where
    T: DeserializeOwned + Serialize,
{
    let t: T = serde_json::from_value(body.clone()).expect("the body reads");
    let written = serde_json::to_value(&t).expect("encodes");
    let again: T = serde_json::from_value(written.clone()).expect("reads back");
    assert_eq!(serde_json::to_value(&again).expect("encodes"), written);
    for (k, v) in body.as_object().expect("an object") {
        assert_eq!(written.get(k), Some(v), "{k} kept as sent");
    }
    // Unknown fields are refused.
    let mut extra = body;
    extra["unknownField"] = json!(1);
    assert!(serde_json::from_value::<T>(extra).is_err());
}

#[test]
fn request_bodies_read_write_back_and_refuse_unknown_fields() {
    same_request::<wire::RegisterRequest>(json!({"cwd": "/w"}));
    same_request::<wire::RegisterRequest>(json!({
        "id": "claude:s1", "label": "l", "cwd": "/w", "workspace": "/w",
        "notifyUrl": "http://127.0.0.1:1/n", "sessionKey": format!("gsk_{}", "0".repeat(64)),
    }));
    same_request::<wire::StartRequest>(json!({"cwd": "/w", "command": ["agent"]}));
    same_request::<wire::StartRequest>(json!({
        "id": "x:1", "label": "l", "cwd": "/w", "workspace": "/w", "notifyUrl": "http://h/",
        "command": ["agent", "-v"], "turnEndPattern": "^done$", "quietMs": 500, "acp": true,
        "prompt": "go", "permission": {"allow": ["read"], "otherwise": "deny"},
    }));
    same_request::<wire::LineComment>(
        json!({"path": "a.rs", "line": 3, "side": "old", "body": "why"}),
    );
    same_request::<wire::LineComment>(
        json!({"path": "a.rs", "line": 3, "side": "new", "body": "why"}),
    );
    same_request::<wire::StandingRequest>(json!({
        "policy": {"gate": {"command": "true"}},
    }));
    same_request::<wire::StandingRequest>(json!({
        "agents": ["claude"], "under": ["/w"], "label": "build",
        "policy": {"gate": [{"command": "true"}], "then": "emit"},
    }));
    for k in wire::ReportKind::ALL {
        assert_eq!(json!(k), json!(k.as_str()));
        assert_eq!(
            serde_json::from_value::<engine::ReportKind>(json!(k.as_str())).ok(),
            Some(k)
        );
    }
}
