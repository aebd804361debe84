//! Sessions the daemon drives over the Agent Client Protocol (`session
//! start --acp`): the daemon is the ACP *client* of the agent it started,
//! over the agent's stdin and stdout, with the `agent-client-protocol`
//! crate.
//!
//! It owns the conversation: `initialize` (advertising no file-system and
//! no terminal capability), `session/new` in the session's working
//! directory, the first prompt, then one `session/prompt` per nudge, in
//! order. A prompt's answer (its `stopReason`, `end_turn` or any other:
//! the agent waits for a prompt again) is the session's turn-end, reported
//! as a hook's is, with the text of the `session/update` agent message
//! chunks since the prompt as the session's last message. A
//! `session/request_permission` is answered by the session's permission
//! rule (`permission`), an escalation by the operator
//! ([`Agents::resolve_permission`]) or by the `auto-allow` of a routine's
//! step in the session (only the operator's routines run in the
//! operator's sessions: `routines::ops`), or, at its timeout, denied; each
//! answer is a `session:permission` event saying who answered (`by`, and
//! the run for a routine's). The agent's requests to read or write
//! files or run terminals (`fs/*`, `terminal/*`) are refused, each with a
//! `session:client-refused` event: the agent has its own tools, in its own
//! sandbox, and the daemon never reads or writes a path for it.
//!
//! This module must never write to the agent anything but the protocol's
//! messages, nor answer a permission request any other way than the rule
//! or the operator said (a timeout, a closed connection or a dead daemon
//! deny: the agent never gets an allow nobody gave).

use super::sessions::{MAX_MESSAGE, ReportKind, cap};
use super::{EngineError, EngineResult, services::Agents};
use crate::model::event::{ClientRefused, Event, Permission, PermissionEscalated, SessionEvent};
use crate::permission::{Decision, PermissionRule, ToolAsk, decide};
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, ContentBlock, CreateTerminalRequest, CreateTerminalResponse,
    InitializeRequest, NewSessionRequest, PermissionOptionKind, PromptRequest, ReadTextFileRequest,
    ReadTextFileResponse, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome, SessionNotification, SessionUpdate,
    TextContent, WriteTextFileRequest, WriteTextFileResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, ByteStreams, Client};
use serde_json::json;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};

/// The live ACP sessions: where their prompts go, and the permission
/// requests waiting for the operator.
#[derive(Default)]
pub(super) struct Acp {
    prompts: Mutex<HashMap<String, mpsc::UnboundedSender<String>>>,
    /// By (session, request id).
    escalations: Mutex<HashMap<(String, String), oneshot::Sender<Answer>>>,
    next_request: AtomicU64,
}

/// An escalation's answer: allowed or not, and the routine that gave it
/// (none: the operator).
type Answer = (bool, Option<String>);

