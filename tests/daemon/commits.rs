//! Commits behind a green gate and a human ack, on real git repositories
//! whose `.git` the agent has booby-trapped; webhooks that tell a person.

use crate::common;

use common::daemon::{Daemon, git_out, git_repo};
use common::webhooks::{Seen, receiver, receiver_answering, verifies};
use common::{Scratch, allow_config};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

/// A daemon whose config is the common one with `daemon_keys` added to its
/// `[daemon]` section and `config_extra` (whole sections) after it.
fn setup_with(daemon_keys: &str, config_extra: &str) -> (Scratch, Daemon) {
    let s = Scratch::new();
    git_repo(&s.ws);
    let common =
        allow_config(&["true", "false"]).replace("[daemon]\n", &format!("[daemon]\n{daemon_keys}"));
    let cfg = s.write("config.toml", &format!("{common}{config_extra}"));
    let data = s.etc.join("data");
    let d = Daemon::start(&data, &cfg);
    d.register("s1", &s.ws);
    (s, d)
}

/// A daemon whose plugin directory is the built plugins' (the scratch
/// holding its compile cache comes back too, to live as long).
fn setup_with_plugins() -> (Scratch, Daemon, Scratch) {
    let plugins = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../plugins/target/wasm32-wasip2/release");
    let cache = Scratch::new();
    let (s, d) = setup_with(
        "",
        &format!(
            "[wasm]\nplugin_dirs = [\"{}\"]\ncache_dir = \"{}\"\n",
            plugins.display(),
            cache.etc.join("cache").display()
        ),
    );
    (s, d, cache)
}

/// `forbid-patterns` on the changed files, refusing a `dbg!`.
fn forbid_dbg() -> Value {
    json!({"wasm": {"plugin": "forbid-patterns", "config": {
        "scope": "changed",
        "rules": [{"id": "no-dbg", "pattern": "dbg!\\(", "message": "remove dbg!"}]
    }}})
}

fn commit_policy(paths: &[&str], ack: bool) -> Value {
    json!({
        "sessionId": "s1",
        "gate": {"command": "true"},
        "then": "commit",
        "commit": {"paths": paths, "message": "gated change", "requireHumanAck": ack}
    })
}

fn commits(ws: &Path) -> Vec<String> {
    git_out(ws, &["log", "--format=%H %s"])
        .lines()
        .map(str::to_string)
        .collect()
}

/// Plants everything git 2.47 would run during add/commit; each writes a
/// marker file in `markers` if it ever runs.
pub(crate) fn booby_trap(ws: &Path, markers: &Path) {
    std::fs::create_dir_all(markers).expect("mkdir");
    let script = |name: &str| -> PathBuf {
        let p = markers.join(format!("{name}.sh"));
        std::fs::write(
            &p,
            format!("#!/bin/sh\ntouch '{}/{name}.ran'\ncat\n", markers.display()),
        )
        .expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        p
    };
    let hooks = ws.join(".git/hooks");
    for hook in [
        "pre-commit",
        "prepare-commit-msg",
        "commit-msg",
        "post-commit",
        "reference-transaction",
        "post-index-change",
    ] {
        let src = script(hook);
        std::fs::copy(&src, hooks.join(hook)).expect("hook");
        std::fs::set_permissions(hooks.join(hook), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
    }
    let include = markers.join("included.cfg");
    std::fs::write(
        &include,
        format!("[core]\n\tpager = {}\n", script("pager").display()),
    )
    .expect("write");
    let mut cfg = std::fs::OpenOptions::new()
        .append(true)
        .open(ws.join(".git/config"))
        .expect("config");
    write!(
        cfg,
        "[core]\n\tfsmonitor = {}\n[filter \"evil\"]\n\tclean = {}\n\tsmudge = {}\n[commit]\n\tgpgSign = true\n[gpg]\n\tprogram = {}\n[include]\n\tpath = {}\n",
        script("fsmonitor").display(),
        script("clean").display(),
        script("smudge").display(),
        script("gpg").display(),
        include.display()
    )
    .expect("append");
    std::fs::write(ws.join(".gitattributes"), "* filter=evil\n").expect("attributes");
}

pub(crate) fn ran(markers: &Path) -> Vec<String> {
    std::fs::read_dir(markers)
        .expect("markers")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".ran"))
        .collect()
}

#[test]
fn an_approved_commit_holds_exactly_the_gated_paths_and_runs_nothing_from_the_repo() {
    let (s, d) = setup_with("", "");
    let markers = s.etc.join("markers");
    booby_trap(&s.ws, &markers);
    s.write_ws("src/lib.rs", "pub fn f() {}\n");
    s.write_ws("notes.txt", "not part of the commit\n");
    std::fs::write(s.ws.join("README"), "changed but not listed\n").expect("write");
    let pid = d.attach(commit_policy(&["src"], true));
    d.report("s1", "turn-end");
    let p = d.wait_status(&pid, "awaiting-ack", T);
    assert_eq!(p["plan"]["paths"], json!(["src"]));
    assert!(
        p["plan"]["fingerprint"]
            .as_str()
            .is_some_and(|f| f.len() == 64)
    );
    let ready = d.all_events(&format!("&policy={pid}&types=commit-ready"));
    assert_eq!(ready.len(), 1);
    assert_eq!(ready[0]["payload"]["plan"]["message"], "gated change");
    // The diff summary covers the commit paths only (not notes.txt, README).
    let summary = &ready[0]["payload"]["plan"]["diffSummary"];
    assert_eq!(
        summary["files"],
        json!([{"path": "src/lib.rs", "kind": "added", "added": 1, "removed": 0, "binary": false}]),
        "{summary}"
    );
    assert_eq!(summary["added"], 1);
    // The agent cannot approve.
    let (code, v) = d.http(
        "POST",
        &format!("/v1/policies/{pid}/ack"),
        Some(&d.agent),
        Some(json!({"approve": true})),
    );
    assert_eq!(code, 403, "{v}");
    assert_eq!(commits(&s.ws).len(), 1);
    let a = d.cli(&["policy", "ack", &pid, "--approve"], &d.operator);
    assert_eq!(a.code, 0, "{}", a.stderr);
    let p = d.wait_status(&pid, "done", T);
    let sha = p["commitSha"].as_str().expect("sha").to_string();
    let log = commits(&s.ws);
    assert_eq!(log.len(), 2, "{log:?}");
    assert!(log[0].starts_with(&sha), "{log:?} vs {sha}");
    let files = git_out(&s.ws, &["show", "--name-only", "--format=", &sha]);
    assert_eq!(
        files.trim(),
        "src/lib.rs",
        "only the gated path is committed"
    );
    let content = git_out(&s.ws, &["show", &format!("{sha}:src/lib.rs")]);
    assert_eq!(content, "pub fn f() {}\n", "raw content, no clean filter");
    let raw = git_out(&s.ws, &["cat-file", "commit", &sha]);
    assert!(
        !raw.contains("gpgsig"),
        "never signed through gpg.program: {raw}"
    );
    assert_eq!(
        ran(&markers),
        Vec::<String>::new(),
        "nothing the workspace names ran"
    );
    let committed = d.all_events(&format!("&policy={pid}&types=committed"));
    assert_eq!(committed.len(), 1);
    assert_eq!(committed[0]["payload"]["sha"], sha.as_str());
    // The other changes are still there, uncommitted.
    assert_eq!(
        std::fs::read_to_string(s.ws.join("README")).expect("read"),
        "changed but not listed\n"
    );
}

