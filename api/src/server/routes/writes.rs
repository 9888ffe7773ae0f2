//! Writes: signed events, one or many, and promotion recommendations.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use utoipa::ToSchema;

use super::json_body;
use crate::error::ApiError;
use crate::server::state::{AppState, Shared};
use verifier::wire::{BatchResponse, EnvelopeBody, Problem, RecommendationResponse, WriteReceipt};

/// `POST /v1/events`: append one signed event.
#[utoipa::path(post, path = "/v1/events", tag = "writes", request_body(content = EnvelopeBody, content_type = "application/json"),
    responses(
        (status = 201, description = "Appended; durable before this response", body = WriteReceipt),
        (status = 200, description = "Already in the log (idempotent re-post); nothing appended", body = WriteReceipt),
        (status = 400, description = "Malformed envelope or payload", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Unknown signer or bad signature", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Role, revocation, or tier.apply (recorded)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Conflict (id reused, already exists, capability spent)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A domain rule refused the event", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Overloaded or timed out; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn post_event(
    State(state): State<Shared>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = json_body(&headers, body)?;
    state.refuse_if_failed()?;
    state.refuse_if_halted()?;
    let started = Instant::now();
    let pending = state.events.submit(&body)?;
    let r = pending.wait_async().await?;
    state
        .metrics
        .append_latency
        .observe(started.elapsed().as_secs_f64());
    let status = if r.existing {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    let mut out = Vec::with_capacity(2048);
    receipt_into(&state, &mut out, &r)?;
    Ok(super::task_classes::json_bytes(status, out))
}

/// The most envelopes one `POST /v1/events/batch` takes.
pub const MAX_BATCH: usize = 1000;

/// The body of `POST /v1/events/batch`: a JSON array of 1 to 1,000 items,
/// each a DSSE envelope as `POST /v1/events` takes it (`EnvelopeBody`).
/// Each item is judged alone: one that is not an envelope is refused in its
/// own result (400 `malformed_envelope`) and the others still go in.
#[derive(ToSchema)]
#[schema(value_type = Vec<serde_json::Value>, min_items = 1, max_items = 1000)]
pub struct BatchBody(pub Vec<serde_json::Value>);

/// `POST /v1/events/batch`: many signed events in one request.
#[utoipa::path(post, path = "/v1/events/batch", tag = "writes", request_body(content = BatchBody, content_type = "application/json"),
    responses(
        (status = 200, description = "One result per envelope, in order: a receipt (201 or 200) or a problem document. Every receipt is proven in the same checkpoint", body = BatchResponse),
        (status = 400, description = "The body is not a JSON array of 1 to 1,000 items (nothing appended)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Overloaded or timed out; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn post_events_batch(
    State(state): State<Shared>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = json_body(&headers, body)?;
    state.refuse_if_failed()?;
    state.refuse_if_halted()?;
    let started = Instant::now();
    // One batch's checks are split across the cores only while the server
    // has no more requests than cores in hand; when it has, they are
    // already busy with other requests, and splitting would only add threads.
    let cores = cores();
    let threads = if state.requests_in_flight() > cores {
        1
    } else {
        cores
    };
    let st = Arc::clone(&state);
    // Parsed on the blocking thread, into envelopes borrowed from the body.
    let pending = tokio::task::spawn_blocking(move || {
        let items: Vec<&serde_json::value::RawValue> = serde_json::from_slice(&body)
            .map_err(|_| ApiError::param("body", "must be a JSON array of DSSE envelopes"))?;
        if items.is_empty() || items.len() > MAX_BATCH {
            return Err(ApiError::param(
                "body",
                format!("must hold 1 to {MAX_BATCH} envelopes, not {}", items.len()),
            ));
        }
        let raw: Vec<&[u8]> = items.iter().map(|i| i.get().as_bytes()).collect();
        Ok(st.events.submit_many(&raw, threads))
    })
    .await
    .map_err(|e| ApiError::Internal(format!("batch verification: {e}")))??;
    let mut outcomes = Vec::with_capacity(pending.len());
    for p in pending {
        outcomes.push(match p {
            Ok(p) => p.wait_async().await.map_err(ApiError::from),
            Err(e) => Err(ApiError::from(e)),
        });
    }
    let elapsed = started.elapsed().as_secs_f64();
    for _ in outcomes.iter().filter(|o| o.is_ok()) {
        state.metrics.append_latency.observe(elapsed);
    }
    let st = Arc::clone(&state);
    let answer = tokio::task::spawn_blocking(move || batch_answer(&st, outcomes))
        .await
        .map_err(|e| ApiError::Internal(format!("batch receipts: {e}")))??;
    Ok(super::task_classes::json_bytes(StatusCode::OK, answer))
}

/// The cores this process may use, read once: `available_parallelism`
/// reads the cgroup's files on every call (about 0.6 µs of every batched
/// event, measured with `perf record` under `loadgen`).
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Receipts for a batch's acknowledged envelopes, all proven in the largest
/// tree any of them was acknowledged in, from one read snapshot and one
/// signed checkpoint: a [`BatchResponse`], written straight into one buffer
/// (the checkpoint and root once, each hash as hex without a `String` of
/// its own), held byte for byte to what serde writes by the HTTP suite.
pub(crate) fn batch_answer(
    state: &AppState,
    outcomes: Vec<Result<ledger::Receipt<events::Accepted>, ApiError>>,
) -> Result<Vec<u8>, ApiError> {
    let acked: Vec<&ledger::Appended> = outcomes
        .iter()
        .filter_map(|o| o.as_ref().ok())
        .map(|r| &r.appended)
        .collect();
    let newest = acked
        .iter()
        .map(|a| (a.tree_size, a.root))
        .max_by_key(|(size, _)| *size);
    let (proofs, checkpoint) = match newest {
        Some((size, root)) => {
            let indices: Vec<u64> = acked.iter().map(|a| a.index).collect();
            let proofs = state.events.ledger().inclusion_proofs(&indices, size)?;
            (proofs, state.checkpoint(size, &root)?)
        }
        None => (Vec::new(), String::new()),
    };
    let (size, root) = newest.unwrap_or_default();
    write_batch(&outcomes, proofs, &checkpoint, size, &root)
        .map_err(|e| ApiError::Internal(format!("writing a batch answer: {e}")))
}

fn write_batch(
    outcomes: &[Result<ledger::Receipt<events::Accepted>, ApiError>],
    proofs: Vec<Vec<ledger::Hash>>,
    checkpoint: &str,
    size: u64,
    root: &ledger::Hash,
) -> std::io::Result<Vec<u8>> {
    use std::io::Write as _;
    let checkpoint = serde_json::to_vec(checkpoint)?;
    let per_receipt = 400 + checkpoint.len() + 67 * proofs.first().map_or(0, Vec::len);
    let mut out = Vec::with_capacity(64 + per_receipt * outcomes.len());
    let mut proofs = proofs.into_iter();
    let mut appended = 0u64;
    out.extend_from_slice(b"{\"results\":[");
    for (i, o) in outcomes.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match o {
            Ok(r) => {
                appended += u64::from(!r.existing);
                let status = if r.existing { 200 } else { 201 };
                write!(out, "{{\"status\":{status},\"receipt\":")?;
                let proof = proofs.next().unwrap_or_default();
                write_receipt(&mut out, r, (size, root), &proof, &checkpoint)?;
                out.push(b'}');
            }
            Err(e) => {
                write!(out, "{{\"status\":{},\"problem\":", e.status().as_u16())?;
                serde_json::to_writer(&mut out, &e.problem())?;
                out.push(b'}');
            }
        }
    }
    write!(out, "],\"appended\":{appended},\"tree_size\":{size}}}")?;
    Ok(out)
}

/// `r`'s receipt (a [`WriteReceipt`]) proven at its own tree size, written
/// into `out`.
pub(crate) fn receipt_into(
    state: &AppState,
    out: &mut Vec<u8>,
    r: &ledger::Receipt<events::Accepted>,
) -> Result<(), ApiError> {
    let a = &r.appended;
    let proof = state
        .events
        .ledger()
        .inclusion_proof(a.index, a.tree_size)?;
    let checkpoint = serde_json::to_vec(&state.checkpoint(a.tree_size, &a.root)?)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    write_receipt(out, r, (a.tree_size, &a.root), &proof, &checkpoint)
        .map_err(|e| ApiError::Internal(format!("writing a receipt: {e}")))
}

/// `r`'s receipt proven in the tree `(size, root)`, which holds it, with
/// `proof` its inclusion proof there and `checkpoint` the signed note as a
/// JSON string: a [`WriteReceipt`] written straight into `out` (each hash
/// as hex without a `String` of its own), held byte for byte to what serde
/// writes by the HTTP suite.
fn write_receipt(
    out: &mut Vec<u8>,
    r: &ledger::Receipt<events::Accepted>,
    (size, root): (u64, &ledger::Hash),
    proof: &[ledger::Hash],
    checkpoint: &[u8],
) -> std::io::Result<()> {
    use std::io::Write as _;
    let hex = |out: &mut Vec<u8>, h: &ledger::Hash| {
        out.push(b'"');
        ledger::hash::push_hex32(out, &h.0);
        out.push(b'"');
    };
    let a = &r.appended;
    write!(out, "{{\"index\":{},\"leaf_hash\":", a.index)?;
    hex(out, &a.leaf_hash);
    out.extend_from_slice(b",\"chain_hash\":");
    hex(out, &a.chain_hash);
    write!(out, ",\"tree_size\":{size},\"root\":")?;
    hex(out, root);
    out.extend_from_slice(b",\"inclusion_proof\":[");
    for (j, h) in proof.iter().enumerate() {
        if j > 0 {
            out.push(b',');
        }
        hex(out, h);
    }
    out.extend_from_slice(b"],\"checkpoint\":");
    out.extend_from_slice(checkpoint);
    out.extend_from_slice(b",\"id\":");
    serde_json::to_writer(&mut *out, &r.accepted.id)?;
    out.extend_from_slice(b",\"kind\":");
    serde_json::to_writer(&mut *out, r.accepted.kind.as_str())?;
    write!(out, ",\"existing\":{},\"sequenced_at\":", r.existing)?;
    serde_json::to_writer(
        &mut *out,
        &events::envelope::format_micros(r.accepted.sequenced_at),
    )?;
    out.push(b'}');
    Ok(())
}

/// `POST /v1/recommendations`: post a signed promotion.requested envelope;
/// the ledger computes and appends a promotion.recommended event.
#[utoipa::path(post, path = "/v1/recommendations", tag = "writes", request_body(content = EnvelopeBody, content_type = "application/json"),
    responses(
        (status = 201, body = RecommendationResponse, description = "Recommendation appended (advisory; humans promote)"),
        (status = 200, body = RecommendationResponse, description = "This request was answered before"),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json"),
        (status = 413, body = Problem, content_type = "application/problem+json"),
        (status = 415, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 422, body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
pub async fn post_recommendation(
    State(state): State<Shared>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = json_body(&headers, body)?;
    state.require_derived_checked()?;
    let st = Arc::clone(&state);
    let (status, resp) =
        tokio::task::spawn_blocking(move || -> Result<(StatusCode, Vec<u8>), ApiError> {
            let now = st.clock.now_micros();
            let rec = {
                let mut p = st.projector();
                projections::driver::recommend(
                    &st.events,
                    &mut p,
                    &st.log_key.event_signing_key(),
                    &body,
                    now,
                )
                .map_err(|e| st.derived_error(e))?
            };
            let status = if rec.receipt.existing {
                StatusCode::OK
            } else {
                StatusCode::CREATED
            };
            // A `RecommendationResponse`, its projection written as
            // `GET /v1/task-classes/{name}` writes it.
            let mut out = b"{\"recommendation\":".to_vec();
            receipt_into(&st, &mut out, &rec.receipt)?;
            out.extend_from_slice(b",\"projection\":");
            super::task_classes::write_checked_projection(&st, &mut out, &rec.view, &rec.evidence)?;
            out.push(b'}');
            Ok((status, out))
        })
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))??;
    Ok(super::task_classes::json_bytes(status, resp))
}
