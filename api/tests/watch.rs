//! `ledger watch` follows a log through its C2SP tiles: a growing log
//! passes step after step; a fork signed with the real key, a tampered
//! entry bundle (alone, or with its leaf hash rewritten in its tile), an
//! anchor the log does not extend, a checkpoint without
//! its witness quorum and an older checkpoint are each caught.

mod common;

use std::path::{Path, PathBuf};

use anchors::LogKey;
use axum::extract::Path as UrlPath;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use common::{run_ledger, seed, TestServer};
use ledger::tiles::decode_bundle;
use ledger::{Config, Ledger, Raw};

/// Serves the files of `dir` over HTTP, as any static server would.
fn serve_dir(dir: PathBuf) -> String {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let app = axum::Router::new().route(
        "/{*path}",
        axum::routing::get(move |UrlPath(p): UrlPath<String>| {
            let file = dir.join(p);
            async move {
                match std::fs::read(file) {
                    Ok(b) => (StatusCode::OK, b).into_response(),
                    Err(_) => StatusCode::NOT_FOUND.into_response(),
                }
            }
        }),
    );
    std::thread::spawn(move || rt.block_on(async move { axum::serve(listener, app).await }));
    url
}

fn raw_log(prefix: &str, n: u64) -> (tempfile::TempDir, Ledger<Raw>) {
    let d = tempfile::tempdir().expect("dir");
    let log = Ledger::open(d.path(), Config::default()).expect("open");
    grow(&log, prefix, n);
    (d, log)
}

fn grow(log: &Ledger<Raw>, prefix: &str, to: u64) {
    for i in log.head().size..to {
        log.append(format!("{prefix} {i}").into_bytes())
            .expect("append");
    }
}

fn sync(log: &Ledger<Raw>, key: &LogKey, dir: &Path) {
    api::tiles::sync_dir(log, key, dir, true, None, |_, _| {}).expect("sync");
}

