//! The API's limits on file descriptors, so that clients can never starve
//! the daemon of them: the `nofile` limit raised at start, a cap on
//! concurrent long-polls (each holds a connection, one descriptor, for up
//! to `MAX_WAIT`), and an accept loop that logs and backs off when the
//! process is out of descriptors (EMFILE) instead of stalling silently.
//!
//! A long-poll past the cap is answered at once: 503 `too-many-waiters`
//! with `Retry-After` and `Connection: close` (the refused connection gives
//! its descriptor back at once). The rest of the descriptors (half by
//! default) stay for the store, gates' pipes and pidfds, cgroup files,
//! webhooks and the requests that are not long-polls. This module must
//! never answer anything but a long-poll with a refusal.

use super::ApiError;
use axum::http::StatusCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What a refused long-poll is told to wait before it polls again.
pub const RETRY_AFTER_SECS: u64 = 1;
/// The longest the accept loop waits after a failed accept.
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// The first wait after a failed accept.
const FIRST_BACKOFF: Duration = Duration::from_millis(10);
/// At most one warning of a kind per this.
const WARN_EVERY: Duration = Duration::from_secs(1);

/// The process's `nofile` limit (soft, hard), after `raise_nofile`.
#[derive(Debug, Clone, Copy)]
pub struct Nofile {
    pub soft: u64,
    pub hard: u64,
    /// The soft limit the process started with.
    pub was: u64,
}

/// Raises the soft `nofile` limit to the hard one (the kernel's default
/// soft limit, 1024, is far below what a daemon serving many long-polls
/// needs) and returns the figures. Children inherit the raised limit.
pub fn raise_nofile() -> Nofile {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let now = getrlimit(Resource::Nofile);
    // `None` is "unlimited": no real system has it for `nofile`; count it
    // as a large figure.
    let was = now.current.unwrap_or(u64::from(u32::MAX));
    let hard = now.maximum.unwrap_or(u64::from(u32::MAX));
    let soft = if hard > was {
        match setrlimit(
            Resource::Nofile,
            rustix::process::Rlimit {
                current: now.maximum,
                maximum: now.maximum,
            },
        ) {
            Ok(()) => hard,
            Err(e) => {
                tracing::warn!(error = %e, soft = was, hard, "cannot raise the nofile soft limit to the hard one");
                was
            }
        }
    } else {
        was
    };
    Nofile { soft, hard, was }
}

/// How many long-polls may wait at once: `configured`, or half the soft
/// `nofile` limit (the other half is the reserve), at least 1. A
/// configured figure above half the limit is lowered to it, with a warning:
/// past it, waiters alone could use every descriptor.
pub fn long_poll_cap(configured: Option<usize>, nofile: Nofile) -> usize {
    let half = usize::try_from(nofile.soft / 2)
        .unwrap_or(usize::MAX)
        .max(1);
    match configured {
        None => half,
        Some(n) if n > half => {
            tracing::warn!(
                configured = n,
                cap = half,
                nofile = nofile.soft,
                "[daemon] max_long_polls is above half the nofile limit; lowered to it (raise the limit to allow more)"
            );
            half
        }
        Some(n) => n.max(1),
    }
}

/// The long-poll cap, shared by the API's handlers.
#[derive(Clone)]
pub struct LongPolls {
    permits: Arc<Semaphore>,
    cap: usize,
    warned: Arc<RateLimit>,
}

impl LongPolls {
    pub fn new(cap: usize) -> Self {
        LongPolls {
            permits: Arc::new(Semaphore::new(cap)),
            cap,
            warned: Arc::new(RateLimit::new()),
        }
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    /// A place among the waiters, held while the long-poll waits; past the
    /// cap, the 503 to answer at once (logged, once a second at most).
    pub fn enter(&self, route: &'static str) -> Result<OwnedSemaphorePermit, ApiError> {
        match self.permits.clone().try_acquire_owned() {
            Ok(p) => Ok(p),
            Err(_) => {
                if let Some(refused) = self.warned.ready() {
                    tracing::warn!(
                        cap = self.cap,
                        route,
                        refused,
                        "too many long-polls wait at once; answering 503 too-many-waiters (raise the nofile limit or [daemon] max_long_polls)"
                    );
                }
                Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "too-many-waiters",
                    format!(
                        "{} long-polls already wait (the daemon's cap); poll again in {RETRY_AFTER_SECS} s",
                        self.cap
                    ),
                )
                .retry_after(RETRY_AFTER_SECS))
            }
        }
    }
}

/// Once per `WARN_EVERY` at most; counts what it let pass in between.
struct RateLimit {
    start: Instant,
    /// Milliseconds since `start` of the last warning, plus one (0: never).
    last: AtomicU64,
    count: AtomicU64,
}

