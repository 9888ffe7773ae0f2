//! The fold: `(Projection, entry) → Projection`, with no clock, no storage and
//! no I/O. [`Projection::view`] answers for one task class at a time the
//! caller supplies, and only at the checkpoint the fold has reached.

use std::collections::{BTreeMap, BTreeSet};

use ledger::events::model::{CaseSource, Event, Isolation, RuleOutcome, Tier, TierRule};
use ledger::merkle::Frontier;
use ledger::Hash;
use serde::{Deserialize, Serialize};

use crate::rules::{self, RuleInput};
use crate::stats::{bca, bca_reusing, wilson, Interval, KeptDraws};

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

/// One score, as much of it as a window's sums need: the projection keeps
/// one of these per score, so it is kept small (40 bytes). What a view
/// reports about a case's score is in [`Newest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ScoreObs {
    at: i64,
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
    scores: Vec<ScoreObs>,
    /// By case number.
    newest: BTreeMap<u32, Newest>,
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
    /// Active cases by task class, then curation class: what `cases` says,
    /// kept as counts so that a view need not scan every case.
    active: BTreeMap<String, BTreeMap<String, usize>>,
    /// Every case id a score named, numbered in order of first appearance.
    case_names: Vec<String>,
    /// `case_names` inverted; not saved, rebuilt by [`Projection::from_bytes`].
    #[serde(skip)]
    case_numbers: BTreeMap<String, u32>,
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
    let n = xs.len();
    let passed = scores.iter().filter(|s| s.passed).count();
    ScoreStats {
        cases: n,
        mean: (n > 0).then(|| xs.iter().sum::<f64>() / n as f64),
        mean_ci: boot(&xs, seed),
        passed,
        pass_rate: (n > 0).then(|| passed as f64 / n as f64),
        pass_rate_ci: wilson(passed as u64, n as u64, settings.confidence),
    }
}

/// An active case's name, its fold and its newest eligible score.
type Latest<'a> = (&'a str, &'a CaseFold, &'a Newest);

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
                *total -= u64::from(n);
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

/// Running window totals per task class, for [`Projection::view_cached`].
/// Not part of the projection: it is rebuilt from it on demand.
#[derive(Debug, Clone, Default)]
pub struct ViewCache {
    classes: std::collections::HashMap<String, WindowAgg>,
    /// The bootstrap draws of recent views: a view after one new score
    /// reuses them (`stats::bca_reusing`).
    draws: KeptDraws,
}

type BootMemo = Vec<((u64, usize, u64), Vec<f64>, Option<Interval>)>;

/// One class's window: the scores at positions `first..end` of its
/// `scores`, folded.
#[derive(Debug, Clone)]
struct WindowAgg {
    window_seconds: i64,
    first: usize,
    end: usize,
    /// The class registration the totals are for: a class whose scores
    /// were replaced (re-registered) no longer matches.
    registered: u64,
    /// The costs of the window's scores, in log order (summed in that order,
    /// as `view` does).
    costs: std::collections::VecDeque<f64>,
    /// Per case number with eligible scores in the window (any case;
    /// filtered by activity when answering): how many, and their failure
    /// counts (block, warn, info).
    cases: std::collections::HashMap<u32, (u64, [u64; 3])>,
    shared: Failures,
    shared_scores: usize,
    /// The last two bootstrap inputs and their intervals.
    memo: BootMemo,
}

impl WindowAgg {
    fn new(window_seconds: i64, registered: u64, first: usize) -> WindowAgg {
        WindowAgg {
            window_seconds,
            first,
            end: first,
            registered,
            costs: Default::default(),
            cases: Default::default(),
            shared: Failures::default(),
            shared_scores: 0,
            memo: Vec::new(),
        }
    }

    /// Whether these totals can be moved forward to a window starting at
    /// `first` in `class`.
    fn fits(&self, class: &ClassFold, window_seconds: i64, first: usize) -> bool {
        self.window_seconds == window_seconds
            && self.registered == class.registered
            && class.scores.len() >= self.end
            && first >= self.first
    }

