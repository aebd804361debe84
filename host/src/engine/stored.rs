//! The JSON a policy row stores, typed: its attach input (`spec`), its
//! commit plan (`plan`) and its prepared commit (`prepared`).
//!
//! It owns reading and writing those columns and their types, checked
//! strictly on every read ([`check_row`], which the store calls): invalid
//! JSON and JSON of the wrong shape (`[]` for a spec, which serde would
//! read as "no gate") are both decode errors, and the accessors give an
//! error naming the policy and the column ([`EngineError::Corrupt`]) for a
//! row the store found damaged: never a silent `None` that would make a
//! commit policy commit nothing or a chain lose its `next`. It must never
//! decide anything about the lifecycle.

use super::{AttachInput, EngineError, EngineResult};
use crate::commit::{Prepared, TreeSnapshot};
use crate::store::{PolicyRow, PolicyStatus};
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
        column: column.to_string(),
        message: e.to_string(),
    }
}

/// The error of a row the store found damaged.
pub fn damaged(p: &PolicyRow) -> EngineResult<()> {
    match &p.damage {
        None => Ok(()),
        Some(d) => Err(EngineError::Corrupt {
            policy: p.id.clone(),
            column: d.column.clone(),
            message: d.message.clone(),
        }),
    }
}

/// Decodes `v` as a `T`, which is a JSON object: serde would read a list
/// as a struct of its defaults.
fn object<T: serde::de::DeserializeOwned>(v: &Value) -> Result<T, String> {
    if !v.is_object() {
        return Err("the wrong shape: not a JSON object".into());
    }
    T::deserialize(v).map_err(|e| format!("the wrong shape: {e}"))
}

fn spec_of(v: &Value) -> Result<AttachInput, String> {
    if let Some(at) = super::attach::not_an_object(v) {
        return Err(format!("the wrong shape: {at} is not a JSON object"));
    }
    let input: AttachInput = object(v)?;
    super::attach::check_stored(&input).map_err(|e| format!("the wrong shape: {e}"))?;
    Ok(input)
}

fn plan_of(v: &Value) -> Result<Option<CommitPlan>, String> {
    if v.is_null() {
        return Ok(None);
    }
    let plan: CommitPlan = object(v)?;
    if plan.version > PLAN_VERSION {
        return Err(format!(
            "version {} was written by a newer gatehost (this one knows {PLAN_VERSION})",
            plan.version
        ));
    }
    Ok(Some(plan))
}

fn prepared_of(v: &Value) -> Result<Option<Prepared>, String> {
    if v.is_null() {
        return Ok(None);
    }
    object(v).map(Some)
}

/// Checks the JSON columns of a row the store read: each decodes into its
/// type, strictly (invalid JSON the store reported already), and what the
/// status says it holds is there. `Err((column, why))` otherwise. The
/// store calls it on every policy it reads.
pub fn check_row(p: &PolicyRow) -> Result<(), (&'static str, String)> {
    spec_of(&p.spec).map_err(|e| ("spec", e))?;
    if let Some(v) = p.verdict.as_ref().filter(|v| !v.is_null()) {
        object::<crate::verdict::RunReport>(v).map_err(|e| ("verdict", e))?;
    }
    let plan = match &p.plan {
        None => None,
        Some(v) => plan_of(v).map_err(|e| ("plan", e))?,
    };
    if plan.is_none()
        && matches!(
            p.status,
            PolicyStatus::AwaitingAck | PolicyStatus::Committing
        )
    {
        return Err((
            "plan",
            format!("missing, though the policy is {}", p.status.as_str()),
        ));
    }
    if let Some(v) = &p.prepared {
        prepared_of(v).map_err(|e| ("prepared", e))?;
    }
    let chain = match &p.review {
        None => None,
        Some(v) => chain_of(v).map_err(|e| ("review", e))?,
    };
    if chain.is_none() && p.status == PolicyStatus::Reviewing {
        return Err(("review", "missing, though the policy is reviewing".into()));
    }
    Ok(())
}

