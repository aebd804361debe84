//! How long a dead host's policies wait before another host has them
//! (issue 51's goal: at most lease + grace + 1 s), as a whole process, on
//! the throwaway cluster of `scripts/pg-cluster.sh`:
//!
//! ```sh
//! bash scripts/pg-cluster.sh start > /tmp/pg.env && set -a && . /tmp/pg.env && set +a
//! cargo bench -p gatehost --bench takeover   # -- --rounds N --lease-ms N --grace-ms N
//! bash scripts/pg-cluster.sh stop "$GATEHOST_TEST_PG_DIR"
//! ```
//!
//! Each round: a fresh database, two real daemons as hosts `alpha` and
//! `beta` with `[store] shared_workspaces = true`, a watching policy on
//! alpha; alpha SIGKILLed (by the bench, right after it renewed its lease,
//! which its `GET /v1/hosts` heartbeat time shows), then the time until
//! beta's `GET /v1/hosts` says alpha is `taken` and the policy is beta's
//! (its `host:taken-over` event stored). Printed against lease + grace
//! (the baseline: the least any design waits) and the goal.

mod support;

use gatehost::store::pg_testdb::TestDb;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::serve::{Http, config, start_env};

fn host<'a>(hosts: &'a Value, id: &str) -> &'a Value {
    hosts["hosts"]
        .as_array()
        .and_then(|a| a.iter().find(|h| h["id"] == id))
        .unwrap_or(&Value::Null)
}

fn main() {
    let rounds = support::arg("--rounds", 5);
    let lease = support::arg("--lease-ms", 3000) as u64;
    let grace = support::arg("--grace-ms", 1000) as u64;
    let http = Http::new();
    let mut took = Vec::new();
    for round in 0..rounds {
        let Some(db) = TestDb::new(&format!("bench_takeover_{round}")) else {
            eprintln!(
                "no PostgreSQL cluster (GATEHOST_TEST_PG_URL): start one with scripts/pg-cluster.sh"
            );
            std::process::exit(2);
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let roots = dir.path().join("roots");
        let ws = roots.join("ws");
        std::fs::create_dir_all(&ws).expect("ws");
        let cfg = config(
            dir.path(),
            "c",
            &roots,
            Some(&db),
            &format!("lease = \"{lease}ms\"\ngrace = \"{grace}ms\"\nshared_workspaces = true\n"),
        );
        let (mut alpha, _) = start_env(
            &dir.path().join("a"),
            &cfg,
            "127.0.0.1:0",
            &[("GATEHOST_HOST_ID", "alpha")],
        );
        let (beta, _) = start_env(
            &dir.path().join("b"),
            &cfg,
            "127.0.0.1:0",
            &[("GATEHOST_HOST_ID", "beta")],
        );
        http.call(
            &alpha,
            reqwest::Method::POST,
            "/v1/sessions",
            Some(json!({"id": "bench:s", "cwd": ws})),
        );
        let pid = http.call(
            &alpha,
            reqwest::Method::POST,
            "/v1/policies",
            Some(json!({"sessionId": "bench:s", "gate": {"command": "true"}, "watchFrom": "now"})),
        )["id"]
            .as_str()
            .expect("policy id")
            .to_string();
        // Killed right after a renewal: its lease then runs whole.
        let seen = host(
            &http.call(&beta, reqwest::Method::GET, "/v1/hosts", None),
            "alpha",
        )["heartbeatAt"]
            .clone();
        while host(
            &http.call(&beta, reqwest::Method::GET, "/v1/hosts", None),
            "alpha",
        )["heartbeatAt"]
            == seen
        {
            std::thread::sleep(Duration::from_millis(2));
        }
        alpha.child.kill().expect("SIGKILL alpha");
        let t0 = Instant::now();
        let _ = alpha.child.wait();
        loop {
            let hosts = http.call(&beta, reqwest::Method::GET, "/v1/hosts", None);
            if host(&hosts, "alpha")["state"] == "taken" {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "never taken over: {hosts}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        took.push(t0.elapsed());
        let events = http.call(
            &beta,
            reqwest::Method::GET,
            "/v1/events?types=host:taken-over",
            None,
        );
        let moved = events["events"]
            .as_array()
            .and_then(|e| e.first())
            .map(|e| e["payload"]["policies"].clone());
        assert_eq!(moved, Some(json!([pid])), "{events}");
        drop((alpha, beta));
    }
    let base = Duration::from_millis(lease + grace);
    let p50 = support::quantile(&took, 0.5);
    let max = took.iter().max().copied().unwrap_or_default();
    println!(
        "## takeover of a dead host's policies, lease {lease} ms + grace {grace} ms, {rounds} rounds\n"
    );
    println!("| | time | / (lease + grace) |");
    println!("| --- | --- | --- |");
    println!(
        "| lease + grace (baseline) | {} ms | 1.00x |",
        base.as_millis()
    );
    for (name, d) in [("SIGKILL → taken, p50", p50), ("SIGKILL → taken, max", max)] {
        println!(
            "| {name} | {} ms | {:.2}x |",
            d.as_millis(),
            d.as_secs_f64() / base.as_secs_f64()
        );
    }
    let over = max.saturating_sub(base);
    println!(
        "\nBeyond lease + grace: at most {} ms (goal ≤ 1000 ms: {})",
        over.as_millis(),
        if over <= Duration::from_secs(1) {
            "met"
        } else {
            "NOT met"
        }
    );
}
