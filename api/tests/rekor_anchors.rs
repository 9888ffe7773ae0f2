//! Anchors in Rekor (docs/SIGSTORE.md), against a LOOPBACK STAND-IN for the
//! Rekor v1 write API (`sigstore-check/testdata/synthetic/rekor_standin.py`,
//! Python with `cryptography`), which logs hashedrekord entries in a tree of
//! its own and answers with inclusion proofs, checkpoints and SETs signed
//! with the synthetic instance's test-only Rekor key. Nothing on the
//! ledger's side is mocked: `ledger anchor publish --rekor` posts to it,
//! turns its answer into a bundle, and keeps the bundle only once it
//! verifies against the synthetic trusted root; `ledger verify --anchors
//! --rekor-pub` checks every kept bundle offline.

mod common;

use std::path::{Path, PathBuf};

use common::{git, run_ledger};

fn synthetic() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../sigstore-check/testdata/synthetic")
}

/// A running stand-in, killed when dropped.
struct StandIn {
    child: std::process::Child,
    url: String,
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the stand-in; its first `fail_first` submissions answer 503.
fn stand_in(fail_first: u32) -> StandIn {
    stand_in_with(&["--fail-first", &fail_first.to_string()])
}

/// Starts the stand-in (Rekor and Fulcio) with `args`.
fn stand_in_with(args: &[&str]) -> StandIn {
    let dir = tempfile::tempdir().expect("dir");
    let port_file = dir.path().join("port");
    // Held at once, so that a failure below still kills and waits for it.
    let mut s = StandIn {
        child: std::process::Command::new("python3")
            .arg(synthetic().join("rekor_standin.py"))
            .arg("--port-file")
            .arg(&port_file)
            .args(args)
            .spawn()
            .expect("python3 runs the Rekor stand-in"),
        url: String::new(),
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Ok(port) = std::fs::read_to_string(&port_file) {
            if let Ok(port) = port.trim().parse::<u16>() {
                s.url = format!("http://127.0.0.1:{port}");
                return s;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the Rekor stand-in did not start (is `cryptography` installed for python3?)"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// `ledger verify` of the data directory `data` and its anchors (`source`:
/// `--anchors DIR` or `--anchors-repo URL`), each kept Rekor bundle checked
/// against the anchoring key `public`; `strict` fails on an anchor without
/// one.
fn verify_rekor(
    data: &str,
    source: [&str; 2],
    public: &str,
    root: &str,
    strict: bool,
) -> std::process::Output {
    let mut args = vec!["verify", "--data-dir", data, "--quiet"];
    args.extend(source);
    args.extend(["--rekor-pub", public, "--sigstore-root", root]);
    if strict {
        args.push("--rekor-require-all");
    }
    run_ledger(&args)
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

struct Setup {
    _work: tempfile::TempDir,
    data: String,
    anchors: PathBuf,
    key: String,
    public: String,
    root: String,
}

/// A data directory and an anchoring key.
fn setup() -> Setup {
    let work = tempfile::tempdir().expect("work");
    let data = work.path().join("data");
    let data_s = data.to_str().expect("utf8").to_owned();
    let out = run_ledger(&["init", "--data-dir", &data_s]);
    assert!(out.status.success(), "{}", text(&out));
    let key = work.path().join("anchoring.key");
    let key_s = key.to_str().expect("utf8").to_owned();
    let out = run_ledger(&["anchor", "rekor-keygen", "--out", &key_s]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("-----BEGIN PUBLIC KEY-----"));
    Setup {
        anchors: data.join("anchors"),
        data: data_s,
        public: format!("{key_s}.pub"),
        key: key_s,
        root: synthetic()
            .join("trusted_root.json")
            .to_str()
            .expect("utf8")
            .to_owned(),
        _work: work,
    }
}

impl Setup {
    fn publish(&self, url: &str) -> std::process::Output {
        run_ledger(&[
            "anchor",
            "publish",
            "--data-dir",
            &self.data,
            "--rekor",
            url,
            "--rekor-key",
            &self.key,
            "--sigstore-root",
            &self.root,
            "--rekor-attempts",
            "2",
        ])
    }

    fn verify(&self, public: &str) -> std::process::Output {
        let anchors = self.anchors.to_str().expect("utf8");
        verify_rekor(
            &self.data,
            ["--anchors", anchors],
            public,
            &self.root,
            false,
        )
    }

    /// `ledger anchor publish` to the Rekor v2 log and the timestamp
    /// authority of the stand-in at `url`, signed with the anchoring key
    /// or, with `token`, keyless.
    fn publish_v2(&self, url: &str, token: Option<&str>) -> std::process::Output {
        let tsa = format!("{url}/api/v1/timestamp");
        let file = self.anchors.with_file_name("token.jwt");
        let mut args = vec![
            "anchor",
            "publish",
            "--data-dir",
            &self.data,
            "--rekor",
            url,
            "--rekor-version",
            "2",
            "--tsa",
            &tsa,
            "--sigstore-root",
            &self.root,
            "--rekor-attempts",
            "2",
        ];
        match token {
            Some(t) => {
                std::fs::write(&file, t).expect("token file");
                args.extend([
                    "--fulcio",
                    url,
                    "--identity-token-file",
                    file.to_str().expect("utf8"),
                ]);
            }
            None => args.extend(["--rekor-key", &self.key]),
        }
        let out = run_ledger(&args);
        let _ = std::fs::remove_file(&file);
        out
    }

    /// The locations the log's `anchor.published` entries name.
    fn locations(&self) -> Vec<String> {
        let log =
            ledger::Ledger::open(Path::new(&self.data), ledger::Config::default()).expect("log");
        log.entries(0, log.head().size)
            .expect("entries")
            .into_iter()
            .filter_map(
                |e| match events::decode_logged_leaf(&e.leaf).ok()?.0.payload.event {
                    events::Event::AnchorPublished(a) => Some(a.location),
                    _ => None,
                },
            )
            .collect()
    }

    /// `ledger verify --anchors` with the anchoring key passes, having
    /// verified `n` kept bundles.
    fn verified(&self, n: usize) {
        let v = self.verify(&self.public);
        assert!(v.status.success(), "{}", text(&v));
        assert!(
            text(&v).contains(&format!("Rekor: {n} anchors' bundles verified")),
            "{}",
            text(&v)
        );
    }

    fn files(&self, suffix: &str) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&self.anchors)
            .expect("anchors")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.to_str().is_some_and(|s| s.ends_with(suffix)))
            .collect();
        v.sort();
        v
    }
}

#[test]
fn an_anchor_is_published_to_rekor_kept_as_a_bundle_and_checked_offline() {
    let s = setup();
    let rekor = stand_in(0);
    let out = s.publish(&rekor.url);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("Rekor: 1 anchor(s) published"),
        "{}",
        text(&out)
    );
    assert!(text(&out).contains("recorded at index"), "{}", text(&out));
    assert_eq!(s.files(".checkpoint").len(), 1);
    assert_eq!(s.files(".sigstore.json").len(), 1);
    // The log records where Rekor has the anchor, beside the anchor file.
    let locations = s.locations();
    assert_eq!(locations.len(), 2, "{locations:?}");
    assert!(
        locations[1].starts_with(&format!("rekor {} logIndex ", rekor.url)),
        "{locations:?}"
    );
    s.verified(1);
}

/// Rekor v2: each signature is timestamped by the authority first (a v2
/// entry carries no time), logged as a hashedrekord 0.0.2, and the bundle
/// (entry, checkpoint, RFC 3161 timestamp) verifies offline against the
/// synthetic root, which names the v2 log and the authority.
#[test]
fn rekor_v2_an_anchor_is_timestamped_logged_and_checked_offline() {
    let s = setup();
    let standin = stand_in(0);
    let out = s.publish_v2(&standin.url, None);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("Rekor: 1 anchor(s) published"),
        "{}",
        text(&out)
    );
    let bundles = s.files(".sigstore.json");
    assert_eq!(bundles.len(), 1);
    let b: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&bundles[0]).expect("bundle")).expect("json");
    let m = &b["verificationMaterial"];
    assert_eq!(
        m["tlogEntries"][0]["kindVersion"]["version"], "0.0.2",
        "{b}"
    );
    assert!(m["tlogEntries"][0].get("inclusionPromise").is_none(), "{b}");
    assert!(
        m["timestampVerificationData"]["rfc3161Timestamps"][0]["signedTimestamp"].is_string(),
        "{b}"
    );
    let locations = s.locations();
    assert!(
        locations[1].starts_with(&format!("rekor-v2 {} logIndex ", standin.url)),
        "{locations:?}"
    );
    s.verified(1);
    // Without its timestamp the bundle has no verified time, and a flipped
    // byte in the timestamp's signature breaks it: each is refused.
    let original = std::fs::read(&bundles[0]).expect("bundle");
    let mut untimed = b.clone();
    untimed["verificationMaterial"]
        .as_object_mut()
        .expect("material")
        .remove("timestampVerificationData");
    std::fs::write(&bundles[0], untimed.to_string()).expect("write");
    let v = s.verify(&s.public);
    assert!(!v.status.success(), "{}", text(&v));
    assert!(
        text(&v).contains("sigstore_timestamp_invalid"),
        "{}",
        text(&v)
    );
    let mut flipped = b.clone();
    let stamp = &mut flipped["verificationMaterial"]["timestampVerificationData"]
        ["rfc3161Timestamps"][0]["signedTimestamp"];
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut der = b64.decode(stamp.as_str().expect("b64")).expect("der");
    let last = der.len() - 2;
    der[last] ^= 1;
    *stamp = b64.encode(der).into();
    std::fs::write(&bundles[0], flipped.to_string()).expect("write");
    let v = s.verify(&s.public);
    assert!(!v.status.success(), "{}", text(&v));
    assert!(
        text(&v).contains("sigstore_timestamp_invalid"),
        "{}",
        text(&v)
    );
    std::fs::write(&bundles[0], original).expect("write");
    assert!(s.verify(&s.public).status.success());
}

