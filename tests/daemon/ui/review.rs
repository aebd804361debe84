//! Reviews from the page: a reject's comment is the agent's next nudge, and
//! requested changes send file and line to the agent and gate again.

use crate::common;
use crate::common::shorthand::assert_has;

use super::{Page, T, awaiting, awaiting_after};
use common::daemon::{git_out, with_s1};
use serde_json::json;

#[test]
fn a_reject_from_the_page_with_a_comment_is_the_agents_next_nudge() {
    let (s, d) = with_s1();
    let pid = awaiting(&s, &d);
    let head = git_out(&s.ws, &["rev-parse", "HEAD"]);
    let page = Page::login(&d);
    let ack = format!("/v1/policies/{pid}/ack");

    // A comment goes with a reject only: with an approval, refused, and
    // nothing changes.
    let a = page.post(&ack, json!({"approve": true, "comment": "ship it"}));
    assert_eq!(a.status, 400, "{}", a.body);
    assert_has(&a.body, "comment");
    assert_eq!(d.policy(&pid)["status"], "awaiting-ack");

    let comment = "Use the builder, not a literal.\nAnd no unwrap in lib.rs.";
    let a = page.post(&ack, json!({"approve": false, "comment": comment}));
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(d.policy(&pid)["status"], "cancelled");

    // The agent (its own token) reads its next nudge from the bus: the
    // comment, quoted under the host's fixed text.
    let message = d.only_nudge(&pid);
    assert_eq!(
        message,
        format!(
            "The operator rejected the change of policy {pid}: it will not be committed. \
             The operator's comment:\n> Use the builder, not a literal.\n> And no unwrap in lib.rs."
        )
    );
    assert_eq!(
        d.policy_events(&pid)
            .iter()
            .rev()
            .take(3)
            .rev()
            .cloned()
            .collect::<Vec<_>>(),
        ["policy:rejected", "policy:nudge", "policy:cancelled"]
    );
    // Nothing was committed.
    assert_eq!(git_out(&s.ws, &["rev-parse", "HEAD"]), head);
}

