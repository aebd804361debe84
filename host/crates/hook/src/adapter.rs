//! The contract between gatehost and one agent CLI's hooks: parse what the
//! CLI writes on the hook's stdin into a [`HookInput`], render an
//! [`Answer`] into what the CLI reads back (stdout and exit status).
//!
//! It owns the shared parsing rules (a UTF-8 BOM is skipped, unknown fields
//! are ignored, a missing required field names itself) and the size bound of
//! a block reason. An adapter also says where its CLI keeps its hooks and
//! what `hook install` writes there ([`super::plan`]), and what `gatehost
//! doctor` checks of it: everything one CLI needs is its adapter's file
//! (docs/contributing.md lists what to add for a new CLI).
//! It must never run a gate nor write a file: `parse` and `render` are pure
//! translations, tested on fixtures of each CLI's documented JSON; the
//! install and doctor parts only name paths (Kiro's lists its agents'
//! files, Claude Code's plan asks each `claude` on PATH its version).

use super::install::Layout;
use super::plan::{Dirs, InstallContext, PlaceError, Planned, Scope};
use serde::de::DeserializeOwned;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The agent CLIs gatehost has hook adapters for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum AgentCli {
    /// Claude Code (`Stop`, `SubagentStop`, `SessionStart`, `UserPromptSubmit`, `SessionEnd`).
    Claude,
    /// OpenAI Codex CLI (`hooks.json`: `Stop`, `SessionStart`, `UserPromptSubmit`, `SessionEnd`).
    Codex,
    /// Google Gemini CLI (`AfterAgent`, `SessionStart`, `BeforeAgent`, `SessionEnd`).
    Gemini,
    /// Cursor (`.cursor/hooks.json`: `stop`, `beforeSubmitPrompt`).
    Cursor,
    /// Qwen Code (`settings.json` `hooks`: `Stop`, `SubagentStop`, `SessionStart`, `UserPromptSubmit`, `SessionEnd`).
    Qwen,
    /// GitHub Copilot CLI (`hooks/*.json`: `agentStop`, `subagentStop`).
    Copilot,
    /// OpenCode (gatehost's plugin in `opencode/plugin/`: `session.idle`).
    Opencode,
    /// Kiro CLI (an agent configuration's `hooks`: `stop`, `userPromptSubmit`).
    Kiro,
}

impl AgentCli {
    /// Every CLI gatehost has an adapter for, in the order `doctor` and
    /// `hook install` go through them.
    pub const ALL: [AgentCli; 8] = [
        AgentCli::Claude,
        AgentCli::Codex,
        AgentCli::Gemini,
        AgentCli::Cursor,
        AgentCli::Qwen,
        AgentCli::Copilot,
        AgentCli::Opencode,
        AgentCli::Kiro,
    ];

    /// The CLI named `name` (as [`AgentCli::name`] gives it).
    pub fn from_name(name: &str) -> Option<AgentCli> {
        AgentCli::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The name on the command line and the prefix of daemon session ids
    /// (`claude:<session_id>`).
    pub fn name(self) -> &'static str {
        match self {
            AgentCli::Claude => "claude",
            AgentCli::Codex => "codex",
            AgentCli::Gemini => "gemini",
            AgentCli::Cursor => "cursor",
            AgentCli::Qwen => "qwen",
            AgentCli::Copilot => "copilot",
            AgentCli::Opencode => "opencode",
            AgentCli::Kiro => "kiro",
        }
    }
}

/// Where in the agent's life the hook was called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookPoint {
    /// The session started (or resumed): register it.
    SessionStart,
    /// The user submitted a prompt: a new turn starts (and the session's
    /// standalone retry count starts again: a person spoke).
    TurnStart,
    /// The agent wants to stop: gate its work.
    Stop,
    /// The session ended (the CLI exits, or `/clear` starts another):
    /// report it exited, forget its standalone standing. Never refused.
    SessionEnd,
}

