//! The JSON a policy row stores, typed: its attach input (`spec`), its
//! commit plan (`plan`) and its prepared commit (`prepared`).
//!
//! It owns reading and writing those columns. A value that does not decode
//! is an error naming the policy and the column ([`EngineError::Corrupt`]),
//! never a silent `None` that would make a commit policy commit nothing or
//! a chain lose its `next`. It must never decide anything about the
//! lifecycle.

use super::{AttachInput, EngineError, EngineResult};
use crate::commit::{Prepared, TreeSnapshot};
use crate::store::PolicyRow;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The version of the commit plan this build writes.
pub const PLAN_VERSION: u32 = 1;

fn plan_v0() -> u32 {
    0
}

/// What a green gate recorded for the commit (the API shows it as the
/// policy's `plan`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommitPlan {
    /// [`PLAN_VERSION`]; plans stored before versions were written are 0
    /// (the same fields).
    #[serde(default = "plan_v0")]
    pub version: u32,
    pub paths: Vec<String>,
    pub message: String,
    /// The judged content's fingerprint.
    pub fingerprint: String,
    pub require_human_ack: bool,
    /// What the paths change against HEAD, for the person who acks.
    #[serde(default)]
    pub diff_summary: Value,
    /// The snapshot the gates ran on (commit policies gated on one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<TreeSnapshot>,
    /// The commit paths changed in the workspace since the snapshot
    /// (a list, or `{error}`); recomputed while the ack is awaited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_after_snapshot: Option<Value>,
}

fn corrupt(p: &PolicyRow, column: &'static str, e: impl std::fmt::Display) -> EngineError {
    EngineError::Corrupt {
        policy: p.id.clone(),
        column,
        message: e.to_string(),
    }
}

/// The policy's attach input.
pub fn spec(p: &PolicyRow) -> EngineResult<AttachInput> {
    serde_json::from_value(p.spec.clone()).map_err(|e| corrupt(p, "spec", e))
}

/// The policy's commit plan, if a gate recorded one.
pub fn plan(p: &PolicyRow) -> EngineResult<Option<CommitPlan>> {
    match &p.plan {
        None | Some(Value::Null) => Ok(None),
        Some(v) => {
            let plan: CommitPlan =
                serde_json::from_value(v.clone()).map_err(|e| corrupt(p, "plan", e))?;
            if plan.version > PLAN_VERSION {
                return Err(corrupt(
                    p,
                    "plan",
                    format!(
                        "version {} was written by a newer gatehost (this one knows {PLAN_VERSION})",
                        plan.version
                    ),
                ));
            }
            Ok(Some(plan))
        }
    }
}

/// The policy's commit plan, which its state says it has.
pub fn plan_required(p: &PolicyRow) -> EngineResult<CommitPlan> {
    plan(p)?.ok_or_else(|| corrupt(p, "plan", "missing, though the policy is past its gate"))
}

/// Stores `plan` in the row.
pub fn set_plan(p: &mut PolicyRow, plan: &CommitPlan) {
    p.plan = serde_json::to_value(plan).ok();
}

/// The policy's prepared commit, if one was stored.
pub fn prepared(p: &PolicyRow) -> EngineResult<Option<Prepared>> {
    match &p.prepared {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v.clone())
            .map(Some)
            .map_err(|e| corrupt(p, "prepared", e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(plan: Option<Value>, prepared: Option<Value>) -> PolicyRow {
        let mut p = PolicyRow::sample("pol_x", crate::store::PolicyStatus::AwaitingAck, &["s1"]);
        p.spec = json!({"sessionId": "s1"});
        (p.plan, p.prepared) = (plan, prepared);
        p
    }

    #[test]
    fn a_plan_round_trips_with_its_version_and_old_plans_still_read() {
        let plan = CommitPlan {
            version: PLAN_VERSION,
            paths: vec!["a.txt".into()],
            message: "m".into(),
            fingerprint: "f".into(),
            require_human_ack: true,
            diff_summary: json!({"added": 1}),
            snapshot: None,
            changed_after_snapshot: None,
        };
        let mut p = row(None, None);
        set_plan(&mut p, &plan);
        assert_eq!(p.plan.as_ref().expect("stored")["version"], 1);
        assert_eq!(super::plan(&p).expect("reads"), Some(plan));
        // As session 6 stored it: no version.
        let p = row(
            Some(
                json!({"paths": ["a"], "message": "m", "fingerprint": "f", "requireHumanAck": false, "diffSummary": null}),
            ),
            None,
        );
        assert_eq!(super::plan(&p).expect("reads").expect("plan").version, 0);
    }

    #[test]
    fn corrupt_columns_are_errors_naming_the_policy() {
        for (p, column) in [
            (row(Some(json!({"paths": "a"})), None), "plan"),
            (
                row(
                    Some(
                        json!({"paths": [], "message": "m", "fingerprint": "f", "requireHumanAck": true, "version": 9}),
                    ),
                    None,
                ),
                "plan",
            ),
            (row(None, Some(json!({"commit": 3}))), "prepared"),
        ] {
            let e = super::plan(&p)
                .and_then(|_| prepared(&p))
                .expect_err("corrupt");
            let text = e.to_string();
            assert!(text.contains("pol_x") && text.contains(column), "{text}");
        }
        let mut p = row(None, None);
        p.spec = json!({"then": "deploy"});
        assert!(spec(&p).expect_err("corrupt").to_string().contains("spec"));
        assert!(plan_required(&p).is_err());
    }
}
