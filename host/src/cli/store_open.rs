//! The daemon's store, as the configuration chooses it ([`open`], which
//! `serve` calls): the embedded SQLite file in the data directory, or the
//! PostgreSQL database `[store] url` names, claimed for this daemon's host
//! id (`serve --host-id`, default the machine's name: docs/fleet.md); and
//! the store crate's options of `[store]` ([`options`], which `gatehost
//! store` uses too).
//!
//! It owns reading the password (here, once per start or command) and
//! must never put it into a message: the URL it shows holds none (the
//! configuration refuses one), and the store's errors never carry it.

use super::error::{CliError, CliResult};
use crate::config::{HostConfig, PostgresConfig};
use crate::store::{HostSpec, PgOptions, Store};
use std::path::{Path, PathBuf};

/// The embedded SQLite store's file in `data_dir`.
pub fn sqlite_file(data_dir: &Path) -> PathBuf {
    data_dir.join("gatehost.db")
}

/// The store crate's options for `pg`: its URL, its password read now,
/// its application name. An unreadable password names where it was looked
/// for, never what it holds.
pub fn options(pg: &PostgresConfig) -> CliResult<PgOptions> {
    let password = pg.password().map_err(|e| {
        CliError::new("store", e.to_string())
            .field("store.password_file")
            .hint(format!(
                "[store] password_file names a file holding the password on one line; without it, ${} holds it",
                crate::config::PASSWORD_ENV
            ))
    })?;
    Ok(PgOptions {
        url: pg.url.clone(),
        password,
        application_name: pg.application_name.clone(),
    })
}

/// The machine's name: a host's default id.
pub fn machine_name() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// Who this daemon is on the PostgreSQL store `pg`: `host_id` (else the
/// machine's name, which must then be a valid id) and the lease.
pub fn host_spec(pg: &PostgresConfig, host_id: Option<&str>) -> Result<HostSpec, String> {
    let machine = machine_name();
    let id = match host_id {
        Some(id) => {
            HostSpec::check_id(id).map_err(|e| format!("--host-id: {e}"))?;
            id.to_string()
        }
        None => {
            HostSpec::check_id(&machine).map_err(|e| {
                format!("the machine's name cannot be a host id ({e}): give one with --host-id")
            })?;
            machine.clone()
        }
    };
    Ok(HostSpec {
        id,
        lease: pg.lease,
        machine,
        version: env!("CARGO_PKG_VERSION").to_string(),
    })
}

/// Opens the daemon's store: the PostgreSQL database `[store] url` names
/// (its schema migrated under its lock, then the host id claimed: refused
/// while another live daemon holds it), else the SQLite file in
/// `data_dir` (where `host_id` is refused: a fleet shares one PostgreSQL
/// database). Also answers where it is, for the start's lines. An error
/// names the URL (it holds no password) and the cause.
pub fn open(
    config: &HostConfig,
    data_dir: &Path,
    host_id: Option<&str>,
) -> Result<(Store, String), String> {
    match &config.store.postgres {
        None => {
            if host_id.is_some() {
                return Err("--host-id names this daemon in a fleet sharing one PostgreSQL database: it needs [store] url (docs/fleet.md)".into());
            }
            let store = Store::open(data_dir).map_err(|e| e.to_string())?;
            Ok((store, sqlite_file(data_dir).display().to_string()))
        }
        Some(pg) => {
            let opts = options(pg).map_err(|e| e.message)?;
            let spec = host_spec(pg, host_id)?;
            let store = Store::open_postgres_as(&opts, &spec)
                .map_err(|e| format!("cannot open the store {}: {e}", pg.url))?;
            Ok((store, pg.url.clone()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_options_carry_the_password_read_from_its_file() {
        let d = tempfile::tempdir().expect("tempdir");
        let file = d.path().join("pw");
        std::fs::write(&file, "hunter2\n").expect("write");
        let pg = PostgresConfig {
            url: "postgres://u@h/d".into(),
            password_file: Some(file.clone()),
            application_name: "gatehost/t".into(),
            lease: crate::config::DEFAULT_LEASE,
            grace: crate::config::DEFAULT_GRACE,
            shared_workspaces: false,
        };
        let opts = options(&pg).expect("readable");
        assert_eq!(opts.password.as_deref(), Some("hunter2"));
        assert_eq!(opts.url, "postgres://u@h/d");
        assert_eq!(opts.application_name, "gatehost/t");
        std::fs::write(&file, "hunter2\nmore\n").expect("write");
        let e = options(&pg).expect_err("two lines");
        assert_eq!(e.field.as_deref(), Some("store.password_file"));
        assert!(!format!("{e:?}").contains("hunter2"), "{e:?}");
    }

    #[test]
    fn without_a_url_the_daemon_opens_the_sqlite_file() {
        let d = tempfile::tempdir().expect("tempdir");
        let (store, at) = open(&HostConfig::default(), d.path(), None).expect("sqlite");
        assert!(store.host().is_none());
        assert_eq!(at, sqlite_file(d.path()).display().to_string());
        assert!(sqlite_file(d.path()).is_file());
        let e = open(&HostConfig::default(), d.path(), Some("a")).expect_err("no fleet");
        assert!(e.contains("[store] url"), "{e}");
    }

    #[test]
    fn a_host_id_is_checked_and_the_lease_is_the_configuration_s() {
        let pg = PostgresConfig {
            url: "postgres://u@h/d".into(),
            password_file: None,
            application_name: "gatehost/t".into(),
            lease: std::time::Duration::from_secs(4),
            grace: crate::config::DEFAULT_GRACE,
            shared_workspaces: false,
        };
        let spec = host_spec(&pg, Some("build-7.eu")).expect("valid");
        assert_eq!(spec.id, "build-7.eu");
        assert_eq!(spec.lease, std::time::Duration::from_secs(4));
        assert_eq!(spec.machine, machine_name());
        for bad in ["", "a b", "-a", "é", &"x".repeat(64)] {
            let e = host_spec(&pg, Some(bad)).expect_err(bad);
            assert!(e.starts_with("--host-id: "), "{e}");
        }
    }
}
