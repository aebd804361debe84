//! The ten tools: their names, descriptions and input types, and the
//! input schemas derived from those types with `schemars`. `policy_attach`'s
//! schema is the attach body's own ([`AttachInput`], the type the daemon
//! decodes it into), so what an agent is shown cannot drift from what the
//! daemon validates.

use crate::bus::{POLICY_EVENTS, SESSION_EVENTS};
use crate::wire::{AttachInput, PolicyStatus, RoutineRequest};
use rmcp::handler::server::tool::schema_for_input;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

pub(super) const POLICY_ATTACH: &str = "policy_attach";
pub(super) const POLICY_STATUS: &str = "policy_status";
pub(super) const POLICY_LIST: &str = "policy_list";
pub(super) const SESSION_EVENTS_POLL: &str = "session_events_poll";
pub(super) const SESSION_MONITOR: &str = "session_monitor";
pub(super) const ROUTINE_STATUS: &str = "routine_status";
pub(super) const ROUTINE_LIST: &str = "routine_list";
pub(super) const ROUTINE_START: &str = "routine_start";
pub(super) const ROUTINE_CANCEL: &str = "routine_cancel";
pub(super) const SESSION_CURRENT: &str = "session_current";

/// Every tool, in the order they are listed. There is no ack, no policy
/// cancel and no routine resolve: those stay with the operator (the
/// daemon refuses them the agent's token, the only one this server runs
/// with); a routine is started or cancelled only when its every step runs
/// in a session of the caller's own (the daemon checks the keys).
pub const TOOL_NAMES: [&str; 10] = [
    POLICY_ATTACH,
    POLICY_STATUS,
    POLICY_LIST,
    SESSION_EVENTS_POLL,
    SESSION_MONITOR,
    SESSION_CURRENT,
    ROUTINE_STATUS,
    ROUTINE_LIST,
    ROUTINE_START,
    ROUTINE_CANCEL,
];

/// The most events one `session_events_poll` answers.
pub const MAX_POLL_LIMIT: u32 = 200;
pub(super) const DEFAULT_POLL_LIMIT: u32 = 50;
/// The longest `waitMs` honoured: MCP clients give up on a call long
/// before the API's own 55 s cap.
pub const MAX_WAIT_MS: u64 = 20_000;
/// The most events `session_monitor` shows.
pub(super) const MAX_MONITOR_EVENTS: u32 = 100;
pub(super) const DEFAULT_MONITOR_EVENTS: u32 = 20;

/// `policy_status`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct PolicyStatusInput {
    /// The policy's id (`pol_…`), as `policy_attach` answered it.
    pub policy_id: String,
}

/// Which end of the attach order a page starts from.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum Order {
    Oldest,
    Newest,
}

/// `policy_list`'s input: a page, as `GET /v1/policies` gives it.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct PolicyListInput {
    /// Only policies in these statuses.
    #[schemars(schema_with = "statuses_schema")]
    pub status: Option<Vec<String>>,
    /// At most this many (1 to 1000, default 50).
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
    /// Continue from a page's `nextCursor` (null on the last page).
    #[schemars(range(min = 0))]
    pub cursor: Option<i64>,
    /// `oldest` first (default) or `newest` first.
    pub order: Option<Order>,
}

/// `session_events_poll`'s input.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct EventsPollInput {
    /// Events after this cursor: the previous answer's `nextCursor` (default 0: from the oldest kept).
    #[schemars(range(min = 0))]
    pub since: Option<i64>,
    /// Only these sessions' events (their own and their policies').
    pub session_ids: Option<Vec<String>>,
    /// Only these event types, short (`turn-end`) or full (`session:turn-end`).
    #[schemars(schema_with = "event_types_schema")]
    pub types: Option<Vec<String>>,
    /// Only these policies' events.
    pub policy_ids: Option<Vec<String>>,
    /// At most this many events (1 to 200, default 50); `nextCursor` continues a cut page.
    #[schemars(range(min = 1, max = MAX_POLL_LIMIT))]
    pub limit: Option<u32>,
    /// Wait up to this long (ms) for a first event when there is none yet; at most 20000 (longer is cut to 20000). Default 0.
    pub wait_ms: Option<u64>,
}

/// `session_monitor`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct SessionMonitorInput {
    /// The session's id.
    pub session_id: String,
    /// How many of its latest events to show (1 to 100, default 20).
    #[schemars(range(min = 1, max = MAX_MONITOR_EVENTS))]
    pub events: Option<u32>,
}

/// `routine_status`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RoutineStatusInput {
    /// The run's id (`rt_…`), as `gatehost routine start` printed it.
    pub routine_id: String,
}

/// `session_current`'s input: none.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SessionCurrentInput {}

/// `routine_cancel`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RoutineCancelInput {
    /// The run's id (`rt_…`), as `routine_start` answered it.
    pub routine_id: String,
}

/// `routine_list`'s input: none.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RoutineListInput {}

/// A list of policy statuses, each one of [`PolicyStatus::ALL`].
fn statuses_schema(_: &mut SchemaGenerator) -> Schema {
    let names: Vec<&str> = PolicyStatus::ALL.iter().map(|s| s.as_str()).collect();
    json_schema!({"type": "array", "items": {"type": "string", "enum": names}})
}