    /// Folds in the scores after `end` and drops those before `first`.
    fn advance(&mut self, class: &ClassFold, first: usize) {
        if first >= self.end {
            // Everything folded so far has left the window.
            let keep = std::mem::take(&mut self.memo);
            *self = WindowAgg::new(self.window_seconds, self.registered, first);
            self.memo = keep;
        }
        for pos in self.end..class.scores.len() {
            let s = &class.scores[pos];
            self.costs.push_back(s.cost);
            if s.eligible {
                let (n, f) = self.cases.entry(s.case).or_default();
                *n += 1;
                f[0] += u64::from(s.block);
                f[1] += u64::from(s.warn);
                f[2] += u64::from(s.info);
            } else {
                self.shared_scores += 1;
                self.shared.add(s, 1);
            }
        }
        self.end = class.scores.len();
        for pos in self.first..first {
            let s = &class.scores[pos];
            self.costs.pop_front();
            if s.eligible {
                if let Some((n, f)) = self.cases.get_mut(&s.case) {
                    *n -= 1;
                    f[0] -= u64::from(s.block);
                    f[1] -= u64::from(s.warn);
                    f[2] -= u64::from(s.info);
                    if *n == 0 {
                        self.cases.remove(&s.case);
                    }
                }
            } else {
                self.shared_scores -= 1;
                self.shared.add(s, -1);
            }
        }
        self.first = first.max(self.first);
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
            ledger::events::decode_logged_leaf(leaf).map_err(|r| ProjectionError::Undecodable {
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
                        registered: index,
                        scores: Vec::new(),
                        newest: BTreeMap::new(),
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
                self.runs
                    .insert(e.run_id, (e.task_class, e.isolation_class));
            }
            Event::ScoreRecorded(e) => {
                let isolation = self
                    .runs
                    .get(&e.run_id)
                    .map(|r| r.1)
                    .unwrap_or(Isolation::SharedKernel);
                if self.classes.contains_key(&e.task_class) {
                    let case = self.case_number(&e.case_id);
                    let Some(c) = self.classes.get_mut(&e.task_class) else {
                        return Ok(());
                    };
                    let sev = |s: &str| {
                        e.score
                            .failure_modes
                            .iter()
                            .filter(|f| f.severity == s)
                            .count() as u32
                    };
                    let eligible = isolation == Isolation::Microvm;
                    c.scores.push(ScoreObs {
                        at,
                        cost: e.score.cost_usd,
                        case,
                        eligible,
                        block: sev("block"),
                        warn: sev("warn"),
                        info: sev("info"),
                    });
                    if eligible {
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
            _ => {}
        }
        Ok(())
    }

    /// The number of case id `id`, numbering it if it is new.
    fn case_number(&mut self, id: &str) -> u32 {
        if let Some(&n) = self.case_numbers.get(id) {
            return n;
        }
        let n = self.case_names.len() as u32;
        self.case_names.push(id.to_owned());
        self.case_numbers.insert(id.to_owned(), n);
        n
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
        self.cases.insert(id, case);
    }

    /// Registered task classes.
    pub fn task_classes(&self) -> impl Iterator<Item = &str> {
        self.classes.keys().map(String::as_str)
    }

    /// For a view at the checkpoint `(size, root)`: the class, the window's
    /// start (µs), and the position of its first score. Sequencing time never
    /// decreases along the log, so the window is a suffix of the scores.
    fn window(
        &self,
        task_class: &str,
        now: i64,
        settings: &Settings,
        size: u64,
        root: &Hash,
    ) -> Result<(&ClassFold, i64, usize), ProjectionError> {
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
        let first = class.scores.partition_point(|s| s.at < start);
        Ok((class, start, first))
    }

    /// The active case `id`, if it belongs to `task_class`.
    fn active_case(&self, id: &str, task_class: &str) -> Option<&CaseFold> {
        self.cases
            .get(id)
            .filter(|c| c.active && c.task_class == task_class)
    }

    /// The answer for `task_class` at `now` (µs, UTC), only if the fold is at
    /// exactly the checkpoint `(size, root)`. This scans the window; it is
    /// the definition [`Projection::view_cached`] is tested against.
    pub fn view(
        &self,
        task_class: &str,
        now: i64,
        settings: &Settings,
        size: u64,
        root: &Hash,
    ) -> Result<TaskClassView, ProjectionError> {
        let (class, start, first) = self.window(task_class, now, settings, size, root)?;
        let window = &class.scores[first..];
        let mut scored = BTreeSet::new();
        let mut w = WindowTotals::default();
        for s in window {
            w.cost += s.cost;
            if !s.eligible {
                w.shared_scores += 1;
                w.shared.add(s, 1);
                continue;
            }
            if self
                .active_case(self.case_name(s.case), task_class)
                .is_some()
            {
                w.failures.add(s, 1);
                scored.insert(s.case);
            }
        }
        w.scores = window.len();
        // Scored in the window, so their newest eligible score is in it.
        let mut latest: Vec<Latest> = scored
            .into_iter()
            .filter_map(|n| {
                let name = self.case_name(n);
                let case = self.active_case(name, task_class)?;
                Some((name, case, class.newest.get(&n)?))
            })
            .collect();
        latest.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut boot = |x: &[f64], seed| bca(x, settings.confidence, settings.resamples, seed);
        Ok(self.assemble(
            class, task_class, now, start, settings, size, root, latest, w, &mut boot,
        ))
    }

    /// [`Projection::view`], answered from running per-class window totals
    /// kept in `cache`: the work is the scores added and expired since the
    /// cache last answered for this class, plus the statistics over the
    /// latest score of each case. Bit for bit the same answer as `view`.
    ///
    /// `cache` must only ever be used with this projection as it grows (the
    /// driver keeps one per projector); a cache that no longer fits the
    /// class's scores, or a window that moved back, starts over.
    pub fn view_cached(
        &self,
        cache: &mut ViewCache,
        task_class: &str,
        now: i64,
        settings: &Settings,
        size: u64,
        root: &Hash,
    ) -> Result<TaskClassView, ProjectionError> {
        let (class, start, first) = self.window(task_class, now, settings, size, root)?;
        let ViewCache { classes, draws } = cache;
        let agg = classes
            .entry(task_class.to_owned())
            .or_insert_with(|| WindowAgg::new(settings.window_seconds, class.registered, first));
        if !agg.fits(class, settings.window_seconds, first) {
            *agg = WindowAgg::new(settings.window_seconds, class.registered, first);
        }
        agg.advance(class, first);
        let mut w = WindowTotals {
            cost: agg.costs.iter().fold(0.0, |sum, c| sum + c),
            scores: agg.end - agg.first,
            shared_scores: agg.shared_scores,
            shared: agg.shared.clone(),
            failures: Failures::default(),
        };
        let mut latest = Vec::with_capacity(agg.cases.len());
        for (&n, (_, f)) in &agg.cases {
            let name = self.case_name(n);
            let Some(case) = self.active_case(name, task_class) else {
                continue;
            };
            w.failures.block += f[0];
            w.failures.warn += f[1];
            w.failures.info += f[2];
            if let Some(newest) = class.newest.get(&n) {
                latest.push((name, case, newest));
            }
        }
        latest.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let memo = &mut agg.memo;
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
        Ok(self.assemble(
            class, task_class, now, start, settings, size, root, latest, w, &mut boot,
        ))
    }

    /// The view from the window's totals and its latest score per active
    /// case (in case-id order); `boot` computes a BCa interval.
    #[allow(clippy::too_many_arguments)]
    fn assemble(
        &self,
        class: &ClassFold,
        task_class: &str,
        now: i64,
        start: i64,
        settings: &Settings,
        size: u64,
        root: &Hash,
        latest: Vec<Latest>,
        w: WindowTotals,
        boot: &mut dyn FnMut(&[f64], u64) -> Option<Interval>,
    ) -> TaskClassView {
        let by_class = self.active.get(task_class).cloned().unwrap_or_default();
        let active_held_out = by_class.get(HELD_OUT).copied().unwrap_or(0);
        let held: Vec<Latest> = latest
            .iter()
            .filter(|(_, case, _)| case.curation_class == HELD_OUT)
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
            root: hex::encode(root.0),
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

    /// The projection's bytes for a checkpoint (postcard).
    pub fn to_bytes(&self) -> Vec<u8> {
        postcard::to_stdvec(self).unwrap_or_default()
    }

    /// Reads bytes written by [`Projection::to_bytes`].
    pub fn from_bytes(b: &[u8]) -> Option<Projection> {
        let mut p: Projection = postcard::from_bytes(b).ok()?;
        p.case_numbers = (0u32..)
            .zip(&p.case_names)
            .map(|(n, id)| (id.clone(), n))
            .collect();
        Some(p)
    }
}
