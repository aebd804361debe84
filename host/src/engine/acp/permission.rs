//! An ACP session's permission requests and refusals: a
//! `session/request_permission` answered by the session's rule, or
//! escalated to the operator (or a routine's step) until its timeout,
//! each answer a `session:permission` event saying who gave it; the
//! agent's `fs/*` and `terminal/*` requests refused, each with a
//! `session:client-refused` event.
//!
//! It must never answer a permission request any other way than the rule,
//! the operator or a routine's rule said (a timeout or a closed connection
//! denies), and never read, write or run anything for the agent.

use super::super::{EngineError, EngineResult, services::Agents};
use crate::model::event::{
    AnsweredBy, ClientRefused, Event, Permission, PermissionEscalated, SessionEvent,
};
use crate::permission::{Decision, PermissionRule, ToolAsk, decide};
use agent_client_protocol::Agent;
use agent_client_protocol::v1::schema::{
    PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use serde_json::json;
use std::sync::atomic::Ordering;
use tokio::sync::oneshot;

const REFUSED: &str = "gatehost offers no file-system or terminal to agents: use your own tools";

/// What the rule sees of a permission request.
fn tool_ask(req: &RequestPermissionRequest) -> ToolAsk {
    let f = &req.tool_call.fields;
    ToolAsk {
        kind: f.kind.and_then(|k| {
            serde_json::to_value(k)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
        }),
        name: f.name.clone(),
        title: f.title.clone(),
    }
}

/// The answer to `req`: one of its allow (or reject) options, the narrower
/// first; a deny with no reject option is `cancelled`.
fn answer(req: &RequestPermissionRequest, allow: bool) -> RequestPermissionResponse {
    let kinds: &[PermissionOptionKind] = if allow {
        &[
            PermissionOptionKind::AllowOnce,
            PermissionOptionKind::AllowAlways,
        ]
    } else {
        &[
            PermissionOptionKind::RejectOnce,
            PermissionOptionKind::RejectAlways,
        ]
    };
    let chosen = kinds.iter().find_map(|k| {
        req.options
            .iter()
            .find(|o| o.kind == *k)
            .map(|o| o.option_id.clone())
    });
    match chosen {
        Some(id) => RequestPermissionResponse::new(RequestPermissionOutcome::Selected(
            SelectedPermissionOutcome::new(id),
        )),
        None => RequestPermissionResponse::new(RequestPermissionOutcome::Cancelled),
    }
}

impl Agents {
    /// The answer to an escalated permission request: the operator's
    /// (`routine` none: the API, or the operator resolving a routine's
    /// escalation) or a routine's own rule (`routine`: the run, recorded
    /// as `by: routine`, never as the operator).
    pub(crate) fn resolve_permission(
        &self,
        session: &str,
        request: &str,
        allow: bool,
        routine: Option<&str>,
    ) -> EngineResult<()> {
        let waiting = self
            .acp
            .escalations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(session.to_string(), request.to_string()));
        match waiting.map(|tx| tx.send((allow, routine.map(str::to_string)))) {
            Some(Ok(())) => Ok(()),
            _ => Err(EngineError::NotFound(format!(
                "no permission request '{request}' of session '{session}' waits for an answer"
            ))),
        }
    }

    fn publish(&self, sid: &str, said: SessionEvent) {
        let engine = self.engine();
        let event = Event::Session(said);
        if let Err(e) = engine.write(|tx| engine.append(tx, &event, Some(sid), None)) {
            tracing::error!(session = sid, event = event.kind(), error = %e, "cannot record an ACP event");
        }
    }

    fn record_answer(
        &self,
        sid: &str,
        id: &str,
        req: &RequestPermissionRequest,
        ask: &ToolAsk,
        (rule, allowed, by): (Decision, bool, AnsweredBy),
        routine: Option<&str>,
    ) {
        tracing::info!(
            session = sid,
            request = id,
            ?rule,
            allowed,
            ?by,
            routine,
            "an ACP permission request answered"
        );
        self.publish(
            sid,
            SessionEvent::Permission(Permission {
                session_id: sid.to_string(),
                request: id.to_string(),
                tool_call_id: req.tool_call.tool_call_id.0.to_string(),
                tool: ask.clone(),
                rule,
                allowed,
                by,
                routine: routine.map(str::to_string),
            }),
        );
    }

    /// Answers a permission request by the rule, or escalates it.
    pub(super) fn on_permission(
        &self,
        sid: &str,
        rule: &PermissionRule,
        req: RequestPermissionRequest,
        responder: Responder<RequestPermissionResponse>,
        cx: &ConnectionTo<Agent>,
    ) -> Result<(), agent_client_protocol::Error> {
        let e = self.engine();
        let n = self.acp.next_request.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("perm-{n}");
        let ask = tool_ask(&req);
        let decision = decide(rule, &ask);
        if decision != Decision::Escalate {
            let allowed = decision == Decision::Allow;
            self.record_answer(
                sid,
                &id,
                &req,
                &ask,
                (decision, allowed, AnsweredBy::Rule),
                None,
            );
            return responder.respond(answer(&req, allowed));
        }
        let (tx, rx) = oneshot::channel();
        self.acp
            .escalations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((sid.to_string(), id.clone()), tx);
        let timeout = rule.timeout();
        tracing::warn!(session = sid, request = %id, tool = ?ask, "an ACP permission request waits for the operator");
        self.publish(
            sid,
            SessionEvent::PermissionEscalated(PermissionEscalated {
                session_id: sid.to_string(),
                request: id.clone(),
                tool_call_id: req.tool_call.tool_call_id.0.to_string(),
                tool: ask.clone(),
                timeout_ms: timeout.as_millis() as u64,
            }),
        );
        // A routine's step in this session may answer it (or escalate).
        e.runs().routine_permission(sid, &id);
        let engine = e.clone();
        let sid = sid.to_string();
        // Waits apart from the dispatch loop: the agent's other messages
        // go on meanwhile.
        cx.spawn(async move {
            let (allowed, by, routine) = match tokio::time::timeout(timeout, rx).await {
                Ok(Ok((allow, None))) => (allow, AnsweredBy::Operator, None),
                Ok(Ok((allow, Some(run)))) => (allow, AnsweredBy::Routine, Some(run)),
                Ok(Err(_)) => (false, AnsweredBy::Closed, None),
                Err(_) => (false, AnsweredBy::Timeout, None),
            };
            engine
                .agents()
                .acp
                .escalations
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&(sid.clone(), id.clone()));
            engine.agents().record_answer(
                &sid,
                &id,
                &req,
                &ask,
                (decision, allowed, by),
                routine.as_deref(),
            );
            responder.respond(answer(&req, allowed))
        })
    }

    pub(super) fn refuse(
        &self,
        sid: &str,
        method: &str,
        target: String,
    ) -> agent_client_protocol::Error {
        tracing::warn!(session = sid, method, target = %target, "an ACP agent asked the daemon for a file or a terminal: refused");
        self.publish(
            sid,
            SessionEvent::ClientRefused(ClientRefused {
                session_id: sid.to_string(),
                method: method.to_string(),
                target,
                reason: REFUSED.to_string(),
            }),
        );
        agent_client_protocol::Error::method_not_found().data(json!({"reason": REFUSED}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::{
        PermissionOption, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
    };

    fn request(options: &[(&str, PermissionOptionKind)]) -> RequestPermissionRequest {
        RequestPermissionRequest::new(
            "s",
            ToolCallUpdate::new(
                "t1",
                ToolCallUpdateFields::new()
                    .kind(ToolKind::Execute)
                    .title("rm -rf /"),
            ),
            options
                .iter()
                .map(|(id, k)| PermissionOption::new(id.to_string(), id.to_string(), *k))
                .collect(),
        )
    }

    fn chosen(r: &RequestPermissionResponse) -> Option<String> {
        match &r.outcome {
            RequestPermissionOutcome::Selected(s) => Some(s.option_id.0.to_string()),
            _ => None,
        }
    }

    #[test]
    fn an_answer_picks_the_narrowest_option_and_a_deny_without_reject_cancels() {
        use PermissionOptionKind::*;
        let all = request(&[
            ("always", AllowAlways),
            ("once", AllowOnce),
            ("no", RejectOnce),
            ("never", RejectAlways),
        ]);
        assert_eq!(chosen(&answer(&all, true)).as_deref(), Some("once"));
        assert_eq!(chosen(&answer(&all, false)).as_deref(), Some("no"));
        let allow_only = request(&[("always", AllowAlways)]);
        assert_eq!(
            chosen(&answer(&allow_only, true)).as_deref(),
            Some("always")
        );
        assert_eq!(chosen(&answer(&allow_only, false)), None);
        assert_eq!(chosen(&answer(&request(&[]), true)), None);
    }

    #[test]
    fn the_rule_sees_the_kind_as_acp_spells_it() {
        let a = tool_ask(&request(&[]));
        assert_eq!(a.kind.as_deref(), Some("execute"));
        assert_eq!(a.title.as_deref(), Some("rm -rf /"));
    }
}
