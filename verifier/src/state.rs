//! Completeness without replay: the check of a task class's committed state
//! (`GET /v1/task-classes/{name}/state`, docs/COMPLETENESS.md).
//!
//! What it proves: the decision numbers it returns are those of the state
//! the ledger committed in its log at `committed_size`, with nothing that
//! state holds for the class left out, added or altered; a class said not
//! to exist is absent from that state. What it still trusts: that the
//! committed state is the right fold of the log before it. That is what
//! anyone who replays the log checks (every fold checks each
//! `state.committed` root, [`projections::ProjectionError::WrongStateRoot`]),
//! and the commitment is in the log for them to check: a wrong one is
//! signed misbehaviour, not a silent lie. Freshness is checked against
//! what the caller knows: the newest size it trusts (`min_size`), its own
//! clock and the agreed settings ([`StateRules`]).

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use events::Event;
use ledger::hash::to_hex;
use ledger::merkle::{verify_consistency, verify_inclusion};
use projections::commit::{self, CommitError, CommittedView};

use crate::check::parse_proof;
use crate::wire::StateResponse;

/// What the caller holds an answer to, besides its proofs: the agreed
/// settings (window, confidence, resamples), the caller's clock and how far
/// the answer's stated time may be from it. The view is recomputed at the
/// answer's time; a server that stated another time or other settings could
/// move scores and failures out of the window or loosen the bound.
#[derive(Debug, Clone)]
pub struct StateRules {
    pub settings: projections::Settings,
    pub now_micros: i64,
    pub max_skew_micros: i64,
}

/// A state answer that checked out.
#[derive(Debug, Clone)]
pub struct VerifiedState {
    pub task_class: String,
    /// The size of the log whose state was committed (the commitment's own
    /// index).
    pub committed_size: u64,
    /// The checkpoint the commitment was proven in.
    pub tree_size: u64,
    pub state_root: String,
    /// The decision numbers, recomputed here from the records; `None` when
    /// the class is proven absent.
    pub view: Option<CommittedView>,
    /// The witnesses whose cosignatures met the policy, when one was given.
    pub witnessed_by: Vec<String>,
}

/// Why a state answer does not hold. One kind per way it can fail.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("the checkpoint: {0}")]
    Checkpoint(String),
    #[error("the commitment: {0}")]
    Commitment(String),
    #[error("the commitment covers a log of {have} entries, fewer than the {want} already known")]
    Stale { have: u64, want: u64 },
    #[error(transparent)]
    Records(#[from] CommitError),
    #[error("the answer for `{0}` has neither the class with its proof nor its neighbours")]
    Incomplete(String),
    #[error("the served view differs from the records at `{0}`")]
    View(String),
    #[error("the answer states settings {stated:?}; the agreed ones are {agreed:?}")]
    Settings {
        stated: projections::Settings,
        agreed: projections::Settings,
    },
    #[error("the answer is stated at {stated} µs, not within the allowed skew of {now} µs (and no earlier than its commitment)")]
    Time { stated: i64, now: i64 },
}

