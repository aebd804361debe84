//! The real Qwen Code (pinned 0.24.4, tests/support/agent-clis) gated by
//! `gatehost hook qwen`, against the fake model API on loopback
//! (tests/support/fake-model-api/openai_chat.py: Qwen Code speaks OpenAI chat
//! completions with `--auth-type openai`, `OPENAI_BASE_URL`,
//! `OPENAI_API_KEY`, `OPENAI_MODEL`; `-p --yolo` asks nothing).
//!
//! Each test runs `qwen -p` once, with a private HOME (its
//! `.qwen/settings.json` holds the hooks) and TMPDIR under the test's
//! scratch directory and a minimal environment, and checks what reached the
//! model: a refused stop is the next model request's last user message.
//! The flows are common::headless's.

use crate::common::agents::{
    AgentRun, agent_cli, chat_last_user_text, standalone_args, turn_calls,
};
use crate::common::headless::{Headless, cli_command, hook_command, prompt};
use serde_json::json;
use std::path::Path;

/// Qwen Code in standalone mode; its turn's calls are those carrying the
/// marker (a side query carries none of the prompt).
const QWEN: Headless = Headless {
    name: "qwen",
    route: "/v1/chat/completions",
    calls: turn_calls,
    text: chat_last_user_text,
    standalone: |s, api, m| {
        let (home, mut cmd) = cli_command(s, &agent_cli("qwen"));
        settings(&home, &hook_command(s, m, "qwen", &standalone_args(s, 2)));
        cmd.args(["-p", &prompt(m), "--auth-type", "openai", "--yolo"])
            .env("OPENAI_API_KEY", "sk-fake")
            .env("OPENAI_BASE_URL", format!("{}/v1", api.url()))
            .env("OPENAI_MODEL", "fake-model")
            .env("QWEN_CODE_SUPPRESS_YOLO_WARNING", "1");
        AgentRun::start_group(cmd, &s.out)
    },
};

/// Writes HOME/.qwen/settings.json: no managed auto-memory (else a side
/// query after the turn, a model call of its own), and `hook` as the
/// command of every event `gatehost hook install qwen` hooks, and of
/// `UserPromptSubmit` too: Qwen Code runs it again for every refused stop,
/// with the reason as its prompt, and it must not reset the count.
fn settings(home: &Path, hook: &str) {
    let entry = |timeout: u64| json!([{"hooks": [{"type": "command", "command": hook, "timeout": timeout}]}]);
    let settings = json!({
        "memory": {"enableManagedAutoMemory": false},
        "hooks": {
            "Stop": entry(60), "SubagentStop": entry(60), "SessionStart": entry(60),
            "UserPromptSubmit": entry(60), "SessionEnd": entry(3),
        },
    });
    let dir = home.join(".qwen");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("settings.json"), settings.to_string()).expect("settings");
}

#[test]
fn a_failing_gate_reaches_the_model_and_the_fixed_turn_ends_the_run() {
    let said = QWEN.a_fixed_turn_ends_the_run().stderr;
    assert!(!said.contains("blocked, out of retries"), "{said}");
}

#[test]
fn a_gate_never_fixed_blocks_exactly_max_retries_times_then_tells_the_user() {
    let (_, _, end) = QWEN.a_gate_never_fixed_blocks_twice();
    // The third stop went through, and the user was told why the work is
    // not accepted: Qwen Code prints a hook's systemMessage on stderr.
    let said = &end.stderr;
    assert!(
        said.contains("blocked, out of retries") && said.contains("DONE exists"),
        "{said}"
    );
}