#[test]
fn request_changes_sends_file_and_line_to_the_agent_and_the_policy_gates_again() {
    let (s, d) = with_s1();
    let pid = awaiting(&s, &d);
    let tree = d.policy(&pid)["plan"]["snapshot"]["tree"]
        .as_str()
        .expect("tree")
        .to_string();
    let route = format!("/v1/policies/{pid}/request-changes");
    let comments = json!([
        {"path": "src/lib.rs", "line": 1, "side": "new", "body": "Return 43.\nThe answer moved."}
    ]);

    // The agent cannot ask for changes; a stale tree or a bad comment is
    // refused; none changes anything.
    let (code, body) = d.post(
        &route,
        &d.agent,
        Some(json!({"tree": tree, "comments": comments})),
    );
    assert_eq!(code, 403, "{body}");
    let page = Page::login(&d);
    let a = page.post(
        &route,
        json!({"tree": "0".repeat(40), "comments": comments}),
    );
    assert_eq!(a.status, 409, "{}", a.body);
    assert_has(&a.body, "tree-changed");
    let a = page.post(
        &route,
        json!({"tree": tree, "comments": [{"path": "src/lib.rs", "line": 0, "side": "new", "body": "x"}]}),
    );
    assert_eq!(a.status, 400, "{}", a.body);
    assert_has(&a.body, "comments[0].line");
    // Outside the diff (issue 53): a line the diff does not show, the old
    // side of an added file, a file it does not hold; each named.
    for (comment, field, says) in [
        (
            json!({"path": "src/lib.rs", "line": 99, "side": "new", "body": "x"}),
            "comments[1].line",
            "src/lib.rs:99 (new side)",
        ),
        (
            json!({"path": "src/lib.rs", "line": 1, "side": "old", "body": "x"}),
            "comments[1].line",
            "src/lib.rs:1 (old side)",
        ),
        (
            json!({"path": "README.md", "line": 1, "side": "new", "body": "x"}),
            "comments[1].path",
            "not a file of this change's diff",
        ),
    ] {
        let a = page.post(
            &route,
            json!({"tree": tree, "comments": [comments[0].clone(), comment]}),
        );
        assert_eq!(a.status, 400, "{}", a.body);
        assert_has(&a.body, field);
        assert_has(&a.body, says);
    }
    assert_eq!(d.policy(&pid)["status"], "awaiting-ack");
    assert!(d.nudge_messages(&pid).is_empty());

    // From the page: the policy watches again, the agent's nudge names the
    // file and line.
    let a = page.post(&route, json!({"tree": tree, "comments": comments}));
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(d.policy(&pid)["status"], "watching");
    let nudges = d.all_events(&format!("&policy={pid}&types=nudge"));
    assert_eq!(nudges.len(), 1, "{nudges:?}");
    let message = nudges[0]["payload"]["message"].as_str().expect("message");
    assert!(
        message.starts_with(&format!(
            "The operator requested changes to policy {pid} before it is committed."
        )) && message.ends_with("\n- src/lib.rs:1\n  > Return 43.\n  > The answer moved."),
        "{message}"
    );
    assert_eq!(nudges[0]["payload"]["comments"][0]["line"], 1);

    // The agent's next turn gates it again, on a new snapshot.
    s.write_ws("src/lib.rs", "pub fn answer() -> u32 { 43 }\n");
    d.report("s1", "turn-end");
    let p = d.wait_status(&pid, "awaiting-ack", T);
    let again = p["plan"]["snapshot"]["tree"].as_str().expect("tree");
    assert_ne!(again, tree, "gated on the new content");
    // What changed since the tree reviewed: the one line, against that
    // tree (`since`); a value that is no tree id is refused, naming it.
    let (code, since) = d.get(
        &format!("/v1/policies/{pid}/diff?since={tree}"),
        &d.operator,
    );
    assert_eq!(code, 200, "{since}");
    assert_eq!(since["since"], tree.as_str());
    let lines: Vec<&str> = since["files"][0]["hunks"][0]["lines"]
        .as_array()
        .expect("lines")
        .iter()
        .filter_map(|l| l["text"].as_str())
        .collect();
    assert_eq!(
        lines,
        [
            "pub fn answer() -> u32 { 42 }",
            "pub fn answer() -> u32 { 43 }"
        ]
    );
    let (code, body) = d.get(&format!("/v1/policies/{pid}/diff?since=HEAD"), &d.operator);
    assert_eq!(code, 400, "{body}");
    assert_has(&body.to_string(), "since");
    // The old tree's approval is refused: the change was updated.
    let a = page.post(
        &format!("/v1/policies/{pid}/ack"),
        json!({"approve": true, "tree": tree}),
    );
    assert_eq!(a.status, 409, "{}", a.body);
}

#[test]
fn request_changes_with_no_member_alive_is_refused_and_changes_nothing() {
    let (s, d) = with_s1();
    // The agent exits: its last turn gates the policy, and nobody is left
    // to act on comments.
    let pid = awaiting_after(&s, &d, "exited");
    let p = d.policy(&pid);
    let tree = p["plan"]["snapshot"]["tree"].as_str().expect("tree");
    let page = Page::login(&d);
    let a = page.post(
        &format!("/v1/policies/{pid}/request-changes"),
        json!({"tree": tree, "comments": [{"path": "src/lib.rs", "line": 1, "side": "new", "body": "Why 42?"}]}),
    );
    assert_eq!(a.status, 409, "{}", a.body);
    assert_has(&a.body, "no-member-alive");
    let now = d.policy(&pid);
    assert_eq!(now["status"], "awaiting-ack");
    assert_eq!(now["plan"]["snapshot"]["tree"], tree, "the plan is kept");
    assert!(d.nudge_messages(&pid).is_empty());
}
