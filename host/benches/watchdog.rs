//! What the watchdog costs with many sessions (issue 26): a store holding
//! N live sessions (10,000 by default), all heard from a moment ago.
//!
//! Run: `cargo bench -p gatehost --bench watchdog` (options: `-- --sessions
//! N --rounds N --seconds N`).
//!
//! - In process: one look of the watchdog (`Engine::watch`) with
//!   `heartbeat_timeout` set (the silent-session query, the stale-member
//!   query, the deadline query) against one look without it (deadlines
//!   only) and, as the baseline, a transaction that reads one value,
//!   alternating, `--rounds` each.
//! - As a whole process: `gatehost serve` over that store, idle for
//!   `--seconds`, with `heartbeat_timeout = "1h"` (a look every 500 ms)
//!   against the same daemon without it: CPU time per second (every
//!   thread's schedstat, in ns) and VmRSS, the two daemons started
//!   alternately, twice each.

mod support;

use gatehost::config::HostConfig;
use gatehost::engine::Engine;
use gatehost::gate::GateRunner;
use gatehost::store::{Store, now_ms};
use std::path::Path;
use std::time::{Duration, Instant};

fn fill(dir: &Path, n: usize) {
    let store = Store::open(dir).expect("store");
    support::live_sessions(&store, n);
}

fn config(dir: &Path, name: &str, heartbeat: bool) -> std::path::PathBuf {
    let p = dir.join(name);
    let text = if heartbeat {
        "[daemon]\nheartbeat_timeout = \"1h\"\n"
    } else {
        "[daemon]\n"
    };
    std::fs::write(&p, text).expect("config");
    p
}

fn engine(data: &Path, config: &Path) -> Engine {
    let store = Store::open(data).expect("store");
    let runner = GateRunner::new(HostConfig::load(Some(config)).expect("config"));
    Engine::new(store, runner).expect("engine")
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

fn main() {
    let n = support::arg("--sessions", 10_000);
    let rounds = support::arg("--rounds", 200);
    let seconds = support::arg("--seconds", 20) as u64;
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("data");
    fill(&data, n);
    let on = config(dir.path(), "on.toml", true);
    let off = config(dir.path(), "off.toml", false);

    println!("## The watchdog with {n} live sessions\n");
    println!("### One look, in process ({rounds} rounds, alternating)\n");
    let (with, without) = (engine(&data, &on), engine(&data, &off));
    let mut samples: [Vec<Duration>; 3] = Default::default();
    for i in 0..rounds + rounds / 10 + 3 {
        let t = Instant::now();
        with.store().head_cursor().expect("read");
        let base = t.elapsed();
        let t = Instant::now();
        let (look, _) = with.watch(now_ms()).expect("look");
        let a = t.elapsed();
        assert!(look.stale.is_empty(), "no session is stale");
        let t = Instant::now();
        without.watch(now_ms()).expect("look");
        let b = t.elapsed();
        if i >= rounds / 10 + 3 {
            samples[0].push(base);
            samples[1].push(a);
            samples[2].push(b);
        }
    }
    let q = |v: &[Duration], p| support::quantile(v, p);
    println!("| case | p50 | p90 | p50 / baseline |");
    println!("| --- | --- | --- | --- |");
    let base = q(&samples[0], 0.5);
    for (name, v) in [
        ("baseline: a read of one value", &samples[0]),
        ("look, heartbeat_timeout set", &samples[1]),
        ("look, deadlines only", &samples[2]),
    ] {
        println!(
            "| {name} | {} | {} | {:.1}x |",
            us(q(v, 0.5)),
            us(q(v, 0.9)),
            q(v, 0.5).as_secs_f64() / base.as_secs_f64()
        );
    }
    drop((with, without));

    println!("\n### `gatehost serve` idle for {seconds} s, alternating\n");
    println!("| daemon | CPU ms per s | VmRSS |");
    println!("| --- | --- | --- |");
    for run in 0..2 {
        for (name, cfg) in [
            ("heartbeat_timeout = \"1h\"", &on),
            ("no heartbeat_timeout", &off),
        ] {
            let (cpu, rss) = support::idle_daemon(&data, cfg, seconds);
            println!(
                "| {name} (run {}) | {cpu:.2} | {:.1} MiB |",
                run + 1,
                rss as f64 / 1024.0
            );
        }
    }
}
