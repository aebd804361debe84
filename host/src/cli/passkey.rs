//! `gatehost passkey enrol-code`: makes the one-time code the first
//! passkey's registration needs, on the daemon's machine, as the user who
//! can write its data directory. The code is printed on this terminal
//! only; the daemon gets its digest through a file in the data directory
//! (`passkey::enrol`), never through the API, so a holder of the operator
//! token alone cannot obtain one. It owns that command only; it must never
//! talk to the daemon or keep the code anywhere.

use super::error::{CliError, CliResult};
use crate::passkey::enrol;
use std::path::PathBuf;

/// The store's file: what marks a data directory.
const STORE_FILE: &str = "gatehost.db";

pub(super) const AFTER_HELP: &str = "\
With [daemon] ack_requires = \"passkey\", approving a change takes a passkey,
and the first passkey takes this code: open the page (`gatehost ui`), enter
the code beside the passkey's name and register. Every later passkey is
added with an assertion of a registered one instead. The code lasts 15
minutes and registers one passkey; a new code replaces the last one.

Run it as the daemon's user, with the daemon's --data-dir: the code's
digest is written there (owner-only), where the operator token does not
reach. See docs/daemon.md, \"Passkeys for acks\".";

#[derive(Debug, clap::Subcommand)]
pub enum PasskeyCommand {
    /// Make the one-time code that lets the page register the first
    /// passkey (printed here only).
    #[command(after_help = AFTER_HELP)]
    EnrolCode(EnrolArgs),
}

#[derive(Debug, clap::Args)]
pub struct EnrolArgs {
    /// The daemon's data directory [default: <user data dir>/gatehost].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
}

pub(super) fn run(command: PasskeyCommand) -> CliResult<i32> {
    match command {
        PasskeyCommand::EnrolCode(args) => enrol_code(args),
    }
}

fn enrol_code(args: EnrolArgs) -> CliResult<i32> {
    let Some(dir) = args.data_dir.or_else(super::serve::default_data_dir) else {
        return Err(CliError::new("no-data-dir", "no data directory").field("--data-dir"));
    };
    if !dir.join(STORE_FILE).is_file() {
        return Err(CliError::new(
            "no-data-dir",
            format!(
                "{} is not a gatehost data directory (no {STORE_FILE} in it)",
                dir.display(),
            ),
        )
        .field("--data-dir")
        .hint("pass the daemon's --data-dir, and run this as the daemon's user"));
    }
    let code = enrol::make(&dir).map_err(|e| CliError::new("io", e.to_string()))?;
    tracing::info!(data = %dir.display(), "a passkey enrolment code was made");
    println!("{code}");
    eprintln!(
        "the enrolment code for the first passkey: enter it on the page (`gatehost ui`) beside the passkey's name; it works once, within {} minutes",
        enrol::ENROL_TTL.as_secs() / 60
    );
    Ok(0)
}
