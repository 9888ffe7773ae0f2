//! The event encoding against an independent Python implementation
//! (docs/vectors/gen_event_vectors.py: json.dumps and PyNaCl).

use events::canonical::{encode, is_canonical, parse_strict, python_float_repr, Value};
use serde_json::Value as Json;

fn vectors() -> Json {
    serde_json::from_str(include_str!("../testdata/event_vectors.json")).expect("json")
}

#[test]
fn float_formatting_matches_python_repr_for_414_values() {
    let v = vectors();
    let floats = v["floats"].as_array().expect("floats");
    assert!(floats.len() > 400);
    for f in floats {
        let want = f["canonical"].as_str().expect("canonical");
        // Parse Python's output, re-encode, and compare byte for byte.
        let parsed = parse_strict(want.as_bytes()).expect("parse");
        assert_eq!(String::from_utf8(encode(&parsed)).expect("utf8"), want);
        // The door's one-pass check settles Python's floats itself.
        assert!(is_canonical(want.as_bytes()), "{want}");
        if let Value::Object(m) = &parsed {
            if let Some(Value::Float(x)) = m.get("x") {
                assert_eq!(format!("{{\"x\":{}}}", python_float_repr(*x)), want);
            }
        }
    }
}

#[test]
fn object_encoding_matches_python_json_dumps() {
    let v = vectors();
    for o in v["objects"].as_array().expect("objects") {
        let want = o["canonical"].as_str().expect("canonical");
        let pretty = serde_json::to_vec_pretty(&o["object"]).expect("json");
        let parsed = parse_strict(&pretty).expect("parse");
        assert_eq!(String::from_utf8(encode(&parsed)).expect("utf8"), want);
        // The one-pass check never settles the pretty form, and settles
        // Python's form unless a string in it has an escape.
        assert!(!is_canonical(&pretty));
        assert!(
            is_canonical(want.as_bytes()) || want.contains('\\'),
            "{want}"
        );
    }
}

#[test]
fn envelope_signed_with_pynacl_verifies() {
    let v = vectors();
    let d = &v["dsse"];
    let env = serde_json::to_vec(&d["envelope"]).expect("json");
    let decoded = events::decode_envelope(&env).expect("decode");
    assert_eq!(
        decoded.payload_bytes,
        d["payload_canonical"].as_str().expect("p").as_bytes()
    );
    let key =
        events::state::parse_public_key(d["public_key_b64"].as_str().expect("pk")).expect("key");
    assert_eq!(events::key_id(&key), d["keyid"].as_str().expect("keyid"));
    decoded.verify(&key).expect("PyNaCl signature verifies");
    // And the Rust signer produces the identical envelope from the same seed.
    let seed: [u8; 32] = hex::decode(d["seed_hex"].as_str().expect("seed"))
        .expect("hex")
        .try_into()
        .expect("32");
    let sk = ed25519_dalek::SigningKey::from_bytes(&seed);
    let ours = events::sign_envelope(&sk, &decoded.payload);
    let ours: Json = serde_json::from_slice(&ours).expect("json");
    assert_eq!(ours, d["envelope"]);
}

/// A recommendation's evidence tree (`EvidenceTree`): each leaf is the
/// canonical JSON of one reference, as Python's json.dumps writes it, and
/// the root is RFC 6962's Merkle tree hash over them, computed here by the
/// log's own tree code and there by a direct recursion.
#[test]
fn evidence_trees_match_python() {
    use events::model::{EvidenceRef, EvidenceTree};
    let v = vectors();
    let trees = v["evidence_trees"].as_array().expect("evidence_trees");
    assert_eq!(trees.len(), 4);
    for t in trees {
        let refs: Vec<EvidenceRef> = serde_json::from_value(t["refs"].clone()).expect("refs");
        let leaves: Vec<String> = refs
            .iter()
            .map(|r| String::from_utf8(r.tree_leaf()).expect("utf8"))
            .collect();
        let want: Vec<String> = serde_json::from_value(t["leaves"].clone()).expect("leaves");
        assert_eq!(leaves, want);
        let tree = EvidenceTree::of(&refs);
        assert_eq!(Some(tree.count), t["count"].as_u64());
        assert_eq!(Some(tree.root.as_str()), t["root"].as_str());
    }
}
