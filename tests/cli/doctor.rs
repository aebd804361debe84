//! `gatehost doctor` against real CLI configuration files in a scratch
//! home, installed by `gatehost hook install` as a user would: a clean
//! install is all well; a second registration of one event, a hook that
//! runs another binary, a gate file that no longer loads, a daemon-mode
//! hook with no daemon, and Cursor beside Claude Code's project hooks are
//! each a named finding (exit 1); a daemon-mode hook whose daemon answers
//! is well; a hook in Claude Code's managed settings (a drop-in of
//! `managed-settings.d/`) is found there.

use crate::common::daemon::{Daemon, git_repo};
use crate::common::hooks::home_env;
use crate::common::{CliRun, Scratch, allow_config, run_gatehost};
use serde_json::Value;

/// `gatehost ARGS` with HOME (and nothing else of the user's) in the
/// scratch area.
fn gatehost(s: &Scratch, args: &[&str]) -> CliRun {
    let home = s.out.join("home");
    std::fs::create_dir_all(&home).expect("home");
    let state = s.out.join("state");
    // The managed (system) settings, in the scratch area, never /etc.
    let managed = s.out.join("managed");
    let (claude_managed, gemini_system, qwen_system) = (
        managed.join("claude-code"),
        managed.join("gemini-cli.json"),
        managed.join("qwen-code.json"),
    );
    let mut all: Vec<String> = args.iter().map(ToString::to_string).collect();
    if args.first() == Some(&"hook") {
        all.extend(["--state-dir".into(), state.display().to_string()]);
    }
    let mut env = home_env(home.to_str().expect("utf-8"));
    env.extend([
        (
            "CLAUDE_CODE_MANAGED_SETTINGS_PATH",
            claude_managed.to_str().expect("utf-8"),
        ),
        (
            "GEMINI_CLI_SYSTEM_SETTINGS_PATH",
            gemini_system.to_str().expect("utf-8"),
        ),
        (
            "QWEN_CODE_SYSTEM_SETTINGS_PATH",
            qwen_system.to_str().expect("utf-8"),
        ),
    ]);
    run_gatehost(&all, &env)
}

/// `gatehost doctor ARGS --json`: exit code, report, and the findings'
/// names.
fn doctor(s: &Scratch, args: &[&str]) -> (i32, Value, Vec<String>) {
    doctor_at(s, &s.ws, args)
}

/// [`doctor`] with `project` as the project.
fn doctor_at(s: &Scratch, project: &std::path::Path, args: &[&str]) -> (i32, Value, Vec<String>) {
    let mut all = vec![
        "doctor",
        "--json",
        "--project",
        project.to_str().expect("utf-8"),
    ];
    all.extend_from_slice(args);
    let r = gatehost(s, &all);
    let v: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {r:?}"));
    let names = v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["finding"].as_str().expect("name").to_string())
        .collect();
    (r.code, v, names)
}

/// A gate file and config outside the workspace; `test -f DONE`.
fn standalone(s: &Scratch) -> (String, String) {
    let config = s.write("config.toml", &allow_config(&["test"]));
    let gates = s.write(
        "gates.json",
        r#"{"command": "test", "args": ["-f", "DONE"]}"#,
    );
    (gates.display().to_string(), config.display().to_string())
}

/// A scratch area whose workspace is a git repository, and `agent`'s
/// standalone hooks installed in the user's settings: the gate file and
/// configuration.
fn installed(agent: &str) -> (Scratch, String, String) {
    let s = Scratch::new();
    git_repo(&s.ws);
    let (gates, config) = standalone(&s);
    install(&s, agent, &["--gates", &gates, "--config", &config]);
    (s, gates, config)
}

/// `doctor AGENT` finds nothing wrong (exit 0); its report, and the
/// events registered in each scope (`EVENT@SCOPE`).
fn well(s: &Scratch, agent: &str) -> (Value, Vec<String>) {
    let (code, v, names) = doctor(s, &[agent]);
    assert_eq!((code, names.len()), (0, 0), "{v}");
    let regs = v["agents"][0]["registrations"].as_array().expect("regs");
    let at = regs
        .iter()
        .map(|r| {
            format!(
                "{}@{}",
                r["event"].as_str().unwrap_or("?"),
                r["scope"].as_str().unwrap_or("?")
            )
        })
        .collect();
    (v, at)
}

