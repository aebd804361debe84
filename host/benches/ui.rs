//! What the operator's page waits for (issue 28), on the real `gatehost
//! serve` over loopback.
//!
//! Run: `cargo bench -p gatehost --bench ui` (options: `-- --policies N
//! --rounds N`).
//!
//! - The inbox's first response with `--policies` (10,000) in the store
//!   (written straight into it: settled ones and every 37th `blocked`, the
//!   inbox's "waiting for you"): the three reads the page makes when it
//!   opens (`/v1/policies` of the waiting statuses, the newest page, the
//!   sessions), timed together, against `GET /v1/health` in the same round.
//! - An event reaching an open page: a client holds `/v1/events/stream`
//!   (what the page's `EventSource` holds); per round a session's
//!   `turn-end` report is stored (its POST answered), and the clock runs
//!   from that answer to the event's arrival on the stream. The browser's
//!   own handling of the event is not in it.

mod support;

use serde_json::json;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use support::serve::{Daemon, Http, start};

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// Holds `/v1/events/stream` (session `s`'s turn-ends) on its own thread
/// and runtime, sending the arrival time of each event's `id:` line.
fn follow(d: &Daemon) -> mpsc::Receiver<Instant> {
    let (tx, rx) = mpsc::channel();
    let url = format!(
        "{}/v1/events/stream?session=s&types=session:turn-end",
        d.url.trim_end_matches('/')
    );
    let token = d.operator.clone();
    let (up_tx, up_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("rt");
        rt.block_on(async move {
            let client = reqwest::Client::new();
            let mut r = client
                .get(&url)
                .bearer_auth(&token)
                .header("accept", "text/event-stream")
                .send()
                .await
                .expect("stream");
            assert!(r.status().is_success(), "{}", r.status());
            let _ = up_tx.send(());
            let mut buf = String::new();
            while let Ok(Some(chunk)) = r.chunk().await {
                let at = Instant::now();
                buf.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = buf.find("\n\n") {
                    let frame: String = buf.drain(..end + 2).collect();
                    if frame.lines().any(|l| l.starts_with("id:")) && tx.send(at).is_err() {
                        return;
                    }
                }
            }
        });
    });
    up_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the stream opened");
    rx
}

fn main() {
    let policies = support::arg("--policies", 10_000);
    let rounds = support::arg("--rounds", 200);
    let dir = tempfile::tempdir().expect("tempdir");
    let roots = dir.path().join("roots");
    let ws = roots.join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\nworkspace_roots = [{:?}]\n",
            roots.display().to_string()
        ),
    )
    .expect("config");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("data");
    support::settled_policies(&data, "old", policies, 37);
    let (d, _) = start(&data, &config, "127.0.0.1:0");
    let http = Http::new();
    let get = |path: &str| http.call(&d, reqwest::Method::GET, path, None);

    let (mut inbox, mut health) = (Vec::new(), Vec::new());
    let mut waiting = 0;
    for i in 0..rounds + 5 {
        let t0 = Instant::now();
        get("/v1/health");
        let t_health = t0.elapsed();
        let t1 = Instant::now();
        let w = get("/v1/policies?order=newest&status=awaiting-ack,blocked");
        get("/v1/policies?order=newest&limit=50");
        get("/v1/sessions?limit=50");
        let t_inbox = t1.elapsed();
        waiting = w["policies"].as_array().map_or(0, Vec::len);
        if i >= 5 {
            inbox.push(t_inbox);
            health.push(t_health);
        }
    }
    assert!(waiting > 0, "the inbox found no blocked policy");
    println!("## the inbox's first response, {policies} policies in the store ({rounds} rounds)\n");
    println!("| | p50 | p90 |");
    println!("| --- | --- | --- |");
    let row = |name: &str, v: &[Duration]| {
        println!(
            "| {name} | {} | {} |",
            ms(support::quantile(v, 0.5)),
            ms(support::quantile(v, 0.9))
        );
    };
    row("`GET /v1/health` (baseline)", &health);
    row("the inbox's three reads", &inbox);

    http.call(
        &d,
        reqwest::Method::POST,
        "/v1/sessions",
        Some(json!({"id": "s", "cwd": ws})),
    );
    let arrivals = follow(&d);
    let (mut to_page, mut post) = (Vec::new(), Vec::new());
    for i in 0..rounds + 5 {
        let t0 = Instant::now();
        http.call(
            &d,
            reqwest::Method::POST,
            "/v1/sessions/s/report",
            Some(json!({"kind": "turn-end", "message": "done"})),
        );
        let stored = Instant::now();
        let at = arrivals
            .recv_timeout(Duration::from_secs(10))
            .expect("the event on the stream");
        if i >= 5 {
            post.push(stored - t0);
            to_page.push(at.saturating_duration_since(stored));
        }
    }
    println!("\n## an event reaching an open stream ({rounds} rounds)\n");
    println!("| | p50 | p90 |");
    println!("| --- | --- | --- |");
    row("`POST …/report` answered (stored; baseline)", &post);
    row("stored → on the stream", &to_page);
}
