//! The policy page from the keyboard alone (issue 53), in a real headless
//! Chromium (tests/support/browser/keyboard_flow.py): j/k move between the
//! diff's lines, n to the next file, Enter opens a comment on the line
//! reached and Ctrl+Enter sends it (the agent's nudge names that file and
//! line); on another policy, a approves after a confirmation and the
//! commit is made; after each action the focus is on the result.

use crate::common;

use super::T;
use common::daemon::{git_out, with_s1};
use serde_json::json;

#[test]
fn keys_alone_move_through_the_diff_comment_on_a_line_and_approve_after_a_confirmation() {
    let (s, d) = with_s1();
    s.write_ws("src/a.rs", "fn a() {}\nfn b() {}\n");
    s.write_ws("src/b.rs", "fn c() {}\nfn d() {}\nfn e() {}\n");
    s.write_ws("docs/notes.md", "notes\n");
    let attach = |paths: &[&str], message: &str| {
        d.attach(json!({
            "sessionId": "s1",
            "gate": {"command": "true"},
            "then": "commit",
            "commit": {"paths": paths, "message": message}
        }))
    };
    let commented = attach(&["src"], "the code");
    let approved = attach(&["docs"], "the notes");
    d.report("s1", "turn-end");
    d.wait_status(&commented, "awaiting-ack", T);
    d.wait_status(&approved, "awaiting-ack", T);
    let comment_link = super::ui_link(&d, &["--policy", &commented]);
    let approve_link = super::ui_link(&d, &["--policy", &approved]);
    let seen = super::Browser::new(&s, "keyboard")
        .run("keyboard_flow.py", &[&comment_link, &approve_link]);
    let at = |step: &str| {
        (
            seen[step]["path"].as_str().unwrap_or_default().to_string(),
            seen[step]["line"].as_str().unwrap_or_default().to_string(),
        )
    };
    // j: the first line of the diff; j again the next; k back.
    assert_eq!(at("afterJ"), ("src/a.rs".into(), "1".into()), "{seen:#}");
    assert_eq!(at("afterJJ"), ("src/a.rs".into(), "2".into()), "{seen:#}");
    assert_eq!(at("afterJJK"), ("src/a.rs".into(), "1".into()), "{seen:#}");
    // n: the next file's header; j from there its lines.
    assert_eq!(seen["afterN"]["file"], "src/b.rs", "{seen:#}");
    assert_eq!(at("commentOn"), ("src/b.rs".into(), "2".into()), "{seen:#}");
    // Enter: the comment box of that line, focused.
    assert_eq!(seen["afterEnter"]["tag"], "TEXTAREA", "{seen:#}");
    assert_eq!(seen["commentStatus"], "watching", "{seen:#}");
    assert_eq!(seen["afterRequest"]["id"], "p-status", "{seen:#}");
    let nudges = d.all_events(&format!("&policy={commented}&types=nudge"));
    assert_eq!(
        nudges[0]["payload"]["comments"],
        json!([{"path": "src/b.rs", "line": 2, "side": "new", "body": "Said from the keyboard."}]),
        "{nudges:?}"
    );
    // a: approved after the one confirmation, committed.
    assert_eq!(
        seen["dialogs"].as_array().map(Vec::len),
        Some(1),
        "{seen:#}"
    );
    assert!(
        seen["dialogs"][0]
            .as_str()
            .is_some_and(|m| m.contains(&approved)),
        "{seen:#}"
    );
    assert_eq!(seen["approveStatus"], "done", "{seen:#}");
    assert_eq!(seen["afterApprove"]["id"], "p-status", "{seen:#}");
    let p = d.policy(&approved);
    assert_eq!(p["status"], "done");
    let sha = p["commitSha"].as_str().expect("sha");
    assert_eq!(git_out(&s.ws, &["rev-parse", "HEAD"]).trim(), sha);
}
