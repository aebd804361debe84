//! A session's events (`session:*`): registered, its reports, the ACP
//! permission requests and refusals, a policy refused, an ungated stop;
//! and the watchdog's (`session:stale`, `session:live`).

use crate::permission::{Decision, ToolAsk};
use serde::{Deserialize, Serialize};

family! {
    /// A session's own events.
    SessionEvent {
        /// A session was registered, or started by the daemon.
        Registered(Registered) = "session:registered",
        /// Its agent began a turn (a prompt was sent).
        TurnStart(Report) = "session:turn-start",
        /// Its agent ended a turn: what policies watch for.
        TurnEnd(Report) = "session:turn-end",
        /// Its agent waits for a person's answer.
        AwaitingInput(Report) = "session:awaiting-input",
        /// Its agent exited.
        Exited(Report) = "session:exited",
        /// A configuration rule or a standing policy could not attach to it.
        PolicyRefused(PolicyRefused) = "session:policy-refused",
        /// An ACP permission request was answered.
        Permission(Permission) = "session:permission",
        /// An ACP permission request waits for the operator.
        PermissionEscalated(PermissionEscalated) = "session:permission-escalated",
        /// An ACP agent asked the daemon for a file or a terminal, and was
        /// refused.
        ClientRefused(ClientRefused) = "session:client-refused",
        /// Its first stop that no live policy of the operator's gated.
        Ungated(Ungated) = "session:ungated",
    }
}

family! {
    /// The watchdog's session events. Named in full only: `stale` is also
    /// a policy's.
    WatchdogEvent {
        /// It was silent past `[daemon] heartbeat_timeout`.
        Stale(Stale) = "session:stale",
        /// A stale session was heard from again.
        Live(Live) = "session:live",
    }
}

/// `session:registered`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Registered {
    /// The session's id.
    pub session_id: String,
    /// Its working directory, as registered.
    pub cwd: String,
    /// Its workspace: the folder its gates run in and its commits go to.
    pub workspace: String,
    /// The label it was registered or started with.
    pub label: Option<String>,
    /// Started by the daemon (not registered from outside).
    pub started: bool,
}

/// A session's report: `session:turn-start`, `session:turn-end`,
/// `session:awaiting-input`, `session:exited`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The session reporting.
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
    /// The session the policy was for.
    pub session_id: String,
    /// The rule or standing policy that could not attach.
    #[serde(flatten)]
    pub origin: RefusedOrigin,
    /// Why it could not attach (the attach's refusal).
    pub reason: String,
}

/// Where a refused session policy came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RefusedOrigin {
    /// A `[[session_policies]]` rule of the configuration file.
    File {
        /// The configuration file holding the rule.
        file: String,
    },
    /// A standing policy.
    #[serde(rename_all = "camelCase")]
    Standing {
        /// The standing policy's id (`sp_…`).
        standing_id: String,
    },
}

/// Who answered a permission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnsweredBy {
    /// The session's permission rule (the routine's or the configuration's).
    Rule,
    /// The operator (`POST /v1/sessions/{id}/permissions/{request}`).
    Operator,
    /// A routine's rule (`auto-allow`) for a step in the session: the
    /// event names the run (`routine`).
    Routine,
    /// Nobody answered within the rule's timeout: denied.
    Timeout,
    /// The session ended (or the daemon is stopping) while it waited.
    Closed,
}

/// `session:permission`: an ACP permission request answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Permission {
    /// The ACP session that asked.
    pub session_id: String,
    /// The request's id in gatehost (`perm-N`), which the operator's answer
    /// names.
    pub request: String,
    /// The ACP tool call the request is about.
    pub tool_call_id: String,
    /// What the agent asked to do.
    pub tool: ToolAsk,
    /// What the session's rule said (`escalate` when a person was asked).
    pub rule: Decision,
    /// Whether the agent was allowed.
    pub allowed: bool,
    /// Who answered.
    pub by: AnsweredBy,
    /// `by: routine`: the run whose rule answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routine: Option<String>,
}

/// `session:permission-escalated`: a request waits for the operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionEscalated {
    /// The ACP session that asked.
    pub session_id: String,
    /// The request's id in gatehost (`perm-N`), which the operator's answer
    /// names.
    pub request: String,
    /// The ACP tool call the request is about.
    pub tool_call_id: String,
    /// What the agent asked to do.
    pub tool: ToolAsk,
    /// How long it waits for an answer before it is denied (ms).
    pub timeout_ms: u64,
}

/// `session:client-refused`: an ACP agent asked for a file or a terminal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientRefused {
    /// The ACP session that asked.
    pub session_id: String,
    /// The ACP method refused (`fs/read_text_file`, `terminal/create`).
    pub method: String,
    /// The path or command the agent named.
    pub target: String,
    /// Why it was refused (gatehost offers an ACP agent no file or terminal).
    pub reason: String,
}

/// `session:ungated`: a stop no policy of the operator's gated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ungated {
    /// The session that stopped.
    pub session_id: String,
    /// Its working directory.
    pub cwd: String,
    /// The session's turn count at that stop.
    pub turn: i64,
    /// Why nothing gated it (and whether policies the agent attached watch it).
    pub reason: String,
}

/// What the watchdog does to a stale session's policies
/// (`[daemon] on_stale`), as `session:stale` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnStaleName {
    /// Its `watching` policies are blocked.
    Block,
    /// Its `watching` policies are cancelled.
    Cancel,
}

/// `session:stale`: silent past `[daemon] heartbeat_timeout`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stale {
    /// The silent session.
    pub session_id: String,
    /// When it was last heard from (ms since the Unix epoch).
    pub last_heard_at: i64,
    /// How long it has been silent (ms).
    pub silent_ms: i64,
    /// `[daemon] heartbeat_timeout`, in ms.
    pub timeout_ms: i64,
    /// What the watchdog does to its `watching` policies.
    pub on_stale: OnStaleName,
}

/// `session:live`: a stale session spoke again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Live {
    /// The session heard from again.
    pub session_id: String,
    /// What it said (`registration`, a report's kind).
    pub by: String,
    /// When it was found stale (ms since the Unix epoch).
    pub stale_at: i64,
}

family! {
    /// A standalone hook's notices to a person (`[hook] notify_url`):
    /// sent, never stored.
    HookEvent {
        /// A session ran out of retries: the stop is let through.
        Capped(HookNotice) = "hook:capped",
        /// A stop's gate could not run.
        GateError(HookNotice) = "hook:gate-error",
    }
}

/// The payload of a standalone hook's notice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookNotice {
    /// The agent CLI's name (`claude`).
    pub agent: String,
    /// The agent CLI's own session id.
    pub session_id: String,
    /// The directory the hook ran in (the agent's working directory).
    pub cwd: String,
    /// What happened, for people.
    pub reason: String,
}
