//! Session policies (`[[daemon.session_policies]]`) through a real daemon:
//! the operator's rule attaches its policy to each session it matches as
//! the session registers (a hook's first call, with the agent token), and
//! again at a turn-start once the earlier one ended; a rule that does not
//! fit a session is said (`session:policy-refused`), never silent; a rule
//! file the agent could write stops `serve` at start.

use crate::common;

use common::daemon::Daemon;
use common::{Scratch, allow_config};
use serde_json::{Value, json};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

/// A daemon whose configuration has one rule: `agents` (TOML list text)
/// get the policy `policy`.
fn daemon_with_rule(agents: &str, policy: &Value) -> (Scratch, Daemon) {
    let s = Scratch::new();
    let file = s.write("claude-policy.json", &policy.to_string());
    let cfg = s.write(
        "config.toml",
        &format!(
            "{}[[daemon.session_policies]]\nagents = {agents}\npolicy = \"{}\"\n",
            allow_config(&["test"]),
            file.display()
        ),
    );
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    (s, d)
}

/// The policies that have session `id` as a member, oldest first.
fn policies_of(d: &Daemon, id: &str) -> Vec<Value> {
    let list = d.agent_ok("GET", "/v1/policies?limit=1000&order=oldest", None);
    list["policies"]
        .as_array()
        .expect("policies")
        .iter()
        .filter(|p| {
            p["sessions"]
                .as_array()
                .is_some_and(|s| s.contains(&json!(id)))
        })
        .cloned()
        .collect()
}

#[test]
fn a_rule_gates_each_session_it_matches_from_its_registration_and_again_after_its_policy_ended() {
    let (s, d) = daemon_with_rule(
        r#"["claude"]"#,
        &json!({
            "label": "DONE must exist",
            "gate": {"command": "test", "args": ["-f", "DONE"]},
            "onFail": {"maxRetries": 1},
        }),
    );
    common::daemon::git_repo(&s.ws);
    // Registered by the agent token, as a hook's first call does: the
    // rule's policy is there at once, watching the session.
    d.register("claude:one", &s.ws);
    let first = policies_of(&d, "claude:one");
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0]["status"], "watching", "{first:?}");
    assert_eq!(first[0]["spec"]["label"], "DONE must exist");
    // Attached as the operator's: the rule is the operator's configuration.
    assert_eq!(first[0]["spec"]["attachedBy"], "operator", "{first:?}");
    let pid = first[0]["policyId"].as_str().expect("id").to_string();
    // Another agent's session, and a session without an agent: no rule.
    d.register("codex:two", &s.ws);
    d.register("plain", &s.ws);
    assert!(policies_of(&d, "codex:two").is_empty());
    assert!(policies_of(&d, "plain").is_empty());
    // Registering again, and a turn-start, while the policy is live attach
    // nothing more.
    d.register("claude:one", &s.ws);
    d.report("claude:one", "turn-start");
    assert_eq!(policies_of(&d, "claude:one").len(), 1);

    // The turn ends without DONE: a nudge; with DONE: passed and done.
    d.report("claude:one", "turn-end");
    d.wait_status(&pid, "watching", T);
    std::fs::write(s.ws.join("DONE"), "").expect("fix");
    d.report("claude:one", "turn-end");
    d.wait_status(&pid, "done", T);
    let events = d.policy_events(&pid);
    assert!(
        events.contains(&"policy:nudge".to_string())
            && events.contains(&"policy:passed".to_string()),
        "{events:?}"
    );
    // The next turn is gated by a fresh policy of the rule.
    d.report("claude:one", "turn-start");
    let after = policies_of(&d, "claude:one");
    assert_eq!(after.len(), 2, "{after:?}");
    assert_eq!(after[1]["status"], "watching", "{after:?}");
    assert_ne!(after[1]["policyId"], json!(pid));
    // Its attach is on the bus after the session's registration.
    let kinds: Vec<String> = d
        .all_events("session=claude:one")
        .iter()
        .filter_map(|e| e["type"].as_str().map(str::to_string))
        .collect();
    let at = |k: &str| kinds.iter().position(|e| e == k);
    assert!(
        at("session:registered") < at("policy:attached") && at("policy:attached").is_some(),
        "{kinds:?}"
    );
}

#[test]
fn a_rule_whose_policy_does_not_fit_the_session_is_said_and_the_session_still_registers() {
    let (s, d) = daemon_with_rule(
        "[]",
        &json!({"gate": {"command": "test", "args": ["-f", "DONE"], "cwd": "no-such-dir"}}),
    );
    common::daemon::git_repo(&s.ws);
    let session = d.register("claude:lost", &s.ws);
    assert_eq!(session["id"], "claude:lost", "{session}");
    assert!(policies_of(&d, "claude:lost").is_empty());
    let refused: Vec<Value> = d
        .all_events("session=claude:lost&types=policy-refused")
        .into_iter()
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    let payload = refused[0]["payload"].to_string();
    assert!(
        payload.contains("claude-policy.json") && payload.contains("cwd"),
        "{payload}"
    );
    assert!(
        d.log().contains("a session policy was refused"),
        "{}",
        d.log()
    );
}

#[test]
fn a_rule_file_inside_a_workspace_root_or_naming_sessions_stops_serve() {
    let s = Scratch::new();
    // Inside the agent's root: the agent could rewrite what gates it.
    let inside = s.ws.join("policy.json");
    std::fs::write(&inside, r#"{"gate": {"command": "true"}}"#).expect("write");
    let named = s.write(
        "named.json",
        r#"{"sessionId": "x", "gate": {"command": "true"}}"#,
    );
    let unparsed = s.write(
        "unparsed.json",
        r#"{"then": "explode", "gate": {"command": "true"}}"#,
    );
    for (file, said) in [
        (inside.as_path(), "[daemon] workspace_roots:"),
        (named.as_path(), "names sessionId"),
        (unparsed.as_path(), "[[daemon.session_policies]] 0"),
    ] {
        let cfg = s.write(
            "rule.toml",
            &format!(
                "{}[[daemon.session_policies]]\npolicy = \"{}\"\n",
                allow_config(&["true"]),
                file.display()
            ),
        );
        let run = common::run_gatehost(
            &[
                "serve".into(),
                "--listen".into(),
                "127.0.0.1:0".into(),
                "--data-dir".into(),
                s.etc.join("data").display().to_string(),
                "--config".into(),
                cfg.display().to_string(),
            ],
            &[],
        );
        assert_ne!(run.code, 0, "{}: {}", file.display(), run.stdout);
        assert!(
            run.stderr.contains(said) && run.stderr.contains(&*file.display().to_string()),
            "{}: {}",
            file.display(),
            run.stderr
        );
    }
}
