//! The daemon's HTTP/JSON API (loopback only), route by route:
//!
//! | route | token | what |
//! |---|---|---|
//! | `GET /v1/health` | none | liveness, version, whether the store answers (503 `degraded` while it does not: see `health`) |
//! | `POST /v1/sessions` | agent | register `{id?, label?, cwd, workspace?, notifyUrl?}`; a new session's answer carries its `sessionKey` |
//! | `GET /v1/sessions?limit=&cursor=`, `GET /v1/sessions/{id}` | agent | read (a page, `nextCursor`) |
//! | `POST /v1/sessions/{id}/report` | agent + session key | `{kind: turn-start\|turn-end\|awaiting-input\|exited\|heartbeat, message?}` |
//! | `GET /v1/sessions/{id}/next-event?since=&timeout=` | agent | long-poll the session's next event |
//! | `POST /v1/sessions/start` | operator | start and follow `{cwd, command[], …}` |
//! | `POST /v1/policies` | agent + session keys | attach (agentproto `policy_attach` JSON) |
//! | `GET /v1/policies?status=&limit=&cursor=&order=&counts=&q=&agent=&repo=&host=`, `GET /v1/policies/{id}` | agent | read (a page, `nextCursor`; `counts=true`, operator only: every policy counted by status; the filters: `policy_filter`) |
//! | `GET /v1/policies/{id}/wait?timeout=` | agent | long-poll until settled or awaiting-ack |
//! | `POST /v1/policies/{id}/cancel` | operator | cancel |
//! | `POST /v1/policies/{id}/ack` | operator | `{approve: true\|false, tree?, comment?, passkey?}` (`tree`: refused 409 `tree-changed` unless it is the snapshot's; `comment`, with a reject only: delivered to the agent as its nudge; `passkey` `{ceremony, credential}`: with `ack_requires = "passkey"` an approval needs it, else 403 `passkey-required`) |
//! | `POST /v1/policies/{id}/request-changes` | operator | `{tree, comments: [{path, line, side: old\|new, body}]}`: the comments to the agent as its nudge, the policy watching again (see `engine::changes`) |
//! | `GET /v1/policies/{id}/diff?from=&limit=` | agent | the exact patch committed, a page (see `review`; another host's policy: made by its owner, `forwarded`) |
//! | `POST /v1/routines` | operator | start a routine (`engine::routine::RoutineSpec`) |
//! | `GET /v1/routines`, `GET /v1/routines/{id}` | agent | read runs (the newest first), one run |
//! | `POST /v1/routines/{id}/cancel` | operator | cancel a run |
//! | `POST /v1/routines/{id}/steps/{step}/resolve` | operator | `{response}`: answer a step's escalation |
//! | `GET /v1/passkeys` | operator | what approving takes, the page's origin, the registered passkeys (see `passkeys`) |
//! | `POST /v1/passkeys/challenge` | operator | `{for: approve, policy, tree}\|{for: add-passkey}\|{for: remove-passkey, passkey}`: a WebAuthn challenge for that only, `{ceremony, options}` |
//! | `POST /v1/passkeys/register`, `…/register/finish` | the page's login only | `{name, code?, assertion?}` then `{ceremony, credential}`: register a passkey (the first needs the enrolment code of `gatehost passkey enrol-code`, every later one a registered one's assertion) |
//! | `POST /v1/passkeys/{id}/remove` | operator | `{assertion}` for removing exactly it |
//! | `POST /v1/passkeys/{id}/rename` | operator | `{name}`: another name (`passkey:renamed`) |
//! | `POST /v1/tokens/rotate` | operator | `{agent?: bool, operator?: bool}`: new tokens (the cluster's on PostgreSQL), the old ones refused from then on; answers their files, never a value (see `cluster_tokens`) |
//! | `GET /v1/events?since=&types=&session=&policy=&host=&limit=&wait=` | agent | the bus by cursor (`host`: the events that host wrote; 400 `no-hosts` on SQLite) |
//! | `GET /ui/`, `POST /ui/login {token}` | none / operator | the web page and its cookie login (see `ui`) |
//! | `POST /v1/ui/link`, `GET /ui/login?code=` | operator / none | a one-time login link (`gatehost ui`), spent once within 2 minutes for the cookie (see `ui`) |
//! | `GET /v1/events/stream?since=&types=&session=&policy=&host=` | agent | the bus as server-sent events, resumed from `Last-Event-ID` (see `stream`) |
//!
//! Errors are `{"error": {"code", "message", "field"?}}` with 400 (bad
//! input, naming the field), 401 (missing or wrong token: nothing done),
//! 403 (agent token on an operator route), 404, 409 (state conflict: double
//! or stale ack), 413 (body over 1 MiB), 503 (store unavailable: disk full,
//! read-only; 503 `too-many-waiters` with `Retry-After`: a long-poll past
//! the cap on concurrent long-polls, see `limits`). With the agent token,
//! acting on a session (re-registering it, reporting on it, attaching a
//! policy that watches it) also needs that session's key in
//! `Gatehost-Session-Key` (403 `session-key-required` without it). This
//! module owns authentication and the mapping of engine
//! results to HTTP; it must never change state itself.

