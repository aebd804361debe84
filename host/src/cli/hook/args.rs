//! `gatehost hook`'s arguments, as clap types: the same options for every
//! agent CLI. It must never run anything.

use crate::api::parse_duration;
use std::path::PathBuf;
use std::time::Duration;

pub const AFTER_HELP: &str = "\
Modes: with --gates FILE the gates run here (standalone); without it the hook asks a running
`gatehost serve` (--server or GATEHOST_SERVER, else the server.url the daemon wrote; the agent
token from --token or GATEHOST_TOKEN, else the daemon's agent.token).
Outcomes: a pass lets the stop happen; a failing gate refuses it with the gate's reason, at most
--max-retries times in a row (daemon: the policy's maxRetries), then lets it happen with a message
the user sees; a gate that could not run refuses once with the error, then lets it happen with it.
Exit status: 0 with the CLI's JSON on stdout, whatever the outcome (the CLIs read non-zero as a
pass or a crash). Install the hook with `gatehost hook install AGENT`.";

/// One hook call's options, the same for every CLI.
#[derive(Debug, Clone, clap::Args)]
pub struct HookArgs {
    /// Standalone mode: the gate file to run (as `gatehost check`'s). Must
    /// not lie inside the workspace.
    #[arg(long, value_name = "FILE")]
    pub gates: Option<PathBuf>,
    /// Host configuration (TOML), for standalone mode. Must not lie inside the workspace.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Standalone mode: how many times in a row a failing gate refuses the
    /// stop before it is let through with a message (the daemon uses the
    /// policy's maxRetries).
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub max_retries: u32,
    /// The most the hook takes (`50s`, `2m`, ms). Default: a tenth below the
    /// CLI's own hook timeout (Claude Code and Codex 600 s, Gemini CLI and
    /// Cursor 60 s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub budget: Option<Duration>,
    /// Where standalone mode keeps each session's retry count (default:
    /// the user's state directory, `gatehost/hooks`).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Daemon mode: the daemon's URL.
    #[arg(long, env = "GATEHOST_SERVER", value_name = "URL")]
    pub server: Option<String>,
    /// Daemon mode: the agent token (never the operator's).
    #[arg(
        long,
        env = "GATEHOST_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
}

#[derive(Debug, clap::Subcommand)]
pub enum HookCommand {
    /// Answer a Claude Code hook (Stop, SubagentStop, SessionStart, UserPromptSubmit).
    #[command(after_help = AFTER_HELP)]
    Claude(HookArgs),
    /// Answer a Codex CLI hook (Stop, SessionStart, UserPromptSubmit).
    #[command(after_help = AFTER_HELP)]
    Codex(HookArgs),
    /// Answer a Gemini CLI hook (AfterAgent, SessionStart, BeforeAgent).
    #[command(after_help = AFTER_HELP)]
    Gemini(HookArgs),
    /// Answer a Cursor hook (stop, beforeSubmitPrompt).
    #[command(after_help = AFTER_HELP)]
    Cursor(HookArgs),
}
