//! Ed25519 answers that must not depend on the curve arithmetic compiled in.
//!
//! `.cargo/config.toml` compiles curve25519-dalek's AVX-512 IFMA backend in,
//! chosen at run time on CPUs that have it (otherwise AVX2, otherwise the
//! portable code). A signature the ledger accepted on one machine must be
//! accepted when the log is replayed on another, so `verify_strict` must give
//! the same answer on every backend. These are the known edge cases: RFC 8032's
//! vectors, which must verify, and the ed25519-speccheck cases (small-order and
//! mixed-order points, non-canonical encodings, S out of range), of which
//! `verify_strict` accepts exactly one. The expected answers were produced
//! under all three backends, which agreed (`events/testdata/ed25519_edge_cases.json`).
//!
//! The ledger's own `verify_strict` (`events::ed25519`, one square
//! root fewer) is held to ed25519-dalek's answer on every case here.

use curve25519_dalek::{constants::EIGHT_TORSION, EdwardsPoint, Scalar};
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use events::ed25519::Check;
use serde_json::Value;
use sha2::{Digest as _, Sha512};

fn bytes<const N: usize>(v: &Value, field: &str) -> [u8; N] {
    let s = v[field].as_str().expect("hex string");
    hex::decode(s)
        .expect("hex")
        .try_into()
        .expect("right length")
}

fn message(v: &Value) -> Vec<u8> {
    hex::decode(v["message"].as_str().expect("hex string")).expect("hex")
}

/// `verify_strict` as the ledger calls it (`events::ed25519`): a key
/// that does not decode is a refusal, like a signature that does not verify.
/// Every answer is also held to ed25519-dalek's own `verify_strict`.
fn strict(pub_key: &[u8; 32], msg: &[u8], sig: &[u8; 64]) -> bool {
    let Ok(key) = VerifyingKey::from_bytes(pub_key) else {
        return false;
    };
    let sig = Signature::from_bytes(sig);
    let ours = events::ed25519::verify_strict(&key, msg, &sig);
    assert_eq!(
        ours,
        key.verify_strict(msg, &sig).is_ok(),
        "the ledger's verify_strict and ed25519-dalek's disagree"
    );
    assert_eq!(
        events::ed25519::verify_strict_many(&[Check {
            key: &key,
            message: msg,
            signature: &sig,
        }]),
        [ours],
        "verify_strict_many and verify_strict disagree"
    );
    ours
}

fn vectors() -> Value {
    serde_json::from_str(include_str!("../testdata/ed25519_edge_cases.json")).expect("json")
}

