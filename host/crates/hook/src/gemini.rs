//! Gemini CLI's hooks (`hooks` in `settings.json`, command hooks only, run
//! as `bash -c COMMAND` in the session's cwd): `AfterAgent` gates,
//! `SessionStart` and `BeforeAgent` only register the session,
//! `SessionEnd` (`reason` `exit` as the CLI exits, `clear` on `/clear`)
//! ends it.
//!
//! As measured with Gemini CLI 0.61.0 (tests/support/fake-model-api/README.md):
//! every event's stdin has `session_id`, `transcript_path`, `cwd`,
//! `hook_event_name` and `timestamp`; `SessionStart` adds `source`,
//! `BeforeAgent` adds `prompt`, `AfterAgent` adds `prompt` (the user's),
//! `prompt_response` (every text of the turn so far, retries included,
//! joined by `\n`) and `stop_hook_active`.
//!
//! Answers, exit 0: `{"decision": "deny", "reason"}` on `AfterAgent` makes the
//! agent go on with the reason as a new user message; `{"systemMessage"}`
//! lets the stop happen and prints `Hook system message: …` on the CLI's
//! stderr; `{}` lets it happen silently. Stdout must be JSON: text there,
//! or nothing on stdout with text on stderr, becomes a system message, so
//! even "nothing to say" is `{}`.
//!
//! `BeforeAgent` is not a turn's start here: after a deny the CLI runs it
//! again with the deny reason as its `prompt`, so counting it as a person's
//! prompt would reset the retry count on every retry, and a gate that never
//! passes would loop until the CLI crashes (it has no cap of its own). It
//! only registers the session, as `SessionStart` does.

use super::adapter::parse_common;
use super::adapter::{Adapter, AgentCli, Answer, HookError, HookInput, HookPoint, Rendered};
use super::plan::{Dirs, InstallContext, PlaceError, Planned, Scope, Unit, grouped};
use serde_json::json;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Google Gemini CLI's [`Adapter`](crate::Adapter): its hook JSON, its answers and
/// where `hook install` writes its hooks ([`crate::adapter`] picks it for
/// `gatehost hook gemini`).
pub struct Gemini;

impl Adapter for Gemini {
    fn agent(&self) -> AgentCli {
        AgentCli::Gemini
    }

