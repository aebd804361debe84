//! Zed's Codex ACP adapter (`@zed-industries/codex-acp` 0.16.0, pinned by
//! tests/support/agent-clis; a native binary embedding Codex's core, which calls
//! itself `codex_cli_rs/0.137.0`, not the pinned 0.169.0 CLI) started by the
//! daemon as an ACP session, confined by `[agents]`, against the fake
//! OpenAI Responses API on loopback: its prompt's `end_turn` is the
//! turn-end the policy gates, the failing gate's reason is the next ACP
//! prompt (the model sees it), and the fixed work passes. A command the
//! model runs with `require_escalated` is a real ACP permission request
//! (kind `execute`, title the command): the session's rule escalates it,
//! the operator allows it, and the confined agent runs it. (The permission
//! test needs the fake API's Responses `function_call`:
//! fake-model-api-responses-function-calls.patch.)

use crate::common::Scratch;
use crate::common::acp_agents::{AcpAgent, Agent, installed, private_dirs};
use crate::common::agents::FakeApi;
use serde_json::{Value, json};

/// codex-acp started as session `cx`; `exec_command` is a tool only the
/// agent's own turns offer.
const CODEX: AcpAgent = AcpAgent::new("cx", "/v1/responses", "exec_command", last_input, codex_acp);

/// A daemon `[agents]` profile that lets codex-acp read its install and
/// write its `HOME` and `CODEX_HOME`, and its command, against the fake
/// Responses API.
fn codex_acp(s: &Scratch, api: &FakeApi) -> Agent {
    let [home, codex_home] = private_dirs(s, ["home", "codex-home"]);
    // node_modules/@zed-industries/codex-acp/bin/codex-acp.js: the node
    // wrapper; the binary it runs is the platform package's, run here
    // directly.
    let (_, clis) = installed("codex-acp");
    let binary = clis.join("@zed-industries/codex-acp-linux-x64/bin/codex-acp");
    std::fs::write(
        codex_home.join("config.toml"),
        format!(
            "model = \"gpt-5.5\"\nmodel_provider = \"fake\"\n\n\
             [model_providers.fake]\nname = \"fake\"\nbase_url = \"{}/v1\"\n\
             env_key = \"FAKE_OPENAI_KEY\"\nwire_api = \"responses\"\n\
             request_max_retries = 0\nstream_max_retries = 0\n\n\
             [analytics]\nenabled = false\n\n\
             [features]\nplugins = false\nshell_snapshot = false\n",
            api.url()
        ),
    )
    .expect("config.toml");
    let command = vec![
        format!("CODEX_HOME={}", codex_home.display()),
        "FAKE_OPENAI_KEY=sk-fake".into(),
        binary.display().to_string(),
    ];
    Agent::confined(false, &clis, &[&home, &codex_home], command).without_is_sandbox()
}

/// A Responses request's last input item, as JSON text.
fn last_input(call: &Value) -> String {
    call["body"]["input"]
        .as_array()
        .and_then(|i| i.last())
        .map(|l| l.to_string())
        .unwrap_or_default()
}

#[test]
fn codex_over_acp_is_gated_at_its_end_turn_nudged_by_prompt_and_passes_once_fixed() {
    let (run, calls) = CODEX.gated_then_fixed("codex-acp", ["I am done.", "Fixed."]);
    assert!(last_input(&calls[0]).contains("Create the file DONE"));
    assert!(
        calls[0]["headers"]["user-agent"]
            .as_str()
            .is_some_and(|u| u.starts_with("codex_cli_rs/0.137.0")),
        "{}",
        calls[0]["headers"]
    );
    run.stop();
}

#[test]
fn a_command_codex_asks_to_run_over_acp_is_escalated_allowed_by_the_operator_and_run() {
    let touch = |_: &Scratch| {
        json!({"cmd": "touch DONE", "sandbox_permissions": "require_escalated",
               "justification": "Create DONE?"})
    };
    let (run, calls) = CODEX.a_tool_call_escalated_then_allowed(
        "codex-acp-perm",
        ("exec_command", touch),
        "execute",
        Some("touch DONE"),
    );
    assert_eq!(calls.len(), 2, "{calls:#?}");
    let output = last_input(&calls[1]);
    assert!(
        output.contains("function_call_output") && output.contains("exited with code 0"),
        "{output}"
    );
    run.stop();
}
