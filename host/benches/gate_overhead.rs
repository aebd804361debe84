//! Overhead of a gate over spawning the same program directly.
//!
//! Run: `cargo bench -p gatehost --bench gate_overhead` (add `-- --rounds N`,
//! and `--pause-ms N` to sleep N ms, untimed, before every step of the
//! sandbox case, as gates come after an agent's turn: back to back, the
//! kernel's cgroup migration lock stays warm from the last gate; after a
//! pause a v1 join waits for an RCU grace period; `--only sandbox` runs
//! that case alone; `--load N` starts N busy processes for the run, a load
//! generator).
//!
//! Each round runs the baseline and the gate once, alternating, so that
//! both see the same machine noise; the report gives medians, p90 and the
//! ratio of medians. Cases:
//! - sandbox: in one alternation, `/usr/bin/true` spawned directly, a
//!   shell gate running `true` unconfined (`[sandbox] enabled = false`)
//!   and the same gate confined (the default), and confined by a
//!   supervisor that makes no start ahead (each gate joins its cgroup v1
//!   hierarchies as it starts, where gates join any: the way before issue
//!   52), and confined with its scratch on disk (`gate_scratch_bytes = 0`:
//!   no mount namespace of its own); then the same as whole processes:
//!   `gatehost check` on that gate, unconfined and confined, against
//!   `/usr/bin/true`;
//! - shell: a shell gate running `true` vs `std::process::Command` running
//!   `/usr/bin/true` with stdout and stderr captured;
//! - judge: a judge gate whose adapter answers at once (`echo VERDICT: PASS`)
//!   vs spawning that `echo` directly, writing the same prompt to its stdin
//!   and capturing its output;
//! - shell without cgroups: the shell case with the fallback containment.

mod support;

