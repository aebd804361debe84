//! Kiro CLI, from its documentation (not on a registry here: no real run;
//! docs/compatibility.md, tests/fixtures/hooks/kiro/): `hook install kiro
//! --kiro-agent NAME` adds gatehost's `stop` and `userPromptSubmit` hooks to
//! that agent's configuration (it must exist; no version key, every other
//! key kept), idempotently, and `uninstall` gives the bytes back; the
//! installed command answers the documented stop stdin with the documented
//! block (`{"decision": "block", "reason"}`, exit 0), nothing once fixed,
//! and a stop with a message after `--max-retries`; `doctor` finds it.

use super::{blocks, done_gate, hook, hook_ok, read_json, run_installed};
use crate::common::{Scratch, fixture, run_gatehost};
use serde_json::{Value, json};

/// An agent as Kiro's documentation shows one, without hooks.
fn agent(s: &Scratch, dir: &std::path::Path, name: &str) -> (std::path::PathBuf, String) {
    std::fs::create_dir_all(dir).expect("mkdir");
    let raw = std::fs::read(fixture("hooks/kiro/agent-config.json")).expect("fixture");
    let mut v: Value = serde_json::from_slice(&raw).expect("JSON");
    v.as_object_mut().expect("object").remove("hooks");
    v["name"] = json!(name);
    let text = serde_json::to_string_pretty(&v).expect("JSON") + "\n";
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, &text).expect("write");
    let _ = s;
    (path, text)
}

#[test]
fn kiro_hooks_go_into_the_named_agent_answer_its_stop_and_come_out_again() {
    let s = Scratch::new();
    crate::common::daemon::git_repo(&s.ws);
    let home = s.out.join("home");
    let gate = done_gate(&s);
    let (g, c) = (gate[1].as_str(), gate[3].as_str());

    // No agent named: refused, naming the option and what is there.
    let r = hook(&s, &["install", "kiro", "--gates", g, "--config", c]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("--kiro-agent"), "{r:?}");
    let (path, original) = agent(&s, &home.join(".kiro/agents"), "dev");
    let r = hook(&s, &["install", "kiro", "--gates", g, "--config", c]);
    assert!(
        r.code == 2 && r.stderr.contains("dev"),
        "the agents there are listed: {r:?}"
    );
    // An agent that is not there, a path, or --mcp: refused, nothing written.
    for bad in [
        vec!["--kiro-agent", "ops"],
        vec!["--kiro-agent", "../dev"],
        vec!["--kiro-agent", "dev", "--mcp"],
    ] {
        let mut args = vec!["install", "kiro", "--gates", g, "--config", c];
        args.extend(bad.iter().copied());
        let r = hook(&s, &args);
        assert_eq!(r.code, 2, "{bad:?}: {r:?}");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), original);
    }

    let args = [
        "install",
        "kiro",
        "--kiro-agent",
        "dev",
        "--gates",
        g,
        "--config",
        c,
    ];
    hook_ok(&s, &args);
    let once = std::fs::read_to_string(&path).expect("read");
    let v = read_json(&path);
    assert!(
        v.get("version").is_none(),
        "Kiro's schema has no version: {v}"
    );
    assert_eq!(v["name"], "dev");
    assert_eq!(
        v["tools"],
        json!(["*"]),
        "the agent's own keys are kept: {v}"
    );
    let stop = &v["hooks"]["stop"][0];
    assert_eq!(stop["timeout_ms"], 30000, "milliseconds, Kiro's unit: {v}");
    let command = stop["command"].as_str().expect("command").to_string();
    assert!(command.contains(" hook kiro "), "{command}");
    assert_eq!(
        v["hooks"]["userPromptSubmit"][0]["command"],
        command.as_str()
    );
    assert_eq!(hook(&s, &args).code, 0);
    assert_eq!(
        std::fs::read_to_string(&path).expect("read"),
        once,
        "idempotent"
    );

    // The documented stop (v2: no session id; the directory is the session).
    let raw = std::fs::read(fixture("hooks/kiro/stop.json")).expect("fixture");
    let mut input: Value = serde_json::from_slice(&raw).expect("JSON");
    input["cwd"] = json!(s.ws);
    blocks(&run_installed(&command, &input, &[]), "test -f DONE");
    // Kiro has no loop guard: gatehost's count ends the run of blocks.
    let again = run_installed(&command, &input, &[]);
    assert!(
        serde_json::from_slice::<Value>(&again.stdout).is_ok(),
        "{again:?}"
    );
    let out = run_installed(&command, &input, &[]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        out.stdout.is_empty(),
        "out of retries: the stop goes on: {out:?}"
    );
    assert!(
        !out.stderr.is_empty(),
        "with its message on stderr: {out:?}"
    );
    // A person's prompt starts the count again; a fixed workspace passes.
    let prompt = json!({"hook_event_name": "userPromptSubmit", "cwd": s.ws, "prompt": "try again"});
    let out = run_installed(&command, &prompt, &[]);
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
    let out = run_installed(&command, &input, &[]);
    assert!(
        out.stdout.starts_with(b"{"),
        "blocked again after the prompt: {out:?}"
    );
    s.write_ws("DONE", "done\n");
    let out = run_installed(&command, &input, &[]);
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");

    // doctor finds it in the agent's file and its dry stop answers in shape.
    let doctor = run_gatehost(
        &[
            "doctor".to_string(),
            "kiro".into(),
            "--json".into(),
            "--project".into(),
            s.ws.display().to_string(),
        ],
        &[("HOME", home.to_str().expect("utf-8"))],
    );
    let report: Value =
        serde_json::from_str(&doctor.stdout).unwrap_or_else(|e| panic!("{e}: {doctor:?}"));
    assert_eq!(doctor.code, 0, "{report}");
    let regs = report["agents"][0]["registrations"]
        .as_array()
        .expect("regs");
    assert!(
        regs.iter()
            .any(|r| r["event"] == "stop" && r["scope"] == "user"),
        "{report}"
    );

    assert_eq!(
        hook(&s, &["uninstall", "kiro", "--kiro-agent", "dev"]).code,
        0
    );
    assert_eq!(std::fs::read_to_string(&path).expect("read"), original);
}
