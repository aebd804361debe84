//! GitHub Copilot CLI's hooks (`$COPILOT_HOME/hooks/*.json`, by default
//! `~/.copilot/hooks/`, or a project's `.github/hooks/*.json`, read by `-p`
//! in a trusted folder): `{"version": 1, "hooks": {"agentStop": [{"type":
//! "command", "command", "timeoutSec"}]}}`; `agentStop` and `subagentStop`
//! gate.
//!
//! Measured with 1.0.102 (tests/fixtures/hooks/copilot/): a camelCase
//! event's stdin names no event: `agentStop` sends `sessionId`,
//! `timestamp` (ms), `cwd`, `transcriptPath`, `stopReason` and
//! `stop_hook_active`; `subagentStop` (from the package's
//! `copilot-sdk/types.d.ts`) the parent's `sessionId`, `agentId`,
//! `agentType`, `response`. A PascalCase event (`Stop`) gets Claude Code's
//! snake_case payload instead, read here too. So every input without a
//! `hook_event_name` is a stop: gatehost installs no other event.
//!
//! A block is `{"decision": "block", "reason"}` with exit 0: the reason
//! is the next user message (the CLI ends the turn itself after 8 blocks in
//! a row). The output must be an object; the CLI shows no message from a
//! stop hook, so a stop with a message answers `{}` and leaves it on stderr.
//! A sub-agent's stop (one with an `agentId`) is counted on a retry budget
//! of its own, under its parent session. Measured with a real sub-agent
//! (the `task` tool; docs/compatibility.md, GitHub Copilot CLI): each of its stops
//! is an `agentStop` of the sub-agent itself (`sessionId` is the sub-agent's
//! `agentId`, with a `parentAgentId`; Copilot ignores a block on it), then
//! a `subagentStop` (the parent's `sessionId`, the sub-agent's `agentId`):
//! only the latter is gated, the former answered `{}` ungated. A stop is
//! told from the next by its `timestamp` (milliseconds, new at every stop):
//! the transcript Copilot writes lazily can show one length at two stops.

use super::adapter::{Adapter, AgentCli, Answer, HookError, HookInput, HookPoint, Rendered};
use super::adapter::{parse_json, required};
use super::install::{HookSet, Layout};
use super::plan::{Dirs, Edit, InstallContext, MCP_NAME, PlaceError, Planned, Scope};
use serde::Deserialize;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// GitHub Copilot CLI's [`Adapter`](crate::Adapter): its hook JSON, its answers and
/// where `hook install` writes its hooks ([`crate::adapter`] picks it for
/// `gatehost hook copilot`).
pub struct Copilot;

#[derive(Deserialize)]
struct Input {
    hook_event_name: Option<String>,
    #[serde(alias = "session_id")]
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
    cwd: Option<String>,
    #[serde(rename = "transcriptPath", alias = "transcript_path")]
    transcript_path: Option<String>,
    #[serde(alias = "last_assistant_message")]
    response: Option<String>,
    #[serde(rename = "stopHookActive", alias = "stop_hook_active")]
    stop_hook_active: Option<bool>,
    #[serde(rename = "agentId")]
    agent_id: Option<String>,
    #[serde(rename = "parentAgentId")]
    parent_agent_id: Option<String>,
    timestamp: Option<serde_json::Value>,
}

impl Adapter for Copilot {
    fn agent(&self) -> AgentCli {
        AgentCli::Copilot
    }

