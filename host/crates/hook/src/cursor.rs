//! Cursor's hooks (`.cursor/hooks.json` or `~/.cursor/hooks.json`,
//! `{"version": 1, "hooks": {"stop": [{"command", "timeout", "loop_limit"}]}}`):
//! `stop` gates, `beforeSubmitPrompt` marks a turn's start, `sessionStart`
//! registers the session.
//!
//! From Cursor's documentation (cursor.com/docs/agent/hooks; Cursor's CLI is
//! not on a registry, so this is not measured): every hook's stdin has
//! `conversation_id`, `generation_id`, `model`, `hook_event_name`,
//! `cursor_version`, `workspace_roots`, `user_email` and `transcript_path`
//! (a path or null); `stop` adds `status` (`completed`, `aborted`, `error`)
//! and `loop_count` (follow-ups so far); `beforeSubmitPrompt` adds `prompt`
//! and `attachments`; `sessionStart` adds `session_id`,
//! `is_background_agent` and `composer_mode`. The session is the
//! conversation; the workspace its first root. Cursor sends no last
//! message: it comes from the transcript when one is named.
//!
//! A `stop` hook continues the agent with `{"followup_message": "…"}`,
//! submitted as the next user message, at most `loop_limit` times (default
//! 5; `null` for no limit), and lets it stop with `{}`. Should Cursor run
//! `beforeSubmitPrompt` for that message, its `prompt` is recognised as
//! gatehost's own (the hook keeps the last reason's digest) and does not
//! start the count again. `beforeSubmitPrompt`
//! answers `{"continue": true}` (false would refuse the user's prompt).
//! Cursor shows the user no message from a stop hook, so a stop with a
//! message leaves it on stderr.
//!
//! Only a completed turn is gated: a stop the user aborted, or one that
//! ended in an error, is let through with `{}` (a follow-up would restart
//! an agent the person just stopped), and only registers the session.

use super::adapter::{Adapter, AgentCli, Answer, HookError, HookInput, HookPoint, Rendered};
use super::adapter::{parse_json, required};
use super::install::{HookSet, Layout};
use super::plan::{Dirs, Edit, InstallContext, PlaceError, Planned, Scope};
use serde::Deserialize;
use serde_json::json;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Cursor's [`Adapter`](crate::Adapter): its hook JSON, its answers and
/// where `hook install` writes its hooks ([`crate::adapter`] picks it for
/// `gatehost hook cursor`).
pub struct Cursor;

#[derive(Deserialize)]
struct Input {
    hook_event_name: Option<String>,
    conversation_id: Option<String>,
    #[serde(default)]
    workspace_roots: Vec<String>,
    transcript_path: Option<String>,
    status: Option<String>,
    loop_count: Option<u64>,
    prompt: Option<String>,
    generation_id: Option<String>,
}

/// `stop` statuses that are not the agent claiming it is done.
const NOT_DONE: [&str; 2] = ["aborted", "error"];

impl Adapter for Cursor {
    fn agent(&self) -> AgentCli {
        AgentCli::Cursor
    }

