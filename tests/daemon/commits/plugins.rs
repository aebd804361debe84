//! Plugins gated by the daemon: the changes they see (since HEAD, under
//! their paths), a plugin reading a FIFO, and attach checks off the request
//! threads.

use super::{T, forbid_dbg, setup_with, setup_with_plugins};
use crate::common::shorthand::assert_has;
use serde_json::json;
use std::time::Duration;

/// A plugin gate that names its paths is shown only the changes under
/// them (its worktree holds nothing else): a `dbg!` beside them is not
/// its business, one under them is.
#[test]
fn a_plugin_that_names_its_paths_sees_only_the_changes_under_them() {
    let (s, d, _cache) = setup_with_plugins();
    let mut gate = forbid_dbg();
    gate["paths"] = json!(["src/a"]);
    s.write_ws("src/a/ok.rs", "fn ok() {}\n");
    s.write_ws("src/b/bad.rs", "fn f() { dbg!(1); }\n");
    let attach = |message: &str| {
        d.attach(json!({
            "sessionId": "s1", "gate": gate, "then": "commit", "onFail": {"maxRetries": 0},
            "commit": {"paths": ["src"], "message": message, "requireHumanAck": true}
        }))
    };
    let pid = attach("beside");
    d.report("s1", "turn-end");
    let p = d.wait_status(&pid, "awaiting-ack", T);
    assert_eq!(p["verdict"]["outcome"], "pass", "{p}");
    d.cli_ok(&["policy", "ack", &pid, "--reject"], &d.operator);
    s.write_ws("src/a/ok.rs", "fn ok() { dbg!(2); }\n");
    let pid = attach("under");
    d.report("s1", "turn-end");
    let p = d.wait_status(&pid, "blocked", T);
    let findings = &p["verdict"]["gates"][0]["findings"];
    assert_eq!(findings.as_array().map(Vec::len), Some(1), "{p}");
    assert_eq!(findings[0]["path"], "src/a/ok.rs", "{p}");
}

#[test]
fn plugins_gated_by_the_daemon_see_the_workspace_changes_since_head() {
    let (s, d, _cache) = setup_with_plugins();
    let gate = forbid_dbg();
    // An untracked file with a dbg!: the plugin must see it as changed.
    s.write_ws("src/new.rs", "fn f() { dbg!(1); }\n");
    let pid = d.attach(json!({"sessionId": "s1", "gate": gate, "onFail": {"maxRetries": 0}}));
    d.report("s1", "turn-end");
    let p = d.wait_status(&pid, "blocked", T);
    let findings = &p["verdict"]["gates"][0]["findings"];
    assert_eq!(findings[0]["path"], "src/new.rs", "{p}");
    // Once that file is committed, it is no longer a change: the same gate
    // passes (the plugin sees the diff since HEAD, not every file).
    for args in [
        &["add", "src/new.rs"][..],
        &["commit", "-q", "-m", "by hand"][..],
    ] {
        crate::common::daemon::git_tester_ok(&s.ws, args);
    }
    std::fs::write(s.ws.join("README"), "a clean change\n").expect("write");
    let again = d.attach(json!({"sessionId": "s1", "gate": gate}));
    let p = d.wait_status(&again, "done", T);
    assert_eq!(p["verdict"]["outcome"], "pass", "{p}");
    // New top-level files whose names look like options, pathspec magic or
    // globs, or break a diff header, are changes the plugin sees too.
    let hostile = [
        "-x.rs",
        ":(glob)*.rs",
        "*.rs",
        "a?[b]\\.rs",
        "new\nline.rs",
        "sp ace.rs",
    ];
    for name in hostile {
        std::fs::write(s.ws.join(name), "fn f() { dbg!(1); }\n").expect("write");
    }
    let third = d.attach(json!({"sessionId": "s1", "gate": gate, "onFail": {"maxRetries": 0}}));
    d.report("s1", "turn-end");
    let p = d.wait_status(&third, "blocked", T);
    let mut paths: Vec<String> = p["verdict"]["gates"][0]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["path"].as_str().unwrap_or_default().to_string())
        .collect();
    paths.sort();
    let mut want: Vec<String> = hostile.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(paths, want, "{p}");
}

