//! The real Claude Code CLI (2.1.332) starts a sub-agent (the `Agent` tool,
//! in the foreground) because the fake Anthropic API tells it to, and
//! `gatehost hook claude --gates PARENT --subagent-gates SUB` answers its
//! `SubagentStop` and `Stop`: the sub-agent's failing gate sends the
//! sub-agent back (not the parent), a fixed workspace lets it finish, the
//! parent's stop is gated by the parent's gates, and the two are counted
//! and recorded apart (`claude:SESSION` and `claude:SESSION/subagent/AGENT`).
//!
//! A sub-agent's stops all carry the parent's `transcript_path`, which
//! does not grow while the sub-agent runs: the hook tells them apart by the
//! sub-agent's own `agent_transcript_path` (docs/compatibility.md, "Claude Code").

use crate::agents::claude::{Claude, hook_status};
use crate::common;
use crate::common::agents::{FakeApi, scratch_repo};
use crate::common::{Scratch, allow_config};
use serde_json::{Value, json};
use std::time::Duration;

const T: Duration = Duration::from_secs(120);
const MODEL_ROUTE: &str = "/v1/messages";
/// Words of the nudge that only a blocked stop puts in a model request.
const NUDGE: &str = "did not pass";
/// In Claude Code 2.1.332 the sub-agent's requests, and only they, have
/// this in their system prompt (its first block, the billing header); they
/// also carry the header `x-claude-code-agent-id: <agent_id>`.
const SUBAGENT_MARK: &str = "cc_is_subagent=true";
const SESSION: &str = "7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f";

/// The hook command with a gate of its own for the parent (`test -f
/// PARENT-OK`) and for the sub-agent (`test -f SUB-OK`).
fn subagent_hook(s: &Scratch, marker: &str, max_retries: u32) -> String {
    let config = s.write("config.toml", &allow_config(&["test"]));
    let parent = s.write(
        "parent-gates.json",
        r#"{"command": "test", "args": ["-f", "PARENT-OK"]}"#,
    );
    let sub = s.write(
        "sub-gates.json",
        r#"{"command": "test", "args": ["-f", "SUB-OK"]}"#,
    );
    format!(
        "{} hook claude --gates {} --subagent-gates {} --config {} --max-retries {max_retries} --state-dir {}",
        env!("CARGO_BIN_EXE_gatehost"),
        parent.display(),
        sub.display(),
        config.display(),
        s.out.join(format!("gatehost-test-{marker}")).display()
    )
}

/// One parent turn that starts one sub-agent in the foreground (so the
/// parent waits for it: no stop of the parent while it runs), the
/// sub-agent stopping twice (the second time once `release_sub` exists),
/// then the parent stopping twice (the second time once `release_parent`
/// exists). Each step matches only its own side's requests, so the order
/// the calls come in cannot hand a step to the wrong one.
fn script(release_sub: &std::path::Path, release_parent: &std::path::Path) -> Value {
    json!([
        {"unless_system": SUBAGENT_MARK, "text": "I will delegate this.",
         "tool_use": {"names": ["Agent", "Task"], "input": {
             "description": "Create SUB-OK",
             "prompt": "Create the file SUB-OK, then stop.",
             "subagent_type": "general-purpose",
             "run_in_background": false}}},
        {"when_system": SUBAGENT_MARK, "text": "SUB: I am done."},
        {"when_system": SUBAGENT_MARK, "text": "SUB: fixed, SUB-OK exists now.",
         "hold_until": release_sub},
        {"unless_system": SUBAGENT_MARK, "text": "PARENT: I am done."},
        {"unless_system": SUBAGENT_MARK, "text": "PARENT: fixed, PARENT-OK exists now.",
         "hold_until": release_parent},
    ])
}

fn call_for_step(api: &FakeApi, n: u64) -> Value {
    api.call_for_step(MODEL_ROUTE, n, T)
}

/// The sub-agent's id, as Claude Code sends it with the sub-agent's
/// requests (the same as `agent_id` on its `SubagentStop`).
fn agent_id(call: &Value) -> Option<String> {
    call["headers"]["x-claude-code-agent-id"]
        .as_str()
        .map(str::to_string)
}

