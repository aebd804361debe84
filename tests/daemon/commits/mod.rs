//! Commits behind a green gate and a human ack, on real git repositories
//! whose `.git` the agent has booby-trapped; webhooks that tell a person.

use crate::common;

use common::Scratch;
use common::daemon::{Daemon, allow_config_with, git_out, git_scratch};
use serde_json::{Value, json};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod approval;
mod hostile_git;
mod notices;
mod plugins;
mod watched_turns;

const T: Duration = Duration::from_secs(30);

/// A daemon whose config is the common one with `daemon_keys` added to its
/// `[daemon]` section and `config_extra` (whole sections) after it.
fn setup_with(daemon_keys: &str, config_extra: &str) -> (Scratch, Daemon) {
    let s = git_scratch();
    let common = allow_config_with(&["true", "false"], daemon_keys);
    let cfg = s.write("config.toml", &format!("{common}{config_extra}"));
    let data = s.etc.join("data");
    let d = Daemon::start(&data, &cfg);
    d.register("s1", &s.ws);
    (s, d)
}

/// A daemon whose plugin directory is the built plugins' (the scratch
/// holding its compile cache comes back too, to live as long).
fn setup_with_plugins() -> (Scratch, Daemon, Scratch) {
    let plugins = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../plugins/target/wasm32-wasip2/release");
    let cache = Scratch::new();
    let (s, d) = setup_with(
        "",
        &format!(
            "[wasm]\nplugin_dirs = [\"{}\"]\ncache_dir = \"{}\"\n",
            plugins.display(),
            cache.etc.join("cache").display()
        ),
    );
    (s, d, cache)
}

/// `forbid-patterns` on the changed files, refusing a `dbg!`.
fn forbid_dbg() -> Value {
    json!({"wasm": {"plugin": "forbid-patterns", "config": {
        "scope": "changed",
        "rules": [{"id": "no-dbg", "pattern": "dbg!\\(", "message": "remove dbg!"}]
    }}})
}

fn commit_policy(paths: &[&str], ack: bool) -> Value {
    json!({
        "sessionId": "s1",
        "gate": {"command": "true"},
        "then": "commit",
        "commit": {"paths": paths, "message": "gated change", "requireHumanAck": ack}
    })
}

/// Approves policy `pid` through the CLI (operator) and waits for its
/// commit; the commit's sha.
fn approve(d: &Daemon, pid: &str) -> String {
    d.cli_ok(&["policy", "ack", pid, "--approve"], &d.operator);
    let p = d.wait_status(pid, "done", T);
    p["commitSha"].as_str().expect("sha").to_string()
}

fn commits(ws: &Path) -> Vec<String> {
    git_out(ws, &["log", "--format=%H %s"])
        .lines()
        .map(str::to_string)
        .collect()
}

/// Plants everything git 2.47 would run during add/commit; each writes a
/// marker file in `markers` if it ever runs.
pub(crate) fn booby_trap(ws: &Path, markers: &Path) {
    std::fs::create_dir_all(markers).expect("mkdir");
    let script = |name: &str| -> PathBuf {
        let p = markers.join(format!("{name}.sh"));
        std::fs::write(
            &p,
            format!("#!/bin/sh\ntouch '{}/{name}.ran'\ncat\n", markers.display()),
        )
        .expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        p
    };
    let hooks = ws.join(".git/hooks");
    for hook in [
        "pre-commit",
        "prepare-commit-msg",
        "commit-msg",
        "post-commit",
        "reference-transaction",
        "post-index-change",
    ] {
        let src = script(hook);
        std::fs::copy(&src, hooks.join(hook)).expect("hook");
        std::fs::set_permissions(hooks.join(hook), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
    }
    let include = markers.join("included.cfg");
    std::fs::write(
        &include,
        format!("[core]\n\tpager = {}\n", script("pager").display()),
    )
    .expect("write");
    let mut cfg = std::fs::OpenOptions::new()
        .append(true)
        .open(ws.join(".git/config"))
        .expect("config");
    write!(
        cfg,
        "[core]\n\tfsmonitor = {}\n[filter \"evil\"]\n\tclean = {}\n\tsmudge = {}\n[commit]\n\tgpgSign = true\n[gpg]\n\tprogram = {}\n[include]\n\tpath = {}\n",
        script("fsmonitor").display(),
        script("clean").display(),
        script("smudge").display(),
        script("gpg").display(),
        include.display()
    )
    .expect("append");
    std::fs::write(ws.join(".gitattributes"), "* filter=evil\n").expect("attributes");
}

pub(crate) fn ran(markers: &Path) -> Vec<String> {
    std::fs::read_dir(markers)
        .expect("markers")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".ran"))
        .collect()
}