    fn program(&self) -> &'static str {
        "copilot"
    }

    fn answer_keys(&self) -> &'static [&'static str] {
        &["decision", "reason", "modifiedResponse"]
    }

    fn decisions(&self) -> &'static [&'static str] {
        &["block", "allow"]
    }

    fn synthetic_stop(&self, id: &str, cwd: &Path, _message: &str) -> serde_json::Value {
        json!({"sessionId": id, "timestamp": 0, "cwd": cwd,
            "stopReason": "end_turn", "stop_hook_active": false})
    }

    fn session_end(&self, _id: &str, _cwd: &Path) -> Option<serde_json::Value> {
        None
    }

    fn layout(&self) -> Layout {
        Layout::Flat
    }

    /// MCP servers of user scope are in mcp-config.json (where `copilot
    /// mcp add` writes them, measured with 1.0.102).
    fn hook_files(&self, scope: Scope, dirs: &Dirs<'_>) -> Result<Vec<PathBuf>, PlaceError> {
        Ok(match scope {
            Scope::User => {
                let dir = dirs.env_or_home("COPILOT_HOME", ".copilot")?;
                vec![dir.join("hooks/gatehost.json"), dir.join("mcp-config.json")]
            }
            Scope::Project => vec![dirs.project()?.join(".github/hooks/gatehost.json")],
        })
    }

    fn refuse_mcp(&self, scope: Scope) -> Option<&'static str> {
        (scope == Scope::Project).then_some(
            "a project's MCP servers for Copilot CLI (.mcp.json, .github/mcp.json) are not written by \
             gatehost (.mcp.json is Claude Code's too): use --scope user, or `copilot mcp add`",
        )
    }

    fn plan(&self, ctx: &InstallContext<'_>, out: &mut Planned) {
        if let Some((command, args)) = ctx.mcp {
            // As `copilot mcp add` writes it: a local server, every tool.
            out.push(
                &ctx.files[1],
                Edit::Mcp {
                    name: MCP_NAME,
                    server: json!({"type": "local", "command": command, "args": args, "tools": ["*"]}),
                },
            );
        }
        let t = self.event_timeout(HookPoint::Stop).as_secs();
        let hook = json!({"type": "command", "command": ctx.command, "timeoutSec": t});
        out.push(
            &ctx.files[0],
            Edit::Hooks(HookSet {
                layout: Layout::Flat,
                entries: vec![
                    ("agentStop".into(), hook.clone()),
                    ("subagentStop".into(), hook),
                ],
            }),
        );
    }

    fn parse(&self, input: &[u8]) -> Result<HookInput, HookError> {
        let i: Input = parse_json(input)?;
        match i.hook_event_name.as_deref() {
            None | Some("agentStop" | "subagentStop" | "Stop" | "SubagentStop") => {}
            Some(other) => return Err(HookError::UnknownEvent(other.to_string())),
        }
        if i.hook_event_name.is_none()
            && i.parent_agent_id.is_some()
            && i.agent_id.is_some()
            && i.agent_id == i.session_id
        {
            // The sub-agent's own agentStop: its subagentStop follows, and
            // that one is gated (Copilot ignores a block on this).
            return Err(HookError::UnknownEvent(
                "agentStop of a sub-agent (its subagentStop is the one gated)".into(),
            ));
        }
        let hint = i.stop_hook_active.map(|a| format!("stop_hook_active={a}"));
        let generation_id = match &i.timestamp {
            Some(serde_json::Value::Number(n)) => Some(format!("timestamp:{n}")),
            Some(serde_json::Value::String(t)) if !t.trim().is_empty() => {
                Some(format!("timestamp:{t}"))
            }
            _ => None,
        };
        let subagent = match i.hook_event_name.as_deref() {
            Some("subagentStop" | "SubagentStop") => {
                Some(i.agent_id.clone().unwrap_or_else(|| "subagent".into()))
            }
            _ => i.agent_id.clone(),
        }
        .filter(|a| !a.trim().is_empty());
        Ok(HookInput {
            point: HookPoint::Stop,
            session_id: required("sessionId", i.session_id)?,
            cwd: required("cwd", i.cwd)?.into(),
            last_message: i.response.filter(|m| !m.trim().is_empty()),
            // A sub-agent's stop names its parent's transcript, which need
            // not grow between two of the sub-agent's stops: not a mark of
            // this stop (nor where its message is: `response` has it).
            transcript_path: i
                .transcript_path
                .filter(|p| !p.is_empty() && subagent.is_none())
                .map(Into::into),
            loop_hint: hint,
            prompt: None,
            generation_id,
            subagent,
        })
    }

    fn render(&self, point: HookPoint, answer: &Answer) -> Rendered {
        let stdout = match (point, answer) {
            (HookPoint::Stop, Answer::Block(reason)) => {
                json!({"decision": "block", "reason": reason}).to_string()
            }
            _ => "{}".to_string(),
        };
        Rendered { stdout, exit: 0 }
    }

    /// `timeoutSec`'s default (30 s).
    fn cli_timeout(&self) -> Duration {
        Duration::from_secs(30)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    const STOP: &str = include_str!("../../../../tests/fixtures/hooks/copilot/agent-stop.json");
    const STOP_RETRY: &str =
        include_str!("../../../../tests/fixtures/hooks/copilot/agent-stop-retry.json");
    const SUBAGENT_STOP: &str =
        include_str!("../../../../tests/fixtures/hooks/copilot/subagent-stop.json");
    const SESSION: &str = "0d9f3c2e-6a41-4b7e-8f15-2c3d4e5f6a7b";

    fn value(s: &str) -> serde_json::Value {
        serde_json::from_str(s).expect("JSON")
    }

    #[test]
    fn agent_and_subagent_stops_as_1_0_102_sends_them_are_gated() {
        let i = Copilot.parse(STOP.as_bytes()).unwrap();
        assert_eq!(i.point, HookPoint::Stop);
        assert_eq!(i.session_id, SESSION);
        assert_eq!(i.cwd, PathBuf::from("/home/user/project"));
        assert_eq!(i.last_message, None);
        assert!(i.transcript_path.is_some());
        assert_eq!(i.loop_hint.as_deref(), Some("stop_hook_active=false"));
        assert_eq!(i.subagent, None);
        assert_eq!(i.standing_key(), SESSION);
        let i = Copilot.parse(STOP_RETRY.as_bytes()).unwrap();
        assert_eq!(i.loop_hint.as_deref(), Some("stop_hook_active=true"));
        let i = Copilot.parse(SUBAGENT_STOP.as_bytes()).unwrap();
        assert_eq!(i.point, HookPoint::Stop);
        assert_eq!(i.session_id, SESSION, "the parent's session");
        assert_eq!(i.last_message.as_deref(), Some("Found it."));
        assert_eq!(i.subagent.as_deref(), Some("explore-1"), "its own budget");
        assert_eq!(i.standing_key(), format!("{SESSION}/subagent/explore-1"));
    }

    #[test]
    fn a_measured_subagent_stop_is_gated_and_the_subagents_own_agent_stop_is_not() {
        let raw =
            include_str!("../../../../tests/fixtures/hooks/copilot/subagent-stop-measured.json");
        let i = Copilot.parse(raw.as_bytes()).unwrap();
        assert_eq!(i.session_id, SESSION, "the parent's session");
        assert_eq!(
            i.subagent.as_deref(),
            Some("5b8e2f4a-1c3d-4e6f-9a7b-8c9d0e1f2a3b")
        );
        assert_eq!(i.last_message.as_deref(), Some("SUB-REPLY-1: I am done."));
        assert_eq!(i.generation_id.as_deref(), Some("timestamp:1796299760270"));
        let own = include_str!("../../../../tests/fixtures/hooks/copilot/subagent-agent-stop.json");
        assert!(matches!(
            Copilot.parse(own.as_bytes()),
            Err(HookError::UnknownEvent(_))
        ));
        // Two stops of one session: two timestamps, two stops.
        let a = Copilot.parse(STOP.as_bytes()).unwrap();
        let b = Copilot.parse(STOP_RETRY.as_bytes()).unwrap();
        assert!(a.generation_id.is_some() && a.generation_id != b.generation_id);
    }

    #[test]
    fn a_pascal_case_payload_is_read_and_other_events_or_missing_fields_are_errors() {
        let raw =
            br#"{"session_id":"s","cwd":"/w","hook_event_name":"Stop","stop_hook_active":true}"#;
        let i = Copilot.parse(raw).unwrap();
        assert_eq!((i.point, i.session_id.as_str()), (HookPoint::Stop, "s"));
        let mut v = value(STOP);
        v["hook_event_name"] = json!("preToolUse");
        let e = Copilot.parse(v.to_string().as_bytes()).unwrap_err();
        assert_eq!(e, HookError::UnknownEvent("preToolUse".into()));
        for field in ["sessionId", "cwd"] {
            let mut v = value(STOP);
            v[field] = json!("");
            let e = Copilot.parse(v.to_string().as_bytes()).unwrap_err();
            assert!(e.to_string().contains(field), "{e}");
        }
    }

    #[test]
    fn answers_are_an_object_with_exit_0() {
        let r = Copilot.render(HookPoint::Stop, &Answer::Block("fix it".into()));
        assert_eq!(
            value(&r.stdout),
            json!({"decision": "block", "reason": "fix it"})
        );
        assert_eq!(r.exit, 0);
        for answer in [Answer::Proceed, Answer::StopWithMessage("blocked".into())] {
            let r = Copilot.render(HookPoint::Stop, &answer);
            assert_eq!((r.stdout.as_str(), r.exit), ("{}", 0), "{answer:?}");
        }
    }
}
