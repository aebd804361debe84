//! Retention on PostgreSQL: the SQLite backend's cases (old settled
//! policies, exited sessions, finished deliveries, old events and finished
//! runs go; what a live policy, a pending delivery or an active run needs
//! stays; the head cursor never moves back).

use super::bridge::col;
use super::tests::{append, fresh_pg};
use crate::model::event::Event;
use crate::store::{
    EventFilter, PolicyRow, PolicyStatus, Records, RecordsTx, SessionRow, SessionState, now_ms,
};
use serde_json::json;

fn quiet(id: &str) -> SessionRow {
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
fn retention_keeps_what_live_policies_and_pending_deliveries_need() {
    let Some((store, _db)) =
        fresh_pg("retention_keeps_what_live_policies_and_pending_deliveries_need")
    else {
        return;
    };
    let mut exited = quiet("gone");
    exited.state = SessionState::Exited;
    let mut watched = quiet("watched");
    watched.state = SessionState::Exited;
    store
        .write(|tx| {
            tx.put_session(&exited)?;
            tx.put_session(&watched)?;
            tx.put_session(&quiet("alive"))?;
            for (id, status, members) in [
                ("old-done", PolicyStatus::Done, &["gone"][..]),
                ("old-blocked", PolicyStatus::Blocked, &["gone"][..]),
                ("live", PolicyStatus::AwaitingAck, &["watched"][..]),
                ("new-done", PolicyStatus::Done, &["alive"][..]),
            ] {
                tx.insert_policy(&mut PolicyRow::sample(id, status, members))?;
            }
            tx.put_idempotent("agent:k", "digest", "old-done")?;
            tx.append_event(
                &Event::decode("policy:commit-ready", json!({})),
                None,
                Some("live"),
                &[],
            )?;
            tx.append_event(
                &Event::decode("policy:done", json!({})),
                None,
                Some("old-done"),
                &["http://127.0.0.1:1/hook".to_string()],
            )?;
            tx.append_event(
                &Event::decode("policy:done", json!({})),
                None,
                Some("old-blocked"),
                &[],
            )?;
            for _ in 0..5 {
                tx.append_event(
                    &Event::decode("session:turn-end", json!({})),
                    Some("alive"),
                    None,
                    &[],
                )?;
            }
            Ok(())
        })
        .expect("write");
    let now = now_ms();
    let day = 24 * 3600 * 1000;
    let old = now - 40 * day;
    store
        .write(|tx| {
            let c = &tx.sql;
            c.execute(
                "UPDATE policies SET updated_at = $1 WHERE id <> 'new-done'",
                &[&old],
            )?;
            c.execute(
                "UPDATE policies SET updated_at = $1 WHERE id = 'new-done'",
                &[&now],
            )?;
            c.execute("UPDATE sessions SET updated_at = $1", &[&old])?;
            let head: i64 = col(&c.one("SELECT MAX(cursor) AS m FROM events", &[])?, "m")?;
            c.execute(
                "UPDATE events SET at = $1 WHERE cursor < $2",
                &[&old, &head],
            )?;
            c.execute(
                "INSERT INTO deliveries(event_cursor, url, next_at, state)
                 VALUES(1, 'http://x/', $1, 'delivered')",
                &[&old],
            )?;
            Ok(())
        })
        .expect("age");
    let head = store.head_cursor().expect("head");
    let swept = store
        .retain(&crate::config::Retention::default(), now)
        .expect("retention");
    assert_eq!(swept.policies, 2, "{swept:?}");
    assert_eq!(
        swept.sessions, 1,
        "only `gone`: `watched` has a live policy"
    );
    assert_eq!(swept.deliveries, 1);
    let kept: Vec<i64> = store
        .events(&EventFilter {
            since: 0,
            limit: 100,
            ..Default::default()
        })
        .expect("events")
        .iter()
        .map(|e| e.cursor)
        .collect();
    assert_eq!(kept, vec![1, 2, head], "{swept:?}");
    assert_eq!(swept.events as i64, head - 3, "{swept:?}");
    assert!(store.policy("live").expect("read").is_some());
    assert!(store.policy("new-done").expect("read").is_some());
    assert!(store.policy("old-done").expect("read").is_none());
    assert!(store.session("watched").expect("read").is_some());
    assert!(store.session("gone").expect("read").is_none());
    assert_eq!(store.idempotent("agent:k").expect("idem"), None);
    // By count: keep the newest settled policy and the newest 2 events.
    let rules = crate::config::Retention {
        policies_max_count: 1,
        events_max_count: 2,
        events_max_age: std::time::Duration::from_secs(1_000_000_000),
        ..Default::default()
    };
    store
        .write(|tx| {
            tx.insert_policy(&mut PolicyRow::sample(
                "newer-done",
                PolicyStatus::Done,
                &["alive"],
            ))?;
            tx.sql.execute(
                "UPDATE policies SET updated_at = $1 WHERE id IN ('newer-done', 'new-done')",
                &[&now],
            )?;
            Ok(())
        })
        .expect("insert");
    let swept = store.retain(&rules, now).expect("retention");
    assert_eq!(swept.policies, 1);
    assert!(store.policy("new-done").expect("read").is_none());
    assert!(store.policy("newer-done").expect("read").is_some());
    // Deleting the newest events never moves the head back.
    store
        .write(|tx| tx.sql.execute("DELETE FROM events", &[]))
        .expect("delete");
    assert_eq!(store.head_cursor().expect("head"), head);
    assert_eq!(append(&store, "session:turn-end", None), head + 1);
    // Off: nothing is deleted.
    let off = crate::config::Retention {
        enabled: false,
        ..rules
    };
    assert!(store.retain(&off, now + 100 * day).expect("off").is_empty());
}

#[test]
fn retention_deletes_finished_runs_past_their_age_and_never_an_active_one() {
    let Some((store, _db)) =
        fresh_pg("retention_deletes_finished_runs_past_their_age_and_never_an_active_one")
    else {
        return;
    };
    let run = |id: &str, phase: &str| crate::store::RoutineRow {
        id: id.into(),
        label: None,
        spec: Some(
            serde_json::from_value(
                json!({"steps": [{"label": "a", "session": {"existing": "s1"}}]}),
            )
            .expect("a spec"),
        ),
        state: Some(crate::model::routine::RunState::Done),
        phase: phase.into(),
        step_session: None,
        deadline_at: None,
        pending_request: None,
        reason: None,
        created_at: 1,
        updated_at: 1,
        damage: None,
        steps: vec![crate::store::RoutineStepRow {
            index: 0,
            label: "a".into(),
            status: crate::store::StepStatus::Done,
            session_id: None,
            restarts: 0,
            response: None,
            started_at: Some(1),
            ended_at: Some(1),
        }],
    };
    store
        .write(|tx| {
            tx.insert_routine(&run("old-done", "done"))?;
            tx.insert_routine_key("k", "old-done", "d")?;
            tx.insert_routine(&run("old-running", "running"))?;
            tx.insert_routine(&run("new-done", "done"))?;
            tx.sql.execute(
                "UPDATE routines SET updated_at = $1 WHERE id = 'new-done'",
                &[&now_ms()],
            )?;
            Ok(())
        })
        .expect("insert");
    let swept = store
        .retain(&crate::config::Retention::default(), now_ms())
        .expect("retention");
    assert_eq!(swept.routines, 1, "{swept:?}");
    assert!(store.routine("old-done").expect("read").is_none());
    assert_eq!(store.routine_by_key("k").expect("key"), None);
    assert!(store.routine("old-running").expect("read").is_some());
    assert!(store.routine("new-done").expect("read").is_some());
    let steps: i64 = store
        .reading(|c| col(&c.one("SELECT count(*) AS n FROM routine_steps", &[])?, "n"))
        .expect("count");
    assert_eq!(steps, 2, "the deleted run's steps went with it");
}
