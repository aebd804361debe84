//! Logging in to the page: only the operator token, the cookie's flags,
//! CSRF and the page's own origin for a change, the cookie alone reads
//! nothing (a server on another localhost port receives it), and the
//! one-time login link.

use crate::common;
use crate::common::shorthand::{assert_has, assert_lacks};

use super::{Page, login, send};
use common::daemon::with_s1;
use serde_json::{Value, json};

#[test]
fn the_page_logs_in_the_operator_only_and_its_cookie_needs_csrf_and_origin_to_change_anything() {
    let (_s, d) = with_s1();
    let pid = d.attach(json!({"sessionId": "s1", "gate": {"command": "false"}}));

    // The page itself, embedded, with a strict policy.
    let page = send(reqwest::Method::GET, format!("{}/", d.url), &[], None);
    assert_eq!(page.status, 200);
    assert_has(&page.body, "<title>gatehost</title>");
    let csp = page.headers["content-security-policy"]
        .to_str()
        .expect("csp");
    assert_has(csp, "default-src");
    assert_lacks(csp, "unsafe-inline");
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
    assert_has(&set, "HttpOnly");
    assert_has(&set, "SameSite=Strict");
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

#[test]
fn a_one_time_login_link_works_once_and_only_the_operator_makes_one() {
    let (_s, d) = with_s1();
    let pid = d.attach(json!({"sessionId": "s1", "gate": {"command": "false"}}));

    // The agent token cannot make a link (nor can the CLI with it).
    let (code, body) = d.post("/v1/ui/link", &d.agent, None);
    assert_eq!(code, 403, "{body}");
    let run = d.cli(&["ui"], &d.agent);
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(run.stdout.trim().is_empty(), "no link: {}", run.stdout);

    // The route takes no body, `null`, or `{policy}` (which must exist);
    // anything else is refused, naming the field.
    for (body, want) in [
        (None, 200),
        (Some(Value::Null), 200),
        (Some(json!({"policy": pid})), 200),
        (Some(json!({"policy": "pol_nope"})), 404),
        (Some(json!({"next": "https://elsewhere.example/"})), 400),
    ] {
        let (code, answer) = d.post("/v1/ui/link", &d.operator, body.clone());
        assert_eq!(code, want, "{body:?}: {answer}");
    }

    // `gatehost ui` with the operator token prints the link.
    let run = d.cli_ok(&["ui", "--json"], &d.operator);
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
    assert_has(set, "HttpOnly");
    assert_has(set, "SameSite=Strict");
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
        assert_has(&again.body, "gatehost ui");
    }
}
