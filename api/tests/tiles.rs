//! C2SP tlog-tiles: the tile read API, the static directory, and an
//! independent reader (`tiles_reader.py`, Python's standard library only)
//! that rebuilds every proof from tiles and compares it with the API's.

mod common;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;

use common::{seed, within_30s, TestServer};
use events::model::*;
use testkit::world::score;

/// A raw GET: the status, the headers (names lower-cased) and the body.
fn get(s: &TestServer, path: &str, extra: &str) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut t = TcpStream::connect(s.addr).expect("connect");
    write!(
        t,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{extra}\r\n"
    )
    .expect("write");
    let mut raw = Vec::new();
    t.read_to_end(&mut raw).expect("read");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header block");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .expect("status");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (status, headers, raw[split + 4..].to_vec())
}

fn header<'a>(h: &'a [(String, String)], name: &str) -> Option<&'a str> {
    h.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// A server holding `n` scores after the seed: more than two full tiles.
fn grown(n: usize) -> TestServer {
    let s = TestServer::start(|_| {});
    let c = s.client();
    seed(&s, &c);
    let mut p = s.poster(&c);
    for i in 0..n {
        let v = (i % 100) as f64 / 100.0;
        p.post("harness", Event::ScoreRecorded(score("case-1", v)))
            .expect("score");
    }
    s.wait_verified();
    s
}

fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(
                    p.strip_prefix(dir)
                        .expect("prefix")
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    out.sort();
    out
}

fn python_reader(args: &[&str]) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tiles_reader.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .args(args)
        .output()
        .expect("python3 runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "the independent reader refused: {text}"
    );
    text
}

#[test]
fn the_static_directory_is_byte_identical_to_the_api_and_an_independent_reader_accepts_both() {
    let s = grown(560);
    let size = s.state.events.ledger().head().size;
    assert!(size > 512, "{size}");
    let out = tempfile::tempdir().expect("out");
    let synced = api::tiles::sync_dir(
        s.state.events.ledger(),
        &s.state.log_key,
        out.path(),
        false,
        None,
        |_, _| {},
    )
    .expect("sync");
    assert_eq!(synced.size, size);

    let all = files(out.path());
    // checkpoint, 2 full + 1 partial level-0 tiles, a partial level-1 tile,
    // and 3 bundles.
    assert_eq!(all.len(), 1 + 3 + 1 + 3, "{all:?}");
    for f in &all {
        let want = std::fs::read(out.path().join(f)).expect("file");
        let (status, h, body) = get(&s, &format!("/{f}"), "Accept-Encoding: identity\r\n");
        assert_eq!(status, 200, "{f}");
        assert_eq!(body, want, "{f} differs between the API and the directory");
        assert_eq!(header(&h, "access-control-allow-origin"), Some("*"), "{f}");
        if f == "checkpoint" {
            assert_eq!(header(&h, "cache-control"), Some("no-cache"));
            assert_eq!(
                header(&h, "content-type"),
                Some("text/plain; charset=utf-8")
            );
            let cp = anchors::open_checkpoint(&body, &s.vkey).expect("signed by the log key");
            assert_eq!(cp.size, size);
        } else {
            assert_eq!(
                header(&h, "cache-control"),
                Some("public, max-age=604800, immutable")
            );
            assert_eq!(header(&h, "content-type"), Some("application/octet-stream"));
        }
        if f.starts_with("tile/entries/") {
            let (_, h, gz) = get(&s, &format!("/{f}"), "Accept-Encoding: gzip\r\n");
            assert_eq!(header(&h, "content-encoding"), Some("gzip"), "{f}");
            assert_eq!(header(&h, "vary"), Some("Accept-Encoding"), "{f}");
            let mut plain = Vec::new();
            flate2::read::GzDecoder::new(gz.as_slice())
                .read_to_end(&mut plain)
                .expect("gunzip");
            assert_eq!(plain, want, "{f} gzipped");
            assert!(gz.len() < want.len() / 2, "bundles compress");
        }
    }

    let dir = out.path().to_str().expect("utf-8 path");
    let from_dir = python_reader(&["--base", dir, "--api", &s.base]);
    assert!(from_dir.contains(&format!("size {size}")), "{from_dir}");
    assert!(
        from_dir.contains(&format!("{size} inclusion")),
        "{from_dir}"
    );
    let from_api = python_reader(&["--base", &s.base, "--api", &s.base]);
    assert!(from_api.contains(&format!("{size} entries")), "{from_api}");

    // The reader is not a rubber stamp: one flipped bit in a level-0 tile
    // of the directory, and it refuses.
    let victim = out.path().join("tile/0/001");
    let mut bytes = std::fs::read(&victim).expect("tile");
    bytes[100] ^= 1;
    std::fs::write(&victim, bytes).expect("write");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tiles_reader.py");
    let refused = std::process::Command::new("python3")
        .args([script, "--base", dir])
        .output()
        .expect("python3 runs");
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stdout).contains("MISMATCH"));
}

