//! Every column the store decodes: invalid JSON and, where the type
//! allows one, JSON of the wrong shape read as damage naming the column,
//! never as a default, and never failing a read of many.

use super::super::{Reads, SqliteStore};
use crate::store::{PolicyRow, PolicyStatus, Records, RecordsTx, SessionRow, SessionState};
use serde_json::json;

fn store() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(dir.path()).expect("open");
    (dir, store)
}

fn session(id: &str) -> SessionRow {
    SessionRow {
        host: None,
        id: id.into(),
        label: None,
        cwd: "/w".into(),
        workspace: "/w".into(),
        state: SessionState::Running,
        turns: 0,
        last_turn_cursor: None,
        last_message: None,
        heartbeat_at: None,
        notify_url: None,
        command: Some(vec!["agent".into()]),
        pid: None,
        created_at: 0,
        updated_at: 0,
        owner: crate::config::Trust::Operator,
        key_digest: None,
        stale_at: None,
        workspace_pin: None,
        damage: None,
    }
}

fn typed<T: serde::de::DeserializeOwned>(v: impl serde::Serialize) -> T {
    serde_json::from_value(serde_json::to_value(v).expect("json")).expect("a sample of the type")
}

/// A commit policy awaiting its ack, with every JSON column set, and a
/// plain one beside it.
fn two_policies(store: &SqliteStore) {
    store
        .write(|tx| {
            let mut p = PolicyRow::sample("victim", PolicyStatus::AwaitingAck, &["s1"]);
            p.spec = typed(json!({"sessionId": "s1", "sessionIds": ["s1"], "gate": {"command": "true"},
                "then": "commit", "commit": {"paths": ["a"], "message": "m", "requireHumanAck": true}}));
            p.plan = Some(typed(json!({"version": 1, "paths": ["a"], "message": "m", "fingerprint": "f",
                "requireHumanAck": true, "diffSummary": null})));
            p.verdict = Some(typed(json!({"outcome": "pass", "reason": "ok",
                "durations": {"queuedMs": 0, "runMs": 1}, "gates": []})));
            p.prepared = Some(typed(json!({"commit": "c", "parent": null, "reference": "refs/heads/main",
                "nothing_to_commit": false, "paths": ["a"]})));
            tx.insert_policy(&mut p)?;
            tx.insert_policy(&mut PolicyRow::sample("other", PolicyStatus::Watching, &["s1"]))?;
            Ok(())
        })
        .expect("insert");
}

/// Sets `column` of the victim to `value` (raw text) and reads every
/// policy (each JSON column decoded into its type): the read
/// succeeds, the victim names `column`, the other reads clean; the victim
/// is never written back whole, and its damaged column is kept as found.
pub(crate) fn damaged_policy_column(column: &str, value: &str) {
    let (_dir, store) = store();
    two_policies(&store);
    let clean = store.policy("victim").expect("read").expect("there");
    assert_eq!(clean.damage, None, "the sample decodes: {clean:?}");
    store
        .write(|tx| {
            tx.conn().execute(
                &format!("UPDATE policies SET {column} = ?1 WHERE id = 'victim'"),
                [value],
            )?;
            Ok(())
        })
        .expect("damage");
    let all = store
        .policies(&[])
        .expect("a damaged row never fails the read");
    let victim = all.iter().find(|p| p.id == "victim").expect("listed");
    let damage = victim.damage.as_ref().expect("damage noted");
    assert_eq!(damage.column, column, "{damage:?}");
    assert!(!damage.message.is_empty());
    let other = all.iter().find(|p| p.id == "other").expect("listed");
    assert_eq!(other.damage, None);
    // Never written back whole; its status alone may be.
    let err = store
        .write(|tx| tx.put_policy(victim))
        .expect_err("a damaged row is not written back");
    assert!(err.to_string().contains(column), "{err}");
    let mut blocked = victim.clone();
    blocked.status = PolicyStatus::Blocked;
    store
        .write(|tx| tx.put_damaged_policy(&blocked))
        .expect("status written");
    let text: String = store
        .reading(|c| {
            Ok(c.query_row(
                &format!("SELECT CAST({column} AS TEXT) FROM policies WHERE id = 'victim'"),
                [],
                |r| r.get(0),
            )?)
        })
        .expect("read back");
    // The status and its time are what the store writes of it.
    if column != "status" && column != "updated_at" {
        assert_eq!(text, value, "the damaged column is kept as found");
    }
}

