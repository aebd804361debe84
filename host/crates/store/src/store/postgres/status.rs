//! What `gatehost store migrate` and `gatehost store check` do on a
//! PostgreSQL database: bring its schema to this build's, and read what it
//! holds (schema version, head cursor, hosts) without changing anything.
//!
//! It owns these two entry points; it must never write a row of the
//! daemon's data.

use super::bridge::col;
use super::{PgOptions, PgStore, hosts, records, schema};
use crate::store::StoreResult;
use crate::store::rows::HostStatus;

/// What `gatehost store check` shows of a PostgreSQL store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgStatus {
    /// The schema version the database records; `None`: an empty
    /// database (no gatehost schema yet).
    pub schema_version: Option<i64>,
    /// The newest schema version this build knows.
    pub known: i64,
    /// The server's version (`server_version`).
    pub server_version: String,
    /// The newest event cursor ever given (0 with no schema, or one newer
    /// than this build's).
    pub head_cursor: i64,
    /// The hosts that ever claimed an id, by id (none before schema 2).
    pub hosts: Vec<HostStatus>,
}

/// Connects to the database of `opts` and brings its schema up to this
/// build's, under the migration lock: `(version before, version after)`,
/// `before` 0 for an empty database. A newer schema is refused
/// ([`StoreError::TooNew`]).
pub fn pg_migrate(opts: &PgOptions) -> StoreResult<(i64, i64)> {
    PgStore::connect(opts, None)?.migrate()
}

/// What the database of `opts` holds, without migrating anything.
pub fn pg_status(opts: &PgOptions) -> StoreResult<PgStatus> {
    let store = PgStore::connect(opts, None)?;
    store.reading(|c| {
        let schema_version = schema::version(c, &store.location)?;
        let server_version: String = col(
            &c.one("SELECT current_setting('server_version') AS v", &[])?,
            "v",
        )?;
        let head_cursor = match schema_version {
            Some(v) if v <= schema::KNOWN => records::head_cursor(c)?,
            _ => 0,
        };
        let hosts = match schema_version {
            Some(2) => hosts::list_v2(c)?,
            Some(v) if (3..=schema::KNOWN).contains(&v) => hosts::list(c)?,
            _ => Vec::new(),
        };
        Ok(PgStatus {
            schema_version,
            known: schema::KNOWN,
            server_version,
            head_cursor,
            hosts,
        })
    })
}
