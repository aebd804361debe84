//! What a user pays per agent stop, as whole processes (spawn, wait,
//! exit), each against a baseline process measured in the same run,
//! alternating one baseline and one subject per round.
//!
//! Run: `bash scripts/build-plugins.sh && cargo bench -p gatehost --bench hook_process`
//! (add `-- --rounds N`, default 200, `--only PAIR,...`, and `--load N`: N
//! busy processes the bench starts for the run, a load generator).
//!
//! Pairs (baseline vs subject):
//! - hook: the `true` program fed a Claude Code Stop hook's JSON on stdin
//!   (a bare hook) vs `gatehost hook claude --gates GATES` with one shell
//!   gate `true` (confined as gatehost confines every shell gate), fed the
//!   same JSON; the hook's stdout must be empty (a pass) on every run;
//! - check-forbid: `grep -rE PATTERN WS` vs `gatehost check` with the
//!   `forbid-patterns` plugin, the same pattern, on the same 1,000 files
//!   (no match: both pass); the plugin's compiled component comes from the
//!   on-disk cache, filled by one run before anything is measured;
//! - check-true: a bare `true` vs `gatehost check` with a shell gate `true`;
//! - startup: a bare `true` vs `gatehost --version`: what loading the
//!   binary alone costs, the floor under every pair above;
//! - hook-no-wasm: the hook with a shell gate `true` vs the same hook with
//!   a WASM `noop` gate (warm cache): what starting the WASM engine costs a
//!   hook, paid only when a WASM gate runs;
//! - hook-scratch: the hook with a shell gate `true` and its scratch on
//!   disk (`[limits] gate_scratch_bytes = 0`) vs the same hook with the
//!   default bound (a tmpfs mounted in the gate's own mount namespace):
//!   what the scratch bound costs a gate;
//! - hook-idle: the hook pair again, each process after a 100 ms pause (not
//!   timed), as a stop comes after an agent's turn: back to back, one
//!   process's kernel state (the cgroup migration lock's RCU sync, CPU
//!   frequency and idle states) is still warm from the last; after a pause
//!   it may not be. A quarter of the rounds (at least 20).
//!
//! Peak memory is each process's `ru_maxrss` (wait4). A spawned child is
//! charged at exec with the high-water mark of the memory it started
//! from (the bench's own), so the baseline's figure is that floor.

mod support;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::{Run, spawn};

const PATTERN: &str = r"dbg!\(|FIXME[0-9]+";

