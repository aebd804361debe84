//! What routines cost an idle daemon (issue 27): a store holding
//! `--sessions` sessions (10,000 by default) and, in one data directory,
//! `--runs` routine runs (1,000) either *waiting* (a fan-in step whose
//! session has not finished: what the routines' tick looks at every
//! second) or *running* (a step on an existing session, prompted, whose
//! turn-end has not come: no process of its own), against the same
//! sessions without runs.
//!
//! Run: `cargo bench -p gatehost --bench routines` (options: `-- --runs N
//! --sessions N --seconds N`).
//!
//! `gatehost serve` over each directory, idle for `--seconds` after its
//! start: CPU time per second (every thread's schedstat, in ns) and VmRSS,
//! the three daemons started in turn, twice each.

mod support;

use gatehost::config::HostConfig;
use gatehost::engine::Engine;
use gatehost::engine::routine::RoutineSpec;
use gatehost::gate::GateRunner;
use gatehost::store::Store;
use std::path::Path;

#[derive(Clone, Copy, PartialEq)]
enum Runs {
    None,
    Waiting,
    Running,
}

fn fill(dir: &Path, config: &Path, sessions: usize, n: usize, runs: Runs) {
    let store = Store::open(dir).expect("store");
    support::live_sessions(&store, sessions);
    if runs == Runs::None {
        return;
    }
    // A running step's prompt is delivered by a task: a runtime to spawn it.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let _in_rt = rt.enter();
    let runner = GateRunner::new(HostConfig::load(Some(config)).expect("config"));
    let engine = Engine::new(store, runner).expect("engine");
    for i in 0..n {
        let step = match runs {
            Runs::Waiting => serde_json::json!({"label": "merge",
                "session": {"existing": format!("s{i}")},
                "waitFor": [format!("s{i}")], "onInput": {"mode": "fail"}}),
            _ => serde_json::json!({"label": "work",
                "session": {"existing": format!("s{i}")}, "onInput": {"mode": "fail"}}),
        };
        let spec: RoutineSpec =
            serde_json::from_value(serde_json::json!({"steps": [step]})).expect("spec");
        let run = engine.start_routine(spec).expect("start");
        let want = if runs == Runs::Waiting {
            "waiting"
        } else {
            "running"
        };
        assert_eq!(run.phase, want);
    }
}

fn main() {
    let n = support::arg("--runs", 1_000);
    let sessions = support::arg("--sessions", 10_000).max(n);
    let seconds = support::arg("--seconds", 10) as u64;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[daemon]\n").expect("config");
    let cases = [
        (
            format!("{sessions} sessions, no run (baseline)"),
            Runs::None,
        ),
        (
            format!("{sessions} sessions, {n} waiting runs"),
            Runs::Waiting,
        ),
        (
            format!("{sessions} sessions, {n} running runs"),
            Runs::Running,
        ),
    ];
    let mut dirs = Vec::new();
    for (i, (_, runs)) in cases.iter().enumerate() {
        let d = dir.path().join(format!("data-{i}"));
        std::fs::create_dir_all(&d).expect("data");
        fill(&d, &config, sessions, n, *runs);
        dirs.push(d);
    }
    println!("## routine runs, `gatehost serve` idle for {seconds} s, in turn\n");
    println!("| daemon | CPU ms per s | VmRSS |");
    println!("| --- | --- | --- |");
    for run in 0..2 {
        for ((name, _), data) in cases.iter().zip(&dirs) {
            let (cpu, rss) = support::idle_daemon(data, &config, seconds);
            println!(
                "| {name} (run {}) | {cpu:.2} | {:.1} MiB |",
                run + 1,
                rss as f64 / 1024.0
            );
        }
    }
}
