//! Sessions gatehost starts and follows (`session start`): the agent as a
//! child of the daemon (dying with it, see `agent_process`), its stdout
//! read for turn-ends (a line matching `turnEndPattern`, or `quietMs` of
//! silence after output), its exit reported as `exited`, nudges written to
//! its stdin as one line; after a restart, what the previous daemon's
//! agents left is reported and killed. It must never write to an agent's
//! stdin anything but a policy's nudge.

use super::keys::Caller;
use super::sessions::{MAX_MESSAGE, RegisterInput, Registered, ReportKind, cap, invalid, locate};
use super::{EngineResult, services::Agents};
use crate::store::{SessionRow, SessionState};
use futures_lite::{AsyncBufReadExt, AsyncWriteExt, io::BufReader};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Output kept for a started session.
const STARTED_TAIL: usize = 64 * 1024;
const DEFAULT_QUIET_MS: u64 = 3000;

pub use crate::model::inputs::StartInput;

impl Agents {
    /// Writes a prompt (a nudge) to a started session's stdin. Sessions
    /// registered from outside get it as the `policy:nudge` event only.
    pub(crate) async fn deliver_prompt(&self, session_id: &str, message: &str) {
        if self.prompt_acp(session_id, message) {
            return;
        }
        let stdin = self
            .started
            .stdin
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(session_id);
        let Some(mut stdin) = stdin else {
            return;
        };
        let line = format!("{}\n", message.replace('\n', " "));
        let ok = stdin.write_all(line.as_bytes()).await.is_ok() && stdin.flush().await.is_ok();
        if ok {
            self.started
                .stdin
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(session_id.to_string(), stdin);
        } else {
            tracing::warn!(
                session = session_id,
                "cannot write the nudge to the session's stdin"
            );
        }
    }

    /// Starts a session as a child of the daemon and follows it.
    pub(crate) fn start_session(&self, input: StartInput) -> EngineResult<Registered> {
        let engine = self.engine();
        let Some(program) = input.command.first() else {
            return Err(invalid("command", "must name a program"));
        };
        let path_var = engine.runner().config().host_path.clone();
        let resolved = if program.contains('/') {
            let p = PathBuf::from(program);
            if !p.is_absolute() {
                return Err(invalid("command[0]", "a bare name or an absolute path"));
            }
            p
        } else {
            crate::supervise::find_on_path(program, path_var.as_deref()).ok_or_else(|| {
                invalid(
                    "command[0]",
                    format!("'{program}' was not found on the daemon's PATH"),
                )
            })?
        };
        if input.acp && (input.turn_end_pattern.is_some() || input.quiet_ms.is_some()) {
            return Err(invalid(
                "acp",
                "an ACP session's turn-ends are its prompts' answers: turnEndPattern and quietMs do not apply",
            ));
        }
        if !input.acp && (input.prompt.is_some() || input.permission.is_some()) {
            return Err(invalid(
                "prompt",
                "prompt and permission are for ACP sessions (acp: true)",
            ));
        }
        let pattern = match &input.turn_end_pattern {
            Some(p) => {
                Some(regex::Regex::new(p).map_err(|e| invalid("turnEndPattern", e.to_string()))?)
            }
            None => None,
        };
        let super::sessions::Located { cwd, ws, anchor } =
            locate(&input.cwd, input.workspace.as_deref())?;
        let confinement = self.agent_confinement(&resolved, &anchor)?;
        // The agent starts in the very directory that was checked and
        // confined (its handle), not in whatever the path names by then.
        let relative_cwd = cwd.strip_prefix(&ws).unwrap_or(Path::new("."));
        let start_dir = anchor
            .open_dir(relative_cwd)
            .map_err(|e| invalid("cwd", e.to_string()))?;
        let cmd = super::agent_process::AgentCommand {
            program: resolved.clone(),
            args: input.command[1..].iter().map(Into::into).collect(),
            env: confinement.env,
            cwd: start_dir.proc_path(),
        };
        let scratch = confinement.scratch;
        let mode = engine.runner().config().sandbox.spawn;
        // It dies with the daemon (see `agent_process`), confined.
        let mut child = super::agent_process::spawn(cmd, confinement.rules, mode).map_err(|e| {
            invalid(
                "command",
                format!("cannot start {}: {e}", resolved.display()),
            )
        })?;
        let pid = child.id() as i64;
        let reg = RegisterInput {
            id: input.id.clone(),
            label: input.label.clone(),
            cwd: input.cwd.clone(),
            workspace: input.workspace.clone(),
            notify_url: input.notify_url.clone(),
            session_key: None,
        };
        let registered = match engine.sessions().register_with(
            reg,
            Some((input.command.clone(), pid)),
            &Caller::operator(),
        ) {
            // The session is pinned to the directory the agent was
            // confined to, or the agent does not run.
            Ok(s) if s.session.workspace_pin == Some(anchor.identity()) => s,
            Ok(s) => {
                let _ = child.kill();
                tracing::error!(session = %s.session.id, workspace = %ws.display(), "the workspace was replaced while the agent started");
                return Err(invalid(
                    "workspace",
                    format!(
                        "{} was replaced while the agent started; start it again",
                        ws.display()
                    ),
                ));
            }
            Err(e) => {
                let _ = child.kill();
                return Err(e);
            }
        };
        drop(start_dir);
        let session = &registered.session;
        if input.acp {
            let rule = input
                .permission
                .clone()
                .or_else(|| engine.runner().config().agents.permission.clone())
                .unwrap_or_default();
            let engine = engine.clone();
            let sid = session.id.clone();
            let first = input.prompt.clone();
            tokio::spawn(async move {
                engine
                    .agents()
                    .drive_acp(sid, child, cwd, first, rule)
                    .await;
                drop(scratch);
            });
            return Ok(registered);
        }
        if let Some(stdin) = child.stdin.take() {
            self.started
                .stdin
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(session.id.clone(), stdin);
        }
        let quiet = Duration::from_millis(input.quiet_ms.unwrap_or(DEFAULT_QUIET_MS).max(1));
        let sid = session.id.clone();
        tokio::spawn(async move {
            engine.agents().follow(sid, child, pattern, quiet).await;
            drop(scratch);
        });
        Ok(registered)
    }

