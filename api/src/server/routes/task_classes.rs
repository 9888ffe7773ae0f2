//! The OpenAPI tag `projections`: the task classes, a task class's
//! projection with its proof bundle, and the offline bundle.

use ledger::hash::to_hex;
use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;

use super::parse_hash;
use crate::error::ApiError;
use crate::server::state::{AppState, Shared};
use verifier::wire::{
    CommitmentProof, EvidenceProof, Problem, ProjectionResponse, StateResponse, TaskClassSummary,
    ViewResponse,
};

/// `GET /v1/task-classes`: registered task classes and their tiers.
#[utoipa::path(get, path = "/v1/task-classes", tag = "projections", responses((status = 200, body = [TaskClassSummary]), (status = 503, body = Problem, content_type = "application/problem+json")))]
pub async fn get_task_classes(
    State(state): State<Shared>,
) -> Result<Json<Vec<TaskClassSummary>>, ApiError> {
    state.require_verified()?;
    Ok(Json(
        state
            .events
            .task_class_tiers()
            .into_iter()
            .map(|(task_class, tier)| TaskClassSummary {
                task_class,
                tier: tier.as_str().to_owned(),
            })
            .collect(),
    ))
}

pub(crate) fn projection_response(
    state: &AppState,
    view: projections::TaskClassView,
) -> Result<ProjectionResponse, ApiError> {
    // Nothing is served (or signed into a bundle) that does not follow from
    // the evidence it cites, re-read from the log.
    let proven = projections::driver::check_evidence(state.events.ledger(), &view)
        .map_err(|e| state.derived_error(e))?;
    checked_projection_response(state, view, proven)
}

/// The answer for `view` as JSON ([`projection_response`] written by
/// [`write_checked_projection`]).
fn projection_json(
    state: &AppState,
    view: projections::TaskClassView,
) -> Result<Vec<u8>, ApiError> {
    let proven = projections::driver::check_evidence(state.events.ledger(), &view)
        .map_err(|e| state.derived_error(e))?;
    let mut out = Vec::new();
    write_checked_projection(state, &mut out, &view, &proven)?;
    Ok(out)
}

/// Appends to `out` the JSON of the answer for `view`, whose evidence
/// `proven` was read back and checked against it: the bytes
/// `serde_json::to_vec` writes for [`checked_projection_response`]'s
/// answer, written directly. At 1,000 held-out cases the answer is about
/// 3.7 MB, nearly all of it base64 leaves and hex hashes: written straight
/// into one buffer, rather than as a `String` each and then scanned again
/// for characters to escape, which neither alphabet has.
pub(crate) fn write_checked_projection(
    state: &AppState,
    out: &mut Vec<u8>,
    view: &projections::TaskClassView,
    proven: &[projections::driver::Proven],
) -> Result<(), ApiError> {
    let root = parse_hash("root", &view.root)?;
    let checkpoint = state.checkpoint(view.tree_size, &root)?;
    let encoded = |entry: &ledger::Entry| -> Arc<str> {
        state
            .leaf_base64
            .get_or_insert_with(entry.leaf_hash.0, || B64.encode(&entry.leaf).into())
    };
    write_projection(
        out,
        &checkpoint,
        state.log_key.verifier_key(),
        view,
        proven,
        encoded,
    )
    .map_err(|e| ApiError::Internal(format!("writing a projection answer: {e}")))
}

fn write_projection(
    out: &mut Vec<u8>,
    checkpoint: &str,
    verifier_key: &str,
    view: &projections::TaskClassView,
    proven: &[projections::driver::Proven],
    base64: impl Fn(&ledger::Entry) -> Arc<str>,
) -> std::io::Result<()> {
    use std::io::Write as _;
    let evidence_bytes: usize = proven
        .iter()
        .map(|(entry, proof)| entry.leaf.len().div_ceil(3) * 4 + 67 * proof.len() + 200)
        .sum();
    out.reserve(evidence_bytes + 160 * view.evidence.len() + 4096);
    out.extend_from_slice(b"{\"checkpoint\":");
    serde_json::to_writer(&mut *out, checkpoint)?;
    out.extend_from_slice(b",\"verifier_key\":");
    serde_json::to_writer(&mut *out, verifier_key)?;
    write!(out, ",\"tree_size\":{},\"root\":", view.tree_size)?;
    serde_json::to_writer(&mut *out, &view.root)?;
    out.extend_from_slice(b",\"view\":");
    serde_json::to_writer(&mut *out, view)?;
    out.extend_from_slice(b",\"evidence\":[");
    for (i, ((entry, proof), e)) in proven.iter().zip(&view.evidence).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write!(out, "{{\"index\":{},\"leaf_hash\":", e.index)?;
        serde_json::to_writer(&mut *out, &e.leaf_hash)?;
        out.extend_from_slice(b",\"leaf\":\"");
        out.extend_from_slice(base64(entry).as_bytes());
        out.extend_from_slice(b"\",\"proof\":[");
        for (j, h) in proof.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            out.push(b'"');
            ledger::hash::push_hex32(out, &h.0);
            out.push(b'"');
        }
        out.extend_from_slice(b"]}");
    }
    out.extend_from_slice(b"]}");
    Ok(())
}

