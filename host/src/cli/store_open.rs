//! The daemon's store, as the configuration chooses it ([`open`], which
//! `serve` calls): the embedded SQLite file in the data directory, or the
//! PostgreSQL database `[store] url` names, with its one-daemon lock
//! (`store_lock`); and the store crate's options of `[store]`
//! ([`options`], which `gatehost store` uses too).
//!
//! It owns reading the password (here, once per start or command) and
//! must never put it into a message: the URL it shows holds none (the
//! configuration refuses one), and the store's errors never carry it.

use super::error::{CliError, CliResult};
use crate::config::{HostConfig, PostgresConfig};
use crate::store::{PgOptions, Store};
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

/// Opens the daemon's store: the PostgreSQL database `[store] url` names
/// (its one-daemon lock taken first, on `runtime`, then the schema
/// migrated under its lock), else the SQLite file in `data_dir`. Also
/// answers where it is, for the start's lines, and the lock, held while it
/// lives. An error names the URL (it holds no password) and the cause.
pub fn open(
    config: &HostConfig,
    data_dir: &Path,
    runtime: &tokio::runtime::Runtime,
) -> Result<(Store, String, Option<super::store_lock::DaemonLock>), String> {
    match &config.store.postgres {
        None => {
            let store = Store::open(data_dir).map_err(|e| e.to_string())?;
            Ok((store, sqlite_file(data_dir).display().to_string(), None))
        }
        Some(pg) => {
            let opts = options(pg).map_err(|e| e.message)?;
            let lock = runtime.block_on(super::store_lock::hold(&opts, &pg.url))?;
            let store = Store::open_postgres(&opts)
                .map_err(|e| format!("cannot open the store {}: {e}", pg.url))?;
            Ok((store, pg.url.clone(), Some(lock)))
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
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let (_store, at, lock) = open(&HostConfig::default(), d.path(), &rt).expect("sqlite");
        assert!(lock.is_none());
        assert_eq!(at, sqlite_file(d.path()).display().to_string());
        assert!(sqlite_file(d.path()).is_file());
    }
}
