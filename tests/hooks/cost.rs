//! What a standalone `gatehost hook` starts: the WASM engine only when a
//! WASM gate runs. Told by the engine's own debug line ("starting the WASM
//! engine", logged where the gate runner starts it on first use), so a
//! hook whose gates are all shell gates is shown not to pay for it.

use crate::common::Scratch;
use std::process::Stdio;
use std::time::{Duration, Instant};

const ENGINE_LINE: &str = "starting the WASM engine";

/// Runs `gatehost hook claude --gates GATES` on a Stop hook's JSON with
/// gatehost's debug logs on; returns (stdout, stderr) after checking it
/// exited 0.
fn hook_with_debug_logs(s: &Scratch, gates: &str) -> (String, String) {
    let config = super::wasm_config(s);
    let gates = s.write("gates.json", gates);
    let mut child = crate::common::spawn_claude_stop(s, &gates, &config, |c| {
        c.env("GATEHOST_LOG", "gatehost=debug")
            .stderr(Stdio::piped())
    });
    // A hung hook fails the test instead of hanging the suite (the first
    // WASM run may compile the plugin into the shared cache).
    let deadline = Instant::now() + Duration::from_secs(90);
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().expect("wait");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    // The debug logs are on: the hook's own lines are there.
    assert!(stderr.contains("hook answered"), "{stderr}");
    (stdout, stderr)
}

#[test]
fn a_hook_with_only_shell_gates_does_not_start_the_wasm_engine() {
    let s = Scratch::new();
    let (stdout, stderr) = hook_with_debug_logs(&s, r#"{"command": "true"}"#);
    assert_eq!(stdout, "", "a pass answers nothing; stderr: {stderr}");
    assert!(!stderr.contains(ENGINE_LINE), "{stderr}");
}

#[test]
fn a_hook_with_a_wasm_gate_starts_the_wasm_engine() {
    let s = Scratch::new();
    let (stdout, stderr) = hook_with_debug_logs(&s, r#"{"wasm": {"plugin": "noop"}}"#);
    assert_eq!(stdout, "", "noop passes; stderr: {stderr}");
    assert_eq!(stderr.matches(ENGINE_LINE).count(), 1, "{stderr}");
}
