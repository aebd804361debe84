//! `gatehost hook install` and `uninstall` as a user runs them, against
//! real configuration files in a scratch home: merged beside other hooks
//! and settings, idempotent, printed by `--dry-run` without writing, undone
//! to the original bytes, refusing symlinks; and the installed command
//! itself answers a hook.

use super::{
    blocks, hook, hook_ok, hook_with, install_in_project, jsonc_value, our_commands, read_json,
    run_installed,
};
use crate::common::Scratch;
use serde_json::{Value, json};

#[test]
fn install_writes_the_gatehost_on_path_by_its_path_else_this_binary_with_a_warning() {
    let s = Scratch::new();
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_gatehost")).expect("exe");
    let settings = s.out.join("home/.claude/settings.json");
    let bin = s.out.join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    std::os::unix::fs::symlink(&exe, bin.join("gatehost")).expect("symlink");
    let other = s.out.join("other");
    std::fs::create_dir_all(&other).expect("mkdir");
    std::fs::write(other.join("gatehost"), "#!/bin/sh\nexit 0\n").expect("write");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            other.join("gatehost"),
            std::fs::Permissions::from_mode(0o755),
        )
        .expect("chmod");
    }
    let on_path = bin.join("gatehost").display().to_string();
    let own = exe.display().to_string();

    // No gatehost on PATH: this binary by its own path, and a warning.
    let none = hook_with(&s, &["install", "claude"], &[("PATH", "/nonexistent")]);
    assert_eq!(none.code, 0, "{none:?}");
    assert!(
        none.stdout
            .contains(&format!("hook command: {own} hook claude")),
        "{none:?}"
    );
    assert!(
        none.stderr.contains("warning: PATH has no gatehost")
            && none.stderr.contains("cargo clean"),
        "{none:?}"
    );
    let stop = our_commands(&read_json(&settings), "Stop");
    assert_eq!(stop.len(), 1, "{stop:?}");
    assert!(
        stop[0].starts_with(&format!("{own} hook claude ")),
        "{stop:?}"
    );

    // Another gatehost first on PATH: still this binary, and the warning
    // names the other one.
    let path = format!("{}:{}", other.display(), bin.display());
    let shadowed = hook_with(&s, &["install", "claude"], &[("PATH", &path)]);
    assert_eq!(shadowed.code, 0, "{shadowed:?}");
    assert!(
        shadowed
            .stderr
            .contains(&other.join("gatehost").display().to_string()),
        "{shadowed:?}"
    );
    assert!(shadowed.stdout.contains("unchanged:"), "{shadowed:?}");

    // A symlink on PATH to this binary: the command names the PATH entry
    // (not the build tree it points into), is printed, and replaces the
    // older entry rather than doubling it.
    let path = format!("/nonexistent:{}", bin.display());
    let found = hook_with(&s, &["install", "claude"], &[("PATH", &path)]);
    assert_eq!(found.code, 0, "{found:?}");
    assert!(
        found
            .stdout
            .contains(&format!("hook command: {on_path} hook claude")),
        "{found:?}"
    );
    // No warning about the program (the one about onFailure, with no
    // `claude` on this PATH, is another matter).
    assert!(
        !found
            .stderr
            .lines()
            .any(|l| l.contains("warning") && !l.contains("onFailure")),
        "{found:?}"
    );
    let v = read_json(&settings);
    for event in ["Stop", "SessionStart", "UserPromptSubmit", "SessionEnd"] {
        let ours = our_commands(&v, event);
        assert_eq!(ours.len(), 1, "{event}: {v}");
        assert!(
            ours[0].starts_with(&format!("{on_path} hook claude ")),
            "{event}: {v}"
        );
    }
    let again = hook_with(&s, &["install", "claude"], &[("PATH", &path)]);
    assert!(again.stdout.contains("unchanged:"), "{again:?}");
    // Uninstall takes it out whichever path it names: the file gatehost
    // made is gone.
    let un = hook_with(&s, &["uninstall", "claude"], &[("PATH", &path)]);
    assert_eq!(un.code, 0, "{un:?}");
    assert!(!settings.exists(), "{un:?}");
}

