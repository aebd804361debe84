//! Claude Code's hooks: `Stop` and `SubagentStop` gate, `SessionStart` and
//! `UserPromptSubmit` register and mark turns, `SessionEnd` (with a
//! `reason`) ends the session.
//!
//! Stdin (all events): `session_id`, `transcript_path`, `cwd`,
//! `hook_event_name`; `Stop` adds `stop_hook_active` and
//! `last_assistant_message`. A block is `{"decision": "block", "reason"}`
//! with exit 0; a message the user sees is `systemMessage`. Any other exit
//! status lets the stop through, so gatehost always exits 0 and says what it
//! means in JSON.

use super::adapter::parse_common;
use super::adapter::{Adapter, AgentCli, Answer, HookError, HookInput, HookPoint, Rendered};
use serde_json::json;
use std::time::Duration;

pub struct Claude;

impl Adapter for Claude {
    fn agent(&self) -> AgentCli {
        AgentCli::Claude
    }

    fn parse(&self, input: &[u8]) -> Result<HookInput, HookError> {
        parse_common(input, |event| match event {
            "Stop" | "SubagentStop" => Some(HookPoint::Stop),
            "SessionStart" => Some(HookPoint::SessionStart),
            "UserPromptSubmit" => Some(HookPoint::TurnStart),
            "SessionEnd" => Some(HookPoint::SessionEnd),
            _ => None,
        })
    }

    fn render(&self, point: HookPoint, answer: &Answer) -> Rendered {
        let stdout = match (point, answer) {
            (_, Answer::Proceed) => String::new(),
            (HookPoint::Stop, Answer::Block(reason)) => {
                json!({"decision": "block", "reason": reason}).to_string()
            }
            // Never block a prompt or a session's start: say it instead.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_stop_hook_as_seen_from_2_1() {
        let raw = br#"{"session_id":"abc","transcript_path":"/t.jsonl","cwd":"/w","prompt_id":"p",
            "permission_mode":"default","effort":"high","hook_event_name":"Stop","stop_hook_active":true,
            "last_assistant_message":"Done.","background_tasks":[],"session_crons":[]}"#;
        let i = Claude.parse(raw).unwrap();
        assert_eq!(i.point, HookPoint::Stop);
        assert_eq!(i.session_id, "abc");
        assert_eq!(i.cwd, std::path::PathBuf::from("/w"));
        assert_eq!(i.last_message.as_deref(), Some("Done."));
        assert_eq!(i.loop_hint.as_deref(), Some("stop_hook_active=true"));
    }

    #[test]
    fn events_map_and_an_unknown_event_or_missing_session_is_an_error() {
        for (event, point) in [
            ("SubagentStop", HookPoint::Stop),
            ("SessionStart", HookPoint::SessionStart),
            ("UserPromptSubmit", HookPoint::TurnStart),
            ("SessionEnd", HookPoint::SessionEnd),
        ] {
            let raw = format!(r#"{{"hook_event_name":"{event}","session_id":"s","cwd":"/w"}}"#);
            assert_eq!(Claude.parse(raw.as_bytes()).unwrap().point, point);
        }
        let e = Claude
            .parse(br#"{"hook_event_name":"PreToolUse","session_id":"s","cwd":"/w"}"#)
            .unwrap_err();
        assert!(matches!(e, HookError::UnknownEvent(_)));
        let e = Claude
            .parse(br#"{"hook_event_name":"Stop","cwd":"/w"}"#)
            .unwrap_err();
        assert!(e.to_string().contains("session_id"), "{e}");
    }

    #[test]
    fn answers_are_json_with_exit_0() {
        let r = Claude.render(HookPoint::Stop, &Answer::Block("fix it".into()));
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        assert_eq!(v, json!({"decision": "block", "reason": "fix it"}));
        assert_eq!(r.exit, 0);
        let r = Claude.render(HookPoint::Stop, &Answer::StopWithMessage("blocked".into()));
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        assert_eq!(v, json!({"systemMessage": "blocked"}));
        assert_eq!(Claude.render(HookPoint::Stop, &Answer::Proceed).stdout, "");
        let r = Claude.render(HookPoint::TurnStart, &Answer::Block("x".into()));
        assert!(!r.stdout.contains("decision"), "a prompt is never blocked");
    }
}
