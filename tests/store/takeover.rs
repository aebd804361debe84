//! A dead host of a fleet (issue 51): once its lease and the grace ran out
//! (by the database's clock), the cluster's leader says it is stale, once
//! (`host:stale`); without shared workspaces its policies wait for it, and
//! it finds them again when it is back; with `[store] shared_workspaces`
//! the leader takes its work over (`host:taken-over`), and a commit it had
//! in flight (its prepared commit stored, held there by the test hook
//! `COMMIT_BARRIER`) is finished by the taker from that prepared commit,
//! made once; the old host, continued, touches nothing (its writes are
//! refused by the database, the test hook `IGNORE_OWN_LEASE` letting them
//! reach it) and stops. A host of three cut off from the database by the
//! loopback TCP proxy past its lease and grace: it stops acting, another
//! takes its work over, and healed it stops (its claim lost) and, started
//! again, rejoins with a new claim. A dead host's routine resumes on the
//! taker: its step (whose agent died with its host) starts again there.

use super::load::health_until;
use super::partition::{address, via_port};
use super::{Pg, database, store_section};
use crate::common::daemon::{Daemon, git_out, git_repo};
use crate::common::tcp_proxy::TcpProxy;
use crate::common::{Scratch, allow_config};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(60);

fn config(s: &Scratch, pg: &Pg, shared: bool) -> std::path::PathBuf {
    config_at(s, "config.toml", &pg.url, pg, shared)
}

/// A configuration named `name` on the database at `url`: lease 3 s,
/// grace 1 s.
fn config_at(s: &Scratch, name: &str, url: &str, pg: &Pg, shared: bool) -> std::path::PathBuf {
    s.write(
        name,
        &format!(
            "{}{}lease = \"3s\"\ngrace = \"1s\"\nshared_workspaces = {shared}\n",
            allow_config(&["true"]),
            store_section(url, &pg.password_file)
        ),
    )
}

/// The events of kind `kind` `d` reads.
fn of_kind(d: &Daemon, kind: &str) -> Vec<Value> {
    d.all_events("")
        .into_iter()
        .filter(|e| e["type"] == kind)
        .collect()
}

