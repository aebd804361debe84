//! `gatehost plugin inspect`: what a plugin file is and whether gatehost
//! would load it. Never runs a plugin (`plugin_run` does; `plugin_new`
//! starts a new one from the template; `plugin_list` lists the plugins a
//! gate can name).

use super::InspectArgs;
use crate::config::HostConfig;

pub(super) fn inspect(args: InspectArgs) -> super::error::CliResult<i32> {
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
            Ok(if report["problem"].is_null() { 0 } else { 1 })
        }
        Err(reason) => Err(super::error::CliError::input(reason).field("FILE")),
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
    let (interface, world) = interface(&crate::wasm::Inspection {
        imports: imports.clone(),
        exports: exports.clone(),
        problem: None,
    });
    let problem = problem.map(|e| e.to_string());
    Ok(serde_json::json!({
        "file": args.file.display().to_string(),
        "size": file.bytes.len(),
        "sha256": file.digest,
        "interface": interface,
        "world": world,
        "imports": imports,
        "exports": exports,
        "problem": problem,
    }))
}

/// A component's gate interface (`gatehost:gate@VERSION`, from its
/// imports) and world (`gate-plugin` when it exports `evaluate`).
pub(super) fn interface(
    inspection: &crate::wasm::Inspection,
) -> (Option<String>, Option<&'static str>) {
    let interface = inspection
        .imports
        .iter()
        .find_map(|i| i.strip_prefix("gatehost:gate/"))
        .and_then(|rest| rest.split_once('@'))
        .map(|(_, v)| format!("gatehost:gate@{v}"));
    let world = inspection
        .exports
        .iter()
        .any(|e| e == "evaluate")
        .then_some("gate-plugin");
    (interface, world)
}
