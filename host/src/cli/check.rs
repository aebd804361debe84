//! `gatehost check`: read and validate every input before anything runs,
//! run the gates, print the report. Bad input is exit 2, never a pass.

use super::CheckArgs;
use super::error::{CliError, CliResult};
use crate::anchor::WorkspaceAnchor;
use crate::config::HostConfig;
use crate::gate::{GateContext, GateRunner, GateSpec, parse_gate_file};
use crate::verdict::{Outcome, OutputTail, RunReport, Verdict};
use std::io::Read;
use std::path::Path;
use std::time::Duration;

/// What a check needs, read and validated before anything runs.
struct Prepared {
    config: HostConfig,
    anchor: WorkspaceAnchor,
    gates: Vec<GateSpec>,
    context: GateContext,
}

/// Runs the check to its exit code (0 pass, 1 fail, 2 error). An input
/// that cannot be read is a [`CliError`]: with `--json` it is printed with
/// the report's `outcome` and `reason` beside it ([`error_report`]).
pub(super) fn check(args: CheckArgs) -> CliResult<i32> {
    let json = args.json;
    let prepared = prepare(&args)?;
    let runtime = gate_runtime(&prepared.gates)?;
    let Prepared {
        config,
        anchor,
        gates,
        context,
    } = prepared;
    let hints = allowlist_hints(&config, &gates);
    let labels: Vec<String> = gates.iter().map(GateSpec::label).collect();
    let progress = super::progress::Progress::start(json, format!("running {}", labels.join(", ")));
    let report = runtime.block_on(async {
        let runner = GateRunner::one_shot(config);
        // Quiet at the default level unless the sandbox is weaker than
        // confined: a person who wants it passes `--log info`.
        if gates.iter().any(GateSpec::is_native) {
            runner.sandbox().log_state();
        }
        let report = runner.run_gates(&gates, &anchor, &context).await;
        runner.end_one_shot();
        report
    });
    // Every gate has ended and been cleaned up: nothing is left for the
    // runtime's shut-down to wait for.
    runtime.shutdown_background();
    drop(progress);
    if json {
        let s = serde_json::to_string(&report)
            .map_err(|e| CliError::new("encode", format!("cannot encode the report: {e}")))?;
        println!("{s}");
    } else {
        print!("{}", render_report(&report));
        for h in hints {
            eprintln!("  hint: {h}");
        }
    }
    Ok(report.outcome.exit_code())
}

/// The runtime a one-shot gate run (`check`, a standalone hook, `plugin
/// run`) uses. Native gates only: this thread alone, as their work is the
/// kernel's (spawning, reading pipes, waiting) and a second thread would
/// only cost its start and the hand-offs to it (0.2-0.3 ms of a hook,
/// BENCHMARKS.md session 12). With a WASM gate: two workers, so that a
/// plugin's evaluation never holds up the other gates nor the run's
/// deadline.
pub(super) fn gate_runtime(gates: &[GateSpec]) -> CliResult<tokio::runtime::Runtime> {
    let mut builder = if !gates.iter().any(|g| g.imp().runs_plugin()) {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(2);
        b
    };
    builder
        .enable_all()
        .build()
        .map_err(|e| CliError::new("runtime", format!("cannot start the async runtime: {e}")))
}

/// `check --json`'s error object: the API's error shape, and the report's
/// `outcome`, `reason` and (empty) `gates` beside it, so a script reading
/// the report's fields reads an error as one.
pub(super) fn error_report(err: &CliError) -> serde_json::Value {
    serde_json::json!({"outcome": "error", "reason": err.message, "gates": []})
}

/// What to do about each of the gates' commands the allowlist refuses:
/// where the allowlist lives and what to add. For the person at the
/// terminal only; a gate's reason never names the operator's files.
fn allowlist_hints(config: &HostConfig, gates: &[GateSpec]) -> Vec<String> {
    let file = match &config.source {
        Some(p) => format!("{}", p.display()),
        None => match dirs::config_dir() {
            Some(d) => format!(
                "{} (create it, or pass --config FILE)",
                d.join("gatehost").join("config.toml").display()
            ),
            None => "a configuration file (--config FILE)".to_string(),
        },
    };
    let mut hints = Vec::new();
    for g in gates {
        let Some(command) = g.imp().allowlisted_command() else {
            continue;
        };
        if let Err(crate::config::AllowError::NotAllowed(cmd)) = config.allow.admit(command) {
            let mut words = cmd.split_whitespace();
            let program = words.next().unwrap_or_default();
            let rest: Vec<&str> = words.collect();
            hints.push(if rest.is_empty() {
                format!(
                    "the allowlist is [shell] allow in {file}: add \"{program}\" there to let gates run it"
                )
            } else {
                format!(
                    "\"command\" names one program: write {{\"command\": \"{program}\", \"args\": {}}}, \
                     and add \"{program}\" to [shell] allow in {file}",
                    serde_json::json!(rest)
                )
            });
        }
    }
    hints.dedup();
    hints
}

