//! The operator's passkeys' rows (`[daemon] ack_requires = "passkey"`):
//! each registered WebAuthn credential as webauthn-rs keeps it (public key,
//! signature counter), its name and when it was made and last used, and
//! the operator's one WebAuthn user id. It owns their SQL; it must never
//! verify a ceremony or decide what a passkey may do (`crate::passkey`
//! does).

use crate::store::rows::PasskeyRow;
use crate::store::{StoreError, StoreResult};
use rusqlite::{Connection, OptionalExtension, Row, params};
use webauthn_rs::prelude::Passkey;

/// The table (schema version 9), created at every open.
pub(super) const PASSKEY_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS passkeys(
    id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL UNIQUE,
    name TEXT NOT NULL,
    passkey TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    last_used_at INTEGER
);
";

fn row_from(r: &Row<'_>) -> rusqlite::Result<PasskeyRow> {
    let text: String = r.get("passkey")?;
    Ok(PasskeyRow {
        id: r.get("id")?,
        name: r.get("name")?,
        passkey: serde_json::from_str(&text)
            .map_err(|e| format!("its stored credential does not decode: {e}")),
        created_at: r.get("created_at")?,
        last_used_at: r.get("last_used_at")?,
    })
}

fn encode(p: &Passkey) -> StoreResult<String> {
    serde_json::to_string(p).map_err(|e| StoreError::Decode {
        what: "passkey",
        message: e.to_string(),
    })
}

pub(super) fn list(c: &Connection) -> StoreResult<Vec<PasskeyRow>> {
    let rows = c
        .prepare_cached("SELECT * FROM passkeys ORDER BY seq")?
        .query_map([], row_from)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// The meta key holding the operator's WebAuthn user id.
const USER_KEY: &str = "passkey_user";

/// The operator's WebAuthn user id (made once, random, then kept: every
/// passkey is registered for it).
pub(super) fn passkey_user(c: &Connection) -> StoreResult<uuid::Uuid> {
    let found: Option<String> = c
        .prepare_cached("SELECT value FROM meta WHERE key = ?1")?
        .query_row(params![USER_KEY], |r| r.get(0))
        .optional()?;
    if let Some(text) = found {
        return uuid::Uuid::parse_str(&text).map_err(|e| StoreError::Decode {
            what: "passkey user id",
            message: e.to_string(),
        });
    }
    let id = uuid::Uuid::new_v4();
    c.prepare_cached("INSERT INTO meta(key, value) VALUES(?1, ?2)")?
        .execute(params![USER_KEY, id.to_string()])?;
    Ok(id)
}

/// Adds a passkey; false (nothing written) when its credential id is
/// already registered.
pub(super) fn insert_passkey(
    c: &Connection,
    id: &str,
    name: &str,
    p: &Passkey,
    now: i64,
) -> StoreResult<bool> {
    let text = encode(p)?;
    Ok(c.prepare_cached(
        "INSERT OR IGNORE INTO passkeys(id, seq, name, passkey, created_at)
             VALUES(?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM passkeys), ?2, ?3, ?4)",
    )?
    .execute(params![id, name, text, now])?
        > 0)
}

/// After a use: its new counter and flags, and when.
pub(super) fn passkey_used(c: &Connection, id: &str, p: &Passkey, now: i64) -> StoreResult<()> {
    let text = encode(p)?;
    c.prepare_cached("UPDATE passkeys SET passkey = ?2, last_used_at = ?3 WHERE id = ?1")?
        .execute(params![id, text, now])?;
    Ok(())
}

/// Removes one; whether it was there.
pub(super) fn rename_passkey(c: &Connection, id: &str, name: &str) -> StoreResult<bool> {
    Ok(
        c.prepare_cached("UPDATE passkeys SET name = ?2 WHERE id = ?1")?
            .execute(params![id, name])?
            > 0,
    )
}

pub(super) fn remove_passkey(c: &Connection, id: &str) -> StoreResult<bool> {
    Ok(c.prepare_cached("DELETE FROM passkeys WHERE id = ?1")?
        .execute(params![id])?
        > 0)
}
