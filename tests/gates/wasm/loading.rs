//! What a WASM gate may load and run over: a workspace's plugin pinned by
//! digest, files that are not gate components refused with the cause,
//! plugins built against older WIT versions, bounds beyond the host's
//! maxima, a workspace holding the host's own places, and the change a
//! plugin sees.

use super::{
    check_pinned, check_plugin, gate, inspect, plugin_file, sha256_of, shared_cache,
    standalone_stop, wasm_config, wasm_config_in,
};
use crate::common;
use common::*;
use serde_json::json;

#[test]
fn a_plugin_in_the_workspace_must_be_pinned_by_digest() {
    let s = Scratch::new();
    let bytes = std::fs::read(plugin_file("noop")).unwrap();
    std::fs::create_dir_all(s.ws.join("gates")).unwrap();
    std::fs::write(s.ws.join("gates/noop.wasm"), &bytes).unwrap();
    let run = check_plugin(&s, "gates/noop.wasm", json!({}), json!({}), &[]);
    assert_refused(&run, "pin it with \"sha256\"");
    let digest = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(&bytes))
    };
    let run = check_pinned(&s, "gates/noop.wasm", &digest);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let wrong = "0".repeat(64);
    let run = check_pinned(&s, "gates/noop.wasm", &wrong);
    assert_refused(&run, "is not the 0000");
    // The file's real digest is never told: it would be an oracle.
    assert_lacks(&run.reason(), &digest);
    // Outside the workspace too (the agent can write /tmp): a path needs a pin.
    let outside = s.etc.join("noop.wasm");
    std::fs::write(&outside, &bytes).unwrap();
    let run = check_plugin(&s, outside.to_str().unwrap(), json!({}), json!({}), &[]);
    assert_refused(&run, "is given by path: pin it with \"sha256\"");
    let run = check_pinned(&s, outside.to_str().unwrap(), &digest);
    assert_eq!(run.code, 0, "{}", run.reason());
    // A path that escapes the workspace is refused by the anchor.
    let run = check_pinned(&s, "../etc/x.wasm", &digest);
    assert_refused(&run, "path escapes the workspace");
}

#[test]
fn files_that_are_not_gate_components_are_refused_with_the_cause() {
    let s = Scratch::new();
    let noop = std::fs::read(plugin_file("noop")).unwrap();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "core.wasm",
            b"\0asm\x01\0\0\0".to_vec(),
            "a core WebAssembly module, not a component",
        ),
        (
            "text.wasm",
            b"#!/bin/sh\necho hi\n".to_vec(),
            "not a WebAssembly file",
        ),
        (
            "truncated.wasm",
            noop[..noop.len() / 2].to_vec(),
            "is not a valid component",
        ),
    ];
    for (name, bytes, expected) in cases {
        let path = s.etc.join(name);
        std::fs::write(&path, bytes).unwrap();
        let run = check_pinned(&s, path.to_str().unwrap(), &sha256_of(&path));
        assert_eq!(run.code, 2, "{name}");
        assert!(run.reason().contains(expected), "{name}: {}", run.reason());
    }
    let run = check_plugin(&s, "wrong-world", json!({}), json!({}), &[]);
    assert_refused(
        &run,
        "does not target the gatehost:gate@0.1 gate-plugin world",
    );
    let run = check_plugin(&s, "hostile-socket", json!({}), json!({}), &[]);
    assert_refused(&run, "imports wasi:sockets/");
    assert!(
        run.reason().ends_with("which gatehost does not grant"),
        "{}",
        run.reason()
    );
    let run = check_plugin(&s, "no-such-plugin", json!({}), json!({}), &[]);
    assert_refused(&run, "was not found in the plugin directories");
}

/// A plugin built against the exact text of `gatehost:gate@0.1.0` (before
/// `workspace-files` and `read-files` were added in 0.1.1) loads and runs
/// on this host, its host imports (`log`, `file-diff`) linked.
#[test]
fn a_plugin_built_against_0_1_0_keeps_loading() {
    let s = Scratch::new();
    let config = wasm_config(&s, "");
    let cfg = s.write("c.toml", &config);
    let inspect = inspect(&cfg, &plugin_file("legacy-v0-1-0"));
    assert_eq!(inspect.code, 0, "{}", inspect.stderr);
    assert_eq!(inspect.json()["interface"], "gatehost:gate@0.1.0");
    s.write(
        "change.diff",
        "diff --git a/a.rs b/a.rs\n--- a/a.rs\n+++ b/a.rs\n@@ -0,0 +1 @@\n+x\n",
    );
    let diff = s.etc.join("change.diff").display().to_string();
    let run = s.check(
        &config,
        &gate("legacy-v0-1-0", json!({}), json!({})),
        &["--diff", &diff],
    );
    assert_reason(&run, 0, "0.1.0 plugin: 1 changed file(s), 1 with a diff");
}

