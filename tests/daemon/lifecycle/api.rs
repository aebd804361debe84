//! The API's edges: tokens, bad and oversized input refused with the field
//! named, event polls and long polls, pages, idempotent attaches, the
//! owner-only unix socket and SIGTERM.

use crate::common;
use crate::common::daemon::scratch_config;
use crate::common::shorthand::{assert_has, assert_within, str_of};

use super::{T, setup, setup_s1};
use serde_json::{Value, json};
use std::time::Duration;

#[test]
fn wrong_or_missing_tokens_get_401_and_nothing_is_done() {
    let (s, d) = setup();
    let before = d.all_events("").len();
    for token in [None, Some("not-the-token"), Some("")] {
        let (code, body) = d.http(
            "POST",
            "/v1/sessions",
            token,
            Some(json!({"id": "x", "cwd": s.ws})),
        );
        assert_eq!(code, 401, "{body}");
        assert_eq!(body["error"]["code"], "unauthorized");
    }
    let (code, _) = d.get("/v1/sessions/x", &d.agent);
    assert_eq!(code, 404, "nothing was registered");
    assert_eq!(d.all_events("").len(), before);
    let (code, _) = d.http("GET", "/v1/health", None, None);
    assert_eq!(code, 200);
}

#[test]
fn bad_input_is_refused_with_the_field_named_and_nothing_stored() {
    let (_s, d) = setup_s1();
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"sessionId": "nope", "gate": {"command": "true"}}),
            "sessionId",
        ),
        (
            json!({"sessionId": "s1", "gate": {"command": "rm", "args": ["-rf", "/"]}}),
            "gate",
        ),
        (
            json!({"sessionId": "s1", "gate": {"judge": {"adapter": "nosuch", "prompt": "x"}}}),
            "gate",
        ),
        (
            json!({"sessionId": "s1", "gate": {"command": "true", "timeoutMs": "soon"}}),
            "gate.timeoutMs",
        ),
        (json!({"sessionId": "s1", "then": "commit"}), "commit"),
        (
            json!({"sessionId": "s1", "then": "commit", "commit": {"paths": [], "message": "m"}}),
            "commit.paths",
        ),
        (
            json!({"sessionId": "s1", "then": "commit", "commit": {"paths": ["../etc"], "message": "m"}}),
            "commit.paths[0]",
        ),
        (
            json!({"sessionId": "s1", "then": "commit", "commit": {"paths": ["-f"], "message": "m"}}),
            "commit.paths[0]",
        ),
        (
            json!({"sessionId": "s1", "then": "commit", "commit": {"paths": [":(glob)*"], "message": "m"}}),
            "commit.paths[0]",
        ),
        (
            json!({"sessionId": "s1", "onFail": {"maxRetries": 11}}),
            "onFail.maxRetries",
        ),
        (json!({"sessionId": "s1", "colour": "blue"}), "colour"),
        (
            json!({"sessionId": "s1", "watchFrom": "yesterday"}),
            "watchFrom",
        ),
        (
            json!({"sessionId": "s1", "next": {"gate": {"command": "nosuchprogram"}}}),
            "next.gate",
        ),
    ];
    for (body, field) in cases {
        let (code, v) = d.post("/v1/policies", &d.agent, Some(body.clone()));
        assert_eq!(code, 400, "{body} → {v}");
        let got = v["error"]["field"].as_str().unwrap_or("");
        assert!(
            got.starts_with(field),
            "{body}: field {got:?}, expected {field:?}: {v}"
        );
    }
    let (code, v) = d.http_raw(
        "POST",
        "/v1/policies",
        Some(&d.agent),
        Some(b"{not json".to_vec()),
    );
    assert_eq!(code, 400, "{v}");
    // One JSON value: a second one, or garbage, after it is refused (the
    // first object does not win).
    for body in [
        &br#"{"sessionId": "s1"}{"sessionId": "s2"}"#[..],
        br#"{"sessionId": "s1"} garbage"#,
    ] {
        let (code, v) = d.http_raw("POST", "/v1/policies", Some(&d.agent), Some(body.to_vec()));
        assert_eq!(code, 400, "{v}");
        assert_eq!(v["error"]["field"], "body", "{v}");
        assert_has(str_of(&v["error"]["message"]), "one JSON value");
    }
    let (code, v) = d.http_raw(
        "POST",
        "/v1/policies",
        Some(&d.agent),
        Some(vec![b' '; 2 * 1024 * 1024]),
    );
    assert_eq!(code, 413, "{v}");
    let (code, v) = d.get("/v1/events?limit=0", &d.agent);
    assert_eq!((code, v["error"]["field"].as_str()), (400, Some("limit")));
    let (code, v) = d.get("/v1/events?types=turnend", &d.agent);
    assert_eq!((code, v["error"]["field"].as_str()), (400, Some("types")));
    // A daemon on SQLite keeps no hosts: a read by host is refused, as is
    // a name that cannot be a host id; its records name no host.
    for q in ["/v1/events?host=alpha", "/v1/events/stream?host=alpha"] {
        let (code, v) = d.get(q, &d.operator);
        assert_eq!(
            (code, v["error"]["code"].as_str()),
            (400, Some("no-hosts")),
            "{q}: {v}"
        );
        assert_eq!(v["error"]["field"], "host", "{v}");
    }
    let (code, v) = d.get("/v1/events?host=-x", &d.operator);
    assert_eq!(
        (code, v["error"]["field"].as_str()),
        (400, Some("host")),
        "{v}"
    );
    let (_, s1) = d.get("/v1/sessions/s1", &d.operator);
    assert!(s1.get("host").is_none() && s1["id"] == "s1", "{s1}");
    let (_, events) = d.get("/v1/events?limit=1000", &d.operator);
    assert!(
        events["events"]
            .as_array()
            .is_some_and(|e| !e.is_empty() && e.iter().all(|e| e.get("host").is_none())),
        "{events}"
    );
    let (code, v) = d.post(
        "/v1/sessions/s1/report",
        &d.agent,
        Some(json!({"kind": "done"})),
    );
    assert_eq!((code, v["error"]["field"].as_str()), (400, Some("kind")));
    // A misspelt field or value gets the nearest known name.
    let (code, v) = d.post(
        "/v1/sessions/s1/report",
        &d.agent,
        Some(json!({"kind": "turn-ended"})),
    );
    assert_eq!(code, 400, "{v}");
    let m = v["error"]["message"].as_str().unwrap_or_default();
    assert!(m.ends_with("(did you mean `turn-end`?)"), "{v}");
    let (code, v) = d.post(
        "/v1/policies",
        &d.agent,
        Some(json!({"sessionId": "s1", "gate": {"command": "true"}, "onFial": {}})),
    );
    assert_eq!(
        (code, v["error"]["field"].as_str()),
        (400, Some("onFial")),
        "{v}"
    );
    let m = v["error"]["message"].as_str().unwrap_or_default();
    assert!(m.ends_with("(did you mean `onFail`?)"), "{v}");
    let (_, list) = d.get("/v1/policies?limit=1000", &d.agent);
    assert_eq!(
        list["policies"],
        json!([]),
        "a refused attach stores nothing"
    );
}

