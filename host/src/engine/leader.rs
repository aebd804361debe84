//! The cluster's leader (issue 51): with a store many hosts share
//! (PostgreSQL), one host at a time leads, elected through the database
//! (`RecordsTx::lead`: a lease by the database's clock and a term that
//! grows at every change of leader). The leader runs what must happen once
//! for the whole cluster: it finds the hosts whose lease and grace ran out
//! and marks them stale (`host:stale`, a notification), takes a stale
//! host's work over where workspaces are shared (`host:taken-over`, then
//! its policies carried on here), and applies retention. A host's own
//! work (its gates, the watchdog, deadlines, routines, deliveries) stays
//! its own loops'.
//!
//! Every write of the leader checks its term first, in its transaction
//! (`RecordsTx::leads`): a leader paused past its lease, or cut off, finds
//! another term and changes nothing. It owns the election loop and when
//! the leader acts; the SQL is the store's, the re-driving of a taken-over
//! policy `recovery`'s. It must never act on a stale host's rows without
//! its term checked in the same transaction.

use super::{Engine, EngineError, EngineResult};
use crate::model::event::{Event, HostEvent, HostStale, HostTakenOver};
use crate::store::Leadership;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

/// Which term this daemon leads in, if it does.
#[derive(Debug, Default)]
pub(crate) struct Leader {
    /// The term; 0 when it does not lead.
    term: AtomicI64,
}

impl Leader {
    /// The term this daemon leads in, if it does (as of its last round).
    pub(crate) fn term(&self) -> Option<i64> {
        Some(self.term.load(Ordering::SeqCst)).filter(|t| *t > 0)
    }

    fn set(&self, term: Option<i64>) -> Option<i64> {
        Some(self.term.swap(term.unwrap_or(0), Ordering::SeqCst)).filter(|t| *t > 0)
    }
}

/// What a leader's round settles: when to look again.
fn next_round(lease: Duration, lead: &Leadership) -> Duration {
    let renew = lease / 3;
    let ms = |v: i64| Duration::from_millis(u64::try_from(v.max(0)).unwrap_or(0));
    let at = match lead {
        // Just after the first live host's lease and grace end (a dead
        // host is found within a few ms of it), and at least to renew.
        Leadership::Leads {
            next_due_ms: Some(due),
            ..
        } => ms(*due) + Duration::from_millis(20),
        Leadership::Leads { .. } => renew,
        // Just after the leader's lease ends (it may be dead).
        Leadership::Follows { left_ms, .. } => ms(*left_ms) + Duration::from_millis(20),
    };
    at.clamp(Duration::from_millis(20), renew)
}

impl Engine {
    /// Whether this daemon runs the cluster's timers (retention): always
    /// with a store of one host; in a fleet, while it leads.
    pub(crate) fn runs_cluster_timers(&self) -> bool {
        self.store().host().is_none() || self.inner.leader.term().is_some()
    }

