//! Standing policies' rows in PostgreSQL: a policy template the operator
//! attached once, with the sessions it is for, that the engine attaches to
//! each new session it matches. It owns their SQL; it must never decide
//! whether a template applies to a session; its policy is decoded by the
//! store's codec, kept as the operator gave it.

use super::bridge::{Sql, col};
use crate::store::rows::StandingRow;
use crate::store::{StoreError, StoreResult};
use serde::Serialize;
use tokio_postgres::Row;

fn json_col<T: serde::de::DeserializeOwned + Default>(
    r: &Row,
    column: &str,
    damage: &mut Option<String>,
) -> StoreResult<T> {
    let text: String = col(r, column)?;
    Ok(serde_json::from_str(&text).unwrap_or_else(|e| {
        damage.get_or_insert_with(|| format!("its stored {column} does not decode: {e}"));
        T::default()
    }))
}

fn standing_from(r: &Row) -> StoreResult<StandingRow> {
    let mut damage = None;
    Ok(StandingRow {
        id: col(r, "id")?,
        agents: json_col(r, "agents", &mut damage)?,
        under: json_col(r, "under", &mut damage)?,
        label: col(r, "label")?,
        policy: {
            let text: String = col(r, "policy")?;
            match crate::store::codec::decode(&text) {
                Ok(p) => Some(p),
                Err(e) => {
                    damage.get_or_insert_with(|| format!("its stored policy does not decode: {e}"));
                    None
                }
            }
        },
        created_at: col(r, "created_at")?,
        damage,
    })
}

fn encode(what: &str, v: &impl Serialize) -> StoreResult<String> {
    serde_json::to_string(v).map_err(|e| StoreError::Decode {
        what: "standing policy",
        message: format!("{what}: {e}"),
    })
}

pub(super) fn list_standing(c: &Sql<'_>) -> StoreResult<Vec<StandingRow>> {
    c.query("SELECT * FROM standing_policies ORDER BY seq", &[])?
        .iter()
        .map(standing_from)
        .collect()
}

pub(super) fn get_standing(c: &Sql<'_>, id: &str) -> StoreResult<Option<StandingRow>> {
    c.opt("SELECT * FROM standing_policies WHERE id = $1", &[&id])?
        .map(|r| standing_from(&r))
        .transpose()
}

pub(super) fn insert_standing(c: &Sql<'_>, s: &StandingRow) -> StoreResult<()> {
    let (agents, under, policy) = (
        encode("agents", &s.agents)?,
        encode("under", &s.under)?,
        match &s.policy {
            Some(p) => crate::store::codec::encode("policy", p)?,
            None => {
                return Err(StoreError::Damaged {
                    row: format!("standing policy {}", s.id),
                    column: "policy".into(),
                });
            }
        },
    );
    let n = c.execute(
        "INSERT INTO standing_policies(id, seq, agents, under, label, policy, created_at)
         VALUES($1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM standing_policies), $2, $3, $4, $5, $6)
         ON CONFLICT DO NOTHING",
        &[&s.id, &agents, &under, &s.label, &policy, &s.created_at],
    )?;
    if n != 1 {
        return Err(StoreError::Backend(format!(
            "standing policy {} is already there",
            s.id
        )));
    }
    Ok(())
}

pub(super) fn remove_standing(c: &Sql<'_>, id: &str) -> StoreResult<bool> {
    Ok(c.execute("DELETE FROM standing_policies WHERE id = $1", &[&id])? > 0)
}
