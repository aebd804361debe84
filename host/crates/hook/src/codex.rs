//! Codex CLI's hooks: `Stop` gates, `SessionStart` and `UserPromptSubmit`
//! register and mark turns. As measured with Codex 0.169.0 (the details,
//! with the commands, are in tests/support/fake-model-api/README.md, "Codex CLI"):
//!
//! - Hooks are on by default (feature `hooks`), read from `hooks.json` in
//!   `$CODEX_HOME` or a trusted project's `.codex/`, and run only once
//!   trusted: `[hooks.state."<hooks.json path>:stop:0:0"] trusted_hash =
//!   "sha256:…"` in the user's `config.toml` (an untrusted hook is skipped
//!   without a word). The timeout key is `timeout` (seconds, default 600).
//! - Stdin, every event: `session_id`, `transcript_path` (`null` with
//!   `--ephemeral`), `cwd`, `hook_event_name`, `model`, `permission_mode`;
//!   `UserPromptSubmit` and `Stop` add `turn_id` (one per turn, the same for
//!   every stop of a blocked turn); `SessionStart` adds `source`,
//!   `UserPromptSubmit` `prompt`; `Stop` adds `stop_hook_active` and
//!   `last_assistant_message` (`null` when the turn ended without text).
//! - `{"decision": "block", "reason"}` with exit 0 makes Codex call the model
//!   again with the reason as a user message (`<hook_prompt …>reason
//!   </hook_prompt>`); Codex sets no cap on blocks. `{"continue": false,
//!   "stopReason"}` ends the turn even beside a block. Any other exit
//!   status, JSON it cannot read, a block without a reason or a timeout lets
//!   the stop through (the hook "failed").
//! - `codex exec` prints none of a hook's texts (`systemMessage`,
//!   `stopReason`, a block's reason), only one status word per hook on
//!   stderr: `hook: Stop Completed`, `Blocked`, `Stopped` or `Failed`.
//!   Codex keeps `systemMessage` and `stopReason` as the hook run's warning
//!   and stop entries, for the TUI.
//!
//! So a stop let through with a message is `continue: false` with the
//! message as both `stopReason` and `systemMessage`: `codex exec` then says
//! `Stopped` after the `Blocked`s, not `Completed` as after a pass (the only
//! sign it gives that the work was not accepted). The cost: Codex skips its
//! legacy `notify` program for a turn a hook stopped (measured). Anywhere
//! but a stop, `continue: false` could stop the session or its prompt, so
//! there the message is only a `systemMessage`.

use super::adapter::parse_common;
use super::adapter::{Adapter, AgentCli, Answer, HookError, HookInput, HookPoint, Rendered};
use super::plan::{Dirs, Edit, InstallContext, PlaceError, Planned, Scope, Unit, grouped};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// OpenAI Codex CLI's [`Adapter`](crate::Adapter): its hook JSON, its answers and
/// where `hook install` writes its hooks ([`crate::adapter`] picks it for
/// `gatehost hook codex`).
pub struct Codex;

/// The events gatehost hooks in Codex: not `SessionEnd`. Once its hook is
/// trusted (its hash taken over the timeout Codex clamps it to, 3 s),
/// `codex exec` 0.169 runs it after a Stop hook's block, mid-session: it
/// would forget a standalone session's retry count (and report a daemon
/// session exited) while the agent goes on. (An earlier gatehost wrote it
/// with 600 s, so Codex warned at every run and never ran it.)
const EVENTS: &[(&str, HookPoint)] = &[
    ("Stop", HookPoint::Stop),
    ("SessionStart", HookPoint::SessionStart),
    ("UserPromptSubmit", HookPoint::TurnStart),
];

impl Adapter for Codex {
    fn agent(&self) -> AgentCli {
        AgentCli::Codex
    }

