//! ACP sessions (`session start --acp`) with a real daemon and a scripted
//! ACP agent (tests/support/acp-agent/agent.py, JSON-RPC over its stdio): its
//! prompts' `end_turn` are turn-ends, a nudge is its next prompt, its
//! permission requests follow the session's rule (allowed, denied,
//! escalated to the operator, timed out), its file and terminal requests
//! are refused, it cannot read the operator token, and a restart marks the
//! session exited.

use crate::common::daemon::Daemon;
use crate::common::shorthand::assert_lacks;
use crate::common::{self, Scratch, allow_config};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

const T: Duration = Duration::from_secs(60);

pub(crate) fn agent_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/support/acp-agent")
}

/// The system's Python: a shim outside the system directories (pyenv's)
/// is out of a confined agent's reach.
pub(crate) fn python() -> &'static str {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

pub(crate) fn setup() -> (Scratch, Daemon) {
    setup_with_env(&[])
}

/// As `setup`, the daemon started with `env`.
pub(crate) fn setup_with_env(env: &[(&str, &str)]) -> (Scratch, Daemon) {
    let s = Scratch::new();
    let agents = format!(
        "[agents]\nread = [{:?}]\n",
        agent_dir().display().to_string()
    );
    let cfg = s.write(
        "config.toml",
        &format!("{}{agents}", allow_config(&["true", "false"])),
    );
    let d = Daemon::start_with_env(&s.etc.join("data"), &cfg, env);
    (s, d)
}

