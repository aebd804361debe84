//! `gatehost hook cursor` as Cursor would run it: its documented hook JSON
//! (tests/fixtures/hooks/cursor/, with the test's workspace as
//! `workspace_roots`) on stdin, the documented answer on stdout, exit 0.
//! Cursor itself is not run (its CLI is not on a registry here).

use crate::common::agents::DONE_GATES;
use crate::common::hooks::{Answer, gatehost_hook, spawn_with_input, wait_bounded};
use crate::common::{Scratch, assert_no_survivors, fixture, marker};
use serde_json::{Value, json};
use std::time::Duration;

/// One test's workspace and marker, and Cursor's hooks run on it.
struct Cursor {
    s: Scratch,
    m: String,
}

impl Cursor {
    fn new(name: &str) -> Cursor {
        Cursor {
            s: Scratch::new(),
            m: marker(name),
        }
    }

    /// A fixture with the test's workspace as its only root (and, for the
    /// stop after follow-ups, no transcript).
    fn fixture(&self, name: &str) -> Vec<u8> {
        let raw = std::fs::read(fixture(&format!("hooks/cursor/{name}"))).expect("fixture");
        let bom = raw.starts_with(b"\xEF\xBB\xBF");
        let mut v: Value =
            serde_json::from_slice(raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&raw))
                .expect("fixture JSON");
        v["workspace_roots"] = json!([self.s.ws.display().to_string()]);
        v["transcript_path"] = Value::Null;
        let mut out = if bom {
            b"\xEF\xBB\xBF".to_vec()
        } else {
            Vec::new()
        };
        out.extend_from_slice(v.to_string().as_bytes());
        out
    }

    /// Cursor's completed stop.
    fn stop(&self) -> Vec<u8> {
        self.fixture("stop-completed.json")
    }

    /// Runs `gatehost hook cursor --gates … --config … --max-retries N
    /// --state-dir …` with `input` on stdin (a new generation's stop).
    fn hook(&self, max_retries: u32, input: &[u8]) -> Answer {
        let s = &self.s;
        let gates = s.write("gates.json", DONE_GATES);
        let config = s.write("config.toml", "[shell]\nallow = [\"test\"]\n");
        let state = s.out.join(format!("state-gatehost-test-{}", self.m));
        let mut cmd = gatehost_hook("cursor", &s.out.join("home"));
        cmd.arg("--gates")
            .arg(&gates)
            .arg("--config")
            .arg(&config)
            .args(["--max-retries", &max_retries.to_string(), "--state-dir"])
            .arg(&state);
        let child = spawn_with_input(&mut cmd, &new_generation(input));
        wait_bounded(child, Duration::from_secs(60)).into()
    }

    /// `input` is sent back with the failing gate's name; the message.
    #[track_caller]
    fn sent_back(&self, max_retries: u32, input: &[u8]) -> String {
        let message = followup(&self.hook(max_retries, input));
        assert!(message.contains("DONE exists"), "{message}");
        message
    }
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
    let c = Cursor::new("cursor-fix");
    let message = c.sent_back(2, &c.stop());
    assert!(message.contains("did not pass"), "{message}");
    // The agent fixes it; the next stop (after one follow-up) passes.
    c.s.write_ws("DONE", "done\n");
    lets_it_stop(&c.hook(2, &c.fixture("stop-followup.json")));
    // And a new turn's stop passes too: nothing is left counted.
    lets_it_stop(&c.hook(2, &c.stop()));
    assert_no_survivors(&c.m);
}

#[test]
fn a_gate_never_fixed_gets_max_retries_follow_ups_then_lets_cursor_stop() {
    let c = Cursor::new("cursor-never");
    for _ in 0..2 {
        c.sent_back(2, &c.stop());
    }
    // Out of retries: the stop goes through; Cursor shows a stop hook no
    // message, so the block is named on stderr.
    let third = c.hook(2, &c.stop());
    lets_it_stop(&third);
    let said = &third.stderr;
    assert!(
        said.contains("blocked, out of retries") && said.contains("DONE exists"),
        "{said}"
    );
    lets_it_stop(&c.hook(2, &c.stop()));
    // A person's new prompt starts the count again.
    let prompt = c.hook(2, &c.fixture("before-submit-prompt.json"));
    assert_eq!(prompt.code, 0);
    assert_eq!(prompt.stdout, r#"{"continue":true}"#);
    c.sent_back(2, &c.stop());
    assert_no_survivors(&c.m);
}

#[test]
fn gatehosts_own_follow_up_submitted_as_a_prompt_does_not_start_the_count_again() {
    // Cursor submits a followup_message as the next user message; if it
    // runs beforeSubmitPrompt for it, that prompt is gatehost's own words,
    // not a person's: the count goes on (as Gemini CLI's BeforeAgent once
    // showed, a reset there means blocks without end).
    let c = Cursor::new("cursor-own-prompt");
    let prompt_of = |text: &str| {
        let mut v: Value =
            serde_json::from_slice(&c.fixture("before-submit-prompt.json")).expect("JSON");
        v["prompt"] = json!(text);
        v.to_string().into_bytes()
    };
    let message = followup(&c.hook(1, &c.stop()));
    // Submitted back verbatim (and with a trailing newline): no reset.
    for echoed in [message.clone(), format!("{message}\n")] {
        let answer = c.hook(1, &prompt_of(&echoed));
        assert_eq!(answer.stdout, r#"{"continue":true}"#, "{}", answer.stderr);
    }
    // So the one retry is spent: the next stop goes through, named.
    let out = c.hook(1, &c.stop());
    lets_it_stop(&out);
    let said = &out.stderr;
    assert!(said.contains("blocked, out of retries"), "{said}");
    // A person's own prompt does start it again.
    c.hook(1, &prompt_of("Please make DONE exist."));
    c.sent_back(1, &c.stop());
    assert_no_survivors(&c.m);
}

#[test]
fn an_aborted_or_failed_turn_is_let_stop_without_spending_a_retry() {
    let c = Cursor::new("cursor-aborted");
    for name in ["stop-aborted.json", "stop-error.json"] {
        lets_it_stop(&c.hook(1, &c.fixture(name)));
    }
    // The one retry is still there for the next completed stop.
    c.sent_back(1, &c.stop());
    lets_it_stop(&c.hook(1, &c.stop()));
    assert_no_survivors(&c.m);
}

#[test]
fn a_bom_is_read_and_unreadable_input_never_lets_a_stop_through_silently() {
    let c = Cursor::new("cursor-input");
    let bom = c.fixture("stop-bom.json");
    assert!(bom.starts_with(b"\xEF\xBB\xBF"));
    c.sent_back(2, &bom);
    let garbage = followup(&c.hook(2, b"not json"));
    assert!(
        garbage.contains("gatehost hook cursor") && garbage.contains("not JSON"),
        "{garbage}"
    );
    let mut no_root: Value = serde_json::from_slice(&c.stop()).expect("JSON");
    no_root["workspace_roots"] = json!([]);
    let missing = followup(&c.hook(2, no_root.to_string().as_bytes()));
    assert!(missing.contains("workspace_roots"), "{missing}");
    assert_no_survivors(&c.m);
}
