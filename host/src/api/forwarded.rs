//! An operator's action on another host's policy, in a fleet sharing one
//! PostgreSQL database (docs/fleet.md, "Hosts"): a host that receives an
//! ack, a request for changes or a cancel of a policy it does not own
//! checks the caller as for its own (the operator's token, a passkey's
//! assertion, verified and recorded here), stores the action for the
//! owner ([`send`]) and waits for what came of it; every host carries out,
//! in order, the actions sent to it ([`carry_out`], a task of `serve`), as
//! if they had been sent to it, and records the outcome the sender then
//! answers with. A read only the owner can answer goes the same way: the
//! diff of a policy (its workspace is the owner's), computed by the owner
//! within the diff route's bounds and recorded whole as the outcome.
//!
//! Wake-ups: the store notifies the owner of a request sent to it and the
//! sender of its outcome (`Store::request_wakeups`, PostgreSQL's
//! LISTEN/NOTIFY); each also looks every [`SLOW_LOOK`] in case a
//! notification was lost (the listener's connection down).
//!
//! A request is `open` until its owner takes it (then it happens, once:
//! the owner moves it to `taken` in a transaction before acting), and the
//! sender withdraws one its owner has not taken within [`TAKEN_WITHIN`]
//! (then it never happens, and the client is told to try again). A request
//! found `taken` after the owner's restart is carried out again: an action
//! that happened already is then refused as the conflict it is (the
//! policy is no longer awaiting it), and that is its recorded outcome.
//!
//! It owns the wire of those actions and their outcomes. It must never
//! carry out an action on a policy its host does not own (the store
//! refuses the write anyway), nor one withdrawn.

use super::{ApiError, ApiResult, AppState, ok};
use crate::api::convert::ToWire;
use crate::model::inputs::LineComment;
use crate::passkey::{ForwardedApproval, Proof};
use crate::store::{HostRequestRow, HostRequestState, now_ms};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// How long the sender waits for the owner to take a request before it
/// withdraws it.
pub const TAKEN_WITHIN: Duration = Duration::from_secs(10);

/// How long the sender waits for the outcome of a request its owner took.
const DONE_WITHIN: Duration = Duration::from_secs(120);

/// How often the owner looks for requests, and the sender for its
/// outcome, when no notification woke it (a notification lost with the
/// listener's connection is found then).
const SLOW_LOOK: Duration = Duration::from_secs(2);

/// How often they look where the store has no notifications.
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// An action sent to the host owning its policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case", deny_unknown_fields)]
pub enum HostAction {
    /// `POST /v1/policies/{id}/ack`, its passkey's assertion verified by
    /// the sender.
    #[serde(rename_all = "camelCase")]
    Ack {
        approve: bool,
        tree: Option<String>,
        comment: Option<String>,
        passkey: Option<ForwardedApproval>,
    },
    /// `POST /v1/policies/{id}/request-changes`.
    RequestChanges {
        tree: String,
        comments: Vec<LineComment>,
    },
    /// `POST /v1/policies/{id}/cancel`.
    Cancel {},
    /// `GET /v1/policies/{id}/diff?from=&limit=&since=`, the caller's
    /// right to read it checked by the sender.
    Diff {
        from: usize,
        limit: Option<usize>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since: Option<String>,
    },
}

/// What came of an action, as its owner answered it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Outcome {
    /// Carried out: the policy is as its owner left it.
    Done,
    /// A diff's page, as the owner's diff route answered it.
    Diff { diff: Box<crate::wire::PolicyDiff> },
    /// Refused or failed, as the owner's API answered.
    Failed {
        status: u16,
        code: String,
        message: String,
        field: Option<String>,
    },
}

impl Outcome {
    fn of(e: ApiError) -> Outcome {
        Outcome::Failed {
            status: e.status.as_u16(),
            code: e.code.into_owned(),
            message: e.message,
            field: e.field,
        }
    }
}

fn internal(message: String) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
}

/// The host that owns `policy` when it is not this one.
pub(super) fn owner_elsewhere(st: &AppState, policy: &str) -> Result<Option<String>, ApiError> {
    let store = st.engine.store();
    let Some((me, _)) = store.host() else {
        return Ok(None);
    };
    Ok(store.policy_host(policy)?.filter(|owner| *owner != me))
}

