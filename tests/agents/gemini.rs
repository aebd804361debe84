//! The real Gemini CLI (pinned 0.61.0, tests/support/agent-clis) gated by
//! `gatehost hook gemini`, against the fake model API on loopback
//! (tests/support/fake-model-api/gemini_api.py; how it is run and what its hooks
//! send: the README there).
//!
//! Each test runs `gemini -p` once, with a private HOME (its settings.json
//! holds the hooks) and TMPDIR under the test's scratch directory and a
//! minimal environment, and checks what reached the model: a refused stop
//! is the next model request's last user message.

use crate::common::agents::{FakeApi, agent_cli, drain, standalone_args};
use crate::common::daemon::{Daemon, git_repo};
use crate::common::{DAEMON_ROOTS, Scratch, assert_no_survivors, marker, survivors};
use serde_json::{Value, json};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The model Gemini CLI is pinned to: without one it asks a classifier
/// model first (another model call, expecting JSON).
const MODEL: &str = "gemini-2.5-flash";
/// The fake API's route for the agent's model calls.
const ROUTE: &str = ":streamGenerateContent";
const T: Duration = Duration::from_secs(90);

/// One `gemini -p` run, started, with its scratch area.
struct Gemini {
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

/// Writes HOME/.gemini/settings.json: API-key auth against the fake API,
/// no usage statistics (else it calls play.googleapis.com), and `hook` as
/// the command of the SessionStart, BeforeAgent, AfterAgent and SessionEnd hooks (with
/// `hook_env` in its environment).
fn settings(home: &Path, hook: &str, hook_env: &Value) {
    let entry = json!([{"hooks": [{
        "type": "command", "name": "gatehost", "command": hook,
        "timeout": 60000, "env": hook_env,
    }]}]);
    let settings = json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": false},
        "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
        "telemetry": {"enabled": false},
        "ide": {"enabled": false},
        "hooks": {"SessionStart": entry, "BeforeAgent": entry, "AfterAgent": entry, "SessionEnd": entry},
    });
    let dir = home.join(".gemini");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("settings.json"), settings.to_string()).expect("settings");
}

