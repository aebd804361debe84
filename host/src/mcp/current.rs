//! Which daemon session the calling agent is (`session_current`, and the
//! default session of `policy_attach` and `session_events_poll`): the one
//! named by `GATEHOST_SESSION` in the MCP server's environment (what a CLI
//! or its user passes), else the live session registered in the server's
//! working directory (the agent CLI starts its MCP servers there, and its
//! hook registered the session there at its first hook) whose key this
//! user's keyring holds, the most recently heard from first.
//!
//! It owns that choice ([`choose`], pure) and the reading of the sessions
//! it chooses from. It must never widen what the agent may do: the daemon
//! still checks the session's key on every attach, so the choice only
//! saves the agent from guessing its own id.

use crate::client::Client;
use crate::wire::{ErrorDetail, PageQuery, Session, SessionState};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The environment variable that names the session outright.
pub const SESSION_VAR: &str = "GATEHOST_SESSION";

/// The most sessions read to choose from.
const MAX_SCANNED: usize = 20_000;

/// Where the MCP server runs and what it was told.
#[derive(Debug, Clone, Default)]
pub struct Whereabouts {
    /// The server's working directory.
    pub cwd: PathBuf,
    /// `GATEHOST_SESSION`, if set.
    pub pinned: Option<String>,
}

impl Whereabouts {
    /// This process's: its working directory and environment.
    pub fn of_this_process() -> Whereabouts {
        Whereabouts {
            cwd: std::env::current_dir().unwrap_or_default(),
            pinned: std::env::var(SESSION_VAR)
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty()),
        }
    }
}

/// The session chosen, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Current {
    pub session_id: String,
    /// `GATEHOST_SESSION`, or `workspace` (the live session registered in
    /// the server's directory).
    pub how: &'static str,
    pub cwd: PathBuf,
    /// Other live sessions of this workspace whose keys are held, newest
    /// first: the choice fell on the most recently heard from.
    pub also_live: Vec<String>,
}

/// The current session among `sessions`; `has_key` says whether this
/// user's keyring holds a session's key. Pure.
pub(super) fn choose(
    at: &Whereabouts,
    sessions: &[Session],
    has_key: &dyn Fn(&str) -> bool,
) -> Result<Current, ErrorDetail> {
    if let Some(id) = &at.pinned {
        return Ok(Current {
            session_id: id.clone(),
            how: SESSION_VAR,
            cwd: at.cwd.clone(),
            also_live: Vec::new(),
        });
    }
    let here = canonical(&at.cwd);
    let mut live: Vec<&Session> = sessions
        .iter()
        .filter(|s| s.state != SessionState::Exited && s.damage.is_none())
        .filter(|s| canonical(Path::new(&s.cwd)) == here)
        .filter(|s| has_key(&s.id))
        .collect();
    live.sort_by_key(|s| std::cmp::Reverse(s.heartbeat_at.unwrap_or(s.updated_at)));
    let Some(first) = live.first() else {
        return Err(ErrorDetail {
            code: "no-current-session".into(),
            message: format!(
                "no live session of yours is registered in {}",
                at.cwd.display()
            ),
            field: Some("sessionId".into()),
            hint: Some(format!(
                "pass sessionId (an agent CLI's hook registers AGENT:<its session id> at its first hook), \
                 or set {SESSION_VAR} in the MCP server's environment"
            )),
        });
    };
    Ok(Current {
        session_id: first.id.clone(),
        how: "workspace",
        cwd: here,
        also_live: live[1..].iter().map(|s| s.id.clone()).collect(),
    })
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The current session, reading the daemon's sessions (in pages).
pub(super) async fn find(client: &Client, at: &Whereabouts) -> Result<Current, ErrorDetail> {
    if at.pinned.is_some() {
        return choose(at, &[], &|_| false);
    }
    let mut sessions = Vec::new();
    let mut cursor = None;
    loop {
        let page = client
            .sessions(&PageQuery {
                limit: Some(1000),
                cursor,
                ..Default::default()
            })
            .await
            .map_err(super::answer::from_client)?;
        sessions.extend(page.sessions);
        match page.next_cursor {
            Some(next) if sessions.len() < MAX_SCANNED => cursor = Some(next),
            _ => break,
        }
    }
    choose(at, &sessions, &|id| client.holds_key(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: &str, cwd: &Path, state: SessionState, heard: i64) -> Session {
        let mut s: Session = serde_json::from_value(serde_json::json!({
            "id": id, "cwd": cwd, "workspace": cwd, "state": "idle", "turns": 0,
            "createdAt": 0, "updatedAt": heard, "owner": "agent",
        }))
        .expect("a session");
        s.state = state;
        s.heartbeat_at = Some(heard);
        s
    }

    #[test]
    fn the_newest_live_session_of_this_workspace_whose_key_is_held() {
        let dir = tempfile::tempdir().expect("tmp");
        let ws = dir.path().join("ws");
        let other = dir.path().join("other");
        std::fs::create_dir_all(&ws).expect("ws");
        std::fs::create_dir_all(&other).expect("other");
        let sessions = [
            session("claude:old", &ws, SessionState::Idle, 10),
            session("claude:new", &ws, SessionState::Running, 20),
            session("claude:gone", &ws, SessionState::Exited, 30),
            session("claude:theirs", &ws, SessionState::Running, 40),
            session("claude:elsewhere", &other, SessionState::Running, 50),
        ];
        let mine = |id: &str| id != "claude:theirs";
        let at = Whereabouts {
            cwd: ws.clone(),
            pinned: None,
        };
        let c = choose(&at, &sessions, &mine).expect("current");
        assert_eq!(c.session_id, "claude:new");
        assert_eq!(c.also_live, ["claude:old"]);
        assert_eq!(c.how, "workspace");
        // Another directory, or no key: none, said with what to do.
        let away = Whereabouts {
            cwd: dir.path().to_path_buf(),
            pinned: None,
        };
        let e = choose(&away, &sessions, &mine).expect_err("none here");
        assert_eq!(e.code, "no-current-session");
        assert!(e.hint.expect("hint").contains(SESSION_VAR));
        assert!(choose(&at, &sessions, &|_| false).is_err());
        // GATEHOST_SESSION wins.
        let pinned = Whereabouts {
            cwd: ws,
            pinned: Some("codex:x".into()),
        };
        assert_eq!(
            choose(&pinned, &sessions, &mine)
                .expect("pinned")
                .session_id,
            "codex:x"
        );
    }
}