impl RateLimit {
    fn new() -> Self {
        RateLimit {
            start: Instant::now(),
            last: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    /// `Some(occurrences since the last warning, this one included)` when
    /// it is time to warn again.
    fn ready(&self) -> Option<u64> {
        self.count.fetch_add(1, Ordering::Relaxed);
        let now = u64::try_from(self.start.elapsed().as_millis())
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        let last = self.last.load(Ordering::Relaxed);
        let every = WARN_EVERY.as_millis() as u64;
        if last != 0 && now.saturating_sub(last) < every {
            return None;
        }
        self.last
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .ok()?;
        Some(self.count.swap(0, Ordering::Relaxed).max(1))
    }
}

/// A listener whose failed accepts are logged (once a second at most) and
/// backed off (10 ms doubling to 1 s while they keep failing), never
/// spun on nor swallowed. (axum's own listener sleeps 1 s per failure and
/// logs only with its `tracing` feature, which this build has not.)
pub struct Accepting<L> {
    inner: L,
    what: &'static str,
    failures: u32,
    warned: RateLimit,
}

impl<L> Accepting<L> {
    pub fn new(inner: L, what: &'static str) -> Self {
        Accepting {
            inner,
            what,
            failures: 0,
            warned: RateLimit::new(),
        }
    }

    /// After a failed accept: `None` to try again at once (the peer gave
    /// up: nothing wrong here), else how long to wait first.
    fn failed(&mut self, e: &std::io::Error) -> Option<Duration> {
        use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
        if matches!(
            e.kind(),
            ConnectionAborted | ConnectionRefused | ConnectionReset
        ) {
            return None;
        }
        let wait = FIRST_BACKOFF
            .saturating_mul(1u32 << self.failures.min(7))
            .min(MAX_BACKOFF);
        self.failures = self.failures.saturating_add(1);
        if let Some(times) = self.warned.ready() {
            let emfile = e.raw_os_error() == Some(rustix::io::Errno::MFILE.raw_os_error());
            tracing::warn!(
                listener = self.what,
                error = %e,
                times,
                backoff_ms = wait.as_millis() as u64,
                out_of_descriptors = emfile,
                "cannot accept a connection; waiting before the next accept"
            );
        }
        Some(wait)
    }

    fn accepted(&mut self) {
        if self.failures > 0 {
            tracing::info!(
                listener = self.what,
                failures = self.failures,
                "accepting connections again"
            );
            self.failures = 0;
        }
    }
}

impl axum::serve::Listener for Accepting<tokio::net::TcpListener> {
    type Io = tokio::net::TcpStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok(conn) => {
                    self.accepted();
                    return conn;
                }
                Err(e) => {
                    if let Some(wait) = self.failed(&e) {
                        tokio::time::sleep(wait).await;
                    }
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

impl axum::serve::Listener for Accepting<tokio::net::UnixListener> {
    type Io = tokio::net::UnixStream;
    type Addr = tokio::net::unix::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok(conn) => {
                    self.accepted();
                    return conn;
                }
                Err(e) => {
                    if let Some(wait) = self.failed(&e) {
                        tokio::time::sleep(wait).await;
                    }
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_half_the_limit_and_a_larger_setting_is_lowered() {
        let n = Nofile {
            soft: 128,
            hard: 128,
            was: 128,
        };
        assert_eq!(long_poll_cap(None, n), 64);
        assert_eq!(long_poll_cap(Some(10), n), 10);
        assert_eq!(long_poll_cap(Some(1000), n), 64);
        assert_eq!(long_poll_cap(Some(0), n), 1);
    }

    #[test]
    fn past_the_cap_a_waiter_gets_503_too_many_waiters_until_one_leaves() {
        let polls = LongPolls::new(2);
        let a = polls.enter("test").expect("first");
        let _b = polls.enter("test").expect("second");
        let e = polls.enter("test").expect_err("third");
        assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(e.code, "too-many-waiters");
        assert_eq!(e.retry_after, Some(RETRY_AFTER_SECS));
        drop(a);
        let _c = polls.enter("test").expect("a place freed");
    }

    #[test]
    fn warnings_come_once_a_second_at_most_and_count_what_they_skipped() {
        let r = RateLimit::new();
        assert_eq!(r.ready(), Some(1));
        assert_eq!(r.ready(), None);
        assert_eq!(r.ready(), None);
    }

    #[test]
    fn failed_accepts_back_off_doubling_to_a_second_and_aborted_peers_do_not() {
        let mut a = Accepting::new((), "test");
        let emfile = std::io::Error::from_raw_os_error(rustix::io::Errno::MFILE.raw_os_error());
        let waits: Vec<_> = (0..10).filter_map(|_| a.failed(&emfile)).collect();
        assert_eq!(waits[0], FIRST_BACKOFF);
        assert_eq!(waits[1], FIRST_BACKOFF * 2);
        assert_eq!(*waits.last().expect("waits"), MAX_BACKOFF);
        let aborted = std::io::Error::from(std::io::ErrorKind::ConnectionAborted);
        assert_eq!(a.failed(&aborted), None);
        a.accepted();
        assert_eq!(a.failed(&emfile), Some(FIRST_BACKOFF));
    }
}
