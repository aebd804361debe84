//! The real agent CLIs (installed by scripts/install-agent-clis.sh, pinned by
//! tests/support/agent-clis/package-lock.json) and the fake model API they talk to
//! (tests/support/fake-model-api), for tests that run an agent or a judge for real.

use super::Scratch;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The fake model API, answering a script of steps (see its `--script`) and
/// logging every request; stopped when dropped.
pub struct FakeApi {
    child: std::process::Child,
    pub port: u16,
    log: PathBuf,
}

impl FakeApi {
    /// Answers every model call with `reply`.
    pub fn start(dir: &Path, reply: &str) -> FakeApi {
        FakeApi::start_script(dir, &serde_json::json!([{ "text": reply }]))
    }

    /// Answers the n-th model call with the script's n-th step (the last
    /// step for every call past the end).
    pub fn start_script(dir: &Path, script: &Value) -> FakeApi {
        let port_file = dir.join("api.port");
        let log = dir.join("api-requests.jsonl");
        let script_file = dir.join("api-script.json");
        std::fs::write(&script_file, script.to_string()).expect("write the fake API's script");
        let child = std::process::Command::new("python3")
            .arg(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../tests/support/fake-model-api/fake_model_api.py"),
            )
            .arg("--port-file")
            .arg(&port_file)
            .arg("--log")
            .arg(&log)
            .arg("--script")
            .arg(&script_file)
            .spawn()
            .expect("python3 runs the fake model API");
        let deadline = Instant::now() + Duration::from_secs(10);
        let port = loop {
            if let Some(p) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                break p;
            }
            assert!(Instant::now() < deadline, "the fake API did not start");
            std::thread::sleep(Duration::from_millis(20));
        };
        FakeApi { child, port, log }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The requests to model routes whose path contains `route`.
    pub fn model_calls(&self, route: &str) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| {
                r["method"] == "POST" && r["path"].as_str().is_some_and(|p| p.contains(route))
            })
            .collect()
    }

    /// Waits until `n` requests to `route` have arrived (a held step's
    /// request is logged before it is answered).
    pub fn wait_for_calls(&self, route: &str, n: usize, within: Duration) -> Vec<Value> {
        let deadline = Instant::now() + within;
        loop {
            let calls = self.model_calls(route);
            if calls.len() >= n {
                return calls;
            }
            assert!(
                Instant::now() < deadline,
                "{} of {n} model calls to {route} arrived: {calls:#?}",
                calls.len()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the call to `route` that the script's step `n` answered
    /// (logged with its step as soon as it arrives, before a held answer).
    pub fn call_for_step(&self, route: &str, n: u64, within: Duration) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let calls = self.model_calls(route);
            if let Some(c) = calls.iter().find(|c| c["step"] == serde_json::json!(n)) {
                return c.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no call to {route} for step {n}: {calls:#?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Asserts that the model call `call` carries each of `needles` (a gate's
/// nudge), then fixes the work (creates `fix`) and lets the fake API's held
/// answer go (creates `release`).
pub fn fix_after_nudge(call: &Value, needles: &[&str], fix: &Path, release: &Path) {
    let body = call["body"].to_string();
    assert!(
        needles.iter().all(|n| body.contains(n)),
        "{needles:?} not all in {body}"
    );
    std::fs::write(fix, "").expect("fix");
    std::fs::write(release, "").expect("release");
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The pinned agent CLI `name` (`claude`, `codex`, `gemini`) installed by
/// scripts/install-agent-clis.sh.
pub fn agent_cli(name: &str) -> PathBuf {
    let dir = std::env::var_os("GATEHOST_AGENT_CLIS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/agent-clis"));
    let cli = dir.join("node_modules/.bin").join(name);
    assert!(
        cli.exists(),
        "{} is missing: run `bash scripts/install-agent-clis.sh` (scripts/test.sh does)",
        cli.display()
    );
    cli
}

/// An agent CLI running in a test: its output goes to files (no pipe can
/// fill and stall it), and it is killed if it outlives the test's bound.
pub struct AgentRun {
    child: std::process::Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

/// What an agent CLI run left.
#[derive(Debug)]
pub struct AgentOutput {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl AgentOutput {
    /// The stdout lines that are JSON (a `--output-format stream-json` run).
    pub fn json_lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl AgentRun {
    /// Starts `cmd` with `stdin` written to it; output files go in `dir`.
    pub fn start(mut cmd: std::process::Command, stdin: &str, dir: &Path) -> AgentRun {
        use std::io::Write;
        let stdout = dir.join("agent.stdout");
        let stderr = dir.join("agent.stderr");
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::fs::File::create(&stdout).expect("stdout file"))
            .stderr(std::fs::File::create(&stderr).expect("stderr file"));
        let mut child = cmd.spawn().expect("the agent CLI starts");
        {
            let mut pipe = child.stdin.take().expect("stdin");
            pipe.write_all(stdin.as_bytes()).expect("write the prompt");
        }
        AgentRun {
            child,
            stdout,
            stderr,
        }
    }

    /// Waits for the CLI to end; kills it and panics past `within`.
    pub fn finish(mut self, within: Duration) -> AgentOutput {
        let deadline = Instant::now() + within;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "the agent CLI did not end within {within:?}:\nstdout: {}\nstderr: {}",
                    std::fs::read_to_string(&self.stdout).unwrap_or_default(),
                    std::fs::read_to_string(&self.stderr).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        AgentOutput {
            status,
            stdout: std::fs::read_to_string(&self.stdout).unwrap_or_default(),
            stderr: std::fs::read_to_string(&self.stderr).unwrap_or_default(),
        }
    }
}

impl Drop for AgentRun {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The gate most agent tests use: the agent's work is done when `DONE` exists.
pub const DONE_GATES: &str =
    r#"[{"name": "DONE exists", "command": "test", "args": ["-f", "DONE"], "timeoutMs": 10000}]"#;

/// Reads `pipe` to its end on a thread of its own.
pub fn drain(mut pipe: impl std::io::Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// The text of the last user message an OpenAI chat-completions request
/// carried (a string, or a list of text parts).
pub fn chat_last_user_text(request: &Value) -> String {
    let messages = request["body"]["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let Some(m) = messages.iter().rev().find(|m| m["role"] == "user") else {
        return String::new();
    };
    match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The model calls on `route` of the agent's turn: those whose body holds
/// the test's marker `m` (a side query carries no conversation of the
/// prompt).
pub fn turn_calls(api: &FakeApi, route: &str, m: &str) -> Vec<Value> {
    api.model_calls(route)
        .into_iter()
        .filter(|c| {
            c["body"]
                .to_string()
                .contains(&format!("gatehost-test-{m}"))
        })
        .collect()
}

/// The turn's model calls once there are `n` of them (within `within`).
pub fn wait_for_turn_calls(
    api: &FakeApi,
    route: &str,
    m: &str,
    n: usize,
    within: Duration,
) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let calls = turn_calls(api, route, m);
        if calls.len() >= n {
            return calls;
        }
        assert!(
            started.elapsed() < within,
            "{} of {n} model calls within {within:?}",
            calls.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Standalone mode's options: the gate file ([`DONE_GATES`]) and the host
/// configuration (allowing `test`) outside the workspace, the retry count.
pub fn standalone_args(s: &Scratch, max_retries: u32) -> Vec<String> {
    let gates = s.write("gates.json", DONE_GATES);
    let config = s.write("config.toml", "[shell]\nallow = [\"test\"]\n");
    vec![
        "--gates".into(),
        gates.display().to_string(),
        "--config".into(),
        config.display().to_string(),
        "--max-retries".into(),
        max_retries.to_string(),
    ]
}
