//! The web page's login through a real daemon: the page is served with its
//! security headers, only the operator token logs in, the cookie's flags,
//! and a state-changing call with the cookie needs the CSRF token and the
//! page's own origin (else it changes nothing).

use crate::common;

use common::daemon::{Daemon, git_out, git_repo, rt};
use common::{Scratch, allow_config};
use serde_json::{Value, json};
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
    let s = Scratch::new();
    git_repo(&s.ws);
    let cfg = s.write("config.toml", &allow_config(&["true", "false"]));
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    d.register("s1", &s.ws);
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

    // Reads need only the cookie.
    let read = send(
        reqwest::Method::GET,
        format!("{}/v1/policies/{pid}", d.url),
        &[("cookie", &cookie)],
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
            format!("{}{path}", origin),
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
    s.write_ws("src/lib.rs", "pub fn answer() -> u32 { 42 }\n");
    let pid = d.attach(json!({
        "sessionId": "s1",
        "gate": {"command": "true"},
        "then": "commit",
        "commit": {"paths": ["src"], "message": "the answer"}
    }));
    d.report("s1", "turn-end");
    d.wait_status(&pid, "awaiting-ack", T);
    pid
}

#[test]
fn a_reject_from_the_page_with_a_comment_is_the_agents_next_nudge() {
    let s = Scratch::new();
    git_repo(&s.ws);
    let cfg = s.write("config.toml", &allow_config(&["true", "false"]));
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    d.register("s1", &s.ws);
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
    let s = Scratch::new();
    git_repo(&s.ws);
    let cfg = s.write("config.toml", &allow_config(&["true", "false"]));
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    d.register("s1", &s.ws);
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
    assert!(
        url.starts_with(&format!("{}/ui/login?code=", d.url.trim_end_matches('/'))),
        "{url}"
    );
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