#[test]
fn a_subagents_failing_gate_sends_the_subagent_back_and_the_parent_is_gated_apart() {
    let (s, m) = scratch_repo("claude-subagent");
    let (release_sub, release_parent) = (s.out.join("release-sub"), s.out.join("release-parent"));
    let api = FakeApi::start_script(&s.out, &script(&release_sub, &release_parent));
    let claude = Claude::new(&s, &m);
    claude.hooks(&subagent_hook(&s, &m, 2));
    // `--tools` again after `start`'s `--tools ''`: the last one wins
    // (measured), so the only tool is `Agent` (`Task` is its alias).
    let run = claude.start(
        &s.ws,
        &api,
        &[],
        &["--tools", "Agent", "--session-id", SESSION],
        &s.out,
    );

    // The sub-agent's first stop was refused by the sub-agent's gate: its
    // next request (a sub-agent's) carries that gate's reason, not the
    // parent's.
    let sub_retry = call_for_step(&api, 2);
    let agent = agent_id(&sub_retry).expect("a sub-agent's request");
    let body = sub_retry["body"].to_string();
    assert!(
        body.contains(NUDGE) && body.contains("test -f SUB-OK"),
        "{body}"
    );
    assert!(!body.contains("test -f PARENT-OK"), "{body}");
    let so_far = api.model_calls(MODEL_ROUTE);
    assert_eq!(agent_id(&so_far[0]), None, "the parent's first call");
    assert_eq!(agent_id(&so_far[1]).as_deref(), Some(agent.as_str()));
    assert!(!so_far[1]["body"].to_string().contains(NUDGE));
    // Fixed while the sub-agent "thinks": its next stop passes.
    std::fs::write(s.ws.join("SUB-OK"), "").expect("fix the sub-agent's work");
    std::fs::write(&release_sub, "").expect("release");

    // Back in the parent: it got the sub-agent's report, and none of the
    // sub-agent's nudges; its own first stop is refused by the parent's gate.
    let parent_first = call_for_step(&api, 3);
    assert_eq!(agent_id(&parent_first), None, "{parent_first}");
    let body = parent_first["body"].to_string();
    assert!(body.contains("SUB: fixed, SUB-OK exists now."), "{body}");
    assert!(!body.contains(NUDGE), "{body}");
    let parent_retry = call_for_step(&api, 4);
    assert_eq!(agent_id(&parent_retry), None);
    let body = parent_retry["body"].to_string();
    assert!(
        body.contains(NUDGE) && body.contains("test -f PARENT-OK"),
        "{body}"
    );
    std::fs::write(s.ws.join("PARENT-OK"), "").expect("fix the parent's work");
    std::fs::write(&release_parent, "").expect("release");
    let out = run.finish(T);

    assert!(out.status.success(), "{out:?}");
    assert!(
        out.stdout.contains("PARENT: fixed, PARENT-OK exists now."),
        "{out:?}"
    );
    let steps: Vec<Value> = api
        .model_calls(MODEL_ROUTE)
        .iter()
        .map(|c| c["step"].clone())
        .collect();
    // Exactly one model call per step: no stop was refused twice (the bug
    // this catches: the sub-agent's fixed stop refused again, step 2
    // repeated until Claude Code's own cap).
    assert_eq!(
        steps,
        [json!(0), json!(1), json!(2), json!(3), json!(4)],
        "{out:?}"
    );

    // Two records, each counted on its own.
    let (code, parent) = hook_status(&s, &m, &[&format!("claude:{SESSION}")]);
    assert_eq!(code, 0, "{parent}");
    assert_eq!(parent["outcome"], "passed", "{parent}");
    assert_eq!(
        (&parent["stops"], &parent["sentBack"], &parent["letThrough"]),
        (&json!(2), &json!(1), &json!(0)),
        "{parent}"
    );
    let sub_id = format!("claude:{SESSION}/subagent/{agent}");
    let (code, sub) = hook_status(&s, &m, &[&sub_id]);
    assert_eq!(code, 0, "{sub}");
    assert_eq!(sub["session"], json!(sub_id), "{sub}");
    assert_eq!(sub["outcome"], "passed", "{sub}");
    assert_eq!(
        (&sub["stops"], &sub["sentBack"], &sub["letThrough"]),
        (&json!(2), &json!(1), &json!(0)),
        "{sub}"
    );
    common::assert_no_survivors(&m);
}

#[test]
fn a_subagents_gate_never_fixed_blocks_it_exactly_max_retries_times_and_the_parent_goes_on() {
    let (s, m) = scratch_repo("claude-subagent-never");
    // The parent's gate passes from the start; the sub-agent's never does.
    std::fs::write(s.ws.join("PARENT-OK"), "").expect("parent ok");
    let (release_sub, release_parent) = (s.out.join("release-sub"), s.out.join("release-parent"));
    std::fs::write(&release_sub, "").expect("no hold");
    std::fs::write(&release_parent, "").expect("no hold");
    let api = FakeApi::start_script(&s.out, &script(&release_sub, &release_parent));
    let claude = Claude::new(&s, &m);
    claude.hooks(&subagent_hook(&s, &m, 2));
    let out = claude
        .start(
            &s.ws,
            &api,
            &[],
            &["--tools", "Agent", "--session-id", SESSION],
            &s.out,
        )
        .finish(T);
    assert!(out.status.success(), "{out:?}");

    let calls = api.model_calls(MODEL_ROUTE);
    let sub_calls: Vec<&Value> = calls.iter().filter(|c| agent_id(c).is_some()).collect();
    // One first call, then one per refused stop: two (--max-retries 2), not
    // Claude Code's own cap of eight; the third stop is let through.
    assert_eq!(sub_calls.len(), 3, "{calls:#?}");
    let nudged = sub_calls
        .iter()
        .filter(|c| c["body"].to_string().contains(NUDGE))
        .count();
    assert_eq!(nudged, 2);
    // The parent: its first call, then its one stop, which passed.
    assert_eq!(calls.len() - sub_calls.len(), 2, "{calls:#?}");
    let agent = agent_id(sub_calls[0]).expect("id");

    let (code, sub) = hook_status(&s, &m, &[&format!("claude:{SESSION}/subagent/{agent}")]);
    assert_eq!(code, 1, "{sub}");
    assert_eq!(
        (&sub["outcome"], &sub["why"]),
        (&json!("let-through"), &json!("out-of-retries")),
        "{sub}"
    );
    assert_eq!(
        (&sub["stops"], &sub["sentBack"], &sub["letThrough"]),
        (&json!(3), &json!(2), &json!(1)),
        "{sub}"
    );
    let (code, parent) = hook_status(&s, &m, &[&format!("claude:{SESSION}")]);
    assert_eq!(
        (code, &parent["outcome"]),
        (0, &json!("passed")),
        "{parent}"
    );
    assert_eq!(parent["stops"], json!(1), "{parent}");
    // Measured: Claude Code 2.1.332 does not show a SubagentStop's
    // `systemMessage` in `-p --output-format stream-json` (no
    // `system`/`informational` line; it is only in the sub-agent's
    // transcript), so the let-through is not asserted on stdout here.
    common::assert_no_survivors(&m);
}
