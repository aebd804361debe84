//! The hostile corpus (tests/support/hostile-plugins/) and the host's bounds: time,
//! fuel, memory, output, findings, logs, judge calls, the read-only
//! workspace that cannot be escaped, FIFOs and sparse files; each with its
//! outcome, reason and time bound.

use super::{
    HOSTILE_BOUND, assert_denied, assert_trapped, gate, hostile, plugin_file, sha256_of,
    shared_cache, style_review_setup, wasm_config, wasm_config_in,
};
use crate::common;
use common::*;
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

/// One test a case: the hostile plugin in `mode`, with `arg` and the gate
/// keys `extra` (the shared cache and [`HOSTILE_BOUND`], as
/// [`hostile`]), ends with exit `code` and exactly `reason`; then the
/// case's own checks, if any, on `run`.
macro_rules! hostile_cases {
    ($($name:ident: $mode:literal, $arg:literal, $extra:tt => $code:literal, $reason:literal
        $(, |$run:ident| $then:block)?;)*) => {
        $(
            #[test]
            fn $name() {
                let s = Scratch::new();
                let run = hostile(&s, $mode, $arg, json!($extra));
                assert_reason(&run, $code, $reason);
                $(let $run = &run; $then)?
            }
        )*
    };
}

hostile_cases! {
    an_infinite_loop_is_stopped_by_the_wall_clock: "loop", "", {"timeoutMs": 300, "fuel": 500_000_000_000u64}
        => 2, "plugin 'hostile' timed out after 300 ms", |run| {
            assert_eq!(run.gate0()["timedOut"], true);
            assert!(run.elapsed < Duration::from_secs(3), "took {:?}", run.elapsed);
        };
    an_infinite_loop_is_stopped_by_fuel_deterministically: "loop", "", {"timeoutMs": 60000, "fuel": 50_000_000}
        => 2, "plugin 'hostile' ran out of fuel (its budget is 50000000 instructions)";
    memory_growth_hits_the_summed_memory_limit_and_the_host_stays_small: "memory", "", {"memoryMiB": 32}
        => 2, "plugin 'hostile' exceeded its memory limit of 32 MiB", |run| {
            run.assert_host_stayed_under_mib(200);
        };
    an_output_flood_hits_the_output_limit: "flood", "", {"maxOutputBytes": 4096}
        => 2, "plugin 'hostile' exceeded its output limit of 4096 bytes", |run| {
            let out = &run.gate0()["stdout"];
            assert!(out["totalBytes"].as_u64().unwrap() <= 4096);
            assert_eq!(out["truncated"], true);
        };
    // 8 MiB written against a 64 KiB bound, every failed write ignored.
    output_past_the_bound_is_an_error_even_when_the_plugin_ignores_it_and_passes: "flood-then-pass", "8", {}
        => 2, "plugin 'hostile' exceeded its output limit of 65536 bytes", |run| {
            assert_eq!(run.gate0()["stdout"]["truncated"], true);
        };
    an_oversized_verdict_hits_the_output_limit: "big-string", "", {}
        => 2, "plugin 'hostile' exceeded its output limit of 65536 bytes";
    the_plugin_sees_no_environment_and_no_arguments: "env", "", {}
        => 1, "no environment, no arguments";
    judge_calls_in_a_loop_hit_the_judge_call_limit: "judge-loop", "", {"maxJudgeCalls": 2, "judge": {"adapter": "yes"}}
        => 2, "plugin 'hostile' exceeded its limit of 2 judge call(s) per evaluation";
}

#[test]
fn deep_recursion_traps_cleanly() {
    let s = Scratch::new();
    let run = hostile(&s, "recursion", "", json!({}));
    assert_trapped(&run);
    assert_has(&run.reason(), "stack");
}

#[test]
fn a_plugin_asleep_in_a_host_call_is_stopped_at_its_timeout() {
    let s = Scratch::new();
    let started = std::time::Instant::now();
    // Sleeps 600 s inside a WASI poll, which epochs do not interrupt.
    let run = hostile(&s, "sleep", "600", json!({"timeoutMs": 1000}));
    let took = started.elapsed();
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert_starts(&run.reason(), "plugin 'hostile' timed out after");
    // Within timeoutMs + 500 ms (plus the process's own start).
    assert!(took < Duration::from_millis(2500), "took {took:?}");
}

/// `tests/support/hostile-plugins/table-grow.wat` as a component of the
/// `gate-plugin` world, written into `dir`; returns its path.
fn table_grow_component(dir: &std::path::Path) -> PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut module =
        wat::parse_file(root.join("tests/support/hostile-plugins/table-grow.wat")).expect("wat");
    let mut resolve = wit_parser::Resolve::default();
    let (pkg, _) = resolve.push_dir(root.join("wit/v0.1")).expect("wit");
    let world = resolve
        .select_world(&[pkg], Some("gate-plugin"))
        .expect("world");
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
    )
    .expect("metadata");
    let component = wit_component::ComponentEncoder::default()
        .module(&module)
        .expect("module")
        .validate(true)
        .encode()
        .expect("component");
    let path = dir.join("table_grow.wasm");
    std::fs::write(&path, component).expect("write");
    path
}

