//! Completeness by commitment: the projection's per-case state, committed
//! in Merkle trees whose root the ledger records in the log
//! (`state.committed`), so that an answer can prove it left nothing out
//! without the reader replaying the log (docs/COMPLETENESS.md).
//!
//! Two levels, both RFC 6962 trees over canonical JSON records
//! (docs/FORMAT.md §7):
//!
//! - the **case tree** of a task class: one [`CaseRecord`] per case of the
//!   class (active or retired), sorted by case id;
//! - the **state tree**: one [`ClassRecord`] per registered task class,
//!   sorted by name, each carrying its case tree's size and root.
//!
//! A reader given a class record, every case record of the class and the
//! class record's inclusion proof under a committed state root rebuilds the
//! case tree (a case left out, added or altered changes its root) and
//! computes the decision numbers itself ([`view`]). A class the server says
//! does not exist is shown absent by its two neighbours in the sorted state
//! tree ([`check_absent`]).
//!
//! What is committed is what the recommendation depends on: the tier and
//! its rules, each case's curation class and status, its latest eligible
//! score and every failure of its eligible scores, with their sequencing
//! times (the window is applied by the reader, since it depends on the time
//! of the read). Cost, run and shared-kernel counts are not committed.

use std::collections::BTreeMap;

use events::model::{Tier, TierRule};
use ledger::merkle::{verify_inclusion, Frontier};
use ledger::Hash;
use serde::{Deserialize, Serialize};

use crate::fold::{
    bootstrap_seed, score_stats, Evidence, Failures, Recommendation, ScoreStats, Settings,
};
use crate::rules::{self, RuleInput};
use crate::stats::{bca, Interval};

/// The curation class whose scores are promotion evidence.
const HELD_OUT: &str = "held-out";

/// The newest eligible (microvm) score of a case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatestScore {
    pub index: u64,
    pub leaf_hash: String,
    /// When the score was sequenced (µs since the Unix epoch, UTC).
    pub sequenced_at: i64,
    pub score: f64,
    pub passed: bool,
}

/// An eligible score of a case that carried failure modes, by severity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailedScore {
    pub index: u64,
    pub sequenced_at: i64,
    pub block: u32,
    pub warn: u32,
    pub info: u32,
}

/// One case of a task class, as committed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseRecord {
    /// Always `case`: a case record can never be read as a class record.
    pub record: String,
    pub task_class: String,
    pub case_id: String,
    pub curation_class: String,
    /// False once the case was retired.
    pub active: bool,
    /// The newest eligible score recorded for the class since it was
    /// registered, if any.
    pub latest: Option<LatestScore>,
    /// Every eligible score of the case with failure modes, in log order.
    pub failures: Vec<FailedScore>,
}

/// One task class, as committed: its tier, rules and the root of its case
/// tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassRecord {
    /// Always `task_class`.
    pub record: String,
    pub task_class: String,
    pub tier: Tier,
    pub silver: TierRule,
    pub gold: TierRule,
    pub pending_proposals: u64,
    /// The log index of the registration the class's fold started at.
    pub registered: u64,
    /// How many case records the case tree holds, and its RFC 6962 root
    /// (hex).
    pub cases: u64,
    pub cases_root: String,
}

/// A task class with all its cases.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassState {
    pub class: ClassRecord,
    pub cases: Vec<CaseRecord>,
}

/// The committed state of a whole projection: every class, sorted by name.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct State {
    pub classes: Vec<ClassState>,
}

/// Where a class sits in the state tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassProof {
    /// The class record's position among the state tree's `count` leaves.
    pub index: u64,
    pub count: u64,
    /// Its RFC 6962 inclusion proof (hex hashes, leaf to root).
    pub path: Vec<String>,
}

/// A class record shown as a neighbour of an absent name, with its proof.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Neighbour {
    pub class: ClassRecord,
    pub proof: ClassProof,
}

/// Why a committed answer does not hold.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CommitError {
    #[error("{field}: {reason}")]
    Malformed { field: String, reason: String },
    #[error("case records: {0}")]
    Cases(String),
    #[error("the class record is not in the committed state: {0}")]
    NotCommitted(String),
    #[error("the absence of task class `{0}` is not proven: {1}")]
    NotAbsent(String, String),
}

