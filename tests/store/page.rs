//! The operator's page of a fleet (issue 51, "the page shows which host
//! owns what and which hosts are alive"), in a real headless Chromium
//! (tests/support/browser/hosts_flow.py) against one host of three
//! sharing PostgreSQL: its hosts panel names every host with its state and
//! lease, the inbox names the host of another host's policy and session,
//! and that policy's page names its host and shows the diff its owner
//! made. (The page of a daemon on SQLite shows no host: the page test of
//! tests/daemon/ui is unchanged.)

use super::{database, store_section};
use crate::common::browser::{browser_python, run_script, shots_dir};
use crate::common::daemon::{Daemon, git_repo};
use crate::common::{Scratch, allow_config, assert_no_env_survivors, marker};
use serde_json::json;
use std::time::Duration;

const T: Duration = Duration::from_secs(60);

#[test]
fn the_page_of_one_host_names_the_hosts_and_who_owns_each_policy_and_session() {
    // Before anything starts: fails at once where the browser is missing.
    browser_python();
    let Some(pg) = database("store::page::hosts") else {
        return;
    };
    let s = Scratch::new();
    git_repo(&s.ws);
    let config = |name: &str, lease: &str| {
        s.write(
            name,
            &format!(
                "{}{}lease = \"{lease}\"\n",
                allow_config(&["true"]),
                store_section(&pg.url, &pg.password_file)
            ),
        )
    };
    let (cfg, short) = (config("config.toml", "15s"), config("short.toml", "3s"));
    let start = |id: &str, cfg: &std::path::Path| {
        Daemon::start_with_env(&s.etc.join(id), cfg, &[("GATEHOST_HOST_ID", id)])
    };
    let a = start("alpha", &cfg);
    let b = start("beta", &cfg);
    // Gamma stops: a clean stop releases its claim (`stopped`); a SIGTERM
    // that comes before its handler is in place kills it, its claim then
    // ending with its (short) lease. Either way, once its lease has ended
    // the page shows the state the store gives.
    let mut c = start("gamma", &short);
    c.stop();
    let deadline = std::time::Instant::now() + T;
    let gamma = loop {
        let hosts = b.agent_ok("GET", "/v1/hosts", None);
        let g = hosts["hosts"]
            .as_array()
            .and_then(|h| h.iter().find(|h| h["id"] == "gamma").cloned())
            .expect("gamma is listed");
        if g["live"] == false {
            break g;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "gamma's lease never ended: {g}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let gamma_state = gamma["state"].as_str().expect("a state").to_string();
    a.register("s1", &s.ws);
    let pid = a.commit_awaiting_ack(&s.ws, "seen from beta", T);
    let m = marker("hosts-page");
    let profile = s.etc.join(format!("gatehost-test-{m}-profile"));
    let (ok, seen) = run_script(
        "hosts_flow.py",
        &[
            b.url.trim_end_matches('/'),
            &b.operator,
            &profile.display().to_string(),
            &shots_dir().display().to_string(),
            &pid,
            "s1",
        ],
        &format!("gatehost-test-{m}"),
        &s.etc.join("browser.log"),
        Duration::from_secs(180),
    );
    let log = || std::fs::read_to_string(s.etc.join("browser.log")).unwrap_or_default();
    assert!(ok && seen.get("error").is_none(), "{seen:#}\n{}", log());
    // Every host, in id order, with its state and whether its lease runs;
    // the page's own host said.
    let hosts = seen["hosts"].as_array().expect("hosts");
    let ids: Vec<&str> = hosts.iter().map(|h| h[0].as_str().unwrap_or("")).collect();
    assert_eq!(ids, ["alpha", "beta", "gamma"], "{seen:#}");
    let text = |i: usize| hosts[i][1].as_str().unwrap_or("").to_string();
    assert!(
        text(0).contains("live") && text(0).contains("lease runs"),
        "{seen:#}"
    );
    assert!(text(1).contains("this page's host"), "{seen:#}");
    assert!(!text(0).contains("this page's host"), "{seen:#}");
    assert!(
        text(2).contains(&format!("gamma {gamma_state} lease ended")),
        "{gamma}: {seen:#}"
    );
    // Alpha's policy and session, as beta's page shows them.
    assert_eq!(seen["policyHost"], "alpha", "{seen:#}");
    assert_eq!(seen["sessionHost"], "alpha", "{seen:#}");
    assert_eq!(seen["policyPageHost"], "alpha", "{seen:#}");
    // Its diff, made by alpha (forwarded), and its actions offered.
    let added = seen["diffAdded"].as_array().expect("added lines");
    assert!(added.contains(&json!("+a")), "{seen:#}");
    assert_eq!(seen["actionsShown"], true, "{seen:#}");
    // No script error on the page.
    let console = seen["console"].as_array().expect("console");
    assert!(
        !console
            .iter()
            .any(|l| l.as_str().is_some_and(|l| l.starts_with("pageerror"))),
        "{seen:#}"
    );
    assert_no_env_survivors(&m);
}
