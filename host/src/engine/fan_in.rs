//! Fan-in across workspaces: a policy whose members work in different
//! workspaces (one worktree or checkout per agent) runs its gates in each
//! workspace, and passes only when every one passes. It owns the grouping
//! of members by workspace and the merging of their reports; it must
//! never gate one member's workspace for another, and never let a commit
//! policy span workspaces (attach refuses that: one commit is of one
//! repository).

use super::AttachInput;
use super::Policies;
use crate::store::{PolicyRow, SessionRow};
use crate::verdict::{Outcome, RunReport};

/// The members' workspaces, each once, in member order, with the members
/// that work there.
pub(super) fn by_workspace(sessions: &[SessionRow]) -> Vec<(String, Vec<SessionRow>)> {
    let mut out: Vec<(String, Vec<SessionRow>)> = Vec::new();
    for s in sessions {
        match out.iter_mut().find(|(w, _)| *w == s.workspace) {
            Some((_, members)) => members.push(s.clone()),
            None => out.push((s.workspace.clone(), vec![s.clone()])),
        }
    }
    out
}

/// One report of the runs in several workspaces: every gate verdict (and
/// skipped gate) labelled with its workspace; the first that did not pass
/// decides, as in one workspace.
pub(super) fn merge(runs: Vec<(String, RunReport)>) -> RunReport {
    let (mut gates, mut skipped) = (Vec::new(), Vec::new());
    for (workspace, report) in runs {
        let no_verdict = report.gates.is_empty() && report.outcome != Outcome::Pass;
        gates.extend(report.gates.into_iter().map(|mut v| {
            v.gate = format!("[{workspace}] {}", v.gate);
            v
        }));
        if no_verdict {
            // A run that gave no verdict (the workspace could not be
            // opened, the change not computed): its reason stands as an
            // error verdict of that workspace.
            gates.push(crate::verdict::Verdict::error(
                format!("[{workspace}] workspace"),
                report.reason,
            ));
        }
        skipped.extend(
            report
                .skipped
                .into_iter()
                .map(|g| format!("[{workspace}] {g}")),
        );
    }
    if gates.is_empty() && skipped.is_empty() {
        // No gate at all: the turn-end passes, as in one workspace.
        return RunReport {
            outcome: Outcome::Pass,
            reason: "no gate: the turn-end passes".into(),
            durations: Default::default(),
            gates,
            skipped,
        };
    }
    RunReport::from_verdicts(gates, skipped)
}

impl Policies {
    /// Runs the policy's gates in its members' workspace, or, when they
    /// work in several, in each of them (all must pass).
    pub(super) async fn run_in_each_workspace(
        &self,
        runner: &crate::gate::GateRunner,
        policy: &PolicyRow,
        input: &AttachInput,
        sessions: &[SessionRow],
    ) -> RunReport {
        let groups = by_workspace(sessions);
        if groups.len() <= 1 {
            let workspace = groups.first().map(|(w, _)| w.clone()).unwrap_or_default();
            return self
                .run_policy_gates(runner, policy, input, sessions, &workspace, None)
                .await;
        }
        let mut runs = Vec::with_capacity(groups.len());
        for (workspace, members) in groups {
            let report = self
                .run_policy_gates(runner, policy, input, &members, &workspace, None)
                .await;
            runs.push((workspace, report));
        }
        merge(runs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::Verdict;

    fn session(id: &str, ws: &str) -> SessionRow {
        let mut s: SessionRow = serde_json::from_value(serde_json::json!({
            "id": id, "cwd": ws, "workspace": ws, "state": "idle", "turns": 1,
            "createdAt": 0, "updatedAt": 0, "owner": "agent"
        }))
        .expect("a session row");
        s.workspace = ws.to_string();
        s
    }

    #[test]
    fn members_are_grouped_by_workspace_in_member_order() {
        let g = by_workspace(&[
            session("a", "/w1"),
            session("b", "/w2"),
            session("c", "/w1"),
        ]);
        let shape: Vec<(&str, Vec<&str>)> = g
            .iter()
            .map(|(w, m)| (w.as_str(), m.iter().map(|s| s.id.as_str()).collect()))
            .collect();
        assert_eq!(shape, vec![("/w1", vec!["a", "c"]), ("/w2", vec!["b"])]);
    }

    #[test]
    fn a_fan_in_passes_only_when_every_workspace_passes_and_says_which_did_not() {
        let pass = |ws: &str| {
            (
                ws.to_string(),
                RunReport::from_verdicts(
                    vec![Verdict::new(
                        Outcome::Pass,
                        "shell: true",
                        "exited with code 0",
                    )],
                    vec![],
                ),
            )
        };
        let fail = |ws: &str| {
            (
                ws.to_string(),
                RunReport::from_verdicts(
                    vec![Verdict::new(
                        Outcome::Fail,
                        "shell: false",
                        "exited with code 1",
                    )],
                    vec![],
                ),
            )
        };
        let both = merge(vec![pass("/w1"), pass("/w2")]);
        assert_eq!(both.outcome, Outcome::Pass);
        assert_eq!(both.gates.len(), 2);
        let one = merge(vec![pass("/w1"), fail("/w2")]);
        assert_eq!(one.outcome, Outcome::Fail);
        assert!(one.reason.contains("[/w2] shell: false"), "{}", one.reason);
        let unopened = RunReport {
            outcome: Outcome::Error,
            reason: "workspace /w3: gone".into(),
            durations: Default::default(),
            gates: vec![],
            skipped: vec![],
        };
        let err = merge(vec![pass("/w1"), ("/w3".into(), unopened)]);
        assert_eq!(err.outcome, Outcome::Error);
        assert!(err.reason.contains("/w3"), "{}", err.reason);
    }
}
