//! Ed25519 `verify_strict`, the ledger's one signature rule, computed with
//! one field exponentiation instead of two.
//!
//! ed25519-dalek's `verify_strict` accepts exactly when its `verify` does
//! and, besides, neither the public key `A` nor the signature's `R` is a
//! point of small order. To check `R`, it decompresses `R` (a field square
//! root, about a fifth of the whole check). But `verify` accepts only when
//! `R`'s bytes equal the compressed point `[s]B − [k]A` it computes, and
//! compressed bytes are always the canonical encoding of a point. So once
//! `verify` has accepted, `R` is small exactly when its bytes are one of the
//! eight canonical encodings of the small-order points (the 8-torsion
//! subgroup): a comparison, not a square root. [`verify_strict`] here is that
//! reasoning; it answers as ed25519-dalek's `verify_strict` does for every
//! input, which `events/tests/ed25519_backend.rs` checks on RFC 8032, the
//! ed25519-speccheck edge cases and a property test (docs/DECISIONS.md).

use std::sync::LazyLock;

use ed25519_dalek::{Signature, Verifier as _, VerifyingKey};

/// The canonical encodings of the eight points of small order.
static SMALL_ORDER: LazyLock<[[u8; 32]; 8]> =
    LazyLock::new(|| curve25519_dalek::constants::EIGHT_TORSION.map(|p| p.compress().to_bytes()));

/// Whether `signature` is a valid strict Ed25519 signature of `message` by
/// `key`: the answer of ed25519-dalek's `VerifyingKey::verify_strict`.
pub fn verify_strict(key: &VerifyingKey, message: &[u8], signature: &Signature) -> bool {
    key.verify(message, signature).is_ok()
        && !key.is_weak()
        && !SMALL_ORDER.contains(signature.r_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_small_order_encodings_are_eight_distinct_canonical_points() {
        let mut all = SMALL_ORDER.to_vec();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 8);
        // The identity, and the point of order 2, (0, -1).
        assert!(all.contains(&{
            let mut b = [0u8; 32];
            b[0] = 1;
            b
        }));
        let mut minus_one = [0xff; 32];
        minus_one[0] = 0xec;
        minus_one[31] = 0x7f;
        assert!(all.contains(&minus_one));
    }
}