/// Rekor v2, keyless: the Fulcio certificate is the entry's verifier, and
/// the bundle verifies as the token's identity.
#[test]
fn rekor_v2_keyless_an_anchor_verifies_as_the_operators_identity() {
    let s = setup();
    let standin = stand_in(0);
    let out = s.publish_v2(&standin.url, Some(&token("ops@example.org")));
    assert!(out.status.success(), "{}", text(&out));
    let v = s.verify_identity("ops@example.org", true);
    assert!(v.status.success(), "{}", text(&v));
    let v = s.verify_identity("mallory@example.org", false);
    assert!(!v.status.success(), "{}", text(&v));
}

/// A timestamp authority outage is an outage: the local anchor stays, and
/// the next run publishes it.
#[test]
fn rekor_v2_a_timestamp_authority_outage_then_catch_up() {
    let s = setup();
    let standin = stand_in_with(&["--tsa-fail-first", "2"]);
    let out = s.publish_v2(&standin.url, None);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("the timestamp authority answered 503"),
        "{}",
        text(&out)
    );
    assert!(text(&out).contains("kept locally"), "{}", text(&out));
    assert!(s.files(".sigstore.json").is_empty());
    let out = s.publish_v2(&standin.url, None);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("Rekor: 2 anchor(s) published"),
        "{}",
        text(&out)
    );
    let anchors = s.anchors.to_str().expect("utf8");
    let v = verify_rekor(&s.data, ["--anchors", anchors], &s.public, &s.root, true);
    assert!(v.status.success(), "{}", text(&v));
}

