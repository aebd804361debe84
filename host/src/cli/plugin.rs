//! `gatehost plugin`: inspect a plugin file, start a new plugin from a
//! template. Never runs a plugin.

use super::{InspectArgs, NewArgs};
use crate::config::HostConfig;
use std::path::PathBuf;

pub(super) fn inspect(args: InspectArgs) -> i32 {
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
    let file = crate::wasm::PluginFile::read(&name, &args.file, host.config().max_plugin_bytes)
        .map_err(|e| e.to_string())?;
    let crate::wasm::Inspection {
        imports,
        exports,
        problem,
    } = host.inspect(&file).map_err(|e| e.to_string())?;
    let interface = imports
        .iter()
        .find_map(|i| i.strip_prefix("gatehost:gate/"))
        .and_then(|rest| rest.split_once('@'))
        .map(|(_, v)| format!("gatehost:gate@{v}"));
    let problem = problem.map(|e| e.to_string());
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

pub(super) fn new_plugin(args: &NewArgs) -> Result<PathBuf, String> {
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
