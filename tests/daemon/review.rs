//! What a person reviews before an ack, through a real daemon: the exact
//! patch (`GET /v1/policies/{id}/diff`, `policy diff`, `policy show`),
//! approvals bound to the reviewed tree, and the bus as server-sent events.

use crate::common;
use crate::common::shorthand::{assert_has, str_of};

use common::Scratch;
use common::daemon::{Daemon, with_s1, without_context};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

fn git(ws: &Path, args: &[&str]) -> String {
    common::daemon::git_as_tester(ws, args)
}

/// A workspace with an added, a modified, a deleted and a renamed file
/// under the commit paths (and a change outside them), gated green.
fn awaiting(s: &Scratch, d: &Daemon) -> (String, String) {
    s.write_ws("src/lib.rs", "fn a() {}\nfn b() {}\nfn c() {}\n");
    s.write_ws("gone.txt", "bye\n");
    s.write_ws("old.txt", "moved as is\n");
    git(&s.ws, &["add", "-A"]);
    git(&s.ws, &["commit", "-q", "-m", "more"]);
    s.write_ws("src/lib.rs", "fn a() {}\nfn x() {}\nfn c() {}\n");
    std::fs::remove_file(s.ws.join("gone.txt")).expect("rm");
    std::fs::rename(s.ws.join("old.txt"), s.ws.join("new.txt")).expect("mv");
    s.write_ws("src/added.rs", "pub fn n() {}\n");
    s.write_ws("README", "not a commit path\n");
    let pid = d.attach(json!({
        "sessionId": "s1",
        "gate": {"command": "true"},
        "then": "commit",
        "commit": {"paths": ["src", "gone.txt", "old.txt", "new.txt"], "message": "reviewed"}
    }));
    d.report("s1", "turn-end");
    let p = d.wait_status(&pid, "awaiting-ack", T);
    let tree = common::daemon::snapshot_tree(&p);
    (pid, tree)
}

#[test]
fn the_diff_route_and_cli_show_exactly_what_git_diff_prints_for_the_snapshot() {
    let (s, d) = with_s1();
    let (pid, tree) = awaiting(&s, &d);
    let (code, body) = d.get(&format!("/v1/policies/{pid}/diff"), &d.agent);
    assert_eq!(code, 200, "{body}");
    let patch = body["patch"].as_str().expect("patch");
    let want = git(&s.ws, &["diff", "--full-index", "HEAD", &tree]);
    assert_eq!(without_context(patch), without_context(&want));
    let kinds: Vec<(String, String)> = body["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap_or("").into(),
                f["kind"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    let kinds: Vec<(&str, &str)> = kinds
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("gone.txt", "deleted"),
            ("new.txt", "renamed"),
            ("src/added.rs", "added"),
            ("src/lib.rs", "modified"),
        ]
    );
    assert_eq!(body["tree"], json!(tree));
    assert_eq!(body["nextFrom"], Value::Null);
    assert!(
        !patch.contains("README"),
        "outside the commit paths: {patch}"
    );
    // The CLI prints the same patch, and its stat.
    let run = d.cli_ok(&["policy", "diff", &pid], &d.agent);
    assert_eq!(run.stdout, patch);
    let run = d.cli_ok(&["policy", "diff", &pid, "--stat"], &d.agent);
    assert_has(&run.stdout, " src/lib.rs | modified +1 −1");
    assert_has(&run.stdout, " old.txt => new.txt | renamed +0 −0");
    assert!(
        run.stdout.contains(" 4 files changed, +2 −2"),
        "{}",
        run.stdout
    );
    let run = d.cli_ok(&["policy", "show", &pid], &d.agent);
    for want in [
        "awaiting-ack",
        "gate: {\"command\":\"true\"}",
        "then: commit",
        "commit paths: src, gone.txt, old.txt, new.txt",
        "retries: 0 of 2 used",
        "next: none",
        &format!("snapshot tree: {tree}"),
        "#1 pass",
        " src/added.rs | added +1 −0",
    ] {
        assert!(run.stdout.contains(want), "{want:?} in:\n{}", run.stdout);
    }
}

