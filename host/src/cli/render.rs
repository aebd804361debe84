//! How the client commands show the daemon's answers to a person: one
//! line per session, policy or event. It owns only text; it must never
//! call the daemon or choose an exit code.

use crate::model::chain::describe;
use crate::wire::{ChangedAfter, DiffSummary, Event, PlanView, Policy, PolicyStatus, Session};

/// `id  status (waiting for …): reason`; awaiting an ack, what awaits it
/// (files, lines, snapshot); and the
/// commit paths that changed after the gate's snapshot on a line of their
/// own.
pub(super) fn policy_line(p: &Policy) -> String {
    let row = p;
    // A review chain names its cycle: `reviewing (cycle 2 of 5)`.
    let mut line = format!(
        "{}  {}",
        row.id,
        describe(row.status.as_str(), row.review.as_ref())
    );
    if row.status == PolicyStatus::Watching && !row.pending.is_empty() {
        line.push_str(&format!(" (waiting for {})", row.pending.join(", ")));
    }
    let plan = p.plan_view();
    if row.status == PolicyStatus::AwaitingAck {
        line.push_str(": the gates passed");
        if let Some(r) = &row.reason {
            line.push_str(&format!(" ({r})"));
        }
        line.push_str("; awaiting the operator's ack");
        if let Some(plan) = &plan {
            line.push_str(&format!(": {}", awaiting(plan)));
        }
    } else if let Some(r) = &row.reason {
        line.push_str(&format!(": {r}"));
    }
    match plan.and_then(|p| p.changed_after_snapshot) {
        Some(ChangedAfter::Paths(changed)) if !changed.is_empty() => {
            line.push_str(&format!(
                "\n  changed since the gate's snapshot (not in the commit): {}",
                changed.join(", ")
            ));
        }
        Some(ChangedAfter::Failed { error }) => {
            line.push_str(&format!(
                "\n  cannot tell what changed since the gate's snapshot: {error}"
            ));
        }
        _ => {}
    }
    line
}

/// [`policy_line`] and, for one policy shown alone (`policy status`,
/// `ack`, `cancel`, `wait`), what the operator can do next: the ack
/// command for one awaiting it, where to look and how to start again for
/// a blocked one.
pub(super) fn policy_detail(p: &Policy) -> String {
    let row = p;
    let mut line = policy_line(p);
    match row.status {
        PolicyStatus::AwaitingAck => line.push_str(&format!(
            "\n  approve: GATEHOST_TOKEN=<operator.token> gatehost policy ack {} --approve (or --reject)",
            row.id
        )),
        PolicyStatus::Blocked => line.push_str(&format!(
            "\n  settled: it will not gate again; what happened, step by step: gatehost events poll --policy {}\n  \
             once the cause is fixed, attach it anew: gatehost policy attach FILE.json",
            row.id
        )),
        _ => {}
    }
    line
}

/// Files named in an awaiting-ack line, at most.
const FILES_SHOWN: usize = 5;

