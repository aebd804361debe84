//! BRIDGE (policies helper; this file is removed at the merge, once the
//! services half calls `self.engine().policies().…`): what the services
//! half's files (sessions' report, the watchdog, rules, reconfigure) call
//! of the policy lifecycle, still on `Engine` in this tree, each
//! delegating to `Policies`.
//!
//! It must never hold anything but these delegations.

use super::machine::{Input, PolicyEvent, Step};
use super::{AttachInput, Engine, EngineResult};
use crate::model::event::Change;
use crate::store::{PolicyRow, Tx};

impl Engine {
    pub(crate) fn transition(
        &self,
        tx: &mut Tx<'_>,
        p: &mut PolicyRow,
        input: Input,
        payload: impl Fn(PolicyEvent) -> Option<Change>,
    ) -> EngineResult<Option<Step>> {
        self.policies().transition(tx, p, input, payload)
    }

    pub(crate) fn perform(&self, id: &str, step: &Step) {
        self.policies().perform(id, step);
    }

    pub(crate) fn policy_event(
        &self,
        tx: &mut Tx<'_>,
        change: impl Into<Change>,
        p: &PolicyRow,
    ) -> EngineResult<i64> {
        self.policies().policy_event(tx, change, p)
    }

    pub(crate) fn settle_damaged(
        &self,
        tx: &mut Tx<'_>,
        p: &mut PolicyRow,
    ) -> EngineResult<Option<Step>> {
        self.policies().settle_damaged(tx, p)
    }

    pub(crate) fn schedule_gate(&self, id: &str) {
        self.policies().schedule_gate(id);
    }

    pub(crate) fn schedule_gate_with(
        &self,
        id: &str,
        slot: Option<tokio::sync::OwnedSemaphorePermit>,
    ) {
        self.policies().schedule_gate_with(id, slot);
    }

    pub(crate) fn try_start_gating(
        &self,
        tx: &mut Tx<'_>,
        p: &mut PolicyRow,
    ) -> EngineResult<Option<tokio::sync::OwnedSemaphorePermit>> {
        self.policies().try_start_gating(tx, p)
    }

    pub(crate) fn insert_policy(
        &self,
        tx: &mut Tx<'_>,
        input: &AttachInput,
        parent: Option<&str>,
    ) -> EngineResult<PolicyRow> {
        self.policies().insert_policy(tx, input, parent)
    }

    pub(crate) fn redrive(&self, p: &PolicyRow, reason: &str) -> EngineResult<()> {
        self.policies().redrive(p, reason)
    }
}
