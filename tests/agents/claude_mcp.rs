//! The real Claude Code CLI (2.1.332) with `gatehost mcp` as its MCP server
//! and daemon-mode hooks: the fake Anthropic API has the model call
//! `policy_attach` with no session id, and the policy lands on the
//! session Claude Code's own hook registered (`claude:<its id>`, chosen by
//! nobody in advance); the model is then gated by the gate it attached
//! itself, sent back with the reason, and passes once the work is fixed.

use crate::agents::claude::{Claude, daemon_env, daemon_hooks, fixed_then_finished};
use crate::common;
use crate::common::agents::{FakeApi, daemon_configured, scratch_repo};
use crate::common::{MARKER_ENV, allow_config};
use serde_json::{Value, json};
use std::time::Duration;

const T: Duration = Duration::from_secs(120);
const MODEL_ROUTE: &str = "/v1/messages";
/// The name Claude Code gives the MCP server's tool: `mcp__SERVER__TOOL`.
const ATTACH_TOOL: &str = "mcp__gatehost__policy_attach";

#[test]
fn a_model_that_calls_policy_attach_without_a_session_attaches_to_its_own_session() {
    let (s, m) = scratch_repo("claude-mcp");
    // An agent's gate runs only what the allowlist admits with its
    // arguments: `test -f`, here.
    let test_f = "free_args = true }, { program = \"test\", subcommands = [\"-f\"] }";
    let d = daemon_configured(&s, &allow_config(&[]).replace("free_args = true }", test_f));

    let release = s.out.join("release");
    let api = FakeApi::start_script(
        &s.out,
        &json!([
            {"text": "I will gate my own work.", "when_tools": ATTACH_TOOL,
             "tool_use": {"names": [ATTACH_TOOL], "input": {
                 "gate": {"command": "test", "args": ["-f", "DONE"]},
                 "onFail": {"maxRetries": 2}}}},
            {"text": "I am done."},
            {"text": "Fixed: DONE exists now.", "hold_until": release},
        ]),
    );
    let claude = Claude::new(&s, &m);
    let keys = daemon_hooks(&claude, &s, &m, &d);
    let env = daemon_env(&d, &keys);
    let mcp = s.write(
        "mcp.json",
        &json!({"mcpServers": {"gatehost": {
            "type": "stdio",
            "command": env!("CARGO_BIN_EXE_gatehost"),
            "args": ["mcp"],
            "env": {
                "GATEHOST_SERVER": d.url,
                "GATEHOST_TOKEN": d.agent,
                "GATEHOST_SESSION_KEYS": keys,
            },
        }}})
        .to_string(),
    );
    let mcp = mcp.display().to_string();
    let marker_env = format!("gatehost-test-{m}");
    let mut all_env = env.to_vec();
    all_env.push((MARKER_ENV, marker_env.as_str()));
    let run = claude.start(
        &s.ws,
        &api,
        &all_env,
        &["--mcp-config", &mcp, "--allowedTools", ATTACH_TOOL],
        &s.out,
    );

    // The first call offered the tool and got it called; the next call
    // carries the tool's answer: the policy attached, by the agent.
    let calls = api.wait_for_calls(MODEL_ROUTE, 3, T);
    let first = calls[0]["body"].to_string();
    assert!(
        first.contains(ATTACH_TOOL),
        "the MCP tool is offered: {first}"
    );
    assert_eq!(calls[0]["step"], 0, "{}", calls[0]);
    let second = &calls[1]["body"];
    let result = tool_result(second).unwrap_or_else(|| panic!("a tool result: {second}"));
    assert!(!result.contains("no-current-session"), "{result}");
    let list = d.agent_ok("GET", "/v1/policies?limit=100", None);
    let policies = list["policies"].as_array().expect("policies");
    assert_eq!(policies.len(), 1, "{list}");
    let p = &policies[0];
    let policy = p["policyId"].as_str().expect("id").to_string();
    assert!(
        result.contains(&policy),
        "the model was told its policy: {result}"
    );
    assert_eq!(p["spec"]["attachedBy"], "agent", "{p}");

    // The session it landed on is the one Claude Code's hook registered:
    // the only session, named by Claude Code's own session id.
    let sessions = d.agent_ok("GET", "/v1/sessions?limit=100", None);
    let ids: Vec<&str> = sessions["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .filter_map(|x| x["id"].as_str())
        .collect();
    assert_eq!(ids.len(), 1, "{sessions}");
    assert_eq!(p["sessions"], json!([ids[0]]), "{p}");
    let own = ids[0].trim_start_matches("claude:");
    assert!(
        ids[0].starts_with("claude:") && own.len() > 20,
        "{sessions}"
    );

    // Its own gate then sent it back, and the fixed work passed.
    let out = fixed_then_finished(&s, run, &calls[2], &release);
    let init = out
        .json_lines()
        .into_iter()
        .find(|l| l["type"] == "system" && l["subtype"] == "init")
        .unwrap_or_else(|| panic!("an init line: {}", out.stdout));
    assert_eq!(init["session_id"], own, "{init}");
    let p = d.policy(&policy);
    assert_eq!(p["status"], "done", "{p}");
    let events = d.policy_events(&policy);
    assert!(events.contains(&"policy:nudge".to_string()), "{events:?}");
    common::assert_no_survivors(&m);
    common::assert_no_env_survivors(&m);
}

/// The text of the `tool_result` block in a request's last user message.
fn tool_result(body: &Value) -> Option<String> {
    let last = body["messages"].as_array()?.last()?;
    last["content"]
        .as_array()?
        .iter()
        .find(|b| b["type"] == "tool_result")
        .map(|b| b["content"].to_string())
}
