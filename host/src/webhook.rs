//! Webhook delivery: POSTs each queued event to its URLs (the global one
//! and the session's own), from the store's delivery queue, so deliveries
//! survive restarts and never block the engine; one worker per URL with
//! deliveries due, so a URL that never answers delays only itself.
//!
//! Each request carries the event in its webhook's format (the raw JSON,
//! or a Slack, Discord or ntfy message: `notify::render`; a session's own
//! URL always the raw JSON; which events each operator webhook gets is
//! decided when the event is stored, by its filter), signed by the Standard Webhooks
//! scheme (<https://www.standardwebhooks.com>, signed with the
//! `standardwebhooks` crate): `webhook-id` (`evt-<cursor>`, the same on
//! every retry: an idempotency id), `webhook-timestamp` (the attempt's Unix
//! time) and `webhook-signature: v1,<base64 HMAC-SHA256 of
//! "<id>.<timestamp>.<body>">`, so a captured delivery cannot be replayed
//! later or as another event. `X-Gatehost-Event` names the type. The key is
//! the operator's webhook secret (if configured) for the global webhook
//! (`whsec_<base64>` as the standard writes it, or raw bytes), and the
//! separate notify key for sessions' own `notifyUrl`s, which the agent
//! chooses (within the configured prefixes): it must never obtain a body
//! signed with the operator's secret. A 2xx is delivered; a network error,
//! timeout, 408, 429 or 5xx is retried with jittered exponential backoff
//! (about 1 s, 2 s, 4 s … capped at 5 min), never sooner than a
//! `Retry-After` the receiver sent, up to the configured attempts; another
//! 4xx is given up at once. Every give-up is logged with its cause. This
//! module must never write anything but the delivery rows.

use crate::engine::Engine;
use crate::notify::Format;
use crate::store::EventRow;
use crate::store::{Delivery, now_ms};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

const BATCH: usize = 32;
const MAX_BACKOFF_MS: i64 = 5 * 60 * 1000;

#[derive(Clone)]
pub struct Webhooks {
    engine: Engine,
    client: reqwest::Client,
    /// Signs deliveries to the operator's global webhook (`[daemon]
    /// webhook_url` of the configuration in force: a reload may change
    /// it; the secret file is read once, at start).
    secret: Option<Vec<u8>>,
    /// Every operator webhook URL of this daemon's life (a reload may
    /// change them) and its format in the latest configuration that named
    /// it: a delivery queued to an earlier one is still signed with
    /// `secret`, as when it was queued, and shaped as it was configured.
    operator_urls: Arc<Mutex<HashMap<String, Format>>>,
    /// The daemon's listening address: the links' base in messages
    /// unless `[daemon] public_url` (of the configuration in force) names
    /// another.
    listening: String,
    /// Signs deliveries to sessions' `notifyUrl`s.
    notify_key: Vec<u8>,
    max_attempts: u32,
}

/// Installs the process's TLS crypto provider (ring) for HTTPS clients
/// (the client's, re-exported for the daemon's deliveries).
pub use crate::client::install_tls_provider;

/// The signing key a secret file's text stands for: the standard's
/// `whsec_<base64>` decoded, anything else as its bytes.
pub fn key_of(secret: &[u8]) -> Vec<u8> {
    use base64::Engine as _;
    match std::str::from_utf8(secret)
        .ok()
        .and_then(|s| s.strip_prefix("whsec_"))
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
    {
        Some(key) => key,
        None => secret.to_vec(),
    }
}

