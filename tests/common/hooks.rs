//! What the tests of `gatehost hook` share across areas (hooks/, agents/,
//! cli/): running one hook on a given input, bounded, and reading its
//! answer.

use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Asserts `stdout` (a hook's answer) is one JSON block whose reason
/// contains `why`; the answer.
#[track_caller]
pub fn assert_blocks(stdout: &[u8], why: &str) -> Value {
    let answer: Value = serde_json::from_slice(stdout).unwrap_or_else(|e| {
        panic!(
            "not one JSON answer on stdout ({e}): {:?}",
            String::from_utf8_lossy(stdout)
        )
    });
    assert_eq!(answer["decision"], "block", "{answer}");
    let reason = answer["reason"].as_str().unwrap_or_default();
    assert!(reason.contains(why), "{why:?} not in the reason: {answer}");
    answer
}

/// What one `gatehost hook` run said: its exit code, stdout and stderr.
pub struct Answer {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<std::process::Output> for Answer {
    fn from(out: std::process::Output) -> Answer {
        Answer {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// `gatehost hook AGENT` with nothing of the test's environment but its
/// `PATH`, and `home` as `HOME`.
pub fn gatehost_hook(agent: &str, home: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gatehost"));
    cmd.args(["hook", agent])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home);
    cmd
}

/// Spawns `cmd` with its stdin, stdout and stderr piped, and `input`
/// written to its stdin (then closed).
pub fn spawn_with_input(cmd: &mut Command, input: &[u8]) -> Child {
    let mut child = cmd
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
    child
}

/// Waits for `child` to end, at most `limit` (past it, kills it and
/// fails); its output.
pub fn wait_bounded(mut child: Child, limit: Duration) -> Output {
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("gatehost hook ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("output")
}

/// The environment of a `gatehost` run whose user is `home` and nothing
/// else of the test's: `HOME`, and the variables by which the CLIs' files
/// or gatehost's state could be found elsewhere set empty.
pub fn home_env(home: &str) -> Vec<(&str, &str)> {
    let mut env = vec![("HOME", home)];
    for var in [
        "XDG_STATE_HOME",
        "CLAUDE_CONFIG_DIR",
        "CODEX_HOME",
        "QWEN_HOME",
        "COPILOT_HOME",
    ] {
        env.push((var, ""));
    }
    env
}
