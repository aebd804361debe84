//! A commit behind a green gate and a human ack: exactly the gated paths,
//! once, from the snapshot that passed; a stale ack, a reject, no ack; the
//! shipped demo; judges and gates over the snapshot's worktree.

use crate::common;
use crate::common::shorthand::{assert_has, assert_lacks};

use super::{T, approve, booby_trap, commit_policy, commits, ran, setup_with};
use common::daemon::{Daemon, git_out, git_scratch};
use common::{Scratch, allow_config};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

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
    let (code, v) = d.post(
        &format!("/v1/policies/{pid}/ack"),
        &d.agent,
        Some(json!({"approve": true})),
    );
    assert_eq!(code, 403, "{v}");
    assert_eq!(commits(&s.ws).len(), 1);
    d.cli_ok(&["policy", "ack", &pid, "--approve"], &d.operator);
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
    let pid = d.commit_awaiting_ack(&s.ws, "gated change", T);
    let first = d.post(
        &format!("/v1/policies/{pid}/ack"),
        &d.operator,
        Some(json!({"approve": true})),
    );
    let second = d.post(
        &format!("/v1/policies/{pid}/ack"),
        &d.operator,
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
    let tree = common::daemon::snapshot_tree(&p);
    assert_eq!(p["plan"]["changedAfterSnapshot"], json!([]));
    s.write_ws("a.txt", "changed after the gate\n");
    // The status says so, as of now.
    let status = d.cli(&["policy", "status", &pid], &d.agent);
    assert_has(
        &status.stdout,
        "changed since the gate's snapshot (not in the commit): a.txt",
    );
    let sha = approve(&d, &pid);
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
    let s = git_scratch();
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
        d.cli_ok(&["policy", "ack", &pid, "--reject"], &d.operator);
        d.wait_status(&pid, "cancelled", T);
        assert!(common::survivors(&m).is_empty());
        p["plan"]["changedAfterSnapshot"].clone()
    };
    let quiet = run("release-1", &|| {
        s.write_ws("beside.txt", "not a commit path\n");
        let _ = std::fs::read(s.ws.join("src/a.txt")).expect("read");
    });
    assert_eq!(quiet, json!([]));
    assert_has(&d.log(), "nothing watched changed since the snapshot");
    let changed = run("release-2", &|| {
        s.write_ws("src/deep/b.txt", "written while the gate ran\n");
        s.write_ws("beside.txt", "again\n");
    });
    assert_eq!(changed, json!(["src/deep/b.txt"]));
    assert_has(&d.log(), "src/deep/b.txt changed");
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
    let sha = approve(&d, &pid);
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
    let (code, v) = d.post("/v1/policies", &d.agent, Some(spec.clone()));
    assert_eq!(code, 400, "{v}");
    assert_eq!(v["error"]["field"], "gateOn");
    let (code, v) = d.post("/v1/policies", &d.operator, Some(spec));
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
    let (code, v) = d.post(
        &format!("/v1/policies/{pid}/ack"),
        &d.operator,
        Some(json!({"approve": true})),
    );
    assert_eq!(code, 409, "{v}");
    assert_eq!(v["error"]["code"], "stale");
    assert_eq!(commits(&s.ws).len(), 1, "nothing committed");
    let p = d.wait_status(&pid, "awaiting-ack", T);
    assert_ne!(p["plan"]["fingerprint"], fp1, "re-gated on the new content");
    assert_eq!(p["gateRuns"], 2);
    let sha = approve(&d, &pid);
    assert_eq!(
        git_out(&s.ws, &["show", &format!("{sha}:a.txt")]),
        "changed after the gate\n"
    );
}

#[test]
fn reject_cancels_with_events_and_commits_nothing() {
    let (s, d) = setup_with("", "");
    let pid = d.commit_awaiting_ack(&s.ws, "gated change", T);
    d.cli_ok(&["policy", "ack", &pid, "--reject"], &d.operator);
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
    let (code, body) = d.post(
        "/v1/policies",
        &d.operator,
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
    assert_has(&stderr, "Compiling gatehost");
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
    assert_has(&prompt, "turn-end from s1");
    assert_has(&prompt, "THE CHANGE (a diff against HEAD)");
    assert_has(&prompt, "+pub fn judged() {}");
    assert_lacks(&prompt, "not in the commit");
    assert_has(&prompt, "BEGIN UNTRUSTED DATA>>>");
}

/// With `[sandbox] user`, a commit policy's gate runs as that user in its
/// snapshot's worktree, which that user owns and may write (a build there,
/// into a cache the operator granted: the worktree is settled back to its
/// tree after the run, and what the gate wrote elsewhere goes).
#[test]
fn a_gate_user_runs_and_writes_in_its_snapshots_worktree() {
    use std::os::unix::fs::MetadataExt;
    let s = git_scratch();
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
    let (code, body) = d.post("/v1/policies", &d.operator, Some(json!({
        "sessionId": "s1",
        "gate": {"command": "bash", "args": ["-c", "mkdir -p out && id -u > out/built.txt && touch stray.txt && grep -q x a.txt"]},
        "onFail": {"maxRetries": 0},
        "then": "commit",
        "commit": {"paths": ["a.txt", ".gitignore"], "message": "m"}
    })));
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
