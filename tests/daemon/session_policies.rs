//! Session policies (`[[daemon.session_policies]]`) through a real daemon:
//! the operator's rule attaches its policy to each session it matches as
//! the session registers (a hook's first call, with the agent token), and
//! again at a turn-start once the earlier one ended; a rule that does not
//! fit a session is said (`session:policy-refused`), never silent; a rule
//! file the agent could write stops `serve` at start.

use crate::common;
use crate::common::shorthand::{assert_has, assert_starts};

use common::daemon::{Daemon, git_scratch};
use common::{Scratch, allow_config};
use serde_json::{Value, json};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

/// A daemon whose configuration has one rule: `agents` (TOML list text)
/// get the policy `policy`.
fn daemon_with_rule(agents: &str, policy: &Value) -> (Scratch, Daemon) {
    let s = Scratch::new();
    let file = s.write("claude-policy.json", &policy.to_string());
    let rule = format!("{}agents = {agents}\n", rule_config(&["test"], &file));
    let cfg = s.write("config.toml", &rule);
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    (s, d)
}

/// A config allowing `allow` with one `[[daemon.session_policies]]` rule
/// whose policy is the file `policy` (for every agent, unless a line
/// `agents = …` is added after it).
fn rule_config(allow: &[&str], policy: &std::path::Path) -> String {
    let policy = policy.display();
    let rule = format!("[[daemon.session_policies]]\npolicy = \"{policy}\"\n");
    format!("{}{rule}", allow_config(allow))
}

/// A rule's policy: the gate passes once `DONE` exists, `retries` nudges.
fn done_rule(retries: u32) -> Value {
    json!({
        "label": "DONE must exist",
        "gate": {"command": "test", "args": ["-f", "DONE"]},
        "onFail": {"maxRetries": retries},
    })
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
    let (s, d) = daemon_with_rule(r#"["claude"]"#, &done_rule(1));
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
    assert_has(&payload, "claude-policy.json");
    assert_has(&payload, "cwd");
    assert_has(&d.log(), "a session policy was refused");
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
        let cfg = s.write("rule.toml", &rule_config(&["true"], file));
        let run = common::daemon::serve_run(&s.etc.join("data"), &cfg);
        assert_ne!(run.code, 0, "{}: {}", file.display(), run.stdout);
        assert!(
            run.stderr.contains(said) && run.stderr.contains(&*file.display().to_string()),
            "{}: {}",
            file.display(),
            run.stderr
        );
    }
}

/// A standing policy, added from the CLI with the operator's token (no
/// configuration edit, no restart): every new session it matches (agent,
/// directory) gets its policy as it registers; it survives a restart; the
/// agent's token can neither add nor remove one; once removed, new
/// sessions get nothing, and each add and remove is on the bus.
#[test]
fn a_standing_policy_from_the_cli_gates_each_new_session_it_matches_until_removed() {
    let s = git_scratch();
    let cfg = s.write("config.toml", &allow_config(&["test"]));
    let mut d = Daemon::start(&s.etc.join("data"), &cfg);
    let template = s.write(
        "rust.json",
        &json!({
            "label": "DONE must exist",
            "gate": {"command": "test", "args": ["-f", "DONE"]},
        })
        .to_string(),
    );
    let ws = s.ws.display().to_string();
    let t = template.display().to_string();
    let target = ["--agent", "claude", "--under", &ws];
    let add = [&["policy", "attach", "--template", &t][..], &target].concat();
    // The agent's token is refused: storing nothing.
    let refused = d.cli(&add, &d.agent);
    assert_ne!(refused.code, 0, "{refused:?}");
    assert!(
        d.cli(&["policy", "standing", "--json"], &d.agent)
            .stdout
            .contains("[]"),
        "nothing was stored"
    );
    let added = d.cli(&add, &d.operator);
    assert_eq!(added.code, 0, "{added:?}");
    let sp = added.stdout.trim().to_string();
    assert_starts(&sp, "sp_");
    // The template's file changed afterwards changes nothing stored.
    std::fs::write(&template, "{}").expect("rewrite");

    d.register("claude:one", &s.ws);
    let first = policies_of(&d, "claude:one");
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0]["spec"]["label"], "DONE must exist", "{first:?}");
    assert_eq!(first[0]["spec"]["attachedBy"], "operator", "{first:?}");
    // Another agent, and a workspace elsewhere, get nothing.
    d.register("codex:two", &s.ws);
    assert!(policies_of(&d, "codex:two").is_empty());
    let elsewhere = s.out.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    common::daemon::git_repo(&elsewhere);
    d.register("claude:far", &elsewhere);
    assert!(policies_of(&d, "claude:far").is_empty());

    // Kept across a restart.
    d.restart();
    let listed = d.cli(&["policy", "standing"], &d.agent);
    assert!(
        listed.stdout.contains(&sp) && listed.stdout.contains("agents=claude"),
        "{listed:?}"
    );
    d.register("claude:three", &s.ws);
    assert_eq!(policies_of(&d, "claude:three").len(), 1);

    // Removed: by the agent refused, by the operator done; new sessions
    // get nothing, attached policies go on.
    let rm = ["policy", "standing", "remove", sp.as_str()];
    assert_ne!(d.cli(&rm, &d.agent).code, 0);
    let removed = d.cli(&rm, &d.operator);
    assert_eq!(removed.code, 0, "{removed:?}");
    assert_ne!(d.cli(&rm, &d.operator).code, 0, "unknown the second time");
    d.register("claude:four", &s.ws);
    assert!(policies_of(&d, "claude:four").is_empty());
    assert_eq!(policies_of(&d, "claude:one").len(), 1);
    let kinds: Vec<String> = d
        .all_events("types=standing:added,standing:removed")
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["type"].as_str().unwrap_or(""),
                e["payload"]["standingId"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            format!("standing:added {sp}"),
            format!("standing:removed {sp}")
        ]
    );
}

