//! Reads: entries by index, by page and by envelope id.

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::Json;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ledger::hash::to_hex;

use super::{num, path_u64, PageQuery};
use crate::error::ApiError;
use crate::server::state::Shared;
use verifier::wire::{EntryPage, EntryView, Problem};

pub(crate) fn entry_view(e: ledger::Entry) -> Result<EntryView, ApiError> {
    let (d, at) = events::decode_leaf(&e.leaf)
        .map_err(|r| ApiError::LogCorrupt(format!("entry {}: {r}", e.index)))?;
    let payload = serde_json::from_slice(&d.payload_bytes).unwrap_or(serde_json::Value::Null);
    Ok(EntryView {
        index: e.index,
        leaf: B64.encode(&e.leaf),
        leaf_hash: to_hex(&e.leaf_hash),
        chain_hash: to_hex(&e.chain_hash),
        sequenced_at: events::envelope::format_micros(at),
        id: d.payload.id.clone(),
        kind: d.payload.event.kind().as_str().to_owned(),
        signer: d.keyid,
        payload,
    })
}

/// `GET /v1/entries/{index}`: one entry.
#[utoipa::path(get, path = "/v1/entries/{index}", tag = "reads", params(("index" = u64, Path, description = "Entry index")),
    responses((status = 200, body = EntryView), (status = 400, body = Problem, content_type = "application/problem+json"), (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn get_entry(
    State(state): State<Shared>,
    index: Result<Path<u64>, PathRejection>,
) -> Result<Json<EntryView>, ApiError> {
    let index = path_u64(index, "index")?;
    let size = state.events.ledger().head().size;
    if index >= size {
        return Err(ApiError::NotFound(format!(
            "no entry {index}; the log has {size}"
        )));
    }
    Ok(Json(entry_view(state.events.ledger().entry(index)?)?))
}

/// `GET /v1/entries?start=&limit=`: a page of entries.
#[utoipa::path(get, path = "/v1/entries", tag = "reads", params(PageQuery),
    responses((status = 200, body = EntryPage), (status = 400, body = Problem, content_type = "application/problem+json")))]
pub async fn get_entries(
    State(state): State<Shared>,
    q: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Json<EntryPage>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::param("query", e.body_text()))?;
    let limit = num("limit", &q.limit)?.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::param("limit", "must be between 1 and 1000"));
    }
    let start = num("start", &q.start)?.unwrap_or(0);
    let size = state.events.ledger().head().size;
    let end = start.saturating_add(limit).min(size);
    let entries = state
        .events
        .ledger()
        .entries(start, end)?
        .into_iter()
        .map(entry_view)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Json(EntryPage {
        entries,
        next: (end < size).then_some(end),
        tree_size: size,
    }))
}

/// `GET /v1/entries/by-id/{id}`: the entry with an envelope id.
#[utoipa::path(get, path = "/v1/entries/by-id/{id}", tag = "reads", params(("id" = String, Path, description = "Envelope id")),
    responses((status = 200, body = EntryView), (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn get_entry_by_id(
    State(state): State<Shared>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<EntryView>, ApiError> {
    let Path(id) = id.map_err(|_| ApiError::param("id", "must be a string"))?;
    state.refuse_until_lookups_open()?;
    let index = state
        .events
        .find_id(&id)?
        .ok_or_else(|| ApiError::NotFound(format!("no envelope with id `{id}`")))?;
    Ok(Json(entry_view(state.events.ledger().entry(index)?)?))
}