/// What every CLI's hook JSON says, once read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookInput {
    /// Which hook the CLI called (its event, mapped to gatehost's four).
    pub point: HookPoint,
    /// The CLI's own session id (gatehost's daemon id is `AGENT:<id>`).
    pub session_id: String,
    /// The agent's working directory: the workspace the gates run in.
    pub cwd: PathBuf,
    /// The agent's last message of the turn, when the CLI sends it.
    pub last_message: Option<String>,
    /// The transcript file, to read the last message from when the CLI does
    /// not send it.
    pub transcript_path: Option<PathBuf>,
    /// The CLI's own loop hint (`stop_hook_active`, `loop_count`): logged,
    /// never trusted to count retries.
    pub loop_hint: Option<String>,
    /// A turn start's prompt, when the CLI sends it: told apart from the
    /// block reason gatehost itself had the CLI submit (Cursor submits a
    /// `followup_message` as the next user message), which is no person
    /// speaking and so does not start the count again.
    pub prompt: Option<String>,
    /// The CLI's id of the generation that stopped (Cursor's
    /// `generation_id`), when it sends one: tells this stop from the next
    /// when the same stop reaches gatehost twice (the stop ledger).
    pub generation_id: Option<String>,
    /// A sub-agent's stop (Claude Code's `SubagentStop`, Copilot CLI's
    /// `subagentStop`): the sub-agent's id (or type). `session_id` is then
    /// the parent's; the sub-agent is counted on a retry budget of its own.
    pub subagent: Option<String>,
}

impl HookInput {
    /// The key the stop's standing (retry count) and stop ledger entry are
    /// kept under: the session's id, or the parent session's id and the
    /// sub-agent's for a sub-agent's stop.
    pub fn standing_key(&self) -> String {
        match &self.subagent {
            Some(agent) => format!("{}/subagent/{agent}", self.session_id),
            None => self.session_id.clone(),
        }
    }
}

/// What gatehost answers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "answer", content = "text", rename_all = "kebab-case")]
pub enum Answer {
    /// Nothing to say: let the agent go on (or stop).
    Proceed,
    /// Let the stop happen, and show the user this message (out of retries,
    /// or the gate could not run and the one block was spent).
    StopWithMessage(String),
    /// Refuse the stop: the agent continues with this reason as its prompt.
    Block(String),
}

/// An answer as the CLI reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// Exactly what goes on stdout (JSON, or nothing).
    pub stdout: String,
    /// The exit status the CLI expects for this answer.
    pub exit: i32,
}

/// Why a CLI's hook input could not be read into a [`HookInput`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    /// The input is not one JSON value (a syntax error, the input cut
    /// short, or a second value after the first): the decoder's message.
    #[error("the hook input is not JSON: {0}")]
    NotJson(String),
    /// A field is missing, empty or of the wrong type.
    #[error("the hook input has no usable '{field}': {message}")]
    Field {
        /// The field's path in the input, as `serde_path_to_error` gives it.
        field: String,
        /// What is wrong with it (the decoder's message, or "missing or
        /// empty").
        message: String,
    },
    /// The CLI's event name (for one that sends it) is none of the hooks
    /// gatehost installs.
    #[error("hook event '{0}' is not one gatehost answers")]
    UnknownEvent(String),
}

/// One agent CLI's hook contract.
pub trait Adapter: Sync {
    /// The CLI this adapter speaks for.
    fn agent(&self) -> AgentCli;

    /// Reads the hook's stdin.
    fn parse(&self, input: &[u8]) -> Result<HookInput, HookError>;

    /// Writes an answer for a hook called at `point`.
    fn render(&self, point: HookPoint, answer: &Answer) -> Rendered;

    /// How long the CLI waits for a hook by default; gatehost's budget is
    /// set below it.
    fn cli_timeout(&self) -> Duration;

