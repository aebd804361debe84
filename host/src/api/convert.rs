//! The records the engine answers with, converted into the API's own
//! types (`wire`), and the API's request bodies into the engine's inputs.
//! Each conversion takes its record apart field by field, so a field added
//! to a record does not compile until it is decided here whether the API
//! shows it. It owns nothing but these mappings; it must never decide or
//! change anything.

use crate::engine;
use crate::store::{
    EventRow, PolicyRow, PolicyStatus, RoutineRow, RoutineStepRow, RowDamage, SessionRow,
    SessionState, StandingRow, StepStatus,
};
use crate::wire;

/// A record's form in the API: one impl per record of the store, taking
/// it apart field by field. (Not `From`: the records are gatehost-store's
/// and the API's types gatehost-client's, so only a trait of this crate
/// can join them.)
pub(crate) trait ToWire {
    /// The API's type for the record.
    type Wire;

    /// The record as the API shows it.
    fn to_wire(self) -> Self::Wire;
}

impl ToWire for RowDamage {
    type Wire = wire::Damage;

    fn to_wire(self) -> wire::Damage {
        let d = self;
        let RowDamage { column, message } = d;
        wire::Damage { column, message }
    }
}

impl ToWire for SessionState {
    type Wire = wire::SessionState;

    fn to_wire(self) -> wire::SessionState {
        let s = self;
        match s {
            SessionState::Running => wire::SessionState::Running,
            SessionState::Idle => wire::SessionState::Idle,
            SessionState::AwaitingInput => wire::SessionState::AwaitingInput,
            SessionState::Exited => wire::SessionState::Exited,
        }
    }
}

impl ToWire for PolicyStatus {
    type Wire = wire::PolicyStatus;

    fn to_wire(self) -> wire::PolicyStatus {
        let s = self;
        match s {
            PolicyStatus::Watching => wire::PolicyStatus::Watching,
            PolicyStatus::Queued => wire::PolicyStatus::Queued,
            PolicyStatus::Gating => wire::PolicyStatus::Gating,
            PolicyStatus::Nudging => wire::PolicyStatus::Nudging,
            PolicyStatus::AwaitingAck => wire::PolicyStatus::AwaitingAck,
            PolicyStatus::Committing => wire::PolicyStatus::Committing,
            PolicyStatus::Reviewing => wire::PolicyStatus::Reviewing,
            PolicyStatus::Done => wire::PolicyStatus::Done,
            PolicyStatus::Blocked => wire::PolicyStatus::Blocked,
            PolicyStatus::Cancelled => wire::PolicyStatus::Cancelled,
        }
    }
}

impl ToWire for StepStatus {
    type Wire = wire::StepStatus;

    fn to_wire(self) -> wire::StepStatus {
        let s = self;
        match s {
            StepStatus::Pending => wire::StepStatus::Pending,
            StepStatus::Running => wire::StepStatus::Running,
            StepStatus::Escalated => wire::StepStatus::Escalated,
            StepStatus::Done => wire::StepStatus::Done,
            StepStatus::Failed => wire::StepStatus::Failed,
            StepStatus::Cancelled => wire::StepStatus::Cancelled,
        }
    }
}

impl ToWire for SessionRow {
    type Wire = wire::Session;

    fn to_wire(self) -> wire::Session {
        let row = self;
        let SessionRow {
            id,
            label,
            cwd,
            workspace,
            state,
            turns,
            last_turn_cursor,
            last_message,
            heartbeat_at,
            notify_url,
            command,
            pid,
            created_at,
            updated_at,
            owner,
            // Never sent to a client.
            key_digest: _,
            stale_at,
            host,
            damage,
            // Never sent to a client.
            workspace_pin: _,
        } = row;
        wire::Session {
            id,
            label,
            cwd,
            workspace,
            state: state.to_wire(),
            turns,
            last_turn_cursor,
            last_message,
            heartbeat_at,
            notify_url,
            command,
            pid,
            created_at,
            updated_at,
            owner,
            stale_at,
            host,
            damage: damage.map(ToWire::to_wire),
        }
    }
}

impl ToWire for engine::Registered {
    type Wire = wire::Registered;

    fn to_wire(self) -> wire::Registered {
        let r = self;
        let engine::Registered {
            session,
            session_key,
        } = r;
        wire::Registered {
            session: session.to_wire(),
            session_key,
        }
    }
}

impl ToWire for PolicyRow {
    type Wire = wire::Policy;

    fn to_wire(self) -> wire::Policy {
        let row = self;
        let PolicyRow {
            id,
            seq,
            spec,
            status,
            sessions,
            pending,
            watch_after,
            retries_used,
            gate_runs,
            verdict,
            plan,
            prepared,
            commit_sha,
            reason,
            parent_id,
            next_id,
            created_at,
            updated_at,
            gate_crashes,
            publish_open,
            deadline_at,
            infra_retries_used,
            review,
            // Not sent to a client (its `policy:nudge` carries it).
            nudge: _,
            host,
            damage,
        } = row;
        wire::Policy {
            policy_id: id.clone(),
            id,
            seq,
            spec,
            status: status.to_wire(),
            sessions,
            pending,
            watch_after,
            retries_used,
            gate_runs,
            verdict,
            plan,
            prepared,
            commit_sha,
            reason,
            parent_id,
            next_id,
            created_at,
            updated_at,
            gate_crashes,
            publish_open,
            deadline_at,
            infra_retries_used,
            review,
            host,
            damage: damage.map(ToWire::to_wire),
        }
    }
}

impl ToWire for EventRow {
    type Wire = wire::Event;

    fn to_wire(self) -> wire::Event {
        let row = self;
        let EventRow {
            cursor,
            at,
            session_id,
            policy_id,
            event,
            host,
            damage,
        } = row;
        wire::Event {
            cursor,
            at,
            session_id,
            policy_id,
            event,
            host,
            damage: damage.map(ToWire::to_wire),
        }
    }
}

impl ToWire for RoutineStepRow {
    type Wire = wire::RoutineStep;

    fn to_wire(self) -> wire::RoutineStep {
        let row = self;
        let RoutineStepRow {
            index,
            label,
            status,
            session_id,
            restarts,
            response,
            started_at,
            ended_at,
        } = row;
        wire::RoutineStep {
            index,
            label,
            status: status.to_wire(),
            session_id,
            restarts,
            response,
            started_at,
            ended_at,
        }
    }
}

impl ToWire for RoutineRow {
    type Wire = wire::Routine;

    fn to_wire(self) -> wire::Routine {
        let row = self;
        let RoutineRow {
            id,
            label,
            spec,
            state,
            phase,
            step_session,
            deadline_at,
            pending_request,
            reason,
            created_at,
            updated_at,
            steps,
            damage,
        } = row;
        wire::Routine {
            id,
            label,
            spec,
            state,
            phase,
            step_session,
            deadline_at,
            pending_request,
            reason,
            created_at,
            updated_at,
            steps: steps.into_iter().map(ToWire::to_wire).collect(),
            damage,
        }
    }
}

impl ToWire for StandingRow {
    type Wire = wire::StandingPolicy;

    fn to_wire(self) -> wire::StandingPolicy {
        let row = self;
        let StandingRow {
            id,
            agents,
            under,
            label,
            policy,
            created_at,
            damage,
        } = row;
        wire::StandingPolicy {
            id,
            agents,
            under,
            label,
            policy,
            created_at,
            damage,
        }
    }
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
