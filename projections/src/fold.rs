//! The fold: `(Projection, entry) → Projection`, with no clock, no storage and
//! no I/O. [`Projection::view`] answers for one task class at a time the
//! caller supplies, and only at the checkpoint the fold has reached.

use std::collections::{BTreeMap, BTreeSet};

use ledger::events::model::{CaseSource, Event, Isolation, RuleOutcome, Tier, TierRule};
use ledger::merkle::Frontier;
use ledger::Hash;
use serde::{Deserialize, Serialize};

use crate::rules::{self, RuleInput};
use crate::stats::{bca, wilson, Interval};

/// Projection settings. Part of every answer, so a reader knows what was
/// computed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// The trailing window, in seconds (default 30 days).
    pub window_seconds: i64,
    /// Confidence level of both intervals (default 0.95).
    pub confidence: f64,
    /// Bootstrap resamples for the BCa interval (default 2,000).
    pub resamples: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            window_seconds: 30 * 24 * 3600,
            confidence: 0.95,
            resamples: 2000,
        }
    }
}

/// Why a projection could not answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProjectionError {
    /// The fold has not reached the requested checkpoint, or its entries do
    /// not hash to that checkpoint's root: the log it folded is not the log
    /// that was verified. Never answered with numbers.
    #[error("projection at size {have} (root {have_root}) does not match checkpoint size {want} (root {want_root})")]
    Unverified {
        have: u64,
        have_root: String,
        want: u64,
        want_root: String,
    },
    #[error("task class `{0}` is not registered")]
    UnknownTaskClass(String),
    #[error("entry {index} is not a ledger event: {reason}")]
    Undecodable { index: u64, reason: String },
    #[error("entry {got} arrived while the fold expected entry {want}")]
    OutOfOrder { want: u64, got: u64 },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ScoreObs {
    index: u64,
    leaf_hash: [u8; 32],
    case_id: String,
    at: i64,
    score: f64,
    passed: bool,
    cost: f64,
    eligible: bool,
    block: u32,
    warn: u32,
    info: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ClassFold {
    tier: Tier,
    silver: TierRule,
    gold: TierRule,
    pending_proposals: BTreeSet<String>,
    scores: Vec<ScoreObs>,
    runs: Vec<(i64, String, Isolation)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct CaseFold {
    task_class: String,
    curation_class: String,
    active: bool,
    source: CaseSource,
}

/// The folded log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Projection {
    size: u64,
    frontier: Vec<(u8, [u8; 32])>,
    classes: BTreeMap<String, ClassFold>,
    cases: BTreeMap<String, CaseFold>,
    proposals: BTreeMap<String, (String, String, String)>,
    runs: BTreeMap<String, (String, Isolation)>,
}

/// Statistics over a set of latest-per-case scores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreStats {
    pub cases: usize,
    pub mean: Option<f64>,
    pub mean_ci: Option<Interval>,
    pub passed: usize,
    pub pass_rate: Option<f64>,
    pub pass_rate_ci: Option<Interval>,
}

/// Failure-mode counts by severity.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Failures {
    pub block: u64,
    pub warn: u64,
    pub info: u64,
}

/// One evidence entry: the log index and leaf hash of a score used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub index: u64,
    pub leaf_hash: String,
    pub case_id: String,
    pub score: f64,
}

/// The answer for one task class at one checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskClassView {
    pub task_class: String,
    /// The checkpoint this was computed at.
    pub tree_size: u64,
    pub root: String,
    /// The time it was computed for (µs since the Unix epoch, UTC) and the window.
    pub now_micros: i64,
    pub window_start_micros: i64,
    pub settings: Settings,
    pub tier: Tier,
    pub active_cases_by_curation_class: BTreeMap<String, usize>,
    pub pending_proposals: usize,
    pub runs_in_window: usize,
    pub scores_in_window: usize,
    pub shared_kernel_scores_in_window: usize,
    /// Latest eligible (microvm) score per active held-out case in the window.
    pub held_out: ScoreStats,
    /// Latest eligible score per active case of any curation class.
    pub all_cases: ScoreStats,
    /// Failures among eligible scores of active cases in the window.
    pub failures: Failures,
    /// Failures among shared-kernel scores in the window (shown, never counted).
    pub shared_kernel_failures: Failures,
    pub cost_usd_in_window: f64,
    pub latest_run: Option<LatestRun>,
    /// The promotion evidence: the held-out scores behind `held_out`.
    pub evidence: Vec<Evidence>,
    pub recommendation: Recommendation,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatestRun {
    pub run_id: String,
    pub started_micros: i64,
    pub isolation: Isolation,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    pub current_tier: Tier,
    pub recommended_tier: Tier,
    pub rationale: Vec<RuleOutcome>,
    /// Always true: the ledger recommends; only humans promote.
    pub requires_human_approval: bool,
}

/// The bootstrap seed for a task class: fixed by its name, so the same log
/// always gives the same interval.
pub fn bootstrap_seed(task_class: &str) -> u64 {
    let h = blake3::hash(format!("evidence-ledger/v1 bootstrap\n{task_class}").as_bytes());
    let mut b = [0u8; 8];
    b.copy_from_slice(&h.as_bytes()[..8]);
    u64::from_le_bytes(b)
}

