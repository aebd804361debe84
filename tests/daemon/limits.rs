//! The daemon at the edge of its resources: a low `nofile` limit under a
//! flood of long-polls.

use crate::common;
use crate::common::shorthand::{assert_has, assert_starts};

use common::daemon::{Daemon, scratch_config};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn request(addr: &str, path: &str, token: Option<&str>, close: bool) -> TcpStream {
    // Bounded: a daemon that stopped accepting fills its backlog (128),
    // and a connect past it would wait for minutes.
    let to: std::net::SocketAddr = addr.parse().expect("address");
    let mut c = TcpStream::connect_timeout(&to, Duration::from_secs(3))
        .unwrap_or_else(|e| panic!("connect to {path}: {e} (the daemon stopped accepting)"));
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let close = if close { "Connection: close\r\n" } else { "" };
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}{close}\r\n"
    )
    .expect("write");
    c
}

/// The whole answer of a `Connection: close` request, within `within`.
fn answer_within(mut c: TcpStream, within: Duration) -> Result<String, String> {
    let deadline = Instant::now() + within;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "no answer within {within:?} (got {:?})",
                String::from_utf8_lossy(&got)
            ));
        }
        c.set_read_timeout(Some(left)).expect("timeout");
        match c.read(&mut buf) {
            Ok(0) => return Ok(String::from_utf8_lossy(&got).into_owned()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(format!("read: {e}")),
        }
    }
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// 300 long-polls on a daemon limited to 128 descriptors: the first 64
/// (half the limit) wait, every other one is answered at once with 503
/// `too-many-waiters`, `Retry-After` and `Connection: close` (a warning in
/// the log), and `/v1/health` answers within 2 s all along. (Before, the
/// waiters took every descriptor, accept failed with EMFILE and axum slept
/// a second per failure without a word: health stalled until the polls
/// ended.) When the clients go, so do their connections.
#[test]
fn a_flood_of_long_polls_under_a_low_nofile_limit_gets_503s_and_health_answers() {
    let (s, cfg) = scratch_config(&[]);
    let d = Daemon::start_with_nofile(&s.etc.join("data"), &cfg, 128);
    let addr = d.url.trim_start_matches("http://").to_string();
    let head = d.operator_ok("GET", "/v1/events?since=0&limit=1000", None)["nextCursor"]
        .as_i64()
        .expect("cursor");
    let baseline = open_fds(d.pid());
    let path = format!("/v1/events?since={head}&wait=55s");
    let mut polls: Vec<(TcpStream, Vec<u8>, bool)> = (0..300)
        .map(|_| {
            let c = request(&addr, &path, Some(&d.operator), false);
            c.set_nonblocking(true).expect("nonblocking");
            (c, Vec::new(), false)
        })
        .collect();

    // While the flood arrives.
    let started = Instant::now();
    let health = answer_within(
        request(&addr, "/v1/health", None, true),
        Duration::from_secs(2),
    )
    .unwrap_or_else(|e| panic!("/v1/health during the flood: {e}\nlog:\n{}", d.log()));
    assert_starts(&health, "HTTP/1.1 200");
    assert!(started.elapsed() < Duration::from_secs(2));

    // Every poll past the cap is answered and closed by the daemon; the
    // waiters stay open.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut buf = [0u8; 4096];
    loop {
        for (c, got, closed) in polls.iter_mut().filter(|p| !p.2) {
            loop {
                match c.read(&mut buf) {
                    Ok(0) => {
                        *closed = true;
                        break;
                    }
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => panic!("a long-poll's connection: {e}"),
                }
            }
        }
        let open = polls.iter().filter(|p| !p.2).count();
        if open <= 64 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{open} long-polls still open after 30 s (the cap is 64)\nlog:\n{}",
            d.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let refused: Vec<String> = polls
        .iter()
        .filter(|p| p.2)
        .map(|p| String::from_utf8_lossy(&p.1).into_owned())
        .collect();
    assert_eq!(refused.len(), 300 - 64);
    for r in &refused {
        assert_starts(r, "HTTP/1.1 503");
        let lower = r.to_ascii_lowercase();
        assert!(lower.contains("\r\nretry-after: 1\r\n"), "{r}");
        assert!(lower.contains("\r\nconnection: close\r\n"), "{r}");
        assert_has(r, "\"code\":\"too-many-waiters\"");
    }
    // The waiters are still waiting, not answered.
    assert!(polls.iter().filter(|p| !p.2).all(|p| p.1.is_empty()));

    // With the cap's waiters held, the API answers at once.
    let started = Instant::now();
    let health = answer_within(
        request(&addr, "/v1/health", None, true),
        Duration::from_secs(2),
    )
    .unwrap_or_else(|e| panic!("/v1/health with 64 waiters: {e}"));
    assert_starts(&health, "HTTP/1.1 200");
    assert!(started.elapsed() < Duration::from_secs(2));
    let log = d.log();
    assert_has(&log, "too many long-polls wait at once");
    assert_has(&log, "nofile limit");
    // Logged once a second at most, not once per refusal.
    let warnings = log.matches("too many long-polls wait at once").count();
    assert!(warnings < 236, "{warnings} warnings");

    // The clients go: so do their connections (and the waiters' places).
    drop(polls);
    let deadline = Instant::now() + Duration::from_secs(10);
    while open_fds(d.pid()) > baseline + 2 {
        assert!(
            Instant::now() < deadline,
            "the daemon holds {} descriptors 10 s after its clients left (baseline {baseline})",
            open_fds(d.pid())
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (code, body) = d.get(&format!("/v1/events?since={head}&wait=10ms"), &d.operator);
    assert_eq!(code, 200, "{body}");
}
