//! `gatehost store migrate|check`: bring the PostgreSQL database `[store]
//! url` names to this build's schema, and say what the store is and
//! holds (for SQLite, its file).
//!
//! It owns what these commands print and their exit codes. It must never
//! print the password: the URL it shows holds none (the configuration
//! refuses one), and the store's errors never carry it.

use super::error::{CliError, CliResult};
use super::store_open::{options, sqlite_file};
use crate::config::HostConfig;
use std::path::PathBuf;

/// `gatehost store …`.
#[derive(Debug, clap::Subcommand)]
pub enum StoreCommand {
    /// Bring the PostgreSQL database `[store] url` names to this build's
    /// schema, under the database's migration lock (two hosts never
    /// migrate at once; `serve` does the same at start). Prints `schema A →
    /// B`, or `schema N: up to date`.
    Migrate(StoreArgs),
    /// Say what the store is: for PostgreSQL, the server's version, the
    /// database's schema version against this build's and the head cursor
    /// (nothing is changed). Exit 1: the schema is missing (never
    /// migrated) or newer than this build; 2: the database cannot be
    /// reached.
    Check(CheckArgs),
}

/// What both store commands take.
#[derive(Debug, clap::Args)]
pub struct StoreArgs {
    /// Host configuration (TOML): its `[store]` section.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The data directory, where the SQLite store is when `[store] url` is
    /// not set [default: <user data dir>/gatehost].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
}

/// `gatehost store check`'s arguments.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Print one JSON object (`backend`, and `path` for SQLite; `url`,
    /// `serverVersion`, `schemaVersion` (null: none yet),
    /// `knownSchemaVersion`, `headCursor`, `ok`, `schema` (in words) for
    /// PostgreSQL).
    #[arg(long)]
    pub json: bool,
}

/// `gatehost store --help`'s closing words.
pub const AFTER_HELP: &str = "\
Without [store] url the store is the embedded SQLite file <data dir>/gatehost.db:
nothing to set up, and `serve` migrates it at start. With url = \"postgres://…\"
the password comes from [store] password_file, else $GATEHOST_STORE_PASSWORD,
never from the URL. See `gatehost docs fleet`.";

fn load(args: &StoreArgs) -> CliResult<HostConfig> {
    let path = HostConfig::locate(args.config.as_deref());
    Ok(HostConfig::load(path.as_deref())?)
}

fn data_dir(args: &StoreArgs) -> CliResult<PathBuf> {
    args.data_dir
        .clone()
        .or_else(super::serve::default_data_dir)
        .ok_or_else(|| CliError::input("no data directory: pass --data-dir").field("--data-dir"))
}

/// A store error for `url`, with what to look at.
fn unreachable(url: &str, e: &crate::store::StoreError) -> CliError {
    CliError::new("store", format!("the store {url}: {e}")).hint(
        "check that PostgreSQL runs and [store] url names it, and the password ([store] password_file, or $GATEHOST_STORE_PASSWORD)",
    )
}

/// Runs `gatehost store …` to its exit code.
pub(super) fn run(command: StoreCommand) -> CliResult<i32> {
    match command {
        StoreCommand::Migrate(args) => migrate(&args),
        StoreCommand::Check(args) => check(&args),
    }
}

fn migrate(args: &StoreArgs) -> CliResult<i32> {
    let config = load(args)?;
    let Some(pg) = &config.store.postgres else {
        println!(
            "the store is the embedded SQLite file {} ([store] url is not set): `gatehost serve` migrates it at start; nothing to do",
            sqlite_file(&data_dir(args)?).display()
        );
        return Ok(0);
    };
    let opts = options(pg)?;
    let (from, to) = crate::store::pg_migrate(&opts).map_err(|e| unreachable(&pg.url, &e))?;
    if from == to {
        println!("schema {to}: up to date ({})", pg.url);
    } else {
        println!("schema {from} → {to} ({})", pg.url);
    }
    Ok(0)
}

fn check(args: &CheckArgs) -> CliResult<i32> {
    let config = load(&args.store)?;
    let Some(pg) = &config.store.postgres else {
        let file = sqlite_file(&data_dir(&args.store)?);
        let exists = file.is_file();
        if args.json {
            print_json(&CheckReport::Sqlite {
                path: &file,
                exists,
                ok: true,
            })?;
        } else {
            println!(
                "store: the embedded SQLite file {}{}",
                file.display(),
                if exists {
                    ""
                } else {
                    " (not made yet: `gatehost serve` makes it)"
                }
            );
        }
        return Ok(0);
    };
    let opts = options(pg)?;
    let status = crate::store::pg_status(&opts).map_err(|e| unreachable(&pg.url, &e))?;
    let verdict = schema_verdict(status.schema_version, status.known);
    if args.json {
        print_json(&CheckReport::Postgres {
            url: &pg.url,
            server_version: &status.server_version,
            schema_version: status.schema_version,
            known_schema_version: status.known,
            head_cursor: status.head_cursor,
            ok: verdict.ok,
            schema: &verdict.says,
            hosts: status.hosts.iter().map(HostReport::of).collect(),
        })?;
    } else {
        println!("store: PostgreSQL {} at {}", status.server_version, pg.url);
        println!("schema: {}", verdict.says);
        println!("head cursor: {}", status.head_cursor);
        if status.hosts.is_empty() {
            println!("hosts: none has claimed an id yet");
        }
        for h in &status.hosts {
            let state = match (&h.taken_by, h.state.as_str()) {
                (Some(by), _) => format!("{} by {by}", h.state),
                (None, "live") => String::new(),
                (None, other) => other.to_string(),
            };
            println!(
                "host {}: {}{}{}, fencing number {}, lease {} {}, pid {} on {}, gatehost {}",
                h.id,
                if h.live { "live" } else { "not live" },
                if state.is_empty() {
                    String::new()
                } else {
                    format!(" ({state})")
                },
                if h.leads { ", leader" } else { "" },
                h.fence,
                if h.live { "until" } else { "ended" },
                rfc3339(h.lease_until),
                h.pid,
                h.machine,
                h.version
            );
        }
    }
    Ok(if verdict.ok { 0 } else { 1 })
}