/// The `webhook-signature` value of a delivery (Standard Webhooks, `v1`).
/// `None` only for a body that is not UTF-8 (events are JSON: never).
pub fn sign(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> Option<String> {
    standardwebhooks::Webhook::from_bytes(key.to_vec())
        .and_then(|w| w.sign(id, timestamp, body))
        .ok()
}

/// When to try a failed delivery again: the `attempts`-th backoff (1 s,
/// 2 s, 4 s … capped at 5 min) with ±25 % jitter, so that many deliveries
/// failing together do not come back together, and never before the
/// receiver's `Retry-After` (capped alike).
pub fn retry_in_ms(attempts: u32, retry_after_ms: Option<i64>) -> i64 {
    let base = (1000i64 << attempts.saturating_sub(1).min(20)).min(MAX_BACKOFF_MS);
    let jitter = base / 4;
    let jittered = base - jitter + fastrand::i64(0..=2 * jitter);
    jittered.max(retry_after_ms.unwrap_or(0).min(MAX_BACKOFF_MS))
}

/// A `Retry-After` header's delay: seconds, or an HTTP date.
fn retry_after_ms(headers: &reqwest::header::HeaderMap) -> Option<i64> {
    let v = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    let left = at
        .duration_since(std::time::SystemTime::now())
        .unwrap_or_default();
    Some(i64::try_from(left.as_millis()).unwrap_or(i64::MAX))
}

/// The request posting `event` to `url` in `format` (see
/// [`crate::notify::render`]), with `X-Gatehost-Event`, `X-Gatehost-Link`
/// (the policy's page, for a policy's event with a `base`) and, when `key` is
/// given, the Standard Webhooks headers over the body actually sent
/// (`webhook-id` is `evt-<cursor>`, the same on every retry).
pub fn request(
    client: &reqwest::Client,
    url: &str,
    format: Format,
    event: &EventRow,
    base: Option<&str>,
    key: Option<&[u8]>,
) -> reqwest::RequestBuilder {
    let message = crate::notify::message(event, base);
    let body = crate::notify::render(format, event, &message);
    let id = if event.cursor > 0 {
        format!("evt-{}", event.cursor)
    } else {
        // Not a stored event (a standalone hook's): its time names it.
        format!("msg-{}-{}", event.at, fastrand::u64(..))
    };
    let timestamp = now_ms() / 1000;
    let mut req = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, body.content_type)
        .header("X-Gatehost-Event", event.kind())
        .header("webhook-id", &id)
        .header("webhook-timestamp", timestamp.to_string());
    // The policy's page, whatever the format (a raw receiver's body is
    // the event as stored, which has no link).
    // (Only a value a header can carry: a link that cannot be one never
    // fails the delivery.)
    if let Some(link) = message
        .link
        .as_deref()
        .and_then(|l| reqwest::header::HeaderValue::from_str(l).ok())
    {
        req = req.header("X-Gatehost-Link", link);
    }
    for (name, value) in &body.headers {
        req = req.header(*name, value);
    }
    if let Some(signature) = key.and_then(|k| sign(k, &id, timestamp, &body.bytes)) {
        req = req.header("webhook-signature", signature);
    }
    req.body(body.bytes)
}

