//! The way in, in a real headless Chromium (tests/support/browser/login_flow.py):
//! the link `gatehost ui` prints logs the operator in and shows the inbox
//! (issue 53: the page threw before, `app.js`'s function `history` hiding
//! the browser's, and the link landed on a blank page), the fragment that
//! carried the CSRF token leaves the address bar, the same link a second
//! time and an expired one are refused; a policy's link (what
//! notifications carry) opens that policy in a new tab with no second
//! login, `gatehost ui --policy` lands on it, and in a browser with no
//! login the policy's link shows the login form, then the policy.

use crate::common;

use common::browser::{browser_python, run_script};
use common::daemon::{Daemon, with_s1};
use common::marker;
use serde_json::Value;
use std::time::Duration;

fn shows(seen: &Value, step: &str, view: &str) {
    for v in ["inbox", "login", "policy"] {
        assert_eq!(
            seen[step][v],
            v == view,
            "{step}: {view} shown, and only it: {seen:#}"
        );
    }
}

#[test]
fn the_links_open_the_inbox_or_a_policy_once_and_never_when_expired() {
    // Before anything starts: fails at once where the browser is missing.
    browser_python();
    let (s, d) = with_s1();
    let pid = super::awaiting(&s, &d);
    let link = |args: &[&str]| {
        let mut all = vec!["ui", "--json"];
        all.extend_from_slice(args);
        let run = d.cli_ok(&all, &d.operator);
        run.json()["url"].as_str().expect("url").to_string()
    };
    let inbox_link = link(&[]);
    let policy_link = link(&["--policy", &pid]);
    // A policy that does not exist: no link.
    let none = d.cli(&["ui", "--policy", "pol_nope"], &d.operator);
    assert_ne!(none.code, 0, "{}", none.stderr);
    assert!(none.stderr.contains("pol_nope"), "{}", none.stderr);
    // A daemon whose links last 0 ms (the test hook): every link expired.
    let expired_data = s.etc.join("expired-data");
    let cfg = s.etc.join("config.toml");
    let short = Daemon::start_with_env(
        &expired_data,
        &cfg,
        &[("GATEHOST_TEST_LOGIN_LINK_TTL_MS", "0")],
    );
    let expired = short.cli_ok(&["ui", "--json"], &short.operator).json()["url"]
        .as_str()
        .expect("url")
        .to_string();
    let origin = inbox_link
        .split("/ui/login")
        .next()
        .expect("origin")
        .to_string();
    let deep = format!("{origin}/ui/#policy/{pid}");
    let m = marker("login-link");
    let profile = s.etc.join(format!("gatehost-test-{m}-profile"));
    let (ok, seen) = run_script(
        "login_flow.py",
        &[
            &inbox_link,
            &policy_link,
            &expired,
            &deep,
            &d.operator,
            &profile.display().to_string(),
        ],
        &format!("gatehost-test-{m}"),
        &s.etc.join("browser.log"),
        Duration::from_secs(120),
    );
    let log = || std::fs::read_to_string(s.etc.join("browser.log")).unwrap_or_default();
    assert!(ok && seen.get("error").is_none(), "{seen:#}\n{}", log());
    let console = seen["console"].as_array().expect("console");
    assert!(
        !console
            .iter()
            .any(|l| l.as_str().is_some_and(|l| l.starts_with("pageerror"))),
        "the page threw: {seen:#}"
    );
    // Expired: refused, saying so, and no cookie set.
    assert_eq!(seen["expired"]["status"], 403, "{seen:#}");
    assert!(
        seen["expired"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("expired") && t.contains("gatehost ui")),
        "{seen:#}"
    );
    assert_eq!(seen["cookiesAfterExpired"], 0, "{seen:#}");
    // The link: the inbox, the token gone from the address bar.
    shows(&seen, "link", "inbox");
    let address = seen["link"]["address"].as_str().expect("address");
    assert!(
        address.ends_with("/ui/") && !address.contains("login"),
        "the CSRF token left in the address bar: {address}"
    );
    // Spent.
    assert_eq!(seen["again"]["status"], 403, "a spent link: {seen:#}");
    // A policy's link in a new tab: the policy, no login form.
    shows(&seen, "deepTab", "policy");
    assert_eq!(seen["deepTab"]["title"], pid.as_str(), "{seen:#}");
    // `gatehost ui --policy`: that policy, the token out of the address.
    shows(&seen, "policyLink", "policy");
    assert_eq!(seen["policyLink"]["title"], pid.as_str(), "{seen:#}");
    let address = seen["policyLink"]["address"].as_str().expect("address");
    assert!(
        address.ends_with(&format!("/ui/#policy/{pid}")),
        "{address}"
    );
    // No login: the form, then the policy the link named.
    shows(&seen, "deepLoggedOut", "login");
    shows(&seen, "deepAfterLogin", "policy");
    assert_eq!(seen["deepAfterLogin"]["title"], pid.as_str(), "{seen:#}");
    drop(short);
}
