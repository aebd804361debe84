//! The real Gemini CLI (pinned 0.61.0, tests/support/agent-clis) gated by
//! `gatehost hook gemini`, against the fake model API on loopback
//! (tests/support/fake-model-api/gemini_api.py; how it is run and what its hooks
//! send: the README there).
//!
//! Each test runs `gemini -p` once, with a private HOME (its settings.json
//! holds the hooks) and TMPDIR under the test's scratch directory and a
//! minimal environment, and checks what reached the model: a refused stop
//! is the next model request's last user message. The standalone flows are
//! common::headless's.

use crate::common::agents::{AgentRun, FakeApi, agent_cli, scratch_repo, standalone_args};
use crate::common::daemon::Daemon;
use crate::common::headless::{
    Headless, T, all_calls, assert_nudged_once_then_commit_ready, cli_command,
    daemon_allowing_test, hold, hook_command, prompt, release,
};
use crate::common::{Scratch, assert_no_survivors};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// The model Gemini CLI is pinned to: without one it asks a classifier
/// model first (another model call, expecting JSON).
const MODEL: &str = "gemini-2.5-flash";
/// The fake API's route for the agent's model calls.
const ROUTE: &str = ":streamGenerateContent";

/// Gemini CLI in standalone mode; it makes no side query: every call on
/// the route is the turn's.
const GEMINI: Headless = Headless {
    name: "gemini",
    route: ROUTE,
    calls: all_calls,
    text: last_user_text,
    standalone: |s, api, m| {
        let hook = hook_command(s, m, "gemini", &standalone_args(s, 2));
        start(s, api, m, &hook, &json!({}))
    },
};

/// Writes HOME/.gemini/settings.json: API-key auth against the fake API,
/// no usage statistics (else it calls play.googleapis.com), and `more`
/// (the hooks, when given) beside.
pub(crate) fn settings(home: &Path, more: Value) {
    let mut settings = json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": false},
        "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
        "telemetry": {"enabled": false},
        "ide": {"enabled": false},
    });
    if let Value::Object(more) = more {
        settings.as_object_mut().expect("object").extend(more);
    }
    let dir = home.join(".gemini");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("settings.json"), settings.to_string()).expect("settings");
}

/// Starts `gemini -p PROMPT` in `s.ws` against `api`, with `hook` as the
/// command of the SessionStart, BeforeAgent, AfterAgent and SessionEnd
/// hooks (with `hook_env` in its environment), in a process group of its
/// own (so a failed test can kill all of it).
fn start(s: &Scratch, api: &FakeApi, m: &str, hook: &str, hook_env: &Value) -> AgentRun {
    let (home, mut cmd) = cli_command(s, &agent_cli("gemini"));
    let entry = json!([{"hooks": [{
        "type": "command", "name": "gatehost", "command": hook,
        "timeout": 60000, "env": hook_env,
    }]}]);
    let events = json!({"SessionStart": entry, "BeforeAgent": entry, "AfterAgent": entry, "SessionEnd": entry});
    settings(&home, json!({ "hooks": events }));
    cmd.args(["-p", &prompt(m), "-m", MODEL])
        .env("GEMINI_API_KEY", "fake-gemini-key")
        .env("GOOGLE_GEMINI_BASE_URL", api.url())
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
        .env("GEMINI_CLI_NO_RELAUNCH", "true");
    AgentRun::start_group(cmd, &s.out)
}