    fn program(&self) -> &'static str {
        "gemini"
    }

    fn decisions(&self) -> &'static [&'static str] {
        &["deny", "block", "allow"]
    }

    fn synthetic_stop(&self, id: &str, cwd: &Path, message: &str) -> serde_json::Value {
        json!({"session_id": id, "cwd": cwd, "hook_event_name": "AfterAgent",
            "prompt": "doctor", "prompt_response": message, "stop_hook_active": false})
    }

    /// Its system `settings.json` (or the file
    /// `GEMINI_CLI_SYSTEM_SETTINGS_PATH` names).
    fn managed_files(
        &self,
        env: &dyn Fn(&str) -> Option<OsString>,
        _list: &dyn Fn(&Path) -> Vec<PathBuf>,
    ) -> Vec<PathBuf> {
        vec![env("GEMINI_CLI_SYSTEM_SETTINGS_PATH").map_or_else(
            || PathBuf::from("/etc/gemini-cli/settings.json"),
            PathBuf::from,
        )]
    }

    fn hook_files(&self, scope: Scope, dirs: &Dirs<'_>) -> Result<Vec<PathBuf>, PlaceError> {
        Ok(vec![match scope {
            Scope::User => dirs.home()?.join(".gemini/settings.json"),
            Scope::Project => dirs.project()?.join(".gemini/settings.json"),
        }])
    }

    fn plan(&self, ctx: &InstallContext<'_>, out: &mut Planned) {
        let events = [
            ("AfterAgent", HookPoint::Stop),
            ("SessionStart", HookPoint::SessionStart),
            ("SessionEnd", HookPoint::SessionEnd),
        ];
        let hooks = grouped(
            |p| self.event_timeout(p),
            ctx.command,
            &events,
            Unit::Millis,
        );
        out.push(&ctx.files[0], hooks);
        if let Some(mcp) = ctx.mcp_server() {
            out.push(&ctx.files[0], mcp);
        }
    }

    fn parse(&self, input: &[u8]) -> Result<HookInput, HookError> {
        parse_common(input, |event| match event {
            "AfterAgent" => Some(HookPoint::Stop),
            // Not TurnStart: see the module's documentation.
            "SessionStart" | "BeforeAgent" => Some(HookPoint::SessionStart),
            "SessionEnd" => Some(HookPoint::SessionEnd),
            _ => None,
        })
    }

    fn render(&self, point: HookPoint, answer: &Answer) -> Rendered {
        let stdout = match (point, answer) {
            // JSON even when there is nothing to say (see above).
            (_, Answer::Proceed) => "{}".to_string(),
            (HookPoint::Stop, Answer::Block(reason)) => {
                json!({"decision": "deny", "reason": reason}).to_string()
            }
            // `decision` is ignored on SessionStart and would drop the
            // user's prompt on BeforeAgent: never block there, say it.
            (_, Answer::Block(message) | Answer::StopWithMessage(message)) => {
                json!({"systemMessage": message}).to_string()
            }
        };
        Rendered { stdout, exit: 0 }
    }

    /// The CLI's default hook `timeout` (60000 ms); past it the hook is
    /// killed and the stop let through.
    fn cli_timeout(&self) -> Duration {
        Duration::from_secs(60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    // Stdin of each event as Gemini CLI 0.61.0 wrote it in one `-p` run
    // (the first two AfterAgent calls were answered with a deny).
    const SESSION_START: &str = r#"{"session_id":"ea4b19bd-99d9-4f50-bd30-c04e4e5da9f2","transcript_path":"/tmp/gx/rJ/home/.gemini/tmp/cwd/chats/session-2026-12-01T01-42-ea4b19bd.jsonl","cwd":"/tmp/gx/rJ/cwd","hook_event_name":"SessionStart","timestamp":"2026-12-01T01:42:56.442Z","source":"startup"}"#;
    const BEFORE_AGENT: &str = r#"{"session_id":"ea4b19bd-99d9-4f50-bd30-c04e4e5da9f2","transcript_path":"/tmp/gx/rJ/home/.gemini/tmp/cwd/chats/session-2026-12-01T01-42-ea4b19bd.jsonl","cwd":"/tmp/gx/rJ/cwd","hook_event_name":"BeforeAgent","timestamp":"2026-12-01T01:42:56.478Z","prompt":"say hi"}"#;
    const AFTER_AGENT: &str = r#"{"session_id":"ea4b19bd-99d9-4f50-bd30-c04e4e5da9f2","transcript_path":"/tmp/gx/rJ/home/.gemini/tmp/cwd/chats/session-2026-12-01T01-42-ea4b19bd.jsonl","cwd":"/tmp/gx/rJ/cwd","hook_event_name":"AfterAgent","timestamp":"2026-12-01T01:42:56.645Z","prompt":"say hi","prompt_response":"All done.","stop_hook_active":false}"#;
    const BEFORE_AGENT_RETRY: &str = r#"{"session_id":"ea4b19bd-99d9-4f50-bd30-c04e4e5da9f2","transcript_path":"/tmp/gx/rJ/home/.gemini/tmp/cwd/chats/session-2026-12-01T01-42-ea4b19bd.jsonl","cwd":"/tmp/gx/rJ/cwd","hook_event_name":"BeforeAgent","timestamp":"2026-12-01T01:42:56.702Z","prompt":"NUDGE-1"}"#;
    const AFTER_AGENT_RETRY: &str = r#"{"session_id":"ea4b19bd-99d9-4f50-bd30-c04e4e5da9f2","transcript_path":"/tmp/gx/rJ/home/.gemini/tmp/cwd/chats/session-2026-12-01T01-42-ea4b19bd.jsonl","cwd":"/tmp/gx/rJ/cwd","hook_event_name":"AfterAgent","timestamp":"2026-12-01T01:42:56.812Z","prompt":"say hi","prompt_response":"All done.\nAll done.","stop_hook_active":true}"#;
    const SESSION_END: &str = r#"{"session_id":"ea4b19bd-99d9-4f50-bd30-c04e4e5da9f2","transcript_path":"/tmp/gx/rJ/home/.gemini/tmp/cwd/chats/session-2026-12-01T01-42-ea4b19bd.jsonl","cwd":"/tmp/gx/rJ/cwd","hook_event_name":"SessionEnd","timestamp":"2026-12-01T01:42:56.923Z","reason":"exit"}"#;

    const SESSION: &str = "ea4b19bd-99d9-4f50-bd30-c04e4e5da9f2";

    fn value(s: &str) -> serde_json::Value {
        serde_json::from_str(s).expect("JSON")
    }

    #[test]
    fn reads_after_agent_as_sent_by_0_61() {
        let i = Gemini.parse(AFTER_AGENT.as_bytes()).unwrap();
        assert_eq!(i.point, HookPoint::Stop);
        assert_eq!(i.session_id, SESSION);
        assert_eq!(i.cwd, PathBuf::from("/tmp/gx/rJ/cwd"));
        assert_eq!(i.last_message.as_deref(), Some("All done."));
        assert_eq!(
            i.transcript_path,
            Some(PathBuf::from(
                "/tmp/gx/rJ/home/.gemini/tmp/cwd/chats/session-2026-12-01T01-42-ea4b19bd.jsonl"
            ))
        );
        assert_eq!(i.loop_hint.as_deref(), Some("stop_hook_active=false"));
        // A retry's stop: the turn's texts so far, the loop flag only logged.
        let i = Gemini.parse(AFTER_AGENT_RETRY.as_bytes()).unwrap();
        assert_eq!(i.point, HookPoint::Stop);
        assert_eq!(i.last_message.as_deref(), Some("All done.\nAll done."));
        assert_eq!(i.loop_hint.as_deref(), Some("stop_hook_active=true"));
    }

    #[test]
    fn session_start_and_every_before_agent_only_register() {
        for raw in [SESSION_START, BEFORE_AGENT, BEFORE_AGENT_RETRY] {
            let i = Gemini.parse(raw.as_bytes()).unwrap();
            // Never TurnStart: the retry's BeforeAgent carries the deny
            // reason as its prompt, and must not reset the retry count.
            assert_eq!(i.point, HookPoint::SessionStart, "{raw}");
            assert_eq!(i.session_id, SESSION);
            assert_eq!(i.cwd, PathBuf::from("/tmp/gx/rJ/cwd"));
            assert_eq!(i.last_message, None);
        }
    }

    #[test]
    fn session_end_as_gemini_fires_it_on_exit_and_clear_ends_the_session() {
        // As 0.61 sent it, and fireSessionEndEvent's other reason.
        let i = Gemini.parse(SESSION_END.as_bytes()).unwrap();
        assert_eq!(
            (i.point, i.session_id.as_str()),
            (HookPoint::SessionEnd, SESSION)
        );
        for reason in ["exit", "clear"] {
            let raw = format!(
                r#"{{"session_id":"{SESSION}","transcript_path":"/t.jsonl","cwd":"/tmp/gx/rJ/cwd","hook_event_name":"SessionEnd","timestamp":"2026-12-01T01:43:00.000Z","reason":"{reason}"}}"#
            );
            let i = Gemini.parse(raw.as_bytes()).unwrap();
            assert_eq!(i.point, HookPoint::SessionEnd);
            assert_eq!(i.session_id, SESSION);
            assert_eq!(Gemini.render(i.point, &Answer::Proceed).stdout, "{}");
        }
    }

    #[test]
    fn other_events_and_missing_fields_are_errors_naming_them() {
        let mut v = value(SESSION_END);
        v["hook_event_name"] = json!("BeforeTool");
        let e = Gemini.parse(v.to_string().as_bytes()).unwrap_err();
        assert_eq!(e, HookError::UnknownEvent("BeforeTool".into()));
        let mut v = value(AFTER_AGENT);
        v.as_object_mut().unwrap().remove("session_id");
        let e = Gemini.parse(v.to_string().as_bytes()).unwrap_err();
        assert!(e.to_string().contains("session_id"), "{e}");
        let mut v = value(AFTER_AGENT);
        v["cwd"] = json!("");
        let e = Gemini.parse(v.to_string().as_bytes()).unwrap_err();
        assert!(e.to_string().contains("cwd"), "{e}");
        let mut v = value(AFTER_AGENT);
        v["stop_hook_active"] = json!("yes");
        let e = Gemini.parse(v.to_string().as_bytes()).unwrap_err();
        assert!(e.to_string().contains("stop_hook_active"), "{e}");
    }

    #[test]
    fn an_empty_response_is_no_message_and_a_bom_or_new_fields_are_fine() {
        let mut v = value(AFTER_AGENT);
        v["prompt_response"] = json!("");
        v["new_field_of_0_62"] = json!({"x": 1});
        let mut raw = b"\xEF\xBB\xBF".to_vec();
        raw.extend_from_slice(v.to_string().as_bytes());
        let i = Gemini.parse(&raw).unwrap();
        assert_eq!(i.point, HookPoint::Stop);
        assert_eq!(i.last_message, None);
    }

    #[test]
    fn answers_are_the_json_0_61_obeys_always_with_exit_0() {
        let r = Gemini.render(HookPoint::Stop, &Answer::Block("fix it".into()));
        assert_eq!(
            value(&r.stdout),
            json!({"decision": "deny", "reason": "fix it"})
        );
        assert_eq!(r.exit, 0);
        let r = Gemini.render(HookPoint::Stop, &Answer::StopWithMessage("blocked".into()));
        assert_eq!(value(&r.stdout), json!({"systemMessage": "blocked"}));
        assert_eq!(r.exit, 0);
        // Nothing to say is still JSON: empty stdout would hand the CLI
        // gatehost's stderr to parse instead.
        for point in [HookPoint::Stop, HookPoint::SessionStart] {
            let r = Gemini.render(point, &Answer::Proceed);
            assert_eq!(r.stdout, "{}");
            assert_eq!(r.exit, 0);
        }
        // Outside a stop nothing is ever denied (a BeforeAgent deny would
        // drop the user's prompt): the message is shown instead.
        let r = Gemini.render(HookPoint::SessionStart, &Answer::Block("x".into()));
        assert_eq!(value(&r.stdout), json!({"systemMessage": "x"}));
    }
}
