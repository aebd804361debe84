//! `gatehost passkey enrol-code`: makes the one-time code the first
//! passkey's registration needs, on the daemon's machine, as the user who
//! can write its data directory. The code is printed on this terminal
//! only; the daemon gets its digest through a file in the data directory
//! (`passkey::enrol`), never through the API, so a holder of the operator
//! token alone cannot obtain one.
//!
//! `gatehost passkey reset`: the recovery when the last passkey is lost
//! (no assertion can then remove it, nor add another): removes every
//! passkey from the daemon's store, opened here as the daemon opens it
//! (the data directory's SQLite file, or `[store] url`), and in the same
//! transaction appends `passkey:reset`, an attention event, with its
//! deliveries to the configuration's webhooks. It needs what the daemon's
//! user has (the data directory, the store's password), never the API.
//!
//! It owns these commands only; it must never talk to the daemon or keep
//! a code anywhere.

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
    /// Remove every passkey: the recovery when the last one is lost.
    /// Publishes `passkey:reset` (an attention event: your webhooks hear
    /// of it); register one again with `enrol-code`.
    #[command(after_help = RESET_HELP)]
    Reset(ResetArgs),
}

pub(super) const RESET_HELP: &str = "\
Run it on the daemon's machine, as the daemon's user, with its --data-dir
(and --config when the store is PostgreSQL: [store] url and its password).
Then `gatehost passkey enrol-code` and register a passkey on the page
again. With [daemon] ack_requires = \"passkey\", nothing is approved until
then. See docs/daemon.md, \"Passkeys for acks\".";

#[derive(Debug, clap::Args)]
pub struct ResetArgs {
    /// The daemon's data directory [default: <user data dir>/gatehost].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// The daemon's configuration (TOML): its `[store]` and webhooks.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
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
        PasskeyCommand::Reset(args) => reset(args),
    }
}

/// The daemon's data directory: `--data-dir`, else the default; refused
/// when it holds no store.
fn data_dir(arg: Option<PathBuf>) -> CliResult<PathBuf> {
    let Some(dir) = arg.or_else(super::serve::default_data_dir) else {
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
    Ok(dir)
}

fn enrol_code(args: EnrolArgs) -> CliResult<i32> {
    let dir = data_dir(args.data_dir)?;
    let code = enrol::make(&dir).map_err(|e| CliError::new("io", e.to_string()))?;
    tracing::info!(data = %dir.display(), "a passkey enrolment code was made");
    println!("{code}");
    eprintln!(
        "the enrolment code for the first passkey: enter it on the page (`gatehost ui`) beside the passkey's name; it works once, within {} minutes",
        enrol::ENROL_TTL.as_secs() / 60
    );
    Ok(0)
}

fn reset(args: ResetArgs) -> CliResult<i32> {
    let config = crate::config::HostConfig::load(
        crate::config::HostConfig::locate(args.config.as_deref()).as_deref(),
    )?;
    let store = match &config.store.postgres {
        Some(pg) => {
            let opts = super::store_open::options(pg)?;
            crate::store::Store::open_postgres(&opts)
                .map_err(|e| CliError::new("store", format!("the store {}: {e}", pg.url)))?
        }
        None => {
            let dir = data_dir(args.data_dir)?;
            crate::store::Store::open(&dir).map_err(|e| CliError::new("store", e.to_string()))?
        }
    };
    let event = "passkey:reset";
    let hooks: Vec<String> = config
        .daemon
        .targets
        .iter()
        .filter(|t| t.events.contains(event))
        .map(|t| t.url.clone())
        .collect();
    let by = format!(
        "gatehost passkey reset (uid {} on {})",
        rustix::process::getuid().as_raw(),
        super::store_open::machine_name()
    );
    let removed = store
        .write(|tx| {
            let all = tx.passkeys()?;
            for p in &all {
                tx.remove_passkey(&p.id)?;
            }
            let removed: Vec<String> = all.into_iter().map(|p| p.name).collect();
            let said = crate::model::event::PasskeysReset {
                removed: removed.clone(),
                by: by.clone(),
            };
            let e =
                crate::model::event::Event::Passkey(crate::model::event::PasskeyEvent::Reset(said));
            tx.append_event(&e, None, None, &hooks)?;
            Ok(removed)
        })
        .map_err(|e| CliError::new("store", e.to_string()))?;
    tracing::warn!(
        removed = removed.len(),
        "every passkey was removed (passkey reset)"
    );
    println!("{}", removed.len());
    eprintln!(
        "removed {} passkey(s){}; `passkey:reset` was published. Register one again: `gatehost passkey enrol-code`, then the page.",
        removed.len(),
        if removed.is_empty() {
            String::new()
        } else {
            format!(" ({})", removed.join(", "))
        }
    );
    Ok(0)
}
