//! The edge: read entries from the log, fold them, save and load projection
//! checkpoints, and append recommendations. Everything that does I/O for
//! projections is here; [`crate::fold`] stays pure.

use ed25519_dalek::SigningKey;
use events::model::{
    CheckpointRef, EvidenceRef, EvidenceTree, Payload, PromotionRecommended, StateCommitted,
    ViewSettings,
};
use events::{envelope, Accepted, Event, EventLog, Rejection};
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
pub const AUX_KEY: &str = "projection/v6";
/// The first bytes of a sealed projection checkpoint ([`ledger::sealed`]).
const MAGIC: &[u8; 8] = b"ELPROJ06";
/// Entries read per batch while catching up.
const CHUNK: u64 = 4096;

/// The key that seals projection checkpoints, derived from the ledger's
/// signing key (so a checkpoint edited without the key is refused).
pub fn seal_key(ledger_key: &SigningKey) -> [u8; 32] {
    ledger::sealed::derive_key(
        "evidence-ledger/v1 projection checkpoint mac",
        ledger_key.as_bytes(),
    )
}

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
    /// Derived state disagrees with the log it was derived from.
    #[error(transparent)]
    Mismatch(#[from] DerivedMismatch),
    /// Writes kept landing first: no state commitment could be appended at
    /// the head. Retry later.
    #[error("the log kept moving: no state commitment could be appended at its head")]
    Busy,
}

/// Derived state that does not match the log: bit rot in the data file, a
/// bug, or someone editing it. Never answered with numbers: the state is
/// rebuilt from the log, and the mismatch is reported (a metric, an alert,
/// ops/runbooks/derived-state-mismatch.md).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DerivedMismatch {
    /// The saved projection checkpoint was refused: its seal does not
    /// verify, it names a root the log does not have, or it does not decode.
    #[error("the saved projection checkpoint was refused: {0}")]
    Checkpoint(String),
    /// The saved projection, caught up to the head, answers differently from
    /// a projection rebuilt from the log.
    #[error("the saved projection disagrees with the log at size {size}: {what}")]
    Disagrees { size: u64, what: String },
    /// The numbers about to be signed or served do not follow from the
    /// evidence they cite, read back from the log, or (before a
    /// recommendation is signed) from the per-case state.
    #[error("the view of `{task_class}` does not follow from its evidence: {what}")]
    Evidence { task_class: String, what: String },
}

impl From<AppendError<Rejection>> for DriverError {
    fn from(e: AppendError<Rejection>) -> Self {
        match e {
            AppendError::Rejected { reason, .. } => DriverError::Rejected(reason),
            AppendError::Ledger(e) => DriverError::Ledger(e),
        }
    }
}

/// The index of the `state.committed` entry that commits `p`'s state, if
/// the log has one where a checkpoint saved at a commitment sits: at `p`'s
/// size (a commitment of the log `p` folded), or just before it (one `p`
/// folded; a commitment changes no projection state). `Ok(None)` when
/// neither entry is such a commitment; `Err` when one is and commits
/// another state (the checkpoint is then refused).
fn committed_at<S: Sequencer>(log: &Ledger<S>, p: &Projection) -> Result<Option<u64>, String> {
    let size = p.size();
    let head = log.head().size;
    let candidates = [Some(size), size.checked_sub(1)];
    for index in candidates.into_iter().flatten() {
        if index >= head {
            continue;
        }
        let entry = log.entry(index).map_err(|e| e.to_string())?;
        let Ok((d, _)) = envelope::decode_leaf(&entry.leaf) else {
            continue;
        };
        let Event::StateCommitted(c) = &d.payload.event else {
            continue;
        };
        if c.checkpoint.size != index {
            continue;
        }
        let state = p.state();
        let root = ledger::hash::to_hex(&state.root());
        if root != c.state_root || state.classes.len() as u64 != c.task_classes {
            return Err(format!(
                "its state is not the one the log commits at {index} (state root {root}, committed {})",
                c.state_root
            ));
        }
        return Ok(Some(index));
    }
    Ok(None)
}

