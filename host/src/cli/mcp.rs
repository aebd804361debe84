//! `gatehost mcp`: the MCP server for agents ([`crate::mcp`]) on stdio.
//! It finds the daemon (`--server`, `GATEHOST_SERVER`, else the
//! `server.url` of the data directory: `--data-dir`, `GATEHOST_DATA_DIR` or
//! the default) and the agent token (`--token`, `GATEHOST_TOKEN`, else the
//! file `--token-file`, else that directory's `agent.token`),
//! refuses to start with the operator's token, and serves until the MCP
//! client closes stdin. A token from a file is read again at each call,
//! so that `gatehost token rotate` does not cut it off. Its errors go through [`super::error`]: it never
//! prints one itself, and stdout carries nothing but MCP messages.

use super::client::find_server;
use super::error::{CliError, CliResult};
use super::serve::default_data_dir;
use super::server_args::{ServerArgs, discover};
use crate::api::auth::{AGENT_TOKEN_FILE, OPERATOR_TOKEN_FILE, read_or_create};
use crate::client::Client;
use crate::mcp::{self, McpError};
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub daemon: ServerArgs,
    /// A file holding the agent token (owner-only), read at start.
    #[arg(long, value_name = "FILE", conflicts_with = "token")]
    pub token_file: Option<PathBuf>,
    /// The daemon's data directory (`gatehost serve --data-dir`), where its
    /// `server.url` and `agent.token` are read [default: the default data
    /// directory].
    #[arg(long, env = "GATEHOST_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
}

pub(super) const AFTER_HELP: &str = "\
An MCP client runs it as a stdio server, e.g. `claude mcp add gatehost -- gatehost mcp`.
Tools: policy_attach, policy_status, policy_list, session_events_poll, session_monitor,
session_current (your session: GATEHOST_SESSION, else the live one your CLI's hook registered in
this directory; policy_attach and session_events_poll default to it),
routine_status, routine_list
(no ack, no cancel: those stay with the operator). Logs go to stderr. See `gatehost docs mcp`.";

pub(super) fn run(args: McpArgs) -> CliResult<i32> {
    let data_dir = args.data_dir.clone().or_else(default_data_dir);
    let server = match &args.data_dir {
        Some(_) => discover(args.daemon.server.as_deref(), data_dir.as_deref()).map_err(|e| {
            CliError::new("no-daemon", format!("no daemon: {}", e.why))
                .field("--data-dir")
                .hint("is `gatehost serve --data-dir` running on that directory?")
        })?,
        None => find_server(&args.daemon)?,
    };
    // A token read from a file is read again at each call (a rotation
    // rewrites it); one given as is stays as given.
    let (token, file) = match (args.daemon.token, &args.token_file) {
        (Some(t), _) => (t.trim().to_string(), None),
        (None, Some(file)) => (
            read_or_create(file, false).map_err(|e| {
                CliError::new("no-token", format!("no agent token: {e}")).field("--token-file")
            })?,
            Some(file.clone()),
        ),
        (None, None) => (
            agent_token(data_dir.as_deref())?,
            data_dir.as_deref().map(|d| d.join(AGENT_TOKEN_FILE)),
        ),
    };
    let operator_file = data_dir.map(|d| d.join(OPERATOR_TOKEN_FILE));
    // Its attaches present the keys of the sessions they name, kept by
    // the hook or the CLI that registered them (or GATEHOST_SESSION_KEY).
    let mut client = Client::new(&server, token.clone())?
        .with_keyring(crate::keyring::Keyring::default_for_user())
        .with_session_keys(super::client::split_keys(
            std::env::var("GATEHOST_SESSION_KEY").ok().as_deref(),
        ));
    if let Some(f) = file {
        client = client.with_token_file(f);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::new("runtime", format!("cannot start the runtime: {e}")))?;
    rt.block_on(async {
        mcp::check_agent_token(&client, &token, operator_file.as_deref())
            .await
            .map_err(|e| refused(e, &server))?;
        tracing::info!(%server, "gatehost mcp: serving MCP on stdio");
        let at = mcp::Whereabouts::of_this_process();
        tracing::info!(cwd = %at.cwd.display(), pinned = ?at.pinned, "the agent's whereabouts");
        let handler = mcp::GatehostMcp::new(client, at).map_err(|e| refused(e, &server))?;
        mcp::serve_stdio(handler)
            .await
            .map_err(|e| refused(e, &server))?;
        Ok(0)
    })
}

/// The default data directory's `agent.token` (owner-only, as the daemon
/// made it).
fn agent_token(data_dir: Option<&Path>) -> CliResult<String> {
    let no_token = |why: String| {
        CliError::new("no-token", format!("no agent token: {why}"))
            .field("--token")
            .hint("pass the daemon's agent.token (in its data directory) with --token or GATEHOST_TOKEN")
    };
    let dir = data_dir.ok_or_else(|| no_token("no default data directory".into()))?;
    read_or_create(&dir.join(AGENT_TOKEN_FILE), false).map_err(|e| no_token(e.to_string()))
}

fn refused(e: McpError, server: &str) -> CliError {
    let (code, field, hint) = match &e {
        McpError::OperatorToken { .. } => (
            "operator-token",
            Some("--token"),
            "give gatehost mcp the daemon's agent.token (GATEHOST_TOKEN or --token); the operator token stays with the operator".to_string(),
        ),
        McpError::WrongToken { .. } => (
            "unauthorized",
            Some("--token"),
            "pass this daemon's agent.token (in its data directory) with --token or GATEHOST_TOKEN".to_string(),
        ),
        McpError::CannotVerify { .. } => (
            "cannot-verify",
            Some("--server"),
            format!("is `gatehost serve` running at {server}? gatehost mcp starts only once the daemon says its token is the agent's"),
        ),
        McpError::Serve(_) => ("mcp", None, "the MCP client closed the connection or spoke something else".to_string()),
    };
    let err = CliError::new(code, e.to_string()).hint(hint);
    match field {
        Some(f) => err.field(f),
        None => err,
    }
}
