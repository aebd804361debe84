//! A network cut between a daemon and its PostgreSQL server, made by the
//! loopback TCP proxy of `common::tcp_proxy` (the daemon's `[store] url`
//! names the proxy): while it is cut, health says degraded and writes
//! answer 503; the gate that was running when it was cut cannot store its
//! verdict; once healed the daemon recovers by itself and that pending
//! work settles (the sweep runs the gate again: one verdict, stored once).
//! The proxy itself is tested first, on an echo server. (Other hosts
//! taking over a host cut off past its lease: `takeover.rs`.)

use super::load::{assert_degraded, health, health_until, is_ok, lines_with};
use super::{database, workspace_on};
use crate::common::daemon::{Daemon, script_gate_json, wait_started};
use crate::common::tcp_proxy::TcpProxy;
use crate::common::{assert_no_survivors, marker, survivors};
use serde_json::json;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(60);

/// An echo server on loopback: what the proxy forwards to.
fn echo() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind echo");
    let addr = l.local_addr().expect("addr");
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut w = c.try_clone().expect("clone");
                let mut r = c;
                let _ = std::io::copy(&mut r, &mut w);
            });
        }
    });
    addr
}

fn round_trip(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(b"ping")?;
    let mut got = [0u8; 4];
    s.read_exact(&mut got)?;
    Ok(got.to_vec())
}

#[test]
fn the_proxy_forwards_cuts_every_connection_refuses_while_cut_and_heals() {
    let proxy = TcpProxy::start(echo());
    let to = SocketAddr::from(([127, 0, 0, 1], proxy.port()));
    let mut a = TcpStream::connect(to).expect("connect");
    assert_eq!(round_trip(&mut a).expect("forwarded"), b"ping");
    proxy.cut();
    assert!(
        round_trip(&mut a).is_err(),
        "a live connection ends at the cut"
    );
    // A new connection is accepted by the kernel, then closed at once.
    let mut b = TcpStream::connect(to).expect("connect while cut");
    assert!(round_trip(&mut b).is_err(), "no connection while cut");
    assert!(proxy.refused() >= 1);
    proxy.heal();
    let mut c = TcpStream::connect(to).expect("connect after heal");
    assert_eq!(round_trip(&mut c).expect("forwarded again"), b"ping");
    assert_eq!(proxy.forwarded(), 2);
}

/// `url` with its port replaced by `port`.
pub(super) fn via_port(url: &str, port: u16) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (user_host, _) = authority.rsplit_once(':').expect("a port in the URL");
    format!("{scheme}://{user_host}:{port}/{path}")
}

/// The `127.0.0.1:PORT` of `url`.
pub(super) fn address(url: &str) -> SocketAddr {
    let rest = url.split_once("://").expect("a URL").1;
    let authority = rest.split('/').next().unwrap_or(rest);
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    host_port.parse().expect("127.0.0.1:PORT")
}

