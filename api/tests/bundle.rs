//! Offline proof bundles: one file that checks a set of events and the
//! projection computed from them, with no server.

mod common;

use common::{seed, TestServer};
use testkit::world::TASK_CLASS;

#[test]
fn a_bundle_verifies_offline_and_every_single_byte_change_is_rejected() {
    let s = TestServer::start(|_| {});
    let c = s.client();
    seed(&s, &c);
    s.wait_verified();
    let r = c
        .get(&format!("/v1/task-classes/{TASK_CLASS}/bundle"))
        .expect("bundle");
    assert_eq!(r.status, 200, "{}", r.text());
    let bundle = r.body;
    let keys = [s.vkey.clone()];
    drop(s);
    let summary =
        verifier::check::verify_bundle(&bundle, &keys).expect("the bundle verifies with no server");
    assert_eq!(
        (summary.evidence, summary.recommended_tier.as_str()),
        (3, "silver")
    );
    let other = anchors::LogKey::generate("test.example/log").expect("key");
    assert!(
        verifier::check::verify_bundle(&bundle, &[other.verifier_key().to_owned()]).is_err(),
        "another key"
    );
    let mut rejected = 0;
    for i in 0..bundle.len() {
        for delta in [1u8, 0x80] {
            let mut bad = bundle.clone();
            bad[i] = bad[i].wrapping_add(delta);
            assert!(
                verifier::check::verify_bundle(&bad, &keys).is_err(),
                "byte {i} +{delta} accepted"
            );
            rejected += 1;
        }
    }
    assert_eq!(rejected, bundle.len() * 2);
}
