//! The way in, in a real headless Chromium (tests/support/browser/login_flow.py):
//! the link `gatehost ui` prints logs the operator in and shows the inbox
//! (issue 53: the page threw before, `app.js`'s function `history` hiding
//! the browser's, and the link landed on a blank page), the fragment that
//! carried the CSRF token leaves the address bar, and the same link a
//! second time is refused.

use crate::common;

use common::browser::{browser_python, run_script};
use common::daemon::with_s1;
use common::marker;
use std::time::Duration;

#[test]
fn the_link_gatehost_ui_prints_opens_the_inbox_once() {
    // Before anything starts: fails at once where the browser is missing.
    browser_python();
    let (s, d) = with_s1();
    let run = d.cli_ok(&["ui", "--json"], &d.operator);
    let link = run.json()["url"].as_str().expect("url").to_string();
    let m = marker("login-link");
    let profile = s.etc.join(format!("gatehost-test-{m}-profile"));
    let (ok, seen) = run_script(
        "login_flow.py",
        &[&link, &profile.display().to_string()],
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
    assert_eq!(seen["inboxShown"], true, "{seen:#}");
    assert_eq!(seen["loginShown"], false, "{seen:#}");
    let address = seen["address"].as_str().expect("address");
    assert!(
        address.ends_with("/ui/") && !address.contains("login"),
        "the CSRF token left in the address bar: {address}"
    );
    assert_eq!(seen["againStatus"], 403, "a spent link: {seen:#}");
    assert!(
        seen["againText"]
            .as_str()
            .is_some_and(|t| t.contains("gatehost ui")),
        "{seen:#}"
    );
}
