use super::*;
use crate::store::{SessionState, Store, conformance};
use serde_json::json;

/// A fresh store of this backend behind the facade, for the conformance
/// tests (the directory lives as long as the store).
fn fresh() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");
    (dir, store)
}

#[test]
fn conforms_a_policy_round_trips() {
    let (_dir, store) = fresh();
    conformance::a_policy_round_trips(&store);
}

#[test]
fn conforms_events_append_and_read_back() {
    let (_dir, store) = fresh();
    conformance::events_append_and_read_back(&store);
}

#[test]
fn conforms_a_rolled_back_write_leaves_nothing() {
    let (_dir, store) = fresh();
    conformance::a_rolled_back_write_leaves_nothing(&store);
}

#[test]
fn conforms_runs_and_operator_records_round_trip() {
    let (_dir, store) = fresh();
    conformance::runs_and_operator_records_round_trip(&store);
}

#[test]
fn conforms_after_commit_runs_once_committed() {
    let (_dir, store) = fresh();
    conformance::after_commit_runs_once_committed(std::sync::Arc::new(store));
}

fn append(store: &SqliteStore, kind: &str, session: Option<&str>) -> i64 {
    store
        .write(|tx| {
            tx.append_event(
                &crate::model::event::Event::decode(kind, json!({"n": 1})),
                session,
                None,
                &[],
            )
        })
        .expect("append")
}

#[test]
fn cursors_only_grow_and_survive_a_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = {
        let store = SqliteStore::open(dir.path()).expect("open");
        let a = append(&store, "session:turn-end", Some("s1"));
        let b = append(&store, "policy:passed", None);
        assert!(b > a);
        // Deleting the newest row must not let its cursor be reused.
        store
            .write(|tx| {
                tx.conn()
                    .execute("DELETE FROM events WHERE cursor=?1", params![b])?;
                Ok(())
            })
            .expect("delete");
        b
    };
    let store = SqliteStore::open(dir.path()).expect("reopen");
    let c = append(&store, "policy:failed", None);
    assert!(c > a, "cursor {c} reused or reset after reopen (had {a})");
}

#[test]
fn pages_cut_by_limit_never_skip_events() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(dir.path()).expect("open");
    for i in 0..25 {
        let kind = if i % 2 == 0 {
            "session:turn-end"
        } else {
            "policy:passed"
        };
        append(&store, kind, Some("s"));
    }
    let mut since = 0;
    let mut seen = Vec::new();
    loop {
        let page = store
            .events(&EventFilter {
                since,
                types: vec!["session:turn-end".into()],
                limit: 4,
                ..Default::default()
            })
            .expect("page");
        if page.is_empty() {
            break;
        }
        since = page.last().map(|e| e.cursor).unwrap_or(since);
        seen.extend(page.into_iter().map(|e| e.cursor));
    }
    assert_eq!(seen.len(), 13, "13 turn-ends in 25 events: {seen:?}");
    assert!(seen.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn a_damaged_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("gatehost.db"), vec![0x42u8; 8192]).expect("write junk");
    let err = SqliteStore::open(dir.path()).expect_err("junk must not open");
    let text = err.to_string();
    assert!(text.contains("gatehost.db"), "{text}");
    assert!(
        matches!(err, StoreError::Corrupt { .. }),
        "expected Corrupt, got {err:?}"
    );
}

#[test]
fn webhook_deliveries_are_queued_with_the_event() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(dir.path()).expect("open");
    store
        .write(|tx| {
            tx.put_session(&SessionRow {
                host: None,
                id: "s1".into(),
                label: None,
                cwd: "/w".into(),
                workspace: "/w".into(),
                state: SessionState::Running,
                turns: 0,
                last_turn_cursor: None,
                last_message: None,
                heartbeat_at: None,
                notify_url: Some("http://127.0.0.1:1/session".into()),
                command: None,
                pid: None,
                created_at: 0,
                updated_at: 0,
                owner: crate::config::Trust::Agent,
                key_digest: None,
                stale_at: None,
                workspace_pin: None,
                damage: None,
            })?;
            tx.append_event(
                &crate::model::event::Event::decode("policy:blocked", json!({})),
                Some("s1"),
                Some("p1"),
                &["http://127.0.0.1:1/global".to_string()],
            )?;
            Ok(())
        })
        .expect("write");
    let due = store.due_deliveries(now_ms() + 1, 10).expect("due");
    let mut urls: Vec<&str> = due.iter().map(|d| d.url.as_str()).collect();
    urls.sort();
    assert_eq!(
        urls,
        ["http://127.0.0.1:1/global", "http://127.0.0.1:1/session"]
    );
    assert!(due.iter().all(|d| d.event.kind() == "policy:blocked"));
}

