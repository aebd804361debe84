//! Three hosts (alpha, beta, gamma) on one PostgreSQL database, each with
//! its own data directory and git workspace, run commit lifecycles (gate,
//! the operator's ack, commit) with every event posted to a webhook
//! receiver of the test's, while the test SIGKILLs them at random points
//! (mid-gate, mid-commit, mid-publish, mid-webhook) more than 200 times,
//! restarting each with its host id (issue 51). Afterwards every host
//! answers one event log, each policy committed exactly once, every event
//! delivered, and no process is left.
//!
//! The kills are drawn by a seeded generator (`common::chaos`, the seed is
//! printed; `GATEHOST_CHAOS_SEED` replays it), as the single host's crash
//! test in `tests/daemon/durability.rs` does.

use super::{Pg, database, store_section};
use crate::common::chaos::{Lcg, seed, with_retry};
use crate::common::daemon::{Daemon, allow_config_with, git_out, git_repo, script_gate_json};
use crate::common::webhooks::{Receiver, receiver_answering};
use crate::common::{Scratch, assert_no_survivors, marker, workspace_tempdir};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const HOSTS: [&str; 3] = ["alpha", "beta", "gamma"];

/// Lifecycles, one SIGKILL of its host each: 70 per host.
const N: usize = 210;

struct Host {
    id: &'static str,
    d: Daemon,
    ws: tempfile::TempDir,
    /// Each SIGKILL's moment: Unix ms just before it and once it is reaped.
    kills: Vec<(u128, u128)>,
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

fn config(s: &Scratch, pg: &Pg, hook: &Receiver) -> std::path::PathBuf {
    let hook = format!("webhook_url = \"{}\"\n", hook.url);
    s.write(
        "config.toml",
        &format!(
            "{}{}",
            allow_config_with(&["true"], &hook),
            store_section(&pg.url, &pg.password_file)
        ),
    )
}

/// What the killed host was doing, read from the database right after
/// the kill: its policies gating, committing before the commit object is
/// prepared, and publishing it (prepared, the branch not yet recorded),
/// and its webhook deliveries not yet recorded as made; comma-separated.
fn caught_at_kill(host: &str) -> String {
    format!(
        "SELECT concat_ws(',',
            (SELECT count(*) FROM policies WHERE host = '{host}' AND status = 'gating'),
            (SELECT count(*) FROM policies WHERE host = '{host}' AND status = 'committing' AND prepared IS NULL),
            (SELECT count(*) FROM policies WHERE host = '{host}' AND status = 'committing' AND prepared IS NOT NULL),
            (SELECT count(*) FROM deliveries WHERE host = '{host}' AND state = 'pending'))"
    )
}

/// How many kills caught a host in each step ([`caught_at_kill`]).
#[derive(Debug, Default)]
struct Hit {
    gate: usize,
    commit: usize,
    publish: usize,
    webhook: usize,
}

impl Hit {
    fn add(&mut self, counts: &str) {
        let n: Vec<u64> = counts
            .split(',')
            .map(|c| c.parse().expect("a count"))
            .collect();
        assert_eq!(n.len(), 4, "{counts}");
        for (slot, c) in [
            &mut self.gate,
            &mut self.commit,
            &mut self.publish,
            &mut self.webhook,
        ]
        .into_iter()
        .zip(n)
        {
            *slot += usize::from(c > 0);
        }
    }
}

/// The policy `id` as `host` answers it, `None` while it is down.
fn policy(host: &Host, id: &str) -> Option<Value> {
    let d = &host.d;
    match d.http_try(
        "GET",
        &format!("/v1/policies/{id}"),
        Some(&d.operator),
        None,
    )? {
        (200, p) => Some(p),
        _ => None,
    }
}

/// Acks `id` (awaiting its ack) on its host; whether the ack is taken (an
/// answer lost to a kill is found out by the next read of the policy).
fn ack(host: &Host, id: &str) -> bool {
    let d = &host.d;
    let path = format!("/v1/policies/{id}/ack");
    let body = json!({"approve": true});
    match d.http_try("POST", &path, Some(&d.operator), Some(body)) {
        Some((200..=299, _)) => true,
        Some((409, v)) if v["error"]["code"] == "not-awaiting-ack" => false,
        Some((503, _)) | None => false,
        Some((c, v)) => panic!("ack {id} on {}: HTTP {c}: {v}", host.id),
    }
}

