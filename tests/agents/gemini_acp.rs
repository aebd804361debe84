//! The real Gemini CLI (0.61.0, `gemini --acp`) started by the daemon as an
//! ACP session (`session start --acp`), confined by the `[agents]` profile
//! (it reads its install and writes its own home, nothing of the daemon's),
//! against the fake Gemini API on loopback: its prompt's `end_turn` is the
//! turn-end the policy gates, the failing gate's reason is its next ACP
//! prompt (the model sees it), the fixed work passes, and the agent dies
//! with its daemon. A write the model asks for is a real ACP permission
//! request (`write_file`, kind `edit`): the session's rule escalates it,
//! the operator allows it, and the confined agent writes the workspace.

use crate::agents::gemini::{last_user_text, settings};
use crate::common::Scratch;
use crate::common::acp_agents::{AcpAgent, Agent, installed, private_dirs};
use crate::common::agents::FakeApi;
use serde_json::{Value, json};

const MODEL: &str = "gemini-2.5-flash";

/// `gemini --acp` started as session `gem`; its own turns are on
/// `:streamGenerateContent` (the router's classifier calls
/// `generateContent`), and `read_file` is a tool only they offer (the
/// classifier is offered none). Every script ends with the classifier's
/// step.
const GEMINI: AcpAgent = AcpAgent {
    more_steps: || vec![classifier()],
    ..AcpAgent::new(
        "gem",
        ":streamGenerateContent",
        "read_file",
        last_user_text,
        gemini_acp,
    )
};

/// A daemon `[agents]` profile that lets Gemini CLI read its install,
/// write its own home (its user settings: API-key auth, nothing phoning
/// home) and open pseudo-terminals (its shell tool runs in one), and
/// `gemini --acp`, against the fake Gemini API.
fn gemini_acp(s: &Scratch, api: &FakeApi) -> Agent {
    let [home] = private_dirs(s, ["home"]);
    settings(&home, json!({}));
    // node_modules/@google/gemini-cli/bundle/gemini.js: the install.
    let (gemini, clis) = installed("gemini");
    let command = vec![
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
    ];
    Agent::confined(true, &clis, &[&home], command)
}

/// The classifier's step: Gemini CLI's model router asks a lite model to
/// score each request (a `generateContent` with no tools).
fn classifier() -> Value {
    json!({"text": "{\"reasoning\": \"a small task\", \"complexity_score\": 5}",
           "unless_tools": "read_file"})
}

#[test]
fn gemini_over_acp_is_gated_at_its_end_turn_nudged_by_prompt_and_passes_once_fixed() {
    // The policy is attached while the first call is held, so its end_turn
    // is the first turn-end it gates; the gate's reason is the next prompt.
    let said = ["I created DONE.", "Now DONE really exists."];
    let (run, _) = GEMINI.gated_then_fixed("gemini-acp", said);
    run.stop();
}

#[test]
fn a_write_gemini_asks_for_over_acp_is_escalated_allowed_by_the_operator_and_done() {
    let (run, calls) = GEMINI.a_write_escalated_then_allowed("gemini-acp-perm", "write_file", None);
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
    let tools = ["read_file", "run_shell_command"];
    let (run, calls) = GEMINI.told_to_read_the_token("gemini-acp-token", tools);
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
