//! Issue 24, item 11: a stored row that does not decode (invalid JSON, or
//! JSON of the wrong shape) in any column the daemon reads. The daemon
//! still starts and serves; the policy is blocked with one
//! `policy:blocked` event naming it, the column and the error; the list
//! shows it; cancel works; turn-ends still gate the session's other
//! policies; the damaged column is never written back. A damaged session
//! row affects only that session (and the policies that need it).
//!
//! Each test damages the store of a stopped daemon (or, in one, of a
//! running one) with rusqlite, as a damaged disk or a hand edit would.

use crate::common;
use crate::common::shorthand::{assert_has, etc_dir, str_of};

use common::daemon::{Daemon, git_scratch, scratch_config};
use common::{Scratch, allow_config};
use serde_json::json;
use std::time::Duration;

const T: Duration = Duration::from_secs(60);

/// A daemon with a commit policy (`victim`) awaiting its ack and a
/// watching policy (`witness`) on the same session `s1`.
struct Setup {
    s: Scratch,
    d: Daemon,
    victim: String,
    witness: String,
}

fn setup() -> Setup {
    let s = git_scratch();
    let cfg = s.write("config.toml", &allow_config(&["true"]));
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    d.register("s1", &s.ws);
    let victim = d.commit_awaiting_ack(&s.ws, "m", T);
    let witness =
        d.attach(json!({"sessionId": "s1", "gate": {"command": "true"}, "watchFrom": "now"}));
    Setup {
        s,
        d,
        victim,
        witness,
    }
}

fn db(d: &Daemon) -> rusqlite::Connection {
    rusqlite::Connection::open(d.data.join("gatehost.db")).expect("open the store")
}

/// The stored text of `column` of policy `id` (a stopped daemon's store).
fn stored(d: &Daemon, id: &str, column: &str) -> Option<String> {
    db(d)
        .query_row(
            &format!("SELECT CAST({column} AS TEXT) FROM policies WHERE id = ?1"),
            [id],
            |r| r.get(0),
        )
        .expect("read the column")
}