fn main() {
    let rounds = support::arg("--rounds", 200);
    let _load = support::Load::start(support::arg("--load", 0));
    println!(
        "load generator: {} busy process(es); load average {:.1}",
        _load.len(),
        support::loadavg()
    );
    // `--only a,b` runs only the named pairs (hook, check-forbid,
    // check-true, startup, hook-no-wasm, hook-scratch, hook-idle); all of
    // them by default.
    let pair = support::selected;
    let gatehost = PathBuf::from(env!("CARGO_BIN_EXE_gatehost"));
    assert!(gatehost.is_file(), "{}", gatehost.display());
    let plugins =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/target/wasm32-wasip2/release");
    assert!(
        plugins.join("noop.wasm").is_file() && plugins.join("forbid_patterns.wasm").is_file(),
        "build the plugins first: bash scripts/build-plugins.sh"
    );
    let true_path = which::which("true").expect("true is on PATH");
    let grep_path = which::which("grep").expect("grep is on PATH");

    // The operator's files in etc/, beside (never inside) the workspaces.
    let scratch = tempfile::tempdir().expect("tempdir");
    let root = scratch.path();
    let etc = root.join("etc");
    std::fs::create_dir_all(&etc).expect("mkdir");
    let write = |name: &str, text: &str| {
        let p = etc.join(name);
        std::fs::write(&p, text).expect("write");
        p
    };
    // A git repository with a commit: the hook's cwd.
    let ws = root.join("ws");
    git_workspace(&ws);
    // 1,000 files, no match of PATTERN: forbid-patterns and grep both pass.
    let files = root.join("files");
    support::generate_workspace(&files, 1000, false);
    let state = root.join("state");
    let cache = root.join("cache");
    let shell_config = write("shell.toml", "[shell]\nallow = [\"true\"]\n");
    let unbounded_config = write(
        "unbounded.toml",
        "[shell]\nallow = [\"true\"]\n[limits]\ngate_scratch_bytes = 0\n",
    );
    let wasm_config = write(
        "wasm.toml",
        &format!(
            "[shell]\nallow = [\"true\"]\n[wasm]\nplugin_dirs = [{:?}]\ncache_dir = {:?}\n",
            plugins.display().to_string(),
            cache.display().to_string()
        ),
    );
    let true_gate = write("true.json", r#"{"command": "true"}"#);
    let noop_gate = write("noop.json", r#"{"wasm": {"plugin": "noop"}}"#);
    let forbid_gate = write(
        "forbid.json",
        &serde_json::json!({"wasm": {"plugin": "forbid-patterns", "timeoutMs": 60000,
            "config": {"scope": "all", "rules": [{"id": "no-dbg", "pattern": PATTERN}]}}})
        .to_string(),
    );
    let stop = support::claude_stop("bench", &ws);
    let hook = |config: &Path, gates: &Path| {
        let args = support::hook_claude_args(gates, config, &state);
        let run = spawn(&gatehost, &args, &stop);
        assert!(
            run.code == 0 && run.stdout.is_empty(),
            "the hook did not pass: {run:?}"
        );
        run
    };
    let check = |workspace: &Path, config: &Path, gates: &Path| {
        let args: Vec<OsString> = vec![
            "check".into(),
            "--workspace".into(),
            workspace.into(),
            "--config".into(),
            config.into(),
            gates.into(),
            "--json".into(),
        ];
        let run = spawn(&gatehost, &args, b"");
        let report: serde_json::Value = serde_json::from_slice(&run.stdout)
            .unwrap_or_else(|e| panic!("check's stdout is not JSON ({e}): {run:?}"));
        assert!(
            run.code == 0 && report["outcome"] == "pass",
            "the check did not pass: {run:?}"
        );
        run
    };
    let bare_true = |stdin: &[u8]| {
        let run = spawn(&true_path, &[], stdin);
        assert_eq!(run.code, 0, "{run:?}");
        run
    };

    println!(
        "hook_process, {rounds} alternating rounds, whole processes; gatehost: {}",
        gatehost.display()
    );
    println!(
        "containment: {}",
        String::from_utf8_lossy(&check(&ws, &shell_config, &true_gate).stderr).trim()
    );
    // Fill the component cache (the first run compiles each plugin).
    for gates in [&noop_gate, &forbid_gate] {
        let t = Instant::now();
        check(&files, &wasm_config, gates);
        println!(
            "first run of {}, compiling into the empty cache: {:.0} ms",
            gates.file_name().unwrap_or_default().to_string_lossy(),
            t.elapsed().as_secs_f64() * 1e3
        );
    }

    if pair("hook") {
        let (a, b) = support::alternate_with(
            rounds,
            || {},
            || bare_true(&stop),
            || hook(&shell_config, &true_gate),
        );
        report(
            "hook: bare hook (`true`, the Stop JSON on stdin) vs `gatehost hook claude`, shell gate `true`",
            &a,
            &b,
        );
    }
    if pair("check-forbid") {
        let (a, b) = support::alternate_with(
            rounds,
            || {},
            || {
                let args: Vec<OsString> =
                    vec!["-rE".into(), PATTERN.into(), files.as_os_str().into()];
                let run = spawn(&grep_path, &args, b"");
                // 1: no match, every file read.
                assert!(run.code == 1 && run.stdout.is_empty(), "{run:?}");
                run
            },
            || check(&files, &wasm_config, &forbid_gate),
        );
        report(
            "check-forbid: `grep -rE` vs `gatehost check`, forbid-patterns (cached component), 1,000 files",
            &a,
            &b,
        );
    }
    if pair("check-true") {
        let (a, b) = support::alternate_with(
            rounds,
            || {},
            || bare_true(b""),
            || check(&ws, &shell_config, &true_gate),
        );
        report(
            "check-true: bare `true` vs `gatehost check`, shell gate `true`",
            &a,
            &b,
        );
    }
    if pair("startup") {
        let (a, b) = support::alternate_with(
            rounds,
            || {},
            || bare_true(b""),
            || {
                let run = spawn(&gatehost, &["--version".into()], b"");
                assert_eq!(run.code, 0, "{run:?}");
                run
            },
        );
        report(
            "startup: bare `true` vs `gatehost --version` (loading the binary, nothing else)",
            &a,
            &b,
        );
    }
    if pair("hook-no-wasm") {
        let (a, b) = support::alternate_with(
            rounds,
            || {},
            || hook(&wasm_config, &true_gate),
            || hook(&wasm_config, &noop_gate),
        );
        report(
            "hook-no-wasm: `gatehost hook claude`, shell gate `true` vs WASM `noop` (cached component)",
            &a,
            &b,
        );
    }
    if pair("hook-scratch") {
        let (a, b) = support::alternate_with(
            rounds,
            || {},
            || hook(&unbounded_config, &true_gate),
            || hook(&shell_config, &true_gate),
        );
        report(
            "hook-scratch: `gatehost hook claude`, shell gate `true`, scratch on disk (gate_scratch_bytes = 0) vs a tmpfs of 1 GiB",
            &a,
            &b,
        );
    }
    if pair("hook-idle") {
        let pause = || std::thread::sleep(Duration::from_millis(100));
        let (a, b) = support::alternate_with(
            (rounds / 4).max(20),
            pause,
            || bare_true(&stop),
            || hook(&shell_config, &true_gate),
        );
        report(
            "hook-idle: the hook pair, each after a 100 ms pause: bare hook vs `gatehost hook claude`, shell gate `true`",
            &a,
            &b,
        );
    }
    println!(
        "the bench process's own peak (VmHWM): {} KiB",
        vm_hwm_kib().unwrap_or(0)
    );
}

fn report(name: &str, baseline: &[Run], subject: &[Run]) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let times = |r: &[Run]| r.iter().map(|r| r.elapsed).collect::<Vec<_>>();
    let rss = |r: &[Run]| r.iter().map(|r| r.max_rss_kib).collect::<Vec<_>>();
    let (bt, st) = (times(baseline), times(subject));
    let (b50, b90) = (support::quantile(&bt, 0.5), support::quantile(&bt, 0.9));
    let (s50, s90) = (support::quantile(&st, 0.5), support::quantile(&st, 0.9));
    let (br, sr) = (rss(baseline), rss(subject));
    println!(
        "{name}:\n  baseline p50 {:.2} ms, p90 {:.2} ms | subject p50 {:.2} ms, p90 {:.2} ms\n  \
         subject - baseline: p50 {:+.2} ms, p90 {:+.2} ms | subject/baseline (p50) {:.2}x\n  \
         peak RSS (ru_maxrss) p50 / max: baseline {} / {} KiB, subject {} / {} KiB",
        ms(b50),
        ms(b90),
        ms(s50),
        ms(s90),
        ms(s50) - ms(b50),
        ms(s90) - ms(b90),
        s50.as_secs_f64() / b50.as_secs_f64(),
        support::quantile(&br, 0.5),
        br.iter().max().unwrap_or(&0),
        support::quantile(&sr, 0.5),
        sr.iter().max().unwrap_or(&0),
    );
}

fn vm_hwm_kib() -> Option<i64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// A git repository with one commit.
fn git_workspace(ws: &Path) {
    std::fs::create_dir_all(ws.join("src")).expect("mkdir");
    std::fs::write(ws.join("src/lib.rs"), "pub fn f() {}\n").expect("write");
    for args in [
        &["init", "-q"][..],
        &["add", "-A"],
        &[
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.com",
            "commit",
            "-qm",
            "start",
        ],
    ] {
        support::git(Path::new("git"), ws, args);
    }
}
