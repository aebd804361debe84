//! A stop in a large repository: `gatehost hook claude` with the
//! `forbid-patterns` plugin (scope `changed`, so the hook computes the
//! workspace's change set) against `git status --porcelain` on the same
//! tree, one file changed before every process, at 1,000, 10,000 and
//! 100,000 files (gatehost issue 30).
//!
//! Run: `bash scripts/build-plugins.sh && cargo bench -p gatehost --bench monorepo`
//! (add `-- --rounds N`, default 20; `--sizes 1000,10000`, default
//! 1000,10000,100000; `--gatehost PATH`: the binary measured, this
//! build's by default; `--before PATH`: another `gatehost` binary measured
//! in the same rounds, for a before/after in one run; `--load N`: N busy
//! processes started for the run, a load generator, killed and reaped at
//! its end).
//!
//! Each repository is made in a temporary directory: every file's blob and
//! one commit through `git fast-import` (one pack, no loose objects), then
//! `git reset --hard` writes the tree and the index (as a checkout does).
//! Files are `src/dNNN/fNNNNN.rs`, 100 to a directory, about 450 bytes
//! each. Before each measured process the same file is rewritten (new
//! content, so both git and gatehost find it changed and must read it).
//! Rounds alternate git, the hook (and `--before`'s hook). Peak memory is
//! each process's `ru_maxrss` (wait4): a child is charged at exec with
//! the bench's own high-water mark, so the bench keeps its own small
//! (printed at the end).

mod support;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::{Run, spawn};

const PATTERN: &str = r"dbg!\(|FIXME[0-9]+";
const CHANGED: &str = "src/d000/f00000.rs";

fn main() {
    let rounds = support::arg("--rounds", 20);
    let sizes: Vec<usize> = std::env::args()
        .skip_while(|a| a != "--sizes")
        .nth(1)
        .map(|s| s.split(',').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 10_000, 100_000]);
    let before: Option<PathBuf> = std::env::args()
        .skip_while(|a| a != "--before")
        .nth(1)
        .map(PathBuf::from);
    let gatehost = std::env::args()
        .skip_while(|a| a != "--gatehost")
        .nth(1)
        .map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_gatehost")),
            PathBuf::from,
        );
    let plugins =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/target/wasm32-wasip2/release");
    assert!(
        plugins.join("forbid_patterns.wasm").is_file(),
        "build the plugins first: bash scripts/build-plugins.sh"
    );
    let git = which::which("git").expect("git is on PATH");
    let load = support::Load::start(support::arg("--load", 0));
    let scratch = tempfile::tempdir().expect("tempdir");
    let root = scratch.path();
    let etc = root.join("etc");
    std::fs::create_dir_all(&etc).expect("mkdir");
    let config = etc.join("wasm.toml");
    std::fs::write(
        &config,
        format!(
            "[wasm]\nplugin_dirs = [{:?}]\ncache_dir = {:?}\n",
            plugins.display().to_string(),
            root.join("cache").display().to_string()
        ),
    )
    .expect("write");
    let gates = etc.join("forbid.json");
    std::fs::write(
        &gates,
        serde_json::json!({"wasm": {"plugin": "forbid-patterns", "timeoutMs": 120000,
            "config": {"scope": "changed", "rules": [{"id": "no-dbg", "pattern": PATTERN}]}}})
        .to_string(),
    )
    .expect("write");
    println!(
        "monorepo, {rounds} alternating rounds per size, whole processes, load generator: {} busy process(es); gatehost: {}{}; {}",
        load.len(),
        gatehost.display(),
        before
            .as_ref()
            .map(|b| format!(", before: {}", b.display()))
            .unwrap_or_default(),
        String::from_utf8_lossy(
            &Command::new(&git)
                .arg("--version")
                .output()
                .expect("git")
                .stdout
        )
        .trim()
    );

    for n in sizes {
        let ws = root.join(format!("ws-{n}"));
        let t = Instant::now();
        support::make_repository(&git, &ws, n);
        println!(
            "\n{n} files: repository made in {:.1} s (fast-import, reset --hard)",
            t.elapsed().as_secs_f64()
        );
        let stop = support::claude_stop(&format!("bench-{n}"), &ws);
        let hook = |program: &Path, state: &Path| {
            let args = support::hook_claude_args(&gates, &config, state);
            let run = spawn(program, &args, &stop);
            assert!(
                run.code == 0 && run.stdout.is_empty(),
                "the hook did not pass: {run:?}"
            );
            run
        };
        let status = || {
            let args: Vec<OsString> = vec![
                "-C".into(),
                ws.as_os_str().into(),
                "status".into(),
                "--porcelain".into(),
            ];
            let run = spawn(&git, &args, b"");
            assert_eq!(run.code, 0, "{run:?}");
            assert_eq!(
                String::from_utf8_lossy(&run.stdout),
                format!(" M {CHANGED}\n"),
                "{run:?}"
            );
            run
        };
        let mut round = 0u64;
        let mut change = || {
            round += 1;
            std::fs::write(ws.join(CHANGED), support::file_text(0, round)).expect("write");
        };
        let state_new = root.join(format!("state-new-{n}"));
        let state_old = root.join(format!("state-old-{n}"));
        // Past the stat cache's racy window: files whose ctime is less than
        // two seconds old are always read, and a real workspace's files are
        // older (without this wait, every stop at 1,000 and 10,000 files
        // read every file: the repository was seconds old).
        std::thread::sleep(Duration::from_millis(2500));
        change();
        // The first stop of each build (its stat cache, if any, empty).
        let first = hook(&gatehost, &state_new);
        println!(
            "  first stop (nothing remembered): {:.1} ms, {:.1} ms CPU, {} KiB",
            ms(first.elapsed),
            ms(first.cpu),
            first.max_rss_kib
        );
        if let Some(b) = &before {
            let first = hook(b, &state_old);
            println!(
                "  first stop, before: {:.1} ms, {:.1} ms CPU, {} KiB",
                ms(first.elapsed),
                ms(first.cpu),
                first.max_rss_kib
            );
        }
        let _ = status();
        let (mut g, mut h, mut o) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..rounds + 2 {
            change();
            let a = status();
            change();
            let b = hook(&gatehost, &state_new);
            let c = before.as_ref().map(|p| {
                change();
                hook(p, &state_old)
            });
            // Two warm-up rounds.
            if i >= 2 {
                g.push(a);
                h.push(b);
                o.extend(c);
            }
        }
        line("git status --porcelain (baseline)", &g, &g);
        line("gatehost hook claude, forbid-patterns", &h, &g);
        if !o.is_empty() {
            line("the same, before", &o, &g);
        }
        drop(scratch_repo(&ws));
    }
    println!(
        "\nthe bench process's own peak (VmHWM): {} KiB",
        support::rss_hwm_kib().unwrap_or(0)
    );
    drop(load);
}

