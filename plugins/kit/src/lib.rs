//! The guest side of gatehost's gate plugin interface (`gatehost:gate@0.1.0`).
//!
//! A plugin is a type implementing [`Plugin`] and one `export_gate!` line:
//!
//! ```ignore
//! use gatehost_plugin::{Context, Plugin, Verdict};
//!
//! struct AlwaysPass;
//!
//! impl Plugin for AlwaysPass {
//!     fn evaluate(_ctx: Context) -> Result<Verdict, String> {
//!         Ok(gatehost_plugin::pass("nothing to check"))
//!     }
//! }
//!
//! gatehost_plugin::export_gate!(AlwaysPass);
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2`; the
//! `.wasm` file in `target/wasm32-wasip2/release/` is the plugin. The
//! workspace is readable (never writable) at [`WORKSPACE`]; nothing else of
//! the host's file system, environment or network is there.

/// The generated bindings (wit-bindgen) of the `gate-plugin` world.
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit/v0.1",
        world: "gate-plugin",
        pub_export_macro: true,
        export_macro_name: "export_gate",
        default_bindings_module: "gatehost_plugin::bindings",
    });
}

pub use bindings::Guest as Plugin;
pub use bindings::export_gate;
use bindings::gatehost;
pub use bindings::gatehost::gate::host::{JudgeReply, LogLevel};
pub use bindings::gatehost::gate::types::{
    ChangeKind, ChangedFile, Context, Decision, Finding, Severity, Verdict,
};

/// Where the workspace is mounted (read-only) inside the plugin.
pub const WORKSPACE: &str = "/workspace";

/// A passing verdict.
pub fn pass(summary: impl Into<String>) -> Verdict {
    Verdict {
        decision: Decision::Pass,
        summary: summary.into(),
        findings: Vec::new(),
    }
}

/// A failing verdict with its findings.
pub fn fail(summary: impl Into<String>, findings: Vec<Finding>) -> Verdict {
    Verdict {
        decision: Decision::Fail,
        summary: summary.into(),
        findings,
    }
}

/// A finding about a file and line.
pub fn finding(
    path: &str,
    line: Option<u32>,
    severity: Severity,
    message: impl Into<String>,
) -> Finding {
    Finding {
        path: Some(path.to_string()),
        line,
        severity,
        message: message.into(),
    }
}

/// Writes a line to the host's log.
pub fn log(level: LogLevel, message: &str) {
    gatehost::gate::host::log(level, message);
}

/// The unified diff of one changed file, from the host.
pub fn file_diff(path: &str) -> Result<String, String> {
    gatehost::gate::host::file_diff(path)
}

/// Asks the gate's configured judge; `decision` is `None` when the judge
/// gave no verdict (treat that as a failure).
pub fn judge(prompt: &str) -> Result<JudgeReply, String> {
    gatehost::gate::host::judge(prompt)
}

/// The gate's `config` object, deserialised.
pub fn config<T: serde::de::DeserializeOwned>(ctx: &Context) -> Result<T, String> {
    serde_json::from_str(&ctx.config_json).map_err(|e| format!("bad plugin config: {e}"))
}

/// The host path of a workspace-relative path.
pub fn workspace_path(relative: &str) -> String {
    format!(
        "{WORKSPACE}/{}",
        relative.trim_start_matches("./").trim_start_matches('/')
    )
}

/// Reads a workspace file's bytes, refusing files over `max` bytes (the
/// error says so). Uses the WASI descriptor API directly (open, stat,
/// positioned reads), which costs fewer host calls than `std::fs`.
pub fn read_bytes(relative: &str, max: u64) -> std::io::Result<Vec<u8>> {
    use wasi::filesystem::types::{DescriptorFlags, OpenFlags, PathFlags};
    let to_io = |e: wasi::filesystem::types::ErrorCode| std::io::Error::other(format!("{e:?}"));
    let dirs = wasi::filesystem::preopens::get_directories();
    let (root, _) = dirs
        .iter()
        .find(|(_, name)| name == WORKSPACE)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no workspace preopen"))?;
    let rel = relative.trim_start_matches("./").trim_start_matches('/');
    let file = root
        .open_at(
            PathFlags::SYMLINK_FOLLOW,
            rel,
            OpenFlags::empty(),
            DescriptorFlags::READ,
        )
        .map_err(to_io)?;
    let size = file.stat().map_err(to_io)?.size;
    if size > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!("{size} bytes"),
        ));
    }
    let mut out = Vec::with_capacity(size as usize);
    loop {
        let want = (size - (out.len() as u64).min(size)).clamp(1, 1 << 20);
        let (chunk, eof) = file.read(want, out.len() as u64).map_err(to_io)?;
        out.extend_from_slice(&chunk);
        // Done at the size stat gave (no extra call to learn about EOF),
        // at EOF, or past the cap (the file grew).
        if eof || chunk.is_empty() || out.len() as u64 >= size || out.len() as u64 > max {
            break;
        }
    }
    Ok(out)
}

/// Reads a workspace file as text (lossily).
pub fn read_text(relative: &str) -> std::io::Result<String> {
    let bytes = std::fs::read(workspace_path(relative))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Every regular file in the workspace, relative, `/`-separated, sorted;
/// `.git` and `target` directories are skipped. Walks with the WASI
/// descriptor API (one `read-directory` stream per directory).
pub fn all_files() -> Vec<String> {
    use wasi::filesystem::types::{DescriptorFlags, DescriptorType, OpenFlags, PathFlags};
    let dirs = wasi::filesystem::preopens::get_directories();
    let Some((root, _)) = dirs.iter().find(|(_, name)| name == WORKSPACE) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut stack = vec![String::new()];
    while let Some(dir) = stack.pop() {
        let opened;
        let handle = if dir.is_empty() {
            root
        } else {
            match root.open_at(
                PathFlags::empty(),
                &dir,
                OpenFlags::DIRECTORY,
                DescriptorFlags::READ,
            ) {
                Ok(d) => {
                    opened = d;
                    &opened
                }
                Err(_) => continue,
            }
        };
        let Ok(entries) = handle.read_directory() else {
            continue;
        };
        while let Ok(Some(entry)) = entries.read_directory_entry() {
            let rel = if dir.is_empty() {
                entry.name.clone()
            } else {
                format!("{dir}/{}", entry.name)
            };
            match entry.type_ {
                DescriptorType::Directory if entry.name != ".git" && entry.name != "target" => {
                    stack.push(rel)
                }
                DescriptorType::RegularFile => out.push(rel),
                _ => {}
            }
        }
    }
    out.sort();
    out
}

/// Line numbers (1-based, in the new file) that a file's diff adds.
pub fn added_lines(diff: &str) -> Vec<u32> {
    let mut lines = Vec::new();
    let mut next: Option<u32> = None;
    for l in diff.lines() {
        if let Some(rest) = l.strip_prefix("@@ ") {
            // @@ -a,b +c,d @@
            next = rest
                .split_whitespace()
                .find_map(|p| p.strip_prefix('+'))
                .and_then(|p| p.split(',').next())
                .and_then(|n| n.parse().ok());
        } else if let Some(n) = next.as_mut() {
            if l.starts_with('+') && !l.starts_with("+++") {
                lines.push(*n);
                *n += 1;
            } else if l.starts_with(' ') || l.is_empty() {
                *n += 1;
            }
        }
    }
    lines
}