#[test]
fn a_double_ack_commits_once() {
    let (s, d) = setup_with("", "");
    s.write_ws("a.txt", "a\n");
    let pid = d.attach(commit_policy(&["a.txt"], true));
    d.report("s1", "turn-end");
    d.wait_status(&pid, "awaiting-ack", T);
    let first = d.http(
        "POST",
        &format!("/v1/policies/{pid}/ack"),
        Some(&d.operator),
        Some(json!({"approve": true})),
    );
    let second = d.http(
        "POST",
        &format!("/v1/policies/{pid}/ack"),
        Some(&d.operator),
        Some(json!({"approve": true})),
    );
    assert_eq!(first.0, 200, "{}", first.1);
    assert_eq!(second.0, 409, "{}", second.1);
    assert_eq!(second.1["error"]["code"], "not-awaiting-ack");
    d.wait_status(&pid, "done", T);
    let third = d.cli(&["policy", "ack", &pid, "--approve"], &d.operator);
    assert_eq!(third.code, 2);
    assert_eq!(commits(&s.ws).len(), 2, "one commit, not two");
    assert_eq!(
        d.all_events(&format!("&policy={pid}&types=committed"))
            .len(),
        1
    );
}

/// Gated on a snapshot (the default), an ack after the workspace changed
/// commits what the gate judged, not what is there now, and says which
/// paths changed since (they are not in the commit).
#[test]
fn an_ack_after_the_paths_changed_commits_the_snapshot_that_passed() {
    let (s, d) = setup_with("", "");
    s.write_ws("a.txt", "gated\n");
    let pid = d.attach(commit_policy(&["a.txt"], true));
    d.report("s1", "turn-end");
    let p = d.wait_status(&pid, "awaiting-ack", T);
    let tree = p["plan"]["snapshot"]["tree"]
        .as_str()
        .expect("tree")
        .to_string();
    assert_eq!(p["plan"]["changedAfterSnapshot"], json!([]));
    s.write_ws("a.txt", "changed after the gate\n");
    // The status says so, as of now.
    let status = d.cli(&["policy", "status", &pid], &d.agent);
    assert!(
        status
            .stdout
            .contains("changed since the gate's snapshot (not in the commit): a.txt"),
        "{}",
        status.stdout
    );
    let v = d.cli(&["policy", "ack", &pid, "--approve"], &d.operator);
    assert_eq!(v.code, 0, "{}", v.stderr);
    let p = d.wait_status(&pid, "done", T);
    let sha = p["commitSha"].as_str().expect("sha");
    assert_eq!(
        git_out(&s.ws, &["show", &format!("{sha}:a.txt")]),
        "gated\n"
    );
    assert_eq!(
        git_out(&s.ws, &["rev-parse", &format!("{sha}^{{tree}}")]).trim(),
        tree
    );
    let approved = d.all_events(&format!("&policy={pid}&types=approved"));
    assert_eq!(
        approved[0]["payload"]["changedAfterSnapshot"],
        json!(["a.txt"])
    );
    assert_eq!(p["gateRuns"], 1);
}

/// The snapshot's directories are watched while its gate runs: a file
/// under the commit paths written meanwhile is listed in
/// `changedAfterSnapshot` at commit-ready (the event and the plan), one
/// beside them is not; and a run during which nothing under them changed
/// does not read them again (the daemon's log says which happened).
#[test]
fn what_changes_under_the_commit_paths_while_the_gate_runs_is_listed_at_commit_ready() {
    let s = Scratch::new();
    git_repo(&s.ws);
    s.write_ws("src/a.txt", "a\n");
    s.write_ws("src/deep/b.txt", "b\n");
    let cfg = s.write("config.toml", &allow_config(&["true"]));
    let d = Daemon::start_with_env(
        &s.etc.join("data"),
        &cfg,
        &[("GATEHOST_LOG", "gatehost=debug")],
    );
    d.register("s1", &s.ws);
    let run = |release: &str, during: &dyn Fn()| {
        let m = common::marker("watched");
        let gate: Value = serde_json::from_str(&common::script_gate(
            "gates/wait-for-file-then-pass.sh",
            &[&m, &s.etc.join(release).display().to_string()],
            60_000,
        ))
        .expect("gate");
        let pid = d.attach(json!({
            "sessionId": "s1", "gate": gate, "then": "commit",
            "commit": {"paths": ["src"], "message": "m", "requireHumanAck": true}
        }));
        d.report("s1", "turn-end");
        // The gate runs: the snapshot was taken.
        common::eventually_within(T, "the gate runs", || !common::survivors(&m).is_empty());
        during();
        std::fs::write(s.etc.join(release), "go").expect("release");
        let p = d.wait_status(&pid, "awaiting-ack", T);
        let ready = d.all_events(&format!("&policy={pid}&types=commit-ready"));
        assert_eq!(ready.len(), 1, "{ready:?}");
        assert_eq!(
            ready[0]["payload"]["plan"]["changedAfterSnapshot"],
            p["plan"]["changedAfterSnapshot"]
        );
        let v = d.cli(&["policy", "ack", &pid, "--reject"], &d.operator);
        assert_eq!(v.code, 0, "{}", v.stderr);
        d.wait_status(&pid, "cancelled", T);
        assert!(common::survivors(&m).is_empty());
        p["plan"]["changedAfterSnapshot"].clone()
    };
    let quiet = run("release-1", &|| {
        s.write_ws("beside.txt", "not a commit path\n");
        let _ = std::fs::read(s.ws.join("src/a.txt")).expect("read");
    });
    assert_eq!(quiet, json!([]));
    assert!(
        d.log()
            .contains("nothing watched changed since the snapshot"),
        "{}",
        d.log()
    );
    let changed = run("release-2", &|| {
        s.write_ws("src/deep/b.txt", "written while the gate ran\n");
        s.write_ws("beside.txt", "again\n");
    });
    assert_eq!(changed, json!(["src/deep/b.txt"]));
    assert!(d.log().contains("src/deep/b.txt changed"), "{}", d.log());
}

/// A gate that names the paths it needs runs in a worktree holding only
/// them (the commit still holds all the commit paths' snapshot); a policy
/// with one gate that names none checks out everything.
#[test]
fn gates_that_name_their_paths_get_only_those_checked_out() {
    let (s, d) = setup_with("", "");
    s.write_ws("src/a/x.txt", "x\n");
    s.write_ws("src/b/y.txt", "y\n");
    let only_a = json!({
        "command": "bash",
        "args": ["-c", "test -e src/a/x.txt && test ! -e src/b && test ! -e README"],
        "paths": ["src/a"]
    });
    let pid = d.attach(json!({
        "sessionId": "s1", "gate": only_a, "then": "commit",
        "commit": {"paths": ["src"], "message": "sparse", "requireHumanAck": true}
    }));
    d.report("s1", "turn-end");
    d.wait_status(&pid, "awaiting-ack", T);
    let v = d.cli(&["policy", "ack", &pid, "--approve"], &d.operator);
    assert_eq!(v.code, 0, "{}", v.stderr);
    let p = d.wait_status(&pid, "done", T);
    let sha = p["commitSha"].as_str().expect("sha");
    assert_eq!(
        git_out(&s.ws, &["show", &format!("{sha}:src/b/y.txt")]),
        "y\n"
    );

    // With a gate that needs everything beside it, everything is there:
    // the same check fails.
    s.write_ws("src/a/x.txt", "x2\n");
    let pid = d.attach(json!({
        "sessionId": "s1", "gate": [only_a, {"command": "true"}], "then": "commit",
        "commit": {"paths": ["src"], "message": "whole", "requireHumanAck": true}
    }));
    d.report("s1", "turn-end");
    common::eventually_within(T, "the gate fails", || {
        !d.all_events(&format!("&policy={pid}&types=failed"))
            .is_empty()
    });
}