fn prepare(args: &CheckArgs) -> CliResult<Prepared> {
    let anchor = WorkspaceAnchor::open(&args.workspace)
        .map_err(|e| CliError::input(e.to_string()).field("--workspace"))?;
    let (config, gates) = load_operator_files(
        args.config.as_deref(),
        &args.gate_file,
        "GATE_FILE",
        &anchor,
        args.trust_workspace_gate_file,
    )?;
    if args.context.as_deref() == Some(Path::new("-"))
        && args.diff.as_deref() == Some(Path::new("-"))
    {
        return Err(CliError::input("--context and --diff cannot both read stdin").field("--diff"));
    }
    let context = GateContext {
        text: args
            .context
            .as_deref()
            .map(|p| read_context(p, "--context"))
            .transpose()?,
        diff: args
            .diff
            .as_deref()
            .map(|p| read_context(p, "--diff"))
            .transpose()?,
        // The operator's own gate file: allowlisted programs take any
        // arguments (the sandbox still confines them).
        trust: crate::config::Trust::Operator,
        ..GateContext::default()
    };
    Ok(Prepared {
        config,
        anchor,
        gates,
        context,
    })
}

/// Reads the operator's two files, the host configuration and the gate
/// file, refusing either inside the workspace (where the supervised agent
/// writes) unless `trust_workspace_gate_file` says so for the gate file.
/// `gate_field` names the gate file's option in errors.
pub(super) fn load_operator_files(
    config: Option<&Path>,
    gate_file: &Path,
    gate_field: &str,
    anchor: &WorkspaceAnchor,
    trust_workspace_gate_file: bool,
) -> CliResult<(HostConfig, Vec<GateSpec>)> {
    let config_path = HostConfig::locate(config);
    if let Some(p) = &config_path
        && p.exists()
        && anchor.contains_host_path(p)
    {
        return Err(CliError::new(
            "config-in-workspace",
            format!(
                "configuration {} is inside the workspace, where the supervised agent can edit it; keep it outside",
                p.display()
            ),
        )
        .field("--config"));
    }
    let config = HostConfig::load(config_path.as_deref())?;
    let shown = gate_file.display();
    if !trust_workspace_gate_file && gate_file.exists() && anchor.contains_host_path(gate_file) {
        return Err(CliError::new(
            "gate-file-in-workspace",
            format!(
                "gate file {shown} is inside the workspace, where the supervised agent can edit it; \
                 keep it outside or pass --trust-workspace-gate-file"
            ),
        )
        .field(gate_field));
    }
    let text = std::fs::read_to_string(gate_file).map_err(|e| {
        CliError::input(format!("cannot read gate file {shown}: {e}")).field(gate_field)
    })?;
    let gates = parse_gate_file(&text).map_err(|e| {
        CliError::new("bad-gate-file", format!("gate file {shown}: {e}"))
            .field(e.field.clone())
            .hint("`gatehost check --help` lists every gate field; `gatehost plugin list --long`, the carried plugins' config")
    })?;
    Ok((config, gates))
}