/// A plugin built against the exact text of `gatehost:gate@0.1.1` (before
/// `judge-with-context` was added in 0.1.2) loads and runs on this host,
/// its `workspace-files`, `read-files` and `judge` imports linked.
#[test]
fn a_plugin_built_against_0_1_1_keeps_loading() {
    let s = Scratch::new();
    s.write_ws("a.rs", "x\n");
    s.write_ws("b.rs", "y\n");
    let config = wasm_config(&s, "");
    let cfg = s.write("c.toml", &config);
    let inspect = inspect(&cfg, &plugin_file("legacy-v0-1-1"));
    assert_eq!(inspect.code, 0, "{}", inspect.stderr);
    assert_eq!(inspect.json()["interface"], "gatehost:gate@0.1.1");
    let run = s.check(
        &config,
        &gate(
            "legacy-v0-1-1",
            json!({}),
            json!({"judge": {"adapter": "yes", "timeoutMs": 10000}}),
        ),
        &[],
    );
    assert_reason(&run, 0, "0.1.1 plugin: 2 file(s), 2 read, judge passed");
}

#[test]
fn bounds_beyond_the_host_maxima_are_refused_before_running() {
    let s = Scratch::new();
    let run = s.check(
        &wasm_config(&s, "default_memory_mib = 32\nmax_memory_mib = 64\n"),
        &gate("noop", json!({}), json!({"memoryMiB": 65})),
        &[],
    );
    assert_reason(
        &run,
        2,
        "plugin 'noop': memoryMiB 65 exceeds the host's maximum of 64",
    );
}

/// Issue 24, item 2: a WASM gate never runs in a workspace that holds the
/// host's own places (here the gates' scratch root, as the data directory
/// or a token file would be): `forbid-patterns` would spell out what is
/// there. An `error`, like a native gate there, never a verdict on it.
#[test]
fn a_wasm_gate_refuses_a_workspace_that_holds_the_hosts_own_places() {
    let s = Scratch::new();
    let scratch = etc_dir(&s, "scratch");
    std::fs::write(scratch.join("operator.token"), "SECRET-TOKEN-abc123\n").expect("write");
    // The configuration itself lies outside the workspace (a separate
    // refusal covers that).
    let cfg = s.out.join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            "[sandbox]\nscratch_dir = {:?}\n{}",
            scratch.display().to_string(),
            wasm_config_in(&shared_cache(), "")
        ),
    )
    .expect("write");
    let gate_file = s.out.join("gate.json");
    std::fs::write(
        &gate_file,
        gate(
            "forbid-patterns",
            json!({"scope": "all", "rules": [
                {"id": "token", "pattern": "SECRET-TOKEN-[a-z0-9]+", "message": "a token"}
            ]}),
            json!({}),
        ),
    )
    .expect("write");
    let run = run_gatehost(&check_args(&cfg, &s.etc, &[], &gate_file), &[]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert_has(&run.reason(), "overlaps gatehost's own");
    assert_lacks(&run.stdout, "abc123");
}

/// The change a plugin sees is the agent's: computed once, before the
/// run's first gate (a file an earlier gate of the run wrote is not in
/// it), and a Python gate's bytecode goes to its scratch, not into
/// `__pycache__/` in the workspace, where it would count as the agent's
/// change at the next stop. (Before: the second stop's plugin scanned
/// "2 file(s)", the bytecode the first stop's gate wrote.)
#[test]
fn the_change_a_plugin_sees_holds_nothing_the_gates_of_a_run_wrote() {
    let s = Scratch::new();
    common::daemon::git_repo(&s.ws);
    std::fs::write(s.ws.join("mod.py"), "def f():\n    return 1\n").expect("write");
    common::daemon::git_out(&s.ws, &["add", "mod.py"]);
    common::daemon::git_out(&s.ws, &["commit", "-qm", "mod"]);
    std::fs::write(s.ws.join("mod.py"), "def f():\n    return 2\n").expect("change");
    let config = s.write(
        "config.toml",
        &format!("{}{}", allow_config(&[]), wasm_config(&s, "")),
    );
    let gates = s.write(
        "gates.json",
        &format!(
            "[{}, {}, {}]",
            json!({"name": "import", "command": "bash", "args": ["-c", "/usr/bin/python3 -c 'import mod'"]}),
            json!({"name": "writes", "command": "bash", "args": ["-c", "echo x > gate-wrote.txt"]}),
            gate(
                "forbid-patterns",
                json!({"scope": "changed", "rules": [{"id": "x", "pattern": "XYZZY"}]}),
                json!({})
            ),
        ),
    );
    for stop in 1..=2 {
        let log = standalone_stop(&s, &config, &gates, "s-pycache", &s.ws);
        assert!(
            log.contains("no forbidden pattern in 1 file(s)"),
            "stop {stop}: {log}"
        );
        assert!(
            !s.ws.join("__pycache__").exists(),
            "stop {stop}: the gate's bytecode landed in the workspace"
        );
        // What the run's own gate wrote is there, but it was not in the
        // change the plugin saw; removed, as an agent that keeps its
        // workspace clean would.
        assert!(s.ws.join("gate-wrote.txt").is_file());
        std::fs::remove_file(s.ws.join("gate-wrote.txt")).expect("remove");
    }
}
