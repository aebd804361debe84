//! The real Aider (pinned, from PyPI; installed by scripts/install-aider.sh)
//! with `gatehost check` as its test command, its documented use:
//! `aider --auto-test --test-cmd "gatehost check --config CONFIG GATES"`,
//! against the fake OpenAI Chat Completions API on loopback. Aider commits
//! each edit (asking the model for a commit message: a model call of its
//! own), then runs the test command; a failing gate's `gatehost check`
//! output is the model's next user message, and a fix that passes ends the
//! run. Aider reflects a failure at most three times per user message.

use crate::common;
use crate::common::agents::{
    AgentOutput, AgentRun, FakeApi, installed_tool, private_command, scratch_repo,
};
use crate::common::{Scratch, allow_config};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

const T: Duration = Duration::from_secs(180);
const MODEL_ROUTE: &str = "/v1/chat/completions";
/// What `gatehost check` prints for the failing gate, and Aider hands on.
const FAILURE: &str = "FAIL  done-file — exited with code 1";
/// How Aider puts the test command's output in the chat.
const RAN: &str = "I ran this command:";

/// The pinned Aider, in `$GATEHOST_AIDER_DIR` (default target/aider).
fn aider_cli() -> PathBuf {
    installed_tool(
        "GATEHOST_AIDER_DIR",
        "aider",
        "bin/aider",
        "install-aider.sh",
    )
}

/// A whole-file edit in Aider's `whole` format: a line of prose, then the
/// file's name on its own line and its entire content in a fence.
fn whole_file(prose: &str, name: &str, content: &str) -> String {
    format!("{prose}\n\n{name}\n```\n{content}\n```\n")
}

/// Runs Aider once against the fake API answering `script`, with "Create
/// the file DONE." as the user's one message, in the workspace (a git
/// repository); asserts it exited 0 after `calls` model calls, `turns` of
/// them the agent's turns. The turns and what Aider printed.
fn run_to_end(
    s: &Scratch,
    m: &str,
    script: Value,
    [calls, turns]: [usize; 2],
) -> (Vec<Value>, AgentOutput) {
    let api = FakeApi::start_script(&s.out, &script);
    let out = run_aider(s, m, &api, "Create the file DONE.");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(api.model_calls(MODEL_ROUTE).len(), calls, "{out:?}");
    let turns_made = agent_turns(&api);
    assert_eq!(turns_made.len(), turns, "{out:?}");
    (turns_made, out)
}

/// Runs Aider once, with `message` as the user's one message, in the
/// workspace (a git repository), with private HOME and TMPDIR and the gate
/// file in a directory named after the marker (so every process whose
/// argv carries the test command is found by it).
fn run_aider(s: &Scratch, m: &str, api: &FakeApi, message: &str) -> AgentOutput {
    let config = s.write("config.toml", &allow_config(&["test"]));
    let gate_dir = s.etc.join(format!("gatehost-test-{m}"));
    std::fs::create_dir_all(&gate_dir).expect("mkdir");
    let gates = gate_dir.join("gates.json");
    std::fs::write(
        &gates,
        r#"{"name": "done-file", "command": "test", "args": ["-f", "DONE"]}"#,
    )
    .expect("write the gate file");
    let test_cmd = format!(
        "{} check --config {} {}",
        env!("CARGO_BIN_EXE_gatehost"),
        config.display(),
        gates.display()
    );

    let root = s.out.join("aider");
    let (home, tmp) = (root.join("home"), root.join("tmp"));
    for d in [&home, &tmp] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    // Aider's commits need a name; the repository has none of its own.
    std::fs::write(
        home.join(".gitconfig"),
        "[user]\n\tname = t\n\temail = t@t\n",
    )
    .expect("gitconfig");
    // Without the model's metadata Aider fetches litellm's price list from
    // raw.githubusercontent.com to learn its context window.
    let metadata = root.join("model-metadata.json");
    std::fs::write(
        &metadata,
        json!({"openai/fake-model": {
            "max_input_tokens": 128000, "max_output_tokens": 4096,
            "input_cost_per_token": 0, "output_cost_per_token": 0,
            "litellm_provider": "openai", "mode": "chat",
        }})
        .to_string(),
    )
    .expect("metadata");

    let mut cmd = private_command(aider_cli(), &s.ws, "/usr/bin:/bin", [&home, &tmp]);
    cmd.args(["--model", "openai/fake-model", "--openai-api-base"])
        .arg(format!("{}/v1", api.url()))
        .arg("--model-metadata-file")
        .arg(&metadata)
        .args(["--edit-format", "whole", "--map-tokens", "0"])
        .args(["--yes-always", "--no-check-update", "--no-analytics"])
        .args(["--no-show-model-warnings", "--no-show-release-notes"])
        .args(["--no-gitignore", "--no-pretty", "--no-fancy-input"])
        .arg("--chat-history-file")
        .arg(root.join("chat-history.md"))
        .arg("--input-history-file")
        .arg(root.join("input-history"))
        .args(["--auto-test", "--test-cmd", &test_cmd])
        .args(["--message", message])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("OPENAI_API_KEY", "sk-fake")
        // litellm, at import: no fetch of its own copy of the price list.
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True");
    AgentRun::start(cmd, "", &s.out).finish(T)
}

