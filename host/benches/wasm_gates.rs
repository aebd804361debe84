//! WASM gate performance, each figure against a baseline measured in the
//! same run.
//!
//! Run: `bash scripts/build-plugins.sh && cargo bench -p gatehost --bench wasm_gates`
//! (add `-- --rounds N`, and `--only SECTION,...` for some of them).
//!
//! - warm latency: the `noop` plugin vs a shell gate running `true`
//!   (alternating; each after a 1 ms pause; and `noop` back to back);
//!   `forbid-patterns` over a generated 1,000-file workspace vs a shell gate
//!   running `grep -rE` over the same files (alternating rounds);
//! - throughput: `noop` evaluations with 1 and 8 in flight;
//! - js: the JavaScript plugin `no-debug-js` vs `forbid-patterns` with the
//!   same rules, over the same 20 changed files, and with no file to scan
//!   vs `noop` (alternating rounds);
//! - cold start: first evaluation from the on-disk cache vs compiling from
//!   scratch (a fresh host each time), for `noop`, `forbid-patterns`, the
//!   Python `no-secrets` and the JavaScript `no-debug-js`;
//! - with `GATEHOST_BENCH_BREAKDOWN=1`: where `forbid-patterns` spends its
//!   time, walking the workspace only vs walking, reading and scanning.

mod support;

use gatehost::anchor::WorkspaceAnchor;
use gatehost::config::HostConfig;
use gatehost::gate::{GateContext, GateRunner, GateSpec, parse_gate_file};
use gatehost::verdict::Outcome;
use std::path::Path;
use std::time::{Duration, Instant};