use gatehost::anchor::WorkspaceAnchor;
use gatehost::config::HostConfig;
use gatehost::gate::{GateContext, GateRunner, parse_gate_file};
use gatehost::verdict::Outcome;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn main() {
    let rounds = std::env::args()
        .skip_while(|a| a != "--rounds")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(2000usize);
    let _load = support::Load::start(support::arg("--load", 0));
    println!(
        "load generator: {} busy process(es); load average {:.1}",
        _load.len(),
        support::loadavg()
    );
    let ws = tempfile::tempdir().expect("tempdir");
    let anchor = WorkspaceAnchor::open(ws.path()).expect("workspace");
    let config = HostConfig::from_toml(
        "[shell]\nallow = [\"true\"]\n[judge.adapters.instant]\ncommand = [\"echo\", \"VERDICT: PASS\"]\n",
        "bench",
    )
    .expect("config");
    let true_path = config.allow.admit("true").expect("true is on PATH");
    let echo_path = which::which("echo").expect("echo is on PATH");
    let runner = GateRunner::new(config);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let shell = parse_gate_file(r#"{"command": "true"}"#)
        .expect("gate")
        .remove(0);
    let judge =
        parse_gate_file(r#"{"judge": {"adapter": "instant", "prompt": "Is the change tested?"}}"#)
            .expect("gate")
            .remove(0);
    let ctx = GateContext {
        text: Some("diff --git a/src/lib.rs b/src/lib.rs\n+fn added() {}\n".repeat(20)),
        ..GateContext::default()
    };
    let prompt = gatehost::gate::prompt::build(
        "Is the change tested?",
        ctx.text.as_deref(),
        None,
        "0123456789abcdef0123456789abcdef",
    );

    println!(
        "gate overhead, {rounds} alternating rounds, containment: {}",
        runner.supervisor().containment()
    );
    println!("{}", runner.sandbox().describe());
    let pause = Duration::from_millis(
        std::env::args()
            .skip_while(|a| a != "--pause-ms")
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(0),
    );
    sandbox_cost(rounds, pause, &rt, &anchor, &ctx, &shell, &true_path);
    if std::env::args().any(|a| a == "--only") {
        return;
    }
    let shell_case = measure(
        rounds,
        || spawn_directly(&true_path),
        || {
            let v = rt.block_on(runner.run_gate(&shell, &anchor, &ctx));
            assert_eq!(v.outcome, Outcome::Pass, "{v:?}");
        },
    );
    report("shell gate `true`", &shell_case);
    let judge_case = measure(
        rounds,
        || {
            let mut child = Command::new(&echo_path)
                .arg("VERDICT: PASS")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn echo");
            if let Some(mut stdin) = child.stdin.take() {
                let _ = stdin.write_all(prompt.as_bytes());
            }
            let out = child.wait_with_output().expect("wait echo");
            assert!(out.status.success());
        },
        || {
            let v = rt.block_on(runner.run_gate(&judge, &anchor, &ctx));
            assert_eq!(v.outcome, Outcome::Pass, "{v:?}");
        },
    );
    report("judge gate, instant adapter", &judge_case);

    // The same shell gate where cgroups are not used (process group plus
    // the subreaper sweep, which reads the process table after each gate).
    let fallback = GateRunner::with_supervisor(
        HostConfig::from_toml("[shell]\nallow = [\"true\"]\n", "bench").expect("config"),
        gatehost::supervise::Supervisor::without_cgroups(),
    );
    let fallback_case = measure(
        rounds,
        || spawn_directly(&true_path),
        || {
            let v = rt.block_on(fallback.run_gate(&shell, &anchor, &ctx));
            assert_eq!(v.outcome, Outcome::Pass, "{v:?}");
        },
    );
    report("shell gate `true`, without cgroups", &fallback_case);
}

/// The sandbox's cost: bare spawn, gate unconfined, gate confined,
/// alternated in every round; then whole `gatehost check` runs.
fn sandbox_cost(
    rounds: usize,
    pause: Duration,
    rt: &tokio::runtime::Runtime,
    anchor: &WorkspaceAnchor,
    ctx: &GateContext,
    shell: &gatehost::gate::GateSpec,
    true_path: &std::path::Path,
) {
    let confined = GateRunner::new(
        HostConfig::from_toml("[shell]\nallow = [\"true\"]\n", "bench").expect("config"),
    );
    let unconfined = GateRunner::new(
        HostConfig::from_toml(
            "[shell]\nallow = [\"true\"]\n[sandbox]\nenabled = false\n",
            "bench",
        )
        .expect("config"),
    );
    // No scratch tmpfs, so no mount namespace of its own: what the
    // namespace (made, held, let go after the reap) costs a gate.
    let no_scratch = GateRunner::new(
        HostConfig::from_toml(
            "[shell]\nallow = [\"true\"]\n[limits]\ngate_scratch_bytes = 0\n",
            "bench",
        )
        .expect("config"),
    );
    let joining = GateRunner::with_supervisor(
        HostConfig::from_toml("[shell]\nallow = [\"true\"]\n", "bench").expect("config"),
        gatehost::supervise::Supervisor::new(),
    );
    assert!(
        confined.sandbox().confines(),
        "{}",
        confined.sandbox().describe()
    );
    println!(
        "a start made ahead (cgroup v1 joins paid before the gate): {}; pause before each step: {} ms",
        confined.supervisor().has_ready_start(),
        pause.as_millis()
    );
    let mut samples: [Vec<Duration>; 5] = Default::default();
    let mut steps: [Box<dyn FnMut() + '_>; 5] = [
        Box::new(|| spawn_directly(true_path)),
        Box::new(|| {
            let v = rt.block_on(unconfined.run_gate(shell, anchor, ctx));
            assert_eq!(v.outcome, Outcome::Pass, "{v:?}");
        }),
        Box::new(|| {
            let v = rt.block_on(confined.run_gate(shell, anchor, ctx));
            assert_eq!(v.outcome, Outcome::Pass, "{v:?}");
        }),
        Box::new(|| {
            let v = rt.block_on(joining.run_gate(shell, anchor, ctx));
            assert_eq!(v.outcome, Outcome::Pass, "{v:?}");
        }),
        Box::new(|| {
            let v = rt.block_on(no_scratch.run_gate(shell, anchor, ctx));
            assert_eq!(v.outcome, Outcome::Pass, "{v:?}");
        }),
    ];
    alternate_timed(rounds, pause, &mut steps, &mut samples);
    let names = [
        "bare spawn of /usr/bin/true",
        "shell gate `true`, unconfined",
        "shell gate `true`, confined (default)",
        "shell gate `true`, confined, joining at its start",
        "shell gate `true`, confined, scratch on disk (no mount namespace)",
    ];
    print_against(&names, &mut samples);

    // Whole processes: what a hook or a script pays per `gatehost check`.
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).expect("write");
        p
    };
    let on = write("on.toml", "[shell]\nallow = [\"true\"]\n");
    let off = write(
        "off.toml",
        "[shell]\nallow = [\"true\"]\n[sandbox]\nenabled = false\n",
    );
    let gate = write("gate.json", r#"{"command": "true"}"#);
    let check = |config: &std::path::Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_gatehost"))
            .arg("check")
            .arg("--config")
            .arg(config)
            .arg("--workspace")
            .arg(anchor.root())
            .arg(&gate)
            .stdin(Stdio::null())
            .output()
            .expect("gatehost check");
        assert!(out.status.success(), "{out:?}");
    };
    let whole_rounds = (rounds / 10).max(20);
    let mut samples: [Vec<Duration>; 3] = Default::default();
    let mut steps: [Box<dyn FnMut() + '_>; 3] = [
        Box::new(|| spawn_directly(true_path)),
        Box::new(|| check(&off)),
        Box::new(|| check(&on)),
    ];
    alternate(whole_rounds, &mut steps, &mut samples);
    let names = [
        "bare spawn of /usr/bin/true",
        "`gatehost check`, shell gate `true`, unconfined",
        "`gatehost check`, shell gate `true`, confined",
    ];
    print_against(&names, &mut samples);
}

