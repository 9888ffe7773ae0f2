//! The fold: `(Projection, entry) → Projection`, with no clock, no storage and
//! no I/O. [`Projection::view`] answers for one task class at a time the
//! caller supplies, and only at the checkpoint the fold has reached; it reads
//! old entries only through the caller's [`Entries`].

use std::collections::{BTreeMap, BTreeSet, HashMap};

use events::model::{CaseSource, Event, Isolation, RuleOutcome, ScoreRecorded, Tier, TierRule};
use ledger::merkle::Frontier;
use ledger::Hash;
use serde::{Deserialize, Serialize};

use crate::commit::{self, CaseRecord, ClassRecord, ClassState, FailedScore, LatestScore};
use crate::rules::{self, RuleInput};
use crate::stats::{bca, bca_reusing, wilson, ExactSum, Interval, KeptDraws};
use failing::FailingScores;

mod failing;

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
    /// A `state.committed` entry is not the state the fold of the log
    /// before it gives (its root, class count or size): the ledger signed a
    /// wrong commitment.
    #[error("entry {index} commits state root {committed}; the log before it folds to {folded} (or the commitment's size or class count differs)")]
    WrongStateRoot {
        index: u64,
        committed: String,
        folded: String,
    },
    /// An entry a view had to read back (one leaving or re-entering the
    /// window) could not be read from the log.
    #[error("entry {index} could not be read back: {reason}")]
    Read { index: u64, reason: String },
}

/// What [`Entries::each_entry`] calls for each entry: its index and leaf.
pub type EachEntry<'a> = dyn FnMut(u64, &[u8]) -> Result<(), ProjectionError> + 'a;

/// Read access to the log a projection folded. A projection keeps sums over
/// its window, not every score; a view reads back from the log the scores
/// that leave (or re-enter) the window as time moves.
pub trait Entries {
    /// Calls `each(index, leaf)` for entries `start..end`, in order. The
    /// leaves must be the log's own, checked against its stored hashes.
    fn each_entry(
        &self,
        start: u64,
        end: u64,
        each: &mut EachEntry<'_>,
    ) -> Result<(), ProjectionError>;
}

/// One score, as much of it as a window's sums need. Not kept: it is
/// derived from the entry when the score enters the window and again when
/// it leaves ([`Projection::counted`]).
#[derive(Debug, Clone, PartialEq)]
struct ScoreObs {
    cost: f64,
    /// The case's number in [`Projection::case_names`].
    case: u32,
    eligible: bool,
    block: u32,
    warn: u32,
    info: u32,
}

