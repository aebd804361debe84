//! `gatehost plugin run`: evaluate one plugin file once, exactly as a WASM
//! gate would (the gate is built from the options and run by the same
//! `GateRunner`, `WasmHost`, bounds and confinement), and report its
//! verdict with the time, fuel and memory the evaluation used against its
//! bounds. For plugin authors.
//!
//! It owns the options' translation into a gate and the report. It must
//! never evaluate a plugin any other way than a gate does, and never turn
//! bad input or a plugin that could not decide into anything but exit 2.

use super::RunArgs;
use super::check::read_context;
use super::error::{CliError, CliResult};
use crate::anchor::WorkspaceAnchor;
use crate::config::HostConfig;
use crate::gate::{GateContext, GateRunner, GateSpec, parse_gate_file};
use crate::verdict::{RunReport, Severity, Verdict};
use crate::wasm::{PluginFile, PluginUsage};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What `gatehost plugin run --help` says after the options.
pub(super) const AFTER_HELP: &str = "\
Exit codes as `gatehost check`: 0 the plugin said pass, 1 it said fail, 2 error (it could not \
decide: a trap, a bound reached, a refused import; or bad input).
--config FILE is the host configuration (as for `check`); the plugin's own configuration \
is --plugin-config JSON (or @FILE).
Example: gatehost plugin run target/wasm32-wasip2/release/my_gate.wasm --workspace ../repo \
--plugin-config '{\"rules\": []}' --fuel 1000000000";

/// What a run needs, read and validated before anything runs.
struct Prepared {
    config: HostConfig,
    anchor: WorkspaceAnchor,
    gate: GateSpec,
    context: GateContext,
    file: PathBuf,
    digest: String,
}

/// Runs the plugin once to its exit code (0 pass, 1 fail, 2 error); an
/// input that cannot be read is a [`CliError`] (with `--json`, printed
/// with `outcome`, `reason` and a null `usage` beside it: [`error_report`]).
pub(super) fn run(args: RunArgs) -> CliResult<i32> {
    let json = args.json;
    let prepared = prepare(&args).map_err(CliError::input)?;
    let runtime = super::check::gate_runtime(std::slice::from_ref(&prepared.gate))?;
    let Prepared {
        config,
        anchor,
        gate,
        context,
        file,
        digest,
    } = prepared;
    let (verdict, usage) = runtime.block_on(async {
        let runner = GateRunner::one_shot(config);
        runner.run_gate_measured(&gate, &anchor, &context).await
    });
    if json {
        let Ok(Value::Object(mut out)) = serde_json::to_value(&verdict) else {
            return Err(CliError::new("encode", "cannot encode the verdict"));
        };
        out.insert(
            "plugin".into(),
            json!({"file": file.display().to_string(), "sha256": digest}),
        );
        out.insert(
            "usage".into(),
            usage.map_or(Value::Null, |u| usage_json(&u)),
        );
        println!("{}", Value::Object(out));
    } else {
        print!("{}", render(&verdict, usage.as_ref(), &file, &digest));
    }
    Ok(verdict.outcome.exit_code())
}

/// `plugin run --json`'s error object: the API's error shape, with the
/// verdict's `outcome` and `reason` and a null `usage` beside it.
pub(super) fn error_report(err: &CliError) -> Value {
    json!({"outcome": "error", "reason": err.message, "usage": null})
}

