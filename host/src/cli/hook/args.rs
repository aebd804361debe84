//! `gatehost hook`'s arguments, as clap types: the same options for every
//! agent CLI. It must never run anything.

use crate::wire::parse_duration;
use std::path::PathBuf;
use std::time::Duration;

pub(super) const AFTER_HELP: &str = "\
Modes: with --gates FILE the gates run here (standalone); without it the hook asks a running
`gatehost serve` (--server or GATEHOST_SERVER, else the server.url the daemon wrote in its data
directory, --data-dir or GATEHOST_DATA_DIR or the default; the agent token from --token or
GATEHOST_TOKEN, else --token-file, else the data directory's agent.token).
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
    /// The gate file for a sub-agent's stop (Claude Code's and Qwen Code's
    /// `SubagentStop`, Copilot CLI's `subagentStop`), counted on a retry
    /// budget of the sub-agent's own; default: `--gates`. In daemon mode
    /// (no `--gates`) a sub-agent's stop is gated only by this file, in the
    /// hook; without it the stop goes on (the parent's turn-end is gated).
    #[arg(long, value_name = "FILE")]
    pub subagent_gates: Option<PathBuf>,
    /// Host configuration (TOML), for standalone mode (its `[hook] notify_url` is told when the
    /// agent is out of retries or a gate could not run). Must not lie inside the workspace.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Standalone mode: how many times in a row a failing gate refuses the
    /// stop before it is let through with a message (the daemon uses the
    /// policy's maxRetries).
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub max_retries: u32,
    /// The most the hook takes (`50s`, `2m`, ms). The CLI itself waits 600 s
    /// for a hook (Claude Code, Codex, gatehost's OpenCode plugin: the timeout `hook install` writes) or
    /// 60 s (Gemini CLI, Cursor, Qwen Code) or 30 s (Copilot CLI); the default budget is a tenth (at least
    /// 5 s) less: 540 s, 54 s or 25 s. A session's end takes at most 1.5 s (the
    /// CLIs give it 3 s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub budget: Option<Duration>,
    /// Where standalone mode keeps each session's retry count (default:
    /// the user's state directory, `gatehost/hooks`).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Daemon mode: the daemon and the agent token (never the operator's).
    #[command(flatten)]
    pub daemon: crate::cli::server_args::ServerArgs,
    /// Daemon mode: a file holding the agent token (as the daemon's
    /// `agent.token`); read at each call.
    #[arg(long, value_name = "FILE", conflicts_with = "token")]
    pub token_file: Option<PathBuf>,
    /// Daemon mode: the daemon's data directory (as given to `gatehost serve
    /// --data-dir`), where its `server.url` and `agent.token` are read.
    #[arg(long, env = "GATEHOST_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
}

#[derive(Debug, clap::Subcommand)]
pub enum HookCommand {
    /// Answer a Claude Code hook (Stop, SubagentStop, SessionStart, UserPromptSubmit, SessionEnd).
    #[command(after_help = AFTER_HELP)]
    Claude(HookArgs),
    /// Answer a Codex CLI hook (Stop, SessionStart, UserPromptSubmit, SessionEnd).
    #[command(after_help = AFTER_HELP)]
    Codex(HookArgs),
    /// Answer a Gemini CLI hook (AfterAgent, SessionStart, BeforeAgent, SessionEnd).
    #[command(after_help = AFTER_HELP)]
    Gemini(HookArgs),
    /// Answer a Cursor hook (stop, beforeSubmitPrompt).
    #[command(after_help = AFTER_HELP)]
    Cursor(HookArgs),
    /// Answer a Qwen Code hook (Stop, SubagentStop, SessionStart, UserPromptSubmit, SessionEnd).
    #[command(after_help = AFTER_HELP)]
    Qwen(HookArgs),
    /// Answer a GitHub Copilot CLI hook (agentStop, subagentStop).
    #[command(after_help = AFTER_HELP)]
    Copilot(HookArgs),
    /// Answer gatehost's OpenCode plugin (session.idle).
    #[command(after_help = AFTER_HELP)]
    Opencode(HookArgs),
    /// Answer a Kiro CLI hook (stop, userPromptSubmit, agentSpawn; the v3 engine's Stop too).
    #[command(after_help = AFTER_HELP)]
    Kiro(HookArgs),
    /// Add gatehost's hooks to an agent CLI's own configuration (merged,
    /// idempotent, the original kept for `uninstall`).
    #[command(after_help = INSTALL_AFTER_HELP)]
    Install(InstallArgs),
    /// Take gatehost's hooks out again (the original bytes, if the file is
    /// as gatehost left it).
    Uninstall(UninstallArgs),
    /// What a session's last stop came to: passed, sent back, or let
    /// through without a pass (out of retries, a blocked policy, a gate
    /// that could not run, no policy watching). For scripts after a
    /// headless run.
    #[command(after_help = STATUS_AFTER_HELP)]
    Status(StatusArgs),
}

