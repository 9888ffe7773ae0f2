//! `ledger audit`: check a server trusting nothing but the log's verifier key
//! and a checkpoint saved by an earlier audit.
//!
//! 1. The latest checkpoint is signed by a trusted key.
//! 2. It is not older than the trusted checkpoint, and an RFC 6962
//!    consistency proof shows the trusted tree is a prefix of it.
//! 3. N random entries: their raw leaves re-hash to the leaf hash, and an
//!    inclusion proof leads to the checkpoint's root.
//! 4. Every task-class projection: its proof bundle verifies, and the
//!    checkpoint it was computed at is consistent with the audited one.
//!
//! On success the caller saves the new checkpoint as the next trusted one.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ledger::merkle::{verify_consistency, verify_inclusion};
use ledger::Hash;
use serde::Deserialize as _;

use crate::check::{check_projection, parse_proof};
use crate::client::Client;
use crate::wire::{
    ConsistencyProof, EntryView, InclusionProof, ProjectionResponse, TaskClassSummary,
};

/// How the server lied (or failed to prove it did not).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AuditFailure {
    #[error("checkpoint not signed by a trusted key: {0}")]
    BadSignature(String),
    #[error(
        "stale checkpoint: the server shows size {served}, older than the trusted size {trusted}"
    )]
    Stale { trusted: u64, served: u64 },
    #[error("inconsistent checkpoint: {0}")]
    Inconsistent(String),
    #[error("entry {index}: {reason}")]
    BadEntry { index: u64, reason: String },
    #[error("projection `{task_class}`: {reason}")]
    BadProjection { task_class: String, reason: String },
    /// The projection is not the one the whole log gives: the server left
    /// something out, or counted something it should not have.
    #[error("projection `{task_class}` does not follow from the whole log: {reason}")]
    Incomplete { task_class: String, reason: String },
    /// The log the server serves does not extend the replica's.
    #[error("the server's log does not extend the replica's: {0}")]
    Diverged(String),
}

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error(transparent)]
    Failed(#[from] AuditFailure),
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

/// What a successful audit established.
#[derive(Debug, Clone)]
pub struct AuditReport {
    pub size: u64,
    pub root: Hash,
    /// The audited checkpoint's origin (the log's name).
    pub origin: String,
    /// The signed note to save as the next trusted checkpoint.
    pub checkpoint: String,
    pub previous_size: Option<u64>,
    pub entries_checked: usize,
    pub projections_checked: usize,
    pub evidence_checked: usize,
}

fn open(note: &[u8], keys: &[String]) -> Result<anchors::VerifiedCheckpoint, AuditFailure> {
    anchors::open_checkpoint_any(note, keys)
        .map(|(cp, _)| cp)
        .map_err(|e| AuditFailure::BadSignature(e.to_string()))
}

/// Proves that (old_size, old_root) is a prefix of (new_size, new_root) with
/// a proof fetched from the server and verified here.
fn consistent(client: &Client, old: (u64, Hash), new: (u64, Hash)) -> Result<(), AuditError> {
    if old.0 == new.0 {
        return if old.1 == new.1 {
            Ok(())
        } else {
            Err(
                AuditFailure::Inconsistent(format!("two different roots for size {}", old.0))
                    .into(),
            )
        };
    }
    let ((s1, r1), (s2, r2)) = if old.0 < new.0 {
        (old, new)
    } else {
        (new, old)
    };
    let r = client.get(&format!("/v1/proofs/consistency?first={s1}&second={s2}"))?;
    if r.status != 200 {
        return Err(AuditFailure::Inconsistent(format!(
            "the server gives no consistency proof {s1} -> {s2}: {}",
            r.text()
        ))
        .into());
    }
    let p: ConsistencyProof = r.json()?;
    verify_consistency(s1, &r1, s2, &r2, &parse_proof("proof", &p.proof)?)
        .map_err(|e| AuditFailure::Inconsistent(format!("size {s1} -> {s2}: {e}")))?;
    Ok(())
}

/// The served tree at an audited checkpoint, for [`anchors::check_anchors`]:
/// its size and root are the checkpoint's (verified), and each consistency
/// proof is fetched from the server and checked by the caller against
/// them, so the server is trusted for nothing.
pub struct ServedLog<'a> {
    pub client: &'a Client,
    pub size: u64,
    pub root: Hash,
}