/// What [`Projector::open`] did with the saved checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub enum Resumed {
    /// None was saved (or it was saved in an older form, or under another
    /// key).
    Nothing,
    /// It checked out, and the projection resumed from it at this size.
    At(u64),
    /// It checked out, its state is the one the `state.committed` entry at
    /// `index` commits (the entry at the checkpoint's size, or the one just
    /// before it), and the projection resumed from it at `size`.
    Committed { size: u64, index: u64 },
    /// It was refused; the projection was rebuilt from the first entry.
    Refused(DerivedMismatch),
}

/// A projection kept in step with a log.
#[derive(Debug, Clone)]
pub struct Projector {
    projection: Projection,
    pub settings: Settings,
    /// Running window totals for [`Projector::view_at_head`].
    cache: ViewCache,
    /// The views of the newest recommendations, by recommendation id: a
    /// re-posted request (a gate's retry) is answered from here rather
    /// than by folding the log again up to the recommendation's checkpoint.
    answered: std::collections::VecDeque<(String, TaskClassView)>,
}

/// How many recommendations' views [`Projector`] keeps for re-posts.
const ANSWERED_KEPT: usize = 64;

impl Projector {
    /// Starts from the saved checkpoint when its seal verifies under `key`
    /// and the log's root at its size is the one sealed with it (otherwise
    /// from empty), then catches up to the head. A checkpoint is only a
    /// starting point: [`Projector::confirm`] checks it against a rebuild
    /// from the log before its numbers may be used.
    pub fn open<S: Sequencer>(
        log: &Ledger<S>,
        settings: Settings,
        key: &[u8; 32],
    ) -> Result<(Projector, Resumed), DriverError> {
        let (mut p, resumed) = Projector::resume(log, settings, key)?;
        p.catch_up(log)?;
        Ok((p, resumed))
    }

    /// [`Projector::open`] without the catch-up: the projector stands at the
    /// saved checkpoint (or at nothing), so that its caller folds what
    /// follows as it chooses (a replica checks recommendations on the way).
    pub fn resume<S: Sequencer>(
        log: &Ledger<S>,
        settings: Settings,
        key: &[u8; 32],
    ) -> Result<(Projector, Resumed), DriverError> {
        let mut projection = Projection::default();
        let mut resumed = Resumed::Nothing;
        if let Some(saved) = log.get_aux(AUX_KEY)? {
            let opened = ledger::sealed::open(key, MAGIC, &saved, log.head().size, |size| {
                log.root_at(size)
            })?;
            if opened == Err(ledger::sealed::SealError::OtherKey) {
                tracing::info!(
                    "the saved projection checkpoint was sealed under another key; rebuilding it"
                );
                return Ok((Projector::empty(settings), Resumed::Nothing));
            }
            let loaded = opened.map_err(|e| e.to_string()).and_then(|o| {
                Projection::from_bytes(o.body)
                    .filter(|p| p.size() == o.size)
                    .ok_or_else(|| "its body does not decode to a projection of its size".into())
            });
            let loaded = loaded.and_then(|p| match committed_at(log, &p) {
                Ok(c) => Ok((p, c)),
                Err(why) => Err(why),
            });
            match loaded {
                Ok((p, committed)) => {
                    resumed = match committed {
                        Some(index) => Resumed::Committed {
                            size: p.size(),
                            index,
                        },
                        None => Resumed::At(p.size()),
                    };
                    tracing::info!(size = p.size(), commitment = ?committed, "projection resumed from its checkpoint");
                    projection = p;
                }
                Err(why) => {
                    let m = DerivedMismatch::Checkpoint(why);
                    tracing::error!(error = %m, "rebuilding the projection from the start");
                    resumed = Resumed::Refused(m);
                }
            }
        }
        let p = Projector {
            projection,
            settings,
            cache: ViewCache::default(),
            answered: Default::default(),
        };
        Ok((p, resumed))
    }

