//! `gatehost hook install AGENT` and `hook uninstall AGENT`: where each
//! CLI keeps its hooks (user or project scope), and the careful write: the
//! original bytes kept in gatehost's state directory, a temporary file
//! renamed over the old one, nothing written through a symlink, `--dry-run`
//! printing the change instead.
//!
//! The edits themselves are [`crate::hook::install`]'s. Uninstall gives the
//! original bytes back when the file is as gatehost left it; if someone
//! edited it since, only gatehost's entries are taken out.
//!
//! What is written where is planned by [`plan`].
//!
//! It must never touch an entry that is not gatehost's, never write where a
//! symlink points, and never lose the original: the backup is written before
//! the file is replaced.

use super::super::error::{CliError, CliResult};
use super::args::{InstallArgs, Scope, UninstallArgs};
use super::program::this_program;
use crate::hook::install::{
    Layout, add_hooks, add_mcp_server, codex_config_mcp, codex_config_trust, codex_trust,
    is_gatehost_plugin, opencode_plugin, remove_hooks, remove_mcp_server,
};

use crate::hook::AgentCli;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

mod plan;

use crate::hook::plan::{Dirs, Edit, MCP_NAME};
use plan::{hook_command, plan};

/// The texts of the files before and after, by path: a later file's edit
/// (Codex's trust) reads an earlier one's.
type Texts = HashMap<PathBuf, (String, String)>;

/// What the original of an installed file was, kept outside it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    path: PathBuf,
    /// The bytes before gatehost's first install; `None`: there was no file.
    original: Option<String>,
    /// The bytes gatehost wrote last.
    installed: String,
    /// The directory gatehost made for the file, removed again if empty.
    created_dir: Option<PathBuf>,
}

pub(super) fn install(args: &InstallArgs) -> CliResult<i32> {
    let program = this_program()?;
    let command = hook_command(args, &program.path)?;
    let plans = plan(args, &program, &command)?;
    if let Some(w) = &program.warning {
        tracing::info!(program = %program.path.display(), "the hooks run gatehost by its own path");
        eprintln!("warning: {w}");
    }
    println!("hook command: {command}");
    tracing::info!(agent = args.agent.name(), %command, dry_run = args.dry_run, "hook install");
    let backups = backup_dir(args.state_dir.as_deref())?;
    let mut texts = Texts::new();
    for p in &plans {
        let (current, existed) = read(&p.path)?;
        let mut next = current.clone();
        for e in &p.edits {
            next = apply(e, &next, &texts).map_err(|m| edit_error(&p.path, &m))?;
        }
        texts.insert(p.path.clone(), (current.clone(), next.clone()));
        if next == current {
            println!(
                "unchanged: {} (gatehost's entries are already there)",
                p.path.display()
            );
            continue;
        }
        if args.dry_run {
            print_diff(&p.path, &current, &next);
            continue;
        }
        let manifest_path = backups.join(manifest_name(&p.path));
        let previous: Option<Manifest> = read_manifest(&manifest_path)?;
        let created_dir = ensure_parent(&p.path)?;
        let manifest = match previous {
            // Installed before and untouched since: the original stays.
            Some(m) if m.installed == current => Manifest {
                installed: next.clone(),
                ..m
            },
            // Edited since (or never installed): the original is now the
            // file as it is, without gatehost's entries.
            Some(m) => Manifest {
                path: p.path.clone(),
                original: Some(
                    without_ours(&p.path, &current, &texts).map_err(|m| edit_error(&p.path, &m))?,
                ),
                installed: next.clone(),
                created_dir: m.created_dir,
            },
            None => Manifest {
                path: p.path.clone(),
                original: existed.then(|| current.clone()),
                installed: next.clone(),
                created_dir,
            },
        };
        write_manifest(&backups, &manifest_path, &manifest)?;
        write_atomic(&p.path, &next)?;
        println!(
            "installed: {} (the original is kept in {})",
            p.path.display(),
            manifest_path.display()
        );
    }
    if !args.dry_run {
        print_trust_note(args.agent, args.scope);
    }
    Ok(0)
}

