//! Containment without cgroups: process groups plus the host as child
//! subreaper, sweeping what re-parents to it. And containment by cgroups
//! the way the host takes where `clone3` into a cgroup is refused: it steps
//! into the gate's cgroup for the spawn. This binary runs only supervised
//! processes, so the sweep cannot take another test's child.

use crate::common;
use common::*;
use gatehost::anchor::WorkspaceAnchor;
use gatehost::config::HostConfig;
use gatehost::gate::{GateContext, GateRunner, parse_gate_file};
use gatehost::supervise::Supervisor;
use gatehost::verdict::Outcome;
use std::time::{Duration, Instant};

fn runner() -> GateRunner {
    runner_with(Supervisor::without_cgroups())
}

fn runner_with(supervisor: Supervisor) -> GateRunner {
    let config = HostConfig::from_toml(&allow_config(&[]), "test").expect("config");
    GateRunner::with_supervisor(config, supervisor)
}

async fn run_script(
    script: &str,
    marker: &str,
    timeout_ms: u64,
) -> (gatehost::verdict::Verdict, Duration) {
    run_script_with(&runner(), script, marker, timeout_ms).await
}

async fn run_script_with(
    runner: &GateRunner,
    script: &str,
    marker: &str,
    timeout_ms: u64,
) -> (gatehost::verdict::Verdict, Duration) {
    let s = Scratch::new();
    let anchor = WorkspaceAnchor::open(&s.ws).expect("workspace");
    let gate = parse_gate_file(&script_gate(script, &[marker], timeout_ms))
        .expect("gate")
        .remove(0);
    let start = Instant::now();
    let v = runner
        .run_gate(&gate, &anchor, &GateContext::default())
        .await;
    (v, start.elapsed())
}

/// Fails unless the gate passed within 2 s and nothing carrying `marker`
/// is left.
#[track_caller]
fn assert_swept(v: &gatehost::verdict::Verdict, took: Duration, marker: &str) {
    assert_eq!(v.outcome, Outcome::Pass, "{v:?}");
    assert!(took < Duration::from_secs(2), "took {took:?}");
    assert_no_survivors(marker);
}

#[tokio::test]
async fn without_cgroups_a_setsid_descendant_is_still_swept() {
    assert_eq!(Supervisor::without_cgroups().containment(), "process-group");
    let m = marker("fb-setsid");
    let (v, took) = run_script("gates/setsid-escape.sh", &m, 10_000).await;
    assert_swept(&v, took, &m);
}

#[tokio::test]
async fn without_cgroups_a_double_forked_orphan_is_swept() {
    let m = marker("fb-orphan");
    let (v, took) = run_script("gates/double-fork-orphan.sh", &m, 10_000).await;
    assert_swept(&v, took, &m);
}

#[tokio::test]
async fn without_cgroups_a_hang_that_ignores_sigterm_is_killed() {
    let m = marker("fb-noterm");
    let (v, took) = run_script("gates/ignore-term.sh", &m, 300).await;
    assert_eq!(v.outcome, Outcome::Fail);
    assert_starts(&v.reason, "timed out after 300 ms");
    assert!(
        took < Duration::from_millis(300 + 2000 + 1000),
        "took {took:?}"
    );
    assert_no_survivors(&m);
}

#[tokio::test]
async fn moving_into_cgroups_a_setsid_descendant_is_killed_with_its_cgroup() {
    let runner = runner_with(Supervisor::moving_into_cgroups());
    let m = marker("mv-setsid");
    let (v, took) = run_script_with(&runner, "gates/setsid-escape.sh", &m, 10_000).await;
    // Still moving into cgroups after the run: entering one did not fail
    // (which would have left only process groups).
    assert_eq!(runner.supervisor().cgroup_entry(), "moving");
    assert_swept(&v, took, &m);
}

#[tokio::test]
async fn moving_into_cgroups_a_hang_that_ignores_sigterm_is_killed() {
    let m = marker("mv-noterm");
    let runner = runner_with(Supervisor::moving_into_cgroups());
    let (v, _) = run_script_with(&runner, "gates/ignore-term.sh", &m, 300).await;
    assert_eq!(runner.supervisor().cgroup_entry(), "moving");
    assert_eq!(v.outcome, Outcome::Fail);
    assert_starts(&v.reason, "timed out after 300 ms");
    assert_no_survivors(&m);
}
