//! Sessions: agent runs the daemon knows, registered and reported through
//! the API (how agent hooks feed it), or started and followed by gatehost.
//!
//! A report is one transaction: the session row, its event, and the
//! policies it moves (a member's turn-end or exit leaves their pending set;
//! an empty set queues the gate). For a session gatehost started, a
//! turn-end is a stdout line matching its `turnEndPattern`, or, without
//! one, `quietMs` of silence after output; its exit is `exited`; nudges
//! are written to its stdin as one line.

use super::machine::Input;
use super::{Engine, EngineError, EngineResult};
use crate::config::Trust;
use crate::store::{PolicyStatus, SessionRow, SessionState, now_ms};
use futures_lite::{AsyncBufReadExt, AsyncWriteExt, io::BufReader};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// The most of a message kept per report.
const MAX_MESSAGE: usize = 64 * 1024;
/// Output kept for a started session.
const STARTED_TAIL: usize = 64 * 1024;
const DEFAULT_QUIET_MS: u64 = 3000;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RegisterInput {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub cwd: String,
    /// Default: the nearest folder at or above `cwd` holding `.git`, else `cwd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify_url: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StartInput {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub cwd: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify_url: Option<String>,
    /// The argv; the program is a bare name looked up on the daemon's PATH
    /// or an absolute path.
    pub command: Vec<String>,
    /// A regex; a stdout line matching it ends a turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_end_pattern: Option<String>,
    /// Without a pattern: this much silence after output ends a turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quiet_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReportKind {
    TurnStart,
    TurnEnd,
    AwaitingInput,
    Exited,
    Heartbeat,
}

/// What a report did: its event's cursor (none for a heartbeat) and the
/// policies a turn-end counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReportOutcome {
    pub cursor: Option<i64>,
    pub policies: Vec<String>,
}

/// Stdin of the sessions gatehost started and follows.
#[derive(Default)]
pub(super) struct Started {
    stdin: Mutex<HashMap<String, async_process::ChildStdin>>,
}

fn invalid(field: &str, message: impl Into<String>) -> EngineError {
    EngineError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
}

/// Resolves cwd and workspace to canonical paths, cwd inside workspace.
fn locate(cwd: &str, workspace: Option<&str>) -> EngineResult<(PathBuf, PathBuf)> {
    let cwd_path = Path::new(cwd);
    if !cwd_path.is_absolute() {
        return Err(invalid("cwd", "must be an absolute path"));
    }
    let cwd_real =
        std::fs::canonicalize(cwd_path).map_err(|e| invalid("cwd", format!("{cwd}: {e}")))?;
    if !cwd_real.is_dir() {
        return Err(invalid("cwd", format!("{cwd} is not a directory")));
    }
    let ws = match workspace {
        Some(w) => {
            if !Path::new(w).is_absolute() {
                return Err(invalid("workspace", "must be an absolute path"));
            }
            std::fs::canonicalize(w).map_err(|e| invalid("workspace", format!("{w}: {e}")))?
        }
        None => cwd_real
            .ancestors()
            .find(|a| a.join(".git").exists())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| cwd_real.clone()),
    };
    if !cwd_real.starts_with(&ws) {
        return Err(invalid(
            "cwd",
            format!(
                "{} is not inside the workspace {}",
                cwd_real.display(),
                ws.display()
            ),
        ));
    }
    Ok((cwd_real, ws))
}

/// A session's webhook must go where the operator allows
/// (`[daemon] notify_url_prefixes`).
fn check_url(url: &Option<String>, prefixes: &[String]) -> EngineResult<()> {
    let Some(u) = url else {
        return Ok(());
    };
    if !(u.starts_with("http://") || u.starts_with("https://")) {
        return Err(invalid("notifyUrl", "must be an http:// or https:// URL"));
    }
    if !prefixes.iter().any(|p| u.starts_with(p.as_str())) {
        return Err(invalid(
            "notifyUrl",
            if prefixes.is_empty() {
                "session webhooks are off on this daemon (the operator lists allowed URLs in [daemon] notify_url_prefixes)".to_string()
            } else {
                format!("must start with one of: {}", prefixes.join(", "))
            },
        ));
    }
    Ok(())
}