/// The newest eligible (microvm) score of one case in one class. A window
/// is a suffix of the log, so this is the case's latest eligible score in
/// any window that holds an eligible score of the case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Newest {
    index: u64,
    leaf_hash: [u8; 32],
    at: i64,
    score: f64,
    passed: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ClassFold {
    tier: Tier,
    silver: TierRule,
    gold: TierRule,
    pending_proposals: BTreeSet<String>,
    /// The index of the registration this fold started at.
    registered: u64,
    /// Sums over the class's scores in the log range `window.lo..size`.
    window: WindowSums,
    /// By case number.
    newest: BTreeMap<u32, Newest>,
    /// By case number: the eligible scores that carried failure modes.
    failing: BTreeMap<u32, FailingScores>,
    runs: Vec<(i64, String, Isolation)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct CaseFold {
    task_class: String,
    curation_class: String,
    active: bool,
    source: CaseSource,
}

impl CaseFold {
    /// Its task class while it is active, and whether it is held out.
    fn active_mark(&self) -> Option<(String, bool)> {
        self.active
            .then(|| (self.task_class.clone(), self.curation_class == HELD_OUT))
    }
}

/// The folded log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Projection {
    size: u64,
    frontier: Vec<(u8, [u8; 32])>,
    classes: BTreeMap<String, ClassFold>,
    cases: BTreeMap<String, CaseFold>,
    proposals: BTreeMap<String, (String, String, String)>,
    /// Runs by id: task class, isolation, and the index of the entry that
    /// started the run (a score counts as isolated only if its run started
    /// before it).
    runs: BTreeMap<String, (String, Isolation, u64)>,
    /// Where the window's sums start in the log (see [`Cursor`]).
    window: Cursor,
    /// Active cases by task class, then curation class: what `cases` says,
    /// kept as counts so that a view need not scan every case.
    active: BTreeMap<String, BTreeMap<String, usize>>,
    /// Every case id a score named, numbered in order of first appearance.
    case_names: Vec<String>,
    /// `case_names` inverted; not saved, rebuilt by [`Projection::from_bytes`].
    #[serde(skip)]
    case_numbers: HashMap<String, u32>,
    /// By case number: the task class of the case while it is active, and
    /// whether it is held out; `None` while it is not active (or not
    /// added). What `cases` says, kept in step by [`Projection::set_case`]
    /// and [`Projection::case_number`] so that a view looks its cases up by
    /// number rather than by name; not saved, rebuilt by
    /// [`Projection::from_bytes`].
    #[serde(skip)]
    active_by_number: Vec<Option<(String, bool)>>,
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

fn stats(
    scores: &[&Newest],
    settings: &Settings,
    seed: u64,
    boot: &mut dyn FnMut(&[f64], u64) -> Option<Interval>,
) -> ScoreStats {
    let xs: Vec<f64> = scores.iter().map(|s| s.score).collect();
    let passed = scores.iter().filter(|s| s.passed).count();
    score_stats(&xs, passed, settings, |xs| boot(xs, seed))
}

/// The statistics of a set of latest-per-case scores `xs`, `passed` of
/// which passed: count, mean with the interval `mean_ci` gives for `xs`
/// (the BCa bootstrap, perhaps cached), passes and the Wilson interval.
/// The fold and the evidence check ([`crate::evidence`]) both compute
/// through this one function, so a view's numbers and their recomputation
/// from the cited leaves run the same arithmetic in the same order.
pub fn score_stats(
    xs: &[f64],
    passed: usize,
    settings: &Settings,
    mean_ci: impl FnOnce(&[f64]) -> Option<Interval>,
) -> ScoreStats {
    let n = xs.len();
    ScoreStats {
        cases: n,
        mean: (n > 0).then(|| xs.iter().sum::<f64>() / n as f64),
        mean_ci: mean_ci(xs),
        passed,
        pass_rate: (n > 0).then(|| passed as f64 / n as f64),
        pass_rate_ci: wilson(passed as u64, n as u64, settings.confidence),
    }
}

/// An active case's id, whether it is held out, and its newest eligible score.
type Latest<'a> = (&'a str, bool, &'a Newest);

/// The curation class whose scores are promotion evidence.
const HELD_OUT: &str = "held-out";

fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

impl Failures {
    fn add(&mut self, s: &ScoreObs, sign: i8) {
        let apply = |total: &mut u64, n: u32| {
            if sign > 0 {
                *total += u64::from(n);
            } else {
                *total = total.saturating_sub(u64::from(n));
            }
        };
        apply(&mut self.block, s.block);
        apply(&mut self.warn, s.warn);
        apply(&mut self.info, s.info);
    }
}

/// Sums over the scores in a window.
#[derive(Debug, Default)]
struct WindowTotals {
    cost: f64,
    scores: usize,
    shared_scores: usize,
    shared: Failures,
    /// Failures among eligible scores of active cases.
    failures: Failures,
}

/// What [`Projection::view_cached`] keeps between views, beyond the
/// projection's own window sums: the bootstrap's draws and its last
/// answers. Not part of the projection, and rebuilt on demand.
#[derive(Debug, Clone, Default)]
pub struct ViewCache {
    /// The last two bootstrap inputs and their intervals, per task class.
    memos: std::collections::HashMap<String, BootMemo>,
    /// The bootstrap draws of recent views: a view after one new score
    /// reuses them (`stats::bca_reusing`).
    draws: KeptDraws,
}

type BootMemo = Vec<((u64, usize, u64), Vec<f64>, Option<Interval>)>;

/// Eligible scores of one case in the window: how many, and their failures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct CaseSums {
    scores: u64,
    failures: Failures,
}

/// Sums over one class's scores in a range of the log. Scores enter when
/// they are folded or when the range grows back, and leave when the window
/// passes them; every sum is exact, so a range reached by moving gives
/// the same bits as one summed afresh.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct WindowSums {
    cost: ExactSum,
    scores: u64,
    shared_scores: u64,
    shared: Failures,
    /// By case number, every case with eligible scores in the range (active
    /// or not: activity is checked when answering).
    cases: BTreeMap<u32, CaseSums>,
}