/// Removes a measured repository (the next size needs the disk).
fn scratch_repo(ws: &Path) -> std::io::Result<()> {
    std::fs::remove_dir_all(ws)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One line of the table: p50 / p90 wall, p50 CPU, peak RSS p50 / max,
/// and the p50 ratios (wall, CPU, RSS) against `baseline`.
fn line(name: &str, runs: &[Run], baseline: &[Run]) {
    let wall = |r: &[Run]| support::quantile(&r.iter().map(|r| r.elapsed).collect::<Vec<_>>(), 0.5);
    let rss =
        |r: &[Run]| support::quantile(&r.iter().map(|r| r.max_rss_kib).collect::<Vec<_>>(), 0.5);
    let p90 = support::quantile(&runs.iter().map(|r| r.elapsed).collect::<Vec<_>>(), 0.9);
    let cpu = |r: &[Run]| support::quantile(&r.iter().map(|r| r.cpu).collect::<Vec<_>>(), 0.5);
    println!(
        "  {name}: wall p50 {:.1} ms (p90 {:.1}), CPU p50 {:.1} ms, peak RSS p50 {} KiB (max {}) | vs git: wall {:.2}x, CPU {:.2}x, RSS {:.2}x",
        ms(wall(runs)),
        ms(p90),
        ms(cpu(runs)),
        rss(runs),
        runs.iter().map(|r| r.max_rss_kib).max().unwrap_or(0),
        wall(runs).as_secs_f64() / wall(baseline).as_secs_f64(),
        cpu(runs).as_secs_f64() / cpu(baseline).as_secs_f64(),
        rss(runs) as f64 / rss(baseline) as f64,
    );
}
