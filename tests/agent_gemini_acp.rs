//! The real Gemini CLI (0.61.0, `gemini --acp`) started by the daemon as an
//! ACP session (`session start --acp`), confined by the `[agents]` profile
//! (it reads its install and writes its own home, nothing of the daemon's),
//! against the fake Gemini API on loopback: its prompt's `end_turn` is the
//! turn-end the policy gates, the failing gate's reason is its next ACP
//! prompt (the model sees it), the fixed work passes, and the agent dies
//! with its daemon.

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

#[test]
fn gemini_over_acp_is_gated_at_its_end_turn_nudged_by_prompt_and_passes_once_fixed() {
    let s = Scratch::new();
    let m = common::marker("gemini-acp");
    git_repo(&s.ws);
    let home = s.out.join("home");
    settings(&home);
    let clis = std::fs::canonicalize(agent_cli("gemini"))
        .expect("gemini")
        .parent()
        .and_then(|p| p.parent())
        .and_then(|p| p.parent())
        .and_then(|p| p.parent())
        .expect("node_modules")
        .to_path_buf();
    let agents = format!(
        "[agents]\nread = [{:?}]\nwrite = [{:?}]\n",
        clis.display().to_string(),
        home.display().to_string()
    );
    let cfg = s.write(
        "config.toml",
        &format!("{}{agents}", allow_config(&[])),
    );
    let mut d = Daemon::start(&s.etc.join("data"), &cfg);

    let attached = s.out.join("attached");
    let fixed = s.out.join("fixed");
    let api = FakeApi::start_script(
        &s.out,
        &json!([
            {"text": "I created DONE.", "when_tools": AGENT_TOOL, "hold_until": attached},
            {"text": "Now DONE really exists.", "when_tools": AGENT_TOOL, "hold_until": fixed},
            {"text": "{\"reasoning\": \"a small task\", \"complexity_score\": 5}",
             "unless_tools": AGENT_TOOL},
        ]),
    );
    let gemini = std::fs::canonicalize(agent_cli("gemini")).expect("gemini.js");
    let marker_env = format!("{MARKER_ENV}=gatehost-test-{m}");
    let home_env = format!("HOME={}", home.display());
    let base_url = format!("GOOGLE_GEMINI_BASE_URL={}", api.url());
    let ws = s.ws.display().to_string();
    let gemini = gemini.display().to_string();
    let r = d.cli(
        &[
            "session",
            "start",
            "--acp",
            "--id",
            "gem",
            "--cwd",
            &ws,
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
        ],
        &d.operator,
    );
    assert_eq!(r.code, 0, "{}", r.stderr);

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
        !common::env_survivors(&m).is_empty(),
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

    // The agent dies with its daemon.
    d.stop();
    common::assert_no_env_survivors(&m);
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
