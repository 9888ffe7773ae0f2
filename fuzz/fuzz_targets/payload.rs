//! Canonical JSON and typed payloads: strict parsing never panics, canonical
//! encoding is a fixed point, the door's one-pass check settles nothing
//! the strict parse and canonical check refuse, and typed decoding never
//! panics.
#![no_main]
use events::canonical::{encode, is_canonical, parse_strict, require_canonical};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let strict = parse_strict(data);
    if is_canonical(data) {
        let v = strict.as_ref().expect("what the one-pass check settles parses");
        assert!(require_canonical(data, v).is_ok(), "and is canonical");
    }
    if let Ok(v) = strict {
        let once = encode(&v);
        let again = parse_strict(&once).expect("canonical output parses");
        assert_eq!(encode(&again), once, "canonical encoding is a fixed point");
    }
    let _ = events::envelope::decode_payload(data);
});
