//! What a passing gate leads to: done, a commit awaiting its ack or made
//! at once (with its plan), or gated again. A pure function of what the
//! gates judged ([`judge_outcome`]); the lifecycle stores what it returns.
//!
//! It owns that decision. It must never read or write a store, a
//! workspace or a clock: the fingerprints and the snapshot are taken
//! before, by the gate's task.

use super::attach::{AttachInput, Then};
use super::machine::{AfterPass, Verdict};
use crate::commit::TreeSnapshot;
use crate::model::plan::{ChangedAfter, CommitPlan, DiffSummary, PLAN_VERSION};
use crate::verdict::RunReport;

/// What the gates judged, for what follows a pass.
#[derive(Debug, Clone)]
pub(super) enum Judged {
    /// The live workspace, the commit paths fingerprinted before and after
    /// the run (`None` when the policy commits nothing).
    Workspace {
        before: Option<Result<String, String>>,
        after: Option<Result<String, String>>,
    },
    /// A snapshot of the commit paths, checked out in a worktree: the
    /// commit will be exactly it. `changed_after`: the commit paths that
    /// changed in the workspace since it was taken.
    Snapshot {
        snap: Option<TreeSnapshot>,
        changed_after: Result<Vec<String>, String>,
    },
}

/// What a pass leads to.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct JudgeOutcome {
    /// The lifecycle's input.
    pub verdict: Verdict,
    /// The policy's new reason (`None`: it keeps its own).
    pub reason: Option<String>,
    /// A commit policy's plan, to be stored (its prepared commit cleared).
    pub plan: Option<CommitPlan>,
}