#[test]
fn rfc8032_vectors_verify_and_a_flipped_bit_does_not() {
    let v = vectors();
    let cases = v["rfc8032"]["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 3);
    for (i, c) in cases.iter().enumerate() {
        let pk = bytes::<32>(c, "pub_key");
        let sig = bytes::<64>(c, "signature");
        let msg = message(c);
        assert!(strict(&pk, &msg, &sig), "RFC 8032 TEST {}", i + 1);
        for bit in [0, 255, 256, 511] {
            let mut bad = sig;
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(
                !strict(&pk, &msg, &bad),
                "TEST {} with bit {bit} flipped",
                i + 1
            );
        }
    }
}

#[test]
fn speccheck_edge_cases_get_the_same_answers_on_every_backend() {
    let v = vectors();
    let cases = v["speccheck"]["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 17);
    let mut accepted = 0;
    for (i, c) in cases.iter().enumerate() {
        let want = c["verify_strict"].as_bool().expect("bool");
        let got = strict(&bytes(c, "pub_key"), &message(c), &bytes(c, "signature"));
        assert_eq!(got, want, "speccheck case {i}");
        accepted += usize::from(got);
    }
    assert_eq!(accepted, 1, "verify_strict accepts exactly one edge case");
}

#[test]
fn many_honest_signatures_verify_and_none_verifies_under_another_message() {
    // Deterministic keys and messages: exercises the vectorised double-base
    // multiplication on many scalars, not only the few above.
    for n in 0u32..200 {
        let seed = *blake3::hash(&n.to_le_bytes()).as_bytes();
        let key = SigningKey::from_bytes(&seed);
        let msg = format!("evidence-ledger backend check {n}");
        let sig = key.sign(msg.as_bytes()).to_bytes();
        let pk = key.verifying_key().to_bytes();
        assert!(strict(&pk, msg.as_bytes(), &sig), "signature {n}");
        assert!(
            !strict(&pk, format!("{msg}.").as_bytes(), &sig),
            "signature {n}, other message"
        );
    }
}

proptest::proptest! {
    /// Signatures with bytes changed anywhere (`R`, `s`), a byte of the key
    /// changed, or `R` replaced by a point of small order: the ledger's
    /// `verify_strict` and ed25519-dalek's agree (checked inside `strict`).
    #[test]
    fn the_ledgers_verify_strict_agrees_with_ed25519_dalek(
        seed in proptest::prelude::any::<[u8; 32]>(),
        msg in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
        flip_at in 0usize..96,
        flip in 0u8..=255,
        small_r in 0usize..9,
    ) {
        let key = SigningKey::from_bytes(&seed);
        let mut sig = key.sign(&msg).to_bytes();
        let mut pk = key.verifying_key().to_bytes();
        if small_r < 8 {
            let r = curve25519_dalek::constants::EIGHT_TORSION[small_r].compress().to_bytes();
            sig[..32].copy_from_slice(&r);
        }
        if flip_at < 64 {
            sig[flip_at] ^= flip;
        } else {
            pk[flip_at - 64] ^= flip;
        }
        let _ = strict(&pk, &msg, &sig);
    }
}

/// A signature made by hand from secret scalars, so that its `R` and its
/// key can carry a torsion component: `R = [r]B + T_r`, `A = [a]B + T_a`,
/// `s = r + k·a` (plus `ℓ` when `s_plus_l`, a non-canonical `s`).
fn forged(
    a: Scalar,
    r: Scalar,
    t_a: usize,
    t_r: usize,
    s_plus_l: bool,
    msg: &[u8],
) -> ([u8; 32], [u8; 64]) {
    let big_a = EdwardsPoint::mul_base(&a) + EIGHT_TORSION[t_a];
    let big_r = EdwardsPoint::mul_base(&r) + EIGHT_TORSION[t_r];
    let (a_bytes, r_bytes) = (big_a.compress().to_bytes(), big_r.compress().to_bytes());
    let mut h = Sha512::new();
    h.update(r_bytes);
    h.update(a_bytes);
    h.update(msg);
    let k = Scalar::from_bytes_mod_order_wide(&h.finalize().into());
    let s = r + k * a;
    let mut s_bytes = s.to_bytes();
    if s_plus_l {
        // s + ℓ, still under 2^256 for these s: the same point, not canonical.
        // ℓ = 2^252 + 27742317777372353535851937790883648493, little-endian.
        let l: [u8; 32] =
            hex::decode("edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010")
                .expect("hex")
                .try_into()
                .expect("32 bytes");
        let mut carry = 0u16;
        for (x, y) in s_bytes.iter_mut().zip(l) {
            let t = u16::from(*x) + u16::from(y) + carry;
            *x = t as u8;
            carry = t >> 8;
        }
    }
    let mut sig = [0u8; 64];
    sig[..32].copy_from_slice(&r_bytes);
    sig[32..].copy_from_slice(&s_bytes);
    (a_bytes, sig)
}

proptest::proptest! {
    /// Batches mixing honest signatures with bit flips, torsioned `R` and
    /// keys (which batch verification accepts about one time in eight),
    /// non-canonical `s`, small-order `R` and keys that do not decode:
    /// `verify_strict_many` gives each one ed25519-dalek's
    /// `verify_strict` answer.
    #[test]
    fn verify_strict_many_answers_as_verify_strict_for_each(
        items in proptest::collection::vec(
            (
                proptest::prelude::any::<[u8; 32]>(),
                proptest::prelude::any::<[u8; 32]>(),
                0usize..8,
                0usize..8,
                0usize..6,
                0usize..64,
            ),
            1..24,
        ),
    ) {
        let mut made = Vec::new();
        for (i, (a, r, t_a, t_r, kind, at)) in items.into_iter().enumerate() {
            let msg = format!("batch item {i}").into_bytes();
            let (a, r) = (Scalar::from_bytes_mod_order(a), Scalar::from_bytes_mod_order(r));
            let (pk, mut sig) = match kind {
                0 => forged(a, r, 0, 0, false, &msg),
                1 => forged(a, r, 0, t_r, false, &msg),
                2 => forged(a, r, t_a, 0, false, &msg),
                3 => forged(a, r, 0, 0, true, &msg),
                4 => {
                    let (pk, mut sig) = forged(a, r, 0, 0, false, &msg);
                    sig[..32].copy_from_slice(&EIGHT_TORSION[t_r].compress().to_bytes());
                    (pk, sig)
                }
                _ => forged(a, r, 0, 0, false, &msg),
            };
            if kind == 5 {
                sig[at] ^= 1;
            }
            if let Ok(key) = VerifyingKey::from_bytes(&pk) {
                let sig = Signature::from_bytes(&sig);
                let want = key.verify_strict(&msg, &sig).is_ok();
                made.push((key, msg, sig, want));
            }
        }
        let checks: Vec<Check<'_>> = made
            .iter()
            .map(|(key, message, signature, _)| Check { key, message, signature })
            .collect();
        let want: Vec<bool> = made.iter().map(|m| m.3).collect();
        proptest::prop_assert_eq!(events::ed25519::verify_strict_many(&checks), want);
    }
}

#[test]
fn honest_batches_of_every_size_verify_and_one_bad_signature_is_found_alone() {
    let keys: Vec<SigningKey> = (0u8..70)
        .map(|n| SigningKey::from_bytes(blake3::hash(&[n]).as_bytes()))
        .collect();
    let msgs: Vec<Vec<u8>> = (0..70)
        .map(|n| format!("message {n}").into_bytes())
        .collect();
    let sigs: Vec<Signature> = keys.iter().zip(&msgs).map(|(k, m)| k.sign(m)).collect();
    let vks: Vec<VerifyingKey> = keys.iter().map(SigningKey::verifying_key).collect();
    for n in [0, 1, 2, 64, 70] {
        let checks: Vec<Check<'_>> = (0..n)
            .map(|i| Check {
                key: &vks[i],
                message: &msgs[i],
                signature: &sigs[i],
            })
            .collect();
        assert_eq!(events::ed25519::verify_strict_many(&checks), vec![true; n]);
    }
    let other = b"another message".to_vec();
    let mut checks: Vec<Check<'_>> = (0..64)
        .map(|i| Check {
            key: &vks[i],
            message: &msgs[i],
            signature: &sigs[i],
        })
        .collect();
    checks[17].message = &other;
    let got = events::ed25519::verify_strict_many(&checks);
    assert_eq!(got.iter().filter(|ok| !**ok).count(), 1);
    assert!(!got[17]);
}
