//! The gates' worktrees seen through an overlay, through a real daemon
//! (issue 52): what a gate writes, changes or removes in its worktree
//! lands in a layer of its run's own, so the worktree is as the snapshot
//! made it when the run ends, and nothing is read back (no settle, whose
//! cost grew with the repository).

use crate::common;

use common::daemon::{Daemon, allow_config_with, git_scratch};
use serde_json::json;
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

/// The gate: it fails unless it runs on the overlay, then writes, appends
/// to and removes what the snapshot holds, and checks the code.
const GATE: &str = "grep -q ' - overlay gatehost-overlay ' /proc/self/mountinfo || { echo 'no overlay' >&2; exit 3; }; \
     echo junk > junk.txt; echo more >> src.txt; mkdir -p made/deep; rm keep.txt; grep -q good src.txt";

/// A git scratch area and a daemon (logging at debug) whose worktrees are
/// under its `wt`, with `keys` in `[daemon]`; `s1` registered.
fn daemon_with(keys: &str) -> (common::Scratch, Daemon, std::path::PathBuf) {
    let s = git_scratch();
    let wt_root = s.etc.join("wt");
    let dir = format!("worktree_dir = {:?}\n", wt_root.display().to_string());
    let cfg = s.write(
        "config.toml",
        &allow_config_with(&[], &format!("{dir}{keys}")),
    );
    let debug = [("GATEHOST_LOG", "gatehost=debug,gatehost_git=debug")];
    let d = Daemon::start_with_env(&s.etc.join("data"), &cfg, &debug);
    d.register("s1", &s.ws);
    (s, d, wt_root)
}

#[test]
fn a_gates_writes_to_its_worktree_never_reach_it() {
    let (s, d, wt_root) = daemon_with("");
    s.write_ws("src.txt", "good\n");
    s.write_ws("keep.txt", "kept\n");
    for round in 0..2 {
        let pid = d.attach_operator(json!({
            "sessionId": "s1",
            "gate": {"command": "bash", "args": ["-c", GATE]},
            "onFail": {"maxRetries": 0},
            "then": "commit",
            "commit": {"paths": ["src.txt", "keep.txt"], "message": "m", "requireHumanAck": true}
        }));
        d.report("s1", "turn-end");
        let p = d.wait_status(&pid, "awaiting-ack", T);
        assert_eq!(p["verdict"]["outcome"], "pass", "round {round}: {p}");
        // The worktree, as the snapshot made it, the moment the verdict
        // is known.
        let worktrees: Vec<_> = std::fs::read_dir(&wt_root)
            .expect("the worktree root")
            .map(|e| e.expect("entry").path())
            .filter(|p| {
                !p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
            })
            .collect();
        assert_eq!(worktrees.len(), 1, "{worktrees:?}");
        let wt = &worktrees[0];
        assert_eq!(
            std::fs::read_to_string(wt.join("src.txt")).expect("src"),
            "good\n"
        );
        assert_eq!(
            std::fs::read_to_string(wt.join("keep.txt")).expect("keep"),
            "kept\n"
        );
        assert!(
            !wt.join("junk.txt").exists() && !wt.join("made").exists(),
            "round {round}"
        );
        d.operator_ok("POST", &format!("/v1/policies/{pid}/cancel"), None);
    }
    // Neither run's worktree was read back after it.
    let log = d.log();
    assert_eq!(
        log.matches("saw the worktree through an overlay").count(),
        2,
        "{log}"
    );
    assert!(!log.contains("worktree settled"), "a settle ran: {log}");
}

/// `[daemon] worktree_overlay = false`: the gates write the worktree
/// itself (no overlay in their mount table), and it is settled back to its
/// tree after the run, as before.
#[test]
fn with_the_overlay_off_the_gates_write_the_worktree_and_it_is_settled_back() {
    let (s, d, wt_root) = daemon_with("worktree_overlay = false\n");
    s.write_ws("src.txt", "good\n");
    let pid = d.attach_operator(json!({
        "sessionId": "s1",
        "gate": {"command": "bash", "args": ["-c", "! grep -q gatehost-overlay /proc/self/mountinfo && echo junk > junk.txt"]},
        "onFail": {"maxRetries": 0},
        "then": "commit",
        "commit": {"paths": ["src.txt"], "message": "m", "requireHumanAck": true}
    }));
    d.report("s1", "turn-end");
    let p = d.wait_status(&pid, "awaiting-ack", T);
    assert_eq!(p["verdict"]["outcome"], "pass", "{p}");
    d.wait_log("worktree settled after the run", T);
    let log = d.log();
    assert!(
        !log.contains("saw the worktree through an overlay"),
        "{log}"
    );
    let junk: Vec<_> = std::fs::read_dir(&wt_root)
        .expect("the worktree root")
        .map(|e| e.expect("entry").path().join("junk.txt"))
        .filter(|p| p.exists())
        .collect();
    assert!(
        junk.is_empty(),
        "the settle removes what the gate wrote: {junk:?}"
    );
}
