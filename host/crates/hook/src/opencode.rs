//! OpenCode's end of turn, through gatehost's plugin: OpenCode has no stop
//! hook, so `gatehost hook install opencode` writes a JavaScript plugin
//! (`host/assets/opencode/gatehost.js`, into `$XDG_CONFIG_HOME/opencode/plugin/`
//! or a project's `.opencode/plugin/`) that, on `session.idle`, runs the
//! installed `gatehost hook opencode …` with one JSON object on stdin and
//! reads one JSON object back.
//!
//! Stdin, as the plugin writes it (measured with opencode-ai 1.18.33,
//! docs/compatibility.md, OpenCode): `hook_event_name: "session.idle"`,
//! `session_id`, `cwd` (the session's directory), `worktree`,
//! `parent_session_id` (a sub-agent's session: its parent's id, else null),
//! `last_assistant_message`, `stop_hook_active` (the newest user message is
//! the plugin's last reason), `can_continue` (false under plain `opencode
//! run`, which exits when the session is idle), `opencode_mode`,
//! `opencode_version`. A child session's stop is a sub-agent's: the parent's
//! session, the child's id as the sub-agent.
//!
//! Answers, exit 0: `{"decision": "block", "reason"}` (the plugin sends the
//! reason as the session's next user message; under plain `opencode run` it
//! prints it on stderr and makes `run` exit 1), `{"systemMessage"}` (let it
//! stop and show this), `{}`.

use super::adapter::{Adapter, AgentCli, Answer, HookError, HookInput, HookPoint, Rendered};
use super::adapter::{parse_json, required};
use super::install::PLUGIN_FILE;
use super::plan::{Dirs, Edit, InstallContext, PlaceError, Planned, Scope, millis};
use serde::Deserialize;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// OpenCode's [`Adapter`](crate::Adapter): its hook JSON, its answers and
/// where `hook install` writes its hooks ([`crate::adapter`] picks it for
/// `gatehost hook opencode`).
pub struct OpenCode;

#[derive(Deserialize)]
struct Input {
    hook_event_name: Option<String>,
    session_id: Option<String>,
    cwd: Option<String>,
    parent_session_id: Option<String>,
    last_assistant_message: Option<String>,
    stop_hook_active: Option<bool>,
    can_continue: Option<bool>,
    opencode_mode: Option<String>,
}

impl Adapter for OpenCode {
    fn agent(&self) -> AgentCli {
        AgentCli::Opencode
    }

