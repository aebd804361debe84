//! `GET /v1/health`: whether the daemon is up and its store answers.
//!
//! Each call reads the bus's head from the store. When it answers: 200
//! `{ok: true, status: "ok", version, cursor, store: {reachable: true}}`.
//! When it does not (a PostgreSQL server restarting, a network cut, a
//! store that cannot be read): 503 with `Retry-After: 1` and
//! `{ok: false, status: "degraded", version, cursor: null, store:
//! {reachable: false, error, unavailableSince}, error: {code, message}}`
//! (`wire::HealthDegraded`: a load balancer's probe takes it as not
//! ready, a client reading API errors finds `store-unavailable`). The
//! answer also tells the engine's outage bookkeeping what it found.
//!
//! It owns that answer only; it must never change state, and never need
//! a token (a probe has none).

use super::AppState;
use crate::wire;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

pub(super) async fn health(State(st): State<AppState>) -> Response {
    let engine = &st.engine;
    let version = env!("CARGO_PKG_VERSION").to_string();
    match engine.store().head_cursor() {
        Ok(cursor) => {
            engine.outage().read_ok();
            Json(wire::Health {
                ok: true,
                status: wire::HealthStatus::Ok,
                version,
                cursor,
                store: wire::StoreHealth::default(),
            })
            .into_response()
        }
        Err(e) => {
            let code = if engine.outage().failed(&e) {
                "store-unavailable"
            } else {
                tracing::error!(error = %e, "the health check cannot read the store");
                "store-error"
            };
            let message = e.to_string();
            let body = wire::HealthDegraded {
                ok: false,
                status: wire::HealthStatus::Degraded,
                version,
                cursor: None,
                store: wire::StoreHealth {
                    reachable: false,
                    error: Some(message.clone()),
                    unavailable_since: engine.outage().current().map(|u| u.since),
                },
                error: wire::ErrorDetail {
                    code: code.into(),
                    message,
                    field: None,
                    hint: None,
                },
            };
            let mut response = (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            response
        }
    }
}