pub(crate) mod auth;
pub mod cluster_tokens;
mod convert;
pub(crate) use convert::ToWire;
mod error;
mod extract;
pub mod forwarded;
mod health;
pub mod limits;
pub mod listen;
mod passkeys;
pub(crate) mod policy_filter;
pub mod query;
pub mod review;
mod routines;
mod standing;
pub mod stream;
mod token_files;
pub mod ui;

pub use auth::{Role, Tokens};
pub use error::ApiError;
pub use extract::{AttachBody, Bearer, Credential, JsonBody, Operator, SESSION_KEY_HEADER};

use crate::engine::{Engine, EngineError};
use crate::store::EventFilter;
use crate::wire;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use query::{EventQuery, NextEventQuery, PageQuery, PolicyListQuery, Query, WaitQuery};
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

/// Largest request body accepted.
pub const MAX_BODY: usize = 1024 * 1024;
/// The largest long-poll slice.
pub const MAX_WAIT: Duration = Duration::from_secs(55);
pub use query::DEFAULT_WAIT;

#[derive(Clone)]
pub struct AppState {
    pub engine: Engine,
    pub tokens: Arc<Tokens>,
    /// The cap on concurrent long-polls.
    pub long_polls: limits::LongPolls,
    /// The web page's logins (cookie sessions, see `ui`).
    pub ui: ui::Sessions,
    /// The page's passkeys' relying party and ceremonies in flight.
    pub passkeys: crate::passkey::Passkeys,
    /// The page's address on this machine (`listen::Bound::page`: an
    /// address the daemon holds whole), where login links point.
    pub page: Arc<str>,
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/v1/health", get(health::health))
        .route("/v1/hosts", get(hosts))
        .route("/v1/sessions", post(register).get(list_sessions))
        .route("/v1/sessions/start", post(start_session))
        .route("/v1/sessions/{id}", get(get_session))
        .route("/v1/sessions/{id}/report", post(report))
        .route("/v1/sessions/{id}/next-event", get(next_session_event))
        .route(
            "/v1/sessions/{id}/permissions/{request}",
            post(answer_permission),
        )
        .route("/v1/policies", post(attach).get(list_policies))
        .route("/v1/policies/{id}", get(get_policy))
        .route("/v1/policies/{id}/wait", get(wait_policy))
        .route("/v1/policies/{id}/cancel", post(cancel))
        .route("/v1/policies/{id}/ack", post(ack))
        .route("/v1/policies/{id}/request-changes", post(request_changes))
        .route("/v1/policies/{id}/diff", get(review::diff))
        .route("/v1/routines", post(routines::start).get(routines::list))
        .route("/v1/routines/{id}", get(routines::get))
        .route("/v1/routines/{id}/cancel", post(routines::cancel))
        .route(
            "/v1/routines/{id}/steps/{step}/resolve",
            post(routines::resolve),
        )
        .route(
            "/v1/standing-policies",
            post(standing::add).get(standing::list),
        )
        .route("/v1/standing-policies/{id}/remove", post(standing::remove))
        .route("/v1/passkeys", get(passkeys::list))
        .route("/v1/passkeys/challenge", post(passkeys::challenge))
        .route("/v1/passkeys/register", post(passkeys::register))
        .route(
            "/v1/passkeys/register/finish",
            post(passkeys::register_finish),
        )
        .route("/v1/passkeys/{id}/remove", post(passkeys::remove))
        .route("/v1/passkeys/{id}/rename", post(passkeys::rename))
        .route("/v1/tokens/rotate", post(cluster_tokens::rotate_route))
        .route("/v1/events", get(events))
        .route("/v1/events/stream", get(stream::stream))
        .route("/", get(ui::index))
        .route("/ui/", get(ui::index))
        .route("/ui/app.js", get(ui::app_js))
        .route("/ui/diff.js", get(ui::diff_js))
        .route("/ui/keys.js", get(ui::keys_js))
        .route("/ui/inbox.js", get(ui::inbox_js))
        .route("/ui/passkeys.js", get(ui::passkeys_js))
        .route("/ui/app.css", get(ui::app_css))
        .route("/ui/login", post(ui::login).get(ui::login_link))
        .route("/v1/ui/link", post(ui::link))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(state)
}

