//! `gatehost hook AGENT`: answer one hook call of an agent CLI. The hook
//! JSON is read on stdin, the answer written on stdout in the CLI's format
//! and nothing else (logs go to stderr), with the exit status the CLI
//! expects, always within the budget.
//!
//! Where the verdict comes from: standalone (`--gates FILE`: the gates run
//! here, in the hook's `cwd`, like `gatehost check`; [`super::hook_standalone`])
//! or a daemon (`gatehost serve`: the session is registered as
//! `AGENT:<session_id>`, the turn-end reported, the verdicts of the policies
//! it counted awaited; [`super::hook_daemon`]). Both feed the one pure
//! decision, [`crate::hook::decide`], with the session's standing kept by
//! [`crate::hook::state`].
//!
//! It must never answer with anything but the adapter's rendering, and
//! never let a stop through silently because something failed: every
//! failure is an [`Input::Error`] (block once, then stop with the message).

use super::error::CliResult;
use crate::api::parse_duration;
use crate::hook::decide::{Input, Standing, decide};
use crate::hook::state::StateDir;
use crate::hook::{Adapter, AgentCli, Answer, HookInput, HookPoint, adapter::trim_reason};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

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

pub(super) fn run(command: HookCommand) -> CliResult<i32> {
    let (agent, args) = match command {
        HookCommand::Claude(a) => (AgentCli::Claude, a),
        HookCommand::Codex(a) => (AgentCli::Codex, a),
        HookCommand::Gemini(a) => (AgentCli::Gemini, a),
        HookCommand::Cursor(a) => (AgentCli::Cursor, a),
    };
    Ok(answer_hook(agent, &args))
}

/// The most of stdin read: hook JSON is small, a transcript is not sent.
const MAX_INPUT: u64 = 16 * 1024 * 1024;

/// Reads the hook call, decides, writes the answer; returns the exit status.
fn answer_hook(agent: AgentCli, args: &HookArgs) -> i32 {
    let started = Instant::now();
    let adapter = agent.adapter();
    let budget = args.budget.unwrap_or_else(|| default_budget(adapter));
    let mut raw = Vec::new();
    let read = std::io::stdin().take(MAX_INPUT).read_to_end(&mut raw);
    let parsed = match read {
        Ok(_) => adapter.parse(&raw).map_err(|e| e.to_string()),
        Err(e) => Err(format!("cannot read the hook's stdin: {e}")),
    };
    let (point, answer) = match parsed {
        Ok(input) => {
            tracing::info!(agent = agent.name(), session = %input.session_id, point = ?input.point,
                loop_hint = ?input.loop_hint, "hook called");
            (input.point, answer_input(agent, args, &input, budget))
        }
        Err(e) => {
            // Nothing to count retries by: the CLI's own cap bounds this.
            tracing::error!(agent = agent.name(), error = %e, "unreadable hook input");
            (
                HookPoint::Stop,
                Answer::Block(format!("gatehost hook {}: {e}", agent.name())),
            )
        }
    };
    let answer = match answer {
        Answer::Block(r) => Answer::Block(trim_reason(&r, adapter.reason_limit())),
        Answer::StopWithMessage(m) => {
            eprintln!("{m}");
            Answer::StopWithMessage(trim_reason(&m, adapter.reason_limit()))
        }
        Answer::Proceed => Answer::Proceed,
    };
    let rendered = adapter.render(point, &answer);
    tracing::info!(agent = agent.name(), answer = ?answer, took_ms = started.elapsed().as_millis() as u64, "hook answered");
    let mut out = std::io::stdout().lock();
    if let Err(e) = out
        .write_all(rendered.stdout.as_bytes())
        .and_then(|()| out.flush())
    {
        tracing::error!(error = %e, "cannot write the hook's answer");
        return 1;
    }
    rendered.exit
}

/// A tenth (at least 5 s) below the CLI's own timeout.
fn default_budget(adapter: &dyn Adapter) -> Duration {
    let t = adapter.cli_timeout();
    t.saturating_sub((t / 10).max(Duration::from_secs(5)))
}

/// The answer to a parsed hook call: what happened, decided against the
/// session's standing.
fn answer_input(agent: AgentCli, args: &HookArgs, input: &HookInput, budget: Duration) -> Answer {
    let deadline = Instant::now() + budget;
    let what = match input.point {
        HookPoint::SessionStart => {
            if args.gates.is_none() {
                super::hook_daemon::greet(agent, args, input, deadline);
            }
            return Answer::Proceed;
        }
        HookPoint::TurnStart => {
            if args.gates.is_none() {
                super::hook_daemon::turn_start(agent, args, input, deadline);
            }
            Input::Prompt
        }
        HookPoint::Stop => match &args.gates {
            Some(gates) => super::hook_standalone::verdict(args, gates, input, deadline),
            None => super::hook_daemon::verdict(agent, args, input, deadline),
        },
    };
    tracing::info!(agent = agent.name(), session = %input.session_id, input = ?what, "hook verdict");
    let state = match StateDir::open(args.state_dir.as_deref()) {
        Ok(s) => s,
        Err(e) => return state_failure(input.point, &e.to_string()),
    };
    let max = args.max_retries;
    match state.update(agent, &input.session_id, |standing: Standing| {
        let d = decide(standing, &what, max);
        (d.next, d.answer)
    }) {
        Ok(answer) => answer,
        Err(e) => state_failure(input.point, &e.to_string()),
    }
}

/// Without its standing the hook cannot count: a stop is refused (the CLI's
/// own cap ends the loop), anything else goes on.
fn state_failure(point: HookPoint, error: &str) -> Answer {
    tracing::error!(error, "cannot keep the session's retry count");
    match point {
        HookPoint::Stop => Answer::Block(format!(
            "gatehost cannot keep this session's retry count, so this work is not accepted: {error}"
        )),
        _ => Answer::Proceed,
    }
}