/// Sends `action` on `policy` to its owner `host` and answers what came
/// of it: the policy as the owner left it, or the owner's refusal.
pub(super) async fn send(
    st: &AppState,
    host: &str,
    policy: &str,
    action: &HostAction,
) -> ApiResult {
    let text = serde_json::to_string(action)
        .map_err(|e| internal(format!("cannot encode the action: {e}")))?;
    let store = st.engine.store();
    // Subscribed first: the outcome's notification cannot come before.
    let mut woken = store.request_wakeups();
    let id = store.write(|tx| tx.insert_host_request(host, policy, &text, now_ms()))?;
    tracing::info!(request = id, %host, policy, "an operator's action sent to the host owning its policy");
    let started = Instant::now();
    loop {
        let row = store
            .host_request(id)?
            .ok_or_else(|| internal(format!("request {id} vanished")))?;
        match row.state {
            HostRequestState::Done => return answer(st, policy, &row),
            HostRequestState::Open if started.elapsed() >= TAKEN_WITHIN => {
                let withdrawn = store.write(|tx| {
                    tx.move_host_request(
                        id,
                        HostRequestState::Open,
                        HostRequestState::Withdrawn,
                        None,
                        now_ms(),
                    )
                })?;
                if withdrawn {
                    return Err(ApiError::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "host-unavailable",
                        format!(
                            "policy {policy} belongs to host {host}, which did not take the action within {} s (is it running?); nothing was done: try again",
                            TAKEN_WITHIN.as_secs()
                        ),
                    )
                    .retry_after(1));
                }
            }
            HostRequestState::Taken if started.elapsed() >= DONE_WITHIN => {
                return Err(ApiError::new(
                    StatusCode::GATEWAY_TIMEOUT,
                    "host-slow",
                    format!(
                        "host {host} took the action on policy {policy} (request {id}) but has not finished it within {} s: it will; read the policy for its outcome",
                        DONE_WITHIN.as_secs()
                    ),
                ));
            }
            _ => {}
        }
        // Until notified, or the next look; never past the withdrawal.
        let left = TAKEN_WITHIN.saturating_sub(started.elapsed());
        let look = if left.is_zero() {
            SLOW_LOOK
        } else {
            SLOW_LOOK.min(left)
        };
        wait(&mut woken, look).await;
    }
}

/// Waits for a wake-up (a request sent to this host, or one answered)
/// for at most `look`; without notifications, [`LOOK_EVERY`].
async fn wait(woken: &mut Option<tokio::sync::watch::Receiver<u64>>, look: Duration) {
    match woken {
        Some(rx) => {
            if let Ok(Err(_)) = tokio::time::timeout(look, rx.changed()).await {
                // The store's listener is gone (the store is closing):
                // looks on a timer from now.
                *woken = None;
                tokio::time::sleep(LOOK_EVERY.min(look)).await;
            }
        }
        None => tokio::time::sleep(LOOK_EVERY.min(look)).await,
    }
}

/// The sender's answer for a request done.
fn answer(st: &AppState, policy: &str, row: &HostRequestRow) -> ApiResult {
    let outcome: Outcome = serde_json::from_str(row.outcome.as_deref().unwrap_or(""))
        .map_err(|e| internal(format!("request {}'s outcome: {e}", row.id)))?;
    match outcome {
        Outcome::Done => ok(ToWire::to_wire(st.engine.policy(policy)?)),
        Outcome::Diff { diff } => ok(diff),
        Outcome::Failed {
            status,
            code,
            message,
            field,
        } => {
            let mut e = ApiError::new(
                StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                code,
                message,
            );
            e.field = field;
            Err(e)
        }
    }
}

/// Carries out the actions other hosts sent this one, in order, for as
/// long as the daemon lives.
pub async fn carry_out(st: AppState) {
    let mut woken = st.engine.store().request_wakeups();
    loop {
        wait(&mut woken, SLOW_LOOK).await;
        let due = match st.engine.store().host_requests_due() {
            Ok(due) => due,
            Err(e) => {
                tracing::debug!(error = %e, "cannot read the requests sent to this host");
                continue;
            }
        };
        for row in due {
            if let Err(e) = carry_one(&st, &row).await {
                tracing::warn!(request = row.id, error = %e.message, "a request sent to this host could not be recorded; it is tried again");
            }
        }
    }
}

