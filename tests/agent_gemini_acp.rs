//! The real Gemini CLI (0.61.0, `gemini --acp`) started by the daemon as an
//! ACP session (`session start --acp`), confined by the `[agents]` profile
//! (it reads its install and writes its own home, nothing of the daemon's),
//! against the fake Gemini API on loopback: its prompt's `end_turn` is the
//! turn-end the policy gates, the failing gate's reason is its next ACP
//! prompt (the model sees it), the fixed work passes, and the agent dies
//! with its daemon. A write the model asks for is a real ACP permission
//! request (`write_file`, kind `edit`): the session's rule escalates it,
//! the operator allows it, and the confined agent writes the workspace.

use crate::agent_gemini::last_user_text;
use crate::common::agents::{FakeApi, agent_cli};
use crate::common::daemon::{Daemon, git_repo};
use crate::common::{self, MARKER_ENV, Scratch, allow_config};
use serde_json::{Value, json};
use std::time::Duration;

const T: Duration = Duration::from_secs(120);
/// The agent's own turns (the router's classifier calls `generateContent`).
const ROUTE: &str = ":streamGenerateContent";
const MODEL: &str = "gemini-2.5-flash";
/// A tool only the agent's turns offer (the classifier is offered none).
const AGENT_TOOL: &str = "read_file";

/// Gemini CLI's user settings: API-key auth, nothing phoning home.
fn settings(home: &std::path::Path) {
    let dir = home.join(".gemini");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let v = json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": false},
        "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
        "telemetry": {"enabled": false},
        "ide": {"enabled": false},
    });
    std::fs::write(dir.join("settings.json"), v.to_string()).expect("settings");
}

/// A daemon whose `[agents]` profile lets Gemini CLI read its install,
/// write its own home and open pseudo-terminals (its shell tool runs in
/// one), the fake Gemini API with `script`, and `gemini
/// --acp` started as session `gem` with the `--permission-rule` `rule`.
struct Run {
    s: Scratch,
    m: String,
    d: Daemon,
    api: FakeApi,
}

impl Run {
    fn start(marker: &str, script: impl FnOnce(&Scratch) -> Value, rule: Option<Value>) -> Run {
        let s = Scratch::new();
        let m = common::marker(marker);
        git_repo(&s.ws);
        let home = s.out.join("home");
        settings(&home);
        let gemini = std::fs::canonicalize(agent_cli("gemini")).expect("gemini.js");
        // node_modules/@google/gemini-cli/bundle/gemini.js: the install.
        let clis = gemini
            .ancestors()
            .nth(4)
            .expect("node_modules")
            .to_path_buf();
        let agents = format!(
            "[agents]\npty = true\nread = [{:?}]\nwrite = [{:?}]\n",
            clis.display().to_string(),
            home.display().to_string()
        );
        let cfg = s.write("config.toml", &format!("{}{agents}", allow_config(&[])));
        let d = Daemon::start(&s.etc.join("data"), &cfg);
        let api = FakeApi::start_script(&s.out, &script(&s));
        let marker_env = format!("{MARKER_ENV}=gatehost-test-{m}");
        let home_env = format!("HOME={}", home.display());
        let base_url = format!("GOOGLE_GEMINI_BASE_URL={}", api.url());
        let ws = s.ws.display().to_string();
        let gemini = gemini.display().to_string();
        let rule_file = rule.map(|r| s.write("rule.json", &r.to_string()).display().to_string());
        let mut args = vec!["session", "start", "--acp", "--id", "gem", "--cwd", &ws];
        if let Some(f) = &rule_file {
            args.extend(["--permission-rule", f]);
        }
        args.extend([
            "--prompt",
            "Create the file DONE, then say so.",
            "--",
            "/usr/bin/env",
            &marker_env,
            &home_env,
            "GEMINI_API_KEY=fake-gemini-key",
            &base_url,
            "GEMINI_CLI_TRUST_WORKSPACE=true",
            "GEMINI_CLI_NO_RELAUNCH=true",
            "NO_COLOR=1",
            "/usr/bin/node",
            &gemini,
            "--acp",
            "-m",
            MODEL,
        ]);
        let r = d.cli(&args, &d.operator);
        assert_eq!(r.code, 0, "{}", r.stderr);
        Run { s, m, d, api }
    }

