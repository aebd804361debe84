//! `session_monitor`: what an agent needs to see of its session in one
//! call, read from the daemon's API:
//!
//! - `session`: the session as the API shows it, less `lastMessage` (the
//!   agent's own last words, up to 64 KiB; `lastMessageBytes` says how
//!   long it is);
//! - `policies`: every unsettled policy the session is a member of, in
//!   attach order, then its most recently attached settled ones (up to
//!   [`RECENT_SETTLED`], newest first), each as a summary: status,
//!   pending members, retries, the last verdict's outcome and reason per
//!   gate, the reason it was blocked, the commit, and `waitingFor`, what
//!   it waits for in words (`null` once settled);
//! - `events`: the session's latest events (its own and its policies'),
//!   oldest first, looked for among the bus's last [`WINDOWS`] events
//!   (`eventsSince` says from where);
//! - `nextCursor`: where `session_events_poll` with this session continues.
//!
//! It must never change anything: every call it makes reads.

use super::answer::{ToolResult, from_client, invalid, to_value};
use super::tools::{DEFAULT_MONITOR_EVENTS, MAX_MONITOR_EVENTS, SessionMonitorInput};
use crate::client::Client;
use crate::model::attach::DEFAULT_MAX_RETRIES;
use crate::wire::{ErrorDetail, EventQuery, PageQuery, Policy, PolicyStatus};
use serde_json::{Value, json};
use std::collections::VecDeque;

/// Settled policies shown, and how many of the newest settled ones are
/// looked through for them.
pub(super) const RECENT_SETTLED: usize = 5;
const SETTLED_SCAN: usize = 200;
/// Pages of unsettled policies read (of [`PAGE`] each).
const LIVE_PAGES: usize = 5;
const PAGE: usize = 1000;
/// How far back (in events on the whole bus) the latest events are looked
/// for: the first window, then the wider one if it held too few.
pub(super) const WINDOWS: [i64; 2] = [2_000, 20_000];

pub(super) async fn monitor(client: &Client, input: SessionMonitorInput) -> ToolResult {
    let wanted = input.events.unwrap_or(DEFAULT_MONITOR_EVENTS);
    if !(1..=MAX_MONITOR_EVENTS).contains(&wanted) {
        return Err(invalid(
            "events",
            format!("must be between 1 and {MAX_MONITOR_EVENTS}"),
        ));
    }
    // The id as an event filter: refused here if the API could not filter on it.
    if input.session_id.contains(',') {
        return Err(invalid(
            "sessionId",
            "holds a comma: its events cannot be asked for",
        ));
    }
    let filter = Some(input.session_id.clone());
    // Reading a session's record, policies and events takes its key.
    let client = &client.with_keys_for([input.session_id.as_str()]);
    let session = client
        .session(&input.session_id)
        .await
        .map_err(from_client)?;
    let head = client.health().await.map_err(from_client)?.cursor;
    let (policies, more_policies) = policies_of(client, &session.id).await?;
    let (events, since, next_cursor) = latest_events(client, filter, head, wanted as usize).await?;

    let mut session_json = to_value(&session)?;
    if let Value::Object(m) = &mut session_json {
        m.remove("lastMessage");
        m.insert(
            "lastMessageBytes".into(),
            json!(session.last_message.as_ref().map_or(0, String::len)),
        );
    }
    Ok(json!({
        "session": session_json,
        "policies": policies.iter().map(|p| policy_view(p, &session.id)).collect::<Vec<_>>(),
        "morePolicies": more_policies,
        "events": to_value(&events)?,
        "eventsSince": since,
        "nextCursor": next_cursor,
    }))
}

