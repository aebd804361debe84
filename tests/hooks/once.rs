//! One decision per stop (issue 29): the same gate installed for Cursor
//! (`.cursor/hooks.json`) and for Claude Code (`.claude/settings.json`,
//! whose project hooks Cursor runs too) sees each of Cursor's stops twice:
//! once as Cursor's `stop`, once as a Claude Code-compatible `Stop`. The
//! gate runs once, both answers agree, and the retry is counted once.
//! Sub-agent stops are gated on a budget of their own.
//!
//! Cursor is not on a registry here: its payloads are the documented ones
//! (tests/fixtures/hooks/cursor/, `claude-compatible-stop.json` for the
//! Claude Code-shaped one), piped into the real `gatehost hook` processes.

use crate::common::hooks::{Answer, gatehost_hook, spawn_with_input, wait_bounded};
use crate::common::{Scratch, assert_no_survivors, fixture, marker, sandbox_config};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const CONVERSATION: &str = "cdefee2d-2727-4b73-bf77-d9d830f31d2a";
/// The longest one hook may run.
const LIMIT: Duration = Duration::from_secs(90);

/// The workspace, the counted gate and the hooks' shared state.
struct Setup {
    s: Scratch,
    m: String,
    gates: PathBuf,
    config: PathBuf,
    state: PathBuf,
    count: PathBuf,
    transcript: PathBuf,
}

impl Setup {
    /// A gate that counts its runs in `count` (and, with `release`, waits
    /// for that workspace file before deciding).
    fn new(release: Option<&str>) -> Setup {
        let s = Scratch::new();
        let m = marker("hook-once");
        // Its own directory, the one the sandbox lets the gate write (not
        // the hook's HOME beside it, where gatehost keeps its own files).
        let runs = s.out.join("runs");
        std::fs::create_dir_all(&runs).expect("mkdir runs");
        let count = runs.join("count");
        let mut args = vec![json!(fixture("gates/count-runs.sh").display().to_string())];
        args.push(json!(count.display().to_string()));
        if let Some(r) = release {
            args.push(json!(r));
        }
        let gates = s.write(
            "gates.json",
            &json!([{"name": "counted", "command": "bash", "args": args, "timeoutMs": 60000}])
                .to_string(),
        );
        let config = s.write(
            "config.toml",
            &format!(
                "{}[shell]\nallow = [{{ program = \"bash\", free_args = true }}]\n",
                sandbox_config(&[&runs])
            ),
        );
        let state = s.out.join(format!("state-gatehost-test-{m}"));
        let transcript = s.out.join("transcript.jsonl");
        std::fs::write(&transcript, "{\"role\":\"user\"}\n").expect("transcript");
        Setup {
            s,
            m,
            gates,
            config,
            state,
            count,
            transcript,
        }
    }

    fn runs(&self) -> usize {
        std::fs::read_to_string(&self.count)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }

    /// The agent says more: the transcript grows (the next stop's differs).
    fn next_turn(&self) {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.transcript)
            .expect("transcript");
        writeln!(f, "{{\"role\":\"assistant\"}}").expect("append");
    }

    /// Cursor's own `stop` for generation `generation`.
    fn cursor_stop(&self, generation: Option<&str>) -> Value {
        let raw = std::fs::read(fixture("hooks/cursor/stop-completed.json")).expect("fixture");
        let mut v: Value = serde_json::from_slice(&raw).expect("JSON");
        v["workspace_roots"] = json!([self.s.ws.display().to_string()]);
        v["transcript_path"] = json!(self.transcript.display().to_string());
        match generation {
            Some(g) => v["generation_id"] = json!(g),
            None => {
                v.as_object_mut().expect("object").remove("generation_id");
            }
        }
        v
    }

    /// The Claude Code-compatible `Stop` Cursor sends to Claude Code's
    /// project hooks for the same generation.
    fn claude_stop(&self, generation: Option<&str>) -> Value {
        let raw =
            std::fs::read(fixture("hooks/cursor/claude-compatible-stop.json")).expect("fixture");
        let mut v: Value = serde_json::from_slice(&raw).expect("JSON");
        v["workspace_roots"] = json!([self.s.ws.display().to_string()]);
        v["cwd"] = json!(self.s.ws.display().to_string());
        v["transcript_path"] = json!(self.transcript.display().to_string());
        match generation {
            Some(g) => v["generation_id"] = json!(g),
            None => {
                v.as_object_mut().expect("object").remove("generation_id");
            }
        }
        v
    }

    fn spawn(&self, agent: &str, extra: &[&str], input: &Value) -> Child {
        let mut cmd = gatehost_hook(agent, &self.s.out.join("home"));
        cmd.arg("--gates")
            .arg(&self.gates)
            .arg("--config")
            .arg(&self.config)
            .args(["--max-retries", "2", "--state-dir"])
            .arg(&self.state)
            .args(extra)
            .env("GATEHOST_LOG", "gatehost=info")
            .current_dir(&self.s.ws);
        spawn_with_input(&mut cmd, input.to_string().as_bytes())
    }

    fn hook(&self, agent: &str, input: &Value) -> Answer {
        self.hook_with(agent, &[], input)
    }

    fn hook_with(&self, agent: &str, extra: &[&str], input: &Value) -> Answer {
        finish(self.spawn(agent, extra, input))
    }

    fn status(&self, session: &str) -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_gatehost"))
            .args(["hook", "status", session, "--json", "--state-dir"])
            .arg(&self.state)
            .output()
            .expect("gatehost hook status");
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("status JSON ({e}): {out:?}"))
    }
}

