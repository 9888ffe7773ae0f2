//! Log-core benchmarks: durable appends at batch sizes 1, 100 and 1,000;
//! inclusion and consistency proofs at 1M entries; full verify throughput.
//!
//! Run: `cargo bench -p bench --bench log`. Figures are recorded in
//! bench/README.md.

use std::time::Duration;

use bench::score_leaf;
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use ledger::{Config, Ledger};

fn fill(log: &Ledger, from: u64, n: u64) {
    let mut i = from;
    while i < from + n {
        let end = (i + 1000).min(from + n);
        let pending: Vec<_> = (i..end)
            .map(|k| log.submit(score_leaf(k)).expect("submit"))
            .collect();
        for p in pending {
            p.wait().expect("append");
        }
        i = end;
    }
}

fn appends(c: &mut Criterion) {
    let mut g = c.benchmark_group("append_durable");
    g.measurement_time(Duration::from_secs(8));
    for batch in [1u64, 100, 1000] {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = Ledger::open(dir.path(), Config::default()).expect("open");
        let mut next = 0u64;
        g.throughput(Throughput::Elements(batch));
        g.bench_function(BenchmarkId::from_parameter(batch), |b| {
            b.iter_batched(
                || {
                    let leaves: Vec<_> = (next..next + batch).map(score_leaf).collect();
                    next += batch;
                    leaves
                },
                |leaves| {
                    // `batch` concurrent appends: all queued, then all awaited,
                    // so group commit sees them together.
                    let pending: Vec<_> = leaves
                        .into_iter()
                        .map(|l| log.submit(l).expect("submit"))
                        .collect();
                    for p in pending {
                        p.wait().expect("append");
                    }
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

fn proofs(c: &mut Criterion) {
    const SIZE: u64 = 1_000_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Ledger::open(dir.path(), Config::default()).expect("open");
    fill(&log, 0, SIZE);
    let mut g = c.benchmark_group("proofs_at_1M");
    let mut k = 0u64;
    g.bench_function("inclusion", |b| {
        b.iter(|| {
            k = (k + 7_919) % SIZE;
            log.inclusion_proof(k, SIZE).expect("proof")
        })
    });
    g.bench_function("consistency", |b| {
        b.iter(|| {
            k = (k + 7_919) % SIZE;
            log.consistency_proof(k + 1, SIZE).expect("proof")
        })
    });
    g.finish();
}

fn verify(c: &mut Criterion) {
    const SIZE: u64 = 100_000;
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let log = Ledger::open(dir.path(), Config::default()).expect("open");
        fill(&log, 0, SIZE);
    }
    let mut g = c.benchmark_group("verify_full");
    g.sample_size(10);
    g.throughput(Throughput::Elements(SIZE));
    g.bench_function("100k_entries", |b| {
        b.iter(|| ledger::verify_dir(dir.path(), &mut |_, _| {}).expect("verify"))
    });
    g.finish();
}

criterion_group!(benches, appends, proofs, verify);
criterion_main!(benches);
