//! `gatehost hook cursor` as Cursor would run it: its documented hook JSON
//! (tests/fixtures/hooks/cursor/, with the test's workspace as
//! `workspace_roots`) on stdin, the documented answer on stdout, exit 0.
//! Cursor itself is not run (its CLI is not on a registry here).

use crate::common::agents::DONE_GATES;
use crate::common::{Scratch, assert_no_survivors, fixture, marker};
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Answer {
    code: i32,
    stdout: String,
    stderr: String,
}

/// A fixture with the test's workspace as its only root (and, for the
/// stop after follow-ups, no transcript).
fn fixture_in(name: &str, ws: &Path) -> Vec<u8> {
    let raw = std::fs::read(fixture(&format!("hooks/cursor/{name}"))).expect("fixture");
    let bom = raw.starts_with(b"\xEF\xBB\xBF");
    let mut v: Value = serde_json::from_slice(raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&raw))
        .expect("fixture JSON");
    v["workspace_roots"] = json!([ws.display().to_string()]);
    v["transcript_path"] = Value::Null;
    let mut out = if bom {
        b"\xEF\xBB\xBF".to_vec()
    } else {
        Vec::new()
    };
    out.extend_from_slice(v.to_string().as_bytes());
    out
}

/// `input` as a new stop of Cursor's: each call a generation of its own
/// (the fixtures' generation ids replaced), as Cursor sends them; one stop
/// reaching gatehost twice is tests/hooks/once.rs's.
fn new_generation(input: &[u8]) -> Vec<u8> {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut text = String::from_utf8(input.to_vec()).expect("UTF-8 fixture");
    for id in [
        "26b45fb6-bdea-439c-b2dc-5e97ee00ecea",
        "7f1c0a9e-51b2-4d8e-9a43-0c6f3e2b8d11",
    ] {
        text = text.replace(id, &format!("generation-{}-{n}", std::process::id()));
    }
    text.into_bytes()
}