    fn program(&self) -> &'static str {
        "codex"
    }

    fn reads_empty_answer(&self) -> bool {
        true
    }

    fn synthetic_stop(&self, id: &str, cwd: &Path, message: &str) -> serde_json::Value {
        json!({"session_id": id, "turn_id": "doctor", "cwd": cwd,
            "hook_event_name": "Stop", "model": "doctor", "permission_mode": "default",
            "transcript_path": null, "stop_hook_active": false, "last_assistant_message": message})
    }

    /// Codex trusts a hook only by its hash in the user's config.toml.
    fn hook_files(&self, scope: Scope, dirs: &Dirs<'_>) -> Result<Vec<PathBuf>, PlaceError> {
        let dir = dirs.env_or_home("CODEX_HOME", ".codex")?;
        let hooks = match scope {
            Scope::User => dir.join("hooks.json"),
            Scope::Project => dirs.project()?.join(".codex/hooks.json"),
        };
        Ok(vec![hooks, dir.join("config.toml")])
    }

    fn install_notes(&self, scope: Scope) -> Vec<&'static str> {
        let mut notes = vec![
            "Codex runs a hook only if its config.toml trusts it: gatehost wrote that trust; \
             a hook edited by hand must be trusted again (codex asks).",
        ];
        if scope == Scope::Project {
            notes.push(
                "Codex reads a project's .codex/hooks.json only in a trusted project \
                 ([projects.\"DIR\"] trust_level = \"trusted\"); gatehost does not grant that.",
            );
        }
        notes
    }

    fn plan(&self, ctx: &InstallContext<'_>, out: &mut Planned) {
        let hooks = grouped(
            |p| self.event_timeout(p),
            ctx.command,
            EVENTS,
            Unit::Seconds,
        );
        out.push(&ctx.files[0], hooks);
        out.push(
            &ctx.files[1],
            Edit::CodexTrust {
                hooks: ctx.files[0].clone(),
            },
        );
        if let Some((command, args)) = ctx.mcp {
            out.push(
                &ctx.files[1],
                Edit::CodexMcp {
                    command: command.to_string(),
                    args: args.to_vec(),
                },
            );
        }
    }

    fn parse(&self, input: &[u8]) -> Result<HookInput, HookError> {
        parse_common(input, |event| match event {
            "Stop" => Some(HookPoint::Stop),
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
            (HookPoint::Stop, Answer::StopWithMessage(message)) => json!({
                "continue": false,
                "stopReason": message,
                "systemMessage": message,
            })
            .to_string(),
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
    use serde_json::Value;
    use std::path::PathBuf;

    // Captured from Codex 0.169.0 (`codex exec`, hooks logging their stdin):
    // one session, a turn whose first stop was blocked.
    const SESSION_START: &str = r#"{"session_id":"01a22f4a-8915-72b3-bd4a-b26ed05467f1","transcript_path":"/work/cx/run3/codex/sessions/2026/12/01/rollout-2026-12-01T01-49-03-01a22f4a-8915-72b3-bd4a-b26ed05467f1.jsonl","cwd":"/work/cx/run3/cwd","hook_event_name":"SessionStart","model":"gpt-5.5","permission_mode":"bypassPermissions","source":"startup"}"#;
    const PROMPT: &str = r#"{"session_id":"01a22f4a-8915-72b3-bd4a-b26ed05467f1","turn_id":"01a22f4a-8927-78b0-bfd3-3ac3cc3800d4","transcript_path":"/work/cx/run3/codex/sessions/2026/12/01/rollout-2026-12-01T01-49-03-01a22f4a-8915-72b3-bd4a-b26ed05467f1.jsonl","cwd":"/work/cx/run3/cwd","hook_event_name":"UserPromptSubmit","model":"gpt-5.5","permission_mode":"bypassPermissions","prompt":"say hi"}"#;
    const STOP: &str = r#"{"session_id":"01a22f4a-8915-72b3-bd4a-b26ed05467f1","turn_id":"01a22f4a-8927-78b0-bfd3-3ac3cc3800d4","transcript_path":"/work/cx/run3/codex/sessions/2026/12/01/rollout-2026-12-01T01-49-03-01a22f4a-8915-72b3-bd4a-b26ed05467f1.jsonl","cwd":"/work/cx/run3/cwd","hook_event_name":"Stop","model":"gpt-5.5","permission_mode":"bypassPermissions","stop_hook_active":false,"last_assistant_message":"First answer."}"#;
    const STOP_AGAIN: &str = r#"{"session_id":"01a22f4a-8915-72b3-bd4a-b26ed05467f1","turn_id":"01a22f4a-8927-78b0-bfd3-3ac3cc3800d4","transcript_path":"/work/cx/run3/codex/sessions/2026/12/01/rollout-2026-12-01T01-49-03-01a22f4a-8915-72b3-bd4a-b26ed05467f1.jsonl","cwd":"/work/cx/run3/cwd","hook_event_name":"Stop","model":"gpt-5.5","permission_mode":"bypassPermissions","stop_hook_active":true,"last_assistant_message":"Second answer."}"#;
    // `codex exec --ephemeral`, the model's answer empty.
    const STOP_EPHEMERAL_EMPTY: &str = r#"{"session_id":"01a22f4a-9468-7013-a1c8-71c3e9ef1294","turn_id":"01a22f4a-9484-7ed2-b512-62a6fcf1dda9","transcript_path":null,"cwd":"/work/cx/run3/cwd","hook_event_name":"Stop","model":"gpt-5.5","permission_mode":"bypassPermissions","stop_hook_active":false,"last_assistant_message":null}"#;
    // A `SubagentStop` as Codex's hook schema describes it (not installed).
    const SUBAGENT_STOP: &str = r#"{"session_id":"s","turn_id":"t","transcript_path":null,"agent_transcript_path":null,"cwd":"/w","hook_event_name":"SubagentStop","model":"gpt-5.5","permission_mode":"default","stop_hook_active":false,"agent_id":"a","agent_type":"worker","last_assistant_message":"x"}"#;

    const SESSION: &str = "01a22f4a-8915-72b3-bd4a-b26ed05467f1";
    const TRANSCRIPT: &str = "/work/cx/run3/codex/sessions/2026/12/01/rollout-2026-12-01T01-49-03-01a22f4a-8915-72b3-bd4a-b26ed05467f1.jsonl";

    #[test]
    fn reads_every_event_as_codex_0_169_sends_it() {
        let start = Codex.parse(SESSION_START.as_bytes()).unwrap();
        assert_eq!(start.point, HookPoint::SessionStart);
        assert_eq!(start.session_id, SESSION);
        assert_eq!(start.cwd, PathBuf::from("/work/cx/run3/cwd"));
        assert_eq!(start.transcript_path, Some(PathBuf::from(TRANSCRIPT)));
        assert_eq!((start.last_message, start.loop_hint), (None, None));

        let prompt = Codex.parse(PROMPT.as_bytes()).unwrap();
        assert_eq!(prompt.point, HookPoint::TurnStart);
        assert_eq!(prompt.session_id, SESSION);
        assert_eq!(
            prompt.last_message, None,
            "the prompt is not the agent's message"
        );

        let end = Codex
            .parse(format!(r#"{{"session_id":"{SESSION}","cwd":"/w","hook_event_name":"SessionEnd","reason":"exit"}}"#).as_bytes())
            .unwrap();
        assert_eq!(end.point, HookPoint::SessionEnd);

        let stop = Codex.parse(STOP.as_bytes()).unwrap();
        assert_eq!(stop.point, HookPoint::Stop);
        assert_eq!(stop.session_id, SESSION);
        assert_eq!(stop.cwd, PathBuf::from("/work/cx/run3/cwd"));
        assert_eq!(stop.last_message.as_deref(), Some("First answer."));
        assert_eq!(stop.transcript_path, Some(PathBuf::from(TRANSCRIPT)));
        assert_eq!(stop.loop_hint.as_deref(), Some("stop_hook_active=false"));

        let again = Codex.parse(STOP_AGAIN.as_bytes()).unwrap();
        assert_eq!(
            again.session_id, SESSION,
            "a blocked turn stays one session"
        );
        assert_eq!(again.last_message.as_deref(), Some("Second answer."));
        assert_eq!(again.loop_hint.as_deref(), Some("stop_hook_active=true"));
    }

    #[test]
    fn null_transcript_and_message_are_none_not_errors() {
        let stop = Codex.parse(STOP_EPHEMERAL_EMPTY.as_bytes()).unwrap();
        assert_eq!(stop.point, HookPoint::Stop);
        assert_eq!(stop.last_message, None);
        assert_eq!(stop.transcript_path, None);
        let empty = STOP.replace(TRANSCRIPT, "");
        assert_eq!(Codex.parse(empty.as_bytes()).unwrap().transcript_path, None);
    }

    #[test]
    fn other_events_and_missing_fields_are_errors_that_name_them() {
        let e = Codex.parse(SUBAGENT_STOP.as_bytes()).unwrap_err();
        assert_eq!(e, HookError::UnknownEvent("SubagentStop".into()));
        let e = Codex
            .parse(STOP.replace(SESSION, "").as_bytes())
            .unwrap_err();
        assert!(e.to_string().contains("session_id"), "{e}");
        let no_cwd = STOP.replace(r#""cwd":"/work/cx/run3/cwd","#, "");
        let e = Codex.parse(no_cwd.as_bytes()).unwrap_err();
        assert!(e.to_string().contains("cwd"), "{e}");
        let e = Codex.parse(b"").unwrap_err();
        assert!(matches!(e, HookError::NotJson(_)), "{e}");
        let e = Codex
            .parse(STOP.replace("false", "\"no\"").as_bytes())
            .unwrap_err();
        assert!(e.to_string().contains("stop_hook_active"), "{e}");
    }

    fn rendered(point: HookPoint, answer: Answer) -> (Value, i32) {
        let r = Codex.render(point, &answer);
        let v = if r.stdout.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&r.stdout).expect("one JSON object")
        };
        (v, r.exit)
    }

    #[test]
    fn a_stop_is_blocked_with_the_reason_or_stopped_with_the_message() {
        assert_eq!(
            rendered(HookPoint::Stop, Answer::Block("fix it".into())),
            (json!({"decision": "block", "reason": "fix it"}), 0)
        );
        assert_eq!(
            rendered(
                HookPoint::Stop,
                Answer::StopWithMessage("out of retries".into())
            ),
            (
                json!({"continue": false, "stopReason": "out of retries", "systemMessage": "out of retries"}),
                0
            )
        );
        assert_eq!(rendered(HookPoint::Stop, Answer::Proceed), (Value::Null, 0));
    }

    #[test]
    fn a_prompt_or_a_session_start_is_never_blocked_nor_stopped() {
        for point in [HookPoint::TurnStart, HookPoint::SessionStart] {
            for answer in [
                Answer::Block("x".into()),
                Answer::StopWithMessage("x".into()),
            ] {
                assert_eq!(
                    rendered(point, answer),
                    (json!({"systemMessage": "x"}), 0),
                    "{point:?}"
                );
            }
            assert_eq!(rendered(point, Answer::Proceed), (Value::Null, 0));
        }
    }
}
