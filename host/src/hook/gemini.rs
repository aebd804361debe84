//! Gemini CLI's hooks: `AfterAgent` gates, `SessionStart` and `BeforeAgent`
//! register and mark turns.
//!
//! Stdin: `session_id`, `transcript_path`, `cwd`, `hook_event_name`,
//! `timestamp`; `AfterAgent` adds `prompt`, `prompt_response` (the agent's
//! last message) and `stop_hook_active`. A block is `{"decision": "deny",
//! "reason"}` with exit 0 (the reason goes back as a new prompt); a message
//! for the user is `systemMessage`. Stdout must be JSON and nothing else.

use super::adapter::{Adapter, AgentCli, Answer, HookError, HookInput, HookPoint, Rendered};
use super::adapter::{parse_json, required};
use serde::Deserialize;
use serde_json::json;
use std::time::Duration;

pub struct Gemini;

#[derive(Deserialize)]
struct Input {
    hook_event_name: Option<String>,
    session_id: Option<String>,
    cwd: Option<String>,
    transcript_path: Option<String>,
    prompt_response: Option<String>,
    stop_hook_active: Option<bool>,
}

impl Adapter for Gemini {
    fn agent(&self) -> AgentCli {
        AgentCli::Gemini
    }

    fn parse(&self, input: &[u8]) -> Result<HookInput, HookError> {
        let i: Input = parse_json(input)?;
        let event = required("hook_event_name", i.hook_event_name)?;
        let point = match event.as_str() {
            "AfterAgent" => HookPoint::Stop,
            "SessionStart" => HookPoint::SessionStart,
            "BeforeAgent" => HookPoint::TurnStart,
            _ => return Err(HookError::UnknownEvent(event)),
        };
        Ok(HookInput {
            point,
            session_id: required("session_id", i.session_id)?,
            cwd: required("cwd", i.cwd)?.into(),
            last_message: i.prompt_response,
            transcript_path: i.transcript_path.filter(|p| !p.is_empty()).map(Into::into),
            loop_hint: i.stop_hook_active.map(|a| format!("stop_hook_active={a}")),
        })
    }

    fn render(&self, point: HookPoint, answer: &Answer) -> Rendered {
        let stdout = match (point, answer) {
            // Gemini CLI wants JSON on stdout, even when there is nothing to say.
            (_, Answer::Proceed) => "{}".to_string(),
            (HookPoint::Stop, Answer::Block(reason)) => {
                json!({"decision": "deny", "reason": reason}).to_string()
            }
            (_, Answer::Block(message) | Answer::StopWithMessage(message)) => {
                json!({"systemMessage": message}).to_string()
            }
        };
        Rendered { stdout, exit: 0 }
    }

    fn cli_timeout(&self) -> Duration {
        Duration::from_secs(60)
    }
}