pub(super) fn uninstall(args: &UninstallArgs) -> CliResult<i32> {
    let backups = backup_dir(args.state_dir.as_deref())?;
    let paths = crate::hook::adapter(args.agent).install_files(
        args.scope,
        &Dirs::new(&args.project),
        args.kiro_agent.as_deref(),
    )?;
    // Every file as it is now, first: Codex's trust entries are found from
    // its hooks.json before that is restored.
    let mut texts = Texts::new();
    for path in &paths {
        let (current, _) = read(path)?;
        texts.insert(path.clone(), (current.clone(), current));
    }
    for path in paths {
        let manifest_path = backups.join(manifest_name(&path));
        let manifest = read_manifest(&manifest_path)?;
        let (current, existed) = read(&path)?;
        let restore = match &manifest {
            Some(m) if existed && m.installed == current => {
                m.original.clone().map_or(Restore::Delete, Restore::Bytes)
            }
            _ => {
                let stripped =
                    without_ours(&path, &current, &texts).map_err(|m| edit_error(&path, &m))?;
                if !existed || stripped == current {
                    Restore::Nothing
                } else if stripped.is_empty() && is_gatehost_plugin(&current) {
                    Restore::Delete
                } else {
                    Restore::Bytes(stripped)
                }
            }
        };
        if args.dry_run {
            match &restore {
                Restore::Nothing => println!("unchanged: {} (no gatehost entries)", path.display()),
                Restore::Delete => println!("would remove {} (gatehost made it)", path.display()),
                Restore::Bytes(b) => print_diff(&path, &current, b),
            }
            continue;
        }
        match restore {
            Restore::Nothing => println!("unchanged: {} (no gatehost entries)", path.display()),
            Restore::Delete => {
                refuse_symlinks(&path)?;
                std::fs::remove_file(&path).map_err(|e| io_error(&path, &e))?;
                if let Some(dir) = manifest.as_ref().and_then(|m| m.created_dir.as_ref()) {
                    let _ = std::fs::remove_dir(dir); // only if empty
                }
                println!("removed: {} (gatehost made it)", path.display());
            }
            Restore::Bytes(b) => {
                write_atomic(&path, &b)?;
                println!("restored: {}", path.display());
            }
        }
        if manifest.is_some() {
            std::fs::remove_file(&manifest_path).map_err(|e| io_error(&manifest_path, &e))?;
        }
    }
    Ok(0)
}

enum Restore {
    Nothing,
    Delete,
    Bytes(String),
}

fn apply(edit: &Edit, text: &str, texts: &Texts) -> Result<String, String> {
    match edit {
        Edit::Hooks(set) => add_hooks(text, set),
        Edit::Mcp { name, server } => add_mcp_server(text, name, server),
        Edit::CodexTrust { hooks } => {
            let (before, after) = texts.get(hooks).cloned().unwrap_or_default();
            let old: Vec<String> = codex_trust(hooks, &before)
                .map_err(|e| e.to_string())?
                .into_iter()
                .map(|(k, _)| k)
                .collect();
            let new = codex_trust(hooks, &after).map_err(|e| e.to_string())?;
            codex_config_trust(text, &old, &new)
        }
        Edit::CodexMcp { command, args } => codex_config_mcp(text, MCP_NAME, Some((command, args))),
        Edit::Plugin {
            command,
            args,
            timeout_ms,
        } => {
            if !text.trim().is_empty() && !is_gatehost_plugin(text) {
                return Err(
                    "is not gatehost's plugin (another program's?): move it aside or remove it"
                        .to_string(),
                );
            }
            opencode_plugin(command, args, *timeout_ms)
        }
    }
    .map_err(|e| e.to_string())
}

/// `text` (the file at `path`) without any of gatehost's entries: hooks of
/// either layout and the MCP server, or in Codex's `config.toml` the trust
/// of gatehost's hooks in the `hooks.json` beside it (as `texts` has it).
fn without_ours(path: &Path, text: &str, texts: &Texts) -> Result<String, String> {
    if path.extension().is_some_and(|e| e == "js") {
        // A plugin file is gatehost's whole (nothing of it is kept) or
        // another program's (all of it is).
        return Ok(if is_gatehost_plugin(text) {
            String::new()
        } else {
            text.to_string()
        });
    }
    if path.file_name().is_some_and(|n| n == "config.toml") {
        let mut keys = Vec::new();
        for (p, (before, _)) in texts {
            if p.file_name().is_some_and(|n| n == "hooks.json") {
                keys.extend(
                    codex_trust(p, before)
                        .map_err(|e| e.to_string())?
                        .into_iter()
                        .map(|(k, _)| k),
                );
            }
        }
        let t = codex_config_trust(text, &keys, &[]).map_err(|e| e.to_string())?;
        return codex_config_mcp(&t, MCP_NAME, None).map_err(|e| e.to_string());
    }
    let t = remove_hooks(text, Layout::Grouped).map_err(|e| e.to_string())?;
    let t = remove_hooks(&t, Layout::Flat).map_err(|e| e.to_string())?;
    remove_mcp_server(&t, MCP_NAME).map_err(|e| e.to_string())
}

