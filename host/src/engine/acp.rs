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
//! The permission requests and refusals are `permission`'s.
//!
//! This module must never write to the agent anything but the protocol's
//! messages, nor answer a permission request any other way than the rule
//! or the operator said (a timeout, a closed connection or a dead daemon
//! deny: the agent never gets an allow nobody gave).

use super::services::Agents;
use super::sessions::{MAX_MESSAGE, ReportKind, cap};
use crate::permission::PermissionRule;
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, ContentBlock, CreateTerminalRequest, CreateTerminalResponse,
    InitializeRequest, NewSessionRequest, PromptRequest, ReadTextFileRequest, ReadTextFileResponse,
    RequestPermissionRequest, SessionNotification, SessionUpdate, TextContent,
    WriteTextFileRequest, WriteTextFileResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, ByteStreams, Client};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

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
            let _ = super::agent_process::kill_group(child.id());
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

mod permission;
