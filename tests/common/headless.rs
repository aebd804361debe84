//! What the tests of the headless agent CLIs with a stop hook share
//! (Gemini CLI, Qwen Code, GitHub Copilot CLI, each run once with `-p`
//! against the fake model API): the hook's command line, the script's
//! hold files, and the two flows each CLI is held to in standalone mode:
//! a failing gate's reason reaches the model and the fixed turn ends the
//! run; a gate never fixed blocks exactly `--max-retries` (2) times. Each
//! test file keeps how its CLI is started and what else it shows.

use super::agents::{AgentOutput, AgentRun, FakeApi, private_command};
use super::daemon::Daemon;
use super::{DAEMON_ROOTS, Scratch, assert_no_survivors, marker, survivors};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The longest a test waits for the CLI or for one of its model calls.
pub const T: Duration = Duration::from_secs(90);

/// Words of the nudge that only a blocked stop puts in a model request.
const NUDGE: &str = "did not pass";

/// One headless CLI, as its test file describes it.
pub struct Headless {
    /// Its name: the marker's prefix, and what failures call it.
    pub name: &'static str,
    /// The fake API's route of its model calls.
    pub route: &'static str,
    /// The model calls of the test's turn so far (on `route`, for the
    /// marker `m`).
    pub calls: fn(api: &FakeApi, route: &str, m: &str) -> Vec<Value>,
    /// The text of a model call's last user message.
    pub text: fn(&Value) -> String,
    /// Starts the CLI in `s.ws` with its hooks in standalone mode
    /// (`standalone_args` with two retries), prompted with [`prompt`].
    pub standalone: fn(s: &Scratch, api: &FakeApi, m: &str) -> AgentRun,
}

/// The prompt every such test gives, with the marker in it.
pub fn prompt(m: &str) -> String {
    format!("gatehost-test-{m}: create the file DONE, then say so.")
}

