//! The WASM host through the library: one engine keeps serving after
//! plugins trap, and a hostile evaluation does not disturb others running
//! beside it.

use crate::common;
use common::*;
use gatehost::anchor::WorkspaceAnchor;
use gatehost::config::HostConfig;
use gatehost::gate::{GateContext, GateRunner, parse_gate_file};
use gatehost::verdict::Outcome;
use std::time::{Duration, Instant};

/// A configuration finding plugins in `plugins`, caching them in the
/// scratch's `etc/cache`, with `more` TOML after the `[wasm]` keys.
fn config(s: &Scratch, plugins: &std::path::Path, more: &str) -> HostConfig {
    let text = format!(
        "[wasm]\nplugin_dirs = [\"{}\"]\ncache_dir = \"{}\"\n{more}",
        plugins.display(),
        s.etc.join("cache").display()
    );
    HostConfig::from_toml(&text, "test").expect("config")
}

/// A scratch area, a runner on it (as [`runner`]) and its workspace.
fn host() -> (Scratch, GateRunner, WorkspaceAnchor) {
    let s = Scratch::new();
    let r = runner(&s);
    let anchor = WorkspaceAnchor::open(&s.ws).expect("workspace");
    (s, r, anchor)
}

fn runner(s: &Scratch) -> GateRunner {
    GateRunner::new(config(s, &common::plugins::plugin_dir(), ""))
}

