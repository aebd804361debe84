//! What gating on a snapshot costs: the snapshot of the commit paths (read,
//! hashed, written as git objects) and bringing the worktree to its tree,
//! on a 10,000-file workspace.
//!
//! Run: `cargo bench -p gatehost --bench snapshot` (add `-- --rounds N
//! --files N`).
//!
//! Each round, alternating: the baseline, a shell gate running `true` in
//! the workspace (what any gate costs), then the subject, snapshot and
//! worktree sync. Cases: nothing changed since the last round; 10 files
//! changed each round. Goal (issue 11): an unchanged 10,000-file workspace
//! adds at most 50 ms to a gate.

mod support;

use gatehost::anchor::WorkspaceAnchor;
use gatehost::config::HostConfig;
use gatehost::gate::{GateContext, GateRunner, parse_gate_file};
use gatehost::worktree::{Worktrees, sync};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=b", "-c", "user.email=b@b"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn p90(v: &mut [Duration]) -> Duration {
    v.sort();
    v[(v.len() * 9) / 10]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let rounds = support::arg("--rounds", 30);
    let files = support::arg("--files", 10_000);
    let scratch = tempfile::tempdir().expect("tempdir");
    let ws = scratch.path().join("ws");
    for i in 0..files {
        let p = ws.join(format!("src/m{:03}/f{i}.rs", i % 100));
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, format!("pub fn f{i}() -> u32 {{ {i} }}\n").repeat(4)).expect("write");
    }
    git(&ws, &["init", "-q", "-b", "main"]);
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "base"]);
    // Files changed in the last 2 s are never trusted to a stat cache: let
    // the generated ones age past that, as a real workspace's have.
    std::thread::sleep(Duration::from_millis(2100));
    let trees = Worktrees::new(scratch.path().join("worktrees"));
    let paths = vec!["src".to_string()];
    let cache = std::cell::RefCell::new(gatehost::commit::StatCache::default());
    let snapshot_and_sync = || {
        let (snap, _) = gatehost::commit::snapshot_with(&ws, &paths, &mut cache.borrow_mut())
            .expect("snapshot");
        let mut lease = trees
            .lease(&ws, gatehost::worktree::Tenant::Operator)
            .expect("lease");
        sync(&mut lease, &ws, &snap.tree).expect("sync")
    };
    // The first checkout writes every file: not what a gate pays after.
    let started = Instant::now();
    let first = snapshot_and_sync();
    println!(
        "snapshot, {files} files under src/: first checkout {} ({} files written)",
        ms(started.elapsed()),
        first.written
    );
    if std::env::var_os("GATEHOST_BENCH_BREAKDOWN").is_some() {
        let (mut snaps, mut syncs) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let t = Instant::now();
            let (snap, _) = gatehost::commit::snapshot_with(&ws, &paths, &mut cache.borrow_mut())
                .expect("snapshot");
            snaps.push(t.elapsed());
            let t = Instant::now();
            let mut lease = trees
                .lease(&ws, gatehost::worktree::Tenant::Operator)
                .expect("lease");
            sync(&mut lease, &ws, &snap.tree).expect("sync");
            syncs.push(t.elapsed());
        }
        println!(
            "breakdown, unchanged: snapshot p50 {} | worktree sync p50 {}",
            ms(median(&mut snaps)),
            ms(median(&mut syncs))
        );
    }
    let runner = GateRunner::new(
        HostConfig::from_toml("[shell]\nallow = [\"true\"]\n", "bench").expect("config"),
    );
    let anchor = WorkspaceAnchor::open(&ws).expect("anchor");
    let gate = parse_gate_file(r#"{"command": "true"}"#)
        .expect("gate")
        .remove(0);
    let ctx = GateContext::default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    for (case, changed) in [("unchanged", 0usize), ("10 files changed per round", 10)] {
        let (mut base, mut subject) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            for k in 0..changed {
                let i = (round * 37 + k * 101) % files;
                let p = ws.join(format!("src/m{:03}/f{i}.rs", i % 100));
                std::fs::write(&p, format!("// round {round}\n")).expect("change");
            }
            let t = Instant::now();
            let v = rt.block_on(runner.run_gate(&gate, &anchor, &ctx));
            base.push(t.elapsed());
            assert!(v.passed(), "{v:?}");
            let t = Instant::now();
            let stats = snapshot_and_sync();
            subject.push(t.elapsed());
            if changed == 0 {
                assert_eq!(stats.written, 0, "{stats:?}");
            }
        }
        let (b, s) = (median(&mut base), median(&mut subject));
        println!(
            "{case}: gate `true` p50 {} p90 {} | snapshot + worktree p50 {} p90 {} | snapshot/gate {:.2}x",
            ms(b),
            ms(p90(&mut base)),
            ms(s),
            ms(p90(&mut subject)),
            s.as_secs_f64() / b.as_secs_f64()
        );
    }
}