    fn program(&self) -> &'static str {
        "opencode"
    }

    /// What gatehost's plugin reads (host/assets/opencode/gatehost.js).
    fn answer_keys(&self) -> &'static [&'static str] {
        &["decision", "reason", "systemMessage"]
    }

    fn decisions(&self) -> &'static [&'static str] {
        &["block"]
    }

    fn synthetic_stop(&self, id: &str, cwd: &Path, message: &str) -> serde_json::Value {
        json!({"hook_event_name": "session.idle", "session_id": id,
            "cwd": cwd, "worktree": cwd, "parent_session_id": null,
            "last_assistant_message": message, "stop_hook_active": false,
            "can_continue": true, "opencode_mode": "doctor"})
    }

    fn session_end(&self, _id: &str, _cwd: &Path) -> Option<serde_json::Value> {
        None
    }

    fn hooks_in_plugin(&self) -> bool {
        true
    }

    fn hook_files(&self, scope: Scope, dirs: &Dirs<'_>) -> Result<Vec<PathBuf>, PlaceError> {
        Ok(vec![match scope {
            Scope::User => {
                let config = dirs
                    .env_dir("XDG_CONFIG_HOME")
                    .filter(|d| d.is_absolute())
                    .map_or_else(|| dirs.home().map(|h| h.join(".config")), Ok)?;
                config.join("opencode/plugin").join(PLUGIN_FILE)
            }
            Scope::Project => dirs.project()?.join(".opencode/plugin").join(PLUGIN_FILE),
        }])
    }

    fn refuse_mcp(&self, _scope: Scope) -> Option<&'static str> {
        Some(
            "gatehost does not write OpenCode's MCP configuration: add \"mcp\": {\"gatehost\": \
             {\"type\": \"local\", \"command\": [\"/path/to/gatehost\", \"mcp\"]}} to opencode.json",
        )
    }

    /// The whole file is gatehost's plugin, running the hook command's
    /// words (no shell).
    fn plan(&self, ctx: &InstallContext<'_>, out: &mut Planned) {
        let mut words = ctx.words.iter().cloned();
        let command = words.next().unwrap_or_default();
        out.push(
            &ctx.files[0],
            Edit::Plugin {
                command,
                args: words.collect(),
                timeout_ms: millis(self.cli_timeout()),
            },
        );
    }

    fn parse(&self, input: &[u8]) -> Result<HookInput, HookError> {
        let i: Input = parse_json(input)?;
        let event = required("hook_event_name", i.hook_event_name)?;
        if event != "session.idle" {
            return Err(HookError::UnknownEvent(event));
        }
        let session = required("session_id", i.session_id)?;
        let (session_id, subagent) = match i.parent_session_id.filter(|p| !p.trim().is_empty()) {
            Some(parent) => (parent, Some(session)),
            None => (session, None),
        };
        let hint = [
            i.stop_hook_active.map(|a| format!("stop_hook_active={a}")),
            i.can_continue.map(|c| format!("can_continue={c}")),
            i.opencode_mode.map(|m| format!("mode={m}")),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
        Ok(HookInput {
            point: HookPoint::Stop,
            session_id,
            cwd: required("cwd", i.cwd)?.into(),
            last_message: i.last_assistant_message.filter(|m| !m.trim().is_empty()),
            transcript_path: None,
            loop_hint: (!hint.is_empty()).then_some(hint),
            prompt: None,
            generation_id: None,
            subagent,
        })
    }

    fn render(&self, point: HookPoint, answer: &Answer) -> Rendered {
        let stdout = match (point, answer) {
            (HookPoint::Stop, Answer::Block(reason)) => {
                json!({"decision": "block", "reason": reason}).to_string()
            }
            (_, Answer::Block(message) | Answer::StopWithMessage(message)) => {
                json!({"systemMessage": message}).to_string()
            }
            (_, Answer::Proceed) => "{}".to_string(),
        };
        Rendered { stdout, exit: 0 }
    }

    /// The plugin's `timeoutMs` as `hook install` writes it: OpenCode puts
    /// no timeout on a plugin, so the plugin's own is the CLI's.
    fn cli_timeout(&self) -> Duration {
        Duration::from_secs(600)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    const IDLE: &str = include_str!("../../../../tests/fixtures/hooks/opencode/session-idle.json");
    const IDLE_RETRY: &str =
        include_str!("../../../../tests/fixtures/hooks/opencode/session-idle-retry.json");

    #[test]
    fn the_plugins_stop_as_measured_is_read() {
        let i = OpenCode.parse(IDLE.as_bytes()).unwrap();
        assert_eq!(i.point, HookPoint::Stop);
        assert_eq!(i.session_id, "ses_dc51dcb73ffe86sI4oT64hDI4e");
        assert_eq!(i.cwd, PathBuf::from("/home/user/project"));
        assert_eq!(i.last_message.as_deref(), Some("I am done."));
        assert_eq!(i.subagent, None);
        assert_eq!(
            i.loop_hint.as_deref(),
            Some("stop_hook_active=false can_continue=true mode=serve")
        );
        let i = OpenCode.parse(IDLE_RETRY.as_bytes()).unwrap();
        assert!(i.loop_hint.unwrap().contains("stop_hook_active=true"));
    }

    #[test]
    fn a_child_sessions_stop_is_a_subagents_of_its_parent() {
        let mut v: serde_json::Value = serde_json::from_str(IDLE).unwrap();
        v["parent_session_id"] = json!("ses_parent");
        let i = OpenCode.parse(v.to_string().as_bytes()).unwrap();
        assert_eq!(i.session_id, "ses_parent");
        assert_eq!(
            i.subagent.as_deref(),
            Some("ses_dc51dcb73ffe86sI4oT64hDI4e")
        );
    }

    #[test]
    fn other_events_and_missing_fields_are_errors_naming_them() {
        let mut v: serde_json::Value = serde_json::from_str(IDLE).unwrap();
        v["hook_event_name"] = json!("session.error");
        let e = OpenCode.parse(v.to_string().as_bytes()).unwrap_err();
        assert_eq!(e, HookError::UnknownEvent("session.error".into()));
        for field in ["session_id", "cwd", "hook_event_name"] {
            let mut v: serde_json::Value = serde_json::from_str(IDLE).unwrap();
            v[field] = json!("");
            let e = OpenCode.parse(v.to_string().as_bytes()).unwrap_err();
            assert!(e.to_string().contains(field), "{e}");
        }
    }

    #[test]
    fn answers_are_one_object_the_plugin_reads_with_exit_0() {
        let r = OpenCode.render(HookPoint::Stop, &Answer::Block("fix it".into()));
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        assert_eq!(v, json!({"decision": "block", "reason": "fix it"}));
        assert_eq!(r.exit, 0);
        let r = OpenCode.render(HookPoint::Stop, &Answer::StopWithMessage("out".into()));
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        assert_eq!(v, json!({"systemMessage": "out"}));
        assert_eq!(
            OpenCode.render(HookPoint::Stop, &Answer::Proceed).stdout,
            "{}"
        );
    }
}
