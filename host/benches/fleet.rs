//! The store on PostgreSQL against the SQLite default, side by side in one
//! run (issue 51), on the throwaway cluster of `scripts/pg-cluster.sh`:
//!
//! ```sh
//! bash scripts/pg-cluster.sh start > /tmp/pg.env && set -a && . /tmp/pg.env && set +a
//! cargo bench -p gatehost --bench fleet   # -- --rounds N --events N --policies N
//! bash scripts/pg-cluster.sh stop "$GATEHOST_TEST_PG_DIR"
//! ```
//!
//! - turn-end → `policy:passed` (shell gate `true`): two real daemons
//!   started alike, one on SQLite (the baseline), one on PostgreSQL as host
//!   `bench-a`; the rounds alternate between them, so that both see the
//!   same load; p50 / p99 of each and the ratio of the p50s.
//! - events appended per second, one transaction per event (SQLite's
//!   fsync'd): one writer on SQLite; one host on PostgreSQL; three hosts
//!   at once (three threads, each its own store claimed for its host id).
//! - events read per second, pages of 1000 through the store.
//! - the page's inbox, `GET /v1/policies?limit=50`, with N policies (spread
//!   over three hosts on PostgreSQL), against `GET /v1/health` in the same
//!   run.

mod support;

use gatehost::model::event::{Event, Report, SessionEvent};
use gatehost::store::pg_testdb::TestDb;
use gatehost::store::{EventFilter, HostSpec, PolicyRow, PolicyStatus, Store};
use serde_json::json;
use std::time::{Duration, Instant};
use support::serve::{Daemon, Http, config, start, start_env};

/// The PostgreSQL daemons' host id.
const HOST_A: &[(&str, &str)] = &[("GATEHOST_HOST_ID", "bench-a")];

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn spec(id: &str) -> HostSpec {
    HostSpec {
        id: id.into(),
        lease: Duration::from_secs(15),
        machine: "bench".into(),
        version: env!("CARGO_PKG_VERSION").into(),
    }
}

/// One turn-end on `d`: the time from the report to the policy settled.
fn turn_end(http: &Http, d: &Daemon, sid: &str, round: usize) -> Duration {
    let pid = http.call(
        d,
        reqwest::Method::POST,
        "/v1/policies",
        Some(json!({"sessionId": sid, "gate": {"command": "true"}, "watchFrom": "now", "label": format!("r{round}")})),
    )["id"]
        .as_str()
        .expect("policy id")
        .to_string();
    let t0 = Instant::now();
    http.call(
        d,
        reqwest::Method::POST,
        &format!("/v1/sessions/{sid}/report"),
        Some(json!({"kind": "turn-end"})),
    );
    let v = http.call(
        d,
        reqwest::Method::GET,
        &format!("/v1/policies/{pid}/wait?timeout=120s"),
        None,
    );
    let took = t0.elapsed();
    assert_eq!(v["status"], "done", "{v}");
    took
}

fn append(store: &Store, n: usize, session: &str) {
    for i in 0..n {
        store
            .write(|tx| {
                let event = Event::Session(SessionEvent::TurnStart(Report {
                    session_id: session.into(),
                    state: "running".into(),
                    turn: i as i64,
                    message: None,
                }));
                tx.append_event(&event, Some(session), None, &[])
            })
            .expect("append");
    }
}

/// Reads every event in pages of 1000: how many.
fn read_all(store: &Store) -> usize {
    let mut since = 0;
    let mut read = 0;
    loop {
        let page = store
            .events(&EventFilter {
                since,
                limit: 1000,
                ..Default::default()
            })
            .expect("read");
        let Some(last) = page.last() else { break };
        since = last.cursor;
        read += page.len();
    }
    read
}

fn per_sec(n: usize, d: Duration) -> String {
    format!("{:.0}/s", n as f64 / d.as_secs_f64())
}

fn insert_policies(store: &Store, from: usize, n: usize) {
    let now = gatehost::store::now_ms();
    for chunk in (from..from + n).collect::<Vec<_>>().chunks(500) {
        store
            .write(|tx| {
                for i in chunk {
                    let mut p = PolicyRow::sample(&format!("p{i}"), PolicyStatus::Done, &[]);
                    // Settled now: `[retention]` keeps them (a policy
                    // settled in 1970 would be deleted at the start).
                    p.created_at = now;
                    p.updated_at = now;
                    tx.insert_policy(&mut p)?;
                }
                Ok(())
            })
            .expect("insert");
    }
}

/// The p50 of `rounds` calls of `path` on `d`.
fn get_p50(http: &Http, d: &Daemon, path: &str, rounds: usize) -> Duration {
    let v: Vec<Duration> = (0..rounds)
        .map(|_| {
            let t0 = Instant::now();
            http.call(d, reqwest::Method::GET, path, None);
            t0.elapsed()
        })
        .collect();
    support::quantile(&v, 0.5)
}