/// The operator's opt-out, `gateOn: "workspace"` (refused with the agent
/// token): the gate reads the live files, so an ack after they changed is
/// refused as stale and the policy gates again.
#[test]
fn gated_on_the_workspace_a_stale_ack_is_refused_and_the_policy_gates_again() {
    let (s, d) = setup_with("", "");
    s.write_ws("a.txt", "gated\n");
    let mut spec = commit_policy(&["a.txt"], true);
    spec["gateOn"] = json!("workspace");
    let (code, v) = d.http("POST", "/v1/policies", Some(&d.agent), Some(spec.clone()));
    assert_eq!(code, 400, "{v}");
    assert_eq!(v["error"]["field"], "gateOn");
    let (code, v) = d.http("POST", "/v1/policies", Some(&d.operator), Some(spec));
    assert_eq!(code, 201, "{v}");
    let pid = v["policyId"].as_str().expect("id").to_string();
    d.report("s1", "turn-end");
    let p = d.wait_status(&pid, "awaiting-ack", T);
    assert!(p["plan"]["snapshot"].is_null(), "{p}");
    // The summary comes from the same read as the closing fingerprint.
    let summary = &p["plan"]["diffSummary"];
    assert_eq!(summary["files"][0]["path"], "a.txt", "{summary}");
    assert_eq!(summary["files"][0]["kind"], "added", "{summary}");
    assert_eq!(summary["added"], 1, "{summary}");
    let fp1 = p["plan"]["fingerprint"].clone();
    s.write_ws("a.txt", "changed after the gate\n");
    let (code, v) = d.http(
        "POST",
        &format!("/v1/policies/{pid}/ack"),
        Some(&d.operator),
        Some(json!({"approve": true})),
    );
    assert_eq!(code, 409, "{v}");
    assert_eq!(v["error"]["code"], "stale");
    assert_eq!(commits(&s.ws).len(), 1, "nothing committed");
    let p = d.wait_status(&pid, "awaiting-ack", T);
    assert_ne!(p["plan"]["fingerprint"], fp1, "re-gated on the new content");
    assert_eq!(p["gateRuns"], 2);
    d.cli(&["policy", "ack", &pid, "--approve"], &d.operator);
    let p = d.wait_status(&pid, "done", T);
    let sha = p["commitSha"].as_str().expect("sha");
    assert_eq!(
        git_out(&s.ws, &["show", &format!("{sha}:a.txt")]),
        "changed after the gate\n"
    );
}

#[test]
fn reject_cancels_with_events_and_commits_nothing() {
    let (s, d) = setup_with("", "");
    s.write_ws("a.txt", "a\n");
    let pid = d.attach(commit_policy(&["a.txt"], true));
    d.report("s1", "turn-end");
    d.wait_status(&pid, "awaiting-ack", T);
    let r = d.cli(&["policy", "ack", &pid, "--reject"], &d.operator);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(d.policy(&pid)["status"], "cancelled");
    let ev = d.policy_events(&pid);
    assert!(
        ev.ends_with(&[
            "policy:rejected".to_string(),
            "policy:cancelled".to_string()
        ]),
        "{ev:?}"
    );
    assert_eq!(commits(&s.ws).len(), 1);
    let w = d.cli(&["wait", "--policy", &pid, "--timeout", "5s"], &d.agent);
    assert_eq!(w.code, 1);
}

#[test]
fn without_human_ack_a_green_gate_commits_at_once_and_deletions_are_committed() {
    let (s, d) = setup_with("", "");
    std::fs::remove_file(s.ws.join("README")).expect("rm");
    // Only the operator may waive the ack (the agent is refused: see
    // daemon_lifecycle.rs, operator power).
    let (code, body) = d.http(
        "POST",
        "/v1/policies",
        Some(&d.operator),
        Some(commit_policy(&["README"], false)),
    );
    assert_eq!(code, 201, "{body}");
    let pid = body["policyId"].as_str().expect("policyId").to_string();
    d.report("s1", "turn-end");
    let p = d.wait_status(&pid, "done", T);
    let sha = p["commitSha"].as_str().expect("sha");
    let tree = git_out(&s.ws, &["ls-tree", "--name-only", sha]);
    assert_eq!(tree.trim(), "", "README deleted in the commit");
    let ev = d.policy_events(&pid);
    assert!(ev.contains(&"policy:approved".to_string()), "{ev:?}");
    assert_eq!(ev.iter().filter(|e| *e == "policy:committed").count(), 1);
}

