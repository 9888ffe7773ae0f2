//! Offline proof bundles: verification never panics.
#![no_main]
use libfuzzer_sys::fuzz_target;

const KEY: &str = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k";

fuzz_target!(|data: &[u8]| {
    let _ = verifier::check::verify_bundle(data, &[KEY.to_owned()]);
});