impl HookCommand {
    /// The agent CLI a hook-answering subcommand answers, and its options
    /// (`None`: install, uninstall, status).
    pub fn answering(self) -> Option<(crate::hook::AgentCli, HookArgs)> {
        use crate::hook::AgentCli;
        Some(match self {
            HookCommand::Claude(a) => (AgentCli::Claude, a),
            HookCommand::Codex(a) => (AgentCli::Codex, a),
            HookCommand::Gemini(a) => (AgentCli::Gemini, a),
            HookCommand::Cursor(a) => (AgentCli::Cursor, a),
            HookCommand::Qwen(a) => (AgentCli::Qwen, a),
            HookCommand::Copilot(a) => (AgentCli::Copilot, a),
            HookCommand::Opencode(a) => (AgentCli::Opencode, a),
            HookCommand::Kiro(a) => (AgentCli::Kiro, a),
            HookCommand::Install(_) | HookCommand::Uninstall(_) | HookCommand::Status(_) => {
                return None;
            }
        })
    }
}

pub(super) const STATUS_AFTER_HELP: &str = "Every stop a hook answers (standalone or daemon mode) is recorded in the hook state directory's
outcomes/, one file per session, kept 30 days after its last stop (a session's end does not remove
it). Exit status: 0 when the last stop passed its gates, 1 when it was sent back or let through
without a pass, 2 when no stop is on record. Example, after `claude -p \"…\" --output-format json`:
  gatehost hook status claude:$(jq -r .session_id out.json) --json
  gatehost hook status --last --cwd .";

/// `gatehost hook status`.
#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    /// The session, as the daemon names it: `AGENT:ID` (`claude:` and the
    /// CLI's session id).
    #[arg(
        value_name = "AGENT:ID",
        required_unless_present = "last",
        conflicts_with = "last"
    )]
    pub session: Option<String>,
    /// The most recent stop of any session (in `--cwd` if given).
    #[arg(long)]
    pub last: bool,
    /// With `--last`: only stops in this workspace.
    #[arg(long, value_name = "DIR", requires = "last")]
    pub cwd: Option<PathBuf>,
    /// The hook state directory (as given to the hooks' `--state-dir`).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// The record as JSON.
    #[arg(long)]
    pub json: bool,
}

