//! The looks the daemon makes often are answered by an index, never a scan
//! of a table: PostgreSQL's plans for the watchdog's looks, the sweep's
//! and a policy event's webhook recipients, read with `EXPLAIN` with
//! sequential scans made as dear as the planner allows (on a test's few
//! rows it would otherwise scan: a scan is then still chosen only where
//! no index can answer).

use super::bridge::{Param, col};
use super::records::{
    APPEND_EVENT, PAST_DEADLINE, SILENT_SESSIONS, TO_SWEEP, WATCHING_WITH_STALE_MEMBER,
};
use super::tests::fresh_pg;
use super::{PgStore, StoreResult};
use crate::store::{PolicyRow, PolicyStatus, Records, RecordsTx, SessionRow};

/// The plan of `sql` with `params`, one line each.
fn plan(store: &PgStore, sql: &str, params: &[Param<'_>]) -> Vec<String> {
    store
        .write(|tx| {
            tx.sql.batch("SET LOCAL enable_seqscan = off")?;
            tx.sql
                .query(&format!("EXPLAIN {sql}"), params)?
                .iter()
                .map(|r| col(r, "QUERY PLAN"))
                .collect::<StoreResult<Vec<String>>>()
        })
        .expect("plan")
}

fn no_scan(plan: &[String]) {
    assert!(
        plan.iter().all(|s| !s.contains("Seq Scan")),
        "a table scan: {plan:#?}"
    );
}

#[test]
fn the_watchdogs_looks_read_their_partial_indexes() {
    let Some((store, _db)) = fresh_pg("the_watchdogs_looks_read_their_partial_indexes") else {
        return;
    };
    // What a daemon's tables hold (PostgreSQL plans by its statistics):
    // many sessions and watching policies, one stale session.
    store
        .write(|tx| {
            for i in 0..300 {
                let sid = format!("s{i}");
                let mut s = SessionRow::sample(&sid);
                s.stale_at = (i == 7).then_some(1);
                s.heartbeat_at = Some(i);
                tx.put_session(&s)?;
                let pid = format!("w{i}");
                tx.insert_policy(&mut PolicyRow::sample(
                    &pid,
                    PolicyStatus::Watching,
                    &[&sid],
                ))?;
            }
            tx.sql.batch("ANALYZE")
        })
        .expect("fill");
    assert_eq!(
        store
            .watching_with_stale_member()
            .expect("look")
            .iter()
            .map(|p| p.id.as_str())
            .collect::<Vec<_>>(),
        ["w7"]
    );
    let silent = plan(&store, SILENT_SESSIONS, &[&0i64, &1i64]);
    no_scan(&silent);
    assert!(
        silent.iter().any(|s| s.contains("sessions_silent")),
        "{silent:#?}"
    );
    let stale = plan(&store, WATCHING_WITH_STALE_MEMBER, &[]);
    no_scan(&stale);
    assert!(
        stale.iter().any(|s| s.contains("sessions_stale")),
        "{stale:#?}"
    );
    // From the stale sessions out, never from every watching policy in.
    assert!(
        !stale.iter().any(|s| s.contains("policies_status")),
        "{stale:#?}"
    );
    let due = plan(&store, PAST_DEADLINE, &[&0i64]);
    no_scan(&due);
    assert!(
        due.iter().any(|s| s.contains("policies_deadline")),
        "{due:#?}"
    );
}

#[test]
fn the_sweep_reads_only_the_policies_a_task_drives_by_its_index() {
    let Some((store, _db)) =
        fresh_pg("the_sweep_reads_only_the_policies_a_task_drives_by_its_index")
    else {
        return;
    };
    store
        .write(|tx| {
            for i in 0..50 {
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
        .expect("fill");
    let ids = |queued| -> Vec<String> {
        let list = store.policies_to_sweep(queued).expect("sweep");
        list.into_iter().map(|p| p.id).collect()
    };
    assert_eq!(
        ids(true),
        ["gating", "queued", "nudging", "committing", "reviewing"]
    );
    assert_eq!(ids(false), ["gating", "nudging", "committing", "reviewing"]);
    let sweep = plan(&store, TO_SWEEP, &[&true]);
    no_scan(&sweep);
    assert!(
        sweep.iter().any(|s| s.contains("policies_working")),
        "{sweep:#?}"
    );
    assert!(
        !sweep.iter().any(|s| s.contains("policies_status")),
        "{sweep:#?}"
    );
}

#[test]
fn the_webhook_lookup_of_every_event_searches_by_index() {
    let Some((store, _db)) = fresh_pg("the_webhook_lookup_of_every_event_searches_by_index") else {
        return;
    };
    let webhooks: Vec<String> = vec!["http://127.0.0.1:9/hook".into()];
    let p = plan(
        &store,
        APPEND_EVENT,
        &[
            &0i64,
            &"policy:passed",
            &Some("s1"),
            &Some("p1"),
            &"{}",
            &webhooks,
        ],
    );
    // The counter is one row, read whole; the sessions and the members
    // are searched by index.
    for table in ["sessions", "policy_members"] {
        assert!(
            !p.iter()
                .any(|s| s.contains("Seq Scan") && s.contains(&format!(" on {table}"))),
            "{table} scanned: {p:#?}"
        );
    }
    assert!(p.iter().any(|s| s.contains("sessions_pkey")), "{p:#?}");
    assert!(
        p.iter()
            .any(|s| s.contains("Index") && s.contains("policy_members")),
        "{p:#?}"
    );
}