/// A timestamp the pinned root does not vouch for is refused before the
/// signature goes to Rekor: nothing is logged that no bundle could use.
#[test]
fn rekor_v2_an_untrusted_timestamp_is_refused_before_anything_is_logged() {
    let s = setup();
    let standin = stand_in(0);
    let tsa = format!("{}/api/v1/timestamp", standin.url);
    // The production root embedded in the build: it names no synthetic
    // timestamp authority.
    let out = run_ledger(&[
        "anchor",
        "publish",
        "--data-dir",
        &s.data,
        "--rekor",
        &standin.url,
        "--rekor-version",
        "2",
        "--tsa",
        &tsa,
        "--rekor-key",
        &s.key,
        "--rekor-attempts",
        "1",
    ]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("the timestamp authority's answer does not verify"),
        "{}",
        text(&out)
    );
    let note = verifier::Client::new(&standin.url, None)
        .get_text("/api/v2/checkpoint")
        .expect("the stand-in's Rekor v2 checkpoint");
    assert_eq!(
        note.lines().nth(1),
        Some("5"),
        "only the stand-in's own dummy entries: {note}"
    );
}

/// Rekor v2 without a timestamp authority is refused before anything is
/// signed: its bundles would have no verified time.
#[test]
fn rekor_v2_without_a_timestamp_authority_is_refused_before_signing() {
    let s = setup();
    let out = run_ledger(&[
        "anchor",
        "publish",
        "--data-dir",
        &s.data,
        "--rekor",
        "http://127.0.0.1:9",
        "--rekor-version",
        "2",
        "--rekor-key",
        &s.key,
        "--sigstore-root",
        &s.root,
    ]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("Rekor v2 needs a timestamp authority"),
        "{}",
        text(&out)
    );
    assert!(!s.anchors.exists() || s.files(".checkpoint").is_empty());
}

#[test]
fn an_outage_leaves_the_local_anchor_and_the_next_run_catches_up() {
    let s = setup();
    // Two tries per run: the first run meets two 503s and gives up.
    let rekor = stand_in(2);
    let out = s.publish(&rekor.url);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("kept locally"), "{}", text(&out));
    assert_eq!(s.files(".checkpoint").len(), 1, "the local anchor stays");
    assert!(s.files(".sigstore.json").is_empty());
    let v = s.verify(&s.public);
    assert!(v.status.success(), "{}", text(&v));
    assert!(
        text(&v).contains("not yet published to Rekor"),
        "{}",
        text(&v)
    );
    // Strict, an anchor without a bundle fails the check.
    let anchors = s.anchors.to_str().expect("utf8");
    let strict = verify_rekor(&s.data, ["--anchors", anchors], &s.public, &s.root, true);
    assert!(!strict.status.success(), "{}", text(&strict));
    assert!(
        text(&strict).contains("no Rekor bundle kept beside it"),
        "{}",
        text(&strict)
    );
    // The next run publishes its own anchor and the one the outage missed.
    let out = s.publish(&rekor.url);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("Rekor: 2 anchor(s) published"),
        "{}",
        text(&out)
    );
    assert_eq!(s.files(".sigstore.json").len(), 2);
    s.verified(2);
}

