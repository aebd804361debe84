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

impl From<RowDamage> for wire::Damage {
    fn from(d: RowDamage) -> Self {
        let RowDamage { column, message } = d;
        wire::Damage { column, message }
    }
}

impl From<SessionState> for wire::SessionState {
    fn from(s: SessionState) -> Self {
        match s {
            SessionState::Running => wire::SessionState::Running,
            SessionState::Idle => wire::SessionState::Idle,
            SessionState::AwaitingInput => wire::SessionState::AwaitingInput,
            SessionState::Exited => wire::SessionState::Exited,
        }
    }
}

impl From<PolicyStatus> for wire::PolicyStatus {
    fn from(s: PolicyStatus) -> Self {
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

impl From<StepStatus> for wire::StepStatus {
    fn from(s: StepStatus) -> Self {
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

impl From<SessionRow> for wire::Session {
    fn from(row: SessionRow) -> Self {
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
            damage,
            // Never sent to a client.
            workspace_pin: _,
        } = row;
        wire::Session {
            id,
            label,
            cwd,
            workspace,
            state: state.into(),
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
            damage: damage.map(Into::into),
        }
    }
}

impl From<engine::Registered> for wire::Registered {
    fn from(r: engine::Registered) -> Self {
        let engine::Registered {
            session,
            session_key,
        } = r;
        wire::Registered {
            session: session.into(),
            session_key,
        }
    }
}

impl From<PolicyRow> for wire::Policy {
    fn from(row: PolicyRow) -> Self {
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
            damage,
        } = row;
        wire::Policy {
            policy_id: id.clone(),
            id,
            seq,
            spec,
            status: status.into(),
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
            damage: damage.map(Into::into),
        }
    }
}

impl From<EventRow> for wire::Event {
    fn from(row: EventRow) -> Self {
        let EventRow {
            cursor,
            at,
            session_id,
            policy_id,
            event,
            damage,
        } = row;
        wire::Event {
            cursor,
            at,
            session_id,
            policy_id,
            event,
            damage: damage.map(Into::into),
        }
    }
}

impl From<RoutineStepRow> for wire::RoutineStep {
    fn from(row: RoutineStepRow) -> Self {
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
            status: status.into(),
            session_id,
            restarts,
            response,
            started_at,
            ended_at,
        }
    }
}

impl From<RoutineRow> for wire::Routine {
    fn from(row: RoutineRow) -> Self {
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
            steps: steps.into_iter().map(Into::into).collect(),
            damage,
        }
    }
}

impl From<StandingRow> for wire::StandingPolicy {
    fn from(row: StandingRow) -> Self {
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
