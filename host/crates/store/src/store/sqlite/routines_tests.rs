//! The routines' rows: kept, listed, and a damaged column said.

use super::super::{Reads, SqliteStore};
use super::*;
use crate::store::{Backend, Records, RecordsTx};
use serde_json::json;

fn sample(id: &str) -> RoutineRow {
    RoutineRow {
        id: id.into(),
        label: Some("nightly".into()),
        spec: Some(
            serde_json::from_value(
                json!({"steps": [{"label": "a", "session": {"existing": "s1"}}]}),
            )
            .expect("a spec"),
        ),
        state: Some(RunState::Running {
            step: 0,
            restarts: 1,
            answered: 0,
        }),
        phase: "running".into(),
        step_session: Some("s1".into()),
        deadline_at: None,
        pending_request: None,
        reason: None,
        created_at: 1,
        updated_at: 2,
        damage: None,
        steps: vec![RoutineStepRow {
            index: 0,
            label: "a".into(),
            status: StepStatus::Running,
            session_id: Some("s1".into()),
            restarts: 1,
            response: None,
            started_at: Some(1),
            ended_at: None,
        }],
    }
}

#[test]
fn a_run_and_its_steps_round_trip_and_are_found_by_session_and_deadline() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(dir.path()).expect("open");
    let mut r = sample("r1");
    store
        .write(|tx| {
            tx.insert_routine(&r)?;
            tx.insert_routine(&sample("r2"))
        })
        .expect("insert");
    assert_eq!(store.routine("r1").expect("read"), Some(r.clone()));
    assert_eq!(
        store
            .write(|tx| tx.routine_on_session("s1"))
            .expect("by session")
            .map(|r| r.id),
        Some("r1".into()),
        "the oldest run on the session"
    );
    r.phase = "escalated".into();
    r.deadline_at = Some(100);
    r.pending_request = Some("perm-1".into());
    r.steps[0].status = StepStatus::Escalated;
    r.steps[0].response = Some("yes".into());
    store.write(|tx| tx.put_routine(&r)).expect("put");
    assert_eq!(store.routine("r1").expect("read"), Some(r.clone()));
    let due = |now| {
        store
            .write(|tx| tx.routines_past_deadline(now))
            .expect("due")
            .len()
    };
    assert_eq!((due(99), due(100)), (0, 1));
    assert_eq!(
        (
            store.routine_past_deadline(99).expect("due"),
            store.routine_past_deadline(100).expect("due")
        ),
        (false, true)
    );
    r.phase = "failed".into();
    r.reason = Some(RunReason::Failed(
        crate::model::routine::FailReason::EscalationTimedOut,
    ));
    store.write(|tx| tx.put_routine(&r)).expect("put");
    let active: Vec<String> = store
        .active_routines()
        .expect("active")
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(active, vec!["r2".to_string()]);
    assert!(store.waiting_routines().expect("waiting").is_empty());
    let listed: Vec<String> = store
        .routines(10)
        .expect("list")
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(listed, vec!["r2".to_string(), "r1".to_string()]);
    assert_eq!(store.routine("r1").expect("read"), Some(r));
}

#[test]
fn a_version_6_file_gains_the_routine_tables_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let conn = rusqlite::Connection::open(dir.path().join("gatehost.db")).expect("open");
        conn.execute_batch(
            "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
             INSERT INTO meta VALUES('schema', '6');",
        )
        .expect("v6 file");
    }
    let store = SqliteStore::open(dir.path()).expect("opens and migrates");
    store
        .write(|tx| tx.insert_routine(&sample("r1")))
        .expect("the tables exist");
    let version: String = store
        .reading(|c| {
            Ok(
                c.query_row("SELECT value FROM meta WHERE key = 'schema'", [], |r| {
                    r.get(0)
                })?,
            )
        })
        .expect("version");
    assert_eq!(version, super::super::SCHEMA_VERSION.to_string());
    drop(store);
    let store = SqliteStore::open(dir.path()).expect("reopens");
    assert!(store.routine("r1").expect("read").is_some());
}

#[test]
fn retention_deletes_finished_runs_past_their_age_and_never_an_active_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(dir.path()).expect("open");
    let day = 24 * 3600 * 1000;
    store
        .write(|tx| {
            for (id, phase) in [
                ("old-done", "done"),
                ("old-failed", "failed"),
                ("old-cancelled", "cancelled"),
                ("old-running", "running"),
                ("old-escalated", "escalated"),
                ("old-waiting", "waiting"),
            ] {
                tx.insert_routine(&RoutineRow {
                    phase: phase.into(),
                    updated_at: 1,
                    ..sample(id)
                })?;
            }
            tx.insert_routine(&RoutineRow {
                phase: "done".into(),
                updated_at: 40 * day,
                ..sample("new-done")
            })
        })
        .expect("insert");
    let rules = crate::config::Retention::default();
    let swept = store.apply_retention(&rules, 45 * day).expect("sweep");
    assert_eq!(swept.routines, 3, "{swept:?}");
    let mut left: Vec<String> = store
        .routines(100)
        .expect("list")
        .into_iter()
        .map(|r| r.id)
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["new-done", "old-escalated", "old-running", "old-waiting"]
    );
    // Their steps went with them.
    let steps: i64 = store
        .reading(|c| {
            Ok(c.query_row(
                "SELECT COUNT(*) FROM routine_steps WHERE routine_id LIKE 'old-%'",
                [],
                |r| r.get(0),
            )?)
        })
        .expect("count");
    assert_eq!(steps, 3);
}

#[test]
fn a_damaged_state_is_said_never_a_default_and_never_written_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(dir.path()).expect("open");
    store
        .write(|tx| {
            tx.insert_routine(&sample("r1"))?;
            tx.conn()
                .execute("UPDATE routines SET state = '{nope' WHERE id = 'r1'", [])?;
            Ok(())
        })
        .expect("write");
    let r = store.routine("r1").expect("read").expect("row");
    assert!(
        r.damage.as_deref().is_some_and(|d| d.contains("state")),
        "{r:?}"
    );
    assert_eq!(r.state, None);
    // The lists still read, the damaged run among them.
    assert_eq!(store.active_routines().expect("active").len(), 1);
    assert!(matches!(
        store.write(|tx| tx.put_routine(&r)),
        Err(StoreError::Damaged { .. })
    ));
}