#[test]
fn attack_a_bundle_kept_beside_another_anchor_is_refused() {
    let s = setup();
    let rekor = stand_in(0);
    for _ in 0..2 {
        let out = s.publish(&rekor.url);
        assert!(out.status.success(), "{}", text(&out));
    }
    let bundles = s.files(".sigstore.json");
    assert_eq!(bundles.len(), 2);
    let first = std::fs::read(&bundles[0]).expect("bundle");
    std::fs::write(&bundles[1], first).expect("swap");
    let v = s.verify(&s.public);
    assert!(!v.status.success(), "{}", text(&v));
    assert!(
        text(&v).contains("sigstore_message_mismatch"),
        "{}",
        text(&v)
    );
}

#[test]
fn attack_a_bundle_checked_against_another_anchoring_key_is_refused() {
    let s = setup();
    let rekor = stand_in(0);
    let out = s.publish(&rekor.url);
    assert!(out.status.success(), "{}", text(&out));
    let other = setup();
    let v = s.verify(&other.public);
    assert!(!v.status.success(), "{}", text(&v));
    assert!(text(&v).contains("sigstore_"), "{}", text(&v));
}

#[test]
fn attack_a_bundle_with_a_flipped_byte_in_its_set_is_refused() {
    let s = setup();
    let rekor = stand_in(0);
    let out = s.publish(&rekor.url);
    assert!(out.status.success(), "{}", text(&out));
    let path = &s.files(".sigstore.json")[0];
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).expect("bundle")).expect("json");
    let set = &mut v["verificationMaterial"]["tlogEntries"][0]["inclusionPromise"]
        ["signedEntryTimestamp"];
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut raw = b64.decode(set.as_str().expect("SET")).expect("b64");
    let last = raw.len() - 1;
    raw[last] ^= 1;
    *set = b64.encode(raw).into();
    std::fs::write(path, serde_json::to_vec(&v).expect("json")).expect("write");
    let out = s.verify(&s.public);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("sigstore_tlog_promise_invalid"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_bundle_without_its_anchor_is_refused() {
    let s = setup();
    let rekor = stand_in(0);
    let out = s.publish(&rekor.url);
    assert!(out.status.success(), "{}", text(&out));
    let bundle = &s.files(".sigstore.json")[0];
    std::fs::copy(bundle, s.anchors.join("stray.checkpoint.old.sigstore.json")).expect("copy");
    let v = s.verify(&s.public);
    assert!(!v.status.success(), "{}", text(&v));
    assert!(text(&v).contains("without its anchor file"), "{}", text(&v));
}

/// `ledger serve` with `rekor_url`: each anchor it publishes on its schedule
/// goes to Rekor; an outage shows in `ledger_rekor_pending_anchors` and
/// `ledger_rekor_failures_total`, and the retry schedule catches up.
#[test]
fn the_server_publishes_its_anchors_to_rekor_and_catches_up_after_an_outage() {
    let keys = setup();
    // Three 503s: the first run (three tries) fails whole.
    let rekor = stand_in(3);
    let url = rekor.url.clone();
    let s = common::TestServer::start(|c| {
        c.anchor_interval_secs = 1;
        c.rekor_url = Some(url);
        c.rekor_key_file = Some(PathBuf::from(&keys.key));
        c.sigstore_root = Some(PathBuf::from(&keys.root));
        c.rekor_retry_secs = 1;
    });
    s.wait_ready();
    let anchors = s.path().join("anchors");
    let c = s.client();
    let metric = |name: &str| common::metric(&c, name);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut saw_outage = false;
    loop {
        saw_outage |= metric("ledger_rekor_failures_total") > 0.0;
        let bundles = bundles_in(&anchors);
        if saw_outage && bundles >= 1 && metric("ledger_rekor_pending_anchors") == 0.0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no anchor reached Rekor after the outage (failures {}, pending {}, bundles {bundles})",
            metric("ledger_rekor_failures_total"),
            metric("ledger_rekor_pending_anchors")
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    // Recording where an anchor went does not make the log worth
    // anchoring again: no new anchor follows on the next ticks.
    let anchors_now = std::fs::read_dir(&anchors).expect("anchors").count();
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(
        std::fs::read_dir(&anchors).expect("anchors").count(),
        anchors_now,
        "the server kept anchoring its own records"
    );
    let out = stop_and_verify(s, &keys, false);
    assert!(text(&out).contains("bundles verified"), "{}", text(&out));
}

/// How many Rekor bundles `anchors` holds.
fn bundles_in(anchors: &Path) -> usize {
    std::fs::read_dir(anchors)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".sigstore.json"))
                .count()
        })
        .unwrap_or(0)
}

