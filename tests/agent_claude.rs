//! The real Claude Code CLI (pinned, from npm) gated by `gatehost hook
//! claude`, against the fake Anthropic API on loopback: a failing gate's
//! reason reaches the model and the stop waits for the fix; a gate never
//! fixed blocks exactly `--max-retries` times, then the stop happens with a
//! message the user sees; the same through `gatehost serve`, ending in
//! `awaiting-ack`.

use crate::common;
use crate::common::agents::{AgentOutput, AgentRun, FakeApi, agent_cli};
use crate::common::daemon::{Daemon, git_repo};
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
struct Claude {
    config: PathBuf,
    home: PathBuf,
    tmp: PathBuf,
}

impl Claude {
    fn new(s: &Scratch, marker: &str) -> Claude {
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

    /// User-scope settings: `hook` on Stop, SessionStart and UserPromptSubmit.
    fn hooks(&self, hook: &str) {
        let entry = json!([{"hooks": [{"type": "command", "command": hook, "timeout": 120}]}]);
        let settings = json!({"hooks": {
            "Stop": entry, "SessionStart": entry, "UserPromptSubmit": entry,
        }});
        std::fs::write(self.config.join("settings.json"), settings.to_string()).expect("settings");
    }

    fn start(
        &self,
        ws: &Path,
        api: &FakeApi,
        extra_env: &[(&str, &str)],
        args: &[&str],
        out: &Path,
    ) -> AgentRun {
        let mut cmd = std::process::Command::new(agent_cli("claude"));
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
        .current_dir(ws)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &self.home)
        .env("CLAUDE_CONFIG_DIR", &self.config)
        .env("TMPDIR", &self.tmp)
        .env("ANTHROPIC_BASE_URL", api.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-fake")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .env("DISABLE_AUTOUPDATER", "1")
        .envs(extra_env.iter().copied());
        AgentRun::start(cmd, "Create the file DONE, then stop.", out)
    }
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

#[test]
fn a_failing_gate_sends_its_reason_to_the_model_and_the_fixed_work_stops() {
    let s = Scratch::new();
    let m = common::marker("claude-fix");
    git_repo(&s.ws);
    let release = s.out.join("release");
    let api = FakeApi::start_script(
        &s.out,
        &json!([
            {"text": "I am done."},
            {"text": "Fixed: DONE exists now.", "hold_until": release},
        ]),
    );
    let claude = Claude::new(&s, &m);
    claude.hooks(&standalone_hook(&s, &m, 2));
    let run = claude.start(&s.ws, &api, &[], &[], &s.out);

    // The first stop was refused: the second model call carries the reason.
    let calls = api.wait_for_calls(MODEL_ROUTE, 2, T);
    let second = calls[1]["body"].to_string();
    assert!(
        second.contains(NUDGE) && second.contains("test -f DONE"),
        "{second}"
    );
    assert!(!calls[0]["body"].to_string().contains(NUDGE));
    // The work is fixed while the model "thinks"; then the stop passes.
    std::fs::write(s.ws.join("DONE"), "").expect("fix");
    std::fs::write(&release, "").expect("release");
    let out = run.finish(T);

    assert!(out.status.success(), "{out:?}");
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
    let s = Scratch::new();
    let m = common::marker("claude-never");
    git_repo(&s.ws);
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
    common::assert_no_survivors(&m);
}

#[test]
fn through_the_daemon_the_session_is_gated_by_its_policy_and_ends_awaiting_ack() {
    let s = Scratch::new();
    let m = common::marker("claude-daemon");
    git_repo(&s.ws);
    let cfg = s.write("config.toml", &allow_config(&["test"]));
    let d = Daemon::start(&s.etc.join("data"), &cfg);
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

    let release = s.out.join("release");
    let api = FakeApi::start_script(
        &s.out,
        &json!([
            {"text": "I am done."},
            {"text": "Fixed: DONE exists now.", "hold_until": release},
        ]),
    );
    let claude = Claude::new(&s, &m);
    claude.hooks(&format!(
        "{} hook claude --budget 60s --state-dir {}",
        env!("CARGO_BIN_EXE_gatehost"),
        s.out.join(format!("gatehost-test-{m}")).display()
    ));
    let env = [
        ("GATEHOST_SERVER", d.url.as_str()),
        ("GATEHOST_TOKEN", d.agent.as_str()),
    ];
    let run = claude.start(&s.ws, &api, &env, &["--session-id", session], &s.out);

    let calls = api.wait_for_calls(MODEL_ROUTE, 2, T);
    let second = calls[1]["body"].to_string();
    assert!(
        second.contains(NUDGE) && second.contains("test -f DONE"),
        "{second}"
    );
    std::fs::write(s.ws.join("DONE"), "").expect("fix");
    std::fs::write(&release, "").expect("release");
    let out = run.finish(T);
    assert!(out.status.success(), "{out:?}");
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
    common::assert_no_survivors(&m);
}
