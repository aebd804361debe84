//! What a daemon killed (SIGKILL, a crash) leaves behind, and how the next
//! one deals with it: a lock its child still holds, the agents it started
//! (they die with it; their children at the restart), its gates' private
//! directories (reclaimed), and a registration it stored but never
//! answered (the same session at the agent's next call).

use crate::common;
use crate::common::shorthand::{assert_has, etc_dir};

use common::daemon::{Daemon, scratch_config, script_gate_json};
use common::{Scratch, allow_config, assert_no_survivors, marker};
use serde_json::json;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(60);

/// A daemon SIGKILLed while it started a gate: the child between its
/// clone and its exec holds a copy of the lock's descriptor for a moment
/// (seen once in 200 kills under load: the restart was refused). A start
/// whose lock is held by something other than a live daemon waits for it,
/// a bounded time. Here the dead daemon's pid is in the lock file and a
/// process (flock(1)) that releases it within a second holds the lock.
#[test]
fn a_restart_waits_for_a_lock_a_dead_daemons_child_still_holds() {
    let (s, cfg) = scratch_config(&["true"]);
    let data = etc_dir(&s, "data");
    let lock = data.join("serve.lock");
    // A pid that no process has (above the kernel's pid_max default).
    std::fs::write(&lock, "4194304").expect("write");
    let mut holder = std::process::Command::new("flock")
        .args(["-x", &lock.display().to_string(), "sleep", "0.8"])
        .spawn()
        .expect("flock(1)");
    // The holder has the lock before the daemon starts.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while rustix::fs::flock(
        std::fs::File::open(&lock).expect("open"),
        rustix::fs::FlockOperation::NonBlockingLockShared,
    )
    .is_ok()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "flock(1) never locked"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let d = Daemon::start(&data, &cfg);
    assert_eq!(d.agent_ok("GET", "/v1/health", None)["ok"], true);
    holder.wait().expect("wait");
}

