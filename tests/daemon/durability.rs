//! SIGKILL at any moment: policies continue from their stored state,
//! nothing is lost or doubled, waiting clients resume.

use crate::common;
use crate::common::shorthand::assert_has;

use common::chaos::{Lcg, seed, with_retry};
use common::daemon::{
    Daemon, allow_config_with, git_out, git_scratch, scratch_config, script_gate_json, wait_started,
};
use common::{Scratch, assert_no_survivors, marker};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(60);

#[test]
fn a_gate_running_when_the_daemon_dies_runs_again_after_restart_and_nothing_doubles() {
    let (s, cfg) = scratch_config(&["true"]);
    let mut d = Daemon::start(&s.etc.join("data"), &cfg);
    d.register("s1", &s.ws);
    let m = marker("restart");
    let gate = script_gate_json("gates/sleep-then-pass.sh", &[&m, "2"], 30_000);
    let pid = d.attach(json!({"sessionId": "s1", "gate": gate}));
    d.report("s1", "turn-end");
    d.wait_status(&pid, "gating", T);
    wait_started(&m, T);
    d.restart();
    // The orphaned gate of the dead daemon is killed; the policy gates again.
    d.wait_runs(&pid, "done", 2, T);
    assert_no_survivors(&m);
    let events = d.policy_events(&pid);
    assert_eq!(
        events.iter().filter(|e| *e == "policy:passed").count(),
        1,
        "{events:?}"
    );
    assert_eq!(events.iter().filter(|e| *e == "policy:attached").count(), 1);
    let all = d.all_events("");
    let cursors: Vec<i64> = all
        .iter()
        .map(|e| e["cursor"].as_i64().expect("cursor"))
        .collect();
    assert!(
        cursors.windows(2).all(|w| w[0] < w[1]),
        "cursors only grow: {cursors:?}"
    );
}

#[test]
fn wait_keeps_waiting_across_a_daemon_restart() {
    let (s, cfg) = scratch_config(&["true"]);
    let mut d = Daemon::start(&s.etc.join("data"), &cfg);
    d.register("s1", &s.ws);
    let pid = d.attach(json!({"sessionId": "s1", "gate": {"command": "true"}}));
    let mut waiter = std::process::Command::new(env!("CARGO_BIN_EXE_gatehost"))
        .args(["wait", "--policy", &pid, "--timeout", "60s"])
        .env("GATEHOST_SERVER", &d.url)
        .env("GATEHOST_TOKEN", &d.agent)
        // The agent's keyring: reading its policy takes its session's key.
        .env("GATEHOST_SESSION_KEYS", d.keyring().dir())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn wait");
    std::thread::sleep(Duration::from_millis(500));
    d.kill9();
    std::thread::sleep(Duration::from_millis(700));
    assert!(
        waiter.try_wait().expect("try_wait").is_none(),
        "wait must survive the daemon's death"
    );
    d.restart();
    d.report("s1", "turn-end");
    let deadline = Instant::now() + T;
    let status = loop {
        if let Some(st) = waiter.try_wait().expect("try_wait") {
            break st;
        }
        if Instant::now() > deadline {
            let _ = waiter.kill();
            panic!("wait did not return");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0));
}