async fn carry_one(st: &AppState, row: &HostRequestRow) -> Result<(), ApiError> {
    let store = st.engine.store();
    if row.state == HostRequestState::Open {
        let taken = store.write(|tx| {
            tx.move_host_request(
                row.id,
                HostRequestState::Open,
                HostRequestState::Taken,
                None,
                now_ms(),
            )
        })?;
        if !taken {
            // Withdrawn by its sender meanwhile: it never happens.
            return Ok(());
        }
    }
    let from = row.from_host.as_deref().unwrap_or("another host");
    let outcome = match serde_json::from_str::<HostAction>(&row.request) {
        Err(e) => Outcome::Failed {
            status: 400,
            code: "invalid".into(),
            message: format!("the action sent by {from} does not decode: {e}"),
            field: None,
        },
        Ok(action) => match act(st, &row.policy_id, action, from).await {
            Ok(outcome) => outcome,
            Err(e) => Outcome::of(e),
        },
    };
    let text = serde_json::to_string(&outcome)
        .map_err(|e| internal(format!("cannot encode the outcome: {e}")))?;
    store.write(|tx| {
        tx.move_host_request(
            row.id,
            HostRequestState::Taken,
            HostRequestState::Done,
            Some(&text),
            now_ms(),
        )
    })?;
    tracing::info!(request = row.id, policy = %row.policy_id, from, outcome = ?outcome, "carried out an operator's action sent by another host");
    Ok(())
}

/// Does `action` on `policy` as its API would have.
async fn act(
    st: &AppState,
    policy: &str,
    action: HostAction,
    from: &str,
) -> Result<Outcome, ApiError> {
    let by = format!("the operator (through host {from})");
    match action {
        HostAction::Ack {
            approve,
            tree,
            comment,
            passkey,
        } => {
            let proof = passkey.map(Proof::from_forwarded);
            st.engine
                .ack(
                    policy,
                    approve,
                    tree.as_deref(),
                    comment.as_deref(),
                    &by,
                    proof.as_ref(),
                )
                .await?;
        }
        HostAction::RequestChanges { tree, comments } => {
            st.engine
                .request_changes(policy, &tree, &comments, &by)
                .await?;
        }
        HostAction::Cancel {} => {
            st.engine.cancel(policy, &by)?;
        }
        HostAction::Diff { from, limit, since } => {
            let q = super::query::DiffQuery { from, limit, since };
            let diff = super::review::page(st, policy, q).await?;
            return Ok(Outcome::Diff {
                diff: Box::new(diff),
            });
        }
    }
    Ok(Outcome::Done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_and_outcomes_round_trip_and_an_unknown_field_is_refused() {
        for a in [
            HostAction::Ack {
                approve: true,
                tree: Some("t".into()),
                comment: None,
                passkey: None,
            },
            HostAction::RequestChanges {
                tree: "t".into(),
                comments: Vec::new(),
            },
            HostAction::Cancel {},
            HostAction::Diff {
                from: 2,
                limit: Some(1),
                since: None,
            },
            HostAction::Diff {
                from: 0,
                limit: None,
                since: Some("ab".repeat(20)),
            },
        ] {
            let text = serde_json::to_string(&a).expect("encode");
            assert_eq!(
                serde_json::from_str::<HostAction>(&text).expect("decode"),
                a
            );
        }
        assert!(serde_json::from_str::<HostAction>(r#"{"action":"cancel","by":"x"}"#).is_err());
        let o = Outcome::of(ApiError::new(
            StatusCode::CONFLICT,
            "not-awaiting-ack",
            "no",
        ));
        let text = serde_json::to_string(&o).expect("encode");
        assert_eq!(serde_json::from_str::<Outcome>(&text).expect("decode"), o);
        assert!(text.contains(r#""status":409"#), "{text}");
        // A diff's page is recorded whole and read back equal.
        let page = crate::wire::PolicyDiff {
            policy_id: "pol_1".into(),
            status: crate::wire::PolicyStatus::AwaitingAck,
            tree: "t".into(),
            base: None,
            commit: None,
            head_moved: false,
            files: Vec::new(),
            patch: "diff --git a/x b/x\n+\u{1F600}\n".into(),
            since: Some("ab".repeat(20)),
            from: 0,
            next_from: Some(1),
            total_files: 2,
            note: Some("files 0 to 0 of 2".into()),
        };
        let o = Outcome::Diff {
            diff: Box::new(page),
        };
        let text = serde_json::to_string(&o).expect("encode");
        assert!(text.starts_with(r#"{"outcome":"diff","diff":{"#), "{text}");
        assert_eq!(serde_json::from_str::<Outcome>(&text).expect("decode"), o);
    }
}
