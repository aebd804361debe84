//! The real Claude Code CLI (pinned, from npm) gated by `gatehost hook
//! claude`, against the fake Anthropic API on loopback: a failing gate's
//! reason reaches the model and the stop waits for the fix; a gate never
//! fixed blocks exactly `--max-retries` times, then the stop happens with a
//! message the user sees; the same through `gatehost serve`, ending in
//! `awaiting-ack`.

use crate::common;
use crate::common::agents::{
    AgentOutput, AgentRun, FakeApi, agent_cli, daemon_configured, private_command, scratch_repo,
};
use crate::common::daemon::Daemon;
use crate::common::hooks::assert_blocks;
use crate::common::{Scratch, allow_config};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

const T: Duration = Duration::from_secs(120);
const MODEL_ROUTE: &str = "/v1/messages";
/// Words of the nudge that only a blocked stop puts in a model request.
const NUDGE: &str = "did not pass";

/// A Claude Code run's private places (config with the hooks, home, tmp),
/// all under the scratch area and outside the workspace.
pub(crate) struct Claude {
    config: PathBuf,
    home: PathBuf,
    tmp: PathBuf,
}

impl Claude {
    pub(crate) fn new(s: &Scratch, marker: &str) -> Claude {
        let root = s.out.join(format!("claude-{marker}"));
        let c = Claude {
            config: root.join("config"),
            home: root.join("home"),
            tmp: root.join("tmp"),
        };
        for d in [&c.config, &c.home, &c.tmp] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        c
    }

    /// User-scope settings: `hook` on Stop, SubagentStop, SessionStart,
    /// UserPromptSubmit and SessionEnd.
    /// The stop hooks carry `"onFailure": "block"`, as `hook install
    /// claude` writes them for 2.1.295 and later: the real CLI reads them.
    pub(crate) fn hooks(&self, hook: &str) {
        let entry = json!([{"hooks": [{"type": "command", "command": hook, "timeout": 120}]}]);
        let stop = json!([{"hooks": [{"type": "command", "command": hook, "timeout": 120,
            "onFailure": "block"}]}]);
        let settings = json!({"hooks": {
            "Stop": stop, "SubagentStop": stop, "SessionStart": entry, "UserPromptSubmit": entry, "SessionEnd": entry,
        }});
        std::fs::write(self.config.join("settings.json"), settings.to_string()).expect("settings");
    }

