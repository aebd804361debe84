//! The real GitHub Copilot CLI (pinned 1.0.102, tests/support/agent-clis) gated by
//! `gatehost hook copilot`, against the fake model API on loopback
//! (tests/support/fake-model-api/openai_chat.py: with a custom provider,
//! `COPILOT_PROVIDER_BASE_URL`, `COPILOT_PROVIDER_API_KEY`, `COPILOT_MODEL`,
//! and `COPILOT_OFFLINE=1`, `copilot -p` needs no GitHub login).
//!
//! Each test installs the hooks with `gatehost hook install copilot` into a
//! private `COPILOT_HOME` (`hooks/gatehost.json`), runs `copilot -p` once
//! with a minimal environment, and checks what reached the model: a refused
//! stop is the next model request's last user message.

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
pub(crate) const ROUTE: &str = "/v1/chat/completions";
pub(crate) const T: Duration = Duration::from_secs(90);

/// One `copilot -p` run, started.
pub(crate) struct Copilot {
    child: Child,
    started: Instant,
    out: PathBuf,
    stdout: Option<std::thread::JoinHandle<String>>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

pub(crate) struct Finished {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// `gatehost hook install copilot ARGS --state-dir DIR` into `copilot_home`.
fn install(s: &Scratch, copilot_home: &Path, args: &[String], m: &str) {
    let state = s.out.join(format!("state-gatehost-test-{m}"));
    let out = Command::new(env!("CARGO_BIN_EXE_gatehost"))
        .args(["hook", "install", "copilot"])
        .args(args)
        .arg("--state-dir")
        .arg(&state)
        .env("HOME", s.out.join("home"))
        .env("COPILOT_HOME", copilot_home)
        .output()
        .expect("gatehost runs");
    assert!(out.status.success(), "{out:?}");
}

impl Copilot {
    /// Installs the hooks and starts `copilot -p PROMPT` in `s.ws` against
    /// `api`, in a process group of its own (so a failed test can kill all
    /// of it).
    pub(crate) fn start(s: &Scratch, api: &FakeApi, m: &str, args: &[String]) -> Copilot {
        let home = s.out.join("home");
        let copilot_home = home.join(".copilot");
        let tmp = s.out.join("tmp");
        std::fs::create_dir_all(&tmp).expect("mkdir");
        install(s, &copilot_home, args, m);
        let mut child = Command::new(agent_cli("copilot"))
            .args([
                "-p",
                &format!("gatehost-test-{m}: create the file DONE, then say so."),
                "--allow-all-tools",
            ])
            .current_dir(&s.ws)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &home)
            .env("TMPDIR", &tmp)
            .env("COPILOT_HOME", &copilot_home)
            .env("COPILOT_AUTO_UPDATE", "false")
            .env("COPILOT_OFFLINE", "1")
            .env("COPILOT_PROVIDER_BASE_URL", format!("{}/v1", api.url()))
            .env("COPILOT_PROVIDER_API_KEY", "sk-fake")
            .env("COPILOT_MODEL", "fake-model")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("copilot runs");
        let stdout = drain(child.stdout.take().expect("stdout"));
        let stderr = drain(child.stderr.take().expect("stderr"));
        Copilot {
            child,
            started: Instant::now(),
            out: s.out.clone(),
            stdout: Some(stdout),
            stderr: Some(stderr),
        }
    }

    /// Waits for the run to end (killing its process group past `T`).
    pub(crate) fn finish(mut self) -> Finished {
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
            panic!("copilot ran past {T:?}; stdout:\n{stdout}\nstderr (its end):\n{tail}");
        };
        Finished {
            code: status.code().unwrap_or(-1),
            stdout,
            stderr,
        }
    }

    /// Lets the fake API answer the model call held on `name`.
    pub(crate) fn release(&self, name: &str) {
        std::fs::write(self.out.join(name), "").expect("release");
    }
}

impl Drop for Copilot {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the process group of our own child (a no-op
        // once it has exited and been reaped by `finish`).
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.try_wait();
    }
}

pub(crate) fn hold(s: &Scratch, name: &str) -> String {
    s.out.join(name).display().to_string()
}

#[test]
fn a_failing_gate_reaches_the_model_and_the_fixed_turn_ends_the_run() {
    let s = Scratch::new();
    let m = marker("copilot-fix");
    let api = FakeApi::start_script(
        &s.out,
        &json!([
            {"text": "I created DONE."},
            {"text": "Now DONE really exists.", "hold_until": hold(&s, "fixed")},
            {"text": "A third call must not happen."},
        ]),
    );
    let run = Copilot::start(&s, &api, &m, &standalone_args(&s, 2));

    let calls = wait_for_turn_calls(&api, ROUTE, &m, 2, T);
    assert!(
        !survivors(&m).is_empty(),
        "the marker does not find the running copilot: the survivors check would prove nothing"
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
    assert_no_survivors(&m);
}

#[test]
fn a_gate_never_fixed_blocks_exactly_max_retries_times_then_is_recorded() {
    let s = Scratch::new();
    let m = marker("copilot-never");
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
    let end = Copilot::start(&s, &api, &m, &standalone_args(&s, 2)).finish();

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
    // The third stop went through; Copilot CLI shows no stop hook's
    // message, so the record says why the work is not accepted.
    let status = Command::new(env!("CARGO_BIN_EXE_gatehost"))
        .args(["hook", "status", "--last", "--json", "--state-dir"])
        .arg(s.out.join(format!("state-gatehost-test-{m}")))
        .output()
        .expect("gatehost runs");
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("DONE exists"), "{status:?}");
    assert!(
        end.stdout.contains("Attempt three: done."),
        "{}",
        end.stdout
    );
    assert!(!end.stdout.contains("must not happen"), "{}", end.stdout);
    assert_no_survivors(&m);
}
