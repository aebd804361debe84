//! The policy page's files as cards (issue 53, item 5), in a real headless
//! Chromium (tests/support/browser/cards_flow.py): a lockfile is collapsed
//! at first and says why; "Viewed" collapses a file and is kept over a
//! reload; the file list above the diff opens a collapsed file; once the
//! policy is gated again on a new snapshot, a viewed file whose content
//! changed is shown again, unticked, and one that did not change stays
//! viewed.

use crate::common;

use super::T;
use common::browser::{browser_python, run_script};
use common::daemon::{git_commit_all, with_s1};
use common::marker;
use serde_json::{Value, json};
use std::time::Duration;

/// The state of `path`'s card at `step`: (viewed, expanded, rows shown).
fn card(seen: &Value, step: &str, path: &str) -> (bool, String, u64) {
    let c = seen[step]
        .as_array()
        .expect("cards")
        .iter()
        .find(|c| c["path"] == path)
        .unwrap_or_else(|| panic!("{path} at {step}: {seen:#}"));
    (
        c["viewed"].as_bool().expect("viewed"),
        c["expanded"].as_str().expect("expanded").to_string(),
        c["shown"].as_u64().expect("shown"),
    )
}

#[test]
fn cards_collapse_lockfiles_keep_viewed_per_content_and_open_from_the_file_list() {
    browser_python();
    let (s, d) = with_s1();
    s.write_ws("src/lib.rs", "fn a() {}\n");
    s.write_ws("src/other.rs", "fn b() {}\n");
    s.write_ws("Cargo.lock", "# lock\nversion = 3\n");
    git_commit_all(&s.ws, "before");
    s.write_ws("src/lib.rs", "fn a() {}\nfn a2() {}\n");
    s.write_ws("src/other.rs", "fn b() {}\nfn b2() {}\n");
    s.write_ws("Cargo.lock", "# lock\nversion = 4\n");
    let pid = d.attach(json!({
        "sessionId": "s1",
        "gate": {"command": "true"},
        "then": "commit",
        "commit": {"paths": ["src", "Cargo.lock"], "message": "more"}
    }));
    d.report("s1", "turn-end");
    let p = d.wait_status(&pid, "awaiting-ack", T);
    let tree = p["plan"]["snapshot"]["tree"]
        .as_str()
        .expect("tree")
        .to_string();
    let link = || {
        d.cli_ok(&["ui", "--json", "--policy", &pid], &d.operator)
            .json()["url"]
            .as_str()
            .expect("url")
            .to_string()
    };
    let m = marker("cards");
    let profile = s.etc.join(format!("gatehost-test-{m}-profile"));
    let profile = profile.display().to_string();
    let log = s.etc.join("browser.log");
    let run = |mode: &str| {
        let (ok, seen) = run_script(
            "cards_flow.py",
            &[mode, &link(), &profile],
            &format!("gatehost-test-{m}"),
            &log,
            Duration::from_secs(120),
        );
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(ok && seen.get("error").is_none(), "{seen:#}\n{text}");
        seen
    };
    let seen = run("first");
    // The lockfile: collapsed at first, saying why; the code open.
    let lock = seen["atFirst"]
        .as_array()
        .expect("cards")
        .iter()
        .find(|c| c["path"] == "Cargo.lock")
        .expect("Cargo.lock");
    assert_eq!(lock["tag"], "generated: a lockfile", "{seen:#}");
    assert!(lock["rows"].as_u64() > Some(0), "{seen:#}");
    assert_eq!(
        card(&seen, "atFirst", "Cargo.lock"),
        (false, "false".into(), 0)
    );
    let (viewed, expanded, shown) = card(&seen, "atFirst", "src/lib.rs");
    assert_eq!((viewed, expanded.as_str()), (false, "true"));
    assert!(shown > 0, "{seen:#}");
    // Viewed: collapsed, kept over a reload.
    for step in ["afterViewed", "afterReload"] {
        for path in ["src/lib.rs", "src/other.rs"] {
            assert_eq!(
                card(&seen, step, path),
                (true, "false".into(), 0),
                "{step} {path}"
            );
        }
    }
    // The file list opened the lockfile and focused its header.
    let (_, expanded, shown) = card(&seen, "afterListClick", "Cargo.lock");
    assert_eq!(expanded, "true");
    assert!(shown > 0, "{seen:#}");
    assert_eq!(seen["focused"], "Cargo.lock", "{seen:#}");

    // Changes requested from the page; the agent changes src/lib.rs only;
    // gated again.
    let nudges = d.all_events(&format!("&policy={pid}&types=nudge"));
    assert_eq!(
        nudges[0]["payload"]["comments"],
        json!([{"path": "src/lib.rs", "line": 2, "side": "new", "body": "Name it a3."}]),
        "{nudges:?}"
    );
    s.write_ws("src/lib.rs", "fn a() {}\nfn a3() {}\n");
    d.report("s1", "turn-end");
    let again = d.wait_status(&pid, "awaiting-ack", T);
    assert_ne!(again["plan"]["snapshot"]["tree"], tree.as_str());
    let seen = run("again");
    // The changed file: shown again, unticked; the unchanged one viewed.
    let (viewed, expanded, shown) = card(&seen, "atFirst", "src/lib.rs");
    assert_eq!((viewed, expanded.as_str()), (false, "true"), "{seen:#}");
    assert!(shown > 0, "{seen:#}");
    assert_eq!(
        card(&seen, "atFirst", "src/other.rs"),
        (true, "false".into(), 0),
        "{seen:#}"
    );
    // The earlier round, listed with its comment.
    let rounds = seen["rounds"].as_array().expect("rounds");
    assert_eq!(rounds.len(), 1, "{seen:#}");
    assert!(
        rounds[0]
            .as_str()
            .is_some_and(|r| r.contains("src/lib.rs:2") && r.contains("Name it a3.")),
        "{seen:#}"
    );
    // What changed since that review: src/lib.rs's a2 → a3 only; then the
    // whole change again.
    assert_eq!(seen["sinceShown"], true, "{seen:#}");
    assert_eq!(seen["sinceFiles"], json!(["src/lib.rs"]), "{seen:#}");
    assert_eq!(
        seen["sinceRows"],
        json!(["-fn a2() {}", "+fn a3() {}"]),
        "{seen:#}"
    );
    assert_eq!(
        seen["wholeFiles"],
        json!(["Cargo.lock", "src/lib.rs", "src/other.rs"]),
        "{seen:#}"
    );
}
