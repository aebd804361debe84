//! The routines' routes: start, read, cancel a run and answer a step's
//! escalation. Answering takes the operator's token (an agent never
//! answers for the operator); starting and cancelling take either, the
//! agent token only for runs whose every step runs in a session whose key
//! it holds (never one that starts an agent: the engine checks); reading
//! takes either. It maps the engine's answers to the wire; it must
//! never change state itself.

use super::{ApiResult, AppState, Bearer, Credential, JsonBody, Operator, ok};
use crate::api::convert::ToWire;
use crate::wire;
use axum::extract::{Path, State};

/// The most runs `GET /v1/routines` answers.
const LIST_LIMIT: usize = 200;

pub(super) async fn start(
    State(st): State<AppState>,
    Credential(caller): Credential,
    headers: axum::http::HeaderMap,
    JsonBody(spec): JsonBody<wire::RoutineRequest>,
) -> ApiResult {
    // A client's retry of a start whose answer it lost sends the same key.
    let key = match headers.get("idempotency-key") {
        None => None,
        Some(v) => Some(
            v.to_str()
                .map_err(|_| crate::engine::EngineError::Invalid {
                    field: "Idempotency-Key".into(),
                    message: "not visible ASCII".into(),
                })?
                .to_string(),
        ),
    };
    ok(ToWire::to_wire(
        st.engine.start_routine_as(spec, key, &caller)?,
    ))
}

pub(super) async fn list(State(st): State<AppState>, _: Bearer) -> ApiResult {
    ok(wire::RoutineList {
        routines: st
            .engine
            .routines(LIST_LIMIT)?
            .into_iter()
            .map(ToWire::to_wire)
            .collect(),
    })
}

pub(super) async fn get(
    State(st): State<AppState>,
    _: Bearer,
    Path(id): Path<String>,
) -> ApiResult {
    ok(ToWire::to_wire(st.engine.routine(&id)?))
}

pub(super) async fn cancel(
    State(st): State<AppState>,
    Credential(caller): Credential,
    Path(id): Path<String>,
) -> ApiResult {
    ok(ToWire::to_wire(st.engine.cancel_routine_as(&id, &caller)?))
}

pub(super) async fn resolve(
    State(st): State<AppState>,
    _: Operator,
    Path((id, step)): Path<(String, String)>,
    JsonBody(b): JsonBody<wire::ResolveRequest>,
) -> ApiResult {
    ok(ToWire::to_wire(
        st.engine.resolve_routine(&id, &step, b.response)?,
    ))
}
