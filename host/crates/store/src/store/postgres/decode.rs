//! The PostgreSQL backend's rows as `row_decode::Columns` for the store's one
//! decoder (`row_decode`, which owns the rule for a row that does not
//! decode: the same as SQLite's), and the entry points its queries map
//! rows with.
//!
//! It must never decode a record itself, and never write.

use crate::store::row_decode::{self, KeyError};
use crate::store::rows::{EventRow, PolicyRow, SessionRow};
use crate::store::{StoreError, StoreResult};
use tokio_postgres::Row;
use tokio_postgres::types::FromSql;

/// One PostgreSQL row.
struct PgRow<'r>(&'r Row);

impl<'r> PgRow<'r> {
    fn get<T: FromSql<'r>>(&self, column: &str) -> Result<T, String> {
        self.0.try_get(column).map_err(|e| e.to_string())
    }
}

row_decode::columns_by_get!(PgRow<'_>, keeps_hosts: true);

/// A row whose key does not decode.
fn key_error(e: KeyError) -> StoreError {
    StoreError::Decode {
        what: "row",
        message: e.to_string(),
    }
}

pub(super) fn session_from(r: &Row) -> StoreResult<SessionRow> {
    row_decode::session_from(&PgRow(r)).map_err(key_error)
}

pub(super) fn policy_from(r: &Row) -> StoreResult<PolicyRow> {
    row_decode::policy_from(&PgRow(r)).map_err(key_error)
}

pub(super) fn event_from(r: &Row) -> StoreResult<EventRow> {
    row_decode::event_from(&PgRow(r)).map_err(key_error)
}

/// Every row of `rows` read by `from`.
pub(super) fn all<T>(rows: Vec<Row>, from: fn(&Row) -> StoreResult<T>) -> StoreResult<Vec<T>> {
    rows.iter().map(from).collect()
}
