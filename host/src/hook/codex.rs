//! Codex CLI's hooks (`hooks.json`, feature `codex_hooks`): `Stop` gates,
//! `SessionStart` and `UserPromptSubmit` register and mark turns.
//!
//! Stdin: `session_id`, `turn_id`, `transcript_path`, `cwd`, `model`,
//! `permission_mode`, `hook_event_name`; `Stop` adds `stop_hook_active` and
//! `last_assistant_message`. A block is `{"decision": "block", "reason"}`
//! (the reason is required) with exit 0; a message for the user is
//! `systemMessage`.

use super::adapter::{Adapter, AgentCli, Answer, HookError, HookInput, HookPoint, Rendered};
use super::adapter::{parse_json, required};
use serde::Deserialize;
use serde_json::json;
use std::time::Duration;

pub struct Codex;

#[derive(Deserialize)]
struct Input {
    hook_event_name: Option<String>,
    session_id: Option<String>,
    cwd: Option<String>,
    transcript_path: Option<String>,
    last_assistant_message: Option<String>,
    stop_hook_active: Option<bool>,
}

impl Adapter for Codex {
    fn agent(&self) -> AgentCli {
        AgentCli::Codex
    }

    fn parse(&self, input: &[u8]) -> Result<HookInput, HookError> {
        let i: Input = parse_json(input)?;
        let event = required("hook_event_name", i.hook_event_name)?;
        let point = match event.as_str() {
            "Stop" => HookPoint::Stop,
            "SessionStart" => HookPoint::SessionStart,
            "UserPromptSubmit" => HookPoint::TurnStart,
            _ => return Err(HookError::UnknownEvent(event)),
        };
        Ok(HookInput {
            point,
            session_id: required("session_id", i.session_id)?,
            cwd: required("cwd", i.cwd)?.into(),
            last_message: i.last_assistant_message,
            transcript_path: i.transcript_path.filter(|p| !p.is_empty()).map(Into::into),
            loop_hint: i.stop_hook_active.map(|a| format!("stop_hook_active={a}")),
        })
    }

    fn render(&self, point: HookPoint, answer: &Answer) -> Rendered {
        let stdout = match (point, answer) {
            (_, Answer::Proceed) => String::new(),
            (HookPoint::Stop, Answer::Block(reason)) => {
                json!({"decision": "block", "reason": reason}).to_string()
            }
            (_, Answer::Block(message) | Answer::StopWithMessage(message)) => {
                json!({"systemMessage": message}).to_string()
            }
        };
        Rendered { stdout, exit: 0 }
    }

    fn cli_timeout(&self) -> Duration {
        Duration::from_secs(600)
    }
}
