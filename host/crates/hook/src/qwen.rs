//! Qwen Code's hooks (`hooks` in `settings.json`: `$QWEN_HOME` or
//! `~/.qwen/settings.json`, or a project's `.qwen/settings.json`; the
//! grouped layout of Claude Code, `{matcher?, hooks: [{type: "command",
//! command, timeout}]}`): `Stop` and `SubagentStop` gate, `SessionStart`
//! and `UserPromptSubmit` only register the session, `SessionEnd` ends it.
//!
//! Qwen Code began as a Gemini CLI fork, but its hooks are Claude Code's
//! (read in `@qwen-code/qwen-code` 0.24.4, `chunks/chunk-DPEB6S2R.js`):
//! every event's stdin has `session_id`, `transcript_path`, `cwd`,
//! `hook_event_name`, `timestamp`, `permission_mode` (and `agent_id`,
//! `prompt_id` when set); `Stop` adds `stop_hook_active` (true while the
//! prompt goes on because a Stop hook blocked) and `last_assistant_message`
//! (`[no response text]` when there was none); `SubagentStop` adds
//! `agent_id`, `agent_type`, `agent_transcript_path`,
//! `last_assistant_message`. A command hook's `timeout` is in seconds
//! (default 60; a value of 1000 or more is read as milliseconds).
//!
//! Answers, exit 0: `{"decision": "block", "reason"}` (or `"deny"`) makes
//! the agent go on with the reason as the next request; `{"systemMessage"}`
//! is shown. Qwen Code caps consecutive blocks itself (8 by default) and
//! then ends the turn: gatehost's own `--max-retries` (2 by default) comes first.
//!
//! Measured with 0.24.4 in `-p` (tests/fixtures/hooks/qwen/): a blocked
//! stop's continuation runs `UserPromptSubmit` again with the block reason
//! as its `prompt` (the same `prompt_id`), then `Stop` with
//! `stop_hook_active: true`. So `UserPromptSubmit` is never counted as a
//! person's prompt (a reset on every retry would never let the retries run
//! out): it only registers the session, as `SessionStart` does. `-p` runs
//! no `SessionEnd`; a `systemMessage` on a let-through stop is printed on
//! stderr.

use super::adapter::parse_common;
use super::adapter::{Adapter, AgentCli, Answer, HookError, HookInput, HookPoint, Rendered};
use super::plan::{Dirs, InstallContext, PlaceError, Planned, Scope, Unit, grouped};
use serde_json::json;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Qwen Code's [`Adapter`](crate::Adapter): its hook JSON, its answers and
/// where `hook install` writes its hooks ([`crate::adapter`] picks it for
/// `gatehost hook qwen`).
pub struct Qwen;

/// The events gatehost hooks in Qwen Code: a sub-agent's stop is gated
/// too; `UserPromptSubmit` is not hooked (see this module's documentation).
const EVENTS: &[(&str, HookPoint)] = &[
    ("Stop", HookPoint::Stop),
    ("SubagentStop", HookPoint::Stop),
    ("SessionStart", HookPoint::SessionStart),
    ("SessionEnd", HookPoint::SessionEnd),
];

impl Adapter for Qwen {
    fn agent(&self) -> AgentCli {
        AgentCli::Qwen
    }