    /// The settings views are computed with.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Computes views with `settings` from now on. The bootstrap intervals
    /// remembered from earlier views are dropped when they change (the
    /// window sums do not depend on the settings).
    pub fn set_settings(&mut self, settings: &Settings) {
        if self.settings != *settings {
            self.settings = settings.clone();
            self.cache = ViewCache::default();
        }
    }

    /// A projector that has folded nothing (for a log that cannot be read).
    pub fn empty(settings: Settings) -> Projector {
        Projector {
            projection: Projection::default(),
            settings,
            cache: ViewCache::default(),
            answered: Default::default(),
        }
    }

    /// A projector folded from the first entry, ignoring any checkpoint.
    pub fn rebuild<S: Sequencer>(
        log: &Ledger<S>,
        settings: Settings,
    ) -> Result<Projector, DriverError> {
        Projector::rebuild_to(log, settings, log.head().size)
    }

    /// Folds every committed entry not yet folded; returns how many.
    pub fn catch_up<S: Sequencer>(&mut self, log: &Ledger<S>) -> Result<u64, DriverError> {
        let head = log.head().size;
        let start = self.projection.size();
        self.fold_to(log, head)?;
        Ok(head - start)
    }

    /// Folds the entries from the projection's size up to `size`.
    fn fold_to<S: Sequencer>(&mut self, log: &Ledger<S>, size: u64) -> Result<(), DriverError> {
        let mut at = self.projection.size();
        while at < size {
            let end = size.min(at + CHUNK);
            for e in log.entries(at, end)? {
                self.projection.apply(e.index, &e.leaf)?;
            }
            at = end;
        }
        Ok(())
    }

    /// Checks a `promotion.recommended` signed into `log` at `index` against
    /// this projector's own view: the projector is folded up to the
    /// checkpoint the recommendation names (a projector already past it is
    /// not rewound: one is folded from the first entry to it instead) and
    /// its view of the class there, at the time the recommendation was
    /// issued and with this projector's settings, must give the same
    /// current tier, recommended tier, rationale and evidence (the tree
    /// over the view's references, or the list of an entry without a tree).
    /// The view is computed with the settings the recommendation states
    /// (this projector's, for an entry that states none). That time must
    /// lie between the sequencing times of the last entry
    /// the recommendation rests on and of the recommendation itself
    /// (`sequenced_at_micros`): it decides where the window starts.
    /// A difference is [`DerivedMismatch::Evidence`], naming the entry and
    /// the part. Returns the view.
    pub fn check_recommendation<S: Sequencer>(
        &mut self,
        log: &Ledger<S>,
        index: u64,
        r: &PromotionRecommended,
        issued_at: &str,
        sequenced_at_micros: i64,
    ) -> Result<TaskClassView, DriverError> {
        let size = r.checkpoint.size;
        let differs = |what: String| {
            DriverError::Mismatch(DerivedMismatch::Evidence {
                task_class: r.task_class.clone(),
                what: format!(
                    "the recommendation at entry {index}: {what}, not what the log up to size {size} gives"
                ),
            })
        };
        if size > index {
            return Err(differs(format!("its checkpoint {size} is past it")));
        }
        let now = envelope::parse_utc_micros(issued_at)
            .ok_or_else(|| differs(format!("its time `{issued_at}` does not parse")))?;
        // Its time decides the window: no later than it was itself
        // sequenced, and no earlier than the last entry it rests on.
        if now > sequenced_at_micros {
            return Err(differs(format!(
                "its time {issued_at} is after it was sequenced"
            )));
        }
        if size > 0 && now < sequenced_at(log, size - 1)? {
            return Err(differs(format!(
                "its time {issued_at} is before entry {} it rests on was sequenced",
                size - 1
            )));
        }
        let settings = match &r.settings {
            None => self.settings.clone(),
            Some(s) => match (s.out_of_range(), usize::try_from(s.resamples)) {
                (None, Ok(resamples)) => Settings {
                    window_seconds: s.window_seconds,
                    confidence: s.confidence,
                    resamples,
                },
                _ => return Err(differs("its settings are out of range".into())),
            },
        };
        let root = log.root_at(size)?;
        let view = if self.projection.size() <= size {
            self.fold_to(log, size)?;
            self.projection.view_cached(
                &mut self.cache,
                log,
                &r.task_class,
                now,
                &settings,
                size,
                &root,
            )
        } else {
            let past = Projector::rebuild_to(log, settings.clone(), size)?;
            past.projection
                .view(log, &r.task_class, now, &settings, size, &root)
        }
        .map_err(|e| differs(e.to_string()))?;
        let refs = evidence_refs(&view);
        let same_evidence = match &r.evidence_tree {
            Some(tree) => r.evidence.is_empty() && *tree == EvidenceTree::of(&refs),
            None => r.evidence == refs,
        };
        if r.current_tier != view.tier {
            return Err(differs("its current tier".into()));
        }
        if r.recommended_tier != view.recommendation.recommended_tier {
            return Err(differs("its recommended tier".into()));
        }
        if r.rationale != view.recommendation.rationale {
            return Err(differs("its rationale".into()));
        }
        if !same_evidence {
            return Err(differs("its evidence".into()));
        }
        Ok(view)
    }