/// `gatehost hook AGENT ARGS --state-dir DIR`, as a shell command line
/// (the CLI runs it with `bash -c`). The state directory's name holds the
/// marker, so every hook process (bash and gatehost) carries it.
pub fn hook_command(s: &Scratch, m: &str, agent: &str, args: &[String]) -> String {
    let mut words = vec![
        env!("CARGO_BIN_EXE_gatehost").to_string(),
        "hook".into(),
        agent.into(),
    ];
    words.extend(args.iter().cloned());
    words.extend(["--state-dir".to_string(), state_dir(s, m)]);
    words
        .iter()
        .map(|w| format!("'{}'", w.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The hook's state directory, named after the marker.
pub fn state_dir(s: &Scratch, m: &str) -> String {
    s.out
        .join(format!("state-gatehost-test-{m}"))
        .display()
        .to_string()
}

/// The CLI's private `HOME` and `TMPDIR` under `s.out` (made), and its
/// command: `program` in `s.ws` with only those, a `PATH` and `NO_COLOR`.
pub fn cli_command(s: &Scratch, program: &Path) -> (PathBuf, Command) {
    let home = s.out.join("home");
    let tmp = s.out.join("tmp");
    std::fs::create_dir_all(&tmp).expect("mkdir");
    let path = "/usr/local/bin:/usr/bin:/bin";
    let mut cmd = private_command(program, &s.ws, path, [&home, &tmp]);
    cmd.env("NO_COLOR", "1");
    (home, cmd)
}

/// A hold file for the script, under `s.out`.
pub fn hold(s: &Scratch, name: &str) -> String {
    s.out.join(name).display().to_string()
}

/// Lets the fake API answer the model call held on `name`.
pub fn release(s: &Scratch, name: &str) {
    std::fs::write(s.out.join(name), "").expect("release");
}

/// A daemon (data in `s.etc/data`, configuration written to `file`) that
/// lets an agent's gate run `test` with any arguments.
pub fn daemon_allowing_test(s: &Scratch, file: &str) -> Daemon {
    let cfg = s.write(
        file,
        &format!("[shell]\nallow = [{{ program = \"test\", free_args = true }}]\n{DAEMON_ROOTS}"),
    );
    Daemon::start(&s.etc.join("data"), &cfg)
}

/// The policy `policy` nudged exactly once and came to `commit-ready`.
pub fn assert_nudged_once_then_commit_ready(d: &Daemon, policy: &str) {
    let events = d.policy_events(policy);
    for want in ["policy:nudge", "policy:commit-ready"] {
        assert!(
            events.iter().any(|e| e == want),
            "{want} missing: {events:?}"
        );
    }
    let nudges = events.iter().filter(|e| *e == "policy:nudge").count();
    assert_eq!(nudges, 1, "{events:?}");
}

impl Headless {
    /// The turn's model calls once there are `n` of them (within [`T`]).
    pub fn wait_for_calls(&self, api: &FakeApi, m: &str, n: usize) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let calls = (self.calls)(api, self.route, m);
            if calls.len() >= n {
                return calls;
            }
            assert!(
                started.elapsed() < T,
                "{}: {} of {n} model calls within {T:?}: {calls:#?}",
                self.name,
                calls.len()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A scratch area, a marker (`NAME-CASE`), the fake API answering the
    /// script `steps`, and the CLI started in standalone mode.
    fn started(
        &self,
        case: &str,
        steps: impl FnOnce(&Scratch) -> Value,
    ) -> (Scratch, String, FakeApi, AgentRun) {
        let s = Scratch::new();
        let m = marker(&format!("{}-{case}", self.name));
        let api = FakeApi::start_script(&s.out, &steps(&s));
        let run = (self.standalone)(&s, &api, &m);
        (s, m, api, run)
    }

    /// The fixed flow: the first stop is refused, the next model call's
    /// last user message is the gate's reason (the first call's is not);
    /// the workspace is fixed while that call is held, the next stop
    /// passes, the CLI exits 0 after exactly two model calls having said
    /// both answers, and nothing of the run is left. What the CLI printed.
    pub fn a_fixed_turn_ends_the_run(&self) -> AgentOutput {
        let name = self.name;
        let (s, m, api, run) = self.started("fix", |s| {
            json!([
                {"text": "I created DONE."},
                {"text": "Now DONE really exists.", "hold_until": hold(s, "fixed")},
                {"text": "A third call must not happen."},
            ])
        });

        let calls = self.wait_for_calls(&api, &m, 2);
        assert!(
            !survivors(&m).is_empty(),
            "the marker does not find the running {name}: the survivors check would prove nothing"
        );
        let nudge = (self.text)(&calls[1]);
        assert!(
            nudge.contains("DONE exists") && nudge.contains(NUDGE),
            "{name}: the model call after the stop does not carry the block reason: {nudge:?}"
        );
        // The agent "fixes" the workspace while its model call is held.
        s.write_ws("DONE", "done\n");
        release(&s, "fixed");

        let end = run.finish(T);
        end.assert_exited_0();
        let calls = (self.calls)(&api, self.route, &m);
        assert_eq!(
            calls.len(),
            2,
            "{name}: the fixed turn was let stop: {calls:#?}"
        );
        assert!(
            !(self.text)(&calls[0]).contains(NUDGE),
            "{name}: {calls:#?}"
        );
        let said = ["I created DONE.", "Now DONE really exists."];
        assert_said(name, &end.stdout, &said, "must not happen");
        assert_no_survivors(&m);
        end
    }

    /// The never-fixed flow: every stop fails its gate; two are refused
    /// (two model calls carry the reason), the third goes through: three
    /// model calls, the CLI exits 0 with the third answer said and no
    /// later one, and nothing of the run is left. The scratch area, the
    /// marker and what the CLI printed.
    pub fn a_gate_never_fixed_blocks_twice(&self) -> (Scratch, String, AgentOutput) {
        let name = self.name;
        let (s, m, api, run) = self.started("never", |_| {
            let attempts = ["one: done", "two: done", "three: done"]
                .into_iter()
                .chain(["four: must not happen", "five: must not happen"]);
            attempts
                .map(|a| json!({"text": format!("Attempt {a}.")}))
                .collect()
        });
        let end = run.finish(T);

        end.assert_exited_0();
        let calls = (self.calls)(&api, self.route, &m);
        let nudged = calls
            .iter()
            .filter(|c| (self.text)(c).contains(NUDGE))
            .count();
        assert_eq!(
            nudged, 2,
            "{name}: model calls carrying the block reason: {calls:#?}"
        );
        assert_eq!(calls.len(), 3, "{name}: the first call and two retries");
        assert_said(
            name,
            &end.stdout,
            &["Attempt three: done."],
            "must not happen",
        );
        assert_no_survivors(&m);
        (s, m, end)
    }
}

/// `name`'s `stdout` holds each of `said`, and not `never`.
#[track_caller]
fn assert_said(name: &str, stdout: &str, said: &[&str], never: &str) {
    for s in said {
        assert!(stdout.contains(s), "{name}: {s:?} not said: {stdout}");
    }
    assert!(!stdout.contains(never), "{name}: {never:?} said: {stdout}");
}

/// Every model call on `route` (for a CLI that makes no side query).
pub fn all_calls(api: &FakeApi, route: &str, _m: &str) -> Vec<Value> {
    api.model_calls(route)
}
