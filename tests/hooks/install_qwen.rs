//! `gatehost hook install qwen` (and `copilot`) and the installed command, against real
//! files in a scratch home (the helpers are `hook_install`'s).

use super::{
    blocks, hook, hook_ok, hook_with, install_in_project, installed_file, our_commands, read_json,
    run_installed, uninstall_removes,
};
use crate::common::Scratch;
use serde_json::{Value, json};

#[test]
fn qwen_gets_its_events_in_seconds_in_qwen_home_or_the_home_and_uninstall_removes_them() {
    let s = Scratch::new();
    let (path, v) = installed_file(&s, "qwen", ".qwen/settings.json");
    let timeout = |event: &str| v["hooks"][event][0]["hooks"][0]["timeout"].clone();
    for event in ["Stop", "SubagentStop", "SessionStart"] {
        assert_eq!(
            timeout(event),
            json!(60),
            "{event}: seconds, Qwen Code's unit"
        );
        assert_eq!(our_commands(&v, event).len(), 1, "{event}");
        assert!(our_commands(&v, event)[0].contains(" hook qwen"), "{v}");
    }
    assert_eq!(timeout("SessionEnd"), json!(3));
    // A retry's continuation runs UserPromptSubmit with the reason as its
    // prompt: it is not hooked.
    assert!(v["hooks"].get("UserPromptSubmit").is_none(), "{v}");
    uninstall_removes(&s, "qwen", &path);

    // $QWEN_HOME, when set, is where the user's settings are.
    let qwen_home = s.out.join("qwen-home");
    let qh = qwen_home.to_str().expect("utf-8");
    let r = hook_with(&s, &["install", "qwen"], &[("QWEN_HOME", qh)]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = read_json(&qwen_home.join("settings.json"));
    assert_eq!(our_commands(&v, "Stop").len(), 1, "{v}");
    assert!(!path.exists());
}

#[test]
fn the_installed_qwen_command_blocks_a_failing_stop_the_way_qwen_reads_it() {
    let s = Scratch::new();
    let (_, command) = install_in_project(&s, "qwen", &[]);
    // The stdin Qwen Code 0.24.4 sends (tests/fixtures/hooks/qwen/stop.json).
    let input = json!({"session_id": "q-1", "transcript_path": "/nowhere.jsonl", "cwd": s.ws,
        "hook_event_name": "Stop", "timestamp": "2026-12-02T20:05:39.358Z",
        "permission_mode": "yolo", "stop_hook_active": false,
        "last_assistant_message": "All done."});
    blocks(&run_installed(&command, &input, &[]), "test -f DONE");
    // Once fixed, the stop passes with `{}`.
    s.write_ws("DONE", "done\n");
    let out = run_installed(&command, &input, &[]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "{}");
}

#[test]
fn copilot_gets_a_versioned_hook_file_of_its_own_and_uninstall_removes_it() {
    let s = Scratch::new();
    let (path, v) = installed_file(&s, "copilot", ".copilot/hooks/gatehost.json");
    assert_eq!(v["version"], 1, "{v}");
    for event in ["agentStop", "subagentStop"] {
        let h = &v["hooks"][event][0];
        assert_eq!(h["type"], "command", "{v}");
        assert_eq!(h["timeoutSec"], 30, "{v}");
        assert!(
            h["command"]
                .as_str()
                .expect("command")
                .contains(" hook copilot"),
            "{v}"
        );
    }
    uninstall_removes(&s, "copilot", &path);
}

/// `install copilot --mcp` writes `gatehost mcp` where `copilot mcp add`
/// does (`$COPILOT_HOME/mcp-config.json`, beside the user's other
/// servers), the real Copilot CLI reads it back as a user server, and
/// uninstall gives the file's bytes back; where gatehost writes no MCP
/// configuration (OpenCode; Copilot's project scope) `--mcp` is refused,
/// naming it, and nothing is written.
#[test]
fn copilot_mcp_goes_where_copilot_reads_it_and_mcp_is_refused_where_gatehost_writes_none() {
    let s = Scratch::new();
    let home = s.out.join("home");
    let dir = home.join(".copilot");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let path = dir.join("mcp-config.json");
    let original = "{\n  \"mcpServers\": {\n    \"other\": {\"type\": \"local\", \"command\": \"/bin/true\", \"args\": [], \"tools\": [\"*\"]}\n  }\n}\n";
    std::fs::write(&path, original).expect("write");

    hook_ok(&s, &["install", "copilot", "--mcp"]);
    let v = read_json(&path);
    let ours = &v["mcpServers"]["gatehost"];
    assert_eq!(ours["type"], "local", "{v}");
    assert_eq!(ours["args"], json!(["mcp"]), "{v}");
    assert_eq!(ours["tools"], json!(["*"]), "{v}");
    assert_eq!(v["mcpServers"]["other"]["command"], "/bin/true", "{v}");

    let copilot = crate::common::agents::agent_cli("copilot");
    let out = std::process::Command::new(&copilot)
        .args(["mcp", "get", "gatehost", "--json"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &home)
        .env("COPILOT_HOME", &dir)
        .env("COPILOT_OFFLINE", "1")
        .output()
        .expect("copilot runs");
    assert!(out.status.success(), "{out:?}");
    let got: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(got["gatehost"]["source"], "user", "{got}");
    assert_eq!(got["gatehost"]["command"], ours["command"], "{got}");
    assert_eq!(got["gatehost"]["args"], json!(["mcp"]), "{got}");

    hook_ok(&s, &["uninstall", "copilot"]);
    assert_eq!(std::fs::read_to_string(&path).expect("read"), original);

    let ws = s.ws.display().to_string();
    for args in [
        vec!["install", "opencode", "--mcp"],
        vec![
            "install",
            "copilot",
            "--mcp",
            "--scope",
            "project",
            "--project",
            &ws,
        ],
    ] {
        let r = hook(&s, &args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(r.stderr.contains("--mcp"), "{args:?}: {r:?}");
    }
    assert!(!home.join(".config/opencode").exists());
    assert!(!s.ws.join(".github").exists());
}
