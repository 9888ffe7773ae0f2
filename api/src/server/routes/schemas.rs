//! The JSON Schemas of what writers sign: the payload and each event
//! kind's body, generated from the types the sequencer decodes with (the
//! same files as docs/schemas/).

use axum::extract::rejection::PathRejection;
use axum::extract::Path;
use axum::Json;

use crate::error::ApiError;
use verifier::wire::Problem;

/// `GET /v1/schemas/events`: the JSON Schema of the signed payload, every
/// kind (`{"kind", "body"}`).
#[utoipa::path(get, path = "/v1/schemas/events", tag = "writes",
    responses((status = 200, content_type = "application/json", body = Object, description = "JSON Schema (2020-12) of the payload")))]
pub async fn get_payload_schema() -> Json<serde_json::Value> {
    Json(events::model::payload_schema().to_value())
}

/// `GET /v1/schemas/events/{kind}`: the JSON Schema of one kind's body.
#[utoipa::path(get, path = "/v1/schemas/events/{kind}", tag = "writes", params(("kind" = String, Path, description = "Event kind, e.g. `score.recorded`")),
    responses((status = 200, content_type = "application/json", body = Object, description = "JSON Schema (2020-12) of the body"), (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn get_body_schema(
    kind: Result<Path<String>, PathRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let Path(kind) = kind.map_err(|_| ApiError::param("kind", "must be a string"))?;
    let k = events::Kind::from_name(&kind)
        .ok_or_else(|| ApiError::NotFound(format!("no event kind `{kind}`")))?;
    Ok(Json(k.body_schema().to_value()))
}
