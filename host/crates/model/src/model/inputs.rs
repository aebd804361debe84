//! What a caller asks of the daemon about a session or a review:
//! register, start, report, request changes (line comments), add a
//! standing policy. The API takes them as its request bodies (`wire`
//! names them `RegisterRequest`, `StartRequest`, ...) and the engine as its
//! inputs: one type each, so the two cannot disagree. A routine and an
//! attach are `model` types of their own (`RoutineSpec`, `AttachInput`).
//!
//! It owns their JSON shape (names, what may be absent, unknown fields
//! refused); it must never validate beyond that shape (the engine does).

use crate::model::attach::Template;
use crate::permission::PermissionRule;
use serde::{Deserialize, Serialize};

/// `POST /v1/sessions`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RegisterInput {
    /// The session's id; none: the daemon picks one (`ses_…`). The hooks send
    /// the agent CLI's (`claude:<id>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// A label for people and for standing policies' `label` match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The agent's working directory (absolute).
    pub cwd: String,
    /// Default: the nearest folder at or above `cwd` holding `.git`, else `cwd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// A URL told of the session's attention events; must lie under `[daemon]
    /// notify_url_prefixes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify_url: Option<String>,
    /// A key the caller made and kept before it asked (`gsk_` and 64 hex
    /// digits), for a session not registered yet: the session gets it
    /// rather than a new one. A registration whose answer was lost is then
    /// recovered by registering again with that key (presented as every
    /// key is), never left without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
}

/// `POST /v1/sessions/start` (operator): a session gatehost starts and
/// follows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StartInput {
    /// The session's id; none: the daemon picks one (`ses_…`). An id that
    /// exists is refused (409 `session-id-taken`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// A label for people and for standing policies' `label` match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The directory the agent runs in (absolute).
    pub cwd: String,
    /// Default: the nearest folder at or above `cwd` holding `.git`, else
    /// `cwd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// A URL told of the session's attention events; must lie under `[daemon]
    /// notify_url_prefixes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify_url: Option<String>,
    /// The argv; the program is a bare name looked up on the daemon's PATH
    /// or an absolute path.
    pub command: Vec<String>,
    /// A regex; a stdout line matching it ends a turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_end_pattern: Option<String>,
    /// Without a pattern: this much silence after output ends a turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quiet_ms: Option<u64>,
    /// The agent speaks the Agent Client Protocol on its stdio (see
    /// `engine::acp`): turn-ends are its prompts' answers, nudges its next
    /// prompts. `turnEndPattern` and `quietMs` do not apply.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub acp: bool,
    /// ACP only: the first prompt (without one, the agent waits for the
    /// first nudge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// ACP only: how its permission requests are answered (default:
    /// `[agents] permission` in the configuration, else deny all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission: Option<PermissionRule>,
}

/// What a report says (`POST /v1/sessions/{id}/report`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReportKind {
    /// The agent began a turn.
    TurnStart,
    /// The agent ended a turn: the policies watching the session count it.
    TurnEnd,
    /// The agent waits for a person's answer.
    AwaitingInput,
    /// The agent exited.
    Exited,
    /// Only "still alive": updates the session, publishes nothing.
    Heartbeat,
}

impl ReportKind {
    /// Every kind, in the order above.
    pub const ALL: [ReportKind; 5] = [
        ReportKind::TurnStart,
        ReportKind::TurnEnd,
        ReportKind::AwaitingInput,
        ReportKind::Exited,
        ReportKind::Heartbeat,
    ];

    /// Its name on the wire (`turn-end`).
    pub fn as_str(self) -> &'static str {
        match self {
            ReportKind::TurnStart => "turn-start",
            ReportKind::TurnEnd => "turn-end",
            ReportKind::AwaitingInput => "awaiting-input",
            ReportKind::Exited => "exited",
            ReportKind::Heartbeat => "heartbeat",
        }
    }
}

/// Which side of the diff a comment's line is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DiffSide {
    /// A line of the file as it was (`HEAD`): a removed or context line.
    Old,
    /// A line of the file as it will be committed: an added or context line.
    New,
}

/// One comment on a line of the diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LineComment {
    /// The file's path in the diff (the new path of a renamed file).
    pub path: String,
    /// The line's number on its side, from 1.
    pub line: u32,
    /// Which side of the diff `line` counts on.
    pub side: DiffSide,
    /// The comment's text (at most 4000 bytes).
    pub body: String,
}

/// `POST /v1/standing-policies`: a template and the sessions it is for.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StandingRequest {
    /// Agents whose sessions it is for (`claude`, `codex`, `gemini`,
    /// `cursor`: a session id's part before `:`); none: every agent.
    #[serde(default)]
    pub agents: Vec<String>,
    /// Directories a session's workspace must lie under; none: anywhere.
    /// Absolute.
    #[serde(default)]
    pub under: Vec<String>,
    /// Only sessions registered with this label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The policy (the body of `POST /v1/policies` naming no session).
    pub policy: Template,
}