#[test]
fn webhooks_tell_of_commit_ready_signed_retried_and_idempotent() {
    let hook = receiver();
    let s0 = Scratch::new();
    let secret = s0.write("hook.secret", "s3cret\n");
    let (s, d) = setup_with(
        &format!(
            "webhook_url = \"{}\"\nwebhook_secret_file = \"{}\"\n",
            hook.url,
            secret.display()
        ),
        "",
    );
    s.write_ws("a.txt", "a\n");
    let pid = d.attach(commit_policy(&["a.txt"], true));
    d.report("s1", "turn-end");
    d.wait_status(&pid, "awaiting-ack", T);
    let deadline = std::time::Instant::now() + T;
    let ready_deliveries = loop {
        let seen = hook.seen.lock().expect("lock").clone();
        let ready: Vec<_> = seen
            .into_iter()
            .filter(|(_, k, _, _)| k == "policy:commit-ready")
            .collect();
        if ready.len() >= 2 {
            break ready;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "commit-ready not retried: {ready:?}\n{}",
            d.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // Retried after the 500 with the same idempotency id, signed.
    assert_eq!(ready_deliveries[0].0, ready_deliveries[1].0);
    for seen in &ready_deliveries {
        assert!(verifies(b"s3cret", seen), "{:?}", seen.2);
        // Replayed as another delivery, it no longer verifies.
        let mut replay = seen.clone();
        replay
            .2
            .insert("webhook-id", "evt-999999".parse().expect("header"));
        assert!(!verifies(b"s3cret", &replay));
        assert!(!verifies(b"another key", seen));
        let v: Value = serde_json::from_slice(&seen.3).expect("json body");
        assert_eq!(v["policyId"], pid.as_str());
    }
}

/// The demo as the README runs it, with no binary given: it builds gatehost
/// itself, through `$CARGO` (here a stand-in that records its arguments:
/// this test's binary is the one the build would make), and shows the
/// build's progress and each stage's elapsed time (issue 48, item 12:
/// before, `cargo build -q` printed nothing for the 12.5 minutes of a
/// fresh clone's debug build).
#[test]
fn the_shipped_daemon_demo_runs_to_a_commit() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let built = std::fs::canonicalize(root.join("target/debug/gatehost")).ok();
    assert_eq!(
        built,
        std::fs::canonicalize(env!("CARGO_BIN_EXE_gatehost")).ok(),
        "the demo's build makes target/debug/gatehost: this test needs it to be its binary"
    );
    let s = Scratch::new();
    let args = s.etc.join("cargo-args");
    let cargo = s.write(
        "cargo",
        &format!(
            "#!/bin/sh\necho \"$@\" > {}\necho '   Compiling gatehost v0.1.0 (stand-in)' >&2\n",
            args.display()
        ),
    );
    std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let out = std::process::Command::new("bash")
        .arg(root.join("examples/daemon-demo.sh"))
        .env("CARGO", &cargo)
        .output()
        .expect("run the demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // The build: announced, cargo's progress not swallowed.
    assert_eq!(
        std::fs::read_to_string(&args).expect("cargo ran").trim(),
        "build -p gatehost"
    );
    assert!(stderr.contains("Compiling gatehost"), "{stderr}");
    let stages: Vec<&str> = stdout.lines().filter(|l| l.contains("== ")).collect();
    assert!(
        stages[0].contains("building gatehost") && stages.len() >= 6,
        "{stdout}"
    );
    for stage in &stages {
        let elapsed = stage
            .rsplit_once('[')
            .and_then(|(_, t)| t.strip_suffix("s]"))
            .and_then(|t| t.parse::<u64>().ok());
        assert!(
            elapsed.is_some(),
            "a stage without its elapsed time: {stage}"
        );
    }
    for want in [
        "policy:nudge",
        "policy:commit-ready",
        "(refused, as it must be)",
        "policy:committed",
        "done: committed",
        "src/lib.rs | 1 +",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
    }
}

#[test]
fn a_sessions_webhook_hears_of_its_blocked_policy_even_across_a_restart() {
    let hook = receiver();
    let s = Scratch::new();
    let prefix = hook.url.trim_end_matches("hook");
    let cfg = s.write(
        "config.toml",
        &allow_config(&["false"]).replace(
            "[daemon]\n",
            &format!("[daemon]\nnotify_url_prefixes = [\"{prefix}\"]\n"),
        ),
    );
    let mut d = Daemon::start(&s.etc.join("data"), &cfg);
    d.agent_ok(
        "POST",
        "/v1/sessions",
        Some(json!({"id": "s1", "cwd": s.ws, "notifyUrl": hook.url})),
    );
    let pid = d.attach(
        json!({"sessionId": "s1", "gate": {"command": "false"}, "onFail": {"maxRetries": 0}}),
    );
    d.report("s1", "turn-end");
    d.wait_status(&pid, "blocked", T);
    let blocked = |n: usize| {
        let deadline = std::time::Instant::now() + T;
        loop {
            let seen: Vec<Seen> = hook
                .seen
                .lock()
                .expect("lock")
                .iter()
                .filter(|(_, k, _, _)| k == "policy:blocked")
                .cloned()
                .collect();
            if seen.len() >= n {
                return seen;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "policy:blocked seen {} times, wanted {n}",
                seen.len()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // The first attempt got a 500; the daemon dies before its retry (1 s).
    blocked(1);
    d.restart();
    let seen = blocked(2);
    assert_eq!(
        seen[0].0, seen[1].0,
        "the same idempotency id after the restart"
    );
    // Signed with the daemon's notify key, which is not the operator's
    // webhook secret (the agent chose this URL).
    let notify_key = std::fs::read_to_string(d.data.join("notify.key")).expect("notify.key");
    assert!(verifies(notify_key.trim().as_bytes(), &seen[1]));
    let v: Value = serde_json::from_slice(&seen[1].3).expect("json");
    assert_eq!(v["payload"]["outcome"], "fail");
}

#[test]
fn events_tail_follows_the_bus_for_a_person() {
    let (s, d) = setup_with("", "");
    let mut tail = std::process::Command::new(env!("CARGO_BIN_EXE_gatehost"))
        .args(["events", "tail", "--since", "0"])
        .env("GATEHOST_SERVER", &d.url)
        // A person follows the bus with the operator's token (the agent
        // token reads only the sessions whose keys it presents).
        .env("GATEHOST_TOKEN", &d.operator)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn tail");
    let out = tail.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    s.write_ws("a.txt", "a\n");
    let pid = d.attach(commit_policy(&["a.txt"], true));
    d.report("s1", "turn-end");
    let mut lines = Vec::new();
    let deadline = std::time::Instant::now() + T;
    while !lines
        .iter()
        .any(|l: &String| l.contains("policy:commit-ready"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "tail showed: {lines:?}"
        );
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(200)) {
            lines.push(l);
        }
    }
    let _ = tail.kill();
    let _ = tail.wait();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("session:registered") && l.contains("s1")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("policy:passed") && l.contains(&pid)),
        "{lines:?}"
    );
}

/// A plugin gate that names its paths is shown only the changes under
/// them (its worktree holds nothing else): a `dbg!` beside them is not
/// its business, one under them is.
#[test]
fn a_plugin_that_names_its_paths_sees_only_the_changes_under_them() {
    let (s, d, _cache) = setup_with_plugins();
    let mut gate = forbid_dbg();
    gate["paths"] = json!(["src/a"]);
    s.write_ws("src/a/ok.rs", "fn ok() {}\n");
    s.write_ws("src/b/bad.rs", "fn f() { dbg!(1); }\n");
    let attach = |message: &str| {
        d.attach(json!({
            "sessionId": "s1", "gate": gate, "then": "commit", "onFail": {"maxRetries": 0},
            "commit": {"paths": ["src"], "message": message, "requireHumanAck": true}
        }))
    };
    let pid = attach("beside");
    d.report("s1", "turn-end");
    let p = d.wait_status(&pid, "awaiting-ack", T);
    assert_eq!(p["verdict"]["outcome"], "pass", "{p}");
    let v = d.cli(&["policy", "ack", &pid, "--reject"], &d.operator);
    assert_eq!(v.code, 0, "{}", v.stderr);
    s.write_ws("src/a/ok.rs", "fn ok() { dbg!(2); }\n");
    let pid = attach("under");
    d.report("s1", "turn-end");
    let p = d.wait_status(&pid, "blocked", T);
    let findings = &p["verdict"]["gates"][0]["findings"];
    assert_eq!(findings.as_array().map(Vec::len), Some(1), "{p}");
    assert_eq!(findings[0]["path"], "src/a/ok.rs", "{p}");
}

#[test]
fn plugins_gated_by_the_daemon_see_the_workspace_changes_since_head() {
    let (s, d, _cache) = setup_with_plugins();
    let gate = forbid_dbg();
    // An untracked file with a dbg!: the plugin must see it as changed.
    s.write_ws("src/new.rs", "fn f() { dbg!(1); }\n");
    let pid = d.attach(json!({"sessionId": "s1", "gate": gate, "onFail": {"maxRetries": 0}}));
    d.report("s1", "turn-end");
    let p = d.wait_status(&pid, "blocked", T);
    let findings = &p["verdict"]["gates"][0]["findings"];
    assert_eq!(findings[0]["path"], "src/new.rs", "{p}");
    // Once that file is committed, it is no longer a change: the same gate
    // passes (the plugin sees the diff since HEAD, not every file).
    for args in [
        &["add", "src/new.rs"][..],
        &["commit", "-q", "-m", "by hand"][..],
    ] {
        let out = std::process::Command::new("git")
            .args([
                "-c",
                "core.hooksPath=/dev/null",
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
            ])
            .args(args)
            .current_dir(&s.ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("git");
        assert!(out.status.success());
    }
    std::fs::write(s.ws.join("README"), "a clean change\n").expect("write");
    let again = d.attach(json!({"sessionId": "s1", "gate": gate}));
    let p = d.wait_status(&again, "done", T);
    assert_eq!(p["verdict"]["outcome"], "pass", "{p}");
    // New top-level files whose names look like options, pathspec magic or
    // globs, or break a diff header, are changes the plugin sees too.
    let hostile = [
        "-x.rs",
        ":(glob)*.rs",
        "*.rs",
        "a?[b]\\.rs",
        "new\nline.rs",
        "sp ace.rs",
    ];
    for name in hostile {
        std::fs::write(s.ws.join(name), "fn f() { dbg!(1); }\n").expect("write");
    }
    let third = d.attach(json!({"sessionId": "s1", "gate": gate, "onFail": {"maxRetries": 0}}));
    d.report("s1", "turn-end");
    let p = d.wait_status(&third, "blocked", T);
    let mut paths: Vec<String> = p["verdict"]["gates"][0]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["path"].as_str().unwrap_or_default().to_string())
        .collect();
    paths.sort();
    let mut want: Vec<String> = hostile.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(paths, want, "{p}");
}

/// Every file under `dir` (symlinks not followed) with its bytes.
fn tree_of(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read canary").flatten() {
            let p = e.path();
            let rel = p.strip_prefix(dir).expect("inside").display().to_string();
            let t = e.file_type().expect("type");
            if t.is_dir() {
                stack.push(p);
                out.insert(format!("{rel}/"), Vec::new());
            } else if t.is_symlink() {
                out.insert(
                    rel,
                    std::fs::read_link(&p)
                        .expect("link")
                        .into_os_string()
                        .into_encoded_bytes(),
                );
            } else {
                out.insert(rel, std::fs::read(&p).expect("read"));
            }
        }
    }
    out
}

