//! PostgreSQL itself restarted under load (issue 51: "hosts reconnect,
//! nothing lost, health says degraded meanwhile"): a daemon on a cluster
//! of the test's own (these tests stop the server: the cluster the other
//! tests share is never touched), a steady load of turns with shell gates
//! (attaches and turn-ends retried when answered 503), and the server
//! stopped with `pg_ctl stop -m fast` (its clients told, its transactions
//! rolled back) or `-m immediate` (killed: crash recovery at the start),
//! then started again. The stop and the start are two steps (a restart
//! with the outage held open between them) so that the test sees the
//! outage for certain: health degraded, writes 503, the load refused; then
//! health ok, every turn's policy done with exactly one verdict, the
//! bus's cursors contiguous to a reader that read all along, the outage
//! logged once (its start and its end), no gate process left.

use super::load::{
    OwnCluster, Turns, assert_degraded, drive, health, health_until, is_ok, lines_with, read_bus,
    retrying,
};
use super::workspace_on;
use crate::common::daemon::{Daemon, script_gate_json, wait_started};
use crate::common::{assert_no_survivors, marker};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub(super) const SETTLE: Duration = Duration::from_secs(120);

/// Waits until `n` turns are stored beyond `from`.
pub(super) fn turns_beyond(turns: &AtomicUsize, from: usize, n: usize) {
    let deadline = Instant::now() + SETTLE;
    while turns.load(Ordering::SeqCst) < from + n {
        assert!(Instant::now() < deadline, "the load stalled");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn survives_a_restart(mode: &str) {
    let test = format!("store::restart::{mode}");
    let Some(cluster) = OwnCluster::start(&test) else {
        return;
    };
    let (s, cfg) = workspace_on(cluster.url(), &cluster.password_file(), &[]);
    let mut d = Daemon::start(&s.etc.join("data"), &cfg);
    let sessions = ["a", "b", "c"];
    for sid in sessions {
        d.register(sid, &s.ws);
    }
    let m = marker("pg-restart");
    // Each gate sleeps under the marker: some run when the server stops.
    let gate = script_gate_json("gates/sleep-then-pass.sh", &[&m, "0.3"], 30_000);
    let (stop_load, stop_reader) = (AtomicBool::new(false), AtomicBool::new(false));
    let (refused, turns) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let (Turns { policies }, seen) = std::thread::scope(|sc| {
        let load = sc.spawn(|| drive(&d, &gate, &sessions, &stop_load, &refused, &turns));
        let reader = sc.spawn(|| read_bus(&d, &stop_reader));
        turns_beyond(&turns, 0, 6);
        // A gate runs: the server stops mid-gate.
        wait_started(&m, SETTLE);
        cluster.ctl(&["stop", "-w", "-m", mode]);
        let v = health_until(&d, "degraded", |code, _| code == 503);
        assert_degraded(503, &v);
        // A write is refused, whole: 503 with the API's code.
        let probe = json!({"id": "probe", "cwd": s.ws});
        let (code, v) = d
            .http_try("POST", "/v1/sessions", Some(&d.agent), Some(probe.clone()))
            .expect("the daemon answers");
        assert_eq!(code, 503, "{v}");
        assert_eq!(v["error"]["code"], "store-unavailable", "{v}");
        // The load is refused too (and retries).
        let deadline = Instant::now() + SETTLE;
        while refused.load(Ordering::SeqCst) == 0 {
            assert!(Instant::now() < deadline, "the load was never refused");
            std::thread::sleep(Duration::from_millis(20));
        }
        let (code, v) = health(&d);
        assert_degraded(code, &v);
        cluster.ctl(&["start", "-w"]);
        health_until(&d, "ok", is_ok);
        retrying("register after the outage", 200, &refused, || {
            d.http_try("POST", "/v1/sessions", Some(&d.agent), Some(probe.clone()))
        });
        // The load goes on after it.
        let after = turns.load(Ordering::SeqCst);
        turns_beyond(&turns, after, 6);
        stop_load.store(true, Ordering::SeqCst);
        let turns = load.join().expect("the load");
        for id in &turns.policies {
            d.wait_status(id, "done", SETTLE);
        }
        stop_reader.store(true, Ordering::SeqCst);
        (turns, reader.join().expect("the reader"))
    });
    assert!(policies.len() >= 12, "{} turns", policies.len());
    // Exactly one verdict per turn, and only passes.
    let events = d.all_events("");
    let mut verdicts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in &events {
        let kind = e["type"].as_str().unwrap_or("");
        if matches!(kind, "policy:passed" | "policy:failed" | "policy:blocked") {
            verdicts
                .entry(e["policyId"].as_str().unwrap_or("").to_string())
                .or_default()
                .push(kind.to_string());
        }
    }
    for id in &policies {
        assert_eq!(
            verdicts.get(id).map(Vec::as_slice),
            Some(&["policy:passed".to_string()][..]),
            "policy {id}: {:?}",
            d.policy_events(id)
        );
    }
    assert_eq!(verdicts.len(), policies.len(), "{verdicts:?}");
    // The reader was given every cursor, in order, none skipped: the
    // same as the whole log read after.
    let cursors: Vec<i64> = events
        .iter()
        .map(|e| e["cursor"].as_i64().expect("cursor"))
        .collect();
    assert!(cursors.windows(2).all(|w| w[1] == w[0] + 1), "{cursors:?}");
    assert_eq!(seen, cursors, "what the reader saw, against the log");
    // The outage was logged once: its start and its end.
    let log = d.log();
    assert_eq!(lines_with(&log, "the store is unavailable"), 1, "{log}");
    assert_eq!(lines_with(&log, "the store answers again"), 1, "{log}");
    let (code, v): (u16, Value) = health(&d);
    assert!(is_ok(code, &v), "{v}");
    d.stop();
    assert_no_survivors(&m);
    cluster.stop();
}

#[test]
fn a_daemon_survives_a_fast_shutdown_of_postgres_under_load() {
    survives_a_restart("fast");
}

#[test]
fn a_daemon_survives_an_immediate_shutdown_of_postgres_under_load() {
    survives_a_restart("immediate");
}