/// Acks every policy of `pending` (id → host index) that awaits its ack
/// now; drops those that moved past it.
fn ack_pending(hosts: &[Host], pending: &mut BTreeMap<String, usize>, only: Option<usize>) {
    pending.retain(|id, h| {
        if only.is_some_and(|o| o != *h) {
            return true;
        }
        let Some(p) = policy(&hosts[*h], id) else {
            return true;
        };
        match p["status"].as_str().unwrap_or("") {
            "awaiting-ack" => !ack(&hosts[*h], id),
            "queued" | "watching" | "gating" => true,
            // Acked (committing or done), or settled otherwise: the
            // checks at the end say whether it was right.
            _ => false,
        }
    });
}

/// Registers session `s{i}` on `host`, attaches its commit policy (the
/// operator's, with an idempotency key: a retried attach is one policy),
/// and ends its turn; the policy's id.
fn lifecycle(host: &Host, i: usize, m: &str) -> String {
    let d = &host.d;
    let sid = format!("s{i}");
    let ws = host.ws.path().display().to_string();
    with_retry("register", || {
        let r = d.http_try(
            "POST",
            "/v1/sessions",
            Some(&d.agent),
            Some(json!({"id": sid, "cwd": ws})),
        )?;
        (r.0 == 200).then_some(())
    });
    let gate = script_gate_json("gates/sleep-then-pass.sh", &[m, "0.05"], 30_000);
    let spec = json!({
        "sessionId": sid, "label": format!("p{i}"), "gate": gate, "then": "commit",
        "commit": {"paths": [format!("f/{i}.txt")], "message": format!("commit {i}"), "requireHumanAck": true},
        "idempotencyKey": format!("attach-{i}"),
    });
    let id = with_retry("attach", || {
        match d.http_try(
            "POST",
            "/v1/policies",
            Some(&d.operator),
            Some(spec.clone()),
        ) {
            Some((201, v)) => Some(v["policyId"].as_str().expect("policy id").to_string()),
            Some((503, _)) | None => None,
            Some((c, v)) => panic!("attach {i} on {}: HTTP {c}: {v}", host.id),
        }
    });
    with_retry("turn-end", || {
        let r = d.http_try(
            "POST",
            &format!("/v1/sessions/{sid}/report"),
            Some(&d.agent),
            Some(json!({"kind": "turn-end"})),
        )?;
        (r.0 == 200).then_some(())
    });
    id
}

