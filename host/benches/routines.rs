//! What routines cost an idle daemon (issue 27): a store holding N
//! sessions (1,000 by default) and, in one data directory, N routine runs
//! each waiting on one of them (a fan-in step whose session has not
//! finished: what the routines' tick looks at every second), against the
//! same sessions without runs.
//!
//! Run: `cargo bench -p gatehost --bench routines` (options: `-- --runs N
//! --seconds N`).
//!
//! `gatehost serve` over each directory, idle for `--seconds` after its
//! start: CPU time per second (every thread's schedstat, in ns) and VmRSS,
//! the two daemons started alternately, twice each.

mod support;

use gatehost::config::HostConfig;
use gatehost::engine::Engine;
use gatehost::engine::routine::RoutineSpec;
use gatehost::gate::GateRunner;
use gatehost::store::Store;
use std::path::Path;

fn fill(dir: &Path, config: &Path, n: usize, runs: bool) {
    let store = Store::open(dir).expect("store");
    support::live_sessions(&store, n);
    if !runs {
        return;
    }
    let runner = GateRunner::new(HostConfig::load(Some(config)).expect("config"));
    let engine = Engine::new(store, runner).expect("engine");
    for i in 0..n {
        let spec: RoutineSpec = serde_json::from_value(serde_json::json!({
            "steps": [{"label": "merge", "session": {"existing": format!("s{i}")},
                       "waitFor": [format!("s{i}")], "onInput": {"mode": "fail"}}]
        }))
        .expect("spec");
        let run = engine.start_routine(spec).expect("start");
        assert_eq!(run.phase, "waiting");
    }
}

fn main() {
    let n = support::arg("--runs", 1_000);
    let seconds = support::arg("--seconds", 10) as u64;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[daemon]\n").expect("config");
    let with = dir.path().join("with");
    let without = dir.path().join("without");
    for (d, runs) in [(&with, true), (&without, false)] {
        std::fs::create_dir_all(d).expect("data");
        fill(d, &config, n, runs);
    }
    println!("## {n} waiting routine runs, `gatehost serve` idle for {seconds} s, alternating\n");
    println!("| daemon | CPU ms per s | VmRSS |");
    println!("| --- | --- | --- |");
    for run in 0..2 {
        for (name, data) in [
            ("{n} sessions, {n} waiting runs", &with),
            ("{n} sessions, no run (baseline)", &without),
        ] {
            let (cpu, rss) = support::idle_daemon(data, &config, seconds);
            println!(
                "| {} (run {}) | {cpu:.2} | {:.1} MiB |",
                name.replace("{n}", &n.to_string()),
                run + 1,
                rss as f64 / 1024.0
            );
        }
    }
}