    /// Starts the election loop, until the daemon stops: its task, or
    /// `None` for a store of one host (SQLite). Call inside the daemon's
    /// runtime.
    pub fn spawn_leader(&self) -> Option<tokio::task::JoinHandle<()>> {
        self.store().host()?;
        let pg = self.runner().config().store.postgres.clone()?;
        let engine = self.clone();
        Some(tokio::spawn(async move {
            loop {
                let wait = match engine.lead_round(pg.lease, pg.grace, pg.shared_workspaces) {
                    Ok(wait) => wait,
                    Err(e) => {
                        if engine.inner.leader.set(None).is_some() {
                            tracing::warn!(error = %e, "this host stops leading the cluster: its round failed");
                        } else {
                            tracing::debug!(error = %e, "the leader's round failed; it tries again");
                        }
                        pg.lease / 3
                    }
                };
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = engine.stopped() => return,
                }
            }
        }))
    }

    /// One round: lead (or learn who does); as the leader, mark the dead
    /// hosts stale and, with shared workspaces, take them over. Answers
    /// when to look again.
    fn lead_round(&self, lease: Duration, grace: Duration, shared: bool) -> EngineResult<Duration> {
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let lead = self.store().write(|tx| tx.lead(ms(lease), ms(grace)))?;
        let wait = next_round(lease, &lead);
        let Leadership::Leads { term, .. } = lead else {
            if self.inner.leader.set(None).is_some() {
                tracing::warn!("this host no longer leads the cluster");
            }
            return Ok(wait);
        };
        if self.inner.leader.set(Some(term)) != Some(term) {
            tracing::info!(term, "this host leads the cluster");
        }
        let me = self.store().host().map(|(id, _)| id).unwrap_or_default();
        let found = self.write(|tx| {
            if !tx.leads(term)? {
                return Ok(Vec::new());
            }
            let found = tx.mark_stale_hosts(ms(grace))?;
            for h in &found {
                let event = Event::Host(HostEvent::Stale(HostStale {
                    host: h.id.clone(),
                    fence: h.fence,
                    machine: h.machine.clone(),
                    pid: h.pid,
                    heartbeat_at: h.heartbeat_at,
                    lease_until: h.lease_until,
                    grace_ms: ms(grace),
                    policies: h.policies.clone(),
                    by: me.clone(),
                    takeover: shared,
                }));
                self.append(tx, &event, None, None)?;
            }
            Ok(found)
        })?;
        for h in &found {
            tracing::warn!(host = %h.id, fence = h.fence, machine = %h.machine, pid = h.pid,
                policies = h.policies.len(), takeover = shared,
                "a host stopped renewing its claim (lease and grace ran out): it is stale");
        }
        if shared {
            for h in self.store().hosts()? {
                if h.state == "stale" {
                    self.take_over(term, &me, &h.id)?;
                }
            }
        }
        Ok(wait)
    }

    /// Moves the stale host `dead`'s work here (in one transaction that
    /// checks the term), says so, and carries its policies on.
    fn take_over(&self, term: i64, me: &str, dead: &str) -> EngineResult<()> {
        let moved = self.write(|tx| {
            if !tx.leads(term)? {
                return Ok(None);
            }
            let Some(t) = tx.take_over(dead)? else {
                return Ok(None);
            };
            let event = Event::Host(HostEvent::TakenOver(HostTakenOver {
                host: dead.to_string(),
                by: me.to_string(),
                fence: t.fence,
                policies: t.policies.clone(),
                sessions: t.sessions.clone(),
                routines: t.routines.len() as u64,
                deliveries: t.deliveries,
                requests: t.requests,
            }));
            self.append(tx, &event, None, None)?;
            Ok::<_, EngineError>(Some(t))
        })?;
        let Some(t) = moved else { return Ok(()) };
        tracing::warn!(host = %dead, policies = t.policies.len(), sessions = t.sessions.len(),
            routines = t.routines.len(), deliveries = t.deliveries, requests = t.requests,
            "took over a stale host's work");
        self.policies().adopt(dead, &t.policies)?;
        // Its routines resume here as after a restart (a step whose agent
        // the dead host ran starts again).
        let actions = self.runs().recover_routines_of(Some(&t.routines))?;
        self.runs().perform_routine_actions(actions);
        // Its webhook deliveries are this host's now: wake the deliverer.
        self.bus().published();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_ends_just_after_what_it_waits_for_and_never_past_a_renewal() {
        let lease = Duration::from_secs(15);
        let leads = |due| Leadership::Leads {
            term: 1,
            next_due_ms: due,
        };
        assert_eq!(next_round(lease, &leads(None)), Duration::from_secs(5));
        assert_eq!(
            next_round(lease, &leads(Some(1_000))),
            Duration::from_millis(1_020)
        );
        assert_eq!(
            next_round(lease, &leads(Some(60_000))),
            Duration::from_secs(5)
        );
        assert_eq!(
            next_round(lease, &leads(Some(-500))),
            Duration::from_millis(20)
        );
        let follows = |left_ms| Leadership::Follows {
            leader: "alpha".into(),
            left_ms,
        };
        assert_eq!(next_round(lease, &follows(300)), Duration::from_millis(320));
        assert_eq!(next_round(lease, &follows(-1)), Duration::from_millis(20));
        assert_eq!(next_round(lease, &follows(40_000)), Duration::from_secs(5));
    }

    #[test]
    fn the_term_is_none_until_set_and_a_swap_answers_the_old_one() {
        let l = Leader::default();
        assert_eq!(l.term(), None);
        assert_eq!(l.set(Some(4)), None);
        assert_eq!(l.term(), Some(4));
        assert_eq!(l.set(None), Some(4));
        assert_eq!(l.term(), None);
    }
}
