//! Standalone `gatehost hook` runs and `gatehost hook install` into each
//! agent CLI's configuration files.

mod cost;
mod huge_inputs;
mod install;
mod install_daemon;
mod install_qwen;
mod kiro;
mod once;

use crate::common::{CliRun, Scratch, run_gatehost};
use serde_json::Value;
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
