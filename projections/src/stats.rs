//! Interval estimates, checked against SciPy (`testdata/stats_golden.json`).
//!
//! - [`wilson`]: the Wilson score interval for a proportion, as
//!   `scipy.stats.binomtest(k, n).proportion_ci(method="wilson")`.
//! - [`bca`]: the bias-corrected and accelerated bootstrap interval of the
//!   mean, as `scipy.stats.bootstrap(..., method="BCa")`, with a fixed,
//!   documented random stream so that the same data always gives the same
//!   interval.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};
use std::sync::Arc;

/// A two-sided interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

fn std_normal() -> Normal {
    // Mean 0 and standard deviation 1 are always valid parameters.
    Normal::standard()
}

/// The two-sided critical value for `confidence` (0.95 → 1.959964…).
pub fn z_value(confidence: f64) -> f64 {
    std_normal().inverse_cdf(0.5 + confidence / 2.0)
}

/// Wilson score interval for `k` successes in `n` trials; `None` when n = 0.
pub fn wilson(k: u64, n: u64, confidence: f64) -> Option<Interval> {
    if n == 0 {
        return None;
    }
    let (k, n) = (k as f64, n as f64);
    let z = z_value(confidence);
    let p = k / n;
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = z / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    // At k = 0 and k = n the bounds are exactly 0 and 1; floating point
    // would leave a residue of about 1e-17.
    let (k0, kn) = (k == 0.0, k == n);
    Some(Interval {
        low: if k0 { 0.0 } else { (center - half).max(0.0) },
        high: if kn { 1.0 } else { (center + half).min(1.0) },
    })
}

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny generator whose output
/// sequence is fixed by its definition, so bootstrap results never change
/// with a dependency upgrade.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GAMMA);
        mix(self.0)
    }

    /// A uniform index in `0..n` (Lemire's multiply-shift; n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output for the generator state `z` (after its increment).
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Resamples computed side by side. Each resample is one serial chain of
/// floating-point additions (4 cycles each); interleaving independent
/// resamples lets the CPU overlap them.
const LANES: usize = 8;

/// SplitMix64's state after `draws` draws from `seed`: `seed + draws·γ`.
fn state_at(seed: u64, draws: u64) -> u64 {
    seed.wrapping_add(draws.wrapping_mul(GAMMA))
}

/// The bootstrap means: resample `r` is the mean of `x[i]` for the draws
/// `r·n .. (r+1)·n` of `SplitMix64::new(seed)`, each `below(n)`, summed in
/// draw order. Bit for bit what drawing them one by one gives
/// (`resample_means_serial` in the tests): SplitMix64's state after `k`
/// draws is `seed + k·γ`, so each lane starts at its own resample, and each
/// lane adds in the same order.
fn resample_means(x: &[f64], resamples: usize, seed: u64) -> Vec<f64> {
    let n = x.len();
    let nf = n as f64;
    let scale = n as u128;
    let mut boot = Vec::with_capacity(resamples);
    let mut r = 0;
    while r + LANES <= resamples {
        let mut state = [0u64; LANES];
        for (l, st) in state.iter_mut().enumerate() {
            *st = state_at(seed, ((r + l) as u64).wrapping_mul(n as u64));
        }
        let mut sum = [0.0f64; LANES];
        for _ in 0..n {
            for l in 0..LANES {
                state[l] = state[l].wrapping_add(GAMMA);
                sum[l] += x[((u128::from(mix(state[l])) * scale) >> 64) as usize];
            }
        }
        boot.extend(sum.iter().map(|s| s / nf));
        r += LANES;
    }
    let mut rng = SplitMix64::new(state_at(seed, (r as u64).wrapping_mul(n as u64)));
    for _ in r..resamples {
        let mut s = 0.0;
        for _ in 0..n {
            s += x[rng.below(n)];
        }
        boot.push(s / nf);
    }
    boot
}