    /// Checks this projector (resumed from a saved checkpoint) against
    /// `rebuilt`, a projector folded from the first entry: both are caught
    /// up to the head, and every task class must get the same answer at
    /// `now` from this one's running totals ([`Projection::view_cached`])
    /// as from the rebuilt fold re-reading its window from the log
    /// ([`Projection::view`]). A difference is
    /// [`DerivedMismatch::Disagrees`]. Either way, the caller should go on
    /// with `rebuilt`, which owes nothing to saved state.
    pub fn confirm<S: Sequencer>(
        &mut self,
        rebuilt: &mut Projector,
        log: &Ledger<S>,
        now: i64,
    ) -> Result<(), DriverError> {
        self.catch_up(log)?;
        rebuilt.fold_to(log, self.projection.size())?;
        let size = self.projection.size();
        let disagrees =
            |what: String| DriverError::Mismatch(DerivedMismatch::Disagrees { size, what });
        let ours: Vec<String> = self.projection.task_classes().map(str::to_owned).collect();
        let theirs: Vec<String> = rebuilt
            .projection
            .task_classes()
            .map(str::to_owned)
            .collect();
        if ours != theirs {
            return Err(disagrees(format!(
                "task classes {ours:?}, the log has {theirs:?}"
            )));
        }
        let root = log.root_at(size)?;
        for class in &ours {
            let mine = self.projection.view_cached(
                &mut self.cache,
                log,
                class,
                now,
                &self.settings,
                size,
                &root,
            )?;
            let truth = rebuilt
                .projection
                .view(log, class, now, &rebuilt.settings, size, &root)?;
            if mine != truth {
                return Err(disagrees(format!(
                    "task class `{class}` answers differently"
                )));
            }
        }
        Ok(())
    }

    /// Saves the projection, sealed with `key` and bound to the size and
    /// root it reflects. Returns the bytes written.
    pub fn save<S: Sequencer>(
        &self,
        log: &Ledger<S>,
        key: &[u8; 32],
    ) -> Result<usize, DriverError> {
        let size = self.projection.size();
        let root = self.projection.root();
        let sealed = self.projection.to_unsealed().seal(key, MAGIC, size, &root);
        log.put_aux(AUX_KEY, &sealed)?;
        Ok(sealed.len())
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
        self.view_here(log, task_class, now)
    }