impl WindowSums {
    fn change(&mut self, s: &ScoreObs, sign: i8) {
        self.cost.change(s.cost, sign);
        let count = |n: &mut u64| {
            if sign > 0 {
                *n += 1
            } else {
                *n = n.saturating_sub(1)
            }
        };
        count(&mut self.scores);
        if s.eligible {
            let c = self.cases.entry(s.case).or_default();
            count(&mut c.scores);
            c.failures.add(s, sign);
            if c.scores == 0 {
                self.cases.remove(&s.case);
            }
        } else {
            count(&mut self.shared_scores);
            self.shared.add(s, sign);
        }
    }
}

/// A case of the fold as [`commit::view_with`] reads it for
/// [`Projection::recheck`]: its record without its failing scores, and
/// those scores in log order (so in order of sequencing time).
struct FoldedCase<'a> {
    record: CaseRecord,
    failing: Option<&'a FailingScores>,
}

impl commit::CaseInput for FoldedCase<'_> {
    fn record(&self) -> &CaseRecord {
        &self.record
    }

    fn failures_since(&self, start: i64) -> Failures {
        self.failing
            .map_or_else(Failures::default, |f| f.since(start))
    }
}

/// The start of the log range the classes' [`WindowSums`] cover: `lo`, with
/// the sequencing times of entry `lo` and of entry `lo - 1` when they exist,
/// so that a view can tell without reading the log whether the window still
/// starts there. Sequencing time never decreases along the log, so every
/// window is a suffix of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Cursor {
    lo: u64,
    lo_at: Option<i64>,
    before_at: Option<i64>,
}

