//! Proof requests from untrusted input: index, sizes and hashes taken from
//! the bytes. Verification never panics and never accepts a proof for a
//! leaf it was not built for.
#![no_main]
use ledger::merkle::{verify_consistency, verify_inclusion};
use ledger::Hash;
use libfuzzer_sys::fuzz_target;

fn u64_at(d: &[u8], i: usize) -> u64 {
    let mut b = [0u8; 8];
    for (k, x) in d.iter().skip(i).take(8).enumerate() {
        b[k] = *x;
    }
    u64::from_le_bytes(b)
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 24 {
        return;
    }
    let (a, b, c) = (u64_at(data, 0), u64_at(data, 8), u64_at(data, 16));
    let hashes: Vec<Hash> = data[24..]
        .chunks_exact(32)
        .map(|c| Hash(c.try_into().unwrap_or([0; 32])))
        .collect();
    let (first, rest) = match hashes.split_first() {
        Some((f, r)) => (*f, r.to_vec()),
        None => (Hash([0; 32]), Vec::new()),
    };
    let _ = verify_inclusion(&first, a, b, &rest, &Hash([c as u8; 32]));
    let _ = verify_consistency(a, &first, b, &Hash([c as u8; 32]), &rest);
});