    fn program(&self) -> &'static str {
        "cursor-agent"
    }

    fn answer_keys(&self) -> &'static [&'static str] {
        &["followup_message", "continue"]
    }

    fn synthetic_stop(&self, id: &str, cwd: &Path, _message: &str) -> serde_json::Value {
        json!({"conversation_id": id, "hook_event_name": "stop",
            "status": "completed", "loop_count": 0, "workspace_roots": [cwd]})
    }

    fn session_end(&self, _id: &str, _cwd: &Path) -> Option<serde_json::Value> {
        None
    }

    /// `/etc/cursor/hooks.json`.
    fn managed_files(
        &self,
        _env: &dyn Fn(&str) -> Option<OsString>,
        _list: &dyn Fn(&Path) -> Vec<PathBuf>,
    ) -> Vec<PathBuf> {
        vec![PathBuf::from("/etc/cursor/hooks.json")]
    }

    fn layout(&self) -> Layout {
        Layout::Flat
    }

    fn hook_files(&self, scope: Scope, dirs: &Dirs<'_>) -> Result<Vec<PathBuf>, PlaceError> {
        let base = match scope {
            Scope::User => dirs.home()?,
            Scope::Project => dirs.project()?,
        };
        Ok(vec![
            base.join(".cursor/hooks.json"),
            base.join(".cursor/mcp.json"),
        ])
    }

    fn plan(&self, ctx: &InstallContext<'_>, out: &mut Planned) {
        let hook = json!({"command": ctx.command});
        out.push(
            &ctx.files[0],
            Edit::Hooks(HookSet {
                layout: Layout::Flat,
                entries: vec![
                    ("stop".into(), hook.clone()),
                    ("beforeSubmitPrompt".into(), hook),
                ],
            }),
        );
        if let Some(mcp) = ctx.mcp_server() {
            out.push(&ctx.files[1], mcp);
        }
    }

    fn parse(&self, input: &[u8]) -> Result<HookInput, HookError> {
        let i: Input = parse_json(input)?;
        let event = required("hook_event_name", i.hook_event_name)?;
        let point = match event.as_str() {
            "stop" if i.status.as_deref().is_some_and(|s| NOT_DONE.contains(&s)) => {
                HookPoint::SessionStart
            }
            // A missing or new status is gated: fail closed.
            "stop" => HookPoint::Stop,
            "beforeSubmitPrompt" => HookPoint::TurnStart,
            "sessionStart" => HookPoint::SessionStart,
            _ => return Err(HookError::UnknownEvent(event)),
        };
        let cwd = required(
            "workspace_roots",
            i.workspace_roots.into_iter().find(|r| !r.trim().is_empty()),
        )?;
        let hint = match (i.status, i.loop_count) {
            (Some(s), Some(n)) => Some(format!("status={s} loop_count={n}")),
            (Some(s), None) => Some(format!("status={s}")),
            (None, Some(n)) => Some(format!("loop_count={n}")),
            (None, None) => None,
        };
        Ok(HookInput {
            point,
            session_id: required("conversation_id", i.conversation_id)?,
            cwd: cwd.into(),
            last_message: None,
            transcript_path: i.transcript_path.filter(|p| !p.is_empty()).map(Into::into),
            loop_hint: hint,
            prompt: i.prompt.filter(|_| point == HookPoint::TurnStart),
            generation_id: i.generation_id.filter(|g| !g.trim().is_empty()),
            subagent: None,
        })
    }

    fn render(&self, point: HookPoint, answer: &Answer) -> Rendered {
        let stdout = match (point, answer) {
            (HookPoint::Stop, Answer::Block(reason)) => {
                json!({"followup_message": reason}).to_string()
            }
            // Never refuse a person's prompt.
            (HookPoint::TurnStart, _) => json!({"continue": true}).to_string(),
            _ => "{}".to_string(),
        };
        Rendered { stdout, exit: 0 }
    }

    fn cli_timeout(&self) -> Duration {
        Duration::from_secs(60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    // Built from Cursor's documented fields (tests/fixtures/hooks/cursor/README.md).
    const STOP: &str = include_str!("../../../../tests/fixtures/hooks/cursor/stop-completed.json");
    const STOP_FOLLOWUP: &str =
        include_str!("../../../../tests/fixtures/hooks/cursor/stop-followup.json");
    const STOP_ABORTED: &str =
        include_str!("../../../../tests/fixtures/hooks/cursor/stop-aborted.json");
    const STOP_ERROR: &str =
        include_str!("../../../../tests/fixtures/hooks/cursor/stop-error.json");
    const STOP_BOM: &[u8] = include_bytes!("../../../../tests/fixtures/hooks/cursor/stop-bom.json");
    const PROMPT: &str =
        include_str!("../../../../tests/fixtures/hooks/cursor/before-submit-prompt.json");
    const SESSION_START: &str =
        include_str!("../../../../tests/fixtures/hooks/cursor/session-start.json");
    const FILE_EDIT: &str =
        include_str!("../../../../tests/fixtures/hooks/cursor/after-file-edit.json");

    const CONVERSATION: &str = "cdefee2d-2727-4b73-bf77-d9d830f31d2a";

    fn value(s: &str) -> serde_json::Value {
        serde_json::from_str(s).expect("JSON")
    }

    #[test]
    fn a_completed_stop_is_gated_in_the_first_workspace_root() {
        let i = Cursor.parse(STOP.as_bytes()).unwrap();
        assert_eq!(i.point, HookPoint::Stop);
        assert_eq!(i.session_id, CONVERSATION);
        assert_eq!(i.cwd, PathBuf::from("/home/user/project"));
        assert_eq!(i.last_message, None);
        assert_eq!(i.transcript_path, None, "transcript_path: null");
        assert_eq!(
            i.loop_hint.as_deref(),
            Some("status=completed loop_count=0")
        );

        let i = Cursor.parse(STOP_FOLLOWUP.as_bytes()).unwrap();
        assert_eq!(i.point, HookPoint::Stop);
        assert_eq!(i.cwd, PathBuf::from("/home/user/project"));
        assert_eq!(
            i.transcript_path,
            Some(PathBuf::from(
                "/home/user/.cursor/projects/home-user-project/agent-transcripts/cdefee2d-2727-4b73-bf77-d9d830f31d2a.jsonl"
            ))
        );
        // loop_count is logged, never used to count.
        assert_eq!(
            i.loop_hint.as_deref(),
            Some("status=completed loop_count=2")
        );
    }

    #[test]
    fn an_aborted_or_failed_turn_is_not_gated() {
        for raw in [STOP_ABORTED, STOP_ERROR] {
            let i = Cursor.parse(raw.as_bytes()).unwrap();
            assert_eq!(i.point, HookPoint::SessionStart, "{raw}");
            assert_eq!(i.session_id, CONVERSATION);
            assert!(i.loop_hint.unwrap().starts_with("status="));
        }
        // A status Cursor may add later, or none, is gated (fail closed).
        for status in [json!("interrupted"), serde_json::Value::Null] {
            let mut v = value(STOP);
            v["status"] = status;
            assert_eq!(
                Cursor.parse(v.to_string().as_bytes()).unwrap().point,
                HookPoint::Stop
            );
        }
    }

    #[test]
    fn prompts_and_session_starts_map_and_other_events_are_errors() {
        let i = Cursor.parse(PROMPT.as_bytes()).unwrap();
        assert_eq!(i.point, HookPoint::TurnStart);
        assert_eq!(i.session_id, CONVERSATION);
        assert_eq!(i.loop_hint, None);
        let i = Cursor.parse(SESSION_START.as_bytes()).unwrap();
        assert_eq!(i.point, HookPoint::SessionStart);
        assert_eq!(i.session_id, CONVERSATION);
        let e = Cursor.parse(FILE_EDIT.as_bytes()).unwrap_err();
        assert_eq!(e, HookError::UnknownEvent("afterFileEdit".into()));
    }

    #[test]
    fn a_bom_is_skipped_and_missing_fields_name_themselves() {
        let i = Cursor.parse(STOP_BOM).unwrap();
        assert_eq!(i.point, HookPoint::Stop);
        assert_eq!(i.session_id, CONVERSATION);
        for (field, empty) in [
            ("workspace_roots", json!([])),
            ("workspace_roots", json!([""])),
            ("conversation_id", json!("")),
        ] {
            let mut v = value(STOP);
            v[field] = empty;
            let e = Cursor.parse(v.to_string().as_bytes()).unwrap_err();
            assert!(e.to_string().contains(field), "{e}");
        }
        let mut v = value(STOP);
        v["loop_count"] = json!("two");
        let e = Cursor.parse(v.to_string().as_bytes()).unwrap_err();
        assert!(e.to_string().contains("loop_count"), "{e}");
    }

    #[test]
    fn answers_are_the_documented_json_with_exit_0() {
        let r = Cursor.render(HookPoint::Stop, &Answer::Block("tests fail".into()));
        assert_eq!(value(&r.stdout), json!({"followup_message": "tests fail"}));
        assert_eq!(r.exit, 0);
        for answer in [Answer::Proceed, Answer::StopWithMessage("blocked".into())] {
            let r = Cursor.render(HookPoint::Stop, &answer);
            assert_eq!(r.stdout, "{}", "{answer:?}");
            assert_eq!(r.exit, 0);
        }
        for answer in [Answer::Proceed, Answer::Block("x".into())] {
            let r = Cursor.render(HookPoint::TurnStart, &answer);
            assert_eq!(value(&r.stdout), json!({"continue": true}));
        }
        let r = Cursor.render(HookPoint::SessionStart, &Answer::Block("x".into()));
        assert_eq!(r.stdout, "{}");
    }
}
