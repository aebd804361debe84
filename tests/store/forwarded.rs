//! What another host answers for a host's policy (issue 51, "any host's
//! API serves every host's policies"), three daemons on one PostgreSQL:
//! the owning host on the wire (sessions, policies and events name their
//! host; `GET /v1/events?host=` reads one host's), the diff of another
//! host's policy forwarded to its owner and answered as the owner answers
//! it, and the forwarded ack's round trip measured (printed, never
//! asserted on time: the machine is shared).

use super::{Pg, database, store_section};
use crate::common::daemon::{Daemon, git_repo};
use crate::common::{Scratch, allow_config};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(60);

fn config(s: &Scratch, pg: &Pg) -> std::path::PathBuf {
    s.write(
        "config.toml",
        &format!(
            "{}{}lease = \"15s\"\n",
            allow_config(&["true"]),
            store_section(&pg.url, &pg.password_file)
        ),
    )
}

fn start(s: &Scratch, cfg: &std::path::Path, id: &str) -> Daemon {
    Daemon::start_with_env(&s.etc.join(id), cfg, &[("GATEHOST_HOST_ID", id)])
}

#[test]
fn the_diff_of_another_host_s_policy_is_its_owner_s_answer_and_every_record_names_its_host() {
    let Some(pg) = database("store::forwarded::diff") else {
        return;
    };
    let s = Scratch::new();
    git_repo(&s.ws);
    let cfg = config(&s, &pg);
    let a = start(&s, &cfg, "alpha");
    let b = start(&s, &cfg, "beta");
    let c = start(&s, &cfg, "gamma");
    a.register("s1", &s.ws);
    // Two files, so that a page of one is a page.
    std::fs::write(s.ws.join("b.txt"), "b\n").expect("write b.txt");
    let id = a.attach(json!({
        "sessionId": "s1", "gate": {"command": "true"}, "then": "commit",
        "commit": {"paths": ["a.txt", "b.txt"], "message": "diffed", "requireHumanAck": true}
    }));
    std::fs::write(s.ws.join("a.txt"), "a\n").expect("write a.txt");
    a.report("s1", "turn-end");
    a.wait_status(&id, "awaiting-ack", T);
    // The owner's own answer, and beta's and gamma's: the same JSON.
    for q in ["", "?from=1&limit=1", "?limit=1"] {
        let path = format!("/v1/policies/{id}/diff{q}");
        let own = a.operator_ok("GET", &path, None);
        assert_eq!(own["totalFiles"], 2, "{own}");
        for other in [&b, &c] {
            assert_eq!(other.operator_ok("GET", &path, None), own, "{path}");
        }
    }
    // The owner's refusal travels back as it gave it.
    let (code, own) = a.get(&format!("/v1/policies/{id}/diff?limit=0"), &a.operator);
    assert_eq!(code, 400, "{own}");
    let watching =
        a.attach(json!({"sessionId": "s1", "gate": {"command": "true"}, "watchFrom": "now"}));
    let (code, own) = a.get(&format!("/v1/policies/{watching}/diff"), &a.operator);
    assert!(code >= 400, "{own}");
    let (code_b, theirs) = b.get(&format!("/v1/policies/{watching}/diff"), &b.operator);
    assert_eq!((code_b, &theirs), (code, &own));
    // The agent token with none of its sessions' keys is refused by the
    // host asked, before anything is sent.
    let (code, body) = b.get(&format!("/v1/policies/{id}/diff"), &b.agent);
    assert_eq!(code, 403, "{body}");
    // Every record names its host, on every host.
    for reader in [&a, &b, &c] {
        let p = reader.policy(&id);
        assert_eq!(p["host"], "alpha", "{p}");
        let (_, session) = reader.get("/v1/sessions/s1", &reader.operator);
        assert_eq!(session["host"], "alpha", "{session}");
    }
    b.register("s2", &s.ws);
    let all = b.all_events("");
    assert!(
        all.iter()
            .all(|e| e["host"] == "alpha" || e["host"] == "beta"),
        "{all:?}"
    );
    let of_beta = c.all_events("&host=beta");
    assert!(!of_beta.is_empty());
    assert!(of_beta.iter().all(|e| e["host"] == "beta"), "{of_beta:?}");
    assert_eq!(
        of_beta.len(),
        all.iter().filter(|e| e["host"] == "beta").count()
    );
    // The CLI's too: `gatehost events poll --host beta`.
    let run = c.cli_ok(
        &[
            "events", "poll", "--host", "beta", "--limit", "1000", "--json",
        ],
        &c.operator,
    );
    let page: Value = serde_json::from_str(run.stdout.trim()).expect("a page");
    assert_eq!(
        page["events"].as_array().map(Vec::len),
        Some(of_beta.len()),
        "{page}"
    );
    // A name that is no host id is refused, naming the parameter.
    let (code, body) = c.get("/v1/events?host=no%20such", &c.operator);
    assert_eq!(
        (code, body["error"]["field"].as_str()),
        (400, Some("host")),
        "{body}"
    );
    // Every diff asked of another host went through host_requests, done.
    let states = pg.sql("SELECT string_agg(DISTINCT state, ',') FROM host_requests");
    assert_eq!(states, "done");
}

/// Milliseconds, sorted: the median and the 90th percentile.
fn figures(mut ms: Vec<f64>) -> (f64, f64) {
    ms.sort_by(f64::total_cmp);
    (ms[ms.len() / 2], ms[ms.len() * 9 / 10])
}

/// The round trip of an ack sent to a host that does not own its policy
/// (the owner refuses it, 409, as the policy is watching: the whole
/// forwarding, nothing else), against the same ack sent to the owner.
#[test]
fn a_forwarded_ack_s_round_trip_is_measured() {
    let Some(pg) = database("store::forwarded::latency") else {
        return;
    };
    let s = Scratch::new();
    git_repo(&s.ws);
    let cfg = config(&s, &pg);
    let a = start(&s, &cfg, "alpha");
    let b = start(&s, &cfg, "beta");
    a.register("s1", &s.ws);
    let id = a.attach(json!({"sessionId": "s1", "gate": {"command": "true"}, "watchFrom": "now"}));
    let path = format!("/v1/policies/{id}/ack");
    let ack = |d: &Daemon| {
        let t = Instant::now();
        let (code, body): (u16, Value) =
            d.post(&path, &d.operator, Some(json!({"approve": false})));
        assert_eq!(code, 409, "{body}");
        assert_eq!(body["error"]["code"], "not-awaiting-ack", "{body}");
        t.elapsed().as_secs_f64() * 1000.0
    };
    const N: usize = 30;
    let local: Vec<f64> = (0..N).map(|_| ack(&a)).collect();
    let forwarded: Vec<f64> = (0..N).map(|_| ack(&b)).collect();
    let (lm, l90) = figures(local);
    let (fm, f90) = figures(forwarded);
    eprintln!(
        "FORWARDED-ACK-LATENCY n={N} owner: median {lm:.1} ms p90 {l90:.1} ms; \
         through another host: median {fm:.1} ms p90 {f90:.1} ms"
    );
    assert_eq!(
        pg.sql("SELECT count(*) FROM host_requests WHERE state = 'done'"),
        N.to_string()
    );
}
