//! What `gatehost hook install AGENT` writes where: the hook command (this
//! gatehost, `hook AGENT`, the options given, paths made absolute) and the
//! `gatehost mcp` entry, handed to the CLI's adapter, whose plan
//! ([`crate::hook::Adapter::plan`]) names the files and the edits.
//!
//! It only plans: it must never write a file (the careful write is
//! [`super`]'s), and never plan an entry under a name that is not
//! gatehost's.

use super::super::super::error::{CliError, CliResult};
use super::super::args::InstallArgs;
use super::super::program::Program;
use crate::hook::plan::{Dirs, FilePlan, InstallContext, Planned};
use std::path::{Path, PathBuf};

/// The arguments of the `gatehost mcp` entry: `mcp` and the daemon
/// options given to `install` (absolute paths), so that the MCP server
/// reaches the same daemon as the hooks.
fn mcp_args(args: &InstallArgs) -> CliResult<Vec<String>> {
    let mut words = vec!["mcp".to_string()];
    words.extend(daemon_words(args)?);
    Ok(words)
}

/// `--server`, `--token-file` and `--data-dir` as given to `install`, the
/// paths made absolute (the CLI runs its hooks and MCP servers from
/// anywhere); a path that is not there is refused, naming its option.
fn daemon_words(args: &InstallArgs) -> CliResult<Vec<String>> {
    let mut words = Vec::new();
    if let Some(url) = &args.server {
        words.push("--server".into());
        words.push(url.clone());
    }
    for (flag, path) in [
        ("--token-file", &args.token_file),
        ("--data-dir", &args.data_dir),
    ] {
        if let Some(p) = path {
            let abs = std::fs::canonicalize(p)
                .map_err(|e| CliError::input(format!("{flag} {}: {e}", p.display())).field(flag))?;
            words.push(flag.into());
            words.push(abs.display().to_string());
        }
    }
    Ok(words)
}

/// The hook command gatehost installs: `program` (see [`super::program`]),
/// `hook AGENT`, and the options given.
pub(super) fn hook_command(args: &InstallArgs, program: &Path) -> CliResult<String> {
    let words = hook_words(args, program)?;
    let quoted: Result<Vec<String>, _> = words
        .iter()
        .map(|w| shlex::try_quote(w).map(|q| q.into_owned()))
        .collect();
    quoted
        .map(|q| q.join(" "))
        .map_err(|e| CliError::input(format!("cannot quote the hook command: {e}")))
}

/// [`hook_command`]'s words, unquoted: the program, then its arguments.
fn hook_words(args: &InstallArgs, program: &Path) -> CliResult<Vec<String>> {
    let mut words = vec![
        program.display().to_string(),
        "hook".into(),
        args.agent.name().into(),
    ];
    for (flag, file) in [
        ("--gates", &args.gates),
        ("--subagent-gates", &args.subagent_gates),
        ("--config", &args.config),
    ] {
        if let Some(f) = file {
            let abs = std::fs::canonicalize(f)
                .map_err(|e| CliError::input(format!("{flag} {}: {e}", f.display())).field(flag))?;
            words.push(flag.into());
            words.push(abs.display().to_string());
        }
    }
    words.extend(daemon_words(args)?);
    if let Some(n) = args.max_retries {
        words.push("--max-retries".into());
        words.push(n.to_string());
    }
    if let Some(b) = args.budget {
        let limit = crate::hook::adapter(args.agent).cli_timeout();
        if b >= limit {
            return Err(CliError::input(format!(
                "--budget {} is not below {}'s hook timeout ({} s): the CLI would give up first",
                crate::gate::human_duration(b),
                args.agent.name(),
                limit.as_secs()
            ))
            .field("--budget"));
        }
        words.push("--budget".into());
        words.push(format!("{}ms", b.as_millis()));
    }
    if let Some(dir) = &args.state_dir {
        words.push("--state-dir".into());
        words.push(
            std::path::absolute(dir)
                .unwrap_or_else(|_| dir.clone())
                .display()
                .to_string(),
        );
    }
    Ok(words)
}

/// What to write where, and the program the hooks run: the adapter's
/// plan of this install; what it says is printed.
pub(super) fn plan(
    args: &InstallArgs,
    program: &Program,
    command: &str,
) -> CliResult<Vec<FilePlan>> {
    let adapter = crate::hook::adapter(args.agent);
    if args.mcp
        && let Some(why) = adapter.refuse_mcp(args.scope)
    {
        return Err(CliError::input(format!("--mcp: {why}")).field("--mcp"));
    }
    let files = install_files(args)?;
    let exe = program.path.display().to_string();
    let mcp_args = mcp_args(args)?;
    let words = hook_words(args, &program.path)?;
    let ctx = InstallContext {
        files: &files,
        command,
        words: &words,
        mcp: args.mcp.then_some((exe.as_str(), mcp_args.as_slice())),
    };
    let mut planned = Planned::default();
    adapter.plan(&ctx, &mut planned);
    for said in &planned.said {
        println!("{said}");
    }
    for warning in &planned.warnings {
        eprintln!("warning: {warning}");
    }
    Ok(planned.files)
}

/// The files `install` changes for the agent in its scope.
fn install_files(args: &InstallArgs) -> CliResult<Vec<PathBuf>> {
    Ok(crate::hook::adapter(args.agent).install_files(
        args.scope,
        &Dirs::new(&args.project),
        args.kiro_agent.as_deref(),
    )?)
}
