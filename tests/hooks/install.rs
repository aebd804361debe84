//! `gatehost hook install` and `uninstall` as a user runs them, against
//! real configuration files in a scratch home: merged beside other hooks
//! and settings, idempotent, printed by `--dry-run` without writing, undone
//! to the original bytes, refusing symlinks; and the installed command
//! itself answers a hook.

use crate::common::{CliRun, Scratch, allow_config, run_gatehost};
use serde_json::{Value, json};
use std::path::Path;

/// Runs `gatehost hook ARGS` with HOME (and nothing else of the user's) in
/// the scratch area.
pub(crate) fn hook(s: &Scratch, args: &[&str]) -> CliRun {
    hook_with(s, args, &[])
}

/// [`hook`] with more environment (`PATH`, say).
pub(crate) fn hook_with(s: &Scratch, args: &[&str], env: &[(&str, &str)]) -> CliRun {
    let home = s.out.join("home");
    std::fs::create_dir_all(&home).expect("home");
    let mut all: Vec<String> = vec!["hook".into()];
    all.extend(args.iter().map(ToString::to_string));
    all.extend([
        "--state-dir".into(),
        s.out.join("state").display().to_string(),
    ]);
    let mut all_env = vec![
        ("HOME", home.to_str().expect("utf-8")),
        ("XDG_STATE_HOME", ""),
        ("CLAUDE_CONFIG_DIR", ""),
        ("CODEX_HOME", ""),
        ("QWEN_HOME", ""),
        ("COPILOT_HOME", ""),
    ];
    all_env.extend_from_slice(env);
    run_gatehost(&all, &all_env)
}

/// The commands of gatehost's hooks for `event` in a grouped settings file.
pub(crate) fn our_commands(v: &Value, event: &str) -> Vec<String> {
    v["hooks"][event]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["hooks"].as_array().cloned().unwrap_or_default())
        .filter_map(|h| h["command"].as_str().map(str::to_string))
        .filter(|c| c.contains(" hook "))
        .collect()
}

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
        let r = hook(&s, &["install", agent]);
        assert_eq!(r.code, 0, "{r:?}");
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

pub(crate) fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).expect("read");
    jsonc_value(&text)
}

fn jsonc_value(text: &str) -> Value {
    // The files may hold comments: strip `//` lines before parsing.
    let plain: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    serde_json::from_str(&plain).expect("JSON")
}