fn session(id: &str, url: &str) -> SessionRow {
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
        notify_url: Some(url.into()),
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
fn a_version_1_file_gains_session_owners_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        // A file as version 1 wrote it: no owner column.
        let conn = rusqlite::Connection::open(dir.path().join("gatehost.db")).expect("open");
        conn.execute_batch(
            "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
             INSERT INTO meta VALUES('schema', '1');
             CREATE TABLE sessions(id TEXT PRIMARY KEY, label TEXT, cwd TEXT NOT NULL,
               workspace TEXT NOT NULL, state TEXT NOT NULL, turns INTEGER NOT NULL DEFAULT 0,
               last_turn_cursor INTEGER, last_message TEXT, heartbeat_at INTEGER, notify_url TEXT,
               command TEXT, pid INTEGER, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);
             INSERT INTO sessions(id, cwd, workspace, state, created_at, updated_at)
               VALUES('hooked', '/w', '/w', 'running', 0, 0);
             INSERT INTO sessions(id, cwd, workspace, state, command, created_at, updated_at)
               VALUES('started', '/w', '/w', 'running', '[\"agent\"]', 0, 0);",
        )
        .expect("v1 file");
    }
    let store = SqliteStore::open(dir.path()).expect("opens and migrates");
    let owner = |id: &str| store.session(id).expect("read").expect("row").owner;
    assert_eq!(owner("hooked"), crate::config::Trust::Agent);
    assert_eq!(owner("started"), crate::config::Trust::Operator);
    drop(store);
    // Opening again is a no-op.
    let store = SqliteStore::open(dir.path()).expect("reopens");
    assert_eq!(
        store.session("started").expect("read").expect("row").owner,
        crate::config::Trust::Operator
    );
}

#[test]
fn a_policy_event_reaches_every_members_webhook() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(dir.path()).expect("open");
    store
        .write(|tx| {
            tx.put_session(&session("a", "http://127.0.0.1:1/a"))?;
            tx.put_session(&session("b", "http://127.0.0.1:1/b"))?;
            tx.put_session(&session("c", "http://127.0.0.1:1/c"))?;
            let mut p = PolicyRow::sample("p1", PolicyStatus::Watching, &["a", "b"]);
            tx.insert_policy(&mut p)?;
            tx.append_event(
                &crate::model::event::Event::decode("policy:blocked", json!({})),
                Some("a"),
                Some("p1"),
                &[],
            )?;
            Ok(())
        })
        .expect("write");
    let mut urls: Vec<String> = store
        .due_deliveries(now_ms() + 1, 10)
        .expect("due")
        .into_iter()
        .map(|d| d.url)
        .collect();
    urls.sort();
    assert_eq!(
        urls,
        ["http://127.0.0.1:1/a", "http://127.0.0.1:1/b"],
        "c is not a member"
    );
}

/// Every event looks up its webhook URLs; with thousands of policies a
/// table scan there made each append (and attach) slower by the number of
/// policies. The plan must search by index only, also in a file created
/// before the index existed (it is added at open).
#[test]
fn the_webhook_lookup_of_every_event_searches_by_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let store = SqliteStore::open(dir.path()).expect("open");
        store
            .write(|tx| {
                tx.conn()
                    .execute_batch("DROP INDEX IF EXISTS policy_members_policy;")?;
                Ok(())
            })
            .expect("drop the index, as in an older file");
    }
    let store = SqliteStore::open(dir.path()).expect("reopen");
    let plan: Vec<String> = store
        .write(|tx| {
            let mut plan = Vec::new();
            for query in [SESSION_WEBHOOK_URL, MEMBER_WEBHOOK_URLS] {
                let mut st = tx.conn().prepare(&format!("EXPLAIN QUERY PLAN {query}"))?;
                for step in st.query_map(params!["x"], |r| r.get::<_, String>(3))? {
                    plan.push(step?);
                }
            }
            Ok(plan)
        })
        .expect("plan");
    assert!(!plan.is_empty());
    assert!(
        plan.iter().all(|step| !step.starts_with("SCAN")),
        "a table scan per event: {plan:?}"
    );
}

