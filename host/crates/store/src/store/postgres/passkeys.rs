//! The operator's passkeys' rows in PostgreSQL: each registered WebAuthn
//! credential as webauthn-rs keeps it, its name and when it was made and
//! last used, and the operator's one WebAuthn user id (in `meta`). It owns
//! their SQL; it must never verify a ceremony or decide what a passkey may
//! do.

use super::bridge::{Sql, col};
use crate::store::rows::PasskeyRow;
use crate::store::{StoreError, StoreResult};
use tokio_postgres::Row;
use webauthn_rs::prelude::Passkey;

fn row_from(r: &Row) -> StoreResult<PasskeyRow> {
    let text: String = col(r, "passkey")?;
    Ok(PasskeyRow {
        id: col(r, "id")?,
        name: col(r, "name")?,
        passkey: serde_json::from_str(&text)
            .map_err(|e| format!("its stored credential does not decode: {e}")),
        created_at: col(r, "created_at")?,
        last_used_at: col(r, "last_used_at")?,
    })
}

fn encode(p: &Passkey) -> StoreResult<String> {
    serde_json::to_string(p).map_err(|e| StoreError::Decode {
        what: "passkey",
        message: e.to_string(),
    })
}

pub(super) fn list(c: &Sql<'_>) -> StoreResult<Vec<PasskeyRow>> {
    c.query("SELECT * FROM passkeys ORDER BY seq", &[])?
        .iter()
        .map(row_from)
        .collect()
}

/// The meta key holding the operator's WebAuthn user id.
const USER_KEY: &str = "passkey_user";

pub(super) fn passkey_user(c: &Sql<'_>) -> StoreResult<uuid::Uuid> {
    if let Some(r) = c.opt("SELECT value FROM meta WHERE key = $1", &[&USER_KEY])? {
        let text: String = col(&r, "value")?;
        return uuid::Uuid::parse_str(&text).map_err(|e| StoreError::Decode {
            what: "passkey user id",
            message: e.to_string(),
        });
    }
    let id = uuid::Uuid::new_v4();
    c.execute(
        "INSERT INTO meta(key, value) VALUES($1, $2)",
        &[&USER_KEY, &id.to_string()],
    )?;
    Ok(id)
}

pub(super) fn insert_passkey(
    c: &Sql<'_>,
    id: &str,
    name: &str,
    p: &Passkey,
    now: i64,
) -> StoreResult<bool> {
    let text = encode(p)?;
    Ok(c.execute(
        "INSERT INTO passkeys(id, seq, name, passkey, created_at)
         VALUES($1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM passkeys), $2, $3, $4)
         ON CONFLICT DO NOTHING",
        &[&id, &name, &text, &now],
    )? > 0)
}

pub(super) fn passkey_used(c: &Sql<'_>, id: &str, p: &Passkey, now: i64) -> StoreResult<()> {
    let text = encode(p)?;
    c.execute(
        "UPDATE passkeys SET passkey = $2, last_used_at = $3 WHERE id = $1",
        &[&id, &text, &now],
    )?;
    Ok(())
}

pub(super) fn rename_passkey(c: &Sql<'_>, id: &str, name: &str) -> StoreResult<bool> {
    Ok(c.execute("UPDATE passkeys SET name = $2 WHERE id = $1", &[&id, &name])? > 0)
}

pub(super) fn remove_passkey(c: &Sql<'_>, id: &str) -> StoreResult<bool> {
    Ok(c.execute("DELETE FROM passkeys WHERE id = $1", &[&id])? > 0)
}