fn malformed(field: &str, reason: impl Into<String>) -> CommitError {
    CommitError::Malformed {
        field: field.to_owned(),
        reason: reason.into(),
    }
}

/// A record's canonical JSON (docs/FORMAT.md §7): the bytes its leaf hash
/// is taken over.
pub fn record_bytes<T: Serialize>(record: &T) -> Vec<u8> {
    serde_json::to_value(record)
        .ok()
        .and_then(|v| events::canonical::from_json(&v))
        .map(|v| events::canonical::encode(&v))
        .unwrap_or_default()
}

/// The RFC 6962 root of the tree over `leaves` (leaf hashes).
pub fn tree_root(leaves: &[Hash]) -> Hash {
    let mut f = Frontier::new();
    for l in leaves {
        f.push(*l);
    }
    f.root()
}

/// The RFC 6962 inclusion proof (PATH) of leaf `index` among `leaves`,
/// leaf to root. Empty when `index` is out of range.
pub fn tree_path(leaves: &[Hash], index: usize) -> Vec<Hash> {
    fn path(d: &[Hash], m: usize, out: &mut Vec<Hash>) {
        if d.len() <= 1 {
            return;
        }
        // The largest power of two below the size (RFC 6962 §2.1).
        let k = d.len().next_power_of_two() / 2;
        if m < k {
            path(&d[..k], m, out);
            out.push(tree_root(&d[k..]));
        } else {
            path(&d[k..], m - k, out);
            out.push(tree_root(&d[..k]));
        }
    }
    let mut out = Vec::new();
    if index < leaves.len() {
        path(leaves, index, &mut out);
    }
    out
}

/// The case tree's size and root over `cases` (as given: sorted by case id).
pub fn cases_root(cases: &[CaseRecord]) -> Hash {
    let mut buf = String::new();
    let leaves: Vec<Hash> = cases.iter().map(|c| case_leaf(c, &mut buf)).collect();
    tree_root(&leaves)
}

/// A case record's leaf hash: over the bytes [`record_bytes`] gives, written
/// straight into `buf` rather than through two JSON trees. A state root
/// hashes every case record, each with every failing score of its case, so
/// a start that checks a projection checkpoint against the log's commitment
/// writes millions of them. A record the canonical form cannot carry as
/// such (an integer past 2^53 − 1, a score that is not finite) takes the
/// general path, which says what it does with it.
fn case_leaf(c: &CaseRecord, buf: &mut String) -> Hash {
    use events::canonical::{python_float_repr, write_str, MAX_SAFE_INTEGER};
    use std::fmt::Write as _;
    let safe = |n: i64| (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&n);
    let safe_u = |n: u64| n <= MAX_SAFE_INTEGER as u64;
    let plain = c
        .latest
        .as_ref()
        .is_none_or(|l| safe_u(l.index) && safe(l.sequenced_at) && l.score.is_finite())
        && c.failures
            .iter()
            .all(|f| safe_u(f.index) && safe(f.sequenced_at));
    if !plain {
        return ledger::leaf_hash(&record_bytes(c));
    }
    buf.clear();
    // Keys in byte order, as the canonical form sorts them.
    buf.push_str(if c.active {
        "{\"active\":true,\"case_id\":"
    } else {
        "{\"active\":false,\"case_id\":"
    });
    write_str(buf, &c.case_id);
    buf.push_str(",\"curation_class\":");
    write_str(buf, &c.curation_class);
    buf.push_str(",\"failures\":[");
    for (i, f) in c.failures.iter().enumerate() {
        if i > 0 {
            buf.push(',');
        }
        let _ = write!(
            buf,
            "{{\"block\":{},\"index\":{},\"info\":{},\"sequenced_at\":{},\"warn\":{}}}",
            f.block, f.index, f.info, f.sequenced_at, f.warn
        );
    }
    buf.push_str("],\"latest\":");
    match &c.latest {
        None => buf.push_str("null"),
        Some(l) => {
            let _ = write!(buf, "{{\"index\":{},\"leaf_hash\":", l.index);
            write_str(buf, &l.leaf_hash);
            let _ = write!(
                buf,
                ",\"passed\":{},\"score\":{},\"sequenced_at\":{}}}",
                l.passed,
                python_float_repr(l.score),
                l.sequenced_at
            );
        }
    }
    buf.push_str(",\"record\":");
    write_str(buf, &c.record);
    buf.push_str(",\"task_class\":");
    write_str(buf, &c.task_class);
    buf.push('}');
    ledger::leaf_hash(buf.as_bytes())
}