/// Plugins opening a FIFO the agent planted (two at once, each would hold
/// a thread in the kernel with a blocking open) neither hang their gates
/// nor the daemon's API, and the daemon runs the next gate as usual.
#[test]
fn fifo_reading_plugins_leave_the_daemon_answering() {
    let plugins = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../plugins/target/wasm32-wasip2/release");
    let (s, d) = setup_with(
        "",
        &format!(
            "[wasm]\nplugin_dirs = [\"{}\"]\ncache_dir = \"{}\"\n",
            plugins.display(),
            plugins.join("../../gatehost-test-cache").display()
        ),
    );
    // Ignored, so that the change set (which refuses a FIFO) leaves it out
    // and the plugins get to open it.
    s.write_ws(".gitignore", "private/\n");
    std::fs::create_dir(s.ws.join("private")).expect("mkdir");
    let fifo =
        std::ffi::CString::new(s.ws.join("private/STYLE.md").display().to_string()).expect("path");
    // SAFETY: mkfifo(3) with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let gate = json!({"wasm": {"plugin": "hostile", "timeoutMs": 3000,
        "config": {"mode": "read", "arg": "/workspace/private/STYLE.md"}}});
    let spec = json!({"sessionId": "s1", "gate": gate, "onFail": {"maxRetries": 0}});
    let ids = [d.attach(spec.clone()), d.attach(spec)];
    d.report("s1", "turn-end");
    let fastest = d.fastest_health();
    // Within a second: a plugin's blocked open holding the API would hold
    // it for the gate's whole 3 s; a loaded machine's client alone takes a
    // few hundred ms.
    assert!(fastest < Duration::from_secs(1), "health took {fastest:?}");
    for id in &ids {
        let p = d.wait_status(id, "blocked", T);
        let reason = p["verdict"]["gates"][0]["reason"]
            .as_str()
            .unwrap_or_default();
        assert!(reason.starts_with("denied: "), "{p}");
    }
    let next = d.attach(json!({"sessionId": "s1", "gate": {"wasm": {"plugin": "noop"}}}));
    d.report("s1", "turn-end");
    let p = d.wait_status(&next, "done", T);
    assert_eq!(p["verdict"]["outcome"], "pass", "{p}");
}

/// An attach whose plugin must be compiled (1–2 s for `forbid-patterns`
/// here) does that work off the threads that serve requests: three at once
/// leave `/v1/health` answering in under 250 ms (1.5 s when they held the
/// request threads). And the work is bounded:
/// past `[daemon] attach_timeout_ms` the answer is 503 `attach-timeout`,
/// and nothing is stored, even once the plugin has finished compiling.
#[test]
fn attach_checks_run_off_the_request_threads_within_a_time_bound() {
    let plugins = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../plugins/target/wasm32-wasip2/release");
    let gate = json!({"wasm": {"plugin": "forbid-patterns", "config": {"rules": []}}});
    let spec = json!({"sessionId": "s1", "gate": gate});
    for (timeout_ms, concurrent) in [(120_000u64, 3usize), (300, 1)] {
        let cache = tempfile::tempdir().expect("cache");
        let (_s, d) = setup_with(
            &format!("attach_timeout_ms = {timeout_ms}\n"),
            &format!(
                "[wasm]\nplugin_dirs = [\"{}\"]\ncache_dir = \"{}\"\n",
                plugins.display(),
                cache.path().display()
            ),
        );
        let answers = std::thread::scope(|scope| {
            let attaches: Vec<_> = (0..concurrent)
                .map(|_| scope.spawn(|| d.post("/v1/policies", &d.agent, Some(spec.clone()))))
                .collect();
            std::thread::sleep(Duration::from_millis(200));
            let slowest = (0..3)
                .map(|_| {
                    let started = std::time::Instant::now();
                    assert_eq!(d.agent_ok("GET", "/v1/health", None)["ok"], true);
                    started.elapsed()
                })
                .max()
                .expect("three");
            // Measured while the compilations ran (they take seconds): when
            // they held the request threads, health waited 1.5 s for them.
            // The bound is well below that and well above a loaded
            // machine's answer (281 ms was seen with two builds beside).
            assert!(
                concurrent == 1 || attaches.iter().any(|a| !a.is_finished()),
                "the attaches ended before health was measured"
            );
            assert!(
                slowest < Duration::from_millis(800),
                "health took {slowest:?} while {concurrent} attaches compiled"
            );
            attaches
                .into_iter()
                .map(|a| a.join().expect("attach thread"))
                .collect::<Vec<_>>()
        });
        let listed = || {
            d.operator_ok("GET", "/v1/policies?limit=1000", None)["policies"]
                .as_array()
                .map_or(0, Vec::len)
        };
        if concurrent == 3 {
            for (code, body) in &answers {
                assert_eq!(*code, 201, "{body}");
            }
            assert_eq!(listed(), 3);
            continue;
        }
        let (code, body) = &answers[0];
        assert_eq!(*code, 503, "{body}");
        assert_eq!(body["error"]["code"], "attach-timeout", "{body}");
        // The compilation goes on and lands in the cache; the attach it
        // served still stores nothing.
        let deadline = std::time::Instant::now() + T;
        while !std::fs::read_dir(cache.path())
            .expect("cache")
            .flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with(".cwasm"))
        {
            assert!(std::time::Instant::now() < deadline, "never compiled");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(listed(), 0);
        assert_has(&d.log(), "attach_timeout_ms");
    }
}
