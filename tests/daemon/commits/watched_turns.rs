//! The watch kept on the commit paths between turns, through a real
//! daemon (issue 52): the first snapshot walks every file and logs why,
//! the next ones read only what changed, and every snapshot holds what
//! the workspace holds; an approved commit of the last snapshot leaves the
//! watch vouching.

use super::{T, approve, commit_policy, setup_with};
use crate::common;
use common::daemon::git_out;

#[test]
fn turns_after_the_first_read_through_the_watch_and_hold_what_changed() {
    let (s, d) = setup_with("", "");
    s.write_ws("src/a.txt", "one\n");
    let walks = || d.log().matches("walking them all").count();
    // Each turn: the snapshot's `src/a.txt` and `src/new/b.txt` (or "-").
    let turn = |approve_it: bool| -> (String, String) {
        let pid = d.attach(commit_policy(&["src"], true));
        d.report("s1", "turn-end");
        let p = d.wait_status(&pid, "awaiting-ack", T);
        let tree = common::daemon::snapshot_tree(&p);
        let show = |path: &str| {
            let listed = git_out(&s.ws, &["ls-tree", "-r", "--name-only", &tree]);
            if listed.lines().any(|l| l == path) {
                git_out(&s.ws, &["show", &format!("{tree}:{path}")])
            } else {
                "-".to_string()
            }
        };
        let seen = (show("src/a.txt"), show("src/new/b.txt"));
        if approve_it {
            approve(&d, &pid);
        } else {
            d.cli_ok(&["policy", "ack", &pid, "--reject"], &d.operator);
        }
        seen
    };
    assert_eq!(turn(false), ("one\n".into(), "-".into()));
    assert_eq!(walks(), 1, "the first snapshot walks: {}", d.log());
    assert!(
        d.log().contains("no watch yet"),
        "and says why: {}",
        d.log()
    );
    s.write_ws("src/a.txt", "two\n");
    assert_eq!(turn(false), ("two\n".into(), "-".into()));
    s.write_ws("src/new/b.txt", "b\n");
    assert_eq!(turn(true), ("two\n".into(), "b\n".into()));
    // Committed: HEAD is the last snapshot, the watch still vouches.
    std::fs::remove_file(s.ws.join("src/a.txt")).expect("rm");
    assert_eq!(turn(false), ("-".into(), "b\n".into()));
    assert_eq!(turn(false), ("-".into(), "b\n".into()));
    assert_eq!(
        walks(),
        1,
        "later turns read through the watch: {}",
        d.log()
    );
}
