//! The handlers, one module per OpenAPI tag, and what they share.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::Path;
use axum::http::{header, HeaderMap, StatusCode};
use ledger::Hash;
use serde::Deserialize;
use utoipa::{IntoParams, OpenApi};

use crate::error::ApiError;
use crate::server::state::Shared;
use utoipa_axum::{router::OpenApiRouter, routes};

pub mod explorer;
pub mod operations;
pub mod proofs;
pub mod reads;
pub mod schemas;
pub mod task_classes;
pub mod tiles;
pub mod writes;

/// Every route the server answers, each documented by its handler's
/// `#[utoipa::path]`: one list is both the router and the OpenAPI paths.
pub fn all() -> OpenApiRouter<Shared> {
    OpenApiRouter::with_openapi(super::ApiDoc::openapi())
        .routes(routes!(writes::post_event))
        .routes(routes!(writes::post_events_batch))
        .routes(routes!(writes::post_recommendation))
        .routes(routes!(schemas::get_payload_schema))
        .routes(routes!(schemas::get_body_schema))
        .routes(routes!(reads::get_entries))
        .routes(routes!(reads::get_entry))
        .routes(routes!(reads::get_entry_by_id))
        .routes(routes!(proofs::get_inclusion))
        .routes(routes!(proofs::get_consistency))
        .routes(routes!(proofs::get_checkpoint))
        .routes(routes!(proofs::get_log))
        .routes(routes!(proofs::get_key))
        .routes(routes!(task_classes::get_task_classes))
        .routes(routes!(task_classes::get_task_class))
        .routes(routes!(task_classes::get_task_class_view))
        .routes(routes!(task_classes::get_bundle))
        .routes(routes!(task_classes::get_state))
        .routes(routes!(operations::healthz))
        .routes(routes!(operations::readyz))
        .routes(routes!(operations::metrics))
        .routes(routes!(operations::openapi_json))
        // A C2SP tile path spans several segments; its document entry is
        // `/tile/{path}` (ApiDoc's `paths`).
        .route("/tile/{*path}", axum::routing::get(tiles::get_tile))
}

pub(crate) fn parse_hash(field: &str, s: &str) -> Result<Hash, ApiError> {
    ledger::hash::from_hex(s).ok_or_else(|| ApiError::param(field, "must be 64 hex digits"))
}

// Numeric query parameters are taken as text and parsed strictly, so that
// an empty or malformed value (`?limit=`) is a 400, never silently "absent".
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// First index (default 0).
    #[param(value_type = Option<u64>, minimum = 0)]
    pub start: Option<String>,
    /// Entries per page, 1–1000 (default 100).
    #[param(value_type = Option<u64>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct InclusionQuery {
    /// The entry index (or give `leaf_hash`).
    #[param(value_type = Option<u64>, minimum = 0)]
    pub index: Option<String>,
    /// Hex leaf hash (instead of `index`).
    pub leaf_hash: Option<String>,
    /// Tree size to prove against (default: the current size).
    #[param(value_type = Option<u64>, minimum = 1)]
    pub tree_size: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ConsistencyQuery {
    /// The older tree size.
    #[param(value_type = u64, minimum = 0)]
    pub first: String,
    /// The newer tree size (default: the current size).
    #[param(value_type = Option<u64>, minimum = 0)]
    pub second: Option<String>,
}

pub(crate) fn num(field: &str, v: &Option<String>) -> Result<Option<u64>, ApiError> {
    match v {
        None => Ok(None),
        Some(s) => match s.parse::<u64>() {
            // The OpenAPI type is int64: values above 2^63 - 1 are out of range.
            Ok(n) if n <= i64::MAX as u64 => Ok(Some(n)),
            _ => Err(ApiError::param(
                field,
                "must be an integer from 0 to 2^63 - 1",
            )),
        },
    }
}

pub(crate) fn json_body(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Bytes, ApiError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mime = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if mime != "application/json" {
        return Err(ApiError::UnsupportedMediaType);
    }
    body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge
        } else {
            ApiError::param("body", "the request body could not be read")
        }
    })
}

pub(crate) fn path_u64(p: Result<Path<u64>, PathRejection>, field: &str) -> Result<u64, ApiError> {
    p.map(|Path(v)| v)
        .map_err(|_| ApiError::param(field, "must be a non-negative integer"))
}
