//! Proofs: inclusion and consistency proofs, the signed checkpoint, the
//! log's key and its status.

use ledger::hash::to_hex;
use std::sync::atomic::Ordering;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::{num, parse_hash, ConsistencyQuery, InclusionQuery};
use crate::error::ApiError;
use crate::server::state::{Shared, VERIFY_OK, VERIFY_RUNNING};
use verifier::wire::{ConsistencyProof, InclusionProof, LogInfo, Problem};

/// `GET /v1/proofs/inclusion`: an RFC 6962 inclusion proof by index or leaf hash.
#[utoipa::path(get, path = "/v1/proofs/inclusion", tag = "proofs", params(InclusionQuery),
    responses((status = 200, body = InclusionProof), (status = 400, body = Problem, content_type = "application/problem+json"), (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn get_inclusion(
    State(state): State<Shared>,
    q: Result<Query<InclusionQuery>, QueryRejection>,
) -> Result<Json<InclusionProof>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::param("query", e.body_text()))?;
    state.refuse_if_failed()?;
    let log = state.events.ledger();
    let head = log.head();
    let tree_size = num("tree_size", &q.tree_size)?.unwrap_or(head.size);
    if tree_size == 0 || tree_size > head.size {
        return Err(ApiError::param(
            "tree_size",
            format!("must be between 1 and the current size {}", head.size),
        ));
    }
    let index = match (num("index", &q.index)?, q.leaf_hash) {
        (Some(i), None) => {
            if i >= tree_size {
                return Err(ApiError::param(
                    "index",
                    format!("must be below tree_size {tree_size}"),
                ));
            }
            i
        }
        (None, Some(h)) => {
            let h = parse_hash("leaf_hash", &h)?;
            state.refuse_until_lookups_open()?;
            let e = log
                .find_leaf(&h)?
                .ok_or_else(|| ApiError::NotFound("no entry has this leaf hash".into()))?;
            if e.index >= tree_size {
                return Err(ApiError::NotFound(format!(
                    "the entry is at index {}, not in a tree of size {tree_size}",
                    e.index
                )));
            }
            e.index
        }
        _ => {
            return Err(ApiError::param(
                "index",
                "give exactly one of index or leaf_hash",
            ))
        }
    };
    let (leaf_hash, root, proof) = log.inclusion_at(index, tree_size)?;
    Ok(Json(InclusionProof {
        index,
        tree_size,
        leaf_hash: to_hex(&leaf_hash),
        root: to_hex(&root),
        proof: proof.iter().map(to_hex).collect(),
        checkpoint: state.checkpoint(tree_size, &root)?,
    }))
}

/// `GET /v1/proofs/consistency`: an RFC 6962 consistency proof between two sizes.
#[utoipa::path(get, path = "/v1/proofs/consistency", tag = "proofs", params(ConsistencyQuery),
    responses((status = 200, body = ConsistencyProof), (status = 400, body = Problem, content_type = "application/problem+json")))]
pub async fn get_consistency(
    State(state): State<Shared>,
    q: Result<Query<ConsistencyQuery>, QueryRejection>,
) -> Result<Json<ConsistencyProof>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::param("query", e.body_text()))?;
    state.refuse_if_failed()?;
    let log = state.events.ledger();
    let head = log.head();
    let second = num("second", &q.second)?.unwrap_or(head.size);
    let first = num("first", &Some(q.first.clone()))?.unwrap_or(0);
    if second > head.size {
        return Err(ApiError::param(
            "second",
            format!("must not exceed the current size {}", head.size),
        ));
    }
    if first > second {
        return Err(ApiError::param("first", "must not exceed second"));
    }
    let (r1, r2, proof) = log.consistency_at(first, second)?;
    Ok(Json(ConsistencyProof {
        first,
        second,
        first_root: to_hex(&r1),
        second_root: to_hex(&r2),
        proof: proof.iter().map(to_hex).collect(),
        checkpoint: state.checkpoint(second, &r2)?,
    }))
}

/// `GET /checkpoint`: the latest C2SP checkpoint in a signed note
/// (text/plain); with a witness policy, the newest one a quorum cosigned.
#[utoipa::path(get, path = "/checkpoint", tag = "proofs", responses((status = 200, content_type = "text/plain", body = String, description = "C2SP tlog-checkpoint in a signed note"), (status = 503, body = Problem, content_type = "application/problem+json")))]
pub async fn get_checkpoint(State(state): State<Shared>) -> Result<Response, ApiError> {
    state.refuse_if_failed()?;
    let note = if state.policy.is_some() {
        // Witnessed: the newest checkpoint a quorum has cosigned.
        let w = state.witnessed.lock().unwrap_or_else(|p| p.into_inner());
        w.as_ref()
            .map(|(_, n)| n.clone())
            .ok_or(ApiError::NotWitnessed)?
    } else {
        let head = state.events.ledger().head();
        state.checkpoint(head.size, &head.root)?
    };
    Ok((
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::CACHE_CONTROL, ledger::tiles::MUTABLE),
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
        ],
        note,
    )
        .into_response())
}

/// `GET /v1/log/key`: the log's note verifier key (text/plain).
#[utoipa::path(get, path = "/v1/log/key", tag = "proofs", responses((status = 200, content_type = "text/plain", body = String)))]
pub async fn get_key(State(state): State<Shared>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{}\n", state.log_key.verifier_key()),
    )
        .into_response()
}

pub(crate) fn verify_status_name(v: i64) -> &'static str {
    match v {
        VERIFY_OK => "verified",
        VERIFY_RUNNING => "verifying",
        _ => "failed",
    }
}

/// `GET /v1/log`: origin, keys, size, root and verification status.
#[utoipa::path(get, path = "/v1/log", tag = "proofs", responses((status = 200, body = LogInfo)))]
pub async fn get_log(State(state): State<Shared>) -> Json<LogInfo> {
    let head = state.events.ledger().head();
    Json(LogInfo {
        origin: state.log_key.origin().to_owned(),
        verifier_key: state.log_key.verifier_key().to_owned(),
        ledger_key_id: events::key_id(&state.log_key.event_signing_key().verifying_key()),
        tree_size: head.size,
        root: to_hex(&head.root),
        verify_status: verify_status_name(state.verify_status.load(Ordering::SeqCst)).to_owned(),
    })
}
