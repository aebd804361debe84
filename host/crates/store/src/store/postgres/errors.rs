//! PostgreSQL's and the driver's errors as the store's: the one place that
//! reads them. A connection that cannot be made or was lost, a server
//! shutting down or refusing connections, and a serialization or deadlock
//! failure are [`StoreError::Unreachable`] (retry later: the API answers
//! 503, the engine keeps its state); a full disk is `Full`, a read-only
//! server `ReadOnly`; the rest `Backend`. It must never put a password in a
//! message (the driver's messages hold none: it never echoes one) and never
//! let a driver type out of `store::postgres`.

use crate::store::StoreError;
use std::error::Error as _;

/// The text of `e` with its causes (the driver's `Display` may stop at
/// "db error").
fn text(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut s = format!("{}: {}", db.severity(), db.message());
        if let Some(d) = db.detail() {
            s.push_str(&format!(" ({d})"));
        }
        return s;
    }
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cause = c.source();
    }
    s
}

/// Whether SQLSTATE `code` says the database cannot be reached now (a
/// retry later may succeed).
fn transient(code: &str) -> bool {
    code.starts_with("08") // connection exception
        || code.starts_with("28") // the server refused our credentials
        || matches!(
            code,
            "53300" // too_many_connections
                | "57P01" // admin_shutdown
                | "57P02" // crash_shutdown
                | "57P03" // cannot_connect_now
                | "40001" // serialization_failure
                | "40P01" // deadlock_detected
        )
}

/// A driver error as the store's.
pub(super) fn from_pg(e: tokio_postgres::Error) -> StoreError {
    let message = text(&e);
    if let Some(code) = e.code().map(|c| c.code()) {
        return match code {
            "53100" => StoreError::Full(message),
            "25006" => StoreError::ReadOnly(message),
            // Raised by the schema's ownership trigger (`schema::HOSTS_V2`).
            "GH001" => StoreError::NotOwner(
                e.as_db_error()
                    .map(|d| d.message().to_string())
                    .unwrap_or(message),
            ),
            c if transient(c) => StoreError::Unreachable(message),
            _ => StoreError::Backend(message),
        };
    }
    let lost = e.is_closed()
        || e.source()
            .is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some())
        || [
            "error connecting",
            "error communicating",
            "timeout",
            "TLS",
            "authentication",
            "connection closed",
        ]
        .iter()
        .any(|w| message.contains(w));
    if lost {
        StoreError::Unreachable(message)
    } else {
        StoreError::Backend(message)
    }
}

/// The pool's error as the store's: no connection could be had in time,
/// or the one made failed.
pub(super) fn from_pool(e: deadpool_postgres::PoolError) -> StoreError {
    match e {
        deadpool_postgres::PoolError::Backend(e) => from_pg(e),
        other => StoreError::Unreachable(other.to_string()),
    }
}
