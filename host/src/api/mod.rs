//! The daemon's HTTP/JSON API (loopback only), route by route:
//!
//! | route | token | what |
//! |---|---|---|
//! | `GET /v1/health` | none | liveness, version |
//! | `POST /v1/sessions` | agent | register `{id?, label?, cwd, workspace?, notifyUrl?}` |
//! | `GET /v1/sessions?limit=&cursor=`, `GET /v1/sessions/{id}` | agent | read (a page, `nextCursor`) |
//! | `POST /v1/sessions/{id}/report` | agent | `{kind: turn-start\|turn-end\|awaiting-input\|exited\|heartbeat, message?}` |
//! | `GET /v1/sessions/{id}/next-event?since=&timeout=` | agent | long-poll the session's next event |
//! | `POST /v1/sessions/start` | operator | start and follow `{cwd, command[], …}` |
//! | `POST /v1/policies` | agent | attach (agentproto `policy_attach` JSON) |
//! | `GET /v1/policies?status=&limit=&cursor=&order=`, `GET /v1/policies/{id}` | agent | read (a page, `nextCursor`) |
//! | `GET /v1/policies/{id}/wait?timeout=` | agent | long-poll until settled or awaiting-ack |
//! | `POST /v1/policies/{id}/cancel` | operator | cancel |
//! | `POST /v1/policies/{id}/ack` | operator | `{approve: true\|false}` |
//! | `GET /v1/events?since=&types=&session=&policy=&limit=&wait=` | agent | the bus by cursor |
//!
//! Errors are `{"error": {"code", "message", "field"?}}` with 400 (bad
//! input, naming the field), 401 (missing or wrong token: nothing done),
//! 403 (agent token on an operator route), 404, 409 (state conflict: double
//! or stale ack), 413 (body over 1 MiB), 503 (store unavailable: disk full,
//! read-only). This module owns authentication and the mapping of engine
//! results to HTTP; it must never change state itself.

pub(crate) mod auth;
mod error;

pub use auth::{Role, Tokens};
pub use error::ApiError;

use crate::bus::full_type;
use crate::engine::{Engine, EngineError, RegisterInput, ReportKind, StartInput, policy_json};
use crate::store::{EventFilter, PolicyStatus};
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Largest request body accepted.
pub const MAX_BODY: usize = 1024 * 1024;
/// Default and largest long-poll slice.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(25);
pub const MAX_WAIT: Duration = Duration::from_secs(55);
const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 1000;

#[derive(Clone)]
pub struct AppState {
    pub engine: Engine,
    pub tokens: Arc<Tokens>,
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/v1/health", get(health))
        .route("/v1/sessions", post(register).get(list_sessions))
        .route("/v1/sessions/start", post(start_session))
        .route("/v1/sessions/{id}", get(get_session))
        .route("/v1/sessions/{id}/report", post(report))
        .route("/v1/sessions/{id}/next-event", get(next_session_event))
        .route("/v1/policies", post(attach).get(list_policies))
        .route("/v1/policies/{id}", get(get_policy))
        .route("/v1/policies/{id}/wait", get(wait_policy))
        .route("/v1/policies/{id}/cancel", post(cancel))
        .route("/v1/policies/{id}/ack", post(ack))
        .route("/v1/events", get(events))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(state)
}

type ApiResult = Result<Response, ApiError>;

fn ok(v: Value) -> ApiResult {
    Ok(axum::Json(v).into_response())
}

fn body_json<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> Result<T, ApiError> {
    let bytes = body.map_err(|r| {
        let status = r.status();
        if status == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(MAX_BODY)
        } else {
            ApiError::bad_request("body", format!("cannot read the body: {r}"))
        }
    })?;
    if bytes.is_empty() {
        return Err(ApiError::bad_request("body", "a JSON body is required"));
    }
    let mut de = serde_json::Deserializer::from_slice(&bytes);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "body".to_string()
        } else {
            path
        };
        ApiError::bad_request(&field, e.into_inner().to_string())
    })
}

fn duration_param(
    q: &HashMap<String, String>,
    name: &str,
    default: Duration,
) -> Result<Duration, ApiError> {
    match q.get(name) {
        None => Ok(default),
        Some(v) => {
            let d = parse_duration(v).map_err(|m| ApiError::bad_request(name, m))?;
            Ok(d.min(MAX_WAIT))
        }
    }
}