type ApiResult = Result<Response, ApiError>;

fn ok(v: impl Serialize) -> ApiResult {
    Ok(Json(v).into_response())
}

/// A place among the long-polls for one that waits (`wait` above zero),
/// held until it answers; past the cap, the 503 to answer at once.
fn wait_place(
    st: &AppState,
    wait: Duration,
    route: &'static str,
) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, ApiError> {
    if wait.is_zero() {
        return Ok(None);
    }
    st.long_polls.enter(route).map(Some)
}

async fn not_found() -> ApiError {
    ApiError::new(
        axum::http::StatusCode::NOT_FOUND,
        "not-found",
        "no such route",
    )
}

/// The hosts sharing this daemon's store (any token).
async fn hosts(State(st): State<AppState>, Credential(_): Credential) -> ApiResult {
    let store = st.engine.store();
    let hosts = store
        .hosts()
        .map_err(EngineError::from)?
        .into_iter()
        .map(|h| wire::HostInfo {
            id: h.id,
            live: h.live,
            state: h.state,
            fence: h.fence,
            leads: h.leads,
            taken_by: h.taken_by,
            lease_until: h.lease_until,
            heartbeat_at: h.heartbeat_at,
            machine: h.machine,
            pid: h.pid,
            version: h.version,
        })
        .collect();
    ok(wire::Hosts {
        this: store.host().map(|(id, _)| id),
        hosts,
    })
}

/// A selection by `host` is answered by a daemon that keeps hosts
/// (PostgreSQL); one of one host (SQLite) refuses it (400 `no-hosts`)
/// rather than answer an empty log.
fn hosts_kept(st: &AppState, select: &query::EventSelect) -> Result<(), ApiError> {
    if select.host.is_some() && st.engine.store().host().is_none() {
        let mut e = ApiError::new(
            axum::http::StatusCode::BAD_REQUEST,
            "no-hosts",
            "this daemon keeps no hosts (SQLite): ?host= selects the events a host of a PostgreSQL store wrote",
        );
        e.field = Some("host".into());
        return Err(e);
    }
    Ok(())
}

async fn register(
    State(st): State<AppState>,
    Credential(caller): Credential,
    JsonBody(input): JsonBody<wire::RegisterRequest>,
) -> ApiResult {
    ok(ToWire::to_wire(st.engine.register(input, &caller)?))
}

async fn start_session(
    State(st): State<AppState>,
    _: Operator,
    JsonBody(input): JsonBody<wire::StartRequest>,
) -> ApiResult {
    ok(ToWire::to_wire(st.engine.start_session(input)?))
}

/// The operator answers an ACP session's escalated permission request
/// (the agent token is refused: an agent never allows itself).
async fn answer_permission(
    State(st): State<AppState>,
    _: Operator,
    Path((id, request)): Path<(String, String)>,
    JsonBody(body): JsonBody<wire::PermissionAnswer>,
) -> ApiResult {
    st.engine
        .resolve_permission(&id, &request, body.allow, None)?;
    ok(wire::PermissionAnswered {
        session_id: id,
        request,
        allowed: body.allow,
    })
}

/// A page of sessions (`limit`, `cursor`), in registration order;
/// `nextCursor` is null on the last page.
async fn list_sessions(
    State(st): State<AppState>,
    Credential(caller): Credential,
    Query(q): Query<PageQuery>,
) -> ApiResult {
    let limit = q.limit;
    let page = st
        .engine
        .store()
        .sessions_page(q.cursor, limit)
        .map_err(EngineError::from)?;
    let next_cursor = (page.len() == limit)
        .then(|| page.last().map(|(c, _)| *c))
        .flatten();
    ok(wire::SessionPage {
        sessions: page
            .into_iter()
            .map(|(_, s)| ToWire::to_wire(st.engine.listed_session(s, &caller)))
            .collect(),
        next_cursor,
    })
}

