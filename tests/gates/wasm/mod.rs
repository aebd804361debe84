//! WASM gate plugins through the real `gatehost check`: the shipped
//! plugins on real files, the load-time refusals, and the hostile corpus
//! (tests/support/hostile-plugins/), each with its outcome, reason and time bound.
//! Plugins are built by `scripts/build-plugins.sh` (the test script runs it).

use crate::common;
use common::*;
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

mod hostile;
mod loading;
mod shipped;

pub(crate) use common::plugins::plugin_dir;

pub(crate) fn plugin_file(name: &str) -> PathBuf {
    plugin_dir().join(format!("{}.wasm", name.replace('-', "_")))
}

/// A config with the built plugins, a private cache, and the `say` judge.
fn wasm_config(s: &Scratch, extra: &str) -> String {
    wasm_config_in(&s.etc.join("cache"), extra)
}

/// The same, with the compiled components cached in `cache`.
pub(crate) fn wasm_config_in(cache: &std::path::Path, extra: &str) -> String {
    format!(
        "[wasm]\nplugin_dirs = [\"{}\"]\ncache_dir = \"{}\"\n{extra}\n[judge.adapters.yes]\ncommand = [\"bash\", \"{}\", \"VERDICT: PASS\"]\n",
        plugin_dir().display(),
        cache.display(),
        fixture_str("judges/say.sh"),
    )
}

fn sha256_of(path: &std::path::Path) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(
        std::fs::read(path).expect("read plugin"),
    ))
}

pub(crate) fn gate(plugin: &str, config: serde_json::Value, extra: serde_json::Value) -> String {
    let mut w = json!({"plugin": plugin, "config": config});
    if let (Some(o), Some(e)) = (w.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            o.insert(k.clone(), v.clone());
        }
    }
    json!({ "wasm": w }).to_string()
}

/// `check` of `plugin` (with its `config` and `extra` gate keys) under
/// [`wasm_config`], with `args` added.
fn check_plugin(
    s: &Scratch,
    plugin: &str,
    config: serde_json::Value,
    extra: serde_json::Value,
    args: &[&str],
) -> CliRun {
    s.check(&wasm_config(s, ""), &gate(plugin, config, extra), args)
}

/// As [`check_plugin`], on the change in the diff file `diff`.
fn check_diff(
    s: &Scratch,
    plugin: &str,
    config: serde_json::Value,
    diff: impl AsRef<std::path::Path>,
) -> CliRun {
    let diff = arg(diff.as_ref());
    check_plugin(s, plugin, config, json!({}), &["--diff", &diff])
}

/// As [`check_plugin`], for the plugin at `path` pinned to `digest`.
fn check_pinned(s: &Scratch, path: &str, digest: &str) -> CliRun {
    check_plugin(s, path, json!({}), json!({"sha256": digest}), &[])
}

/// Fails unless the run's `hostile` plugin trapped (an error).
#[track_caller]
fn assert_trapped(run: &CliRun) {
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert_starts(&run.reason(), "plugin 'hostile' trapped: ");
}

/// `plugin inspect --json` of the component `file` under the config `cfg`.
fn inspect(cfg: &std::path::Path, file: &std::path::Path) -> CliRun {
    gatehost(&[
        "plugin",
        "inspect",
        "--json",
        "--config",
        &arg(cfg),
        &arg(file),
    ])
}

/// For the shipped `style-review` on `src/lib.rs` (written into the
/// workspace): the config with the `style` judge adapter, and the diff
/// file adding that source.
fn style_review_setup(s: &Scratch) -> (String, String) {
    s.write_ws("src/lib.rs", "fn BadName() {}\nfn good() {}\n");
    let diff = s.write("lib.diff", LIB_DIFF);
    let style = fixture_str("judges/style.sh");
    let extra = format!("[judge.adapters.style]\ncommand = [\"bash\", \"{style}\"]\n");
    (format!("{}{extra}", wasm_config(s, "")), arg(&diff))
}

/// Fails unless the run's plugin was denied (exit 1, a `denied: ` reason);
/// `case` names what was tried.
#[track_caller]
fn assert_denied(run: &CliRun, case: &str) {
    assert_eq!(run.code, 1, "{case}: {}", run.stdout);
    let reason = run.reason();
    assert!(reason.starts_with("denied: "), "{case}: {reason}");
}

/// Every hostile plugin must be dealt with within this bound (the tight
/// time limits have their own tests); the compiled component comes from a
/// cache shared by the test runs, so compilation is not in the bound.
const HOSTILE_BOUND: Duration = Duration::from_secs(10);

pub(crate) fn shared_cache() -> PathBuf {
    plugin_dir().join("../../gatehost-test-cache")
}

fn hostile(s: &Scratch, mode: &str, arg: &str, extra: serde_json::Value) -> CliRun {
    let config = wasm_config_in(&shared_cache(), "");
    // The first run compiles the plugin into the shared cache (hundreds of
    // MiB for cranelift): done once, before anything is measured.
    static WARM: std::sync::Once = std::sync::Once::new();
    WARM.call_once(|| {
        let warm = Scratch::new();
        warm.check(
            &config,
            &gate("hostile", json!({"mode": "error"}), json!({})),
            &[],
        );
    });
    let run = s.check(
        &config,
        &gate("hostile", json!({"mode": mode, "arg": arg}), extra),
        &[],
    );
    assert!(
        run.elapsed < HOSTILE_BOUND,
        "hostile mode {mode} took {:?}",
        run.elapsed
    );
    run
}

const LIB_DIFF: &str = "diff --git a/src/lib.rs b/src/lib.rs\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -0,0 +1,2 @@\n+fn BadName() {}\n+fn good() {}\n";

/// Runs `gatehost hook claude` (standalone, `--log info`, its state in
/// `s.etc/hook-state`) once for a stop of `session` in `cwd`; asserts it
/// succeeded without blocking and returns its stderr (the gates' log lines).
pub(crate) fn standalone_stop(
    s: &Scratch,
    config: &std::path::Path,
    gates: &std::path::Path,
    session: &str,
    cwd: &std::path::Path,
) -> String {
    use std::io::Write;
    use std::process::Stdio;
    let state = s.etc.join("hook-state");
    let (gates, config, state) = (arg(gates), arg(config), arg(&state));
    let args = ["hook", "claude", "--log", "info", "--gates", &gates];
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gatehost"))
        .args(args)
        .args(["--config", &config, "--state-dir", &state])
        .env_clear()
        .envs(["PATH", "HOME"].map(|k| (k, std::env::var_os(k).unwrap_or_default())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hook");
    let input = json!({"session_id": session, "cwd": cwd, "hook_event_name": "Stop",
        "last_assistant_message": "done"});
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(input.to_string().as_bytes())
        .expect("write input");
    drop(stdin);
    let out = child.wait_with_output().expect("hook output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        !stdout.contains("\"block\""),
        "the stop was blocked: {stdout}\n{stderr}"
    );
    stderr
}
