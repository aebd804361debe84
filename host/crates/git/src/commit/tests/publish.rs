//! Publishing a prepared commit: idempotent, never over a ref someone
//! else moved, and clearing only the locks our own previous life left.

use super::*;

#[test]
fn only_locks_made_while_our_previous_life_published_are_cleared() {
    use std::time::{Duration, SystemTime};
    let t = repo();
    let ws = t.path();
    write(ws, "a.txt", "a2\n");
    let p = paths(&["a.txt"]);
    let fp = fingerprint(ws, &p).unwrap();
    let prepared = prepare(ws, &p, "a2", &fp).unwrap();
    let ours = prepared.commit.clone().unwrap();
    let lock = ws.join(".git/refs/heads/main.lock");
    let index_lock = ws.join(".git/index.lock");
    let age = |path: &Path, ago: u64| {
        let f = std::fs::File::options().write(true).open(path).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(ago))
            .unwrap();
    };
    // The previous life published from 1 h ago for a minute.
    let start = SystemTime::now() - Duration::from_secs(3600);
    let span = start..=start + Duration::from_secs(60);
    // Older than this daemon but made before that span (a person's git,
    // still alive): kept, and publishing fails.
    std::fs::write(&lock, "").unwrap();
    std::fs::write(&index_lock, "DIRC").unwrap();
    age(&lock, 7200);
    age(&index_lock, 7200);
    assert!(
        clear_stale_locks(ws, &prepared, std::slice::from_ref(&span))
            .unwrap()
            .is_empty()
    );
    assert!(lock.exists() && index_lock.exists());
    publish(ws, &prepared).expect_err("the branch is locked");
    // In the span but naming another value: someone else's, kept.
    std::fs::write(&lock, "0123456789012345678901234567890123456789\n").unwrap();
    age(&lock, 3590);
    assert!(
        clear_stale_locks(ws, &prepared, std::slice::from_ref(&span))
            .unwrap()
            .is_empty()
    );
    // In the span, empty or naming our commit: ours, removed (the index
    // lock too); the publish goes through.
    std::fs::write(&lock, format!("{ours}\n")).unwrap();
    age(&lock, 3590);
    age(&index_lock, 3590);
    // Two lives died publishing: a lock made in either span is theirs.
    let later = start + Duration::from_secs(600);
    let removed = clear_stale_locks(ws, &prepared, &[later..=later, span]).unwrap();
    assert_eq!(
        removed,
        vec![
            ".git/refs/heads/main.lock".to_string(),
            ".git/index.lock".to_string()
        ]
    );
    publish(ws, &prepared).unwrap();
    assert_eq!(Some(head(ws)), prepared.commit);
}

#[test]
fn publish_is_idempotent_and_detects_moved_ref() {
    let t = repo();
    let ws = t.path();
    write(ws, "a.txt", "a2\n");
    let p = paths(&["a.txt"]);
    let fp = fingerprint(ws, &p).unwrap();
    let prepared = prepare(ws, &p, "a2", &fp).unwrap();
    // Prepare moved nothing.
    assert_eq!(Some(head(ws)), prepared.parent);
    assert_eq!(ref_state(ws, &prepared).unwrap(), RefState::AtParent);
    // Survives a round trip through storage.
    let stored = serde_json::to_string(&prepared).unwrap();
    let restored: Prepared = serde_json::from_str(&stored).unwrap();
    assert_eq!(restored, prepared);
    publish(ws, &restored).unwrap();
    let id = prepared.commit.clone().unwrap();
    assert_eq!(head(ws), id);
    assert_eq!(ref_state(ws, &prepared).unwrap(), RefState::AtCommit);
    publish(ws, &prepared).unwrap();
    assert_eq!(head(ws), id);
    // Another commit on top.
    write(ws, "b.txt", "b2\n");
    git(ws, &["commit", "-q", "-am", "on top"]);
    assert_eq!(ref_state(ws, &prepared).unwrap(), RefState::Descends);
    publish(ws, &prepared).expect_err("branch moved on");
    // Reset elsewhere: to a commit that does not contain ours.
    git(
        ws,
        &[
            "checkout",
            "-q",
            "-b",
            "side",
            prepared.parent.as_deref().unwrap(),
        ],
    );
    git(ws, &["commit", "-q", "--allow-empty", "-m", "side"]);
    let side = head(ws);
    git(ws, &["update-ref", "refs/heads/main", &side]);
    assert_eq!(ref_state(ws, &prepared).unwrap(), RefState::Moved);
}

#[test]
fn publish_after_someone_else_moved_the_ref() {
    let t = repo();
    let ws = t.path();
    write(ws, "a.txt", "a2\n");
    let p = paths(&["a.txt"]);
    let fp = fingerprint(ws, &p).unwrap();
    let prepared = prepare(ws, &p, "a2", &fp).unwrap();
    write(ws, "b.txt", "b2\n");
    git(ws, &["commit", "-q", "-m", "concurrent", "b.txt"]);
    let theirs = head(ws);
    match publish(ws, &prepared) {
        Err(CommitError::RefMoved {
            reference,
            expected,
            actual,
        }) => {
            assert_eq!(reference, "refs/heads/main");
            assert_eq!(expected, prepared.parent);
            assert_eq!(actual.as_deref(), Some(theirs.as_str()));
        }
        other => panic!("expected RefMoved, got {other:?}"),
    }
    assert_eq!(head(ws), theirs);
    assert_eq!(ref_state(ws, &prepared).unwrap(), RefState::Moved);
}
