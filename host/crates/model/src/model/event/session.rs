//! A session's events (`session:*`): registered, its reports, the ACP
//! permission requests and refusals, a policy refused, an ungated stop;
//! and the watchdog's (`session:stale`, `session:live`).

use crate::permission::{Decision, ToolAsk};
use serde::{Deserialize, Serialize};

family! {
    /// A session's own events.
    SessionEvent {
        Registered(Registered) = "session:registered",
        TurnStart(Report) = "session:turn-start",
        TurnEnd(Report) = "session:turn-end",
        AwaitingInput(Report) = "session:awaiting-input",
        Exited(Report) = "session:exited",
        PolicyRefused(PolicyRefused) = "session:policy-refused",
        Permission(Permission) = "session:permission",
        PermissionEscalated(PermissionEscalated) = "session:permission-escalated",
        ClientRefused(ClientRefused) = "session:client-refused",
        Ungated(Ungated) = "session:ungated",
    }
}

family! {
    /// The watchdog's session events. Named in full only: `stale` is also
    /// a policy's.
    WatchdogEvent {
        Stale(Stale) = "session:stale",
        Live(Live) = "session:live",
    }
}

/// `session:registered`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Registered {
    pub session_id: String,
    pub cwd: String,
    pub workspace: String,
    pub label: Option<String>,
    /// Started by the daemon (not registered from outside).
    pub started: bool,
}

/// A session's report: `session:turn-start`, `session:turn-end`,
/// `session:awaiting-input`, `session:exited`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub session_id: String,
    /// The session's state after it; typed by the model layer
    /// (`SessionState`).
    pub state: String,
    /// Its turn count after it.
    pub turn: i64,
    /// Its last message (an exit's status), when it said one.
    pub message: Option<String>,
}

/// `session:policy-refused`: a session policy (a config rule, a standing
/// policy) that could not attach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRefused {
    pub session_id: String,
    #[serde(flatten)]
    pub origin: RefusedOrigin,
    pub reason: String,
}

/// Where a refused session policy came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RefusedOrigin {
    /// A `[[session_policies]]` rule of the configuration file.
    File { file: String },
    /// A standing policy.
    #[serde(rename_all = "camelCase")]
    Standing { standing_id: String },
}

/// Who answered a permission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnsweredBy {
    Rule,
    Operator,
    /// A routine's rule (`auto-allow`) for a step in the session: the
    /// event names the run (`routine`).
    Routine,
    Timeout,
    /// The session ended (or the daemon is stopping) while it waited.
    Closed,
}

/// `session:permission`: an ACP permission request answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Permission {
    pub session_id: String,
    pub request: String,
    pub tool_call_id: String,
    pub tool: ToolAsk,
    pub rule: Decision,
    pub allowed: bool,
    pub by: AnsweredBy,
    /// `by: routine`: the run whose rule answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routine: Option<String>,
}

/// `session:permission-escalated`: a request waits for the operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionEscalated {
    pub session_id: String,
    pub request: String,
    pub tool_call_id: String,
    pub tool: ToolAsk,
    pub timeout_ms: u64,
}

/// `session:client-refused`: an ACP agent asked for a file or a terminal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientRefused {
    pub session_id: String,
    pub method: String,
    /// The path or command the agent named.
    pub target: String,
    pub reason: String,
}

/// `session:ungated`: a stop no policy of the operator's gated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ungated {
    pub session_id: String,
    pub cwd: String,
    /// The session's turn count at that stop.
    pub turn: i64,
    pub reason: String,
}

/// What the watchdog does to a stale session's policies
/// (`[daemon] on_stale`), as `session:stale` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnStaleName {
    Block,
    Cancel,
}

/// `session:stale`: silent past `[daemon] heartbeat_timeout`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stale {
    pub session_id: String,
    pub last_heard_at: i64,
    pub silent_ms: i64,
    pub timeout_ms: i64,
    pub on_stale: OnStaleName,
}

/// `session:live`: a stale session spoke again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Live {
    pub session_id: String,
    /// What it said (`registration`, a report's kind).
    pub by: String,
    pub stale_at: i64,
}

family! {
    /// A standalone hook's notices to a person (`[hook] notify_url`):
    /// sent, never stored.
    HookEvent {
        Capped(HookNotice) = "hook:capped",
        GateError(HookNotice) = "hook:gate-error",
    }
}

/// The payload of a standalone hook's notice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookNotice {
    /// The agent CLI's name (`claude`).
    pub agent: String,
    pub session_id: String,
    pub cwd: String,
    pub reason: String,
}