/// The draws of one bootstrap (`n` values, `resamples` resamples, `seed`),
/// kept so that the next interval over the same number of values reuses
/// them instead of drawing again. A recommendation after one new score
/// changes one value, not the draws, so an incremental view spends its
/// time adding, not generating.
///
/// The indices are stored lane by lane (`LANES` resamples side by side,
/// draw by draw), so [`Draws::means`] reads them in order. Each resample
/// still adds its values in draw order: the means are bit for bit those of
/// [`bca`]'s own draws.
#[derive(Debug, Clone)]
pub struct Draws {
    n: usize,
    resamples: usize,
    seed: u64,
    /// `ceil(resamples / LANES)` groups of `n × LANES` indices; the lanes
    /// past `resamples` in the last group draw index 0 and are discarded.
    idx: Vec<u16>,
}

impl Draws {
    /// The largest number of values an index fits (`u16`).
    pub const MAX_VALUES: usize = 1 << 16;

    /// Draws for `n` values, or `None` when `n` is 0 or above
    /// [`Draws::MAX_VALUES`].
    pub fn new(n: usize, resamples: usize, seed: u64) -> Option<Draws> {
        if n == 0 || n > Self::MAX_VALUES {
            return None;
        }
        let groups = resamples.div_ceil(LANES);
        let mut idx = Vec::with_capacity(Self::size(n, resamples));
        let scale = n as u128;
        for g in 0..groups {
            let mut state = [0u64; LANES];
            for (l, st) in state.iter_mut().enumerate() {
                *st = state_at(seed, ((g * LANES + l) as u64).wrapping_mul(n as u64));
            }
            let live = (resamples - g * LANES).min(LANES);
            for _ in 0..n {
                for (l, st) in state.iter_mut().enumerate() {
                    *st = st.wrapping_add(GAMMA);
                    let i = ((u128::from(mix(*st)) * scale) >> 64) as u16;
                    idx.push(if l < live { i } else { 0 });
                }
            }
        }
        Some(Draws {
            n,
            resamples,
            seed,
            idx,
        })
    }

    /// How many indices the draws for `n` values and `resamples` hold:
    /// whole groups of `LANES` resamples.
    fn size(n: usize, resamples: usize) -> usize {
        resamples
            .div_ceil(LANES)
            .saturating_mul(LANES)
            .saturating_mul(n)
    }

    /// How many indices are held (2 bytes each).
    pub fn len(&self) -> usize {
        self.idx.len()
    }

    /// Whether no indices are held (never, for a value of this type).
    pub fn is_empty(&self) -> bool {
        self.idx.is_empty()
    }

    /// Whether these are the draws for `n` values, `resamples`, `seed`.
    pub fn fits(&self, n: usize, resamples: usize, seed: u64) -> bool {
        self.n == n && self.resamples == resamples && self.seed == seed
    }