fn main() {
    let rounds = support::arg("--rounds", 400);
    // `--only a,b` runs only the named sections (spares, pooling, back-to-back, after-idle, noop, breakdown,
    // forbid, throughput, js, cold); all of them by default.
    let section = support::selected;
    let plugins =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/target/wasm32-wasip2/release");
    assert!(
        plugins.join("noop.wasm").is_file(),
        "build the plugins first: bash scripts/build-plugins.sh"
    );
    let scratch = tempfile::tempdir().expect("tempdir");
    let ws = scratch.path().join("ws");
    support::generate_workspace(&ws, 1000, true);
    let cache = scratch.path().join("cache");
    let runner = runner(&plugins, &cache);
    let anchor = WorkspaceAnchor::open(&ws).expect("workspace");
    // The operator's own measurement: grep gets its arguments.
    let ctx = GateContext {
        trust: gatehost::config::Trust::Operator,
        ..GateContext::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let gate = |json: &str| parse_gate_file(json).expect("gate").remove(0);
    let noop = gate(r#"{"wasm": {"plugin": "noop"}}"#);
    let shell_true = gate(r#"{"command": "true"}"#);
    let forbid = gate(
        r#"{"wasm": {"plugin": "forbid-patterns", "timeoutMs": 60000, "config": {"scope": "all", "rules": [{"id": "no-dbg", "pattern": "dbg!\\(|FIXME[0-9]+"}]}}}"#,
    );
    let grep = gate(
        r#"{"command": "grep", "args": ["-rEn", "dbg!\\(|FIXME[0-9]+", "."], "timeoutMs": 60000}"#,
    );
    let run = |g: &GateSpec| rt.block_on(runner.run_gate(g, &anchor, &ctx));
    // Both searches find the same single planted match: both "fail".
    assert_eq!(run(&forbid).outcome, Outcome::Fail, "{:?}", run(&forbid));
    assert_eq!(run(&grep).outcome, Outcome::Pass);
    assert_eq!(run(&noop).outcome, Outcome::Pass);

    println!(
        "wasm gates, {rounds} alternating rounds, instance allocation: {}, containment for shell gates: {}",
        runner
            .wasm_host()
            .map(|h| h.allocation())
            .unwrap_or("unavailable"),
        runner.supervisor().containment()
    );
    // The same trivial plugin with instances allocated on demand.
    let on_demand = runner_with(&plugins, &cache, "pooling = false\n");
    let run_od = |g: &GateSpec| rt.block_on(on_demand.run_gate(g, &anchor, &ctx));
    // The same without spare instances (each evaluation instantiates).
    let no_spares = runner_with(&plugins, &cache, "spare_instances = 0\n");
    let run_ns = |g: &GateSpec| rt.block_on(no_spares.run_gate(g, &anchor, &ctx));
    if section("spares") {
        let (a, b) = alternate_with(
            rounds,
            || std::thread::sleep(Duration::from_millis(1)),
            || assert!(run_ns(&noop).passed()),
            || assert!(run(&noop).passed()),
        );
        report(
            "noop, each after a 1 ms pause: without spare instances (baseline) vs with",
            &a,
            &b,
        );
        let (a, b) = alternate(
            rounds,
            || assert!(run_ns(&noop).passed()),
            || assert!(run(&noop).passed()),
        );
        report(
            "noop, alternating: without spare instances (baseline) vs with",
            &a,
            &b,
        );
    }
    if section("pooling") {
        let (a, b) = alternate(
            rounds,
            || assert!(run(&noop).passed()),
            || assert!(run_od(&noop).passed()),
        );
        report("noop, pooling (baseline) vs on-demand allocation", &a, &b);
    }
    if section("back-to-back") {
        let mut samples = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let t = Instant::now();
            assert!(run(&noop).passed());
            samples.push(t.elapsed());
        }
        report(
            "noop back to back (baseline and subject alike)",
            &samples,
            &samples,
        );
    }
    if section("after-idle") {
        // Each gate measured after the same 1 ms pause (as a turn-end comes
        // after the agent's turn): neither runs right after the other.
        let (xa, xb) = alternate_with(
            rounds,
            || std::thread::sleep(Duration::from_millis(1)),
            || assert!(run(&shell_true).passed()),
            || assert!(run(&noop).passed()),
        );
        report(
            "each after a 1 ms pause: shell gate `true` vs noop",
            &xa,
            &xb,
        );
    }
    if section("noop") {
        let (a, b) = alternate(
            rounds,
            || assert!(run(&shell_true).passed()),
            || assert!(run(&noop).passed()),
        );
        report("trivial plugin (noop) vs shell gate `true`", &a, &b);
    }
    if std::env::var_os("GATEHOST_BENCH_BREAKDOWN").is_some() && section("breakdown") {
        let walk = gate(
            r#"{"wasm": {"plugin": "forbid-patterns", "timeoutMs": 60000, "config": {"scope": "all", "rules": [{"id": "x", "pattern": "zzz", "paths": ["*.nomatch"]}]}}}"#,
        );
        let scan = gate(
            r#"{"wasm": {"plugin": "forbid-patterns", "timeoutMs": 60000, "config": {"scope": "all", "rules": [{"id": "x", "pattern": "zzzz_never"}]}}}"#,
        );
        let (a, b) = alternate(
            30,
            || {
                run(&walk);
            },
            || {
                run(&scan);
            },
        );
        report(
            "breakdown: walk only (baseline) vs walk+read+scan (subject)",
            &a,
            &b,
        );
    }
    if section("forbid") {
        let forbid_rounds = (rounds / 10).max(20);
        let (a, b) = alternate(
            forbid_rounds,
            || assert!(run(&grep).passed()),
            || assert_eq!(run(&forbid).outcome, Outcome::Fail),
        );
        report("forbid-patterns vs grep -rE, 1,000 files", &a, &b);
    }

    // Each figure twice, with and without spare instances interleaved.
    for in_flight in [1usize, 8] {
        if !section("throughput") {
            break;
        }
        for _ in 0..2 {
            for (label, runner) in [("", &runner), (" (no spare instances)", &no_spares)] {
                let total = rounds.max(in_flight * 50);
                let start = Instant::now();
                rt.block_on(async {
                    let mut done = 0;
                    while done < total {
                        let batch: Vec<_> = (0..in_flight)
                            .map(|_| runner.run_gate(&noop, &anchor, &ctx))
                            .collect();
                        for v in futures::future::join_all(batch).await {
                            assert!(v.passed());
                        }
                        done += in_flight;
                    }
                });
                let per_sec = total as f64 / start.elapsed().as_secs_f64();
                println!(
                    "throughput, noop, {in_flight} in flight{label}: {per_sec:.0} evaluations/s"
                );
            }
        }
    }

    // The JavaScript plugin (no-debug-js) warm, against forbid-patterns
    // with the same two rules, both over the same change of 20 files
    // (every line of each, 40 lines a file).
    let js_ctx = GateContext {
        diff: Some(
            (0..20)
                .map(|i| {
                    let f = format!("src/mod{i}/file{i}.rs");
                    format!("diff --git a/{f} b/{f}\n--- a/{f}\n+++ b/{f}\n@@ -1 +1 @@\n-x\n+y\n")
                })
                .collect(),
        ),
        ..GateContext::default()
    };
    if section("js") {
        let js = gate(JS_GATE);
        let rust = gate(
            r#"{"wasm": {"plugin": "forbid-patterns", "config": {"scope": "changed", "rules": [{"id": "console-log", "pattern": "\\bconsole\\.log\\s*\\("}, {"id": "debugger", "pattern": "\\bdebugger\\s*(?:;|$)"}]}}}"#,
        );
        let run_ctx = |g: &GateSpec| rt.block_on(runner.run_gate(g, &anchor, &js_ctx));
        let (a, b) = alternate(
            rounds,
            || assert!(run_ctx(&rust).passed()),
            || assert!(run_ctx(&js).passed()),
        );
        report(
            "no-debug-js (JavaScript) vs forbid-patterns (Rust), same rules, 20 changed files",
            &a,
            &b,
        );
        // The JavaScript engine's start alone: no file to read or scan.
        let js_idle =
            gate(r#"{"wasm": {"plugin": "no-debug-js", "config": {"extensions": [".none"]}}}"#);
        let (a, b) = alternate(
            rounds,
            || assert!(run_ctx(&noop).passed()),
            || assert!(run_ctx(&js_idle).passed()),
        );
        report(
            "no-debug-js with no file to scan vs noop, same change",
            &a,
            &b,
        );
    }

    // Cold start: a fresh host (as after a restart) with the cache filled,
    // against a fresh host with an empty cache (compiles from scratch).
    let cold_ctx = GateContext {
        diff: Some(
            "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -0,0 +1 @@\n+x = 1\n".into(),
        ),
        ..GateContext::default()
    };
    for plugin in ["noop", "forbid-patterns", "no-secrets", "no-debug-js"] {
        if !section("cold") {
            break;
        }
        // no-debug-js refuses config keys it does not know; it scans the
        // changed files of the JavaScript change below.
        let (g, ctx) = if plugin == "no-debug-js" {
            (gate(JS_GATE), &js_ctx)
        } else {
            (
                gate(&format!(
                    r#"{{"wasm": {{"plugin": "{plugin}", "config": {{"scope": "all", "rules": [{{"id": "x", "pattern": "zzz"}}]}}}}}}"#
                )),
                &cold_ctx,
            )
        };
        let mut cached = Vec::new();
        let mut scratch_compile = Vec::new();
        for i in 0..if plugin.starts_with("no-") { 2 } else { 5 } {
            let empty = scratch.path().join(format!("empty-{plugin}-{i}"));
            let t = Instant::now();
            let fresh = runner_for(&plugins, &empty);
            let v = rt.block_on(fresh.run_gate(&g, &anchor, ctx));
            scratch_compile.push(t.elapsed());
            assert!(v.outcome != Outcome::Error, "{v:?}");
            let t = Instant::now();
            let warm_disk = runner_for(&plugins, &empty);
            let v = rt.block_on(warm_disk.run_gate(&g, &anchor, ctx));
            cached.push(t.elapsed());
            assert!(v.outcome != Outcome::Error, "{v:?}");
        }
        let size = std::fs::metadata(plugins.join(format!("{}.wasm", plugin.replace('-', "_"))))
            .map(|m| m.len())
            .unwrap_or(0);
        report(
            &format!(
                "cold start {plugin} ({} KiB): compile from scratch vs on-disk cache",
                size / 1024
            ),
            &scratch_compile,
            &cached,
        );
    }
}

/// no-debug-js over every line of the changed files, here Rust ones.
const JS_GATE: &str = r#"{"wasm": {"plugin": "no-debug-js", "config": {"extensions": [".rs"], "addedLinesOnly": false}}}"#;

fn runner(plugins: &Path, cache: &Path) -> GateRunner {
    runner_for(plugins, cache)
}

fn runner_for(plugins: &Path, cache: &Path) -> GateRunner {
    runner_with(plugins, cache, "")
}

fn runner_with(plugins: &Path, cache: &Path, extra: &str) -> GateRunner {
    let text = format!(
        "[shell]\nallow = [\"true\", \"grep\"]\n[wasm]\nplugin_dirs = [\"{}\"]\ncache_dir = \"{}\"\n{extra}",
        plugins.display(),
        cache.display()
    );
    GateRunner::new(HostConfig::from_toml(&text, "bench").expect("config"))
}

fn alternate(rounds: usize, a: impl FnMut(), b: impl FnMut()) -> (Vec<Duration>, Vec<Duration>) {
    alternate_with(rounds, || {}, a, b)
}

/// `a` then `b`, each timed alone (`support::alternate_with`).
fn alternate_with(
    rounds: usize,
    before: impl FnMut(),
    a: impl FnMut(),
    b: impl FnMut(),
) -> (Vec<Duration>, Vec<Duration>) {
    support::alternate_with(rounds, before, support::timed(a), support::timed(b))
}

fn report(name: &str, baseline: &[Duration], subject: &[Duration]) {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let (b50, b99) = (
        support::quantile(baseline, 0.5),
        support::quantile(baseline, 0.99),
    );
    let (s50, s99) = (
        support::quantile(subject, 0.5),
        support::quantile(subject, 0.99),
    );
    println!(
        "{name}: baseline p50 {:.0} us, p99 {:.0} us | subject p50 {:.0} us, p99 {:.0} us | baseline/subject {:.2}x",
        us(b50),
        us(b99),
        us(s50),
        us(s99),
        b50.as_secs_f64() / s50.as_secs_f64()
    );
}