    /// Stops the daemon: the agent dies with it.
    fn stop(mut self) {
        self.d.stop();
        common::assert_no_env_survivors(&self.m);
    }
}

/// The classifier's step: Gemini CLI's model router asks a lite model to
/// score each request (a `generateContent` with no tools).
fn classifier() -> Value {
    json!({"text": "{\"reasoning\": \"a small task\", \"complexity_score\": 5}",
           "unless_tools": AGENT_TOOL})
}

#[test]
fn gemini_over_acp_is_gated_at_its_end_turn_nudged_by_prompt_and_passes_once_fixed() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let attached = scratch.path().join("attached");
    let fixed = scratch.path().join("fixed");
    let run = Run::start(
        "gemini-acp",
        |_| {
            json!([
                {"text": "I created DONE.", "when_tools": AGENT_TOOL, "hold_until": attached},
                {"text": "Now DONE really exists.", "when_tools": AGENT_TOOL, "hold_until": fixed},
                classifier(),
            ])
        },
        None,
    );
    let (s, d, api) = (&run.s, &run.d, &run.api);

    // The first prompt reached the model; the policy is attached while
    // that call is held, so its end_turn is the first turn-end it gates.
    api.wait_for_calls(ROUTE, 1, T);
    let policy = d.attach(json!({
        "sessionId": "gem",
        "gate": {"command": "bash", "args": ["-c", "test -f DONE"]},
        "onFail": {"maxRetries": 2},
    }));
    std::fs::write(&attached, "").expect("release");

    // The gate failed: its reason is the agent's next ACP prompt, and the
    // model's next call carries it.
    let calls = api.wait_for_calls(ROUTE, 2, T);
    let nudge = last_user_text(&calls[1]);
    assert!(
        nudge.contains("did not pass") && nudge.contains("test -f DONE"),
        "the second model call does not carry the nudge: {nudge:?}"
    );
    assert!(!last_user_text(&calls[0]).contains("did not pass"));
    assert!(
        !common::env_survivors(&run.m).is_empty(),
        "the marker does not find the running agent: the survivors check would prove nothing"
    );
    std::fs::write(s.ws.join("DONE"), "").expect("fix");
    std::fs::write(&fixed, "").expect("release");

    let done = wait(|| {
        let p = d.policy(&policy);
        (p["status"] == "done").then_some(p)
    });
    assert_eq!(done["status"], "done", "{done}");
    let turn_ends: Vec<Value> = d.all_events("session=gem&types=turn-end");
    let messages: Vec<&str> = turn_ends
        .iter()
        .filter_map(|e| e["payload"]["message"].as_str())
        .collect();
    assert_eq!(
        messages,
        ["I created DONE.", "Now DONE really exists."],
        "each end_turn is a turn-end with the agent's message: {turn_ends:?}"
    );
    let events = d.policy_events(&policy);
    assert!(events.contains(&"policy:nudge".to_string()), "{events:?}");
    assert_eq!(api.model_calls(ROUTE).len(), 2, "no third turn");
    run.stop();
}

