//! `gatehost token rotate`: replaces the daemon's tokens
//! (`POST /v1/tokens/rotate`, operator token): on PostgreSQL the
//! cluster's, which every host takes up within seconds. The daemon
//! answers where the new tokens are, never a value; this command prints
//! those files, and the values only with `--show` (read from those files,
//! which the daemon wrote on this machine).
//!
//! It owns that command only; it must never keep a token, nor print one
//! unless asked.

use super::client::{ClientArgs, find_server};
use super::error::{CliError, CliResult};
use super::server_args::ServerArgs;
use crate::client::Client;
use crate::wire::RotateTokens;

#[derive(Debug, clap::Subcommand)]
pub enum TokenCommand {
    /// Replace the agent and operator tokens (both unless --agent or
    /// --operator): the old ones are refused from then on, on every host
    /// of a PostgreSQL cluster.
    #[command(after_help = AFTER_HELP)]
    Rotate(RotateArgs),
}

#[derive(Debug, clap::Args)]
pub struct RotateArgs {
    #[command(flatten)]
    pub daemon: ServerArgs,
    /// Replace the agent token only.
    #[arg(long, conflicts_with_all = ["operator", "both"])]
    pub agent: bool,
    /// Replace the operator token only.
    #[arg(long, conflicts_with_all = ["agent", "both"])]
    pub operator: bool,
    /// Replace both (the default).
    #[arg(long, conflicts_with_all = ["agent", "operator"])]
    pub both: bool,
    /// Also print the new tokens (read from the files the daemon names).
    #[arg(long)]
    pub show: bool,
    /// Print the answer as JSON (with --show, the tokens too).
    #[arg(long)]
    pub json: bool,
}

pub(super) const AFTER_HELP: &str = "\
Takes the operator token (--token or GATEHOST_TOKEN, else the local daemon's operator.token).
The daemon makes new random tokens, stores them (on PostgreSQL in the cluster, where every other
host takes them up within a few seconds and rewrites its own token files), swaps them in memory
and rewrites its agent.token and operator.token (owner-only). What reads those files (the
hooks and the CLI at each run, `gatehost mcp` at each call) carries on with the new ones; a
process given the old token as a value (GATEHOST_TOKEN, --token) is refused 401 until given the
new one. A new operator token ends the page's logins. A token whose file the configuration
names ([daemon] agent_token_file, operator_token_file) is never rotated: the daemon does not
write the operator's own files. See docs/fleet.md, \"The cluster's tokens\".";

/// `--json`'s answer: the daemon's, with the new tokens when `--show`.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Shown<'a> {
    #[serde(flatten)]
    done: &'a crate::wire::TokensRotated,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_token: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    operator_token: Option<&'a str>,
}

pub(super) fn run(command: TokenCommand) -> CliResult<i32> {
    match command {
        TokenCommand::Rotate(args) => rotate(&args),
    }
}

fn rotate(args: &RotateArgs) -> CliResult<i32> {
    let client_args = ClientArgs {
        daemon: args.daemon.clone(),
        session_key: None,
        json: args.json,
    };
    let server = find_server(&client_args.daemon)?;
    let token = super::ui::operator_token(&client_args, &server)?;
    let which = RotateTokens {
        agent: !args.operator,
        operator: !args.agent,
    };
    let client = Client::new(&server, token)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::new("runtime", format!("cannot start the runtime: {e}")))?;
    let done = rt.block_on(client.rotate_tokens(&which))?;
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|t| t.trim().to_string())
            .map_err(|e| {
                CliError::new(
                    "no-token",
                    format!("the tokens were rotated, but {path} cannot be read here: {e}"),
                )
                .hint("read it as the daemon's user, on the daemon's machine")
            })
    };
    let shown = |name: &str, path: &str| -> CliResult<Option<String>> {
        if args.show && done.rotated.iter().any(|r| r == name) {
            read(path).map(Some)
        } else {
            Ok(None)
        }
    };
    let agent = shown("agent", &done.agent_token_file)?;
    let operator = shown("operator", &done.operator_token_file)?;
    if args.json {
        let shown = Shown {
            done: &done,
            agent_token: agent.as_deref(),
            operator_token: operator.as_deref(),
        };
        let text = serde_json::to_string(&shown)
            .map_err(|e| CliError::new("internal", format!("cannot print the answer: {e}")))?;
        println!("{text}");
        return Ok(0);
    }
    let scope = if done.cluster {
        "the cluster's: every host takes them up within seconds"
    } else {
        "this daemon's"
    };
    println!("rotated: {} ({scope})", done.rotated.join(", "));
    println!("agent token: {}", done.agent_token_file);
    println!("operator token: {}", done.operator_token_file);
    if let Some(a) = agent {
        println!("new agent token: {a}");
    }
    if let Some(o) = operator {
        println!("new operator token: {o}");
    }
    if done.rotated.iter().any(|r| r == "operator") {
        eprintln!(
            "the old operator token is refused from now on: use the new one (GATEHOST_TOKEN=$(cat {}))",
            done.operator_token_file
        );
    }
    Ok(0)
}