fn prepare(args: &RunArgs) -> Result<Prepared, String> {
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
    // The file named on the command line, pinned to the bytes read now: a
    // gate would refuse an unpinned path, and the gate below loads it again.
    let file = std::fs::canonicalize(&args.plugin)
        .map_err(|e| format!("cannot read plugin {}: {e}", args.plugin.display()))?;
    let name = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let digest = PluginFile::read(&name, &file, config.wasm.max_plugin_bytes)
        .map_err(|e| e.to_string())?
        .digest;
    let plugin_config = args
        .plugin_config
        .as_deref()
        .map(parse_plugin_config)
        .transpose()?;
    let mut wasm = json!({"plugin": file.display().to_string(), "sha256": digest});
    let fields = [
        ("config", plugin_config.map(Value::Object)),
        ("timeoutMs", args.timeout_ms.map(Value::from)),
        ("fuel", args.fuel.map(Value::from)),
        ("memoryMiB", args.memory_mib.map(Value::from)),
        ("maxOutputBytes", args.max_output_bytes.map(Value::from)),
        ("maxJudgeCalls", args.max_judge_calls.map(Value::from)),
        (
            "judge",
            args.judge
                .as_ref()
                .map(|a| json!({"adapter": a, "model": args.judge_model})),
        ),
    ];
    for (key, value) in fields {
        if let (Some(v), Some(o)) = (value, wasm.as_object_mut()) {
            o.insert(key.into(), v);
        }
    }
    let label = format!(
        "wasm: {}",
        file.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| name.clone())
    );
    // Through the gate file parser: the same checks (a zero timeout, a
    // misspelt field) as a gate file gets.
    let gate = parse_gate_file(&json!({"name": label, "wasm": wasm}).to_string())
        .map_err(|e| format!("the plugin's gate: {e}"))?
        .pop()
        .ok_or_else(|| "the plugin's gate: nothing parsed".to_string())?;
    if args.context.as_deref() == Some(Path::new("-"))
        && args.diff.as_deref() == Some(Path::new("-"))
    {
        return Err("--context and --diff cannot both read stdin".into());
    }
    let text = args
        .context
        .as_deref()
        .map(|p| read_context(p, "--context").map_err(|e| e.message))
        .transpose()?;
    let (diff, changes) = match &args.diff {
        Some(path) => (
            Some(read_context(path, "--diff").map_err(|e| e.message)?),
            None,
        ),
        // As the daemon gives plugins a workspace's change.
        None if anchor.root().join(".git").exists() => {
            let changes = crate::commit::workspace_changes(anchor.root(), config.change_caps)
                .map_err(|e| {
                    format!(
                        "cannot compute the workspace's change against HEAD ({e}); pass --diff FILE"
                    )
                })?;
            (None, Some(changes))
        }
        None => (None, None),
    };
    let context = GateContext {
        text,
        diff,
        changes,
        trust: crate::config::Trust::Operator,
        ..GateContext::default()
    };
    Ok(Prepared {
        config,
        anchor,
        gate,
        context,
        file,
        digest,
    })
}

/// `--plugin-config`: a JSON object, or `@FILE` holding one.
fn parse_plugin_config(arg: &str) -> Result<serde_json::Map<String, Value>, String> {
    let text = match arg.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the plugin configuration {path}: {e}"))?,
        None => arg.to_string(),
    };
    match serde_json::from_str(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("--plugin-config must be a JSON object".into()),
        Err(e) => Err(format!("--plugin-config is not JSON: {e}")),
    }
}

fn usage_json(u: &PluginUsage) -> Value {
    let ms = |d: Duration| (d.as_secs_f64() * 1e6).round() / 1e3;
    json!({
        "time": {
            "usedMs": ms(u.elapsed),
            "boundMs": ms(u.bounds.timeout),
            "judgeMs": ms(u.judge_time),
        },
        "fuel": {"used": u.fuel_used, "bound": u.bounds.fuel},
        "memory": {"usedBytes": u.memory_bytes, "boundBytes": u.bounds.memory_bytes},
        "judgeCalls": {"used": u.judge_calls, "bound": u.bounds.judge_calls},
    })
}

