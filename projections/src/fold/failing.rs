//! A case's failing scores in log order, with running totals kept beside
//! them, so that the failures since a time cost a binary search over the
//! totals and at most [`STRIDE`] additions, whatever the length of the
//! list. [`Projection::recheck`](super::Projection::recheck) asks this for
//! every case of a class before a recommendation is signed; walking every
//! failing score instead made its cost grow with the log (about 5 ms a
//! recommendation at 10M entries, `perf record`).
//!
//! Saved and compared as the list alone: the totals are derived from it,
//! rebuilt when a checkpoint is read, and never trusted from outside.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::Failures;
use crate::commit::FailedScore;

/// Scores per block: a total is kept at the start of every block.
const STRIDE: usize = 64;

#[derive(Debug, Clone, Default)]
pub(super) struct FailingScores {
    /// In log order, so in order of sequencing time.
    scores: Vec<FailedScore>,
    /// Block `k`: the sequencing time of `scores[k * STRIDE]` and the sum
    /// of `scores[..k * STRIDE]`.
    blocks: Vec<(i64, Failures)>,
    /// The sum of every score.
    all: Failures,
}

fn add(total: &mut Failures, f: &FailedScore) {
    total.block += u64::from(f.block);
    total.warn += u64::from(f.warn);
    total.info += u64::from(f.info);
}

impl FailingScores {
    /// Appends a score sequenced no earlier than the last.
    pub(super) fn push(&mut self, f: FailedScore) {
        if self.scores.len().is_multiple_of(STRIDE) {
            self.blocks.push((f.sequenced_at, self.all.clone()));
        }
        add(&mut self.all, &f);
        self.scores.push(f);
    }

    pub(super) fn as_slice(&self) -> &[FailedScore] {
        &self.scores
    }

    /// The failures of the scores sequenced at or after `start`: equal to
    /// [`crate::commit::sum_failures`] over the suffix of the list from the first
    /// such score.
    pub(super) fn since(&self, start: i64) -> Failures {
        // The last block that starts before `start`: the first score at or
        // after it is in that block, or at the start of the next.
        let k = self.blocks.partition_point(|(at, _)| *at < start);
        if k == 0 {
            return self.all.clone();
        }
        let (_, before_block) = &self.blocks[k - 1];
        let block = &self.scores[(k - 1) * STRIDE..self.scores.len().min(k * STRIDE)];
        let within = block.partition_point(|f| f.sequenced_at < start);
        let mut before = before_block.clone();
        for f in &block[..within] {
            add(&mut before, f);
        }
        Failures {
            block: self.all.block - before.block,
            warn: self.all.warn - before.warn,
            info: self.all.info - before.info,
        }
    }

    /// The whole list, in sum ([`crate::commit::sum_failures`] over every score).
    #[cfg(test)]
    fn total(&self) -> Failures {
        crate::commit::sum_failures(self.scores.iter())
    }
}

impl From<Vec<FailedScore>> for FailingScores {
    fn from(scores: Vec<FailedScore>) -> Self {
        let mut out = FailingScores {
            scores: Vec::with_capacity(scores.len()),
            blocks: Vec::with_capacity(scores.len().div_ceil(STRIDE)),
            all: Failures::default(),
        };
        for f in scores {
            out.push(f);
        }
        out
    }
}

impl PartialEq for FailingScores {
    fn eq(&self, other: &Self) -> bool {
        self.scores == other.scores
    }
}

impl Serialize for FailingScores {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.scores.serialize(s)
    }
}

/// A list out of sequencing order is refused: the log never holds one
/// (the sequencer refuses a time earlier than the entry before), so a
/// saved one was not written by a fold, and its totals would disagree
/// with a walk of the list.
impl<'de> Deserialize<'de> for FailingScores {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let scores = Vec::<FailedScore>::deserialize(d)?;
        if let Some(w) = scores
            .windows(2)
            .find(|w| w[1].sequenced_at < w[0].sequenced_at)
        {
            return Err(serde::de::Error::custom(format!(
                "failing score at index {} is sequenced before the one at index {}",
                w[1].index, w[0].index
            )));
        }
        Ok(FailingScores::from(scores))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commit;
    use proptest::prelude::*;

    fn list(times: &[i64], counts: &[(u32, u32, u32)]) -> Vec<FailedScore> {
        let mut sorted = times.to_vec();
        sorted.sort_unstable();
        sorted
            .iter()
            .zip(counts.iter().cycle())
            .enumerate()
            .map(|(i, (&at, &(block, warn, info)))| FailedScore {
                index: i as u64,
                sequenced_at: at,
                block,
                warn,
                info,
            })
            .collect()
    }

    fn suffix_sum(scores: &[FailedScore], start: i64) -> Failures {
        let from = scores.partition_point(|f| f.sequenced_at < start);
        commit::sum_failures(scores[from..].iter())
    }

    proptest! {
        /// Any start, over lists of up to five blocks with repeated times
        /// (several scores in one microsecond) and counts up to `u32::MAX`:
        /// the same totals as the walk of the suffix.
        #[test]
        fn since_equals_the_walk_of_the_suffix(
            times in proptest::collection::vec(-5i64..400, 0..(5 * STRIDE)),
            counts in proptest::collection::vec(
                (prop_oneof![0u32..3, Just(u32::MAX)], 0u32..5, 0u32..5), 1..8),
            starts in proptest::collection::vec(-10i64..410, 1..16),
        ) {
            let scores = list(&times, &counts);
            let failing = FailingScores::from(scores.clone());
            for start in starts.into_iter().chain([i64::MIN, i64::MAX]) {
                prop_assert_eq!(failing.since(start), suffix_sum(&scores, start));
            }
            prop_assert_eq!(failing.since(i64::MIN), failing.total());
        }
    }

    #[test]
    fn block_edges_and_equal_times() {
        // Every score at one of three times, the changes at block edges.
        let mut times = vec![10; STRIDE];
        times.extend(vec![20; STRIDE]);
        times.extend(vec![30; 1]);
        let scores = list(&times, &[(1, 2, 3)]);
        let failing = FailingScores::from(scores.clone());
        for start in [9, 10, 11, 20, 21, 30, 31] {
            assert_eq!(failing.since(start), suffix_sum(&scores, start), "{start}");
        }
        assert_eq!(failing.since(31), Failures::default());
        assert_eq!(FailingScores::default().since(0), Failures::default());
    }

    #[test]
    fn saved_as_the_list_alone() {
        let scores = list(&[1, 2, 3], &[(1, 0, 0)]);
        let failing = FailingScores::from(scores.clone());
        assert_eq!(
            postcard::to_allocvec(&failing).expect("encodes"),
            postcard::to_allocvec(&scores).expect("encodes")
        );
        let back: FailingScores =
            postcard::from_bytes(&postcard::to_allocvec(&scores).expect("encodes"))
                .expect("decodes");
        assert_eq!(back.since(2), failing.since(2));
    }

    #[test]
    fn a_saved_list_out_of_sequencing_order_is_refused() {
        let mut scores = list(&[1, 2, 3], &[(1, 0, 0)]);
        scores.swap(0, 2);
        let bytes = postcard::to_allocvec(&scores).expect("encodes");
        let err = postcard::from_bytes::<FailingScores>(&bytes).expect_err("out of order");
        assert!(matches!(err, postcard::Error::SerdeDeCustom), "{err:?}");
    }
}
