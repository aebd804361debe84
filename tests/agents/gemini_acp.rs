//! The real Gemini CLI (0.61.0, `gemini --acp`) started by the daemon as an
//! ACP session (`session start --acp`), confined by the `[agents]` profile
//! (it reads its install and writes its own home, nothing of the daemon's),
//! against the fake Gemini API on loopback: its prompt's `end_turn` is the
//! turn-end the policy gates, the failing gate's reason is its next ACP
//! prompt (the model sees it), the fixed work passes, and the agent dies
//! with its daemon. A write the model asks for is a real ACP permission
//! request (`write_file`, kind `edit`): the session's rule escalates it,
//! the operator allows it, and the confined agent writes the workspace.

use crate::agents::gemini::last_user_text;
use crate::common::Scratch;
use crate::common::acp_agents::{Agent, AgentRun, Launch};
use crate::common::agents::agent_cli;
use serde_json::{Value, json};

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
fn start(marker: &str, script: impl FnOnce(&Scratch) -> Value, rule: Option<Value>) -> AgentRun {
    let l = Launch {
        marker,
        session: "gem",
        route: ROUTE,
        text: last_user_text,
        rule,
    };
    AgentRun::launch(l, script, |s, api| {
        let home = s.out.join("home");
        settings(&home);
        // node_modules/@google/gemini-cli/bundle/gemini.js: the install.
        let gemini = std::fs::canonicalize(agent_cli("gemini")).expect("gemini.js");
        let clis = gemini.ancestors().nth(4).expect("node_modules");
        Agent {
            agents: format!(
                "[agents]\npty = true\nread = [{:?}]\nwrite = [{:?}]\n",
                clis.display().to_string(),
                home.display().to_string()
            ),
            env_options: Vec::new(),
            command: vec![
                format!("HOME={}", home.display()),
                "GEMINI_API_KEY=fake-gemini-key".into(),
                format!("GOOGLE_GEMINI_BASE_URL={}", api.url()),
                "GEMINI_CLI_TRUST_WORKSPACE=true".into(),
                "GEMINI_CLI_NO_RELAUNCH=true".into(),
                "NO_COLOR=1".into(),
                "/usr/bin/node".into(),
                gemini.display().to_string(),
                "--acp".into(),
                "-m".into(),
                MODEL.into(),
            ],
        }
    })
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
    let run = start(
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
    // The policy is attached while the first call is held, so its end_turn
    // is the first turn-end it gates; the gate's reason is the next prompt.
    let policy = run.gate_first_turn(&attached, Some(json!({"maxRetries": 2})));
    run.nudged_then_passes(
        &policy,
        &fixed,
        ["I created DONE.", "Now DONE really exists."],
    );
    run.stop();
}

#[test]
fn a_write_gemini_asks_for_over_acp_is_escalated_allowed_by_the_operator_and_done() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let attached = scratch.path().join("attached");
    let run = start(
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
    let policy = run.gate_first_turn(&attached, None);
    let calls = run.escalated_then_allowed(&policy, "edit", None);
    assert_eq!(
        std::fs::read_to_string(run.s.ws.join("DONE")).expect("DONE"),
        "done\n",
        "the confined agent wrote its workspace"
    );
    // The model got the tool's result back, then ended its turn.
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
    let run = start(
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
    let calls = run.token_never_reaches_the_model(&attached, "I could not read it.");
    assert!(calls.len() >= 3, "both tools ran and answered: {calls:#?}");
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
