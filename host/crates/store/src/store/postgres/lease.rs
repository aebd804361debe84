//! A host's claim as this process holds it: its fencing number, the
//! deadline until which it may act, and the heartbeat that renews its
//! lease on a connection of its own (which also holds the host id's
//! session lock, so that a restart after a SIGKILL claims the id at once).
//!
//! The deadline is this process's monotonic clock: a renewal sent at `t`
//! lets it act until `t + lease − margin` (the database set the lease from
//! a moment after `t`, by its own clock), so a host that cannot renew
//! stops acting before the database can judge its lease over, whatever
//! the two clocks say. A renewal that changes no row means the id was
//! claimed again: the claim is lost for good and whoever holds the
//! receiver of [`Lease::lost`] is told why (the daemon stops).
//!
//! It owns that state and the heartbeat's connection; the SQL is `hosts`.
//! It must never extend the deadline from anything but a renewal the
//! database accepted, and never un-lose a lost claim.

use super::hosts::{self, HostSpec};
use super::options::{self, Parsed, Tls};
use crate::store::{StoreError, StoreResult};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The part of the lease never used: a host stops acting this long
/// before the lease it renewed can end.
fn margin(lease: Duration) -> Duration {
    lease / 5
}

/// A claim held by this process.
#[derive(Debug)]
pub(super) struct Lease {
    pub(super) id: String,
    pub(super) fence: i64,
    lease: Duration,
    /// Until when this process may act (monotonic).
    until: Mutex<Instant>,
    /// Why the claim was lost; `None` while it is held.
    lost: watch::Sender<Option<String>>,
    /// Set when this process released the claim (a clean stop): it acts no
    /// more, and nobody is told of a loss.
    released: std::sync::atomic::AtomicBool,
}

impl Lease {
    /// The claim `(id, fence)` of `spec`, taken by a transaction that
    /// began at `sent`.
    pub(super) fn new(spec: &HostSpec, fence: i64, sent: Instant) -> Lease {
        Lease {
            id: spec.id.clone(),
            fence,
            lease: spec.lease,
            until: Mutex::new(sent + spec.lease - margin(spec.lease)),
            lost: watch::Sender::new(None),
            released: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether this process may act for its host now: `Fenced` once the
    /// claim is lost, `LeaseLapsed` (try again later) while no renewal
    /// came for too long.
    pub(super) fn acting(&self) -> StoreResult<()> {
        if let Some(why) = self.lost.borrow().as_ref() {
            return Err(StoreError::Fenced(why.clone()));
        }
        if self.released.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StoreError::Fenced(format!(
                "host '{}' released its claim (the daemon is stopping)",
                self.id
            )));
        }
        let until = *self.until.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if now >= until {
            return Err(StoreError::LeaseLapsed(format!(
                "host '{}' has renewed no lease for {:.1} s (the database cannot be reached?); it acts again once a renewal succeeds",
                self.id,
                (now - until + self.lease - margin(self.lease)).as_secs_f64()
            )));
        }
        Ok(())
    }

    /// A renewal sent at `sent` was accepted.
    pub(super) fn renewed(&self, sent: Instant) {
        let mut until = self.until.lock().unwrap_or_else(|p| p.into_inner());
        *until = (*until).max(sent + self.lease - margin(self.lease));
    }

    /// The claim is lost, for `why`, as `found` (by what): said once,
    /// never undone.
    pub(super) fn lose(&self, why: &str, found: &str) {
        let first = self.lost.send_if_modified(|w| {
            if w.is_none() {
                *w = Some(why.to_string());
                true
            } else {
                false
            }
        });
        if first {
            tracing::error!(host = %self.id, fence = self.fence, cause = why, found, "this host's claim is lost: it stops acting");
        }
    }