/// Retention deletes old settled policies, exited sessions, finished
/// deliveries and events, and never what a live policy or a pending
/// delivery needs; the head cursor never moves back.
#[test]
fn retention_keeps_what_live_policies_and_pending_deliveries_need() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(dir.path()).expect("open");
    // No session webhooks: their pending deliveries would keep every event.
    let quiet = |id: &str| SessionRow {
        notify_url: None,
        ..session(id, "http://127.0.0.1:1/x")
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
            // Old events: one of the live policy, one a pending delivery
            // still has to send, one of a settled policy, plain ones.
            tx.append_event(
                &crate::model::event::Event::decode("policy:commit-ready", json!({})),
                None,
                Some("live"),
                &[],
            )?;
            tx.append_event(
                &crate::model::event::Event::decode("policy:done", json!({})),
                None,
                Some("old-done"),
                &["http://127.0.0.1:1/hook".to_string()],
            )?;
            tx.append_event(
                &crate::model::event::Event::decode("policy:done", json!({})),
                None,
                Some("old-blocked"),
                &[],
            )?;
            for _ in 0..5 {
                tx.append_event(
                    &crate::model::event::Event::decode("session:turn-end", json!({})),
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
    store
        .write(|tx| {
            // Everything is 40 days old but `new-done`, and the newest event.
            let old = now - 40 * day;
            tx.conn().execute("UPDATE policies SET updated_at = ?1 WHERE id != 'new-done'", [old])?;
            tx.conn().execute("UPDATE policies SET updated_at = ?1 WHERE id = 'new-done'", [now])?;
            tx.conn().execute("UPDATE sessions SET updated_at = ?1", [old])?;
            let head: i64 = tx.conn().query_row("SELECT MAX(cursor) FROM events", [], |r| r.get(0))?;
            tx.conn().execute("UPDATE events SET at = ?1 WHERE cursor < ?2", params![old, head])?;
            // One delivery finished long ago, one still pending.
            tx.conn().execute("INSERT INTO deliveries(event_cursor, url, next_at, state) VALUES(1, 'http://x/', ?1, 'delivered')", [old])?;
            Ok(())
        })
        .expect("age");
    let head = store.head_cursor().expect("head");
    let swept = store
        .apply_retention(&crate::config::Retention::default(), now)
        .expect("retention");
    assert_eq!(swept.policies, 2, "{swept:?}");
    assert_eq!(
        swept.sessions, 1,
        "only `gone`: `watched` has a live policy"
    );
    assert_eq!(swept.deliveries, 1);
    // Kept: the live policy's event, the one with a pending delivery, the
    // newest; gone: the settled policy's and the plain old ones.
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
    assert_eq!(
        store.write(|tx| tx.idempotent("agent:k")).expect("idem"),
        None
    );
    // By count: keep the newest 1 settled policy and the newest 2 events.
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
            tx.conn().execute(
                "UPDATE policies SET updated_at = ?1 WHERE id = 'newer-done'",
                [now],
            )?;
            tx.conn().execute(
                "UPDATE policies SET updated_at = ?1 WHERE id = 'new-done'",
                [now],
            )?;
            Ok(())
        })
        .expect("insert");
    let swept = store.apply_retention(&rules, now).expect("retention");
    assert_eq!(swept.policies, 1);
    assert!(store.policy("new-done").expect("read").is_none());
    assert!(store.policy("newer-done").expect("read").is_some());
    // Deleting the newest events never moves the head back.
    store
        .write(|tx| Ok(tx.conn().execute("DELETE FROM events", [])?))
        .expect("delete");
    assert_eq!(store.head_cursor().expect("head"), head);
    assert_eq!(append(&store, "session:turn-end", None), head + 1);
    // Off: nothing is deleted.
    let off = crate::config::Retention {
        enabled: false,
        ..rules
    };
    assert!(
        store
            .apply_retention(&off, now + 100 * day)
            .expect("off")
            .is_empty()
    );
}