#[test]
fn a_tile_served_again_comes_from_the_cache_with_the_same_bytes_and_is_counted() {
    let s = TestServer::start(|_| {});
    let c = s.client();
    seed(&s, &c);
    s.wait_verified();
    let (hits, misses) = (
        common::metric(&c, "ledger_tile_cache_hits_total"),
        common::metric(&c, "ledger_tile_cache_misses_total"),
    );
    let (first, _, a) = get(&s, "/tile/0/000.p/5", "");
    let (again, _, b) = get(&s, "/tile/0/000.p/5", "");
    assert_eq!((first, again), (200, 200));
    assert_eq!(a, b);
    assert_eq!(a.len(), 5 * 32);
    assert_eq!(
        common::metric(&c, "ledger_tile_cache_misses_total"),
        misses + 1.0
    );
    assert_eq!(
        common::metric(&c, "ledger_tile_cache_hits_total"),
        hits + 1.0
    );
    // Gzipped and plain bundles are kept apart.
    let (_, h, _) = get(&s, "/tile/entries/000.p/5", "Accept-Encoding: gzip\r\n");
    assert_eq!(header(&h, "content-encoding"), Some("gzip"));
    let (_, h, plain) = get(&s, "/tile/entries/000.p/5", "");
    assert_eq!(header(&h, "content-encoding"), None);
    assert_eq!(
        ledger::tiles::decode_bundle(&plain).map(|l| l.len()),
        Some(5)
    );
}

#[test]
fn tiles_outside_the_tree_are_not_found_and_malformed_paths_are_refused() {
    let s = grown(0);
    let size = s.state.events.ledger().head().size;
    assert!(size < 256);
    let (status, h, _) = get(&s, &format!("/tile/0/000.p/{size}"), "");
    assert_eq!(status, 200);
    assert_eq!(header(&h, "content-type"), Some("application/octet-stream"));
    for (path, code) in [
        (format!("/tile/0/000.p/{}", size + 1), 404),
        ("/tile/0/000".to_owned(), 404),
        ("/tile/entries/001.p/1".to_owned(), 404),
        ("/tile/1/000.p/1".to_owned(), 404),
        ("/tile/63/000.p/1".to_owned(), 404),
        ("/tile/0/0".to_owned(), 400),
        ("/tile/0/x000/000".to_owned(), 400),
        ("/tile/0/000.p/256".to_owned(), 400),
        ("/tile/8/0/000".to_owned(), 400),
        ("/tile/data/000".to_owned(), 400),
    ] {
        let (status, h, body) = get(&s, &path, "");
        assert_eq!(status, code, "{path}: {}", String::from_utf8_lossy(&body));
        assert_eq!(
            header(&h, "content-type"),
            Some("application/problem+json"),
            "{path}"
        );
        let p: serde_json::Value = serde_json::from_slice(&body).expect("problem");
        let want = if code == 404 {
            "not_found"
        } else {
            "invalid_parameter"
        };
        assert_eq!(p["code"], want, "{path}");
    }
}

#[test]
fn the_read_token_guards_tiles() {
    let s = TestServer::start(|c| c.read_token = Some("s3cret".into()));
    let (status, _, _) = get(&s, "/tile/0/000.p/1", "");
    assert_eq!(status, 401);
    let (status, _, body) = get(&s, "/tile/0/000.p/1", "Authorization: Bearer s3cret\r\n");
    assert_eq!(status, 200);
    assert_eq!(body.len(), 32);
}

#[test]
fn serve_keeps_a_tiles_directory_up_to_date() {
    let out = tempfile::tempdir().expect("out");
    let dir = out.path().to_path_buf();
    let s = TestServer::start(|c| {
        c.tiles_dir = Some(dir.clone());
        c.tiles_sync_secs = 1;
    });
    let c = s.client();
    seed(&s, &c);
    let size = s.state.events.ledger().head().size;
    let synced = || {
        std::fs::read(dir.join("checkpoint"))
            .ok()
            .and_then(|n| anchors::open_checkpoint(&n, &s.vkey).ok())
            .is_some_and(|cp| cp.size == size)
    };
    assert!(within_30s(synced), "the directory never reached {size}");
    let f = files(&dir);
    assert!(f.contains(&format!("tile/entries/000.p/{size}")), "{f:?}");
    // The checkpoint file is written before the gauge is set: wait for both.
    assert!(
        within_30s(|| common::metric(&c, "ledger_tiles_synced_size") == size as f64),
        "ledger_tiles_synced_size never reached {size}"
    );
}

#[test]
fn an_entry_too_long_for_a_bundle_is_refused_and_nothing_is_appended() {
    let s = TestServer::start(|_| {});
    let c = s.client();
    seed(&s, &c);
    let before = s.state.events.ledger().head().size;
    let mut p = s.poster(&c);
    let evidence = (0..800)
        .map(|i| EvidenceRef {
            index: i,
            leaf_hash: "ab".repeat(32),
        })
        .collect();
    let reply = p
        .post_refused(
            "operator",
            Event::PromotionRecommended(PromotionRecommended {
                task_class: testkit::world::TASK_CLASS.into(),
                current_tier: Tier::Bronze,
                recommended_tier: Tier::Silver,
                evidence,
                evidence_tree: None,
                settings: None,
                rationale: Vec::new(),
                checkpoint: CheckpointRef {
                    size: 1,
                    root: "00".repeat(32),
                },
                requires_human_approval: true,
                request_id: "req-1".into(),
            }),
        )
        .expect("answer");
    assert_eq!(
        reply.status,
        413,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let p: serde_json::Value = serde_json::from_slice(&reply.body).expect("problem");
    assert_eq!(p["code"], "entry_too_large");
    assert!(
        p["field"].as_str().is_some_and(|f| f.contains("payload")),
        "{p}"
    );
    assert_eq!(s.state.events.ledger().head().size, before);
}
