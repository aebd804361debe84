//! The `gatehost` command line: argument parsing, reading the operator's
//! files, and printing verdicts for people (`--json` for scripts).
//!
//! It owns the exit codes (0 pass, 1 fail, 2 error) and must never turn an
//! unreadable input into anything but exit 2.

use crate::anchor::WorkspaceAnchor;
use crate::config::HostConfig;
use crate::gate::{GateContext, GateRunner, GateSpec, parse_gate_file};
use crate::verdict::{Outcome, OutputTail, RunReport, Verdict};
use clap::{Parser, Subcommand};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

const AFTER_HELP: &str = "\
Exit codes: 0 pass, 1 fail (a gate said no), 2 error (a gate could not run, or bad input).
Configuration: --config FILE, else $GATEHOST_CONFIG, else <config dir>/gatehost/config.toml;
without one, defaults apply and the shell allowlist is empty.";

#[derive(Debug, Parser)]
#[command(
    name = "gatehost",
    version,
    about = "A judge-gate host for supervising coding agents",
    long_about = "gatehost decides whether a coding agent's work is acceptable by running gates: \
an allowlisted shell command (exit 0 = pass) or an LLM judge that must end with VERDICT: PASS or VERDICT: FAIL. \
Anything unclear (a timeout, a crash, no verdict) never passes.",
    after_help = AFTER_HELP
)]
pub struct Cli {
    /// Log filter for messages on stderr (e.g. info, debug, gatehost=trace).
    #[arg(long, global = true, env = "GATEHOST_LOG", default_value = "warn")]
    pub log: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gate(s) of a gate file once against a workspace.
    #[command(after_help = AFTER_HELP)]
    Check(CheckArgs),
    /// Work with WASM gate plugins.
    #[command(subcommand)]
    Plugin(PluginCommand),
}

#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Show a plugin file's interface version, imports, exports, size and sha256.
    Inspect(InspectArgs),
    /// Start a new Rust gate plugin from a template.
    New(NewArgs),
}

#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// The plugin's name (letters, digits, `-`, `_`): the crate and the folder.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Where to create the folder NAME.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
    /// Path of the gatehost-plugin kit crate (default: the kit of this gatehost checkout).
    #[arg(long, value_name = "PATH")]
    pub kit: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// Host configuration (TOML), for the component cache location.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// The plugin file (.wasm).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Host configuration (TOML). Must not lie inside the workspace.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The workspace the gates run against.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub workspace: PathBuf,
    /// Material for judge gates (the agent's last message, a diff); `-` reads stdin.
    #[arg(long, value_name = "FILE")]
    pub context: Option<PathBuf>,
    /// The change as a unified diff (`git diff` output); plugins see its files.
    #[arg(long, value_name = "FILE")]
    pub diff: Option<PathBuf>,
    /// Print the result as one JSON object (`outcome`, `reason`, `gates`, ...).
    #[arg(long)]
    pub json: bool,
    /// Accept a gate file that lies inside the workspace (the agent could edit it).
    #[arg(long)]
    pub trust_workspace_gate_file: bool,
    /// A JSON file with one gate object or a list of them.
    #[arg(value_name = "GATE_FILE")]
    pub gate_file: PathBuf,
}

/// Parses the command line, runs it and returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    init_logging(&cli.log);
    match cli.command {
        Command::Check(args) => check(args),
        Command::Plugin(PluginCommand::Inspect(args)) => inspect(args),
        Command::Plugin(PluginCommand::New(args)) => match new_plugin(&args) {
            Ok(dir) => {
                println!(
                    "created {}\nbuild it:   cd {} && cargo build --release --target wasm32-wasip2\ninspect it: gatehost plugin inspect target/wasm32-wasip2/release/{}.wasm",
                    dir.display(),
                    dir.display(),
                    args.name.replace('-', "_")
                );
                0
            }
            Err(reason) => {
                eprintln!("gatehost: error: {reason}");
                2
            }
        },
    }
}

fn init_logging(filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

/// What a check needs, read and validated before anything runs.
struct Prepared {
    config: HostConfig,
    anchor: WorkspaceAnchor,
    gates: Vec<GateSpec>,
    context: GateContext,
}

fn check(args: CheckArgs) -> i32 {
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
        ..GateContext::default()
    };
    Ok(Prepared {
        config,
        anchor,
        gates,
        context,
    })
}