    /// The timeout `hook install` writes for the hook of `point`, within
    /// what the CLI accepts for that event: [`Adapter::cli_timeout`], except
    /// [`SESSION_END_TIMEOUT`] for a session's end, which the CLIs bound
    /// (Codex clamps it to 3 s, with a warning on every run).
    fn event_timeout(&self, point: HookPoint) -> Duration {
        match point {
            HookPoint::SessionEnd => SESSION_END_TIMEOUT,
            _ => self.cli_timeout(),
        }
    }

    /// The longest block reason this CLI is given (bytes); longer reasons
    /// are cut by [`trim_reason`].
    fn reason_limit(&self) -> usize {
        16 * 1024
    }

    // What `gatehost doctor` knows of the CLI.

    /// The CLI's program on PATH (doctor reads its `--version`).
    fn program(&self) -> &'static str;

    /// The keys the CLI reads in a hook's JSON answer.
    fn answer_keys(&self) -> &'static [&'static str] {
        COMMON_ANSWER_KEYS
    }

    /// True when the CLI reads nothing on stdout as "go on"; the others
    /// want a JSON object.
    fn reads_empty_answer(&self) -> bool {
        false
    }

    /// The `decision` values the CLI reads.
    fn decisions(&self) -> &'static [&'static str] {
        &["block", "approve"]
    }

    /// A stop of session `id` in `cwd` whose last message is `message`, as
    /// the CLI sends it (doctor's dry run).
    fn synthetic_stop(&self, id: &str, cwd: &Path, message: &str) -> serde_json::Value;

    /// The end of session `id`, for the CLIs whose hooks have one.
    fn session_end(&self, id: &str, cwd: &Path) -> Option<serde_json::Value> {
        Some(serde_json::json!({"session_id": id, "cwd": cwd,
            "hook_event_name": "SessionEnd", "reason": "exit"}))
    }

    /// The managed (system) settings files the CLI reads hooks from, in
    /// the order it reads them; `env` is the environment, `list` the
    /// `.json` files of a directory. None by default.
    fn managed_files(
        &self,
        _env: &dyn Fn(&str) -> Option<OsString>,
        _list: &dyn Fn(&Path) -> Vec<PathBuf>,
    ) -> Vec<PathBuf> {
        Vec::new()
    }

    /// True when the CLI runs one file's hooks only (Kiro: one agent's
    /// configuration), so an event registered in two files is no double.
    fn runs_one_file(&self) -> bool {
        false
    }

    // Where its hooks live, and what `hook install` writes there.

    /// How the CLI's configuration lists hooks.
    fn layout(&self) -> Layout {
        Layout::Grouped
    }

    /// True when gatehost's hook file is its plugin (OpenCode), not a
    /// configuration listing hooks.
    fn hooks_in_plugin(&self) -> bool {
        false
    }

    /// The files the CLI's hooks (and MCP servers) live in, for a scope:
    /// the hooks' first.
    fn hook_files(&self, scope: Scope, dirs: &Dirs<'_>) -> Result<Vec<PathBuf>, PlaceError>;

    /// The files `install` and `uninstall` change; `target` is what names
    /// one where the CLI keeps several (`--kiro-agent`).
    fn install_files(
        &self,
        scope: Scope,
        dirs: &Dirs<'_>,
        _target: Option<&str>,
    ) -> Result<Vec<PathBuf>, PlaceError> {
        self.hook_files(scope, dirs)
    }

    /// Every file of a scope that may hold gatehost's hooks (doctor).
    fn registered_files(&self, scope: Scope, dirs: &Dirs<'_>) -> Result<Vec<PathBuf>, PlaceError> {
        Ok(self.hook_files(scope, dirs)?.into_iter().take(1).collect())
    }

    /// Why `--mcp` is refused in `scope` (gatehost does not write this
    /// CLI's MCP configuration there), with what to do instead.
    fn refuse_mcp(&self, _scope: Scope) -> Option<&'static str> {
        None
    }

    /// What `hook install` tells the installer of the CLI, after it wrote.
    fn install_notes(&self, _scope: Scope) -> Vec<&'static str> {
        Vec::new()
    }

    /// What `hook install` writes where.
    fn plan(&self, ctx: &InstallContext<'_>, out: &mut Planned);
}

