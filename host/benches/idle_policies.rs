//! What a daemon holding many watching policies costs at start and idle
//! (issue 48, item 11): a store holding N `watching` policies (10,000 and
//! 100,000 by default, 100 to a live session, each with its
//! `policy:attached` event), written straight into the store, then the real
//! `gatehost serve` started on a copy of it.
//!
//! Run: `cargo bench -p gatehost --bench idle_policies` (options: `--
//! --policies 10000,100000 --runs N --seconds N --health N --gatehost PATH
//! --before PATH`; `--gatehost`: the binary measured, this build's by
//! default; `--before`: another `gatehost` binary measured in the same runs,
//! alternating).
//!
//! Per daemon: the restart (from the spawn to the first `GET /v1/health`
//! answered: the store opened and checked, recovery, listening), CPU time
//! per second (every thread's schedstat) and VmRSS (at the end, and the
//! highest sampled each second) over `--seconds` idle, then `--health`
//! `GET /v1/health` calls 50 ms apart (each timed; several sweeps fall
//! among them). After it stops, every policy must still be `watching`
//! (none blocked as damaged: the rows are what the daemon writes).

mod support;

use support::serve::{Daemon, Http, start_program};

use gatehost::store::{Store, now_ms};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Policies to a session.
const PER_SESSION: usize = 100;

/// `--NAME a,b,…` from the command line, else `default`.
fn list(name: &str, default: &[usize]) -> Vec<usize> {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .map(|l| l.split(',').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

fn path_arg(name: &str) -> Option<PathBuf> {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .map(PathBuf::from)
}

/// Writes `n` watching policies on `n / PER_SESSION` live sessions (and
/// their members and `policy:attached` events) into a new store in `dir`.
fn fill(dir: &Path, n: usize) {
    let now = now_ms();
    let sessions = n.div_ceil(PER_SESSION).max(1);
    support::live_sessions(&Store::open(dir).expect("store"), sessions);
    let mut c = support::seed_connection(dir);
    for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
        let tx = c.transaction().expect("begin");
        {
            let mut policy = tx.prepare_cached(
                "INSERT INTO policies(id, seq, spec, status, sessions, pending, watch_after, created_at, updated_at)
                 VALUES(?1, ?2, ?3, 'watching', ?4, '[]', 0, ?5, ?5)",
            ).expect("prepare");
            let mut member = tx
                .prepare_cached("INSERT INTO policy_members(session_id, policy_id) VALUES(?1, ?2)")
                .expect("prepare");
            let mut event = tx.prepare_cached(
                "INSERT INTO events(at, type, session_id, policy_id, payload) VALUES(?1, 'policy:attached', ?2, ?3, ?4)",
            ).expect("prepare");
            for &i in chunk {
                let (id, session) = (format!("pol_{i:032}"), format!("s{}", i / PER_SESSION));
                let spec = json!({"sessionId": session, "sessionIds": [session],
                    "gate": {"command": "true"}, "label": format!("p{i}"), "then": "emit",
                    "onFail": {}, "attachedBy": "agent"});
                policy
                    .execute(rusqlite::params![
                        id,
                        i as i64 + 1,
                        spec.to_string(),
                        json!([session]).to_string(),
                        now,
                    ])
                    .expect("policy");
                member
                    .execute(rusqlite::params![session, id])
                    .expect("member");
                event
                    .execute(rusqlite::params![
                        now,
                        session,
                        id,
                        json!({"policyId": id, "status": "watching", "spec": spec}).to_string(),
                    ])
                    .expect("event");
            }
        }
        tx.commit().expect("policies");
    }
}

/// A copy of the store in `template` (closed, so checkpointed) in a new
/// data directory under `root`.
fn copy_store(template: &Path, root: &Path, name: &str) -> PathBuf {
    let data = root.join(name);
    std::fs::create_dir_all(&data).expect("data");
    for entry in std::fs::read_dir(template).expect("template").flatten() {
        let file = entry.file_name();
        if file.to_string_lossy().starts_with("gatehost.db") {
            std::fs::copy(entry.path(), data.join(&file)).expect("copy the store");
        }
    }
    data
}

struct Measured {
    restart: Duration,
    cpu_ms_per_s: f64,
    rss_kib: u64,
    rss_peak_kib: u64,
    health: Vec<Duration>,
}

fn health(http: &Http, d: &Daemon) {
    let h = http.call_as(d, &d.agent, reqwest::Method::GET, "/v1/health", None);
    assert_eq!(h["ok"], true, "{h}");
}

/// One daemon of `program` on `data`: see the module's doc.
fn measure(program: &Path, data: &Path, config: &Path, seconds: u64, calls: usize) -> Measured {
    let http = Http::new();
    let t0 = Instant::now();
    let (d, _) = start_program(program, data, config, "127.0.0.1:0");
    health(&http, &d);
    let restart = t0.elapsed();
    let pid = d.child.id();
    // Past the start (the first retention pass, the first sweeps).
    std::thread::sleep(Duration::from_secs(2));
    let (t, cpu0) = (Instant::now(), support::cpu_ns(pid));
    let mut rss_peak_kib = 0;
    while t.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(Duration::from_secs(1));
        rss_peak_kib = rss_peak_kib.max(support::rss_kib(pid));
    }
    let cpu_ms_per_s =
        support::cpu_ns(pid).saturating_sub(cpu0) as f64 / 1e6 / t.elapsed().as_secs_f64();
    let rss_kib = support::rss_kib(pid);
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        health(&http, &d);
        samples.push(t.elapsed());
        std::thread::sleep(Duration::from_millis(50));
    }
    stop(d);
    Measured {
        restart,
        cpu_ms_per_s,
        rss_kib,
        rss_peak_kib: rss_peak_kib.max(rss_kib),
        health: samples,
    }
}