/// `gatehost hook gemini ARGS --state-dir DIR`, as a shell command line
/// (the CLI runs it with `bash -c`). The state directory's name holds the
/// marker, so every hook process (bash and gatehost) carries it.
fn hook_command(s: &Scratch, m: &str, args: &[String]) -> String {
    let state = s.out.join(format!("state-gatehost-test-{m}"));
    let mut words = vec![
        env!("CARGO_BIN_EXE_gatehost").to_string(),
        "hook".into(),
        "gemini".into(),
    ];
    words.extend(args.iter().cloned());
    words.extend(["--state-dir".to_string(), state.display().to_string()]);
    words
        .iter()
        .map(|w| format!("'{}'", w.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

impl Gemini {
    /// Starts `gemini -p PROMPT` in `s.ws` against `api`, in a process
    /// group of its own (so a failed test can kill all of it).
    fn start(s: &Scratch, api: &FakeApi, m: &str, hook: &str, hook_env: &Value) -> Gemini {
        let home = s.out.join("home");
        let tmp = s.out.join("tmp");
        std::fs::create_dir_all(&tmp).expect("mkdir");
        settings(&home, hook, hook_env);
        let mut child = Command::new(agent_cli("gemini"))
            .args([
                "-p",
                &format!("gatehost-test-{m}: create the file DONE, then say so."),
                "-m",
                MODEL,
            ])
            .current_dir(&s.ws)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &home)
            .env("TMPDIR", &tmp)
            .env("GEMINI_API_KEY", "fake-gemini-key")
            .env("GOOGLE_GEMINI_BASE_URL", api.url())
            .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
            .env("GEMINI_CLI_NO_RELAUNCH", "true")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("gemini runs");
        let stdout = drain(child.stdout.take().expect("stdout"));
        let stderr = drain(child.stderr.take().expect("stderr"));
        Gemini {
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
            panic!("gemini ran past {T:?}; stdout:\n{stdout}\nstderr (its end):\n{tail}");
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

impl Drop for Gemini {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the process group of our own child (a no-op
        // once it has exited and been reaped by `finish`).
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.try_wait();
    }
}

/// A hold file for the script, under `s.out`.
fn hold(s: &Scratch, name: &str) -> String {
    s.out.join(name).display().to_string()
}

/// The text of the last user message a model request carried.
pub(crate) fn last_user_text(request: &Value) -> String {
    let contents = request["body"]["contents"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    contents
        .iter()
        .rev()
        .find(|c| c["role"] == "user")
        .and_then(|c| c["parts"].as_array())
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[test]
fn a_failing_gate_reaches_the_model_and_the_fixed_turn_ends_the_run() {
    let s = Scratch::new();
    let m = marker("gemini-fix");
    let api = FakeApi::start_script(
        &s.out,
        &json!([
            {"text": "I created DONE."},
            {"text": "Now DONE really exists.", "hold_until": hold(&s, "fixed")},
            {"text": "A third call must not happen."},
        ]),
    );
    let hook = hook_command(&s, &m, &standalone_args(&s, 2));
    let run = Gemini::start(&s, &api, &m, &hook, &json!({}));

    // The stop was refused: the next model request ends with the gate's
    // reason as the user's message.
    let calls = api.wait_for_calls(ROUTE, 2, T);
    assert!(
        !survivors(&m).is_empty(),
        "the marker does not find the running gemini: the survivors check would prove nothing"
    );
    let nudge = last_user_text(&calls[1]);
    assert!(
        nudge.contains("DONE exists") && nudge.contains("did not pass"),
        "the second model call does not carry the block reason: {nudge:?}"
    );
    assert!(!last_user_text(&calls[0]).contains("did not pass"));
    // The agent "fixes" the workspace while its model call is held.
    s.write_ws("DONE", "done\n");
    run.release("fixed");

    let end = run.finish();
    assert_eq!(
        end.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        end.stdout, end.stderr
    );
    assert_eq!(
        api.model_calls(ROUTE).len(),
        2,
        "the fixed turn was let stop"
    );
    assert!(
        end.stdout.contains("I created DONE.") && end.stdout.contains("Now DONE really exists."),
        "{}",
        end.stdout
    );
    assert_eq!(
        end.stderr.matches("Agent execution blocked:").count(),
        1,
        "{}",
        end.stderr
    );
    assert!(
        !end.stderr.contains("Hook system message"),
        "{}",
        end.stderr
    );
    assert_no_survivors(&m);
}

#[test]
fn a_gate_never_fixed_blocks_exactly_max_retries_times_then_names_the_block() {
    let s = Scratch::new();
    let m = marker("gemini-never");
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
    // BeforeAgent is hooked too: Gemini CLI runs it again for every
    // refused stop, with the reason as its prompt; it must not reset the
    // count (it did: the run then never ended).
    let hook = hook_command(&s, &m, &standalone_args(&s, 2));
    let end = Gemini::start(&s, &api, &m, &hook, &json!({})).finish();

    assert_eq!(
        end.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        end.stdout, end.stderr
    );
    let calls = api.model_calls(ROUTE);
    let nudged = calls
        .iter()
        .filter(|c| last_user_text(c).contains("did not pass"))
        .count();
    assert_eq!(
        nudged, 2,
        "model calls carrying the block reason: {calls:#?}"
    );
    assert_eq!(calls.len(), 3, "the first call and two retries");
    assert_eq!(
        end.stderr.matches("Agent execution blocked:").count(),
        2,
        "{}",
        end.stderr
    );
    // The third stop went through, and the user was told why the work is
    // not accepted: Gemini CLI prints a hook's systemMessage on stderr.
    let shown = end
        .stderr
        .lines()
        .find(|l| l.starts_with("Hook system message:"))
        .unwrap_or_else(|| panic!("no message for the user:\n{}", end.stderr));
    assert!(
        shown.contains("blocked, out of retries") && shown.contains("DONE exists"),
        "{shown}"
    );
    assert!(
        end.stdout.contains("Attempt three: done."),
        "{}",
        end.stdout
    );
    assert!(!end.stdout.contains("must not happen"), "{}", end.stdout);
    assert_no_survivors(&m);
}

/// Polls the daemon until a session registered as `gemini:…` exists.
fn gemini_session(d: &Daemon) -> String {
    let deadline = Instant::now() + T;
    loop {
        let page = d.agent_ok("GET", "/v1/sessions?limit=1000", None);
        if let Some(id) = page["sessions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["id"].as_str())
            .find(|id| id.starts_with("gemini:"))
        {
            return id.to_string();
        }
        assert!(Instant::now() < deadline, "no gemini session: {page}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn through_the_daemon_a_commit_policy_nudges_then_awaits_the_ack() {
    let s = Scratch::new();
    let m = marker("gemini-daemon");
    git_repo(&s.ws);
    let cfg = s.write(
        "config.toml",
        &format!("[shell]\nallow = [{{ program = \"test\", free_args = true }}]\n{DAEMON_ROOTS}"),
    );
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    let api = FakeApi::start_script(
        &s.out,
        &json!([
            // Held until the test has attached its policy.
            {"text": "I created DONE.", "hold_until": hold(&s, "attached")},
            {"text": "Now DONE really exists.", "hold_until": hold(&s, "fixed")},
            {"text": "A third call must not happen."},
        ]),
    );
    // Daemon mode: no --gates; the server and the agent token come in the
    // hook's own environment (the hook's `env` in settings.json).
    let hook = hook_command(&s, &m, &[]);
    let run = Gemini::start(
        &s,
        &api,
        &m,
        &hook,
        &json!({"GATEHOST_SERVER": d.url, "GATEHOST_TOKEN": d.agent,
                "GATEHOST_SESSION_KEYS": d.keyring().dir()}),
    );

    // SessionStart registered the session before the first model call.
    api.wait_for_calls(ROUTE, 1, T);
    let session = gemini_session(&d);
    let registered = d.agent_ok("GET", &format!("/v1/sessions/{session}"), None);
    assert_eq!(
        Path::new(registered["cwd"].as_str().unwrap_or_default())
            .canonicalize()
            .ok(),
        s.ws.canonicalize().ok(),
        "{registered}"
    );
    let policy = d.attach(json!({
        "sessionId": session,
        "gate": {"command": "test", "args": ["-f", "DONE"], "timeoutMs": 10000},
        "then": "commit",
        "commit": {"paths": ["DONE"], "message": "Add DONE"},
        "onFail": {"nudge": "gatehost-nudge: {gate} failed ({code}): {reason}", "maxRetries": 2},
    }));
    run.release("attached");

    // The policy's nudge is the next model request's user message.
    let calls = api.wait_for_calls(ROUTE, 2, T);
    let nudge = last_user_text(&calls[1]);
    assert!(nudge.contains("gatehost-nudge:"), "{nudge:?}");
    s.write_ws("DONE", "done\n");
    run.release("fixed");

    let end = run.finish();
    assert_eq!(
        end.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        end.stdout, end.stderr
    );
    assert_eq!(api.model_calls(ROUTE).len(), 2);
    let p = d.wait_status(&policy, "awaiting-ack", T);
    assert!(p["commitSha"].is_null(), "no commit before the ack: {p}");
    let events = d.policy_events(&policy);
    for want in ["policy:nudge", "policy:commit-ready"] {
        assert!(
            events.iter().any(|e| e == want),
            "{want} missing: {events:?}"
        );
    }
    let nudges = events.iter().filter(|e| *e == "policy:nudge").count();
    assert_eq!(nudges, 1, "{events:?}");
    assert_eq!(
        end.stderr.matches("Agent execution blocked:").count(),
        1,
        "{}",
        end.stderr
    );
    // Gemini CLI's SessionEnd, as it exits, reported the session exited.
    crate::agents::claude::assert_session_exited(&d, &session);
    assert_no_survivors(&m);
}