/// The keys Claude Code, Codex, Gemini CLI and Qwen Code read in a hook's
/// JSON answer.
pub const COMMON_ANSWER_KEYS: &[&str] = &[
    "decision",
    "reason",
    "systemMessage",
    "continue",
    "stopReason",
    "suppressOutput",
    "hookSpecificOutput",
];

/// The timeout written for a `SessionEnd` hook: the most Codex accepts
/// (it clamps a longer one to 3 s and warns on every run); within Claude
/// Code's range (its SessionEnd hooks share 1.5 s, raised by a hook's
/// `timeout` up to 60 s) and Gemini CLI's. The hook itself gives the
/// session's end half of it, so that its start and exit fit in the rest.
pub const SESSION_END_TIMEOUT: Duration = Duration::from_secs(3);

/// Decodes hook JSON: a leading UTF-8 BOM is skipped and unknown fields are
/// ignored (the CLIs add fields often); a type error names its field.
pub fn parse_json<T: DeserializeOwned>(input: &[u8]) -> Result<T, HookError> {
    let input = input.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(input);
    let mut de = serde_json::Deserializer::from_slice(input);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() || field == "." {
            HookError::NotJson(inner.to_string())
        } else {
            HookError::Field {
                field,
                message: inner.to_string(),
            }
        }
    })?;
    // One object, then only whitespace: a second object appended is never
    // silently dropped.
    de.end().map_err(|e| {
        HookError::NotJson(format!(
            "more than one JSON value (only whitespace may follow the object): {e}"
        ))
    })?;
    Ok(value)
}

