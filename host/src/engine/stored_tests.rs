//! A turn-end, counted: each read of a commit policy's row decodes each
//! stored column once (the store's codec), and nothing in the engine
//! decodes one again (before the typed rows, a check on every read and an
//! accessor at every use decoded the spec again); on PostgreSQL, a
//! turn-end to its verdict is few round trips to the server (each ~0.2 ms
//! through the store's bridge, what a turn-end pays beyond SQLite).

use crate::engine::sessions::{RegisterInput, ReportKind};
use crate::engine::{Caller, Engine};
use crate::store::codec_counter::decodes;
use crate::store::{PolicyStatus, Store};
use crate::supervise::reaper::TrackedCommand;
use serde_json::json;
use std::path::Path;
use std::time::Duration;

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .args([
            "-c",
            "user.name=Setup",
            "-c",
            "user.email=setup@example.com",
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "commit.gpgSign=false",
        ])
        .args(args)
        .tracked_output()
        .expect("run git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// Registers the session `s1` in `ws`, as the operator.
fn register(engine: &Engine, ws: &Path) {
    engine
        .sessions()
        .register(
            RegisterInput {
                id: Some("s1".into()),
                cwd: ws.display().to_string(),
                ..Default::default()
            },
            &Caller::operator(),
        )
        .expect("register");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_policys_turn_end_decodes_each_stored_column_once_per_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).expect("mkdir");
    git(&ws, &["init", "-q", "-b", "main"]);
    std::fs::write(ws.join("a.txt"), "one\n").expect("write");
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-q", "-m", "initial"]);
    std::fs::write(ws.join("a.txt"), "two\n").expect("write");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    let store = Store::open(&data).expect("store");
    let runner = crate::gate::GateRunner::new(crate::config::HostConfig::default());
    let engine = Engine::new(store, runner).expect("engine");
    let operator = Caller::operator();
    register(&engine, &ws);
    let p = engine
        .attach(
            crate::model::attach::parse_input(
                json!({"sessionId": "s1", "then": "commit", "gateOn": "workspace",
                       "commit": {"paths": ["a.txt"], "message": "m"}}),
            )
            .expect("input"),
            operator,
            None,
        )
        .await
        .expect("attach");
    let id = p.id.clone();
    let columns = ["spec", "verdict", "plan", "prepared", "review"];
    let before: Vec<usize> = columns.iter().map(|c| decodes(&id, c)).collect();
    let reads_before = decodes(&id, "row");
    engine
        .sessions()
        .report("s1", ReportKind::TurnEnd, Some("done".into()))
        .expect("turn-end");
    // Waited for by the status column alone (a read of the row would
    // decode it, and count).
    let status = || {
        engine
            .store()
            .stored_text("policies", "status", &id)
            .expect("status")
            .unwrap_or_default()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !matches!(
        status().as_str(),
        "awaiting-ack" | "done" | "blocked" | "cancelled"
    ) {
        assert!(std::time::Instant::now() < deadline, "still {}", status());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let reads = decodes(&id, "row") - reads_before;
    let counted: Vec<usize> = columns
        .iter()
        .zip(&before)
        .map(|(c, b)| decodes(&id, c) - b)
        .collect();
    eprintln!(
        "turn-end to awaiting-ack: {reads} reads of the row, decodes {columns:?} = {counted:?}"
    );
    // The spec is decoded once per read, never again.
    assert_eq!(counted[0], reads, "spec decodes vs reads");
    // Every other column at most once per read (only once stored).
    for (c, n) in columns.iter().zip(&counted) {
        assert!(*n <= reads, "{c}: {n} decodes in {reads} reads");
    }
    // The reads of one turn-end stay few: a new read is a new decode.
    // (Before the typed rows, measured the same way at 81abb43: 4 reads,
    // the spec decoded 6 times: each read's check and two accessors.)
    assert!(reads <= 4, "{reads} reads of the row in one turn-end");
    let p = engine.policy(&id).expect("policy");
    assert_eq!(p.status, PolicyStatus::AwaitingAck, "{p:?}");
    assert!(p.plan.is_some() && p.verdict.is_some(), "{p:?}");
}

/// A turn-end on PostgreSQL, from the report to the policy done (a shell
/// `true` gate), in round trips of this host's store: the report's
/// transaction (its reads one each, its writes queued, then the commit),
/// the gate's start, the verdict's transaction. Counted on the second
/// turn (the first prepares the statements on the connection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_end_on_postgres_is_few_round_trips() {
    use crate::store::pg_testdb::{TestDb, host_spec};
    let Some(db) = TestDb::new("engine::a_turn_end_on_postgres_is_few_round_trips") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).expect("mkdir");
    git(&ws, &["init", "-q", "-b", "main"]);
    let store = Store::open_postgres_as(&db.options(), &host_spec("alpha", 15)).expect("claim");
    // The test's own looks, on a store of their own (not counted).
    let watcher = Store::open_postgres(&db.options()).expect("open");
    let config = crate::config::HostConfig::from_toml("[shell]\nallow = [\"true\"]\n", "test.toml")
        .expect("config");
    let engine = Engine::new(store, crate::gate::GateRunner::new(config)).expect("engine");
    let operator = Caller::operator();
    register(&engine, &ws);
    let mut counted = Vec::new();
    for _ in 0..2 {
        let p = engine
            .attach(
                crate::model::attach::parse_input(
                    json!({"sessionId": "s1", "gate": {"command": "true"}, "watchFrom": "now"}),
                )
                .expect("input"),
                operator.clone(),
                None,
            )
            .await
            .expect("attach");
        let trips = || {
            engine
                .store()
                .round_trips()
                .expect("a server's store counts")
        };
        let before = trips();
        engine
            .sessions()
            .report("s1", ReportKind::TurnEnd, Some("done".into()))
            .expect("turn-end");
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let status = watcher
                .stored_text("policies", "status", &p.id)
                .expect("status")
                .unwrap_or_default();
            if status == "done" {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "still {status}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        counted.push(trips() - before);
    }
    eprintln!("a turn-end to done on PostgreSQL: {counted:?} round trips");
    // 13: the report's 6 (its check; the session, its routine and its
    // live policies, read once; the queued writes; the commit), the gate's
    // start 3, the verdict's 4. 16 with the live policies read three ways
    // (judging, live, watching) and each live one again by id; 24 with
    // each write its own round trip too, as before.
    assert!(counted[1] <= 13, "{counted:?} round trips");
}
