//! The granted caches of the operator's worktrees (`[daemon]
//! worktree_caches`) through a real daemon (issue 48, item 8): a gate runs
//! the agent's code, so what that code stamps into a granted cache in one
//! turn must never decide the next turn's verdict. The classic carrier: a
//! build tool that trusts its cache's timestamps (make) skips the check a
//! later, honest-looking tree would fail.

use crate::common;

use common::daemon::{Daemon, allow_config_with, git_scratch};
use serde_json::{Value, json};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

/// Turn 1's Makefile: stamps a result far in the future into the cache.
const POISONER: &str =
    "check:\n\tmkdir -p cache && touch -d 2099-01-01 cache/result.stamp && grep -q good src.txt\n";

/// Turn 2's Makefile, as a reviewer would read it: the check runs unless
/// its result is newer than its input.
const HONEST: &str = "check: cache/result.stamp\ncache/result.stamp: src.txt\n\tgrep -q good src.txt\n\tmkdir -p cache && touch cache/result.stamp\n";

/// Attaches, with the operator token, a commit policy whose gate is
/// `make -s check` in the snapshot's worktree; ends s1's turn; returns the
/// settled policy.
fn operator_turn(d: &Daemon, want: &str) -> Value {
    let pid = d.attach_operator(json!({
        "sessionId": "s1",
        "gate": {"command": "make", "args": ["-s", "check"]},
        "onFail": {"maxRetries": 0},
        "then": "commit",
        "commit": {"paths": ["src.txt", "Makefile", ".gitignore"], "message": "m", "requireHumanAck": true}
    }));
    d.report("s1", "turn-end");
    d.wait_status(&pid, want, T)
}

#[test]
fn a_result_one_turn_stamped_into_a_granted_cache_never_passes_the_next_turn() {
    let s = git_scratch();
    let cfg = s.write(
        "config.toml",
        &allow_config_with(&["make"], "worktree_caches = [\"cache\"]\n"),
    );
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    d.register("s1", &s.ws);
    s.write_ws(".gitignore", "cache/\n");
    // Turn 1: failing code, and a Makefile that stamps the cache.
    s.write_ws("src.txt", "bad\n");
    s.write_ws("Makefile", POISONER);
    let first = operator_turn(&d, "blocked");
    assert_eq!(first["verdict"]["outcome"], "fail", "{first}");
    // Turn 2: the same failing code, an honest-looking Makefile.
    s.write_ws("Makefile", HONEST);
    let second = operator_turn(&d, "blocked");
    assert_eq!(
        second["verdict"]["outcome"], "fail",
        "the stamp turn 1 left decided turn 2: {second}"
    );
    // Fixed code passes: its tree's run builds its own stamp.
    s.write_ws("src.txt", "good\n");
    let third = operator_turn(&d, "awaiting-ack");
    assert_eq!(third["verdict"]["outcome"], "pass", "{third}");
}