#[test]
fn each_event_gets_the_timeout_its_cli_accepts() {
    let s = Scratch::new();
    let home = s.out.join("home");
    for agent in ["claude", "codex", "gemini"] {
        hook_ok(&s, &["install", agent]);
    }
    let timeout = |v: &Value, event: &str| v["hooks"][event][0]["hooks"][0]["timeout"].clone();
    for file in [".claude/settings.json", ".codex/hooks.json"] {
        let v = read_json(&home.join(file));
        for event in ["Stop", "SessionStart", "UserPromptSubmit"] {
            assert_eq!(timeout(&v, event), json!(600), "{file} {event}");
        }
    }
    // Claude Code's SessionEnd hooks get 1.5 s to 60 s: 3 s. Codex gets
    // none: it clamps a SessionEnd timeout above 3 s (saying so on every
    // run), and once trusted runs it mid-session, after a Stop's block.
    let claude = read_json(&home.join(".claude/settings.json"));
    assert_eq!(timeout(&claude, "SessionEnd"), json!(3));
    let codex = read_json(&home.join(".codex/hooks.json"));
    assert!(codex["hooks"].get("SessionEnd").is_none(), "{codex}");
    let v = read_json(&home.join(".gemini/settings.json"));
    assert_eq!(timeout(&v, "AfterAgent"), json!(60_000));
    assert_eq!(timeout(&v, "SessionEnd"), json!(3_000));
}

const CLAUDE_SETTINGS: &str = r#"{
  // kept by hand
  "model": "opus",
  "hooks": {
    "Stop": [{ "hooks": [{ "type": "command", "command": "notify-send done" }] }],
    "PreToolUse": [{ "matcher": "Bash", "hooks": [{ "type": "command", "command": "audit" }] }]
  }
}
"#;

