//! Kiro CLI's hooks, from its documentation only (its CLI is not on a
//! registry here; docs/compatibility.md (Kiro CLI) names every source):
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
//!
//! `hook install kiro --kiro-agent NAME` adds the hooks to that agent's
//! file, which must exist (gatehost makes no agent); `doctor` reads every
//! agent's file of both scopes, and counts an event twice only within one
//! file (Kiro runs one agent's).

use super::adapter::{Adapter, AgentCli, Answer, HookError, HookInput, HookPoint, Rendered};
use super::adapter::{parse_json, required};
use super::install::{HookSet, Layout};
use super::plan::{Dirs, Edit, InstallContext, PlaceError, Planned, Scope, millis};
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Kiro CLI's [`Adapter`](crate::Adapter): its hook JSON, its answers and
/// where `hook install` writes its hooks ([`crate::adapter`] picks it for
/// `gatehost hook kiro`).
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

    fn program(&self) -> &'static str {
        "kiro-cli"
    }

    fn answer_keys(&self) -> &'static [&'static str] {
        &["decision", "reason"]
    }

    /// Kiro adds an exit-0 stdout of some events to the agent's context:
    /// gatehost answers nothing but a block.
    fn reads_empty_answer(&self) -> bool {
        true
    }

    fn decisions(&self) -> &'static [&'static str] {
        &["block"]
    }

    fn synthetic_stop(&self, id: &str, cwd: &Path, message: &str) -> serde_json::Value {
        json!({"hook_event_name": "stop", "session_id": id, "cwd": cwd,
            "assistant_response": message})
    }

    fn session_end(&self, _id: &str, _cwd: &Path) -> Option<serde_json::Value> {
        None
    }

    /// Kiro runs one agent's file (a project's agent in place of the
    /// user's of that name).
    fn runs_one_file(&self) -> bool {
        true
    }

    fn layout(&self) -> Layout {
        Layout::Bare
    }

    /// None of its own: hooks are in an agent's file, named by
    /// `--kiro-agent` ([`Adapter::install_files`]).
    fn hook_files(&self, _scope: Scope, _dirs: &Dirs<'_>) -> Result<Vec<PathBuf>, PlaceError> {
        Ok(Vec::new())
    }

    fn install_files(
        &self,
        scope: Scope,
        dirs: &Dirs<'_>,
        target: Option<&str>,
    ) -> Result<Vec<PathBuf>, PlaceError> {
        Ok(vec![agent_file(scope, dirs, target)?])
    }

    /// Every agent's configuration: hooks are per agent.
    fn registered_files(&self, scope: Scope, dirs: &Dirs<'_>) -> Result<Vec<PathBuf>, PlaceError> {
        let dir = agents_dir(scope, dirs)?;
        Ok(agent_names(&dir)
            .into_iter()
            .map(|name| dir.join(format!("{name}.json")))
            .collect())
    }

    fn refuse_mcp(&self, _scope: Scope) -> Option<&'static str> {
        Some(
            "gatehost does not write a Kiro agent's MCP servers (its `tools` must name them too): \
             add `gatehost mcp` under the agent's \"mcpServers\" and \"@gatehost\" to its \"tools\"",
        )
    }

    /// `timeout_ms`, in milliseconds; `stop` gates, a person's prompt
    /// starts the count again.
    fn plan(&self, ctx: &InstallContext<'_>, out: &mut Planned) {
        let hook = json!({"command": ctx.command, "timeout_ms": millis(self.cli_timeout())});
        out.push(
            &ctx.files[0],
            Edit::Hooks(HookSet {
                layout: Layout::Bare,
                entries: vec![
                    ("stop".into(), hook.clone()),
                    ("userPromptSubmit".into(), hook),
                ],
            }),
        );
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

/// Kiro CLI's agents directory of `scope`.
fn agents_dir(scope: Scope, dirs: &Dirs<'_>) -> Result<PathBuf, PlaceError> {
    Ok(match scope {
        Scope::User => dirs.home()?,
        Scope::Project => dirs.project()?,
    }
    .join(".kiro/agents"))
}

/// The Kiro agent configuration `name` of `scope`: a plain name (no path),
/// whose file exists (gatehost never makes an agent: Kiro's default one
/// carries no hooks, and a new agent would change what the user runs).
fn agent_file(scope: Scope, dirs: &Dirs<'_>, name: Option<&str>) -> Result<PathBuf, PlaceError> {
    let dir = agents_dir(scope, dirs)?;
    let Some(name) = name else {
        let found = agent_names(&dir);
        return Err(PlaceError::input(
            format!(
                "--kiro-agent NAME is needed: Kiro CLI reads hooks from an agent's configuration ({}); {}",
                dir.join("NAME.json").display(),
                if found.is_empty() {
                    "none is there yet: create one with Kiro (`kiro-cli agent create`)".to_string()
                } else {
                    format!("there: {}", found.join(", "))
                }
            ),
            "--kiro-agent",
        ));
    };
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.');
    if !plain {
        return Err(PlaceError::input(
            format!(
                "--kiro-agent {name:?}: an agent's name (letters, digits, '-', '_', '.'), not a path"
            ),
            "--kiro-agent",
        ));
    }
    let file = dir.join(format!("{name}.json"));
    if !file.is_file() {
        return Err(PlaceError::input(
            format!(
                "--kiro-agent {name}: {} does not exist; create the agent with Kiro first (gatehost adds hooks, it makes no agent)",
                file.display()
            ),
            "--kiro-agent",
        ));
    }
    Ok(file)
}

/// The agents' names in `dir` (`NAME.json`), sorted.
fn agent_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| {
            let n = e.file_name().into_string().ok()?;
            n.strip_suffix(".json")
                .filter(|s| !s.is_empty() && !s.starts_with('.'))
                .map(String::from)
        })
        .collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `install --kiro-agent NAME` names an agent that exists, by a plain
    /// name; doctor reads every agent's file, and an event counts twice
    /// only within one file.
    #[test]
    fn the_hooks_go_to_an_existing_agents_file_and_doctor_reads_them_all() {
        let project = tempfile::tempdir().expect("tempdir");
        let dirs = Dirs::new(project.path());
        let e = Kiro
            .install_files(Scope::Project, &dirs, None)
            .expect_err("no agent named");
        assert_eq!(e.field, Some("--kiro-agent"));
        assert!(e.message.contains("none is there yet"), "{e}");
        let agents = project.path().join(".kiro/agents");
        std::fs::create_dir_all(&agents).expect("mkdir");
        for name in ["b", "a"] {
            std::fs::write(agents.join(format!("{name}.json")), "{}").expect("write");
        }
        let e = Kiro
            .install_files(Scope::Project, &dirs, None)
            .expect_err("no agent named");
        assert!(e.message.ends_with("there: a, b"), "{e}");
        for bad in ["../a", ".a", "a/b", ""] {
            let e = Kiro
                .install_files(Scope::Project, &dirs, Some(bad))
                .expect_err(bad);
            assert_eq!(e.field, Some("--kiro-agent"), "{bad}");
        }
        assert!(
            Kiro.install_files(Scope::Project, &dirs, Some("c"))
                .expect_err("absent")
                .message
                .contains("does not exist")
        );
        assert_eq!(
            Kiro.install_files(Scope::Project, &dirs, Some("a"))
                .expect("a"),
            [agents.join("a.json")]
        );
        assert_eq!(
            Kiro.registered_files(Scope::Project, &dirs)
                .expect("listed"),
            [agents.join("a.json"), agents.join("b.json")]
        );
        assert!(Kiro.runs_one_file());
        assert!(
            Kiro.hook_files(Scope::Project, &dirs)
                .expect("none")
                .is_empty()
        );
    }

    /// The plan: `stop` and `userPromptSubmit` in the agent's file, bare
    /// (no version key), the timeout in milliseconds; `--mcp` is refused.
    #[test]
    fn the_plan_is_two_bare_hooks_in_the_agents_file() {
        let files = [std::path::PathBuf::from("/p/.kiro/agents/a.json")];
        let ctx = InstallContext {
            files: &files,
            command: "/bin/gatehost hook kiro",
            words: &[],
            mcp: None,
        };
        let mut out = Planned::default();
        Kiro.plan(&ctx, &mut out);
        assert_eq!(out.files.len(), 1);
        assert_eq!(out.files[0].path, files[0]);
        let [Edit::Hooks(set)] = out.files[0].edits.as_slice() else {
            panic!("one hook set: {:?}", out.files[0].edits)
        };
        assert_eq!(set.layout, Layout::Bare);
        let hook = json!({"command": "/bin/gatehost hook kiro", "timeout_ms": 30000});
        assert_eq!(
            set.entries,
            [
                ("stop".to_string(), hook.clone()),
                ("userPromptSubmit".to_string(), hook)
            ]
        );
        assert!(Kiro.refuse_mcp(Scope::User).is_some());
    }
    use std::path::PathBuf;

    const STOP: &str = include_str!("../../../../tests/fixtures/hooks/kiro/stop.json");
    const STOP_V3: &str = include_str!("../../../../tests/fixtures/hooks/kiro/stop-v3.json");
    const STOP_RESPONSE: &str =
        include_str!("../../../../tests/fixtures/hooks/kiro/stop-assistant-response.json");

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
