//! `[retention]` through a real daemon: what it deletes, and never what a
//! live policy needs.

use crate::common;
use crate::common::shorthand::{assert_has, strs_of};

use common::allow_config;
use common::daemon::{Daemon, git_scratch};
use serde_json::json;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(60);

/// Issue 12 #9: with `[retention]` counts of 2 settled policies and 10
/// events, applied every second, the daemon deletes the older settled
/// policies and events, never a live policy or its events: a policy
/// awaiting its ack through all of it still commits, and the head cursor
/// never moves back. (Before, nothing was ever deleted.)
#[test]
fn retention_deletes_the_old_and_never_what_a_live_policy_needs() {
    let s = git_scratch();
    let cfg = s.write(
        "config.toml",
        &format!(
            "{}\n[retention]\nevery = \"1s\"\npolicies_max_count = 2\nevents_max_count = 10\n",
            allow_config(&["true"])
        ),
    );
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    d.register("s1", &s.ws);
    let live = d.commit_awaiting_ack(&s.ws, "kept alive", T);
    let mut settled = Vec::new();
    for _ in 0..6 {
        let pid =
            d.attach(json!({"sessionId": "s1", "gate": {"command": "true"}, "watchFrom": "now"}));
        d.report("s1", "turn-end");
        d.wait_status(&pid, "done", T);
        settled.push(pid);
    }
    let head = d.agent_ok("GET", "/v1/health", None)["cursor"]
        .as_i64()
        .expect("cursor");
    assert!(head > 30, "{head}");
    let deadline = Instant::now() + T;
    loop {
        let v = d.operator_ok("GET", "/v1/policies?limit=100", None);
        let ids = strs_of(&v["policies"], "id");
        if ids.len() == 3 {
            // The live one and the newest two settled ones.
            assert_eq!(ids, [live.as_str(), &settled[4], &settled[5]]);
            break;
        }
        assert!(Instant::now() < deadline, "{ids:?}\n{}", d.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_has(&d.log(), "retention deleted");
    let events = d.operator_ok("GET", "/v1/events?since=0&limit=1000", None);
    let list = events["events"].as_array().expect("events");
    let others = list
        .iter()
        .filter(|e| e["policyId"] != live.as_str())
        .count();
    assert!(others <= 10, "{others} events beyond the count: {list:?}");
    // The live policy's own events are all there.
    let mine = d.all_events(&format!("&policy={live}"));
    let kinds: Vec<&str> = mine.iter().filter_map(|e| e["type"].as_str()).collect();
    assert!(kinds.contains(&"policy:commit-ready"), "{kinds:?}");
    assert!(events["oldestCursor"].as_i64().expect("oldest") > 1);
    // It still commits; the head only grew.
    d.cli_ok(&["policy", "ack", &live, "--approve"], &d.operator);
    let p = d.wait_status(&live, "done", T);
    assert!(p["commitSha"].is_string(), "{p}");
    let after = d.agent_ok("GET", "/v1/health", None)["cursor"]
        .as_i64()
        .expect("cursor");
    assert!(after > head);
}