#[test]
fn event_polls_filter_by_short_names_and_pages_never_skip() {
    let (_s, d) = setup_s1();
    for _ in 0..7 {
        d.report("s1", "turn-start");
        d.report("s1", "turn-end");
    }
    let all = d.all_events("&types=turn-end");
    assert_eq!(all.len(), 7, "short type names match session events");
    let full = d.all_events("&types=session:turn-end&session=s1");
    assert_eq!(full.len(), 7);
    // Pages of 3 through the CLI, continuing from each next cursor.
    let mut since = 0;
    let mut got = 0;
    loop {
        let r = d.cli_ok(
            &[
                "events",
                "poll",
                "--since",
                &since.to_string(),
                "--types",
                "turn-end",
                "--limit",
                "3",
                "--json",
            ],
            &d.agent,
        );
        let v = r.json();
        let n = v["events"].as_array().map(Vec::len).unwrap_or(0);
        if n == 0 {
            break;
        }
        assert!(n <= 3);
        got += n;
        since = v["nextCursor"].as_i64().expect("cursor");
    }
    assert_eq!(got, 7);
}

#[test]
fn a_session_long_poll_returns_its_next_event() {
    let (_s, d) = setup_s1();
    let head = d.agent_ok("GET", "/v1/health", None)["cursor"]
        .as_i64()
        .expect("cursor");
    let url = format!("/v1/sessions/s1/next-event?since={head}&timeout=20s");
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| d.agent_ok("GET", &url, None));
        std::thread::sleep(Duration::from_millis(300));
        d.report("s1", "awaiting-input");
        let v = waiter.join().expect("join");
        assert_eq!(v["event"]["type"], "session:awaiting-input", "{v}");
        assert_eq!(v["timedOut"], false);
    });
    let v = d.agent_ok("GET", "/v1/sessions/s1/next-event?timeout=200", None);
    assert_eq!(v["timedOut"], true);
}

