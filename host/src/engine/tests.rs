//! The engine's own transaction wrapper: a request it refuses keeps
//! nothing and answers its own error.

use super::*;

fn engine(dir: &std::path::Path) -> Engine {
    let store = Store::open(dir).expect("store");
    Engine::new(store, GateRunner::new(crate::config::HostConfig::default())).expect("engine")
}

fn all_events(engine: &Engine) -> Vec<EventRow> {
    engine
        .events(&EventFilter {
            since: 0,
            types: Vec::new(),
            session_ids: Vec::new(),
            policy_ids: Vec::new(),
            limit: 100,
        })
        .expect("events")
}

/// A write whose closure refuses (a conflict, not a store error) is
/// rolled back, and its caller gets the refusal itself, not the store's
/// rollback: before, a string sentinel (`"rolled back"`) stood between.
#[test]
fn a_refused_write_keeps_nothing_and_answers_its_own_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = engine(dir.path());
    let got = engine.write(|tx| {
        tx.append_event("session:turn-end", Some("s1"), None, &json!({}), &[])?;
        Err::<(), _>(EngineError::Conflict {
            code: "settled",
            message: "refused".into(),
        })
    });
    assert!(
        matches!(
            got,
            Err(EngineError::Conflict {
                code: "settled",
                ..
            })
        ),
        "{got:?}"
    );
    assert!(all_events(&engine).is_empty(), "a refused write was kept");
    let kept = engine
        .write(|tx| Ok(tx.append_event("session:turn-end", Some("s1"), None, &json!({}), &[])?));
    assert!(kept.is_ok(), "{kept:?}");
    assert_eq!(all_events(&engine).len(), 1);
}
