//! A replaced operator token ends the page's logins it opened
//! (`gatehost token rotate`): the cookie that read before reads nothing
//! after, and the new token logs in again.

use super::{Page, login, send};
use crate::common::daemon::Daemon;
use crate::common::daemon::scratch_config;

#[test]
fn rotating_the_operator_token_ends_the_page_s_logins() {
    let (s, cfg) = scratch_config(&[]);
    let mut d = Daemon::start(&s.etc.join("d"), &cfg);
    let read = |p: &Page<'_>| {
        send(
            reqwest::Method::GET,
            format!("{}/v1/passkeys", p.d.url),
            &[("cookie", &p.cookie), ("x-csrf-token", &p.csrf)],
            None,
        )
    };
    let page = Page::login(&d);
    assert_eq!(read(&page).status, 200, "{}", read(&page).body);
    // The agent token only: the page's login stays.
    let run = d.cli(&["token", "rotate", "--agent"], &d.operator);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(read(&page).status, 200);
    let run = d.cli(&["token", "rotate", "--operator"], &d.operator);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Ended at once (the task that ends them runs beside the answer).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while read(&page).status != 401 {
        assert!(
            std::time::Instant::now() < deadline,
            "the login still reads"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        login(&d, &d.operator).refused(),
        "the old token logs in no more"
    );
    d.operator = std::fs::read_to_string(d.data.join("operator.token"))
        .expect("read")
        .trim()
        .to_string();
    let again = Page::login(&d);
    assert_eq!(read(&again).status, 200);
}
