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
use crate::common::acp_agents::{AcpAgent, Agent, installed, private_dirs};
use crate::common::agents::FakeApi;
use serde_json::Value;

/// The adapter started as session `cl`; `Write` is a tool only the
/// agent's own turns offer.
const CLAUDE: AcpAgent = AcpAgent::new("cl", "/v1/messages", "Write", last_user, adapter);

/// A daemon `[agents]` profile that lets the adapter and Claude Code read
/// their install and write their own home and config directory, and the
/// adapter's command, against the fake Anthropic API.
fn adapter(s: &Scratch, api: &FakeApi) -> Agent {
    let [home, config] = private_dirs(s, ["home", "claude-config"]);
    // node_modules/@zed-industries/claude-agent-acp/dist/index.js, and
    // node_modules/@anthropic-ai/claude-code/bin/claude.exe (native).
    let (adapter, clis) = installed("claude-agent-acp");
    let (claude, _) = installed("claude");
    let command = vec![
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
    ];
    // The adapter passes --allow-dangerously-skip-permissions to Claude
    // Code when it runs as root with IS_SANDBOX set (set on some CI
    // machines); 2.1.332 then exits 1 ("cannot be used with root/sudo
    // privileges") and `session/new` fails with "Query closed before
    // response received".
    Agent::confined(false, &clis, &[&home, &config], command).without_is_sandbox()
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
    // The policy is attached while the first call is held, so its end_turn
    // is the first turn-end it gates; the gate's reason is the next prompt.
    let (run, calls) = CLAUDE.gated_then_fixed("claude-acp", ["I am done.", "Fixed."]);
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
    let title = Some("Write DONE");
    let (run, calls) = CLAUDE.a_write_escalated_then_allowed("claude-acp-perm", "Write", title);
    let d = &run.d;
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
    let (run, calls) = CLAUDE.told_to_read_the_token("claude-acp-token", ["Read", "Bash"]);
    let asked: Vec<Value> = run.d.all_events("session=cl&types=permission");
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