#[test]
fn three_hosts_under_two_hundred_random_sigkills_lose_and_double_nothing() {
    let Some(pg) = database("store::fleet_chaos::three_hosts") else {
        return;
    };
    let started = Instant::now();
    let s = Scratch::new();
    let hook = receiver_answering(None);
    let cfg = config(&s, &pg, &hook);
    let m = marker("fleet-chaos");
    let mut hosts: Vec<Host> = HOSTS
        .iter()
        .map(|id| {
            let ws = workspace_tempdir();
            git_repo(ws.path());
            let env = [("GATEHOST_HOST_ID", *id)];
            let d = Daemon::start_with_env(&s.etc.join(id), &cfg, &env);
            Host {
                id,
                d,
                ws,
                kills: Vec::new(),
            }
        })
        .collect();
    let seed = seed("fleet crash test");
    let mut rng = Lcg(seed);
    // Policy id → its host's index, and the ids still to ack.
    let mut owner: BTreeMap<String, usize> = BTreeMap::new();
    let mut pending: BTreeMap<String, usize> = BTreeMap::new();
    let mut hit = Hit::default();
    for i in 0..N {
        let h = i % HOSTS.len();
        let file = hosts[h].ws.path().join(format!("f/{i}.txt"));
        std::fs::create_dir_all(file.parent().expect("f/")).expect("mkdir f");
        std::fs::write(&file, format!("file {i}\n")).expect("write");
        let id = lifecycle(&hosts[h], i, &m);
        owner.insert(id.clone(), h);
        // The earlier ones of this host that await their ack get it now:
        // the kill below falls in their commits too.
        ack_pending(&hosts, &mut pending, Some(h));
        pending.insert(id, h);
        std::thread::sleep(Duration::from_millis(rng.below(60)));
        let before = now_ms();
        hosts[h].d.kill9();
        let after = now_ms();
        hosts[h].kills.push((before, after));
        hit.add(&pg.sql(&caught_at_kill(HOSTS[h])));
        hosts[h].d.restart();
    }
    let kills: usize = hosts.iter().map(|h| h.kills.len()).sum();
    assert!(kills >= 200, "only {kills} kills (seed {seed})");
    eprintln!("fleet crash test: the kills caught {hit:?} (seed {seed})");
    // The random points did fall in each step (a seed that missed one is
    // said here, not passed as if it had been tested).
    assert!(
        hit.gate > 0 && hit.commit + hit.publish > 0 && hit.webhook > 0,
        "the kills missed a step: {hit:?} (seed {seed})"
    );
    let last_kill = Instant::now();
    // Everything settles: the rest is acked on its host as it gets there.
    let deadline = Instant::now() + Duration::from_secs(120);
    let policies = loop {
        ack_pending(&hosts, &mut pending, None);
        let d = &hosts[0].d;
        let (_, v) = d.get("/v1/policies?limit=1000", &d.operator);
        let list = v["policies"].as_array().cloned().unwrap_or_default();
        let done = list.iter().filter(|p| p["status"] == "done").count();
        if done == N || Instant::now() > deadline {
            eprintln!(
                "fleet crash test: {done} of {N} done {:?} after the last kill (seed {seed})",
                last_kill.elapsed()
            );
            break list;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    check_policies(&hosts, &owner, &policies, seed);
    let events = check_one_log(&hosts, seed);
    check_commits(&hosts, &owner, &policies, &events, seed);
    check_webhooks(&hosts, &owner, &hook, &events, seed);
    // A clean stop of each; nothing of them or their gates is left.
    let pids: Vec<u32> = hosts.iter().map(|h| h.d.pid()).collect();
    for h in &mut hosts {
        assert_eq!(h.d.stop(), Some(0), "{} stops cleanly", h.id);
    }
    for pid in pids {
        // SAFETY: kill(2) with signal 0 only asks whether `pid` exists.
        let alive = unsafe { libc::kill(pid as i32, 0) } == 0;
        assert!(!alive, "daemon {pid} is left");
    }
    assert_no_survivors(&m);
    eprintln!(
        "fleet crash test: {kills} kills, {N} lifecycles, {} events, {:?} in all (seed {seed})",
        events.len(),
        started.elapsed()
    );
}

/// Each lifecycle's policy exactly once, every one `done`; for one that
/// is not, its events and its host's log lines naming it.
fn check_policies(hosts: &[Host], owner: &BTreeMap<String, usize>, policies: &[Value], seed: u64) {
    let mut by_label: BTreeMap<String, usize> = BTreeMap::new();
    for p in policies {
        *by_label
            .entry(p["spec"]["label"].as_str().unwrap_or("").to_string())
            .or_default() += 1;
    }
    assert_eq!(
        (policies.len(), by_label.len()),
        (N, N),
        "lost or doubled policies (seed {seed}): {by_label:?}"
    );
    let not_done: Vec<String> = policies
        .iter()
        .filter(|p| p["status"] != "done")
        .map(|p| {
            let id = p["id"].as_str().unwrap_or("");
            let host = &hosts[owner.get(id).copied().unwrap_or(0)];
            let log = host.d.log();
            let lines: Vec<&str> = log.lines().filter(|l| l.contains(id)).collect();
            format!(
                "{id} on {} is {}: {:?}\n{}",
                host.id,
                p["status"],
                host.d.policy_events(id),
                lines[lines.len().saturating_sub(40)..].join("\n")
            )
        })
        .collect();
    assert!(
        not_done.is_empty(),
        "not done (seed {seed}):\n{}",
        not_done.join("\n")
    );
}

/// Every host answers the same events, the cursors exactly `1..=head`;
/// those events.
fn check_one_log(hosts: &[Host], seed: u64) -> Vec<Value> {
    let events = hosts[0].d.all_events("");
    for h in &hosts[1..] {
        let other = h.d.all_events("");
        let first_difference = events.iter().zip(&other).position(|(a, b)| a != b);
        assert!(
            other.len() == events.len() && first_difference.is_none(),
            "{} answers another event log than {} (seed {seed}): {} against {} events, first difference at {first_difference:?}",
            h.id,
            hosts[0].id,
            other.len(),
            events.len()
        );
    }
    let cursors: Vec<i64> = events
        .iter()
        .map(|e| e["cursor"].as_i64().expect("cursor"))
        .collect();
    let head = cursors.last().copied().unwrap_or(0);
    assert_eq!(
        cursors,
        (1..=head).collect::<Vec<i64>>(),
        "event cursors skipped or doubled (seed {seed})"
    );
    for kind in [
        "policy:attached",
        "policy:passed",
        "policy:commit-ready",
        "policy:done",
    ] {
        let mut per: BTreeMap<&str, usize> = BTreeMap::new();
        for e in events.iter().filter(|e| e["type"] == kind) {
            *per.entry(e["policyId"].as_str().unwrap_or("")).or_default() += 1;
        }
        assert_eq!(per.len(), N, "{kind}: not one per policy (seed {seed})");
        if kind != "policy:passed" && kind != "policy:commit-ready" {
            // A gate killed mid-run runs again, and may pass again; a
            // policy is attached and done once.
            assert!(per.values().all(|n| *n == 1), "{kind} twice (seed {seed})");
        }
    }
    events
}

/// Each policy's commit exactly once, in its own host's workspace, and
/// `policy:committed` published once, with that commit.
fn check_commits(
    hosts: &[Host],
    owner: &BTreeMap<String, usize>,
    policies: &[Value],
    events: &[Value],
    seed: u64,
) {
    let mut committed: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for e in events.iter().filter(|e| e["type"] == "policy:committed") {
        committed
            .entry(e["policyId"].as_str().unwrap_or(""))
            .or_default()
            .push(e["payload"]["sha"].as_str().unwrap_or(""));
    }
    assert_eq!(
        committed.len(),
        N,
        "a policy:committed per policy (seed {seed})"
    );
    for (h, host) in hosts.iter().enumerate() {
        let ws = host.ws.path();
        let log = git_out(ws, &["log", "--format=%H"]);
        let mine: Vec<&Value> = policies
            .iter()
            .filter(|p| owner.get(p["id"].as_str().unwrap_or("")) == Some(&h))
            .collect();
        assert_eq!(
            log.lines().count(),
            mine.len() + 1,
            "commits made twice or lost on {} (seed {seed})",
            host.id
        );
        let names = git_out(ws, &["log", "--name-only", "--format="]);
        let files: Vec<&str> = names.lines().filter(|l| l.starts_with("f/")).collect();
        let distinct: BTreeSet<&str> = files.iter().copied().collect();
        assert_eq!(
            (files.len(), distinct.len()),
            (mine.len(), mine.len()),
            "a file committed twice or never on {} (seed {seed})",
            host.id
        );
        let status = git_out(ws, &["status", "--porcelain", "--", "f"]);
        assert_eq!(status, "", "index out of step on {} (seed {seed})", host.id);
        for p in mine {
            let id = p["id"].as_str().unwrap_or("");
            let sha = p["commitSha"].as_str().unwrap_or("");
            assert_eq!(
                committed.get(id).map(Vec::as_slice),
                Some(&[sha][..]),
                "{id}: policy:committed once, with its commit (seed {seed})"
            );
            assert!(
                !sha.is_empty() && log.lines().any(|l| l == sha),
                "{id}'s commit {sha} is not in {}'s history (seed {seed})",
                host.id
            );
        }
    }
}

/// A delivery received: when its request was made (ms, to the second),
/// when it was received (ms), its body.
type Reception<'a> = (u128, u128, &'a [u8]);

/// The host whose deliveries `event` is: its session's (`s{i}` is
/// lifecycle `i`'s, on host `i % 3`), else its policy's.
fn owner_of(event: &Value, owner: &BTreeMap<String, usize>) -> Option<usize> {
    let session = event["sessionId"]
        .as_str()
        .and_then(|s| s.strip_prefix('s'));
    if let Some(i) = session.and_then(|i| i.parse::<usize>().ok()) {
        return Some(i % HOSTS.len());
    }
    owner.get(event["policyId"].as_str()?).copied()
}

/// Every event reaches the webhook. Delivery is at least once
/// (docs/daemon.md, "Webhooks": `webhook-id` is the same on every retry,
/// an idempotency id; `host/src/webhook.rs` records a delivery after the
/// receiver's answer): a host killed after the receiver's 2xx and before
/// its row says so sends it again once restarted. So a delivery received
/// twice must have its host killed between the two, each time with the
/// same body; and as a host posts one request at a time, a kill repeats
/// at most one delivery: the repeats are at most the kills.
fn check_webhooks(
    hosts: &[Host],
    owner: &BTreeMap<String, usize>,
    hook: &Receiver,
    events: &[Value],
    seed: u64,
) {
    let want: BTreeMap<String, &Value> = events
        .iter()
        .map(|e| (format!("evt-{}", e["cursor"].as_i64().expect("cursor")), e))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let seen = loop {
        let seen = hook.seen.lock().expect("lock").clone();
        let ids: BTreeSet<&str> = seen.iter().map(|s| s.0.as_str()).collect();
        if want.keys().all(|w| ids.contains(w.as_str())) || Instant::now() > deadline {
            break seen;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // Each delivery id's receptions: when its request was made (its
    // `webhook-timestamp`, whole seconds: a request written before a
    // kill may be read by the receiver after it), when it was received
    // (ms), and its body.
    let mut got: BTreeMap<&str, Vec<Reception>> = BTreeMap::new();
    for s in &seen {
        let header = |name: &str| -> u128 {
            let value = s.2.get(name).and_then(|v| v.to_str().ok());
            value.and_then(|v| v.parse().ok()).unwrap_or(0)
        };
        got.entry(s.0.as_str()).or_default().push((
            header("webhook-timestamp") * 1000,
            header("x-received-ms"),
            &s.3,
        ));
    }
    let missing: Vec<&String> = want
        .keys()
        .filter(|w| !got.contains_key(w.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "never delivered (seed {seed}): {missing:?}"
    );
    let unknown: Vec<&&str> = got.keys().filter(|k| !want.contains_key(**k)).collect();
    assert!(
        unknown.is_empty(),
        "delivered, not in the log (seed {seed}): {unknown:?}"
    );
    let kills: usize = hosts.iter().map(|h| h.kills.len()).sum();
    let (mut repeats, mut late) = (0, 0);
    for (id, times) in &got {
        assert!(
            times.windows(2).all(|w| w[0].2 == w[1].2),
            "{id} delivered with different bodies (seed {seed})"
        );
        for pair in times.windows(2) {
            repeats += 1;
            // Made by the first sender (no later than the second of its
            // timestamp), received again from a later one.
            let (first, again) = (pair[0].0, pair[1].1);
            let event = want[*id];
            let killed = |h: &Host| {
                h.kills
                    .iter()
                    .any(|(before, after)| first <= *after && *before <= again)
            };
            let by_a_kill = match owner_of(event, owner) {
                Some(h) => killed(&hosts[h]),
                None => hosts.iter().any(killed),
            };
            // Said, not asserted: the first request of a repeat was read by
            // the receiver only after its sender's death.
            let read_late = !hosts
                .iter()
                .any(|h| h.kills.iter().any(|(b, a)| pair[0].1 <= *a && *b <= again));
            late += usize::from(read_late);
            assert!(
                by_a_kill,
                "{id} ({}, owner {:?}) delivered again at {again} ms (first made at {first}, to the second) with no kill of its host between (seed {seed}); kills {:?}\n{}",
                event["type"],
                owner_of(event, owner),
                hosts
                    .iter()
                    .map(|h| h.kills.iter().rev().find(|k| k.0 <= again).copied())
                    .collect::<Vec<_>>(),
                warnings(hosts)
            );
        }
    }
    eprintln!(
        "fleet crash test: {} deliveries, {repeats} repeated after a kill ({late} of them first read after the kill; seed {seed})",
        want.len()
    );
    assert!(
        repeats <= kills,
        "{repeats} deliveries repeated, more than the {kills} kills (seed {seed})"
    );
}

/// The last warnings and errors of every host's log, for a failure.
fn warnings(hosts: &[Host]) -> String {
    hosts
        .iter()
        .map(|h| {
            let log = h.d.log();
            let lines: Vec<&str> = log
                .lines()
                .filter(|l| l.contains("WARN") || l.contains("ERROR") || l.contains("webhook"))
                .collect();
            format!(
                "{}:\n{}",
                h.id,
                lines[lines.len().saturating_sub(30)..].join("\n")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