/// The unsettled policies with `session` as a member (attach order), then
/// the most recently attached settled ones; and whether more unsettled
/// ones were left unread.
async fn policies_of(client: &Client, session: &str) -> Result<(Vec<Policy>, bool), ErrorDetail> {
    let member = |p: &Policy| p.sessions.iter().any(|s| s == session);
    let names = |settled: bool| {
        PolicyStatus::ALL
            .iter()
            .filter(|s| s.is_settled() == settled)
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut found = Vec::new();
    let mut cursor = None;
    let mut more = false;
    for page_no in 0..LIVE_PAGES {
        let page = client
            .policies(&PageQuery {
                limit: Some(PAGE),
                cursor,
                status: Some(names(false)),
                order: None,
            })
            .await
            .map_err(from_client)?;
        found.extend(page.policies.into_iter().filter(|p| member(p)));
        match page.next_cursor {
            Some(c) if page_no + 1 < LIVE_PAGES => cursor = Some(c),
            Some(_) => more = true,
            None => break,
        }
    }
    let settled = client
        .policies(&PageQuery {
            limit: Some(SETTLED_SCAN),
            cursor: None,
            status: Some(names(true)),
            order: Some("newest".into()),
        })
        .await
        .map_err(from_client)?;
    // A policy that settled between the two reads is shown once.
    let settled: Vec<Policy> = settled
        .policies
        .into_iter()
        .filter(|p| member(p) && !found.iter().any(|f: &Policy| f.policy_id == p.policy_id))
        .take(RECENT_SETTLED)
        .collect();
    found.extend(settled);
    Ok((found, more))
}

/// The last `wanted` events of the session filter `filter`, the cursor
/// the search started after, and the cursor to continue from.
async fn latest_events(
    client: &Client,
    filter: Option<String>,
    head: i64,
    wanted: usize,
) -> Result<(Vec<crate::wire::Event>, i64, i64), ErrorDetail> {
    let mut kept = VecDeque::with_capacity(wanted);
    let mut since = head;
    let mut next = head;
    for window in WINDOWS {
        since = (head - window).max(0);
        kept.clear();
        let mut cursor = since;
        loop {
            let page = client
                .events(&EventQuery {
                    since: Some(cursor),
                    session: filter.clone(),
                    limit: Some(PAGE),
                    ..Default::default()
                })
                .await
                .map_err(from_client)?;
            let full = page.events.len() == PAGE;
            for e in page.events {
                if kept.len() == wanted {
                    kept.pop_front();
                }
                kept.push_back(e);
            }
            cursor = page.next_cursor;
            if !full {
                break;
            }
        }
        next = cursor.max(head);
        if kept.len() >= wanted || since == 0 {
            break;
        }
    }
    Ok((kept.into(), since, next))
}

/// A policy as the monitor shows it.
pub(super) fn policy_view(p: &Policy, session: &str) -> Value {
    let row = p;
    let spec = &row.spec;
    let max_retries = spec.on_fail.max_retries.unwrap_or(DEFAULT_MAX_RETRIES);
    json!({
        "policyId": p.policy_id,
        "status": row.status,
        "label": spec.label,
        "then": spec.then,
        "sessions": row.sessions,
        "pending": row.pending,
        "gateRuns": row.gate_runs,
        "retriesUsed": row.retries_used,
        "maxRetries": max_retries,
        "verdict": row.verdict.as_ref().map(verdict_summary),
        "reason": row.reason,
        "commitSha": row.commit_sha,
        "parentId": row.parent_id,
        "nextId": row.next_id,
        "updatedAt": row.updated_at,
        "waitingFor": waiting_for(row, session),
    })
}

/// The last gate report, without its outputs: the overall outcome and
/// reason, and each gate's.
fn verdict_summary(v: &crate::verdict::RunReport) -> Value {
    let gates: Vec<Value> = v
        .gates
        .iter()
        .map(|g| {
            json!({
                "gate": g.gate,
                "outcome": g.outcome,
                "reason": g.reason,
                "exitCode": g.exit_code,
            })
        })
        .collect();
    json!({"outcome": v.outcome, "reason": v.reason, "gates": gates})
}

/// What an unsettled policy waits for, in words for the agent `session`.
pub(super) fn waiting_for(row: &Policy, session: &str) -> Option<String> {
    Some(match row.status {
        PolicyStatus::Watching if row.pending.iter().any(|s| s == session) => {
            "this session's turn-end: the gate runs when your turn ends".to_string()
        }
        PolicyStatus::Watching if !row.pending.is_empty() => {
            format!("the turn-end of {}", row.pending.join(", "))
        }
        PolicyStatus::Watching => "a turn-end".to_string(),
        PolicyStatus::Queued => "a free gating slot (it gates next)".to_string(),
        PolicyStatus::Gating => "its gate to finish".to_string(),
        PolicyStatus::Nudging => "its nudge to be sent".to_string(),
        PolicyStatus::AwaitingAck => {
            "the operator's ack: the gate passed and the commit is ready (an agent cannot ack)"
                .to_string()
        }
        PolicyStatus::Committing => "its commit to be made".to_string(),
        PolicyStatus::Reviewing => "its reviewer's verdict (SHIP or BLOCK)".to_string(),
        PolicyStatus::Done | PolicyStatus::Blocked | PolicyStatus::Cancelled => return None,
    })
}
