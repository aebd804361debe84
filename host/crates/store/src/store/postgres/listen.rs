//! Wake-ups across hosts (issue 51, "one bus for the cluster"): every
//! write transaction that appended events notifies the channel
//! [`CHANNEL`] with its newest cursor (in the transaction, so PostgreSQL
//! delivers it at the commit and never for a rollback: [`commit_sql`]),
//! and [`Wakeups`] listens on it on a connection of its own (not the
//! pool's), on the store's runtime, telling its subscribers that the log
//! may have grown.
//!
//! A subscriber's value is the newest cursor heard of (notified, or read
//! when it starts listening); every change is a wake-up, after which readers re-read the store by cursor (the
//! notifications are never the source of truth). When the listening
//! connection is lost, it is made again with a capped backoff; once it
//! listens again, one wake-up is sent, so that what was committed while it
//! was not listening is read then, never missed. A notification of this
//! process's own commit (its cursor at most the newest this process
//! committed) is not forwarded: the writer woke its own readers after that
//! commit, and every cursor below it was committed before it.
//!
//! The same connection listens on the tokens' channel
//! ([`super::tokens::CHANNEL`]): a rotation of the cluster's tokens by any
//! host, and each time it listens again, bumps a second receiver
//! ([`Wakeups::subscribe_tokens`]), after which the daemon reads the
//! tokens' generations again.
//!
//! On the same connection it listens for the requests hosts send each
//! other (`requests`): [`REQUESTS`] (a request inserted; payload: the
//! owning host's id) and [`ANSWERED`] (one finished; payload: its id). A
//! notification of a request to this host, or of any finished one, bumps
//! the requests' wake-up ([`Wakeups::subscribe_requests`]), as does
//! listening again; the woken re-read `host_requests`.
//!
//! It owns the channels' names, that connection and its task (started by
//! the first subscription, ended when the store is dropped). It must never
//! read the events themselves, hold a pooled connection, or show a
//! password (its messages name the store's location, which holds none).

use super::options::{CONNECT_TIMEOUT, PgOptions, Tls, tls_connector};
use crate::store::StoreResult;
use futures::StreamExt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{AsyncMessage, SimpleQueryMessage, Socket};

/// The channel every write that appended events notifies.
pub(super) const CHANNEL: &str = "gatehost_events";

/// The channel an insert of a host request notifies (payload: the id of
/// the host that owns its policy).
pub(super) const REQUESTS: &str = "gatehost_requests";

/// The channel a host request's outcome notifies (payload: its id).
pub(super) const ANSWERED: &str = "gatehost_requests_answered";

/// The first wait before making a lost connection again; it doubles up to
/// [`MAX_RETRY`], and starts over once listening again.
const FIRST_RETRY: Duration = Duration::from_millis(100);
/// The longest wait between two attempts to listen again.
const MAX_RETRY: Duration = Duration::from_secs(5);

/// The statements that end a write transaction: its notification (when it
/// appended events, `head` its newest cursor) then `COMMIT`, in one round
/// trip. The notification is sent by the server at the commit only.
pub(super) fn commit_sql(head: Option<i64>) -> String {
    match head {
        Some(h) => format!("SELECT pg_notify('{CHANNEL}', '{h}'); COMMIT"),
        None => "COMMIT".to_string(),
    }
}

/// Whether a notification's `payload` is a wake-up for this process: not
/// when it names a cursor this process's own commits already cover.
fn foreign(payload: &str, committed: i64) -> Option<i64> {
    match payload.parse::<i64>() {
        Ok(c) if c <= committed => None,
        Ok(c) => Some(c),
        // Not ours to read: a wake-up all the same.
        Err(_) => Some(0),
    }
}