/// A directory named for `m` (so that `survivors(m)` finds what runs from
/// it) holding a `sleep`.
fn marked_sleep(s: &Scratch, m: &str) -> std::path::PathBuf {
    let dir = s.etc.join(format!("gatehost-test-{m}"));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let sleep = dir.join("sleep");
    let real = ["/usr/bin/sleep", "/bin/sleep"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("a sleep program");
    std::os::unix::fs::symlink(real, &sleep).expect("symlink");
    sleep
}

fn wait_gone(m: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while !common::survivors(m).is_empty() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Agents `session start` runs die with the daemon, SIGKILL included (the
/// kernel's parent-death signal), and what they started (their process
/// group) is killed by the next daemon, which says so in the session's
/// `session:exited`. (Before, both kept running, unowned.)
#[test]
fn agents_started_by_the_daemon_die_when_it_is_sigkilled_and_their_children_at_restart() {
    let (s, cfg) = scratch_config(&[]);
    let mut d = Daemon::start(&s.etc.join("data"), &cfg);
    let (lone, shell, child) = (marker("agent"), marker("shell"), marker("child"));
    let sleep = marked_sleep(&s, &lone);
    let child_sleep = marked_sleep(&s, &child);
    // In its workspace: a started agent is confined, and reads nothing of
    // the test's configuration directory.
    let script_dir = s.ws.join(format!("gatehost-test-{shell}"));
    std::fs::create_dir_all(&script_dir).expect("mkdir");
    let script = script_dir.join("agent.sh");
    std::fs::write(
        &script,
        format!("{:?} 301 &\nwait\n", child_sleep.display().to_string()),
    )
    .expect("script");
    for (id, command) in [
        ("lone", json!([sleep, "300"])),
        ("shell", json!(["bash", script])),
    ] {
        let (code, body) = d.post(
            "/v1/sessions/start",
            &d.operator,
            Some(json!({"id": id, "cwd": s.ws, "command": command})),
        );
        assert_eq!(code, 200, "{body}");
    }
    let deadline = Instant::now() + T;
    while [&lone, &shell, &child]
        .iter()
        .any(|m| common::survivors(m).is_empty())
    {
        assert!(Instant::now() < deadline, "the agents never started");
        std::thread::sleep(Duration::from_millis(20));
    }

    d.kill9();
    let lone_gone = wait_gone(&lone, Duration::from_secs(5));
    let shell_gone = wait_gone(&shell, Duration::from_secs(5));
    // (Cleans up before failing.)
    let child_left = !common::survivors(&child).is_empty();
    if !(lone_gone && shell_gone) {
        let left: Vec<_> = [&lone, &shell, &child]
            .iter()
            .flat_map(|m| common::survivors(m))
            .collect();
        for pid in &left {
            // SAFETY: kill(2) with a pid this test's markers found.
            unsafe { libc::kill(*pid, libc::SIGKILL) };
        }
        panic!("agents outlived their SIGKILLed daemon: {left:?}");
    }
    // The signal reaches the agent only: its own child is still there...
    assert!(
        child_left,
        "the agent's child died with it: the test proves less than it says"
    );

    // ...until the next daemon starts.
    d.restart();
    assert_no_survivors(&child);
    let said = |id: &str| {
        d.all_events(&format!("&session={id}"))
            .into_iter()
            .find(|e| e["type"] == "session:exited")
            .map(|e| e.to_string())
            .unwrap_or_else(|| panic!("no session:exited for {id}"))
    };
    let lone_said = said("lone");
    assert_has(&lone_said, "died with it");
    let shell_said = said("shell");
    assert_has(&shell_said, "gatehost killed the 1 process(es) it left");
}

/// The private directories of gates whose daemon was killed mid-run are
/// reclaimed when the daemon starts again (issue 48, item 11: 131 were
/// left after 330 kills); the gate processes die with the daemon.
#[test]
fn scratch_directories_of_gates_a_killed_daemon_ran_are_reclaimed_at_start() {
    use std::path::{Path, PathBuf};
    let s = Scratch::new();
    let scratch = s.etc.join("scratch");
    let cfg = allow_config(&["true"]).replace(
        "[sandbox]\n",
        &format!("[sandbox]\nscratch_dir = \"{}\"\n", scratch.display()),
    );
    let cfg = s.write("config.toml", &cfg);
    let mut d = Daemon::start(&s.etc.join("data"), &cfg);
    let m = marker("reclaim");
    let gate = script_gate_json("gates/hang.sh", &[&m], 60_000);
    let mut ids = Vec::new();
    for sid in ["a", "b", "c"] {
        d.register(sid, &s.ws);
        ids.push(d.attach(json!({"sessionId": sid, "gate": gate})));
        d.report(sid, "turn-end");
    }
    for id in &ids {
        d.wait_status(id, "gating", T);
    }
    let left = |scratch: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(scratch)
            .map(|r| {
                r.flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with("g-"))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    common::eventually_within(T, "three gates' directories", || left(&scratch).len() == 3);
    d.kill9();
    let orphans = left(&scratch);
    assert_eq!(orphans.len(), 3, "{orphans:?}");
    // As a crash loop leaves them: older than a reclaim waits for.
    let old = std::time::SystemTime::now() - Duration::from_secs(3600);
    for p in &orphans {
        std::fs::File::open(p)
            .expect("open")
            .set_modified(old)
            .expect("age");
    }
    d.restart();
    let deadline = Instant::now() + T;
    while orphans.iter().any(|p| p.exists()) {
        assert!(
            Instant::now() < deadline,
            "never reclaimed: {:?}\nlog:\n{}",
            left(&scratch),
            d.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_has(&d.log(), "its dead host left");
    // The restarted daemon ran the three gates again: cancelled, they end.
    for id in &ids {
        let (code, body) = d.post(&format!("/v1/policies/{id}/cancel"), &d.operator, None);
        assert_eq!(code, 200, "{body}");
    }
    assert_no_survivors(&m);
}

/// A registration whose answer was lost (the daemon died after it stored
/// the session, before it answered; 22 of 2,806 registrations in crash
/// loops) is recovered by the agent's next registration: the client made
/// and kept the key before it asked, the session was stored with it, and
/// the next call presents it. Never a session without its key for good,
/// so ungated for its whole life (issue 48, item 11).
#[test]
fn a_registration_whose_answer_was_lost_is_the_same_session_next_time() {
    let (s, cfg) = scratch_config(&["true"]);
    let data = s.etc.join("data");
    let id = "claude:lost";
    let mut dying =
        Daemon::start_with_env(&data, &cfg, &[("GATEHOST_TEST_ABORT_AFTER_REGISTER", id)]);
    let input = gatehost::wire::RegisterRequest {
        id: Some(id.to_string()),
        cwd: s.ws.display().to_string(),
        ..Default::default()
    };
    let lost = dying.block(dying.client().register(&input));
    assert!(lost.is_err(), "the answer should have been lost: {lost:?}");
    assert!(dying.wait_exit(T), "the daemon died before answering");
    let d = Daemon::start(&data, &cfg);
    // It was stored, with the key the client kept before it asked.
    let (code, stored) = d.get(&format!("/v1/sessions/{id}"), &d.operator);
    assert_eq!(code, 200, "{stored}");
    assert_eq!(d.keyring().get(id).len(), 1);
    // The hook's next call registers again and reports: the same session.
    d.register(id, &s.ws);
    let r = d.report(id, "turn-end");
    assert_eq!(r["ungated"], true, "{r}");
    let pid = d.attach(json!({"sessionId": id, "gate": {"command": "true"}, "watchFrom": "now"}));
    d.report(id, "turn-end");
    d.wait_status(&pid, "done", T);
}
