//! `gatehost plugin new`: a Rust plugin crate from the template, with its
//! own copy of the plugin kit. The template (`host/templates/plugin/`) and
//! the kit (`plugins/kit/`: its manifest, source and the WIT it targets)
//! are compiled into the binary, so an installed gatehost needs no source
//! checkout: the crate it writes builds on its own, offline once its
//! dependencies are in cargo's cache.
//!
//! It owns the template's substitutions and the files written. It must
//! never write outside the new crate's folder, never overwrite anything
//! (an existing folder is refused), and never refer to the machine
//! gatehost was built on.

use super::NewArgs;
use std::path::{Path, PathBuf};

/// The kit's crate version (`plugins/kit/Cargo.toml`; a unit test keeps
/// them equal).
pub(super) const KIT_VERSION: &str = "0.1.0";

/// The interface the kit targets (`package` of its WIT; a unit test keeps
/// them equal).
pub(super) const KIT_INTERFACE: &str = "gatehost:gate@0.1.2";

/// Where in the new crate the kit is written.
const KIT_DIR: &str = "vendor/gatehost-plugin";

/// The kit crate, file by file (kit-relative path, text). A unit test
/// checks this is every file of `plugins/kit/`, byte for byte.
const KIT_FILES: &[(&str, &str)] = &[
    (
        "Cargo.toml",
        include_str!("../../../plugins/kit/Cargo.toml"),
    ),
    (
        "src/lib.rs",
        include_str!("../../../plugins/kit/src/lib.rs"),
    ),
    (
        "wit/v0.1/gate.wit",
        include_str!("../../../plugins/kit/wit/v0.1/gate.wit"),
    ),
];

/// The template, file by file (crate-relative path, text with `@NAME@`,
/// `@CRATE@`, `@KIT_PATH@`, `@KIT_WHERE@`, `@KIT_VERSION@` and
/// `@INTERFACE@` to fill in).
const TEMPLATE_FILES: &[(&str, &str)] = &[
    (
        "Cargo.toml",
        include_str!("../../templates/plugin/Cargo.toml.in"),
    ),
    (
        "src/lib.rs",
        include_str!("../../templates/plugin/lib.rs.in"),
    ),
    (
        "README.md",
        include_str!("../../templates/plugin/README.md.in"),
    ),
    (
        ".gitignore",
        include_str!("../../templates/plugin/gitignore.in"),
    ),
];

/// What `gatehost plugin new --help` says after the options.
pub(super) fn after_help() -> String {
    format!(
        "The crate gets its own copy of the plugin kit, gatehost-plugin {KIT_VERSION} \
(for {KIT_INTERFACE}), built into this gatehost, in NAME/{KIT_DIR}: it builds anywhere, \
with no gatehost source checkout, and offline once its dependencies (wit-bindgen, serde, \
serde_json, wasi) are in cargo's cache. --kit PATH uses another copy of the kit instead.\n\
Build: cd NAME && cargo build --release --target wasm32-wasip2 \
(once: rustup target add wasm32-wasip2)."
    )
}

/// Runs `plugin new`: prints what was made and how to build it.
pub(super) fn new(args: &NewArgs) -> super::error::CliResult<i32> {
    match new_plugin(args) {
        Ok(made) => {
            let file = format!(
                "target/wasm32-wasip2/release/{}.wasm",
                args.name.replace('-', "_")
            );
            println!(
                "created {dir} (gatehost-plugin {KIT_VERSION}, for {KIT_INTERFACE}; the kit: {kit})\n\
                 build it:   cd {dir} && cargo build --release --target wasm32-wasip2\n\
                 \x20           (once: rustup target add wasm32-wasip2)\n\
                 try it:     gatehost plugin run {file} --workspace DIR\n\
                 inspect it: gatehost plugin inspect {file}",
                dir = made.dir.display(),
                kit = made.kit,
            );
            Ok(0)
        }
        Err(reason) => Err(super::error::CliError::input(reason).field("NAME")),
    }
}

