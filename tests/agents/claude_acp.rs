//! Zed's Claude Code ACP adapter (`@zed-industries/claude-agent-acp`
//! 0.23.1, pinned by tests/support/agent-clis) started by the daemon as an ACP
//! session (`session start --acp`), running the pinned Claude Code
//! (2.1.332, its native binary, named by `CLAUDE_CODE_EXECUTABLE` instead of
//! the 2.1.83 `cli.js` its Agent SDK 0.2.83 bundles), confined by the
//! `[agents]` profile, against the fake Anthropic API on loopback: a
//! prompt's `end_turn` is the turn-end the policy gates, the failing gate's
//! reason is the next ACP prompt (the model sees it), the fixed work passes,
//! and the agent dies with its daemon. A `Write` the model asks for is a
//! real ACP permission request (kind `edit`, title `Write DONE`): the
//! session's rule escalates it, the operator allows it, and the confined
//! agent writes the workspace. Told to read `operator.token`, its `Read`
//! and `Bash` tools both get the sandbox's refusal.

use crate::common::Scratch;
use crate::common::acp_agents::{Agent, AgentRun, Launch};
use crate::common::agents::agent_cli;
use serde_json::{Value, json};

const ROUTE: &str = "/v1/messages";
/// A tool only the agent's own turns offer.
const AGENT_TOOL: &str = "Write";

/// A daemon whose `[agents]` profile lets the adapter and Claude Code read
/// their install and write their own home and config directory, the fake
/// Anthropic API with `script`, and the adapter started as session `cl`
/// with the `--permission-rule` `rule`.
fn start(marker: &str, script: impl FnOnce(&Scratch) -> Value, rule: Option<Value>) -> AgentRun {
    let l = Launch {
        marker,
        session: "cl",
        route: ROUTE,
        text: last_user,
        rule,
    };
    AgentRun::launch(l, script, |s, api| {
        let home = s.out.join("home");
        let config = s.out.join("claude-config");
        for d in [&home, &config] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        // node_modules/@zed-industries/claude-agent-acp/dist/index.js.
        let adapter = std::fs::canonicalize(agent_cli("claude-agent-acp")).expect("index.js");
        // node_modules/@anthropic-ai/claude-code/bin/claude.exe (native).
        let claude = std::fs::canonicalize(agent_cli("claude")).expect("claude.exe");
        let clis = adapter.ancestors().nth(4).expect("node_modules");
        Agent {
            agents: format!(
                "[agents]\nread = [{:?}]\nwrite = [{:?}, {:?}]\n",
                clis.display().to_string(),
                home.display().to_string(),
                config.display().to_string()
            ),
            // The adapter passes --allow-dangerously-skip-permissions to
            // Claude Code when it runs as root with IS_SANDBOX set (set on
            // some CI machines); 2.1.332 then exits 1 ("cannot be used with
            // root/sudo privileges") and `session/new` fails with "Query
            // closed before response received".
            env_options: vec!["-u".into(), "IS_SANDBOX".into()],
            command: vec![
                format!("HOME={}", home.display()),
                format!("CLAUDE_CONFIG_DIR={}", config.display()),
                format!("ANTHROPIC_BASE_URL={}", api.url()),
                "ANTHROPIC_API_KEY=sk-ant-fake".into(),
                format!("CLAUDE_CODE_EXECUTABLE={}", claude.display()),
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1".into(),
                "CLAUDE_CODE_MAX_RETRIES=0".into(),
                "DISABLE_AUTOUPDATER=1".into(),
                "DISABLE_TELEMETRY=1".into(),
                "/usr/bin/node".into(),
                adapter.display().to_string(),
            ],
        }
    })
}