    /// This process released the claim: it acts no more.
    pub(super) fn released(&self) {
        self.released
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// A receiver told (once) when the claim is lost, and why.
    pub(super) fn lost(&self) -> watch::Receiver<Option<String>> {
        self.lost.subscribe()
    }

    /// How often the heartbeat renews: a third of the lease.
    fn period(&self) -> Duration {
        self.lease / 3
    }
}

/// How the heartbeat makes its connection again.
pub(super) type Dial = Box<
    dyn Fn() -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<tokio_postgres::Client, String>> + Send>,
        > + Send
        + Sync,
>;

/// How the heartbeat connects: the pool's configuration (its host
/// setting included), named `… (heartbeat)` for `pg_stat_activity`, with
/// the same TLS. The connection's task runs on the runtime the future is
/// polled in (the store's).
pub(super) fn dial(parsed: &Parsed) -> StoreResult<Dial> {
    let mut config = parsed.config.clone();
    let name = format!(
        "{} (heartbeat)",
        config.get_application_name().unwrap_or("gatehost")
    );
    config.application_name(&name);
    let tls = match parsed.tls {
        Tls::Off => None,
        Tls::Prefer | Tls::Require => Some(options::tls_connector(&parsed.location)?),
    };
    Ok(Box::new(move || {
        let (config, tls) = (config.clone(), tls.clone());
        Box::pin(async move {
            let client = match tls {
                None => {
                    let (c, conn) = config
                        .connect(tokio_postgres::NoTls)
                        .await
                        .map_err(|e| e.to_string())?;
                    tokio::spawn(async move { drop(conn.await) });
                    c
                }
                Some(t) => {
                    let (c, conn) = config.connect(t).await.map_err(|e| e.to_string())?;
                    tokio::spawn(async move { drop(conn.await) });
                    c
                }
            };
            Ok(client)
        })
    }))
}

/// Renews `lease` every third of it on `client` (made again by `dial`
/// when lost), taking the id's session lock when it does not hold it yet;
/// ends when the claim is lost (or with the runtime).
pub(super) async fn heartbeat(
    lease: std::sync::Arc<Lease>,
    dial: Dial,
    mut client: Option<tokio_postgres::Client>,
    mut locked: bool,
) {
    let lease_ms = i64::try_from(lease.lease.as_millis()).unwrap_or(i64::MAX);
    let mut failing: Option<String> = None;
    loop {
        let wait = if failing.is_some() {
            (lease.period() / 2).min(Duration::from_secs(1))
        } else {
            lease.period()
        };
        tokio::time::sleep(wait).await;
        if client.is_none() {
            match dial().await {
                Ok(c) => client = Some(c),
                Err(e) => {
                    note_failure(&lease, &mut failing, e);
                    continue;
                }
            }
        }
        let Some(c) = client.as_ref() else { continue };
        let sent = Instant::now();
        let renewed = tokio::time::timeout(
            lease.period(),
            c.execute(hosts::RENEW, &[&lease.id, &lease.fence, &lease_ms]),
        )
        .await;
        match renewed {
            Ok(Ok(1)) => {
                lease.renewed(sent);
                if failing.take().is_some() {
                    tracing::info!(host = %lease.id, fence = lease.fence, "the lease is renewed again");
                }
            }
            Ok(Ok(_)) if gatehost_test_hooks::ignore_own_lease() => {
                tracing::warn!(host = %lease.id, "test hook: the heartbeat ignores that its claim was replaced");
            }
            Ok(Ok(_)) => {
                let why = lost_why(c, &lease).await;
                lease.lose(&why, "by the heartbeat's renewal");
                return;
            }
            Ok(Err(e)) => {
                client = None;
                note_failure(&lease, &mut failing, e.to_string());
                continue;
            }
            Err(_) => {
                client = None;
                note_failure(&lease, &mut failing, "the renewal timed out".into());
                continue;
            }
        }
        if !locked
            && let Ok(Ok(row)) =
                tokio::time::timeout(lease.period(), c.query_one(hosts::HOST_LOCK, &[&lease.id]))
                    .await
        {
            locked = row.try_get::<_, bool>("got").unwrap_or(false);
        }
    }
}

/// A renewal failed: said once per outage, not per try.
fn note_failure(lease: &Lease, failing: &mut Option<String>, why: String) {
    if failing.is_none() {
        tracing::warn!(host = %lease.id, fence = lease.fence, cause = %why, "cannot renew this host's lease; trying again");
    }
    *failing = Some(why);
}

/// Why a renewal changed no row: who holds the id now.
async fn lost_why(c: &tokio_postgres::Client, lease: &Lease) -> String {
    match c
        .query_opt(
            "SELECT fence, state, machine, pid FROM hosts WHERE id = $1",
            &[&lease.id],
        )
        .await
    {
        Ok(Some(r)) => hosts::claimed_again(
            &lease.id,
            lease.fence,
            r.try_get::<_, i64>("fence").unwrap_or(-1),
            r.try_get::<_, i64>("pid").unwrap_or(-1),
            &r.try_get::<_, String>("machine").unwrap_or_default(),
            &r.try_get::<_, String>("state").unwrap_or_default(),
        ),
        Ok(None) => hosts::claim_gone(&lease.id),
        Err(e) => format!(
            "host '{}''s renewal changed nothing (its claim was replaced; reading by whom failed: {e})",
            lease.id
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(lease: Duration) -> HostSpec {
        HostSpec {
            id: "a".into(),
            lease,
            machine: "m".into(),
            version: "v".into(),
        }
    }

    #[test]
    fn a_claim_acts_until_its_lease_less_the_margin_then_lapses_until_renewed() {
        let l = Lease::new(&spec(Duration::from_secs(10)), 7, Instant::now());
        assert!(l.acting().is_ok());
        let long_ago = Instant::now()
            .checked_sub(Duration::from_secs(9))
            .expect("the monotonic clock runs for more than 9 s");
        let old = Lease::new(&spec(Duration::from_secs(10)), 7, long_ago);
        // 9 s > 10 s − 2 s: lapsed, and a retry later may succeed.
        let e = old.acting().expect_err("lapsed");
        assert!(matches!(e, StoreError::LeaseLapsed(_)), "{e:?}");
        assert!(e.is_unavailable());
        // An old renewal never moves the deadline back; a new one restores it.
        old.renewed(long_ago);
        assert!(old.acting().is_err());
        old.renewed(Instant::now());
        assert!(old.acting().is_ok());
    }

    #[test]
    fn a_lost_claim_is_fenced_for_good_and_said_once() {
        let l = Lease::new(&spec(Duration::from_secs(10)), 7, Instant::now());
        let mut rx = l.lost();
        l.lose("first", "test");
        l.lose("second", "test");
        assert!(rx.has_changed().unwrap_or(false));
        assert_eq!(rx.borrow_and_update().as_deref(), Some("first"));
        l.renewed(Instant::now());
        let e = l.acting().expect_err("fenced");
        assert!(matches!(&e, StoreError::Fenced(w) if w == "first"), "{e:?}");
        assert!(!e.is_unavailable());
    }
}