fn main() {
    let rounds = support::arg("--rounds", 100);
    let events = support::arg("--events", 2000);
    let policies = support::arg("--policies", 10_000);
    let Some(db) = TestDb::new("bench_fleet") else {
        eprintln!(
            "no PostgreSQL cluster (GATEHOST_TEST_PG_URL): start one with scripts/pg-cluster.sh"
        );
        std::process::exit(2);
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let roots = dir.path().join("roots");
    let ws = roots.join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    let http = Http::new();

    println!("## turn-end → policy:passed, shell `true`, {rounds} rounds alternating\n");
    let lite_cfg = config(dir.path(), "sqlite", &roots, None, "");
    let pg_cfg = config(dir.path(), "postgres", &roots, Some(&db), "");
    let (lite, _) = start(&dir.path().join("lite"), &lite_cfg, "127.0.0.1:0");
    let (pg, _) = start_env(&dir.path().join("pg"), &pg_cfg, "127.0.0.1:0", HOST_A);
    for d in [&lite, &pg] {
        http.call(
            d,
            reqwest::Method::POST,
            "/v1/sessions",
            Some(json!({"id": "bench:s", "cwd": ws})),
        );
    }
    let (mut on_lite, mut on_pg) = (Vec::new(), Vec::new());
    for r in 0..rounds + rounds / 10 + 3 {
        let a = turn_end(&http, &lite, "bench:s", r);
        let b = turn_end(&http, &pg, "bench:s", r);
        if r >= rounds / 10 + 3 {
            on_lite.push(a);
            on_pg.push(b);
        }
    }
    let (l50, l99) = (
        support::quantile(&on_lite, 0.5),
        support::quantile(&on_lite, 0.99),
    );
    let (p50, p99) = (
        support::quantile(&on_pg, 0.5),
        support::quantile(&on_pg, 0.99),
    );
    println!("| store | report → settled p50 | p99 |");
    println!("| --- | --- | --- |");
    println!("| SQLite (baseline) | {} | {} |", ms(l50), ms(l99));
    println!("| PostgreSQL, host bench-a | {} | {} |", ms(p50), ms(p99));
    println!(
        "\nPostgreSQL / SQLite, p50: **{:.2}x** (goal ≤ 2x)\n",
        p50.as_secs_f64() / l50.as_secs_f64()
    );
    drop((lite, pg));

    println!("## events appended (one transaction each) and read (pages of 1000)\n");
    let lite_dir = dir.path().join("events-lite");
    std::fs::create_dir_all(&lite_dir).expect("dir");
    let lite_store = Store::open(&lite_dir).expect("sqlite");
    let t0 = Instant::now();
    append(&lite_store, events, "s");
    let lite_append = t0.elapsed();
    let events_db = TestDb::new("bench_fleet_events").expect("a second database");
    let hosts: Vec<Store> = ["h1", "h2", "h3"]
        .iter()
        .map(|h| Store::open_postgres_as(&events_db.options(), &spec(h)).expect("host"))
        .collect();
    let t0 = Instant::now();
    append(&hosts[0], events, "s");
    let one_host = t0.elapsed();
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for (i, h) in hosts.iter().enumerate() {
            s.spawn(move || append(h, events, &format!("s{i}")));
        }
    });
    let three_hosts = t0.elapsed();
    println!("| writers | events | time | appended |");
    println!("| --- | --- | --- | --- |");
    println!(
        "| SQLite, 1 (baseline) | {events} | {} | {} |",
        ms(lite_append),
        per_sec(events, lite_append)
    );
    println!(
        "| PostgreSQL, 1 host | {events} | {} | {} |",
        ms(one_host),
        per_sec(events, one_host)
    );
    println!(
        "| PostgreSQL, 3 hosts at once | {} | {} | {} |",
        3 * events,
        ms(three_hosts),
        per_sec(3 * events, three_hosts)
    );
    let t0 = Instant::now();
    let n_lite = read_all(&lite_store);
    let lite_read = t0.elapsed();
    let t0 = Instant::now();
    let n_pg = read_all(&hosts[1]);
    let pg_read = t0.elapsed();
    println!(
        "\nRead: SQLite {n_lite} events {} ({}); PostgreSQL {n_pg} events {} ({})\n",
        ms(lite_read),
        per_sec(n_lite, lite_read),
        ms(pg_read),
        per_sec(n_pg, pg_read)
    );
    drop(hosts);

    println!("## the inbox's first page with {policies} policies\n");
    let inbox_db = TestDb::new("bench_fleet_inbox").expect("a third database");
    {
        let third = policies / 3;
        for (i, h) in ["bench-a", "bench-b", "bench-c"].iter().enumerate() {
            let s = Store::open_postgres_as(&inbox_db.options(), &spec(h)).expect("host");
            let n = if i == 2 { policies - 2 * third } else { third };
            insert_policies(&s, i * third, n);
        }
        let lite_data = dir.path().join("inbox-lite");
        std::fs::create_dir_all(&lite_data).expect("dir");
        let s = Store::open(&lite_data).expect("sqlite");
        insert_policies(&s, 0, policies);
    }
    let pg_cfg = config(dir.path(), "inbox-pg", &roots, Some(&inbox_db), "");
    let (lite, _) = start(&dir.path().join("inbox-lite"), &lite_cfg, "127.0.0.1:0");
    let (pg, _) = start_env(&dir.path().join("inbox-pg"), &pg_cfg, "127.0.0.1:0", HOST_A);
    println!("| store | `GET /v1/policies?limit=50` p50 | `GET /v1/health` p50 | ratio |");
    println!("| --- | --- | --- | --- |");
    for (name, d) in [("SQLite", &lite), ("PostgreSQL, 3 hosts", &pg)] {
        let first = http.call(d, reqwest::Method::GET, "/v1/policies?limit=50", None);
        assert_eq!(
            first["policies"].as_array().map(Vec::len),
            Some(50),
            "{name}: a full first page"
        );
        let page = get_p50(&http, d, "/v1/policies?limit=50", rounds);
        let health = get_p50(&http, d, "/v1/health", rounds);
        println!(
            "| {name} | {} | {} | {:.1}x |",
            ms(page),
            ms(health),
            page.as_secs_f64() / health.as_secs_f64()
        );
    }
}