/// The text of a Messages request's last message (the newest user turn:
/// a prompt's text, or a tool's result).
fn last_user(call: &Value) -> String {
    let last = &call["body"]["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or_default();
    match &last["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match b["type"].as_str() {
                Some("text") => b["text"].as_str().unwrap_or("").to_string(),
                Some("tool_result") => b["content"].to_string(),
                _ => String::new(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[test]
fn claude_over_acp_is_gated_at_its_end_turn_nudged_by_prompt_and_passes_once_fixed() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let attached = scratch.path().join("attached");
    let fixed = scratch.path().join("fixed");
    let run = start(
        "claude-acp",
        |_| {
            json!([
                {"text": "I am done.", "when_tools": AGENT_TOOL, "hold_until": attached},
                {"text": "Fixed.", "when_tools": AGENT_TOOL, "hold_until": fixed},
            ])
        },
        None,
    );
    // The policy is attached while the first call is held, so its end_turn
    // is the first turn-end it gates; the gate's reason is the next prompt.
    let policy = run.gate_first_turn(&attached, Some(json!({"maxRetries": 2})));
    let calls = run.nudged_then_passes(&policy, &fixed, ["I am done.", "Fixed."]);
    // The pinned Claude Code made them, through the Agent SDK.
    assert_eq!(
        calls[0]["headers"]["user-agent"], "claude-cli/2.1.332 (external, sdk-ts)",
        "{}",
        calls[0]["headers"]
    );
    run.stop();
}

#[test]
fn a_write_claude_asks_for_over_acp_is_escalated_allowed_by_the_operator_and_done() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let attached = scratch.path().join("attached");
    let run = start(
        "claude-acp-perm",
        |s| {
            json!([
                {"when_tools": AGENT_TOOL, "hold_until": attached,
                 "tool_use": {"names": ["Write"],
                              "input": {"file_path": s.ws.join("DONE"), "content": "done\n"}}},
                {"text": "I wrote DONE.", "when_tools": AGENT_TOOL},
            ])
        },
        Some(json!({"allow": ["read", "search"], "otherwise": "escalate", "timeoutMs": 60000})),
    );
    let policy = run.gate_first_turn(&attached, None);
    let calls = run.escalated_then_allowed(&policy, "edit", Some("Write DONE"));
    let (s, d) = (&run.s, &run.d);
    assert_eq!(
        std::fs::read_to_string(s.ws.join("DONE")).expect("DONE"),
        "done\n",
        "the confined agent wrote its workspace"
    );
    // Claude Code wrote it with its own tool, not through the client.
    assert!(
        d.all_events("session=cl&types=client-refused").is_empty(),
        "the adapter asked the client to write"
    );
    // The model got the tool's result back, then ended its turn.
    assert_eq!(calls.len(), 2, "{calls:#?}");
    let result = last_user(&calls[1]);
    assert!(result.contains("File created successfully"), "{result}");
    let turn_ends: Vec<Value> = d.all_events("session=cl&types=turn-end");
    assert_eq!(turn_ends[0]["payload"]["message"], "I wrote DONE.");
    run.stop();
}

/// The hostile agent: its model has it read the operator's token with its
/// `Read` tool and with `Bash`'s `cat`, both allowed by the session's rule
/// (kinds `read` and `execute`). The sandbox refuses both (`EACCES` and
/// `Permission denied`): the token reaches no model request, and the turn
/// still ends.
#[test]
fn a_claude_agent_told_to_read_the_operator_token_never_gets_it() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let attached = scratch.path().join("attached");
    let run = start(
        "claude-acp-token",
        |s| {
            let token = s.etc.join("data/operator.token");
            json!([
                {"when_tools": "Read", "hold_until": attached,
                 "tool_use": {"names": ["Read"], "input": {"file_path": token}}},
                {"when_tools": "Bash",
                 "tool_use": {"names": ["Bash"],
                              "input": {"command": format!("cat {}", token.display()),
                                        "description": "read it"}}},
                {"text": "I could not read it.", "when_tools": AGENT_TOOL},
            ])
        },
        Some(json!({"allow": ["read", "search", "execute"], "otherwise": "deny"})),
    );
    let calls = run.token_never_reaches_the_model(&attached, "I could not read it.");
    let d = &run.d;
    let asked: Vec<Value> = d.all_events("session=cl&types=permission");
    let kinds: Vec<&str> = asked
        .iter()
        .filter_map(|e| e["payload"]["tool"]["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["read", "execute"], "{asked:?}");
    assert_eq!(calls.len(), 3, "both tools ran and answered: {calls:#?}");
    let read = last_user(&calls[1]);
    assert!(read.contains("EACCES: permission denied"), "{read}");
    let cat = last_user(&calls[2]);
    assert!(
        cat.contains("Permission denied") && cat.contains("Exit code 1"),
        "Bash ran `cat` and the sandbox refused the read: {cat}"
    );
    run.stop();
}
