//! Webhook delivery: POSTs each queued event to its URLs (the global one
//! and the session's own), from the store's delivery queue, so deliveries
//! survive restarts and never block the engine; one worker per URL with
//! deliveries due, so a URL that never answers delays only itself.
//!
//! Each request carries the event as JSON, `X-Gatehost-Event` (its type),
//! `X-Gatehost-Delivery` (an idempotency id stable across retries:
//! `evt-<cursor>`), and `X-Gatehost-Signature: sha256=<hex HMAC-SHA256 of
//! the body>`: under the operator's webhook secret (if configured) for the
//! global webhook, and under the separate notify key for sessions' own
//! `notifyUrl`s, which the agent chooses (within the configured prefixes):
//! it must never obtain a body signed with the operator's secret. A 2xx is
//! delivered; a network error, timeout, 408, 429 or 5xx is retried with
//! exponential backoff (1 s, 2 s, 4 s … capped at 5 min) up to the
//! configured attempts; another 4xx is given up at once. Every give-up is
//! logged with its cause. This module must never write anything but the
//! delivery rows.

use crate::engine::Engine;
use crate::store::{Delivery, now_ms};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

const BATCH: usize = 32;
const MAX_BACKOFF_MS: i64 = 5 * 60 * 1000;

#[derive(Clone)]
pub struct Webhooks {
    engine: Engine,
    client: reqwest::Client,
    secret: Option<Vec<u8>>,
    /// The operator's global webhook, signed with `secret`.
    global_url: Option<String>,
    /// Signs deliveries to sessions' `notifyUrl`s.
    notify_key: Vec<u8>,
    max_attempts: u32,
}

/// Installs the process's TLS crypto provider (ring) for HTTPS clients;
/// idempotent. Call before building any `reqwest::Client`.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The signature header value for `body`.
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    // HMAC accepts keys of any length: `new_from_slice` cannot fail here,
    // but an error is still answered with an unsigned marker, never a panic.
    match <Hmac<Sha256> as KeyInit>::new_from_slice(secret) {
        Ok(mut mac) => {
            mac.update(body);
            format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
        }
        Err(_) => "sha256=invalid-key".into(),
    }
}

impl Webhooks {
    /// `notify_key` signs deliveries to sessions' own URLs.
    pub fn new(engine: Engine, notify_key: Vec<u8>) -> Result<Self, String> {
        let d = engine.runner().config().daemon.clone();
        let secret = match &d.webhook_secret_file {
            Some(p) => Some(
                std::fs::read(p)
                    .map_err(|e| format!("webhook secret file {}: {e}", p.display()))?
                    .trim_ascii()
                    .to_vec(),
            ),
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
            global_url: d.webhook_url.clone(),
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
        let body = serde_json::to_vec(&d.event).unwrap_or_default();
        let mut req = self
            .client
            .post(&d.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("X-Gatehost-Event", &d.event.kind)
            .header("X-Gatehost-Delivery", format!("evt-{}", d.event.cursor));
        let key = if self.global_url.as_deref() == Some(d.url.as_str()) {
            self.secret.as_deref()
        } else {
            Some(self.notify_key.as_slice())
        };
        if let Some(key) = key {
            req = req.header("X-Gatehost-Signature", sign(key, &body));
        }
        let result = req.body(body).send().await;
        let attempts = d.attempts + 1;
        let (state, error) = match result {
            Ok(resp) if resp.status().is_success() => ("delivered", None),
            Ok(resp) => {
                let s = resp.status();
                let retry = s.is_server_error() || s.as_u16() == 408 || s.as_u16() == 429;
                (
                    if retry { "pending" } else { "failed" },
                    Some(format!("HTTP {s}")),
                )
            }
            Err(e) => ("pending", Some(format!("{e}"))),
        };
        let (state, next_at) = if state == "pending" {
            if attempts >= self.max_attempts {
                ("failed", now_ms())
            } else {
                let backoff = (1000i64 << (attempts - 1).min(20)).min(MAX_BACKOFF_MS);
                ("pending", now_ms() + backoff)
            }
        } else {
            (state, now_ms())
        };
        if state == "failed" {
            tracing::warn!(url = %d.url, event = %d.event.kind, cursor = d.event.cursor, attempts, error = ?error, "webhook given up");
        } else if let Some(e) = &error {
            tracing::info!(url = %d.url, event = %d.event.kind, attempts, error = %e, "webhook will be retried");
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
    fn signature_is_hmac_sha256_of_the_body() {
        // RFC 4231 test case 2.
        let s = sign(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            s,
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