    pub(crate) fn start(
        &self,
        ws: &Path,
        api: &FakeApi,
        extra_env: &[(&str, &str)],
        args: &[&str],
        out: &Path,
    ) -> AgentRun {
        let (home, tmp) = (&self.home, &self.tmp);
        let mut cmd = private_command(agent_cli("claude"), ws, "/usr/bin:/bin", [home, tmp]);
        cmd.args([
            "-p",
            "--model",
            "claude-sonnet-4-6",
            "--setting-sources",
            "user",
        ])
        .args([
            "--strict-mcp-config",
            "--tools",
            "",
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .args(args)
        .env("CLAUDE_CONFIG_DIR", &self.config)
        .env("ANTHROPIC_BASE_URL", api.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-fake")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .env("DISABLE_AUTOUPDATER", "1")
        .envs(extra_env.iter().copied());
        AgentRun::start(cmd, "Create the file DONE, then stop.", out)
    }
}

/// Daemon-mode hooks for `claude` (a 60 s budget, the test's state
/// directory); the keyring directory to give them.
pub(crate) fn daemon_hooks(claude: &Claude, s: &Scratch, marker: &str, d: &Daemon) -> String {
    claude.hooks(&format!(
        "{} hook claude --budget 60s --state-dir {}",
        env!("CARGO_BIN_EXE_gatehost"),
        s.out.join(format!("gatehost-test-{marker}")).display()
    ));
    d.keyring().dir().display().to_string()
}

/// What daemon-mode hooks find the daemon by.
pub(crate) fn daemon_env<'a>(d: &'a Daemon, keys: &'a str) -> [(&'static str, &'a str); 3] {
    [
        ("GATEHOST_SERVER", d.url.as_str()),
        ("GATEHOST_TOKEN", d.agent.as_str()),
        ("GATEHOST_SESSION_KEYS", keys),
    ]
}

/// The standalone hook command: `test -f DONE` as the gate.
fn standalone_hook(s: &Scratch, marker: &str, max_retries: u32) -> String {
    let config = s.write("config.toml", &allow_config(&["test"]));
    let gates = s.write(
        "gates.json",
        r#"{"command": "test", "args": ["-f", "DONE"]}"#,
    );
    format!(
        "{} hook claude --gates {} --config {} --max-retries {max_retries} --state-dir {}",
        env!("CARGO_BIN_EXE_gatehost"),
        gates.display(),
        config.display(),
        s.out.join(format!("gatehost-test-{marker}")).display()
    )
}

/// The messages Claude Code showed its user ("Stop says: …").
fn shown_to_user(out: &AgentOutput) -> Vec<String> {
    out.json_lines()
        .into_iter()
        .filter(|l| l["type"] == "system" && l["subtype"] == "informational")
        .filter_map(|l| l["content"].as_str().map(str::to_string))
        .collect()
}

/// How many model requests carry the nudge.
fn nudged_calls(api: &FakeApi) -> usize {
    api.model_calls(MODEL_ROUTE)
        .iter()
        .filter(|r| r["body"].to_string().contains(NUDGE))
        .count()
}

/// Claude Code in `s.ws` against the fake API answering "I am done."
/// and, once the work is fixed, "Fixed: DONE exists now.", with the
/// standalone hooks (`test -f DONE`, two retries), or daemon-mode hooks
/// when `d` is given; `args` added to its command line. Its first stop is
/// sent back: the second model call carries the gate's reason, the first
/// does not; the work is fixed while that call is held, and the run exits
/// 0. The fake API and what Claude Code printed.
fn sent_back_then_fixed(
    s: &Scratch,
    m: &str,
    d: Option<&Daemon>,
    args: &[&str],
) -> (FakeApi, AgentOutput) {
    let (api, release) = FakeApi::held_second(&s.out, "I am done.", "Fixed: DONE exists now.");
    let claude = Claude::new(s, m);
    let run = match d {
        None => {
            claude.hooks(&standalone_hook(s, m, 2));
            claude.start(&s.ws, &api, &[], args, &s.out)
        }
        Some(d) => {
            let keys = daemon_hooks(&claude, s, m, d);
            claude.start(&s.ws, &api, &daemon_env(d, &keys), args, &s.out)
        }
    };
    // The first stop was refused: the second model call carries the reason.
    let calls = api.wait_for_calls(MODEL_ROUTE, 2, T);
    assert!(!calls[0]["body"].to_string().contains(NUDGE));
    let out = fixed_then_finished(s, run, &calls[1], &release);
    (api, out)
}

/// The work is fixed while the model "thinks" (`call`, held until
/// `release`, carries the nudge of `test -f DONE`); then the stop passes
/// and Claude Code exits 0. What it printed.
pub(crate) fn fixed_then_finished(
    s: &Scratch,
    run: AgentRun,
    call: &Value,
    release: &Path,
) -> AgentOutput {
    common::agents::fix_after_nudge(call, &[NUDGE, "test -f DONE"], &s.ws.join("DONE"), release);
    let out = run.finish(T);
    assert!(out.status.success(), "{out:?}");
    out
}

#[test]
fn a_failing_gate_sends_its_reason_to_the_model_and_the_fixed_work_stops() {
    let (s, m) = scratch_repo("claude-fix");
    let (api, out) = sent_back_then_fixed(&s, &m, None, &[]);
    assert!(out.stdout.contains("Fixed: DONE exists now."), "{out:?}");
    assert_eq!(
        api.model_calls(MODEL_ROUTE).len(),
        2,
        "the passing stop was not refused"
    );
    assert!(
        shown_to_user(&out).iter().all(|m| !m.contains("blocked")),
        "{:?}",
        shown_to_user(&out)
    );
    common::assert_no_survivors(&m);
}

#[test]
fn a_gate_never_fixed_blocks_exactly_max_retries_times_then_the_user_is_told() {
    let (s, m) = scratch_repo("claude-never");
    let api = FakeApi::start_script(&s.out, &json!([{"text": "I am done."}]));
    let claude = Claude::new(&s, &m);
    claude.hooks(&standalone_hook(&s, &m, 3));
    let out = claude.start(&s.ws, &api, &[], &[], &s.out).finish(T);

    assert!(out.status.success(), "{out:?}");
    // One first call, then one per refused stop: three, not Claude Code's
    // own cap of eight.
    assert_eq!(api.model_calls(MODEL_ROUTE).len(), 4, "{out:?}");
    assert_eq!(nudged_calls(&api), 3);
    let shown = shown_to_user(&out);
    assert!(
        shown
            .iter()
            .any(|m| m.contains("blocked, out of retries") && m.contains("test -f DONE")),
        "the user was not told: {shown:?}\n{out:?}"
    );
    // `claude -p` exited 0; the record a script reads says the work was
    // let through without a pass, after the session ended.
    let (code, record) = hook_status(&s, &m, &["--last", "--cwd", s.ws.to_str().expect("utf-8")]);
    assert_eq!(code, 1, "{record}");
    assert_eq!(record["outcome"], "let-through", "{record}");
    assert_eq!(record["why"], "out-of-retries", "{record}");
    assert_eq!(
        (&record["stops"], &record["sentBack"], &record["letThrough"]),
        (&json!(4), &json!(3), &json!(1)),
        "{record}"
    );
    let by_id = format!("claude:{}", record["sessionId"].as_str().expect("id"));
    assert_eq!(hook_status(&s, &m, &[&by_id]), (1, record));
    common::assert_no_survivors(&m);
}

/// `gatehost hook status ARGS --json` on the test's hook state directory:
/// its exit code and record.
pub(crate) fn hook_status(s: &Scratch, marker: &str, args: &[&str]) -> (i32, Value) {
    let state = s.out.join(format!("gatehost-test-{marker}"));
    let mut all = vec![
        "hook",
        "status",
        "--json",
        "--state-dir",
        state.to_str().expect("utf-8"),
    ];
    all.extend_from_slice(args);
    let all: Vec<String> = all.iter().map(ToString::to_string).collect();
    let r = common::run_gatehost(&all, &[]);
    (
        r.code,
        serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {r:?}")),
    )
}

/// A daemon stop no policy watches goes through, and is never silent: the
/// user is shown it was not gated, the daemon says so once
/// (`session:ungated`, a notification), and the record a script reads
/// says so too.
#[test]
fn through_the_daemon_a_stop_no_policy_watches_is_shown_told_and_recorded() {
    let (s, m) = scratch_repo("claude-ungated");
    let told = common::webhooks::receiver_answering(None);
    let notify = format!("[daemon]\nnotify_url = \"{}\"\n", told.url);
    let d = daemon_configured(&s, &allow_config(&["test"]).replace("[daemon]\n", &notify));
    let api = FakeApi::start_script(&s.out, &json!([{"text": "I am done."}]));
    let claude = Claude::new(&s, &m);
    let keys = daemon_hooks(&claude, &s, &m, &d);
    let env = daemon_env(&d, &keys);
    let out = claude.start(&s.ws, &api, &env, &[], &s.out).finish(T);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(api.model_calls(MODEL_ROUTE).len(), 1, "not sent back");
    let shown = shown_to_user(&out);
    assert!(
        shown
            .iter()
            .any(|l| l.contains("no policy watches this session")),
        "the user was not told: {shown:?}\n{out:?}"
    );
    let ungated = d.all_events("types=session:ungated");
    assert_eq!(ungated.len(), 1, "{ungated:?}");
    let id = ungated[0]["sessionId"]
        .as_str()
        .expect("session")
        .to_string();
    assert!(id.starts_with("claude:"), "{id}");
    common::eventually_within(T, "the operator is told", || {
        told.kinds().contains(&"session:ungated".to_string())
    });
    let (code, record) = hook_status(&s, &m, &[&id]);
    assert_eq!(code, 1, "{record}");
    assert_eq!(
        (&record["outcome"], &record["why"]),
        (&json!("let-through"), &json!("ungated"))
    );
    common::assert_no_survivors(&m);
}

#[test]
fn through_the_daemon_the_session_is_gated_by_its_policy_and_ends_awaiting_ack() {
    let (s, m) = scratch_repo("claude-daemon");
    let d = daemon_configured(&s, &allow_config(&["test"]));
    let session = "4d7b7f3e-2a65-4c1b-9a52-0c6f1e8d2b11";
    let id = format!("claude:{session}");
    d.register(&id, &s.ws);
    let policy = d.attach(json!({
        "sessionId": id,
        "gate": {"command": "bash", "args": ["-c", "test -f DONE"]},
        "then": "commit",
        "commit": {"paths": ["DONE"], "message": "Add DONE"},
        "onFail": {"maxRetries": 2},
    }));

    let (api, _) = sent_back_then_fixed(&s, &m, Some(&d), &["--session-id", session]);
    assert_eq!(api.model_calls(MODEL_ROUTE).len(), 2);

    let p = d.policy(&policy);
    assert_eq!(p["status"], "awaiting-ack", "{p}");
    let events = d.policy_events(&policy);
    let at = |kind: &str| events.iter().position(|e| e == kind);
    assert!(
        at("policy:nudge") < at("policy:commit-ready") && at("policy:nudge").is_some(),
        "{events:?}"
    );
    // The hooks registered the session's turns on the bus, with its last message.
    let session_events: Vec<Value> =
        d.all_events(&format!("session={id}&types=turn-start,turn-end"));
    let kinds: Vec<&str> = session_events
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert!(kinds.contains(&"session:turn-start"), "{kinds:?}");
    assert_eq!(
        kinds.iter().filter(|k| **k == "session:turn-end").count(),
        2,
        "{kinds:?}"
    );
    assert!(
        session_events
            .iter()
            .any(|e| e.to_string().contains("Fixed: DONE exists now.")),
        "{session_events:?}"
    );
    // Claude Code's SessionEnd, as it exits, reported the session exited.
    assert_session_exited(&d, &id);
    common::assert_no_survivors(&m);
}

/// Daemon mode as a new user sets it up: a standing policy added once from
/// the CLI (`policy attach --template --agent claude --under WS`), then
/// Claude Code run with no session id chosen in advance and nothing
/// registered by hand: its first hook registers `claude:<its id>`, the
/// template's policy attaches, a failing gate sends it back, the fixed work
/// ends `awaiting-ack`.
#[test]
fn through_the_daemon_a_standing_policy_gates_a_session_nobody_named_in_advance() {
    let (s, m) = scratch_repo("claude-standing");
    let d = daemon_configured(&s, &allow_config(&["test"]));
    let template = s.write(
        "rust.json",
        &json!({
            "gate": {"command": "bash", "args": ["-c", "test -f DONE"]},
            "then": "commit",
            "commit": {"paths": ["DONE"], "message": "Add DONE"},
            "onFail": {"maxRetries": 2},
        })
        .to_string(),
    );
    let (t, ws) = (template.display(), s.ws.display());
    let line = format!("policy attach --template {t} --agent claude --under {ws}");
    let added = d.cli(&line.split(' ').collect::<Vec<_>>(), &d.operator);
    assert_eq!(added.code, 0, "{added:?}");

    sent_back_then_fixed(&s, &m, Some(&d), &[]);

    let list = d.agent_ok("GET", "/v1/policies?limit=100", None);
    let policies = list["policies"].as_array().expect("policies");
    assert_eq!(policies.len(), 1, "{list}");
    let p = &policies[0];
    let session = p["sessions"][0].as_str().expect("a member").to_string();
    assert!(session.starts_with("claude:") && session.len() > 20, "{p}");
    assert_eq!(p["status"], "awaiting-ack", "{p}");
    assert_eq!(p["spec"]["attachedBy"], "operator", "{p}");
    let id = p["policyId"].as_str().expect("id");
    let events = d.policy_events(id);
    assert!(events.contains(&"policy:nudge".to_string()), "{events:?}");
    assert_session_exited(&d, &session);
    common::assert_no_survivors(&m);
}

/// The daemon holds `id` as exited, and its last session event says so.
pub(crate) fn assert_session_exited(d: &Daemon, id: &str) {
    let session = d.agent_ok("GET", &format!("/v1/sessions/{id}"), None);
    assert_eq!(session["state"], "exited", "{session}");
    let events: Vec<Value> = d.all_events(&format!("session={id}"));
    let last = events.last().and_then(|e| e["type"].as_str());
    assert_eq!(last, Some("session:exited"), "{events:?}");
}

#[test]
fn a_daemon_gate_still_running_at_the_budget_blocks_and_the_next_stop_gets_its_verdict() {
    let (s, m) = scratch_repo("claude-budget");
    let d = daemon_configured(&s, &allow_config(&[]));
    let id = "claude:slow";
    d.register(id, &s.ws);
    let policy = d.attach(json!({
        "sessionId": id,
        "gate": {"command": "bash", "args": ["-c", "sleep 2; test -f DONE"]},
        "onFail": {"maxRetries": 2},
    }));
    let state = s.out.join(format!("gatehost-test-{m}"));
    let state = state.to_str().expect("utf-8");
    let keys = d.keyring().dir().display().to_string();
    let env = daemon_env(&d, &keys);
    let stop = json!({"session_id": "slow", "cwd": s.ws, "hook_event_name": "Stop", "last_assistant_message": "done"});

    let stop_within = |budget: &str| {
        common::claude_hook_once(&["--budget", budget, "--state-dir", state], &env, &stop)
    };
    // The gate takes 2 s; the hook's budget is 300 ms: "still running".
    assert_blocks(stop_within("300ms").as_bytes(), "still running");
    // The next stop waits for that verdict (the gate kept running in the
    // daemon): a fail, so the nudge.
    assert_blocks(stop_within("30s").as_bytes(), NUDGE);
    // Fixed: the next stop passes, and the answer is nothing at all.
    std::fs::write(s.ws.join("DONE"), "").expect("fix");
    assert_eq!(stop_within("30s"), "", "a pass says nothing");
    assert_eq!(d.policy(&policy)["status"], "done");
    common::assert_no_survivors(&m);
}

#[test]
fn a_standalone_session_end_forgets_the_sessions_retry_count() {
    let s = Scratch::new();
    let m = common::marker("claude-end");
    let cfg = s.write("config.toml", &allow_config(&[]));
    let gates = s.write(
        "gates.json",
        &json!({"command": "bash", "args": ["-c", "test -f DONE"]}).to_string(),
    );
    let state = s.out.join(format!("gatehost-test-{m}"));
    let args = [
        "--gates",
        gates.to_str().expect("utf-8"),
        "--config",
        cfg.to_str().expect("utf-8"),
        "--max-retries",
        "1",
        "--state-dir",
        state.to_str().expect("utf-8"),
    ];
    let input = |event: &str| {
        json!({"session_id": "ended", "cwd": s.ws, "hook_event_name": event,
            "last_assistant_message": "done", "reason": "other"})
    };
    let decision = |out: &str| -> Value { serde_json::from_str(out).expect("JSON") };
    // One retry: a block, then the stop is let through with the message.
    assert_eq!(
        decision(&common::claude_hook_once(&args, &[], &input("Stop")))["decision"],
        "block"
    );
    let exhausted = decision(&common::claude_hook_once(&args, &[], &input("Stop")));
    assert!(exhausted["systemMessage"].is_string(), "{exhausted}");
    // The standing and its lock, beside the stop records (`outcomes/`).
    let standing = || {
        std::fs::read_dir(&state)
            .expect("state")
            .flatten()
            .filter(|e| e.file_name() != "outcomes")
            .count()
    };
    assert_eq!(standing(), 2, "standing and lock");
    // The session ends: its standing and lock are gone, nothing is said.
    assert_eq!(
        common::claude_hook_once(&args, &[], &input("SessionEnd")),
        ""
    );
    assert_eq!(standing(), 0);
    // What its last stop came to is still there for a script.
    let (code, record) = hook_status(&s, &m, &["claude:ended"]);
    assert_eq!(
        (code, &record["why"]),
        (1, &json!("out-of-retries")),
        "{record}"
    );
    // The same id again counts from the start: a block, not "out of retries".
    assert_eq!(
        decision(&common::claude_hook_once(&args, &[], &input("Stop")))["decision"],
        "block"
    );
    common::assert_no_survivors(&m);
}