/// Moves `.git/<rel>` (if it exists) into the canary and leaves a symlink
/// to it in its place.
fn plant_link(ws: &Path, canary: &Path, rel: &str) {
    let at = ws.join(".git").join(rel);
    let to = canary.join(rel.replace('/', "_"));
    if at.exists() {
        std::fs::rename(&at, &to).expect("move into the canary");
    } else if rel == "packed-refs" {
        std::fs::write(&to, "# pack-refs with: peeled fully-peeled sorted \n").expect("canary");
    } else {
        std::fs::write(&to, "canary\n").expect("canary file");
    }
    if let Some(parent) = at.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::os::unix::fs::symlink(&to, &at).expect("plant symlink");
}

#[test]
fn symlinks_planted_in_git_never_carry_a_commit_write_outside_the_workspace() {
    let plants: &[&str] = &[
        "logs/HEAD",
        "logs/refs/heads/main",
        "refs/heads",
        "refs/heads/main",
        "objects",
        "objects/xx",
        "index",
        "packed-refs",
        "gitfile",
        "dotgit-symlink",
        "fifo:logs/refs/heads/main",
        "fifo:HEAD",
        "fifo:index",
    ];
    for plant in plants {
        let (s, d) = setup_with("", "");
        // The reflogs exist, as after any commit made with git.
        git_out(&s.ws, &["reflog", "expire", "--all"]);
        let canary = s.etc.join("canary");
        std::fs::create_dir_all(&canary).expect("canary");
        s.write_ws("a.txt", "gated\n");
        let pid = d.attach(commit_policy(&["a.txt"], true));
        d.report("s1", "turn-end");
        d.wait_status(&pid, "awaiting-ack", T);
        // The agent booby-traps .git between the gate and the ack.
        match *plant {
            "objects/xx" => {
                for b in 0..=255u8 {
                    plant_link(&s.ws, &canary, &format!("objects/{b:02x}"));
                }
            }
            "gitfile" | "dotgit-symlink" => {
                let real = canary.join("realgit");
                std::fs::rename(s.ws.join(".git"), &real).expect("move .git");
                if *plant == "gitfile" {
                    std::fs::write(s.ws.join(".git"), format!("gitdir: {}\n", real.display()))
                        .expect("gitfile");
                } else {
                    std::os::unix::fs::symlink(&real, s.ws.join(".git")).expect("ln");
                }
            }
            fifo if fifo.starts_with("fifo:") => {
                // A FIFO would block whoever opens it, for good.
                let at = s.ws.join(".git").join(&fifo["fifo:".len()..]);
                let _ = std::fs::remove_file(&at);
                let c = std::ffi::CString::new(at.display().to_string()).expect("path");
                // SAFETY: mkfifo(3) with a valid NUL-terminated path.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
            }
            rel => plant_link(&s.ws, &canary, rel),
        }
        let before = tree_of(&canary);
        let (code, body) = d.http(
            "POST",
            &format!("/v1/policies/{pid}/ack"),
            Some(&d.operator),
            Some(json!({"approve": true})),
        );
        if !(200..300).contains(&code) {
            // Refused at the ack already: the layout checks saw the trap
            // (and named it).
            assert!(
                body["error"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains(".git"),
                "{plant}: {body}"
            );
            assert_eq!(tree_of(&canary), before, "{plant}");
            eprintln!("{plant}: ack refused ({})", body["error"]["message"]);
            continue;
        }
        let deadline = std::time::Instant::now() + T;
        let p = loop {
            let p = d.policy(&pid);
            if p["status"] == "done" || p["status"] == "blocked" {
                break p;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{plant}: stuck at {p}"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(
            tree_of(&canary),
            before,
            "{plant}: a commit write went outside the workspace ({})",
            p["reason"]
        );
        if let Some(rel) = plant.strip_prefix("fifo:") {
            assert_eq!(p["status"], "blocked", "{plant}: {p}");
            assert!(
                p["reason"]
                    .as_str()
                    .unwrap_or_default()
                    .contains(&format!(".git/{rel} is a FIFO")),
                "{plant}: {p}"
            );
        }
        if matches!(*plant, "gitfile" | "dotgit-symlink") {
            assert_eq!(p["status"], "blocked", "{plant}: {p}");
            // A gitfile is taken only as a linked worktree's, and this one
            // names no repository's `worktrees/NAME` (see linked_worktrees.rs).
            let why = if *plant == "gitfile" {
                format!(
                    "its gitdir {} is not REPOSITORY/worktrees/NAME",
                    canary.join("realgit").display()
                )
            } else {
                ".git is neither a directory nor a regular file".to_string()
            };
            assert!(
                p["reason"].as_str().unwrap_or_default().contains(&why),
                "{plant}: {p}"
            );
        }
        if p["status"] == "blocked" {
            // The commit's own failure is an event, with the reason.
            let failed = d.all_events(&format!("&policy={pid}&types=commit-failed"));
            assert_eq!(failed.len(), 1, "{plant}: {p}");
            assert_eq!(failed[0]["payload"]["reason"], p["reason"], "{plant}");
        }
        eprintln!("{plant}: {} ({})", p["status"], p["reason"]);
    }
}

/// Plugins opening a FIFO the agent planted (two at once, each would hold
/// a thread in the kernel with a blocking open) neither hang their gates
/// nor the daemon's API, and the daemon runs the next gate as usual.
#[test]
fn fifo_reading_plugins_leave_the_daemon_answering() {
    let plugins = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../plugins/target/wasm32-wasip2/release");
    let (s, d) = setup_with(
        "",
        &format!(
            "[wasm]\nplugin_dirs = [\"{}\"]\ncache_dir = \"{}\"\n",
            plugins.display(),
            plugins.join("../../gatehost-test-cache").display()
        ),
    );
    // Ignored, so that the change set (which refuses a FIFO) leaves it out
    // and the plugins get to open it.
    s.write_ws(".gitignore", "private/\n");
    std::fs::create_dir(s.ws.join("private")).expect("mkdir");
    let fifo =
        std::ffi::CString::new(s.ws.join("private/STYLE.md").display().to_string()).expect("path");
    // SAFETY: mkfifo(3) with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let gate = json!({"wasm": {"plugin": "hostile", "timeoutMs": 3000,
        "config": {"mode": "read", "arg": "/workspace/private/STYLE.md"}}});
    let spec = json!({"sessionId": "s1", "gate": gate, "onFail": {"maxRetries": 0}});
    let ids = [d.attach(spec.clone()), d.attach(spec)];
    d.report("s1", "turn-end");
    let fastest = (0..3)
        .map(|_| {
            let started = std::time::Instant::now();
            assert_eq!(d.agent_ok("GET", "/v1/health", None)["ok"], true);
            started.elapsed()
        })
        .min()
        .expect("three");
    assert!(
        fastest < Duration::from_millis(100),
        "health took {fastest:?}"
    );
    for id in &ids {
        let p = d.wait_status(id, "blocked", T);
        let reason = p["verdict"]["gates"][0]["reason"]
            .as_str()
            .unwrap_or_default();
        assert!(reason.starts_with("denied: "), "{p}");
    }
    let next = d.attach(json!({"sessionId": "s1", "gate": {"wasm": {"plugin": "noop"}}}));
    d.report("s1", "turn-end");
    let p = d.wait_status(&next, "done", T);
    assert_eq!(p["verdict"]["outcome"], "pass", "{p}");
}

