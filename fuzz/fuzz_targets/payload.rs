//! Canonical JSON and typed payloads: strict parsing never panics, canonical
//! encoding is a fixed point, and typed decoding never panics.
#![no_main]
use events::canonical::{encode, parse_strict};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = parse_strict(data) {
        let once = encode(&v);
        let again = parse_strict(&once).expect("canonical output parses");
        assert_eq!(encode(&again), once, "canonical encoding is a fixed point");
    }
    let _ = events::envelope::decode_payload(data);
});
