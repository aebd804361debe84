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

use crate::common::agents::{
    FakeApi, agent_cli, chat_last_user_text, drain, standalone_args, turn_calls,
    wait_for_turn_calls,
};
use crate::common::{Scratch, assert_no_survivors, marker, survivors};
use serde_json::json;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The fake API's route for the agent's model calls.
const ROUTE: &str = "/v1/chat/completions";
const T: Duration = Duration::from_secs(90);

/// One `qwen -p` run, started.
struct Qwen {
    child: Child,
    started: Instant,
    out: PathBuf,
    stdout: Option<std::thread::JoinHandle<String>>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

struct Finished {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Writes HOME/.qwen/settings.json: no managed auto-memory (else a side
/// query after the turn, a model call of its own), and `hook` as the
/// command of every
/// event `gatehost hook install qwen` hooks, and of `UserPromptSubmit`
/// too: Qwen Code runs it again for every refused stop, with the reason as
/// its prompt, and it must not reset the count.
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

/// `gatehost hook qwen ARGS --state-dir DIR` as a shell command line; the
/// state directory's name holds the marker, so every hook process carries it.
fn hook_command(s: &Scratch, m: &str, args: &[String]) -> String {
    let state = s.out.join(format!("state-gatehost-test-{m}"));
    let mut words = vec![
        env!("CARGO_BIN_EXE_gatehost").to_string(),
        "hook".into(),
        "qwen".into(),
    ];
    words.extend(args.iter().cloned());
    words.extend(["--state-dir".to_string(), state.display().to_string()]);
    words
        .iter()
        .map(|w| format!("'{}'", w.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

impl Qwen {
    /// Starts `qwen -p PROMPT` in `s.ws` against `api`, in a process group
    /// of its own (so a failed test can kill all of it).
    fn start(s: &Scratch, api: &FakeApi, m: &str, hook: &str) -> Qwen {
        let home = s.out.join("home");
        let tmp = s.out.join("tmp");
        std::fs::create_dir_all(&tmp).expect("mkdir");
        settings(&home, hook);
        let mut child = Command::new(agent_cli("qwen"))
            .args([
                "-p",
                &format!("gatehost-test-{m}: create the file DONE, then say so."),
                "--auth-type",
                "openai",
                "--yolo",
            ])
            .current_dir(&s.ws)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &home)
            .env("TMPDIR", &tmp)
            .env("OPENAI_API_KEY", "sk-fake")
            .env("OPENAI_BASE_URL", format!("{}/v1", api.url()))
            .env("OPENAI_MODEL", "fake-model")
            .env("QWEN_CODE_SUPPRESS_YOLO_WARNING", "1")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("qwen runs");
        let stdout = drain(child.stdout.take().expect("stdout"));
        let stderr = drain(child.stderr.take().expect("stderr"));
        Qwen {
            child,
            started: Instant::now(),
            out: s.out.clone(),
            stdout: Some(stdout),
            stderr: Some(stderr),
        }
    }

    /// Waits for the run to end (killing its process group past `T`).
    fn finish(mut self) -> Finished {
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break Some(status);
            }
            if self.started.elapsed() > T {
                // SAFETY: kill(2) on the process group of our own child.
                unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let read = |h: Option<std::thread::JoinHandle<String>>| {
            h.map(|h| h.join().unwrap_or_default()).unwrap_or_default()
        };
        let (stdout, stderr) = (read(self.stdout.take()), read(self.stderr.take()));
        let Some(status) = status else {
            let tail = &stderr[stderr.floor_char_boundary(stderr.len().saturating_sub(4000))..];
            panic!("qwen ran past {T:?}; stdout:\n{stdout}\nstderr (its end):\n{tail}");
        };
        Finished {
            code: status.code().unwrap_or(-1),
            stdout,
            stderr,
        }
    }

    /// Lets the fake API answer the model call held on `name`.
    fn release(&self, name: &str) {
        std::fs::write(self.out.join(name), "").expect("release");
    }
}

impl Drop for Qwen {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the process group of our own child (a no-op
        // once it has exited and been reaped by `finish`).
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.try_wait();
    }
}

fn hold(s: &Scratch, name: &str) -> String {
    s.out.join(name).display().to_string()
}

#[test]
fn a_failing_gate_reaches_the_model_and_the_fixed_turn_ends_the_run() {
    let s = Scratch::new();
    let m = marker("qwen-fix");
    let api = FakeApi::start_script(
        &s.out,
        &json!([
            {"text": "I created DONE."},
            {"text": "Now DONE really exists.", "hold_until": hold(&s, "fixed")},
            {"text": "A third call must not happen."},
        ]),
    );
    let hook = hook_command(&s, &m, &standalone_args(&s, 2));
    let run = Qwen::start(&s, &api, &m, &hook);

    let calls = wait_for_turn_calls(&api, ROUTE, &m, 2, T);
    assert!(
        !survivors(&m).is_empty(),
        "the marker does not find the running qwen: the survivors check would prove nothing"
    );
    let nudge = chat_last_user_text(&calls[calls.len() - 1]);
    assert!(
        nudge.contains("DONE exists") && nudge.contains("did not pass"),
        "the model call after the stop does not carry the block reason: {nudge:?}"
    );
    s.write_ws("DONE", "done\n");
    run.release("fixed");

    let end = run.finish();
    assert_eq!(
        end.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        end.stdout, end.stderr
    );
    let calls = turn_calls(&api, ROUTE, &m);
    assert_eq!(calls.len(), 2, "the fixed turn was let stop: {calls:#?}");
    assert!(!chat_last_user_text(&calls[0]).contains("did not pass"));
    assert!(
        end.stdout.contains("I created DONE.") && end.stdout.contains("Now DONE really exists."),
        "{}",
        end.stdout
    );
    assert!(!end.stdout.contains("must not happen"), "{}", end.stdout);
    assert!(
        !end.stderr.contains("blocked, out of retries"),
        "{}",
        end.stderr
    );
    assert_no_survivors(&m);
}

#[test]
fn a_gate_never_fixed_blocks_exactly_max_retries_times_then_tells_the_user() {
    let s = Scratch::new();
    let m = marker("qwen-never");
    let api = FakeApi::start_script(
        &s.out,
        &json!([
            {"text": "Attempt one: done."},
            {"text": "Attempt two: done."},
            {"text": "Attempt three: done."},
            {"text": "Attempt four: must not happen."},
            {"text": "Attempt five: must not happen."},
        ]),
    );
    let hook = hook_command(&s, &m, &standalone_args(&s, 2));
    let end = Qwen::start(&s, &api, &m, &hook).finish();

    assert_eq!(
        end.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        end.stdout, end.stderr
    );
    let calls = turn_calls(&api, ROUTE, &m);
    let nudged = calls
        .iter()
        .filter(|c| chat_last_user_text(c).contains("did not pass"))
        .count();
    assert_eq!(
        nudged, 2,
        "model calls carrying the block reason: {calls:#?}"
    );
    assert_eq!(calls.len(), 3, "the first call and two retries");
    // The third stop went through, and the user was told why the work is
    // not accepted: Qwen Code prints a hook's systemMessage on stderr.
    assert!(
        end.stderr.contains("blocked, out of retries") && end.stderr.contains("DONE exists"),
        "{}",
        end.stderr
    );
    assert!(
        end.stdout.contains("Attempt three: done."),
        "{}",
        end.stdout
    );
    assert!(!end.stdout.contains("must not happen"), "{}", end.stdout);
    assert_no_survivors(&m);
}