fn stats(scores: &[&ScoreObs], settings: &Settings, seed: u64) -> ScoreStats {
    let xs: Vec<f64> = scores.iter().map(|s| s.score).collect();
    let n = xs.len();
    let passed = scores.iter().filter(|s| s.passed).count();
    ScoreStats {
        cases: n,
        mean: (n > 0).then(|| xs.iter().sum::<f64>() / n as f64),
        mean_ci: bca(&xs, settings.confidence, settings.resamples, seed),
        passed,
        pass_rate: (n > 0).then(|| passed as f64 / n as f64),
        pass_rate_ci: wilson(passed as u64, n as u64, settings.confidence),
    }
}

impl Projection {
    /// The number of entries folded.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The RFC 6962 root of the entries folded.
    pub fn root(&self) -> Hash {
        Frontier::from_parts(
            self.size,
            self.frontier.iter().map(|(l, h)| (*l, Hash(*h))).collect(),
        )
        .root()
    }

    /// Folds entry `index` with leaf bytes `leaf` (already verified by the
    /// log's checked read) into the projection.
    pub fn apply(&mut self, index: u64, leaf: &[u8]) -> Result<(), ProjectionError> {
        if index != self.size {
            return Err(ProjectionError::OutOfOrder {
                want: self.size,
                got: index,
            });
        }
        let (d, at) =
            ledger::events::decode_leaf(leaf).map_err(|r| ProjectionError::Undecodable {
                index,
                reason: r.to_string(),
            })?;
        let leaf_hash = ledger::leaf_hash(leaf);
        let mut f = Frontier::from_parts(
            self.size,
            self.frontier.iter().map(|(l, h)| (*l, Hash(*h))).collect(),
        );
        f.push(leaf_hash);
        self.frontier = f.nodes().iter().map(|(l, h)| (*l, h.0)).collect();
        self.size += 1;
        match d.payload.event {
            Event::TaskClassRegistered(e) => {
                let (Some(silver), Some(gold)) =
                    (e.tiers.get(&Tier::Silver), e.tiers.get(&Tier::Gold))
                else {
                    return Ok(());
                };
                self.classes.insert(
                    e.task_class.clone(),
                    ClassFold {
                        tier: e.initial_tier,
                        silver: silver.clone(),
                        gold: gold.clone(),
                        pending_proposals: BTreeSet::new(),
                        scores: Vec::new(),
                        runs: Vec::new(),
                    },
                );
            }
            Event::TierChanged(e) => {
                if let Some(c) = self.classes.get_mut(&e.task_class) {
                    c.tier = e.to;
                }
            }
            Event::CaseAdded(e) => {
                self.cases.insert(
                    e.case_id,
                    CaseFold {
                        task_class: e.task_class,
                        curation_class: e.curation_class,
                        active: true,
                        source: e.provenance.source,
                    },
                );
            }
            Event::CaseRetired(e) => {
                if let Some(c) = self.cases.get_mut(&e.case_id) {
                    c.active = false;
                }
            }
            Event::CaseProposed(e) => {
                if let Some(c) = self.classes.get_mut(&e.task_class) {
                    c.pending_proposals.insert(e.proposal_id.clone());
                }
                self.proposals.insert(
                    e.proposal_id,
                    (e.task_class, e.draft.case_id, e.draft.curation_class),
                );
            }
            Event::ProposalApproved(e) => {
                if let Some((tc, case_id, curation)) = self.proposals.get(&e.proposal_id).cloned() {
                    if let Some(c) = self.classes.get_mut(&tc) {
                        c.pending_proposals.remove(&e.proposal_id);
                    }
                    self.cases.insert(
                        case_id,
                        CaseFold {
                            task_class: tc,
                            curation_class: curation,
                            active: true,
                            source: CaseSource::OutcomeLedgerDerived,
                        },
                    );
                }
            }
            Event::ProposalRejected(e) => {
                if let Some((tc, _, _)) = self.proposals.get(&e.proposal_id) {
                    if let Some(c) = self.classes.get_mut(tc) {
                        c.pending_proposals.remove(&e.proposal_id);
                    }
                }
            }
            Event::RunStarted(e) => {
                if let Some(c) = self.classes.get_mut(&e.task_class) {
                    c.runs.push((at, e.run_id.clone(), e.isolation_class));
                }
                self.runs
                    .insert(e.run_id, (e.task_class, e.isolation_class));
            }
            Event::ScoreRecorded(e) => {
                let isolation = self
                    .runs
                    .get(&e.run_id)
                    .map(|r| r.1)
                    .unwrap_or(Isolation::SharedKernel);
                if let Some(c) = self.classes.get_mut(&e.task_class) {
                    let sev = |s: &str| {
                        e.score
                            .failure_modes
                            .iter()
                            .filter(|f| f.severity == s)
                            .count() as u32
                    };
                    c.scores.push(ScoreObs {
                        index,
                        leaf_hash: leaf_hash.0,
                        case_id: e.case_id.clone(),
                        at,
                        score: e.score.score,
                        passed: e.score.passed,
                        cost: e.score.cost_usd,
                        eligible: isolation == Isolation::Microvm,
                        block: sev("block"),
                        warn: sev("warn"),
                        info: sev("info"),
                    });
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Registered task classes.
    pub fn task_classes(&self) -> impl Iterator<Item = &str> {
        self.classes.keys().map(String::as_str)
    }

    /// The answer for `task_class` at `now` (µs, UTC), only if the fold is at
    /// exactly the checkpoint `(size, root)`.
    pub fn view(
        &self,
        task_class: &str,
        now: i64,
        settings: &Settings,
        size: u64,
        root: &Hash,
    ) -> Result<TaskClassView, ProjectionError> {
        let have_root = self.root();
        if self.size != size || have_root != *root {
            return Err(ProjectionError::Unverified {
                have: self.size,
                have_root: hex::encode(have_root.0),
                want: size,
                want_root: hex::encode(root.0),
            });
        }
        let class = self
            .classes
            .get(task_class)
            .ok_or_else(|| ProjectionError::UnknownTaskClass(task_class.to_owned()))?;
        let start = now.saturating_sub(settings.window_seconds.saturating_mul(1_000_000));
        // Sequencing time never decreases along the log, so the window is a suffix.
        let first = class.scores.partition_point(|s| s.at < start);
        let window = &class.scores[first..];
        let active = |id: &str| {
            self.cases
                .get(id)
                .filter(|c| c.active && c.task_class == task_class)
        };

        let mut latest: BTreeMap<&str, &ScoreObs> = BTreeMap::new();
        let mut failures = Failures::default();
        let mut shared = Failures::default();
        let mut shared_scores = 0;
        let mut cost = 0.0;
        for s in window {
            cost += s.cost;
            if !s.eligible {
                shared_scores += 1;
                shared.block += u64::from(s.block);
                shared.warn += u64::from(s.warn);
                shared.info += u64::from(s.info);
                continue;
            }
            if active(&s.case_id).is_some() {
                failures.block += u64::from(s.block);
                failures.warn += u64::from(s.warn);
                failures.info += u64::from(s.info);
                latest.insert(&s.case_id, s);
            }
        }
        let mut by_class: BTreeMap<String, usize> = BTreeMap::new();
        let mut active_held_out = 0;
        for c in self
            .cases
            .values()
            .filter(|c| c.active && c.task_class == task_class)
        {
            *by_class.entry(c.curation_class.clone()).or_default() += 1;
            if c.curation_class == "held-out" {
                active_held_out += 1;
            }
        }
        let held: Vec<&ScoreObs> = latest
            .iter()
            .filter(|(id, _)| active(id).is_some_and(|c| c.curation_class == "held-out"))
            .map(|(_, s)| *s)
            .collect();
        let all: Vec<&ScoreObs> = latest.values().copied().collect();
        let seed = bootstrap_seed(task_class);
        let held_stats = stats(&held, settings, seed);
        let input = RuleInput {
            active_held_out,
            scored_held_out: held.len(),
            lower_bound: held_stats.mean_ci.map(|i| i.low),
            block_failures: failures.block as usize,
        };
        let (recommended, rationale) = rules::recommend(class.tier, &input, |t| match t {
            Tier::Silver => Some(class.silver.clone()),
            Tier::Gold => Some(class.gold.clone()),
            Tier::Bronze => None,
        });
        let run_start = class.runs.partition_point(|r| r.0 < start);
        Ok(TaskClassView {
            task_class: task_class.to_owned(),
            tree_size: size,
            root: hex::encode(root.0),
            now_micros: now,
            window_start_micros: start,
            settings: settings.clone(),
            tier: class.tier,
            active_cases_by_curation_class: by_class,
            pending_proposals: class.pending_proposals.len(),
            runs_in_window: class.runs.len() - run_start,
            scores_in_window: window.len(),
            shared_kernel_scores_in_window: shared_scores,
            held_out: held_stats,
            all_cases: stats(&all, settings, seed),
            failures,
            shared_kernel_failures: shared,
            cost_usd_in_window: cost,
            latest_run: class.runs.last().map(|r| LatestRun {
                run_id: r.1.clone(),
                started_micros: r.0,
                isolation: r.2,
            }),
            evidence: held
                .iter()
                .map(|s| Evidence {
                    index: s.index,
                    leaf_hash: hex::encode(s.leaf_hash),
                    case_id: s.case_id.clone(),
                    score: s.score,
                })
                .collect(),
            recommendation: Recommendation {
                current_tier: class.tier,
                recommended_tier: recommended,
                rationale,
                requires_human_approval: true,
            },
        })
    }

    /// The projection's bytes for a checkpoint (postcard).
    pub fn to_bytes(&self) -> Vec<u8> {
        postcard::to_stdvec(self).unwrap_or_default()
    }

    /// Reads bytes written by [`Projection::to_bytes`].
    pub fn from_bytes(b: &[u8]) -> Option<Projection> {
        postcard::from_bytes(b).ok()
    }
}