fn gate(json: &str) -> gatehost::gate::GateSpec {
    parse_gate_file(json).expect("gate").remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_keeps_serving_after_traps_and_bounds() {
    let (_s, r, anchor) = host();
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
    let (_s, r, anchor) = host();
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
    assert_has(&stuck.reason, "timed out");
    assert!(quick.0.passed());
    assert!(
        quick.1 < Duration::from_millis(1000),
        "noop waited {:?} behind the loop",
        quick.1
    );
    assert!(started.elapsed() < Duration::from_secs(4));
}

/// A long-lived host remembers where a named plugin is (no path walk per
/// evaluation), but never judges a stale file: a plugin replaced in its
/// directory is the one that runs next, and a symlink re-pointed into the
/// workspace is refused as unpinned, exactly as on the first run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remembered_named_plugin_is_found_again_when_its_file_changes() {
    let s = Scratch::new();
    let built = common::plugins::plugin_dir();
    let dir = etc_dir(&s, "plugins");
    let r = GateRunner::new(config(&s, &dir, ""));
    let anchor = WorkspaceAnchor::open(&s.ws).expect("workspace");
    let ctx = GateContext::default();
    let g = gate(r#"{"wasm": {"plugin": "probe", "config": {"mode": "panic"}}}"#);

    // 1. `probe` is the noop plugin: it passes, twice (the second run is
    //    served from memory).
    std::fs::copy(built.join("noop.wasm"), dir.join("probe.wasm")).expect("copy");
    for _ in 0..2 {
        let v = r.run_gate(&g, &anchor, &ctx).await;
        assert_eq!(v.outcome, Outcome::Pass, "{v:?}");
    }
    // 2. Replaced (by rename, as an installer would) with the hostile
    //    plugin: its panic is what runs now.
    std::fs::copy(built.join("hostile.wasm"), dir.join("new.wasm")).expect("copy");
    std::fs::rename(dir.join("new.wasm"), dir.join("probe.wasm")).expect("rename");
    let v = r.run_gate(&g, &anchor, &ctx).await;
    assert_eq!(v.outcome, Outcome::Error, "{v:?}");
    assert!(
        v.reason.contains("panic") || v.reason.contains("trap"),
        "{v:?}"
    );
    // 3. A symlink outside the workspace, used once, then re-pointed to a
    //    copy inside the workspace: refused as an unpinned workspace plugin.
    std::fs::copy(built.join("noop.wasm"), s.etc.join("noop-copy.wasm")).expect("copy");
    std::fs::remove_file(dir.join("probe.wasm")).expect("rm");
    std::os::unix::fs::symlink(s.etc.join("noop-copy.wasm"), dir.join("probe.wasm"))
        .expect("symlink");
    let v = r.run_gate(&g, &anchor, &ctx).await;
    assert_eq!(v.outcome, Outcome::Pass, "{v:?}");
    std::fs::copy(built.join("noop.wasm"), s.ws.join("agent.wasm")).expect("copy");
    std::fs::remove_file(dir.join("probe.wasm")).expect("rm");
    std::os::unix::fs::symlink(s.ws.join("agent.wasm"), dir.join("probe.wasm")).expect("symlink");
    let v = r.run_gate(&g, &anchor, &ctx).await;
    assert_eq!(v.outcome, Outcome::Error, "{v:?}");
    assert!(v.reason.contains("inside the workspace"), "{v:?}");
    // 4. Gone: an error naming the plugin, not the remembered file.
    std::fs::remove_file(dir.join("probe.wasm")).expect("rm");
    let v = r.run_gate(&g, &anchor, &ctx).await;
    assert_eq!(v.outcome, Outcome::Error, "{v:?}");
    assert!(v.reason.contains("probe"), "{v:?}");
}

/// A plugin file another host already read, unchanged since (and settled:
/// changed more than two seconds before it was read), is loaded from its
/// remembered digest and the compiled cache without being read again, but
/// never past `[wasm] max_plugin_bytes`; a changed file is read again and
/// checked against the pin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_plugin_file_is_not_read_again_by_the_next_host() {
    let s = Scratch::new();
    let built = common::plugins::plugin_dir();
    let dir = etc_dir(&s, "plugins");
    let plugin = dir.join("probe.wasm");
    std::fs::copy(built.join("noop.wasm"), &plugin).expect("copy");
    let noop_digest = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(std::fs::read(&plugin).expect("read")))
    };
    // Wait until the copy has settled (its ctime is what is compared).
    let copied = Instant::now();
    while copied.elapsed() < Duration::from_millis(2100) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let host = |max_plugin_bytes: u64| {
        GateRunner::one_shot(config(
            &s,
            &dir,
            &format!("max_plugin_bytes = {max_plugin_bytes}\n"),
        ))
    };
    let anchor = WorkspaceAnchor::open(&s.ws).expect("workspace");
    let ctx = GateContext::default();
    let pinned = |digest: &str| {
        gate(&format!(
            r#"{{"wasm": {{"plugin": "probe", "sha256": "{digest}"}}}}"#
        ))
    };
    // 1. The first host reads the file (and records its digest).
    let v = host(64 << 20)
        .run_gate(&pinned(&noop_digest), &anchor, &ctx)
        .await;
    assert_eq!(v.outcome, Outcome::Pass, "{v:?}");
    let size = std::fs::metadata(&plugin).expect("stat").len();
    assert!(
        s.etc
            .join("cache/digests")
            .read_dir()
            .expect("records")
            .count()
            > 0,
        "the first host recorded the digest"
    );
    // 2. The next host runs it from the record (a host whose limit is the
    //    file's size exactly) ...
    let v = host(size)
        .run_gate(&pinned(&noop_digest), &anchor, &ctx)
        .await;
    assert_eq!(v.outcome, Outcome::Pass, "{v:?}");
    // ... and the remembered digest is still checked against the pin.
    let v = host(size)
        .run_gate(&pinned(&"0".repeat(64)), &anchor, &ctx)
        .await;
    assert_eq!(v.outcome, Outcome::Error, "{v:?}");
    assert!(v.reason.contains("sha256"), "{v:?}");
    // ... but a remembered digest is no way around the size limit: a host
    //    that would not read the file does not run it.
    let v = host(size - 1)
        .run_gate(&pinned(&noop_digest), &anchor, &ctx)
        .await;
    assert_eq!(v.outcome, Outcome::Error, "{v:?}");
    assert!(
        v.reason.contains("larger than [wasm] max_plugin_bytes"),
        "{v:?}"
    );
    // 3. Rewritten in place with another plugin: read again (the record
    //    names the old digest, which the pin would admit), and the old pin
    //    refuses it.
    std::fs::write(
        &plugin,
        std::fs::read(built.join("hostile.wasm")).expect("read"),
    )
    .expect("rewrite");
    let v = host(64 << 20)
        .run_gate(&pinned(&noop_digest), &anchor, &ctx)
        .await;
    assert_eq!(v.outcome, Outcome::Error, "{v:?}");
    assert!(v.reason.contains("sha256"), "{v:?}");
}