#[test]
fn an_approval_for_another_tree_is_refused_and_one_for_the_snapshot_commits_it() {
    let (s, d) = with_s1();
    let (pid, tree) = awaiting(&s, &d);
    let head = git(&s.ws, &["rev-parse", "HEAD"]);
    let other = "0123456789abcdef0123456789abcdef01234567";
    let (code, body) = d.post(
        &format!("/v1/policies/{pid}/ack"),
        &d.operator,
        Some(json!({"approve": true, "tree": other})),
    );
    assert_eq!(code, 409, "{body}");
    assert_eq!(body["error"]["code"], "tree-changed");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("the change was updated, review it again"),
        "{body}"
    );
    let run = d.cli(
        &["policy", "ack", &pid, "--approve", "--tree", other],
        &d.operator,
    );
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert_has(&run.stderr, "review it again");
    assert_eq!(d.policy(&pid)["status"], "awaiting-ack");
    assert_eq!(
        git(&s.ws, &["rev-parse", "HEAD"]),
        head,
        "nothing committed"
    );
    assert!(!d.policy_events(&pid).iter().any(|e| e == "policy:approved"));
    // The tree reviewed: committed, exactly that tree.
    d.cli_ok(
        &["policy", "ack", &pid, "--approve", "--tree", &tree],
        &d.operator,
    );
    let p = d.wait_status(&pid, "done", T);
    let sha = p["commitSha"].as_str().expect("sha");
    assert_eq!(
        git(&s.ws, &["rev-parse", &format!("{sha}^{{tree}}")]).trim(),
        tree
    );
    // Once committed, the diff is the commit's against its parent.
    let (code, body) = d.get(&format!("/v1/policies/{pid}/diff"), &d.agent);
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["commit"], json!(sha));
    let want = git(&s.ws, &["diff", "--full-index", &format!("{sha}^"), sha]);
    assert_eq!(
        without_context(body["patch"].as_str().unwrap_or("")),
        without_context(&want)
    );
}

#[test]
fn the_diff_route_holds_against_hostile_ids_early_policies_and_huge_diffs() {
    let (s, d) = with_s1();
    for id in ["..", "..%2F..%2Fetc", "%2E%2E", "a%00b"] {
        let (code, body) = d.get(&format!("/v1/policies/{id}/diff"), &d.agent);
        assert_eq!(code, 404, "{id}: {body}");
    }
    // Watching: no snapshot yet.
    let watching = d.attach(json!({
        "sessionId": "s1", "gate": {"command": "true"}, "then": "commit",
        "commit": {"paths": ["big"], "message": "m"}, "watchFrom": "now"
    }));
    let (code, body) = d.get(&format!("/v1/policies/{watching}/diff"), &d.agent);
    assert_eq!(code, 409, "{body}");
    assert_eq!(body["error"]["code"], "no-diff");
    d.post(
        &format!("/v1/policies/{watching}/cancel"),
        &d.operator,
        None,
    );
    // 4 MiB of changed lines and a second file: bounded pages.
    let big: String = (0..400_000).map(|i| format!("line {i}\n")).collect();
    s.write_ws("big/a.txt", &big);
    s.write_ws("big/b.txt", "small\n");
    let pid = d.attach(json!({
        "sessionId": "s1", "gate": {"command": "true"}, "then": "commit",
        "commit": {"paths": ["big"], "message": "m"}
    }));
    d.report("s1", "turn-end");
    d.wait_status(&pid, "awaiting-ack", T);
    let (code, body) = d.get(&format!("/v1/policies/{pid}/diff"), &d.agent);
    assert_eq!(code, 200, "{body}");
    assert!(body["patch"].as_str().unwrap_or("").len() <= 1024 * 1024);
    assert_eq!(body["files"][0]["cut"], json!(true));
    assert_eq!(body["files"][0]["added"], json!(400_000));
    assert_has(str_of(&body["note"]), "headers");
    assert_eq!(body["nextFrom"], json!(1));
    assert_eq!(body["totalFiles"], json!(2));
    let (code, next) = d.get(&format!("/v1/policies/{pid}/diff?from=1"), &d.agent);
    assert_eq!(code, 200, "{next}");
    assert_has(str_of(&next["patch"]), "+small\n");
    let (code, _) = d.get(&format!("/v1/policies/{pid}/diff?from=-1"), &d.agent);
    assert_eq!(code, 400);
    // The daemon still answers.
    assert_eq!(d.http("GET", "/v1/health", None, None).0, 200);
}

