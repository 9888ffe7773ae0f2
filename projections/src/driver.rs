//! The edge: read entries from the log, fold them, save and load projection
//! checkpoints, and append recommendations. Everything that does I/O for
//! projections is here; [`crate::fold`] stays pure.

use ed25519_dalek::SigningKey;
use ledger::events::model::{
    CheckpointRef, EvidenceRef, Payload, PromotionRecommended, SCHEMA_VERSION,
};
use ledger::events::{envelope, Accepted, Event, EventLog, Rejection};
use ledger::{AppendError, Ledger, Receipt, Sequencer};

use crate::fold::{
    EachEntry, Entries, Projection, ProjectionError, Settings, TaskClassView, ViewCache,
};

/// A view reads back from the log, through its checked read, the scores
/// that leave its window.
impl<S: Sequencer> Entries for Ledger<S> {
    fn each_entry(
        &self,
        start: u64,
        end: u64,
        each: &mut EachEntry<'_>,
    ) -> Result<(), ProjectionError> {
        let entries = self
            .entries(start, end)
            .map_err(|e| ProjectionError::Read {
                index: start,
                reason: e.to_string(),
            })?;
        if entries.len() as u64 != end.saturating_sub(start) {
            return Err(ProjectionError::Read {
                index: start + entries.len() as u64,
                reason: format!("the log holds {} entries", self.head().size),
            });
        }
        for e in &entries {
            each(e.index, &e.leaf)?;
        }
        Ok(())
    }
}

/// The `aux` name projection checkpoints are saved under. The version moves
/// when the projection's saved form changes; an older checkpoint is then
/// simply not found, and the projection is rebuilt from the log once.
pub const AUX_KEY: &str = "projection/v4";
/// Entries read per batch while catching up.
const CHUNK: u64 = 4096;

