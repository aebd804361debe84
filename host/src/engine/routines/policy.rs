//! Routine steps whose policy decides them (`waitFor: "policy"`): the
//! actions that start such a step (its session, then its policy attached
//! with an idempotency key of the step's attempt, then its prompt), and
//! the feed of a policy's end into its run, inside the transaction that
//! ended the policy. It must never decide a run's state itself (that is
//! `routine::decide`'s) and never attach a policy for anyone but the
//! operator who started the run.

use super::super::keys::Caller;
use super::super::routine::{self, Finish, RunInput, RunState, SessionSpec, StepSpec};
use super::super::{EngineResult, attach, services::Routines};
use super::{Action, Context, Run};
use crate::config::Trust;
use crate::model::attach::ClientKey;
use crate::model::routine::StepPolicy;
use crate::store::{PolicyRow, PolicyStatus, Tx};

/// The idempotency key of the policy of step `step`'s attempt `restarts`
/// in run `run` (one policy per attempt, however often it is asked for).
pub(super) fn policy_key(run: &str, step: usize, restarts: u32) -> String {
    format!("routine:{run}:s{step}:r{restarts}")
}

/// What starts step `step` (attempt `restarts`) of run `run` in session
/// `session`: its ACP agent (the daemon's) or nothing (an existing
/// session); its policy, when it has one, before its prompt.
pub(super) fn start_actions(
    run: &str,
    step: usize,
    restarts: u32,
    spec: &StepSpec,
    session: &str,
) -> Vec<Action> {
    let text = routine::step_prompt(spec);
    let then = match &spec.policy {
        Some(policy) if spec.wait_for.finish() == Finish::Policy => Action::AttachThenPrompt {
            session: session.to_string(),
            policy: policy.clone(),
            key: policy_key(run, step, restarts),
            text: text.clone(),
        },
        _ => Action::Prompt {
            session: session.to_string(),
            text: text.clone(),
        },
    };
    match &spec.session {
        SessionSpec::Acp {
            command,
            cwd,
            permission,
        } => {
            let policy = matches!(then, Action::AttachThenPrompt { .. });
            let start = Action::StartAcp {
                run: run.to_string(),
                session: session.to_string(),
                command: command.clone(),
                cwd: cwd.clone(),
                prompt: (!policy).then_some(text),
                permission: permission.clone(),
            };
            if policy {
                vec![start, then]
            } else {
                vec![start]
            }
        }
        SessionSpec::Existing(_) => vec![then],
    }
}

impl Routines {
    /// Attaches a step's policy to `session` as the operator (the run's
    /// starter), then sends the step's prompt; a policy that cannot be
    /// attached fails the step, said.
    pub(super) async fn attach_step_policy(
        &self,
        session: String,
        policy: StepPolicy,
        key: String,
        text: String,
    ) {
        let engine = self.engine();
        // A test hook: the daemon dies between a policy step's stored start
        // and its policy's attach, once (the flag file goes first).
        crate::test_hooks::abort_before_step_policy(&session);
        let attached = match policy.for_session(&session) {
            Ok((input, digest)) => {
                let key = ClientKey { key, digest };
                engine.attach(input, Caller::operator(), Some(key)).await
            }
            Err(e) => Err(e.into()),
        };
        match attached {
            Ok(p) => {
                tracing::info!(session = %session, policy = %p.id, "a routine step's policy is attached");
                engine.agents().deliver_prompt(&session, &text).await;
            }
            Err(e) => {
                tracing::warn!(session = %session, error = %e, "a routine step's policy could not be attached");
                self.routine_session_input(
                    &session,
                    RunInput::PolicySettled { passed: false },
                    Context {
                        why: Some(format!("its policy could not be attached: {e}")),
                        ..Context::default()
                    },
                );
            }
        }
    }

