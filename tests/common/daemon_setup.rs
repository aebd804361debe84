//! The daemon tests' setups beside the `Daemon` itself: a `serve` command
//! or run, configurations (`[daemon]` keys, a judge adapter), a scratch
//! area with its config, a fixture-script gate as JSON, and small waits
//! and readers. Re-exported by `common::daemon`. Starts no daemon but
//! [`with_s1`]'s.

use super::CliRun;
use super::daemon::Daemon;
use super::daemon_git::git_repo;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `gatehost serve --listen LISTEN --data-dir DATA --config CONFIG`, its
/// stdin null and its stdout and stderr piped, not yet spawned.
pub fn serve_command(data: &Path, config: &Path, listen: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gatehost"));
    command.args(["serve", "--listen", listen, "--data-dir"]);
    command.arg(data).arg("--config").arg(config);
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// `gatehost serve` on `data` run to its exit, for a daemon that must
/// refuse to start.
pub fn serve_run(data: &Path, config: &Path) -> CliRun {
    let (data, config) = (super::arg(data), super::arg(config));
    let listen = ["serve", "--listen", "127.0.0.1:0"];
    super::gatehost(&[&listen[..], &["--data-dir", &data, "--config", &config]].concat())
}

/// The lines `out` (a child's stdout) gives, as they come, read by a
/// thread of their own until it closes.
pub fn line_channel(out: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

/// The tree of the snapshot a policy awaiting its ack will commit.
pub fn snapshot_tree(policy: &Value) -> String {
    let tree = policy["plan"]["snapshot"]["tree"].as_str();
    tree.unwrap_or_else(|| panic!("no snapshot tree: {policy}"))
        .to_string()
}

/// A shell gate running the fixture `script` (as [`super::script_gate`]),
/// as JSON to put in a policy.
pub fn script_gate_json(script: &str, args: &[&str], timeout_ms: u64) -> Value {
    serde_json::from_str(&super::script_gate(script, args, timeout_ms)).expect("gate json")
}

/// Waits (at most `timeout`) until a process carrying `marker` runs: the
/// gate that carries it started.
pub fn wait_started(marker: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while super::survivors(marker).is_empty() {
        assert!(Instant::now() < deadline, "the gate never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// [`super::allow_config`] with `keys` (TOML lines) added to its
/// `[daemon]` section.
pub fn allow_config_with(allow: &[&str], keys: &str) -> String {
    super::allow_config(allow).replace("[daemon]\n", &format!("[daemon]\n{keys}"))
}

/// A `[judge.adapters.j]` section running the fixture `script` with
/// `dir` and `arg`, allowed to write `dir`.
pub fn judge_j(script: &str, dir: &Path, arg: &str) -> String {
    let (script, dir) = (super::fixture_str(script), dir.display());
    format!(
        "\n[judge.adapters.j]\ncommand = [\"bash\", \"{script}\", \"{dir}\", \"{arg}\"]\nwrite = [\"{dir}\"]\n"
    )
}

/// A scratch area with `config.toml` allowing `allow` (as
/// [`super::allow_config`]); the area and the config's path.
pub fn scratch_config(allow: &[&str]) -> (super::Scratch, PathBuf) {
    let s = super::Scratch::new();
    let cfg = s.write("config.toml", &super::allow_config(allow));
    (s, cfg)
}

/// As [`scratch_config`], with `keys` (TOML lines) added to the
/// `[daemon]` section (as [`allow_config_with`]).
pub fn scratch_config_with(allow: &[&str], keys: &str) -> (super::Scratch, PathBuf) {
    let s = super::Scratch::new();
    let cfg = s.write("config.toml", &allow_config_with(allow, keys));
    (s, cfg)
}

/// A daemon allowing `true` and `false` as gates, with session `s1`
/// registered on a git workspace.
pub fn with_s1() -> (super::Scratch, Daemon) {
    let s = super::Scratch::new();
    git_repo(&s.ws);
    let cfg = s.write("config.toml", &super::allow_config(&["true", "false"]));
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    d.register("s1", &s.ws);
    (s, d)
}