fn watch(url: &str, key: &LogKey, state: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let out = run_ledger(
        &[
            &["watch", "--once", "--log", url, "--key", key.verifier_key()],
            &["--state", state.to_str().expect("utf-8")][..],
            extra,
        ]
        .concat(),
    );
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn a_growing_log_is_followed_and_every_divergence_is_caught() {
    let key = LogKey::from_seed("watch.test/log", [3; 32]).expect("key");
    let (_a, honest) = raw_log("honest", 300);
    let served = tempfile::tempdir().expect("served");
    sync(&honest, &key, served.path());
    let url = serve_dir(served.path().to_path_buf());
    let work = tempfile::tempdir().expect("work");
    let state = work.path().join("watch.checkpoint");

    let (code, out) = watch(&url, &key, &state, &[]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("size 300 consistent with nothing (first step); 300 new entries"),
        "{out}"
    );
    grow(&honest, "honest", 700);
    sync(&honest, &key, served.path());
    let (code, out) = watch(&url, &key, &state, &[]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("size 700 consistent with the trusted size 300; 400 new entries"),
        "{out}"
    );

    // Stale: the directory shows an older checkpoint than the one trusted.
    let older = key
        .sign_checkpoint(300, &honest.root_at(300).expect("root"))
        .expect("note");
    let newest = std::fs::read(served.path().join("checkpoint")).expect("checkpoint");
    std::fs::write(served.path().join("checkpoint"), &older).expect("write");
    let (code, out) = watch(&url, &key, &state, &[]);
    assert_eq!(code, Some(3), "{out}");
    // A reader of that older checkpoint finds its partial tiles deleted
    // (their full tiles exist now) and reads the full ones instead.
    assert!(!served.path().join("tile/0/001.p").exists());
    let (code, out) = watch(&url, &key, &work.path().join("older.checkpoint"), &[]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("size 300 consistent with nothing"), "{out}");
    std::fs::write(served.path().join("checkpoint"), &newest).expect("write");

    // A tile that cannot be fetched is an error of the step (exit 2), not
    // a divergence.
    let tile = served.path().join("tile/0/000");
    let kept = std::fs::read(&tile).expect("tile");
    std::fs::remove_file(&tile).expect("remove");
    let (code, out) = watch(&url, &key, &work.path().join("missing.checkpoint"), &[]);
    assert_eq!(code, Some(2), "{out}");
    std::fs::write(&tile, kept).expect("write");

    // A signed, absurd tree size is refused as such, without a panic.
    let absurd = key
        .sign_checkpoint(u64::MAX, &ledger::Hash([1; 32]))
        .expect("note");
    std::fs::write(served.path().join("checkpoint"), &absurd).expect("write");
    let (code, out) = watch(&url, &key, &state, &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("more than any log can hold"), "{out}");
    std::fs::write(served.path().join("checkpoint"), &newest).expect("write");

    // A tampered entry in a bundle: the leaf no longer hashes to its tile.
    let bundle = served.path().join("tile/entries/001");
    let clean = std::fs::read(&bundle).expect("bundle");
    let mut bad = clean.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    std::fs::write(&bundle, &bad).expect("write");
    let fresh = work.path().join("fresh.checkpoint");
    let (code, out) = watch(&url, &key, &fresh, &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("does not hash to its leaf hash"), "{out}");

    // The same entry, with its leaf hash in the tile of leaf hashes
    // rewritten to match: that tile no longer hashes to its parent.
    let leaves = decode_bundle(&bad).expect("bundle").len();
    let leaf = decode_bundle(&bad).expect("bundle")[leaves - 1].to_vec();
    let tile = served.path().join("tile/0/001");
    let clean_tile = std::fs::read(&tile).expect("tile");
    let mut bad_tile = clean_tile.clone();
    let at = (leaves - 1) * 32;
    bad_tile[at..at + 32].copy_from_slice(&ledger::leaf_hash(&leaf).0);
    std::fs::write(&tile, &bad_tile).expect("write");
    let (code, out) = watch(&url, &key, &work.path().join("fresh2.checkpoint"), &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("the tiles do not match the signed tree"),
        "{out}"
    );
    assert!(!out.contains("does not hash to its leaf hash"), "{out}");
    std::fs::write(&tile, &clean_tile).expect("write");
    std::fs::write(&bundle, &clean).expect("write");

    // A fork: another history of the same origin, signed with the real key
    // and longer, replaces the served tiles.
    let (_b, fork) = raw_log("forked", 900);
    sync(&fork, &key, served.path());
    let (code, out) = watch(&url, &key, &state, &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("not consistent with the checkpoint trusted at size 700"),
        "{out}"
    );

    // An anchor of the honest log: the forked log does not extend it.
    let anchors_dir = work.path().join("anchors");
    std::fs::create_dir_all(&anchors_dir).expect("dir");
    std::fs::write(
        anchors_dir.join("2026-11-25T000000Z-000000000500.checkpoint"),
        key.sign_checkpoint(500, &honest.root_at(500).expect("root"))
            .expect("note"),
    )
    .expect("anchor");
    let (code, out) = watch(
        &url,
        &key,
        &work.path().join("other.checkpoint"),
        &["--anchors", anchors_dir.to_str().expect("utf-8")],
    );
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("anchor"), "{out}");

    // A policy that needs a witness: the log's own checkpoint has none.
    let w = anchors::CosignerKey::from_seed("witness.test/w", [4; 32]).expect("key");
    let policy = work.path().join("policy");
    std::fs::write(
        &policy,
        format!("witness w {}\nquorum w\n", w.verifier_key()),
    )
    .expect("write");
    let (code, out) = watch(
        &url,
        &key,
        &work.path().join("third.checkpoint"),
        &["--policy", policy.to_str().expect("utf-8")],
    );
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("quorum"), "{out}");
}

#[test]
fn the_watcher_follows_the_ledger_itself_and_serves_metrics() {
    let s = TestServer::start(|_| {});
    let c = s.client();
    seed(&s, &c);
    let work = tempfile::tempdir().expect("work");
    let state = work.path().join("watch.checkpoint");
    let key = &s.vkey;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("port")
        .local_addr()
        .expect("addr")
        .port();
    let listen = format!("127.0.0.1:{port}");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ledger"))
        .args(["watch", "--log", &s.base, "--key", key, "--interval", "1"])
        .args([
            "--state",
            state.to_str().expect("utf-8"),
            "--metrics-listen",
            &listen,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("watch");
    let size = s.state.events.ledger().head().size;
    let metrics = verifier::Client::new(&format!("http://{listen}"), None);
    let seen = common::within_30s(|| {
        metrics.get("/metrics").ok().is_some_and(|r| {
            let t = r.text();
            t.contains(&format!("ledger_watch_checkpoint_size {size}"))
                && t.contains("ledger_watch_divergence 0")
        })
    });
    let _ = child.kill();
    let _ = child.wait();
    assert!(seen, "the watcher never reported size {size}");
    let note = std::fs::read(&state).expect("state");
    let cp = anchors::open_checkpoint(&note, key).expect("a signed checkpoint");
    assert_eq!(cp.size, size);
}