/// What the agent logged (one JSON object a line).
pub(crate) fn agent_log(ws: &Path) -> Vec<Value> {
    std::fs::read_to_string(ws.join("acp-log.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The prompts the agents in `ws` received, in order.
pub(crate) fn prompts(ws: &Path) -> Vec<String> {
    agent_log(ws)
        .iter()
        .filter(|l| l["received"]["method"] == "session/prompt")
        .map(|l| {
            l["received"]["params"]["prompt"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

pub(crate) fn wait_for<T>(what: &str, f: impl FnMut() -> Option<T>) -> T {
    crate::common::shorthand::wait_for_within(T, what, f)
}

fn events_of(d: &Daemon, session: &str, kind: &str) -> Vec<Value> {
    d.all_events(&format!("&session={session}&types={kind}"))
}

fn start(d: &Daemon, s: &Scratch, id: &str, rule: Value, prompt: &str, marker: &str) {
    let rule_file = s.write(&format!("{id}-rule.json"), &rule.to_string());
    let script = agent_dir().join("agent.py");
    d.cli_ok(
        &[
            "session",
            "start",
            "--acp",
            "--id",
            id,
            "--cwd",
            &s.ws.display().to_string(),
            "--permission-rule",
            &rule_file.display().to_string(),
            "--prompt",
            prompt,
            "--",
            python(),
            &script.display().to_string(),
            &format!("gatehost-test-{marker}"),
        ],
        &d.operator,
    );
}

#[test]
fn an_acp_session_ends_turns_on_end_turn_takes_nudges_as_prompts_and_asks_its_rule() {
    let (s, d) = setup();
    let m = common::marker("acp-agent");
    let rule = json!({"allow": ["read"], "deny": ["delete"], "otherwise": "escalate", "timeoutMs": 60_000});
    start(
        &d,
        &s,
        "bot",
        rule,
        "PERMISSION read cat\nPERMISSION delete rm\nPERMISSION edit patch",
        &m,
    );
    // The turn waits on the escalated `edit`: attach a policy meanwhile,
    // whose gate fails and whose nudge asks the agent to read the
    // operator's token.
    let escalated = wait_for("the escalation", || {
        events_of(&d, "bot", "session:permission-escalated")
            .into_iter()
            .next()
    });
    let payload = &escalated["payload"];
    assert_eq!(payload["tool"]["kind"], "edit", "{escalated}");
    let request = payload["request"].as_str().expect("request id").to_string();
    let token = d.data.join("operator.token");
    assert!(token.exists(), "the daemon keeps {}", token.display());
    let pid = d.attach(
        json!({"sessionId": "bot", "gate": {"command": "false"}, "watchFrom": "now",
        "onFail": {"nudge": format!("OPEN {}", token.display()), "maxRetries": 1}}),
    );
    // The agent token cannot answer for the operator.
    let path = format!("/v1/sessions/bot/permissions/{request}");
    let (code, body) = d.post(&path, &d.agent, Some(json!({"allow": true})));
    assert_eq!(code, 403, "{body}");
    d.cli_ok(
        &["session", "permission", "bot", &request, "--allow"],
        &d.operator,
    );
    // A second answer finds nothing waiting.
    let (code, _) = d.post(&path, &d.operator, Some(json!({"allow": false})));
    assert_eq!(code, 404);

    // The turn-end comes from `end_turn`, with the agent's message.
    let ends = wait_for("the first turn-end", || {
        let e = events_of(&d, "bot", "session:turn-end");
        (!e.is_empty()).then_some(e)
    });
    let msg = ends[0]["payload"]["message"].as_str().unwrap_or_default();
    assert_eq!(msg, "done: cat=yes rm=no patch=yes", "{}", ends[0]);
    // Each answer is an event saying who gave it.
    let answers: Vec<(String, bool, String)> = events_of(&d, "bot", "session:permission")
        .iter()
        .map(|e| {
            let p = &e["payload"];
            (
                p["tool"]["title"].as_str().unwrap_or_default().to_string(),
                p["allowed"].as_bool().unwrap_or_default(),
                p["by"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        answers,
        vec![
            ("cat".into(), true, "rule".into()),
            ("rm".into(), false, "rule".into()),
            ("patch".into(), true, "operator".into()),
        ]
    );

    // The gate fails: the nudge is the agent's next prompt, and the agent,
    // confined, cannot read the token.
    let opened = wait_for("the nudged prompt", || {
        agent_log(&s.ws).into_iter().find(|l| l["action"] == "open")
    });
    let prompts = prompts(&s.ws);
    assert_eq!(prompts.len(), 2, "{prompts:?}");
    assert!(
        prompts[1].contains(&format!("OPEN {}", token.display())),
        "{prompts:?}"
    );
    assert_eq!(
        opened["result"], "errno 13",
        "the agent read the operator token: {opened}"
    );
    wait_for("the second turn-end", || {
        (events_of(&d, "bot", "session:turn-end").len() >= 2).then_some(())
    });
    let _ = pid;
    // It advertised no file system and no terminal.
    let init = agent_log(&s.ws)
        .into_iter()
        .find(|l| l["received"]["method"] == "initialize")
        .expect("initialize");
    let caps = &init["received"]["params"]["clientCapabilities"];
    // (Absent or false: the protocol's default is false.)
    assert_ne!(caps["fs"]["readTextFile"], true, "{caps}");
    assert_ne!(caps["fs"]["writeTextFile"], true, "{caps}");
    assert_ne!(caps["terminal"], true, "{caps}");
    assert!(
        !common::survivors(&m).is_empty(),
        "the agent lives between turns"
    );
    drop(d);
    wait_for("the agent's death with its daemon", || {
        common::survivors(&m).is_empty().then_some(())
    });
}

#[test]
fn hostile_file_and_terminal_requests_are_refused_a_late_answer_denies_and_a_restart_says_exited() {
    let (s, mut d) = setup();
    let m = common::marker("acp-hostile");
    let secret = s.etc.join("secret.txt");
    std::fs::write(&secret, "top secret").expect("write");
    let prompt = format!(
        "READ {}\nWRITE ../../outside.txt\nTERMINAL sh -c id\nPERMISSION execute sh",
        secret.display()
    );
    start(
        &d,
        &s,
        "evil",
        json!({"otherwise": "escalate", "timeoutMs": 300}),
        &prompt,
        &m,
    );
    let ends = wait_for("the turn-end", || {
        let e = events_of(&d, "evil", "session:turn-end");
        (!e.is_empty()).then_some(e)
    });
    assert_eq!(
        ends[0]["payload"]["message"], "done: read=error write=error terminal=error sh=no",
        "{}",
        ends[0]
    );
    let refused: Vec<String> = events_of(&d, "evil", "session:client-refused")
        .iter()
        .map(|e| {
            e["payload"]["method"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(
        refused,
        ["fs/read_text_file", "fs/write_text_file", "terminal/create"]
    );
    let log = agent_log(&s.ws);
    let read = log.iter().find(|l| l["action"] == "read").expect("read");
    assert!(read["answer"]["error"].is_object(), "{read}");
    assert_lacks(&read.to_string(), "top secret");
    assert!(!s.ws.join("../../outside.txt").exists());
    let answer = events_of(&d, "evil", "session:permission");
    assert_eq!(answer.len(), 1, "{answer:?}");
    assert_eq!(answer[0]["payload"]["by"], "timeout", "{}", answer[0]);
    assert_eq!(answer[0]["payload"]["allowed"], false);

    assert!(events_of(&d, "evil", "session:exited").is_empty());
    d.restart();
    let exited = wait_for("the exit after the restart", || {
        events_of(&d, "evil", "session:exited").into_iter().next()
    });
    let msg = exited["payload"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("the daemon restarted"), "{exited}");
    let session = d.agent_ok("GET", "/v1/sessions/evil", None);
    assert_eq!(session["state"], "exited", "{session}");
    common::assert_no_survivors(&m);
}
