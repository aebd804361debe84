//! The configuration in force, swapped whole: a reload's new runner put
//! in place of the old, its event stored, and supervision paused or
//! resumed (`[daemon] enabled`).
//!
//! It owns the swap and what follows it. It must never check or diff a
//! configuration (the `live_config` module hands it one checked whole, with the
//! settings that need a restart already kept), never change a gate that
//! runs (each holds the runner it started with), and never start a gate
//! while supervision is paused.

use super::machine::{Task, drives};
use super::{EngineResult, services::Settings};
use crate::config::HostConfig;
use crate::model::event::{Event, PolicyChange, Reasoned};
use crate::store::{PolicyRow, PolicyStatus, Tx};

/// Why a queued policy waits while supervision is paused.
pub(crate) const PAUSED_REASON: &str =
    "supervision is paused ([daemon] enabled = false); the gate runs when it is enabled again";

impl Settings {
    /// A queued policy found while supervision is paused: it waits, queued,
    /// said by `policy:paused` in `tx`; the reload that enables
    /// supervision again runs it.
    pub(super) fn wait_paused(&self, tx: &mut Tx<'_>, p: &PolicyRow) -> EngineResult<()> {
        tracing::info!(policy = %p.id, "supervision is paused ([daemon] enabled = false): the policy waits, queued");
        let paused = PolicyChange::Paused(Reasoned {
            reason: PAUSED_REASON.to_string(),
        });
        self.engine().policies().policy_event(tx, paused, p)?;
        Ok(())
    }

    /// Puts `config` in force, whole, for every gate, attach and
    /// registration that starts from now on (those running keep theirs),
    /// and stores `event` (`config:reloaded`). Pausing
    /// supervision says `policy:paused` on every queued policy; enabling it
    /// again runs what waited, once each.
    pub(crate) fn reconfigure(&self, config: HostConfig, event: &Event) -> EngineResult<()> {
        let e = self.engine();
        let _one = self.reloading.lock().unwrap_or_else(|p| p.into_inner());
        let was = e.supervising();
        let now = config.daemon.enabled;
        e.put_config_in_force(config);
        for warning in e.runner().allowlist_out_of_reach() {
            tracing::warn!(%warning, "after the reload");
        }
        self.daemon_event(event)?;
        if was && !now {
            tracing::warn!(
                "supervision paused ([daemon] enabled = false): turn-ends are recorded, no gate starts"
            );
            self.announce_paused()?;
        } else if !was && now {
            tracing::info!(
                "supervision enabled again: the policies that waited are gated, once each"
            );
            self.resume_queued()?;
        }
        Ok(())
    }

    /// Stores a daemon-wide event (no session, no policy).
    pub(crate) fn daemon_event(&self, event: &Event) -> EngineResult<i64> {
        let e = self.engine();
        e.write(|tx| e.append(tx, event, None, None))
    }

    /// Says `policy:paused` on every queued policy: it waits for
    /// supervision to be enabled.
    pub(super) fn announce_paused(&self) -> EngineResult<()> {
        let e = self.engine();
        let queued = e.store().policies(&[PolicyStatus::Queued])?;
        if queued.is_empty() {
            return Ok(());
        }
        e.write(|tx| {
            for p in &queued {
                let Some(p) = tx.policy(&p.id)? else { continue };
                if !drives(Task::Slot, p.status) || p.damage.is_some() {
                    continue;
                }
                self.wait_paused(tx, &p)?;
            }
            Ok(())
        })
    }

    /// Runs every queued policy that has no gate task (those that waited
    /// while supervision was paused): a policy's gate task starts once, and
    /// moves it out of `queued` once.
    fn resume_queued(&self) -> EngineResult<()> {
        let e = self.engine();
        for p in e.store().policies(&[PolicyStatus::Queued])? {
            if p.damage.is_none() {
                e.policies().redrive(&p, "supervision enabled again")?;
            }
        }
        Ok(())
    }
}