fn print_trust_note(agent: AgentCli, scope: Scope) {
    if scope == Scope::Project {
        println!(
            "note: a project-scope hook lives in the workspace, where the agent writes: it can edit or remove it. \
             For unattended agents install with --scope user (or the CLI's managed settings)."
        );
    }
    for note in crate::hook::adapter(agent).install_notes(scope) {
        println!("note: {note}");
    }
}

fn read(path: &Path) -> CliResult<(String, bool)> {
    refuse_symlinks(path)?;
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(|t| (t, true))
            .map_err(|_| CliError::input(format!("{} is not UTF-8 text", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((String::new(), false)),
        Err(e) => Err(io_error(path, &e)),
    }
}

/// Neither the file nor its folder may be a symlink: a project's settings
/// are in the workspace, where an agent could point them anywhere.
fn refuse_symlinks(path: &Path) -> CliResult<()> {
    for p in [Some(path), path.parent()].into_iter().flatten() {
        if std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(CliError::new(
                "symlink",
                format!(
                    "{} is a symlink; gatehost writes no configuration through one",
                    p.display()
                ),
            ));
        }
    }
    Ok(())
}

/// Makes the file's folder if missing; returns it if it was made.
fn ensure_parent(path: &Path) -> CliResult<Option<PathBuf>> {
    let Some(dir) = path.parent() else {
        return Ok(None);
    };
    if dir.exists() {
        return Ok(None);
    }
    std::fs::create_dir_all(dir).map_err(|e| io_error(dir, &e))?;
    Ok(Some(dir.to_path_buf()))
}

fn write_atomic(path: &Path, text: &str) -> CliResult<()> {
    use std::os::unix::fs::PermissionsExt;
    refuse_symlinks(path)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mode = std::fs::metadata(path).map_or(0o644, |m| m.permissions().mode() & 0o7777);
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| io_error(dir, &e))?;
    tmp.write_all(text.as_bytes())
        .map_err(|e| io_error(path, &e))?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(|e| io_error(path, &e))?;
    tmp.as_file().sync_all().map_err(|e| io_error(path, &e))?;
    tmp.persist(path).map_err(|e| io_error(path, &e.error))?;
    Ok(())
}

fn backup_dir(state_dir: Option<&Path>) -> CliResult<PathBuf> {
    let hooks = crate::hook::state::StateDir::open(state_dir)
        .map_err(|e| CliError::new("state", e.to_string()))?;
    Ok(hooks.path().join("installs"))
}

fn manifest_name(path: &Path) -> String {
    let digest = Sha256::digest(path.as_os_str().as_encoded_bytes());
    format!("{}.json", hex::encode(&digest[..16]))
}

fn read_manifest(path: &Path) -> CliResult<Option<Manifest>> {
    match std::fs::read(path) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| CliError::new("state", format!("{} is corrupt: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(path, &e)),
    }
}

fn write_manifest(dir: &Path, path: &Path, m: &Manifest) -> CliResult<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| io_error(dir, &e))?;
    let text =
        serde_json::to_string_pretty(m).map_err(|e| CliError::new("encode", e.to_string()))?;
    write_atomic(path, &text)
}

fn print_diff(path: &Path, old: &str, new: &str) {
    let shown = path.display().to_string();
    let diff = similar::TextDiff::from_lines(old, new);
    print!("{}", diff.unified_diff().header(&shown, &shown));
}

fn edit_error(path: &Path, message: &str) -> CliError {
    CliError::new("bad-config", format!("{}: {message}", path.display()))
}

fn io_error(path: &Path, e: &std::io::Error) -> CliError {
    CliError::new("io", format!("{}: {e}", path.display()))
}
