//! The guest side of gatehost's gate plugin interface (`gatehost:gate@0.1.2`).
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
//! the host's file system, environment or network is there. To read many
//! files, [`all_files`] and [`read_files`] ask the host (one call each)
//! instead of going through WASI file by file.

/// The generated bindings (wit-bindgen) of the `gate-plugin` world.
#[doc(hidden)]
// Generated code: the WIT's records make long argument lists.
#[allow(clippy::too_many_arguments)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit/v0.1",
        world: "gate-plugin",
        pub_export_macro: true,
        export_macro_name: "export_gate",
        default_bindings_module: "gatehost_plugin::bindings",
    });
}

pub use bindings::Guest as Plugin;
pub use bindings::export_gate;
use bindings::gatehost;
/// The host's imports as generated, for what the helpers here do not cover.
pub use bindings::gatehost::gate::host;
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
/// gave no verdict (treat that as a failure). The whole `prompt` is the
/// judge's rubric: never put workspace text, a diff or the agent's message
/// in it; use [`judge_with_context`] for those.
pub fn judge(prompt: &str) -> Result<JudgeReply, String> {
    gatehost::gate::host::judge(prompt)
}

/// Asks the gate's configured judge to judge `context` against `rubric`.
/// The rubric is the judge's instructions: take it from the gate's config
/// or the plugin, never from the workspace. The context (workspace files,
/// the diff, the agent's message) reaches the judge as untrusted data,
/// delimited, its verdict-like tokens neutralised and cut to the host's
/// context cap. Counts against the same judge-call limit as [`judge`].
pub fn judge_with_context(rubric: &str, context: &str) -> Result<JudgeReply, String> {
    gatehost::gate::host::judge_with_context(rubric, context)
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

/// Reads a workspace file's bytes, refusing files over `max` bytes (an
/// error of kind `FileTooLarge`). Uses the WASI descriptor API directly
/// (open, positioned reads), which costs fewer host calls than `std::fs`.
pub fn read_bytes(relative: &str, max: u64) -> std::io::Result<Vec<u8>> {
    with_workspace(|root| read_at(root, relative, max))
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no workspace preopen"))?
}

/// The workspace's preopened directory, asked of the host once per
/// evaluation (an instance lives for one evaluation) instead of once per
/// file.
fn with_workspace<R>(f: impl FnOnce(&wasi::filesystem::types::Descriptor) -> R) -> Option<R> {
    use std::cell::OnceCell;
    thread_local! {
        static ROOT: OnceCell<Option<wasi::filesystem::types::Descriptor>> =
            const { OnceCell::new() };
    }
    ROOT.with(|cell| {
        cell.get_or_init(|| {
            wasi::filesystem::preopens::get_directories()
                .into_iter()
                .find(|(_, name)| name == WORKSPACE)
                .map(|(d, _)| d)
        })
        .as_ref()
        .map(f)
    })
}

fn read_at(
    root: &wasi::filesystem::types::Descriptor,
    relative: &str,
    max: u64,
) -> std::io::Result<Vec<u8>> {
    use wasi::filesystem::types::{DescriptorFlags, OpenFlags, PathFlags};
    let to_io = |e: wasi::filesystem::types::ErrorCode| std::io::Error::other(format!("{e:?}"));
    let rel = relative.trim_start_matches("./").trim_start_matches('/');
    let file = root
        .open_at(
            PathFlags::SYMLINK_FOLLOW,
            rel,
            OpenFlags::empty(),
            DescriptorFlags::READ,
        )
        .map_err(to_io)?;
    // No `stat` for the size: the host already took one to open the file.
    // Read in growing chunks; a regular file reads short only at its end.
    let mut out = Vec::new();
    let mut want = FIRST_READ.min(max.saturating_add(1)).min(MAX_READ);
    loop {
        let (chunk, eof) = file.read(want, out.len() as u64).map_err(to_io)?;
        let short = (chunk.len() as u64) < want;
        out.extend_from_slice(&chunk);
        if out.len() as u64 > max {
            return Err(std::io::Error::new(
                std::io::ErrorKind::FileTooLarge,
                format!("more than {max} bytes"),
            ));
        }
        if eof || short {
            return Ok(out);
        }
        let read = out.len() as u64;
        want = read.clamp(FIRST_READ, MAX_READ).min(max + 1 - read);
    }
}

/// The first read's size: most source files fit.
const FIRST_READ: u64 = 16 * 1024;
/// The most one WASI `read` returns (wasmtime-wasi's cap): asking for no
/// more than this, a short read can only mean the end of the file.
const MAX_READ: u64 = 64 * 1024;

/// Reads a workspace file as text (lossily).
pub fn read_text(relative: &str) -> std::io::Result<String> {
    let bytes = std::fs::read(workspace_path(relative))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Every regular file in the workspace, relative, `/`-separated, sorted;
/// `.git` and `target` directories are skipped. Asks the host's
/// `workspace-files` (one call; the host walks natively), else walks with
/// the WASI descriptor API.
pub fn all_files() -> Vec<String> {
    match gatehost::gate::host::workspace_files() {
        Ok(mut files) => {
            files.retain(|f| {
                let dirs = f.rsplit_once('/').map_or("", |(d, _)| d);
                !dirs.split('/').any(|d| d == "target")
            });
            files
        }
        Err(_) => with_workspace(walk).unwrap_or_default(),
    }
}

/// Reads many workspace files, each of at most `max` bytes, answering in
/// the order given: the host reads them in batches, in parallel
/// (`read-files`). A file over `max` is an error of kind `FileTooLarge`.
pub fn read_files(paths: &[String], max: u64) -> Vec<std::io::Result<Vec<u8>>> {
    use gatehost::gate::host::ReadError;
    let mut out = Vec::with_capacity(paths.len());
    for batch in paths.chunks(READ_BATCH) {
        match gatehost::gate::host::read_files(batch, max) {
            Ok(files) => out.extend(files.into_iter().map(|r| {
                r.map_err(|e| match e {
                    ReadError::TooLarge => std::io::Error::new(
                        std::io::ErrorKind::FileTooLarge,
                        format!("more than {max} bytes"),
                    ),
                    ReadError::Unreadable(m) => std::io::Error::other(m),
                })
            })),
            // Too much for one answer (the memory budget): one by one.
            Err(_) => out.extend(batch.iter().map(|p| read_bytes(p, max))),
        }
    }
    out
}

/// Files per `read-files` call: at most this many times `max` bytes in
/// flight at once. A plugin that processes files a batch at a time (to
/// hold only one batch in memory) uses the same size.
pub const READ_BATCH: usize = 64;

fn walk(root: &wasi::filesystem::types::Descriptor) -> Vec<String> {
    use wasi::filesystem::types::{DescriptorFlags, DescriptorType, OpenFlags, PathFlags};
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