/// Stops `s` and checks its data directory's anchors and their bundles
/// against `keys`' anchoring key; the check must pass.
fn stop_and_verify(s: common::TestServer, keys: &Setup, strict: bool) -> std::process::Output {
    let dir = s.stop();
    let anchors = dir.path().join("anchors");
    let out = verify_rekor(
        dir.path().to_str().expect("utf8"),
        ["--anchors", anchors.to_str().expect("utf8")],
        &keys.public,
        &keys.root,
        strict,
    );
    assert!(out.status.success(), "{}", text(&out));
    out
}

/// `ledger serve` with `rekor_version = 2`: its anchors reach the Rekor v2
/// log, each timestamped by the authority first, and their bundles verify.
#[test]
fn the_server_publishes_its_anchors_to_rekor_v2() {
    let keys = setup();
    let rekor = stand_in(0);
    let url = rekor.url.clone();
    let s = common::TestServer::start(|c| {
        c.anchor_interval_secs = 1;
        c.rekor_url = Some(url.clone());
        c.rekor_version = 2;
        c.tsa_url = Some(format!("{url}/api/v1/timestamp"));
        c.rekor_key_file = Some(PathBuf::from(&keys.key));
        c.sigstore_root = Some(PathBuf::from(&keys.root));
        c.rekor_retry_secs = 1;
    });
    s.wait_ready();
    let anchors = s.path().join("anchors");
    let c = s.client();
    assert!(
        common::within_30s(|| {
            bundles_in(&anchors) >= 1 && common::metric(&c, "ledger_rekor_pending_anchors") == 0.0
        }),
        "no anchor reached Rekor v2"
    );
    stop_and_verify(s, &keys, true);
}

/// The anchoring key signs only bytes that are an anchor of this log, read
/// once: a file put into the anchors directory that is not one is never
/// submitted.
#[test]
fn attack_a_file_that_is_not_an_anchor_of_this_log_is_never_signed() {
    let s = setup();
    let rekor = stand_in(0);
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(
        dir.path()
            .join("2026-01-01T000000Z-000000000009.checkpoint"),
        b"example.org/another-log\n9\nAAAA\n\n",
    )
    .expect("write");
    let log_key = anchors::LogKey::from_private(
        &std::fs::read_to_string(Path::new(&s.data).join("log.key")).expect("key"),
    )
    .expect("key");
    let publisher = api::rekor::Rekor::new(
        rekor.url.clone(),
        api::rekor::read_key(Path::new(&s.key)).expect("anchoring key"),
        api::rekor::trust_root(Some(Path::new(&s.root))).expect("root"),
    );
    let check = api::rekor::anchor_of(
        vec![log_key.verifier_key().to_owned()],
        log_key.origin().to_owned(),
    );
    let (done, e) =
        api::rekor::publish_pending(dir.path(), &publisher, &check).expect_err("refused");
    assert!(done.published.is_empty());
    assert!(
        format!("{e:#}").contains("is not an anchor of this log"),
        "{e:#}"
    );
    assert_eq!(api::rekor::pending(dir.path()).expect("pending"), 1);
}

/// In a git anchors directory, each bundle is committed and pushed beside
/// its anchor, and `verify --anchors-repo URL --rekor-pub` checks the
/// bundles of a fresh clone.
#[test]
fn bundles_in_a_git_anchors_directory_are_pushed_and_checked_from_a_clone() {
    let s = setup();
    let rekor = stand_in(0);
    let t = tempfile::tempdir().expect("dir");
    let remote = t.path().join("anchors.git");
    git(
        t.path(),
        &["init", "-q", "--bare", remote.to_str().expect("utf8")],
    );
    git(
        t.path(),
        &["clone", "-q", remote.to_str().expect("utf8"), "work"],
    );
    let work = t.path().join("work");
    let out = run_ledger(&[
        "anchor",
        "publish",
        "--data-dir",
        &s.data,
        "--anchors",
        work.to_str().expect("utf8"),
        "--rekor",
        &rekor.url,
        "--rekor-key",
        &s.key,
        "--sigstore-root",
        &s.root,
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let remote = remote.to_str().expect("utf8");
    let out = verify_rekor(
        &s.data,
        ["--anchors-repo", remote],
        &s.public,
        &s.root,
        true,
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("Rekor: 1 anchors' bundles verified"),
        "{}",
        text(&out)
    );
}

/// An OIDC identity token as the stand-in's Fulcio reads it: its claims
/// for `email` at the synthetic issuer, valid ten minutes; the signature
/// part is not checked by the stand-in (real Fulcio checks it).
fn token(email: &str) -> String {
    jwt(serde_json::json!({
        "iss": sigstore_check::synthetic::ISSUER,
        "sub": "operator-7",
        "email": email,
        "email_verified": true,
        "exp": in_ten_minutes(),
    }))
}

fn in_ten_minutes() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_secs()
        + 600
}

/// A JWT with `claims`; its signature part is not checked by the stand-in.
fn jwt(claims: serde_json::Value) -> String {
    use base64::Engine as _;
    let enc = |v: serde_json::Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
    };
    format!(
        "{}.{}.bm90LWNoZWNrZWQ",
        enc(serde_json::json!({"alg": "RS256", "typ": "JWT"})),
        enc(claims)
    )
}