/// Table entries are memory: a plugin growing its funcref table without
/// end is stopped at its memoryMiB (before, tables were not counted: it
/// grew to the pool's 200,000-entry limit and trapped, never naming the
/// bound), and the host stays small.
#[test]
fn table_growth_counts_against_the_memory_bound() {
    let s = Scratch::new();
    let plugin = table_grow_component(&s.etc);
    let g = json!({"wasm": {"plugin": plugin.display().to_string(),
        "sha256": sha256_of(&plugin), "memoryMiB": 2}})
    .to_string();
    for pooling in [true, false] {
        let cfg = wasm_config(&s, &format!("pooling = {pooling}"));
        let run = s.check(&cfg, &g, &[]);
        assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
        assert_eq!(
            run.reason(),
            "plugin 'table_grow' exceeded its memory limit of 2 MiB",
            "pooling = {pooling}"
        );
        run.assert_host_stayed_under_mib(200);
    }
}

/// The gate's timeoutMs bounds everything the evaluation waits on, its
/// judge calls included (issue 24, item 9): a plugin whose judge hangs,
/// with the judge's own timeoutMs at 20 s and three calls allowed, is
/// stopped at its 2 s (before: about 60 s, three judge timeouts); a judge
/// that answers after 1.5 s under a 1 s timeoutMs times the plugin out;
/// the same judge under 4 s passes; a plugin that sleeps is stopped at
/// timeoutMs + 500 ms.
#[test]
fn a_wasm_gate_timeout_bounds_its_judge_calls() {
    let s = Scratch::new();
    let m = marker("wasm-judge-hang");
    let cfg = format!(
        "{}[judge.adapters.slow]\ncommand = [\"bash\", \"-c\", \"cat >/dev/null; sleep 1.5; echo 'VERDICT: PASS'\"]\n\
         [judge.adapters.hang]\ncommand = [\"bash\", \"-c\", \"cat >/dev/null; sleep 600\", \"gatehost-test-{m}\"]\n",
        wasm_config_in(&shared_cache(), "")
    );
    let run = |mode: &str, arg: &str, adapter: &str, timeout_ms: u64| {
        let started = std::time::Instant::now();
        let run = s.check(
            &cfg,
            &gate(
                "hostile",
                json!({"mode": mode, "arg": arg}),
                json!({"timeoutMs": timeout_ms, "maxJudgeCalls": 3,
                       "judge": {"adapter": adapter, "timeoutMs": 20000}}),
            ),
            &[],
        );
        (run, started.elapsed())
    };
    let timed_out = |r: &CliRun| r.reason().starts_with("plugin 'hostile' timed out after");

    let (hung, took) = run("judge-loop", "", "hang", 2000);
    assert_eq!(hung.code, 2, "{}", hung.stdout);
    assert!(timed_out(&hung), "{}", hung.reason());
    // 2 s + the 500 ms backstop, plus a loaded machine's process start;
    // the judge's own bound would make it 60 s.
    assert!(took < Duration::from_secs(8), "took {took:?}");
    assert_no_survivors(&m);

    let (slow, _) = run("judge-once", "0", "slow", 1000);
    assert_eq!(slow.code, 2, "{}", slow.stdout);
    assert!(timed_out(&slow), "{}", slow.reason());

    let (judged, took) = run("judge-once", "0", "slow", 4000);
    assert_reason(&judged, 0, "the judge passed it");
    assert!(took >= Duration::from_millis(1500), "took {took:?}");

    let (asleep, took) = run("sleep", "600", "yes", 1000);
    assert_eq!(asleep.code, 2, "{}", asleep.stdout);
    assert!(timed_out(&asleep), "{}", asleep.reason());
    assert!(took < Duration::from_millis(4000), "took {took:?}");
}

#[test]
fn a_million_empty_findings_are_refused_by_count() {
    let s = Scratch::new();
    let run = hostile(
        &s,
        "findings",
        "1000000",
        json!({"maxOutputBytes": 16777216}),
    );
    assert_eq!(run.code, 2, "{}", &run.stdout[..run.stdout.len().min(400)]);
    assert_eq!(
        run.reason(),
        "plugin 'hostile' gave 1000000 findings; the host keeps at most 1000 ([wasm] max_findings)"
    );
    // The report stays small: the findings were never copied into it.
    assert!(run.stdout.len() < 64 * 1024, "{} bytes", run.stdout.len());
    // Empty findings are not free: 1,000 of them overflow a 16 KiB bound.
    let run = hostile(&s, "findings", "1000", json!({"maxOutputBytes": 16384}));
    assert_eq!(
        run.reason(),
        "plugin 'hostile' exceeded its output limit of 16384 bytes"
    );
}

