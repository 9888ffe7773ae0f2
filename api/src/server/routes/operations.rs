//! Operations: liveness, readiness, metrics and the OpenAPI document.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::server::state::Shared;
use verifier::wire::Problem;

/// `GET /healthz`: the process is up.
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, description = "alive")))]
pub async fn healthz() -> &'static str {
    "ok\n"
}

/// `GET /readyz`: ready when the log has been verified. While a start
/// opens the lookups by leaf hash and envelope id, and while the event
/// state is caught up, 503 `ledger_unavailable` says so (reads, proofs and
/// checkpoints are served meanwhile; writes are refused); then 503
/// `log_verifying` until the log's check has passed.
#[utoipa::path(get, path = "/readyz", tag = "operations", responses((status = 200, description = "verified and serving"), (status = 503, body = Problem, content_type = "application/problem+json")))]
pub async fn readyz(State(state): State<Shared>) -> Result<&'static str, ApiError> {
    state.refuse_if_halted()?;
    state.refuse_until_lookups_open()?;
    if state.events.catching_up() {
        return Err(ApiError::Rejected {
            rejection: events::Rejection::new(
                events::RejectCode::LedgerUnavailable,
                "",
                "catching up the event state after a start: reads, proofs and checkpoints are served; writes and numbers wait",
            ),
            recorded: None,
        });
    }
    state.require_verified().map(|()| "ready\n")
}

/// `GET /metrics`: Prometheus text exposition.
#[utoipa::path(get, path = "/metrics", tag = "operations", responses((status = 200, content_type = "application/openmetrics-text", body = String, description = "OpenMetrics / Prometheus text exposition")))]
pub async fn metrics(State(state): State<Shared>) -> Response {
    let body = state.metrics.render(&state.metrics_snapshot());
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

/// `GET /openapi.json`: this API's OpenAPI 3.1 document.
#[utoipa::path(get, path = "/openapi.json", tag = "operations", responses((status = 200, content_type = "application/json", body = Object)))]
pub async fn openapi_json() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        crate::server::openapi().to_json().unwrap_or_default(),
    )
        .into_response()
}
