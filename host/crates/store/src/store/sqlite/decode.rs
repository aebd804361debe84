//! The SQLite backend's rows as `row_decode::Columns` for the store's one decoder
//! (`row_decode`, which owns the rule for a row that does not decode),
//! and the entry points its queries map rows with.
//!
//! It must never decode a record itself, and never write.

use crate::store::row_decode::{self, KeyError};
use crate::store::rows::{EventRow, PolicyRow, SessionRow};
use rusqlite::Row;
use rusqlite::types::FromSql;

/// One SQLite row, its columns found by name.
struct SqliteRow<'a, 'r> {
    row: &'a Row<'r>,
    /// The statement's column names, by index: looked up here with an
    /// exact comparison, once per column. rusqlite's lookup by name reads
    /// every name through the C API and compares it ignoring case, for
    /// each column read: that was a third of the time a start took to
    /// decode 100,000 policies (issue 48).
    names: Vec<&'a str>,
}

impl<'a, 'r> SqliteRow<'a, 'r> {
    fn new(row: &'a Row<'r>) -> Self {
        let names = row.as_ref().column_names().collect();
        SqliteRow { row, names }
    }

    fn get<T: FromSql>(&self, column: &str) -> Result<T, String> {
        match self.names.iter().position(|n| *n == column) {
            Some(i) => self.row.get(i),
            None => self.row.get(column),
        }
        .map_err(|e| e.to_string())
    }
}

// One host, which keeps no host id.
row_decode::columns_by_get!(SqliteRow<'_, '_>, keeps_hosts: false);

/// A row whose key does not decode, as rusqlite's mapping error.
fn key_error(e: KeyError) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Null, Box::new(e))
}

pub(super) fn session_from(r: &Row<'_>) -> rusqlite::Result<SessionRow> {
    row_decode::session_from(&SqliteRow::new(r)).map_err(key_error)
}

pub(super) fn policy_from(r: &Row<'_>) -> rusqlite::Result<PolicyRow> {
    row_decode::policy_from(&SqliteRow::new(r)).map_err(key_error)
}

pub(super) fn event_from(r: &Row<'_>) -> rusqlite::Result<EventRow> {
    row_decode::event_from(&SqliteRow::new(r)).map_err(key_error)
}

#[cfg(test)]
#[path = "decode_tests.rs"]
pub(crate) mod tests;