fn finish(child: Child) -> Answer {
    wait_bounded(child, LIMIT).into()
}

/// What the answer tells the agent, in either CLI's terms: `Some(reason)`
/// when it is sent back, `None` when it may stop.
#[track_caller]
fn sent_back(agent: &str, a: &Answer) -> Option<String> {
    assert_eq!(a.code, 0, "stderr:\n{}", a.stderr);
    let v: Value = if a.stdout.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(&a.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {:?}", a.stdout))
    };
    match agent {
        "cursor" => v["followup_message"].as_str().map(String::from),
        _ => (v["decision"] == "block").then(|| v["reason"].as_str().expect("reason").into()),
    }
}

#[test]
fn one_stop_through_cursor_and_claude_hooks_is_gated_once_and_counted_once() {
    let t = Setup::new(None);
    // Generation 1: Cursor's own hook first, then the Claude-shaped one.
    let first = sent_back("cursor", &t.hook("cursor", &t.cursor_stop(Some("g1"))))
        .expect("a failing gate sends the agent back");
    assert!(first.contains("DONE is missing"), "{first}");
    let dup = t.hook("claude", &t.claude_stop(Some("g1")));
    assert_eq!(
        sent_back("claude", &dup).as_deref(),
        Some(first.as_str()),
        "the same answer"
    );
    assert!(
        dup.stderr
            .contains("already decided by gatehost's cursor hook"),
        "{}",
        dup.stderr
    );
    assert_eq!(t.runs(), 1, "the gate ran once for one stop");

    // Generation 2 reaches the Claude-shaped hook first: it is gated (a
    // new stop) and counted from the standing the Cursor hook left.
    t.next_turn();
    let second = sent_back("claude", &t.hook("claude", &t.claude_stop(Some("g2"))))
        .expect("still failing: sent back (the second of two retries)");
    assert_eq!(t.runs(), 2);
    let dup = sent_back("cursor", &t.hook("cursor", &t.cursor_stop(Some("g2"))));
    assert_eq!(dup.as_deref(), Some(second.as_str()));
    assert_eq!(t.runs(), 2, "not gated again");

    // Generation 3: counted once per stop, the two retries are spent, so it
    // is let through, in both CLIs' terms.
    t.next_turn();
    let third = t.hook("cursor", &t.cursor_stop(Some("g3")));
    assert_eq!(sent_back("cursor", &third), None, "{}", third.stderr);
    assert!(third.stderr.contains("out of retries"), "{}", third.stderr);
    let dup = t.hook("claude", &t.claude_stop(Some("g3")));
    assert_eq!(sent_back("claude", &dup), None);
    let shown: Value = serde_json::from_str(&dup.stdout).expect("a systemMessage");
    assert!(
        shown["systemMessage"]
            .as_str()
            .is_some_and(|m| m.contains("out of retries")),
        "{shown}"
    );
    assert_eq!(t.runs(), 3, "three stops, three gate runs");

    // Both sessions' records say the same: sent back twice, let through once.
    for session in [
        format!("cursor:{CONVERSATION}"),
        format!("claude:{CONVERSATION}"),
    ] {
        let st = t.status(&session);
        assert_eq!(st["outcome"], "let-through", "{session}: {st}");
        assert_eq!(st["why"], "out-of-retries", "{session}: {st}");
        assert_eq!(
            (st["stops"].as_u64(), st["sentBack"].as_u64()),
            (Some(3), Some(2)),
            "{st}"
        );
    }

    // The agent fixes it: the next stop passes, once.
    t.s.write_ws("DONE", "done\n");
    t.next_turn();
    assert_eq!(
        sent_back("cursor", &t.hook("cursor", &t.cursor_stop(Some("g4")))),
        None
    );
    assert_eq!(
        sent_back("claude", &t.hook("claude", &t.claude_stop(Some("g4")))),
        None
    );
    assert_eq!(t.runs(), 4);
    assert_no_survivors(&t.m);
}