#[test]
fn install_merges_beside_other_hooks_is_idempotent_and_uninstall_restores_the_bytes() {
    let s = Scratch::new();
    let settings = s.out.join("home/.claude/settings.json");
    std::fs::create_dir_all(settings.parent().expect("dir")).expect("mkdir");
    std::fs::write(&settings, CLAUDE_SETTINGS).expect("write");
    let gates = s.write("gates.json", r#"{"command": "true"}"#);
    let gates_arg = gates.display().to_string();

    // --dry-run prints the change and writes nothing.
    let dry = hook_ok(
        &s,
        &["install", "claude", "--gates", &gates_arg, "--dry-run"],
    );
    assert!(
        dry.stdout.contains("+") && dry.stdout.contains("hook claude --gates"),
        "{dry:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&settings).expect("read"),
        CLAUDE_SETTINGS
    );

    let first = hook_ok(&s, &["install", "claude", "--gates", &gates_arg]);
    assert!(first.stdout.contains("installed:"), "{first:?}");
    let installed = std::fs::read_to_string(&settings).expect("read");
    assert!(installed.contains("// kept by hand"), "{installed}");
    let v = jsonc_value(&installed);
    assert_eq!(v["model"], "opus");
    assert_eq!(v["hooks"]["PreToolUse"][0]["hooks"][0]["command"], "audit");
    let stop = v["hooks"]["Stop"].as_array().expect("Stop");
    assert_eq!(stop.len(), 2, "{v}");
    assert_eq!(stop[0]["hooks"][0]["command"], "notify-send done");
    for event in ["Stop", "SessionStart", "UserPromptSubmit", "SessionEnd"] {
        let ours: Vec<&Value> = v["hooks"][event]
            .as_array()
            .expect("event")
            .iter()
            .filter(|g| g.to_string().contains(" hook claude"))
            .collect();
        assert_eq!(ours.len(), 1, "{event}: {v}");
    }

    // A second install changes no byte.
    let second = hook_ok(&s, &["install", "claude", "--gates", &gates_arg]);
    assert!(second.stdout.contains("unchanged:"), "{second:?}");
    assert_eq!(std::fs::read_to_string(&settings).expect("read"), installed);

    hook_ok(&s, &["uninstall", "claude"]);
    assert_eq!(
        std::fs::read_to_string(&settings).expect("read"),
        CLAUDE_SETTINGS
    );
    let again = hook(&s, &["uninstall", "claude"]);
    assert!(again.stdout.contains("unchanged:"), "{again:?}");
}

#[test]
fn a_file_gatehost_made_is_removed_and_an_edited_file_keeps_the_edit() {
    let s = Scratch::new();
    let hooks = s.out.join("home/.cursor/hooks.json");
    hook_ok(&s, &["install", "cursor"]);
    let v = read_json(&hooks);
    assert_eq!(v["version"], 1);
    assert!(
        v["hooks"]["stop"][0]["command"]
            .as_str()
            .expect("command")
            .contains(" hook cursor")
    );
    hook_ok(&s, &["uninstall", "cursor"]);
    assert!(!hooks.exists(), "the file gatehost made is gone");
    assert!(
        !hooks.parent().expect("dir").exists(),
        "and the folder it made"
    );

    // Someone adds a hook after the install: uninstall takes only ours out.
    let settings = s.out.join("home/.gemini/settings.json");
    std::fs::create_dir_all(settings.parent().expect("dir")).expect("mkdir");
    std::fs::write(&settings, "{\"theme\": \"dark\"}\n").expect("write");
    hook_ok(&s, &["install", "gemini"]);
    let mut v = read_json(&settings);
    v["hooks"]["AfterAgent"]
        .as_array_mut()
        .expect("AfterAgent")
        .push(json!({"hooks": [{"type": "command", "command": "say hi"}]}));
    std::fs::write(&settings, serde_json::to_string_pretty(&v).expect("json")).expect("write");
    hook_ok(&s, &["uninstall", "gemini"]);
    let after = read_json(&settings);
    assert_eq!(after["theme"], "dark");
    assert_eq!(
        after["hooks"]["AfterAgent"],
        json!([{"hooks": [{"type": "command", "command": "say hi"}]}])
    );
    assert!(!after.to_string().contains(" hook gemini"), "{after}");
}

#[test]
fn a_symlinked_project_setting_is_refused_and_nothing_is_written_through_it() {
    let s = Scratch::new();
    let target = s.out.join("elsewhere");
    std::fs::create_dir_all(&target).expect("mkdir");
    std::os::unix::fs::symlink(&target, s.ws.join(".claude")).expect("symlink");
    let r = hook(
        &s,
        &[
            "install",
            "claude",
            "--scope",
            "project",
            "--project",
            s.ws.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("symlink"), "{r:?}");
    assert_eq!(std::fs::read_dir(&target).expect("read").count(), 0);
}

#[test]
fn the_installed_command_answers_the_cli_hook_and_project_scope_warns() {
    let s = Scratch::new();
    let (r, command) = install_in_project(&s, "claude", &["--max-retries", "1"]);
    assert!(
        r.stdout.contains("the agent writes"),
        "the trust note: {r:?}"
    );
    let input = json!({"session_id": "s", "cwd": s.ws, "hook_event_name": "Stop", "last_assistant_message": "done"});
    let out = run_installed(&command, &input, &[]);
    blocks(&out, "test -f DONE");
    // The sandbox's banner is not on a hook's stderr at the default level.
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("Landlock"),
        "{out:?}"
    );
}

#[test]
fn codex_gets_its_hooks_and_their_trust_and_uninstall_restores_both_files() {
    let s = Scratch::new();
    let codex_home = s.out.join("home/.codex");
    std::fs::create_dir_all(&codex_home).expect("mkdir");
    let config = codex_home.join("config.toml");
    let original = "# mine\nmodel = \"gpt-5.5\"\n\n[features]\nplugins = false\n";
    std::fs::write(&config, original).expect("write");
    hook_ok(&s, &["install", "codex", "--budget", "50s"]);
    let hooks = read_json(&codex_home.join("hooks.json"));
    let command = hooks["hooks"]["Stop"][0]["hooks"][0]["command"]
        .as_str()
        .expect("command");
    assert!(
        command.contains(" hook codex --budget 50000ms"),
        "{command}"
    );
    let trusted = std::fs::read_to_string(&config).expect("read");
    assert!(trusted.starts_with(original), "{trusted}");
    for event in ["stop", "session_start", "user_prompt_submit"] {
        assert!(
            trusted.contains(&format!("hooks.json:{event}:0:0\"]")),
            "{event}: {trusted}"
        );
    }
    assert_eq!(
        hook(&s, &["install", "codex", "--budget", "50s"])
            .stdout
            .matches("unchanged:")
            .count(),
        2
    );
    let too_long = hook(&s, &["install", "codex", "--budget", "15m"]);
    assert_eq!(too_long.code, 2, "{too_long:?}");
    assert!(too_long.stderr.contains("--budget"), "{too_long:?}");
    hook_ok(&s, &["uninstall", "codex"]);
    assert_eq!(std::fs::read_to_string(&config).expect("read"), original);
    assert!(!codex_home.join("hooks.json").exists());
}

#[test]
fn mcp_goes_into_claudes_and_codexs_own_files_and_comes_out_again() {
    let s = Scratch::new();
    let home = s.out.join("home");
    std::fs::create_dir_all(home.join(".codex")).expect("mkdir");
    let claude_json = home.join(".claude.json");
    let claude_original = "{\n  \"numStartups\": 3,\n  \"projects\": {}\n}\n";
    std::fs::write(&claude_json, claude_original).expect("write");
    let config = home.join(".codex/config.toml");
    let codex_original = "model = \"gpt-5.5\"\n";
    std::fs::write(&config, codex_original).expect("write");

    hook_ok(&s, &["install", "claude", "--mcp"]);
    let v = read_json(&claude_json);
    assert_eq!(v["numStartups"], 3);
    assert_eq!(v["mcpServers"]["gatehost"]["args"], json!(["mcp"]));
    hook_ok(&s, &["install", "codex", "--mcp"]);
    let toml = std::fs::read_to_string(&config).expect("read");
    assert!(
        toml.contains("[mcp_servers.gatehost]") && toml.contains("args = [\"mcp\"]"),
        "{toml}"
    );

    hook_ok(&s, &["uninstall", "claude"]);
    hook_ok(&s, &["uninstall", "codex"]);
    assert_eq!(
        std::fs::read_to_string(&claude_json).expect("read"),
        claude_original
    );
    assert_eq!(
        std::fs::read_to_string(&config).expect("read"),
        codex_original
    );
}

/// `"onFailure": "block"` on Claude Code's stop hooks only when every
/// `claude` on the installer's PATH is 2.1.295 or later (older ones reject
/// the key), said on stdout; otherwise a warning that a crash of the hook
/// lets the stop through.
#[test]
fn claude_stop_hooks_fail_closed_only_where_every_claude_reads_on_failure() {
    use std::os::unix::fs::PermissionsExt;
    let settings_of = |s: &Scratch| read_json(&s.out.join("home/.claude/settings.json"));
    let fake = |s: &Scratch, version: &str| {
        let bin = s.out.join(format!("bin-{version}"));
        std::fs::create_dir_all(&bin).expect("mkdir");
        let f = bin.join("claude");
        std::fs::write(&f, format!("#!/bin/sh\necho '{version} (Claude Code)'\n")).expect("write");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        format!("{}:/usr/bin:/bin", bin.display())
    };
    let s = Scratch::new();
    let path = fake(&s, "2.1.332");
    let r = hook_with(&s, &["install", "claude"], &[("PATH", &path)]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("onFailure: block"), "{r:?}");
    let v = settings_of(&s);
    for event in ["Stop", "SubagentStop"] {
        assert_eq!(
            v["hooks"][event][0]["hooks"][0]["onFailure"], "block",
            "{v}"
        );
    }
    for event in ["SessionStart", "UserPromptSubmit", "SessionEnd"] {
        assert!(
            v["hooks"][event][0]["hooks"][0].get("onFailure").is_none(),
            "{v}"
        );
    }

    // An older claude on PATH too: not written (a re-install takes it out).
    let old = fake(&s, "2.1.200");
    let both = format!("{path}:{old}");
    let r = hook_with(&s, &["install", "claude"], &[("PATH", &both)]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("2.1.200") && r.stderr.contains("lets the stop through"),
        "{r:?}"
    );
    let v = settings_of(&s);
    assert!(
        v["hooks"]["Stop"][0]["hooks"][0].get("onFailure").is_none(),
        "{v}"
    );
    assert_eq!(
        v["hooks"]["Stop"].as_array().map(Vec::len),
        Some(1),
        "replaced, not doubled: {v}"
    );
}