fn chain_of(v: &Value) -> Result<Option<super::chain::ChainRecord>, String> {
    if v.is_null() {
        return Ok(None);
    }
    object(v).map(Some)
}

/// The review chain's state (`None` before its first review).
pub fn chain(p: &PolicyRow) -> EngineResult<Option<super::chain::ChainRecord>> {
    damaged(p)?;
    match &p.review {
        None => Ok(None),
        Some(v) => chain_of(v).map_err(|e| corrupt(p, "review", e)),
    }
}

/// Records the review chain's state in `p` (stored with it).
pub fn set_chain(p: &mut PolicyRow, r: &super::chain::ChainRecord) {
    p.review = serde_json::to_value(r).ok();
}

/// The policy's attach input.
pub fn spec(p: &PolicyRow) -> EngineResult<AttachInput> {
    damaged(p)?;
    spec_of(&p.spec).map_err(|e| corrupt(p, "spec", e))
}

/// The policy's commit plan, if a gate recorded one.
pub fn plan(p: &PolicyRow) -> EngineResult<Option<CommitPlan>> {
    damaged(p)?;
    match &p.plan {
        None => Ok(None),
        Some(v) => plan_of(v).map_err(|e| corrupt(p, "plan", e)),
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
    damaged(p)?;
    match &p.prepared {
        None => Ok(None),
        Some(v) => prepared_of(v).map_err(|e| corrupt(p, "prepared", e)),
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

    /// A policy row with `column` set to `value`, read through the store
    /// with this module's check: damage naming `column`.
    fn check(column: &str, value: &str) {
        crate::store::damaged_policy_column_with(check_row, column, value);
    }

    #[test]
    fn a_list_for_a_spec_is_damage_not_a_policy_of_defaults() {
        check("spec", "[]");
    }

    #[test]
    fn a_spec_whose_next_or_commit_is_a_list_is_damage() {
        check(
            "spec",
            r#"{"sessionId": "s1", "sessionIds": ["s1"], "next": []}"#,
        );
        check(
            "spec",
            r#"{"sessionId": "s1", "sessionIds": ["s1"], "onFail": []}"#,
        );
    }

    #[test]
    fn a_stored_spec_that_attach_would_refuse_is_damage() {
        for spec in [
            r#"{"sessionId": "s1", "sessionIds": ["s1"], "gate": []}"#,
            r#"{}"#,
            r#"{"sessionIds": []}"#,
            r#"{"sessionId": "s1", "then": "commit"}"#,
            r#"{"sessionId": "s1", "then": "commit", "gate": {"command": "true"}, "commit": {"paths": ["../x"], "message": "m"}}"#,
            r#"{"sessionId": "s1", "then": "commit", "commit": {"paths": ["a"], "message": "m"}}"#,
            r#"{"sessionId": "s1", "onFail": {"maxRetries": 99}}"#,
            r#"{"sessionId": "s1", "next": {"gate": []}}"#,
            r#"{"sessionId": "s1", "unknown": 1}"#,
        ] {
            check("spec", spec);
        }
    }

    #[test]
    fn a_verdict_of_the_wrong_shape_or_invalid_json_is_damage() {
        check("verdict", "[]");
        check("verdict", r#"{"outcome": "pass"}"#);
        check("verdict", r#"{"outcome": "#);
    }

    #[test]
    fn a_plan_of_the_wrong_shape_missing_or_invalid_json_is_damage() {
        check("plan", "[]");
        check("plan", "null");
        check("plan", r#"{"paths": 3}"#);
        check("plan", "{nope");
    }

    #[test]
    fn a_prepared_commit_of_the_wrong_shape_or_invalid_json_is_damage() {
        check("prepared", "[]");
        check("prepared", r#"{"commit": 3}"#);
        check("prepared", "{nope");
    }
}
