//! The whole page in a real headless Chromium (tests/support/browser/page_flow.py,
//! Playwright for Python): reviews, approvals, rejects, requested changes,
//! live pages and a phone's viewport.

use crate::common;
use crate::common::shorthand::{assert_has, str_of};

use super::T;
use common::browser::{browser_python, kill_past, shots_dir, spawn_script};
use common::daemon::{git_commit_all, git_out, with_s1, without_context};
use common::{assert_no_env_survivors, marker};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::Duration;

#[test]
fn the_page_in_a_real_browser_reviews_approves_rejects_requests_changes_and_pages_live_and_on_a_phone()
 {
    // Before anything starts: fails at once where the browser is missing.
    browser_python();
    let (s, d) = with_s1();
    // A file to change (a removed and an added line) and one to add.
    s.write_ws("src/lib.rs", "pub fn answer() -> u32 {\n    41\n}\n");
    git_commit_all(&s.ws, "lib");
    let head = git_out(&s.ws, &["rev-parse", "HEAD"]);
    s.write_ws(
        "src/lib.rs",
        "pub fn answer() -> u32 {\n    42\n}\n\npub fn more() {}\n",
    );
    s.write_ws("docs/notes.md", "a note the operator rejects\n");
    let commit = |paths: &[&str], message: &str| {
        d.attach(json!({
            "sessionId": "s1",
            "gate": {"command": "true"},
            "then": "commit",
            "commit": {"paths": paths, "message": message}
        }))
    };
    // Its second gate passes with a warning at src/lib.rs:2 (the page links
    // the finding to that line of the diff).
    let approve = d.attach(json!({
        "sessionId": "s1",
        "gate": [{"command": "true"},
                 {"wasm": {"plugin": "forbid-patterns", "config": {"failOn": "error", "rules": [
                     {"id": "magic", "pattern": "42", "severity": "warning",
                      "message": "a magic number"}]}}}],
        "then": "commit",
        "commit": {"paths": ["src"], "message": "the answer is 42"}
    }));
    let reject = commit(&["docs"], "a note");
    s.write_ws("notes/todo.md", "first line\n");
    let changes = commit(&["notes"], "a todo");
    // More files than the page shows at once (100).
    for i in 0..101 {
        s.write_ws(&format!("many/f{i:03}.txt"), &format!("file {i}\n"));
    }
    let many = commit(&["many"], "many files");
    let comment = "Not in docs/: put it in the README.\nAnd say why.";

    let m = marker("browser");
    let profile = s.etc.join(format!("gatehost-test-{m}-profile"));
    let shots = shots_dir();
    let (shots_arg, profile) = (common::arg(&shots), common::arg(&profile));
    let args = [
        d.url.trim_end_matches('/'),
        &d.operator,
        &d.agent,
        &shots_arg,
        &profile,
    ];
    let mut args = args.to_vec();
    args.extend([approve.as_str(), &reject, comment, &changes, &many]);
    let marked = format!("gatehost-test-{m}");
    let log_file = s.etc.join("browser.log");
    let mut child = spawn_script("page_flow.py", &args, &marked, &log_file, Stdio::piped());
    // A bound on the whole script: killed (and said) past it.
    let (done, watchdog) = kill_past(child.id(), Duration::from_secs(240));
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read");
    let log = || std::fs::read_to_string(s.etc.join("browser.log")).unwrap_or_default();
    assert_eq!(
        line.trim(),
        "ready",
        "the script did not log in: {line}\n{}",
        log()
    );

    // The agent ends its turn: both policies gate and turn awaiting-ack
    // while the page is open.
    d.report("s1", "turn-end");
    d.wait_status(&approve, "awaiting-ack", T);
    d.wait_status(&reject, "awaiting-ack", T);
    d.wait_status(&changes, "awaiting-ack", T);
    d.wait_status(&many, "awaiting-ack", T);
    // After the snapshot: the commit will not hold this change.
    s.write_ws(
        "docs/notes.md",
        "a note the operator rejects, edited later\n",
    );
    writeln!(stdin, "go").expect("go");
    line.clear();
    out.read_line(&mut line).expect("read");
    let status = child.wait().expect("wait");
    let _ = done.send(());
    let killed = watchdog.join().expect("watchdog");
    assert!(!killed, "the browser script ran past 240 s\n{}", log());
    let seen: Value = serde_json::from_str(line.trim())
        .unwrap_or_else(|e| panic!("the script's answer {line:?}: {e}\n{}", log()));
    assert!(
        status.success() && seen.get("error").is_none(),
        "{status}: {seen:#}\n{}",
        log()
    );

    // The agent token could not log in.
    assert_eq!(seen["agentStayedOnLogin"], true, "{seen:#}");
    assert_has(str_of(&seen["agentError"]), "agent token");
    // Live: they appeared in the inbox with no reload, and so did the
    // session's new state and last message.
    assert_eq!(seen["appearedLive"], true, "{seen:#}");
    let session = seen["session"].as_str().unwrap_or_default();
    assert!(
        session.contains("idle") && session.contains("turn-end from s1"),
        "{seen:#}"
    );
    // The diff's lines, as the page showed them.
    assert_eq!(
        seen["added"],
        json!(["+    42", "+", "+pub fn more() {}"]),
        "{seen:#}"
    );
    assert_eq!(seen["removed"], json!(["-    41"]), "{seen:#}");
    // Coloured as Rust, the text unchanged (`added` is the lines' text).
    assert_eq!(seen["keywords"], json!(["pub", "fn"]), "{seen:#}");
    assert_eq!(seen["numbers"], json!(["42"]), "{seen:#}");
    // The split view pairs the removed line with the added one, context on
    // both sides, an added line alone on the right.
    assert_eq!(
        seen["splitPairs"],
        json!([
            [" pub fn answer() -> u32 {", " pub fn answer() -> u32 {"],
            ["-    41", "+    42"],
            [" }", " }"],
            ["", "+"],
            ["", "+pub fn more() {}"]
        ]),
        "{seen:#}"
    );
    // The gate runs: one, passed, with the warning a button that showed
    // (and focused) the diff's new line 2 of src/lib.rs.
    let runs = seen["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "{seen:#}");
    let run = runs[0].as_str().unwrap_or_default();
    assert!(
        run.starts_with("run 1: pass")
            && run.contains("forbid-patterns")
            && run.contains("src/lib.rs:2")
            && run.contains("a magic number"),
        "{seen:#}"
    );
    assert_eq!(
        seen["findingTarget"],
        json!({"path": "src/lib.rs", "line": "2", "side": "new", "text": "+    42", "focused": true}),
        "{seen:#}"
    );
    // The timeline: the policy's events, in order, up to commit-ready.
    let timeline: Vec<&str> = seen["timeline"]
        .as_array()
        .expect("timeline")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let at = |t: &str| timeline.iter().position(|x| *x == t);
    assert!(
        at("policy:attached") < at("policy:gating")
            && at("policy:gating") < at("policy:passed")
            && at("policy:passed") < at("policy:commit-ready")
            && at("policy:attached").is_some(),
        "{timeline:?}"
    );
    // Approved: done, and the commit in git holds exactly the diff shown.
    assert_eq!(seen["approvedStatus"], "done", "{seen:#}");
    assert_eq!(seen["sameDocumentAfterApprove"], true, "{seen:#}");
    let p = d.policy(&approve);
    assert_eq!(p["status"], "done");
    let sha = p["commitSha"].as_str().expect("commitSha").to_string();
    assert_eq!(git_out(&s.ws, &["rev-parse", "HEAD"]).trim(), sha);
    assert_eq!(git_out(&s.ws, &["rev-parse", "HEAD~1"]), head);
    let committed = git_out(&s.ws, &["diff", "--full-index", "HEAD~1", "HEAD"]);
    // The hunks shown (drawn from the daemon's structure, not its text)
    // are git's, from the first `@@` on; the file's header is the page's.
    let hunks = &committed[committed.find("\n@@").expect("a hunk") + 1..];
    let shown = seen["diff"].as_str().expect("diff");
    assert_eq!(without_context(shown), without_context(hunks.trim_end()));
    assert_eq!(
        seen["fileHeaders"],
        json!(["src/lib.rs  (modified, +3 \u{2212}1)"]),
        "{seen:#}"
    );
    // Each line's numbers in the gutter: old and new, blank on the side a
    // line is not on.
    assert_eq!(
        seen["gutters"],
        json!([
            "    1     1",
            "    2      ",
            "          2",
            "    3     3",
            "          4",
            "          5"
        ]),
        "{seen:#}"
    );
    // A 390 px screen: approve and reject shown whole, nothing wider.
    for b in ["approve", "reject"] {
        assert_eq!(seen["mobile"][b]["visible"], true, "{b}: {seen:#}");
        assert_eq!(seen["mobile"][b]["inViewport"], true, "{b}: {seen:#}");
    }
    assert!(
        seen["pageWidth"].as_i64().is_some_and(|w| w <= 390),
        "{seen:#}"
    );
    // What changed in the workspace since the reject policy's snapshot.
    assert_eq!(seen["sinceSnapshot"], json!(["docs/notes.md"]), "{seen:#}");
    // Rejected with a comment: the agent's next nudge holds it.
    assert_eq!(seen["rejectedStatus"], "cancelled", "{seen:#}");
    let nudges = d.nudge_messages(&reject);
    let message = nudges.last().map(String::as_str).unwrap_or_default();
    assert!(
        message.contains("> Not in docs/: put it in the README.\n> And say why."),
        "{nudges:?}"
    );
    // While its diff was held back, nothing of the rejected policy's page
    // was on screen: no line of its diff to comment on, no button to act.
    assert_eq!(
        seen["whileLoading"],
        json!({"title": changes, "diffLines": 0, "actionsShown": false}),
        "{seen:#}"
    );
    // Request changes on a line: the agent's nudge names file and line,
    // and the policy watches again.
    assert_eq!(
        seen["commentedOn"],
        json!({"path": "notes/todo.md", "line": "1", "side": "new"}),
        "{seen:#}"
    );
    assert_eq!(seen["changesStatus"], "watching", "{seen:#}");
    assert_eq!(d.policy(&changes)["status"], "watching");
    let nudges = d.nudge_messages(&changes);
    let message = nudges.last().map(String::as_str).unwrap_or_default();
    assert!(
        message.ends_with("\n- notes/todo.md:1\n  > Say what the first step is."),
        "{nudges:?}"
    );
    // A large diff a page at a time: 100 files, then the last one.
    assert_eq!(seen["firstPageFiles"], 100, "{seen:#}");
    assert_eq!(seen["moreShown"], true, "{seen:#}");
    assert_has(str_of(&seen["pageNote"]), "from=100");
    let want: Vec<String> = (0..101).map(|i| format!("many/f{i:03}.txt")).collect();
    assert_eq!(seen["allFiles"], json!(want), "{seen:#}");
    assert_eq!(seen["moreHiddenAtEnd"], true, "{seen:#}");
    // The approved policy's diff, answered late after the operator had
    // left its page, changed nothing of this one's.
    assert_eq!(seen["titleAtEnd"], json!(many), "{seen:#}");
    // The page's cookie reached a dev server on another port of the same
    // host, and replayed alone it read nothing.
    assert_eq!(seen["devServerGotCookie"], true, "{seen:#}");
    assert_eq!(seen["replayedAlone"], 403, "{seen:#}");
    for shot in [
        "inbox.png",
        "policy.png",
        "inbox-390.png",
        "policy-390.png",
        "policy-comment.png",
        "policy-split.png",
    ] {
        let len = std::fs::metadata(shots.join(shot))
            .map(|m| m.len())
            .unwrap_or(0);
        assert!(len > 1000, "screenshot {shot}: {len} bytes");
    }
    // Neither the driver nor any Chromium process is left.
    assert_no_env_survivors(&m);
}