#[test]
fn a_duplicate_arriving_while_the_gate_runs_waits_for_its_decision() {
    let t = Setup::new(Some("RELEASE"));
    // The Claude-shaped call takes the stop; its gate waits for RELEASE.
    let first = t.spawn("claude", &[], &t.claude_stop(Some("g1")));
    let started = Instant::now();
    while t.runs() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the gate never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The Cursor call arrives meanwhile: it says it waits, and runs no gate.
    let mut second = t.spawn("cursor", &[], &t.cursor_stop(Some("g1")));
    let mut err = BufReader::new(second.stderr.take().expect("stderr"));
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let n = err.read_line(&mut line).expect("read stderr");
        assert!(n > 0, "the duplicate ended without waiting:\n{seen}");
        seen.push_str(&line);
        if line.contains("waiting for its decision") {
            break;
        }
    }
    assert_eq!(t.runs(), 1, "the duplicate runs no gate while it waits");
    std::fs::write(t.s.ws.join("RELEASE"), "").expect("release");
    let a = finish(first);
    let reason = sent_back("claude", &a).expect("sent back");
    let out = wait_bounded(second, LIMIT);
    let rest: String = err
        .lines()
        .map_while(Result::ok)
        .collect::<Vec<_>>()
        .join("\n");
    let b = Answer {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: format!("{seen}{rest}"),
    };
    assert_eq!(
        sent_back("cursor", &b).as_deref(),
        Some(reason.as_str()),
        "{}",
        b.stderr
    );
    assert_eq!(t.runs(), 1, "one stop, one gate run");
    assert_no_survivors(&t.m);
}

#[test]
fn stops_that_cannot_be_told_apart_are_each_gated() {
    let t = Setup::new(None);
    // No generation id and no transcript: nothing tells this stop from the
    // next, so nothing is replayed.
    let mut stop = t.cursor_stop(None);
    stop["transcript_path"] = Value::Null;
    assert!(sent_back("cursor", &t.hook("cursor", &stop)).is_some());
    assert!(sent_back("cursor", &t.hook("cursor", &stop)).is_some());
    assert_eq!(t.runs(), 2);
    // Two generations over one unchanged transcript are two stops.
    assert!(sent_back("cursor", &t.hook("cursor", &t.cursor_stop(Some("a")))).is_none());
    assert_eq!(t.runs(), 3, "a new generation is gated");
}

/// The same registration seeing the same mark again is its CLI's next
/// stop, not a duplicate: Copilot CLI, at times, has not written a turn to
/// its transcript yet when the next stop comes, so two stops show one
/// transcript length. Each is gated and counted, so a gate never fixed
/// lets the stop through after `--max-retries`, instead of its first block
/// being replayed until the CLI's own cap.
#[test]
fn the_same_hook_seeing_an_unchanged_transcript_again_gates_the_next_stop() {
    let t = Setup::new(None);
    let stop = t.claude_stop(None);
    let first = t.hook("claude", &stop);
    assert!(sent_back("claude", &first).is_some(), "{}", first.stderr);
    let second = t.hook("claude", &stop);
    assert!(sent_back("claude", &second).is_some(), "{}", second.stderr);
    assert_eq!(t.runs(), 2, "the second stop was gated, not replayed");
    // Out of retries (2): the third is let through with the message.
    let third = t.hook("claude", &stop);
    assert!(sent_back("claude", &third).is_none(), "{}", third.stdout);
    assert_eq!(t.runs(), 3);
    let v = t.status(&format!("claude:{CONVERSATION}"));
    assert_eq!(v["outcome"], "let-through", "{v}");
    assert_no_survivors(&t.m);
}

