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

/// The route template a request matched, carried on its response from
/// [`name_route`] to [`guard`].
#[derive(Clone)]
pub(crate) struct RouteName(String);

/// Puts the matched route template on the response (a route layer: it
/// runs only for requests that matched a route).
pub(crate) async fn name_route(
    matched: Option<axum::extract::MatchedPath>,
    req: Request,
    next: Next,
) -> Response {
    let route = matched.map(|m| m.as_str().to_owned());
    let mut resp = next.run(req).await;
    if let Some(r) = route {
        resp.extensions_mut().insert(RouteName(r));
    }
    resp
}

/// Request ids, read tokens, the concurrency limit and the time limit; then
/// one access-log line and the per-route metrics for every request.
pub(crate) async fn guard(State(state): State<Shared>, req: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let method = req.method().as_str().to_owned();
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
    let mut req = req;
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let reader = bearer
        .as_deref()
        .and_then(|t| state.readers.find(t))
        .cloned();
    if let Some(r) = &reader {
        req.extensions_mut().insert(r.clone());
    }
    let resp = async {
        if let Some(token) = &state.config.read_token {
            let open = matches!(path.as_str(), "/healthz" | "/readyz" | "/metrics")
                || crate::server::routes::explorer::is_explorer_path(&path);
            // Writes are authorised by their signatures; everything else
            // (GET, and HEAD, which axum answers with the GET handler)
            // reads, and needs the token.
            let is_read = req.method() != axum::http::Method::POST;
            let ok = reader.is_some()
                || bearer
                    .as_deref()
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
    let route = resp
        .extensions()
        .get::<RouteName>()
        .map_or("unmatched", |r| r.0.as_str())
        .to_owned();
    let status = resp.status().as_u16();
    let seconds = started.elapsed().as_secs_f64();
    state
        .metrics
        .observe_request(&method, &route, status, seconds);
    tracing::info!(
        target: "ledger::access",
        request_id = %id,
        method = %method,
        route = %route,
        path = %path,
        status,
        latency_ms = seconds * 1000.0,
        reader = reader.as_ref().map_or("", |r| r.name.as_str()),
        "request"
    );
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert("x-request-id", v);
    }
    resp
}

pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