/// SIGTERM, and waits for the daemon to end.
fn stop(mut d: Daemon) {
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &d.child.id().to_string()])
        .status();
    let _ = d.child.wait();
}

fn watching(data: &Path) -> i64 {
    rusqlite::Connection::open(data.join("gatehost.db"))
        .expect("open")
        .query_row(
            "SELECT COUNT(*) FROM policies WHERE status = 'watching'",
            [],
            |r| r.get(0),
        )
        .expect("count")
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn main() {
    let sizes = list("--policies", &[10_000, 100_000]);
    let runs = support::arg("--runs", 2);
    let seconds = support::arg("--seconds", 30) as u64;
    let calls = support::arg("--health", 300);
    let subject =
        path_arg("--gatehost").unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_gatehost")));
    let mut programs = vec![("this build", subject)];
    if let Some(before) = path_arg("--before") {
        programs.insert(0, ("before", before));
    }
    let root = tempfile::tempdir().expect("tempdir");
    let config = root.path().join("config.toml");
    std::fs::write(&config, "[daemon]\n").expect("config");

    println!("## {seconds} s idle, {calls} health calls 50 ms apart, {runs} runs alternating\n");
    println!(
        "| policies | daemon | run | restart | CPU ms per s | VmRSS (peak) | health p50 | p99 | max |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut summary = Vec::new();
    for &n in &sizes {
        let template = root.path().join(format!("template-{n}"));
        std::fs::create_dir_all(&template).expect("template");
        let t = Instant::now();
        fill(&template, n);
        eprintln!(
            "filled {n} watching policies in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        let mut per: Vec<Vec<Measured>> = programs.iter().map(|_| Vec::new()).collect();
        for run in 0..runs {
            for (k, (name, program)) in programs.iter().enumerate() {
                let data = copy_store(&template, root.path(), &format!("{n}-{run}-{k}"));
                let m = measure(program, &data, &config, seconds, calls);
                assert_eq!(watching(&data), n as i64, "{name}: a policy left watching");
                let q = |p| ms(support::quantile(&m.health, p));
                println!(
                    "| {n} | {name} | {} | {:.0} ms | {:.2} | {:.1} MiB ({:.1}) | {:.2} ms | {:.2} ms | {:.2} ms |",
                    run + 1,
                    ms(m.restart),
                    m.cpu_ms_per_s,
                    mib(m.rss_kib),
                    mib(m.rss_peak_kib),
                    q(0.5),
                    q(0.99),
                    q(1.0),
                );
                std::fs::remove_dir_all(&data).expect("clean");
                per[k].push(m);
            }
        }
        summary.push((n, per));
        std::fs::remove_dir_all(&template).expect("clean");
    }
    println!("\n### Means over the runs\n");
    println!("| policies | daemon | restart | CPU ms per s | VmRSS | health p50 | p99 |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for (n, per) in &summary {
        let mut means = Vec::new();
        for ((name, _), ms_) in programs.iter().zip(per) {
            let all: Vec<Duration> = ms_.iter().flat_map(|m| m.health.iter().copied()).collect();
            let row = [
                mean(&ms_.iter().map(|m| ms(m.restart)).collect::<Vec<_>>()),
                mean(&ms_.iter().map(|m| m.cpu_ms_per_s).collect::<Vec<_>>()),
                mean(&ms_.iter().map(|m| mib(m.rss_kib)).collect::<Vec<_>>()),
                ms(support::quantile(&all, 0.5)),
                ms(support::quantile(&all, 0.99)),
            ];
            println!(
                "| {n} | {name} | {:.0} ms | {:.2} | {:.1} MiB | {:.2} ms | {:.2} ms |",
                row[0], row[1], row[2], row[3], row[4]
            );
            means.push(row);
        }
        if means.len() == 2 {
            let r: Vec<String> = (0..5)
                .map(|i| format!("{:.2}x", means[1][i] / means[0][i]))
                .collect();
            println!("| {n} | this build / before | {} |", r.join(" | "));
        }
    }
}