async fn get_session(
    State(st): State<AppState>,
    Credential(caller): Credential,
    Path(id): Path<String>,
) -> ApiResult {
    ok(ToWire::to_wire(st.engine.session_for(&id, &caller)?))
}

async fn report(
    State(st): State<AppState>,
    Credential(caller): Credential,
    Path(id): Path<String>,
    JsonBody(b): JsonBody<wire::ReportRequest>,
) -> ApiResult {
    let r = st.engine.report_counted(&id, b.kind, b.message, &caller)?;
    ok(wire::Reported {
        session_id: id,
        cursor: r.cursor,
        policies: r.policies,
        ungated: r.ungated,
    })
}

async fn next_session_event(
    State(st): State<AppState>,
    Credential(caller): Credential,
    Path(id): Path<String>,
    Query(q): Query<NextEventQuery>,
) -> ApiResult {
    st.engine.session_for(&id, &caller)?;
    let since = match q.since {
        Some(c) => c,
        None => st.engine.store().head_cursor().map_err(EngineError::from)?,
    };
    let timeout = q.timeout;
    let _waiting = wait_place(&st, timeout, "next-event")?;
    let filter = EventFilter {
        since,
        session_ids: vec![id],
        limit: 1,
        ..Default::default()
    };
    let mut events = st.engine.wait_events(&filter, timeout).await?;
    let next_cursor = events.last().map(|e| e.cursor).unwrap_or(since);
    let timed_out = events.is_empty();
    ok(wire::NextEvent {
        event: (!events.is_empty()).then(|| events.swap_remove(0).to_wire()),
        next_cursor,
        timed_out,
    })
}

/// `POST /v1/policies`: the body is parsed once, by [`AttachBody`], into
/// the attach input (errors name the field), after its idempotency key is
/// taken out of it and the request digested.
async fn attach(
    State(st): State<AppState>,
    Credential(caller): Credential,
    AttachBody { key, input }: AttachBody,
) -> ApiResult {
    let created = |p| (axum::http::StatusCode::CREATED, Json(p)).into_response();
    let input = match input {
        Ok(input) => input,
        Err(e) => {
            // A reused key answers before the body's checks, as it always did.
            if let Some(k) = &key
                && let Some(p) = st.engine.attach_replayed(caller.trust, k)?
            {
                return Ok(created(p.to_wire()));
            }
            return Err(EngineError::from(e).into());
        }
    };
    let p = st.engine.attach(input, caller, key).await?;
    Ok(created(p.to_wire()))
}

async fn list_policies(
    State(st): State<AppState>,
    Credential(caller): Credential,
    Query(q): Query<PolicyListQuery>,
) -> ApiResult {
    let limit = q.page.limit;
    // Counts are of every policy: the operator's only.
    let counts = if q.counts {
        if caller.trust != crate::config::Trust::Operator {
            return Err(ApiError::new(
                axum::http::StatusCode::FORBIDDEN,
                "operator-only",
                "counts=true counts every policy: the operator token only",
            ));
        }
        let all = st
            .engine
            .store()
            .policy_counts()
            .map_err(EngineError::from)?;
        Some(all.into_iter().collect())
    } else {
        None
    };
    let (list, next_cursor) = if q.filter.is_empty() {
        let list = st
            .engine
            .store()
            .policies_page(&q.statuses, q.page.cursor, limit, q.newest_first)
            .map_err(EngineError::from)?;
        // A full page may have a next one; its cursor is the last `seq`.
        let next = (list.len() == limit)
            .then(|| list.last().map(|p| p.seq))
            .flatten();
        (list, next)
    } else {
        policy_filter::page(
            &**st.engine.store(),
            &q.statuses,
            &q.filter,
            q.page.cursor,
            limit,
            q.newest_first,
        )
        .map_err(EngineError::from)?
    };
    ok(wire::PolicyPage {
        policies: st
            .engine
            .readable_policies(list, &caller)?
            .into_iter()
            .map(ToWire::to_wire)
            .collect(),
        next_cursor,
        counts,
    })
}