#[test]
fn the_log_import_cannot_flood_the_hosts_log() {
    let s = Scratch::new();
    let run = hostile(&s, "log-flood", "100000", json!({}));
    assert_eq!(run.code, 0, "{}", run.stdout);
    // gatehost check logs at warn by default: the plugin's warn lines
    // show, but only the first 200, and the rest is counted once.
    let lines = run.stderr.lines().filter(|l| l.contains("flood ")).count();
    assert!(lines <= 200, "{lines} log lines reached stderr");
    assert!(lines >= 1, "{}", &run.stderr[..run.stderr.len().min(400)]);
    assert!(
        run.stderr.contains("were dropped") && run.stderr.contains("99800"),
        "{}",
        &run.stderr[run.stderr.len().saturating_sub(600)..]
    );
    assert!(
        run.stderr.len() < 200 * 1024,
        "{} bytes of stderr",
        run.stderr.len()
    );
}

#[test]
fn the_workspace_cannot_be_escaped_by_dotdot_absolute_paths_or_symlinks() {
    let s = Scratch::new();
    s.write("secret.txt", "top secret");
    s.write_ws("inside.txt", "fine");
    std::os::unix::fs::symlink(s.etc.join("secret.txt"), s.ws.join("abs-link")).unwrap();
    std::os::unix::fs::symlink("../etc/secret.txt", s.ws.join("rel-link")).unwrap();
    let secret = arg(&s.etc.join("secret.txt"));
    for path in [
        "/workspace/../etc/secret.txt",
        "../etc/secret.txt",
        &secret,
        "/etc/passwd",
        "/workspace/abs-link",
        "/workspace/rel-link",
    ] {
        let run = hostile(&s, "read", path, json!({}));
        assert_denied(&run, path);
    }
    for dir in ["/workspace/..", "/", "/tmp"] {
        let run = hostile(&s, "list", dir, json!({}));
        assert_eq!(run.code, 1, "{dir}: {}", run.reason());
    }
    // A file inside is readable: the plugin passes ("ESCAPED" is its word
    // for any success).
    let run = hostile(&s, "read", "/workspace/inside.txt", json!({}));
    assert_eq!(run.code, 0, "{}", run.reason());

    // The same escapes through the host's `read-files` (paths relative to
    // the workspace), plus a FIFO that would hang a blocking open.
    let fifo = std::ffi::CString::new(s.ws.join("fifo").display().to_string()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    for path in [
        "../etc/secret.txt",
        &secret,
        "/etc/passwd",
        "abs-link",
        "rel-link",
        "fifo",
        "missing",
    ] {
        let run = hostile(&s, "host-read", path, json!({}));
        assert_denied(&run, path);
    }
    // The kit's WASI reader reads a file larger than one WASI read (64 KiB)
    // whole, not cut at the first short answer.
    s.write_ws("large.txt", &"y".repeat(300_001));
    let run = hostile(&s, "kit-read", "large.txt", json!({}));
    assert_eq!(run.reason(), "ESCAPED: 300001", "{}", run.stdout);
    let run = hostile(&s, "host-read", "inside.txt", json!({}));
    assert_eq!(run.code, 0, "{}", run.reason());
    assert_has(&run.reason(), "fine");
    // The host's listing holds regular files only, no link, no FIFO.
    let run = hostile(&s, "host-list", "", json!({}));
    assert_reason(&run, 1, "listed: inside.txt large.txt");
}

/// A plugin asking the host to read a 1 MiB file 4,000 times in one call is
/// refused as a whole once the files would exceed its memory budget, in
/// time, and the host's own memory stays small.
#[test]
fn host_reads_are_bounded_by_the_plugin_memory_budget() {
    let s = Scratch::new();
    s.write_ws("big.txt", &"x".repeat(1024 * 1024));
    let run = hostile(&s, "host-read-flood", "big.txt", json!({"memoryMiB": 16}));
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert_has(&run.reason(), "memory budget of 16777216 bytes");
    run.assert_host_stayed_under_mib(200);
}

#[test]
fn the_workspace_is_read_only_writes_renames_and_trailing_slashes_included() {
    let s = Scratch::new();
    s.write_ws("a.txt", "original");
    std::fs::create_dir_all(s.ws.join("dir")).unwrap();
    let cases = [
        ("write", "/workspace/new.txt"),
        ("write", "/workspace/a.txt"),
        ("write", "/workspace/dir/"),
        ("write", "/workspace/new-dir/"),
        ("mkdir", "/workspace/made"),
        ("mkdir", "/workspace/made/"),
        ("rename", "/workspace/a.txt /workspace/b.txt"),
        ("rename", "/workspace/dir/ /workspace/dir2/"),
        ("rename", "/workspace/a.txt /workspace/../escaped.txt"),
    ];
    for (mode, arg) in cases {
        let run = hostile(&s, mode, arg, json!({}));
        assert_denied(&run, &format!("{mode} {arg}"));
    }
    assert_eq!(
        std::fs::read_to_string(s.ws.join("a.txt")).unwrap(),
        "original"
    );
    for gone in ["new.txt", "b.txt", "made", "new-dir", "dir2"] {
        assert!(!s.ws.join(gone).exists(), "{gone} was created");
    }
    assert!(!s.ws.join("../escaped.txt").exists());
}

#[test]
fn a_panic_and_a_reported_error_are_errors_and_a_fail_keeps_its_findings() {
    let s = Scratch::new();
    let run = hostile(&s, "panic", "", json!({}));
    assert_trapped(&run);
    assert!(
        run.gate0()["stderr"]["text"]
            .as_str()
            .unwrap()
            .contains("panicked on purpose")
    );
    let run = hostile(&s, "error", "", json!({}));
    assert_reason(
        &run,
        2,
        "plugin 'hostile' reported an error: the plugin could not decide",
    );
    let run = hostile(&s, "fail", "", json!({}));
    assert_reason(&run, 1, "said no");
    assert_eq!(
        run.gate0()["findings"][0],
        json!({"path": "src/lib.rs", "line": 3, "severity": "error", "message": "bad line"})
    );
}

/// `gatehost plugin inspect … | head -0`: the reader is gone before the
/// first line. The command ends quietly (SIGPIPE, as Unix tools do), with
/// no panic on stderr.
#[test]
fn an_output_command_whose_reader_is_gone_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gatehost"))
        .args(["plugin", "inspect"])
        .arg(plugin_file("noop"))
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("run gatehost");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_lacks(&stderr, "panicked");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?} {stderr}",
        out.status
    );
}

