//! Cursor's hooks (`.cursor/hooks.json`, `version: 1`): `stop` gates,
//! `beforeSubmitPrompt` marks a turn's start.
//!
//! Stdin (all hooks): `conversation_id`, `generation_id`, `hook_event_name`,
//! `workspace_roots`; `stop` adds `status` (`completed`, `aborted`, `error`)
//! and `loop_count`. Cursor sends no last message: it comes from the
//! transcript when one is named. To continue the agent, a `stop` hook answers
//! `{"followup_message": "…"}` (submitted as the next user message); to let
//! it stop, `{}`. Cursor shows the user no message from a stop hook, so a
//! stop with a message is logged on stderr.

use super::adapter::{Adapter, AgentCli, Answer, HookError, HookInput, HookPoint, Rendered};
use super::adapter::{parse_json, required};
use serde::Deserialize;
use serde_json::json;
use std::time::Duration;

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
}

impl Adapter for Cursor {
    fn agent(&self) -> AgentCli {
        AgentCli::Cursor
    }

    fn parse(&self, input: &[u8]) -> Result<HookInput, HookError> {
        let i: Input = parse_json(input)?;
        let event = required("hook_event_name", i.hook_event_name)?;
        let point = match event.as_str() {
            "stop" => HookPoint::Stop,
            "beforeSubmitPrompt" => HookPoint::TurnStart,
            _ => return Err(HookError::UnknownEvent(event)),
        };
        let cwd = required("workspace_roots", i.workspace_roots.into_iter().next())?;
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
        })
    }

    fn render(&self, point: HookPoint, answer: &Answer) -> Rendered {
        let stdout = match (point, answer) {
            (HookPoint::Stop, Answer::Block(reason)) => {
                json!({"followup_message": reason}).to_string()
            }
            (HookPoint::TurnStart, _) => json!({"continue": true}).to_string(),
            _ => "{}".to_string(),
        };
        Rendered { stdout, exit: 0 }
    }

    fn cli_timeout(&self) -> Duration {
        Duration::from_secs(60)
    }
}