/// An open `GET /v1/events/stream`, read line by line.
struct Stream {
    reader: std::io::BufReader<std::net::TcpStream>,
}

impl Stream {
    fn open(d: &Daemon, query: &str, last_id: Option<i64>) -> Stream {
        use std::io::{BufRead, Write};
        let addr = d.url.trim_start_matches("http://").trim_end_matches('/');
        let mut tcp = std::net::TcpStream::connect(addr).expect("connect");
        tcp.set_read_timeout(Some(T)).expect("timeout");
        let resume = last_id
            .map(|c| format!("Last-Event-ID: {c}\r\n"))
            .unwrap_or_default();
        write!(
            tcp,
            "GET /v1/events/stream?{query} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nAccept: text/event-stream\r\n{resume}\r\n",
            d.operator
        )
        .expect("request");
        let mut reader = std::io::BufReader::new(tcp);
        let mut status = String::new();
        reader.read_line(&mut status).expect("status");
        assert_has(&status, " 200 ");
        // The headers: once they are read, the stream's start is fixed.
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).expect("header");
            if line.trim().is_empty() {
                break;
            }
        }
        Stream { reader }
    }

    /// The next event: its id, type and data (within `T`: keep-alive
    /// comments do not extend the wait).
    fn next(&mut self) -> (i64, String, Value) {
        use std::io::BufRead;
        let start = std::time::Instant::now();
        let (mut id, mut kind, mut data) = (None, None, None);
        loop {
            assert!(start.elapsed() < T, "no event within {T:?}");
            let mut line = String::new();
            let n = self.reader.read_line(&mut line).expect("read");
            assert!(n > 0, "the stream ended");
            let line = line.trim_end();
            // Chunked transfer: size lines and blank lines come between.
            if let Some(v) = line.strip_prefix("id: ") {
                id = v.parse().ok();
            } else if let Some(v) = line.strip_prefix("event: ") {
                kind = Some(v.to_string());
            } else if let Some(v) = line.strip_prefix("data: ") {
                data = serde_json::from_str(v).ok();
            } else if line.is_empty()
                && let (Some(i), Some(k), Some(v)) = (id, kind.clone(), data.clone())
            {
                return (i, k, v);
            }
        }
    }
}