fn class_leaf(c: &ClassRecord) -> Hash {
    ledger::leaf_hash(&record_bytes(c))
}

impl State {
    fn leaves(&self) -> Vec<Hash> {
        self.classes.iter().map(|c| class_leaf(&c.class)).collect()
    }

    /// The state root: the RFC 6962 root over the class records.
    pub fn root(&self) -> Hash {
        tree_root(&self.leaves())
    }

    /// The class named `task_class`, if registered.
    pub fn class(&self, task_class: &str) -> Option<&ClassState> {
        self.position(task_class).ok().map(|i| &self.classes[i])
    }

    fn position(&self, task_class: &str) -> Result<usize, usize> {
        self.classes
            .binary_search_by(|c| c.class.task_class.as_str().cmp(task_class))
    }

    fn proof_at(&self, leaves: &[Hash], i: usize) -> ClassProof {
        ClassProof {
            index: i as u64,
            count: leaves.len() as u64,
            path: tree_path(leaves, i)
                .iter()
                .map(ledger::hash::to_hex)
                .collect(),
        }
    }

    /// The inclusion proof of `task_class`'s record, or (when it is not
    /// registered) its neighbours in the sorted state tree.
    pub fn proof(&self, task_class: &str) -> Result<ClassProof, Box<[Option<Neighbour>; 2]>> {
        let leaves = self.leaves();
        match self.position(task_class) {
            Ok(i) => Ok(self.proof_at(&leaves, i)),
            Err(i) => {
                let at = |j: usize| Neighbour {
                    class: self.classes[j].class.clone(),
                    proof: self.proof_at(&leaves, j),
                };
                Err(Box::new([
                    i.checked_sub(1).map(at),
                    (i < self.classes.len()).then(|| at(i)),
                ]))
            }
        }
    }
}

fn parse_path(p: &ClassProof) -> Result<Vec<Hash>, CommitError> {
    p.path
        .iter()
        .map(|h| {
            ledger::hash::from_hex(h).ok_or_else(|| malformed("path", "not a 64-digit hex hash"))
        })
        .collect()
}

fn check_included(root: &Hash, class: &ClassRecord, p: &ClassProof) -> Result<(), CommitError> {
    if class.record != "task_class" {
        return Err(malformed("class.record", "must be `task_class`"));
    }
    verify_inclusion(&class_leaf(class), p.index, p.count, &parse_path(p)?, root)
        .map_err(|e| CommitError::NotCommitted(format!("{} at {}: {e}", class.task_class, p.index)))
}

/// Checks that `class` and `cases` are exactly what the state root `root`
/// commits for the class: the cases are case records of the class, sorted
/// by case id without repeats, and hash to the class record's case tree;
/// the class record is included at `proof` under `root`.
pub fn check_class(
    root: &Hash,
    class: &ClassRecord,
    cases: &[CaseRecord],
    proof: &ClassProof,
) -> Result<(), CommitError> {
    for (i, c) in cases.iter().enumerate() {
        if c.record != "case" {
            return Err(CommitError::Cases(format!(
                "record {i} is not a case record"
            )));
        }
        if c.task_class != class.task_class {
            return Err(CommitError::Cases(format!(
                "case `{}` belongs to `{}`",
                c.case_id, c.task_class
            )));
        }
        if i > 0 && cases[i - 1].case_id >= c.case_id {
            return Err(CommitError::Cases(format!(
                "case `{}` is out of order or repeated",
                c.case_id
            )));
        }
    }
    if class.cases != cases.len() as u64
        || ledger::hash::to_hex(&cases_root(cases)) != class.cases_root
    {
        return Err(CommitError::Cases(format!(
            "the {} records given do not hash to the committed case tree ({} cases, root {})",
            cases.len(),
            class.cases,
            class.cases_root
        )));
    }
    check_included(root, class, proof)
}

