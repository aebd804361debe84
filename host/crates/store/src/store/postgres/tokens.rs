//! The cluster's tokens in PostgreSQL (`cluster_tokens`, schema 3): read
//! them, their generations alone (the cheap look of a host's backstop),
//! store this host's when the cluster has none (the first host seeds it),
//! and rotate them: a new value, its generation one more, and a
//! notification on [`CHANNEL`] in the same transaction (delivered at its
//! commit only), which wakes every other host to read them again
//! (`listen`).
//!
//! It owns that SQL. It must never put a value in a message, a log or an
//! error (the values are statement parameters only), nor decide what a
//! host does with the tokens.

use super::bridge::{Sql, col};
use crate::store::tokens::{ClusterTokens, StoredToken, TokenName};
use crate::store::{SharedTokens, StoreError, StoreResult};

/// The channel a rotation notifies.
pub(super) const CHANNEL: &str = "gatehost_tokens";

/// Both tokens, or `None` unless both are stored.
pub(super) fn read(c: &Sql<'_>) -> StoreResult<Option<ClusterTokens>> {
    let rows = c.query(
        "SELECT name, value, generation, rotated_at, rotated_by FROM cluster_tokens",
        &[],
    )?;
    let (mut agent, mut operator) = (None, None);
    for r in &rows {
        let name: String = col(r, "name")?;
        let token = StoredToken {
            value: col(r, "value")?,
            generation: col(r, "generation")?,
            rotated_at: col(r, "rotated_at")?,
            rotated_by: col(r, "rotated_by")?,
        };
        match name.as_str() {
            "agent" => agent = Some(token),
            "operator" => operator = Some(token),
            _ => {}
        }
    }
    Ok(agent
        .zip(operator)
        .map(|(agent, operator)| ClusterTokens { agent, operator }))
}

/// The generations `(agent, operator)`, or `None` unless both are stored.
pub(super) fn generations(c: &Sql<'_>) -> StoreResult<Option<(i64, i64)>> {
    let rows = c.query("SELECT name, generation FROM cluster_tokens", &[])?;
    let (mut agent, mut operator) = (None, None);
    for r in &rows {
        let name: String = col(r, "name")?;
        let generation: i64 = col(r, "generation")?;
        match name.as_str() {
            "agent" => agent = Some(generation),
            "operator" => operator = Some(generation),
            _ => {}
        }
    }
    Ok(agent.zip(operator))
}

/// Stores `agent` and `operator` as generation 1 where the cluster has no
/// such token (under the write lock: of hosts starting at once, the first
/// stores them, the others find them), then answers what is stored.
pub(super) fn seed(
    c: &Sql<'_>,
    agent: &str,
    operator: &str,
    now: i64,
) -> StoreResult<Option<ClusterTokens>> {
    c.execute(
        "INSERT INTO cluster_tokens(name, value, generation, rotated_at, rotated_by)
         VALUES ('agent', $1, 1, $3, gatehost_host()), ('operator', $2, 1, $3, gatehost_host())
         ON CONFLICT (name) DO NOTHING",
        &[&agent, &operator, &now],
    )?;
    read(c)
}

/// Sets each `(name, value)` given, its generation one more, and
/// notifies [`CHANNEL`] (at the commit); answers what is then stored.
pub(super) fn rotate(
    c: &Sql<'_>,
    new: &[(TokenName, &str)],
    now: i64,
) -> StoreResult<Option<ClusterTokens>> {
    for (name, value) in new {
        c.execute(
            "UPDATE cluster_tokens
                SET value = $2, generation = generation + 1, rotated_at = $3,
                    rotated_by = gatehost_host()
              WHERE name = $1",
            &[&name.as_str(), value, &now],
        )?;
    }
    let stored = read(c)?;
    if let Some(t) = &stored {
        let (a, o) = t.generations();
        c.execute(
            &format!("SELECT pg_notify('{CHANNEL}', $1)"),
            &[&format!("{a},{o}")],
        )?;
    }
    Ok(stored)
}

/// What `read` found missing right after a seed or a rotation stored it.
fn missing() -> StoreError {
    StoreError::Backend("the cluster's tokens were not found where they were just stored".into())
}

impl SharedTokens for super::PgStore {
    fn cluster_tokens(&self) -> StoreResult<Option<ClusterTokens>> {
        self.reading(read)
    }

    fn token_generations(&self) -> StoreResult<Option<(i64, i64)>> {
        self.reading(generations)
    }

    fn seed_cluster_tokens(&self, agent: &str, operator: &str) -> StoreResult<ClusterTokens> {
        let now = crate::store::now_ms();
        self.write(|tx| seed(&tx.sql, agent, operator, now))?
            .ok_or_else(missing)
    }

    fn rotate_cluster_tokens(&self, new: &[(TokenName, &str)]) -> StoreResult<ClusterTokens> {
        let now = crate::store::now_ms();
        self.write(|tx| rotate(&tx.sql, new, now))?
            .ok_or_else(missing)
    }
}

#[cfg(test)]
#[path = "tokens_tests.rs"]
mod tests;
