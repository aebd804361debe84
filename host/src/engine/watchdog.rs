//! The watchdog: sessions silent past `[daemon] heartbeat_timeout` are
//! `stale` (`session:stale`, once), the policies that wait on them follow
//! `[daemon] on_stale` (blocked or cancelled, with the reason), and
//! policies past their `deadline` are `expired` and blocked.
//!
//! A session's liveness is its last word to the daemon: a report, a hook's
//! call, a heartbeat, a registration (`heartbeat_at`). A session the daemon
//! started is live as long as its process is (its exit is `exited`): the
//! watchdog never looks at it. A session that speaks again is live again
//! (`session:live`, published by the report itself).
//!
//! Silence is counted only over time the daemon itself was running: from
//! the later of a session's last word and the moment the watchdog last
//! began to run without a gap (its start, after any downtime; its wake
//! after the daemon stood still, SIGSTOP'd, suspended with the machine or
//! stalled, seen as a look that came [`STALL`] later than due). So no
//! session is stale before a whole timeout of the daemon's own running
//! has passed without a word from it.
//!
//! It owns the periodic look and its decisions through the one transition
//! function. It must never reclaim a policy whose gate, nudge or commit is
//! in flight (the lifecycle ignores the input there, and the next look
//! finds the policy again once it settled), never kill a process, and
//! never read more than the partial indexes give it.

use super::machine::{Input, PolicyEvent};
use super::sessions::machine as session;
use super::{EngineResult, services::Sessions};
use crate::config::OnStale;
use crate::model::event::{self as ev, PolicyChange as P};
use crate::store::{PolicyRow, now_ms};
use std::time::Duration;

/// Sessions marked stale per look at most (the rest wait for the next).
const BATCH: usize = 500;

/// A look this much later than due means the daemon stood still: the
/// silence of that time is the daemon's, not the sessions'.
const STALL: Duration = Duration::from_secs(1);

/// How often the watchdog looks: a quarter of the heartbeat timeout
/// (between 50 ms and 500 ms), so a silent session is stale within the
/// timeout plus half a second; 500 ms when only deadlines are watched.
pub fn tick_interval(heartbeat_timeout: Option<Duration>) -> Duration {
    match heartbeat_timeout {
        Some(t) => (t / 4).clamp(Duration::from_millis(50), Duration::from_millis(500)),
        None => Duration::from_millis(500),
    }
}

/// What one look did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Look {
    /// Sessions found stale.
    pub stale: Vec<String>,
    /// Policies blocked or cancelled for a stale member.
    pub reclaimed: Vec<String>,
    /// Policies past their deadline.
    pub expired: Vec<String>,
}

