//! Known answers: Go's sumdb/note package example and the C2SP signed-note
//! specification example, plus checkpoint round trips.

use anchors::{open_checkpoint, CheckpointError, LogKey};
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