/// Claude Code's `SubagentStop` for sub-agent `agent_id`.
fn subagent_stop(t: &Setup, agent_id: &str) -> Value {
    json!({
        "session_id": "parent-1",
        "transcript_path": t.transcript.display().to_string(),
        "agent_transcript_path": t.s.out.join(format!("{agent_id}.jsonl")).display().to_string(),
        "cwd": t.s.ws.display().to_string(),
        "hook_event_name": "SubagentStop",
        "stop_hook_active": false,
        "agent_id": agent_id,
        "agent_type": "general-purpose",
        "last_assistant_message": "Sub-task done."
    })
}

fn parent_stop(t: &Setup) -> Value {
    json!({
        "session_id": "parent-1",
        "transcript_path": t.transcript.display().to_string(),
        "cwd": t.s.ws.display().to_string(),
        "hook_event_name": "Stop",
        "stop_hook_active": false,
        "last_assistant_message": "All done."
    })
}

#[test]
fn a_subagents_stop_has_its_own_gates_and_its_own_retry_budget() {
    let t = Setup::new(None);
    let sub_gates = t.s.write(
        "subagent-gates.json",
        r#"[{"name": "SUB exists", "command": "test", "args": ["-f", "SUB"], "timeoutMs": 10000}]"#,
    );
    let config = std::fs::read_to_string(&t.config).expect("config");
    std::fs::write(
        &t.config,
        config.replace("free_args = true }", "free_args = true }, \"test\""),
    )
    .expect("config");
    let sub_gates = sub_gates.display().to_string();
    let extra = ["--subagent-gates", sub_gates.as_str()];
    // The sub-agent's gate (not the parent's) refuses its stop, twice, then
    // it is let through out of its own retries.
    for _ in 0..2 {
        t.next_turn();
        let reason = sent_back(
            "claude",
            &t.hook_with("claude", &extra, &subagent_stop(&t, "a1")),
        )
        .expect("sent back");
        assert!(reason.contains("SUB exists"), "{reason}");
    }
    t.next_turn();
    let out = t.hook_with("claude", &extra, &subagent_stop(&t, "a1"));
    assert_eq!(sent_back("claude", &out), None, "{}", out.stderr);
    assert!(out.stdout.contains("out of retries"), "{}", out.stdout);
    assert_eq!(t.runs(), 0, "the parent's gate never ran for the sub-agent");
    // Another sub-agent of the same session starts with its own budget.
    t.next_turn();
    assert!(
        sent_back(
            "claude",
            &t.hook_with("claude", &extra, &subagent_stop(&t, "a2"))
        )
        .is_some()
    );
    // The parent's stop is gated by --gates, with both its retries intact.
    for _ in 0..2 {
        t.next_turn();
        let reason = sent_back("claude", &t.hook_with("claude", &extra, &parent_stop(&t)))
            .expect("the parent is sent back");
        assert!(reason.contains("DONE is missing"), "{reason}");
    }
    assert_eq!(t.runs(), 2);
    // The sub-agent's record is its own; the parent's is the parent's.
    let parent = t.status("claude:parent-1");
    assert_eq!(
        (parent["stops"].as_u64(), parent["sentBack"].as_u64()),
        (Some(2), Some(2)),
        "{parent}"
    );
    let sub = t.status("claude:parent-1/subagent/a1");
    assert_eq!(sub["why"], "out-of-retries", "{sub}");
}

#[test]
fn without_subagent_gates_a_daemon_mode_hook_lets_a_subagents_stop_go_on_and_says_so() {
    let t = Setup::new(None);
    // Daemon mode (no --gates), no daemon anywhere: a parent's stop would
    // be refused (the daemon cannot be asked); a sub-agent's is not the
    // daemon's to gate.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gatehost"));
    cmd.args(["hook", "claude", "--data-dir"])
        .arg(t.s.etc.join("no-daemon"))
        .arg("--state-dir")
        .arg(&t.state)
        .env("GATEHOST_LOG", "gatehost=info")
        .env_remove("GATEHOST_SERVER")
        .env_remove("GATEHOST_TOKEN")
        .current_dir(&t.s.ws);
    let stop = subagent_stop(&t, "a1").to_string();
    let out = wait_bounded(spawn_with_input(&mut cmd, stop.as_bytes()), LIMIT);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "", "the stop goes on");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not gated in daemon mode") && stderr.contains("--subagent-gates"),
        "{stderr}"
    );
}