/// A list of event types, each a name the bus knows, full or short.
fn event_types_schema(_: &mut SchemaGenerator) -> Schema {
    let mut names: Vec<&str> = SESSION_EVENTS
        .iter()
        .chain(POLICY_EVENTS)
        .copied()
        .collect();
    let short: Vec<&str> = names
        .iter()
        .filter_map(|f| f.split_once(':').map(|(_, s)| s))
        .collect();
    names.extend(short);
    json_schema!({"type": "array", "items": {"type": "string", "enum": names}})
}

/// The input schema of `T`, for a tool.
fn input_schema<T: JsonSchema + 'static>() -> Result<Arc<JsonObject>, String> {
    schema_for_input::<T>()
}

/// `policy_attach`'s schema: the attach body's, plus the API's
/// `idempotencyKey` (read by the daemon beside the body's type).
pub fn attach_schema() -> Result<Arc<JsonObject>, String> {
    let mut schema = input_schema::<AttachInput>()?.as_ref().clone();
    if let Some(serde_json::Value::Object(props)) = schema.get_mut("properties") {
        props.insert(
            "idempotencyKey".into(),
            json!({
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "description": "Retrying with the same key answers the policy the first attempt made instead of attaching another (1 to 200 printable ASCII characters, no spaces)."
            }),
        );
    }
    Ok(Arc::new(schema))
}

/// The tool list, schemas included. An error names the type whose schema
/// is not an object (a programming error, caught by the unit tests).
pub fn tools() -> Result<Vec<Tool>, String> {
    let read_only = |title: &str| {
        ToolAnnotations::with_title(title)
            .read_only(true)
            .destructive(false)
            .open_world(false)
    };
    Ok(vec![
        Tool::new(
            POLICY_ATTACH,
            "Attach a policy to your session(s): when a turn ends, the daemon runs the gate \
             (an allowlisted shell command, an LLM judge or a WASM plugin); on failure it nudges \
             you with the reason, on success it emits an event or prepares a commit that waits \
             for a human's ack. Answers the policy with its `policyId`. A refused attach stores \
             nothing and names the field at fault.",
            attach_schema()?,
        )
        .with_annotations(
            ToolAnnotations::with_title("Attach a policy")
                .read_only(false)
                .destructive(false)
                .open_world(false),
        ),
        Tool::new(
            POLICY_STATUS,
            "A policy's status (watching, queued, gating, nudging, awaiting-ack, committing, done, \
             blocked, cancelled), its pending members, last verdict, commit plan and reason.",
            input_schema::<PolicyStatusInput>()?,
        )
        .with_annotations(read_only("Policy status")),
        Tool::new(
            POLICY_LIST,
            "A page of policies in attach order (optionally only some statuses, newest first); \
             `nextCursor` (null on the last page) continues it.",
            input_schema::<PolicyListInput>()?,
        )
        .with_annotations(read_only("List policies")),
        Tool::new(
            SESSION_EVENTS_POLL,
            "Events after a cursor (session and policy events: turn-end, policy:attached, gating, \
             passed, failed, nudge, blocked, commit-ready, committed, …), oldest first, and \
             `nextCursor` to continue from: nothing is skipped between pages. `waitMs` waits for \
             the first event (at most 20 s).",
            input_schema::<EventsPollInput>()?,
        )
        .with_annotations(read_only("Poll events")),
        Tool::new(
            SESSION_MONITOR,
            "One look at a session: its state, the policies watching it (every unsettled one, \
             and its most recently attached settled ones) with what each is waiting for, its \
             latest events, and `nextCursor` to follow it with session_events_poll.",
            input_schema::<SessionMonitorInput>()?,
        )
        .with_annotations(read_only("Monitor a session")),
        Tool::new(
            SESSION_CURRENT,
            "Which session you are: the one GATEHOST_SESSION names, else the live session your \
             CLI's hook registered in this workspace (the most recently heard from). \
             policy_attach without sessionId or sessionIds attaches to it, and \
             session_events_poll without sessionIds or policyIds follows it.",
            input_schema::<SessionCurrentInput>()?,
        )
        .with_annotations(read_only("Your session")),
        Tool::new(
            ROUTINE_STATUS,
            "A routine's run: its phase (waiting, running, escalated, done, failed, cancelled), \
             each step's status, session, restarts and the operator's last answer, and why it \
             failed. Answering a routine's escalation is the operator's.",
            input_schema::<RoutineStatusInput>()?,
        )
        .with_annotations(read_only("Routine status")),
        Tool::new(
            ROUTINE_LIST,
            "The newest routine runs (at most 200), each with its phase and steps.",
            input_schema::<RoutineListInput>()?,
        )
        .with_annotations(read_only("List routines")),
        Tool::new(
            ROUTINE_START,
            "Starts a routine: sequential steps, each prompting one of YOUR sessions (session \
             {\"existing\": ID}, a session whose key you hold: your own, or one you registered) \
             and waiting for it: waitFor \"turn-end\" (its turn ends with a line STEP DONE), or \
             a list of earlier steps' labels and session ids (fan-in). onInput says what happens \
             when the session asks instead: auto-allow with a prompt (at most max times), \
             escalate to the operator, or fail. Starting agents and a step's own policy are the \
             operator's (attach your own with policy_attach). Answers the run (its id).",
            input_schema::<RoutineRequest>()?,
        ),
        Tool::new(
            ROUTINE_CANCEL,
            "Cancels a routine whose every step runs in a session of your own.",
            input_schema::<RoutineCancelInput>()?,
        ),
    ])
}
