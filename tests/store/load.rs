//! What the outage tests share: a steady load of turns (a policy attached
//! on one of a few sessions, then its turn-end; a call answered 503 is
//! retried, as a client told `Retry-After` does), a reader of the bus that
//! checks every cursor it is given is the one after the last (no gap, no
//! step back, whatever the outage), the health answer, and a PostgreSQL
//! cluster of a test's own (`scripts/pg-cluster.sh`), for the tests that
//! stop the server: never the cluster other tests share.

use crate::common::daemon::Daemon;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a call may keep being refused (503) or unanswered before the
/// test fails.
const RETRY_FOR: Duration = Duration::from_secs(90);

/// Calls `call` until it answers `want`, counting the 503s in `refused`
/// (a connection refused is retried too); any other answer fails.
pub fn retrying(
    what: &str,
    want: u16,
    refused: &AtomicUsize,
    mut call: impl FnMut() -> Option<(u16, Value)>,
) -> Value {
    let deadline = Instant::now() + RETRY_FOR;
    loop {
        match call() {
            Some((code, v)) if code == want => return v,
            Some((503, v)) => {
                assert_eq!(v["error"]["code"], "store-unavailable", "{what}: {v}");
                refused.fetch_add(1, Ordering::SeqCst);
            }
            None => {}
            Some((code, v)) => panic!("{what}: HTTP {code}: {v}"),
        }
        assert!(
            Instant::now() < deadline,
            "{what}: refused for {RETRY_FOR:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The turns a load drove: each one's policy, in order.
pub struct Turns {
    pub policies: Vec<String>,
}

/// Drives turns until `stop`: turn `i` attaches a policy gated by `gate`
/// on session `sessions[i % n]` (with an idempotency key, so a retried
/// attach is one policy) and ends that session's turn; 503s counted in
/// `refused`, each turn counted in `turns` once its turn-end is stored.
pub fn drive(
    d: &Daemon,
    gate: &Value,
    sessions: &[&str],
    stop: &AtomicBool,
    refused: &AtomicUsize,
    turns: &AtomicUsize,
) -> Turns {
    drive_as(d, "", gate, sessions, stop, refused, turns)
}

/// [`drive`], its labels and idempotency keys prefixed by `prefix` (one
/// per host of a fleet: the keys are the cluster's).
pub fn drive_as(
    d: &Daemon,
    prefix: &str,
    gate: &Value,
    sessions: &[&str],
    stop: &AtomicBool,
    refused: &AtomicUsize,
    turns: &AtomicUsize,
) -> Turns {
    let mut policies = Vec::new();
    let mut i = 0;
    while !stop.load(Ordering::SeqCst) {
        let sid = sessions[i % sessions.len()];
        let spec = json!({
            "sessionId": sid, "label": format!("{prefix}turn-{i}"), "gate": gate,
            "idempotencyKey": format!("{prefix}turn-{i}"),
        });
        let attached = retrying(&format!("attach turn {i}"), 201, refused, || {
            d.http_try("POST", "/v1/policies", Some(&d.agent), Some(spec.clone()))
        });
        let id = attached["policyId"]
            .as_str()
            .expect("a policy id")
            .to_string();
        retrying(&format!("turn-end {i}"), 200, refused, || {
            d.http_try(
                "POST",
                &format!("/v1/sessions/{sid}/report"),
                Some(&d.agent),
                Some(json!({"kind": "turn-end"})),
            )
        });
        policies.push(id);
        turns.fetch_add(1, Ordering::SeqCst);
        i += 1;
        std::thread::sleep(Duration::from_millis(60));
    }
    Turns { policies }
}

/// Reads the bus from the start until `stop` and the bus is drained,
/// asserting each cursor it is given is exactly the one after the last
/// (the first above 0); the cursors, in order.
pub fn read_bus(d: &Daemon, stop: &AtomicBool) -> Vec<i64> {
    let mut seen: Vec<i64> = Vec::new();
    let mut since = 0;
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        let r = d.http_try(
            "GET",
            &format!("/v1/events?since={since}&limit=1000&wait=1s"),
            Some(&d.operator),
            None,
        );
        match r {
            Some((200, page)) => {
                let events = page["events"].as_array().cloned().unwrap_or_default();
                for e in &events {
                    let c = e["cursor"].as_i64().expect("a cursor");
                    match seen.last() {
                        Some(last) => {
                            assert_eq!(c, last + 1, "the reader was given cursor {c} after {last}");
                        }
                        None => assert!(c > 0, "{e}"),
                    }
                    seen.push(c);
                }
                since = page["nextCursor"].as_i64().unwrap_or(since);
                if stopping && events.is_empty() {
                    return seen;
                }
            }
            Some((503, v)) => {
                assert_eq!(v["error"]["code"], "store-unavailable", "{v}");
                std::thread::sleep(Duration::from_millis(50));
            }
            None => std::thread::sleep(Duration::from_millis(50)),
            Some((code, v)) => panic!("GET /v1/events: HTTP {code}: {v}"),
        }
    }
}

/// `GET /v1/health` (no token): its status and body.
pub fn health(d: &Daemon) -> (u16, Value) {
    d.http_try("GET", "/v1/health", None, None)
        .expect("the daemon answers its health")
}

/// Polls health until `want` holds of its answer (at most a minute); the
/// answer.
pub fn health_until(d: &Daemon, what: &str, want: impl Fn(u16, &Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (code, v) = health(d);
        if want(code, &v) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "health never said {what}: HTTP {code} {v}\nlog:\n{}",
            d.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Asserts a degraded health answer's shape (HTTP 503): `ok: false`,
/// `status: degraded`, no cursor, the store unreachable and why, and the
/// API error a client reads.
pub fn assert_degraded(code: u16, v: &Value) {
    assert_eq!(code, 503, "{v}");
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["status"], "degraded", "{v}");
    assert!(v["version"].is_string(), "{v}");
    assert!(v["cursor"].is_null(), "{v}");
    assert_eq!(v["store"]["reachable"], false, "{v}");
    assert!(
        v["store"]["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{v}"
    );
    assert!(v["store"]["unavailableSince"].as_i64() > Some(0), "{v}");
    assert_eq!(v["error"]["code"], "store-unavailable", "{v}");
}

/// Asserts an ok health answer (HTTP 200).
pub fn is_ok(code: u16, v: &Value) -> bool {
    code == 200 && v["ok"] == true && v["status"] == "ok" && v["store"]["reachable"] == true
}

/// How many lines of `log` contain `needle`.
pub fn lines_with(log: &str, needle: &str) -> usize {
    log.lines().filter(|l| l.contains(needle)).count()
}

/// A PostgreSQL cluster of one test's own (`scripts/pg-cluster.sh start`),
/// stopped (and checked to leave no process) by [`OwnCluster::stop`] or
/// when dropped. Taken only where the shared cluster is (the same skip
/// rule as [`super::database`]): a test that stops its server must never
/// stop the one the other tests run on.
pub struct OwnCluster {
    env: HashMap<String, String>,
    stopped: bool,
}

impl OwnCluster {
    /// A new cluster for `test`, or `None` after the loud skip line.
    pub fn start(test: &str) -> Option<OwnCluster> {
        if std::env::var("GATEHOST_TEST_PG_URL").is_err() {
            // The same skip (or failure, when required) as every test on
            // PostgreSQL.
            super::database(test)?;
            return None;
        }
        let out = std::process::Command::new("bash")
            .arg(script())
            .arg("start")
            .output()
            .expect("run scripts/pg-cluster.sh start");
        assert!(
            out.status.success(),
            "{test}: scripts/pg-cluster.sh start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let env = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Some(OwnCluster {
            env,
            stopped: false,
        })
    }

    fn var(&self, key: &str) -> &str {
        self.env
            .get(key)
            .unwrap_or_else(|| panic!("pg-cluster.sh printed no {key}"))
    }

    /// Its admin URL (no password in it).
    pub fn url(&self) -> &str {
        self.var("GATEHOST_TEST_PG_URL")
    }

    /// The file holding its password.
    pub fn password_file(&self) -> PathBuf {
        PathBuf::from(self.var("GATEHOST_TEST_PG_PASSWORD_FILE"))
    }

    /// Runs its `pg_ctl ARGS` (as the cluster's user), asserting success.
    pub fn ctl(&self, args: &[&str]) {
        let out = std::process::Command::new(self.var("GATEHOST_TEST_PG_CTL"))
            .args(args)
            .output()
            .expect("run pg_ctl");
        assert!(
            out.status.success(),
            "pg_ctl {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Stops it, asserting that none of its processes is left.
    pub fn stop(mut self) {
        self.stopped = true;
        let out = self.run_stop();
        assert!(
            out.status.success(),
            "scripts/pg-cluster.sh stop: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn run_stop(&self) -> std::process::Output {
        std::process::Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(self.var("GATEHOST_TEST_PG_DIR"))
            .output()
            .expect("run scripts/pg-cluster.sh stop")
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        if !self.stopped {
            let _ = self.run_stop();
        }
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/pg-cluster.sh")
}