#[test]
fn the_api_is_also_served_on_an_owner_only_unix_socket() {
    use std::os::unix::fs::PermissionsExt;
    let (s, cfg) = scratch_config(&["true"]);
    let data = s.etc.join("data");
    let sock = s.etc.join("gatehost.sock");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gatehost"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .arg("--config")
        .arg(&cfg)
        .arg("--socket")
        .arg(&sock)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = std::time::Instant::now() + T;
    while !sock.exists() {
        assert!(std::time::Instant::now() < deadline, "no socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mode = std::fs::metadata(&sock).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let token = std::fs::read_to_string(data.join("agent.token")).expect("token");
    let server = format!("unix:{}", sock.display());
    let keys = data.with_extension("keys").display().to_string();
    let env = [
        ("GATEHOST_SERVER", server.as_str()),
        ("GATEHOST_TOKEN", token.trim()),
        ("GATEHOST_SESSION_KEYS", keys.as_str()),
    ];
    let args: Vec<String> = ["session", "register", "--id", "via-socket", "--cwd"]
        .iter()
        .map(|s| s.to_string())
        .chain([s.ws.display().to_string()])
        .collect();
    let r = common::run_gatehost(&args, &env);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "via-socket");
    // SIGTERM: a clean stop removes the socket.
    // SAFETY: kill(2) on a process (group) this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let st = child.wait().expect("wait");
    assert_eq!(st.code(), Some(0));
    assert!(!sock.exists());
}

/// SIGTERM with long-polls open (events, a policy's wait, a session's next
/// event, each asking for 55 s): every one is answered as timed out (its
/// client polls again) and the daemon is gone within 2 s. (It waited for
/// them before: up to 55 s.)
#[test]
fn sigterm_answers_open_long_polls_and_stops_within_two_seconds() {
    let (s, mut d) = setup();
    d.register("s1", &s.ws);
    let pid = d.attach(json!({"sessionId": "s1", "watchFrom": "now", "gate": {"command": "true"}}));
    let head = d.operator_ok("GET", "/v1/events?since=0&limit=1000", None)["nextCursor"]
        .as_u64()
        .expect("cursor");
    let polls = [
        format!("/v1/events?since={head}&wait=55s"),
        format!("/v1/policies/{pid}/wait?timeout=55s"),
        format!("/v1/sessions/s1/next-event?since={head}&timeout=55s"),
    ];
    std::thread::scope(|scope| {
        let open: Vec<_> = polls
            .iter()
            .map(|path| scope.spawn(|| d.get(path, &d.agent)))
            .collect();
        // Let the three requests reach the daemon and wait there.
        std::thread::sleep(Duration::from_millis(500));
        assert!(
            open.iter().all(|h| !h.is_finished()),
            "a long-poll answered early"
        );
        let pid = d.pid();
        let started = std::time::Instant::now();
        // SAFETY: kill(2) on the daemon this test started.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        for (h, path) in open.into_iter().zip(&polls) {
            let (code, body) = h.join().expect("poll thread");
            assert_eq!(code, 200, "{path}: {body}");
            let timed_out = body["timedOut"] == true
                || body["settled"] == false
                || body["events"].as_array().is_some_and(Vec::is_empty);
            assert!(timed_out, "{path}: {body}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "long-polls answered after {:?}",
            started.elapsed()
        );
    });
    let started = std::time::Instant::now();
    assert_eq!(d.stop(), Some(0));
    assert_within(started, Duration::from_secs(2));
}

/// A client that retries an attach after a lost answer, with the same
/// idempotency key, gets the policy the first attempt made: one policy,
/// one `policy:attached`. The same key with another request is refused;
/// keys are the token's own; the CLI's `--idempotency-key` does the same.
#[test]
fn an_attach_retried_with_its_idempotency_key_makes_one_policy() {
    let (s, d) = setup_s1();
    let spec = json!({"sessionId": "s1", "gate": {"command": "true"}, "idempotencyKey": "k-1"});
    let first = d.attach(spec.clone());
    let again = d.attach(spec.clone());
    assert_eq!(first, again);
    let attached = d.all_events("&types=attached");
    assert_eq!(attached.len(), 1, "{attached:?}");
    // Another request under the same key: a conflict, nothing stored.
    let mut other = spec.clone();
    other["label"] = json!("something else");
    let (code, v) = d.post("/v1/policies", &d.agent, Some(other));
    assert_eq!(code, 409, "{v}");
    assert_eq!(v["error"]["code"], "idempotency-key-reused");
    // The key answers before the body is checked: under a reused key, a
    // body that does not parse is that conflict too.
    let mut bad = spec.clone();
    bad["gate"] = json!({"command": ""});
    let (code, v) = d.post("/v1/policies", &d.agent, Some(bad));
    assert_eq!(code, 409, "{v}");
    assert_eq!(v["error"]["code"], "idempotency-key-reused");
    // The operator's "k-1" is not the agent's.
    let (code, v) = d.post("/v1/policies", &d.operator, Some(spec));
    assert_eq!(code, 201, "{v}");
    assert_ne!(v["policyId"].as_str(), Some(first.as_str()));
    // The CLI.
    let file = s.write(
        "p.json",
        &json!({"sessionId": "s1", "gate": {"command": "true"}}).to_string(),
    );
    let run = |key: &str| {
        let r = d.cli_ok(
            &[
                "policy",
                "attach",
                file.to_str().expect("path"),
                "--idempotency-key",
                key,
            ],
            &d.agent,
        );
        r.stdout.trim().to_string()
    };
    assert_eq!(run("cli-1"), run("cli-1"));
    assert_ne!(run("cli-1"), run("cli-2"));
    assert_eq!(d.all_events("&types=attached").len(), 4);
}

/// Issue 12 #9: list routes come in pages (`limit`, `cursor`, `nextCursor`
/// null on the last page), oldest or newest first, filtered or not, in the
/// API and the CLI; nothing is skipped or repeated. (Before, one response
/// held every policy.)
#[test]
fn policies_and_sessions_are_listed_in_pages() {
    let (s, d) = setup();
    for i in 0..4 {
        d.register(&format!("s{i}"), &s.ws);
    }
    let mut ids = Vec::new();
    for i in 0..7 {
        ids.push(d.attach(json!({"sessionId": format!("s{}", i % 4), "label": format!("p{i}"), "gate": {"command": "true"}, "watchFrom": "now"})));
    }
    d.cli(&["policy", "cancel", &ids[5]], &d.operator);
    let pages = |base: &str, key: &str| -> Vec<String> {
        let mut seen = Vec::new();
        let mut cursor = 0;
        for _ in 0..10 {
            let v = d.agent_ok("GET", &format!("{base}limit=3&cursor={cursor}"), None);
            let list = v[key].as_array().expect("list");
            assert!(list.len() <= 3, "{v}");
            seen.extend(
                list.iter()
                    .map(|p| p["id"].as_str().expect("id").to_string()),
            );
            match v["nextCursor"].as_i64() {
                Some(c) => cursor = c,
                None => return seen,
            }
        }
        panic!("no last page");
    };
    assert_eq!(pages("/v1/policies?", "policies"), ids);
    let mut newest = ids.clone();
    newest.reverse();
    assert_eq!(pages("/v1/policies?order=newest&", "policies"), newest);
    let watching: Vec<String> = ids
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 5)
        .map(|(_, id)| id.clone())
        .collect();
    assert_eq!(pages("/v1/policies?status=watching&", "policies"), watching);
    assert_eq!(pages("/v1/sessions?", "sessions"), ["s0", "s1", "s2", "s3"]);
    // The default page is bounded too.
    let v = d.agent_ok("GET", "/v1/policies", None);
    assert_eq!(v["policies"].as_array().map(Vec::len), Some(7));
    assert!(v["nextCursor"].is_null());
    for bad in ["limit=0", "limit=1001", "cursor=-1", "cursor=x"] {
        let (code, v) = d.get(&format!("/v1/policies?{bad}"), &d.agent);
        let field = bad.split('=').next().unwrap_or("");
        assert_eq!(
            (code, v["error"]["field"].as_str()),
            (400, Some(field)),
            "{bad}"
        );
    }
    let (code, v) = d.get("/v1/policies?order=up", &d.agent);
    assert_eq!((code, v["error"]["field"].as_str()), (400, Some("order")));
    // The CLI: one page and where the next starts, or all of them.
    let one = d.cli_ok(&["policy", "list", "--limit", "3"], &d.agent);
    assert_eq!(one.stdout.lines().count(), 3, "{}", one.stdout);
    assert_has(&one.stderr, "more: --cursor 3");
    let all = d.cli(&["policy", "list", "--limit", "2", "--all"], &d.agent);
    assert_eq!(all.stdout.lines().count(), 7, "{}", all.stdout);
    assert!(all.stdout.lines().next().unwrap_or("").contains(&ids[0]));
    let json = d.cli(
        &["session", "list", "--json", "--all", "--limit", "3"],
        &d.agent,
    );
    let v: Value = serde_json::from_str(&json.stdout).expect("json");
    assert_eq!(v["sessions"].as_array().map(Vec::len), Some(4));
}

