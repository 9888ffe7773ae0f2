//! Anchors catch what the local log cannot: a log rebuilt consistently by
//! someone with the data directory. Each attack expects one typed error
//! naming the anchor.

use anchors::{check_anchors, Anchor, AnchorError, AnchorTarget, DirTarget, LogKey};
use ledger::{Config, Ledger};
use testkit::sample_leaf;

const ORIGIN: &str = "anchors.test/log";

fn log_of(dir: &std::path::Path, leaves: impl Iterator<Item = Vec<u8>>) -> Ledger {
    let log = Ledger::open(dir, Config::default()).expect("open");
    let pending: Vec<_> = leaves.map(|l| log.submit(l).expect("submit")).collect();
    for p in pending {
        p.wait().expect("append");
    }
    log
}

fn anchor_at(key: &LogKey, log: &Ledger, size: u64, name: &str) -> Anchor {
    let root = log.root_at(size).expect("root");
    Anchor {
        name: name.into(),
        note: key.sign_checkpoint(size, &root).expect("sign").into_bytes(),
    }
}

fn real_key() -> LogKey {
    LogKey::from_seed(ORIGIN, [42; 32]).expect("key")
}

/// The honest log: 100 entries, anchored at 60.
fn honest() -> (tempfile::TempDir, Ledger, Anchor) {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = log_of(dir.path(), (0..100).map(sample_leaf));
    let a = anchor_at(
        &real_key(),
        &log,
        60,
        "2026-11-21T000000Z-000000000060.checkpoint",
    );
    (dir, log, a)
}

/// The attacker's rebuild: every hash recomputed, one old score changed.
fn rebuilt(n: u64) -> (tempfile::TempDir, Ledger) {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = log_of(
        dir.path(),
        (0..n).map(|i| {
            if i == 30 {
                b"{\"entry\":30,\"score\":0.999}".to_vec()
            } else {
                sample_leaf(i)
            }
        }),
    );
    log.verify_full(&mut |_, _| {})
        .expect("the rebuild verifies on its own");
    (dir, log)
}

#[test]
fn honest_log_is_consistent_with_its_anchors() {
    let (_d, log, a) = honest();
    let a100 = anchor_at(&real_key(), &log, 100, "later");
    let checked = check_anchors(
        &log,
        &[a, a100],
        &[real_key().verifier_key().to_owned()],
        ORIGIN,
    )
    .expect("consistent");
    assert_eq!(checked.len(), 2);
}

#[test]
fn consistent_rewrite_signed_with_a_fresh_key_is_caught() {
    let (_d, _log, published) = honest();
    let (_d2, forged) = rebuilt(100);
    let fresh = LogKey::from_seed(ORIGIN, [7; 32]).expect("attacker key");
    // The attacker's own checkpoint is signed by a key nobody trusts...
    let attacker_cp = anchor_at(&fresh, &forged, 100, "attacker");
    let trusted = [real_key().verifier_key().to_owned()];
    assert!(matches!(
        check_anchors(&forged, &[attacker_cp], &trusted, ORIGIN),
        Err(AnchorError::UnknownKey { .. })
    ));
    // ...and the rebuilt log contradicts the anchor published earlier.
    match check_anchors(&forged, &[published], &trusted, ORIGIN) {
        Err(AnchorError::Fork {
            anchor,
            anchor_size: 60,
            log_size: 100,
            ..
        }) => assert!(anchor.contains("000000000060")),
        other => panic!("expected a fork, got {other:?}"),
    }
}

#[test]
fn consistent_rewrite_signed_with_the_real_key_is_caught_by_an_earlier_anchor() {
    let (_d, _log, published) = honest();
    let (_d2, forged) = rebuilt(100);
    // With the stolen key the attacker can sign new checkpoints of the forgery...
    let signed_forgery = anchor_at(&real_key(), &forged, 100, "forged");
    let trusted = [real_key().verifier_key().to_owned()];
    check_anchors(&forged, &[signed_forgery], &trusted, ORIGIN)
        .expect("the forgery agrees with itself");
    // ...but not the anchor already published out of reach.
    assert!(matches!(
        check_anchors(&forged, &[published], &trusted, ORIGIN),
        Err(AnchorError::Fork { .. })
    ));
}

#[test]
fn rewrite_to_the_anchored_size_is_named_a_rewrite() {
    let (_d, _log, published) = honest();
    let (_d2, forged) = rebuilt(60);
    match check_anchors(
        &forged,
        &[published],
        &[real_key().verifier_key().to_owned()],
        ORIGIN,
    ) {
        Err(AnchorError::Rewrite { size: 60, .. }) => {}
        other => panic!("expected a rewrite, got {other:?}"),
    }
}