/// The watchdog looks every half second at most: its three queries read
/// their partial indexes, never a whole table (with 10,000 sessions, a
/// scan each look would be the daemon's idle cost).
#[test]
fn the_watchdogs_looks_never_scan_a_table() {
    use super::records::{PAST_DEADLINE, SILENT_SESSIONS, WATCHING_WITH_STALE_MEMBER};
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(dir.path()).expect("open");
    let plan: Vec<String> = store
        .write(|tx| {
            let mut plan = Vec::new();
            for (query, n) in [
                (SILENT_SESSIONS, 2),
                (WATCHING_WITH_STALE_MEMBER, 0),
                (PAST_DEADLINE, 1),
            ] {
                let mut st = tx.conn().prepare(&format!("EXPLAIN QUERY PLAN {query}"))?;
                let args: Vec<i64> = vec![0; n];
                for step in
                    st.query_map(rusqlite::params_from_iter(args), |r| r.get::<_, String>(3))?
                {
                    plan.push(step?);
                }
            }
            Ok(plan)
        })
        .expect("plan");
    assert!(
        plan.iter().any(|s| s.contains("sessions_silent"))
            && plan.iter().any(|s| s.contains("sessions_stale"))
            && plan.iter().any(|s| s.contains("policies_deadline")),
        "{plan:?}"
    );
    assert!(
        plan.iter().all(|step| !step.starts_with("SCAN")),
        "a table scan per look: {plan:?}"
    );
    // Not every watching policy either: from the stale sessions out.
    assert!(
        !plan.iter().any(|s| s.contains("policies_status")),
        "{plan:?}"
    );
}

/// The sweep looks every 3 s: by the partial index `policies_working` it
/// reads the policies a task drives (and a status that does not decode),
/// never a watching, awaiting or settled one (issue 48: with 100,000
/// watching policies, decoding them all each look held the store for
/// up to 1.35 s, took a quarter of a core and 900 MB). Also in a file
/// created before the index existed (it is added at open).
#[test]
fn the_sweep_reads_only_the_policies_a_task_drives_by_its_index() {
    use super::records::TO_SWEEP;
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let store = SqliteStore::open(dir.path()).expect("open");
        store
            .write(|tx| {
                tx.conn()
                    .execute_batch("DROP INDEX IF EXISTS policies_working;")?;
                for i in 0..200 {
                    let id = format!("w{i}");
                    tx.insert_policy(&mut PolicyRow::sample(&id, PolicyStatus::Watching, &["s"]))?;
                }
                for (id, status) in [
                    ("ack", PolicyStatus::AwaitingAck),
                    ("gating", PolicyStatus::Gating),
                    ("done", PolicyStatus::Done),
                    ("queued", PolicyStatus::Queued),
                    ("blocked", PolicyStatus::Blocked),
                    ("nudging", PolicyStatus::Nudging),
                    ("cancelled", PolicyStatus::Cancelled),
                    ("committing", PolicyStatus::Committing),
                    ("reviewing", PolicyStatus::Reviewing),
                ] {
                    tx.insert_policy(&mut PolicyRow::sample(id, status, &["s"]))?;
                }
                Ok(())
            })
            .expect("fill, as in an older file");
    }
    let store = SqliteStore::open(dir.path()).expect("reopen");
    let ids = |queued| -> Vec<String> {
        let list = store.policies_to_sweep(queued).expect("sweep");
        list.into_iter().map(|p| p.id).collect()
    };
    assert_eq!(
        ids(true),
        ["gating", "queued", "nudging", "committing", "reviewing"]
    );
    assert_eq!(ids(false), ["gating", "nudging", "committing", "reviewing"]);
    let plan: Vec<String> = store
        .reading(|c| {
            let mut st = c.prepare(&format!("EXPLAIN QUERY PLAN {TO_SWEEP}"))?;
            let steps = st
                .query_map(params![true], |r| r.get::<_, String>(3))?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(steps)
        })
        .expect("plan");
    assert!(
        plan.iter().any(|s| s.contains("policies_working")),
        "{plan:?}"
    );
    assert!(
        plan.iter()
            .all(|s| !s.starts_with("SCAN") || s.contains("USING INDEX policies_working")),
        "the sweep scans a table: {plan:?}"
    );
    assert!(
        !plan
            .iter()
            .any(|s| s.contains("policies_status") || s.contains("TEMP B-TREE")),
        "{plan:?}"
    );
}
