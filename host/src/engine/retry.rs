//! Infrastructure retries (`[daemon] infra_retries`): when a policy's gate
//! could not run, the lifecycle stores the retry (`policy:retry`, the
//! policy `queued`) and this module runs the gate again once the backoff
//! has passed. It owns the backoff and the delayed start; it must never
//! retry a gate that gave a verdict (the lifecycle decides that), and
//! never hold a gating slot while it waits.

use super::Policies;
use super::machine::{Task, Verdict, drives};
use crate::store::PolicyRow;
use crate::verdict::RunReport;

/// The wait before infrastructure retry `attempt` (1, 2, …): `first`,
/// doubling each time, at most a minute.
pub(super) fn retry_backoff(first: std::time::Duration, attempt: i64) -> std::time::Duration {
    let doublings = attempt.saturating_sub(1).clamp(0, 16) as u32;
    first
        .saturating_mul(1u32 << doublings)
        .min(std::time::Duration::from_secs(60))
}

impl Policies {
    /// What a gate that could not run leads to: a retry while
    /// `[daemon] infra_retries` last (counted in `p`, told in
    /// `said.retry`: its cause, attempt and wait), else `error`, with
    /// the reason in `p`.
    pub(super) fn could_not_run(
        &self,
        p: &mut PolicyRow,
        report: &RunReport,
        said: &mut super::said::Said,
    ) -> Verdict {
        let runner = self.engine().runner();
        let daemon = &runner.config().daemon;
        let retries = daemon.infra_retries;
        if (p.infra_retries_used as u32) < retries {
            p.infra_retries_used += 1;
            let wait = retry_backoff(daemon.infra_retry_backoff, p.infra_retries_used);
            tracing::warn!(policy = %p.id, attempt = p.infra_retries_used, of = retries, wait_ms = wait.as_millis() as u64, reason = %report.reason, "the gate could not run; it runs again");
            said.retry = Some(crate::model::event::Retry {
                cause: report.reason.clone(),
                attempt: p.infra_retries_used,
                of: retries,
                wait_ms: wait.as_millis() as u64,
            });
            return Verdict::ErrorRetry;
        }
        p.reason = Some(if p.infra_retries_used > 0 {
            format!(
                "the gate could not run ({} retries): {}",
                p.infra_retries_used, report.reason
            )
        } else {
            format!("the gate could not run: {}", report.reason)
        });
        tracing::warn!(policy = %p.id, reason = %report.reason, "policy blocked: its gate could not run");
        Verdict::Error
    }

    /// The backoff of `id`'s retry has passed: its gate runs again, or,
    /// while supervision is paused, the policy waits and says so
    /// (`policy:paused`; the reload that enables supervision runs it).
    fn retry_now(&self, id: &str) {
        let engine = self.engine();
        if engine.supervising() {
            self.schedule_gate(id);
            return;
        }
        let said = engine.write(|tx| {
            match tx.policy(id)? {
                Some(p) if drives(Task::Slot, p.status) && p.damage.is_none() => {
                    engine.settings().wait_paused(tx, &p)?;
                }
                _ => {}
            }
            Ok(())
        });
        if let Err(e) = said {
            tracing::error!(policy = %id, error = %e, "cannot record that the retry waits for supervision; the sweep picks it up");
        }
    }

    /// Runs `id`'s gate again once the backoff of its last infrastructure
    /// retry has passed (the policy is `queued` meanwhile; a restart runs
    /// it at once).
    pub(super) fn schedule_retry(&self, id: &str) {
        let (engine, id) = (self.engine(), id.to_string());
        tokio::spawn(async move {
            let wait = match engine.policy(&id) {
                Ok(p) => retry_backoff(
                    engine.runner().config().daemon.infra_retry_backoff,
                    p.infra_retries_used,
                ),
                Err(_) => return,
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => engine.policies().retry_now(&id),
                _ = engine.stopped() => {}
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::retry_backoff;
    use std::time::Duration;

    #[test]
    fn the_retry_backoff_doubles_up_to_a_minute() {
        let s = Duration::from_secs(1);
        assert_eq!(retry_backoff(s, 1), s);
        assert_eq!(retry_backoff(s, 2), 2 * s);
        assert_eq!(retry_backoff(s, 3), 4 * s);
        assert_eq!(retry_backoff(s, 30), Duration::from_secs(60));
    }
}