/// `1500` (milliseconds), `25s`, `2m`, `1h 5m`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if let Ok(ms) = t.parse::<u64>() {
        return Ok(Duration::from_millis(ms));
    }
    humantime::parse_duration(t)
        .map_err(|e| format!("'{text}' is not a duration ({e}); try 1500, 30s, 5m"))
}

/// `limit`: 1 to `MAX_LIMIT`, `DEFAULT_LIMIT` when absent.
fn limit_param(q: &HashMap<String, String>) -> Result<usize, ApiError> {
    match int_param(q, "limit")? {
        None => Ok(DEFAULT_LIMIT),
        Some(n) if n >= 1 && n as usize <= MAX_LIMIT => Ok(n as usize),
        Some(_) => Err(ApiError::bad_request(
            "limit",
            format!("must be between 1 and {MAX_LIMIT}"),
        )),
    }
}

/// `cursor`: where a page continues (a list's `nextCursor`), 0 if absent.
fn cursor_param(q: &HashMap<String, String>) -> Result<i64, ApiError> {
    match int_param(q, "cursor")? {
        Some(c) if c < 0 => Err(ApiError::bad_request("cursor", "a cursor is at least 0")),
        c => Ok(c.unwrap_or(0)),
    }
}

fn int_param(q: &HashMap<String, String>, name: &str) -> Result<Option<i64>, ApiError> {
    q.get(name)
        .map(|v| {
            v.trim()
                .parse::<i64>()
                .map_err(|_| ApiError::bad_request(name, format!("'{v}' is not an integer")))
        })
        .transpose()
}