impl Setup {
    /// `ledger anchor publish` keyless, the token read from a file.
    fn publish_keyless(&self, url: &str, token: &str) -> std::process::Output {
        let file = self.anchors.with_file_name("token.jwt");
        std::fs::write(&file, token).expect("token file");
        let out = run_ledger(&[
            "anchor",
            "publish",
            "--data-dir",
            &self.data,
            "--rekor",
            url,
            "--fulcio",
            url,
            "--identity-token-file",
            file.to_str().expect("utf8"),
            "--sigstore-root",
            &self.root,
            "--rekor-attempts",
            "2",
        ]);
        std::fs::remove_file(&file).expect("token file removed");
        out
    }

    /// `ledger verify --anchors` checking every kept bundle as a keyless
    /// signature by `identity` at the synthetic issuer.
    fn verify_identity(&self, identity: &str, strict: bool) -> std::process::Output {
        self.verify_identity_from(identity, sigstore_check::synthetic::ISSUER, strict)
    }

    /// [`Setup::verify_identity`], at the OIDC issuer `issuer`.
    fn verify_identity_from(
        &self,
        identity: &str,
        issuer: &str,
        strict: bool,
    ) -> std::process::Output {
        let mut args = vec![
            "verify",
            "--data-dir",
            &self.data,
            "--quiet",
            "--anchors",
            self.anchors.to_str().expect("utf8"),
            "--rekor-identity",
            identity,
            "--rekor-issuer",
            issuer,
            "--sigstore-root",
            &self.root,
        ];
        if strict {
            args.push("--rekor-require-all");
        }
        run_ledger(&args)
    }
}

/// Every file below `dir`, read whole.
fn every_file(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("dir") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            out.extend(every_file(&p));
        } else {
            out.push((p.clone(), std::fs::read(&p).expect("read")));
        }
    }
    out
}

#[test]
fn keyless_an_anchor_is_published_under_the_operators_identity_and_checked_offline() {
    let s = setup();
    let standin = stand_in(0);
    let t = token("ops@example.org");
    let out = s.publish_keyless(&standin.url, &t);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains(&t), "the token was printed");
    assert!(
        text(&out).contains("keyless: certificates for ops@example.org"),
        "{}",
        text(&out)
    );
    assert!(
        text(&out).contains("Rekor: 1 anchor(s) published"),
        "{}",
        text(&out)
    );
    let bundles = s.files(".sigstore.json");
    assert_eq!(bundles.len(), 1);
    // The bundle carries the Fulcio certificate, not a key hint.
    let b: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&bundles[0]).expect("bundle")).expect("json");
    assert!(
        b["verificationMaterial"]["certificate"]["rawBytes"].is_string(),
        "{b}"
    );
    let v = s.verify_identity("ops@example.org", true);
    assert!(v.status.success(), "{}", text(&v));
    assert!(
        text(&v).contains(
            "Rekor: 1 anchors' bundles verified offline (logged, signed by ops@example.org"
        ),
        "{}",
        text(&v)
    );
    // Checked as someone else's, or as the anchoring key's, it fails.
    let v = s.verify_identity("mallory@example.org", false);
    assert!(!v.status.success(), "{}", text(&v));
    assert!(
        text(&v).contains("sigstore_identity_mismatch"),
        "{}",
        text(&v)
    );
    let v = s.verify(&s.public);
    assert!(!v.status.success(), "{}", text(&v));
    // The token is nowhere in the data directory.
    let data = every_file(Path::new(&s.data));
    assert!(!data.is_empty());
    for (path, bytes) in data {
        assert!(
            !bytes.windows(t.len()).any(|w| w == t.as_bytes()),
            "the identity token was written to {}",
            path.display()
        );
    }
}

