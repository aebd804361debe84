//! `gatehost serve` on PostgreSQL: a policy gated, acked and committed,
//! then the daemon killed and started again on the same database (its
//! policies, events and cursors are there, and new cursors follow the
//! old ones); and the password in no log line, event or command output.
//! (Several daemons on one database: `fleet`.)

use super::{database, store_check, store_section, workspace_on};
use crate::common::daemon::{Daemon, git_out, serve_command};
use crate::common::{allow_config, run_gatehost};
use serde_json::{Value, json};
use std::time::Duration;

const T: Duration = Duration::from_secs(60);

fn cursors(events: &[Value]) -> Vec<i64> {
    events
        .iter()
        .map(|e| e["cursor"].as_i64().expect("cursor"))
        .collect()
}

#[test]
fn a_daemon_on_postgres_commits_and_after_a_restart_keeps_everything_and_never_reuses_a_cursor() {
    let Some(pg) = database("store::postgres::restart") else {
        return;
    };
    let (s, cfg) = workspace_on(&pg.url, &pg.password_file, &["true"]);
    let data = s.etc.join("data");
    let mut d = Daemon::start(&data, &cfg);
    // The store is the database: no SQLite file is made.
    assert!(!data.join("gatehost.db").exists());
    d.register("s1", &s.ws);
    let pid = d.commit_awaiting_ack(&s.ws, "gated on postgres", T);
    d.cli_ok(&["policy", "ack", &pid, "--approve"], &d.operator);
    d.wait_status(&pid, "done", T);
    let log = git_out(&s.ws, &["log", "--format=%s"]);
    assert_eq!(
        log.lines().filter(|l| *l == "gated on postgres").count(),
        1,
        "{log}"
    );
    let before = d.all_events("");
    let head = *cursors(&before).last().expect("events");
    assert!(
        before.iter().any(|e| e["type"] == "policy:committed"),
        "{before:?}"
    );
    // The database says the same, before the restart.
    let (code, check) = store_check(&cfg);
    assert_eq!(code, 0, "{check}");
    assert_eq!(check["backend"], "postgres");
    assert_eq!(check["url"], pg.url.as_str());
    assert_eq!(check["schemaVersion"], check["knownSchemaVersion"]);
    assert!(check["headCursor"].as_i64() >= Some(head), "{check} {head}");

    // SIGKILL, and a new daemon on the same database.
    d.restart();
    assert_eq!(d.policy(&pid)["status"], "done");
    let after = d.all_events("");
    assert_eq!(
        after[..before.len()]
            .iter()
            .map(|e| (e["cursor"].clone(), e["type"].clone()))
            .collect::<Vec<_>>(),
        before
            .iter()
            .map(|e| (e["cursor"].clone(), e["type"].clone()))
            .collect::<Vec<_>>(),
        "the events of the first daemon, as they were"
    );
    // A second policy's events come after the first daemon's, none reused.
    let second = d.attach(json!({"sessionId": "s1", "gate": {"command": "true"}}));
    d.report("s1", "turn-end");
    d.wait_status(&second, "done", T);
    let all = d.all_events("");
    let all_cursors = cursors(&all);
    assert!(
        all_cursors.windows(2).all(|w| w[0] < w[1]),
        "cursors only grow: {all_cursors:?}"
    );
    let new: Vec<&Value> = all
        .iter()
        .filter(|e| e["policyId"] == second.as_str())
        .collect();
    assert!(!new.is_empty(), "{all:?}");
    assert!(
        new.iter().all(|e| e["cursor"].as_i64() > Some(head)),
        "a cursor at or below the first daemon's head {head}: {new:?}"
    );
    // The commit was made once, and not again by the restart.
    let log = git_out(&s.ws, &["log", "--format=%s"]);
    assert_eq!(log.lines().filter(|l| *l == "gated on postgres").count(), 1);
    let (code, check) = store_check(&cfg);
    assert_eq!(code, 0, "{check}");
    assert!(
        check["headCursor"].as_i64() >= all_cursors.last().copied(),
        "{check}"
    );
    d.stop();
}

#[test]
fn the_password_is_in_no_log_line_event_or_output() {
    let Some(pg) = database("store::postgres::password_leak") else {
        return;
    };
    let (s, cfg) = workspace_on(&pg.url, &pg.password_file, &["true"]);
    let data = s.etc.join("data");
    let mut d = Daemon::start_with_env(&data, &cfg, &[("GATEHOST_LOG", "debug")]);
    d.register("s1", &s.ws);
    let pid = d.commit_awaiting_ack(&s.ws, "leak check", T);
    d.cli_ok(&["policy", "ack", &pid, "--approve"], &d.operator);
    d.wait_status(&pid, "done", T);
    let secret = pg.password.as_str();
    let mut seen: Vec<(String, String)> = Vec::new();
    for e in d.all_events("") {
        seen.push((format!("event {}", e["cursor"]), e.to_string()));
    }
    let cfg_arg = cfg.display().to_string();
    let gate = s.write("gate.json", r#"{"command": "true"}"#);
    let runs = [
        vec!["store", "check", "--json", "--config", &cfg_arg],
        vec!["store", "check", "--config", &cfg_arg],
        vec!["store", "migrate", "--config", &cfg_arg],
    ];
    for args in &runs {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let run = run_gatehost(&args, &[]);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        seen.push((format!("{args:?}"), format!("{}{}", run.stdout, run.stderr)));
    }
    let check = run_gatehost(
        &[
            "check".into(),
            "--config".into(),
            cfg_arg.clone(),
            "--workspace".into(),
            s.ws.display().to_string(),
            "--json".into(),
            gate.display().to_string(),
        ],
        &[],
    );
    assert_eq!(check.code, 0, "{}", check.stderr);
    seen.push(("check".into(), format!("{}{}", check.stdout, check.stderr)));
    // A wrong password: an error naming the database, and neither password.
    let wrong = "not-the-password-4711";
    let wrong_file = s.write("wrong.password", &format!("{wrong}\n"));
    let wrong_cfg = s.write(
        "wrong.toml",
        &format!(
            "{}{}",
            allow_config(&["true"]),
            store_section(&pg.url, &wrong_file)
        ),
    );
    let refused = serve_command(&s.etc.join("data-wrong"), &wrong_cfg, "127.0.0.1:0")
        .output()
        .expect("run serve");
    let said = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert!(said.contains(&pg.url), "names the database: {said}");
    assert!(!said.contains(wrong), "{said}");
    seen.push(("serve with a wrong password".into(), said));
    d.stop();
    seen.push(("the daemon's log".into(), d.log()));
    assert!(d.log().contains(&pg.url), "the log names the store");
    for (what, text) in &seen {
        assert!(!text.contains(secret), "{what} holds the password: {text}");
    }
}
