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

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde_json::Value;

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