    /// Inside the transaction that ended policy `p` (passed or not): the
    /// run whose current step that policy decides is fed its end, and
    /// what that decided runs once the transaction committed.
    pub(in crate::engine) fn routine_policy_settled(
        &self,
        tx: &mut Tx<'_>,
        p: &PolicyRow,
    ) -> EngineResult<()> {
        for member in &p.sessions {
            let Some(mut run) = tx.routine_on_session(member)?.and_then(Run::usable) else {
                continue;
            };
            let (RunState::Running { step, restarts, .. }
            | RunState::Escalated { step, restarts, .. }) = run.state
            else {
                continue;
            };
            if run.spec.steps.get(step).map(|s| s.wait_for.finish()) != Some(Finish::Policy) {
                continue;
            }
            let key = attach::scoped_key(Trust::Operator, &policy_key(&run.row.id, step, restarts));
            if tx.idempotent(&key)?.is_none_or(|(id, _)| id != p.id) {
                continue;
            }
            let passed = matches!(p.status, PolicyStatus::AwaitingAck | PolicyStatus::Done);
            let why = match &p.reason {
                Some(r) => format!("policy {} is {}: {r}", p.id, p.status.as_str()),
                None => format!("policy {} is {}", p.id, p.status.as_str()),
            };
            let cx = Context {
                why: Some(why),
                ..Context::default()
            };
            let actions = self.feed(tx, &mut run, RunInput::PolicySettled { passed }, cx)?;
            if !actions.is_empty() {
                let engine = self.engine();
                tx.after_commit(move || engine.runs().perform_routine(actions));
            }
        }
        Ok(())
    }

    /// After a restart: a step on an existing session whose policy was
    /// never attached (the daemon died between the step's start and the
    /// attach) gets it now, then its prompt.
    pub(super) fn policy_to_attach(&self, tx: &Tx<'_>, run: &Run) -> EngineResult<Option<Action>> {
        let RunState::Running { step, restarts, .. } = run.state else {
            return Ok(None);
        };
        let Some(spec) = run.spec.steps.get(step) else {
            return Ok(None);
        };
        if spec.wait_for.finish() != Finish::Policy
            || !matches!(spec.session, SessionSpec::Existing(_))
        {
            return Ok(None);
        }
        let key = policy_key(&run.row.id, step, restarts);
        if tx
            .idempotent(&attach::scoped_key(Trust::Operator, &key))?
            .is_some()
        {
            return Ok(None);
        }
        let Some(session) = run.row.step_session.clone() else {
            return Ok(None);
        };
        Ok(start_actions(&run.row.id, step, restarts, spec, &session)
            .into_iter()
            .next())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn step(session: impl serde::Serialize, policy: bool) -> StepSpec {
        let mut v = json!({"label": "s", "session": session, "prompt": "do it"});
        if policy {
            v["waitFor"] = json!("policy");
            v["policy"] = json!({"gate": {"command": "true"}});
        }
        serde_json::from_value(v).expect("step")
    }

    #[test]
    fn a_policy_is_attached_before_the_prompt_and_each_attempt_has_its_key() {
        let acp = json!({"acp": {"command": ["agent"], "cwd": "/w"}});
        let existing = json!({"existing": "s1"});
        let prompt = |s: &StepSpec| routine::step_prompt(s);

        // An ACP agent with a policy starts without its prompt; the attach
        // sends it.
        let s = step(acp.clone(), true);
        let a = start_actions("rt_1", 2, 1, &s, "rt_1.s2.r1");
        assert!(
            matches!(&a[..], [Action::StartAcp { prompt: None, session, .. }, Action::AttachThenPrompt { session: s2, key, text, policy }]
                if session == "rt_1.s2.r1" && s2 == session && key == "routine:rt_1:s2:r1"
                    && *text == prompt(&s) && policy.json()["gate"]["command"] == "true"),
            "{a:?}"
        );
        // Without one, the agent starts with its prompt.
        let s = step(acp, false);
        let a = start_actions("rt_1", 0, 0, &s, "rt_1.s0.r0");
        assert!(
            matches!(&a[..], [Action::StartAcp { prompt: Some(p), .. }] if *p == prompt(&s)),
            "{a:?}"
        );
        // An existing session: the attach then the prompt, or the prompt.
        let s = step(existing.clone(), true);
        let a = start_actions("rt_1", 0, 0, &s, "s1");
        assert!(
            matches!(&a[..], [Action::AttachThenPrompt { session, key, .. }] if session == "s1" && key == "routine:rt_1:s0:r0"),
            "{a:?}"
        );
        let s = step(existing, false);
        let a = start_actions("rt_1", 0, 0, &s, "s1");
        assert!(
            matches!(&a[..], [Action::Prompt { session, text }] if session == "s1" && *text == prompt(&s)),
            "{a:?}"
        );
        // Each attempt of a step has its own key, each step its own.
        assert_ne!(policy_key("rt_1", 0, 0), policy_key("rt_1", 0, 1));
        assert_ne!(policy_key("rt_1", 0, 0), policy_key("rt_1", 1, 0));
    }
}
