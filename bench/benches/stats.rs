//! The statistics behind a recommendation: the BCa bootstrap interval of
//! the held-out mean (2,000 resamples, as `Settings::default`) over 100
//! and 1,000 cases, drawing afresh (`bca`) and with the draws kept from the
//! last interval (`bca_reusing`, what an incremental view does). A view that
//! folds one new score recomputes it, so this is most of what target 7
//! measures.
//!
//! Run: `cargo bench -p bench --bench stats`. Figures are in
//! bench/README.md.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use projections::stats::{bca, bca_reusing, KeptDraws, SplitMix64};

fn stats(c: &mut Criterion) {
    let mut g = c.benchmark_group("bca");
    g.measurement_time(Duration::from_secs(4));
    for n in [100usize, 1000] {
        let mut rng = SplitMix64::new(n as u64);
        let x: Vec<f64> = (0..n)
            .map(|_| (rng.next_u64() % 1001) as f64 / 1000.0)
            .collect();
        g.bench_with_input(BenchmarkId::new("resamples_2000", n), &x, |b, x| {
            b.iter(|| bca(x, 0.95, 2000, 42).expect("interval"))
        });
        // As an incremental view: the draws kept from the last interval.
        let mut kept = KeptDraws::default();
        g.bench_with_input(BenchmarkId::new("resamples_2000_kept", n), &x, |b, x| {
            b.iter(|| bca_reusing(x, 0.95, 2000, 42, &mut kept).expect("interval"))
        });
    }
    g.finish();
}

criterion_group!(benches, stats);
criterion_main!(benches);