#[test]
fn install_merges_beside_other_hooks_is_idempotent_and_uninstall_restores_the_bytes() {
    let s = Scratch::new();
    let settings = s.out.join("home/.claude/settings.json");
    std::fs::create_dir_all(settings.parent().expect("dir")).expect("mkdir");
    std::fs::write(&settings, CLAUDE_SETTINGS).expect("write");
    let gates = s.write("gates.json", r#"{"command": "true"}"#);
    let gates_arg = gates.display().to_string();

    // --dry-run prints the change and writes nothing.
    let dry = hook(
        &s,
        &["install", "claude", "--gates", &gates_arg, "--dry-run"],
    );
    assert_eq!(dry.code, 0, "{dry:?}");
    assert!(
        dry.stdout.contains("+") && dry.stdout.contains("hook claude --gates"),
        "{dry:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&settings).expect("read"),
        CLAUDE_SETTINGS
    );

    let first = hook(&s, &["install", "claude", "--gates", &gates_arg]);
    assert_eq!(first.code, 0, "{first:?}");
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
    let second = hook(&s, &["install", "claude", "--gates", &gates_arg]);
    assert_eq!(second.code, 0, "{second:?}");
    assert!(second.stdout.contains("unchanged:"), "{second:?}");
    assert_eq!(std::fs::read_to_string(&settings).expect("read"), installed);

    let un = hook(&s, &["uninstall", "claude"]);
    assert_eq!(un.code, 0, "{un:?}");
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
    let r = hook(&s, &["install", "cursor"]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = read_json(&hooks);
    assert_eq!(v["version"], 1);
    assert!(
        v["hooks"]["stop"][0]["command"]
            .as_str()
            .expect("command")
            .contains(" hook cursor")
    );
    assert_eq!(hook(&s, &["uninstall", "cursor"]).code, 0);
    assert!(!hooks.exists(), "the file gatehost made is gone");
    assert!(
        !hooks.parent().expect("dir").exists(),
        "and the folder it made"
    );

    // Someone adds a hook after the install: uninstall takes only ours out.
    let settings = s.out.join("home/.gemini/settings.json");
    std::fs::create_dir_all(settings.parent().expect("dir")).expect("mkdir");
    std::fs::write(&settings, "{\"theme\": \"dark\"}\n").expect("write");
    assert_eq!(hook(&s, &["install", "gemini"]).code, 0);
    let mut v = read_json(&settings);
    v["hooks"]["AfterAgent"]
        .as_array_mut()
        .expect("AfterAgent")
        .push(json!({"hooks": [{"type": "command", "command": "say hi"}]}));
    std::fs::write(&settings, serde_json::to_string_pretty(&v).expect("json")).expect("write");
    assert_eq!(hook(&s, &["uninstall", "gemini"]).code, 0);
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
    crate::common::daemon::git_repo(&s.ws);
    let config = s.write("config.toml", &allow_config(&["test"]));
    let gates = s.write(
        "gates.json",
        r#"{"command": "test", "args": ["-f", "DONE"]}"#,
    );
    let r = hook(
        &s,
        &[
            "install",
            "claude",
            "--scope",
            "project",
            "--project",
            s.ws.to_str().expect("utf-8"),
            "--gates",
            gates.to_str().expect("utf-8"),
            "--config",
            config.to_str().expect("utf-8"),
            "--max-retries",
            "1",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("the agent writes"),
        "the trust note: {r:?}"
    );
    let v = read_json(&s.ws.join(".claude/settings.json"));
    let command = v["hooks"]["Stop"][0]["hooks"][0]["command"]
        .as_str()
        .expect("command")
        .to_string();
    let input = json!({"session_id": "s", "cwd": s.ws, "hook_event_name": "Stop", "last_assistant_message": "done"});
    let out = run_installed(&command, &input, &[]);
    assert!(out.status.success(), "{out:?}");
    // The sandbox's banner is not on a hook's stderr at the default level.
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("Landlock"),
        "{out:?}"
    );
    let answer: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout, nothing else");
    assert_eq!(answer["decision"], "block", "{answer}");
    assert!(
        answer["reason"]
            .as_str()
            .expect("reason")
            .contains("test -f DONE")
    );
}

/// Runs an installed hook `command` through `sh -c` as the CLI would, with
/// `stdin` as its input and none of the daemon's variables inherited from
/// the test's own environment (`env` added).
pub(crate) fn run_installed(
    command: &str,
    stdin: &Value,
    env: &[(&str, &str)],
) -> std::process::Output {
    use std::io::Write;
    let mut child = std::process::Command::new("sh")
        .args(["-c", command])
        .env_remove("GATEHOST_SERVER")
        .env_remove("GATEHOST_TOKEN")
        .env_remove("GATEHOST_DATA_DIR")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("sh");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.to_string().as_bytes())
        .expect("write");
    child.wait_with_output().expect("wait")
}

#[test]
fn codex_gets_its_hooks_and_their_trust_and_uninstall_restores_both_files() {
    let s = Scratch::new();
    let codex_home = s.out.join("home/.codex");
    std::fs::create_dir_all(&codex_home).expect("mkdir");
    let config = codex_home.join("config.toml");
    let original = "# mine\nmodel = \"gpt-5.5\"\n\n[features]\nplugins = false\n";
    std::fs::write(&config, original).expect("write");
    let r = hook(&s, &["install", "codex", "--budget", "50s"]);
    assert_eq!(r.code, 0, "{r:?}");
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
    assert_eq!(hook(&s, &["uninstall", "codex"]).code, 0);
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

    assert_eq!(hook(&s, &["install", "claude", "--mcp"]).code, 0);
    let v = read_json(&claude_json);
    assert_eq!(v["numStartups"], 3);
    assert_eq!(v["mcpServers"]["gatehost"]["args"], json!(["mcp"]));
    let r = hook(&s, &["install", "codex", "--mcp"]);
    assert_eq!(r.code, 0, "{r:?}");
    let toml = std::fs::read_to_string(&config).expect("read");
    assert!(
        toml.contains("[mcp_servers.gatehost]") && toml.contains("args = [\"mcp\"]"),
        "{toml}"
    );

    assert_eq!(hook(&s, &["uninstall", "claude"]).code, 0);
    assert_eq!(hook(&s, &["uninstall", "codex"]).code, 0);
    assert_eq!(
        std::fs::read_to_string(&claude_json).expect("read"),
        claude_original
    );
    assert_eq!(
        std::fs::read_to_string(&config).expect("read"),
        codex_original
    );
}

/// The README's `gatehost serve --data-dir "$data"`: a hook installed
/// with `--data-dir` (or `--server` and `--token-file`) reaches that daemon
/// with nothing in its environment, and a path that is not there is
/// refused at install, naming the option.
#[test]
fn an_installed_hook_reaches_a_daemon_on_another_data_directory() {
    let s = Scratch::new();
    crate::common::daemon::git_repo(&s.ws);
    let rule = s.write(
        "rule.json",
        &json!({"gate": {"command": "test", "args": ["-f", "DONE"]}, "onFail": {"maxRetries": 3}})
            .to_string(),
    );
    let cfg = s.write(
        "config.toml",
        &format!(
            "{}[[daemon.session_policies]]\nagents = [\"claude\"]\npolicy = \"{}\"\n",
            allow_config(&["test"]),
            rule.display()
        ),
    );
    let data = s.etc.join("gh-data");
    let d = crate::common::daemon::Daemon::start(&data, &cfg);
    let home = s.out.join("home");
    let keys = s.out.join("keys");
    let env = [
        ("HOME", home.to_str().expect("utf-8")),
        ("XDG_STATE_HOME", ""),
        ("GATEHOST_SESSION_KEYS", keys.to_str().expect("utf-8")),
    ];
    let ws = s.ws.to_str().expect("utf-8");
    let project = ["install", "claude", "--scope", "project", "--project", ws];
    let installed = |extra: &[&str]| {
        let args: Vec<&str> = project.iter().chain(extra).copied().collect();
        let r = hook(&s, &args);
        assert_eq!(r.code, 0, "{r:?}");
        let v = read_json(&s.ws.join(".claude/settings.json"));
        our_commands(&v, "Stop").pop().expect("the Stop hook")
    };
    let stop = |id: &str| json!({"session_id": id, "cwd": s.ws, "hook_event_name": "Stop", "last_assistant_message": "done"});
    let blocked = |command: &str, id: &str| {
        let out = run_installed(command, &stop(id), &env);
        assert!(out.status.success(), "{out:?}");
        let answer: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
        assert_eq!(answer["decision"], "block", "{answer} {out:?}");
        assert!(
            answer["reason"]
                .as_str()
                .expect("reason")
                .contains("test -f DONE"),
            "{answer}"
        );
        // The daemon on gh-data registered the session and gated it (the
        // hook kept its key in its own keyring: the test reads as the
        // operator).
        assert_eq!(
            d.operator_ok("GET", &format!("/v1/sessions/claude:{id}"), None)["id"],
            format!("claude:{id}")
        );
    };

    let data_abs = std::fs::canonicalize(&data).expect("data");
    let by_dir = installed(&["--data-dir", data.to_str().expect("utf-8")]);
    assert!(
        by_dir.contains(&format!("--data-dir {}", data_abs.display())),
        "an absolute path, as the CLI runs the hook from anywhere: {by_dir}"
    );
    blocked(&by_dir, "by-dir");
    assert_eq!(
        hook(
            &s,
            &["uninstall", "claude", "--scope", "project", "--project", ws]
        )
        .code,
        0
    );

    let token = s.write("agent.token", &format!("{}\n", d.agent));
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    let by_url = installed(&[
        "--server",
        &d.url,
        "--token-file",
        token.to_str().expect("utf-8"),
        "--mcp",
    ]);
    // The MCP server Claude Code starts reaches the same daemon.
    let mcp = read_json(&s.ws.join(".mcp.json"));
    assert_eq!(
        mcp["mcpServers"]["gatehost"]["args"],
        json!([
            "mcp",
            "--server",
            d.url,
            "--token-file",
            std::fs::canonicalize(&token).expect("token")
        ]),
        "{mcp}"
    );
    assert!(
        by_url.contains("--token-file") && !by_url.contains(&d.agent),
        "the token itself is never in the CLI's settings: {by_url}"
    );
    blocked(&by_url, "by-url");
    // A token file others can read is refused, not used: the stop is
    // blocked with the reason, and the daemon never hears of the session.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    let out = run_installed(&by_url, &stop("loose"), &env);
    let answer: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(answer["decision"], "block", "{answer}");
    assert!(
        answer["reason"]
            .as_str()
            .expect("reason")
            .contains("owner-only"),
        "{answer}"
    );
    let (code, _) = d
        .http_try("GET", "/v1/sessions/claude:loose", Some(&d.agent), None)
        .expect("the daemon answers");
    assert_eq!(code, 404);
    // Without either, the hook looks in the default data directory (none
    // in the scratch home) and says what it lacks, on its channel.
    let bare = by_url
        .split(" --server")
        .next()
        .expect("program and hook")
        .to_string();
    let out = run_installed(&bare, &stop("bare"), &env);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("no server.url in") && said.contains("--data-dir"),
        "where it looked and how to point it: {out:?}"
    );
    assert_eq!(
        hook(
            &s,
            &["uninstall", "claude", "--scope", "project", "--project", ws]
        )
        .code,
        0
    );

    for (flag, missing) in [
        ("--data-dir", "no-such-dir"),
        ("--token-file", "no-such.token"),
    ] {
        let gone = s.etc.join(missing);
        let args: Vec<&str> = project
            .iter()
            .copied()
            .chain([flag, gone.to_str().expect("utf-8")])
            .collect();
        let r = hook(&s, &args);
        assert_eq!(r.code, 2, "{r:?}");
        assert!(r.stderr.contains(flag), "the option is named: {r:?}");
        assert!(
            !s.ws.join(".claude/settings.json").exists(),
            "nothing written: {r:?}"
        );
    }
    let both = hook(&s, &["claude", "--token", "t", "--token-file", "f"]);
    assert_eq!(both.code, 2, "{both:?}");
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
