//! What the watch kept between turns saves a commit policy's snapshot
//! (issue 52): the snapshot through the watch (`snapshot_standing`)
//! against the stat walk it replaces (`snapshot_with`, its stat cache
//! warm), on two identical copies of one workspace, at each size: one
//! file per path, 100 files a directory (1,000 directories at 100,000),
//! the files older than the racy window.
//!
//! Run: `cargo bench -p gatehost-git --bench watch` (add `-- --rounds N
//! --sizes 1000,10000,100000 --load 2`: `--load N` starts N busy
//! processes for the run, a load generator, and stops them at its end).
//!
//! Each round, the order alternating: the walk on copy A, then the watch
//! on copy B (or B then A). Cases: nothing changed since the last round;
//! ten files changed each round (the same ten, the same bytes, in both
//! copies: their trees must then be the same, checked every round).
//! Goals: unchanged <= 25 ms at every size, ten changed <= 50 ms at
//! 100,000. Also printed: the watch's directories, its bookkeeping, and
//! the kernel's slab growth while it was built (`/proc/meminfo` `Slab`,
//! against a walk without a watch: noisy, indicative).

use gatehost_git::commit::{Standing, StatCache, WatchBudget, snapshot_standing, snapshot_with};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "-c",
            "gc.auto=0",
        ])
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

/// `--NAME N` from the command line, else `default`.
fn arg(name: &str, default: usize) -> usize {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// The `q` quantile of `samples` (nearest rank).
fn quantile<T: Copy + Ord>(samples: &[T], q: f64) -> T {
    let mut s = samples.to_vec();
    s.sort();
    s[((s.len() as f64 - 1.0) * q).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn slab_kib() -> i64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("Slab:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

fn file(i: usize) -> String {
    format!("src/d{:04}/f{i}.rs", i / 100)
}

fn main() {
    let rounds = arg("--rounds", 15);
    let sizes: Vec<usize> = std::env::args()
        .skip_while(|a| a != "--sizes")
        .nth(1)
        .unwrap_or_else(|| "1000,10000,100000".into())
        .split(',')
        .filter_map(|s| s.parse().ok())
        .collect();
    // The load generator: busy shells, killed and reaped at the end.
    let mut load: Vec<std::process::Child> = (0..arg("--load", 0))
        .map(|_| {
            Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .expect("a busy process")
        })
        .collect();
    println!("load generator: {} busy process(es)", load.len());
    let paths = vec!["src".to_string()];
    println!("| files | case | walk p50 | watch p50 | watch p90 | watch / walk (p50 of pairs) |");
    println!("| --- | --- | --- | --- | --- | --- |");
    let mut notes = Vec::new();
    for files in sizes {
        let scratch = tempfile::tempdir().expect("tempdir");
        let a = scratch.path().join("a");
        for i in 0..files {
            let p = a.join(file(i));
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, format!("pub fn f{i}() -> u32 {{ {i} }}\n")).expect("write");
        }
        git(&a, &["init", "-q", "-b", "main"]);
        git(&a, &["add", "-A"]);
        git(&a, &["commit", "-qm", "base"]);
        let b = scratch.path().join("b");
        let cp = Command::new("cp")
            .arg("-a")
            .arg(&a)
            .arg(&b)
            .status()
            .expect("cp");
        assert!(cp.success());
        // Older than the stat cache's racy window, as a real workspace's.
        std::thread::sleep(Duration::from_millis(2100));
        let mut cache_a = StatCache::default();
        let slab0 = slab_kib();
        let _ = snapshot_with(&a, &paths, &mut cache_a).expect("walk");
        let slab_walk = slab_kib() - slab0;
        let mut cache_b = StatCache::default();
        let mut standing = Standing::new(WatchBudget::default()).expect("inotify");
        let slab1 = slab_kib();
        let (_, why) =
            snapshot_standing(&b, &paths, &mut cache_b, &mut standing).expect("first watched");
        let slab_watch = slab_kib() - slab1;
        assert!(why.is_some(), "the first snapshot walks");
        notes.push(format!(
            "{files} files: {} directories watched, bookkeeping {} KiB, slab +{slab_watch} KiB (a walk without a watch: +{slab_walk} KiB)",
            standing.watched(),
            standing.footprint() / 1024
        ));
        for case in ["unchanged", "ten changed"] {
            let (mut walk, mut watch, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
            for round in 0..rounds + 2 {
                if case == "ten changed" {
                    for k in 0..10 {
                        let i = (round * 10 + k) * 7919 % files;
                        let text = format!("round {round} changed {i}\n");
                        std::fs::write(a.join(file(i)), &text).expect("write");
                        std::fs::write(b.join(file(i)), &text).expect("write");
                    }
                }
                let mut walk_once = || {
                    let t = Instant::now();
                    let (snap, _) = snapshot_with(&a, &paths, &mut cache_a).expect("walk");
                    (t.elapsed(), snap.tree)
                };
                let mut watch_once = || {
                    let t = Instant::now();
                    let ((snap, _), why) =
                        snapshot_standing(&b, &paths, &mut cache_b, &mut standing)
                            .expect("watched");
                    let took = t.elapsed();
                    assert_eq!(why, None, "{case}: read through the watch");
                    (took, snap.tree)
                };
                let ((tw, ta), (tv, tb)) = if round % 2 == 0 {
                    let w = walk_once();
                    (w, watch_once())
                } else {
                    let v = watch_once();
                    (walk_once(), v)
                };
                assert_eq!(ta, tb, "{case}: the watch's tree is the walk's");
                // Two warm-up rounds.
                if round >= 2 {
                    walk.push(tw);
                    watch.push(tv);
                    ratios.push((tv.as_secs_f64() / tw.as_secs_f64() * 10_000.0) as u64);
                }
            }
            println!(
                "| {files} | {case} | {} | {} | {} | {:.4}x |",
                ms(quantile(&walk, 0.5)),
                ms(quantile(&watch, 0.5)),
                ms(quantile(&watch, 0.9)),
                quantile(&ratios, 0.5) as f64 / 10_000.0
            );
        }
    }
    for n in notes {
        println!("{n}");
    }
    for child in &mut load {
        let _ = child.kill();
        let _ = child.wait();
    }
}