/// Issue 12 #9: labels, nudge templates and commit messages beyond their
/// caps are refused at attach (and session labels at register), naming the
/// field; nothing is stored. (Before, ~1 MiB labels were copied into every
/// event.)
#[test]
fn oversized_labels_nudges_and_messages_are_refused_naming_the_field() {
    let (s, d) = setup();
    gatehost_git_init(&s.ws);
    d.register("s1", &s.ws);
    let big = |n: usize| "x".repeat(n);
    let cases = [
        (json!({"sessionId": "s1", "label": big(257)}), "label"),
        (
            json!({"sessionId": "s1", "gate": {"command": "false"}, "onFail": {"nudge": big(8 * 1024 + 1)}}),
            "onFail.nudge",
        ),
        (
            json!({"sessionId": "s1", "gate": {"command": "true"}, "then": "commit", "commit": {"paths": ["a"], "message": big(16 * 1024 + 1)}}),
            "commit.message",
        ),
        (
            json!({"sessionId": "s1", "next": {"label": big(300)}}),
            "next.label",
        ),
    ];
    for (spec, field) in cases {
        let (code, v) = d.post("/v1/policies", &d.agent, Some(spec));
        assert_eq!(
            (code, v["error"]["field"].as_str()),
            (400, Some(field)),
            "{v}"
        );
        assert_has(str_of(&v["error"]["message"]), "at most");
    }
    // At the cap, accepted.
    d.attach(json!({"sessionId": "s1", "label": big(256)}));
    let (code, v) = d.post(
        "/v1/sessions",
        &d.agent,
        Some(json!({"id": "s2", "cwd": s.ws, "label": big(257)})),
    );
    assert_eq!((code, v["error"]["field"].as_str()), (400, Some("label")));
    let v = d.agent_ok("GET", "/v1/policies", None);
    assert_eq!(v["policies"].as_array().map(Vec::len), Some(1));
    assert_eq!(d.get("/v1/sessions/s2", &d.agent).0, 404);
}

fn gatehost_git_init(dir: &std::path::Path) {
    common::daemon::git_repo(dir);
}
