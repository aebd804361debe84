//! Running one tool call: decoding its arguments, the daemon API calls
//! through the typed client, and the answer as a tool result. Every
//! failure, bad arguments included, is a tool error (`isError: true`)
//! carrying the API's error shape, `{"error": {"code", "message",
//! "field"?, "hint"?}}`, never a protocol error the agent would not see.

use super::answer::{
    ToolResult, decode, error_result, from_client, invalid, joined, ok_result, to_value,
};
use super::current::{self, Whereabouts};
use super::monitor;
use super::tools::{
    DEFAULT_POLL_LIMIT, EventsPollInput, MAX_POLL_LIMIT, MAX_WAIT_MS, Order, POLICY_ATTACH,
    POLICY_LIST, POLICY_STATUS, PolicyListInput, PolicyStatusInput, ROUTINE_CANCEL, ROUTINE_LIST,
    ROUTINE_START, ROUTINE_STATUS, RoutineCancelInput, RoutineListInput, RoutineStatusInput,
    SESSION_CURRENT, SESSION_EVENTS_POLL, SESSION_MONITOR, SessionCurrentInput,
    SessionMonitorInput,
};
use crate::client::Client;
use crate::wire::{ErrorDetail, EventQuery, PageQuery};
use rmcp::model::{CallToolResult, JsonObject};
use serde_json::Value;

/// Runs the tool `name`, for an agent `at` its whereabouts; `None` when
/// there is no such tool.
pub(super) async fn call(
    client: &Client,
    at: &Whereabouts,
    name: &str,
    args: JsonObject,
) -> Option<CallToolResult> {
    let result = match name {
        POLICY_ATTACH => attach(client, at, args).await,
        SESSION_CURRENT => match decode::<SessionCurrentInput>(args) {
            Ok(_) => current::find(client, at).await.and_then(|c| to_value(&c)),
            Err(e) => Err(e),
        },
        POLICY_STATUS => status(&keyed(client, at, &[]).await, args).await,
        POLICY_LIST => list(&keyed(client, at, &[]).await, args).await,
        SESSION_EVENTS_POLL => poll(client, at, args).await,
        SESSION_MONITOR => match decode::<SessionMonitorInput>(args) {
            Ok(input) => monitor::monitor(client, input).await,
            Err(e) => Err(e),
        },
        ROUTINE_STATUS => routine_status(client, args).await,
        ROUTINE_LIST => routine_list(client, args).await,
        ROUTINE_START => routine_start(client, args).await,
        ROUTINE_CANCEL => routine_cancel(client, args).await,
        _ => return None,
    };
    Some(match result {
        Ok(v) => ok_result(v),
        Err(detail) => {
            tracing::info!(tool = name, code = %detail.code, message = %detail.message, "tool error");
            error_result(detail)
        }
    })
}

async fn attach(client: &Client, at: &Whereabouts, mut args: JsonObject) -> ToolResult {
    // Naming no session: the caller's own. Only for a body that otherwise
    // reads as an attach: a misspelt `sesionId` goes to the daemon as sent,
    // which names it.
    let names_none = !args.contains_key("sessionId") && !args.contains_key("sessionIds");
    if names_none
        && serde_json::from_value::<crate::wire::AttachInput>(Value::Object(args.clone())).is_ok()
    {
        let me = current::find(client, at).await?;
        args.insert("sessionId".into(), Value::String(me.session_id));
    }
    // The body goes to the daemon as the agent sent it: the daemon decodes
    // and validates it, and names the field at fault.
    let policy = client
        .attach(&Value::Object(args))
        .await
        .map_err(from_client)?;
    to_value(&policy)
}

/// The client presenting the keys of the caller's own session (when one
/// is found) and of `named`: with the agent token, a session's policies and
/// events are read only with its key.
async fn keyed(client: &Client, at: &Whereabouts, named: &[String]) -> Client {
    let mine = current::find(client, at).await.ok().map(|c| c.session_id);
    client.with_keys_for(mine.iter().chain(named).map(String::as_str))
}

async fn status(client: &Client, args: JsonObject) -> ToolResult {
    let input: PolicyStatusInput = decode(args)?;
    let policy = client.policy(&input.policy_id).await.map_err(from_client)?;
    to_value(&policy)
}

async fn list(client: &Client, args: JsonObject) -> ToolResult {
    let input: PolicyListInput = decode(args)?;
    let query = PageQuery {
        limit: input.limit,
        cursor: input.cursor,
        status: joined("status", input.status)?,
        order: input.order.map(|o| match o {
            Order::Oldest => "oldest".to_string(),
            Order::Newest => "newest".to_string(),
        }),
    };
    let page = client.policies(&query).await.map_err(from_client)?;
    to_value(&page)
}

async fn routine_status(client: &Client, args: JsonObject) -> ToolResult {
    let input: RoutineStatusInput = decode(args)?;
    let run = client
        .routine(&input.routine_id)
        .await
        .map_err(from_client)?;
    to_value(&run)
}

async fn routine_start(client: &Client, args: JsonObject) -> ToolResult {
    let spec: crate::wire::RoutineRequest = decode(args)?;
    to_value(&client.start_routine(&spec).await.map_err(from_client)?)
}

async fn routine_cancel(client: &Client, args: JsonObject) -> ToolResult {
    let input: RoutineCancelInput = decode(args)?;
    let run = client
        .cancel_routine(&input.routine_id)
        .await
        .map_err(from_client)?;
    to_value(&run)
}

async fn routine_list(client: &Client, args: JsonObject) -> ToolResult {
    let _: RoutineListInput = decode(args)?;
    to_value(&client.routines().await.map_err(from_client)?)
}

async fn poll(client: &Client, at: &Whereabouts, args: JsonObject) -> ToolResult {
    let mut input: EventsPollInput = decode(args)?;
    // Naming neither sessions nor policies: the caller's own session's
    // events, when it has one (else those of the sessions whose keys the
    // client presents: the daemon reads an agent nothing else).
    if input.session_ids.is_none() && input.policy_ids.is_none() {
        input.session_ids = current::find(client, at)
            .await
            .ok()
            .map(|c| vec![c.session_id]);
    }
    let named: Vec<String> = input.session_ids.clone().unwrap_or_default();
    let query = poll_query(input)?;
    let client = keyed(client, at, &named).await;
    let page = client.events(&query).await.map_err(from_client)?;
    to_value(&page)
}

/// The API query of a `session_events_poll`: `limit` checked against the
/// tool's own bound, `waitMs` cut to [`MAX_WAIT_MS`].
pub(super) fn poll_query(input: EventsPollInput) -> Result<EventQuery, ErrorDetail> {
    let limit = input.limit.unwrap_or(DEFAULT_POLL_LIMIT);
    if !(1..=MAX_POLL_LIMIT).contains(&limit) {
        return Err(invalid(
            "limit",
            format!("must be between 1 and {MAX_POLL_LIMIT}"),
        ));
    }
    let wait_ms = input.wait_ms.unwrap_or(0).min(MAX_WAIT_MS);
    Ok(EventQuery {
        host: None,
        since: Some(input.since.unwrap_or(0)),
        types: joined("types", input.types)?,
        session: joined("sessionIds", input.session_ids)?,
        policy: joined("policyIds", input.policy_ids)?,
        limit: Some(limit as usize),
        wait: (wait_ms > 0).then(|| wait_ms.to_string()),
    })
}