pub use crate::model::event::AnsweredBy;

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
    /// Sends `message` as the next prompt of the ACP session `session_id`;
    /// `false` when it is not one this daemon drives.
    pub(super) fn prompt_acp(&self, session_id: &str, message: &str) -> bool {
        let prompts = self.acp.prompts.lock().unwrap_or_else(|p| p.into_inner());
        match prompts.get(session_id) {
            Some(tx) => tx.send(message.to_string()).is_ok(),
            None => false,
        }
    }

    /// Stops the ACP session `session_id` this daemon drives: no more
    /// prompts, so its conversation ends and its agent is killed (its exit
    /// reported). `false` when it is not one.
    pub(super) fn stop_acp(&self, session_id: &str) -> bool {
        self.acp
            .prompts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(session_id)
            .is_some()
    }

    /// The answer to an escalated permission request: the operator's
    /// (`routine` none: the API, or the operator resolving a routine's
    /// escalation) or a routine's own rule (`routine`: the run, recorded
    /// as `by: routine`, never as the operator).
    pub fn resolve_permission(
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
    fn on_permission(
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

    fn refuse(&self, sid: &str, method: &str, target: String) -> agent_client_protocol::Error {
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

    /// Drives the ACP session `sid` whose agent is `child` until it exits
    /// or the conversation fails (then the agent is killed), and reports
    /// its exit.
    pub(super) async fn drive_acp(
        &self,
        sid: String,
        mut child: super::agent_process::Agent,
        cwd: PathBuf,
        first: Option<String>,
        rule: PermissionRule,
    ) {
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        self.acp
            .prompts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(sid.clone(), tx);
        if let Some(first) = first {
            self.prompt_acp(&sid, &first);
        }
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            self.acp_ended(&sid, child, "the agent's stdio is not piped".into())
                .await;
            return;
        };
        let stderr_tail = Arc::new(Mutex::new(String::new()));
        if let Some(stderr) = child.stderr.take() {
            let tail = stderr_tail.clone();
            tokio::spawn(async move {
                use futures_lite::{AsyncBufReadExt, StreamExt};
                let mut lines = futures_lite::io::BufReader::new(stderr).lines();
                while let Some(Ok(line)) = lines.next().await {
                    let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
                    t.push_str(&line);
                    t.push('\n');
                    let capped = cap(std::mem::take(&mut *t), 16 * 1024);
                    *t = capped;
                }
            });
        }
        let text = Arc::new(Mutex::new(String::new()));
        let conversation = {
            let chunks = text.clone();
            let engine = self.engine();
            let (e1, e2, e3, e4, e5) = (
                engine.clone(),
                engine.clone(),
                engine.clone(),
                engine.clone(),
                engine,
            );
            let (s1, s2, s3, s4, s5) = (
                sid.clone(),
                sid.clone(),
                sid.clone(),
                sid.clone(),
                sid.clone(),
            );
            Client
                .v1()
                .name("gatehost")
                .on_receive_notification(
                    async move |n: SessionNotification, _cx| {
                        if let SessionUpdate::AgentMessageChunk(chunk) = n.update
                            && let ContentBlock::Text(t) = chunk.content
                        {
                            {
                                let mut m = chunks.lock().unwrap_or_else(|p| p.into_inner());
                                m.push_str(&t.text);
                                let capped = cap(std::mem::take(&mut *m), MAX_MESSAGE);
                                *m = capped;
                            }
                        }
                        Ok(())
                    },
                    agent_client_protocol::on_receive_notification!(),
                )
                .on_receive_request(
                    async move |req: RequestPermissionRequest, responder, cx: ConnectionTo<Agent>| {
                        e1.agents().on_permission(&s1, &rule, req, responder, &cx)
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |req: ReadTextFileRequest, responder: Responder<ReadTextFileResponse>, _cx| {
                        responder.respond_with_error(e2.agents().refuse(&s2, "fs/read_text_file", req.path.display().to_string()))
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |req: WriteTextFileRequest, responder: Responder<WriteTextFileResponse>, _cx| {
                        responder.respond_with_error(e3.agents().refuse(&s3, "fs/write_text_file", req.path.display().to_string()))
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |req: CreateTerminalRequest, responder: Responder<CreateTerminalResponse>, _cx| {
                        responder.respond_with_error(e4.agents().refuse(&s4, "terminal/create", req.command.clone()))
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .connect_with(ByteStreams::new(stdin, stdout), async move |cx: ConnectionTo<Agent>| {
                    // No `fs`, no `terminal`: the defaults say false.
                    cx.send_request(
                        InitializeRequest::new(ProtocolVersion::V1)
                            .client_capabilities(ClientCapabilities::default()),
                    )
                    .block_task()
                    .await?;
                    let session = cx
                        .send_request(NewSessionRequest::new(cwd))
                        .block_task()
                        .await?;
                    tracing::info!(session = %s5, acp_session = %session.session_id.0, "an ACP session began");
                    while let Some(prompt) = rx.recv().await {
                        if let Err(e) = e5.sessions().report(&s5, ReportKind::TurnStart, None) {
                            tracing::warn!(session = %s5, error = %e, "cannot record a turn-start");
                        }
                        let done = cx
                            .send_request(PromptRequest::new(
                                session.session_id.clone(),
                                vec![ContentBlock::Text(TextContent::new(prompt))],
                            ))
                            .block_task()
                            .await?;
                        let message = std::mem::take(&mut *text.lock().unwrap_or_else(|p| p.into_inner()));
                        tracing::info!(session = %s5, stop = ?done.stop_reason, "an ACP prompt ended");
                        if let Err(e) = e5.sessions().report(&s5, ReportKind::TurnEnd, Some(message)) {
                            tracing::warn!(session = %s5, error = %e, "cannot record a turn-end");
                        }
                    }
                    Ok(())
                })
        };
        let why = {
            let status = child.status();
            futures_lite::pin!(status);
            tokio::select! {
                r = conversation => match r {
                    Ok(()) => "the daemon stopped prompting the agent".to_string(),
                    Err(e) => format!("the ACP conversation ended: {e}"),
                },
                s = &mut status => match s {
                    Ok(s) => format!("process ended: {s}"),
                    Err(e) => format!("process could not be waited on: {e}"),
                },
            }
        };
        let tail = std::mem::take(&mut *stderr_tail.lock().unwrap_or_else(|p| p.into_inner()));
        self.acp_ended(&sid, child, format!("{tail}[{why}]")).await;
    }

    /// The end of an ACP session: its agent killed if still alive, its
    /// escalations denied (their waits see the closed channel), its exit
    /// reported.
    async fn acp_ended(&self, sid: &str, mut child: super::agent_process::Agent, message: String) {
        self.acp
            .prompts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(sid);
        self.acp
            .escalations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(s, _), _| s != sid);
        if let Ok(None) = child.try_status() {
            let _ = super::agent_process::kill_group(child.id() as i32);
        }
        let _ = child.status().await;
        if let Err(e) = self
            .engine()
            .sessions()
            .report(sid, ReportKind::Exited, Some(message))
        {
            tracing::warn!(session = sid, error = %e, "cannot record a session exit");
        }
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