#[test]
fn truncation_below_an_anchor_is_caught() {
    let (_d, _log, published) = honest();
    let dir = tempfile::tempdir().expect("tempdir");
    let truncated = log_of(dir.path(), (0..45).map(sample_leaf));
    match check_anchors(
        &truncated,
        &[published],
        &[real_key().verifier_key().to_owned()],
        ORIGIN,
    ) {
        Err(AnchorError::Truncation {
            log_size: 45,
            anchor_size: 60,
            ..
        }) => {}
        other => panic!("expected a truncation, got {other:?}"),
    }
}

#[test]
fn fork_after_a_shared_prefix_is_caught() {
    // Two logs share 50 entries, then diverge; log A is anchored at 80.
    let (da, db) = (
        tempfile::tempdir().expect("a"),
        tempfile::tempdir().expect("b"),
    );
    let a = log_of(da.path(), (0..90).map(sample_leaf));
    let b = log_of(
        db.path(),
        (0..90).map(|i| {
            if i < 50 {
                sample_leaf(i)
            } else {
                format!("fork {i}").into_bytes()
            }
        }),
    );
    assert_eq!(
        a.root_at(50).expect("a"),
        b.root_at(50).expect("b"),
        "shared prefix"
    );
    let anchor_a = anchor_at(&real_key(), &a, 80, "a-80");
    let trusted = [real_key().verifier_key().to_owned()];
    assert!(matches!(
        check_anchors(&b, &[anchor_a], &trusted, ORIGIN),
        Err(AnchorError::Fork {
            anchor_size: 80,
            log_size: 90,
            ..
        })
    ));
    // An anchor inside the shared prefix is consistent with both.
    let shared = anchor_at(&real_key(), &a, 50, "a-50");
    check_anchors(&b, &[shared], &trusted, ORIGIN).expect("shared prefix is consistent");
}

#[test]
fn every_single_byte_change_to_an_anchor_file_is_rejected() {
    let (_d, log, _a) = honest();
    let dir = tempfile::tempdir().expect("anchors");
    let target = DirTarget::new(dir.path());
    let root = log.root_at(100).expect("root");
    let at = target
        .publish(
            &real_key().sign_checkpoint(100, &root).expect("sign"),
            100,
            1_795_305_600,
        )
        .expect("publish");
    assert!(
        target.publish("x", 100, 1_795_305_600).is_err(),
        "an anchor is never overwritten"
    );
    let bytes = std::fs::read(&at).expect("read");
    let trusted = [real_key().verifier_key().to_owned()];
    check_anchors(&log, &target.list().expect("list"), &trusted, ORIGIN)
        .expect("the published anchor holds");
    let mut rejected = 0;
    for i in 0..bytes.len() {
        for delta in [1u8, 0x20, 0x80] {
            let mut bad = bytes.clone();
            bad[i] = bad[i].wrapping_add(delta);
            let a = Anchor {
                name: format!("flip-{i}"),
                note: bad,
            };
            assert!(
                check_anchors(&log, &[a], &trusted, ORIGIN).is_err(),
                "byte {i} +{delta} accepted"
            );
            rejected += 1;
        }
    }
    assert_eq!(rejected, bytes.len() * 3);
}

#[test]
fn after_a_key_rotation_old_anchors_verify_with_the_old_key() {
    let (_d, log, old_anchor) = honest();
    let new_key = LogKey::from_seed(ORIGIN, [43; 32]).expect("new key");
    let new_anchor = anchor_at(&new_key, &log, 100, "after-rotation");
    let both = [
        new_key.verifier_key().to_owned(),
        real_key().verifier_key().to_owned(),
    ];
    check_anchors(
        &log,
        &[old_anchor.clone(), new_anchor.clone()],
        &both,
        ORIGIN,
    )
    .expect("old and new anchors verify");
    let only_new = [new_key.verifier_key().to_owned()];
    assert!(matches!(
        check_anchors(&log, &[old_anchor], &only_new, ORIGIN),
        Err(AnchorError::UnknownKey { .. })
    ));
}

#[test]
fn an_anchor_of_another_log_is_refused() {
    let (_d, log, _) = honest();
    let other = LogKey::from_seed("other.example/log", [42; 32]).expect("key");
    let a = anchor_at(&other, &log, 10, "other");
    let trusted = [other.verifier_key().to_owned()];
    assert!(matches!(
        check_anchors(&log, &[a], &trusted, ORIGIN),
        Err(AnchorError::WrongLog { .. })
    ));
}