/// Entries read per call while a window moves.
const READ_CHUNK: u64 = 1024;

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
            events::decode_logged_leaf(leaf).map_err(|r| ProjectionError::Undecodable {
                index,
                reason: r.to_string(),
            })?;
        if let Event::StateCommitted(e) = &d.payload.event {
            // The ledger's commitment to this very state: checked before
            // the entry is folded, so a wrong root is caught by anyone who
            // folds the log (docs/COMPLETENESS.md).
            let state = self.state();
            let folded = ledger::hash::to_hex(&state.root());
            if e.checkpoint.size != index
                || e.state_root != folded
                || e.task_classes != state.classes.len() as u64
            {
                return Err(ProjectionError::WrongStateRoot {
                    index,
                    committed: e.state_root.clone(),
                    folded,
                });
            }
        }
        let leaf_hash = ledger::leaf_hash(leaf);
        let mut f = Frontier::from_parts(
            self.size,
            self.frontier.iter().map(|(l, h)| (*l, Hash(*h))).collect(),
        );
        f.push(leaf_hash);
        self.frontier = f.nodes().iter().map(|(l, h)| (*l, h.0)).collect();
        if self.window.lo == index {
            self.window.lo_at = Some(at);
        }
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
                        registered: index,
                        window: WindowSums::default(),
                        newest: BTreeMap::new(),
                        failing: BTreeMap::new(),
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
                self.set_case(
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
                if let Some(mut c) = self.cases.get(&e.case_id).cloned() {
                    c.active = false;
                    self.set_case(e.case_id, c);
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
                    self.set_case(
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
                // The log refuses a second start of a run; were one there,
                // the first would stand.
                self.runs
                    .entry(e.run_id)
                    .or_insert((e.task_class, e.isolation_class, index));
            }
            Event::ScoreRecorded(e) => {
                if let Some(c) = self.classes.get(&e.task_class) {
                    if c.registered < index {
                        let case = self.case_number(&e.case_id);
                        let obs = self.observe(index, &e, case);
                        let Some(c) = self.classes.get_mut(&e.task_class) else {
                            return Ok(());
                        };
                        c.window.change(&obs, 1);
                        if obs.eligible && obs.block + obs.warn + obs.info > 0 {
                            c.failing.entry(case).or_default().push(FailedScore {
                                index,
                                sequenced_at: at,
                                block: obs.block,
                                warn: obs.warn,
                                info: obs.info,
                            });
                        }
                        if obs.eligible {
                            c.newest.insert(
                                case,
                                Newest {
                                    index,
                                    leaf_hash: leaf_hash.0,
                                    at,
                                    score: e.score.score,
                                    passed: e.score.passed,
                                },
                            );
                        }
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// What the window's sums take from score `e` at `index` of case number
    /// `case`. Depends only on the entry and on entries before it, so it is
    /// the same when the score enters the window and when it leaves.
    fn observe(&self, index: u64, e: &ScoreRecorded, case: u32) -> ScoreObs {
        let eligible = self
            .runs
            .get(&e.run_id)
            .is_some_and(|r| r.2 < index && r.1 == Isolation::Microvm);
        let sev = |s: &str| {
            e.score
                .failure_modes
                .iter()
                .filter(|f| f.severity == s)
                .count() as u32
        };
        ScoreObs {
            cost: e.score.cost_usd,
            case,
            eligible,
            block: sev("block"),
            warn: sev("warn"),
            info: sev("info"),
        }
    }

    /// The class a score at `index` counts for, and what it counts: `None`
    /// unless the class was registered (most recently) before it.
    fn counted(&self, index: u64, e: &ScoreRecorded) -> Option<ScoreObs> {
        let class = self.classes.get(&e.task_class)?;
        if class.registered >= index {
            return None;
        }
        let case = *self.case_numbers.get(&e.case_id)?;
        Some(self.observe(index, e, case))
    }

    /// The number of case id `id`, numbering it if it is new.
    fn case_number(&mut self, id: &str) -> u32 {
        if let Some(&n) = self.case_numbers.get(id) {
            return n;
        }
        let n = self.case_names.len() as u32;
        self.case_names.push(id.to_owned());
        self.case_numbers.insert(id.to_owned(), n);
        self.active_by_number.push(self.active_mark(id));
        n
    }

    /// What [`Projection::active_by_number`] holds for case `id`.
    fn active_mark(&self, id: &str) -> Option<(String, bool)> {
        self.cases.get(id).and_then(CaseFold::active_mark)
    }

    /// The id of case number `n`.
    fn case_name(&self, n: u32) -> &str {
        self.case_names.get(n as usize).map_or("", String::as_str)
    }

    /// Records `case` under `id`, keeping the active counts in step.
    fn set_case(&mut self, id: String, case: CaseFold) {
        if let Some(old) = self.cases.get(&id) {
            if old.active {
                if let Some(by) = self.active.get_mut(&old.task_class) {
                    if let Some(n) = by.get_mut(&old.curation_class) {
                        *n -= 1;
                        if *n == 0 {
                            by.remove(&old.curation_class);
                        }
                    }
                    if by.is_empty() {
                        self.active.remove(&old.task_class);
                    }
                }
            }
        }
        if case.active {
            *self
                .active
                .entry(case.task_class.clone())
                .or_default()
                .entry(case.curation_class.clone())
                .or_default() += 1;
        }
        if let Some(&n) = self.case_numbers.get(&id) {
            if let Some(slot) = self.active_by_number.get_mut(n as usize) {
                *slot = case.active_mark();
            }
        }
        self.cases.insert(id, case);
    }

    /// Registered task classes.
    pub fn task_classes(&self) -> impl Iterator<Item = &str> {
        self.classes.keys().map(String::as_str)
    }

    /// For a view at the checkpoint `(size, root)`: the class and the
    /// window's start (µs).
    fn window(
        &self,
        task_class: &str,
        now: i64,
        settings: &Settings,
        size: u64,
        root: &Hash,
    ) -> Result<(&ClassFold, i64), ProjectionError> {
        let have_root = self.root();
        if self.size != size || have_root != *root {
            return Err(ProjectionError::Unverified {
                have: self.size,
                have_root: ledger::hash::to_hex(&have_root),
                want: size,
                want_root: ledger::hash::to_hex(root),
            });
        }
        let class = self
            .classes
            .get(task_class)
            .ok_or_else(|| ProjectionError::UnknownTaskClass(task_class.to_owned()))?;
        let start = now.saturating_sub(settings.window_seconds.saturating_mul(1_000_000));
        Ok((class, start))
    }

    /// Calls `each` for every entry of `start..end` that is a score, with
    /// its index.
    fn each_score(
        src: &dyn Entries,
        start: u64,
        end: u64,
        each: &mut dyn FnMut(u64, &ScoreRecorded),
    ) -> Result<(), ProjectionError> {
        let mut at = start;
        while at < end {
            let stop = end.min(at + READ_CHUNK);
            src.each_entry(at, stop, &mut |index, leaf| {
                let (d, _) =
                    events::decode_logged_leaf(leaf).map_err(|r| ProjectionError::Undecodable {
                        index,
                        reason: r.to_string(),
                    })?;
                if let Event::ScoreRecorded(e) = &d.payload.event {
                    each(index, e);
                }
                Ok(())
            })?;
            at = stop;
        }
        Ok(())
    }

    /// The sequencing time of entry `index`.
    fn sequenced_at(src: &dyn Entries, index: u64) -> Result<i64, ProjectionError> {
        let mut found = None;
        src.each_entry(index, index + 1, &mut |i, leaf| {
            let (_, at) =
                events::decode_logged_leaf(leaf).map_err(|r| ProjectionError::Undecodable {
                    index: i,
                    reason: r.to_string(),
                })?;
            found = Some(at);
            Ok(())
        })?;
        found.ok_or_else(|| ProjectionError::Read {
            index,
            reason: "the log returned no entry".to_owned(),
        })
    }

    /// The first index in `lo..hi` whose entry was sequenced at or after
    /// `start`, or `hi`: a binary search that reads O(log n) entries.
    fn first_at_or_after(
        src: &dyn Entries,
        mut lo: u64,
        mut hi: u64,
        start: i64,
    ) -> Result<u64, ProjectionError> {
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if Self::sequenced_at(src, mid)? < start {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    /// Moves the classes' window sums to the window starting at `start`
    /// (µs): no reads when it still starts at the same entry; otherwise a
    /// binary search for its first entry, then the scores between the old
    /// and the new start leave (or re-enter) the sums. When more than half
    /// of the sums would leave, they are summed afresh from the new start
    /// instead, whichever reads fewer entries.
    fn move_window(&mut self, src: &dyn Entries, start: i64) -> Result<(), ProjectionError> {
        let size = self.size;
        let Cursor {
            lo,
            lo_at,
            before_at,
        } = self.window.clone();
        let starts_at_lo = lo >= size || lo_at.is_some_and(|t| t >= start);
        let nothing_before = lo == 0 || before_at.is_some_and(|t| t < start);
        if starts_at_lo && nothing_before {
            return Ok(());
        }
        let new_lo = if !starts_at_lo {
            Self::first_at_or_after(src, lo.saturating_add(1).min(size), size, start)?
        } else {
            Self::first_at_or_after(src, 0, lo.saturating_sub(1), start)?
        };
        let (range, sign) = if new_lo > lo {
            if new_lo - lo <= size - new_lo {
                ((lo, new_lo), -1)
            } else {
                for c in self.classes.values_mut() {
                    c.window = WindowSums::default();
                }
                ((new_lo, size), 1)
            }
        } else {
            ((new_lo, lo), 1)
        };
        let mut changes = Vec::new();
        Self::each_score(src, range.0, range.1, &mut |index, e| {
            if let Some(obs) = self.counted(index, e) {
                changes.push((e.task_class.clone(), obs));
            }
        })?;
        for (task_class, obs) in changes {
            if let Some(c) = self.classes.get_mut(&task_class) {
                c.window.change(&obs, sign);
            }
        }
        self.window = Cursor {
            lo: new_lo,
            lo_at: if new_lo < size {
                Some(Self::sequenced_at(src, new_lo)?)
            } else {
                None
            },
            before_at: if new_lo > 0 {
                Some(Self::sequenced_at(src, new_lo - 1)?)
            } else {
                None
            },
        };
        Ok(())
    }

    /// The answer for `task_class` at `now` (µs, UTC), only if the fold is at
    /// exactly the checkpoint `(size, root)`. This reads the whole window
    /// back from `src` and sums it afresh; it is the definition
    /// [`Projection::view_cached`] is tested against.
    #[allow(clippy::too_many_arguments)]
    pub fn view(
        &self,
        src: &dyn Entries,
        task_class: &str,
        now: i64,
        settings: &Settings,
        size: u64,
        root: &Hash,
    ) -> Result<TaskClassView, ProjectionError> {
        let (class, start) = self.window(task_class, now, settings, size, root)?;
        let first = Self::first_at_or_after(src, 0, size, start)?;
        let mut sums = WindowSums::default();
        Self::each_score(src, first, size, &mut |index, e| {
            if e.task_class == task_class {
                if let Some(obs) = self.counted(index, e) {
                    sums.change(&obs, 1);
                }
            }
        })?;
        let mut boot = |x: &[f64], seed| bca(x, settings.confidence, settings.resamples, seed);
        Ok(self.answer(
            class, task_class, now, start, settings, size, root, &sums, &mut boot,
        ))
    }

    /// [`Projection::view`], answered from the window sums the projection
    /// keeps: the work is the scores that left the window since the last
    /// view (read back from `src`), plus the statistics over the latest
    /// score of each case. Bit for bit the same answer as `view`.
    ///
    /// `cache` must only ever be used with this projection as it grows (the
    /// driver keeps one per projector).
    #[allow(clippy::too_many_arguments)]
    pub fn view_cached(
        &mut self,
        cache: &mut ViewCache,
        src: &dyn Entries,
        task_class: &str,
        now: i64,
        settings: &Settings,
        size: u64,
        root: &Hash,
    ) -> Result<TaskClassView, ProjectionError> {
        let (_, start) = self.window(task_class, now, settings, size, root)?;
        self.move_window(src, start)?;
        // Checked above; moving the window neither adds nor removes classes.
        let class = self
            .classes
            .get(task_class)
            .ok_or_else(|| ProjectionError::UnknownTaskClass(task_class.to_owned()))?;
        let ViewCache { memos, draws } = cache;
        let memo = memos.entry(task_class.to_owned()).or_default();
        let mut boot = |x: &[f64], seed| {
            let key = (settings.confidence.to_bits(), settings.resamples, seed);
            if let Some((_, _, ci)) = memo.iter().find(|(k, xs, _)| *k == key && same_bits(xs, x)) {
                return *ci;
            }
            let ci = bca_reusing(x, settings.confidence, settings.resamples, seed, draws);
            if memo.len() >= 2 {
                memo.remove(0);
            }
            memo.push((key, x.to_vec(), ci));
            ci
        };
        Ok(self.answer(
            class,
            task_class,
            now,
            start,
            settings,
            size,
            root,
            &class.window,
            &mut boot,
        ))
    }

    /// The view from a class's window sums: the window's totals, and the
    /// latest score of each active case scored in it (in case-id order);
    /// `boot` computes a BCa interval.
    #[allow(clippy::too_many_arguments)]
    fn answer(
        &self,
        class: &ClassFold,
        task_class: &str,
        now: i64,
        start: i64,
        settings: &Settings,
        size: u64,
        root: &Hash,
        sums: &WindowSums,
        boot: &mut dyn FnMut(&[f64], u64) -> Option<Interval>,
    ) -> TaskClassView {
        let mut w = WindowTotals {
            cost: sums.cost.value(),
            scores: sums.scores as usize,
            shared_scores: sums.shared_scores as usize,
            shared: sums.shared.clone(),
            failures: Failures::default(),
        };
        let mut latest = Vec::with_capacity(sums.cases.len());
        for (&n, c) in &sums.cases {
            let held_out = match self.active_by_number.get(n as usize) {
                Some(Some((class, held_out))) if class == task_class => *held_out,
                _ => continue,
            };
            let name = self.case_name(n);
            w.failures.block += c.failures.block;
            w.failures.warn += c.failures.warn;
            w.failures.info += c.failures.info;
            // Scored in the window, so its newest eligible score is in it.
            if let Some(newest) = class.newest.get(&n) {
                latest.push((name, held_out, newest));
            }
        }
        latest.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let by_class = self.active.get(task_class).cloned().unwrap_or_default();
        let active_held_out = by_class.get(HELD_OUT).copied().unwrap_or(0);
        let held: Vec<Latest> = latest
            .iter()
            .filter(|(_, held_out, _)| *held_out)
            .copied()
            .collect();
        let seed = bootstrap_seed(task_class);
        let held_scores: Vec<&Newest> = held.iter().map(|(_, _, s)| *s).collect();
        let all_scores: Vec<&Newest> = latest.iter().map(|(_, _, s)| *s).collect();
        let held_stats = stats(&held_scores, settings, seed, boot);
        let input = RuleInput {
            active_held_out,
            scored_held_out: held.len(),
            lower_bound: held_stats.mean_ci.map(|i| i.low),
            block_failures: w.failures.block as usize,
        };
        let (recommended, rationale) = rules::recommend(class.tier, &input, |t| match t {
            Tier::Silver => Some(class.silver.clone()),
            Tier::Gold => Some(class.gold.clone()),
            Tier::Bronze => None,
        });
        let run_start = class.runs.partition_point(|r| r.0 < start);
        TaskClassView {
            task_class: task_class.to_owned(),
            tree_size: size,
            root: ledger::hash::to_hex(root),
            now_micros: now,
            window_start_micros: start,
            settings: settings.clone(),
            tier: class.tier,
            active_cases_by_curation_class: by_class,
            pending_proposals: class.pending_proposals.len(),
            runs_in_window: class.runs.len() - run_start,
            scores_in_window: w.scores,
            shared_kernel_scores_in_window: w.shared_scores,
            held_out: held_stats,
            all_cases: stats(&all_scores, settings, seed, boot),
            failures: w.failures,
            shared_kernel_failures: w.shared,
            cost_usd_in_window: w.cost,
            latest_run: class.runs.last().map(|r| LatestRun {
                run_id: r.1.clone(),
                started_micros: r.0,
                isolation: r.2,
            }),
            evidence: held
                .iter()
                .map(|(case, _, s)| Evidence {
                    index: s.index,
                    leaf_hash: ledger::hash::hex32(&s.leaf_hash),
                    case_id: (*case).to_owned(),
                    score: s.score,
                })
                .collect(),
            recommendation: Recommendation {
                current_tier: class.tier,
                recommended_tier: recommended,
                rationale,
                requires_human_approval: true,
            },
        }
    }

    /// Holds `view` (this projection's answer for its task class, at this
    /// projection's size and root) to a second derivation before the
    /// ledger signs it: [`commit::view`] over the class's per-case records
    /// (each case's activity, newest eligible score and failing scores: the
    /// records the state commitments commit), never over the window sums
    /// the view was answered from. `Err` names the first field that comes
    /// out differently. Its cost is in the class's cases, whatever the
    /// number of scores in the window or of failing scores in the log (the
    /// failures of a case since the window's start are read from running
    /// totals, `fold::failing`). A bootstrap
    /// interval `cache` holds for exactly the same inputs is taken from it
    /// (the bootstrap is a function of its inputs' bits, the seed and the
    /// settings), so this does not check the intervals: the held-out
    /// interval a recommendation signs is recomputed from the evidence
    /// leaves by `driver::check_evidence`, with the check's own bootstrap
    /// ([`crate::stats::bca_recent`]), never the one the view used.
    pub fn recheck(&self, cache: &ViewCache, view: &TaskClassView) -> Result<(), String> {
        let tc = view.task_class.as_str();
        if self.size != view.tree_size || ledger::hash::to_hex(&self.root()) != view.root {
            return Err(format!(
                "the view is at size {}, the projection at {}",
                view.tree_size, self.size
            ));
        }
        let class = self
            .classes
            .get(tc)
            .ok_or_else(|| format!("task class `{tc}` is not registered"))?;
        // The failing scores are not copied: a case's list is in log order,
        // so those in the window are a suffix of it.
        let cases: Vec<FoldedCase> = self
            .cases
            .iter()
            .filter(|(_, c)| c.task_class == tc)
            .map(|(id, c)| FoldedCase {
                record: self.case_record(id, c, class, false),
                failing: self.case_numbers.get(id).and_then(|n| class.failing.get(n)),
            })
            .collect();
        // `commit::view` reads neither the cases' root nor their count.
        let record = self.class_record(tc, class, &[], String::new());
        let settings = &view.settings;
        let memo = cache.memos.get(tc);
        let mut boot = |xs: &[f64], seed| {
            let key = (settings.confidence.to_bits(), settings.resamples, seed);
            let known = memo.and_then(|m| m.iter().find(|(k, x, _)| *k == key && same_bits(x, xs)));
            match known {
                Some((_, _, ci)) => *ci,
                None => bca(xs, settings.confidence, settings.resamples, seed),
            }
        };
        let committed = commit::view_with(
            &record,
            &cases,
            self.size,
            view.now_micros,
            settings,
            &mut boot,
        );
        match commit::first_difference(&committed, view) {
            Some(field) => Err(format!(
                "`{field}` differs from what the per-case state gives"
            )),
            None => Ok(()),
        }
    }

    /// Case `id`'s committed record; `class` is the fold of its task class.
    /// Without `failures`, its list of failing scores is left empty.
    fn case_record(&self, id: &str, c: &CaseFold, class: &ClassFold, failures: bool) -> CaseRecord {
        let n = self.case_numbers.get(id);
        CaseRecord {
            record: "case".to_owned(),
            task_class: c.task_class.clone(),
            case_id: id.to_owned(),
            curation_class: c.curation_class.clone(),
            active: c.active,
            latest: n.and_then(|n| class.newest.get(n)).map(|s| LatestScore {
                index: s.index,
                leaf_hash: ledger::hash::hex32(&s.leaf_hash),
                sequenced_at: s.at,
                score: s.score,
                passed: s.passed,
            }),
            failures: n
                .filter(|_| failures)
                .and_then(|n| class.failing.get(n))
                .map(|f| f.as_slice().to_vec())
                .unwrap_or_default(),
        }
    }

    /// Task class `name`'s committed record, with its cases' records and
    /// their root.
    fn class_record(
        &self,
        name: &str,
        c: &ClassFold,
        cases: &[CaseRecord],
        cases_root: String,
    ) -> ClassRecord {
        ClassRecord {
            record: "task_class".to_owned(),
            task_class: name.to_owned(),
            tier: c.tier,
            silver: c.silver.clone(),
            gold: c.gold.clone(),
            pending_proposals: c.pending_proposals.len() as u64,
            registered: c.registered,
            cases: cases.len() as u64,
            cases_root,
        }
    }

    /// The state committed at this size (docs/COMPLETENESS.md): every
    /// registered class with all its cases, sorted by name and case id.
    pub fn state(&self) -> commit::State {
        let mut by_class: BTreeMap<&str, Vec<CaseRecord>> = BTreeMap::new();
        for (id, c) in &self.cases {
            let Some(class) = self.classes.get(&c.task_class) else {
                continue;
            };
            by_class
                .entry(c.task_class.as_str())
                .or_default()
                .push(self.case_record(id, c, class, true));
        }
        let classes = self
            .classes
            .iter()
            .map(|(name, c)| {
                let cases = by_class.remove(name.as_str()).unwrap_or_default();
                let root = ledger::hash::to_hex(&commit::cases_root(&cases));
                ClassState {
                    class: self.class_record(name, c, &cases, root),
                    cases,
                }
            })
            .collect();
        commit::State { classes }
    }

    /// The projection's bytes for a checkpoint (postcard).
    pub fn to_bytes(&self) -> Vec<u8> {
        postcard::to_stdvec(self).unwrap_or_default()
    }

    /// [`Projection::to_bytes`] written after the room for a seal's header,
    /// into a buffer sized once: the projection at 10M scores is tens of
    /// megabytes, and is saved every minute.
    pub fn to_unsealed(&self) -> ledger::sealed::Unsealed {
        let len = postcard::serialize_with_flavor::<_, postcard::ser_flavors::Size, usize>(
            self,
            Default::default(),
        )
        .unwrap_or(0);
        let body = ledger::sealed::Unsealed::with_capacity(len);
        postcard::to_extend(self, body)
            .unwrap_or_else(|_| ledger::sealed::Unsealed::with_capacity(0))
    }

    /// Reads bytes written by [`Projection::to_bytes`]; `None` when they
    /// do not decode, or name a case twice (a fold numbers each case once,
    /// and a view finds a case by its one number).
    pub fn from_bytes(b: &[u8]) -> Option<Projection> {
        let mut p: Projection = postcard::from_bytes(b).ok()?;
        p.case_numbers = (0u32..)
            .zip(&p.case_names)
            .map(|(n, id)| (id.clone(), n))
            .collect();
        if p.case_numbers.len() != p.case_names.len() {
            return None;
        }
        p.active_by_number = p.case_names.iter().map(|id| p.active_mark(id)).collect();
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_projection_that_names_a_case_twice_is_refused() {
        let mut p = Projection::default();
        p.case_number("case-a");
        p.case_number("case-b");
        let reloaded = Projection::from_bytes(&p.to_bytes()).expect("reload");
        assert_eq!(reloaded, p);
        p.case_names.push("case-a".to_owned());
        assert_eq!(Projection::from_bytes(&p.to_bytes()), None);
    }
}