pub(super) fn read_context(path: &Path, option: &str) -> CliResult<String> {
    let mut bytes = Vec::new();
    if path == Path::new("-") {
        std::io::stdin().read_to_end(&mut bytes).map_err(|e| {
            CliError::input(format!("cannot read {option} from stdin: {e}")).field(option)
        })?;
    } else {
        bytes = std::fs::read(path).map_err(|e| {
            CliError::input(format!("cannot read {option} {}: {e}", path.display())).field(option)
        })?;
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The human rendering: one block per gate that ran, then the result.
pub fn render_report(report: &RunReport) -> String {
    let mut out = String::new();
    for v in &report.gates {
        render_verdict(&mut out, v);
    }
    for s in &report.skipped {
        out.push_str(&format!(
            "SKIP  {s} (not run: an earlier gate did not pass)\n"
        ));
    }
    if report.gates.len() + report.skipped.len() > 1 {
        out.push_str(&format!(
            "result: {} — {}\n",
            report.outcome.as_str().to_uppercase(),
            report.reason
        ));
    }
    out
}

fn render_verdict(out: &mut String, v: &Verdict) {
    let tag = match v.outcome {
        Outcome::Pass => "PASS ",
        Outcome::Fail => "FAIL ",
        Outcome::Error => "ERROR",
    };
    let queued = if v.durations.queued_ms > 0 {
        format!(
            "queued {}, ",
            crate::gate::human_duration(Duration::from_millis(v.durations.queued_ms))
        )
    } else {
        String::new()
    };
    out.push_str(&format!(
        "{tag} {} — {}  [{queued}run {}]\n",
        v.gate,
        v.reason,
        crate::gate::human_duration(Duration::from_millis(v.durations.run_ms))
    ));
    render_findings(out, &v.findings);
    if v.outcome != Outcome::Pass {
        for (name, tail) in [("stdout", &v.stdout), ("stderr", &v.stderr)] {
            if let Some(t) = tail {
                render_tail(out, name, t);
            }
        }
    }
}

/// The findings shown under a gate, at most; the rest are counted.
const FINDINGS_SHOWN: usize = 20;

/// A gate's findings as the JSON has them, one a line: `path:line:
/// severity: message` (the place as far as the finding gives one), at
/// most [`FINDINGS_SHOWN`], then how many more.
fn render_findings(out: &mut String, findings: &[crate::verdict::Finding]) {
    for f in findings.iter().take(FINDINGS_SHOWN) {
        let place = match (&f.path, f.line) {
            (Some(p), Some(l)) => format!("{p}:{l}: "),
            (Some(p), None) => format!("{p}: "),
            (None, Some(l)) => format!("line {l}: "),
            (None, None) => String::new(),
        };
        let severity = serde_json::to_value(f.severity)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let message: String = f.message.chars().take(200).collect();
        let message = message.replace(['\n', '\r'], " ");
        out.push_str(&format!("      {place}{severity}: {message}\n"));
    }
    if findings.len() > FINDINGS_SHOWN {
        out.push_str(&format!(
            "      … and {} more finding(s) (--json has them all)\n",
            findings.len() - FINDINGS_SHOWN
        ));
    }
}

fn render_tail(out: &mut String, name: &str, tail: &OutputTail) {
    const LINES: usize = 12;
    let text = tail.text.trim_end();
    if text.is_empty() {
        return;
    }
    let lines: Vec<&str> = text.lines().collect();
    let shown = &lines[lines.len().saturating_sub(LINES)..];
    let cut = if tail.truncated {
        format!(
            ", output cut: {} bytes in all, the tail was kept",
            tail.total_bytes
        )
    } else {
        String::new()
    };
    out.push_str(&format!(
        "      {name} (last {} line(s){cut}):\n",
        shown.len()
    ));
    for l in shown {
        let l: String = l.chars().take(200).collect();
        out.push_str(&format!("      | {l}\n"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::runtime::RuntimeFlavor;

    fn flavor(gates: &str) -> RuntimeFlavor {
        let gates = parse_gate_file(gates).expect("gates");
        gate_runtime(&gates)
            .expect("runtime")
            .handle()
            .runtime_flavor()
    }

    #[test]
    fn the_human_report_lists_a_gates_findings_bounded() {
        use crate::verdict::{Finding, Severity};
        let mut v = Verdict::new(Outcome::Fail, "wasm: lint.wasm", "2 findings");
        v.findings = (0..FINDINGS_SHOWN + 3)
            .map(|i| Finding {
                path: Some("src/lib.rs".into()),
                line: Some(i as u32 + 1),
                severity: Severity::Error,
                message: format!("no-todo: TODO left\nin {i}"),
            })
            .collect();
        v.findings[1].line = None;
        v.findings[2].path = None;
        let report = RunReport {
            outcome: Outcome::Fail,
            reason: "r".into(),
            durations: Default::default(),
            gates: vec![v],
            skipped: vec![],
        };
        let text = render_report(&report);
        assert!(
            text.contains("\n      src/lib.rs:1: error: no-todo: TODO left in 0\n"),
            "{text}"
        );
        assert!(
            text.contains("\n      src/lib.rs: error: no-todo"),
            "{text}"
        );
        assert!(text.contains("\n      line 3: error: no-todo"), "{text}");
        let last = format!("src/lib.rs:{FINDINGS_SHOWN}: error");
        assert!(text.contains(&last), "{text}");
        let cut = format!("src/lib.rs:{}: error", FINDINGS_SHOWN + 1);
        assert!(!text.contains(&cut), "{text}");
        assert!(
            text.contains("      … and 3 more finding(s) (--json has them all)\n"),
            "{text}"
        );
    }

    #[test]
    fn native_gates_run_on_this_thread_and_a_wasm_gate_gets_two_workers() {
        assert_eq!(
            flavor(r#"[{"command": "true"}, {"judge": {"adapter": "a", "prompt": "p"}}]"#),
            RuntimeFlavor::CurrentThread
        );
        assert_eq!(
            flavor(r#"[{"command": "true"}, {"wasm": {"plugin": "p.wasm"}}]"#),
            RuntimeFlavor::MultiThread
        );
    }
}
