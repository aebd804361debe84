//! A webhook receiver on loopback for the daemon's tests: it records
//! every request (id, event type, Standard Webhooks headers, body).

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::{Arc, Mutex};

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

impl Receiver {
    /// The event types received so far, in order.
    pub fn kinds(&self) -> Vec<String> {
        self.seen
            .lock()
            .expect("lock")
            .iter()
            .map(|s| s.1.clone())
            .collect()
    }

    /// The requests of event type `kind` received so far, in order.
    pub fn of_kind(&self, kind: &str) -> Vec<Seen> {
        let seen = self.seen.lock().expect("lock");
        seen.iter().filter(|s| s.1 == kind).cloned().collect()
    }

    /// Waits (up to `limit`) until `n` requests of event type `kind` were
    /// received; those requests.
    pub fn wait_for_n(&self, kind: &str, n: usize, limit: std::time::Duration) -> Vec<Seen> {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let seen = self.of_kind(kind);
            if seen.len() >= n {
                return seen;
            }
            let got = seen.len();
            assert!(
                std::time::Instant::now() < deadline,
                "{kind} seen {got} times, wanted {n}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Waits (up to `limit`) until an event of type `kind` was received.
    pub fn wait_for_kind(&self, kind: &str, limit: std::time::Duration) {
        let deadline = std::time::Instant::now() + limit;
        while !self.kinds().iter().any(|k| k == kind) {
            assert!(
                std::time::Instant::now() < deadline,
                "never notified of {kind}: {:?}",
                self.kinds()
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

/// One request the receiver saw: delivery id, event type, signature, body.
/// id (`webhook-id`), type, the Standard Webhooks headers, body.
pub type Seen = (String, String, reqwest::header::HeaderMap, Vec<u8>);

/// Whether `seen` verifies under `key` with the Standard Webhooks
/// reference library (what a receiver would run).
pub fn verifies(key: &[u8], seen: &Seen) -> bool {
    standardwebhooks::Webhook::from_bytes(key.to_vec())
        .and_then(|w| w.verify(&seen.3, &seen.2))
        .is_ok()
}

/// A webhook receiver on loopback: answers 500 to the first request of
/// each delivery id, then 200; records every request.
pub struct Receiver {
    pub url: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

pub fn receiver() -> Receiver {
    receiver_answering(Some("500 Internal Server Error\r\n"))
}

/// A receiver that answers `first` (a status line's rest and headers) to
/// each delivery's first request, or (`None`) 200 at once.
pub fn receiver_answering(first: Option<&'static str>) -> Receiver {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let rec = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut headers = std::collections::HashMap::new();
            let mut line = String::new();
            // A request cut off (its sender died mid-way) is not received.
            if reader.read_line(&mut line).is_err() || line.trim().is_empty() {
                continue;
            }
            let complete = loop {
                line.clear();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => break false,
                    Ok(_) if line.trim().is_empty() => break true,
                    Ok(_) => {}
                }
                if let Some((k, v)) = line.split_once(':') {
                    headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
                }
            };
            let len: usize = headers
                .get("content-length")
                .and_then(|l| l.parse().ok())
                .unwrap_or(0);
            let mut body = vec![0; len];
            if !complete || reader.read_exact(&mut body).is_err() {
                continue;
            }
            let id = headers.get("webhook-id").cloned().unwrap_or_default();
            let kind = headers.get("x-gatehost-event").cloned().unwrap_or_default();
            let mut sig = reqwest::header::HeaderMap::new();
            // The signature's headers, and those a format adds (ntfy's).
            for name in [
                "webhook-id",
                "webhook-timestamp",
                "webhook-signature",
                "content-type",
                "title",
                "priority",
                "tags",
                "click",
                "x-gatehost-link",
            ] {
                if let Some(v) = headers.get(name).and_then(|v| v.parse().ok()) {
                    sig.insert(name, v);
                }
            }
            let is_first = {
                let mut s = rec.lock().expect("lock");
                let is_first = !s.iter().any(|(i, _, _, _)| *i == id);
                sig.insert(
                    "x-received-ms",
                    format!("{}", now_ms()).parse().expect("header"),
                );
                s.push((id, kind, sig, body));
                is_first
            };
            let status = match first {
                Some(answer) if is_first => answer,
                _ => "200 OK\r\n",
            };
            let mut out = stream;
            let _ = write!(
                out,
                "HTTP/1.1 {status}content-length: 0\r\nconnection: close\r\n\r\n"
            );
        }
    });
    Receiver { url, seen }
}
