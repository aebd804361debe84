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

    /// Answers the first model call with `first`, the second with
    /// `second` once the file `release` (under `dir`, returned) exists: a
    /// stop sent back, and the answer after the fix, held until the test
    /// has fixed the work.
    pub fn held_second(dir: &Path, first: &str, second: &str) -> (FakeApi, PathBuf) {
        let release = dir.join("release");
        let script = serde_json::json!([
            {"text": first},
            {"text": second, "hold_until": release},
        ]);
        (FakeApi::start_script(dir, &script), release)
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
    let bin = format!("node_modules/.bin/{name}");
    installed_tool(
        "GATEHOST_AGENT_CLIS_DIR",
        "agent-clis",
        &bin,
        "install-agent-clis.sh",
    )
}

/// `rel` in what `scripts/SCRIPT` installs: in `$VAR`, by default
/// `target/DIR`; asserted there (else the failure names the script).
pub fn installed_tool(var: &str, dir: &str, rel: &str, script: &str) -> PathBuf {
    let root = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../target")
            .join(dir)
    });
    let tool = root.join(rel);
    assert!(
        tool.exists(),
        "{} is missing: run `bash scripts/{script}` (scripts/test.sh does)",
        tool.display()
    );
    tool
}

/// `program` to run in `cwd` with nothing of the test's environment:
/// only `PATH` (`path`), and `HOME` and `TMPDIR` (`home`, `tmp`) private
/// to the test.
pub fn private_command(
    program: impl AsRef<std::ffi::OsStr>,
    cwd: &Path,
    path: &str,
    [home, tmp]: [&Path; 2],
) -> std::process::Command {
    let mut cmd = std::process::Command::new(program);
    cmd.current_dir(cwd)
        .env_clear()
        .env("PATH", path)
        .env("HOME", home)
        .env("TMPDIR", tmp);
    cmd
}

/// An agent CLI running in a test: its output goes to files (no pipe can
/// fill and stall it), and it is killed if it outlives the test's bound
/// (with its whole process group, when it was started in one of its own).
pub struct AgentRun {
    child: std::process::Child,
    stdout: PathBuf,
    stderr: PathBuf,
    group: bool,
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

    /// The exit code (-1 for a signal).
    pub fn code(&self) -> i32 {
        self.status.code().unwrap_or(-1)
    }

    /// Asserts the CLI exited 0, showing both outputs if not.
    #[track_caller]
    pub fn assert_exited_0(&self) {
        assert_eq!(
            self.code(),
            0,
            "stdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
    }
}

impl AgentRun {
    /// Starts `cmd` with `stdin` written to it; output files go in `dir`.
    pub fn start(cmd: std::process::Command, stdin: &str, dir: &Path) -> AgentRun {
        AgentRun::spawn(cmd, Some(stdin), dir, false)
    }

    /// Starts `cmd` with no stdin, in a process group of its own (so a
    /// failed test kills all of it); output files go in `dir`.
    pub fn start_group(mut cmd: std::process::Command, dir: &Path) -> AgentRun {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
        AgentRun::spawn(cmd, None, dir, true)
    }

    fn spawn(
        mut cmd: std::process::Command,
        stdin: Option<&str>,
        dir: &Path,
        group: bool,
    ) -> AgentRun {
        use std::io::Write;
        use std::process::Stdio;
        let stdout = dir.join("agent.stdout");
        let stderr = dir.join("agent.stderr");
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(std::fs::File::create(&stdout).expect("stdout file"))
        .stderr(std::fs::File::create(&stderr).expect("stderr file"));
        let mut child = cmd.spawn().expect("the agent CLI starts");
        if let Some(text) = stdin {
            let mut pipe = child.stdin.take().expect("stdin");
            pipe.write_all(text.as_bytes()).expect("write the prompt");
        }
        AgentRun {
            child,
            stdout,
            stderr,
            group,
        }
    }

    /// SIGKILL to the CLI (and its process group, when it has one of its
    /// own: a no-op once the group is gone).
    fn kill(&mut self) {
        if self.group {
            // SAFETY: kill(2) on the process group of our own child.
            unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        } else {
            let _ = self.child.kill();
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
                self.kill();
                let _ = self.child.wait();
                let stderr = std::fs::read_to_string(&self.stderr).unwrap_or_default();
                let tail = &stderr[stderr.floor_char_boundary(stderr.len().saturating_sub(4000))..];
                panic!(
                    "the agent CLI did not end within {within:?}:\nstdout: {}\nstderr (its end): {tail}",
                    std::fs::read_to_string(&self.stdout).unwrap_or_default(),
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
        self.kill();
        let _ = self.child.wait();
    }
}

/// The gate most agent tests use: the agent's work is done when `DONE` exists.
pub const DONE_GATES: &str =
    r#"[{"name": "DONE exists", "command": "test", "args": ["-f", "DONE"], "timeoutMs": 10000}]"#;

/// A scratch area whose workspace is a git repository, and a marker
/// named `name`.
pub fn scratch_repo(name: &str) -> (Scratch, String) {
    let s = Scratch::new();
    super::daemon::git_repo(&s.ws);
    (s, super::marker(name))
}

/// A daemon on `s.etc/data` configured by `config` (written to
/// `s.etc/config.toml`).
pub fn daemon_configured(s: &Scratch, config: &str) -> super::daemon::Daemon {
    let cfg = s.write("config.toml", config);
    super::daemon::Daemon::start(&s.etc.join("data"), &cfg)
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