/// No workspace, whoever registers it, holds or lies inside the host's own
/// places (data directory, tokens, configuration, cache, scratch,
/// worktrees): the agent writes its workspace and its gates read it.
fn check_clear_of_host(ws: &Path, places: &[PathBuf]) -> EngineResult<()> {
    match crate::config::overlapping_place(ws, places) {
        None => Ok(()),
        Some(place) => Err(EngineError::Forbidden {
            code: "workspace-overlaps-host",
            message: format!(
                "the workspace {} overlaps gatehost's own {} (its data directory, tokens, configuration, cache, scratch or worktrees); register the project directory itself",
                ws.display(),
                place.display()
            ),
        }),
    }
}

/// The agent token registers workspaces only under the configured roots.
fn check_root(ws: &Path, roots: &[PathBuf]) -> EngineResult<()> {
    let inside = roots
        .iter()
        .any(|r| std::fs::canonicalize(r).is_ok_and(|r| ws.starts_with(&r)));
    if inside {
        return Ok(());
    }
    let listed: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
    Err(EngineError::Forbidden {
        code: "workspace-not-allowed",
        message: format!(
            "the agent token may register workspaces only under [daemon] workspace_roots ({}); {} is not; the operator token may",
            if listed.is_empty() {
                "none configured".to_string()
            } else {
                listed.join(", ")
            },
            ws.display()
        ),
    })
}

fn cap(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = s.len() - max;
        while !s.is_char_boundary(cut) {
            cut += 1;
        }
        s = s[cut..].to_string();
    }
    s
}

impl Engine {
    /// Registers a session for the credential `by`, or updates the label,
    /// cwd and URL of a known one it owns (hooks may register on every
    /// start). The agent token registers only under `workspace_roots` and
    /// never takes over a session the operator registered or started.
    pub fn register(&self, input: RegisterInput, by: Trust) -> EngineResult<SessionRow> {
        self.register_with(input, None, by)
    }

    fn register_with(
        &self,
        input: RegisterInput,
        command: Option<(Vec<String>, i64)>,
        by: Trust,
    ) -> EngineResult<SessionRow> {
        let id = input
            .id
            .clone()
            .unwrap_or_else(|| format!("ses_{}", uuid::Uuid::new_v4().simple()));
        if !valid_id(&id) {
            return Err(invalid(
                "id",
                "1 to 128 characters among letters, digits, '-', '_', '.', ':'",
            ));
        }
        if let Some(l) = &input.label
            && l.len() > super::attach::MAX_LABEL
        {
            return Err(invalid(
                "label",
                format!(
                    "{} bytes: at most {} are accepted",
                    l.len(),
                    super::attach::MAX_LABEL
                ),
            ));
        }
        let daemon = &self.inner.runner.config().daemon;
        check_url(&input.notify_url, &daemon.notify_url_prefixes)?;
        let (cwd, ws) = locate(&input.cwd, input.workspace.as_deref())?;
        if by == Trust::Agent {
            check_root(&ws, &daemon.workspace_roots)?;
        }
        check_clear_of_host(&ws, &self.inner.runner.config().host_places())?;
        self.write(|tx| {
            let now = now_ms();
            let existing = tx.session(&id)?;
            if let Some(e) = &existing
                && e.owner == Trust::Operator
                && by == Trust::Agent
            {
                return Err(EngineError::Forbidden {
                    code: "session-owned-by-operator",
                    message: format!(
                        "session '{id}' was registered by the operator; the agent token cannot register it again, move it or change its webhook"
                    ),
                });
            }
            let mut s = existing.clone().unwrap_or(SessionRow {
                id: id.clone(),
                label: None,
                cwd: String::new(),
                workspace: String::new(),
                state: SessionState::Running,
                turns: 0,
                last_turn_cursor: None,
                last_message: None,
                heartbeat_at: Some(now),
                notify_url: None,
                command: None,
                pid: None,
                created_at: now,
                updated_at: now,
                owner: by,
            });
            s.label = input.label.clone().or(s.label);
            s.cwd = cwd.display().to_string();
            s.workspace = ws.display().to_string();
            s.notify_url = input.notify_url.clone().or(s.notify_url);
            if let Some((argv, pid)) = &command {
                s.command = Some(argv.clone());
                s.pid = Some(*pid);
                s.state = SessionState::Running;
            }
            s.updated_at = now;
            tx.put_session(&s)?;
            if existing.is_none() {
                tx.append_event(
                    "session:registered",
                    Some(&s.id),
                    None,
                    &json!({"sessionId": s.id, "cwd": s.cwd, "workspace": s.workspace, "label": s.label, "started": command.is_some()}),
                    &self.inner.webhooks,
                )?;
            }
            Ok(s)
        })
    }

