//! PostgreSQL itself restarted (`pg_ctl stop -m immediate`, then start)
//! under load with three hosts sharing it (issue 51): every host says
//! degraded while it is down and ok after; each host's turns settle with
//! exactly one verdict, on that host; the three read the same event log,
//! its cursors contiguous; no host lost its claim (an outage shorter than
//! the lease: the same fencing numbers, nobody stale); no gate left.

use super::load::{OwnCluster, Turns, drive_as, health_until, is_ok, read_bus};
use super::restart::{SETTLE, turns_beyond};
use super::workspace_on;
use crate::common::daemon::{Daemon, script_gate_json};
use crate::common::{assert_no_survivors, marker};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

const HOSTS: [&str; 3] = ["alpha", "beta", "gamma"];

/// The hosts `d` lists: `(id, fence, state)`.
fn claims(d: &Daemon) -> Vec<(String, i64, String)> {
    d.agent_ok("GET", "/v1/hosts", None)["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .map(|h| {
            (
                h["id"].as_str().expect("id").to_string(),
                h["fence"].as_i64().expect("fence"),
                h["state"].as_str().expect("state").to_string(),
            )
        })
        .collect()
}

#[test]
fn three_hosts_survive_an_immediate_shutdown_of_postgres_under_load() {
    let Some(cluster) = OwnCluster::start("store::restart_fleet::immediate") else {
        return;
    };
    let (s, cfg) = workspace_on(cluster.url(), &cluster.password_file(), &[]);
    let daemons: Vec<Daemon> = HOSTS
        .iter()
        .map(|h| Daemon::start_with_env(&s.etc.join(h), &cfg, &[("GATEHOST_HOST_ID", h)]))
        .collect();
    let sessions: Vec<Vec<String>> = HOSTS
        .iter()
        .map(|h| (1..=2).map(|i| format!("{h}-{i}")).collect())
        .collect();
    for (d, ids) in daemons.iter().zip(&sessions) {
        for sid in ids {
            d.register(sid, &s.ws);
        }
    }
    let before = claims(&daemons[0]);
    assert_eq!(before.len(), 3, "{before:?}");
    let m = marker("pg-restart-fleet");
    let gate = script_gate_json("gates/sleep-then-pass.sh", &[&m, "0.3"], 30_000);
    let stop_load = AtomicBool::new(false);
    let stop_reader = AtomicBool::new(false);
    let refused = AtomicUsize::new(0);
    let counts: Vec<AtomicUsize> = HOSTS.iter().map(|_| AtomicUsize::new(0)).collect();
    let (turns, seen): (Vec<Turns>, Vec<i64>) = std::thread::scope(|sc| {
        let loads: Vec<_> = daemons
            .iter()
            .zip(&sessions)
            .zip(HOSTS)
            .zip(&counts)
            .map(|(((d, ids), host), count)| {
                let (gate, stop, refused) = (&gate, &stop_load, &refused);
                sc.spawn(move || {
                    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
                    drive_as(d, &format!("{host}-"), gate, &ids, stop, refused, count)
                })
            })
            .collect();
        let reader = sc.spawn(|| read_bus(&daemons[1], &stop_reader));
        for c in &counts {
            turns_beyond(c, 0, 3);
        }
        cluster.ctl(&["stop", "-w", "-m", "immediate"]);
        for d in &daemons {
            health_until(d, "degraded", |code, _| code == 503);
        }
        cluster.ctl(&["start", "-w"]);
        for d in &daemons {
            health_until(d, "ok", is_ok);
        }
        let after: Vec<usize> = counts.iter().map(|c| c.load(Ordering::SeqCst)).collect();
        for (c, from) in counts.iter().zip(after) {
            turns_beyond(c, from, 3);
        }
        stop_load.store(true, Ordering::SeqCst);
        let turns: Vec<Turns> = loads
            .into_iter()
            .map(|l| l.join().expect("a load"))
            .collect();
        for (d, t) in daemons.iter().zip(&turns) {
            for id in &t.policies {
                d.wait_status(id, "done", SETTLE);
            }
        }
        stop_reader.store(true, Ordering::SeqCst);
        (turns, reader.join().expect("the reader"))
    });
    // One log for all: the same events, in the same order, on every host;
    // its cursors contiguous, as the reader was given them.
    let logs: Vec<Vec<Value>> = daemons.iter().map(|d| d.all_events("")).collect();
    let cursors = |events: &[Value]| -> Vec<i64> {
        events
            .iter()
            .map(|e| e["cursor"].as_i64().expect("cursor"))
            .collect()
    };
    let all = cursors(&logs[0]);
    assert!(all.windows(2).all(|w| w[1] == w[0] + 1), "{all:?}");
    assert_eq!(cursors(&logs[1]), all);
    assert_eq!(cursors(&logs[2]), all);
    assert_eq!(seen, all, "what the reader saw, against the log");
    // Exactly one verdict per turn, a pass, each settled by its own host.
    let mut verdicts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in &logs[0] {
        let kind = e["type"].as_str().unwrap_or("");
        if matches!(kind, "policy:passed" | "policy:failed" | "policy:blocked") {
            verdicts
                .entry(e["policyId"].as_str().unwrap_or("").to_string())
                .or_default()
                .push(kind.to_string());
        }
    }
    let mut total = 0;
    for (d, t) in daemons.iter().zip(&turns) {
        assert!(t.policies.len() >= 6, "{} turns", t.policies.len());
        total += t.policies.len();
        for id in &t.policies {
            assert_eq!(
                verdicts.get(id).map(Vec::as_slice),
                Some(&["policy:passed".to_string()][..]),
                "policy {id}: {:?}",
                d.policy_events(id)
            );
        }
    }
    assert_eq!(verdicts.len(), total, "{verdicts:?}");
    // No host lost its claim, none was found dead.
    assert_eq!(claims(&daemons[2]), before);
    assert!(
        !logs[0].iter().any(|e| e["type"] == "host:stale"),
        "a host was said stale"
    );
    for mut d in daemons {
        assert_eq!(d.stop(), Some(0), "{}", d.log());
    }
    assert_no_survivors(&m);
    cluster.stop();
}
