//! The real GitHub Copilot CLI (pinned 1.0.102, tests/support/agent-clis) gated by
//! `gatehost hook copilot`, against the fake model API on loopback
//! (tests/support/fake-model-api/openai_chat.py: with a custom provider,
//! `COPILOT_PROVIDER_BASE_URL`, `COPILOT_PROVIDER_API_KEY`, `COPILOT_MODEL`,
//! and `COPILOT_OFFLINE=1`, `copilot -p` needs no GitHub login).
//!
//! Each test installs the hooks with `gatehost hook install copilot` into a
//! private `COPILOT_HOME` (`hooks/gatehost.json`), runs `copilot -p` once
//! with a minimal environment, and checks what reached the model: a refused
//! stop is the next model request's last user message. The flows are
//! common::headless's.

use crate::common::Scratch;
use crate::common::agents::{
    AgentRun, FakeApi, agent_cli, chat_last_user_text, standalone_args, turn_calls,
};
use crate::common::headless::{Headless, cli_command, prompt, state_dir};
use std::process::Command;

/// The fake API's route for the agent's model calls.
pub(crate) const ROUTE: &str = "/v1/chat/completions";

/// Copilot CLI in standalone mode; its turn's calls are those carrying
/// the marker.
const COPILOT: Headless = Headless {
    name: "copilot",
    route: ROUTE,
    calls: turn_calls,
    text: chat_last_user_text,
    standalone: |s, api, m| start(s, api, m, &standalone_args(s, 2)),
};

/// Installs the hooks (`gatehost hook install copilot ARGS --state-dir
/// DIR` into a private `COPILOT_HOME`) and starts `copilot -p PROMPT` in
/// `s.ws` against `api`, in a process group of its own (so a failed test
/// can kill all of it).
pub(crate) fn start(s: &Scratch, api: &FakeApi, m: &str, args: &[String]) -> AgentRun {
    let (home, mut cmd) = cli_command(s, &agent_cli("copilot"));
    let copilot_home = home.join(".copilot");
    let out = Command::new(env!("CARGO_BIN_EXE_gatehost"))
        .args(["hook", "install", "copilot"])
        .args(args)
        .args(["--state-dir", &state_dir(s, m)])
        .env("HOME", &home)
        .env("COPILOT_HOME", &copilot_home)
        .output()
        .expect("gatehost runs");
    assert!(out.status.success(), "{out:?}");
    cmd.args(["-p", &prompt(m), "--allow-all-tools"])
        .env("COPILOT_HOME", &copilot_home)
        .env("COPILOT_AUTO_UPDATE", "false")
        .env("COPILOT_OFFLINE", "1")
        .env("COPILOT_PROVIDER_BASE_URL", format!("{}/v1", api.url()))
        .env("COPILOT_PROVIDER_API_KEY", "sk-fake")
        .env("COPILOT_MODEL", "fake-model");
    AgentRun::start_group(cmd, &s.out)
}

#[test]
fn a_failing_gate_reaches_the_model_and_the_fixed_turn_ends_the_run() {
    COPILOT.a_fixed_turn_ends_the_run();
}

#[test]
fn a_gate_never_fixed_blocks_exactly_max_retries_times_then_is_recorded() {
    let (s, m, _) = COPILOT.a_gate_never_fixed_blocks_twice();
    // The third stop went through; Copilot CLI shows no stop hook's
    // message, so the record says why the work is not accepted.
    let status = Command::new(env!("CARGO_BIN_EXE_gatehost"))
        .args(["hook", "status", "--last", "--json", "--state-dir"])
        .arg(state_dir(&s, &m))
        .output()
        .expect("gatehost runs");
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("DONE exists"), "{status:?}");
}