/// Runs `gatehost hook cursor --gates … --config … --max-retries N
/// --state-dir …` with `input` on stdin (a new generation's stop).
fn hook(s: &Scratch, m: &str, max_retries: u32, input: &[u8]) -> Answer {
    let input = &new_generation(input)[..];
    let gates = s.write("gates.json", DONE_GATES);
    let config = s.write("config.toml", "[shell]\nallow = [\"test\"]\n");
    let state = s.out.join(format!("state-gatehost-test-{m}"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_gatehost"))
        .args(["hook", "cursor", "--gates"])
        .arg(&gates)
        .arg("--config")
        .arg(&config)
        .args(["--max-retries", &max_retries.to_string(), "--state-dir"])
        .arg(&state)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", s.out.join("home"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gatehost runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("hook JSON written");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("gatehost hook cursor ran past 60 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().expect("output");
    Answer {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The answer is exactly `{"followup_message": …}`; its message.
#[track_caller]
fn followup(a: &Answer) -> String {
    assert_eq!(a.code, 0, "stderr:\n{}", a.stderr);
    let v: Value = serde_json::from_str(&a.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {:?}", a.stdout));
    let obj = v.as_object().expect("an object");
    assert_eq!(obj.len(), 1, "only followup_message: {v}");
    obj["followup_message"]
        .as_str()
        .unwrap_or_else(|| panic!("no followup_message: {v}"))
        .to_string()
}

/// The answer is exactly `{}`: Cursor lets the agent stop.
#[track_caller]
fn lets_it_stop(a: &Answer) {
    assert_eq!(a.code, 0, "stderr:\n{}", a.stderr);
    assert_eq!(a.stdout, "{}", "stderr:\n{}", a.stderr);
}

#[test]
fn a_failing_gate_continues_the_agent_and_a_passing_one_lets_it_stop() {
    let s = Scratch::new();
    let m = marker("cursor-fix");
    let stop = fixture_in("stop-completed.json", &s.ws);
    let message = followup(&hook(&s, &m, 2, &stop));
    assert!(
        message.contains("DONE exists") && message.contains("did not pass"),
        "{message}"
    );
    // The agent fixes it; the next stop (after one follow-up) passes.
    s.write_ws("DONE", "done\n");
    lets_it_stop(&hook(&s, &m, 2, &fixture_in("stop-followup.json", &s.ws)));
    // And a new turn's stop passes too: nothing is left counted.
    lets_it_stop(&hook(&s, &m, 2, &stop));
    assert_no_survivors(&m);
}

#[test]
fn a_gate_never_fixed_gets_max_retries_follow_ups_then_lets_cursor_stop() {
    let s = Scratch::new();
    let m = marker("cursor-never");
    let stop = fixture_in("stop-completed.json", &s.ws);
    for _ in 0..2 {
        assert!(followup(&hook(&s, &m, 2, &stop)).contains("DONE exists"));
    }
    // Out of retries: the stop goes through; Cursor shows a stop hook no
    // message, so the block is named on stderr.
    let third = hook(&s, &m, 2, &stop);
    lets_it_stop(&third);
    assert!(
        third.stderr.contains("blocked, out of retries") && third.stderr.contains("DONE exists"),
        "{}",
        third.stderr
    );
    lets_it_stop(&hook(&s, &m, 2, &stop));
    // A person's new prompt starts the count again.
    let prompt = hook(&s, &m, 2, &fixture_in("before-submit-prompt.json", &s.ws));
    assert_eq!(prompt.code, 0);
    assert_eq!(prompt.stdout, r#"{"continue":true}"#);
    assert!(followup(&hook(&s, &m, 2, &stop)).contains("DONE exists"));
    assert_no_survivors(&m);
}

#[test]
fn gatehosts_own_follow_up_submitted_as_a_prompt_does_not_start_the_count_again() {
    // Cursor submits a followup_message as the next user message; if it
    // runs beforeSubmitPrompt for it, that prompt is gatehost's own words,
    // not a person's: the count goes on (as Gemini CLI's BeforeAgent once
    // showed, a reset there means blocks without end).
    let s = Scratch::new();
    let m = marker("cursor-own-prompt");
    let stop = fixture_in("stop-completed.json", &s.ws);
    let prompt_of = |text: &str| {
        let mut v: Value =
            serde_json::from_slice(&fixture_in("before-submit-prompt.json", &s.ws)).expect("JSON");
        v["prompt"] = json!(text);
        v.to_string().into_bytes()
    };
    let message = followup(&hook(&s, &m, 1, &stop));
    // Submitted back verbatim (and with a trailing newline): no reset.
    for echoed in [message.clone(), format!("{message}\n")] {
        let answer = hook(&s, &m, 1, &prompt_of(&echoed));
        assert_eq!(answer.stdout, r#"{"continue":true}"#, "{}", answer.stderr);
    }
    // So the one retry is spent: the next stop goes through, named.
    let out = hook(&s, &m, 1, &stop);
    lets_it_stop(&out);
    assert!(
        out.stderr.contains("blocked, out of retries"),
        "{}",
        out.stderr
    );
    // A person's own prompt does start it again.
    hook(&s, &m, 1, &prompt_of("Please make DONE exist."));
    assert!(followup(&hook(&s, &m, 1, &stop)).contains("DONE exists"));
    assert_no_survivors(&m);
}

#[test]
fn an_aborted_or_failed_turn_is_let_stop_without_spending_a_retry() {
    let s = Scratch::new();
    let m = marker("cursor-aborted");
    for name in ["stop-aborted.json", "stop-error.json"] {
        lets_it_stop(&hook(&s, &m, 1, &fixture_in(name, &s.ws)));
    }
    // The one retry is still there for the next completed stop.
    let stop = fixture_in("stop-completed.json", &s.ws);
    assert!(followup(&hook(&s, &m, 1, &stop)).contains("DONE exists"));
    lets_it_stop(&hook(&s, &m, 1, &stop));
    assert_no_survivors(&m);
}

#[test]
fn a_bom_is_read_and_unreadable_input_never_lets_a_stop_through_silently() {
    let s = Scratch::new();
    let m = marker("cursor-input");
    let bom = fixture_in("stop-bom.json", &s.ws);
    assert!(bom.starts_with(b"\xEF\xBB\xBF"));
    assert!(followup(&hook(&s, &m, 2, &bom)).contains("DONE exists"));
    let garbage = followup(&hook(&s, &m, 2, b"not json"));
    assert!(
        garbage.contains("gatehost hook cursor") && garbage.contains("not JSON"),
        "{garbage}"
    );
    let mut no_root: Value =
        serde_json::from_slice(&fixture_in("stop-completed.json", &s.ws)).expect("JSON");
    no_root["workspace_roots"] = json!([]);
    let missing = followup(&hook(&s, &m, 2, no_root.to_string().as_bytes()));
    assert!(missing.contains("workspace_roots"), "{missing}");
    assert_no_survivors(&m);
}
