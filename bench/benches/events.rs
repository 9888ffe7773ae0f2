//! The per-event work of a signed write, piece by piece, on the envelopes
//! the load generator posts (a score with breakdowns; a case co-signed by
//! two curators): decoding at the door, the envelope signature, the leaf
//! bytes and their hashes. Where a write's CPU goes, without HTTP.
//!
//! Run: `cargo bench -p bench --bench events`. Figures are in
//! bench/README.md.

use std::time::Duration;

use bench::load::Prepared;
use criterion::{criterion_group, criterion_main, Criterion};
use events::{decode_envelope, decode_leaf, decode_logged_leaf, generate_key};

fn events(c: &mut Criterion) {
    let p = Prepared::new("bench", generate_key().expect("key"), 1, 16);
    let (score, _) = p.event(0, 0, 10);
    let (case, is_case) = p.event(0, 9, 10);
    assert!(is_case, "event 9 of 10 is a case");
    let key = p.harness_key().verifying_key();
    let mut g = c.benchmark_group("event");
    g.measurement_time(Duration::from_secs(4));
    // What the load generator posts is a write: the envelope, and the
    // disclosures of its committed fields.
    let envelope = |w: &[u8]| {
        events::envelope::split_write(w)
            .expect("a write")
            .envelope
            .to_vec()
    };
    let (score, case) = (envelope(&score), envelope(&case));
    for (name, env) in [("score", &score), ("case", &case)] {
        let d = decode_envelope(env).expect("decodes");
        let leaf = d.leaf_bytes(1_763_769_600_000_000);
        g.bench_function(format!("{name}/decode_envelope"), |b| {
            b.iter(|| decode_envelope(env).expect("decodes"))
        });
        g.bench_function(format!("{name}/leaf_bytes"), |b| {
            b.iter(|| d.leaf_bytes(1_763_769_600_000_000))
        });
        g.bench_function(format!("{name}/decode_leaf"), |b| {
            b.iter(|| decode_leaf(&leaf).expect("decodes"))
        });
        g.bench_function(format!("{name}/decode_logged_leaf"), |b| {
            b.iter(|| decode_logged_leaf(&leaf).expect("decodes"))
        });
        g.bench_function(format!("{name}/leaf_and_chain_hash"), |b| {
            b.iter(|| {
                (
                    ledger::leaf_hash(&leaf),
                    ledger::hash::chain_hash(&ledger::Hash([0; 32]), &leaf),
                )
            })
        });
    }
    let d = decode_envelope(&score).expect("decodes");
    g.bench_function("score/verify_signature", |b| {
        b.iter(|| d.verify(&key).expect("verifies"))
    });
    // The same check, per signature, among 64 checked together
    // (`verify_strict_many`: one field inversion between them).
    let signed = events::envelope::pae(events::envelope::PAYLOAD_TYPE, &d.payload_bytes);
    let checks: Vec<events::ed25519::Check<'_>> = (0..64)
        .map(|_| events::ed25519::Check {
            key: &key,
            message: &signed,
            signature: &d.signature,
        })
        .collect();
    g.throughput(criterion::Throughput::Elements(64));
    g.bench_function("score/verify_signature_in_64", |b| {
        b.iter(|| {
            assert!(events::ed25519::verify_strict_many(&checks)
                .iter()
                .all(|ok| *ok))
        })
    });
    g.finish();
}

criterion_group!(benches, events);
criterion_main!(benches);
