//! The web page through a real daemon: the page is served with its
//! security headers, only the operator token logs in, the cookie's flags,
//! the cookie alone reads nothing (a server on another port of localhost
//! receives it), a state-changing call with the cookie needs the CSRF
//! token and the page's own origin (else it changes nothing); a reject's comment reaches
//! the agent; the one-time login link; and the whole page in a real
//! headless Chromium (tests/support/browser/page_flow.py, Playwright for Python).

use crate::common;

use common::Scratch;
use common::daemon::{Daemon, rt};
use serde_json::{Value, json};
use std::time::Duration;

mod access;
mod browser;
mod cards;
mod comments;
mod inbox;
mod keyboard;
mod login_link;
mod logins;
mod review;
mod rotation;

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

/// `gatehost ui --json ARGS`'s one-time login link (`--policy ID`: to
/// that policy's page).
fn ui_link(d: &Daemon, args: &[&str]) -> String {
    let mut all = vec!["ui", "--json"];
    all.extend_from_slice(args);
    d.cli_ok(&all, &d.operator).json()["url"]
        .as_str()
        .expect("url")
        .to_string()
}

/// A browser script's runs for one test: its own profile directory (kept
/// between runs), marker and log.
struct Browser {
    marker: String,
    profile: String,
    log: std::path::PathBuf,
}

impl Browser {
    fn new(s: &Scratch, name: &str) -> Browser {
        // Before anything starts: fails at once where the browser is missing.
        common::browser::browser_python();
        let m = common::marker(name);
        Browser {
            profile: s
                .etc
                .join(format!("gatehost-test-{m}-profile"))
                .display()
                .to_string(),
            marker: format!("gatehost-test-{m}"),
            log: s.etc.join(format!("browser-{name}.log")),
        }
    }

    /// Runs `script` with `args` and the profile as its last argument: its
    /// JSON, once it finished with no error and no exception in the page.
    fn run(&self, script: &str, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.push(&self.profile);
        let (ok, seen) = common::browser::run_script(
            script,
            &all,
            &self.marker,
            &self.log,
            Duration::from_secs(120),
        );
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        assert!(ok && seen["error"].is_null(), "{seen:#}\n{log}");
        let threw = seen["console"].as_array().is_some_and(|c| {
            c.iter()
                .any(|l| l.as_str().is_some_and(|l| l.starts_with("pageerror")))
        });
        assert!(!threw, "the page threw: {seen:#}");
        seen
    }
}