#[test]
fn the_event_stream_delivers_new_events_and_resumes_from_last_event_id_without_loss_or_repeat() {
    let (_s, d) = with_s1();
    let spec = || json!({"sessionId": "s1", "gate": {"command": "true"}, "watchFrom": "now"});
    let mut live = Stream::open(&d, "types=attached", None);
    // Stored after the connection opened: delivered.
    let a = d.attach(spec());
    let (id_a, kind, data) = live.next();
    assert_eq!(kind, "policy:attached");
    assert_eq!(data["policyId"], json!(a));
    assert_eq!(data["cursor"], json!(id_a));
    drop(live);
    // Two more while disconnected, then a resume from the last id seen.
    let b = d.attach(spec());
    let c = d.attach(spec());
    let mut again = Stream::open(&d, "types=attached", Some(id_a));
    let (id_b, _, data_b) = again.next();
    let (id_c, _, data_c) = again.next();
    assert_eq!(
        (data_b["policyId"].clone(), data_c["policyId"].clone()),
        (json!(b), json!(c)),
        "neither lost nor repeated"
    );
    assert!(id_a < id_b && id_b < id_c);
    // A filter holds: another policy's events are not sent.
    let mut only_c = Stream::open(&d, &format!("policy={c}"), Some(0));
    let (_, kind, data) = only_c.next();
    assert_eq!(
        (kind.as_str(), data["policyId"].clone()),
        ("policy:attached", json!(c))
    );
    // A bad filter is refused before anything streams.
    let (code, body) = d.get("/v1/events/stream?types=nope", &d.agent);
    assert_eq!(code, 400, "{body}");
    // Coalesced (what the page asks for): a burst of events arrives whole,
    // in order, none lost or repeated; a wait past 1 s is refused.
    let mut burst = Stream::open(&d, "types=attached&coalesce=200", None);
    let ids: Vec<String> = (0..5).map(|_| d.attach(spec())).collect();
    let got: Vec<Value> = (0..5).map(|_| burst.next().2["policyId"].clone()).collect();
    assert_eq!(got, ids.iter().map(|i| json!(i)).collect::<Vec<_>>());
    let (code, body) = d.get("/v1/events/stream?coalesce=5000", &d.agent);
    assert_eq!(code, 400, "{body}");
    assert_has(&body.to_string(), "coalesce");
}

/// `policy request-changes` from the CLI: comments as PATH:LINE:TEXT (and
/// `--on-old` for a removed line) reach the agent as its nudge with file
/// and line, the policy watches again; the agent's token, a stale
/// `--tree` and a comment that is not PATH:LINE:TEXT are refused,
/// changing nothing.
#[test]
fn request_changes_from_the_cli_sends_file_and_line_and_the_policy_watches_again() {
    let (s, d) = with_s1();
    let (pid, tree) = awaiting(&s, &d);
    let ask = |extra: &[&str], token: &str| {
        let mut args = vec!["policy", "request-changes", pid.as_str()];
        args.extend_from_slice(extra);
        d.cli(&args, token)
    };
    let bad = ask(&["--comment", "src/lib.rs:zero:no line"], &d.operator);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(bad.stderr.contains("PATH:LINE:TEXT"), "{bad:?}");
    let agent = ask(&["--comment", "src/lib.rs:2:Keep b."], &d.agent);
    assert_ne!(agent.code, 0, "{agent:?}");
    let zeros = "0".repeat(40);
    let stale = ask(
        &["--comment", "src/lib.rs:2:Keep b.", "--tree", &zeros],
        &d.operator,
    );
    assert_ne!(stale.code, 0, "{stale:?}");
    assert!(stale.stderr.contains("tree"), "{stale:?}");
    assert_eq!(d.policy(&pid)["status"], "awaiting-ack");

    let ok = ask(
        &[
            "--comment",
            "src/lib.rs:2: Keep b: it is used.",
            "--on-old",
            "gone.txt:1:Why was this removed?",
            "--tree",
            &tree,
        ],
        &d.operator,
    );
    assert_eq!(ok.code, 0, "{ok:?}");
    assert_eq!(d.policy(&pid)["status"], "watching");
    let nudges = d.all_events(&format!("&policy={pid}&types=nudge"));
    assert_eq!(nudges.len(), 1, "{nudges:?}");
    let message = nudges[0]["payload"]["message"].as_str().expect("message");
    assert!(
        message.contains("- src/lib.rs:2\n  > Keep b: it is used.")
            && message.contains("gone.txt:1")
            && message.contains("Why was this removed?"),
        "{message}"
    );
    let c = &nudges[0]["payload"]["comments"];
    assert_eq!(c[1]["side"], "old", "{c}");
}