/// A crate `plugin new` made.
#[derive(Debug)]
pub(super) struct Made {
    pub dir: PathBuf,
    /// Where its kit is, as said to the user.
    pub kit: String,
}

pub(super) fn new_plugin(args: &NewArgs) -> Result<Made, String> {
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
    // Another copy of the kit, checked before anything is written.
    let other_kit = args.kit.as_deref().map(check_kit).transpose()?;
    std::fs::create_dir_all(&args.dir)
        .map_err(|e| format!("cannot create {}: {e}", args.dir.display()))?;
    let dir = args.dir.join(name);
    // create_dir, not create_dir_all: whatever is already there (a folder,
    // a file, a link) is refused, never written into.
    if let Err(e) = std::fs::create_dir(&dir) {
        return Err(if e.kind() == std::io::ErrorKind::AlreadyExists {
            format!("{} already exists", dir.display())
        } else {
            format!("cannot create {}: {e}", dir.display())
        });
    }
    let written = write_crate(&dir, name, other_kit.as_deref());
    if written.is_err() {
        // Made by this run, just now: no half-made crate is left behind.
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot remove the half-made plugin crate");
        }
    }
    let kit = written?;
    Ok(Made { dir, kit })
}

/// Checks that `path` is a gatehost-plugin kit crate; its absolute path.
fn check_kit(path: &Path) -> Result<PathBuf, String> {
    let kit = std::fs::canonicalize(path)
        .map_err(|e| format!("the plugin kit is not at {} ({e})", path.display()))?;
    let manifest = std::fs::read_to_string(kit.join("Cargo.toml")).map_err(|e| {
        format!(
            "{} is not the gatehost-plugin kit crate ({e})",
            kit.display()
        )
    })?;
    let named = manifest
        .parse::<toml::Table>()
        .ok()
        .and_then(|t| {
            t.get("package")?
                .get("name")?
                .as_str()
                .map(|n| n == "gatehost-plugin")
        })
        .unwrap_or(false);
    if !named {
        return Err(format!(
            "{} is not the gatehost-plugin kit crate (its Cargo.toml names another package)",
            kit.display()
        ));
    }
    Ok(kit)
}

/// Writes the crate's files into `dir` (made empty by the caller), and
/// the kit unless `other_kit` is given. Returns where the kit is, as said
/// to the user.
fn write_crate(dir: &Path, name: &str, other_kit: Option<&Path>) -> Result<String, String> {
    let write = |rel: &str, text: &str| -> Result<(), String> {
        let p = dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::write(&p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))
    };
    let (kit_path, kit_where, said) = match other_kit {
        Some(kit) => {
            let shown = kit.display().to_string();
            (
                toml_escape(&shown),
                format!("at `{shown}` (given with `--kit`)."),
                shown,
            )
        }
        None => {
            for (rel, text) in KIT_FILES {
                write(&format!("{KIT_DIR}/{rel}"), text)?;
            }
            (
                KIT_DIR.to_string(),
                format!(
                    "copied into `{KIT_DIR}/` by `gatehost plugin new`: the crate builds on its \
                     own, anywhere, and offline once its dependencies are in cargo's cache."
                ),
                format!("{}/{KIT_DIR}", dir.display()),
            )
        }
    };
    for (rel, template) in TEMPLATE_FILES {
        write(rel, &fill(template, name, &kit_path, &kit_where))?;
    }
    Ok(said)
}

/// The template with its placeholders filled in.
fn fill(template: &str, name: &str, kit_path: &str, kit_where: &str) -> String {
    template
        .replace("@NAME@", name)
        .replace("@CRATE@", &name.replace('-', "_"))
        .replace("@KIT_PATH@", kit_path)
        .replace("@KIT_WHERE@", kit_where)
        .replace("@KIT_VERSION@", KIT_VERSION)
        .replace("@INTERFACE@", KIT_INTERFACE)
}

/// A path as the inside of a TOML basic string.
fn toml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
#[path = "plugin_new_tests.rs"]
mod tests;
