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
use crate::common::acp_agents::{Agent, AgentRun, Launch};
use crate::common::agents::agent_cli;
use serde_json::{Value, json};

const ROUTE: &str = "/v1/responses";
/// A tool only the agent's own turns offer.
const AGENT_TOOL: &str = "exec_command";

/// A daemon whose `[agents]` profile lets codex-acp read its install and
/// write its `HOME` and `CODEX_HOME`, the fake API with `script`, and
/// codex-acp started as session `cx` with the `--permission-rule` `rule`.
fn start(marker: &str, script: impl FnOnce(&Scratch) -> Value, rule: Option<Value>) -> AgentRun {
    let l = Launch {
        marker,
        session: "cx",
        route: ROUTE,
        text: last_input,
        rule,
    };
    AgentRun::launch(l, script, |s, api| {
        let home = s.out.join("home");
        let codex_home = s.out.join("codex-home");
        for d in [&home, &codex_home] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        // node_modules/@zed-industries/codex-acp/bin/codex-acp.js: the node
        // wrapper; the binary it runs is the platform package's, run here
        // directly.
        let wrapper = std::fs::canonicalize(agent_cli("codex-acp")).expect("codex-acp.js");
        let clis = wrapper.ancestors().nth(4).expect("node_modules");
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
        Agent {
            agents: format!(
                "[agents]\nread = [{:?}]\nwrite = [{:?}, {:?}]\n",
                clis.display().to_string(),
                home.display().to_string(),
                codex_home.display().to_string()
            ),
            env_options: vec!["-u".into(), "IS_SANDBOX".into()],
            command: vec![
                format!("HOME={}", home.display()),
                format!("CODEX_HOME={}", codex_home.display()),
                "FAKE_OPENAI_KEY=sk-fake".into(),
                binary.display().to_string(),
            ],
        }
    })
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
    let scratch = tempfile::tempdir().expect("tempdir");
    let attached = scratch.path().join("attached");
    let fixed = scratch.path().join("fixed");
    let run = start(
        "codex-acp",
        |_| {
            json!([
                {"text": "I am done.", "when_tools": AGENT_TOOL, "hold_until": attached},
                {"text": "Fixed.", "when_tools": AGENT_TOOL, "hold_until": fixed},
            ])
        },
        None,
    );
    let policy = run.gate_first_turn(&attached, Some(json!({"maxRetries": 2})));
    let calls = run.nudged_then_passes(&policy, &fixed, ["I am done.", "Fixed."]);
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
    let scratch = tempfile::tempdir().expect("tempdir");
    let attached = scratch.path().join("attached");
    let run = start(
        "codex-acp-perm",
        |_| {
            json!([
                {"when_tools": AGENT_TOOL, "hold_until": attached,
                 "tool_use": {"names": ["exec_command"],
                              "input": {"cmd": "touch DONE",
                                        "sandbox_permissions": "require_escalated",
                                        "justification": "Create DONE?"}}},
                {"text": "I wrote DONE.", "when_tools": AGENT_TOOL},
            ])
        },
        Some(json!({"allow": ["read", "search"], "otherwise": "escalate", "timeoutMs": 60000})),
    );
    let policy = run.gate_first_turn(&attached, None);
    let calls = run.escalated_then_allowed(&policy, "execute", Some("touch DONE"));
    assert_eq!(calls.len(), 2, "{calls:#?}");
    let output = last_input(&calls[1]);
    assert!(
        output.contains("function_call_output") && output.contains("exited with code 0"),
        "{output}"
    );
    run.stop();
}