async fn get_policy(
    State(st): State<AppState>,
    Credential(caller): Credential,
    Path(id): Path<String>,
) -> ApiResult {
    st.engine.policy_for(&id, &caller)?;
    ok(ToWire::to_wire(st.engine.policy_now(&id).await?))
}

async fn wait_policy(
    State(st): State<AppState>,
    Credential(caller): Credential,
    Path(id): Path<String>,
    Query(q): Query<WaitQuery>,
) -> ApiResult {
    st.engine.policy_for(&id, &caller)?;
    let timeout = q.timeout;
    let _waiting = wait_place(&st, timeout, "policy-wait")?;
    let (p, settled) = st.engine.wait_policy(&id, timeout).await?;
    ok(wire::PolicyWait {
        policy: p.to_wire(),
        settled,
    })
}

async fn cancel(State(st): State<AppState>, _: Operator, Path(id): Path<String>) -> ApiResult {
    if let Some(owner) = forwarded::owner_elsewhere(&st, &id)? {
        return forwarded::send(&st, &owner, &id, &forwarded::HostAction::Cancel {}).await;
    }
    ok(ToWire::to_wire(st.engine.cancel(&id, "the operator")?))
}

async fn ack(
    State(st): State<AppState>,
    _: Operator,
    passkeys::Login(login): passkeys::Login,
    Path(id): Path<String>,
    JsonBody(b): JsonBody<wire::AckRequest>,
) -> ApiResult {
    let proof = match &b.passkey {
        Some(_) if !b.approve => {
            return Err(ApiError::bad_request(
                "passkey",
                "a passkey goes with an approval only",
            ));
        }
        Some(a) => Some(passkeys::prove(
            &st,
            &login,
            a,
            &passkeys::approval(&st, &id, b.tree.as_deref())?,
        )?),
        None => None,
    };
    if let Some(owner) = forwarded::owner_elsewhere(&st, &id)? {
        let action = forwarded::HostAction::Ack {
            approve: b.approve,
            tree: b.tree.clone(),
            comment: b.comment.clone(),
            passkey: proof.as_ref().and_then(crate::passkey::Proof::forwarded),
        };
        return forwarded::send(&st, &owner, &id, &action).await;
    }
    ok(ToWire::to_wire(
        st.engine
            .ack(
                &id,
                b.approve,
                b.tree.as_deref(),
                b.comment.as_deref(),
                "the operator",
                proof.as_ref(),
            )
            .await?,
    ))
}

async fn request_changes(
    State(st): State<AppState>,
    _: Operator,
    Path(id): Path<String>,
    JsonBody(b): JsonBody<wire::RequestChanges>,
) -> ApiResult {
    let comments = b.comments;
    if let Some(owner) = forwarded::owner_elsewhere(&st, &id)? {
        let action = forwarded::HostAction::RequestChanges {
            tree: b.tree,
            comments,
        };
        return forwarded::send(&st, &owner, &id, &action).await;
    }
    ok(ToWire::to_wire(
        st.engine
            .request_changes(&id, &b.tree, &comments, "the operator")
            .await?,
    ))
}

async fn events(
    State(st): State<AppState>,
    Credential(caller): Credential,
    Query(q): Query<EventQuery>,
) -> ApiResult {
    let (since, wait) = (q.since, q.wait);
    hosts_kept(&st, &q.select)?;
    let mut filter = q.select.filter(since, q.limit);
    st.engine.check_event_read(&mut filter, &caller)?;
    let events = if wait.is_zero() {
        st.engine.events(&filter)?
    } else {
        let _waiting = wait_place(&st, wait, "events")?;
        st.engine.wait_events(&filter, wait).await?
    };
    // The cursor to continue from: the last event returned, so that a page
    // cut by `limit` never skips anything.
    let next_cursor = events.last().map(|e| e.cursor).unwrap_or(since);
    // Retention deletes old events: a reader behind `oldestCursor` missed
    // some, and can tell.
    let oldest_cursor = st
        .engine
        .store()
        .oldest_cursor()
        .map_err(EngineError::from)?;
    ok(wire::EventPage {
        events: events.into_iter().map(ToWire::to_wire).collect(),
        next_cursor,
        oldest_cursor,
    })
}