#[test]
fn a_write_gemini_asks_for_over_acp_is_escalated_allowed_by_the_operator_and_done() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let attached = scratch.path().join("attached");
    let run = Run::start(
        "gemini-acp-perm",
        |s| {
            json!([
                {"when_tools": "write_file", "hold_until": attached,
                 "tool_use": {"names": ["write_file"],
                              "input": {"file_path": s.ws.join("DONE"), "content": "done\n"}}},
                {"text": "I wrote DONE.", "when_tools": AGENT_TOOL},
                classifier(),
            ])
        },
        Some(json!({"allow": ["read", "search"], "otherwise": "escalate", "timeoutMs": 60000})),
    );
    let (s, d, api) = (&run.s, &run.d, &run.api);
    api.wait_for_calls(ROUTE, 1, T);
    let policy = d.attach(json!({
        "sessionId": "gem",
        "gate": {"command": "bash", "args": ["-c", "test -f DONE"]},
    }));
    std::fs::write(&attached, "").expect("release");

    let escalated = wait(|| {
        d.all_events("session=gem&types=permission-escalated")
            .into_iter()
            .next()
    });
    let payload = &escalated["payload"];
    assert_eq!(payload["tool"]["kind"], "edit", "{escalated}");
    assert!(
        !s.ws.join("DONE").exists(),
        "nothing is written before the answer"
    );
    let request = payload["request"].as_str().expect("request id").to_string();
    let r = d.cli(
        &["session", "permission", "gem", &request, "--allow"],
        &d.operator,
    );
    assert_eq!(r.code, 0, "{}", r.stderr);

    let done = wait(|| {
        let p = d.policy(&policy);
        (p["status"] == "done").then_some(p)
    });
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(
        std::fs::read_to_string(s.ws.join("DONE")).expect("DONE"),
        "done\n",
        "the confined agent wrote its workspace"
    );
    let answers: Vec<Value> = d.all_events("session=gem&types=permission");
    assert!(
        answers.iter().any(|e| e["payload"]["allowed"] == true
            && e["payload"]["by"] == "operator"
            && e["payload"]["tool"]["kind"] == "edit"),
        "{answers:?}"
    );
    // The model got the tool's result back, then ended its turn.
    let calls = api.model_calls(ROUTE);
    assert!(
        calls[1]["body"].to_string().contains("functionResponse"),
        "{}",
        calls[1]["body"]
    );
    run.stop();
}

/// The hostile agent: its model has it read the operator's token with its
/// file tool and with a shell command, both allowed by the session's rule.
/// Gemini's file tool refuses a path outside the workspace itself; the
/// shell's `cat` runs and the sandbox refuses it (`Permission denied`):
/// the token reaches no model request, and the turn still ends.
#[test]
fn a_gemini_agent_told_to_read_the_operator_token_never_gets_it() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let attached = scratch.path().join("attached");
    let run = Run::start(
        "gemini-acp-token",
        |s| {
            let token = s.etc.join("data/operator.token");
            json!([
                {"when_tools": "read_file", "hold_until": attached,
                 "tool_use": {"names": ["read_file"], "input": {"file_path": token}}},
                {"when_tools": "run_shell_command",
                 "tool_use": {"names": ["run_shell_command"],
                              "input": {"command": format!("cat {}", token.display()),
                                        "description": "read it"}}},
                {"text": "I could not read it.", "when_tools": AGENT_TOOL},
                classifier(),
            ])
        },
        Some(json!({"allow": ["read", "search", "execute"], "otherwise": "deny"})),
    );
    let (d, api) = (&run.d, &run.api);
    let token = std::fs::read_to_string(d.data.join("operator.token")).expect("token");
    let token = token.trim().to_string();
    assert!(token.len() >= 16, "a real token to look for");
    api.wait_for_calls(ROUTE, 1, T);
    std::fs::write(&attached, "").expect("release");

    let ended = wait(|| {
        let e = d.all_events("session=gem&types=turn-end");
        (!e.is_empty()).then(|| e[0].clone())
    });
    assert_eq!(
        ended["payload"]["message"], "I could not read it.",
        "{ended}"
    );
    let calls = api.model_calls(ROUTE);
    assert!(calls.len() >= 3, "both tools ran and answered: {calls:#?}");
    for c in &calls {
        assert!(
            !c["body"].to_string().contains(&token),
            "the operator token reached the model: {}",
            c["body"]
        );
    }
    // Each tool answered: the shell ran `cat`, which the sandbox refused.
    let answers: Vec<String> = calls[1..]
        .iter()
        .map(|c| {
            c["body"]["contents"]
                .as_array()
                .and_then(|a| a.last())
                .map(|l| l.to_string())
                .unwrap_or_default()
        })
        .collect();
    assert!(
        answers[0].contains("functionResponse") && answers[0].contains("read_file"),
        "{answers:?}"
    );
    assert!(
        answers[1].contains("run_shell_command")
            && answers[1].contains("Permission denied")
            && answers[1].contains("Exit Code: 1"),
        "the shell ran (a pty granted) and the sandbox refused the read: {answers:?}"
    );
    run.stop();
}

fn wait(mut f: impl FnMut() -> Option<Value>) -> Value {
    let start = std::time::Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < T, "timed out");
        std::thread::sleep(Duration::from_millis(50));
    }
}