/// Cuts `reason` to at most `limit` bytes on a character boundary, keeping
/// its head (what failed) and its tail (the end of the output), and saying
/// how much was cut.
pub fn trim_reason(reason: &str, limit: usize) -> String {
    if reason.len() <= limit {
        return reason.to_string();
    }
    let marker_room = 64;
    let keep = limit.saturating_sub(marker_room);
    let head_len = floor_boundary(reason, keep / 2);
    let tail_start = ceil_boundary(reason, reason.len() - (keep - head_len));
    let cut = tail_start - head_len;
    format!(
        "{}\n… ({cut} bytes cut) …\n{}",
        &reason[..head_len],
        &reason[tail_start..]
    )
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// The fields Claude Code, Codex and Gemini CLI share (Gemini names the
/// last message `prompt_response`). Cursor, running Claude Code's project
/// hooks, sends a Claude Code-compatible payload that may name the session
/// and workspace its own way (`conversation_id`, `workspace_roots`) and
/// carry its `generation_id`: read as fallbacks (from Cursor's
/// documentation; not measured, Cursor is not on a registry here).
#[derive(serde::Deserialize)]
struct CommonInput {
    hook_event_name: Option<String>,
    session_id: Option<String>,
    conversation_id: Option<String>,
    cwd: Option<String>,
    #[serde(default)]
    workspace_roots: Vec<String>,
    transcript_path: Option<String>,
    #[serde(alias = "prompt_response")]
    last_assistant_message: Option<String>,
    stop_hook_active: Option<bool>,
    prompt: Option<String>,
    generation_id: Option<String>,
    /// `SubagentStop`'s sub-agent (Claude Code, Qwen Code), and its own
    /// transcript (`transcript_path` is the parent's there).
    agent_id: Option<String>,
    agent_type: Option<String>,
    agent_transcript_path: Option<String>,
}

/// The event names of a sub-agent's stop, in the CLIs that read
/// [`parse_common`]'s shape.
const SUBAGENT_STOPS: [&str; 1] = ["SubagentStop"];

/// Reads the hook JSON those three CLIs share; `point` maps the event's
/// name (`None`: an event gatehost does not answer).
pub fn parse_common(
    input: &[u8],
    point: impl Fn(&str) -> Option<HookPoint>,
) -> Result<HookInput, HookError> {
    let i: CommonInput = parse_json(input)?;
    let event = required("hook_event_name", i.hook_event_name)?;
    let subagent = if SUBAGENT_STOPS.contains(&event.as_str()) {
        // A sub-agent's stop that names no sub-agent is still one: its own
        // budget, under its type or a fixed name.
        Some(
            [i.agent_id, i.agent_type]
                .into_iter()
                .flatten()
                .find(|a| !a.trim().is_empty())
                .unwrap_or_else(|| "subagent".to_string()),
        )
    } else {
        None
    };
    let point = point(&event).ok_or(HookError::UnknownEvent(event))?;
    let session_id = match (i.session_id, i.conversation_id) {
        (Some(s), _) if !s.trim().is_empty() => Some(s),
        (_, c) => c,
    };
    let cwd = match i.cwd {
        Some(c) if !c.trim().is_empty() => Some(c),
        _ => i.workspace_roots.into_iter().find(|r| !r.trim().is_empty()),
    };
    Ok(HookInput {
        point,
        session_id: required("session_id", session_id)?,
        cwd: required("cwd", cwd)?.into(),
        last_message: i.last_assistant_message.filter(|m| !m.trim().is_empty()),
        // A sub-agent's stop is told by (and its last message read from) its
        // own transcript: the parent's does not grow while the sub-agent
        // runs (measured with Claude Code 2.1.332), so two of its stops
        // would look like one.
        transcript_path: match subagent {
            Some(_) => i.agent_transcript_path,
            None => i.transcript_path,
        }
        .filter(|p| !p.is_empty())
        .map(Into::into),
        loop_hint: i.stop_hook_active.map(|a| format!("stop_hook_active={a}")),
        prompt: i.prompt.filter(|_| point == HookPoint::TurnStart),
        generation_id: i.generation_id.filter(|g| !g.trim().is_empty()),
        subagent: subagent.filter(|_| point == HookPoint::Stop),
    })
}

/// A required non-empty string field.
pub fn required(field: &str, value: Option<String>) -> Result<String, HookError> {
    match value {
        Some(v) if !v.trim().is_empty() => Ok(v),
        _ => Err(HookError::Field {
            field: field.to_string(),
            message: "missing or empty".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    struct T {
        a: String,
    }

    #[test]
    fn a_bom_and_unknown_fields_are_fine() {
        let t: T = parse_json(b"\xEF\xBB\xBF{\"a\":\"x\",\"new_field\":[1]}").unwrap();
        assert_eq!(t.a, "x");
    }

    #[test]
    fn a_type_error_names_its_field_and_garbage_is_not_json() {
        let e = parse_json::<T>(b"{\"a\":3}").unwrap_err();
        assert!(
            matches!(&e, HookError::Field { field, .. } if field == "a"),
            "{e}"
        );
        let e = parse_json::<T>(b"not json").unwrap_err();
        assert!(matches!(e, HookError::NotJson(_)), "{e}");
    }

    #[test]
    fn bytes_after_the_object_are_not_json() {
        for input in [
            &b"{\"a\":\"x\"}{\"a\":\"y\"}"[..],
            b"{\"a\":\"x\"} garbage",
            b"{\"a\":\"x\"}\n{\"a\":\"y\"}\n",
        ] {
            let e = parse_json::<T>(input).unwrap_err();
            assert!(matches!(e, HookError::NotJson(_)), "{input:?}: {e}");
        }
        let t: T = parse_json(b"{\"a\":\"x\"}\r\n").unwrap();
        assert_eq!(t.a, "x");
    }

    #[test]
    fn trimmed_reasons_fit_keep_both_ends_and_stay_utf8() {
        let reason = format!("HEAD{}TAIL", "é".repeat(10_000));
        let t = trim_reason(&reason, 1000);
        assert!(t.len() <= 1000, "{}", t.len());
        assert!(t.starts_with("HEAD") && t.ends_with("TAIL"), "{t}");
        assert!(t.contains("bytes cut"));
        assert_eq!(trim_reason("short", 1000), "short");
    }
}
