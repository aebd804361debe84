//! Comments land on the line they were written on (issue 53): the page
//! draws the diff from the daemon's per-file structure, never from the
//! patch text read back, so in a real headless Chromium
//! (tests/support/browser/comment_flow.py) a comment on a line of a file
//! git quotes (`docs/Überblick.md`) and one on the line after an added
//! line reading `++ b/app.py` reach the agent with their own file and
//! line (the page's old parser gave both to `app.py`).

use crate::common;

use super::T;
use common::daemon::{git_commit_all, with_s1};
use serde_json::json;

#[test]
fn comments_on_a_quoted_name_and_after_a_header_like_line_reach_the_agent_at_their_lines() {
    let (s, d) = with_s1();
    s.write_ws("app.py", "print(1)\n");
    s.write_ws("docs/Überblick.md", "# Titel\nalt\n");
    git_commit_all(&s.ws, "the files");
    s.write_ws("app.py", "print(2)\n");
    s.write_ws("docs/Überblick.md", "# Titel\nneu\nmehr\n");
    s.write_ws("notes.md", "intro\n++ b/app.py\nafter\n");
    let pid = d.attach(json!({
        "sessionId": "s1",
        "gate": {"command": "true"},
        "then": "commit",
        "commit": {"paths": ["app.py", "docs", "notes.md"], "message": "notes"}
    }));
    d.report("s1", "turn-end");
    d.wait_status(&pid, "awaiting-ack", T);
    let link = super::ui_link(&d, &["--policy", &pid]);
    let seen =
        super::Browser::new(&s, "comments").run("comment_flow.py", &[&link, "mehr", "after"]);
    // The names as they are, each file once.
    assert_eq!(
        seen["fileHeaders"],
        json!([
            "app.py  (modified, +1 \u{2212}1)",
            "docs/Überblick.md  (modified, +2 \u{2212}1)",
            "notes.md  (added, +3 \u{2212}0)"
        ]),
        "{seen:#}"
    );
    assert_eq!(
        seen["at"],
        json!([
            {"path": "docs/Überblick.md", "line": "3", "side": "new"},
            {"path": "notes.md", "line": "3", "side": "new"}
        ]),
        "{seen:#}"
    );
    assert_eq!(seen["status"], "watching", "{seen:#}");
    // The agent's nudge: each comment at its file and line.
    let nudges = d.all_events(&format!("&policy={pid}&types=nudge"));
    assert_eq!(nudges.len(), 1, "{nudges:?}");
    let comments = &nudges[0]["payload"]["comments"];
    assert_eq!(
        comments,
        &json!([
            {"path": "docs/Überblick.md", "line": 3, "side": "new", "body": "About mehr."},
            {"path": "notes.md", "line": 3, "side": "new", "body": "About after.\n```suggestion\nafter\n```"}
        ]),
        "{nudges:?}"
    );
    let message = nudges[0]["payload"]["message"].as_str().expect("message");
    assert!(
        message.contains("\n- docs/Überblick.md:3\n  > About mehr.")
            && message.contains(
                "\n- notes.md:3\n  > About after.\n  > ```suggestion\n  > after\n  > ```"
            ),
        "{message}"
    );
}