/// Claude Code's standalone hooks in the project's settings.
fn install_claude_project(s: &Scratch, gates: &str, config: &str) {
    let ws = s.ws.to_str().expect("utf-8");
    install(
        s,
        "claude",
        &[
            "--scope",
            "project",
            "--project",
            ws,
            "--gates",
            gates,
            "--config",
            config,
        ],
    );
}

fn install(s: &Scratch, agent: &str, extra: &[&str]) {
    let mut args = vec!["hook", "install", agent];
    args.extend_from_slice(extra);
    let r = gatehost(s, &args);
    assert_eq!(r.code, 0, "{r:?}");
}

#[test]
fn a_clean_install_is_well_and_a_second_scope_is_a_duplicate() {
    let (s, gates, config) = installed("claude");
    let (v, at) = well(&s, "claude");
    assert_eq!(v["ok"], true);
    assert!(at.iter().any(|a| a == "Stop@user"), "{v}");
    // The human report says so too.
    let ws = s.ws.to_str().expect("utf-8");
    let human = gatehost(&s, &["doctor", "claude", "--project", ws]);
    assert_eq!(human.code, 0, "{human:?}");
    assert!(human.stdout.contains("all well"), "{human:?}");

    install_claude_project(&s, &gates, &config);
    let (code, v, names) = doctor(&s, &["claude"]);
    assert_eq!(code, 1, "{v}");
    assert!(names.iter().all(|n| n == "duplicate"), "{v}");
    let stop = v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["event"] == "Stop")
        .cloned()
        .expect("Stop is registered twice");
    assert_eq!(stop["files"].as_array().map(Vec::len), Some(2), "{stop}");
}

/// Issue 48, item 12: `doctor` run from the home directory reads
/// `~/.claude/settings.json` as the user's and as the project's settings:
/// one file, counted once (before: a "duplicate" of itself, exit 1), also
/// when the project is reached through a symlink.
#[test]
fn doctor_run_from_home_counts_the_users_settings_once() {
    let (s, _, _) = installed("claude");
    let home = s.out.join("home");
    let link = s.out.join("home-link");
    std::os::unix::fs::symlink(&home, &link).expect("symlink");
    for project in [&home, &link] {
        let (code, v, _) = doctor_at(&s, project, &["claude"]);
        assert_eq!((code, &v["findings"]), (0, &serde_json::json!([])), "{v}");
        let regs = v["agents"][0]["registrations"].as_array().expect("regs");
        let stops: Vec<&Value> = regs.iter().filter(|r| r["event"] == "Stop").collect();
        assert_eq!(stops.len(), 1, "{v}");
        assert_eq!(stops[0]["scope"], "user", "{v}");
    }
}

/// Installs gatehost's standalone hook for `agent` and checks that doctor
/// finds nothing wrong and reports each of `events` registered in the user
/// scope (the dry stop answered in the CLI's shape, or it is a finding).
fn installed_well(agent: &str, events: &[&str]) {
    let (s, _, _) = installed(agent);
    let (v, at) = well(&s, agent);
    for event in events {
        assert!(at.contains(&format!("{event}@user")), "{event}: {v}");
    }
}

#[test]
fn a_qwen_install_is_well_with_its_stop_and_subagent_stop_answered_as_qwen_reads_them() {
    installed_well(
        "qwen",
        &["Stop", "SubagentStop", "SessionStart", "SessionEnd"],
    );
}

#[test]
fn a_copilot_install_is_well_and_its_dry_stop_is_answered_as_copilot_reads_it() {
    installed_well("copilot", &["agentStop", "subagentStop"]);
}