/// What a pass of `input`'s gates (`report`) leads to, given what they
/// `judged` and the change's summary (`changes`). What passed must be what
/// gets committed: the snapshot, or (gating on the workspace) paths that
/// did not change while the gate ran.
pub(super) fn judge_outcome(
    input: &AttachInput,
    report: &RunReport,
    judged: &Judged,
    changes: &Option<DiffSummary>,
) -> JudgeOutcome {
    let outcome = |verdict, reason: Option<String>| JudgeOutcome {
        verdict,
        reason,
        plan: None,
    };
    let (before, after, snapshot) = match judged {
        Judged::Workspace { before, after } => (before.clone(), after.clone(), None),
        Judged::Snapshot {
            snap,
            changed_after,
        } => {
            let fp = snap.as_ref().map(|s| Ok(s.fingerprint.clone()));
            (fp.clone(), fp, snap.as_ref().map(|s| (s, changed_after)))
        }
    };
    let fp = match (&before, &after) {
        (Some(Ok(a)), Some(Ok(b))) if a == b => Some(a.clone()),
        (Some(Ok(_)), Some(Ok(_))) => return outcome(Verdict::PassChanged, None),
        (Some(Err(e)), _) | (_, Some(Err(e))) => {
            let reason = format!("cannot read the commit paths: {e}");
            return outcome(Verdict::PassUnreadable, Some(reason));
        }
        _ => None,
    };
    let reason = Some(report.reason.clone());
    let (Some(c), Some(fp), Then::Commit) = (&input.commit, fp, input.then) else {
        return outcome(Verdict::Pass(AfterPass::Done), reason);
    };
    let plan = CommitPlan {
        version: PLAN_VERSION,
        paths: c.paths.clone(),
        message: c.message.clone(),
        fingerprint: fp,
        require_human_ack: c.require_human_ack,
        diff_summary: changes.clone(),
        snapshot: snapshot.as_ref().map(|(snap, _)| (*snap).clone()),
        changed_after_snapshot: snapshot
            .as_ref()
            .map(|(_, changed_after)| ChangedAfter::of((*changed_after).clone())),
    };
    JudgeOutcome {
        verdict: Verdict::Pass(if c.require_human_ack {
            AfterPass::AwaitAck
        } else {
            AfterPass::CommitNow
        }),
        reason,
        plan: Some(plan),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::Outcome;

    fn input(then: &str, ack: bool) -> AttachInput {
        serde_json::from_value(serde_json::json!({
            "sessionId": "s1", "gate": {"command": "true"}, "then": then,
            "commit": {"paths": ["src"], "message": "m", "requireHumanAck": ack},
        }))
        .expect("an attach input")
    }

    fn report() -> RunReport {
        let mut r = RunReport::error("all gates passed".into());
        r.outcome = Outcome::Pass;
        r
    }

    fn workspace(before: Result<&str, &str>, after: Result<&str, &str>) -> Judged {
        let own = |r: Result<&str, &str>| Some(r.map(str::to_string).map_err(str::to_string));
        Judged::Workspace {
            before: own(before),
            after: own(after),
        }
    }

    fn snapshot(changed_after: Result<Vec<String>, String>) -> Judged {
        Judged::Snapshot {
            snap: Some(TreeSnapshot {
                tree: "t".into(),
                parent: None,
                reference: "refs/heads/main".into(),
                paths: vec!["src".into()],
                fingerprint: "fp".into(),
            }),
            changed_after,
        }
    }

    #[test]
    fn content_that_changed_while_the_gate_ran_gates_again_keeping_its_reason() {
        let o = judge_outcome(
            &input("commit", true),
            &report(),
            &workspace(Ok("a"), Ok("b")),
            &None,
        );
        assert_eq!(
            o,
            JudgeOutcome {
                verdict: Verdict::PassChanged,
                reason: None,
                plan: None
            }
        );
    }

    #[test]
    fn paths_that_cannot_be_read_block_with_why() {
        let o = judge_outcome(
            &input("commit", true),
            &report(),
            &workspace(Ok("a"), Err("denied")),
            &None,
        );
        assert_eq!(o.verdict, Verdict::PassUnreadable);
        assert_eq!(
            o.reason.as_deref(),
            Some("cannot read the commit paths: denied")
        );
        assert_eq!(o.plan, None);
    }

    #[test]
    fn an_emit_policy_is_done_with_the_reports_reason() {
        let o = judge_outcome(
            &input("emit", true),
            &report(),
            &workspace(Ok("a"), Ok("a")),
            &None,
        );
        assert_eq!(o.verdict, Verdict::Pass(AfterPass::Done));
        assert_eq!(o.reason.as_deref(), Some("all gates passed"));
        assert_eq!(o.plan, None);
    }

    #[test]
    fn a_commit_policy_plans_what_was_judged_and_awaits_its_ack_or_commits_now() {
        let changes = Some(DiffSummary::Counts {
            files: vec![],
            added: 1,
            removed: 0,
        });
        let o = judge_outcome(
            &input("commit", true),
            &report(),
            &workspace(Ok("a"), Ok("a")),
            &changes,
        );
        assert_eq!(o.verdict, Verdict::Pass(AfterPass::AwaitAck));
        let plan = o.plan.expect("a plan");
        assert_eq!(
            (plan.fingerprint.as_str(), plan.paths.clone()),
            ("a", vec!["src".to_string()])
        );
        assert_eq!(plan.diff_summary, changes);
        assert_eq!((plan.snapshot, plan.changed_after_snapshot), (None, None));

        let o = judge_outcome(
            &input("commit", false),
            &report(),
            &snapshot(Ok(vec!["src/x".into()])),
            &None,
        );
        assert_eq!(o.verdict, Verdict::Pass(AfterPass::CommitNow));
        let plan = o.plan.expect("a plan");
        assert_eq!(plan.fingerprint, "fp");
        assert_eq!(plan.snapshot.map(|s| s.tree), Some("t".to_string()));
        assert_eq!(
            plan.changed_after_snapshot,
            Some(ChangedAfter::Paths(vec!["src/x".into()]))
        );
        assert_eq!(plan.diff_summary, None);

        let o = judge_outcome(
            &input("commit", true),
            &report(),
            &snapshot(Err("gone".into())),
            &None,
        );
        assert_eq!(
            o.plan.and_then(|p| p.changed_after_snapshot),
            Some(ChangedAfter::Failed {
                error: "gone".into()
            })
        );
    }

    #[test]
    fn a_snapshot_that_could_not_be_taken_commits_nothing() {
        let judged = Judged::Snapshot {
            snap: None,
            changed_after: Ok(vec![]),
        };
        let o = judge_outcome(&input("commit", true), &report(), &judged, &None);
        assert_eq!(o.verdict, Verdict::Pass(AfterPass::Done));
        assert_eq!(o.plan, None);
    }
}