/// Waits until `d` reads an event of kind `kind`: the first.
fn wait_event(d: &Daemon, kind: &str) -> Value {
    let deadline = Instant::now() + T;
    loop {
        if let Some(e) = of_kind(d, kind).into_iter().next() {
            return e;
        }
        assert!(Instant::now() < deadline, "no {kind} event:\n{}", d.log());
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_dead_host_is_said_stale_once_and_without_shared_workspaces_its_policies_wait_for_it() {
    let Some(pg) = database("store::takeover::stale_once") else {
        return;
    };
    let s = Scratch::new();
    git_repo(&s.ws);
    let cfg = config(&s, &pg, false);
    let mut a = Daemon::start_with_env(&s.etc.join("a"), &cfg, &[("GATEHOST_HOST_ID", "alpha")]);
    let b = Daemon::start_with_env(&s.etc.join("b"), &cfg, &[("GATEHOST_HOST_ID", "beta")]);
    a.register("s1", &s.ws);
    let watching =
        a.attach(json!({"sessionId": "s1", "gate": {"command": "true"}, "watchFrom": "now"}));
    a.kill9();
    let stale = wait_event(&b, "host:stale");
    let p = &stale["payload"];
    assert_eq!(p["host"], "alpha", "{stale}");
    assert_eq!(p["by"], "beta", "{stale}");
    assert_eq!(p["takeover"], false, "{stale}");
    assert_eq!(p["policies"], json!([watching]), "{stale}");
    assert_eq!(p["graceMs"], 1000, "{stale}");
    // Said after its lease and the grace, by the database's clock.
    assert!(
        stale["at"].as_i64().expect("at") >= p["leaseUntil"].as_i64().expect("lease") + 1000,
        "{stale}"
    );
    assert_eq!(
        pg.sql("SELECT state FROM hosts WHERE id = 'alpha'"),
        "stale"
    );
    // Nobody takes its work: its policy is still its own, waiting.
    assert_eq!(
        pg.sql(&format!(
            "SELECT host FROM policies WHERE id = '{watching}'"
        )),
        "alpha"
    );
    // Back, it claims its id again and finds its policy as it left it.
    let a = Daemon::start_with_env(&s.etc.join("a"), &cfg, &[("GATEHOST_HOST_ID", "alpha")]);
    assert_eq!(pg.sql("SELECT state FROM hosts WHERE id = 'alpha'"), "live");
    assert_eq!(a.policy(&watching)["status"], "watching");
    a.report("s1", "turn-end");
    a.wait_status(&watching, "done", T);
    // Said once, on every host.
    assert_eq!(of_kind(&a, "host:stale").len(), 1);
    assert_eq!(of_kind(&b, "host:stale").len(), 1);
    assert!(of_kind(&b, "host:taken-over").is_empty());
}

#[test]
fn a_commit_in_flight_on_a_dead_host_is_finished_by_the_taker_once_and_the_old_host_touches_nothing()
 {
    let Some(pg) = database("store::takeover::commit_in_flight") else {
        return;
    };
    let s = Scratch::new();
    git_repo(&s.ws);
    let cfg = config(&s, &pg, true);
    let barrier = s.etc.join("commit-barrier");
    let mut a = Daemon::start_with_env(
        &s.etc.join("a"),
        &cfg,
        &[
            ("GATEHOST_HOST_ID", "alpha"),
            (
                "GATEHOST_TEST_COMMIT_BARRIER",
                &barrier.display().to_string(),
            ),
            ("GATEHOST_TEST_IGNORE_OWN_LEASE", "1"),
        ],
    );
    let b = Daemon::start_with_env(&s.etc.join("b"), &cfg, &[("GATEHOST_HOST_ID", "beta")]);
    a.register("s1", &s.ws);
    let pid = a.commit_awaiting_ack(&s.ws, "taken over", T);
    a.operator_ok(
        "POST",
        &format!("/v1/policies/{pid}/ack"),
        Some(json!({"approve": true})),
    );
    // Alpha stored its prepared commit and holds before publishing it.
    a.wait_log("the commit task waits at its barrier", T);
    let prepared: Value =
        serde_json::from_str(&pg.sql(&format!("SELECT prepared FROM policies WHERE id = '{pid}'")))
            .expect("a prepared commit");
    let commit = prepared["commit"].as_str().expect("its id").to_string();
    a.signal(libc::SIGSTOP);
    let taken = wait_event(&b, "host:taken-over");
    let p = &taken["payload"];
    assert_eq!((&p["host"], &p["by"]), (&json!("alpha"), &json!("beta")));
    assert_eq!(p["policies"], json!([pid]), "{taken}");
    assert_eq!(p["sessions"], json!(["s1"]), "{taken}");
    assert_eq!(of_kind(&b, "host:stale").len(), 1);
    // Beta finishes alpha's commit from its prepared commit.
    let done = b.wait_status(&pid, "done", T);
    assert_eq!(done["commitSha"], commit.as_str(), "{done}");
    assert_eq!(
        pg.sql(&format!("SELECT host FROM policies WHERE id = '{pid}'")),
        "beta"
    );
    assert_eq!(
        pg.sql("SELECT state || ' ' || taken_by FROM hosts WHERE id = 'alpha'"),
        "taken beta"
    );
    // Continued and let through its barrier, alpha goes on with what it
    // held: every write it tries is refused, and it stops.
    std::fs::write(&barrier, "").expect("open the barrier");
    a.signal(libc::SIGCONT);
    assert_eq!(a.wait_exit_code(T), Some(2), "{}", a.log());
    assert!(a.log().contains("lost its host claim"), "{}", a.log());
    // One commit, said once.
    let log = git_out(&s.ws, &["log", "--format=%H %s"]);
    assert_eq!(
        log.lines().filter(|l| l.ends_with(" taken over")).count(),
        1,
        "{log}"
    );
    assert!(log.contains(&commit), "{log}");
    let committed = b
        .all_events(&format!("&policy={pid}"))
        .into_iter()
        .filter(|e| e["type"] == "policy:committed")
        .count();
    assert_eq!(committed, 1);
    assert_eq!(b.agent_ok("GET", "/v1/health", None)["ok"], true);
}

#[test]
fn a_host_cut_off_past_its_lease_is_taken_over_by_another_and_rejoins_cleanly_once_healed() {
    let Some(pg) = database("store::takeover::partition") else {
        return;
    };
    let proxy = TcpProxy::start(address(&pg.url));
    let s = Scratch::new();
    git_repo(&s.ws);
    let direct = config(&s, &pg, true);
    let cut = config_at(&s, "cut.toml", &via_port(&pg.url, proxy.port()), &pg, true);
    let mut a = Daemon::start_with_env(&s.etc.join("a"), &cut, &[("GATEHOST_HOST_ID", "alpha")]);
    let b = Daemon::start_with_env(&s.etc.join("b"), &direct, &[("GATEHOST_HOST_ID", "beta")]);
    let c = Daemon::start_with_env(&s.etc.join("c"), &direct, &[("GATEHOST_HOST_ID", "gamma")]);
    a.register("s1", &s.ws);
    let pid = a.commit_awaiting_ack(&s.ws, "after the cut", T);
    proxy.cut();
    health_until(&a, "degraded", |code, _| code == 503);
    // The leader (beta or gamma) takes alpha's work over.
    let taken = wait_event(&b, "host:taken-over");
    let taker = taken["payload"]["by"].as_str().expect("by").to_string();
    assert!(taker == "beta" || taker == "gamma", "{taken}");
    assert_eq!(taken["payload"]["policies"], json!([pid]), "{taken}");
    assert_eq!(
        pg.sql(&format!("SELECT host FROM policies WHERE id = '{pid}'")),
        taker
    );
    // An ack sent to either live host is carried out by the taker.
    let acked = c.operator_ok(
        "POST",
        &format!("/v1/policies/{pid}/ack"),
        Some(json!({"approve": true})),
    );
    assert_eq!(acked["id"], pid.as_str(), "{acked}");
    let done = b.wait_status(&pid, "done", T);
    let sha = done["commitSha"].as_str().expect("committed").to_string();
    // Healed, alpha finds its claim lost and stops; started again, it
    // claims its id anew and serves beside the others.
    proxy.heal();
    assert_eq!(a.wait_exit_code(T), Some(2), "{}", a.log());
    assert!(a.log().contains("lost its host claim"), "{}", a.log());
    let a = Daemon::start_with_env(&s.etc.join("a"), &cut, &[("GATEHOST_HOST_ID", "alpha")]);
    let listed = a.agent_ok("GET", "/v1/hosts", None);
    let states: Vec<(String, String, bool)> = listed["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .map(|h| {
            (
                h["id"].as_str().expect("id").to_string(),
                h["state"].as_str().expect("state").to_string(),
                h["live"] == true,
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("alpha".to_string(), "live".to_string(), true),
            ("beta".into(), "live".into(), true),
            ("gamma".into(), "live".into(), true),
        ],
        "{listed}"
    );
    // Its old policy is the taker's, done; one commit.
    assert_eq!(a.policy(&pid)["status"], "done");
    let log = git_out(&s.ws, &["log", "--format=%H %s"]);
    assert_eq!(
        log.lines()
            .filter(|l| l.ends_with(" after the cut"))
            .count(),
        1,
        "{log}"
    );
    assert!(log.contains(&sha), "{log}");
    // It serves again: a new session of its own gates on it.
    a.register("s2", &s.ws);
    let own = a.attach(json!({"sessionId": "s2", "gate": {"command": "true"}}));
    a.report("s2", "turn-end");
    a.wait_status(&own, "done", T);
    assert_eq!(
        pg.sql(&format!("SELECT host FROM policies WHERE id = '{own}'")),
        "alpha"
    );
    drop((b, c));
}

#[test]
fn a_dead_host_s_routine_resumes_on_the_taker_its_step_started_again() {
    use crate::daemon::acp::{agent_dir, wait_for};
    use crate::daemon::routines::{acp_step, escalate, events, no_agent_left, start};
    let Some(pg) = database("store::takeover::routine") else {
        return;
    };
    let s = Scratch::new();
    let cfg = s.write(
        "config.toml",
        &format!(
            "{}[agents]\nread = [{:?}]\n{}lease = \"3s\"\ngrace = \"1s\"\nshared_workspaces = true\n",
            allow_config(&["true", "false"]),
            agent_dir().display().to_string(),
            store_section(&pg.url, &pg.password_file)
        ),
    );
    let m = crate::common::marker("routine-takeover");
    let mut a = Daemon::start_with_env(&s.etc.join("a"), &cfg, &[("GATEHOST_HOST_ID", "alpha")]);
    let b = Daemon::start_with_env(&s.etc.join("b"), &cfg, &[("GATEHOST_HOST_ID", "beta")]);
    let id = start(
        &a,
        &s,
        json!({"steps": [acp_step(&s, "two", "--ask-first", &m, escalate(120))]}),
    );
    wait_for("alpha's escalation", || {
        (!events(&a, &id, "routine:escalated").is_empty()).then_some(())
    });
    a.kill9();
    // The agent died with its host.
    no_agent_left(&m);
    let taken = wait_event(&b, "host:taken-over");
    assert_eq!(taken["payload"]["routines"], 1, "{taken}");
    // Beta runs its step again: a new agent, which asks again.
    let restarted = wait_for("the step restarted on beta", || {
        events(&b, &id, "routine:step-restarted").into_iter().next()
    });
    assert_eq!(restarted["payload"]["step"], "two", "{restarted}");
    wait_for("the second escalation", || {
        (events(&b, &id, "routine:escalated").len() == 2).then_some(())
    });
    b.cli_ok(
        &["routine", "resolve", &id, "two", "--response", "go"],
        &b.operator,
    );
    wait_for("the run done on beta", || {
        events(&b, &id, "routine:done").into_iter().next()
    });
    assert_eq!(events(&b, &id, "routine:done").len(), 1);
    assert_eq!(
        pg.sql(&format!("SELECT host FROM routines WHERE id = '{id}'")),
        "beta"
    );
    drop(b);
    no_agent_left(&m);
}
