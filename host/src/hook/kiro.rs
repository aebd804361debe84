//! Kiro CLI's hooks, from its documentation only (its CLI is not on a
//! registry here; docs/kiro-findings.md has every source):
//!
//! - the default engine (v2) reads them from an agent configuration
//!   (`~/.kiro/agents/NAME.json`, a project's `.kiro/agents/NAME.json`):
//!   `"hooks": {"stop": [{"command", "timeout_ms"}], "userPromptSubmit":
//!   [...]}`, camelCase events, a 30 s default timeout in milliseconds; a
//!   stop's stdin is `{"hook_event_name": "stop", "cwd"}`, some versions
//!   adding `assistant_response`; no session id, no transcript, no loop
//!   hint;
//! - the v3 engine (`--v3`) reads standalone `.kiro/hooks/*.json` files
//!   with PascalCase triggers, and its stdin adds `session_id`: read here
//!   too (gatehost installs the v2 form).
//!
//! A block is exit 0 with `{"decision": "block", "reason"}` on stdout: the
//! reason is the next user message. Anything else answers nothing on
//! stdout with exit 0 (an exit-0 stdout of some events goes into the
//! agent's context; a non-zero exit would show gatehost as failed), a
//! stop's message staying on stderr. Without a session id the session is
//! the working directory ([`cwd_session`]): two Kiro sessions in one
//! directory share a retry count; a person's prompt (`userPromptSubmit`)
//! starts it again. Kiro has no loop guard of its own: gatehost's count is
//! what ends a run of blocks.

use super::adapter::{Adapter, AgentCli, Answer, HookError, HookInput, HookPoint, Rendered};
use super::adapter::{parse_json, required};
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::time::Duration;

pub struct Kiro;

#[derive(Deserialize)]
struct Input {
    hook_event_name: Option<String>,
    session_id: Option<String>,
    cwd: Option<String>,
    assistant_response: Option<String>,
    prompt: Option<String>,
}

/// The session id of a stop that names none: `cwd-` and a digest of the
/// working directory as Kiro gave it (the adapter reads no disk, so it is
/// not canonicalised: Kiro gives the same path at every hook of a run).
pub fn cwd_session(cwd: &str) -> String {
    let d = Sha256::digest(cwd.as_bytes());
    format!("cwd-{}", hex::encode(&d[..8]))
}

impl Adapter for Kiro {
    fn agent(&self) -> AgentCli {
        AgentCli::Kiro
    }

    fn parse(&self, input: &[u8]) -> Result<HookInput, HookError> {
        let i: Input = parse_json(input)?;
        let event = required("hook_event_name", i.hook_event_name)?;
        let point = match event.as_str() {
            "stop" | "Stop" => HookPoint::Stop,
            "userPromptSubmit" | "UserPromptSubmit" => HookPoint::TurnStart,
            "agentSpawn" | "SessionStart" => HookPoint::SessionStart,
            _ => return Err(HookError::UnknownEvent(event)),
        };
        let cwd = required("cwd", i.cwd)?;
        let session_id = i
            .session_id
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| cwd_session(&cwd));
        Ok(HookInput {
            point,
            session_id,
            cwd: cwd.into(),
            last_message: i.assistant_response.filter(|m| !m.trim().is_empty()),
            transcript_path: None,
            loop_hint: None,
            prompt: i.prompt.filter(|p| !p.trim().is_empty()),
            generation_id: None,
            subagent: None,
        })
    }

    fn render(&self, point: HookPoint, answer: &Answer) -> Rendered {
        let stdout = match (point, answer) {
            (HookPoint::Stop, Answer::Block(reason)) => {
                json!({"decision": "block", "reason": reason}).to_string()
            }
            _ => String::new(),
        };
        Rendered { stdout, exit: 0 }
    }

    /// `timeout_ms`'s documented default (30 s).
    fn cli_timeout(&self) -> Duration {
        Duration::from_secs(30)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    const STOP: &str = include_str!("../../../tests/fixtures/hooks/kiro/stop.json");
    const STOP_V3: &str = include_str!("../../../tests/fixtures/hooks/kiro/stop-v3.json");
    const STOP_RESPONSE: &str =
        include_str!("../../../tests/fixtures/hooks/kiro/stop-assistant-response.json");

    #[test]
    fn a_v2_stop_is_the_working_directorys_session_and_a_v3_stop_its_own() {
        let i = Kiro.parse(STOP.as_bytes()).unwrap();
        assert_eq!(i.point, HookPoint::Stop);
        assert_eq!(i.cwd, PathBuf::from("/home/user/project"));
        assert_eq!(i.session_id, cwd_session("/home/user/project"));
        assert!(i.session_id.starts_with("cwd-") && i.session_id.len() == 20);
        assert_ne!(cwd_session("/home/user/other"), i.session_id);
        assert_eq!((i.last_message, i.transcript_path), (None, None));
        let i = Kiro.parse(STOP_RESPONSE.as_bytes()).unwrap();
        assert_eq!(i.last_message.as_deref(), Some("All three tests pass now."));
        let i = Kiro.parse(STOP_V3.as_bytes()).unwrap();
        assert_eq!(i.point, HookPoint::Stop);
        assert_eq!(i.session_id, "sess_5b7e2a90-3c1d-4f6e-9a8b-0d1e2f3a4b5c");
    }

    #[test]
    fn a_prompt_starts_a_turn_and_other_events_or_missing_fields_are_errors() {
        let raw = br#"{"hook_event_name":"userPromptSubmit","cwd":"/w","prompt":"go on"}"#;
        let i = Kiro.parse(raw).unwrap();
        assert_eq!(i.point, HookPoint::TurnStart);
        assert_eq!(i.prompt.as_deref(), Some("go on"));
        assert_eq!(i.session_id, cwd_session("/w"), "the stop's session");
        let raw = br#"{"hook_event_name":"agentSpawn","cwd":"/w"}"#;
        assert_eq!(Kiro.parse(raw).unwrap().point, HookPoint::SessionStart);
        let raw = br#"{"hook_event_name":"preToolUse","cwd":"/w","tool_name":"fs_write"}"#;
        assert_eq!(
            Kiro.parse(raw).unwrap_err(),
            HookError::UnknownEvent("preToolUse".into())
        );
        for raw in [
            &br#"{"cwd":"/w"}"#[..],
            br#"{"hook_event_name":"stop"}"#,
            br#"{"hook_event_name":"stop","cwd":""}"#,
        ] {
            let e = Kiro.parse(raw).unwrap_err();
            assert!(matches!(e, HookError::Field { .. }), "{e}");
        }
    }

    #[test]
    fn a_block_is_the_decision_on_stdout_and_everything_else_is_silent_with_exit_0() {
        let r = Kiro.render(HookPoint::Stop, &Answer::Block("fix it".into()));
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        assert_eq!(v, json!({"decision": "block", "reason": "fix it"}));
        assert_eq!(r.exit, 0);
        for (point, answer) in [
            (HookPoint::Stop, Answer::Proceed),
            (
                HookPoint::Stop,
                Answer::StopWithMessage("out of retries".into()),
            ),
            (HookPoint::TurnStart, Answer::Block("never context".into())),
            (HookPoint::SessionStart, Answer::Proceed),
        ] {
            let r = Kiro.render(point, &answer);
            assert_eq!((r.stdout.as_str(), r.exit), ("", 0), "{point:?} {answer:?}");
        }
    }
}
