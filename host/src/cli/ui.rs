//! `gatehost ui`: prints a one-time login link for the daemon's web page
//! (`POST /v1/ui/link`, operator token; `--policy ID` lands on that
//! policy's page), and with `--open` hands it to
//! `xdg-open`. It owns that command only; it must never keep the link or
//! the token anywhere.

use super::client::{ClientArgs, find_server, local_token};
use super::error::{CliError, CliResult};
use super::server_args::ServerArgs;
use crate::client::Client;

#[derive(Debug, clap::Args)]
pub struct UiArgs {
    #[command(flatten)]
    pub daemon: ServerArgs,
    /// Print `{url, expiresInSeconds}` as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also open the link in the desktop's browser (xdg-open).
    #[arg(long)]
    pub open: bool,
    /// Land on this policy's page rather than the inbox (the daemon checks
    /// it exists).
    #[arg(long, value_name = "ID")]
    pub policy: Option<String>,
}

impl UiArgs {
    fn client_args(&self) -> ClientArgs {
        ClientArgs {
            daemon: self.daemon.clone(),
            session_key: None,
            json: self.json,
        }
    }
}

/// The operator token: `--token` or `GATEHOST_TOKEN`, else the
/// `operator.token` of the daemon of the default data directory (the one
/// its `server.url` names).
pub(super) fn operator_token(args: &ClientArgs, server: &str) -> CliResult<String> {
    if let Some(t) = &args.daemon.token {
        return Ok(t.clone());
    }
    if let Some(t) = local_token(server, crate::wire::OPERATOR_TOKEN_FILE) {
        return Ok(t);
    }
    Err(CliError::new("no-token", "no operator token")
        .field("--token")
        .hint("pass --token or set GATEHOST_TOKEN to the daemon's operator.token (in its data directory)"))
}

pub(super) fn run(args: UiArgs) -> CliResult<i32> {
    let client_args = args.client_args();
    let server = find_server(&client_args.daemon)?;
    let token = operator_token(&client_args, &server)?;
    let client = Client::new(&server, token)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::new("runtime", format!("cannot start the runtime: {e}")))?;
    let link = rt.block_on(client.ui_link(args.policy.as_deref()))?;
    // On the page's address the daemon answered with: one it holds whole
    // (`localhost` only when it listens on both of localhost's addresses).
    let url = link.url.clone();
    if args.json {
        let v = serde_json::json!({"url": url, "expiresInSeconds": link.expires_in_seconds});
        println!("{v}");
    } else {
        println!("{url}");
        eprintln!(
            "a one-time login link for the page: it works once, within {} seconds",
            link.expires_in_seconds
        );
    }
    if args.open {
        match std::process::Command::new("xdg-open")
            .arg(&url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
        {
            Ok(s) if s.success() => {}
            Ok(s) => eprintln!("xdg-open could not open the link ({s}): open it yourself"),
            Err(e) => eprintln!("cannot run xdg-open ({e}): open the link yourself"),
        }
    }
    Ok(0)
}