/// A GitHub Actions workflow publishes keyless: Fulcio names the workflow
/// file at its ref (a URI SAN), not the token's `sub`, and the kept bundle
/// verifies as that workflow's at GitHub's issuer only.
#[test]
fn keyless_a_github_actions_workflow_publishes_under_its_workflow_uri() {
    use sigstore_check::rekor::GITHUB_ACTIONS_ISSUER;
    let s = setup();
    let standin = stand_in(0);
    let sub = "repo:acme/ledger:ref:refs/heads/main";
    let workflow = "https://github.com/acme/ledger/.github/workflows/anchor.yml@refs/heads/main";
    let t = jwt(serde_json::json!({
        "iss": GITHUB_ACTIONS_ISSUER,
        "sub": sub,
        "job_workflow_ref": "acme/ledger/.github/workflows/anchor.yml@refs/heads/main",
        "exp": in_ten_minutes(),
    }));
    let out = s.publish_keyless(&standin.url, &t);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&format!(
            "keyless: certificates for {workflow} (issuer {GITHUB_ACTIONS_ISSUER})"
        )),
        "{}",
        text(&out)
    );
    let v = s.verify_identity_from(workflow, GITHUB_ACTIONS_ISSUER, true);
    assert!(v.status.success(), "{}", text(&v));
    // Not as the token's subject, nor at another issuer.
    for (identity, issuer, code) in [
        (sub, GITHUB_ACTIONS_ISSUER, "sigstore_identity_mismatch"),
        (
            workflow,
            sigstore_check::synthetic::ISSUER,
            "sigstore_issuer_mismatch",
        ),
    ] {
        let v = s.verify_identity_from(identity, issuer, false);
        assert!(!v.status.success(), "{}", text(&v));
        assert!(text(&v).contains(code), "{code}: {}", text(&v));
    }
}

#[test]
fn keyless_a_fulcio_outage_leaves_the_local_anchor_and_the_next_run_catches_up() {
    let s = setup();
    // Two tries per run: the first run meets two 503s from Fulcio.
    let standin = stand_in_with(&["--fulcio-fail-first", "2"]);
    let t = token("ops@example.org");
    let out = s.publish_keyless(&standin.url, &t);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("Fulcio answered 503"), "{}", text(&out));
    assert!(text(&out).contains("kept locally"), "{}", text(&out));
    assert_eq!(s.files(".checkpoint").len(), 1, "the local anchor stays");
    assert!(s.files(".sigstore.json").is_empty());
    let out = s.publish_keyless(&standin.url, &t);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("Rekor: 2 anchor(s) published"),
        "{}",
        text(&out)
    );
    let v = s.verify_identity("ops@example.org", true);
    assert!(v.status.success(), "{}", text(&v));
}

#[test]
fn keyless_a_token_for_an_issuer_fulcio_does_not_serve_publishes_nothing() {
    let s = setup();
    let standin = stand_in(0);
    use base64::Engine as _;
    let enc = |v: serde_json::Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
    };
    let t = format!(
        "{}.{}.x",
        enc(serde_json::json!({"alg": "RS256"})),
        enc(
            serde_json::json!({"iss": "https://elsewhere.example", "sub": "s", "exp": 4102444800u64})
        )
    );
    let out = s.publish_keyless(&standin.url, &t);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("Fulcio answered 401"), "{}", text(&out));
    assert!(s.files(".sigstore.json").is_empty());
}

#[test]
fn keyless_a_token_is_never_sent_to_fulcio_over_plain_http_elsewhere() {
    let s = setup();
    let t = token("ops@example.org");
    let file = s.anchors.with_file_name("token.jwt");
    std::fs::write(&file, &t).expect("token file");
    let out = run_ledger(&[
        "anchor",
        "publish",
        "--data-dir",
        &s.data,
        "--rekor",
        "http://rekor.example.test",
        "--fulcio",
        "http://fulcio.example.test",
        "--identity-token-file",
        file.to_str().expect("utf8"),
    ]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("only over https"), "{}", text(&out));
    assert!(
        !s.anchors.exists() || s.files(".checkpoint").is_empty(),
        "nothing published"
    );
}

impl Setup {
    /// `ledger audit` of the server `base` serves from this data directory,
    /// against the anchors in `anchors` and their bundles (checked against
    /// `public`), from a first audit's trust in what the server signs.
    fn audit(&self, base: &str, public: &str, anchors: &Path) -> std::process::Output {
        let log = verifier::Client::new(base, None)
            .get_json::<serde_json::Value>("/v1/log")
            .expect("/v1/log");
        let key = log["verifier_key"]
            .as_str()
            .expect("verifier_key")
            .to_owned();
        let trusted = Path::new(&self.data).with_extension("trusted");
        let _ = std::fs::remove_file(&trusted);
        run_ledger(&[
            "audit",
            "--quiet",
            "--init",
            "--server",
            base,
            "--key",
            &key,
            "--trusted",
            trusted.to_str().expect("utf8"),
            "--anchors",
            anchors.to_str().expect("utf8"),
            "--rekor-pub",
            public,
            "--sigstore-root",
            &self.root,
            "--rekor-require-all",
        ])
    }
}