    fn program(&self) -> &'static str {
        "qwen"
    }

    /// isBlockingDecision in 0.24.4.
    fn decisions(&self) -> &'static [&'static str] {
        &["block", "deny"]
    }

    fn synthetic_stop(&self, id: &str, cwd: &Path, message: &str) -> serde_json::Value {
        json!({"session_id": id, "cwd": cwd, "hook_event_name": "Stop",
            "stop_hook_active": false, "last_assistant_message": message})
    }

    /// Its system `settings.json` (or the file
    /// `QWEN_CODE_SYSTEM_SETTINGS_PATH` names).
    fn managed_files(
        &self,
        env: &dyn Fn(&str) -> Option<OsString>,
        _list: &dyn Fn(&Path) -> Vec<PathBuf>,
    ) -> Vec<PathBuf> {
        vec![env("QWEN_CODE_SYSTEM_SETTINGS_PATH").map_or_else(
            || PathBuf::from("/etc/qwen-code/settings.json"),
            PathBuf::from,
        )]
    }

    fn hook_files(&self, scope: Scope, dirs: &Dirs<'_>) -> Result<Vec<PathBuf>, PlaceError> {
        Ok(vec![match scope {
            Scope::User => dirs
                .env_or_home("QWEN_HOME", ".qwen")?
                .join("settings.json"),
            Scope::Project => dirs.project()?.join(".qwen/settings.json"),
        }])
    }

    fn plan(&self, ctx: &InstallContext<'_>, out: &mut Planned) {
        let hooks = grouped(
            |p| self.event_timeout(p),
            ctx.command,
            EVENTS,
            Unit::Seconds,
        );
        out.push(&ctx.files[0], hooks);
        if let Some(mcp) = ctx.mcp_server() {
            out.push(&ctx.files[0], mcp);
        }
    }

    fn parse(&self, input: &[u8]) -> Result<HookInput, HookError> {
        parse_common(input, |event| match event {
            "Stop" | "SubagentStop" => Some(HookPoint::Stop),
            // Not TurnStart: see the module's documentation.
            "SessionStart" | "UserPromptSubmit" => Some(HookPoint::SessionStart),
            "SessionEnd" => Some(HookPoint::SessionEnd),
            _ => None,
        })
    }

    fn render(&self, point: HookPoint, answer: &Answer) -> Rendered {
        let stdout = match (point, answer) {
            (_, Answer::Proceed) => "{}".to_string(),
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

    /// `DEFAULT_COMMAND_HOOK_TIMEOUT_SECONDS` (60): past it the hook is
    /// killed and the stop let through.
    fn cli_timeout(&self) -> Duration {
        Duration::from_secs(60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    // As 0.24.4 sent them in one `-p` run (the first Stop blocked);
    // SubagentStop and SessionEnd built from its code
    // (tests/fixtures/hooks/qwen/README.md).
    const STOP: &str = include_str!("../../../../tests/fixtures/hooks/qwen/stop.json");
    const STOP_RETRY: &str = include_str!("../../../../tests/fixtures/hooks/qwen/stop-retry.json");
    const SUBAGENT_STOP: &str =
        include_str!("../../../../tests/fixtures/hooks/qwen/subagent-stop.json");
    const SESSION_START: &str =
        include_str!("../../../../tests/fixtures/hooks/qwen/session-start.json");
    const PROMPT: &str =
        include_str!("../../../../tests/fixtures/hooks/qwen/user-prompt-submit.json");
    const PROMPT_RETRY: &str =
        include_str!("../../../../tests/fixtures/hooks/qwen/user-prompt-retry.json");
    const SESSION_END: &str =
        include_str!("../../../../tests/fixtures/hooks/qwen/session-end.json");

    const SESSION: &str = "5b0e6a7c-3f1d-4e2a-9c8b-7d6e5f4a3b2c";

    fn value(s: &str) -> serde_json::Value {
        serde_json::from_str(s).expect("JSON")
    }

    #[test]
    fn stops_and_subagent_stops_are_gated_with_their_last_message() {
        let i = Qwen.parse(STOP.as_bytes()).unwrap();
        assert_eq!(i.point, HookPoint::Stop);
        assert_eq!(i.session_id, SESSION);
        assert_eq!(i.cwd, PathBuf::from("/home/user/project"));
        assert_eq!(i.last_message.as_deref(), Some("All done."));
        assert_eq!(i.loop_hint.as_deref(), Some("stop_hook_active=false"));
        let i = Qwen.parse(STOP_RETRY.as_bytes()).unwrap();
        assert_eq!(i.loop_hint.as_deref(), Some("stop_hook_active=true"));
        let i = Qwen.parse(SUBAGENT_STOP.as_bytes()).unwrap();
        assert_eq!(i.point, HookPoint::Stop);
        assert_eq!(i.session_id, SESSION);
        assert_eq!(i.last_message.as_deref(), Some("Sub-agent finished."));
    }

    #[test]
    fn starts_and_prompts_only_register_and_the_end_ends() {
        for raw in [SESSION_START, PROMPT, PROMPT_RETRY] {
            let i = Qwen.parse(raw.as_bytes()).unwrap();
            assert_eq!(i.point, HookPoint::SessionStart, "{raw}");
            assert_eq!(i.prompt, None, "a prompt never resets the count");
        }
        let i = Qwen.parse(SESSION_END.as_bytes()).unwrap();
        assert_eq!(i.point, HookPoint::SessionEnd);
        let mut v = value(STOP);
        v["hook_event_name"] = json!("PreToolUse");
        let e = Qwen.parse(v.to_string().as_bytes()).unwrap_err();
        assert_eq!(e, HookError::UnknownEvent("PreToolUse".into()));
        let mut v = value(STOP);
        v["cwd"] = json!("");
        let e = Qwen.parse(v.to_string().as_bytes()).unwrap_err();
        assert!(e.to_string().contains("cwd"), "{e}");
    }

    #[test]
    fn answers_are_the_json_qwen_obeys_with_exit_0() {
        let r = Qwen.render(HookPoint::Stop, &Answer::Block("fix it".into()));
        assert_eq!(
            value(&r.stdout),
            json!({"decision": "block", "reason": "fix it"})
        );
        assert_eq!(r.exit, 0);
        let r = Qwen.render(HookPoint::Stop, &Answer::StopWithMessage("blocked".into()));
        assert_eq!(value(&r.stdout), json!({"systemMessage": "blocked"}));
        let r = Qwen.render(HookPoint::SessionStart, &Answer::Block("x".into()));
        assert_eq!(value(&r.stdout), json!({"systemMessage": "x"}));
        assert_eq!(Qwen.render(HookPoint::Stop, &Answer::Proceed).stdout, "{}");
    }
}
