//! The inbox's filters on `GET /v1/policies`: `q` (text in a policy's id,
//! label, commit message or reason, any case), `agent` (a member
//! session's agent: the part of its id before `:`), `repo` (text in a
//! member session's workspace) and `host` (the host that owns it, on a
//! fleet). A filtered page is read from the store in batches from the
//! cursor until it is full or the policies end, so a page is as complete
//! as an unfiltered one and its `nextCursor` continues it.
//!
//! It owns the matching, on the typed rows (never on their JSON); it must
//! never change state, nor widen what a caller reads (the listing's read
//! check runs after it).

use crate::store::{PolicyRow, PolicyStatus, Records, StoreResult};
use std::collections::HashMap;

/// Policies read from the store at once while a filtered page fills.
const BATCH: usize = 500;

/// What a listing keeps; all `None`: everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyFilter {
    /// Lowercased text to find.
    pub q: Option<String>,
    pub agent: Option<String>,
    pub repo: Option<String>,
    pub host: Option<String>,
}

impl PolicyFilter {
    pub fn is_empty(&self) -> bool {
        self.q.is_none() && self.agent.is_none() && self.repo.is_none() && self.host.is_none()
    }

    /// Whether `p` is kept; `workspace` answers a session's workspace.
    pub fn matches(
        &self,
        p: &PolicyRow,
        workspace: &mut dyn FnMut(&str) -> Option<String>,
    ) -> bool {
        if let Some(h) = &self.host
            && p.host.as_deref() != Some(h.as_str())
        {
            return false;
        }
        if let Some(a) = &self.agent
            && !p
                .sessions
                .iter()
                .any(|s| s.split_once(':').map_or(s.as_str(), |(agent, _)| agent) == a)
        {
            return false;
        }
        if let Some(r) = &self.repo
            && !p
                .sessions
                .iter()
                .any(|s| workspace(s).is_some_and(|w| w.contains(r.as_str())))
        {
            return false;
        }
        if let Some(q) = &self.q {
            let texts = [
                Some(p.id.as_str()),
                p.spec.label.as_deref(),
                p.plan.as_ref().map(|pl| pl.message.as_str()),
                p.reason.as_deref(),
            ];
            if !texts
                .into_iter()
                .flatten()
                .any(|t| t.to_lowercase().contains(q.as_str()))
            {
                return false;
            }
        }
        true
    }
}

/// A page of at most `limit` policies of `statuses` kept by `filter`,
/// after `cursor` in the order asked for, and the cursor of the next page
/// (none at the end).
pub(super) fn page(
    store: &dyn Records,
    statuses: &[PolicyStatus],
    filter: &PolicyFilter,
    mut cursor: i64,
    limit: usize,
    newest_first: bool,
) -> StoreResult<(Vec<PolicyRow>, Option<i64>)> {
    let mut workspaces: HashMap<String, Option<String>> = HashMap::new();
    let mut workspace = |id: &str| -> Option<String> {
        workspaces
            .entry(id.to_string())
            .or_insert_with(|| store.session(id).ok().flatten().map(|s| s.workspace))
            .clone()
    };
    let mut out = Vec::new();
    loop {
        let batch = store.policies_page(statuses, cursor, BATCH, newest_first)?;
        let full = batch.len() == BATCH;
        for p in batch {
            cursor = p.seq;
            if filter.matches(&p, &mut workspace) {
                out.push(p);
                if out.len() == limit {
                    return Ok((out, Some(cursor)));
                }
            }
        }
        if !full {
            return Ok((out, None));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(id: &str, sessions: &[&str], label: Option<&str>) -> PolicyRow {
        let mut p = PolicyRow::sample(id, PolicyStatus::AwaitingAck, sessions);
        p.spec.label = label.map(str::to_string);
        p
    }

    #[test]
    fn each_filter_keeps_what_it_names_and_all_of_them_must_hold() {
        let a = policy("pol_a", &["claude:1"], Some("Fix the Parser"));
        let mut b = policy("pol_b", &["codex:2", "s3"], None);
        b.reason = Some("out of retries".into());
        b.host = Some("alpha".into());
        let mut ws = |s: &str| match s {
            "claude:1" => Some("/w/app".to_string()),
            "codex:2" => Some("/w/lib".to_string()),
            _ => None,
        };
        let keeps = |f: PolicyFilter, ws: &mut dyn FnMut(&str) -> Option<String>| {
            [&a, &b]
                .into_iter()
                .filter(|p| f.matches(p, ws))
                .map(|p| p.id.clone())
                .collect::<Vec<_>>()
        };
        let f = |q: Option<&str>, agent: Option<&str>, repo: Option<&str>, host: Option<&str>| {
            PolicyFilter {
                q: q.map(str::to_string),
                agent: agent.map(str::to_string),
                repo: repo.map(str::to_string),
                host: host.map(str::to_string),
            }
        };
        assert_eq!(
            keeps(f(None, None, None, None), &mut ws),
            ["pol_a", "pol_b"]
        );
        assert_eq!(
            keeps(f(Some("parser"), None, None, None), &mut ws),
            ["pol_a"]
        );
        assert_eq!(
            keeps(f(Some("retries"), None, None, None), &mut ws),
            ["pol_b"]
        );
        assert_eq!(
            keeps(f(Some("pol_"), None, None, None), &mut ws),
            ["pol_a", "pol_b"]
        );
        assert_eq!(
            keeps(f(None, Some("codex"), None, None), &mut ws),
            ["pol_b"]
        );
        assert_eq!(keeps(f(None, Some("s3"), None, None), &mut ws), ["pol_b"]);
        assert_eq!(
            keeps(f(None, Some("claud"), None, None), &mut ws),
            Vec::<String>::new()
        );
        assert_eq!(
            keeps(f(None, None, Some("/w/app"), None), &mut ws),
            ["pol_a"]
        );
        assert_eq!(
            keeps(f(None, None, None, Some("alpha")), &mut ws),
            ["pol_b"]
        );
        assert_eq!(
            keeps(f(Some("parser"), Some("codex"), None, None), &mut ws),
            Vec::<String>::new()
        );
    }
}