fn read_context(path: &Path) -> Result<String, String> {
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

fn inspect(args: InspectArgs) -> i32 {
    match inspect_report(&args) {
        Ok(report) => {
            if args.json {
                println!("{report}");
            } else {
                let list = |k: &str| {
                    report[k]
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(|v| v.as_str())
                                .map(|s| format!("  {s}\n"))
                                .collect::<String>()
                        })
                        .unwrap_or_default()
                };
                print!(
                    "plugin: {}\nsize: {} bytes\nsha256: {}\ninterface: {}\nimports:\n{}exports:\n{}",
                    report["file"].as_str().unwrap_or_default(),
                    report["size"],
                    report["sha256"].as_str().unwrap_or_default(),
                    report["interface"]
                        .as_str()
                        .unwrap_or("none (not a gatehost gate plugin)"),
                    list("imports"),
                    list("exports"),
                );
                if let Some(problem) = report["problem"].as_str() {
                    println!("problem: {problem}");
                }
            }
            if report["problem"].is_null() { 0 } else { 1 }
        }
        Err(reason) => {
            if args.json {
                println!("{}", serde_json::json!({"error": reason}));
            } else {
                eprintln!("gatehost: error: {reason}");
            }
            2
        }
    }
}

fn inspect_report(args: &InspectArgs) -> Result<serde_json::Value, String> {
    let config = HostConfig::load(HostConfig::locate(args.config.as_deref()).as_deref())
        .map_err(|e| e.to_string())?;
    let host = crate::wasm::WasmHost::new(config.wasm).map_err(|e| e.to_string())?;
    let name = args
        .file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let file = crate::wasm::PluginFile::read(&name, &args.file).map_err(|e| e.to_string())?;
    let (imports, exports) = host.interface(&file).map_err(|e| e.to_string())?;
    let interface = imports
        .iter()
        .find_map(|i| i.strip_prefix("gatehost:gate/"))
        .and_then(|rest| rest.split_once('@'))
        .map(|(_, v)| format!("gatehost:gate@{v}"));
    let problem = host
        .load(crate::wasm::PluginFile::read(&name, &args.file).map_err(|e| e.to_string())?)
        .err()
        .map(|e| e.to_string());
    Ok(serde_json::json!({
        "file": args.file.display().to_string(),
        "size": file.bytes.len(),
        "sha256": file.digest,
        "interface": interface,
        "world": if exports.iter().any(|e| e == "evaluate") { Some("gate-plugin") } else { None },
        "imports": imports,
        "exports": exports,
        "problem": problem,
    }))
}

const TEMPLATE_CARGO: &str = r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"

[lib]
crate-type = ["cdylib"]

[dependencies]
gatehost-plugin = { path = "{kit}" }

[profile.release]
strip = true

# A crate of its own, not a member of an enclosing workspace.
[workspace]
"#;

const TEMPLATE_LIB: &str = r#"//! {name}: a gatehost gate plugin.
//!
//! Build: cargo build --release --target wasm32-wasip2
//! The workspace is readable at /workspace; see gatehost's docs/plugins.md.

use gatehost_plugin::{Context, Plugin, Severity, Verdict};

struct Gate;

impl Plugin for Gate {
    fn evaluate(ctx: Context) -> Result<Verdict, String> {
        // An example rule: changed files must not contain "XXX".
        let mut findings = Vec::new();
        for file in &ctx.changed_files {
            let Ok(text) = gatehost_plugin::read_text(&file.path) else {
                continue;
            };
            for (i, line) in text.lines().enumerate() {
                if line.contains("XXX") {
                    findings.push(gatehost_plugin::finding(&file.path, Some(i as u32 + 1), Severity::Error, "XXX marker"));
                }
            }
        }
        Ok(if findings.is_empty() {
            gatehost_plugin::pass(format!("{} changed file(s) checked", ctx.changed_files.len()))
        } else {
            gatehost_plugin::fail("XXX markers found", findings)
        })
    }
}

gatehost_plugin::export_gate!(Gate);
"#;

fn new_plugin(args: &NewArgs) -> Result<PathBuf, String> {
    let name = &args.name;
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    if !valid {
        return Err(format!(
            "'{name}' is not a valid plugin name (a letter, then letters, digits, '-' or '_')"
        ));
    }
    let kit = match &args.kit {
        Some(k) => k.clone(),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../plugins/kit"),
    };
    let kit = std::fs::canonicalize(&kit).map_err(|e| {
        format!(
            "the plugin kit is not at {} ({e}); pass --kit PATH",
            kit.display()
        )
    })?;
    if !kit.join("Cargo.toml").is_file() {
        return Err(format!(
            "{} is not the gatehost-plugin kit crate; pass --kit PATH",
            kit.display()
        ));
    }
    let dir = args.dir.join(name);
    if dir.exists() {
        return Err(format!("{} already exists", dir.display()));
    }
    let write = |rel: &str, text: String| -> Result<(), String> {
        let p = dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::write(&p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))
    };
    let kit_text = kit
        .display()
        .to_string()
        .replace('\\', "\\\\")
        .replace('"', "\\\"");
    write(
        "Cargo.toml",
        TEMPLATE_CARGO
            .replace("{name}", name)
            .replace("{kit}", &kit_text),
    )?;
    write("src/lib.rs", TEMPLATE_LIB.replace("{name}", name))?;
    write(".gitignore", "/target\n".to_string())?;
    Ok(dir)
}