/// The text of the last user message a model request carried.
pub(crate) fn last_user_text(request: &Value) -> String {
    let contents = request["body"]["contents"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    contents
        .iter()
        .rev()
        .find(|c| c["role"] == "user")
        .and_then(|c| c["parts"].as_array())
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[test]
fn a_failing_gate_reaches_the_model_and_the_fixed_turn_ends_the_run() {
    let said = GEMINI.a_fixed_turn_ends_the_run().stderr;
    let blocked = said.matches("Agent execution blocked:").count();
    assert_eq!(blocked, 1, "{said}");
    assert!(!said.contains("Hook system message"), "{said}");
}

#[test]
fn a_gate_never_fixed_blocks_exactly_max_retries_times_then_names_the_block() {
    // BeforeAgent is hooked too: Gemini CLI runs it again for every
    // refused stop, with the reason as its prompt; it must not reset the
    // count (it did: the run then never ended).
    let (_, _, end) = GEMINI.a_gate_never_fixed_blocks_twice();
    let blocked = end.stderr.matches("Agent execution blocked:").count();
    assert_eq!(blocked, 2, "{}", end.stderr);
    // The third stop went through, and the user was told why the work is
    // not accepted: Gemini CLI prints a hook's systemMessage on stderr.
    let shown = end
        .stderr
        .lines()
        .find(|l| l.starts_with("Hook system message:"))
        .unwrap_or_else(|| panic!("no message for the user:\n{}", end.stderr));
    assert!(
        shown.contains("blocked, out of retries") && shown.contains("DONE exists"),
        "{shown}"
    );
}

/// Polls the daemon until a session registered as `gemini:…` exists.
fn gemini_session(d: &Daemon) -> String {
    let deadline = Instant::now() + T;
    loop {
        let page = d.agent_ok("GET", "/v1/sessions?limit=1000", None);
        if let Some(id) = page["sessions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["id"].as_str())
            .find(|id| id.starts_with("gemini:"))
        {
            return id.to_string();
        }
        assert!(Instant::now() < deadline, "no gemini session: {page}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn through_the_daemon_a_commit_policy_nudges_then_awaits_the_ack() {
    let (s, m) = scratch_repo("gemini-daemon");
    let d = daemon_allowing_test(&s, "config.toml");
    let api = FakeApi::start_script(
        &s.out,
        &json!([
            // Held until the test has attached its policy.
            {"text": "I created DONE.", "hold_until": hold(&s, "attached")},
            {"text": "Now DONE really exists.", "hold_until": hold(&s, "fixed")},
            {"text": "A third call must not happen."},
        ]),
    );
    // Daemon mode: no --gates; the server and the agent token come in the
    // hook's own environment (the hook's `env` in settings.json).
    let hook = hook_command(&s, &m, "gemini", &[]);
    let env = json!({"GATEHOST_SERVER": d.url, "GATEHOST_TOKEN": d.agent,
                     "GATEHOST_SESSION_KEYS": d.keyring().dir()});
    let run = start(&s, &api, &m, &hook, &env);

    // SessionStart registered the session before the first model call.
    api.wait_for_calls(ROUTE, 1, T);
    let session = gemini_session(&d);
    let registered = d.agent_ok("GET", &format!("/v1/sessions/{session}"), None);
    let cwd = Path::new(registered["cwd"].as_str().unwrap_or_default());
    assert_eq!(
        cwd.canonicalize().ok(),
        s.ws.canonicalize().ok(),
        "{registered}"
    );
    let policy = d.attach(json!({
        "sessionId": session,
        "gate": {"command": "test", "args": ["-f", "DONE"], "timeoutMs": 10000},
        "then": "commit",
        "commit": {"paths": ["DONE"], "message": "Add DONE"},
        "onFail": {"nudge": "gatehost-nudge: {gate} failed ({code}): {reason}", "maxRetries": 2},
    }));
    release(&s, "attached");

    // The policy's nudge is the next model request's user message.
    let calls = api.wait_for_calls(ROUTE, 2, T);
    let nudge = last_user_text(&calls[1]);
    assert!(nudge.contains("gatehost-nudge:"), "{nudge:?}");
    s.write_ws("DONE", "done\n");
    release(&s, "fixed");

    let end = run.finish(T);
    end.assert_exited_0();
    assert_eq!(api.model_calls(ROUTE).len(), 2);
    let p = d.wait_status(&policy, "awaiting-ack", T);
    assert!(p["commitSha"].is_null(), "no commit before the ack: {p}");
    assert_nudged_once_then_commit_ready(&d, &policy);
    let blocked = end.stderr.matches("Agent execution blocked:").count();
    assert_eq!(blocked, 1, "{}", end.stderr);
    // Gemini CLI's SessionEnd, as it exits, reported the session exited.
    crate::agents::claude::assert_session_exited(&d, &session);
    assert_no_survivors(&m);
}