    async fn follow(
        &self,
        sid: String,
        mut child: super::agent_process::Agent,
        pattern: Option<regex::Regex>,
        quiet: Duration,
    ) {
        let engine = self.engine();
        let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(256);
        for stream in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn futures_lite::AsyncRead + Unpin + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn futures_lite::AsyncRead + Unpin + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stream).lines();
                use futures_lite::StreamExt;
                while let Some(Ok(line)) = lines.next().await {
                    if tx.send(line).await.is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut tail = String::new();
        let mut turn_text = String::new();
        let mut dirty = false;
        loop {
            let next = if dirty && pattern.is_none() {
                match tokio::time::timeout(quiet, rx.recv()).await {
                    Ok(l) => l,
                    Err(_) => {
                        dirty = false;
                        let msg = std::mem::take(&mut turn_text);
                        if let Err(e) =
                            engine
                                .sessions()
                                .report(&sid, ReportKind::TurnEnd, Some(msg))
                        {
                            tracing::warn!(session = %sid, error = %e, "cannot record a turn-end");
                        }
                        continue;
                    }
                }
            } else {
                rx.recv().await
            };
            let Some(line) = next else { break };
            tail.push_str(&line);
            tail.push('\n');
            tail = cap(tail, STARTED_TAIL);
            turn_text.push_str(&line);
            turn_text.push('\n');
            turn_text = cap(turn_text, MAX_MESSAGE);
            if let Some(re) = &pattern {
                if re.is_match(&line) {
                    let msg = std::mem::take(&mut turn_text);
                    if let Err(e) = engine
                        .sessions()
                        .report(&sid, ReportKind::TurnEnd, Some(msg))
                    {
                        tracing::warn!(session = %sid, error = %e, "cannot record a turn-end");
                    }
                }
            } else {
                dirty = true;
            }
        }
        let status = child.status().await;
        self.started
            .stdin
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&sid);
        let how = match status {
            Ok(s) => format!("process ended: {s}"),
            Err(e) => format!("process could not be waited on: {e}"),
        };
        let mut msg = tail;
        msg.push_str(&format!("[{how}]"));
        if let Err(e) = engine
            .sessions()
            .report(&sid, ReportKind::Exited, Some(msg))
        {
            tracing::warn!(session = %sid, error = %e, "cannot record a session exit");
        }
    }

    /// Sessions started by a previous daemon are no longer followed: they
    /// are marked exited, saying what their process left. The agent died
    /// with its daemon (`agent_process`); what it started is killed (its
    /// process group, whose number no other process can hold meanwhile).
    /// An agent still alive is not re-adopted nor killed: it is reported.
    /// `sessions`: every session whose row does not decode (logged) and
    /// every started one that has not exited (`Store::sessions_to_recover`).
    pub(super) fn recover_started_sessions(&self, sessions: &[SessionRow]) -> EngineResult<()> {
        for s in sessions {
            if let Some(d) = &s.damage {
                tracing::error!(session = %s.id, column = %d.column, error = %d.message, "a session's stored row does not decode; it cannot be reported on");
                continue;
            }
            if s.command.is_none() || s.state == SessionState::Exited {
                continue;
            }
            let left = match (s.pid.and_then(|p| i32::try_from(p).ok()), &s.command) {
                (Some(pid), Some(argv)) if pid > 0 => {
                    super::agent_process::leftover_group(pid, argv).map(|l| (pid, l))
                }
                _ => None,
            };
            let message = match left {
                Some((pid, l)) if l.leader_alive => {
                    tracing::warn!(session = %s.id, pid, "a started session's process outlived its daemon; it is not followed nor killed");
                    format!(
                        "the daemon restarted; the session's process (pid {pid}) is still alive and no longer followed: gatehost neither re-adopts nor kills it"
                    )
                }
                Some((pid, l)) if !l.members.is_empty() => {
                    let killed = match super::agent_process::kill_group(pid) {
                        Ok(()) => "killed",
                        Err(e) => {
                            tracing::warn!(session = %s.id, pid, error = %e, "cannot kill what a started session's process left");
                            "could not kill"
                        }
                    };
                    tracing::warn!(session = %s.id, pid, members = ?l.members, killed, "the previous daemon's agent left processes");
                    format!(
                        "the daemon restarted; the session's process died with it, and gatehost {killed} the {} process(es) it left ({:?})",
                        l.members.len(),
                        l.members
                    )
                }
                _ => "the daemon restarted; the session's process died with it".into(),
            };
            self.engine()
                .sessions()
                .report(&s.id, ReportKind::Exited, Some(message))?;
        }
        Ok(())
    }
}
