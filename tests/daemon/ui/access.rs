//! The page's accessibility, checked by axe-core (pinned, installed by
//! scripts/install-browser.sh) in a real headless Chromium
//! (tests/support/browser/access_flow.py): no violation on the policy page
//! (a coloured diff with added and removed lines, a gate run, the
//! actions) nor on the inbox; one `<main>`; a focused line's ring is
//! drawn (issue 53: the ring was about 2:1, a `<main>` was missing, and
//! text on tinted rows fell under 4.5:1).

use crate::common;

use super::T;
use common::daemon::{git_commit_all, with_s1};
use serde_json::json;
use std::path::Path;

#[test]
fn axe_finds_no_violation_on_the_policy_page_and_the_inbox() {
    let axe = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/browser-axe/node_modules/axe-core/axe.min.js");
    assert!(
        axe.exists(),
        "no axe-core at {}: run scripts/install-browser.sh",
        axe.display()
    );
    let (s, d) = with_s1();
    s.write_ws(
        "src/lib.rs",
        "// the answer\npub fn answer() -> u32 {\n    41\n}\nconst S: &str = \"old\";\n",
    );
    git_commit_all(&s.ws, "before");
    s.write_ws(
        "src/lib.rs",
        "// the answer, again\npub fn answer() -> u32 {\n    42\n}\nconst S: &str = \"new\";\n",
    );
    let pid = d.attach(json!({
        "sessionId": "s1",
        "gate": {"command": "true"},
        "then": "commit",
        "commit": {"paths": ["src"], "message": "the answer"}
    }));
    d.report("s1", "turn-end");
    d.wait_status(&pid, "awaiting-ack", T);
    let link = super::ui_link(&d, &["--policy", &pid]);
    let seen = super::Browser::new(&s, "access")
        .run("access_flow.py", &[&link, &axe.display().to_string()]);
    assert_eq!(seen["policy"], json!([]), "the policy page: {seen:#}");
    assert_eq!(seen["inbox"], json!([]), "the inbox: {seen:#}");
    assert_eq!(seen["mains"], 1, "{seen:#}");
    let ring = seen["focusRing"]["outline"].as_str().unwrap_or_default();
    assert!(
        ring.starts_with("solid 3px rgb(5, 80, 174)"),
        "a focused line's ring: {seen:#}"
    );
}