/// One store's wake-ups: the listening task, started by the first
/// [`Wakeups::subscribe`], ended (its connection closed) when this is
/// dropped.
pub(crate) struct Wakeups {
    /// The driver's configuration, TLS and location, for each connection.
    config: tokio_postgres::Config,
    tls: Tls,
    location: String,
    /// The store's runtime.
    runtime: tokio::runtime::Handle,
    /// The newest cursor this process committed (`PgStore::write` sets it).
    committed: Arc<AtomicI64>,
    /// The newest cursor heard of; each change a wake-up.
    woken: watch::Sender<i64>,
    /// Bumped at each rotation of the tokens heard of, and at each listen.
    tokens: watch::Sender<u64>,
    /// This store's host (requests to it wake it), if any.
    host: Option<String>,
    /// Bumped at each request to this host, each request answered, and
    /// each time it listens again.
    requests: watch::Sender<u64>,
    /// The task, once started.
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for Wakeups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wakeups")
            .field("at", &self.location)
            .finish()
    }
}

impl Wakeups {
    /// The wake-ups of the store of `opts`, its connections on `runtime`;
    /// `committed` is the store's newest own commit. Nothing is connected
    /// before the first subscription.
    pub(super) fn new(
        opts: &PgOptions,
        runtime: tokio::runtime::Handle,
        committed: Arc<AtomicI64>,
        host: Option<String>,
    ) -> StoreResult<Wakeups> {
        let parsed = opts.parse()?;
        let mut config = parsed.config;
        // What `pg_stat_activity` shows for it.
        config.application_name(format!("{} (listen)", opts.application_name));
        // A connection cut without a word (a host or a network gone) is
        // found within about half a minute, then made again.
        config
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(10))
            .keepalives_interval(Duration::from_secs(5))
            .keepalives_retries(3);
        Ok(Wakeups {
            config,
            tls: parsed.tls,
            location: parsed.location,
            runtime,
            committed,
            woken: watch::Sender::new(0),
            tokens: watch::Sender::new(0),
            host,
            requests: watch::Sender::new(0),
            task: Mutex::new(None),
        })
    }

    /// A receiver woken at each commit of another process (host) that
    /// appended events, and once each time the listener listens again
    /// after a lost connection; its value is the newest cursor heard of.
    /// Starts the listener on the first call.
    pub(crate) fn subscribe(&self) -> watch::Receiver<i64> {
        let rx = self.woken.subscribe();
        self.start();
        rx
    }

    /// A receiver woken at each rotation of the cluster's tokens (any
    /// host's, this one's too) and once each time the listener listens
    /// (again). Starts the listener on the first call.
    pub(crate) fn subscribe_tokens(&self) -> watch::Receiver<u64> {
        let rx = self.tokens.subscribe();
        self.start();
        rx
    }

    /// A receiver woken at each request sent to this host, each request
    /// answered (by any host), and once each time the listener listens
    /// again. Starts the listener on the first call.
    pub(crate) fn subscribe_requests(&self) -> watch::Receiver<u64> {
        let rx = self.requests.subscribe();
        self.start();
        rx
    }

    /// Starts the listening task, unless it runs.
    fn start(&self) {
        let mut task = self.task.lock().unwrap_or_else(|p| p.into_inner());
        if task.is_none() {
            let listener = Listener {
                config: self.config.clone(),
                tls: self.tls,
                location: self.location.clone(),
                committed: self.committed.clone(),
                woken: self.woken.clone(),
                tokens: self.tokens.clone(),
                host: self.host.clone(),
                requests: self.requests.clone(),
            };
            *task = Some(self.runtime.spawn(listener.run()));
        }
    }
}

impl Drop for Wakeups {
    fn drop(&mut self) {
        // The connection ends with the task (the store's runtime, shut
        // down with it, drops it too).
        let task = self.task.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = task.take() {
            t.abort();
        }
    }
}

/// How a listening connection ended.
enum Ended {
    /// Before it listened (no connection, or `LISTEN` failed).
    Before(String),
    /// After it listened.
    Listening(String),
}

/// The listening task's state.
struct Listener {
    config: tokio_postgres::Config,
    tls: Tls,
    location: String,
    committed: Arc<AtomicI64>,
    woken: watch::Sender<i64>,
    tokens: watch::Sender<u64>,
    host: Option<String>,
    requests: watch::Sender<u64>,
}

