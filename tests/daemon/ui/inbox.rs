//! The inbox of many agents (issue 53, item 3), in a real headless
//! Chromium (tests/support/browser/inbox_flow.py): with 5,000 policies,
//! 1,491 of them awaiting their ack (the page showed the newest 50 and no
//! "more" before), every one is reached by paging, the counts and the
//! tab's title say how many wait, blocked policies are a list of their
//! own, and dismissing one (confirmed) cancels it.

use crate::common;

use common::Scratch;
use common::browser::{browser_python, run_script};
use common::daemon::Daemon;
use common::marker;
use gatehost::store::{PolicyRow, PolicyStatus, Store};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

const ALL: usize = 5000;
const AWAITING: usize = 1491;
const BLOCKED: usize = 9;

/// The policies, written into the store before the daemon opens it:
/// `pol_…<i>` awaiting its ack for i < AWAITING, blocked for the next
/// BLOCKED, done for the rest; the ids of each kind.
fn seed(data: &std::path::Path) -> (BTreeSet<String>, BTreeSet<String>) {
    std::fs::create_dir_all(data).expect("data");
    let store = Store::open(data).expect("store");
    let (mut awaiting, mut blocked) = (BTreeSet::new(), BTreeSet::new());
    let now = gatehost::store::now_ms();
    store
        .write(|tx| {
            for i in 0..ALL {
                let id = format!("pol_{i:032x}");
                let status = if i < AWAITING {
                    awaiting.insert(id.clone());
                    PolicyStatus::AwaitingAck
                } else if i < AWAITING + BLOCKED {
                    blocked.insert(id.clone());
                    PolicyStatus::Blocked
                } else {
                    PolicyStatus::Done
                };
                // Every tenth one awaiting is codex's (the agent filter).
                let member = if i < AWAITING && i % 10 == 0 { "codex:s2" } else { "claude:s1" };
                let mut p = PolicyRow::sample(&id, status, &[member]);
                // Recent: retention keeps them.
                (p.created_at, p.updated_at) = (now, now);
                if status == PolicyStatus::Blocked {
                    p.reason = Some("out of retries".into());
                }
                if status == PolicyStatus::AwaitingAck {
                    p.plan = Some(
                        serde_json::from_value(json!({
                            "version": 1, "paths": ["src"], "message": format!("change {i}\n\nits body"),
                            "fingerprint": "f", "requireHumanAck": true,
                            "diffSummary": {"files": [{"path": "src/lib.rs", "kind": "modified", "added": 3, "removed": 1}],
                                            "added": 3, "removed": 1}
                        }))
                        .expect("plan"),
                    );
                }
                tx.insert_policy(&mut p)?;
            }
            Ok(())
        })
        .expect("seed");
    (awaiting, blocked)
}

fn strings(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|x| x.as_str().expect("a string").to_string())
        .collect()
}

#[test]
fn five_thousand_policies_every_awaiting_one_reached_counted_and_blocked_apart() {
    browser_python();
    let s = Scratch::new();
    let data = s.etc.join("data");
    let (awaiting, blocked) = seed(&data);
    let cfg = s.write("config.toml", &common::allow_config(&["true"]));
    let d = Daemon::start(&data, &cfg);
    // The route's counts, the operator's only.
    let (code, page) = d.get("/v1/policies?limit=1&counts=true", &d.operator);
    assert_eq!(code, 200, "{page}");
    assert_eq!(
        page["counts"],
        serde_json::json!({"awaiting-ack": AWAITING, "blocked": BLOCKED, "done": ALL - AWAITING - BLOCKED}),
        "{page}"
    );
    let (code, body) = d.get("/v1/policies?limit=1&counts=true", &d.agent);
    assert_eq!(code, 403, "{body}");
    let link = d.cli_ok(&["ui", "--json"], &d.operator).json()["url"]
        .as_str()
        .expect("url")
        .to_string();
    let m = marker("inbox");
    let profile = s.etc.join(format!("gatehost-test-{m}-profile"));
    let (ok, seen) = run_script(
        "inbox_flow.py",
        &[&link, &profile.display().to_string()],
        &format!("gatehost-test-{m}"),
        &s.etc.join("browser.log"),
        Duration::from_secs(300),
    );
    let log = || std::fs::read_to_string(s.etc.join("browser.log")).unwrap_or_default();
    assert!(ok && seen.get("error").is_none(), "{seen:#}\n{}", log());
    let others = (ALL - AWAITING - BLOCKED).to_string();
    assert_eq!(
        seen["counts"],
        serde_json::json!({"waiting": AWAITING.to_string(), "blocked": BLOCKED.to_string(), "others": others}),
        "{seen:#}"
    );
    assert_eq!(seen["title"], format!("({}) gatehost", AWAITING + BLOCKED));
    // A page at a time, then every one.
    assert_eq!(seen["firstPage"], 50, "{seen:#}");
    assert_eq!(seen["waitingClicks"], AWAITING.div_ceil(50) - 1, "{seen:#}");
    let shown = seen["waiting"].as_array().expect("waiting").len();
    assert_eq!(shown, AWAITING, "each once");
    assert_eq!(strings(&seen["waiting"]), awaiting);
    assert_eq!(strings(&seen["blocked"]), blocked);
    assert!(
        seen["blockedStatuses"]
            .as_array()
            .expect("statuses")
            .iter()
            .all(|s| s == "blocked"),
        "{seen:#}"
    );
    // Dismissed after a confirmation: cancelled, out of the blocked list.
    assert_eq!(
        seen["dialogs"].as_array().map(Vec::len),
        Some(1),
        "{seen:#}"
    );
    assert_eq!(
        seen["dismissed"],
        serde_json::json!(["cancelled"]),
        "{seen:#}"
    );
    assert_eq!(seen["countsAfter"]["blocked"], (BLOCKED - 1).to_string());
    assert_eq!(
        seen["titleAfter"],
        format!("({}) gatehost", AWAITING + BLOCKED - 1)
    );
    let first = seen["blocked"][0].as_str().expect("id");
    assert_eq!(d.policy(first)["status"], "cancelled");
    // Filters: by agent (every one of codex's, paged to the end), by
    // words in the commit message.
    let codex: BTreeSet<String> = awaiting
        .iter()
        .filter(|id| {
            let i = usize::from_str_radix(id.trim_start_matches("pol_"), 16).expect("hex");
            i % 10 == 0
        })
        .cloned()
        .collect();
    assert_eq!(codex.len(), AWAITING.div_ceil(10));
    assert_eq!(strings(&seen["byAgent"]), codex, "{seen:#}");
    assert_eq!(
        seen["bySearch"],
        json!([format!("pol_{:032x}", 1490)]),
        "{seen:#}"
    );
    assert_eq!(seen["byNothing"], json!([]), "{seen:#}");
}
