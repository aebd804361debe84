//! Which states each of the engine's tasks drives (`drives`), and which
//! awaits an ack, checked against the decisions: a task drives exactly the
//! states that take its outcomes.

use super::*;
use crate::exhaustive::variants;
use PolicyStatus as S;

impl Task {
    fn all() -> Vec<Task> {
        vec![
            Task::Slot,
            Task::Gate,
            Task::Nudge,
            Task::Commit,
            Task::Review,
        ]
    }

    /// Every outcome the task can end in.
    fn outcomes(self) -> Vec<Input> {
        match self {
            Task::Slot => vec![Input::SlotTaken],
            Task::Gate => Verdict::all().into_iter().map(Input::Verdict).collect(),
            Task::Nudge => AfterNudge::all()
                .into_iter()
                .map(Input::NudgeDelivered)
                .collect(),
            Task::Commit => CommitResult::all().into_iter().map(Input::Commit).collect(),
            Task::Review => ReviewStep::all().into_iter().map(Input::Review).collect(),
        }
    }
}

/// Which state each task drives, written out; and that is exactly where
/// the machine takes every outcome of the task (but a commit published
/// as its policy was cancelled, said on the cancelled policy): the tasks'
/// guards are the machine's own "ignore" rule.
#[test]
fn a_task_drives_exactly_the_states_that_take_its_outcomes() {
    variants!(Task; Task::Slot, Task::Gate, Task::Nudge, Task::Commit, Task::Review)
        .assert_listed(&Task::all());
    let driven = |task| match task {
        Task::Slot => S::Queued,
        Task::Gate => S::Gating,
        Task::Nudge => S::Nudging,
        Task::Commit => S::Committing,
        Task::Review => S::Reviewing,
    };
    for task in Task::all() {
        for state in PolicyStatus::ALL {
            assert_eq!(
                drives(task, state),
                state == driven(task),
                "{task:?} in {state:?}"
            );
            for outcome in task.outcomes() {
                let taken = matches!(decide(state, outcome), Decision::Go(_));
                let said_after_cancel =
                    state == S::Cancelled && outcome == Input::Commit(CommitResult::Committed);
                assert_eq!(
                    taken,
                    drives(task, state) || said_after_cancel,
                    "{task:?}: {outcome:?} in {state:?}"
                );
            }
        }
    }
}

#[test]
fn only_awaiting_ack_awaits_an_ack() {
    for state in PolicyStatus::ALL {
        assert_eq!(awaits_ack(state), state == S::AwaitingAck, "{state:?}");
        for input in Input::all() {
            if matches!(input, Input::Ack { .. } | Input::RequestChanges { .. }) {
                let refused = decide(state, input) == Decision::Refuse(Refusal::NotAwaitingAck);
                assert_eq!(refused, !awaits_ack(state), "{state:?} × {input:?}");
            }
        }
    }
}