    /// A report from (or about) a session. Returns the event cursor, or
    /// `None` for a heartbeat (which only updates the session).
    pub fn report(
        &self,
        id: &str,
        kind: ReportKind,
        message: Option<String>,
    ) -> EngineResult<Option<i64>> {
        self.report_counted(id, kind, message).map(|r| r.cursor)
    }

    /// [`Engine::report`], also naming, for a turn-end, the policies whose
    /// verdict on the session's work is to come: those it counted (watching
    /// the session, which was pending in them) and those already judging it
    /// (queued, gating or nudging), so a caller (a CLI's stop hook) knows
    /// whose verdicts to wait for.
    pub fn report_counted(
        &self,
        id: &str,
        kind: ReportKind,
        message: Option<String>,
    ) -> EngineResult<ReportOutcome> {
        let message = message.map(|m| cap(m, MAX_MESSAGE));
        let mut counted = Vec::new();
        let (cursor, queued) = self.write(|tx| {
            counted.clear();
            let mut s = tx
                .session(id)?
                .ok_or_else(|| EngineError::NotFound(format!("no session '{id}'")))?;
            let now = now_ms();
            s.heartbeat_at = Some(now);
            s.updated_at = now;
            let (event, state) = match kind {
                ReportKind::Heartbeat => {
                    tx.put_session(&s)?;
                    return Ok((None, Vec::new()));
                }
                ReportKind::TurnStart => ("session:turn-start", SessionState::Running),
                ReportKind::TurnEnd => ("session:turn-end", SessionState::Idle),
                ReportKind::AwaitingInput => ("session:awaiting-input", SessionState::AwaitingInput),
                ReportKind::Exited => ("session:exited", SessionState::Exited),
            };
            if s.state == SessionState::Exited && kind != ReportKind::Exited {
                return Err(EngineError::Conflict {
                    code: "exited",
                    message: format!("session {id} has exited"),
                });
            }
            if s.state == SessionState::Exited {
                // A second exit report changes nothing and publishes nothing.
                return Ok((None, Vec::new()));
            }
            s.state = state;
            if kind == ReportKind::TurnEnd {
                s.turns += 1;
            }
            if let Some(m) = &message {
                s.last_message = Some(m.clone());
            }
            let cursor = tx.append_event(
                event,
                Some(id),
                None,
                &json!({"sessionId": id, "state": state.as_str(), "turn": s.turns, "message": message}),
                &self.inner.webhooks,
            )?;
            if matches!(kind, ReportKind::TurnEnd | ReportKind::Exited) {
                s.last_turn_cursor = Some(cursor);
            }
            tx.put_session(&s)?;
            let mut queued = Vec::new();
            if matches!(kind, ReportKind::TurnEnd | ReportKind::Exited) {
                // Policies already judging this session (a gate still
                // running from an earlier turn-end) give their verdict
                // next: a caller waiting for verdicts waits for theirs too.
                if kind == ReportKind::TurnEnd {
                    counted.extend(tx.judging_with(id)?);
                }
                for mut p in tx.watching_with(id)? {
                    if cursor <= p.watch_after {
                        continue;
                    }
                    let before = p.pending.len();
                    p.pending.retain(|m| m != id);
                    if p.pending.len() == before {
                        continue;
                    }
                    let more_pending = !p.pending.is_empty();
                    counted.push(p.id.clone());
                    let step = self.transition(tx, &mut p, Input::TurnEnd { more_pending }, |_| {
                        json!({"reason": format!("session {id}: {event}")})
                    })?;
                    if let Some(step) = step.filter(|s| s.to == PolicyStatus::Queued) {
                        let slot = self.try_start_gating(tx, &mut p)?;
                        queued.push((p.id.clone(), step, slot));
                    }
                }
            }
            Ok((Some(cursor), queued))
        })?;
        for (pid, step, slot) in queued {
            match slot {
                Some(slot) => self.schedule_gate_with(&pid, Some(slot)),
                None => self.perform(&pid, &step),
            }
        }
        Ok(ReportOutcome {
            cursor,
            policies: counted,
        })
    }