/// What a commit awaiting its ack holds: `3 files (+40 −2): a, b, c at
/// snapshot <tree>`.
fn awaiting(plan: &PlanView) -> String {
    let (names, counts): (Vec<String>, String) = match &plan.diff_summary {
        Some(DiffSummary::Counts {
            files,
            added,
            removed,
        }) => (
            files.iter().map(|f| f.path.clone()).collect(),
            format!(" (+{added} −{removed})"),
        ),
        Some(DiffSummary::Failed { error }) => (
            plan.paths.clone(),
            format!(" (cannot count lines: {error})"),
        ),
        None => (plan.paths.clone(), String::new()),
    };
    let noun = if names.len() == 1 { "file" } else { "files" };
    let mut shown = names
        .iter()
        .take(FILES_SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > FILES_SHOWN {
        shown.push_str(&format!(" … and {} more", names.len() - FILES_SHOWN));
    }
    let mut out = format!("{} {noun}{counts}", names.len());
    if !shown.is_empty() {
        out.push_str(&format!(": {shown}"));
    }
    if let Some(s) = &plan.snapshot {
        let tree: String = s.tree.chars().take(12).collect();
        out.push_str(&format!(" at snapshot {tree}"));
        if let Some(parent) = &s.parent {
            let parent: String = parent.chars().take(12).collect();
            out.push_str(&format!(" (on {} at {parent})", s.reference));
        }
    }
    out
}

/// `id  state  cwd`.
pub(super) fn session_line(s: &Session) -> String {
    format!("{}  {}  {}", s.id, s.state.as_str(), s.cwd)
}

/// `#cursor type policy-or-session key="value" …`, values cut to 160
/// characters on one line.
pub(super) fn event_line(e: &Event) -> String {
    let mut line = format!("#{} {}", e.cursor, e.kind());
    if let Some(pid) = &e.policy_id {
        line.push_str(&format!(" {pid}"));
    } else if let Some(sid) = &e.session_id {
        line.push_str(&format!(" {sid}"));
    }
    for (key, v) in e.event.said(&["outcome", "reason", "sha", "message", "by"]) {
        let v: String = v.chars().take(160).collect::<String>().replace('\n', " ");
        line.push_str(&format!(" {key}={v:?}"));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_awaiting_ack_policy_says_what_awaits_and_how_to_ack() {
        let mut row = crate::store::PolicyRow::sample(
            "pol_1",
            crate::store::PolicyStatus::AwaitingAck,
            &["s1"],
        );
        row.reason = Some("exited with code 0".into());
        let files: Vec<serde_json::Value> = ["src/a.rs", "src/b.rs", "README.md"]
            .iter()
            .map(|p| json!({"path": p, "kind": "modified", "added": 10, "removed": 1, "binary": false}))
            .collect();
        row.plan = serde_json::from_value(json!({
            "version": 1, "paths": ["src", "README.md"], "message": "m", "fingerprint": "f",
            "requireHumanAck": true,
            "diffSummary": {"files": files, "added": 40, "removed": 2},
            "snapshot": {"tree": "1a2b3c4d5e6f7a8b", "parent": "9f8e7d6c5b4a3f2e",
                         "reference": "refs/heads/main", "paths": ["src"], "fingerprint": "f"},
            "changedAfterSnapshot": ["README.md"],
        }))
        .expect("a plan");
        let line = policy_detail(&crate::api::ToWire::to_wire(row));
        assert_eq!(
            line,
            "pol_1  awaiting-ack: the gates passed (exited with code 0); awaiting the operator's ack: \
             3 files (+40 −2): src/a.rs, src/b.rs, README.md at snapshot 1a2b3c4d5e6f \
             (on refs/heads/main at 9f8e7d6c5b4a)\n  \
             changed since the gate's snapshot (not in the commit): README.md\n  \
             approve: GATEHOST_TOKEN=<operator.token> gatehost policy ack pol_1 --approve (or --reject)"
        );
        // Many files are cut; a plan without a summary names its paths.
        let mut row = crate::store::PolicyRow::sample(
            "pol_2",
            crate::store::PolicyStatus::AwaitingAck,
            &["s1"],
        );
        let paths: Vec<String> = (0..8).map(|i| format!("f{i}")).collect();
        row.plan =
            serde_json::from_value(json!({"paths": paths, "message": "m", "fingerprint": "f",
                               "requireHumanAck": true, "diffSummary": null}))
            .expect("a plan");
        let line = policy_detail(&crate::api::ToWire::to_wire(row));
        assert!(
            line.contains(
                "awaiting the operator's ack: 8 files: f0, f1, f2, f3, f4 … and 3 more\n"
            ),
            "{line}"
        );
        assert!(
            line.contains("gatehost policy ack pol_2 --approve"),
            "{line}"
        );
    }

    #[test]
    fn a_blocked_policy_says_why_and_what_the_operator_can_do() {
        let mut row =
            crate::store::PolicyRow::sample("pol_3", crate::store::PolicyStatus::Blocked, &["s1"]);
        row.reason = Some("out of retries: exited with code 1".into());
        let line = policy_detail(&crate::api::ToWire::to_wire(row));
        assert!(
            line.starts_with("pol_3  blocked: out of retries: exited with code 1\n  settled: it will not gate again"),
            "{line}"
        );
        assert!(
            line.contains("gatehost events poll --policy pol_3"),
            "{line}"
        );
        assert!(
            line.contains("attach it anew: gatehost policy attach FILE.json"),
            "{line}"
        );
    }

    #[test]
    fn an_event_line_names_its_policy_and_cuts_long_values() {
        let e = Event {
            host: None,
            cursor: 7,
            at: 0,
            session_id: Some("s1".into()),
            policy_id: Some("p1".into()),
            event: crate::model::event::Event::decode(
                "policy:blocked",
                json!({"policyId": "p1", "status": "blocked", "sessionIds": ["s1"],
                       "outcome": "fail", "reason": format!("a\nb{}", "x".repeat(300))}),
            ),
            damage: None,
        };
        let line = event_line(&e);
        assert!(
            line.starts_with("#7 policy:blocked p1 outcome=\"fail\" reason=\"a b"),
            "{line}"
        );
        assert!(!line.contains('\n'));
        assert!(line.len() < 220, "{line}");
    }
}