/// [`alternate`], sleeping `pause` (not timed) before every step.
fn alternate_timed<const N: usize>(
    rounds: usize,
    pause: Duration,
    steps: &mut [Box<dyn FnMut() + '_>; N],
    samples: &mut [Vec<Duration>; N],
) {
    for _ in 0..rounds / 10 + 5 {
        for step in steps.iter_mut() {
            std::thread::sleep(pause);
            step();
        }
    }
    for _ in 0..rounds {
        for (step, out) in steps.iter_mut().zip(samples.iter_mut()) {
            std::thread::sleep(pause);
            let t = Instant::now();
            step();
            out.push(t.elapsed());
        }
    }
}

/// Runs every step once per round, in order, after a warm-up.
fn alternate<const N: usize>(
    rounds: usize,
    steps: &mut [Box<dyn FnMut() + '_>; N],
    samples: &mut [Vec<Duration>; N],
) {
    for _ in 0..rounds / 10 + 5 {
        for step in steps.iter_mut() {
            step();
        }
    }
    for _ in 0..rounds {
        for (step, out) in steps.iter_mut().zip(samples.iter_mut()) {
            let t = Instant::now();
            step();
            out.push(t.elapsed());
        }
    }
}

/// Medians and p90 of each step, and each median as a ratio of the first.
fn print_against(names: &[&str], samples: &mut [Vec<Duration>]) {
    let base = quantile(&mut samples[0], 0.5).as_secs_f64();
    for (name, s) in names.iter().zip(samples.iter_mut()) {
        let (p50, p90) = (quantile(s, 0.5), quantile(s, 0.9));
        println!(
            "{name}: p50 {:.0} us, p90 {:.0} us, {:.2}x the bare spawn",
            p50.as_secs_f64() * 1e6,
            p90.as_secs_f64() * 1e6,
            p50.as_secs_f64() / base
        );
    }
}

/// The baseline: the program spawned directly, its output captured.
fn spawn_directly(program: &std::path::Path) {
    let out = Command::new(program)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("spawn");
    assert!(out.status.success());
}

struct Case {
    baseline: Vec<Duration>,
    gate: Vec<Duration>,
}

fn measure(rounds: usize, mut baseline: impl FnMut(), mut gate: impl FnMut()) -> Case {
    for _ in 0..rounds / 10 + 10 {
        baseline();
        gate();
    }
    let mut case = Case {
        baseline: Vec::with_capacity(rounds),
        gate: Vec::with_capacity(rounds),
    };
    for _ in 0..rounds {
        let t = Instant::now();
        baseline();
        case.baseline.push(t.elapsed());
        let t = Instant::now();
        gate();
        case.gate.push(t.elapsed());
    }
    case
}

fn quantile(samples: &mut [Duration], q: f64) -> Duration {
    samples.sort();
    let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
    samples[i]
}

fn report(name: &str, case: &Case) {
    let (mut b, mut g) = (case.baseline.clone(), case.gate.clone());
    let (b50, b90) = (quantile(&mut b, 0.5), quantile(&mut b, 0.9));
    let (g50, g90) = (quantile(&mut g, 0.5), quantile(&mut g, 0.9));
    println!(
        "{name}: bare spawn p50 {:.0} us, p90 {:.0} us | gate p50 {:.0} us, p90 {:.0} us | ratio of medians {:.2}x",
        b50.as_secs_f64() * 1e6,
        b90.as_secs_f64() * 1e6,
        g50.as_secs_f64() * 1e6,
        g90.as_secs_f64() * 1e6,
        g50.as_secs_f64() / b50.as_secs_f64()
    );
}
