//! Shared helpers for the benchmarks.
#![forbid(unsafe_code)]

/// A leaf shaped like a score record, about 200 bytes.
pub fn score_leaf(i: u64) -> Vec<u8> {
    format!(
        "{{\"kind\":\"score.recorded\",\"task_class\":\"migration-chainguard-distroless\",\"case_id\":\"case-{:05}\",\"case_digest\":\"blake3:{:064x}\",\"score\":0.{:03},\"passed\":true}}",
        i % 150,
        i,
        (i * 37) % 1000
    )
    .into_bytes()
}

pub mod load;
pub mod scale;
