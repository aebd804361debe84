//! The web page through a real daemon: the page is served with its
//! security headers, only the operator token logs in, the cookie's flags,
//! the cookie alone reads nothing (a server on another port of localhost
//! receives it), a state-changing call with the cookie needs the CSRF
//! token and the page's own origin (else it changes nothing); a reject's comment reaches
//! the agent; the one-time login link; and the whole page in a real
//! headless Chromium (tests/browser/page_flow.py, Playwright for Python).

use crate::common;

use common::browser::{browser_python, shots_dir};
use common::daemon::{Daemon, git_commit_all, git_out, rt, with_s1, without_context};
use common::{MARKER_ENV, Scratch, assert_no_env_survivors, marker};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: String,
}

impl Answer {
    /// Refused as unauthenticated or forbidden (not, say, a 404 or 422 that
    /// would hide whether the check ran).
    fn refused(&self) -> bool {
        self.status == 401 || self.status == 403
    }
}

fn send(
    method: reqwest::Method,
    url: String,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> Answer {
    rt().block_on(async {
        // Redirects are answers to check, not to follow.
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("client");
        let mut r = client.request(method, url);
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        if let Some(b) = body {
            r = r
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        let a = r.send().await.expect("send");
        let status = a.status().as_u16();
        let headers = a.headers().clone();
        let body = a.text().await.expect("body");
        Answer {
            status,
            headers,
            body,
        }
    })
}

fn login(d: &Daemon, token: &str) -> Answer {
    send(
        reqwest::Method::POST,
        format!("{}/ui/login", d.url),
        &[("origin", d.url.trim_end_matches('/'))],
        Some(json!({"token": token})),
    )
}

#[test]
fn the_page_logs_in_the_operator_only_and_its_cookie_needs_csrf_and_origin_to_change_anything() {
    let (_s, d) = with_s1();
    let pid = d.attach(json!({"sessionId": "s1", "gate": {"command": "false"}}));

    // The page itself, embedded, with a strict policy.
    let page = send(reqwest::Method::GET, format!("{}/", d.url), &[], None);
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("<title>gatehost</title>"),
        "{}",
        page.body
    );
    let csp = page.headers["content-security-policy"]
        .to_str()
        .expect("csp");
    assert!(
        csp.contains("default-src") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert_eq!(page.headers["x-frame-options"], "DENY");
    for script in ["app.js", "diff.js"] {
        let js = send(
            reqwest::Method::GET,
            format!("{}/ui/{script}", d.url),
            &[],
            None,
        );
        assert_eq!(js.status, 200, "{script}");
        assert_eq!(js.headers["content-type"], "text/javascript; charset=utf-8");
    }

    // The agent token and a wrong token cannot log in.
    for bad in [d.agent.as_str(), "not-a-token"] {
        let a = login(&d, bad);
        assert!(a.refused(), "{} {}", a.status, a.body);
        assert!(
            !a.headers.contains_key("set-cookie"),
            "no cookie for {bad:?}"
        );
    }

    // The operator token: a cookie with its flags, and a CSRF token.
    let ok = login(&d, &d.operator);
    assert_eq!(ok.status, 200, "{}", ok.body);
    let set = ok.headers["set-cookie"]
        .to_str()
        .expect("cookie")
        .to_string();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    let cookie = set.split(';').next().expect("pair").to_string();
    let csrf = serde_json::from_str::<Value>(&ok.body).expect("json")["csrf"]
        .as_str()
        .expect("csrf")
        .to_string();

    // Reads need the cookie and the CSRF token.
    let read = send(
        reqwest::Method::GET,
        format!("{}/v1/policies/{pid}", d.url),
        &[("cookie", &cookie), ("x-csrf-token", &csrf)],
        None,
    );
    assert_eq!(read.status, 200, "{}", read.body);

    // A cancel without the CSRF token, or from another origin, changes nothing.
    let cancel = format!("{}/v1/policies/{pid}/cancel", d.url);
    let origin = d.url.trim_end_matches('/').to_string();
    let tries: [&[(&str, &str)]; 3] = [
        &[("cookie", &cookie), ("origin", &origin)],
        &[
            ("cookie", &cookie),
            ("origin", "http://evil.example"),
            ("x-csrf-token", &csrf),
        ],
        &[
            ("cookie", &cookie),
            ("origin", &origin),
            ("x-csrf-token", "forged"),
        ],
    ];
    for h in tries {
        let a = send(reqwest::Method::POST, cancel.clone(), h, Some(json!({})));
        assert!(a.refused(), "{h:?}: {} {}", a.status, a.body);
        assert_ne!(
            d.policy(&pid)["status"],
            "cancelled",
            "{h:?} changed the policy"
        );
    }

    // With both, the page's cancel works.
    let a = send(
        reqwest::Method::POST,
        cancel,
        &[
            ("cookie", &cookie),
            ("origin", &origin),
            ("x-csrf-token", &csrf),
        ],
        Some(json!({})),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(d.policy(&pid)["status"], "cancelled");
}

/// A browser sends the page's cookie to every port of `localhost` (cookies
/// ignore ports, and SameSite compares sites, not origins), so a dev server
/// on another port receives it on the operator's visits. Replayed to the
/// daemon, alone, it reads nothing: every read the page makes is refused,
/// the events stream too, and the answer holds nothing of the policy; the
/// page's token (which only the page's exact origin holds) is what reads.
#[test]
fn the_page_cookie_alone_reads_nothing_so_another_localhost_port_that_receives_it_gets_nothing() {
    let (_s, d) = with_s1();
    let pid = d.attach(json!({"sessionId": "s1", "gate": {"command": "false"}}));
    let page = Page::login(&d);
    // What a server on another port would replay: the Cookie header the
    // browser sent it (the page's cookie among its own).
    let replayed = format!("dev=1; {}", page.cookie);
    let base = d.url.trim_end_matches('/');
    let reads = [
        format!("/v1/policies/{pid}"),
        "/v1/policies?order=newest".to_string(),
        format!("/v1/events?policy={pid}"),
        format!("/v1/policies/{pid}/diff"),
        "/v1/sessions".to_string(),
        "/v1/passkeys".to_string(),
        "/v1/events/stream".to_string(),
    ];
    for path in &reads {
        for token in [None, Some("forged"), Some("")] {
            let mut h = vec![("cookie", replayed.as_str())];
            if let Some(t) = token {
                h.push(("x-csrf-token", t));
            }
            let a = send(reqwest::Method::GET, format!("{base}{path}"), &h, None);
            assert!(a.refused(), "{path} {token:?}: {} {}", a.status, a.body);
            assert!(
                !a.body.contains(&pid),
                "{path} leaked the policy: {}",
                a.body
            );
        }
    }
    // The page itself, with its token, reads them (the diff of a policy
    // with no snapshot yet is a 409 past the login, not a refusal).
    for path in reads.iter().filter(|p| !p.ends_with("/stream")) {
        let a = send(
            reqwest::Method::GET,
            format!("{base}{path}"),
            &[("cookie", &replayed), ("x-csrf-token", &page.csrf)],
            None,
        );
        let want = if path.ends_with("/diff") { 409 } else { 200 };
        assert_eq!(a.status, want, "{path}: {}", a.body);
    }
}

/// A page's login: its cookie and CSRF token, sent as the page sends them.
struct Page<'a> {
    d: &'a Daemon,
    cookie: String,
    csrf: String,
}

impl<'a> Page<'a> {
    fn login(d: &'a Daemon) -> Page<'a> {
        let ok = login(d, &d.operator);
        assert_eq!(ok.status, 200, "{}", ok.body);
        let set = ok.headers["set-cookie"].to_str().expect("cookie");
        let cookie = set.split(';').next().expect("pair").to_string();
        let csrf = serde_json::from_str::<Value>(&ok.body).expect("json")["csrf"]
            .as_str()
            .expect("csrf")
            .to_string();
        Page { d, cookie, csrf }
    }

    fn post(&self, path: &str, body: Value) -> Answer {
        let origin = self.d.url.trim_end_matches('/').to_string();
        send(
            reqwest::Method::POST,
            format!("{origin}{path}"),
            &[
                ("cookie", &self.cookie),
                ("origin", &origin),
                ("x-csrf-token", &self.csrf),
            ],
            Some(body),
        )
    }
}

/// A commit policy on s1 gated green, awaiting its ack.
fn awaiting(s: &Scratch, d: &Daemon) -> String {
    awaiting_after(s, d, "turn-end")
}

/// As [`awaiting`], the gate run by s1's report `kind` (turn-end, exited).
fn awaiting_after(s: &Scratch, d: &Daemon, kind: &str) -> String {
    s.write_ws("src/lib.rs", "pub fn answer() -> u32 { 42 }\n");
    let pid = d.attach(json!({
        "sessionId": "s1",
        "gate": {"command": "true"},
        "then": "commit",
        "commit": {"paths": ["src"], "message": "the answer"}
    }));
    d.report("s1", kind);
    d.wait_status(&pid, "awaiting-ack", T);
    pid
}

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
    assert!(a.body.contains("comment"), "{}", a.body);
    assert_eq!(d.policy(&pid)["status"], "awaiting-ack");

    let comment = "Use the builder, not a literal.\nAnd no unwrap in lib.rs.";
    let a = page.post(&ack, json!({"approve": false, "comment": comment}));
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(d.policy(&pid)["status"], "cancelled");

    // The agent (its own token) reads its next nudge from the bus: the
    // comment, quoted under the host's fixed text.
    let nudges = d.all_events(&format!("&policy={pid}&types=nudge"));
    assert_eq!(nudges.len(), 1, "{nudges:?}");
    let message = nudges[0]["payload"]["message"].as_str().expect("message");
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
fn a_one_time_login_link_works_once_and_only_the_operator_makes_one() {
    let (_s, d) = with_s1();
    let pid = d.attach(json!({"sessionId": "s1", "gate": {"command": "false"}}));

    // The agent token cannot make a link (nor can the CLI with it).
    let (code, body) = d.http("POST", "/v1/ui/link", Some(&d.agent), None);
    assert_eq!(code, 403, "{body}");
    let run = d.cli(&["ui"], &d.agent);
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(run.stdout.trim().is_empty(), "no link: {}", run.stdout);

    // `gatehost ui` with the operator token prints the link.
    let run = d.cli(&["ui", "--json"], &d.operator);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let link = run.json();
    let url = link["url"].as_str().expect("url").to_string();
    // On the page's address: the daemon's port as `localhost` (where
    // browsers allow passkeys), never the IP.
    let page = d
        .url
        .trim_end_matches('/')
        .replace("127.0.0.1", "localhost");
    assert!(url.starts_with(&format!("{page}/ui/login?code=")), "{url}");
    assert_eq!(link["expiresInSeconds"], 120);

    // Spent once: a cookie and a redirect to the page, the CSRF token in
    // the fragment.
    let first = send(reqwest::Method::GET, url.clone(), &[], None);
    assert_eq!(first.status, 303, "{}", first.body);
    let to = first.headers["location"].to_str().expect("location");
    let csrf = to
        .strip_prefix("/ui/#login=")
        .expect("to the page")
        .to_string();
    let set = first.headers["set-cookie"].to_str().expect("cookie");
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    let page = Page {
        d: &d,
        cookie: set.split(';').next().expect("pair").to_string(),
        csrf,
    };
    let a = page.post(&format!("/v1/policies/{pid}/cancel"), json!({}));
    assert_eq!(a.status, 200, "the link's login works: {}", a.body);
    assert_eq!(d.policy(&pid)["status"], "cancelled");

    // A second use, or a code never made, is refused with no cookie.
    let bad = format!(
        "{}/ui/login?code=0123456789abcdef",
        d.url.trim_end_matches('/')
    );
    for u in [url, bad] {
        let again = send(reqwest::Method::GET, u.clone(), &[], None);
        assert_eq!(again.status, 403, "{u}: {}", again.body);
        assert!(!again.headers.contains_key("set-cookie"), "{u}");
        assert!(again.body.contains("gatehost ui"), "{}", again.body);
    }
}

#[test]
fn the_page_in_a_real_browser_reviews_approves_rejects_requests_changes_and_pages_live_and_on_a_phone()
 {
    let python = browser_python();
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
    let stderr = std::fs::File::create(s.etc.join("browser.log")).expect("log");
    let mut child = Command::new(&python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/browser/page_flow.py"))
        .args([
            d.url.trim_end_matches('/'),
            &d.operator,
            &d.agent,
            &shots.display().to_string(),
            &profile.display().to_string(),
            &approve,
            &reject,
            comment,
            &changes,
            &many,
        ])
        .env(MARKER_ENV, format!("gatehost-test-{m}"))
        .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("run the browser script");
    // A bound on the whole script: killed (and said) past it.
    let (done, watch) = std::sync::mpsc::channel::<()>();
    let pid = child.id() as i32;
    let watchdog = std::thread::spawn(move || {
        let late = watch.recv_timeout(Duration::from_secs(240)).is_err();
        if late {
            // SAFETY: kill(2) of the child this test started and still holds.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        late
    });
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
    assert!(
        seen["agentError"]
            .as_str()
            .is_some_and(|e| e.contains("agent token")),
        "{seen:#}"
    );
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
    let shown = seen["diff"].as_str().expect("diff");
    assert_eq!(without_context(shown), without_context(&committed));
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
    let nudges = d.all_events(&format!("&policy={reject}&types=nudge"));
    let message = nudges
        .last()
        .and_then(|n| n["payload"]["message"].as_str())
        .unwrap_or_default();
    assert!(
        message.contains("> Not in docs/: put it in the README.\n> And say why."),
        "{nudges:?}"
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
    let nudges = d.all_events(&format!("&policy={changes}&types=nudge"));
    let message = nudges
        .last()
        .and_then(|n| n["payload"]["message"].as_str())
        .unwrap_or_default();
    assert!(
        message.ends_with("\n- notes/todo.md:1\n  > Say what the first step is."),
        "{nudges:?}"
    );
    // A large diff a page at a time: 100 files, then the last one.
    assert_eq!(seen["firstPageFiles"], 100, "{seen:#}");
    assert_eq!(seen["moreShown"], true, "{seen:#}");
    assert!(
        seen["pageNote"]
            .as_str()
            .is_some_and(|n| n.contains("from=100")),
        "{seen:#}"
    );
    let want: Vec<String> = (0..101).map(|i| format!("many/f{i:03}.txt")).collect();
    assert_eq!(seen["allFiles"], json!(want), "{seen:#}");
    assert_eq!(seen["moreHiddenAtEnd"], true, "{seen:#}");
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
    let (code, body) = d.http(
        "POST",
        &route,
        Some(&d.agent),
        Some(json!({"tree": tree, "comments": comments})),
    );
    assert_eq!(code, 403, "{body}");
    let page = Page::login(&d);
    let a = page.post(
        &route,
        json!({"tree": "0".repeat(40), "comments": comments}),
    );
    assert_eq!(a.status, 409, "{}", a.body);
    assert!(a.body.contains("tree-changed"), "{}", a.body);
    let a = page.post(
        &route,
        json!({"tree": tree, "comments": [{"path": "src/lib.rs", "line": 0, "side": "new", "body": "x"}]}),
    );
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(a.body.contains("comments[0].line"), "{}", a.body);
    assert_eq!(d.policy(&pid)["status"], "awaiting-ack");
    assert!(
        d.all_events(&format!("&policy={pid}&types=nudge"))
            .is_empty()
    );

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
    assert!(a.body.contains("no-member-alive"), "{}", a.body);
    let now = d.policy(&pid);
    assert_eq!(now["status"], "awaiting-ack");
    assert_eq!(now["plan"]["snapshot"]["tree"], tree, "the plan is kept");
    assert!(
        d.all_events(&format!("&policy={pid}&types=nudge"))
            .is_empty()
    );
}
