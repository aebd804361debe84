//! What a review chain costs per cycle beyond its gates (issue 27), on
//! the real `gatehost serve` over loopback.
//!
//! Run: `cargo bench -p gatehost --bench chain` (options: `-- --cycles N`,
//! at most 60: one policy's review cycles, under `max_chain_depth` 64).
//!
//! A policy with the gate `true` and a review whose reviewer is a judge
//! adapter that always blocks (a shell script printing `VERDICT: FAIL`);
//! its author is a registered session. One cycle: the author's `turn-end`
//! report, then the gate, the review, the `review:repair` nudge, until the
//! policy watches again (the clock stops when a long-poll of the events
//! sees the repair and the policy is `watching`). The baseline, in the same
//! cycle: the same gate and the same judge run in process by `GateRunner`
//! (what the gates cost by themselves). The overhead is the difference of
//! the medians.

mod support;

use gatehost::anchor::WorkspaceAnchor;
use gatehost::config::HostConfig;
use gatehost::gate::{GateContext, GateRunner, parse_gate_file};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};
use support::serve::{Daemon, Http, start};

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

const REVIEWER: &str = "Review chain-bench: ship it only if it is complete.";

/// The author's turn-end, then the wait for the next repair (after
/// `cursor`) and for the policy watching again; the new cursor.
fn one_cycle(http: &Http, d: &Daemon, pid: &str, cursor: i64) -> i64 {
    http.call(
        d,
        reqwest::Method::POST,
        "/v1/sessions/author/report",
        Some(json!({"kind": "turn-end", "message": "done"})),
    );
    let events = http.call(
        d,
        reqwest::Method::GET,
        &format!("/v1/events?policy={pid}&types=review:repair&since={cursor}&wait=30s"),
        None,
    );
    let next = events["events"]
        .as_array()
        .and_then(|e| e.last())
        .and_then(|e| e["cursor"].as_i64())
        .unwrap_or_else(|| panic!("no review:repair after {cursor}: {events}"));
    loop {
        let p = http.call(
            d,
            reqwest::Method::GET,
            &format!("/v1/policies/{pid}"),
            None,
        );
        if p["status"] == "watching" {
            return next;
        }
        assert!(
            p["status"] == "nudging" || p["status"] == "reviewing",
            "policy {pid}: {p}"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn main() {
    let cycles = support::arg("--cycles", 60).clamp(1, 60);
    let dir = tempfile::tempdir().expect("tempdir");
    // The workspace apart from the host's own places (its data directory
    // and configuration may not lie under a workspace root).
    let roots = dir.path().join("roots");
    let ws = roots.join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::write(ws.join("work.txt"), "chain-bench draft\n").expect("write");
    let git = Path::new("git");
    support::git(git, &ws, &["init", "-q"]);
    support::git(git, &ws, &["add", "-A"]);
    support::git(
        git,
        &ws,
        &[
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@example.com",
            "commit",
            "-qm",
            "start",
        ],
    );
    std::fs::write(ws.join("work.txt"), "chain-bench draft, changed\n").expect("change");
    let judge = dir.path().join("judge.sh");
    std::fs::write(
        &judge,
        "cat > /dev/null\necho 'finding: it lacks a test'\necho 'VERDICT: FAIL'\n",
    )
    .expect("judge");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[shell]\nallow = [\"true\"]\n[daemon]\nworkspace_roots = [{:?}]\nmax_chain_depth = 64\n[judge.adapters.j]\ncommand = [\"bash\", {:?}]\n",
            roots.display().to_string(),
            judge.display().to_string()
        ),
    )
    .expect("config");
    let data = dir.path().join("data");
    let (d, _) = start(&data, &config, "127.0.0.1:0");
    let http = &Http::new();
    http.call(
        &d,
        reqwest::Method::POST,
        "/v1/sessions",
        Some(json!({"id": "author", "cwd": ws})),
    );

    // The gates by themselves, in process.
    let runner = GateRunner::new(HostConfig::load(Some(&config)).expect("config"));
    let anchor = WorkspaceAnchor::open(&ws).expect("anchor");
    let gate = parse_gate_file(r#"{"command": "true"}"#).expect("gate");
    let reviewer =
        parse_gate_file(&json!({"judge": {"adapter": "j", "prompt": REVIEWER}}).to_string())
            .expect("judge");
    let rt = tokio::runtime::Runtime::new().expect("rt");

    let warm = 3;
    let p = http.call(
        &d,
        reqwest::Method::POST,
        "/v1/policies",
        Some(json!({
            "sessionId": "author", "watchFrom": "now",
            "gate": {"command": "true"},
            "review": {"reviewer": {"judge": {"adapter": "j", "prompt": REVIEWER}},
                       "maxCycles": cycles + warm + 1},
        })),
    );
    let pid = p["policyId"].as_str().expect("id").to_string();
    let mut cursor = http.call(&d, reqwest::Method::GET, "/v1/health", None)["cursor"]
        .as_i64()
        .unwrap_or(0);
    let (mut cycle_t, mut gates_t) = (Vec::new(), Vec::new());
    for i in 0..cycles + warm {
        let t0 = Instant::now();
        cursor = one_cycle(http, &d, &pid, cursor);
        let t_cycle = t0.elapsed();
        let t1 = Instant::now();
        let g = rt.block_on(runner.run_gates(&gate, &anchor, &GateContext::default()));
        let j = rt.block_on(runner.run_gates(&reviewer, &anchor, &GateContext::default()));
        let t_gates = t1.elapsed();
        assert!(g.outcome == gatehost::verdict::Outcome::Pass);
        assert!(j.outcome == gatehost::verdict::Outcome::Fail, "{j:?}");
        if i >= warm {
            cycle_t.push(t_cycle);
            gates_t.push(t_gates);
        }
    }
    let c50 = support::quantile(&cycle_t, 0.5);
    let c90 = support::quantile(&cycle_t, 0.9);
    let g50 = support::quantile(&gates_t, 0.5);
    let g90 = support::quantile(&gates_t, 0.9);
    println!(
        "## a review chain's cycle, {} cycles of one policy\n",
        cycle_t.len()
    );
    println!("| | p50 | p90 |");
    println!("| --- | --- | --- |");
    println!(
        "| gate `true` + judge, in process (baseline) | {} | {} |",
        ms(g50),
        ms(g90)
    );
    println!(
        "| one chain cycle through the daemon | {} | {} |",
        ms(c50),
        ms(c90)
    );
    println!(
        "\noverhead per cycle beyond its gates (p50): {:+.2} ms ({:.2}x the gates)",
        (c50.as_secs_f64() - g50.as_secs_f64()) * 1e3,
        c50.as_secs_f64() / g50.as_secs_f64()
    );
}