#[test]
fn two_hundred_commit_lifecycles_and_their_next_chains_under_random_sigkills_lose_and_double_nothing()
 {
    const N: usize = 200;
    let s = git_scratch();
    // Every event is also posted to a URL nobody listens on (given up
    // after 2 tries), and retention deletes finished deliveries every
    // second; 3 % of the store's write transactions fail as on a full
    // disk (a test hook), so every task's error path and the sweep run.
    let cfg = s.write(
        "config.toml",
        &format!(
            "{}
[retention]
every = \"1s\"
deliveries_max_age = \"1s\"
",
            allow_config_with(
                &["true"],
                "webhook_url = \"http://127.0.0.1:9/dead\"\nwebhook_max_attempts = 2\n"
            )
        ),
    );
    let mut d = Daemon::start_with_env(
        &s.etc.join("data"),
        &cfg,
        &[("GATEHOST_TEST_STORE_FAULTS", "3")],
    );
    let seed = seed("crash test");
    let mut rng = Lcg(seed);
    let mut kills = 0;
    for i in 0..N {
        let sid = format!("s{i}");
        s.write_ws(&format!("f/{i}.txt"), &format!("file {i}\n"));
        with_retry("the crash test", || {
            let (c, _) = d.post(
                "/v1/sessions",
                &d.agent,
                Some(json!({"id": sid, "cwd": s.ws})),
            );
            (c == 200).then_some(())
        });
        // A lost answer or a refusal (503: an injected store fault) is
        // retried with the same idempotency key: one policy either way.
        let label = format!("p{i}");
        let mut spec = json!({
            "sessionId": sid, "label": label, "gate": {"command": "true"}, "then": "commit",
            "commit": {"paths": [format!("f/{i}.txt")], "message": format!("commit {i}"), "requireHumanAck": false}
        });
        // Every other policy chains a `next`: it must be attached exactly once.
        if i % 2 == 0 {
            spec["next"] = json!({"gate": {"command": "true"}, "label": format!("child{i}")});
        }
        spec["idempotencyKey"] = json!(format!("attach-{i}"));
        with_retry("the crash test", || {
            // Committing without a human's ack is the operator's to ask.
            let r = d.http_try(
                "POST",
                "/v1/policies",
                Some(&d.operator),
                Some(spec.clone()),
            );
            match r {
                Some((201, _)) => Some(()),
                Some((503, _)) | None => None,
                Some((c, v)) => panic!("attach {i}: HTTP {c}: {v}"),
            }
        });
        with_retry("the crash test", || {
            let r = d.http_try(
                "POST",
                &format!("/v1/sessions/{sid}/report"),
                Some(&d.agent),
                Some(json!({"kind": "turn-end"})),
            )?;
            (r.0 == 200).then_some(())
        });
        // Every lifecycle is killed at some point of its gate or commit.
        std::thread::sleep(Duration::from_millis(rng.below(40)));
        d.restart();
        kills += 1;
    }
    assert!(kills >= 200, "only {kills} kills (seed {seed})");
    // Let everything settle, then check.
    let settling = Instant::now();
    let deadline = settling + Duration::from_secs(120);
    let total = N + N / 2;
    let mut at_last_kill = None;
    let policies = loop {
        let (_, v) = d.get("/v1/policies?limit=1000", &d.operator);
        let list = v["policies"].as_array().cloned().unwrap_or_default();
        let done = list.iter().filter(|p| p["status"] == "done").count();
        at_last_kill.get_or_insert((done, list.len()));
        if done == total || Instant::now() > deadline {
            eprintln!(
                "crash test: {done} of {total} done {:?} after the last kill ({at_last_kill:?} done and attached at it; seed {seed})",
                settling.elapsed()
            );
            break list;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let refused = d.all_events("&types=next-refused");
    assert!(
        refused.is_empty(),
        "next refused (seed {seed}): {refused:?}"
    );
    if let Some(orphan) = policies
        .iter()
        .find(|p| p["spec"]["next"].is_object() && !p["nextId"].is_string())
    {
        let id = orphan["id"].as_str().unwrap_or("");
        panic!(
            "parent without its next (seed {seed}): {orphan}\nevents: {:?}",
            d.policy_events(id)
        );
    }
    let mut by_label: BTreeMap<String, usize> = BTreeMap::new();
    for p in &policies {
        *by_label
            .entry(p["spec"]["label"].as_str().unwrap_or("").to_string())
            .or_default() += 1;
    }
    assert_eq!(
        policies.len(),
        total,
        "lost or doubled policies (seed {seed}): {by_label:?}"
    );
    for p in policies.iter().filter(|p| p["parentId"].is_string()) {
        let parent = p["parentId"].as_str().unwrap_or("");
        let label = p["spec"]["label"].as_str().unwrap_or("");
        let parent_label = policies
            .iter()
            .find(|q| q["id"] == parent)
            .map(|q| q["spec"]["label"].clone());
        assert_eq!(
            parent_label,
            Some(json!(label.replace("child", "p"))),
            "child {label} of the wrong parent"
        );
    }
    assert!(by_label.values().all(|n| *n == 1));
    let not_done: Vec<&Value> = policies.iter().filter(|p| p["status"] != "done").collect();
    // Each one's events and the log's lines that name it (the whole log
    // of 200 lives is too long for a failure message to keep).
    let said: Vec<String> = not_done
        .iter()
        .map(|p| {
            let id = p["id"].as_str().unwrap_or("");
            let log = d.log();
            let lines: Vec<&str> = log.lines().filter(|l| l.contains(id)).collect();
            format!(
                "{id}: {:?}\n{}",
                d.policy_events(id),
                lines[lines.len().saturating_sub(40)..].join("\n")
            )
        })
        .collect();
    assert!(
        not_done.is_empty(),
        "not done (seed {seed}): {not_done:?}\n{}",
        said.join("\n")
    );
    let events = d.all_events("");
    let cursors: Vec<i64> = events
        .iter()
        .map(|e| e["cursor"].as_i64().expect("cursor"))
        .collect();
    // No event id skipped or doubled: the cursors are exactly 1..=head.
    let head = cursors.last().copied().unwrap_or(0);
    assert_eq!(
        cursors,
        (1..=head).collect::<Vec<i64>>(),
        "event ids skipped or doubled (seed {seed})"
    );
    assert!(
        d.log().contains("injected by GATEHOST_TEST_STORE_FAULTS"),
        "no store fault was injected (seed {seed})"
    );
    let mut committed: BTreeMap<String, usize> = BTreeMap::new();
    let mut shas = BTreeSet::new();
    for e in events.iter().filter(|e| e["type"] == "policy:committed") {
        *committed
            .entry(e["policyId"].as_str().unwrap_or("").to_string())
            .or_default() += 1;
        shas.insert(e["payload"]["sha"].as_str().unwrap_or("").to_string());
    }
    assert_eq!(
        committed.len(),
        N,
        "a policy:committed per policy (seed {seed})"
    );
    assert!(
        committed.values().all(|n| *n == 1),
        "policy:committed published twice (seed {seed})"
    );
    for kind in ["policy:passed", "policy:done", "policy:attached"] {
        let n = events.iter().filter(|e| e["type"] == kind).count();
        assert_eq!(n, total, "{kind} count (seed {seed})");
    }
    // The repository holds each file exactly once, in N commits on top of init.
    let log = git_out(&s.ws, &["log", "--format=%H"]);
    assert_eq!(
        log.lines().count(),
        N + 1,
        "commits made twice or lost (seed {seed})"
    );
    let names = git_out(&s.ws, &["log", "--name-only", "--format="]);
    let mut per_file: BTreeMap<&str, usize> = BTreeMap::new();
    for n in names.lines().filter(|l| l.starts_with("f/")) {
        *per_file.entry(n).or_default() += 1;
    }
    assert_eq!(per_file.len(), N);
    assert!(per_file.values().all(|n| *n == 1));
    // The index followed every commit: nothing under f/ shows as changed.
    let status = git_out(&s.ws, &["status", "--porcelain", "--", "f"]);
    assert_eq!(status, "", "index out of step after crashes (seed {seed})");
    for sha in &shas {
        assert!(
            log.contains(sha.as_str()),
            "published sha {sha} is not in the history"
        );
    }
}

/// A 4 kB turn-start report of `s1` (as the agent): what fills a disk.
fn bulky_report(d: &Daemon) -> (u16, Value) {
    let report = json!({"kind": "turn-start", "message": "x".repeat(4000)});
    d.post("/v1/sessions/s1/report", &d.agent, Some(report))
}

/// An 8 MiB tmpfs mounted at `s.etc/mnt` (the test needs root, as on the
/// CI machines); its path and the guard that unmounts it.
fn scratch_tmpfs(s: &Scratch) -> (std::path::PathBuf, Unmount) {
    let mnt = s.etc.join("mnt");
    let mounted = mount_tmpfs(&mnt, "8m");
    assert!(
        mounted,
        "this test needs to mount a tmpfs (root, as on the CI machines)"
    );
    (mnt.clone(), Unmount(mnt))
}

fn mount_tmpfs(dir: &std::path::Path, size: &str) -> bool {
    std::fs::create_dir_all(dir).expect("mkdir");
    std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(dir)
        .status()
        .is_ok_and(|s| s.success())
}

struct Unmount(std::path::PathBuf);
impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Fills the filesystem holding `dir` until a write fails; returns the filler.
fn fill(dir: &std::path::Path) -> std::path::PathBuf {
    use std::io::Write;
    let p = dir.join("filler");
    let mut f = std::fs::File::create(&p).expect("filler");
    let chunk = vec![0u8; 16 * 1024];
    while f.write_all(&chunk).is_ok() {}
    let _ = f.sync_all();
    p
}

#[test]
fn a_full_or_read_only_data_directory_answers_503_writes_nothing_half_and_recovers() {
    let (s, cfg) = scratch_config(&["true"]);
    let (mnt, _guard) = scratch_tmpfs(&s);
    let data = mnt.join("data");
    let d = Daemon::start(&data, &cfg);
    d.register("s1", &s.ws);
    let pid = d.attach(json!({"sessionId": "s1", "gate": {"command": "true"}, "watchFrom": "now"}));
    let before = d.all_events("").len();
    let filler = fill(&mnt);
    // Writes may still fit in pages SQLite already holds; sooner or later
    // one needs space and must be refused whole.
    let mut ok = 0;
    let mut refused = None;
    for _ in 0..2000 {
        let (code, v) = bulky_report(&d);
        match code {
            200 => ok += 1,
            _ => {
                refused = Some((code, v));
                break;
            }
        }
    }
    let (code, v) = refused.expect("a full disk never refused a write");
    assert_eq!(code, 503, "{v}");
    assert_eq!(v["error"]["code"], "store-unavailable", "{v}");
    // Nothing half-written: exactly one event per accepted report.
    assert_eq!(
        d.all_events("").len(),
        before + ok,
        "events vs accepted reports"
    );
    assert_eq!(d.policy(&pid)["status"], "watching");
    // Space returns: the daemon works again without a restart.
    std::fs::remove_file(&filler).expect("rm filler");
    d.report("s1", "turn-end");
    d.wait_status(&pid, "done", T);
    // A read-only data directory: the daemon refuses to start, saying why,
    // and starts on the same store once it is writable again.
    let mut d = d;
    d.stop();
    let remount = |mode: &str| {
        std::process::Command::new("mount")
            .args(["-o", &format!("remount,{mode}")])
            .arg(&mnt)
            .status()
            .is_ok_and(|s| s.success())
    };
    // The gates' private directories lived on this filesystem, and Landlock
    // releases the inodes its rules named a moment after the last process
    // under them ended (deferred work): until then a read-only remount is
    // refused as busy. Retry for a few seconds.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !remount("ro") {
        assert!(std::time::Instant::now() < deadline, "remount read-only");
        std::thread::sleep(Duration::from_millis(100));
    }
    let err = serve_refused(&data, &cfg);
    assert!(
        err.contains("read-only") || err.contains("readonly"),
        "{err}"
    );
    assert!(remount("rw"), "remount read-write");
    let d = Daemon::start(&data, &cfg);
    assert_eq!(d.policy(&pid)["status"], "done");
}

#[test]
fn a_second_daemon_on_the_same_data_directory_refuses_to_start() {
    let (s, cfg) = scratch_config(&["true"]);
    let data = s.etc.join("data");
    let d = Daemon::start(&data, &cfg);
    let url_before = std::fs::read_to_string(data.join("server.url")).expect("server.url");
    let err = serve_refused(&data, &cfg);
    assert_has(&err, &format!("another gatehost serve (pid {})", d.pid()));
    // The first one's files are untouched and it still serves.
    assert_eq!(
        std::fs::read_to_string(data.join("server.url")).expect("server.url"),
        url_before
    );
    assert_eq!(d.agent_ok("GET", "/v1/health", None)["ok"], true);
    // Once it is gone (even by SIGKILL), a new one starts.
    let mut d = d;
    d.kill9();
    let d2 = Daemon::start(&data, &cfg);
    assert_eq!(d2.agent_ok("GET", "/v1/health", None)["ok"], true);
}

/// Runs `gatehost serve` on `data`, which must refuse to start (exit 2);
/// returns what it said.
fn serve_refused(data: &std::path::Path, cfg: &std::path::Path) -> String {
    let out = serve_to_exit(data, cfg, &[]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    err
}

/// Runs `gatehost serve` on `data` (with `env` added) to its exit: for a
/// daemon that must refuse to start or die by itself.
fn serve_to_exit(
    data: &std::path::Path,
    cfg: &std::path::Path,
    env: &[(&str, &str)],
) -> std::process::Output {
    common::daemon::serve_command(data, cfg, "127.0.0.1:0")
        .envs(env.iter().copied())
        .output()
        .expect("run")
}

/// Issue 12 #1: after a restart, recovery marks the sessions gatehost had
/// started exited, which starts the gate of a policy watching one; the
/// recovery that follows must not put that policy back in `queued` while
/// its gate runs (its verdict was then dropped and it stayed queued until
/// the next restart).
#[test]
fn a_policy_gated_by_recovery_itself_is_not_requeued_and_finishes() {
    let (s, cfg) = scratch_config(&["true"]);
    let mut d = Daemon::start(&s.etc.join("data"), &cfg);
    d.start_session("bot", &s.ws, &["--", "sleep", "600"]);
    let m = marker("recovery-gate");
    let gate = script_gate_json("gates/sleep-then-pass.sh", &[&m, "1"], 30_000);
    let pid = d.attach(json!({"sessionId": "bot", "watchFrom": "now", "gate": gate}));
    assert_eq!(d.policy(&pid)["status"], "watching");
    d.restart();
    // The session was marked exited at start: its gate ran (1 s), and the
    // policy settles, without another restart.
    let p = d.wait_status(&pid, "done", Duration::from_secs(20));
    assert_eq!(p["gateRuns"], 1, "{p}");
    d.stop();
    assert_no_survivors(&m);
}

/// Issue 12 #2: an agent that reports its turn-end as soon as it sees the
/// `policy:nudge` event, before the daemon's nudge task has run (a test
/// hook holds that task at a barrier until the turn-end is stored), is not
/// lost: the policy gates again. (Before, the task moved the watch past
/// that turn-end and the policy waited in `watching` for good.)
#[test]
fn a_turn_end_right_after_the_nudge_is_not_lost() {
    let (s, cfg) = scratch_config(&["true", "false"]);
    let barrier = s.etc.join("nudge-barrier").display().to_string();
    let d = Daemon::start_with_env(
        &s.etc.join("data"),
        &cfg,
        &[("GATEHOST_TEST_NUDGE_BARRIER", &barrier)],
    );
    d.register("s1", &s.ws);
    let pid = d.attach(
        json!({"sessionId": "s1", "gate": {"command": "false"}, "onFail": {"maxRetries": 1}}),
    );
    d.report("s1", "turn-end");
    let deadline = Instant::now() + T;
    while d
        .all_events(&format!("&policy={pid}&types=nudge"))
        .is_empty()
    {
        assert!(Instant::now() < deadline, "no nudge");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The nudge task is held: the turn-end comes between the nudge's
    // publication and the task, every time.
    while !d.log().contains("the nudge task waits at its barrier") {
        assert!(Instant::now() < deadline, "no barrier: {}", d.log());
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(d.policy(&pid)["status"], "nudging");
    d.report("s1", "turn-end");
    assert_eq!(d.policy(&pid)["status"], "nudging");
    std::fs::write(&barrier, "").expect("open the barrier");
    d.wait_runs(&pid, "blocked", 2, T);
}

/// Issue 12 #3: the disk fills while a gate runs, so its verdict cannot be
/// stored; once space returns, the sweep re-drives the policy left in
/// `gating` (it gates again and settles) without a restart. (Before, it
/// stayed `gating` until the next restart.)
#[test]
fn a_verdict_lost_to_a_full_disk_is_gated_again_once_space_returns() {
    let (s, cfg) = scratch_config(&["true"]);
    let (mnt, _guard) = scratch_tmpfs(&s);
    let d = Daemon::start(&mnt.join("data"), &cfg);
    d.register("s1", &s.ws);
    let m = marker("full-disk");
    let gate = script_gate_json("gates/sleep-then-pass.sh", &[&m, "3"], 30_000);
    let pid = d.attach(json!({"sessionId": "s1", "gate": gate, "watchFrom": "now"}));
    d.report("s1", "turn-end");
    d.wait_status(&pid, "gating", T);
    // While the gate sleeps: fill the disk, and use up what SQLite holds.
    let filler = fill(&mnt);
    let mut refused = false;
    for _ in 0..2000 {
        let (code, _) = bulky_report(&d);
        if code == 503 {
            refused = true;
            break;
        }
    }
    assert!(refused, "the full disk never refused a write");
    // The gate ends; its verdict cannot be stored.
    let deadline = Instant::now() + T;
    while !d.log().contains("gate task failed") {
        assert!(Instant::now() < deadline, "{}", d.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(d.policy(&pid)["status"], "gating");
    std::fs::remove_file(&filler).expect("rm filler");
    d.wait_runs(&pid, "done", 2, T);
}

/// Issue 12 #12: a gate input that kills the daemon (a test hook aborts it
/// when the gate of the policy labelled `poison` starts) does so twice, at
/// the turn-end and again when the restarted daemon runs that gate again;
/// at the third start the policy is settled as `blocked`, with an event
/// saying why, and the daemon serves. (Before, every start ran the gate
/// again and died: a crash loop.)
#[test]
fn a_gate_that_kills_the_daemon_twice_is_settled_instead_of_crash_looping() {
    let (s, cfg) = scratch_config(&["true"]);
    let data = s.etc.join("data");
    let env = [("GATEHOST_TEST_ABORT_GATE_LABEL", "poison")];
    let mut d = Daemon::start_with_env(&data, &cfg, &env);
    d.register("s1", &s.ws);
    let pid = d.attach(json!({"sessionId": "s1", "label": "poison", "gate": {"command": "true"}}));
    d.report("s1", "turn-end");
    assert!(d.wait_exit(T), "the hook did not kill the daemon");
    // The restarted daemon runs the gate again at once, and dies again
    // (maybe before it says it listens).
    let second = serve_to_exit(&data, &cfg, &env);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        second.status.signal(),
        Some(libc::SIGABRT),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let d = Daemon::start_with_env(&data, &cfg, &env);
    let p = d.wait_status(&pid, "blocked", T);
    assert_eq!(p["gateCrashes"], 2, "{p}");
    let reason = p["reason"].as_str().unwrap_or("");
    assert_has(reason, "died 2 times");
    let blocked = d.all_events(&format!("&policy={pid}&types=blocked"));
    assert_eq!(blocked.len(), 1, "{blocked:?}");
    assert_eq!(blocked[0]["payload"]["gateCrashes"], 2);
    assert_eq!(blocked[0]["payload"]["outcome"], "error");
    // The first death was recovered once: one queued event says so.
    let requeued = d.all_events(&format!("&policy={pid}&types=queued"));
    assert!(
        requeued.iter().any(|e| e["payload"]["gateCrashes"] == 1),
        "{requeued:?}"
    );
    // It stays up and gates other policies.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(d.agent_ok("GET", "/v1/health", None)["ok"], true);
    let ok = d.attach(json!({"sessionId": "s1", "label": "fine", "gate": {"command": "true"}, "watchFrom": "now"}));
    d.report("s1", "turn-end");
    d.wait_status(&ok, "done", T);
    // Killed from outside (SIGKILL) twice while a gate runs is no fault
    // of the gate: it runs again and passes.
    let m = marker("outside-kill");
    let gate = script_gate_json("gates/sleep-then-pass.sh", &[&m, "2"], 30_000);
    let slow = d.attach(json!({"sessionId": "s1", "gate": gate, "watchFrom": "now"}));
    d.report("s1", "turn-end");
    let mut d = d;
    for _ in 0..2 {
        d.wait_status(&slow, "gating", T);
        d.restart();
    }
    let p = d.wait_status(&slow, "done", T);
    assert_eq!(p["gateCrashes"], 0, "{p}");
    d.stop();
    assert_no_survivors(&m);
}