    /// The bootstrap means of `x` (which must have `n` values).
    fn means(&self, x: &[f64]) -> Vec<f64> {
        let n = self.n;
        debug_assert_eq!(x.len(), n);
        let nf = n as f64;
        // Any u16 indexes this table, so the additions need no bounds checks.
        let mut table: Box<[f64; Self::MAX_VALUES]> = vec![0.0; Self::MAX_VALUES]
            .into_boxed_slice()
            .try_into()
            .unwrap_or_else(|_| unreachable!("the length is MAX_VALUES"));
        table[..n].copy_from_slice(x);
        let mut boot = Vec::with_capacity(self.resamples);
        for group in self.idx.chunks_exact(n * LANES) {
            let mut sum = [0.0f64; LANES];
            for draw in group.as_chunks::<LANES>().0 {
                for l in 0..LANES {
                    sum[l] += table[usize::from(draw[l])];
                }
            }
            let live = (self.resamples - boot.len()).min(LANES);
            boot.extend(sum[..live].iter().map(|s| s / nf));
        }
        boot
    }
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// Linear-interpolated percentile of sorted data (NumPy's default method).
fn percentile_sorted(sorted: &[f64], q: f64) -> f64 {
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// BCa bootstrap interval of the mean of `x` with `resamples` resamples
/// drawn from `SplitMix64::new(seed)`.
///
/// Edges, where SciPy returns NaN, we return a defined answer:
/// - n = 0: `None` (no data, no interval);
/// - n = 1, or all values equal: the degenerate interval `[x, x]`.
pub fn bca(x: &[f64], confidence: f64, resamples: usize, seed: u64) -> Option<Interval> {
    bca_from(x, confidence, resamples, |x| {
        resample_means(x, resamples, seed)
    })
}

/// [`bca`], given again from the last [`Recent::KEPT`] intervals this
/// function computed in this process when the inputs are the same bits:
/// the interval is a function of the bits of `x`, `confidence`,
/// `resamples` and `seed` alone. Only intervals computed here are kept,
/// never one computed for a view ([`bca_reusing`] with a fold's draws), so
/// a check that recomputes an interval this way takes nothing from the
/// view's answers or draws (the code that sums draws, [`Draws::means`],
/// is shared with the view). An interval not kept is computed over
/// draws of its own ([`check_draws`], never a fold's), made by
/// [`Draws::new`] and summed by [`Draws::means`]: bit for bit [`bca`]'s
/// (the tests hold both to drawing one by one), without drawing again
/// while the number of values stays the same.
pub fn bca_recent(x: &[f64], confidence: f64, resamples: usize, seed: u64) -> Option<Interval> {
    let key = (confidence.to_bits(), resamples, seed);
    if let Some(ci) = RECENT.find(key, x) {
        return ci;
    }
    let ci = bca_from(x, confidence, resamples, |x| {
        match check_draws(x.len(), resamples, seed) {
            Some(d) => d.means(x),
            None => resample_means(x, resamples, seed),
        }
    });
    RECENT.keep(key, x, ci);
    ci
}

/// The draws [`bca_recent`] keeps, apart from any a view keeps, within
/// [`CHECK_DRAWS_BUDGET`] indices. Shared, so a check sums them without
/// holding the lock: concurrent checks do not wait for each other.
static CHECK_DRAWS: std::sync::Mutex<KeptDraws> =
    std::sync::Mutex::new(KeptDraws::new(CHECK_DRAWS_BUDGET));

/// 4 Mi indices (8 MB): two bootstraps of 1,000 values and 2,000 resamples.
const CHECK_DRAWS_BUDGET: usize = 4 << 20;

/// The check's draws for `n` values, `resamples` and `seed`: those kept,
/// or new ones kept now; `None` when they would not fit the budget.
fn check_draws(n: usize, resamples: usize, seed: u64) -> Option<Arc<Draws>> {
    // Whole after any panic: entries are pushed and removed whole.
    let held = || CHECK_DRAWS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(d) = held().find(n, resamples, seed) {
        return Some(d);
    }
    if Draws::size(n, resamples) > CHECK_DRAWS_BUDGET {
        return None;
    }
    // Drawn outside the lock; two checks that both missed each draw once.
    let d = Arc::new(Draws::new(n, resamples, seed)?);
    let mut kept = held();
    if kept.find(n, resamples, seed).is_none() {
        kept.keep(Arc::clone(&d));
    }
    Some(d)
}

/// The inputs of a bootstrap besides its values: the bits of the
/// confidence, the resamples and the seed.
type BootKey = (u64, usize, u64);

/// One remembered bootstrap: its key, the bits of its values, its interval.
type Remembered = (BootKey, Vec<u64>, Option<Interval>);

/// The answers of the last [`Recent::KEPT`] bootstraps in this process, by
/// exact input. Looking one up costs a comparison of the values; a
/// bootstrap of 1,000 values with 2,000 resamples costs two million draws.
/// What asks the same bootstrap again: the server's check of a view
/// before it serves or signs it recomputes the held-out interval from the
/// evidence leaves it reads back ([`crate::evidence`]), and those are the
/// values the view's own interval was computed from.
pub struct Recent {
    held: std::sync::Mutex<Vec<Remembered>>,
}

impl Recent {
    /// How many answers are kept.
    pub const KEPT: usize = 8;

    const fn new() -> Recent {
        Recent {
            held: std::sync::Mutex::new(Vec::new()),
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Vec<Remembered>> {
        // The list is whole after any panic: entries are pushed and
        // removed whole.
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn find(&self, key: BootKey, x: &[f64]) -> Option<Option<Interval>> {
        let held = self.held();
        held.iter()
            .rev()
            .find(|(k, xs, _)| {
                *k == key && xs.len() == x.len() && xs.iter().zip(x).all(|(a, b)| *a == b.to_bits())
            })
            .map(|(_, _, ci)| *ci)
    }

    fn keep(&self, key: BootKey, x: &[f64], ci: Option<Interval>) {
        let bits: Vec<u64> = x.iter().map(|v| v.to_bits()).collect();
        let mut held = self.held();
        held.retain(|(k, xs, _)| !(*k == key && *xs == bits));
        if held.len() >= Self::KEPT {
            held.remove(0);
        }
        held.push((key, bits, ci));
    }
}

static RECENT: Recent = Recent::new();

/// [`bca`] with its draws kept in `kept`: reused when the same number of
/// values, resamples and seed come again; made and kept otherwise, when
/// there is room. The interval is bit for bit [`bca`]'s.
pub fn bca_reusing(
    x: &[f64],
    confidence: f64,
    resamples: usize,
    seed: u64,
    kept: &mut KeptDraws,
) -> Option<Interval> {
    bca_from(x, confidence, resamples, |x| {
        match kept.get(x.len(), resamples, seed) {
            Some(d) => d.means(x),
            None => resample_means(x, resamples, seed),
        }
    })
}

/// The draws of recent bootstraps, most recently used last, within a budget
/// of indices (2 bytes each). A bootstrap larger than the budget, or over
/// more than [`Draws::MAX_VALUES`] values, is drawn afresh each time.
/// Draws are never changed once made, so a clone shares them.
#[derive(Debug, Clone)]
pub struct KeptDraws {
    held: Vec<Arc<Draws>>,
    budget: usize,
}

impl Default for KeptDraws {
    /// 16 Mi indices: 32 MB, the draws of eight 1,000-value bootstraps of
    /// 2,000 resamples.
    fn default() -> Self {
        KeptDraws::new(16 << 20)
    }
}

impl KeptDraws {
    /// Room for `budget` indices.
    pub const fn new(budget: usize) -> KeptDraws {
        KeptDraws {
            held: Vec::new(),
            budget,
        }
    }

    /// How many indices are held.
    pub fn held(&self) -> usize {
        self.held.iter().map(|d| d.len()).sum()
    }

    /// The kept draws for `n` values, `resamples`, `seed`, now the most
    /// recently used.
    fn find(&mut self, n: usize, resamples: usize, seed: u64) -> Option<Arc<Draws>> {
        let at = self.held.iter().position(|d| d.fits(n, resamples, seed))?;
        let d = self.held.remove(at);
        self.held.push(Arc::clone(&d));
        Some(d)
    }

    /// Keeps `d`, the least recently used making room; not kept when it
    /// would not fit the budget.
    fn keep(&mut self, d: Arc<Draws>) {
        if d.len() > self.budget {
            return;
        }
        while self.held() + d.len() > self.budget {
            self.held.remove(0);
        }
        self.held.push(d);
    }

    /// The draws for `n` values, `resamples`, `seed`: those kept, or new
    /// ones kept now; `None` when they would not fit the budget.
    fn get(&mut self, n: usize, resamples: usize, seed: u64) -> Option<Arc<Draws>> {
        if let Some(d) = self.find(n, resamples, seed) {
            return Some(d);
        }
        if Draws::size(n, resamples) > self.budget {
            return None;
        }
        let d = Arc::new(Draws::new(n, resamples, seed)?);
        self.keep(Arc::clone(&d));
        Some(d)
    }
}

fn bca_from(
    x: &[f64],
    confidence: f64,
    resamples: usize,
    means: impl FnOnce(&[f64]) -> Vec<f64>,
) -> Option<Interval> {
    let n = x.len();
    if n == 0 {
        return None;
    }
    let theta = mean(x);
    if x.iter().all(|v| *v == x[0]) || resamples == 0 {
        return Some(Interval {
            low: theta,
            high: theta,
        });
    }
    let mut boot = means(x);
    // Bias correction: the share of resamples below the estimate (ties half).
    let below = boot.iter().filter(|b| **b < theta).count() as f64;
    let equal = boot.iter().filter(|b| **b == theta).count() as f64;
    let prop = (below + 0.5 * equal) / resamples as f64;
    let normal = std_normal();
    let z0 = normal.inverse_cdf(prop.clamp(1e-12, 1.0 - 1e-12));
    // Acceleration from the jackknife.
    let total: f64 = x.iter().sum();
    let jack: Vec<f64> = x.iter().map(|v| (total - v) / (n - 1) as f64).collect();
    let jmean = mean(&jack);
    let num: f64 = jack.iter().map(|j| (jmean - j).powi(3)).sum();
    let den: f64 = jack.iter().map(|j| (jmean - j).powi(2)).sum();
    let a = if den > 0.0 {
        num / (6.0 * den.powf(1.5))
    } else {
        0.0
    };
    let alpha = (1.0 - confidence) / 2.0;
    let adj = |q: f64| {
        let zq = normal.inverse_cdf(q);
        normal.cdf(z0 + (z0 + zq) / (1.0 - a * (z0 + zq)))
    };
    boot.sort_by(f64::total_cmp);
    Some(Interval {
        low: percentile_sorted(&boot, adj(alpha)),
        high: percentile_sorted(&boot, adj(1.0 - alpha)),
    })
}

/// An exact running sum that costs can also leave: Shewchuk's
/// non-overlapping partials, rounded once when read with the final step of
/// Python's `math.fsum`. The value is the exact sum of what is in it,
/// correctly rounded, whatever order terms arrived and left in. That is
/// what lets a window's cost move in both directions along the log and
/// still equal, bit for bit, a fresh sum over the window.
///
/// A term of magnitude 2^960 or more (or not finite) is counted instead of
/// added, and the value is infinite while one is in the sum; every other
/// sum of up to 2^64 terms stays finite.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExactSum {
    /// Non-overlapping, in increasing magnitude, none zero.
    partials: Vec<f64>,
    huge: u64,
}

/// 2^960: terms at least this large are counted in [`ExactSum::huge`].
const HUGE_TERM: f64 = f64::from_bits(0x7BF0_0000_0000_0000);

impl ExactSum {
    /// Adds `x` (`sign` > 0) or takes it away (`sign` < 0).
    pub fn change(&mut self, x: f64, sign: i8) {
        if !x.is_finite() || x.abs() >= HUGE_TERM {
            if sign > 0 {
                self.huge += 1;
            } else {
                self.huge = self.huge.saturating_sub(1);
            }
            return;
        }
        let mut x = if sign > 0 { x } else { -x };
        let mut kept = 0;
        for j in 0..self.partials.len() {
            let mut y = self.partials[j];
            if x.abs() < y.abs() {
                std::mem::swap(&mut x, &mut y);
            }
            let hi = x + y;
            let lo = y - (hi - x);
            if lo != 0.0 {
                self.partials[kept] = lo;
                kept += 1;
            }
            x = hi;
        }
        self.partials.truncate(kept);
        if x != 0.0 {
            self.partials.push(x);
        }
    }

    /// The sum, correctly rounded to the nearest f64 (ties to even).
    pub fn value(&self) -> f64 {
        if self.huge > 0 {
            return f64::INFINITY;
        }
        let p = &self.partials;
        let Some(mut n) = p.len().checked_sub(1) else {
            return 0.0;
        };
        let mut hi = p[n];
        let mut lo = 0.0;
        while n > 0 {
            let x = hi;
            n -= 1;
            let y = p[n];
            hi = x + y;
            lo = y - (hi - x);
            if lo != 0.0 {
                break;
            }
        }
        // Half-way between two f64s, with more below in the same
        // direction: round away from the tie.
        if n > 0 && ((lo < 0.0 && p[n - 1] < 0.0) || (lo > 0.0 && p[n - 1] > 0.0)) {
            let y = lo * 2.0;
            let x = hi + y;
            if y == x - hi {
                hi = x;
            }
        }
        hi
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_reference_values() {
        // First outputs for seed 1234567 from the reference C implementation.
        let mut r = SplitMix64::new(1234567);
        assert_eq!(r.next_u64(), 6457827717110365317);
        assert_eq!(r.next_u64(), 3203168211198807973);
    }

    #[test]
    fn wilson_edges() {
        assert_eq!(wilson(0, 0, 0.95), None);
        let all = wilson(10, 10, 0.95).expect("interval");
        assert!(all.high == 1.0 && all.low < 1.0);
        let none = wilson(0, 10, 0.95).expect("interval");
        assert!(none.low == 0.0 && none.high > 0.0);
    }

    /// The bootstrap as first written: one draw at a time.
    fn resample_means_serial(x: &[f64], resamples: usize, seed: u64) -> Vec<f64> {
        let n = x.len();
        let mut rng = SplitMix64::new(seed);
        (0..resamples)
            .map(|_| {
                let mut s = 0.0;
                for _ in 0..n {
                    s += x[rng.below(n)];
                }
                s / n as f64
            })
            .collect()
    }

    #[test]
    fn interleaved_resamples_are_bit_identical_to_serial_ones() {
        let mut g = SplitMix64::new(7);
        for n in [1usize, 2, 3, 7, 64, 1000] {
            let x: Vec<f64> = (0..n)
                .map(|_| (g.next_u64() % 1_000_003) as f64 / 1e6)
                .collect();
            for resamples in [0usize, 1, 7, 8, 9, 23, 2000] {
                for seed in [0u64, 1, u64::MAX, 0x1234_5678_9abc_def0] {
                    let slow = resample_means_serial(&x, resamples, seed);
                    let kept = Draws::new(n, resamples, seed).expect("n fits u16");
                    assert!(kept.fits(n, resamples, seed));
                    for fast in [resample_means(&x, resamples, seed), kept.means(&x)] {
                        assert_eq!(fast.len(), slow.len());
                        for (a, b) in fast.iter().zip(&slow) {
                            assert_eq!(
                                a.to_bits(),
                                b.to_bits(),
                                "n {n} resamples {resamples} seed {seed}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn kept_draws_give_the_same_interval_and_stay_within_budget() {
        let mut g = SplitMix64::new(11);
        let mut x: Vec<f64> = (0..300)
            .map(|_| (g.next_u64() % 1001) as f64 / 1e3)
            .collect();
        // Room for two sets of draws of 300 × 2,000.
        let mut kept = KeptDraws::new(2 * 300 * 2000);
        for round in 0..3 {
            // One value changes, as after a new score for one case.
            x[round * 7] = 0.123 * round as f64;
            let a = bca(&x, 0.95, 2000, 5);
            assert_eq!(
                a,
                bca_reusing(&x, 0.95, 2000, 5, &mut kept),
                "round {round}"
            );
            assert_eq!(kept.held(), 300 * 2000);
        }
        // A second seed fits beside the first; a third evicts the oldest.
        assert_eq!(
            bca(&x, 0.95, 2000, 6),
            bca_reusing(&x, 0.95, 2000, 6, &mut kept)
        );
        assert_eq!(kept.held(), 2 * 300 * 2000);
        assert_eq!(
            bca(&x, 0.95, 2000, 5),
            bca_reusing(&x, 0.95, 2000, 5, &mut kept)
        );
        assert_eq!(
            bca(&x, 0.95, 2000, 7),
            bca_reusing(&x, 0.95, 2000, 7, &mut kept)
        );
        assert_eq!(kept.held(), 2 * 300 * 2000);
        assert!(
            kept.held.iter().any(|d| d.fits(300, 2000, 5)),
            "5 was used last-but-one"
        );
        assert!(
            !kept.held.iter().any(|d| d.fits(300, 2000, 6)),
            "6 was evicted"
        );
        // Too large for the budget: drawn afresh, nothing evicted.
        x.extend_from_slice(&x.clone());
        assert_eq!(
            bca(&x, 0.95, 2000, 5),
            bca_reusing(&x, 0.95, 2000, 5, &mut kept)
        );
        assert_eq!(kept.held(), 2 * 300 * 2000);
        assert!(Draws::new(Draws::MAX_VALUES + 1, 1, 0).is_none());
        assert!(Draws::new(0, 1, 0).is_none());
    }

    #[test]
    fn recent_bootstraps_are_given_again_only_for_the_same_bits() {
        let mut g = SplitMix64::new(29);
        let mut x: Vec<f64> = (0..200)
            .map(|_| (g.next_u64() % 1001) as f64 / 1e3)
            .collect();
        let fresh = bca(&x, 0.95, 500, 3);
        assert_eq!(bca_recent(&x, 0.95, 500, 3), fresh);
        assert_eq!(bca_recent(&x, 0.95, 500, 3), fresh, "given again");
        // Another seed, confidence or value is another bootstrap.
        assert_eq!(bca_recent(&x, 0.95, 500, 4), bca(&x, 0.95, 500, 4));
        assert_eq!(bca_recent(&x, 0.9, 500, 3), bca(&x, 0.9, 500, 3));
        // Values equal as numbers but not as bits are other inputs: +0.0
        // kept first, then -0.0 asked.
        x[0] = 0.0;
        let plus = bca_recent(&x, 0.95, 500, 3);
        assert_eq!(plus, bca(&x, 0.95, 500, 3));
        x[0] = -0.0;
        assert!(RECENT.find((0.95f64.to_bits(), 500, 3), &x).is_none());
        assert_eq!(bca_recent(&x, 0.95, 500, 3), bca(&x, 0.95, 500, 3));
    }

    #[test]
    fn bca_edges() {
        assert_eq!(bca(&[], 0.95, 100, 1), None);
        assert_eq!(
            bca(&[0.7], 0.95, 100, 1),
            Some(Interval {
                low: 0.7,
                high: 0.7
            })
        );
        assert_eq!(
            bca(&[0.5; 9], 0.95, 100, 1),
            Some(Interval {
                low: 0.5,
                high: 0.5
            })
        );
        let x = [0.1, 0.4, 0.9, 0.6, 0.8];
        assert_eq!(
            bca(&x, 0.95, 500, 7),
            bca(&x, 0.95, 500, 7),
            "deterministic"
        );
    }

    #[test]
    fn exact_sum_is_correctly_rounded_like_python_fsum() {
        let sum = |xs: &[f64]| {
            let mut s = ExactSum::default();
            for &x in xs {
                s.change(x, 1);
            }
            s.value()
        };
        // Python: math.fsum(...) for each of these.
        assert_eq!(sum(&[0.1; 10]), 1.0);
        assert_eq!(sum(&[1e-16, 1.0, 1e16]), 1.0000000000000002e16);
        assert_eq!(
            sum(&[1e100, 1.0, -1e100, 1e-100, 1e50, -1.0, -1e50]),
            1e-100
        );
        assert_eq!(sum(&[0.1, 0.2]), 0.30000000000000004);
        assert_eq!(sum(&[0.1, 0.2, 0.3]), 0.6);
        assert_eq!(sum(&[]), 0.0);
        assert_eq!(
            sum(&[2.0f64.powi(53), 1.0, 2.0f64.powi(-80)]),
            2.0f64.powi(53) + 2.0
        );
    }

    #[test]
    fn exact_sum_after_terms_leave_equals_a_fresh_sum_of_what_is_left() {
        let mut r = SplitMix64::new(7);
        for round in 0..200 {
            let n = 1 + r.below(60);
            let xs: Vec<f64> = (0..n)
                .map(|_| match r.below(4) {
                    0 => r.below(1000) as f64 / 997.0,
                    1 => (r.below(1 << 20) as f64) * 1e9,
                    2 => r.below(7) as f64 * 1e-12,
                    _ => r.below(100) as f64 / 10.0,
                })
                .collect();
            let mut moving = ExactSum::default();
            for &x in &xs {
                moving.change(x, 1);
            }
            let cut = r.below(n + 1);
            // Remove a prefix, in reverse order of arrival.
            for &x in xs[..cut].iter().rev() {
                moving.change(x, -1);
            }
            let mut fresh = ExactSum::default();
            for &x in xs[cut..].iter().rev() {
                fresh.change(x, 1);
            }
            assert_eq!(
                moving.value().to_bits(),
                fresh.value().to_bits(),
                "round {round}"
            );
        }
    }

    #[test]
    fn exact_sum_counts_huge_terms_instead_of_overflowing() {
        let mut s = ExactSum::default();
        s.change(1.5, 1);
        s.change(f64::MAX, 1);
        s.change(f64::MAX, 1);
        assert_eq!(s.value(), f64::INFINITY);
        s.change(f64::MAX, -1);
        s.change(f64::MAX, -1);
        assert_eq!(s.value(), 1.5);
        assert_eq!(HUGE_TERM, 2.0f64.powi(960));
    }
}
