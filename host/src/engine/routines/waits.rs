//! Whether a waiting step may start: its `waitFor` prerequisites (earlier
//! steps, other sessions) all finished, or one never will. It reads only;
//! it must never change a run.

use super::super::EngineResult;
use super::super::routine;
use super::Run;
use crate::store::{SessionRow, SessionState, StepStatus, StoreError};

/// Whether step `step`'s `waitFor` are all finished (`ready`), or one
/// never will (`blocked`, with why). A label names an earlier step; any
/// other name a session, finished when its last turn (or its exit)
/// ended with the done marker; a session that exited without it, or
/// that does not exist, blocks.
pub(super) fn check_waits(
    run: &Run,
    step: usize,
    session: impl Fn(&str) -> Result<Option<SessionRow>, StoreError>,
) -> EngineResult<(bool, bool, Option<String>)> {
    let Some(spec) = run.spec.steps.get(step) else {
        return Ok((false, true, Some(format!("the run has no step {step}"))));
    };
    let mut ready = true;
    for w in spec.wait_for.prerequisites() {
        if let Some(s) = run.row.steps.iter().find(|s| &s.label == w) {
            match s.status {
                StepStatus::Done => {}
                StepStatus::Failed | StepStatus::Cancelled => {
                    return Ok((false, true, Some(format!("step {w:?} did not finish"))));
                }
                _ => ready = false,
            }
            continue;
        }
        match session(w)? {
            None => {
                return Ok((false, true, Some(format!("no session {w:?} to wait for"))));
            }
            Some(s) => {
                let finished = routine::finishes_step(s.last_message.as_deref());
                match s.state {
                    SessionState::Exited if !finished => {
                        return Ok((
                            false,
                            true,
                            Some(format!("session {w:?} exited before it finished")),
                        ));
                    }
                    SessionState::Exited | SessionState::Idle if finished => {}
                    _ => ready = false,
                }
            }
        }
    }
    Ok((ready, false, None))
}