fn list_param(q: &HashMap<String, String>, name: &str) -> Vec<String> {
    q.get(name)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

async fn not_found() -> ApiError {
    ApiError::new(
        axum::http::StatusCode::NOT_FOUND,
        "not-found",
        "no such route",
    )
}

async fn health(State(st): State<AppState>) -> ApiResult {
    let head = st.engine.store().head_cursor().map_err(EngineError::from)?;
    ok(json!({"ok": true, "version": env!("CARGO_PKG_VERSION"), "cursor": head}))
}

async fn register(
    State(st): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let role = st.tokens.require(&headers, Role::Agent)?;
    let input: RegisterInput = body_json(body)?;
    let s = st.engine.register(input, role.trust())?;
    ok(serde_json::to_value(s).unwrap_or(Value::Null))
}

async fn start_session(
    State(st): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    st.tokens.require(&headers, Role::Operator)?;
    let input: StartInput = body_json(body)?;
    let s = st.engine.start_session(input)?;
    ok(serde_json::to_value(s).unwrap_or(Value::Null))
}

/// A page of sessions (`limit`, `cursor`), in registration order;
/// `nextCursor` is null on the last page.
async fn list_sessions(
    State(st): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    st.tokens.require(&headers, Role::Agent)?;
    let limit = limit_param(&q)?;
    let page = st
        .engine
        .store()
        .sessions_page(cursor_param(&q)?, limit)
        .map_err(EngineError::from)?;
    let next = (page.len() == limit)
        .then(|| page.last().map(|(c, _)| *c))
        .flatten();
    let list: Vec<_> = page.into_iter().map(|(_, s)| s).collect();
    ok(json!({"sessions": list, "nextCursor": next}))
}

async fn get_session(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> ApiResult {
    st.tokens.require(&headers, Role::Agent)?;
    ok(serde_json::to_value(st.engine.session(&id)?).unwrap_or(Value::Null))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ReportBody {
    kind: String,
    #[serde(default)]
    message: Option<String>,
}

async fn report(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    st.tokens.require(&headers, Role::Agent)?;
    let b: ReportBody = body_json(body)?;
    let kind = ReportKind::parse(&b.kind).ok_or_else(|| {
        ApiError::bad_request(
            "kind",
            format!(
                "'{}' is not one of turn-start, turn-end, awaiting-input, exited, heartbeat",
                b.kind
            ),
        )
    })?;
    let cursor = st.engine.report(&id, kind, b.message)?;
    ok(json!({"sessionId": id, "cursor": cursor}))
}

async fn next_session_event(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    st.tokens.require(&headers, Role::Agent)?;
    st.engine.session(&id)?;
    let since = match int_param(&q, "since")? {
        Some(c) => c,
        None => st.engine.store().head_cursor().map_err(EngineError::from)?,
    };
    let timeout = duration_param(&q, "timeout", DEFAULT_WAIT)?;
    let filter = EventFilter {
        since,
        session_ids: vec![id],
        limit: 1,
        ..Default::default()
    };
    let events = st.engine.wait_events(&filter, timeout).await?;
    let next = events.last().map(|e| e.cursor).unwrap_or(since);
    ok(json!({"event": events.first(), "nextCursor": next, "timedOut": events.is_empty()}))
}

async fn attach(
    State(st): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let role = st.tokens.require(&headers, Role::Agent)?;
    let v: Value = body_json(body)?;
    let key = match headers.get("idempotency-key") {
        Some(k) => Some(
            k.to_str()
                .map_err(|_| ApiError::bad_request("Idempotency-Key", "must be ASCII"))?
                .to_string(),
        ),
        None => None,
    };
    let p = st.engine.attach(v, role.trust(), key).await?;
    Ok((axum::http::StatusCode::CREATED, axum::Json(policy_json(&p))).into_response())
}

async fn list_policies(
    State(st): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    st.tokens.require(&headers, Role::Agent)?;
    let mut statuses = Vec::new();
    for s in list_param(&q, "status") {
        statuses.push(PolicyStatus::parse(&s).ok_or_else(|| {
            ApiError::bad_request("status", format!("'{s}' is not a policy status"))
        })?);
    }
    let newest_first = match q.get("order").map(String::as_str) {
        None | Some("oldest") => false,
        Some("newest") => true,
        Some(o) => {
            return Err(ApiError::bad_request(
                "order",
                format!("'{o}' is neither \"oldest\" nor \"newest\""),
            ));
        }
    };
    let limit = limit_param(&q)?;
    let list = st
        .engine
        .store()
        .policies_page(&statuses, cursor_param(&q)?, limit, newest_first)
        .map_err(EngineError::from)?;
    // A full page may have a next one; its cursor is the last `seq`.
    let next = (list.len() == limit)
        .then(|| list.last().map(|p| p.seq))
        .flatten();
    ok(json!({"policies": list.iter().map(policy_json).collect::<Vec<_>>(), "nextCursor": next}))
}

async fn get_policy(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> ApiResult {
    st.tokens.require(&headers, Role::Agent)?;
    ok(policy_json(&st.engine.policy_now(&id).await?))
}

async fn wait_policy(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    st.tokens.require(&headers, Role::Agent)?;
    let timeout = duration_param(&q, "timeout", DEFAULT_WAIT)?;
    let (p, settled) = st.engine.wait_policy(&id, timeout).await?;
    let mut out = policy_json(&p);
    if let Value::Object(m) = &mut out {
        m.insert("settled".into(), Value::Bool(settled));
    }
    ok(out)
}

async fn cancel(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> ApiResult {
    st.tokens.require(&headers, Role::Operator)?;
    ok(policy_json(&st.engine.cancel(&id, "the operator")?))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct AckBody {
    approve: bool,
}

async fn ack(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    st.tokens.require(&headers, Role::Operator)?;
    let b: AckBody = body_json(body)?;
    ok(policy_json(
        &st.engine.ack(&id, b.approve, "the operator").await?,
    ))
}

async fn events(
    State(st): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    st.tokens.require(&headers, Role::Agent)?;
    let since = int_param(&q, "since")?.unwrap_or(0);
    if since < 0 {
        return Err(ApiError::bad_request("since", "a cursor is at least 0"));
    }
    let limit = limit_param(&q)?;
    let mut types = Vec::new();
    for t in list_param(&q, "types") {
        types.push(
            full_type(&t)
                .map_err(|m| ApiError::bad_request("types", m))?
                .to_string(),
        );
    }
    let filter = EventFilter {
        since,
        types,
        session_ids: list_param(&q, "session"),
        policy_ids: list_param(&q, "policy"),
        limit,
    };
    let wait = match q.get("wait") {
        Some(_) => duration_param(&q, "wait", DEFAULT_WAIT)?,
        None => Duration::ZERO,
    };
    let list = if wait.is_zero() {
        st.engine.events(&filter)?
    } else {
        st.engine.wait_events(&filter, wait).await?
    };
    // The cursor to continue from: the last event returned, so that a page
    // cut by `limit` never skips anything.
    let next = list.last().map(|e| e.cursor).unwrap_or(since);
    // Retention deletes old events: a reader behind `oldestCursor` missed
    // some, and can tell.
    let oldest = st
        .engine
        .store()
        .oldest_cursor()
        .map_err(EngineError::from)?;
    ok(json!({"events": list, "nextCursor": next, "oldestCursor": oldest}))
}