#[test]
fn invalid_json_in_every_json_column_is_damage() {
    for column in ["verdict", "plan", "prepared"] {
        damaged_policy_column(column, "{nope");
    }

    damaged_policy_column("spec", "{nope");
    damaged_policy_column("spec", "");
}

#[test]
fn member_lists_of_the_wrong_shape_or_invalid_json_are_damage() {
    for column in ["sessions", "pending"] {
        damaged_policy_column(column, r#"{"s1": true}"#);
        damaged_policy_column(column, "[1]");
        damaged_policy_column(column, "[\"s1\"");
    }
    damaged_policy_column("sessions", "[]");
}

#[test]
fn open_publishes_of_the_wrong_shape_or_invalid_json_are_damage() {
    damaged_policy_column("publish_open", r#"["noon"]"#);
    damaged_policy_column("publish_open", "[1,");
}

#[test]
fn an_unknown_status_is_damage_read_as_blocked() {
    damaged_policy_column("status", "judging");
    let (_dir, store) = store();
    two_policies(&store);
    store
        .write(|tx| {
            tx.conn()
                .execute("UPDATE policies SET status = 'x' WHERE id = 'victim'", [])?;
            Ok(())
        })
        .expect("damage");
    // Found by the start's look for damage and by the sweep's (a status
    // that does not decode is in its index), read as blocked.
    assert_eq!(store.damaged_policies().expect("read"), ["victim"]);
    for queued in [true, false] {
        let swept = store.policies_to_sweep(queued).expect("read");
        let victim = swept.iter().find(|p| p.id == "victim").expect("found");
        assert_eq!(victim.status, PolicyStatus::Blocked);
        assert!(victim.damage.is_some());
    }
}

#[test]
fn text_in_a_number_or_a_number_in_a_text_column_is_damage() {
    for column in [
        "seq",
        "watch_after",
        "retries_used",
        "gate_runs",
        "created_at",
        "updated_at",
        "gate_crashes",
    ] {
        damaged_policy_column(column, "soon");
    }
}

/// Sets `column` of session s1 to `value`: the list reads, s1 names it,
/// s2 reads clean, and s1 is never written back.
fn damaged_session_column(column: &str, value: &str) {
    let (_dir, store) = store();
    store
        .write(|tx| {
            tx.put_session(&session("s1"))?;
            tx.put_session(&session("s2"))?;
            tx.conn().execute(
                &format!("UPDATE sessions SET {column} = ?1 WHERE id = 's1'"),
                [value],
            )?;
            Ok(())
        })
        .expect("write");
    let all = store
        .sessions()
        .expect("a damaged row never fails the read");
    let s1 = all.iter().find(|s| s.id == "s1").expect("listed");
    assert_eq!(s1.damage.as_ref().map(|d| d.column.as_str()), Some(column));
    assert_eq!(all.iter().find(|s| s.id == "s2").expect("s2").damage, None);
    let page = store.sessions_page(0, 10).expect("a page reads too");
    assert_eq!(page.len(), 2);
    assert!(store.write(|tx| tx.put_session(s1)).is_err());
}

#[test]
fn session_columns_that_do_not_decode_are_damage() {
    for (column, value) in [
        ("command", "[\"sh\""),
        ("command", r#""sh -c x""#),
        ("command", "[]"),
        ("command", "[1]"),
        ("state", "asleep"),
        ("owner", "root"),
        ("workspace", "relative"),
        ("cwd", ""),
        ("turns", "many"),
        ("pid", "me"),
    ] {
        damaged_session_column(column, value);
    }
}

#[test]
fn event_payloads_that_do_not_decode_are_damage() {
    for value in ["{\"a\": ", "[]", "3"] {
        let (_dir, store) = store();
        store
            .write(|tx| {
                tx.append_event(
                    &crate::model::event::Event::decode("policy:passed", json!({"a": 1})),
                    None,
                    Some("p"),
                    &[],
                )?;
                tx.append_event(
                    &crate::model::event::Event::decode("policy:done", json!({"b": 2})),
                    None,
                    Some("p"),
                    &[],
                )?;
                tx.conn().execute(
                    "UPDATE events SET payload = ?1 WHERE type = 'policy:passed'",
                    [value],
                )?;
                Ok(())
            })
            .expect("write");
        let events = store
            .events(&super::super::EventFilter {
                limit: 10,
                ..Default::default()
            })
            .expect("a damaged event never fails the read");
        assert_eq!(events.len(), 2);
        assert_eq!(
            events[0].damage.as_ref().map(|d| d.column.as_str()),
            Some("payload")
        );
        assert_eq!(events[1].damage, None);
    }
}
