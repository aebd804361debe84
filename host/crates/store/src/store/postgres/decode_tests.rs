//! Damage on PostgreSQL: a stored text column that does not decode makes
//! its row damaged (never an error of the whole read, never a default),
//! through the test-only `stored_text` / `damage_column` the engine's
//! damage tests use; a typed column cannot hold text at all.

use super::tests::fresh;
use crate::model::event::Event;
use crate::store::{EventFilter, PolicyRow, PolicyStatus, RoutineRow, SessionRow, SessionState};
use serde_json::json;

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
        command: None,
        pid: None,
        created_at: 0,
        updated_at: 0,
        owner: crate::config::Trust::Agent,
        key_digest: None,
        stale_at: None,
        workspace_pin: None,
        damage: None,
    }
}

#[test]
fn text_columns_that_do_not_decode_are_damage_and_reads_go_on() {
    let Some((store, _db)) = fresh("text_columns_that_do_not_decode_are_damage_and_reads_go_on")
    else {
        return;
    };
    let cases = [
        ("spec", "[]"),
        ("spec", "{"),
        ("sessions", "{\"a\": 1}"),
        ("verdict", "[1]"),
        ("status", "frozen"),
        ("publish_open", "x"),
    ];
    store
        .write(|tx| {
            tx.put_session(&session("s1"))?;
            for i in 0..cases.len() {
                let id = format!("d{i}");
                tx.insert_policy(&mut PolicyRow::sample(&id, PolicyStatus::Gating, &["s1"]))?;
            }
            tx.insert_policy(&mut PolicyRow::sample("ok", PolicyStatus::Gating, &["s1"]))?;
            tx.append_event(&Event::decode("policy:passed", json!({})), None, None, &[])?;
            Ok(())
        })
        .expect("write");
    assert_eq!(
        store.stored_text("policies", "status", "ok").expect("text"),
        Some("gating".into())
    );
    assert_eq!(
        store
            .stored_text("policies", "status", "nope")
            .expect("text"),
        None
    );
    for (i, (column, text)) in cases.iter().enumerate() {
        let id = format!("d{i}");
        assert_eq!(
            store
                .damage_column("policies", column, Some(&id), text)
                .expect("damage"),
            1
        );
        let all = store.policies(&[]).expect("the list still reads");
        assert_eq!(all.len(), cases.len() + 1);
        let p = all.iter().find(|p| p.id == id).expect("listed");
        let damage = p.damage.as_ref().expect("damaged");
        assert_eq!(damage.column, *column, "{text}: {damage:?}");
        if *column == "status" {
            assert_eq!(p.status, PolicyStatus::Blocked, "nothing drives it");
        }
        assert!(
            matches!(
                store.write(|tx| tx.put_policy(p)),
                Err(crate::store::StoreError::Damaged { .. })
            ),
            "never written back whole"
        );
        assert_eq!(store.damaged_policies().expect("damaged").len(), i + 1);
    }
    assert!(
        store
            .policy("ok")
            .expect("read")
            .expect("ok")
            .damage
            .is_none()
    );
    store
        .damage_column("sessions", "cwd", Some("s1"), "relative/path")
        .expect("damage");
    let s = store.session("s1").expect("read").expect("there");
    assert_eq!(s.damage.as_ref().map(|d| d.column.as_str()), Some("cwd"));
    store
        .damage_column("events", "payload", None, "not json")
        .expect("damage");
    let e = store
        .events(&EventFilter {
            limit: 10,
            ..Default::default()
        })
        .expect("the events still read");
    assert_eq!(
        e[0].damage.as_ref().map(|d| d.column.as_str()),
        Some("payload")
    );
    // A number column cannot hold text here: the damage is refused.
    assert!(
        store
            .damage_column("policies", "gate_runs", Some("ok"), "many")
            .is_err()
    );
    assert!(
        store
            .policy("ok")
            .expect("read")
            .expect("ok")
            .damage
            .is_none()
    );
}

#[test]
fn a_damaged_routine_state_is_said_and_never_written_back() {
    let Some((store, _db)) = fresh("a_damaged_routine_state_is_said_and_never_written_back") else {
        return;
    };
    let run = RoutineRow {
        id: "r1".into(),
        label: None,
        spec: Some(
            serde_json::from_value(
                json!({"steps": [{"label": "a", "session": {"existing": "s1"}}]}),
            )
            .expect("a spec"),
        ),
        state: Some(crate::model::routine::RunState::Done),
        phase: "done".into(),
        step_session: None,
        deadline_at: None,
        pending_request: None,
        reason: None,
        created_at: 1,
        updated_at: 1,
        damage: None,
        steps: Vec::new(),
    };
    store.write(|tx| tx.insert_routine(&run)).expect("insert");
    store
        .damage_column("routines", "state", Some("r1"), "{\"nope\": 1}")
        .expect("damage");
    let read = store.routine("r1").expect("read").expect("there");
    assert!(read.state.is_none());
    assert!(
        read.damage.as_deref().is_some_and(|d| d.contains("state")),
        "{read:?}"
    );
    assert!(store.write(|tx| tx.put_routine(&read)).is_err());
    store
        .write(|tx| {
            tx.end_damaged_routine(
                "r1",
                crate::model::routine::RunState::Done,
                "failed",
                "its state was damaged",
                2,
            )
        })
        .expect("ended");
    let read = store.routine("r1").expect("read").expect("there");
    assert_eq!(read.phase, "failed");
}