/// What `store check --json` prints: one object, its backend first.
#[derive(serde::Serialize)]
#[serde(tag = "backend", rename_all = "lowercase")]
enum CheckReport<'a> {
    /// The embedded SQLite file (no `[store] url`).
    Sqlite {
        path: &'a std::path::Path,
        exists: bool,
        ok: bool,
    },
    /// A PostgreSQL database.
    #[serde(rename_all = "camelCase")]
    Postgres {
        url: &'a str,
        server_version: &'a str,
        /// `None` (null): never migrated.
        schema_version: Option<i64>,
        known_schema_version: i64,
        head_cursor: i64,
        ok: bool,
        schema: &'a str,
        /// Every host that ever claimed an id, by id.
        hosts: Vec<HostReport<'a>>,
    },
}

/// One host in `store check --json`.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct HostReport<'a> {
    id: &'a str,
    /// Its claim's fencing number.
    fence: i64,
    /// `live` (claimed), `stopped` (released by a clean stop), `stale`
    /// or `taken` (see docs/fleet.md, "A dead host").
    state: &'a str,
    /// Whether it leads the cluster now.
    leads: bool,
    /// The host that took its work over.
    #[serde(skip_serializing_if = "Option::is_none")]
    taken_by: Option<&'a str>,
    /// Whether its lease runs now (the database's clock).
    live: bool,
    /// When its lease ends (or ended), RFC 3339, the database's clock.
    lease_until: String,
    /// Its last renewal.
    heartbeat_at: String,
    machine: &'a str,
    pid: i64,
    version: &'a str,
}

impl<'a> HostReport<'a> {
    fn of(h: &'a crate::store::HostStatus) -> HostReport<'a> {
        HostReport {
            id: &h.id,
            fence: h.fence,
            state: &h.state,
            leads: h.leads,
            taken_by: h.taken_by.as_deref(),
            live: h.live,
            lease_until: rfc3339(h.lease_until),
            heartbeat_at: rfc3339(h.heartbeat_at),
            machine: &h.machine,
            pid: h.pid,
            version: &h.version,
        }
    }
}

/// `ms` since the epoch as RFC 3339 (UTC, milliseconds).
fn rfc3339(ms: i64) -> String {
    let t =
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_millis(t).to_string()
}

fn print_json(value: &impl serde::Serialize) -> CliResult<()> {
    let text = serde_json::to_string(value)
        .map_err(|e| CliError::new("encode", format!("cannot encode the answer: {e}")))?;
    println!("{text}");
    Ok(())
}

/// What a database's schema version means to this build.
#[derive(Debug, PartialEq, Eq)]
struct SchemaVerdict {
    /// Whether this build can serve it (an older one it migrates at start).
    ok: bool,
    /// For a person.
    says: String,
}

fn schema_verdict(found: Option<i64>, known: i64) -> SchemaVerdict {
    match found {
        None => SchemaVerdict {
            ok: false,
            says: format!(
                "none (an empty database): `gatehost store migrate` or a start of `serve` makes schema {known}"
            ),
        },
        Some(n) if n > known => SchemaVerdict {
            ok: false,
            says: format!(
                "{n}, newer than this build's {known}: written by a newer gatehost; this one refuses it"
            ),
        },
        Some(n) if n < known => SchemaVerdict {
            ok: true,
            says: format!(
                "{n}, older than this build's {known}: `gatehost store migrate` or a start of `serve` brings it up"
            ),
        },
        Some(n) => SchemaVerdict {
            ok: true,
            says: format!("{n} (this build's)"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_is_served_when_this_build_knows_it_or_can_migrate_it() {
        assert!(schema_verdict(Some(3), 3).ok);
        assert!(schema_verdict(Some(2), 3).ok);
        assert!(schema_verdict(Some(2), 3).says.contains("migrate"));
        let newer = schema_verdict(Some(4), 3);
        assert!(!newer.ok && newer.says.contains("newer"), "{newer:?}");
        let none = schema_verdict(None, 3);
        assert!(!none.ok && none.says.contains("migrate"), "{none:?}");
    }
}