/// `victim` in `status` with `column` set to `value` (raw text) while the
/// daemon is stopped; then the daemon starts (it must), the policy is
/// blocked with one event naming it and the column, the list shows it,
/// the session's other policy still gates, cancel works, and the damaged
/// column is as it was found.
fn damaged_policy(status: &str, column: &str, value: &str) {
    let Setup {
        s,
        mut d,
        victim,
        witness,
    } = setup();
    d.stop();
    let conn = db(&d);
    conn.execute(
        "UPDATE policies SET status = ?2 WHERE id = ?1",
        [&victim, status],
    )
    .expect("set the status");
    conn.execute(
        &format!("UPDATE policies SET {column} = ?2 WHERE id = ?1"),
        [&victim, value],
    )
    .expect("damage the row");
    drop(conn);
    d = Daemon::start(&s.etc.join("data"), &d.config.clone());
    // The list answers, showing the damaged policy blocked, with why.
    let (code, page) = d.get("/v1/policies", &d.operator);
    assert_eq!(code, 200, "{page}");
    let listed = page["policies"]
        .as_array()
        .and_then(|l| l.iter().find(|p| p["policyId"] == victim.as_str()))
        .cloned()
        .unwrap_or_else(|| panic!("{victim} is not listed: {page}"));
    assert_eq!(listed["status"], "blocked", "{listed}");
    // Damage that only the status made (an unknown status, no plan while
    // awaiting the ack) is gone once it is blocked: the reason keeps it.
    if column != "status" && value != "null" {
        assert_eq!(listed["damage"]["column"], column, "{listed}");
    }
    let reason = listed["reason"].as_str().unwrap_or("");
    assert_has(reason, victim.as_str());
    assert_has(reason, column);
    // One event says so, naming the policy, the column and the error.
    let blocked = d.all_events(&format!("&policy={victim}&types=blocked"));
    assert_eq!(blocked.len(), 1, "{blocked:?}");
    let damage = &blocked[0]["payload"]["damage"];
    assert_eq!(damage["policyId"], victim.as_str(), "{damage}");
    assert_eq!(damage["column"], column, "{damage}");
    assert!(damage["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert_eq!(blocked[0]["payload"]["outcome"], "error");
    // The session's other policy gates as ever.
    d.report("s1", "turn-end");
    d.wait_status(&witness, "done", T);
    // Its single policy reads (shown as found), and cancel works.
    let (code, one) = d.get(&format!("/v1/policies/{victim}"), &d.operator);
    assert_eq!((code, &one["status"]), (200, &json!("blocked")), "{one}");
    let (code, cancelled) = d.post(&format!("/v1/policies/{victim}/cancel"), &d.operator, None);
    assert_eq!(code, 200, "{cancelled}");
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert_has(&d.log(), "does not decode");
    // Nothing was written over the damaged column (a JSON `null` plan is
    // no plan: once the policy is blocked its row is whole again, and the
    // cancel stores it as SQL NULL, which reads the same).
    d.stop();
    if column != "status" && value != "null" {
        assert_eq!(stored(&d, &victim, column).as_deref(), Some(value));
    }
}

// Hostile first: valid JSON that would have been read as a default.

/// One test a case, each a policy stored with a damaged column (as
/// [`damaged_policy`]): `name: status, column, the value stored there;`.
macro_rules! damaged_policies {
    ($($name:ident: $status:literal, $column:literal, $value:literal;)*) => {
        $(
            #[test]
            fn $name() {
                damaged_policy($status, $column, $value);
            }
        )*
    };
}

damaged_policies! {
    a_list_for_the_spec_of_a_gating_policy_blocks_it_never_skips_its_gate: "gating", "spec", r#"[]"#;
    a_list_for_the_next_of_a_spec_is_the_wrong_shape: "watching", "spec", r#"{"sessionId": "s1", "sessionIds": ["s1"], "gate": {"command": "true"}, "next": []}"#;
    an_empty_gate_list_in_a_stored_spec_is_the_wrong_shape: "gating", "spec", r#"{"sessionId": "s1", "sessionIds": ["s1"], "gate": []}"#;
    a_spec_of_the_wrong_shape_on_a_watching_policy_is_blocked: "watching", "spec", r#"{"sessionId": "s1", "then": "deploy"}"#;
    a_wrong_shaped_plan_on_a_policy_awaiting_its_ack_is_blocked_not_stuck: "awaiting-ack", "plan", r#"[]"#;
    a_missing_plan_on_a_policy_awaiting_its_ack_is_blocked: "awaiting-ack", "plan", r#"null"#;
    a_verdict_of_the_wrong_shape_is_blocked: "gating", "verdict", r#"{"outcome": "pass"}"#;
    a_prepared_commit_of_the_wrong_shape_is_blocked: "committing", "prepared", r#"[]"#;
    an_empty_member_list_is_the_wrong_shape: "watching", "sessions", r#"[]"#;
    a_pending_set_of_the_wrong_shape_is_blocked: "watching", "pending", r#"{"s1": true}"#;
    open_publishes_of_the_wrong_shape_are_blocked: "committing", "publish_open", r#"["yesterday"]"#;
    an_unknown_status_is_blocked: "judging", "status", r#"judging"#;
    text_in_a_number_column_is_blocked: "watching", "watch_after", r#"soon"#;
    text_for_a_deadline_is_blocked_never_read_as_no_deadline: "watching", "deadline_at", r#"soon"#;
    text_for_the_infrastructure_retries_is_blocked: "gating", "infra_retries_used", r#"many"#;
    // Invalid JSON in every JSON column.
    the_daemon_starts_with_invalid_json_in_a_gating_policys_verdict: "gating", "verdict", r#"{"outcome": "#;
    the_daemon_starts_with_invalid_json_in_a_committing_policys_prepared_commit: "committing", "prepared", r#"{"commit": "#;
    invalid_json_in_a_spec_is_blocked: "watching", "spec", r#"{not json"#;
    invalid_json_in_a_plan_is_blocked: "awaiting-ack", "plan", r#"{not json"#;
    invalid_json_in_the_members_is_blocked: "watching", "sessions", r#"["s1""#;
    invalid_json_in_the_pending_set_is_blocked: "watching", "pending", r#"["s1""#;
    invalid_json_in_open_publishes_is_blocked: "committing", "publish_open", r#"[1,"#;
}

/// A row damaged while the daemon runs: the turn-end (or the sweep,
/// whichever reads it first) blocks it once; the turn-end still gates the
/// session's other policy.
#[test]
fn a_row_damaged_while_the_daemon_runs_is_blocked_and_the_turn_end_gates_the_rest() {
    let (s, cfg) = scratch_config(&["true"]);
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    d.register("s1", &s.ws);
    let victim =
        d.attach(json!({"sessionId": "s1", "gate": {"command": "true"}, "watchFrom": "now"}));
    let witness =
        d.attach(json!({"sessionId": "s1", "gate": {"command": "true"}, "watchFrom": "now"}));
    db(&d)
        .execute("UPDATE policies SET spec = '[]' WHERE id = ?1", [&victim])
        .expect("damage the row");
    let (code, v) = d.post(
        "/v1/sessions/s1/report",
        &d.agent,
        Some(json!({"kind": "turn-end"})),
    );
    assert_eq!(code, 200, "{v}");
    d.wait_status(&witness, "done", T);
    let p = d.wait_status(&victim, "blocked", T);
    assert_eq!(p["damage"]["column"], "spec", "{p}");
    let blocked = d.all_events(&format!("&policy={victim}&types=blocked"));
    assert_eq!(blocked.len(), 1, "{blocked:?}");
    assert_eq!(blocked[0]["payload"]["damage"]["column"], "spec");
    let events = d.policy_events(&victim);
    assert!(!events.iter().any(|e| e == "policy:passed"), "{events:?}");
}

/// Session `s1` damaged in `column` (raw `value`) while the daemon is
/// stopped: the daemon starts, the session list shows it, reports on it
/// are refused, the policy that watches it is blocked naming the session,
/// and session `s2` and its policy are not affected.
fn damaged_session(column: &str, value: &str) {
    let (s, cfg) = scratch_config(&["true"]);
    let data = s.etc.join("data");
    let mut d = Daemon::start(&data, &cfg);
    d.register("s1", &s.ws);
    d.register("s2", &s.ws);
    let victim =
        d.attach(json!({"sessionId": "s1", "gate": {"command": "true"}, "watchFrom": "now"}));
    let witness =
        d.attach(json!({"sessionId": "s2", "gate": {"command": "true"}, "watchFrom": "now"}));
    d.stop();
    db(&d)
        .execute(
            &format!("UPDATE sessions SET {column} = ?2 WHERE id = ?1"),
            rusqlite::params!["s1", value],
        )
        .expect("damage the row");
    d = Daemon::start(&data, &cfg);
    let (code, page) = d.get("/v1/sessions", &d.operator);
    assert_eq!(code, 200, "{page}");
    let s1 = page["sessions"]
        .as_array()
        .and_then(|l| l.iter().find(|s| s["id"] == "s1"))
        .cloned()
        .unwrap_or_else(|| panic!("s1 is not listed: {page}"));
    assert_eq!(s1["damage"]["column"], column, "{s1}");
    // Nothing it reports can be recorded: refused, naming why.
    let (code, v) = d.post(
        "/v1/sessions/s1/report",
        &d.agent,
        Some(json!({"kind": "turn-end"})),
    );
    assert!(code >= 400, "HTTP {code}: {v}");
    let message = str_of(&v["error"]["message"]);
    assert_has(message, "s1");
    assert_has(message, column);
    // Its policy can never gate: blocked, and said.
    let p = d.wait_status(&victim, "blocked", T);
    assert_has(str_of(&p["reason"]), column);
    let blocked = d.all_events(&format!("&policy={victim}&types=blocked"));
    assert_eq!(blocked.len(), 1, "{blocked:?}");
    assert_eq!(blocked[0]["payload"]["damage"]["sessionId"], "s1");
    assert_eq!(blocked[0]["payload"]["damage"]["column"], column);
    // The other session is not affected.
    d.report("s2", "turn-end");
    d.wait_status(&witness, "done", T);
    assert_has(&d.log(), "does not decode");
}

#[test]
fn a_session_command_of_the_wrong_shape_affects_only_that_session() {
    damaged_session("command", r#""sh -c boom""#);
}

#[test]
fn invalid_json_in_a_session_command_affects_only_that_session() {
    damaged_session("command", "[\"sh\"");
}

#[test]
fn an_unknown_session_state_affects_only_that_session() {
    damaged_session("state", "asleep");
}

#[test]
fn text_for_when_a_session_went_stale_affects_only_that_session() {
    damaged_session("stale_at", "yesterday");
}

#[test]
fn an_unknown_session_owner_affects_only_that_session() {
    damaged_session("owner", "root");
}

#[test]
fn a_relative_session_workspace_affects_only_that_session() {
    damaged_session("workspace", "ws");
}

/// An event whose payload does not decode is listed with its damage; the
/// rest of the log reads.
fn damaged_event(value: &str) {
    let (s, cfg) = scratch_config(&["true"]);
    let data = s.etc.join("data");
    let mut d = Daemon::start(&data, &cfg);
    d.register("s1", &s.ws);
    d.report("s1", "turn-end");
    d.stop();
    db(&d)
        .execute(
            "UPDATE events SET payload = ?1 WHERE type = 'session:registered'",
            [value],
        )
        .expect("damage the row");
    d = Daemon::start(&data, &cfg);
    let events = d.all_events("");
    let registered = events
        .iter()
        .find(|e| e["type"] == "session:registered")
        .unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(registered["damage"]["column"], "payload", "{registered}");
    assert!(events.iter().any(|e| e["type"] == "session:turn-end"));
    d.report("s1", "turn-end");
}

#[test]
fn invalid_json_in_an_event_payload_is_listed_as_damaged() {
    damaged_event("{\"sessionId\": ");
}

#[test]
fn an_event_payload_of_the_wrong_shape_is_listed_as_damaged() {
    damaged_event("[]");
}

/// Valid JSON is still not a default: an attach body's `next` that is a
/// list is refused, naming it (serde would read it as a policy of
/// defaults, with no gate).
#[test]
fn an_attach_whose_next_is_a_list_is_refused() {
    let (s, cfg) = scratch_config(&["true"]);
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    d.register("s1", &s.ws);
    let (code, v) = d.post(
        "/v1/policies",
        &d.agent,
        Some(json!({"sessionId": "s1", "gate": {"command": "true"}, "next": []})),
    );
    assert_eq!(code, 400, "{v}");
    assert_eq!(v["error"]["field"], "next", "{v}");
}

#[test]
fn a_corrupt_store_is_refused_loudly_never_replaced() {
    let (s, cfg) = scratch_config(&[]);
    let data = etc_dir(&s, "data");
    std::fs::write(data.join("gatehost.db"), vec![0x5a; 16384]).expect("junk");
    let out = common::daemon::serve_run(&data, &cfg);
    assert_eq!(out.code, 2);
    let err = out.stderr;
    assert_has(&err, "gatehost.db");
    assert_has(&err, "damaged");
    assert_eq!(
        std::fs::read(data.join("gatehost.db")).expect("read"),
        vec![0x5a; 16384]
    );
}

/// Issue 12: a policy row whose stored JSON does not decode (a damaged
/// store) is an error naming the policy and the column, and the policy is
/// blocked with that reason, never read as `null` (before, a corrupt plan
/// read as no paths, and a corrupt spec dropped the `next` silently).
#[test]
fn a_corrupt_policy_row_is_blocked_with_a_reason_naming_it() {
    let s = git_scratch();
    let cfg = s.write("config.toml", &allow_config(&["true"]));
    let data = s.etc.join("data");
    let mut d = Daemon::start(&data, &cfg);
    d.register("s1", &s.ws);
    let acked = d.commit_awaiting_ack(&s.ws, "m", T);
    let gated =
        d.attach(json!({"sessionId": "s1", "gate": {"command": "true"}, "watchFrom": "now"}));
    d.stop();
    {
        let db = rusqlite::Connection::open(data.join("gatehost.db")).expect("open");
        db.execute(
            "UPDATE policies SET plan = '{\"paths\": 3}' WHERE id = ?1",
            [&acked],
        )
        .expect("corrupt plan");
        db.execute(
            "UPDATE policies SET spec = '{\"then\": \"deploy\"}' WHERE id = ?1",
            [&gated],
        )
        .expect("corrupt spec");
    }
    d = Daemon::start(&data, &cfg);
    // Recovery found the plan unreadable: blocked, so the ack is refused.
    let (code, v) = d.post(
        &format!("/v1/policies/{acked}/ack"),
        &d.operator,
        Some(json!({"approve": true})),
    );
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (409, Some("not-awaiting-ack")),
        "{v}"
    );
    let p = d.policy(&acked);
    assert_eq!(p["status"], "blocked", "{p}");
    assert_has(str_of(&p["reason"]), "plan");
    assert_has(str_of(&p["reason"]), acked.as_str());
    // So is the spec: blocked, with the reason, a turn-end changes nothing.
    d.report("s1", "turn-end");
    let p = d.wait_status(&gated, "blocked", T);
    let reason = p["reason"].as_str().unwrap_or("");
    assert_has(reason, gated.as_str());
    assert_has(reason, "spec");
    let blocked = d.all_events(&format!("&policy={gated}&types=blocked"));
    assert_eq!(blocked.len(), 1, "{blocked:?}");
    assert!(d.log().contains("does not decode"));
}
