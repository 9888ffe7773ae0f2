//! The held-out statistics recomputed from the evidence leaves a view or a
//! recommendation cites, with nothing else: the check the promotion gate
//! runs on an offline bundle (`ledger verify-bundle`), the one the server
//! runs before it signs a `promotion.recommended`, and the one `ledger
//! audit` runs on every projection it reads. One definition, so the three
//! can never drift apart.

use events::{decode_leaf, Event};

use crate::fold::{bootstrap_seed, ScoreStats, Settings};
use crate::stats::bca_recent;

/// Why evidence does not support the statistics stated with it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvidenceError {
    #[error("evidence {index} is not a ledger event: {reason}")]
    Undecodable { index: u64, reason: String },
    #[error("evidence {index} is not a score")]
    NotAScore { index: u64 },
    #[error("evidence {index} is a score of `{found}`, not of `{task_class}`")]
    OtherTaskClass {
        index: u64,
        task_class: String,
        found: String,
    },
    #[error("evidence {index} was sequenced before the window starts")]
    OutsideWindow { index: u64 },
    #[error("evidence {index} names case `{found}`; the view says `{stated}`")]
    OtherCase {
        index: u64,
        stated: String,
        found: String,
    },
    #[error("evidence {index} scored {found}; the view says {stated}")]
    OtherScore { index: u64, stated: f64, found: f64 },
    #[error("evidence {index} appears more than once")]
    Repeated { index: u64 },
    #[error("case `{case}` is cited twice (only the latest score of a case counts)")]
    CaseTwice { case: String },
    #[error("the stated held-out {field} does not follow from the evidence")]
    Stated { field: &'static str },
    #[error("the view cites {cited} evidence entries; {given} leaves were given")]
    Count { cited: usize, given: usize },
}

/// One cited evidence leaf: its log index and its bytes (already checked to
/// be the log's own: re-hashed to its leaf hash and proven included, or read
/// through the log's checked read).
pub struct Cited<'a> {
    pub index: u64,
    pub leaf: &'a [u8],
    /// The RFC 6962 leaf hash of `leaf`, as its reader computed it from
    /// these very bytes (a checked read of the log hashes what it reads;
    /// a client hashes a leaf to check its proof): the key a decoded
    /// score is kept by ([`Decoded`]). A hash of other bytes would be given
    /// their decoding.
    pub leaf_hash: &'a ledger::Hash,
    /// The case id the view says this score is for, when it says one.
    pub case_id: Option<&'a str>,
    /// The score the view says the leaf records, when it says one (bit for
    /// bit: a view never shows a number its leaf does not hold).
    pub score: Option<f64>,
}

/// What the statistics read from a score leaf.
#[derive(Clone)]
struct ScoreRead {
    task_class: String,
    case_id: String,
    score: f64,
    passed: bool,
    /// When it was sequenced (µs, UTC).
    at: i64,
}

/// The score read from `leaf`: `None` when it is another kind of event,
/// the rejection's text when it does not decode.
fn read_score(leaf: &[u8]) -> Result<Option<ScoreRead>, String> {
    let (d, at) = decode_leaf(leaf).map_err(|r| r.to_string())?;
    Ok(match d.payload.event {
        Event::ScoreRecorded(s) => Some(ScoreRead {
            task_class: s.task_class,
            case_id: s.case_id,
            score: s.score.score,
            passed: s.score.passed,
            at,
        }),
        _ => None,
    })
}

type ReadResult = Result<Option<ScoreRead>, String>;

/// [`read_score`]'s answers by the RFC 6962 leaf hash of the leaf's bytes,
/// for the check a server runs on every projection it serves: the same few
/// hundred leaves, decoded again at each request, were a third of its time.
/// The answer is a function of the bytes alone, and the key names the
/// bytes (SHA-256 is collision resistant), so a kept answer is the one
/// decoding would give. The key is the hash the caller already computed
/// from the bytes ([`Cited::leaf_hash`]): hashing every leaf again here
/// was a sixth of an answer's time. Bounded: at most
/// [`Decoded::KEPT`] readings, those unused longest dropped first.
struct Decoded {
    held: ledger::kept::Kept<[u8; 32], ReadResult>,
}

impl Decoded {
    const KEPT: usize = 16_384;

    fn score_of(&self, leaf: &[u8], leaf_hash: &ledger::Hash) -> ReadResult {
        debug_assert_eq!(ledger::leaf_hash(leaf), *leaf_hash, "the leaf's own hash");
        self.held
            .get_or_insert_with(leaf_hash.0, || read_score(leaf))
    }
}

static DECODED: std::sync::LazyLock<Decoded> = std::sync::LazyLock::new(|| Decoded {
    held: ledger::kept::Kept::new(Decoded::KEPT),
});

/// Options of [`held_out_from_evidence`].
pub struct Window {
    /// Scores sequenced before this time (µs, UTC) are outside the window.
    pub start_micros: Option<i64>,
}