#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error(transparent)]
    Ledger(#[from] ledger::Error),
    #[error(transparent)]
    Projection(#[from] ProjectionError),
    #[error("refused: {0}")]
    Rejected(Rejection),
    #[error("not a promotion.requested envelope")]
    NotARequest,
}

impl From<AppendError<Rejection>> for DriverError {
    fn from(e: AppendError<Rejection>) -> Self {
        match e {
            AppendError::Rejected { reason, .. } => DriverError::Rejected(reason),
            AppendError::Ledger(e) => DriverError::Ledger(e),
        }
    }
}

/// A projection kept in step with a log.
#[derive(Debug, Clone)]
pub struct Projector {
    projection: Projection,
    pub settings: Settings,
    /// Running window totals for [`Projector::view_at_head`].
    cache: ViewCache,
}

impl Projector {
    /// Starts from the saved checkpoint when the log's root at its size
    /// matches (otherwise from empty), then catches up to the head.
    pub fn open<S: Sequencer>(
        log: &Ledger<S>,
        settings: Settings,
    ) -> Result<Projector, DriverError> {
        let mut projection = Projection::default();
        if let Some(saved) = log.get_aux(AUX_KEY)? {
            match decode_checkpoint(&saved) {
                Some((size, root, p))
                    if size <= log.head().size
                        && log.root_at(size)? == root
                        && p.size() == size
                        && p.root() == root =>
                {
                    tracing::info!(size, "projection resumed from its checkpoint");
                    projection = p;
                }
                _ => tracing::warn!(
                    "saved projection does not match the log; rebuilding from the start"
                ),
            }
        }
        let mut p = Projector {
            projection,
            settings,
            cache: ViewCache::default(),
        };
        p.catch_up(log)?;
        Ok(p)
    }

    /// The settings views are computed with.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// A projector that has folded nothing (for a log that cannot be read).
    pub fn empty(settings: Settings) -> Projector {
        Projector {
            projection: Projection::default(),
            settings,
            cache: ViewCache::default(),
        }
    }

    /// A projector folded from the first entry, ignoring any checkpoint.
    pub fn rebuild<S: Sequencer>(
        log: &Ledger<S>,
        settings: Settings,
    ) -> Result<Projector, DriverError> {
        let mut p = Projector {
            projection: Projection::default(),
            settings,
            cache: ViewCache::default(),
        };
        p.catch_up(log)?;
        Ok(p)
    }

    /// Folds every committed entry not yet folded; returns how many.
    pub fn catch_up<S: Sequencer>(&mut self, log: &Ledger<S>) -> Result<u64, DriverError> {
        let head = log.head().size;
        let start = self.projection.size();
        let mut at = start;
        while at < head {
            let end = head.min(at + CHUNK);
            for e in log.entries(at, end)? {
                self.projection.apply(e.index, &e.leaf)?;
            }
            at = end;
        }
        Ok(head - start)
    }

    /// Saves the projection with the size and root it reflects.
    pub fn save<S: Sequencer>(&self, log: &Ledger<S>) -> Result<(), DriverError> {
        let mut out = self.projection.size().to_be_bytes().to_vec();
        out.extend_from_slice(&self.projection.root().0);
        out.extend_from_slice(&self.projection.to_bytes());
        log.put_aux(AUX_KEY, &out)?;
        Ok(())
    }

    pub fn projection(&self) -> &Projection {
        &self.projection
    }

    /// The view of `task_class` at the log's current head, after catching
    /// up. Incremental: it folds only the scores that entered or left the
    /// window since the last view of that class ([`Projection::view_cached`]).
    pub fn view_at_head<S: Sequencer>(
        &mut self,
        log: &Ledger<S>,
        task_class: &str,
        now: i64,
    ) -> Result<TaskClassView, DriverError> {
        self.catch_up(log)?;
        let head = log.head();
        Ok(self.projection.view_cached(
            &mut self.cache,
            log,
            task_class,
            now,
            &self.settings,
            head.size,
            &head.root,
        )?)
    }
}

fn decode_checkpoint(b: &[u8]) -> Option<(u64, ledger::Hash, Projection)> {
    if b.len() < 40 {
        return None;
    }
    let size = u64::from_be_bytes(b[..8].try_into().ok()?);
    let root = ledger::Hash(b[8..40].try_into().ok()?);
    Some((size, root, Projection::from_bytes(&b[40..])?))
}

/// A recommendation appended to the log, with the view it was computed from.
#[derive(Debug, Clone)]
pub struct Recommended {
    pub view: TaskClassView,
    pub receipt: Receipt<Accepted>,
}

/// Handles a promotion gate's request: appends the signed
/// `promotion.requested` envelope, computes the recommendation at the head,
/// and appends it as `promotion.recommended`, signed by `ledger_key`. A
/// re-posted request returns the recommendation already made for it.
pub fn recommend(
    events: &EventLog,
    projector: &mut Projector,
    ledger_key: &SigningKey,
    request: &[u8],
    now: i64,
) -> Result<Recommended, DriverError> {
    let decoded = envelope::decode_envelope(request).map_err(DriverError::Rejected)?;
    let Event::PromotionRequested(req) = &decoded.payload.event else {
        return Err(DriverError::NotARequest);
    };
    let rec_id = format!(
        "recommendation-{}",
        &blake3::hash(decoded.payload.id.as_bytes()).to_hex()[..32]
    );
    let asked = events.append(request)?;
    if asked.existing {
        if let Some(index) = events.find_id(&rec_id) {
            let entry = events.ledger().entry(index)?;
            let (d, at) = envelope::decode_leaf(&entry.leaf).map_err(DriverError::Rejected)?;
            if let Event::PromotionRecommended(r) = &d.payload.event {
                let size = r.checkpoint.size;
                let root = events.ledger().root_at(size)?;
                let past =
                    Projector::rebuild_to(events.ledger(), projector.settings.clone(), size)?;
                let view = past.projection.view(
                    events.ledger(),
                    &req.task_class,
                    at,
                    &past.settings,
                    size,
                    &root,
                )?;
                let head = events.ledger().head();
                return Ok(Recommended {
                    view,
                    receipt: Receipt {
                        appended: ledger::Appended {
                            index,
                            leaf_hash: entry.leaf_hash,
                            chain_hash: entry.chain_hash,
                            tree_size: head.size,
                            root: head.root,
                        },
                        accepted: Accepted {
                            id: rec_id,
                            kind: ledger::events::Kind::PromotionRecommended,
                            sequenced_at: at,
                        },
                        existing: true,
                    },
                });
            }
        }
    }
    let view = projector.view_at_head(events.ledger(), &req.task_class, now)?;
    let payload = Payload {
        schema: SCHEMA_VERSION,
        id: rec_id,
        signer: envelope::key_id(&ledger_key.verifying_key()),
        issued_at: envelope::format_micros(now),
        event: Event::PromotionRecommended(PromotionRecommended {
            task_class: req.task_class.clone(),
            current_tier: view.recommendation.current_tier,
            recommended_tier: view.recommendation.recommended_tier,
            evidence: view
                .evidence
                .iter()
                .map(|e| EvidenceRef {
                    index: e.index,
                    leaf_hash: e.leaf_hash.clone(),
                })
                .collect(),
            rationale: view.recommendation.rationale.clone(),
            checkpoint: CheckpointRef {
                size: view.tree_size,
                root: view.root.clone(),
            },
            requires_human_approval: true,
            request_id: decoded.payload.id.clone(),
        }),
    };
    let receipt = events.append(&envelope::sign_envelope(ledger_key, &payload))?;
    Ok(Recommended { view, receipt })
}

impl Projector {
    /// A projector folded from the first entry up to `size`.
    fn rebuild_to<S: Sequencer>(
        log: &Ledger<S>,
        settings: Settings,
        size: u64,
    ) -> Result<Projector, DriverError> {
        let mut p = Projector {
            projection: Projection::default(),
            settings,
            cache: ViewCache::default(),
        };
        let mut at = 0;
        while at < size {
            let end = size.min(at + CHUNK);
            for e in log.entries(at, end)? {
                p.projection.apply(e.index, &e.leaf)?;
            }
            at = end;
        }
        Ok(p)
    }
}