/// A JSON answer already written.
pub(crate) fn json_bytes(status: StatusCode, body: Vec<u8>) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

/// The answer for `view`, whose evidence `proven` was read back and
/// checked against it ([`projections::driver::check_evidence`]).
fn checked_projection_response(
    state: &AppState,
    view: projections::TaskClassView,
    proven: Vec<projections::driver::Proven>,
) -> Result<ProjectionResponse, ApiError> {
    let root = parse_hash("root", &view.root)?;
    let evidence = proven
        .into_iter()
        .zip(&view.evidence)
        .map(|((entry, proof), e)| EvidenceProof {
            index: e.index,
            leaf_hash: e.leaf_hash.clone(),
            leaf: B64.encode(&entry.leaf),
            proof: proof.iter().map(to_hex).collect(),
        })
        .collect();
    Ok(ProjectionResponse {
        checkpoint: state.checkpoint(view.tree_size, &root)?,
        verifier_key: state.log_key.verifier_key().to_owned(),
        tree_size: view.tree_size,
        root: view.root.clone(),
        view,
        evidence,
    })
}

/// `answer` made, on a blocking thread, from the view of task class `name`
/// at the head and the server's time, once the log has verified.
async fn answer_from_view<T: Send + 'static>(
    state: Shared,
    name: Result<Path<String>, PathRejection>,
    answer: impl FnOnce(&AppState, projections::TaskClassView) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let Path(name) = name.map_err(|_| ApiError::param("name", "must be a string"))?;
    state.require_verified()?;
    let resp = tokio::task::spawn_blocking(move || {
        let view = {
            let mut p = state.projector();
            p.view_at_head(state.events.ledger(), &name, state.clock.now_micros())?
        };
        answer(&state, view)
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))??;
    Ok(resp)
}

/// `GET /v1/task-classes/{name}`: the projection with its proof bundle.
#[utoipa::path(get, path = "/v1/task-classes/{name}", tag = "projections", params(("name" = String, Path, description = "Task class")),
    responses((status = 200, body = ProjectionResponse), (status = 404, body = Problem, content_type = "application/problem+json"), (status = 503, body = Problem, content_type = "application/problem+json", description = "Log verifying or failed verification: no numbers")))]
pub async fn get_task_class(
    State(state): State<Shared>,
    name: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let body = answer_from_view(state, name, projection_json).await?;
    Ok(json_bytes(StatusCode::OK, body))
}

/// `GET /v1/task-classes/{name}/view`: the projection's numbers alone, at
/// a signed checkpoint, without evidence entries or proofs (for display:
/// its reader cannot check them against the log).
#[utoipa::path(get, path = "/v1/task-classes/{name}/view", tag = "projections", params(("name" = String, Path, description = "Task class")),
    responses((status = 200, body = ViewResponse, description = "The view, unchecked by its reader: for display, not for decisions"), (status = 404, body = Problem, content_type = "application/problem+json"), (status = 503, body = Problem, content_type = "application/problem+json", description = "Log verifying or failed verification: no numbers")))]
pub async fn get_task_class_view(
    State(state): State<Shared>,
    name: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let body = answer_from_view(state, name, |st, view| {
        let root = parse_hash("root", &view.root)?;
        // Written on the blocking thread into one buffer sized for the
        // evidence list (about 150 bytes an entry), not grown while the
        // response is made.
        let mut out = Vec::with_capacity(4096 + 200 * view.evidence.len());
        let answer = ViewResponse {
            checkpoint: st.checkpoint(view.tree_size, &root)?,
            tree_size: view.tree_size,
            root: view.root.clone(),
            view,
        };
        serde_json::to_writer(&mut out, &answer)
            .map_err(|e| ApiError::Internal(format!("writing a view: {e}")))?;
        Ok(out)
    })
    .await?;
    Ok(json_bytes(StatusCode::OK, body))
}

