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

/// One signature to check with [`verify_strict_many`].
pub struct Check<'a> {
    pub key: &'a VerifyingKey,
    pub message: &'a [u8],
    pub signature: &'a Signature,
}

/// [`verify_strict`]'s answer for each of `checks`, computed together.
///
/// Not batch verification (one random linear combination of all the
/// equations, whose answers differ from `verify_strict`'s: it accepts a
/// signature with a torsioned `R` about one time in eight). Each signature
/// is checked on its own, exactly as ed25519-dalek's `verify` checks it:
/// `s` canonical, `k = SHA-512(R ‖ A ‖ M) mod ℓ`, `R' = [s]B − [k]A`, and
/// the encoding of `R'` equal to `R`'s bytes. Only the last step is shared:
/// encoding a point divides by its `Z` coordinate, and the divisions of
/// every `R'` are done with one field inversion (Montgomery's trick,
/// curve25519-dalek's `compress_batch_alloc`) instead of one each, which is
/// about a fifth of a lone check. The encoding is a function of the point,
/// so the bytes compared are the same. `events/tests/ed25519_backend.rs`
/// holds the answers to `verify_strict`'s on RFC 8032, the speccheck cases
/// and random batches with bad signatures among good ones.
pub fn verify_strict_many(checks: &[Check<'_>]) -> Vec<bool> {
    use curve25519_dalek::edwards::EdwardsPoint;
    use curve25519_dalek::Scalar;
    use sha2::{Digest as _, Sha512};

    // `R'` for each check whose `s` is canonical; `None` refuses.
    let points: Vec<Option<EdwardsPoint>> = checks
        .iter()
        .map(|c| {
            let s = Option::<Scalar>::from(Scalar::from_canonical_bytes(*c.signature.s_bytes()))?;
            let mut h = Sha512::new();
            h.update(c.signature.r_bytes());
            h.update(c.key.as_bytes());
            h.update(c.message);
            let k = Scalar::from_bytes_mod_order_wide(&h.finalize().into());
            let minus_a = -c.key.to_edwards();
            Some(EdwardsPoint::vartime_double_scalar_mul_basepoint(
                &k, &minus_a, &s,
            ))
        })
        .collect();
    let computed: Vec<EdwardsPoint> = points.iter().flatten().copied().collect();
    let mut encoded = EdwardsPoint::compress_batch_alloc(&computed).into_iter();
    checks
        .iter()
        .zip(&points)
        .map(|(c, p)| {
            p.is_some()
                && encoded
                    .next()
                    .is_some_and(|r| r.as_bytes() == c.signature.r_bytes())
                && !c.key.is_weak()
                && !SMALL_ORDER.contains(c.signature.r_bytes())
        })
        .collect()
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