impl anchors::LogAccess for ServedLog<'_> {
    fn size(&self) -> u64 {
        self.size
    }
    fn root(&self) -> Hash {
        self.root
    }
    fn consistency_proof(&self, old: u64, new: u64) -> Result<Vec<Hash>, String> {
        let r = self
            .client
            .get(&format!("/v1/proofs/consistency?first={old}&second={new}"))
            .map_err(|e| e.to_string())?;
        if r.status != 200 {
            return Err(format!(
                "the server gives no consistency proof: {}",
                r.text()
            ));
        }
        let p: ConsistencyProof = r.json().map_err(|e| e.to_string())?;
        parse_proof("proof", &p.proof).map_err(|e| e.to_string())
    }
}

/// Runs the audit. `trusted` is the signed note saved by the last audit.
pub fn audit(
    client: &Client,
    keys: &[String],
    trusted: Option<&[u8]>,
    samples: usize,
    seed: u64,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<AuditReport, AuditError> {
    let note = client.get("/checkpoint")?;
    if note.status != 200 {
        return Err(anyhow::anyhow!("GET /checkpoint: status {}", note.status).into());
    }
    let cp = open(&note.body, keys)?;
    let mut previous_size = None;
    if let Some(t) = trusted {
        let old = open(t, keys)
            .map_err(|e| AuditFailure::BadSignature(format!("the trusted checkpoint: {e}")))?;
        if cp.size < old.size {
            return Err(AuditFailure::Stale {
                trusted: old.size,
                served: cp.size,
            }
            .into());
        }
        consistent(client, (old.size, old.root), (cp.size, cp.root))?;
        previous_size = Some(old.size);
    }

    let mut rng = projections::stats::SplitMix64::new(seed);
    let n = if cp.size == 0 {
        0
    } else {
        samples.min(cp.size as usize)
    };
    for k in 0..n {
        let index = rng.below(cp.size as usize) as u64;
        progress("spot-checking entries", k as u64, n as u64);
        let bad = |reason: String| AuditFailure::BadEntry { index, reason };
        let e: EntryView = client.get_json(&format!("/v1/entries/{index}"))?;
        let leaf = B64
            .decode(&e.leaf)
            .map_err(|_| bad("leaf is not base64".into()))?;
        let lh = ledger::leaf_hash(&leaf);
        if ledger::hash::to_hex(&lh) != e.leaf_hash {
            return Err(bad("the raw leaf does not hash to the leaf hash served".into()).into());
        }
        let r = client.get(&format!(
            "/v1/proofs/inclusion?index={index}&tree_size={}",
            cp.size
        ))?;
        if r.status != 200 {
            return Err(bad(format!("no inclusion proof: {}", r.text())).into());
        }
        let p: InclusionProof = r.json()?;
        verify_inclusion(
            &lh,
            index,
            cp.size,
            &parse_proof("proof", &p.proof)?,
            &cp.root,
        )
        .map_err(|e| bad(format!("inclusion proof: {e}")))?;
    }
    progress("spot-checking entries", n as u64, n as u64);

    let classes = task_classes(client)?;
    let mut evidence = 0;
    for (k, c) in classes.iter().enumerate() {
        progress("checking projections", k as u64, classes.len() as u64);
        let bad = |reason: String| AuditFailure::BadProjection {
            task_class: c.task_class.clone(),
            reason,
        };
        let r = client.get(&format!("/v1/task-classes/{}", c.task_class))?;
        if r.status != 200 {
            return Err(bad(format!("status {}: {}", r.status, r.text())).into());
        }
        let p: ProjectionResponse = r.json()?;
        if p.view.task_class != c.task_class {
            return Err(bad(format!(
                "asked for `{}`, answered with `{}`",
                c.task_class, p.view.task_class
            ))
            .into());
        }
        let (pcp, key) = anchors::open_checkpoint_any(p.checkpoint.as_bytes(), keys)
            .map_err(|e| bad(format!("checkpoint signature: {e}")))?;
        evidence += check_projection(&p, key).map_err(|e| bad(format!("{e:#}")))?;
        consistent(client, (cp.size, cp.root), (pcp.size, pcp.root)).map_err(|e| match e {
            AuditError::Failed(f) => AuditError::Failed(bad(format!(
                "computed at a checkpoint inconsistent with the log: {f}"
            ))),
            other => other,
        })?;
    }
    progress(
        "checking projections",
        classes.len() as u64,
        classes.len() as u64,
    );
    Ok(AuditReport {
        size: cp.size,
        root: cp.root,
        origin: cp.origin.clone(),
        checkpoint: note.text(),
        previous_size,
        entries_checked: n,
        projections_checked: classes.len(),
        evidence_checked: evidence,
    })
}

/// The server's list of task classes; a server that withholds it fails.
fn task_classes(client: &Client) -> Result<Vec<TaskClassSummary>, AuditError> {
    let reply = client.get("/v1/task-classes")?;
    if reply.status != 200 {
        return Err(AuditFailure::BadProjection {
            task_class: "*".into(),
            reason: format!("the server withholds projections: {}", reply.text()),
        }
        .into());
    }
    Ok(reply.json()?)
}

/// What a replay holds the server to, besides the log itself.
#[derive(Debug, Clone)]
pub struct ReplayRules {
    /// The audited checkpoint (size, root): the replica follows it first,
    /// and every answer must be at least that new.
    pub audited: (u64, Hash),
    /// The audited checkpoint's origin: the log's name, which a Sigstore
    /// trusted root the log records must name.
    pub origin: String,
    /// The settings every projection must state (the agreed window,
    /// confidence and resamples).
    pub settings: projections::Settings,
    /// The local time, µs since the Unix epoch, UTC.
    pub now_micros: i64,
    /// How far a projection's stated time may be from `now_micros`.
    pub max_skew_micros: i64,
}

/// Checks every task class's projection for completeness by replay
/// ([`crate::replay`]). The replica first follows the audited checkpoint,
/// then each answer's signed checkpoint (every new entry re-hashed, chained
/// and proven a prefix of the signed tree), folds the new entries, and its
/// own view at the answer's size must equal the served one bit for bit.
/// An answer must also be no older than the audited checkpoint, state the
/// agreed settings and a time within the allowed skew of the local clock and
/// no earlier than its last entry; its evidence and statistics are checked
/// as the audit checks them; and every task class the log has registered
/// must be listed. The replica is saved only when every class passes.
pub fn audit_projections(
    client: &Client,
    keys: &[String],
    rules: &ReplayRules,
    replica: &mut crate::replay::Replica,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<crate::replay::Replayed, AuditError> {
    let start = replica.size();
    replica.check_recommendations_with(&rules.settings);
    let follow = |replica: &mut crate::replay::Replica, size: u64, root: &Hash| {
        let held = replica.size();
        if size < held {
            return Err(AuditError::Failed(AuditFailure::Stale {
                trusted: held,
                served: size,
            }));
        }
        replica
            .follow(client, &rules.origin, size, root, &mut |_, _| {})
            .map_err(|e| match e {
                crate::CheckError::Disproved(m) => AuditError::Failed(AuditFailure::Diverged(m)),
                crate::CheckError::Other(e) => AuditError::Other(e),
            })
    };
    let (audited_size, audited_root) = rules.audited;
    follow(replica, audited_size, &audited_root)?;
    let classes = task_classes(client)?;
    let mut answers = Vec::with_capacity(classes.len());
    for c in &classes {
        let bad = |reason: String| AuditFailure::BadProjection {
            task_class: c.task_class.clone(),
            reason,
        };
        let r = client.get(&format!("/v1/task-classes/{}", c.task_class))?;
        if r.status != 200 {
            return Err(bad(format!("status {}: {}", r.status, r.text())).into());
        }
        // Parsed once: the typed answer, and the view exactly as served
        // (every key of it) for the comparison.
        let mut raw: serde_json::Value = r.json()?;
        let p = ProjectionResponse::deserialize(&raw)
            .map_err(|e| bad(format!("not a projection answer: {e}")))?;
        let served = raw["view"].take();
        if p.view.task_class != c.task_class {
            return Err(bad(format!("answered with `{}`", p.view.task_class)).into());
        }
        let (cp, key) = anchors::open_checkpoint_any(p.checkpoint.as_bytes(), keys)
            .map_err(|e| bad(format!("checkpoint signature: {e}")))?;
        if cp.origin != rules.origin {
            return Err(bad(format!(
                "its checkpoint is of the log {:?}, not the audited {:?}",
                cp.origin, rules.origin
            ))
            .into());
        }
        if cp.size < audited_size {
            // An answer older than the checkpoint audited is stale, as a
            // checkpoint older than the trusted one is.
            return Err(AuditFailure::Stale {
                trusted: audited_size,
                served: cp.size,
            }
            .into());
        }
        if p.view.settings != rules.settings {
            return Err(bad(format!(
                "stated settings {:?} are not the agreed {:?}",
                p.view.settings, rules.settings
            ))
            .into());
        }
        if (p.view.now_micros - rules.now_micros).abs() > rules.max_skew_micros {
            return Err(bad(format!(
                "stated time {} µs is more than {} s from this machine's clock",
                p.view.now_micros,
                rules.max_skew_micros / 1_000_000
            ))
            .into());
        }
        check_projection(&p, key).map_err(|e| bad(format!("{e:#}")))?;
        answers.push((cp, p, served));
    }
    // The replica only grows: take the answers in the order of their sizes.
    answers.sort_by_key(|(cp, _, _)| cp.size);
    for (k, (cp, p, served)) in answers.iter().enumerate() {
        progress("replaying the log", k as u64, answers.len() as u64);
        follow(replica, cp.size, &cp.root)?;
        let incomplete = |reason: String| AuditFailure::Incomplete {
            task_class: p.view.task_class.clone(),
            reason,
        };
        if let Some(last) = replica.last_sequenced_at().map_err(AuditError::Other)? {
            if p.view.now_micros < last {
                return Err(incomplete(format!(
                    "stated time {} µs is before its last entry was sequenced ({last} µs)",
                    p.view.now_micros
                ))
                .into());
            }
        }
        let replayed = replica
            .view(&p.view.task_class, p.view.now_micros, &p.view.settings)
            .map_err(|e| AuditError::Other(anyhow::anyhow!("{e}")))?;
        if let Some(path) = crate::replay::first_difference(served, &replayed) {
            return Err(incomplete(format!(
                "`{path}` is not what the log up to size {} gives",
                cp.size
            ))
            .into());
        }
    }
    // A task class left off the list would never be compared: every class
    // the log has registered, up to the replica's size, must be listed now.
    let now_listed: std::collections::BTreeSet<String> = task_classes(client)?
        .into_iter()
        .map(|c| c.task_class)
        .collect();
    if let Some(hidden) = replica
        .task_classes()
        .into_iter()
        .find(|tc| !now_listed.contains(tc))
    {
        return Err(AuditFailure::Incomplete {
            task_class: hidden,
            reason: "registered in the log but left off the list of task classes".into(),
        }
        .into());
    }
    progress(
        "replaying the log",
        answers.len() as u64,
        answers.len() as u64,
    );
    replica.save()?;
    Ok(crate::replay::Replayed {
        size: replica.size(),
        followed: replica.size() - start,
        task_classes: answers.len(),
        recommendations: replica.recommendations_checked().unwrap_or(0),
    })
}
