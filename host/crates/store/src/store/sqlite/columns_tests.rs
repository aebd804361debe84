//! A row's columns written and read back: the bookkeeping writes that
//! store only their own columns, a policy's kept nudge, and an event read
//! typed once and published as stored.

use super::*;
use serde_json::json;

/// The bookkeeping writes (`record_next`, `record_prepared`,
/// `record_publishes`) store their own columns and never a status: a
/// status changed in memory is not written by them (only the engine's
/// transition writes a policy whole).
#[test]
fn bookkeeping_writes_store_their_columns_and_never_a_status() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(dir.path()).expect("open");
    store
        .write(|tx| tx.insert_policy(&mut PolicyRow::sample("p", PolicyStatus::Gating, &["s"])))
        .expect("insert");
    let mut p = store.policy("p").expect("read").expect("stored");
    p.status = PolicyStatus::Done;
    p.reason = Some("not to be stored".into());
    p.next_id = Some("child".into());
    let prepared = crate::commit::Prepared {
        commit: Some("abc".into()),
        parent: None,
        reference: "refs/heads/main".into(),
        nothing_to_commit: false,
        paths: vec!["a".into()],
    };
    p.prepared = Some(prepared.clone());
    p.publish_open = vec![7, 9];
    store
        .write(|tx| {
            tx.record_next(&p)?;
            tx.record_prepared(&p)?;
            tx.record_publishes(&p)
        })
        .expect("record");
    let stored = store.policy("p").expect("read").expect("stored");
    assert_eq!(stored.status, PolicyStatus::Gating);
    assert_eq!(stored.reason, None);
    assert_eq!(stored.next_id.as_deref(), Some("child"));
    assert_eq!(stored.prepared, Some(prepared));
    assert_eq!(stored.publish_open, [7, 9]);
    // A row that did not decode is never written back by them.
    let mut damaged = stored.clone();
    damaged.damage = Some(crate::store::RowDamage {
        column: "spec".into(),
        message: "test".into(),
    });
    let refused = store.write(|tx| tx.record_publishes(&damaged));
    assert!(
        matches!(refused, Err(StoreError::Damaged { .. })),
        "{refused:?}"
    );
}

#[test]
fn an_event_is_read_typed_once_and_published_as_it_was_stored() {
    use crate::model::event::{Event, PolicyChange};
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(dir.path()).expect("open");
    let payload = json!({"policyId": "p1", "status": "watching", "sessionIds": ["s1"],
                         "pending": ["s1"]});
    let novel = json!({"anything": [1, 2]});
    store
        .write(|tx| {
            tx.append_event(
                &Event::decode("policy:watching", payload.clone()),
                Some("s1"),
                Some("p1"),
                &[],
            )?;
            tx.append_event(
                &Event::decode("policy:teleported", novel.clone()),
                None,
                None,
                &[],
            )
        })
        .expect("write");
    let read = store
        .events(&EventFilter {
            limit: 10,
            ..Default::default()
        })
        .expect("read");
    assert!(matches!(
        &read[0].event,
        Event::Policy(e) if matches!(&e.change, PolicyChange::Watching(w) if w.pending == ["s1"])
    ));
    assert!(matches!(&read[1].event, Event::Unknown { kind, .. } if kind == "policy:teleported"));
    // The wire (`/v1/events`, SSE, webhooks): the stored kind and payload.
    let wire = serde_json::to_value(&read).expect("serialises");
    assert_eq!(wire[0]["type"], "policy:watching");
    assert_eq!(wire[0]["payload"], payload);
    assert_eq!(wire[0]["sessionId"], "s1");
    assert_eq!(wire[1]["payload"], novel);
    assert_eq!(wire[0].as_object().map(|o| o.len()), Some(6), "{wire}");
    // The client reads it back equal.
    let back: Vec<EventRow> = serde_json::from_value(wire).expect("deserialises");
    assert_eq!(back, read);
}

/// A failed gate's nudge is kept with the row (written whole, read back),
/// and never shown to a client: the event carries it.
#[test]
fn a_policys_nudge_is_stored_and_read_back_but_not_served() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(dir.path()).expect("open");
    let mut p = PolicyRow::sample("p", PolicyStatus::Gating, &["s"]);
    p.nudge = Some("fix the tests".into());
    store.write(|tx| tx.insert_policy(&mut p)).expect("insert");
    let read = store.policy("p").expect("read").expect("stored");
    assert_eq!(read.nudge.as_deref(), Some("fix the tests"));
    let mut again = read.clone();
    again.nudge = Some("fix the lints".into());
    store.write(|tx| tx.put_policy(&again)).expect("put");
    let read = store.policy("p").expect("read").expect("stored");
    assert_eq!(read.nudge.as_deref(), Some("fix the lints"));
    let shown = serde_json::to_value(&read).expect("serialises");
    assert!(shown.get("nudge").is_none(), "{shown}");
}