    /// The view of `task_class` at the size this projector has folded (not
    /// caught up: a write landing meanwhile does not move it), with the
    /// log's own root at that size.
    pub fn view_here<S: Sequencer>(
        &mut self,
        log: &Ledger<S>,
        task_class: &str,
        now: i64,
    ) -> Result<TaskClassView, DriverError> {
        let size = self.projection.size();
        let root = log.root_at(size)?;
        Ok(self.projection.view_cached(
            &mut self.cache,
            log,
            task_class,
            now,
            &self.settings,
            size,
            &root,
        )?)
    }
}

/// When entry `index` of `log` was sequenced (µs, UTC).
fn sequenced_at<S: Sequencer>(log: &Ledger<S>, index: u64) -> Result<i64, DriverError> {
    let entry = log.entry(index)?;
    let (_, at) = envelope::decode_leaf(&entry.leaf).map_err(DriverError::Rejected)?;
    Ok(at)
}

/// A recommendation appended to the log, with the view it was computed from.
#[derive(Debug, Clone)]
pub struct Recommended {
    pub view: TaskClassView,
    /// The view's evidence, read back, checked ([`check_evidence`]) and
    /// proven at the view's size.
    pub evidence: Vec<Proven>,
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
    // The view includes the request, so it is stated as of no earlier than
    // the request's own sequencing time (a clock read before the append
    // would put the answer before the entry it answers).
    let now = now.max(asked.accepted.sequenced_at);
    if asked.existing {
        if let Some(index) = events.find_id(&rec_id)? {
            let entry = events.ledger().entry(index)?;
            let (d, at) = envelope::decode_leaf(&entry.leaf).map_err(DriverError::Rejected)?;
            if let Event::PromotionRecommended(r) = &d.payload.event {
                let kept = projector
                    .answered
                    .iter()
                    .find(|(id, v)| *id == rec_id && v.tree_size == r.checkpoint.size);
                let view = match kept {
                    Some((_, view)) => view.clone(),
                    // Not among the newest: folded again up to its
                    // checkpoint, which takes time in proportion to it,
                    // with the settings it states, and checked against it.
                    None => Projector::empty(projector.settings.clone()).check_recommendation(
                        events.ledger(),
                        index,
                        r,
                        &d.payload.issued_at,
                        at,
                    )?,
                };
                let evidence = check_evidence(events.ledger(), &view)?;
                let head = events.ledger().head();
                return Ok(Recommended {
                    view,
                    evidence,
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
                            kind: events::Kind::PromotionRecommended,
                            sequenced_at: at,
                        },
                        existing: true,
                    },
                });
            }
        }
    }
    // The view is stated as of no earlier than the last entry it rests on
    // (an auditor holds a recommendation's time to that bound, and to the
    // recommendation's own sequencing time above it).
    projector.catch_up(events.ledger())?;
    let size = projector.projection.size();
    let now = match size {
        0 => now,
        _ => now.max(sequenced_at(events.ledger(), size - 1)?),
    };
    let view = projector.view_here(events.ledger(), &req.task_class, now)?;
    // Before signing: the same answer from the per-case state rather than
    // the window sums it was answered from, and the held-out statistics
    // recomputed from the cited evidence leaves read back from the log.
    projector
        .projection
        .recheck(&projector.cache, &view)
        .map_err(|what| {
            DriverError::Mismatch(DerivedMismatch::Evidence {
                task_class: view.task_class.clone(),
                what,
            })
        })?;
    let evidence = check_evidence(events.ledger(), &view)?;
    let payload = Payload {
        schema: events.schema(),
        id: rec_id,
        signer: envelope::key_id(&ledger_key.verifying_key()),
        issued_at: envelope::format_micros(now),
        event: Event::PromotionRecommended(PromotionRecommended {
            task_class: req.task_class.clone(),
            current_tier: view.recommendation.current_tier,
            recommended_tier: view.recommendation.recommended_tier,
            evidence: Vec::new(),
            evidence_tree: Some(EvidenceTree::of(&evidence_refs(&view))),
            settings: Some(ViewSettings {
                window_seconds: view.settings.window_seconds,
                confidence: view.settings.confidence,
                resamples: view.settings.resamples as u64,
            }),
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
    if !receipt.existing {
        if projector.answered.len() >= ANSWERED_KEPT {
            projector.answered.pop_front();
        }
        projector
            .answered
            .push_back((receipt.accepted.id.clone(), view.clone()));
    }
    Ok(Recommended {
        view,
        evidence,
        receipt,
    })
}

/// The evidence references of `view`, in its order: what a recommendation
/// made from it cites ([`EvidenceTree`]).
pub fn evidence_refs(view: &TaskClassView) -> Vec<EvidenceRef> {
    view.evidence
        .iter()
        .map(|e| EvidenceRef {
            index: e.index,
            leaf_hash: e.leaf_hash.clone(),
        })
        .collect()
}

/// A state commitment in the log: the index of its `state.committed`
/// entry (also the size of the log it commits) and the state it commits.
#[derive(Debug, Clone)]
pub struct Committed {
    pub index: u64,
    pub state: crate::commit::State,
}

/// How many times [`commit_state`] tries to land a commitment at the head
/// before it reports [`DriverError::Busy`].
const COMMIT_ATTEMPTS: usize = 8;

/// The newest state commitment, appending one when the log's last entry is
/// not already a commitment of everything before it: the projection is
/// caught up to the head, its state committed ([`Projection::state`]) and a
/// `state.committed` event signed with `ledger_key` appended. The sequencer
/// accepts it only at its own index: other writes are held at the door
/// meanwhile ([`EventLog::with_writes_held`]), and one already queued that
/// lands first makes the commitment stale, so it is computed again.
pub fn commit_state(
    events: &EventLog,
    projector: &mut Projector,
    ledger_key: &SigningKey,
    now: i64,
) -> Result<Committed, DriverError> {
    events.with_writes_held(|door| commit_held(door, projector, ledger_key, now))
}

fn commit_held(
    door: &events::HeldDoor<'_>,
    projector: &mut Projector,
    ledger_key: &SigningKey,
    now: i64,
) -> Result<Committed, DriverError> {
    let events = door.log();
    for _ in 0..COMMIT_ATTEMPTS {
        projector.catch_up(events.ledger())?;
        // The projection's own size and root, not the head read again: a
        // write may land after the catch-up, and the state committed must
        // be the state of exactly the log it names (the sequencer refuses
        // a commitment that is no longer at the head).
        let size = projector.projection.size();
        let root = projector.projection.root();
        if size > 0 {
            let last = events.ledger().entry(size - 1)?;
            let (d, _) = envelope::decode_leaf(&last.leaf).map_err(DriverError::Rejected)?;
            if let Event::StateCommitted(e) = &d.payload.event {
                if e.checkpoint.size == size - 1 {
                    // A commitment changes no projection state: the state
                    // folded through it is the state it committed.
                    return Ok(Committed {
                        index: size - 1,
                        state: projector.projection.state(),
                    });
                }
            }
        }
        let state = projector.projection.state();
        let state_root = ledger::hash::to_hex(&state.root());
        // Ids are global: one a writer could predict (from the size alone)
        // could be taken first. The state root and the time (µs) are not
        // known ahead.
        let tag = blake3::hash(format!("{size}\n{state_root}\n{now}").as_bytes());
        let payload = Payload {
            schema: events.schema(),
            id: format!("state-committed-{size}-{}", &tag.to_hex()[..16]),
            signer: envelope::key_id(&ledger_key.verifying_key()),
            issued_at: envelope::format_micros(now),
            event: Event::StateCommitted(StateCommitted {
                checkpoint: CheckpointRef {
                    size,
                    root: ledger::hash::to_hex(&root),
                },
                state_root,
                task_classes: state.classes.len() as u64,
            }),
        };
        match door.append(&envelope::sign_envelope(ledger_key, &payload)) {
            Ok(r) if r.appended.index == size => return Ok(Committed { index: size, state }),
            // Another caller committed this size first, or a write landed
            // first: look again.
            Ok(_) => continue,
            Err(AppendError::Rejected { reason, .. })
                if matches!(
                    reason.code,
                    events::RejectCode::StateNotAtHead
                        | events::RejectCode::CheckpointUnknown
                        | events::RejectCode::EnvelopeIdReused
                ) =>
            {
                continue
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(DriverError::Busy)
}

/// Commits the state ([`commit_state`]) and saves the projection right
/// there, sealed with `key`: the checkpoint a start can check against the
/// commitment in the log ([`Resumed::Committed`]) instead of against a
/// rebuild from the first entry. Returns the commitment.
pub fn commit_and_save(
    events: &EventLog,
    projector: &mut Projector,
    ledger_key: &SigningKey,
    key: &[u8; 32],
    now: i64,
) -> Result<Committed, DriverError> {
    let committed = commit_state(events, projector, ledger_key, now)?;
    // The projector stands at the commitment (a new one: its index) or
    // just after it (one it had folded): where `committed_at` looks.
    projector.save(events.ledger(), key)?;
    Ok(committed)
}

/// An evidence entry read back from the log, with its RFC 6962 inclusion
/// proof in the tree its view was computed at.
pub type Proven = ledger::ProvenEntry;

/// Before the ledger signs or serves numbers: reads every evidence entry the
/// view cites back from the log in one snapshot (a checked read: re-hashed
/// against its stored leaf hash), with its inclusion proof at the view's
/// size, checks it is the entry the view names, and recomputes the held-out
/// statistics from those leaves alone ([`crate::evidence`]). They must
/// equal the view's, bit for bit; otherwise nothing is signed or served and
/// the answer is [`DerivedMismatch::Evidence`]. Returns the entries with
/// their proofs, in the view's order.
pub fn check_evidence<S: Sequencer>(
    log: &Ledger<S>,
    view: &TaskClassView,
) -> Result<Vec<Proven>, DriverError> {
    let mismatch = |what: String| {
        DriverError::Mismatch(DerivedMismatch::Evidence {
            task_class: view.task_class.clone(),
            what,
        })
    };
    if let Some(e) = view.evidence.iter().find(|e| e.index >= view.tree_size) {
        return Err(mismatch(format!(
            "evidence {} is past the checkpoint",
            e.index
        )));
    }
    let indices: Vec<u64> = view.evidence.iter().map(|e| e.index).collect();
    let proven = log.entries_with_proofs(&indices, view.tree_size)?;
    for ((entry, _), e) in proven.iter().zip(&view.evidence) {
        if !ledger::hash::is_hex_of(&e.leaf_hash, &entry.leaf_hash) {
            return Err(mismatch(format!(
                "evidence {} is not the entry with leaf hash {}",
                e.index, e.leaf_hash
            )));
        }
    }
    let leaves: Vec<(ledger::Hash, &[u8])> = proven
        .iter()
        .map(|(e, _)| (e.leaf_hash, e.leaf.as_slice()))
        .collect();
    crate::evidence::check_view(view, &leaves).map_err(|e| mismatch(e.to_string()))?;
    Ok(proven)
}

impl Projector {
    /// A projector folded from the first entry up to `size`.
    pub fn rebuild_to<S: Sequencer>(
        log: &Ledger<S>,
        settings: Settings,
        size: u64,
    ) -> Result<Projector, DriverError> {
        let mut p = Projector::empty(settings);
        p.fold_to(log, size)?;
        Ok(p)
    }
}
