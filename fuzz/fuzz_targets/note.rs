//! Signed notes and checkpoint bodies: parsing and verification never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

const C2SP_VKEY: &str = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k";

fuzz_target!(|data: &[u8]| {
    let _ = anchors::open_checkpoint(data, C2SP_VKEY);
    let _ = tlog_tiles::Checkpoint::from_bytes(data);
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = anchors::LogKey::from_private(s);
    }
});