/// Checks that the state root `root` (over `count` classes) has no class
/// named `task_class`: its neighbours are adjacent leaves whose names
/// enclose it, or the first (last) leaf is above (below) it, or the tree is
/// empty.
pub fn check_absent(
    root: &Hash,
    count: u64,
    task_class: &str,
    neighbours: &[Option<Neighbour>; 2],
) -> Result<(), CommitError> {
    let no = |why: &str| CommitError::NotAbsent(task_class.to_owned(), why.to_owned());
    for n in neighbours.iter().flatten() {
        if n.proof.count != count {
            return Err(no("a neighbour is proven in a tree of another size"));
        }
        check_included(root, &n.class, &n.proof)?;
    }
    match neighbours {
        [None, None] => {
            if count == 0 && *root == tree_root(&[]) {
                Ok(())
            } else {
                Err(no("no neighbours were given for a non-empty state"))
            }
        }
        [Some(l), None] => {
            if l.class.task_class.as_str() < task_class && l.proof.index + 1 == count {
                Ok(())
            } else {
                Err(no(
                    "the left neighbour is not the last class before the name",
                ))
            }
        }
        [None, Some(r)] => {
            if r.class.task_class.as_str() > task_class && r.proof.index == 0 {
                Ok(())
            } else {
                Err(no(
                    "the right neighbour is not the first class after the name",
                ))
            }
        }
        [Some(l), Some(r)] => {
            if l.class.task_class.as_str() < task_class
                && r.class.task_class.as_str() > task_class
                && l.proof.index + 1 == r.proof.index
            {
                Ok(())
            } else {
                Err(no("the neighbours are not adjacent around the name"))
            }
        }
    }
}

/// The decision numbers of a task class, computed from its committed
/// records alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommittedView {
    pub task_class: String,
    /// The log size the state was committed at.
    pub tree_size: u64,
    pub now_micros: i64,
    pub window_start_micros: i64,
    pub settings: Settings,
    pub tier: Tier,
    pub active_cases_by_curation_class: BTreeMap<String, usize>,
    pub pending_proposals: usize,
    pub held_out: ScoreStats,
    pub all_cases: ScoreStats,
    pub failures: Failures,
    pub evidence: Vec<Evidence>,
    pub recommendation: Recommendation,
}

/// The view of a class from its records at `now` (µs, UTC) with
/// `settings`: the same numbers, bit for bit, as the fold's view at the
/// size the records were committed at ([`Projection::view`]), for the
/// fields [`CommittedView`] has.
///
/// [`Projection::view`]: crate::Projection::view
pub fn view(
    class: &ClassRecord,
    cases: &[CaseRecord],
    tree_size: u64,
    now: i64,
    settings: &Settings,
) -> CommittedView {
    view_with(class, cases, tree_size, now, settings, &mut |xs, seed| {
        bca(xs, settings.confidence, settings.resamples, seed)
    })
}

/// One case as [`view_with`] reads it: a committed [`CaseRecord`], or a
/// case of a fold that keeps its failing scores in order.
pub trait CaseInput {
    /// The record, whose `failures` [`view_with`] does not read.
    fn record(&self) -> &CaseRecord;
    /// The failures of its eligible scores sequenced at or after `start`.
    fn failures_since(&self, start: i64) -> Failures;
}

impl CaseInput for CaseRecord {
    fn record(&self) -> &CaseRecord {
        self
    }

    /// Every failing score is looked at: a record read from an answer
    /// need not list them in order.
    fn failures_since(&self, start: i64) -> Failures {
        sum_failures(self.failures.iter().filter(|f| f.sequenced_at >= start))
    }
}

/// The failures of `scores`, by severity.
pub fn sum_failures<'a>(scores: impl Iterator<Item = &'a FailedScore>) -> Failures {
    let mut failures = Failures::default();
    for f in scores {
        failures.block += u64::from(f.block);
        failures.warn += u64::from(f.warn);
        failures.info += u64::from(f.info);
    }
    failures
}

