//! `gatehost plugin list`: every plugin a gate can name, in the order
//! names resolve (each `[wasm] plugin_dirs` entry, then the plugins carried
//! in the binary), where each is from, whether a gate naming it gets that
//! one, its size, digest and interface (as `plugin inspect` says), and,
//! with `--long`, a carried plugin's documentation (its `config` keys).
//! Never runs a plugin; a plugin it cannot read or would refuse is listed
//! with the reason, never left out.

use super::ListArgs;
use crate::config::HostConfig;
use crate::wasm::{Located, PluginFile, WasmHost, carried};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// What `plugin list --json` prints (camelCase, as `check --json`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Listing {
    plugins: Vec<Entry>,
    /// Plugin directories that could not be listed, and why.
    unreadable_dirs: Vec<UnreadableDir>,
    /// Why this binary carries no plugins, when it carries none.
    carried_missing: Option<&'static str>,
}

#[derive(Debug, Serialize)]
struct UnreadableDir {
    dir: String,
    error: String,
}

/// One plugin found.
#[derive(Debug, Serialize)]
struct Entry {
    /// The name a gate uses.
    name: String,
    /// `carried`, or the plugin directory it is in.
    from: String,
    /// Its file (none for a carried plugin).
    path: Option<String>,
    /// Whether a gate naming `name` gets this one (an earlier plugin
    /// directory's file of that name wins).
    used: bool,
    size: Option<u64>,
    sha256: Option<String>,
    /// `gatehost:gate@VERSION`, from its imports.
    interface: Option<String>,
    /// `gate-plugin` when it exports `evaluate`.
    world: Option<&'static str>,
    /// Why gatehost would refuse it, or could not read it.
    problem: Option<String>,
    /// A carried plugin's documentation.
    doc: Option<&'static str>,
}

pub(super) fn list(args: &ListArgs) -> super::error::CliResult<i32> {
    let config = HostConfig::load(HostConfig::locate(args.config.as_deref()).as_deref())?;
    let host = WasmHost::new(config.wasm)
        .map_err(|e| super::error::CliError::new("engine", e.to_string()))?;
    let listing = listing(&host);
    if args.json {
        let text = serde_json::to_string(&listing)
            .map_err(|e| super::error::CliError::new("io", e.to_string()))?;
        println!("{text}");
    } else {
        print!("{}", render(&listing, args.long));
    }
    Ok(0)
}

fn listing(host: &WasmHost) -> Listing {
    let mut plugins = Vec::new();
    let mut unreadable_dirs = Vec::new();
    for dir in &host.config().plugin_dirs {
        match wasm_files(dir) {
            Ok(files) => {
                for path in files {
                    plugins.push(file_entry(host, dir, &path));
                }
            }
            Err(e) => unreadable_dirs.push(UnreadableDir {
                dir: dir.display().to_string(),
                error: e.to_string(),
            }),
        }
    }
    for c in carried::all() {
        let used = matches!(host.find_named(c.name), Ok(Located::Carried(_)));
        let file = PluginFile {
            name: c.name.to_string(),
            path: PathBuf::from(format!("(carried) {}.wasm", c.name)),
            bytes: c.bytes.to_vec(),
            digest: c.sha256.to_string(),
        };
        let (interface, world, problem) = describe(host, &file);
        plugins.push(Entry {
            name: c.name.to_string(),
            from: "carried".to_string(),
            path: None,
            used,
            size: Some(c.bytes.len() as u64),
            sha256: Some(c.sha256.to_string()),
            interface,
            world,
            problem,
            doc: Some(c.doc),
        });
    }
    Listing {
        plugins,
        unreadable_dirs,
        carried_missing: carried::missing(),
    }
}

/// The `*.wasm` files of a plugin directory, by name.
fn wasm_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
        .collect();
    files.sort();
    Ok(files)
}

fn file_entry(host: &WasmHost, dir: &Path, path: &Path) -> Entry {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = stem.replace('_', "-");
    let used = matches!(host.find_named(&name), Ok(Located::File(p)) if p == path);
    let mut entry = Entry {
        name,
        from: dir.display().to_string(),
        path: Some(path.display().to_string()),
        used,
        size: None,
        sha256: None,
        interface: None,
        world: None,
        problem: None,
        doc: None,
    };
    match PluginFile::read(&stem, path, host.config().max_plugin_bytes) {
        Ok(file) => {
            entry.size = Some(file.bytes.len() as u64);
            entry.sha256 = Some(file.digest.clone());
            (entry.interface, entry.world, entry.problem) = describe(host, &file);
        }
        Err(e) => entry.problem = Some(e.to_string()),
    }
    entry
}

/// What `plugin inspect` says of a plugin: its interface, its world, and
/// why it would be refused.
fn describe(
    host: &WasmHost,
    file: &PluginFile,
) -> (Option<String>, Option<&'static str>, Option<String>) {
    match host.inspect(file) {
        Ok(inspection) => {
            let (interface, world) = super::plugin::interface(&inspection);
            (interface, world, inspection.problem.map(|e| e.to_string()))
        }
        Err(e) => (None, None, Some(e.to_string())),
    }
}

fn render(listing: &Listing, long: bool) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let from = |e: &Entry| {
        if e.used {
            e.from.clone()
        } else {
            format!("{} (not used: another comes first)", e.from)
        }
    };
    let name_width = listing
        .plugins
        .iter()
        .map(|e| e.name.len())
        .chain([4])
        .max()
        .unwrap_or(4);
    let from_width = listing
        .plugins
        .iter()
        .map(|e| from(e).len())
        .chain([4])
        .max()
        .unwrap_or(4);
    let _ = writeln!(
        out,
        "{:name_width$}  {:from_width$}  {:>9}  {:19}  SHA256",
        "NAME", "FROM", "SIZE", "INTERFACE"
    );
    for e in &listing.plugins {
        let _ = writeln!(
            out,
            "{:name_width$}  {:from_width$}  {:>9}  {:19}  {}",
            e.name,
            from(e),
            e.size.map(|s| s.to_string()).unwrap_or_else(|| "-".into()),
            e.interface.as_deref().unwrap_or("-"),
            e.sha256.as_deref().unwrap_or("-"),
        );
        if let Some(problem) = &e.problem {
            let _ = writeln!(out, "    problem: {problem}");
        }
        if long && let Some(doc) = e.doc {
            // The doc comment, less its Markdown code fences.
            for line in doc.lines().filter(|l| !l.starts_with("```")) {
                if line.is_empty() {
                    out.push('\n');
                } else {
                    let _ = writeln!(out, "    {line}");
                }
            }
            out.push('\n');
        }
    }
    for d in &listing.unreadable_dirs {
        let _ = writeln!(out, "cannot list {}: {}", d.dir, d.error);
    }
    if let Some(reason) = listing.carried_missing {
        let _ = writeln!(out, "this gatehost carries no plugins: {reason}");
    }
    out.push_str(
        "A gate's \"plugin\": NAME is the first of: <dir>/NAME.wasm in each [wasm] plugin_dirs \
         entry, then the carried plugin NAME.\n",
    );
    if !long && !carried::all().is_empty() {
        out.push_str("`gatehost plugin list --long` shows each carried plugin's configuration.\n");
    }
    out
}