/// A template that names a session, or does not parse as a policy, is
/// refused when added, naming the field; one that fits no workspace is
/// said when a session matches it (`session:policy-refused` naming it).
#[test]
fn a_standing_policy_that_cannot_be_is_refused_at_once_or_said_at_the_session() {
    let s = git_scratch();
    let cfg = s.write("config.toml", &allow_config(&["test"]));
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    for (name, body, said) in [
        (
            "named.json",
            json!({"sessionId": "claude:x", "gate": {"command": "test"}}),
            "sessionId",
        ),
        (
            "bad.json",
            json!({"gate": {"command": "test"}, "then": "launch"}),
            "then",
        ),
        ("list.json", json!([1]), "object"),
    ] {
        let f = s.write(name, &body.to_string());
        let f = f.display().to_string();
        let out = d.cli(&["policy", "attach", "--template", &f], &d.operator);
        assert_ne!(out.code, 0, "{name}: {out:?}");
        assert!(out.stderr.contains(said), "{name}: {out:?}");
    }
    let listed = d.cli(&["policy", "standing", "--json"], &d.operator);
    assert!(listed.stdout.contains("[]"), "{listed:?}");

    let lost = s.write(
        "lost.json",
        &json!({"gate": {"command": "test", "args": ["-f", "DONE"], "cwd": "no-such-dir"}})
            .to_string(),
    );
    let l = lost.display().to_string();
    let added = d.cli(&["policy", "attach", "--template", &l], &d.operator);
    assert_eq!(added.code, 0, "{added:?}");
    let sp = added.stdout.trim().to_string();
    d.register("gemini:lost", &s.ws);
    assert!(policies_of(&d, "gemini:lost").is_empty());
    let refused = d.all_events("session=gemini:lost&types=policy-refused");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(
        refused[0]["payload"]["standingId"],
        json!(sp),
        "{refused:?}"
    );
    assert!(
        refused[0]["payload"]["reason"].to_string().contains("cwd"),
        "{refused:?}"
    );
}

/// A decoy (issue 48, item 7): the agent attaches, with its own token, a
/// fan-in of its session and a helper that never ends a turn, so that a
/// live policy always has the session as a member. The operator's rule
/// still attaches again once its own policy ended, and gates the next
/// turn; the decoy never switches it off.
#[test]
fn a_decoy_the_agent_attaches_never_switches_the_operators_rule_off() {
    let (s, d) = daemon_with_rule(r#"["claude"]"#, &done_rule(0));
    common::daemon::git_repo(&s.ws);
    d.register("claude:one", &s.ws);
    d.register("helper", &s.ws);
    let decoy = d.attach(json!({
        "sessionIds": ["claude:one", "helper"], "gate": {"command": "bash", "args": ["-c", "true"]}
    }));
    let operators = |d: &Daemon| -> Vec<Value> {
        policies_of(d, "claude:one")
            .into_iter()
            .filter(|p| p["spec"]["attachedBy"] == "operator")
            .collect()
    };
    let first = operators(&d);
    assert_eq!(first.len(), 1, "{first:?}");
    let first_id = first[0]["policyId"].as_str().expect("id").to_string();
    // The operator's policy judges the turn (no DONE: blocked).
    d.report("claude:one", "turn-end");
    d.wait_status(&first_id, "blocked", T);
    assert_eq!(d.policy(&decoy)["status"], "watching", "the decoy is live");
    // The next turn: the rule's policy is there again, decoy or not.
    d.report("claude:one", "turn-start");
    let again = operators(&d);
    assert_eq!(again.len(), 2, "{again:?}");
    let second = again[1]["policyId"].as_str().expect("id").to_string();
    assert_eq!(again[1]["status"], "watching", "{again:?}");
    s.write_ws("DONE", "");
    let r = d.report("claude:one", "turn-end");
    assert_eq!(r["ungated"], false, "{r}");
    d.wait_status(&second, "done", T);
    assert!(
        d.all_events("types=session:ungated").is_empty(),
        "every turn was the operator's to judge"
    );
}
