//! Leaf records as stored in the log: decoding never panics.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = events::decode_leaf(data);
});
