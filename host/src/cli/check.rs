//! `gatehost check`: read and validate every input before anything runs,
//! run the gates, print the report. Bad input is exit 2, never a pass.

use super::CheckArgs;
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

pub(super) fn check(args: CheckArgs) -> i32 {
    let json = args.json;
    let prepared = match prepare(&args) {
        Ok(p) => p,
        Err(reason) => {
            tracing::error!(%reason, "check could not start");
            if json {
                let report = serde_json::json!({"outcome": "error", "reason": reason, "gates": []});
                println!("{report}");
            } else {
                eprintln!("gatehost: error: {reason}");
            }
            return Outcome::Error.exit_code();
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("gatehost: error: cannot start the async runtime: {e}");
            return Outcome::Error.exit_code();
        }
    };
    let Prepared {
        config,
        anchor,
        gates,
        context,
    } = prepared;
    let report = runtime.block_on(async {
        let runner = GateRunner::new(config);
        if gates.iter().any(GateSpec::is_native) {
            eprintln!("gatehost: {}", runner.sandbox().describe());
        }
        runner.run_gates(&gates, &anchor, &context).await
    });
    if json {
        match serde_json::to_string(&report) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("gatehost: error: cannot encode the report: {e}");
                return Outcome::Error.exit_code();
            }
        }
    } else {
        print!("{}", render_report(&report));
    }
    report.outcome.exit_code()
}

fn prepare(args: &CheckArgs) -> Result<Prepared, String> {
    let anchor = WorkspaceAnchor::open(&args.workspace).map_err(|e| e.to_string())?;
    let config_path = HostConfig::locate(args.config.as_deref());
    if let Some(p) = &config_path
        && p.exists()
        && anchor.contains_host_path(p)
    {
        return Err(format!(
            "configuration {} is inside the workspace, where the supervised agent can edit it; keep it outside",
            p.display()
        ));
    }
    let config = HostConfig::load(config_path.as_deref()).map_err(|e| e.to_string())?;
    if !args.trust_workspace_gate_file
        && args.gate_file.exists()
        && anchor.contains_host_path(&args.gate_file)
    {
        return Err(format!(
            "gate file {} is inside the workspace, where the supervised agent can edit it; \
             keep it outside or pass --trust-workspace-gate-file",
            args.gate_file.display()
        ));
    }
    let text = std::fs::read_to_string(&args.gate_file)
        .map_err(|e| format!("cannot read gate file {}: {e}", args.gate_file.display()))?;
    let gates = parse_gate_file(&text)
        .map_err(|e| format!("gate file {}: {e}", args.gate_file.display()))?;
    if args.context.as_deref() == Some(Path::new("-"))
        && args.diff.as_deref() == Some(Path::new("-"))
    {
        return Err("--context and --diff cannot both read stdin".into());
    }
    let context = GateContext {
        text: args.context.as_deref().map(read_context).transpose()?,
        diff: args.diff.as_deref().map(read_context).transpose()?,
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

pub(super) fn read_context(path: &Path) -> Result<String, String> {
    let mut bytes = Vec::new();
    if path == Path::new("-") {
        std::io::stdin()
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read the context from stdin: {e}"))?;
    } else {
        bytes = std::fs::read(path)
            .map_err(|e| format!("cannot read context {}: {e}", path.display()))?;
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
    if v.outcome != Outcome::Pass {
        for (name, tail) in [("stdout", &v.stdout), ("stderr", &v.stderr)] {
            if let Some(t) = tail {
                render_tail(out, name, t);
            }
        }
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