/// Checks `resp` against the log key `vkey` (and the witness `policy`,
/// when given), refusing a commitment that covers fewer than `min_size`
/// entries, and a view stated at another time or with other settings than
/// `rules` allow. Returns the view recomputed from the records.
pub fn check_state(
    resp: &StateResponse,
    vkey: &str,
    policy: Option<&anchors::Policy>,
    min_size: u64,
    rules: &StateRules,
) -> Result<VerifiedState, StateError> {
    let ckpt = |e: String| StateError::Checkpoint(e);
    let (cp, witnessed_by) = match policy {
        Some(p) => {
            let wc = p
                .open_checkpoint(resp.checkpoint.as_bytes(), vkey)
                .map_err(|e| ckpt(e.to_string()))?;
            let by = wc.cosigned.into_iter().map(|c| c.witness).collect();
            (wc.checkpoint, by)
        }
        None => (
            anchors::open_checkpoint(resp.checkpoint.as_bytes(), vkey)
                .map_err(|e| ckpt(e.to_string()))?,
            Vec::new(),
        ),
    };
    if cp.size != resp.tree_size || to_hex(&cp.root) != resp.root {
        return Err(ckpt(
            "tree_size or root differs from the signed checkpoint".into(),
        ));
    }
    let bad = |e: String| StateError::Commitment(e);
    let c = &resp.commitment;
    let leaf = B64
        .decode(&c.leaf)
        .map_err(|_| bad("the leaf is not base64".into()))?;
    let (d, committed_at) = events::decode_logged_leaf(&leaf).map_err(|e| bad(e.to_string()))?;
    let Event::StateCommitted(e) = &d.payload.event else {
        return Err(bad(format!(
            "entry {} is a {}, not a state.committed",
            c.index,
            d.payload.event.kind().as_str()
        )));
    };
    if e.checkpoint.size != c.index {
        return Err(bad(format!(
            "entry {} commits the state at size {}, not at its own index",
            c.index, e.checkpoint.size
        )));
    }
    if e.state_root != resp.state_root || e.task_classes != resp.task_classes {
        return Err(bad(
            "the state root or class count differs from the entry's".into(),
        ));
    }
    let proof = |field: &str, p: &[String]| parse_proof(field, p).map_err(|e| bad(e.to_string()));
    verify_inclusion(
        &ledger::leaf_hash(&leaf),
        c.index,
        cp.size,
        &proof("commitment.inclusion_proof", &c.inclusion_proof)?,
        &cp.root,
    )
    .map_err(|err| {
        bad(format!(
            "entry {} is not in the signed tree: {err}",
            c.index
        ))
    })?;
    let committed_root = ledger::hash::from_hex(&e.checkpoint.root)
        .ok_or_else(|| bad("the entry's checkpoint root is not a hash".into()))?;
    verify_consistency(
        c.index,
        &committed_root,
        cp.size,
        &cp.root,
        &proof("commitment.consistency_proof", &c.consistency_proof)?,
    )
    .map_err(|err| {
        bad(format!(
            "the committed log of size {} is not a prefix of the signed tree: {err}",
            c.index
        ))
    })?;
    // The commitment changes no state: the state at its index is also the
    // state of the log through it (index + 1 entries), which a reader who
    // saw it last time knows as its size.
    if c.index + 1 < min_size {
        return Err(StateError::Stale {
            have: c.index + 1,
            want: min_size,
        });
    }
    let state_root = ledger::hash::from_hex(&e.state_root)
        .ok_or_else(|| bad("the state root is not a hash".into()))?;
    let view = match (&resp.class, &resp.class_proof, &resp.neighbours) {
        (Some(class), Some(proof), None) => {
            if class.task_class != resp.task_class {
                return Err(StateError::Incomplete(resp.task_class.clone()));
            }
            if proof.count != e.task_classes {
                return Err(CommitError::NotCommitted(format!(
                    "proven in a tree of {} classes; {} were committed",
                    proof.count, e.task_classes
                ))
                .into());
            }
            commit::check_class(&state_root, class, &resp.cases, proof)?;
            let served = resp
                .view
                .as_ref()
                .ok_or_else(|| StateError::Incomplete(resp.task_class.clone()))?;
            // Before any arithmetic on them: the settings must be the
            // agreed ones, and the time the caller's (and no earlier than the
            // commitment it describes).
            if served.settings != rules.settings {
                return Err(StateError::Settings {
                    stated: served.settings.clone(),
                    agreed: rules.settings.clone(),
                });
            }
            if served.now_micros.abs_diff(rules.now_micros) > rules.max_skew_micros.unsigned_abs()
                || served.now_micros < committed_at
            {
                return Err(StateError::Time {
                    stated: served.now_micros,
                    now: rules.now_micros,
                });
            }
            let ours = commit::view(
                class,
                &resp.cases,
                c.index,
                served.now_micros,
                &served.settings,
            );
            if let Some(field) = commit::first_difference(&ours, served) {
                return Err(StateError::View(field));
            }
            Some(ours)
        }
        (None, None, Some(neighbours)) if resp.cases.is_empty() && resp.view.is_none() => {
            commit::check_absent(&state_root, e.task_classes, &resp.task_class, neighbours)?;
            None
        }
        _ => return Err(StateError::Incomplete(resp.task_class.clone())),
    };
    Ok(VerifiedState {
        task_class: resp.task_class.clone(),
        committed_size: c.index,
        tree_size: cp.size,
        state_root: e.state_root.clone(),
        view,
        witnessed_by,
    })
}
