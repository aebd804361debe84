//! Live configuration through a real daemon: SIGHUP and an edit of the
//! configuration file put a new configuration in force without a restart
//! (`config:reloaded`), an invalid one is rejected and the old one kept
//! (`config:rejected`), a gate already running finishes under the
//! configuration it started with, and `[daemon] enabled = false` records
//! turn-ends but gates nothing until supervision is enabled again, by a
//! reload or a restart, each waiting policy then gated once.

use crate::common;
use crate::common::shorthand::{assert_has, str_of};

use common::daemon::{Daemon, git_repo, scratch_config, scratch_config_with};
use common::{DAEMON_ROOTS, Scratch, allow_config};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(30);

/// The daemon's environment when only a SIGHUP may reload (the file is
/// not polled), so that a test knows which trigger it sees.
const NO_POLL: &[(&str, &str)] = &[("GATEHOST_TEST_NO_CONFIG_POLL", "1")];

/// Replaces the configuration file's text at once (a rename over it, as
/// editors save), so that no reload reads it half-written.
fn rewrite(path: &Path, text: &str) {
    let tmp = path.with_extension("toml.new");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

fn hangup(d: &Daemon) {
    // SAFETY: kill(2) on the test's own child.
    assert_eq!(unsafe { libc::kill(d.pid() as i32, libc::SIGHUP) }, 0);
}

/// The newest cursor of the event log.
fn head(d: &Daemon) -> i64 {
    let (_, v) = d.get("/v1/health", &d.operator);
    v["cursor"].as_i64().expect("cursor")
}

/// Waits (long-polls) for the first event of `kind` after `since`.
fn next_event(d: &Daemon, kind: &str, since: i64) -> Value {
    let deadline = Instant::now() + T;
    let mut since = since;
    loop {
        let (code, v) = d.get(
            &format!("/v1/events?since={since}&types={kind}&wait=2s&limit=100"),
            &d.operator,
        );
        assert_eq!(code, 200, "{v}");
        if let Some(e) = v["events"].as_array().and_then(|a| a.first()) {
            return e.clone();
        }
        since = v["nextCursor"].as_i64().unwrap_or(since);
        assert!(
            Instant::now() < deadline,
            "no {kind} within {T:?}\nlog:\n{}",
            d.log()
        );
    }
}

/// Attaches (as the operator) a policy watching `s1` whose gate runs
/// `program`: the HTTP status and body.
fn attach_running(d: &Daemon, program: &str) -> (u16, Value) {
    d.post(
        "/v1/policies",
        &d.operator,
        Some(json!({"sessionId": "s1", "gate": {"command": program}})),
    )
}

fn refused_as_not_allowlisted(d: &Daemon, program: &str) {
    let (code, v) = attach_running(d, program);
    assert_eq!(code, 400, "{program} must be refused: {v}");
    assert_has(
        &v.to_string(),
        &format!("'{program}' is not in the allowlist"),
    );
}

fn accepted(d: &Daemon, program: &str) -> String {
    let (code, v) = attach_running(d, program);
    assert_eq!(code, 201, "{program} must be accepted: {v}");
    v["policyId"].as_str().expect("id").to_string()
}

fn count(events: &[String], kind: &str) -> usize {
    events.iter().filter(|e| *e == kind).count()
}

/// A scratch area whose git workspace holds session `s1`, its config
/// (allowing `true`) and a daemon that does not poll it for changes.
fn polled_s1() -> (Scratch, std::path::PathBuf, Daemon) {
    let (s, cfg) = scratch_config(&["true"]);
    let d = Daemon::start_with_env(&s.etc.join("data"), &cfg, NO_POLL);
    git_repo(&s.ws);
    d.register("s1", &s.ws);
    (s, cfg, d)
}

/// Waits until policy `id` is done, and asserts it was gated and passed
/// once.
fn gated_once(d: &Daemon, id: &str) {
    d.wait_status(id, "done", T);
    let events = d.policy_events(id);
    assert_eq!(count(&events, "policy:gating"), 1, "{events:?}");
    assert_eq!(count(&events, "policy:passed"), 1, "{events:?}");
}

#[test]
fn an_allowlist_edit_applies_on_sighup_without_a_restart() {
    let (s, cfg) = scratch_config(&[]);
    let d = Daemon::start_with_env(&s.etc.join("data"), &cfg, NO_POLL);
    let pid = d.pid();
    git_repo(&s.ws);
    d.register("s1", &s.ws);
    refused_as_not_allowlisted(&d, "true");
    let since = head(&d);
    rewrite(&cfg, &allow_config(&["true"]));
    hangup(&d);
    let e = next_event(&d, "config:reloaded", since);
    let payload: gatehost::wire::ConfigReloaded =
        serde_json::from_value(e["payload"].clone()).expect("a typed payload");
    assert_eq!(payload.trigger, gatehost::wire::ReloadTrigger::Signal);
    assert_eq!(payload.changed, vec!["shell.allow".to_string()]);
    assert_eq!(e["payload"]["trigger"], "signal", "{e}");
    assert_eq!(e["payload"]["changed"], json!(["shell.allow"]), "{e}");
    assert_eq!(e["payload"]["needsRestart"], json!([]), "{e}");
    assert_eq!(e["payload"]["enabled"], true, "{e}");
    let policy = accepted(&d, "true");
    d.report("s1", "turn-end");
    d.wait_status(&policy, "done", T);
    assert_eq!(d.pid(), pid, "the same daemon");
    assert_has(&d.log(), "configuration reloaded");
}

#[test]
fn an_allowlist_edit_applies_when_the_file_changes_without_a_signal() {
    let (s, cfg) = scratch_config(&[]);
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    git_repo(&s.ws);
    d.register("s1", &s.ws);
    refused_as_not_allowlisted(&d, "true");
    let since = head(&d);
    rewrite(&cfg, &allow_config(&["true"]));
    let e = next_event(&d, "config:reloaded", since);
    assert_eq!(e["payload"]["trigger"], "file", "{e}");
    assert_eq!(e["payload"]["changed"], json!(["shell.allow"]), "{e}");
    let policy = accepted(&d, "true");
    d.report("s1", "turn-end");
    d.wait_status(&policy, "done", T);
}

#[test]
fn an_invalid_configuration_is_rejected_and_the_one_in_force_kept() {
    let (s, cfg, d) = polled_s1();
    // Bad TOML (and an allowlist that would have admitted `false`).
    let since = head(&d);
    rewrite(&cfg, &format!("{}\n[shell\n", allow_config(&["false"])));
    hangup(&d);
    let e = next_event(&d, "config:rejected", since);
    let reason = e["payload"]["reason"].as_str().expect("reason");
    assert!(reason.contains("config.toml"), "{e}");
    assert_eq!(e["payload"]["trigger"], "signal", "{e}");
    // Valid TOML, but a workspace root around the data directory: what
    // would stop `serve` at start.
    let since = head(&d);
    let over = allow_config(&["false"]).replace(
        DAEMON_ROOTS,
        &format!(
            "[daemon]\nworkspace_roots = [{:?}]\n",
            s.etc.display().to_string()
        ),
    );
    rewrite(&cfg, &over);
    hangup(&d);
    let e = next_event(&d, "config:rejected", since);
    let reason = e["payload"]["reason"].as_str().expect("reason");
    assert!(reason.contains("workspace_roots"), "{e}");
    assert!(reason.contains("overlaps"), "{e}");
    // The old allowlist is in force: `true` admitted, `false` not.
    refused_as_not_allowlisted(&d, "false");
    let policy = accepted(&d, "true");
    d.report("s1", "turn-end");
    d.wait_status(&policy, "done", T);
    // Never a reload.
    let reloads = d.all_events("&types=config:reloaded");
    assert!(reloads.is_empty(), "{reloads:?}");
    assert_has(&d.log(), "configuration rejected");
}

#[test]
fn a_running_gate_finishes_under_the_configuration_it_started_with() {
    let (s, cfg, d) = polled_s1();
    let fifo = s.ws.join("go");
    let c = std::ffi::CString::new(fifo.display().to_string()).expect("path");
    // SAFETY: mkfifo(3) with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    // Two gates, run in order: the first waits on the FIFO; the second
    // runs `true`, which the reload takes off the allowlist meanwhile.
    let (code, v) = d.post(
        "/v1/policies",
        &d.operator,
        Some(json!({"sessionId": "s1", "gate": [
            {"command": "bash", "args": ["-c", "read -r line < go"], "timeoutMs": 60000},
            {"command": "true"},
        ]})),
    );
    assert_eq!(code, 201, "{v}");
    let policy = v["policyId"].as_str().expect("id").to_string();
    d.report("s1", "turn-end");
    // Opening the FIFO for writing returns once the gate opened it to read:
    // the gate runs.
    let mut writer = std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .expect("open the fifo");
    let since = head(&d);
    rewrite(&cfg, &allow_config(&[]));
    hangup(&d);
    let e = next_event(&d, "config:reloaded", since);
    assert_eq!(e["payload"]["changed"], json!(["shell.allow"]), "{e}");
    // In force for what starts now.
    refused_as_not_allowlisted(&d, "true");
    use std::io::Write;
    writeln!(writer, "go").expect("write the fifo");
    drop(writer);
    let p = d.wait_status(&policy, "done", T);
    let gates = p["verdict"]["gates"].as_array().expect("gates");
    assert_eq!(gates.len(), 2, "{p}");
    assert!(gates.iter().all(|g| g["outcome"] == "pass"), "{p}");
}

#[test]
fn a_paused_daemon_records_turn_ends_and_gates_each_waiting_policy_once_when_enabled_again() {
    let (s, cfg) = scratch_config_with(&["true"], "enabled = false\n");
    // No sweep either: the reload itself must run what waited.
    let env = [NO_POLL[0], ("GATEHOST_TEST_NO_SWEEP", "1")];
    let d = Daemon::start_with_env(&s.etc.join("data"), &cfg, &env);
    git_repo(&s.ws);
    d.register("s1", &s.ws);
    let policy = accepted(&d, "true");
    d.report("s1", "turn-end");
    // Recorded, queued, said to wait; no gate.
    assert_eq!(d.policy(&policy)["status"], "queued");
    let events = d.policy_events(&policy);
    assert_eq!(count(&events, "policy:paused"), 1, "{events:?}");
    assert_eq!(count(&events, "policy:gating"), 0, "{events:?}");
    let ends = d.all_events("&types=session:turn-end&session=s1");
    assert_eq!(ends.len(), 1, "{ends:?}");
    let paused_event = d
        .all_events(&format!("&types=policy:paused&policy={policy}"))
        .pop()
        .expect("paused");
    assert_has(
        str_of(&paused_event["payload"]["reason"]),
        "enabled = false",
    );
    // Attached while paused over a turn already ended: queued at once,
    // and said to wait too.
    let late = accepted(&d, "true");
    assert_eq!(d.policy(&late)["status"], "queued");
    let events = d.policy_events(&late);
    assert_eq!(count(&events, "policy:paused"), 1, "{events:?}");
    // Enabled again by a reload: gated once.
    let since = head(&d);
    rewrite(&cfg, &allow_config(&["true"]));
    hangup(&d);
    let e = next_event(&d, "config:reloaded", since);
    assert_eq!(e["payload"]["changed"], json!(["daemon.enabled"]), "{e}");
    assert_eq!(e["payload"]["enabled"], true, "{e}");
    for id in [&policy, &late] {
        gated_once(&d, id);
    }
}

#[test]
fn a_policy_waiting_while_paused_survives_a_sigkill_and_is_gated_once_by_the_next_enabled_daemon() {
    let (s, cfg) = scratch_config_with(&["true"], "enabled = false\n");
    let mut d = Daemon::start_with_env(&s.etc.join("data"), &cfg, NO_POLL);
    git_repo(&s.ws);
    d.register("s1", &s.ws);
    let policy = accepted(&d, "true");
    // Pausing by a reload says so on a policy already queued too.
    let second = {
        d.register("s2", &s.ws);
        let (code, v) = d.post(
            "/v1/policies",
            &d.operator,
            Some(json!({"sessionId": "s2", "gate": {"command": "true"}})),
        );
        assert_eq!(code, 201, "{v}");
        v["policyId"].as_str().expect("id").to_string()
    };
    d.report("s1", "turn-end");
    d.report("s2", "turn-end");
    assert_eq!(d.policy(&policy)["status"], "queued");
    d.kill9();
    // Restarted still paused: recovery leaves both queued, said again.
    d.restart();
    for id in [&policy, &second] {
        assert_eq!(d.policy(id)["status"], "queued");
        let events = d.policy_events(id);
        assert_eq!(count(&events, "policy:paused"), 2, "{events:?}");
        assert_eq!(count(&events, "policy:gating"), 0, "{events:?}");
    }
    // Killed while paused; started with supervision enabled.
    rewrite(&cfg, &allow_config(&["true"]));
    d.restart();
    for id in [&policy, &second] {
        gated_once(&d, id);
    }
}

#[test]
fn serve_help_tells_of_the_sighup_reload() {
    let run = common::run_gatehost(&["serve".to_string(), "--help".to_string()], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_has(&run.stdout, "SIGHUP");
    assert_has(&run.stdout, "config:rejected");
    assert_has(&run.stdout, "enabled = false");
}
