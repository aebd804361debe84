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
use super::plan::{Dirs, Edit, InstallContext, PlaceError, Planned, Scope, Unit, grouped};
use serde_json::json;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Claude Code's [`Adapter`](crate::Adapter): its hook JSON, its answers and
/// where `hook install` writes its hooks ([`crate::adapter`] picks it for
/// `gatehost hook claude`).
pub struct Claude;

/// The events gatehost hooks in Claude Code.
const EVENTS: &[(&str, HookPoint)] = &[
    ("Stop", HookPoint::Stop),
    ("SubagentStop", HookPoint::Stop),
    ("SessionStart", HookPoint::SessionStart),
    ("UserPromptSubmit", HookPoint::TurnStart),
    ("SessionEnd", HookPoint::SessionEnd),
];

impl Adapter for Claude {
    fn agent(&self) -> AgentCli {
        AgentCli::Claude
    }

    fn program(&self) -> &'static str {
        "claude"
    }

    fn reads_empty_answer(&self) -> bool {
        true
    }

    fn synthetic_stop(&self, id: &str, cwd: &Path, message: &str) -> serde_json::Value {
        json!({"session_id": id, "cwd": cwd, "hook_event_name": "Stop",
            "stop_hook_active": false, "last_assistant_message": message})
    }

    /// `managed-settings.json` and the drop-ins of `managed-settings.d/` in
    /// `/etc/claude-code` (or the directory
    /// `CLAUDE_CODE_MANAGED_SETTINGS_PATH` names).
    fn managed_files(
        &self,
        env: &dyn Fn(&str) -> Option<OsString>,
        list: &dyn Fn(&Path) -> Vec<PathBuf>,
    ) -> Vec<PathBuf> {
        let dir = env("CLAUDE_CODE_MANAGED_SETTINGS_PATH")
            .map_or_else(|| PathBuf::from("/etc/claude-code"), PathBuf::from);
        let mut out = vec![dir.join("managed-settings.json")];
        out.extend(list(&dir.join("managed-settings.d")));
        out
    }

    fn hook_files(&self, scope: Scope, dirs: &Dirs<'_>) -> Result<Vec<PathBuf>, PlaceError> {
        Ok(match scope {
            // MCP servers of user scope are in .claude.json: in
            // $CLAUDE_CONFIG_DIR, else in the home directory.
            Scope::User => match dirs.env_dir("CLAUDE_CONFIG_DIR") {
                Some(dir) => vec![dir.join("settings.json"), dir.join(".claude.json")],
                None => {
                    let h = dirs.home()?;
                    vec![h.join(".claude/settings.json"), h.join(".claude.json")]
                }
            },
            Scope::Project => {
                let p = dirs.project()?;
                vec![p.join(".claude/settings.json"), p.join(".mcp.json")]
            }
        })
    }

    /// Every event of [`EVENTS`]; `onFailure: block` on the stops when
    /// every `claude` on PATH reads it.
    fn plan(&self, ctx: &InstallContext<'_>, out: &mut Planned) {
        let mut hooks = grouped(
            |p| self.event_timeout(p),
            ctx.command,
            EVENTS,
            Unit::Seconds,
        );
        let path = std::env::var_os("PATH").unwrap_or_default();
        match super::claude_version::decide(&super::claude_version::claudes_on(&path)) {
            Ok(said) => {
                out.said.push(said);
                if let Edit::Hooks(set) = &mut hooks {
                    for (event, hook) in &mut set.entries {
                        if matches!(event.as_str(), "Stop" | "SubagentStop") {
                            hook["onFailure"] = json!("block");
                        }
                    }
                }
            }
            Err(warning) => out.warnings.push(warning),
        }
        out.push(&ctx.files[0], hooks);
        if let Some(mcp) = ctx.mcp_server() {
            out.push(&ctx.files[1], mcp);
        }
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
    fn a_subagents_stop_is_its_own_and_a_parents_is_not() {
        let raw = br#"{"hook_event_name":"SubagentStop","session_id":"p","cwd":"/w",
            "agent_id":"a-7","agent_type":"general-purpose","last_assistant_message":"ok"}"#;
        let i = Claude.parse(raw).unwrap();
        assert_eq!(i.subagent.as_deref(), Some("a-7"));
        assert_eq!(i.standing_key(), "p/subagent/a-7");
        // No id: its type; neither: still a sub-agent's, under a fixed name.
        let raw = br#"{"hook_event_name":"SubagentStop","session_id":"p","cwd":"/w","agent_type":"Explore"}"#;
        assert_eq!(
            Claude.parse(raw).unwrap().subagent.as_deref(),
            Some("Explore")
        );
        let raw = br#"{"hook_event_name":"SubagentStop","session_id":"p","cwd":"/w"}"#;
        assert_eq!(
            Claude.parse(raw).unwrap().subagent.as_deref(),
            Some("subagent")
        );
        // A parent's stop with an agent_id field (Qwen Code sends it when set)
        // is the parent's.
        let raw = br#"{"hook_event_name":"Stop","session_id":"p","cwd":"/w","agent_id":"x"}"#;
        let i = Claude.parse(raw).unwrap();
        assert_eq!(
            (i.subagent.as_deref(), i.standing_key().as_str()),
            (None, "p")
        );
    }

    #[test]
    fn cursors_claude_compatible_stop_is_read_with_its_own_names_as_fallbacks() {
        let raw =
            include_bytes!("../../../../tests/fixtures/hooks/cursor/claude-compatible-stop.json");
        let i = Claude.parse(raw).unwrap();
        assert_eq!(i.point, HookPoint::Stop);
        assert_eq!(i.session_id, "cdefee2d-2727-4b73-bf77-d9d830f31d2a");
        assert_eq!(
            i.generation_id.as_deref(),
            Some("26b45fb6-bdea-439c-b2dc-5e97ee00ecea")
        );
        // Without session_id and cwd: the conversation and its first root.
        let raw = br#"{"hook_event_name":"Stop","conversation_id":"c","workspace_roots":["","/r1","/r2"]}"#;
        let i = Claude.parse(raw).unwrap();
        assert_eq!(i.session_id, "c");
        assert_eq!(i.cwd, std::path::PathBuf::from("/r1"));
        // session_id wins over conversation_id; an empty one does not.
        let raw =
            br#"{"hook_event_name":"Stop","session_id":"s","conversation_id":"c","cwd":"/w"}"#;
        assert_eq!(Claude.parse(raw).unwrap().session_id, "s");
        let raw =
            br#"{"hook_event_name":"Stop","session_id":" ","conversation_id":"c","cwd":"/w"}"#;
        assert_eq!(Claude.parse(raw).unwrap().session_id, "c");
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