#[test]
fn a_daemon_cut_off_from_postgres_says_degraded_answers_503_and_settles_its_work_once_healed() {
    let Some(pg) = database("store::partition::cut") else {
        return;
    };
    let proxy = TcpProxy::start(address(&pg.url));
    let (s, cfg) = workspace_on(
        &via_port(&pg.url, proxy.port()),
        &pg.password_file,
        &["true"],
    );
    let mut d = Daemon::start(&s.etc.join("data"), &cfg);
    assert!(
        proxy.forwarded() > 0,
        "the daemon reaches its store through the proxy"
    );
    d.register("s1", &s.ws);
    // A policy passes with the network whole.
    let first = d.attach(json!({"sessionId": "s1", "gate": {"command": "true"}}));
    d.report("s1", "turn-end");
    d.wait_status(&first, "done", T);
    let (code, v) = health(&d);
    assert!(is_ok(code, &v), "{v}");
    // A gate runs when the network is cut: its verdict cannot be stored.
    let m = marker("pg-cut");
    let gate = script_gate_json("gates/sleep-then-pass.sh", &[&m, "1"], 30_000);
    let pending = d.attach(json!({"sessionId": "s1", "gate": gate}));
    d.report("s1", "turn-end");
    wait_started(&m, T);
    proxy.cut();
    let v = health_until(&d, "degraded", |code, _| code == 503);
    assert_degraded(503, &v);
    let (code, v) = d
        .http_try(
            "POST",
            "/v1/sessions/s1/report",
            Some(&d.agent),
            Some(json!({"kind": "turn-start"})),
        )
        .expect("the daemon answers");
    assert_eq!(code, 503, "{v}");
    assert_eq!(v["error"]["code"], "store-unavailable", "{v}");
    // The gate ends during the cut; its verdict is refused by the store.
    let deadline = Instant::now() + T;
    while !survivors(&m).is_empty() || !d.log().contains("gate task failed") {
        assert!(Instant::now() < deadline, "{}", d.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let (code, v) = health(&d);
    assert_degraded(code, &v);
    assert!(
        proxy.refused() > 0,
        "the daemon tried to reconnect while cut"
    );
    proxy.heal();
    health_until(&d, "ok", is_ok);
    // The pending work settles: the gate runs again, its verdict stored once.
    let p = d.wait_status(&pending, "done", T);
    assert_eq!(p["gateRuns"], 2, "{p}");
    let passed = d.all_events(&format!("&policy={pending}&types=passed"));
    assert_eq!(passed.len(), 1, "{passed:?}");
    let cursors: Vec<i64> = d
        .all_events("")
        .iter()
        .map(|e| e["cursor"].as_i64().expect("cursor"))
        .collect();
    assert!(cursors.windows(2).all(|w| w[1] == w[0] + 1), "{cursors:?}");
    let log = d.log();
    assert_eq!(lines_with(&log, "the store is unavailable"), 1, "{log}");
    assert_eq!(lines_with(&log, "the store answers again"), 1, "{log}");
    d.stop();
    assert_no_survivors(&m);
}

/// The agent's turn-end hook (`gatehost hook claude`) on a Stop while the
/// daemon is cut off from its store: refused 503 `store-unavailable`, it
/// asks again a second apart within its budget, and once the network is
/// healed its turn-end is stored once and it gets the verdict (a pass:
/// it says nothing, exit 0).
#[test]
fn a_stop_hook_during_a_cut_asks_again_and_gets_its_verdict_once_healed() {
    use std::process::{Command, Stdio};
    let Some(pg) = database("store::partition::hook") else {
        return;
    };
    let proxy = TcpProxy::start(address(&pg.url));
    let (s, cfg) = workspace_on(
        &via_port(&pg.url, proxy.port()),
        &pg.password_file,
        &["true"],
    );
    let mut d = Daemon::start(&s.etc.join("data"), &cfg);
    let sid = "claude:cut";
    d.register(sid, &s.ws);
    let policy = d.attach(json!({"sessionId": sid, "gate": {"command": "true"}}));
    proxy.cut();
    health_until(&d, "degraded", |code, _| code == 503);
    let stderr = s.out.join("hook.stderr");
    let keys = d.keyring().dir().display().to_string();
    let mut hook = Command::new(env!("CARGO_BIN_EXE_gatehost"))
        .args(["hook", "claude", "--budget", "60s", "--state-dir"])
        .arg(s.out.join("state"))
        .env("GATEHOST_SERVER", &d.url)
        .env("GATEHOST_TOKEN", &d.agent)
        .env("GATEHOST_SESSION_KEYS", &keys)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr).expect("the hook's stderr"))
        .spawn()
        .expect("spawn gatehost hook");
    let stop = json!({"session_id": "cut", "cwd": s.ws, "hook_event_name": "Stop", "last_assistant_message": "done"});
    hook.stdin
        .take()
        .expect("stdin")
        .write_all(stop.to_string().as_bytes())
        .expect("write the Stop");
    // Refused while cut: it says so, and waits.
    let deadline = Instant::now() + T;
    let said = || std::fs::read_to_string(&stderr).unwrap_or_default();
    while !said().contains("the daemon's store is unavailable") {
        assert!(
            Instant::now() < deadline,
            "the hook never said it waits: {}",
            said()
        );
        assert!(
            hook.try_wait().expect("try_wait").is_none(),
            "the hook ended during the cut: {}",
            said()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    proxy.heal();
    let out = hook.wait_with_output().expect("the hook ends");
    assert_eq!(out.status.code(), Some(0), "{}", said());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "",
        "a pass says nothing: {}",
        said()
    );
    assert_eq!(d.policy(&policy)["status"], "done");
    assert_eq!(
        d.all_events(&format!("&policy={policy}&types=passed"))
            .len(),
        1
    );
    assert_eq!(
        d.all_events(&format!("&session={sid}&types=turn-end"))
            .len(),
        1,
        "one turn-end stored"
    );
    d.stop();
}
