//! What gating on a snapshot costs: the snapshot of the commit paths (read,
//! hashed, written as git objects) and bringing the worktree to its tree,
//! on a 10,000-file workspace.
//!
//! Run: `cargo bench -p gatehost --bench snapshot` (add `-- --rounds N
//! --files N`).
//!
//! Each round, alternating: the baseline, a shell gate running `true` in
//! the workspace (what any gate costs), then the subject, snapshot and
//! worktree sync; the worktree is then settled (what the daemon does after
//! the gate, off the turn-end's path), timed apart. Cases: nothing changed
//! since the last round; 10 files changed each round. The first snapshot
//! checkout into a new worktree is set against `git worktree add` of the
//! same tree (`--first-rounds N`, 4 by default, the order alternating). Goals:
//! an unchanged 10,000-file workspace adds at most 50 ms to a gate (issue
//! 11); at 100,000 files (`--files 100000`), unchanged <= 150 ms, ten
//! changed <= 250 ms, the first checkout <= 1.0x git's (issue 30).
//! `GATEHOST_LOG=gatehost=debug` prints each step's phases.

mod support;

use gatehost::anchor::WorkspaceAnchor;
use gatehost::config::HostConfig;
use gatehost::gate::{GateContext, GateRunner, parse_gate_file};
use gatehost::worktree::{Worktrees, settle, sync};
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
    if let Ok(filter) = std::env::var("GATEHOST_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .init();
    }
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
    // What a turn-end pays before its gate runs; the worktree is settled
    // after the gate (off the path), measured apart.
    let snapshot_and_sync = || {
        let (snap, _) = gatehost::commit::snapshot_with(&ws, &paths, &mut cache.borrow_mut())
            .expect("snapshot");
        let mut lease = trees
            .lease(&ws, gatehost::worktree::Tenant::Operator)
            .expect("lease");
        let stats = sync(&mut lease, &ws, &snap.tree).expect("sync");
        (stats, lease)
    };
    let settle_timed = |lease: &mut gatehost::worktree::Lease| {
        let t = Instant::now();
        settle(lease, &ws).expect("settle");
        t.elapsed()
    };
    // The first snapshot reads and hashes every file: once, apart.
    let started = Instant::now();
    let (first, mut lease) = snapshot_and_sync();
    let first_time = started.elapsed();
    settle_timed(&mut lease);
    drop(lease);
    println!(
        "snapshot, {files} files under src/: the first snapshot + checkout {} ({} files written)",
        ms(first_time),
        first.written,
    );
    first_checkouts(
        &ws,
        scratch.path(),
        &paths,
        support::arg("--first-rounds", 4),
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
            settle_timed(&mut lease);
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
        let (mut base, mut subject, mut settles) = (Vec::new(), Vec::new(), Vec::new());
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
            let (stats, mut lease) = snapshot_and_sync();
            subject.push(t.elapsed());
            settles.push(settle_timed(&mut lease));
            if changed == 0 {
                assert_eq!(stats.written, 0, "{stats:?}");
            }
        }
        let (b, s) = (median(&mut base), median(&mut subject));
        println!(
            "{case}: gate `true` p50 {} p90 {} | snapshot + worktree p50 {} p90 {} | snapshot/gate {:.2}x | settle after the run p50 {}",
            ms(b),
            ms(p90(&mut base)),
            ms(s),
            ms(p90(&mut subject)),
            s.as_secs_f64() / b.as_secs_f64(),
            ms(median(&mut settles))
        );
    }
}

/// The first checkout (every file written into a new worktree) against
/// `git worktree add` of the same tree, `rounds` times, the order
/// alternating (whichever runs second writes right after the other's
/// 100,000 files were removed: the file system's allocator is part of
/// it), the page cache's dirty pages flushed before each.
fn first_checkouts(ws: &Path, scratch: &Path, paths: &[String], rounds: usize) {
    let (snap, _) = gatehost::commit::snapshot(ws, paths).expect("snapshot");
    let flush = || {
        let _ = Command::new("sync").status();
    };
    let ours = |round: usize| {
        let root = scratch.join(format!("first-{round}"));
        let trees = Worktrees::new(root.clone());
        flush();
        let t = Instant::now();
        let mut lease = trees
            .lease(ws, gatehost::worktree::Tenant::Operator)
            .expect("lease");
        sync(&mut lease, ws, &snap.tree).expect("sync");
        let took = t.elapsed();
        drop(lease);
        std::fs::remove_dir_all(&root).expect("remove");
        took
    };
    let theirs = || {
        flush();
        let t = Instant::now();
        git(
            ws,
            &[
                "worktree",
                "add",
                "-q",
                "--detach",
                "../git-worktree",
                "HEAD",
            ],
        );
        let took = t.elapsed();
        git(ws, &["worktree", "remove", "--force", "../git-worktree"]);
        took
    };
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        if round % 2 == 0 {
            a.push(ours(round));
            b.push(theirs());
        } else {
            b.push(theirs());
            a.push(ours(round));
        }
    }
    let rounds: Vec<String> = a
        .iter()
        .zip(&b)
        .map(|(a, b)| format!("{:.2}x", a.as_secs_f64() / b.as_secs_f64()))
        .collect();
    let (a, b) = (median(&mut a), median(&mut b));
    println!(
        "first checkout into a new worktree p50 {} | git worktree add p50 {} | ratio {:.2}x (rounds: {})",
        ms(a),
        ms(b),
        a.as_secs_f64() / b.as_secs_f64(),
        rounds.join(" ")
    );
}
