//! Known answers: Go's sumdb/note package example and the C2SP signed-note
//! specification example, the log key's notes and keys from an independent
//! Python implementation (docs/vectors/gen_format_vectors.py), plus
//! checkpoint round trips.

use anchors::{open_checkpoint, open_note_any, CheckpointError, LogKey};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use sha2::{Digest as _, Sha256};
use signed_note::{Note, StandardVerifier, VerifierList};

const GO_SKEY: &str =
    "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
const GO_VKEY: &str = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
const GO_TEXT: &str = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
const GO_NOTE: &str = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n\n— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n";
const C2SP_VKEY: &str = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k";
const C2SP_NOTE: &str = "This is an example message.\n\n— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n";

#[test]
fn go_note_example_key_derives_the_documented_verifier_key_and_signature() {
    let key = LogKey::from_private(GO_SKEY).expect("Go example signer key");
    assert_eq!(key.verifier_key(), GO_VKEY);
    assert_eq!(key.private_key(), GO_SKEY);
    // Ed25519 is deterministic: signing the text reproduces the published note.
    assert_eq!(key.sign_text(GO_TEXT.as_bytes()).expect("sign"), GO_NOTE);
}

#[test]
fn c2sp_signed_note_example_verifies() {
    let v = StandardVerifier::new(C2SP_VKEY).expect("vkey");
    let n = Note::from_bytes(C2SP_NOTE.as_bytes()).expect("note");
    let (ok, _) = n
        .verify(&VerifierList::new(vec![Box::new(v)]))
        .expect("verify");
    assert_eq!(ok.len(), 1);
}

#[test]
fn checkpoint_round_trips_and_is_a_c2sp_body() {
    let key = LogKey::from_seed("ledger.example/log", [7; 32]).expect("key");
    let root = ledger::leaf_hash(b"root");
    let note = key.sign_checkpoint(42, &root).expect("sign");
    let body = note.split("\n\n").next().expect("body");
    let mut lines = body.lines();
    assert_eq!(lines.next(), Some("ledger.example/log"));
    assert_eq!(lines.next(), Some("42"));
    assert_eq!(lines.next().map(str::len), Some(44), "base64 of 32 bytes");
    let cp = open_checkpoint(note.as_bytes(), key.verifier_key()).expect("open");
    assert_eq!((cp.size, cp.root), (42, root));
}

#[test]
fn checkpoint_signed_by_another_key_is_refused() {
    let key = LogKey::from_seed("ledger.example/log", [7; 32]).expect("key");
    let other = LogKey::from_seed("ledger.example/log", [8; 32]).expect("key");
    let note = other
        .sign_checkpoint(1, &ledger::leaf_hash(b"x"))
        .expect("sign");
    assert!(matches!(
        open_checkpoint(note.as_bytes(), key.verifier_key()),
        Err(CheckpointError::BadSignature(_))
    ));
}

#[test]
fn every_single_byte_change_to_a_checkpoint_is_refused() {
    let key = LogKey::from_seed("ledger.example/log", [9; 32]).expect("key");
    let note = key
        .sign_checkpoint(1234, &ledger::leaf_hash(b"y"))
        .expect("sign")
        .into_bytes();
    for i in 0..note.len() {
        for delta in [1u8, 0x80] {
            let mut bad = note.clone();
            bad[i] = bad[i].wrapping_add(delta);
            assert!(
                open_checkpoint(&bad, key.verifier_key()).is_err(),
                "byte {i} +{delta} accepted"
            );
        }
    }
}

#[test]
fn malformed_keys_are_typed_errors() {
    assert!(matches!(
        LogKey::from_private("nope"),
        Err(CheckpointError::MalformedKey(_))
    ));
    assert!(matches!(
        LogKey::from_private("PRIVATE+KEY+a+00000000+AAAA"),
        Err(CheckpointError::MalformedKey(_))
    ));
    assert!(LogKey::from_seed("has space", [1; 32]).is_err());
}

/// The vectors docs/vectors/gen_format_vectors.py writes (docs/FORMAT.md §9).
const FORMAT_VECTORS: &str = include_str!("../../ledger/testdata/format_vectors.json");

/// The JSON text from the value of `name` in the object `section` of the
/// format vectors to the end of the file. This crate has no JSON parser; the
/// generator writes each section once, and each name once in its section.
fn vector_value(section: &str, name: &str) -> &'static str {
    let open = format!("\"{section}\": {{");
    let at = FORMAT_VECTORS
        .find(&open)
        .unwrap_or_else(|| panic!("no `{section}` in the format vectors"));
    let rest = &FORMAT_VECTORS[at + open.len()..];
    let key = format!("\"{name}\": ");
    let at = rest
        .find(&key)
        .unwrap_or_else(|| panic!("no `{section}.{name}` in the format vectors"));
    &rest[at + key.len()..]
}