/// An attach whose plugin must be compiled (1–2 s for `forbid-patterns`
/// here) does that work off the threads that serve requests: three at once
/// leave `/v1/health` answering in under 250 ms (1.5 s when they held the
/// request threads). And the work is bounded:
/// past `[daemon] attach_timeout_ms` the answer is 503 `attach-timeout`,
/// and nothing is stored, even once the plugin has finished compiling.
#[test]
fn attach_checks_run_off_the_request_threads_within_a_time_bound() {
    let plugins = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../plugins/target/wasm32-wasip2/release");
    let gate = json!({"wasm": {"plugin": "forbid-patterns", "config": {"rules": []}}});
    let spec = json!({"sessionId": "s1", "gate": gate});
    for (timeout_ms, concurrent) in [(120_000u64, 3usize), (300, 1)] {
        let cache = tempfile::tempdir().expect("cache");
        let (_s, d) = setup_with(
            &format!("attach_timeout_ms = {timeout_ms}\n"),
            &format!(
                "[wasm]\nplugin_dirs = [\"{}\"]\ncache_dir = \"{}\"\n",
                plugins.display(),
                cache.path().display()
            ),
        );
        let answers = std::thread::scope(|scope| {
            let attaches: Vec<_> = (0..concurrent)
                .map(|_| {
                    scope.spawn(|| {
                        d.http("POST", "/v1/policies", Some(&d.agent), Some(spec.clone()))
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_millis(200));
            let slowest = (0..3)
                .map(|_| {
                    let started = std::time::Instant::now();
                    assert_eq!(d.agent_ok("GET", "/v1/health", None)["ok"], true);
                    started.elapsed()
                })
                .max()
                .expect("three");
            // Measured while the compilations ran (they take seconds): when
            // they held the request threads, health waited 1.5 s for them.
            // The bound is well below that and well above a loaded
            // machine's answer (281 ms was seen with two builds beside).
            assert!(
                concurrent == 1 || attaches.iter().any(|a| !a.is_finished()),
                "the attaches ended before health was measured"
            );
            assert!(
                slowest < Duration::from_millis(800),
                "health took {slowest:?} while {concurrent} attaches compiled"
            );
            attaches
                .into_iter()
                .map(|a| a.join().expect("attach thread"))
                .collect::<Vec<_>>()
        });
        let listed = || {
            d.operator_ok("GET", "/v1/policies?limit=1000", None)["policies"]
                .as_array()
                .map_or(0, Vec::len)
        };
        if concurrent == 3 {
            for (code, body) in &answers {
                assert_eq!(*code, 201, "{body}");
            }
            assert_eq!(listed(), 3);
            continue;
        }
        let (code, body) = &answers[0];
        assert_eq!(*code, 503, "{body}");
        assert_eq!(body["error"]["code"], "attach-timeout", "{body}");
        // The compilation goes on and lands in the cache; the attach it
        // served still stores nothing.
        let deadline = std::time::Instant::now() + T;
        while !std::fs::read_dir(cache.path())
            .expect("cache")
            .flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with(".cwasm"))
        {
            assert!(std::time::Instant::now() < deadline, "never compiled");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(listed(), 0);
        assert!(d.log().contains("attach_timeout_ms"), "{}", d.log());
    }
}

/// A flipping process swaps `a.txt` between clean and forbidden content
/// (the same bytes coming back) about a thousand times a second while 50
/// commit policies gate on it and are acked: whatever the timing, every
/// commit holds the content its gate judged (its tree is the snapshot's
/// tree the gate ran on), never the forbidden one. (Gated on the live
/// workspace, fingerprinted before and after, the forbidden content was
/// committed.)
#[test]
fn content_flipping_under_the_gate_is_never_committed_unjudged() {
    let (s, d) = setup_with("", "");
    s.write_ws("a.txt", "clean 0\n");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flipped = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let flipper = {
        let (stop, flipped, path) = (stop.clone(), flipped.clone(), s.ws.join("a.txt"));
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                flipped.store(n, std::sync::atomic::Ordering::Relaxed);
                // A -> B -> A -> C: clean contents come back byte for
                // byte, so a check before and after a gate cannot tell.
                let text = match n % 4 {
                    0 => "clean a\n",
                    2 => "clean b\n",
                    _ => "dbg!(x)\n",
                };
                let _ = std::fs::write(&path, text);
                std::thread::sleep(Duration::from_micros(500));
            }
            n
        })
    };
    let spec = json!({
        "sessionId": "s1",
        "gate": {"command": "bash", "args": ["-c", "sleep 0.02; grep -q '^clean' a.txt"]},
        "onFail": {"maxRetries": 0},
        "then": "commit",
        "commit": {"paths": ["a.txt"], "message": "gated", "requireHumanAck": true}
    });
    // Run until the race went both ways often enough and the content
    // flipped over a thousand times meanwhile (a loaded machine shifts the
    // odds and a quick host ends the rounds sooner, so neither a fixed
    // count of rounds nor of flips per round is assumed).
    let (mut passed, mut committed, mut refused) = (0, 0, 0);
    for _ in 0..400 {
        if passed >= 5 && refused >= 5 && flipped.load(std::sync::atomic::Ordering::Relaxed) > 1000
        {
            break;
        }
        let pid = d.attach(spec.clone());
        d.report("s1", "turn-end");
        let deadline = std::time::Instant::now() + T;
        let p = loop {
            let p = d.policy(&pid);
            if let Some("awaiting-ack" | "blocked") = p["status"].as_str() {
                break p;
            }
            assert!(std::time::Instant::now() < deadline, "{p}");
            std::thread::sleep(Duration::from_millis(10));
        };
        if p["status"] == "blocked" {
            refused += 1;
            continue;
        }
        passed += 1;
        let tree = p["plan"]["snapshot"]["tree"]
            .as_str()
            .expect("tree")
            .to_string();
        d.cli(&["policy", "ack", &pid, "--approve"], &d.operator);
        let p = d.wait_status(&pid, "done", T);
        let Some(sha) = p["commitSha"].as_str() else {
            continue; // the judged content was HEAD's already
        };
        committed += 1;
        assert_eq!(
            git_out(&s.ws, &["rev-parse", &format!("{sha}^{{tree}}")]).trim(),
            tree,
            "the commit is not the snapshot its gate ran on"
        );
        let content = git_out(&s.ws, &["show", &format!("{sha}:a.txt")]);
        assert!(
            content.starts_with("clean"),
            "committed unjudged content: {content:?}"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let flips = flipper.join().expect("flipper");
    assert!(flips > 1000, "only {flips} flips");
    // Both outcomes happened: the test exercised the race both ways.
    assert!(
        passed >= 5 && refused >= 5 && committed >= 1,
        "{passed} passed ({committed} committed), {refused} refused"
    );
}

/// A judge gating a commit policy sees the snapshot's diff against HEAD
/// (marked as untrusted data) with the agent's last message, not only the
/// message; files outside the commit paths are not in it.
#[test]
fn judges_of_a_commit_policy_see_the_snapshots_diff() {
    let out = tempfile::tempdir().expect("out");
    let saved = out.path().join("prompt.txt");
    let (s, d) = setup_with(
        "",
        &format!(
            "[judge.adapters.record]\ncommand = [\"bash\", \"{}\", \"{}\"]\nwrite = [\"{}\"]\n",
            common::fixture_str("judges/record-prompt.sh"),
            saved.display(),
            out.path().display()
        ),
    );
    s.write_ws("src/lib.rs", "pub fn judged() {}\n");
    s.write_ws("notes.txt", "not in the commit\n");
    let pid = d.attach(json!({
        "sessionId": "s1",
        "gate": {"judge": {"adapter": "record", "prompt": "Is the change clean?"}},
        "onFail": {"maxRetries": 0},
        "then": "commit",
        "commit": {"paths": ["src"], "message": "m"}
    }));
    d.report("s1", "turn-end");
    d.wait_status(&pid, "blocked", T);
    let prompt = std::fs::read_to_string(&saved).expect("prompt saved");
    assert!(prompt.contains("turn-end from s1"), "{prompt}");
    assert!(
        prompt.contains("THE CHANGE (a diff against HEAD)"),
        "{prompt}"
    );
    assert!(prompt.contains("+pub fn judged() {}"), "{prompt}");
    assert!(!prompt.contains("not in the commit"), "{prompt}");
    assert!(prompt.contains("BEGIN UNTRUSTED DATA>>>"), "{prompt}");
}

/// With `[sandbox] user`, a commit policy's gate runs as that user in its
/// snapshot's worktree, which that user owns and may write (a build there,
/// into a cache the operator granted: the worktree is settled back to its
/// tree after the run, and what the gate wrote elsewhere goes).
#[test]
fn a_gate_user_runs_and_writes_in_its_snapshots_worktree() {
    use std::os::unix::fs::MetadataExt;
    let s = Scratch::new();
    git_repo(&s.ws);
    let top = s.ws.parent().expect("scratch top");
    std::fs::set_permissions(top, std::fs::Permissions::from_mode(0o711)).expect("chmod");
    let cfg = s.write(
        "config.toml",
        &allow_config(&["true"])
            .replace(
                "[sandbox]\n",
                &format!(
                    "[sandbox]\nuser = \"nobody\"\nscratch_dir = \"{}\"\n",
                    s.etc.join("scratch").display()
                ),
            )
            .replace("[daemon]\n", "[daemon]\nworktree_caches = [\"out\"]\n"),
    );
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    d.register("s1", &s.ws);
    s.write_ws(".gitignore", "out/\nstray.txt\n");
    s.write_ws("a.txt", "x\n");
    // Attached by the operator: only its policies keep the granted caches.
    let (code, body) = d.http(
        "POST",
        "/v1/policies",
        Some(&d.operator),
        Some(json!({
        "sessionId": "s1",
        "gate": {"command": "bash", "args": ["-c", "mkdir -p out && id -u > out/built.txt && touch stray.txt && grep -q x a.txt"]},
        "onFail": {"maxRetries": 0},
        "then": "commit",
        "commit": {"paths": ["a.txt", ".gitignore"], "message": "m"}
    })),
    );
    assert_eq!(code, 201, "{body}");
    let pid = body["policyId"].as_str().expect("policy id").to_string();
    d.report("s1", "turn-end");
    let p = d.wait_status(&pid, "awaiting-ack", T);
    assert_eq!(p["verdict"]["outcome"], "pass", "{p}");
    let worktrees = s.etc.join("data.worktrees");
    let built: Vec<PathBuf> = std::fs::read_dir(&worktrees)
        .expect("worktrees")
        .flatten()
        .map(|e| e.path().join("out/built.txt"))
        .filter(|p| p.exists())
        .collect();
    assert_eq!(built.len(), 1, "{built:?}");
    assert_eq!(
        std::fs::read_to_string(&built[0]).expect("built"),
        "65534\n"
    );
    let worktree = built[0].parent().and_then(Path::parent).expect("worktree");
    assert_eq!(std::fs::metadata(worktree).expect("meta").uid(), 65534);
    assert_eq!(
        std::fs::metadata(worktree.join("a.txt"))
            .expect("meta")
            .uid(),
        65534
    );
}

/// One queue per URL: a session's `notifyUrl` that accepts connections but
/// never answers delays only its own deliveries; the operator's global
/// webhook still gets every event at once (before, each batch of 32
/// waited for the dead URL's timeout).
#[test]
fn a_url_that_never_answers_delays_only_itself() {
    let live = receiver_answering(None);
    // Accepts (the kernel's backlog) and never answers.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let dead_url = format!("http://{}/hook/dead", dead.local_addr().expect("addr"));
    let (s, d) = setup_with(
        &format!(
            "webhook_url = \"{}\"\nwebhook_timeout_ms = 8000\nnotify_url_prefixes = [\"http://{}/hook/\"]\n",
            live.url,
            dead.local_addr().expect("addr")
        ),
        "",
    );
    let (code, v) = d.http(
        "POST",
        "/v1/sessions",
        Some(&d.agent),
        Some(json!({"id": "s2", "cwd": s.ws, "notifyUrl": dead_url})),
    );
    assert!((200..300).contains(&code), "{v}");
    let started = std::time::Instant::now();
    for _ in 0..40 {
        d.report("s2", "turn-start");
    }
    let head = d.operator_ok("GET", "/v1/events?since=0&limit=1000", None)["nextCursor"]
        .as_u64()
        .expect("cursor");
    let deadline = started + Duration::from_secs(4);
    loop {
        let got = live.seen.lock().expect("lock").len() as u64;
        if got >= head {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the global webhook got {got} of {head} events in 4 s: held up by the dead URL"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(dead);
}

/// A real git holding a lock, started in its own process group so that
/// the test can end it (and its children) whatever happens.
struct LiveGit(std::process::Child);

impl LiveGit {
    fn spawn(ws: &Path, args: &[&str], env: &[(&str, &str)]) -> LiveGit {
        use std::os::unix::process::CommandExt;
        let child = std::process::Command::new("git")
            .args(args)
            .current_dir(ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "person")
            .env("GIT_AUTHOR_EMAIL", "p@p")
            .env("GIT_COMMITTER_NAME", "person")
            .env("GIT_COMMITTER_EMAIL", "p@p")
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .expect("spawn git");
        LiveGit(child)
    }

    fn alive(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(None))
    }
}

impl Drop for LiveGit {
    fn drop(&mut self) {
        let pgid = self.0.id() as i32;
        // SAFETY: kill(2) on the process group of our own child.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = self.0.wait();
        // Nothing of the group is left.
        let deadline = std::time::Instant::now() + T;
        // SAFETY: probing the group with signal 0.
        while unsafe { libc::kill(-pgid, 0) } == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "git group {pgid} left"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Issue 12 #11: a person's git holds the branch's lock (`git update-ref
/// --stdin`, a transaction prepared and waiting) and the index's (`git
/// commit` waiting in its editor), both made before the daemon started. A
/// commit policy's publish waits and retries, then is blocked with a
/// `policy:commit-failed` event; both locks stay where they are and both
/// gits live on. A second policy, waiting on those locks in `committing`,
/// can be cancelled, and commits nothing once they are released. (Before,
/// every lock older than the daemon was removed and the commit went
/// through under the person's git; and `committing` refused a cancel.)
#[test]
fn a_live_gits_locks_are_waited_for_never_removed_and_a_waiting_commit_can_be_cancelled() {
    let s = Scratch::new();
    git_repo(&s.ws);
    let head = git_out(&s.ws, &["rev-parse", "HEAD"]).trim().to_string();
    let editor = s.write("editor.sh", "#!/bin/sh\nsleep 600\n");
    std::fs::set_permissions(&editor, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    s.write_ws("README", "the person's change\n");
    let editor_env = editor.display().to_string();
    let mut committing_person = LiveGit::spawn(
        &s.ws,
        &["commit", "-a"],
        &[("GIT_EDITOR", editor_env.as_str())],
    );
    let mut transaction = LiveGit::spawn(&s.ws, &["update-ref", "--stdin"], &[]);
    {
        let stdin = transaction.0.stdin.as_mut().expect("stdin");
        write!(stdin, "start\nupdate refs/heads/main {head}\nprepare\n").expect("write");
        stdin.flush().expect("flush");
        let mut out = BufReader::new(transaction.0.stdout.as_mut().expect("stdout"));
        let mut line = String::new();
        for want in ["start: ok", "prepare: ok"] {
            line.clear();
            out.read_line(&mut line).expect("read");
            assert_eq!(line.trim(), want);
        }
    }
    let (ref_lock, index_lock) = (
        s.ws.join(".git/refs/heads/main.lock"),
        s.ws.join(".git/index.lock"),
    );
    let deadline = std::time::Instant::now() + T;
    while !index_lock.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "git commit took no lock"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(ref_lock.exists());
    std::thread::sleep(Duration::from_millis(50));
    let cfg = s.write("config.toml", &allow_config(&["true"]));
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    d.register("s1", &s.ws);
    s.write_ws("gated.txt", "gated\n");
    let as_operator = |spec: Value| {
        let (code, body) = d.http("POST", "/v1/policies", Some(&d.operator), Some(spec));
        assert_eq!(code, 201, "{body}");
        body["policyId"].as_str().expect("policyId").to_string()
    };
    let first = as_operator(commit_policy(&["gated.txt"], false));
    d.report("s1", "turn-end");
    let p = d.wait_status(&first, "blocked", Duration::from_secs(60));
    let failed = d.all_events(&format!("&policy={first}&types=commit-failed"));
    assert_eq!(failed.len(), 1, "{p}");
    assert!(
        ref_lock.exists() && index_lock.exists(),
        "a live git's lock was removed"
    );
    assert!(committing_person.alive() && transaction.alive());
    assert_eq!(git_out(&s.ws, &["rev-parse", "HEAD"]).trim(), head);
    assert!(d.log().contains("retrying"), "{}", d.log());
    // A second one waits on the same locks, in `committing`: cancelled.
    let second = as_operator(json!({
        "sessionId": "s1", "gate": {"command": "true"}, "watchFrom": "now", "then": "commit",
        "commit": {"paths": ["gated.txt"], "message": "second", "requireHumanAck": false}
    }));
    d.report("s1", "turn-end");
    d.wait_status(&second, "committing", T);
    let c = d.cli(&["policy", "cancel", &second], &d.operator);
    assert_eq!(c.code, 0, "{}", c.stderr);
    let p = d.policy(&second);
    assert_eq!(p["status"], "cancelled", "{p}");
    let ev = d.all_events(&format!("&policy={second}&types=cancelled"));
    assert_eq!(ev[0]["payload"]["from"], "committing");
    // The person's gits end; the cancelled policy commits nothing.
    drop(transaction);
    drop(committing_person);
    let _ = std::fs::remove_file(&index_lock);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(git_out(&s.ws, &["rev-parse", "HEAD"]).trim(), head);
    assert_eq!(d.policy(&second)["status"], "cancelled");
    assert!(
        d.all_events(&format!("&policy={second}&types=committed"))
            .is_empty()
    );
}

/// A receiver that answers 429 with `Retry-After: 3` is not tried again
/// before 3 s (the backoff alone would retry after about 1 s).
#[test]
fn a_receivers_retry_after_is_honoured() {
    let hook = receiver_answering(Some("429 Too Many Requests\r\nretry-after: 3\r\n"));
    let (_s, d) = setup_with(&format!("webhook_url = \"{}\"\n", hook.url), "");
    let deadline = std::time::Instant::now() + T;
    let (first, second) = loop {
        let seen = hook.seen.lock().expect("lock").clone();
        let registered: Vec<&Seen> = seen
            .iter()
            .filter(|(_, k, _, _)| k == "session:registered")
            .collect();
        if registered.len() >= 2 {
            let at = |s: &Seen| -> u128 {
                s.2["x-received-ms"]
                    .to_str()
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0)
            };
            break (at(registered[0]), at(registered[1]));
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no retry\n{}",
            d.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        second - first >= 3000,
        "retried after {} ms",
        second - first
    );
}

/// Issue 24, item 3: what a gate of a policy the agent attached wrote in
/// its snapshot worktree (here in an ignored `cache/`, as a planted `.pyc`
/// in `__pycache__/` would be) never reaches the gate of a policy the
/// operator attached (before: the worktree kept every ignored file, and
/// both policies used the same one).
#[test]
fn what_an_agent_policys_gate_left_in_its_worktree_never_reaches_the_operators() {
    let (s, d) = setup_with("", "");
    s.write_ws(".gitignore", "cache/\n");
    git_out(&s.ws, &["add", ".gitignore"]);
    common::daemon::git_as_tester(&s.ws, &["commit", "-qm", "ignore cache"]);
    s.write_ws("src/lib.rs", "pub fn f() {}\n");
    let policy = |script: &str| {
        json!({"sessionId": "s1",
               "gate": {"command": "bash", "args": ["-c", script]},
               "then": "commit", "onFail": {"maxRetries": 0},
               "commit": {"paths": ["src"], "message": "m"}})
    };
    let planter = d.attach(policy("mkdir -p cache && echo planted > cache/planted"));
    d.report("s1", "turn-end");
    d.wait_status(&planter, "awaiting-ack", T);
    let (code, body) = d.http(
        "POST",
        &format!("/v1/policies/{planter}/cancel"),
        Some(&d.operator),
        None,
    );
    assert_eq!(code, 200, "{body}");

    let (code, body) = d.http(
        "POST",
        "/v1/policies",
        Some(&d.operator),
        Some(policy("test ! -e cache/planted")),
    );
    assert_eq!(code, 201, "{body}");
    let checker = body["policyId"].as_str().expect("id").to_string();
    s.write_ws("src/lib.rs", "pub fn f() -> u8 { 1 }\n");
    d.report("s1", "turn-end");
    let p = d.wait_status(&checker, "awaiting-ack", T);
    assert_eq!(p["status"], "awaiting-ack", "{p}");
}