#[test]
fn a_hook_that_runs_another_binary_or_whose_gates_broke_is_named() {
    let (s, gates, _) = installed("claude");
    // The gate file breaks.
    std::fs::write(&gates, "{not json").expect("break");
    let (code, v, names) = doctor(&s, &["claude"]);
    assert_eq!(code, 1, "{v}");
    assert!(names.contains(&"gates-do-not-load".to_string()), "{v}");

    // The settings now run another `gatehost`.
    let other = s.etc.join("old/gatehost");
    std::fs::create_dir_all(other.parent().expect("dir")).expect("mkdir");
    std::fs::write(&other, "#!/bin/sh\nexit 0\n").expect("write");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let settings = s.out.join("home/.claude/settings.json");
    let text = std::fs::read_to_string(&settings).expect("settings");
    let this = std::fs::canonicalize(env!("CARGO_BIN_EXE_gatehost")).expect("exe");
    std::fs::write(
        &settings,
        text.replace(
            this.to_str().expect("utf-8"),
            other.to_str().expect("utf-8"),
        ),
    )
    .expect("write");
    let (code, v, names) = doctor(&s, &["claude", "--no-run"]);
    assert_eq!(code, 1, "{v}");
    assert!(
        names.iter().all(|n| n == "other-binary") && !names.is_empty(),
        "{v}"
    );
    let f = &v["findings"][0];
    assert_eq!(f["program"], other.to_str().expect("utf-8"), "{f}");
}

#[test]
fn a_daemon_mode_hook_needs_its_daemon_and_cursor_beside_claudes_project_hooks_is_named() {
    let s = Scratch::new();
    git_repo(&s.ws);
    let data = s.etc.join("gh-data");
    let cfg = s.write("daemon.toml", &allow_config(&[]));
    let mut d = Daemon::start(&data, &cfg);
    let data_s = data.display().to_string();
    install(&s, "codex", &["--data-dir", &data_s]);
    let (code, v, names) = doctor(&s, &["codex"]);
    assert_eq!((code, names.len()), (0, 0), "{v}");
    d.stop();
    let (code, v, names) = doctor(&s, &["codex"]);
    assert_eq!(code, 1, "{v}");
    assert!(
        names.iter().all(|n| n == "no-daemon") && !names.is_empty(),
        "{v}"
    );

    let (gates, config) = standalone(&s);
    install_claude_project(&s, &gates, &config);
    install(&s, "cursor", &["--gates", &gates, "--config", &config]);
    let (code, v, names) = doctor(&s, &[]);
    assert_eq!(code, 1, "{v}");
    assert!(
        names.contains(&"cursor-runs-claude-hooks".to_string()),
        "{v}"
    );
    // The dry runs of Claude Code's and Cursor's hooks answered in shape.
    assert!(!names.contains(&"dry-run".to_string()), "{v}");
    let reported: Vec<&str> = v["agents"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x["agent"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(
        reported,
        [
            "claude", "codex", "gemini", "cursor", "qwen", "copilot", "opencode", "kiro"
        ],
        "every CLI is reported, in order: {v}"
    );
}

/// An administrator's copy of gatehost's hooks in Claude Code's managed
/// settings (a drop-in, as `/etc/claude-code/managed-settings.d/` holds
/// them; here the directory `CLAUDE_CODE_MANAGED_SETTINGS_PATH` names) is
/// reported with scope `managed`, checked as the others are, and beside
/// the user's own install it is a duplicate: both run at every stop.
#[test]
fn a_hook_in_claudes_managed_settings_is_found_checked_and_a_duplicate_of_the_users() {
    let (s, _, _) = installed("claude");
    let user = s.out.join("home/.claude/settings.json");
    let drop_ins = s.out.join("managed/claude-code/managed-settings.d");
    std::fs::create_dir_all(&drop_ins).expect("mkdir");
    std::fs::copy(&user, drop_ins.join("50-gatehost.json")).expect("copy");

    let (code, v, names) = doctor(&s, &["claude"]);
    assert_eq!(code, 1, "{v}");
    assert!(
        !names.is_empty() && names.iter().all(|n| n == "duplicate"),
        "one finding per event registered twice: {v}"
    );
    let regs = v["agents"][0]["registrations"].as_array().expect("regs");
    let managed: Vec<&Value> = regs.iter().filter(|r| r["scope"] == "managed").collect();
    assert!(
        managed.iter().any(|r| r["event"] == "Stop"
            && r["file"]
                .as_str()
                .is_some_and(|f| f.ends_with("50-gatehost.json"))),
        "{v}"
    );

    // The user's own install taken out, the managed one alone is well.
    let r = gatehost(&s, &["hook", "uninstall", "claude"]);
    assert_eq!(r.code, 0, "{r:?}");
    let (v, at) = well(&s, "claude");
    assert!(
        !at.is_empty() && at.iter().all(|a| a.ends_with("@managed")),
        "{v}"
    );
}