pub(super) const INSTALL_AFTER_HELP: &str = "\
Files: Claude Code ~/.claude/settings.json ($CLAUDE_CONFIG_DIR) or .claude/settings.json;
Codex ~/.codex/hooks.json ($CODEX_HOME) or .codex/hooks.json; Gemini CLI ~/.gemini/settings.json
or .gemini/settings.json; Cursor ~/.cursor/hooks.json or .cursor/hooks.json;
Qwen Code ~/.qwen/settings.json ($QWEN_HOME) or .qwen/settings.json;
Copilot CLI ~/.copilot/hooks/gatehost.json ($COPILOT_HOME) or .github/hooks/gatehost.json;
OpenCode ~/.config/opencode/plugin/gatehost.js ($XDG_CONFIG_HOME) or .opencode/plugin/gatehost.js
(gatehost's plugin, run by `opencode serve` and the TUI; plain `opencode run` cannot be sent back);
Kiro CLI ~/.kiro/agents/NAME.json or .kiro/agents/NAME.json (--kiro-agent NAME, an agent that exists).
Trust: a project-scope hook lives in the workspace, where the agent writes and can remove it;
for unattended agents use --scope user (or the CLI's managed settings).";

pub(super) use crate::hook::plan::Scope;

#[derive(Debug, Clone, clap::Args)]
pub struct InstallArgs {
    /// The agent CLI.
    #[arg(value_enum, value_name = "AGENT")]
    pub agent: crate::hook::AgentCli,
    #[arg(long, value_enum, default_value = "user")]
    pub scope: Scope,
    /// The project, for --scope project.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub project: PathBuf,
    /// Standalone hooks: the gate file they run (else they ask the daemon).
    #[arg(long, value_name = "FILE")]
    pub gates: Option<PathBuf>,
    /// The gate file for a sub-agent's stop (Claude Code's and Qwen Code's
    /// `SubagentStop`, Copilot CLI's `subagentStop`), counted on a retry
    /// budget of the sub-agent's own; default: `--gates`. In daemon mode
    /// (no `--gates`) a sub-agent's stop is gated only by this file, in the
    /// hook; without it the stop goes on (the parent's turn-end is gated).
    #[arg(long, value_name = "FILE")]
    pub subagent_gates: Option<PathBuf>,
    /// The host configuration the hooks use.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Standalone hooks: blocks in a row before a stop is let through.
    #[arg(long, value_name = "N")]
    pub max_retries: Option<u32>,
    /// The hooks' budget, below the CLI's own hook timeout (600 s for Claude
    /// Code and Codex, 60 s for Gemini CLI, Cursor and Qwen Code, 30 s for Copilot CLI); default 540 s, 54 s or 25 s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub budget: Option<Duration>,
    /// Daemon hooks: the daemon's URL (else its data directory's `server.url`).
    #[arg(long, value_name = "URL", conflicts_with = "gates")]
    pub server: Option<String>,
    /// Daemon hooks: a file holding the agent token (never the token itself:
    /// the command line is in the CLI's configuration).
    #[arg(long, value_name = "FILE", conflicts_with = "gates")]
    pub token_file: Option<PathBuf>,
    /// Daemon hooks: the daemon's data directory (`gatehost serve --data-dir`),
    /// where the hook reads `server.url` and `agent.token`.
    #[arg(long, value_name = "DIR", conflicts_with = "gates")]
    pub data_dir: Option<PathBuf>,
    /// Kiro CLI: the agent whose configuration gets the hooks
    /// (`~/.kiro/agents/NAME.json`, or the project's `.kiro/agents/NAME.json`);
    /// it must exist (Kiro's built-in default agent carries no hooks).
    #[arg(long, value_name = "NAME")]
    pub kiro_agent: Option<String>,
    /// Also add `gatehost mcp` to the CLI's MCP servers (not for OpenCode, Kiro CLI, nor
    /// Copilot CLI's project scope: refused there).
    #[arg(long)]
    pub mcp: bool,
    /// Print the change; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// gatehost's state directory (the originals are kept in its `installs`).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct UninstallArgs {
    /// The agent CLI.
    #[arg(value_enum, value_name = "AGENT")]
    pub agent: crate::hook::AgentCli,
    #[arg(long, value_enum, default_value = "user")]
    pub scope: Scope,
    /// The project, for --scope project.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub project: PathBuf,
    /// Kiro CLI: the agent given to `install --kiro-agent`.
    #[arg(long, value_name = "NAME")]
    pub kiro_agent: Option<String>,
    /// Print the change; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// gatehost's state directory, as given to `install`.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}
