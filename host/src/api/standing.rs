//! The standing policies' routes: add, list, remove. Adding and removing
//! take the operator's token (a template is attached with the operator's
//! trust to sessions the agent registers, so an agent never adds one);
//! listing takes either. It maps the engine's answers to the wire; it
//! must never change state itself.

use super::{ApiResult, AppState, Bearer, JsonBody, Operator, ok};
use crate::api::convert::ToWire;
use crate::wire;
use axum::extract::{Path, State};

pub(super) async fn add(
    State(st): State<AppState>,
    _: Operator,
    JsonBody(req): JsonBody<wire::StandingRequest>,
) -> ApiResult {
    ok(ToWire::to_wire(st.engine.add_standing(req)?))
}

pub(super) async fn list(State(st): State<AppState>, _: Bearer) -> ApiResult {
    ok(wire::StandingList {
        standing_policies: st
            .engine
            .standing_policies()?
            .into_iter()
            .map(ToWire::to_wire)
            .collect(),
    })
}

pub(super) async fn remove(
    State(st): State<AppState>,
    _: Operator,
    Path(id): Path<String>,
) -> ApiResult {
    ok(ToWire::to_wire(st.engine.remove_standing(&id)?))
}
