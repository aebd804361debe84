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
            host: None,
            since: 0,
            types: Vec::new(),
            session_ids: Vec::new(),
            policy_ids: Vec::new(),
            limit: 100,
        })
        .expect("events")
}

/// A typed `session:turn-end` of `s1`.
fn turn_end() -> crate::model::event::Event {
    use crate::model::event::{Event, Report, SessionEvent};
    Event::Session(SessionEvent::TurnEnd(Report {
        session_id: "s1".into(),
        state: "idle".into(),
        turn: 1,
        message: None,
    }))
}

/// A write whose closure refuses (a conflict, not a store error) is
/// rolled back, and its caller gets the refusal itself, not the store's
/// rollback: before, a string sentinel (`"rolled back"`) stood between.
#[test]
fn a_refused_write_keeps_nothing_and_answers_its_own_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = engine(dir.path());
    let got = engine.write(|tx| {
        tx.append_event(&turn_end(), Some("s1"), None, &[])?;
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
    let kept = engine.write(|tx| Ok(tx.append_event(&turn_end(), Some("s1"), None, &[])?));
    assert!(kept.is_ok(), "{kept:?}");
    assert_eq!(all_events(&engine).len(), 1);
}

/// Nothing changes a policy but the machine: the engine writes a policy
/// row whole (or a damaged one's status) only in `Policies::transition`;
/// every other write is a typed store operation that changes no state
/// (`record_next`, `record_prepared`, `record_publishes`).
#[test]
fn only_the_transition_writes_a_policy_row() {
    fn sources(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read engine") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/engine");
    let mut files = Vec::new();
    sources(&dir, &mut files);
    let mut writes = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("read");
        let text = text.split("#[cfg(test)]").next().unwrap_or("");
        for (n, line) in text.lines().enumerate() {
            if line.contains(".put_policy(") || line.contains(".put_damaged_policy(") {
                let rel = f.strip_prefix(&dir).expect("under engine");
                writes.push(format!("{}:{}", rel.display(), n + 1));
            }
        }
    }
    assert_eq!(
        writes.len(),
        2,
        "policy rows written outside the transition: {writes:?}"
    );
    let file = std::fs::read_to_string(dir.join("transition.rs")).expect("read transition.rs");
    let transition = file
        .split("pub(crate) fn transition(")
        .nth(1)
        .and_then(|t| t.split("\n    }\n").next())
        .expect("Policies::transition");
    assert!(
        transition.contains(".put_policy(") && transition.contains(".put_damaged_policy("),
        "the transition no longer writes the row: {writes:?}"
    );
}