fn mkfifo(path: &std::path::Path) {
    let c = std::ffi::CString::new(path.display().to_string()).expect("path");
    // SAFETY: mkfifo(3) with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// A FIFO the agent plants in the workspace, opened through WASI (whose
/// open would wait in the kernel for a writer, on the evaluating thread,
/// where no timer reaches): refused at once, the gate resolves in time.
#[test]
fn a_fifo_opened_through_wasi_is_refused_not_waited_on() {
    let s = Scratch::new();
    mkfifo(&s.ws.join("STYLE.md"));
    let started = std::time::Instant::now();
    let run = hostile(
        &s,
        "read",
        "/workspace/STYLE.md",
        json!({"timeoutMs": 2000}),
    );
    assert_denied(&run, "STYLE.md");
    assert_within(started, Duration::from_millis(2500));
    assert_has(&run.stderr, "open of a FIFO was refused");
    // The shipped style-review, its guide a FIFO: an error naming the
    // guide, in time.
    let (cfg, diff) = style_review_setup(&s);
    let g = gate(
        "style-review",
        json!({"guide": "STYLE.md"}),
        json!({"judge": {"adapter": "style", "timeoutMs": 10000}, "timeoutMs": 2000}),
    );
    let started = std::time::Instant::now();
    let run = s.check(&cfg, &g, &["--diff", &diff]);
    assert_refused(&run, "cannot read the style guide STYLE.md");
    assert_within(started, HOSTILE_BOUND);
}

/// A 1 TiB sparse file read through `read-files` with no cap of the
/// plugin's own (`maxFileBytes: u64::MAX`, as a plugin config may say):
/// refused against the memory budget before anything is allocated (it
/// aborted the daemon before), in time, the host small; the kit then reads
/// it through WASI, and the plugin's memory bound stops it.
#[test]
fn a_sparse_terabyte_file_never_makes_the_host_allocate() {
    let s = Scratch::new();
    let big = std::fs::File::create(s.ws.join("sparse.bin")).expect("create");
    big.set_len(1 << 40).expect("a 1 TiB hole");
    let run = hostile(
        &s,
        "host-read-uncapped",
        "sparse.bin",
        json!({"memoryMiB": 64}),
    );
    // Refused by the host, the kit falls back to its WASI reader, which
    // the plugin's own memory bound stops.
    assert_reason(
        &run,
        2,
        "plugin 'hostile' exceeded its memory limit of 64 MiB",
    );
    run.assert_host_stayed_under_mib(200);
    let run = hostile(
        &s,
        "read",
        "/workspace/sparse.bin",
        json!({"memoryMiB": 64}),
    );
    // std's read_to_string asks for the whole size up front: the memory
    // bound refuses it, and the plugin reports that.
    assert_reason(&run, 1, "denied: out of memory");
    run.assert_host_stayed_under_mib(200);
}