/// `GET /v1/task-classes/{name}/bundle`: an offline proof bundle of the
/// projection (canonical JSON with a signed attestation; `ledger
/// verify-bundle` checks it without a server).
#[utoipa::path(get, path = "/v1/task-classes/{name}/bundle", tag = "projections", params(("name" = String, Path, description = "Task class")),
    responses((status = 200, content_type = "application/json", body = Object, description = "{attestation, body}: see docs/API.md"), (status = 404, body = Problem, content_type = "application/problem+json"), (status = 503, body = Problem, content_type = "application/problem+json")))]
pub async fn get_bundle(
    State(state): State<Shared>,
    name: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    state.require_derived_checked()?;
    let p = answer_from_view(Arc::clone(&state), name, projection_response).await?;
    let bytes = verifier::check::make_bundle(&state.log_key, &p)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(([(header::CONTENT_TYPE, "application/json")], bytes).into_response())
}

/// `GET /v1/task-classes/{name}/state`: the class's committed state with
/// its proofs; commits the state first when the log's last entry is not a
/// commitment already (docs/COMPLETENESS.md).
#[utoipa::path(get, path = "/v1/task-classes/{name}/state", tag = "projections", params(("name" = String, Path, description = "Task class")),
    responses((status = 200, body = StateResponse, description = "The committed records, or the absence of the class, with proofs"), (status = 503, body = Problem, content_type = "application/problem+json", description = "Log verifying, failed verification, or writes kept landing first (retry)")))]
pub async fn get_state(
    State(state): State<Shared>,
    name: Result<Path<String>, PathRejection>,
) -> Result<Json<StateResponse>, ApiError> {
    let Path(name) = name.map_err(|_| ApiError::param("name", "must be a string"))?;
    state.require_derived_checked()?;
    let st = Arc::clone(&state);
    let resp = tokio::task::spawn_blocking(move || -> Result<StateResponse, ApiError> {
        let now = st.clock.now_micros();
        let committed = {
            let mut p = st.projector();
            projections::driver::commit_state(
                &st.events,
                &mut p,
                &st.log_key.event_signing_key(),
                now,
            )?
        };
        state_response(&st, &name, committed, now)
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))??;
    Ok(Json(resp))
}

fn state_response(
    st: &AppState,
    name: &str,
    committed: projections::driver::Committed,
    now: i64,
) -> Result<StateResponse, ApiError> {
    let log = st.events.ledger();
    let index = committed.index;
    // Proven in the newest witnessed checkpoint when it holds the
    // commitment (a gate with a witness policy needs a cosigned one);
    // otherwise in the head, signed now.
    let witnessed = st
        .witnessed
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
        .filter(|(size, _)| *size > index);
    let (size, root, checkpoint) = match witnessed {
        Some((size, note)) => (size, log.root_at(size)?, note),
        None => {
            let head = log.head();
            (head.size, head.root, st.checkpoint(head.size, &head.root)?)
        }
    };
    let entry = log.entry(index)?;
    // The view is stated no earlier than the commitment it describes (the
    // clock was read before the commitment was sequenced).
    let now = match events::decode_logged_leaf(&entry.leaf) {
        Ok((_, at)) => now.max(at),
        Err(_) => now,
    };
    let inclusion = log.inclusion_proof(index, size)?;
    let consistency = log.consistency_proof(index, size)?;
    let state = committed.state;
    let settings = st.projector().settings().clone();
    let (class, class_proof, cases, neighbours, view) = match state.proof(name) {
        Ok(proof) => {
            let c = state
                .class(name)
                .ok_or_else(|| ApiError::Internal("a proven class is missing".into()))?;
            let view = projections::commit::view(&c.class, &c.cases, index, now, &settings);
            (
                Some(c.class.clone()),
                Some(proof),
                c.cases.clone(),
                None,
                Some(view),
            )
        }
        Err(neighbours) => (None, None, Vec::new(), Some(*neighbours), None),
    };
    Ok(StateResponse {
        task_class: name.to_owned(),
        checkpoint,
        verifier_key: st.log_key.verifier_key().to_owned(),
        tree_size: size,
        root: to_hex(&root),
        commitment: CommitmentProof {
            index,
            leaf: B64.encode(&entry.leaf),
            inclusion_proof: inclusion.iter().map(to_hex).collect(),
            consistency_proof: consistency.iter().map(to_hex).collect(),
        },
        state_root: to_hex(&state.root()),
        task_classes: state.classes.len() as u64,
        class,
        class_proof,
        cases,
        neighbours,
        view,
    })
}