/// [`view`], with `boot(xs, seed)` giving the BCa interval of `xs` (the
/// bootstrap itself, or an answer it gave before for the same bits).
pub fn view_with<C: CaseInput>(
    class: &ClassRecord,
    cases: &[C],
    tree_size: u64,
    now: i64,
    settings: &Settings,
    boot: &mut dyn FnMut(&[f64], u64) -> Option<Interval>,
) -> CommittedView {
    let start = now.saturating_sub(settings.window_seconds.saturating_mul(1_000_000));
    let mut by_class: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = Failures::default();
    let mut latest: Vec<(&CaseRecord, &LatestScore)> = Vec::new();
    for input in cases.iter().filter(|c| c.record().active) {
        let c = input.record();
        *by_class.entry(c.curation_class.clone()).or_default() += 1;
        let f = input.failures_since(start);
        failures.block += f.block;
        failures.warn += f.warn;
        failures.info += f.info;
        if let Some(l) = c.latest.as_ref().filter(|l| l.sequenced_at >= start) {
            latest.push((c, l));
        }
    }
    let seed = bootstrap_seed(&class.task_class);
    let mut stats_of = |set: &[&(&CaseRecord, &LatestScore)]| {
        let xs: Vec<f64> = set.iter().map(|(_, l)| l.score).collect();
        let passed = set.iter().filter(|(_, l)| l.passed).count();
        score_stats(&xs, passed, settings, |xs| boot(xs, seed))
    };
    let held: Vec<&(&CaseRecord, &LatestScore)> = latest
        .iter()
        .filter(|(c, _)| c.curation_class == HELD_OUT)
        .collect();
    let all: Vec<&(&CaseRecord, &LatestScore)> = latest.iter().collect();
    let held_out = stats_of(&held);
    let input = RuleInput {
        active_held_out: by_class.get(HELD_OUT).copied().unwrap_or(0),
        scored_held_out: held.len(),
        lower_bound: held_out.mean_ci.map(|i| i.low),
        block_failures: failures.block as usize,
    };
    let (recommended, rationale) = rules::recommend(class.tier, &input, |t| match t {
        Tier::Silver => Some(class.silver.clone()),
        Tier::Gold => Some(class.gold.clone()),
        Tier::Bronze => None,
    });
    CommittedView {
        task_class: class.task_class.clone(),
        tree_size,
        now_micros: now,
        window_start_micros: start,
        settings: settings.clone(),
        tier: class.tier,
        active_cases_by_curation_class: by_class,
        pending_proposals: class.pending_proposals as usize,
        all_cases: stats_of(&all),
        held_out,
        failures,
        evidence: held
            .iter()
            .map(|(c, l)| Evidence {
                index: l.index,
                leaf_hash: l.leaf_hash.clone(),
                case_id: c.case_id.clone(),
                score: l.score,
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

/// The first top-level field of `committed` that `other` (the fold's
/// view, or a served committed view) does not have with the same value,
/// compared as JSON so that numbers are compared bit for bit; `None` when
/// they agree on every field of `committed`. Each field's JSON text is
/// compared first and parsed into a value only when the texts differ:
/// the same text is the same value, and a view of 1,000 held-out cases
/// made into JSON values twice cost more than the rest of the check.
pub fn first_difference(committed: &CommittedView, other: &impl Serialize) -> Option<String> {
    type Fields<'a> = BTreeMap<&'a str, &'a serde_json::value::RawValue>;
    let cannot = || Some("the views could not be compared".to_owned());
    let (Ok(a), Ok(b)) = (serde_json::to_vec(committed), serde_json::to_vec(other)) else {
        return cannot();
    };
    let (Ok(a), Ok(b)) = (
        serde_json::from_slice::<Fields>(&a),
        serde_json::from_slice::<Fields>(&b),
    ) else {
        return cannot();
    };
    let value = |raw: &serde_json::value::RawValue| {
        serde_json::from_str::<serde_json::Value>(raw.get()).ok()
    };
    a.iter()
        .find(|(k, va)| match b.get(*k) {
            None => true,
            Some(vb) if vb.get() == va.get() => false,
            Some(vb) => {
                let a = value(va);
                a.is_none() || a != value(vb)
            }
        })
        .map(|(k, _)| (*k).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn any_case() -> impl Strategy<Value = CaseRecord> {
        let text = prop_oneof![
            "[a-z0-9/_.-]{0,12}",
            any::<String>(),
            Just("tab\t quote\" back\\ nul\u{0} del\u{7f} é 🦀".to_owned()),
        ];
        let int = prop_oneof![
            0u64..1000,
            Just((1u64 << 53) - 1),
            Just(1u64 << 53),
            any::<u64>()
        ];
        let time = prop_oneof![any::<i64>(), -(1i64 << 53)..(1i64 << 53)];
        let score = prop_oneof![
            any::<f64>(),
            0.0f64..1.0,
            Just(-0.0),
            Just(1e16),
            Just(1e-5),
            Just(f64::NAN),
            Just(f64::INFINITY),
        ];
        let latest = proptest::option::of((
            int.clone(),
            text.clone(),
            time.clone(),
            score,
            any::<bool>(),
        ))
        .prop_map(|l| {
            l.map(
                |(index, leaf_hash, sequenced_at, score, passed)| LatestScore {
                    index,
                    leaf_hash,
                    sequenced_at,
                    score,
                    passed,
                },
            )
        });
        let failure = (int, time, any::<u32>(), any::<u32>(), any::<u32>()).prop_map(
            |(index, sequenced_at, block, warn, info)| FailedScore {
                index,
                sequenced_at,
                block,
                warn,
                info,
            },
        );
        (
            text.clone(),
            text.clone(),
            text.clone(),
            text,
            any::<bool>(),
            latest,
            proptest::collection::vec(failure, 0..4),
        )
            .prop_map(
                |(record, task_class, case_id, curation_class, active, latest, failures)| {
                    CaseRecord {
                        record,
                        task_class,
                        case_id,
                        curation_class,
                        active,
                        latest,
                        failures,
                    }
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn a_case_leaf_written_directly_is_the_leaf_of_its_canonical_json(c in any_case()) {
            let mut buf = String::from("left over from the last record");
            prop_assert_eq!(case_leaf(&c, &mut buf), ledger::leaf_hash(&record_bytes(&c)));
        }
    }

    fn leaves(n: usize) -> Vec<Hash> {
        (0..n)
            .map(|i| ledger::leaf_hash(format!("leaf {i}").as_bytes()))
            .collect()
    }

    #[test]
    fn every_path_verifies_against_the_root_for_trees_up_to_33_leaves() {
        for n in 1..=33 {
            let l = leaves(n);
            let root = tree_root(&l);
            for i in 0..n {
                let p = tree_path(&l, i);
                verify_inclusion(&l[i], i as u64, n as u64, &p, &root)
                    .unwrap_or_else(|e| panic!("n {n} i {i}: {e}"));
            }
        }
    }

    fn class(name: &str) -> ClassRecord {
        ClassRecord {
            record: "task_class".into(),
            task_class: name.into(),
            tier: Tier::Bronze,
            silver: TierRule {
                min_cases_for_promotion: 1,
                score_threshold: 0.5,
            },
            gold: TierRule {
                min_cases_for_promotion: 2,
                score_threshold: 0.9,
            },
            pending_proposals: 0,
            registered: 0,
            cases: 0,
            cases_root: ledger::hash::to_hex(&tree_root(&[])),
        }
    }

    fn state(names: &[&str]) -> State {
        State {
            classes: names
                .iter()
                .map(|n| ClassState {
                    class: class(n),
                    cases: Vec::new(),
                })
                .collect(),
        }
    }

    #[test]
    fn absence_is_proven_before_between_and_after_the_classes_and_in_an_empty_state() {
        for names in [&["b", "d"][..], &[][..], &["b"][..]] {
            let s = state(names);
            let root = s.root();
            for missing in ["a", "c", "e"] {
                let n = s.proof(missing).expect_err("absent");
                check_absent(&root, names.len() as u64, missing, &n)
                    .unwrap_or_else(|e| panic!("{names:?} {missing}: {e}"));
            }
        }
    }

    #[test]
    fn a_present_class_cannot_be_shown_absent_by_non_adjacent_neighbours() {
        let s = state(&["a", "b", "c"]);
        let root = s.root();
        let Ok(pa) = s.proof("a") else { panic!() };
        let Ok(pc) = s.proof("c") else { panic!() };
        let n = [
            Some(Neighbour {
                class: class("a"),
                proof: pa,
            }),
            Some(Neighbour {
                class: class("c"),
                proof: pc,
            }),
        ];
        assert!(matches!(
            check_absent(&root, 3, "b", &n),
            Err(CommitError::NotAbsent(..))
        ));
    }
}
