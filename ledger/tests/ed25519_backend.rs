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
//! under all three backends, which agreed (`ledger/testdata/ed25519_edge_cases.json`).

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

/// `verify_strict` as the ledger calls it: a key that does not decode is a
/// refusal, like a signature that does not verify.
fn strict(pub_key: &[u8; 32], msg: &[u8], sig: &[u8; 64]) -> bool {
    VerifyingKey::from_bytes(pub_key)
        .is_ok_and(|k| k.verify_strict(msg, &Signature::from_bytes(sig)).is_ok())
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