/// The model calls that are the agent's turns (streamed), not the commit
/// messages Aider asks for after each edit (not streamed).
fn agent_turns(api: &FakeApi) -> Vec<Value> {
    api.model_calls(MODEL_ROUTE)
        .into_iter()
        .filter(|r| r["body"]["stream"] == true)
        .collect()
}

/// The last user message of a model request.
fn last_user_message(request: &Value) -> String {
    request["body"]["messages"]
        .as_array()
        .and_then(|ms| ms.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// Subjects of the workspace's commits, newest first.
fn commit_subjects(ws: &Path) -> Vec<String> {
    let out = std::process::Command::new("git")
        .args(["log", "--format=%s"])
        .current_dir(ws)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git log");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_failing_gate_reaches_the_model_through_the_test_command_and_the_fix_passes() {
    let (s, m) = scratch_repo("aider-fix");
    // Turns and commit messages alternate: edit, its commit message, ...
    let script = json!([
        {"text": whole_file("I wrote the notes.", "NOTES.md", "not done yet")},
        {"text": "Add notes"},
        {"text": whole_file("Now the DONE file.", "DONE", "done")},
        {"text": "Add DONE"},
    ]);
    // Two turns, each followed by its commit message: no third turn, so no
    // failure after the fix.
    let (turns, out) = run_to_end(&s, &m, script, [4, 2]);
    assert!(
        !turns[0]["body"].to_string().contains(FAILURE),
        "{}",
        turns[0]["body"]
    );
    // The first edit left the gate failing: the next turn's user message is
    // gatehost check's output, the gate's name and reason, as printed.
    let second = last_user_message(&turns[1]);
    assert!(
        second.starts_with(RAN) && second.contains(" check --config ") && second.contains(FAILURE),
        "{second}"
    );
    // Aider applied both edits and committed each before running the gate.
    assert_eq!(
        std::fs::read_to_string(s.ws.join("NOTES.md")).expect("NOTES.md"),
        "not done yet\n"
    );
    assert!(s.ws.join("DONE").is_file(), "{out:?}");
    assert_eq!(commit_subjects(&s.ws)[..2], ["Add DONE", "Add notes"]);
    // What the user saw: the failure, then the pass.
    let fail = out.stdout.find(FAILURE).expect("the failure is shown");
    let pass = out
        .stdout
        .find("PASS  done-file")
        .expect("the pass is shown");
    assert!(fail < pass, "{out:?}");
    common::assert_no_survivors(&m);
}

#[test]
fn a_gate_never_fixed_is_sent_back_three_times_then_aider_stops() {
    let (s, m) = scratch_repo("aider-never");
    let mut script = Vec::new();
    for n in 1..=4 {
        script.push(json!({"text": whole_file("Attempt.", "NOTES.md", &format!("attempt {n}"))}));
        script.push(json!({"text": format!("Attempt {n}")}));
    }
    // The first turn and three reflections, each with its commit message.
    let (turns, out) = run_to_end(&s, &m, Value::Array(script), [8, 4]);
    assert!(
        turns[1..]
            .iter()
            .all(|t| last_user_message(t).contains(FAILURE)),
        "{turns:#?}"
    );
    assert!(
        out.stdout.contains("Only 3 reflections allowed, stopping."),
        "{out:?}"
    );
    assert_eq!(out.stdout.matches(FAILURE).count(), 4, "{out:?}");
    common::assert_no_survivors(&m);
}