/// Recomputes the held-out statistics of `task_class` from the cited score
/// leaves, in the order given (the view's order: by case id): count, mean
/// with its BCa interval (the task class's fixed seed), passes and the
/// Wilson interval.
pub fn held_out_from_evidence(
    task_class: &str,
    cited: &[Cited<'_>],
    settings: &Settings,
    window: &Window,
) -> Result<ScoreStats, EvidenceError> {
    let mut scores = Vec::with_capacity(cited.len());
    let mut passed = 0usize;
    let mut seen = std::collections::BTreeSet::new();
    let mut cases = std::collections::BTreeSet::new();
    for c in cited {
        if !seen.insert(c.index) {
            return Err(EvidenceError::Repeated { index: c.index });
        }
        let s = match DECODED.score_of(c.leaf, c.leaf_hash) {
            Ok(Some(s)) => s,
            Ok(None) => return Err(EvidenceError::NotAScore { index: c.index }),
            Err(reason) => {
                return Err(EvidenceError::Undecodable {
                    index: c.index,
                    reason,
                })
            }
        };
        let at = s.at;
        if s.task_class != task_class {
            return Err(EvidenceError::OtherTaskClass {
                index: c.index,
                task_class: task_class.to_owned(),
                found: s.task_class,
            });
        }
        if window.start_micros.is_some_and(|start| at < start) {
            return Err(EvidenceError::OutsideWindow { index: c.index });
        }
        if let Some(stated) = c.case_id {
            if stated != s.case_id {
                return Err(EvidenceError::OtherCase {
                    index: c.index,
                    stated: stated.to_owned(),
                    found: s.case_id,
                });
            }
        }
        if let Some(stated) = c.score {
            if stated.to_bits() != s.score.to_bits() {
                return Err(EvidenceError::OtherScore {
                    index: c.index,
                    stated,
                    found: s.score,
                });
            }
        }
        if !cases.insert(s.case_id.clone()) {
            return Err(EvidenceError::CaseTwice { case: s.case_id });
        }
        passed += usize::from(s.passed);
        scores.push(s.score);
    }
    // The check's own bootstrap: given again when this process computed it
    // for these very bits before (a server checking the same view twice),
    // over draws of its own, never taken from how the view computed its own.
    Ok(crate::fold::score_stats(&scores, passed, settings, |xs| {
        bca_recent(
            xs,
            settings.confidence,
            settings.resamples,
            bootstrap_seed(task_class),
        )
    }))
}

/// Checks `stated` against what the evidence implies, field by field (bit
/// for bit: both sides run the same arithmetic in the same order).
pub fn check_stated(stated: &ScoreStats, recomputed: &ScoreStats) -> Result<(), EvidenceError> {
    let same = |a: Option<f64>, b: Option<f64>| a.map(f64::to_bits) == b.map(f64::to_bits);
    let fields: [(&'static str, bool); 6] = [
        ("cases", stated.cases == recomputed.cases),
        ("mean", same(stated.mean, recomputed.mean)),
        ("mean_ci", stated.mean_ci == recomputed.mean_ci),
        ("passed", stated.passed == recomputed.passed),
        ("pass_rate", same(stated.pass_rate, recomputed.pass_rate)),
        (
            "pass_rate_ci",
            stated.pass_rate_ci == recomputed.pass_rate_ci,
        ),
    ];
    match fields.iter().find(|(_, ok)| !ok) {
        Some((field, _)) => Err(EvidenceError::Stated { field }),
        None => Ok(()),
    }
}

/// Checks a view's held-out statistics against the evidence it cites:
/// `leaves[i]` must be the log's own leaf for `view.evidence[i]` (the
/// caller read it through a checked read, or proved it included), with
/// the RFC 6962 leaf hash the caller computed from those bytes. The
/// statistics are recomputed from those leaves alone, within the view's
/// window, and must equal the view's bit for bit; so must each evidence
/// entry's stated case and score.
pub fn check_view(
    view: &crate::TaskClassView,
    leaves: &[(ledger::Hash, &[u8])],
) -> Result<(), EvidenceError> {
    if view.evidence.len() != leaves.len() {
        return Err(EvidenceError::Count {
            cited: view.evidence.len(),
            given: leaves.len(),
        });
    }
    let cited: Vec<Cited<'_>> = view
        .evidence
        .iter()
        .zip(leaves)
        .map(|(e, (leaf_hash, leaf))| Cited {
            index: e.index,
            leaf,
            leaf_hash,
            case_id: Some(&e.case_id),
            score: Some(e.score),
        })
        .collect();
    let recomputed = held_out_from_evidence(
        &view.task_class,
        &cited,
        &view.settings,
        &Window {
            start_micros: Some(view.window_start_micros),
        },
    )?;
    check_stated(&view.held_out, &recomputed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_reading_is_the_one_decoding_gives_and_other_bytes_are_decoded_afresh() {
        let memo = Decoded {
            held: ledger::kept::Kept::new(Decoded::KEPT),
        };
        let bad = b"not a logged record".to_vec();
        let key = ledger::leaf_hash(&bad);
        let first = memo.score_of(&bad, &key).err();
        assert!(first.is_some());
        assert_eq!(memo.score_of(&bad, &key).err(), first);
        assert_eq!(read_score(&bad).err(), first);
        // One byte more is another key, decoded on its own.
        let mut other = bad.clone();
        other.push(b'!');
        let key = ledger::leaf_hash(&other);
        assert_eq!(memo.score_of(&other, &key).err(), read_score(&other).err());
        assert_eq!(memo.held.len(), 2);
    }
}