/// `ledger audit --anchors --rekor-pub`: a remote auditor checks that the
/// served tree extends every anchor (the server's consistency proofs,
/// checked against the anchors it signed) and every anchor's Rekor bundle
/// offline, as `verify` does locally.
#[test]
fn an_audit_checks_the_served_tree_against_the_anchors_and_their_rekor_bundles() {
    let s = setup();
    let rekor = stand_in(0);
    let out = s.publish(&rekor.url);
    assert!(out.status.success(), "{}", text(&out));
    let (child, base) =
        common::spawn_ledger(&["--data-dir", &s.data, "--anchor-interval-secs", "0"]);
    let out = s.audit(&base, &s.public, &s.anchors);
    common::stop_ledger(child);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("the audited tree extends all 1 anchors"),
        "{}",
        text(&out)
    );
    assert!(
        text(&out).contains("Rekor: 1 anchors' bundles verified"),
        "{}",
        text(&out)
    );
}

/// The audit fails, and keeps no trusted checkpoint, when an anchor's kept
/// bundle was signed by another anchoring key.
#[test]
fn attack_an_audit_refuses_a_bundle_by_another_anchoring_key() {
    let s = setup();
    let rekor = stand_in(0);
    let out = s.publish(&rekor.url);
    assert!(out.status.success(), "{}", text(&out));
    let other = setup();
    let (child, base) =
        common::spawn_ledger(&["--data-dir", &s.data, "--anchor-interval-secs", "0"]);
    let out = s.audit(&base, &other.public, &s.anchors);
    common::stop_ledger(child);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("sigstore_"), "{}", text(&out));
    assert!(!Path::new(&s.data).with_extension("trusted").exists());
}

/// An anchor of another tree, signed by the log's key, fails the audit:
/// the served tree does not extend it.
#[test]
fn attack_an_audit_refuses_an_anchor_the_served_tree_does_not_extend() {
    let s = setup();
    let rekor = stand_in(0);
    let out = s.publish(&rekor.url);
    assert!(out.status.success(), "{}", text(&out));
    // The auditor's copy of the anchors, its anchor replaced by a
    // checkpoint of its size with a root the log never had, signed with
    // the log's own key (what a server that rewrote its history after
    // publishing would serve: the server's own copy stays as it was, or it
    // would refuse to start).
    let copy = Path::new(&s.data).with_extension("anchors");
    std::fs::create_dir_all(&copy).expect("copy");
    for (path, bytes) in every_file(&s.anchors) {
        std::fs::write(copy.join(path.file_name().expect("name")), bytes).expect("copy");
    }
    let anchor = &std::fs::read_dir(&copy)
        .expect("copy")
        .map(|e| e.expect("entry").path())
        .find(|p| p.to_str().is_some_and(|p| p.ends_with(".checkpoint")))
        .expect("an anchor");
    let note = std::fs::read_to_string(anchor).expect("anchor");
    let size: u64 = note
        .lines()
        .nth(1)
        .and_then(|l| l.parse().ok())
        .expect("size line");
    let key_text = std::fs::read_to_string(Path::new(&s.data).join("log.key")).expect("key");
    let key = anchors::LogKey::from_private(&key_text).expect("key");
    let forged = key
        .sign_checkpoint(size, &ledger::Hash([7; 32]))
        .expect("sign");
    std::fs::write(anchor, forged).expect("write");
    let (child, base) =
        common::spawn_ledger(&["--data-dir", &s.data, "--anchor-interval-secs", "0"]);
    let out = s.audit(&base, &s.public, &copy);
    common::stop_ledger(child);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("the log forked after it")
            || text(&out).contains("the log was rewritten"),
        "{}",
        text(&out)
    );
}

/// `ledger verify --server` checks a remote log's checkpoint and proofs;
/// the anchors and their Rekor bundles are checked against a data
/// directory (or by `ledger audit --server`): given together, they are
/// refused, not silently skipped.
#[test]
fn a_remote_verify_refuses_the_local_anchor_checks() {
    let s = setup();
    let anchors = s.anchors.to_str().expect("utf8");
    let out = run_ledger(&[
        "verify",
        "--server",
        "http://127.0.0.1:9",
        "--key",
        "test.example/log+00000000+AAAA",
        "--anchors",
        anchors,
        "--rekor-pub",
        &s.public,
    ]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("ledger audit --server http://127.0.0.1:9 --anchors DIR"),
        "{}",
        text(&out)
    );
}
