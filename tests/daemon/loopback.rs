//! The addresses the daemon advertises reach only the daemon, through a
//! real daemon: the page is advertised as `http://localhost:PORT`, and a
//! browser tries `localhost`'s `[::1]` first, so a process holding
//! `[::1]:PORT` (or `127.0.0.1:PORT` for `--listen [::1]:PORT`) stops the
//! start, named; and `localhost` reached over `[::1]`, as browsers do, is
//! the daemon: its health, its one-time login link and the page's calls
//! (see `api::listen`).

use crate::common;

use common::daemon::{rt, serve_command, with_s1};
use common::{Scratch, allow_config};
use serde_json::{Value, json};
use std::io::Read;
use std::net::{Ipv6Addr, SocketAddr, TcpListener};
use std::time::Duration;

/// How `serve` ended when another process held an address it needs.
struct Refused {
    code: Option<i32>,
    stderr: String,
}

/// `gatehost serve --listen LISTEN`; fails the test if the daemon says it
/// listens (it started beside the impostor), else its exit and stderr.
fn serve_expecting_refusal(s: &Scratch, listen: &str) -> Refused {
    let cfg = s.write("config.toml", &allow_config(&["true"]));
    let data = s.etc.join("data");
    let mut child = serve_command(&data, &cfg, listen)
        .spawn()
        .expect("spawn gatehost serve");
    let rx = common::daemon::line_channel(child.stdout.take().expect("stdout"));
    let mut stderr = child.stderr.take().expect("stderr");
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    // Every line until stdout closes (the daemon exited) or it says it
    // listens (it started: the failure this test is about).
    let mut lines = Vec::new();
    loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => {
                let started = line.starts_with("gatehost serve: listening on");
                lines.push(line);
                if started {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "the daemon started while another process held localhost's other address on its port; it said:\n{}",
                        lines.join("\n")
                    );
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the daemon neither started nor exited in 60 s");
            }
        }
    }
    let status = child.wait().expect("wait");
    let stderr = errors.join().expect("stderr reader");
    assert!(
        !data.join("server.url").exists(),
        "a refused start wrote server.url"
    );
    Refused {
        code: status.code(),
        stderr,
    }
}

/// Whether this machine has an IPv6 loopback (the tests below need one).
fn v6_loopback() -> bool {
    TcpListener::bind((Ipv6Addr::LOCALHOST, 0)).is_ok()
}

#[test]
fn an_impostor_on_localhosts_other_address_stops_the_start_and_is_named() {
    assert!(v6_loopback(), "this test needs an IPv6 loopback (::1)");
    // The impostor first on [::1] (what browsers try first for
    // http://localhost:PORT), the daemon asked for 127.0.0.1; then the
    // other way round.
    for (impostor_at, listen_ip) in [("[::1]:0", "127.0.0.1"), ("127.0.0.1:0", "[::1]")] {
        let s = Scratch::new();
        let impostor = TcpListener::bind(impostor_at).expect("the impostor binds");
        impostor.set_nonblocking(true).expect("nonblocking");
        let held = impostor.local_addr().expect("addr");
        let refused = serve_expecting_refusal(&s, &format!("{listen_ip}:{}", held.port()));
        assert_ne!(refused.code, Some(0), "{}", refused.stderr);
        assert!(
            refused.stderr.contains(&format!("cannot listen on {held}"))
                && refused.stderr.contains("another process holds it")
                && refused.stderr.contains("login link"),
            "the refusal names the address and why: {}",
            refused.stderr
        );
        // Nothing of the daemon's reached the impostor.
        match impostor.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("the impostor was reached: {other:?}"),
        }
    }
}

/// A client that resolves `localhost` to `[::1]:port` only: a browser's
/// first try, with no fallback to 127.0.0.1 to hide a miss.
fn over_ipv6(port: u16) -> reqwest::Client {
    reqwest::Client::builder()
        .resolve("localhost", SocketAddr::from((Ipv6Addr::LOCALHOST, port)))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

#[test]
fn localhost_reached_over_ipv6_first_as_browsers_do_is_the_daemon_and_its_login_link_works() {
    assert!(v6_loopback(), "this test needs an IPv6 loopback (::1)");
    let (_s, d) = with_s1();
    let pid = d.attach(json!({"sessionId": "s1", "gate": {"command": "false"}}));
    let port: u16 = d
        .url
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("the daemon's port");
    let page = format!("http://localhost:{port}");
    let client = over_ipv6(port);

    // Health over [::1].
    let health: Value = rt().block_on(async {
        let r = client
            .get(format!("{page}/v1/health"))
            .send()
            .await
            .expect("[::1] answers");
        assert_eq!(r.status(), 200);
        r.json().await.expect("json")
    });
    assert!(health.get("version").is_some(), "{health}");

    // The login link `gatehost ui` prints is on localhost, and spent over
    // [::1] it is the daemon's: a cookie and the page's token.
    let run = d.cli_ok(&["ui", "--json"], &d.operator);
    let url = run.json()["url"].as_str().expect("url").to_string();
    assert!(url.starts_with(&format!("{page}/ui/login?code=")), "{url}");
    let (cookie, csrf) = rt().block_on(async {
        let r = client.get(&url).send().await.expect("spend the link");
        assert_eq!(r.status(), 303);
        let cookie = r.headers()["set-cookie"]
            .to_str()
            .expect("cookie")
            .split(';')
            .next()
            .expect("pair")
            .to_string();
        let csrf = r.headers()["location"]
            .to_str()
            .expect("location")
            .strip_prefix("/ui/#login=")
            .expect("to the page")
            .to_string();
        (cookie, csrf)
    });

    // The page's calls over [::1]: a read and a cancel, on the daemon.
    rt().block_on(async {
        let r = client
            .get(format!("{page}/v1/policies/{pid}"))
            .header("cookie", &cookie)
            .header("x-csrf-token", &csrf)
            .send()
            .await
            .expect("read");
        assert_eq!(r.status(), 200);
        let r = client
            .post(format!("{page}/v1/policies/{pid}/cancel"))
            .header("cookie", &cookie)
            .header("x-csrf-token", &csrf)
            .header("origin", &page)
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .expect("cancel");
        assert_eq!(r.status(), 200, "{:?}", r.text().await);
    });
    assert_eq!(d.policy(&pid)["status"], "cancelled");
}
