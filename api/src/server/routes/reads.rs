//! Reads: entries by index, by page and by envelope id.

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::Extension;
use axum::Json;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ledger::hash::to_hex;

use super::{num, path_u64, PageQuery};
use crate::error::ApiError;
use crate::readers::Reader;
use crate::server::state::Shared;
use verifier::wire::{EntryPage, EntryView, Problem};

/// The entry as a reader sees it: with the disclosures of its committed
/// values when `reader` holds a role (`readers_file`, docs/PRIVACY.md),
/// and with their digests only otherwise. A disclosure whose key was
/// destroyed is listed under `redacted` by its field. An entry whose
/// disclosures this directory does not keep (a restore from a backup taken
/// without a reader token) is answered without either, as to anyone else.
pub(crate) fn entry_view_for(
    e: ledger::Entry,
    reader: Option<(&ledger::Ledger<events::EventSequencer>, &Reader)>,
) -> Result<EntryView, ApiError> {
    let (d, at) = events::decode_leaf(&e.leaf)
        .map_err(|r| ApiError::LogCorrupt(format!("entry {}: {r}", e.index)))?;
    let payload = serde_json::from_slice(&d.payload_bytes).unwrap_or(serde_json::Value::Null);
    let (disclosures, redacted) = match reader {
        Some((ledger, _)) if d.payload.schema != events::model::SCHEMA_CLEAR => {
            disclosed(ledger, e.index, &d.payload.event)?
        }
        _ => (None, None),
    };
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
        disclosures,
        redacted,
    })
}

type Disclosed = (Option<Vec<String>>, Option<Vec<String>>);

/// The disclosures kept beside entry `index`, checked against its
/// commitments before they are served, and the fields whose key was
/// destroyed.
fn disclosed(
    ledger: &ledger::Ledger<events::EventSequencer>,
    index: u64,
    event: &events::Event,
) -> Result<Disclosed, ApiError> {
    let committed: Vec<&'static str> = events::disclose::fields(event)
        .into_iter()
        .filter(|(_, _, s)| s.digest().is_some())
        .map(|(p, _, _)| p)
        .collect();
    let parts = ledger.private_parts(index)?;
    if parts.is_empty() && !committed.is_empty() {
        // Not kept here: the log was restored from a backup taken without
        // a reader token. The entry is answered as to a reader without a
        // role: nothing is disclosed, and nothing claimed redacted.
        return Ok((None, None));
    }
    if parts.len() != committed.len() {
        return Err(ApiError::LogCorrupt(format!(
            "entry {index}: {} committed fields but {} disclosures kept",
            committed.len(),
            parts.len()
        )));
    }
    let mut open = Vec::new();
    let mut redacted = Vec::new();
    for (path, part) in committed.into_iter().zip(parts) {
        match part {
            ledger::private::Part::Open(b) => open.push(String::from_utf8(b).map_err(|_| {
                ApiError::LogCorrupt(format!("entry {index}: a kept disclosure is not UTF-8"))
            })?),
            ledger::private::Part::Shredded => redacted.push(path.to_owned()),
        }
    }
    events::disclose::check_disclosed(event, &open)
        .map_err(|e| ApiError::LogCorrupt(format!("entry {index}: {e}")))?;
    Ok((Some(open), Some(redacted)))
}

/// `GET /v1/entries/{index}`: one entry.
#[utoipa::path(get, path = "/v1/entries/{index}", tag = "reads", params(("index" = u64, Path, description = "Entry index")),
    responses((status = 200, body = EntryView), (status = 400, body = Problem, content_type = "application/problem+json"), (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn get_entry(
    State(state): State<Shared>,
    reader: Option<Extension<Reader>>,
    index: Result<Path<u64>, PathRejection>,
) -> Result<Json<EntryView>, ApiError> {
    let index = path_u64(index, "index")?;
    let size = state.events.ledger().head().size;
    if index >= size {
        return Err(ApiError::NotFound(format!(
            "no entry {index}; the log has {size}"
        )));
    }
    let ledger = state.events.ledger();
    Ok(Json(entry_view_for(
        ledger.entry(index)?,
        reader.as_ref().map(|r| (ledger, &r.0)),
    )?))
}

/// `GET /v1/entries?start=&limit=`: a page of entries.
#[utoipa::path(get, path = "/v1/entries", tag = "reads", params(PageQuery),
    responses((status = 200, body = EntryPage), (status = 400, body = Problem, content_type = "application/problem+json")))]
pub async fn get_entries(
    State(state): State<Shared>,
    reader: Option<Extension<Reader>>,
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
        .map(|e| entry_view_for(e, reader.as_ref().map(|r| (state.events.ledger(), &r.0))))
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
    reader: Option<Extension<Reader>>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<EntryView>, ApiError> {
    let Path(id) = id.map_err(|_| ApiError::param("id", "must be a string"))?;
    state.refuse_until_lookups_open()?;
    let index = state
        .events
        .find_id(&id)?
        .ok_or_else(|| ApiError::NotFound(format!("no envelope with id `{id}`")))?;
    let ledger = state.events.ledger();
    Ok(Json(entry_view_for(
        ledger.entry(index)?,
        reader.as_ref().map(|r| (ledger, &r.0)),
    )?))
}