impl Webhooks {
    /// `notify_key` signs deliveries to sessions' own URLs; `listening`
    /// is the daemon's address (`http://127.0.0.1:PORT`), the links' base
    /// unless `[daemon] public_url` names another.
    pub fn new(engine: Engine, notify_key: Vec<u8>, listening: &str) -> Result<Self, String> {
        let d = engine.runner().config().daemon.clone();
        let secret = match &d.webhook_secret_file {
            Some(p) => Some(key_of(
                std::fs::read(p)
                    .map_err(|e| format!("webhook secret file {}: {e}", p.display()))?
                    .trim_ascii(),
            )),
            None => None,
        };
        let client = reqwest::Client::builder()
            .timeout(d.webhook_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot build the webhook client: {e}"))?;
        Ok(Webhooks {
            engine,
            client,
            secret,
            operator_urls: Arc::new(Mutex::new(
                d.targets
                    .iter()
                    .map(|t| (t.url.clone(), t.format))
                    .collect(),
            )),
            listening: listening.to_string(),
            notify_key,
            max_attempts: d.webhook_max_attempts,
        })
    }

    /// Runs forever: one queue per URL, so that a URL that never answers
    /// delays only its own deliveries. Each URL with deliveries due gets a
    /// worker (one at a time per URL, in order); this loop then sleeps
    /// until the next due time, new events or a worker's end.
    pub async fn run(self) {
        let mut rx = self.engine.bus().subscribe();
        let busy: Arc<Mutex<HashSet<String>>> = Arc::default();
        let finished = Arc::new(Notify::new());
        loop {
            let urls = match self.engine.store().due_urls(now_ms()) {
                Ok(u) => u,
                Err(e) if self.engine.outage().failed(&e) => {
                    tracing::debug!(error = %e, "cannot read the webhook queue; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the webhook queue; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            for url in urls {
                if !busy
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(url.clone())
                {
                    continue;
                }
                let (me, busy, finished) = (self.clone(), busy.clone(), finished.clone());
                tokio::spawn(async move {
                    me.drain(&url).await;
                    busy.lock().unwrap_or_else(|p| p.into_inner()).remove(&url);
                    finished.notify_one();
                });
            }
            let next = self.engine.store().next_delivery_at().ok().flatten();
            let wait = match next {
                // Due now but its URL's worker is on it: wait for news.
                Some(at) if at <= now_ms() => Duration::from_secs(1),
                Some(at) => Duration::from_millis((at - now_ms()).clamp(10, 60_000) as u64),
                None => Duration::from_secs(60),
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = rx.changed() => {}
                _ = finished.notified() => {}
            }
        }
    }

    /// Delivers `url`'s due deliveries, oldest first, until none is due.
    async fn drain(&self, url: &str) {
        loop {
            let due = match self.engine.store().due_deliveries_to(url, now_ms(), BATCH) {
                Ok(d) => d,
                Err(e) if self.engine.outage().failed(&e) => {
                    tracing::debug!(error = %e, %url, "cannot read the webhook queue");
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, %url, "cannot read the webhook queue");
                    return;
                }
            };
            if due.is_empty() {
                return;
            }
            for d in due {
                self.deliver(d).await;
            }
        }
    }

    async fn deliver(&self, d: Delivery) {
        let runner = self.engine.runner();
        let daemon = &runner.config().daemon;
        let base = daemon.public_url.as_deref().unwrap_or(&self.listening);
        let format = {
            let mut urls = self.operator_urls.lock().unwrap_or_else(|p| p.into_inner());
            for t in &daemon.targets {
                urls.insert(t.url.clone(), t.format);
            }
            urls.get(&d.url).copied()
        };
        // A session's own URL (the agent's choice) gets the raw event,
        // signed with the notify key; the operator's, their format signed
        // with the operator's secret.
        let key = match format {
            Some(_) => self.secret.as_deref(),
            None => Some(self.notify_key.as_slice()),
        };
        let req = request(
            &self.client,
            &d.url,
            format.unwrap_or_default(),
            &d.event,
            Some(base),
            key,
        );
        let result = req.send().await;
        let attempts = d.attempts + 1;
        let (state, error, retry_after) = match result {
            Ok(resp) if resp.status().is_success() => ("delivered", None, None),
            Ok(resp) => {
                let s = resp.status();
                let retry = s.is_server_error() || s.as_u16() == 408 || s.as_u16() == 429;
                (
                    if retry { "pending" } else { "failed" },
                    Some(format!("HTTP {s}")),
                    retry_after_ms(resp.headers()),
                )
            }
            Err(e) => ("pending", Some(format!("{e}")), None),
        };
        let (state, next_at) = if state == "pending" {
            if attempts >= self.max_attempts {
                ("failed", now_ms())
            } else {
                ("pending", now_ms() + retry_in_ms(attempts, retry_after))
            }
        } else {
            (state, now_ms())
        };
        if state == "failed" {
            tracing::warn!(url = %d.url, event = %d.event.kind(), cursor = d.event.cursor, attempts, error = ?error, "webhook given up");
        } else if let Some(e) = &error {
            tracing::info!(url = %d.url, event = %d.event.kind(), attempts, error = %e, "webhook will be retried");
        }
        if let Err(e) = self
            .engine
            .store()
            .write(|tx| tx.mark_delivery(d.id, state, attempts, next_at, error.as_deref()))
        {
            tracing::warn!(error = %e, "cannot record a webhook delivery");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_carries_the_policys_link_when_a_header_can_hold_it() {
        let event = EventRow {
            host: None,
            cursor: 7,
            at: 1_700_000_000_000,
            session_id: None,
            policy_id: Some("pol_1".into()),
            event: crate::model::event::Event::decode(
                "policy:blocked",
                serde_json::json!({"policyId": "pol_1", "status": "blocked", "sessionIds": [], "reason": "x"}),
            ),
            damage: None,
        };
        install_tls_provider();
        let client = reqwest::Client::new();
        for format in [Format::Raw, Format::Slack, Format::Discord, Format::Ntfy] {
            let req = request(
                &client,
                "http://127.0.0.1:1/h",
                format,
                &event,
                Some("http://h:1"),
                None,
            )
            .build()
            .expect("a request");
            assert_eq!(
                req.headers()
                    .get("x-gatehost-link")
                    .and_then(|v| v.to_str().ok()),
                Some("http://h:1/ui/#policy/pol_1"),
                "{format:?}"
            );
        }
        // A link a header cannot carry (a newline): the delivery is made,
        // without it, and nothing is injected.
        let req = request(
            &client,
            "http://127.0.0.1:1/h",
            Format::Raw,
            &event,
            Some("http://h:1/\nX-Injected: 1"),
            None,
        )
        .build()
        .expect("still a request");
        assert!(req.headers().get("x-gatehost-link").is_none());
        assert!(req.headers().get("x-injected").is_none());
        // No base, no link.
        let req = request(
            &client,
            "http://127.0.0.1:1/h",
            Format::Raw,
            &event,
            None,
            None,
        )
        .build()
        .expect("a request");
        assert!(req.headers().get("x-gatehost-link").is_none());
    }

    #[test]
    fn signatures_follow_the_standard_and_bind_id_and_time() {
        // The standard's own test vector (standard-webhooks spec).
        let key = key_of(b"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        let body = br#"{"test": 2432232314}"#;
        let sig = sign(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body);
        assert_eq!(
            sig.as_deref(),
            Some("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        );
        // Another id or another time is another signature: no replay.
        assert_ne!(sign(&key, "msg_other", 1614265330, body), sig);
        assert_ne!(
            sign(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265331, body),
            sig
        );
        // A secret that is not `whsec_` is used as its bytes.
        assert_eq!(key_of(b"s3cret"), b"s3cret".to_vec());
    }

    #[test]
    fn backoff_is_jittered_and_honours_retry_after() {
        for attempts in 1..=12u32 {
            let base = (1000i64 << (attempts - 1)).min(MAX_BACKOFF_MS);
            let seen: Vec<i64> = (0..200).map(|_| retry_in_ms(attempts, None)).collect();
            assert!(
                seen.iter()
                    .all(|t| *t >= base * 3 / 4 && *t <= base * 5 / 4)
            );
            // Jittered: not all the same.
            assert!(seen.iter().any(|t| *t != seen[0]), "{attempts}");
        }
        assert!(retry_in_ms(1, Some(30_000)) >= 30_000);
        assert_eq!(retry_in_ms(1, Some(i64::MAX)), MAX_BACKOFF_MS);
        let mut h = reqwest::header::HeaderMap::new();
        h.insert(reqwest::header::RETRY_AFTER, "7".parse().expect("header"));
        assert_eq!(retry_after_ms(&h), Some(7000));
        let later = httpdate::fmt_http_date(
            std::time::SystemTime::now() + std::time::Duration::from_secs(60),
        );
        h.insert(reqwest::header::RETRY_AFTER, later.parse().expect("header"));
        let ms = retry_after_ms(&h).expect("date");
        assert!((58_000..=60_000).contains(&ms), "{ms}");
        h.insert(
            reqwest::header::RETRY_AFTER,
            "soon".parse().expect("header"),
        );
        assert_eq!(retry_after_ms(&h), None);
    }
}