/// A string of the format vectors, its JSON escapes decoded.
fn vector_str(section: &str, name: &str) -> String {
    let mut chars = vector_value(section, name).chars();
    assert_eq!(chars.next(), Some('"'), "`{section}.{name}` is a string");
    let mut out = String::new();
    loop {
        match chars.next().expect("a terminated JSON string") {
            '"' => return out,
            '\\' => match chars.next().expect("an escape") {
                'n' => out.push('\n'),
                '"' => out.push('"'),
                '\\' => out.push('\\'),
                '/' => out.push('/'),
                'u' => {
                    let hex: String = chars.by_ref().take(4).collect();
                    let code = u32::from_str_radix(&hex, 16).expect("a \\u escape");
                    out.push(char::from_u32(code).expect("a scalar value"));
                }
                c => panic!("unexpected escape \\{c} in `{section}.{name}`"),
            },
            c => out.push(c),
        }
    }
}

/// A non-negative integer of the format vectors.
fn vector_u64(section: &str, name: &str) -> u64 {
    let v = vector_value(section, name);
    let end = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    v[..end].parse().expect("an integer")
}

/// 32 bytes the format vectors write as hex.
fn vector_32(section: &str, name: &str) -> [u8; 32] {
    let hex = vector_str(section, name);
    let bytes = ledger::hash::from_hex(&hex)
        .unwrap_or_else(|| panic!("`{section}.{name}` is 64 hex digits"))
        .0;
    assert_eq!(ledger::hash::hex32(&bytes), hex, "lower-case hex");
    bytes
}

#[test]
fn log_key_notes_match_independent_python_implementation() {
    let origin = vector_str("log_key", "origin");
    let key = LogKey::from_seed(&origin, vector_32("log_key", "seed_hex")).expect("key");
    let vkey = vector_str("log_key", "verifier_key");

    // Keys: the verifier key, its key hash and the private key file text.
    assert_eq!(key.verifier_key(), vkey);
    assert_eq!(
        key.verifier_key().split('+').nth(1),
        Some(vector_str("log_key", "key_hash").as_str())
    );
    assert_eq!(
        key.signing_key().verifying_key().to_bytes(),
        vector_32("log_key", "public_key_hex")
    );
    let private = vector_str("log_key", "private_key");
    assert_eq!(key.private_key(), private);
    assert_eq!(
        LogKey::from_private(&private)
            .expect("private key")
            .verifier_key(),
        vkey
    );

    // The checkpoint: the same note, byte for byte (Ed25519 is
    // deterministic), and the Python-made note opens.
    let size = vector_u64("checkpoint", "size");
    let root = ledger::Hash(vector_32("checkpoint", "root_hex"));
    let text = vector_str("checkpoint", "text");
    let note = vector_str("checkpoint", "note");
    assert!(note.starts_with(&format!("{text}\n\u{2014} {origin} ")));
    assert_eq!(key.sign_checkpoint(size, &root).expect("sign"), note);
    assert_eq!(key.sign_text(text.as_bytes()).expect("sign"), note);
    let cp = open_checkpoint(note.as_bytes(), &vkey).expect("the Python checkpoint opens");
    assert_eq!(
        (cp.origin.as_str(), cp.size, cp.root),
        (origin.as_str(), size, root)
    );

    // The projection-bundle attestation: the statement, the origin and the
    // lower-case hex SHA-256 of the body's canonical JSON.
    let body = vector_str("bundle_attestation", "body");
    let digest = vector_32("bundle_attestation", "body_sha256");
    assert_eq!(
        Sha256::digest(body.as_bytes()).as_slice(),
        digest.as_slice()
    );
    let text = vector_str("bundle_attestation", "text");
    assert_eq!(
        text,
        format!(
            "evidence-ledger/v1 projection-bundle\n{origin}\n{}\n",
            ledger::hash::hex32(&digest)
        )
    );
    let note = vector_str("bundle_attestation", "note");
    assert_eq!(key.sign_text(text.as_bytes()).expect("sign"), note);
    let keys = [vkey.clone()];
    let (opened, by) = open_note_any(note.as_bytes(), &keys).expect("the attestation opens");
    assert_eq!((opened.as_slice(), by), (text.as_bytes(), vkey.as_str()));
    // Signed by the same key, it still never passes as a checkpoint: its
    // second line is the origin, not a decimal size.
    assert_eq!(
        open_checkpoint(note.as_bytes(), &vkey),
        Err(CheckpointError::MalformedCheckpoint)
    );

    // The ledger's event signing key, derived from the log key's seed.
    let event = key.event_signing_key();
    assert_eq!(
        vector_str("event_signing_key", "context"),
        "evidence-ledger/v1 event signing key"
    );
    assert_eq!(event.to_bytes(), vector_32("event_signing_key", "seed_hex"));
    let public = event.verifying_key().to_bytes();
    assert_eq!(public, vector_32("event_signing_key", "public_key_hex"));
    assert_eq!(
        B64.encode(public),
        vector_str("event_signing_key", "public_key_b64")
    );
    assert_eq!(
        Sha256::digest(public).as_slice(),
        vector_32("event_signing_key", "key_id").as_slice()
    );
}