    /// Writes a prompt (a nudge) to a started session's stdin. Sessions
    /// registered from outside get it as the `policy:nudge` event only.
    pub(crate) async fn deliver_prompt(&self, session_id: &str, message: &str) {
        let stdin = self
            .inner
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
            self.inner
                .started
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
    pub fn start_session(&self, input: StartInput) -> EngineResult<SessionRow> {
        let Some(program) = input.command.first() else {
            return Err(invalid("command", "must name a program"));
        };
        let path_var = self.inner.runner.config().host_path.clone();
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
        let pattern = match &input.turn_end_pattern {
            Some(p) => {
                Some(regex::Regex::new(p).map_err(|e| invalid("turnEndPattern", e.to_string()))?)
            }
            None => None,
        };
        let (cwd, _) = locate(&input.cwd, input.workspace.as_deref())?;
        let mut cmd = std::process::Command::new(&resolved);
        cmd.args(&input.command[1..]).current_dir(&cwd);
        // It dies with the daemon (see `agent_process`).
        let mut child = super::agent_process::spawn(cmd).map_err(|e| {
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
        };
        let session =
            match self.register_with(reg, Some((input.command.clone(), pid)), Trust::Operator) {
                Ok(s) => s,
                Err(e) => {
                    let _ = child.kill();
                    return Err(e);
                }
            };
        if let Some(stdin) = child.stdin.take() {
            self.inner
                .started
                .stdin
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(session.id.clone(), stdin);
        }
        let quiet = Duration::from_millis(input.quiet_ms.unwrap_or(DEFAULT_QUIET_MS).max(1));
        let engine = self.clone();
        let sid = session.id.clone();
        tokio::spawn(async move {
            engine.follow(sid, child, pattern, quiet).await;
        });
        Ok(session)
    }

    async fn follow(
        &self,
        sid: String,
        mut child: async_process::Child,
        pattern: Option<regex::Regex>,
        quiet: Duration,
    ) {
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
                        if let Err(e) = self.report(&sid, ReportKind::TurnEnd, Some(msg)) {
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
                    if let Err(e) = self.report(&sid, ReportKind::TurnEnd, Some(msg)) {
                        tracing::warn!(session = %sid, error = %e, "cannot record a turn-end");
                    }
                }
            } else {
                dirty = true;
            }
        }
        let status = child.status().await;
        self.inner
            .started
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
        if let Err(e) = self.report(&sid, ReportKind::Exited, Some(msg)) {
            tracing::warn!(session = %sid, error = %e, "cannot record a session exit");
        }
    }

    /// Sessions started by a previous daemon are no longer followed: they
    /// are marked exited, saying what their process left. The agent died
    /// with its daemon (`agent_process`); what it started is killed (its
    /// process group, whose number no other process can hold meanwhile).
    /// An agent still alive is not re-adopted nor killed: it is reported.
    pub(super) fn recover_started_sessions(&self) -> EngineResult<()> {
        for s in self.inner.store.sessions()? {
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
            self.report(&s.id, ReportKind::Exited, Some(message))?;
        }
        Ok(())
    }
}
