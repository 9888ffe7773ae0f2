//! The guard every request passes: the read token, the concurrency
//! limit and the request deadline; and the answers for unknown routes.

use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::server::state::Shared;

pub(crate) async fn not_found() -> ApiError {
    ApiError::NotFound("no such route".into())
}

pub(crate) async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

/// Request ids, read tokens, the concurrency limit and the time limit.
pub(crate) async fn guard(State(state): State<Shared>, req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 64 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_owned)
        .unwrap_or_else(|| {
            format!(
                "{}-{}",
                state.request_prefix,
                state.request_counter.fetch_add(1, Ordering::Relaxed)
            )
        });
    let path = req.uri().path().to_owned();
    let resp = async {
        if let Some(token) = &state.config.read_token {
            let open = matches!(path.as_str(), "/healthz" | "/readyz" | "/metrics");
            // Writes are authorised by their signatures; everything else
            // (GET, and HEAD, which axum answers with the GET handler)
            // reads, and needs the token.
            let is_read = req.method() != axum::http::Method::POST;
            let ok = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .is_some_and(|t| constant_time_eq(t.as_bytes(), token.as_bytes()));
            if is_read && !open && !ok {
                return ApiError::ReadTokenRequired.into_response();
            }
        }
        let Ok(_permit) = state.inflight.try_acquire() else {
            return ApiError::Overloaded.into_response();
        };
        match tokio::time::timeout(
            Duration::from_millis(state.config.request_timeout_ms),
            next.run(req),
        )
        .await
        {
            Ok(r) => r,
            Err(_) => ApiError::Timeout.into_response(),
        }
    }
    .await;
    let mut resp = resp;
    if let Some(crate::error::ErrorCode(code)) = resp.extensions().get::<crate::error::ErrorCode>()
    {
        state.metrics.count_error(code);
    }
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert("x-request-id", v);
    }
    resp
}

pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
