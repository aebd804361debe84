//! The WASM host through the library: one engine keeps serving after
//! plugins trap, and a hostile evaluation does not disturb others running
//! beside it.

mod common;
use common::*;
use gatehost::anchor::WorkspaceAnchor;
use gatehost::config::HostConfig;
use gatehost::gate::{GateContext, GateRunner, parse_gate_file};
use gatehost::verdict::Outcome;
use std::time::{Duration, Instant};

fn runner(s: &Scratch) -> GateRunner {
    let plugins = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../plugins/target/wasm32-wasip2/release");
    assert!(
        plugins.join("noop.wasm").is_file(),
        "run `bash scripts/build-plugins.sh` first"
    );
    let text = format!(
        "[wasm]\nplugin_dirs = [\"{}\"]\ncache_dir = \"{}\"\n",
        plugins.display(),
        s.etc.join("cache").display()
    );
    GateRunner::new(HostConfig::from_toml(&text, "test").expect("config"))
}

fn gate(json: &str) -> gatehost::gate::GateSpec {
    parse_gate_file(json).expect("gate").remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_keeps_serving_after_traps_and_bounds() {
    let s = Scratch::new();
    let r = runner(&s);
    let anchor = WorkspaceAnchor::open(&s.ws).expect("workspace");
    let ctx = GateContext::default();
    let noop = gate(r#"{"wasm": {"plugin": "noop"}}"#);
    for bad in [
        r#"{"wasm": {"plugin": "hostile", "config": {"mode": "panic"}}}"#,
        r#"{"wasm": {"plugin": "hostile", "config": {"mode": "memory"}, "memoryMiB": 16}}"#,
        r#"{"wasm": {"plugin": "hostile", "config": {"mode": "loop"}, "fuel": 10000000}}"#,
        r#"{"wasm": {"plugin": "hostile", "config": {"mode": "recursion"}}}"#,
    ] {
        let v = r.run_gate(&gate(bad), &anchor, &ctx).await;
        assert_eq!(v.outcome, Outcome::Error, "{bad}: {v:?}");
        let after = r.run_gate(&noop, &anchor, &ctx).await;
        assert_eq!(after.outcome, Outcome::Pass, "after {bad}: {after:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_looping_plugin_does_not_hold_up_others_running_beside_it() {
    let s = Scratch::new();
    let r = runner(&s);
    let anchor = WorkspaceAnchor::open(&s.ws).expect("workspace");
    let ctx = GateContext::default();
    let looping = gate(
        r#"{"wasm": {"plugin": "hostile", "config": {"mode": "loop"}, "timeoutMs": 1500, "fuel": 500000000000}}"#,
    );
    let noop = gate(r#"{"wasm": {"plugin": "noop"}}"#);
    // Warm the noop plugin so that its compilation is not measured.
    assert!(r.run_gate(&noop, &anchor, &ctx).await.passed());
    let started = Instant::now();
    let (stuck, quick) = tokio::join!(r.run_gate(&looping, &anchor, &ctx), async {
        let t = Instant::now();
        let v = r.run_gate(&noop, &anchor, &ctx).await;
        (v, t.elapsed())
    });
    assert_eq!(stuck.outcome, Outcome::Error);
    assert!(stuck.reason.contains("timed out"), "{}", stuck.reason);
    assert!(quick.0.passed());
    assert!(
        quick.1 < Duration::from_millis(1000),
        "noop waited {:?} behind the loop",
        quick.1
    );
    assert!(started.elapsed() < Duration::from_secs(4));
}
