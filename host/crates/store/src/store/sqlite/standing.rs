//! Standing policies' rows: a policy template the operator attached once
//! (`gatehost policy attach --template`), with the sessions it is for (by
//! agent, by workspace, by label), that the engine attaches to each new
//! session it matches (`engine::rules`). It owns their SQL; it must never
//! decide whether a template applies to a session; its policy is decoded
//! by the store's codec, kept as the operator gave it.

use crate::store::{StoreError, StoreResult};

use crate::store::rows::StandingRow;
use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::Serialize;

/// The table (schema version 8), created at every open.
pub(super) const STANDING_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS standing_policies(
    id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL UNIQUE,
    agents TEXT NOT NULL,
    under TEXT NOT NULL,
    label TEXT,
    policy TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
";

fn json_col<T: serde::de::DeserializeOwned + Default>(
    r: &Row<'_>,
    col: &str,
    damage: &mut Option<String>,
) -> rusqlite::Result<T> {
    let text: String = r.get(col)?;
    Ok(serde_json::from_str(&text).unwrap_or_else(|e| {
        damage.get_or_insert_with(|| format!("its stored {col} does not decode: {e}"));
        T::default()
    }))
}

fn standing_from(r: &Row<'_>) -> rusqlite::Result<StandingRow> {
    let mut damage = None;
    Ok(StandingRow {
        id: r.get("id")?,
        agents: json_col(r, "agents", &mut damage)?,
        under: json_col(r, "under", &mut damage)?,
        label: r.get("label")?,
        policy: {
            let text: String = r.get("policy")?;
            match crate::store::codec::decode(&text) {
                Ok(p) => Some(p),
                Err(e) => {
                    damage.get_or_insert_with(|| format!("its stored policy does not decode: {e}"));
                    None
                }
            }
        },
        created_at: r.get("created_at")?,
        damage,
    })
}

fn encode(what: &str, v: &impl Serialize) -> StoreResult<String> {
    serde_json::to_string(v).map_err(|e| StoreError::Decode {
        what: "standing policy",
        message: format!("{what}: {e}"),
    })
}

/// Every standing policy, oldest first.
pub(super) fn list_standing(c: &Connection) -> StoreResult<Vec<StandingRow>> {
    let rows = c
        .prepare_cached("SELECT * FROM standing_policies ORDER BY seq")?
        .query_map([], standing_from)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub(super) fn get_standing(c: &Connection, id: &str) -> StoreResult<Option<StandingRow>> {
    Ok(
        c.prepare_cached("SELECT * FROM standing_policies WHERE id = ?1")?
            .query_row(params![id], standing_from)
            .optional()?,
    )
}

pub(super) fn insert_standing(c: &Connection, s: &StandingRow) -> StoreResult<()> {
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
    c.prepare_cached(
            "INSERT INTO standing_policies(id, seq, agents, under, label, policy, created_at)
             VALUES(?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM standing_policies), ?2, ?3, ?4, ?5, ?6)",
        )?
        .execute(params![s.id, agents, under, s.label, policy, s.created_at])?;
    Ok(())
}

/// Removes one; whether it was there.
pub(super) fn remove_standing(c: &Connection, id: &str) -> StoreResult<bool> {
    Ok(
        c.prepare_cached("DELETE FROM standing_policies WHERE id = ?1")?
            .execute(params![id])?
            > 0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::as_given::AsGiven;
    use crate::store::sqlite::SqliteStore;
    use crate::store::{Records, RecordsTx};
    use serde_json::json;

    fn sample(id: &str) -> StandingRow {
        StandingRow {
            id: id.into(),
            agents: vec!["claude".into()],
            under: vec!["/work".into()],
            label: None,
            policy: Some(AsGiven::parse(json!({"gate": {"command": "true"}})).expect("a template")),
            created_at: 1,
            damage: None,
        }
    }

    #[test]
    fn rows_are_kept_in_order_across_a_reopen_and_removed_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SqliteStore::open(dir.path()).expect("open");
        store
            .write(|tx| {
                tx.insert_standing(&sample("sp_b"))?;
                tx.insert_standing(&StandingRow {
                    label: Some("nightly".into()),
                    ..sample("sp_a")
                })
            })
            .expect("insert");
        drop(store);
        let store = SqliteStore::open(dir.path()).expect("reopen");
        let rows = store.standing_policies().expect("list");
        let ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["sp_b", "sp_a"], "in the order added");
        assert_eq!(rows[1].label.as_deref(), Some("nightly"));
        assert_eq!(rows[0], sample("sp_b"));
        assert!(store.write(|tx| tx.remove_standing("sp_b")).expect("rm"));
        assert!(!store.write(|tx| tx.remove_standing("sp_b")).expect("again"));
        assert_eq!(store.standing_policies().expect("list").len(), 1);
    }

    #[test]
    fn a_damaged_column_is_said_and_the_list_still_reads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SqliteStore::open(dir.path()).expect("open");
        store
            .write(|tx| {
                tx.insert_standing(&sample("sp_1"))?;
                tx.conn().execute(
                    "UPDATE standing_policies SET agents = '{' WHERE id = 'sp_1'",
                    [],
                )?;
                Ok(())
            })
            .expect("write");
        let rows = store.standing_policies().expect("list");
        assert!(
            rows[0]
                .damage
                .as_deref()
                .is_some_and(|d| d.contains("agents")),
            "{rows:?}"
        );
        assert!(rows[0].agents.is_empty());
    }

    #[test]
    fn a_version_7_file_gains_the_table_at_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let conn = rusqlite::Connection::open(dir.path().join("gatehost.db")).expect("open");
            conn.execute_batch(
                "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
                 INSERT INTO meta VALUES('schema', '7');",
            )
            .expect("v7 file");
        }
        let store = SqliteStore::open(dir.path()).expect("opens and migrates");
        store
            .write(|tx| tx.insert_standing(&sample("sp_1")))
            .expect("the table exists");
        assert_eq!(store.standing_policies().expect("list").len(), 1);
    }
}