/// The human report: the verdict as `check` prints it, its findings, the
/// plugin file and what the evaluation used.
fn render(v: &Verdict, usage: Option<&PluginUsage>, file: &Path, digest: &str) -> String {
    let mut out = super::render_report(&RunReport::from_verdicts(vec![v.clone()], Vec::new()));
    for f in &v.findings {
        let place = match (&f.path, f.line) {
            (Some(p), Some(l)) => format!("{p}:{l}: "),
            (Some(p), None) => format!("{p}: "),
            _ => String::new(),
        };
        let severity = match f.severity {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        out.push_str(&format!("      {severity:<7} {place}{}\n", f.message));
    }
    out.push_str(&format!("plugin  {} (sha256 {digest})\n", file.display()));
    let Some(u) = usage else {
        out.push_str("usage   not measured: the plugin did not get as far as an evaluation\n");
        return out;
    };
    let b = u.bounds;
    let mut time = format!(
        "time    {} of {} ({})",
        short_duration(u.elapsed),
        crate::verdict::human_duration(b.timeout),
        percent(u.elapsed.as_secs_f64(), b.timeout.as_secs_f64()),
    );
    if u.judge_calls > 0 {
        time.push_str(&format!(
            ", of which {} in {} judge call(s) of {}",
            short_duration(u.judge_time),
            u.judge_calls,
            b.judge_calls
        ));
    }
    out.push_str(&format!("{time}\n"));
    out.push_str(&format!(
        "fuel    {} of {} ({})\n",
        grouped(u.fuel_used),
        grouped(b.fuel),
        percent(u.fuel_used as f64, b.fuel as f64),
    ));
    out.push_str(&format!(
        "memory  {} of {} ({})\n",
        mib(u.memory_bytes),
        mib(b.memory_bytes),
        percent(u.memory_bytes as f64, b.memory_bytes as f64),
    ));
    out
}

/// `12.3 ms` below a second, else as `check` prints durations.
fn short_duration(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{:.1} ms", d.as_secs_f64() * 1e3)
    } else {
        crate::verdict::human_duration(d)
    }
}

/// `0.25 %`; `<0.01 %` for a use too small to show, never `0.00 %` for
/// something used.
fn percent(used: f64, bound: f64) -> String {
    if bound <= 0.0 {
        return "no bound".into();
    }
    let p = used / bound * 100.0;
    if used > 0.0 && p < 0.005 {
        "<0.01 %".into()
    } else {
        format!("{p:.2} %")
    }
}

/// `1.25 MiB`, `128 MiB`.
fn mib(bytes: u64) -> String {
    let m = bytes as f64 / (1024.0 * 1024.0);
    if bytes.is_multiple_of(1024 * 1024) {
        format!("{m:.0} MiB")
    } else {
        format!("{m:.2} MiB")
    }
}

/// `1,234,567`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_a_person_would() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(1_234_567), "1,234,567");
        assert_eq!(grouped(10_000_000_000), "10,000,000,000");
        assert_eq!(percent(1_234_567.0, 10_000_000_000.0), "0.01 %");
        assert_eq!(percent(100.0, 10_000_000_000.0), "<0.01 %");
        assert_eq!(percent(0.0, 10.0), "0.00 %");
        assert_eq!(percent(1.0, 4.0), "25.00 %");
        assert_eq!(mib(128 * 1024 * 1024), "128 MiB");
        assert_eq!(mib(1024 * 1024 + 256 * 1024), "1.25 MiB");
        assert_eq!(short_duration(Duration::from_micros(1234)), "1.2 ms");
    }

    #[test]
    fn the_plugin_config_is_a_json_object_or_a_file_holding_one() {
        assert_eq!(
            parse_plugin_config(r#"{"a": 1}"#).expect("object")["a"],
            json!(1)
        );
        assert!(parse_plugin_config("[1]").is_err());
        assert!(parse_plugin_config("{").is_err());
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("c.json");
        std::fs::write(&p, r#"{"scope": "all"}"#).expect("write");
        let parsed = parse_plugin_config(&format!("@{}", p.display())).expect("file");
        assert_eq!(parsed["scope"], json!("all"));
        assert!(parse_plugin_config("@/nonexistent/c.json").is_err());
    }
}