/// More evaluations at once than the pool has instance slots (64): each
/// holds its instance while its judge call (a half-second process) runs.
/// The ones beyond 64 wait for a slot; none fails to instantiate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_evaluations_than_instance_slots_wait_for_a_slot() {
    let s = Scratch::new();
    std::fs::write(s.ws.join("STYLE.md"), "Be kind.\n").expect("write");
    let r = GateRunner::new(config(
        &s,
        &common::plugins::plugin_dir(),
        "[judge]\nslots = 200\n\
         [judge.adapters.slow]\ncommand = [\"bash\", \"-c\", \"cat >/dev/null; sleep 0.5; echo VERDICT: PASS\"]\n",
    ));
    let anchor = WorkspaceAnchor::open(&s.ws).expect("workspace");
    let ctx = GateContext {
        diff: Some(
            "diff --git a/src/lib.rs b/src/lib.rs\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -0,0 +1 @@\n+fn good() {}\n"
                .into(),
        ),
        ..GateContext::default()
    };
    let g = gate(
        r#"{"wasm": {"plugin": "style-review", "config": {"guide": "STYLE.md"}, "timeoutMs": 60000, "judge": {"adapter": "slow", "timeoutMs": 60000}}}"#,
    );
    // Compiled once before the crowd arrives.
    assert_eq!(r.run_gate(&g, &anchor, &ctx).await.outcome, Outcome::Pass);
    let crowd = (0..100).map(|_| r.run_gate(&g, &anchor, &ctx));
    let verdicts = futures::future::join_all(crowd).await;
    for v in &verdicts {
        assert_eq!(v.outcome, Outcome::Pass, "{v:?}");
    }
}

/// Spare instances (made ahead, after an evaluation) are fresh and carry
/// nothing between evaluations: the stateful plugin fails if its instance
/// is called twice, and reports the diffs it is given through the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_evaluation_gets_an_instance_of_its_own_with_its_own_context() {
    let (_s, r, anchor) = host();
    let stateful = gate(r#"{"wasm": {"plugin": "stateful"}}"#);
    for i in 0..12 {
        let path = format!("src/f{i}.rs");
        let body = "+x\n".repeat(i + 1);
        let diff = format!(
            "diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -0,0 +1,{} @@\n{body}",
            i + 1
        );
        let ctx = GateContext {
            diff: Some(diff),
            ..Default::default()
        };
        let v = r.run_gate(&stateful, &anchor, &ctx).await;
        assert_eq!(v.outcome, Outcome::Pass, "evaluation {i}: {v:?}");
        assert!(
            v.reason.starts_with("first call; "),
            "evaluation {i}: {v:?}"
        );
        assert!(v.reason.contains(&format!("{path}: ")), "{v:?}");
        assert!(!v.reason.contains("no diff"), "{v:?}");
        // Time for the next spare to be made in the background.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A spare is made under the bounds of the evaluation before it; a gate
/// asking for other bounds gets an instance made under its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spare_made_under_other_bounds_is_not_used() {
    let (_s, r, anchor) = host();
    let ctx = GateContext::default();
    let noop = gate(r#"{"wasm": {"plugin": "noop"}}"#);
    let starved = gate(r#"{"wasm": {"plugin": "noop", "fuel": 100}}"#);
    for round in 0..3 {
        for _ in 0..3 {
            let v = r.run_gate(&noop, &anchor, &ctx).await;
            assert_eq!(v.outcome, Outcome::Pass, "{v:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let v = r.run_gate(&starved, &anchor, &ctx).await;
        assert_eq!(v.outcome, Outcome::Error, "round {round}: {v:?}");
        assert!(v.reason.contains("fuel"), "round {round}: {v:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
