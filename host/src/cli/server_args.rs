//! How a command that talks to the daemon finds it: the `--server` and
//! `--token` options every such command flattens ([`ServerArgs`]), and the
//! one discovery of the daemon's URL ([`discover`]): `--server` (or
//! `GATEHOST_SERVER`), else the `server.url` the daemon wrote in its data
//! directory. Which token a command takes when none is given (the agent's,
//! or the operator's for `ui`) is the command's.
//!
//! It must never talk to the daemon, and never read a token file.

use super::serve::SERVER_URL_FILE;
use std::path::{Path, PathBuf};

/// `--server` and `--token`, as every command that talks to the daemon
/// takes them.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServerArgs {
    /// The daemon's URL, e.g. http://127.0.0.1:7878, or unix:/path/to/socket
    /// [default: the server.url the daemon wrote in its data directory].
    #[arg(long, global = true, env = "GATEHOST_SERVER", value_name = "URL")]
    pub server: Option<String>,
    /// The agent or operator token [default: the daemon's agent.token (for
    /// `gatehost ui` and `gatehost token rotate` its operator.token), read
    /// in its data directory]. The
    /// hooks and `gatehost mcp` take the agent token only.
    #[arg(
        long,
        global = true,
        env = "GATEHOST_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
}

/// No daemon was found: the data directory looked in (if any), and why
/// its `server.url` was of no use.
#[derive(Debug)]
pub struct NoDaemon {
    pub file: Option<PathBuf>,
    pub why: String,
}

/// The daemon's URL: `server` when given, else the `server.url` in
/// `data_dir` (the directory given, else the default one), trimmed.
pub fn discover(server: Option<&str>, data_dir: Option<&Path>) -> Result<String, NoDaemon> {
    if let Some(s) = server {
        return Ok(s.to_string());
    }
    let Some(dir) = data_dir else {
        return Err(NoDaemon {
            file: None,
            why: "no data directory to look in".into(),
        });
    };
    let file = dir.join(SERVER_URL_FILE);
    match std::fs::read_to_string(&file) {
        Ok(text) if !text.trim().is_empty() => Ok(text.trim().to_string()),
        Ok(_) => Err(NoDaemon {
            why: format!("{} is empty", file.display()),
            file: Some(file),
        }),
        Err(e) => Err(NoDaemon {
            why: format!("{}: {e}", file.display()),
            file: Some(file),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_server_wins_else_the_data_directory_says_it() {
        let d = tempfile::tempdir().expect("tempdir");
        assert_eq!(
            discover(Some("http://a"), Some(d.path())).expect("given"),
            "http://a"
        );
        let e = discover(None, Some(d.path())).expect_err("no file");
        assert_eq!(e.file, Some(d.path().join(SERVER_URL_FILE)));
        std::fs::write(d.path().join(SERVER_URL_FILE), "  \n").expect("write");
        assert!(discover(None, Some(d.path())).is_err(), "an empty file");
        std::fs::write(d.path().join(SERVER_URL_FILE), "http://b\n").expect("write");
        assert_eq!(discover(None, Some(d.path())).expect("file"), "http://b");
        assert!(discover(None, None).expect_err("none").file.is_none());
    }
}