impl Listener {
    /// Listens, and listens again whenever the connection is lost, until
    /// the task is aborted.
    async fn run(self) {
        let mut wait = FIRST_RETRY;
        loop {
            let ended = match self.tls {
                Tls::Off => self.session(tokio_postgres::NoTls).await,
                Tls::Prefer | Tls::Require => match tls_connector(&self.location) {
                    Ok(tls) => self.session(tls).await,
                    Err(e) => Ended::Before(e.to_string()),
                },
            };
            match ended {
                Ended::Listening(why) => {
                    wait = FIRST_RETRY;
                    tracing::warn!(store = %self.location, cause = %why, "the connection listening for other hosts' events was lost; listening again");
                }
                Ended::Before(why) => {
                    tracing::warn!(store = %self.location, cause = %why, retry_in_ms = wait.as_millis() as u64, "cannot listen for other hosts' events yet");
                }
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(MAX_RETRY);
        }
    }

    /// One connection: `LISTEN`, one wake-up, then each notification
    /// forwarded until the connection ends.
    async fn session<T>(&self, tls: T) -> Ended
    where
        T: MakeTlsConnect<Socket>,
        T::Stream: Unpin,
    {
        let connected = tokio::time::timeout(CONNECT_TIMEOUT, self.config.connect(tls)).await;
        let (client, mut conn) = match connected {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Ended::Before(e.to_string()),
            Err(_) => {
                return Ended::Before(format!(
                    "no connection within {}s",
                    CONNECT_TIMEOUT.as_secs()
                ));
            }
        };
        let mut messages = futures::stream::poll_fn(move |cx| conn.poll_message(cx));
        // Listening first, then the head: nothing committed after it is
        // missed (it is notified).
        let listen_sql = format!(
            "LISTEN {CHANNEL}; LISTEN {}; LISTEN {REQUESTS}; LISTEN {ANSWERED}; SELECT cursor FROM event_head",
            super::tokens::CHANNEL
        );
        let listen = client.simple_query(&listen_sql);
        tokio::pin!(listen);
        let head = loop {
            tokio::select! {
                done = &mut listen => match done {
                    Ok(answers) => break answers.iter().find_map(|m| match m {
                        SimpleQueryMessage::Row(r) => r.get(0).and_then(|t| t.parse::<i64>().ok()),
                        _ => None,
                    }),
                    Err(e) => return Ended::Before(e.to_string()),
                },
                m = messages.next() => match m {
                    Some(Ok(m)) => self.forward(m),
                    Some(Err(e)) => return Ended::Before(e.to_string()),
                    None => return Ended::Before("the server closed the connection".into()),
                },
            }
        };
        tracing::debug!(store = %self.location, "listening for other hosts' events");
        // What was committed while not listening is read by cursor now.
        self.woken.send_modify(|v| {
            if let Some(h) = head {
                *v = (*v).max(h);
            }
        });
        // A rotation missed meanwhile is found by its generation now.
        self.tokens.send_modify(|n| *n = n.wrapping_add(1));
        self.requests.send_modify(|n| *n = n.wrapping_add(1));
        loop {
            match messages.next().await {
                Some(Ok(m)) => self.forward(m),
                Some(Err(e)) => return Ended::Listening(e.to_string()),
                None => return Ended::Listening("the server closed the connection".into()),
            }
        }
    }

    /// A notification on the channel wakes the subscribers (unless it is
    /// this process's own commit); anything else is logged.
    fn forward(&self, m: AsyncMessage) {
        match m {
            AsyncMessage::Notification(n) if n.channel() == CHANNEL => {
                let committed = self.committed.load(Ordering::Acquire);
                if let Some(cursor) = foreign(n.payload(), committed) {
                    self.woken.send_modify(|head| *head = (*head).max(cursor));
                }
            }
            AsyncMessage::Notification(n) if n.channel() == super::tokens::CHANNEL => {
                self.tokens.send_modify(|n| *n = n.wrapping_add(1));
            }
            AsyncMessage::Notification(n)
                if n.channel() == ANSWERED
                    || (n.channel() == REQUESTS && self.host.as_deref() == Some(n.payload())) =>
            {
                self.requests.send_modify(|n| *n = n.wrapping_add(1));
            }
            AsyncMessage::Notice(n) => {
                tracing::debug!(store = %self.location, notice = %n.message(), "server notice on the listening connection");
            }
            _ => {}
        }
    }
}

#[cfg(test)]
#[path = "listen_tests.rs"]
mod tests;
