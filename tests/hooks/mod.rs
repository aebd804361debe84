//! Standalone `gatehost hook` runs and `gatehost hook install` into each
//! agent CLI's configuration files.

mod cost;
mod huge_inputs;
mod install;
mod install_daemon;
mod install_qwen;
mod kiro;
mod once;

use crate::common::hooks::{assert_blocks, home_env, spawn_with_input};
use crate::common::{CliRun, Scratch, allow_config, run_gatehost};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Runs `gatehost hook ARGS` with HOME (and nothing else of the user's) in
/// the scratch area.
pub(crate) fn hook(s: &Scratch, args: &[&str]) -> CliRun {
    hook_with(s, args, &[])
}

/// [`hook`], asserted to succeed.
#[track_caller]
pub(crate) fn hook_ok(s: &Scratch, args: &[&str]) -> CliRun {
    let r = hook(s, args);
    assert_eq!(r.code, 0, "{r:?}");
    r
}

/// `hook install AGENT` (asserted to succeed) and the file it wrote,
/// `rel` in the scratch home: its path and what it holds.
pub(crate) fn installed_file(s: &Scratch, agent: &str, rel: &str) -> (PathBuf, Value) {
    hook_ok(s, &["install", agent]);
    let path = s.out.join("home").join(rel);
    let v = read_json(&path);
    (path, v)
}

/// `hook uninstall AGENT` succeeds and removes `path`, a file gatehost
/// made.
pub(crate) fn uninstall_removes(s: &Scratch, agent: &str, path: &Path) {
    hook_ok(s, &["uninstall", agent]);
    assert!(
        !path.exists(),
        "gatehost made the file: uninstall removes it"
    );
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
    let mut all_env = home_env(home.to_str().expect("utf-8"));
    all_env.extend_from_slice(env);
    run_gatehost(&all, &all_env)
}

/// The standalone gate (`test -f DONE`) and the configuration allowing
/// it, beside the workspace: `--gates GATES --config CONFIG`.
pub(crate) fn done_gate(s: &Scratch) -> Vec<String> {
    let config = s.write("config.toml", &allow_config(&["test"]));
    let gates = s.write(
        "gates.json",
        r#"{"command": "test", "args": ["-f", "DONE"]}"#,
    );
    let [g, c] = [gates, config].map(|p| p.display().to_string());
    vec!["--gates".into(), g, "--config".into(), c]
}

/// `hook install AGENT --scope project --project WS` with the standalone
/// gate ([`done_gate`]) and `extra`, into a workspace that is a git
/// repository; asserted to succeed. The run, and the command of the Stop
/// hook it wrote in the workspace's `.AGENT/settings.json`.
pub(crate) fn install_in_project(s: &Scratch, agent: &str, extra: &[&str]) -> (CliRun, String) {
    crate::common::daemon::git_repo(&s.ws);
    let ws = s.ws.to_str().expect("utf-8");
    let gate = done_gate(s);
    let mut args = vec!["install", agent, "--scope", "project", "--project", ws];
    args.extend(gate.iter().map(String::as_str).chain(extra.iter().copied()));
    let r = hook_ok(s, &args);
    let v = read_json(&s.ws.join(format!(".{agent}/settings.json")));
    let command = v["hooks"]["Stop"][0]["hooks"][0]["command"]
        .as_str()
        .expect("command")
        .to_string();
    (r, command)
}

/// What an installed hook said (`out`): exit 0 and a block naming `why`
/// (and nothing else on stdout). The answer.
#[track_caller]
pub(crate) fn blocks(out: &std::process::Output, why: &str) -> Value {
    assert!(out.status.success(), "exit 0 even for a block: {out:?}");
    assert_blocks(&out.stdout, why)
}

/// A configuration beside the workspace allowing `true` and loading WASM
/// plugins through the tests' shared compile cache.
pub(crate) fn wasm_config(s: &Scratch) -> std::path::PathBuf {
    use crate::gates::wasm::{shared_cache, wasm_config_in};
    let wasm = wasm_config_in(&shared_cache(), "");
    s.write("config.toml", &format!("{}{wasm}", allow_config(&["true"])))
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

/// Runs an installed hook `command` through `sh -c` as the CLI would, with
/// `stdin` as its input and none of the daemon's variables inherited from
/// the test's own environment (`env` added).
pub(crate) fn run_installed(
    command: &str,
    stdin: &Value,
    env: &[(&str, &str)],
) -> std::process::Output {
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", command])
        .env_remove("GATEHOST_SERVER")
        .env_remove("GATEHOST_TOKEN")
        .env_remove("GATEHOST_DATA_DIR")
        .envs(env.iter().copied());
    let child = spawn_with_input(&mut cmd, stdin.to_string().as_bytes());
    child.wait_with_output().expect("wait")
}
