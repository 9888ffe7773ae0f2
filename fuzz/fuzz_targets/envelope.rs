//! DSSE envelopes: decoding never panics, and whatever decodes re-encodes as
//! a leaf that decodes to the same payload.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = events::decode_envelope(data) {
        let leaf = d.leaf_bytes(0);
        let (d2, at) = events::decode_leaf(&leaf).expect("a leaf the ledger wrote decodes");
        assert_eq!(at, 0);
        assert_eq!(d2.payload_bytes, d.payload_bytes);
    }
});