impl Sessions {
    /// Starts the watchdog: one look every [`tick_interval`], until the
    /// daemon stops.
    pub(crate) fn spawn_watchdog(&self) {
        self.awake_from(now_ms(), "the watchdog starts");
        let engine = self.engine();
        tokio::spawn(async move {
            loop {
                let every = tick_interval(engine.runner().config().daemon.heartbeat_timeout);
                let slept_at = now_ms();
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = engine.stopped() => return,
                }
                let woke = now_ms();
                let late = woke - slept_at - every.as_millis() as i64;
                if late > STALL.as_millis() as i64 {
                    tracing::warn!(
                        late_ms = late,
                        "the daemon stood still (stopped, suspended or stalled): sessions' silence over that time is excused"
                    );
                    engine.sessions().awake_from(woke, "the daemon stood still");
                }
                let e2 = engine.clone();
                match tokio::task::spawn_blocking(move || e2.sessions().watch(now_ms())).await {
                    Ok(Ok(look)) => {
                        for (id, step) in look.1 {
                            engine.policies().perform(&id, &step);
                        }
                    }
                    Ok(Err(e)) if engine.outage().failed_engine(&e) => {
                        tracing::debug!(error = %e, "the watchdog could not look; it looks again");
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "the watchdog could not look; it looks again");
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the watchdog's look failed; it looks again");
                    }
                }
            }
        });
    }

    /// One look at `now` (ms): marks silent sessions stale, reclaims the
    /// watching policies of stale sessions, expires policies past their
    /// deadline. Returns what it did and the steps whose effects the
    /// caller runs.
    pub(crate) fn watch(&self, now: i64) -> EngineResult<(Look, Vec<(String, super::Step)>)> {
        let engine = self.engine();
        let runner = engine.runner();
        let daemon = &runner.config().daemon;
        let (timeout, on_stale) = (daemon.heartbeat_timeout, daemon.on_stale);
        // Silent since before the cutoff, and the daemon running all that
        // time: within a timeout of its start or wake, no session is.
        let awake_since = self.awake_since.load(std::sync::atomic::Ordering::SeqCst);
        let cutoff = timeout
            .map(|t| now - t.as_millis() as i64)
            .filter(|c| awake_since < *c);
        let timeout = cutoff.and(timeout);
        if !engine.store().watch_due(cutoff, now)? {
            // Nothing due: no write, so no long-poll is woken for nothing
            // (the bus is told only of commits that appended events).
            return Ok((Look::default(), Vec::new()));
        }
        engine.write(|tx| {
            let mut look = Look::default();
            let mut steps = Vec::new();
            if let Some(timeout) = timeout {
                let timeout_ms = timeout.as_millis() as i64;
                for mut s in tx.silent_sessions(now - timeout_ms, BATCH)? {
                    if s.damage.is_some() {
                        continue;
                    }
                    let silent = session::decide(session::Standing::of(&s), session::Input::Silent);
                    let session::Decision::Go(step) = silent else {
                        continue;
                    };
                    let last = s.heartbeat_at.unwrap_or(s.updated_at);
                    s.stale_at = step.stale.then_some(now);
                    tx.put_session(&s)?;
                    let stale = ev::Stale {
                        session_id: s.id.clone(),
                        last_heard_at: last,
                        silent_ms: now - last,
                        timeout_ms,
                        on_stale: match on_stale {
                            OnStale::Block => ev::OnStaleName::Block,
                            OnStale::Cancel => ev::OnStaleName::Cancel,
                        },
                    };
                    let event = ev::Event::Watchdog(ev::WatchdogEvent::Stale(stale));
                    engine.append(tx, &event, Some(&s.id), None)?;
                    tracing::warn!(session = %s.id, silent_ms = now - last, "session is stale: silent past [daemon] heartbeat_timeout");
                    look.stale.push(s.id);
                }
            }
            // Every look, not only after a new stale session: a policy
            // whose gate was in flight is reclaimed once it settled.
            for mut p in tx.watching_with_stale_member()? {
                let stale: Vec<String> = p
                    .sessions
                    .iter()
                    .filter(|m| {
                        tx.session(m)
                            .ok()
                            .flatten()
                            .is_some_and(|s| s.stale_at.is_some())
                    })
                    .cloned()
                    .collect();
                let reason = format!(
                    "session(s) {} went silent past [daemon] heartbeat_timeout; on_stale = \"{}\"",
                    stale.join(", "),
                    match on_stale {
                        OnStale::Block => "block",
                        OnStale::Cancel => "cancel",
                    }
                );
                p.reason = Some(reason.clone());
                let input = Input::MemberStale {
                    cancel: on_stale == OnStale::Cancel,
                };
                let step = engine.policies().transition(tx, &mut p, input, |e| match e {
                    PolicyEvent::Blocked => Some(
                        P::Blocked(ev::Blocked {
                            outcome: ev::BlockOutcome::Stale,
                            reason: Some(reason.clone()),
                            stale_sessions: Some(stale.clone()),
                            gate_crashes: None,
                            damage: None,
                        })
                        .into(),
                    ),
                    PolicyEvent::Cancelled => Some(
                        P::Cancelled(ev::Cancelled {
                            from: None,
                            reason: Some(reason.clone()),
                            stale_sessions: Some(stale.clone()),
                        })
                        .into(),
                    ),
                    _ => None,
                })?;
                if let Some(step) = step {
                    tracing::warn!(policy = %p.id, reason = %reason, "policy reclaimed by the watchdog");
                    look.reclaimed.push(p.id.clone());
                    steps.push((p.id.clone(), step));
                }
            }
            for mut p in tx.past_deadline(now)? {
                if let Some(step) = self.expire(tx, &mut p, now)? {
                    look.expired.push(p.id.clone());
                    steps.push((p.id.clone(), step));
                }
            }
            Ok((look, steps))
        })
    }

    /// Counts sessions' silence from `at` (ms) on (see the module doc).
    pub(crate) fn awake_from(&self, at: i64, why: &str) {
        self.awake_since
            .store(at, std::sync::atomic::Ordering::SeqCst);
        tracing::debug!(at, why, "the watchdog counts silence from now");
    }

    /// Blocks `p`, whose deadline is past (if its state lets it: a gate or
    /// commit in flight settles first).
    fn expire(
        &self,
        tx: &mut crate::store::Tx<'_>,
        p: &mut PolicyRow,
        now: i64,
    ) -> EngineResult<Option<super::Step>> {
        let deadline = p.deadline_at.unwrap_or(now);
        let was = p.status;
        let reason = format!(
            "its deadline ({}) passed while it was {}",
            p.spec.deadline.as_deref().unwrap_or("?"),
            was.as_str()
        );
        let old_reason = p.reason.replace(reason.clone());
        let step = self
            .engine()
            .policies()
            .transition(tx, p, Input::Expired, |e| match e {
                PolicyEvent::Expired => Some(
                    P::Expired(ev::Expired {
                        deadline_at: deadline,
                        was: was.as_str().to_string(),
                        reason: reason.clone(),
                    })
                    .into(),
                ),
                PolicyEvent::Blocked => {
                    Some(P::blocked(ev::BlockOutcome::Expired, Some(reason.clone())).into())
                }
                _ => None,
            })?;
        if step.is_none() {
            p.reason = old_reason;
        } else {
            tracing::warn!(policy = %p.id, reason = %reason, "policy expired");
        }
        Ok(step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Engine;

    /// An idle look (nothing silent, stale or due) writes nothing and so
    /// wakes no long-poll: before, every look committed an empty
    /// transaction and told the bus, twice a second.
    #[test]
    fn an_idle_look_writes_nothing_and_wakes_no_reader() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = crate::config::HostConfig::default();
        config.daemon.heartbeat_timeout = Some(Duration::from_secs(3600));
        let store = crate::store::Store::open(dir.path()).expect("store");
        let engine = Engine::new(store, crate::gate::GateRunner::new(config)).expect("engine");
        let mut woken = engine.bus().subscribe();
        woken.mark_unchanged();
        let (look, steps) = engine.sessions().watch(now_ms()).expect("look");
        assert_eq!(look, Look::default());
        assert!(steps.is_empty());
        assert!(
            !woken.has_changed().expect("bus"),
            "an idle look woke the readers"
        );
    }

    /// A session silent since before the daemon's start (or its wake from
    /// a stall) is not stale until a whole timeout of the daemon's own
    /// running has passed; then it is.
    #[test]
    fn silence_counts_only_while_the_daemon_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = crate::config::HostConfig::default();
        config.daemon.heartbeat_timeout = Some(Duration::from_secs(10));
        let store = crate::store::Store::open(dir.path()).expect("store");
        let engine = Engine::new(store, crate::gate::GateRunner::new(config)).expect("engine");
        let cwd = dir.path().join("ws");
        std::fs::create_dir_all(&cwd).expect("mkdir");
        let input = crate::engine::sessions::RegisterInput {
            id: Some("quiet".into()),
            cwd: cwd.display().to_string(),
            ..Default::default()
        };
        engine
            .sessions()
            .register(input, &crate::engine::keys::Caller::operator())
            .expect("register");
        let spoke = now_ms();
        // The daemon was down (or stood still) for a minute, and woke.
        let woke = spoke + 60_000;
        engine.sessions().awake_from(woke, "test");
        let (look, _) = engine.sessions().watch(woke + 1).expect("look");
        assert!(look.stale.is_empty(), "{look:?}");
        let (look, _) = engine.sessions().watch(woke + 9_000).expect("look");
        assert!(
            look.stale.is_empty(),
            "within the timeout of the wake: {look:?}"
        );
        let (look, _) = engine.sessions().watch(woke + 10_001).expect("look");
        assert_eq!(look.stale, ["quiet"], "a whole timeout of running, silent");
    }

    #[test]
    fn the_watchdog_looks_often_enough_to_be_within_the_timeout_and_a_half_second() {
        assert_eq!(tick_interval(None), Duration::from_millis(500));
        assert_eq!(
            tick_interval(Some(Duration::from_secs(1))),
            Duration::from_millis(250)
        );
        assert_eq!(
            tick_interval(Some(Duration::from_secs(60))),
            Duration::from_millis(500)
        );
        assert_eq!(
            tick_interval(Some(Duration::from_millis(100))),
            Duration::from_millis(50)
        );
    }
}
