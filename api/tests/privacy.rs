//! What the log reveals (docs/PRIVACY.md): sensitive values written through
//! the API reach only readers with a role; no other answer, and no byte of
//! the data directory, holds them in clear.

mod common;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use base64::Engine as _;
use common::*;
use events::model::*;
use testkit::world::{sample, score, T0, TASK_CLASS};
use verifier::client::Client;
use verifier::wire::{EntryPage, EntryView};

const SECRET_TITLE: &str = "SECRET-TITLE-b7e1";
const SECRET_REF: &str = "SECRET-REF-b7e1";
const SECRET_OPERATOR: &str = "SECRET-OPERATOR-b7e1";
const SECRET_REASON: &str = "SECRET-REASON-b7e1";
/// The case's name, behind its handle (docs/PRIVACY.md, "Handles").
const SECRET_CASE: &str = "SECRET-CASE-b7e1";
/// The identity of the principal the seed enrols as `retired-harness`.
const SECRET_IDENTITY: &str = "retired-harness@bench.example";
const SECRETS: [&str; 6] = [
    SECRET_TITLE,
    SECRET_REF,
    SECRET_OPERATOR,
    SECRET_REASON,
    SECRET_CASE,
    SECRET_IDENTITY,
];

/// `ledger verify --data-dir DIR --quiet`: its exit code, and its stdout
/// and stderr together.
fn verify_dir(dir: &std::path::Path) -> (Option<i32>, String) {
    let out = run_ledger(&[
        "verify",
        "--data-dir",
        dir.to_str().expect("utf8"),
        "--quiet",
    ]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

/// A server with an auditor in its readers file, seeded, with one case,
/// one score and one revocation carrying secrets. Returns the auditor's
/// token.
fn server_with_secrets() -> (TestServer, String) {
    secrets_on(TestServer::start, None)
}

/// [`server_with_secrets`] on a log kept in the redb data file, for the
/// tests that read or change `private.keys` and the data file themselves.
fn server_with_secrets_in_file() -> (TestServer, String) {
    secrets_on(TestServer::start_file, None)
}

/// [`server_with_secrets_in_file`] whose data file is sealed into a segment
/// every few entries: the secrets' rows end up in sealed segments, and the
/// redactions are carried from one data file to the next.
fn server_with_secrets_in_segments() -> (TestServer, String) {
    secrets_on(TestServer::start_file, Some(5))
}

/// How a test server is started with settings changed.
type Tweak = Box<dyn FnOnce(&mut api::config::ServeConfig)>;

fn secrets_on(start: fn(Tweak) -> TestServer, seal_every: Option<u64>) -> (TestServer, String) {
    let readers = tempfile::NamedTempFile::new().expect("readers");
    let (token, line) = api::readers::new_token("auditor", "test-auditor").expect("token");
    std::fs::write(readers.path(), format!("{line}\n")).expect("write");
    let path = readers.into_temp_path().keep().expect("keep");
    let s = start(Box::new(move |c| {
        c.readers_file = Some(path);
        if let Some(n) = seal_every {
            c.segment_entries = n;
        }
    }));
    s.wait_ready();
    let c = s.client();
    seed(&s, &c);
    post_secrets(&mut s.poster(&c));
    (s, token)
}

/// Writes a case, a score and a revocation carrying the secrets.
fn post_secrets(p: &mut api::demo::Poster<'_>) {
    let (a, b) = (p.key("curator-a"), p.key("curator-b"));
    let mut case = sample().case_added(
        TASK_CLASS,
        SECRET_CASE,
        "held-out",
        &events::envelope::format_micros(T0),
        (&a, &b),
    );
    case.title = SECRET_TITLE.into();
    case.provenance.source_ref = SECRET_REF.into();
    p.post("curator-a", Event::CaseAdded(case)).expect("case");
    let mut sc = score(SECRET_CASE, 0.9);
    sc.operator_fingerprint = SECRET_OPERATOR.into();
    p.post("harness", Event::ScoreRecorded(sc)).expect("score");
    p.enrol("retired-harness", Role::Harness).expect("enrol");
    let k = p.key("retired-harness");
    p.post(
        "operator",
        Event::PrincipalRevoked(PrincipalRevoked {
            key_id: events::key_id(&k.verifying_key()),
            reason: SECRET_REASON.into(),
        }),
    )
    .expect("revoke");
}

/// The server's own log (stderr at `debug`, the access log included)
/// shows no sensitive value, while every secret is written, read back by a
/// reader with a role, and sent once in a write that is refused.
#[test]
fn the_server_log_shows_no_sensitive_value() {
    let work = tempfile::tempdir().expect("tmp");
    let data = work.path().join("data");
    let d = data.to_str().expect("utf8");
    let out = run_ledger(&["init", "--data-dir", d]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (token, line) = api::readers::new_token("auditor", "log-auditor").expect("token");
    let readers = work.path().join("readers");
    std::fs::write(&readers, format!("{line}\n")).expect("readers");
    let log = work.path().join("server.log");
    let (child, base) = spawn_ledger_live_with(&["--data-dir", d], |c| {
        c.env("LEDGER_LOG", "debug")
            .env("LEDGER_READERS_FILE", &readers)
            .stderr(std::fs::File::create(&log).expect("log"));
    });
    let (child, base) = ready_within_30s(child, base);
    let c = Client::new(&base, None);
    let vkey = c.verifier_key(None, |_| {}).expect("key");
    let operator = verifier::keys::read_signing_key(&data.join("operator.key")).expect("key");
    let mut p = api::demo::Poster::new(&c, vkey, operator);
    seed_with(&mut p);
    post_secrets(&mut p);
    let mut bad = score(SECRET_CASE, 0.9);
    bad.operator_fingerprint = format!("{SECRET_OPERATOR}\u{7}").into();
    p.post_refused("harness", Event::ScoreRecorded(bad))
        .expect("refused");
    let auditor = Client::new(&base, Some(token));
    let seen = all_entries(&auditor)
        .iter()
        .flat_map(|e| e.disclosures.clone().unwrap_or_default())
        .count();
    assert!(seen >= SECRETS.len(), "only {seen} disclosures read back");
    stop_ledger(child);
    let text = std::fs::read_to_string(&log).expect("log");
    // The log is there, at debug, with the access log: the auditor's
    // requests are in it by the reader's name.
    assert!(text.contains("DEBUG"), "the log is at debug: {text}");
    assert!(
        text.contains("log-auditor"),
        "the access log names the reader: {text}"
    );
    let found = leaks("the server's log", text.as_bytes());
    assert!(found.is_empty(), "{found:#?}");
}

fn leaks(what: &str, body: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(body);
    SECRETS
        .iter()
        .filter(|s| text.contains(*s))
        .map(|s| format!("{what} shows {s}"))
        .collect()
}

fn all_entries(c: &Client) -> Vec<EntryView> {
    let mut out = Vec::new();
    let mut start = 0;
    loop {
        let page: EntryPage = c
            .get_json(&format!("/v1/entries?start={start}&limit=1000"))
            .expect("entries");
        out.extend(page.entries);
        match page.next {
            Some(n) => start = n,
            None => return out,
        }
    }
}

/// A reader without a role sees commitments only: entries (by page, index
/// and id), tiles and entry bundles, projections, bundles and state,
/// checkpoints, metrics, the OpenAPI document, and errors.
#[test]
fn no_answer_shows_a_sensitive_value_to_a_reader_without_a_role() {
    let (s, _) = server_with_secrets();
    let c = s.client();
    let entries = all_entries(&c);
    let size = entries.len() as u64;
    let mut found = Vec::new();
    let mut paths = vec![
        "/checkpoint".to_owned(),
        "/v1/log".to_owned(),
        "/metrics".to_owned(),
        "/openapi.json".to_owned(),
        "/v1/task-classes".to_owned(),
        format!("/v1/task-classes/{TASK_CLASS}"),
        format!("/v1/task-classes/{TASK_CLASS}/bundle"),
        format!("/v1/task-classes/{TASK_CLASS}/state"),
        "/v1/entries/by-id/no-such-id".to_owned(),
        "/v1/entries/999999".to_owned(),
    ];
    for e in &entries {
        assert!(
            e.disclosures.is_none(),
            "entry {} carries disclosures",
            e.index
        );
        paths.push(format!("/v1/entries/{}", e.index));
        paths.push(format!("/v1/entries/by-id/{}", e.id));
    }
    for n in 0..=size / 256 {
        let width = if n == size / 256 { size % 256 } else { 256 };
        if width == 0 {
            continue;
        }
        let suffix = if width == 256 {
            String::new()
        } else {
            format!(".p/{width}")
        };
        paths.push(format!("/tile/entries/{}{suffix}", tile_index(n)));
        paths.push(format!("/tile/0/{}{suffix}", tile_index(n)));
    }
    for path in &paths {
        let r = c.get(path).expect("get");
        found.extend(leaks(path, &r.body));
    }
    // A refusal names the field and the rule, never the value.
    let mut p = s.poster(&c);
    let mut bad = score(SECRET_CASE, 0.9);
    bad.operator_fingerprint = format!("{SECRET_OPERATOR}\u{7}").into();
    let refused = p
        .post_refused("harness", Event::ScoreRecorded(bad))
        .expect("refused");
    found.extend(leaks("a refusal", &refused.body));
    assert!(found.is_empty(), "{found:#?}");
    // The values are there, committed: three entries hold `_sd`.
    let committed = entries
        .iter()
        .filter(|e| e.payload.to_string().contains("\"_sd\""))
        .count();
    assert!(committed >= 3, "only {committed} entries commit");
}

/// C2SP tile index encoding: groups of three digits, all but the last
/// prefixed with `x`.
fn tile_index(n: u64) -> String {
    let mut s = format!("{:03}", n % 1000);
    let mut n = n / 1000;
    while n > 0 {
        s = format!("x{:03}/{s}", n % 1000);
        n /= 1000;
    }
    s
}

/// A reader with a role receives each committed value's disclosure, which
/// checks against the leaf, on every entry read.
#[test]
fn a_reader_with_a_role_receives_disclosures_that_open_the_leaf() {
    let (s, token) = server_with_secrets();
    let auditor = Client::new(&s.base, Some(token));
    let entries = all_entries(&auditor);
    let mut seen = Vec::new();
    for e in &entries {
        let leaf = base64::engine::general_purpose::STANDARD
            .decode(&e.leaf)
            .expect("leaf");
        let Some(disclosures) = &e.disclosures else {
            panic!("entry {}: no disclosures for an auditor", e.index);
        };
        verifier::entries::check_disclosures(e.index, &leaf, disclosures)
            .unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(e.redacted.as_deref(), Some(&[][..]));
        for d in disclosures {
            let bytes = B64URL.decode(d).expect("disclosure");
            let v: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
            seen.push(v[2].as_str().unwrap_or_default().to_owned());
        }
        let by_id: EntryView = auditor
            .get_json(&format!("/v1/entries/by-id/{}", e.id))
            .expect("by id");
        assert_eq!(by_id.disclosures, e.disclosures);
    }
    for secret in SECRETS {
        assert!(
            seen.iter().any(|v| v == secret),
            "{secret} was not disclosed"
        );
    }
    // A token that is not listed is no reader.
    let stranger = Client::new(&s.base, Some("not-a-listed-token".into()));
    let e: EntryView = stranger
        .get_json(&format!("/v1/entries/{}", entries.len() - 1))
        .expect("entry");
    assert!(e.disclosures.is_none());
}

/// Neither the data file nor anything else in the data directory holds a
/// sensitive value in clear: the disclosures are sealed, and nothing derived
/// (snapshots, projection checkpoints, lookups) keeps one.
#[test]
fn the_data_directory_holds_no_sensitive_value_in_clear() {
    let (s, _) = server_with_secrets();
    let dir = s.stop();
    let mut found = Vec::new();
    let mut files = 0;
    let mut stack = vec![dir.path().to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            files += 1;
            let bytes = std::fs::read(&path).expect("read");
            found.extend(leaks(&path.display().to_string(), &bytes));
        }
    }
    assert!(files >= 3, "only {files} files");
    // Entry bundles are compressed: read every leaf back, and its payload.
    let log = ledger::Ledger::open(dir.path(), ledger::Config::default()).expect("open");
    let size = log.head().size;
    for e in log.entries(0, size).expect("entries") {
        found.extend(leaks(&format!("leaf {}", e.index), &e.leaf));
        let (d, _) = events::decode_logged_leaf(&e.leaf).expect("leaf");
        found.extend(leaks(&format!("payload {}", e.index), &d.payload_bytes));
    }
    assert!(found.is_empty(), "{found:#?}");
}

/// A kept disclosure whose key was changed on disk does not open: it is
/// reported as corruption, never served as some other value.
#[test]
fn attack_a_key_changed_on_disk_is_caught_not_served() {
    let (s, token) = server_with_secrets_in_file();
    let auditor = Client::new(&s.base, Some(token));
    let entries = all_entries(&auditor);
    let target = entries
        .iter()
        .find(|e| e.disclosures.as_ref().is_some_and(|d| !d.is_empty()))
        .expect("an entry with disclosures")
        .index;
    let keys = s.path().join(ledger::private::KEYS_FILE);
    let mut raw = std::fs::read(&keys).expect("keys");
    // Every slot after the 32-byte header gets other bytes.
    for b in raw.iter_mut().skip(32) {
        *b ^= 0x5a;
    }
    std::fs::write(&keys, raw).expect("write");
    let r = auditor.get(&format!("/v1/entries/{target}")).expect("get");
    let text = String::from_utf8_lossy(&r.body);
    assert_eq!(r.status, 503, "{text}");
    assert!(text.contains("\"code\":\"log_corrupt\""), "{text}");
}

/// `ledger verify` checks every kept disclosure against its entry; a key
/// changed on disk fails it, naming the entry.
#[test]
fn verify_checks_every_kept_disclosure_and_finds_a_changed_key() {
    let (s, _) = server_with_secrets_in_file();
    let dir = s.stop();
    let (code, out) = verify_dir(dir.path());
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("disclosures: "), "{out}");
    assert!(!out.contains("disclosures: 0 kept"), "{out}");
    let keys = dir.path().join(ledger::private::KEYS_FILE);
    let mut raw = std::fs::read(&keys).expect("keys");
    let last = raw.len() - 1;
    raw[last] ^= 1;
    std::fs::write(&keys, raw).expect("write");
    let (code, text) = verify_dir(dir.path());
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("does not authenticate"), "{text}");
    // A key destroyed with no redaction in the log is a loss, not a redaction.
    let mut raw = std::fs::read(&keys).expect("keys");
    raw[last] ^= 1;
    raw[32..64].fill(0);
    std::fs::write(&keys, raw).expect("write");
    let (code, text) = verify_dir(dir.path());
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("records no redaction"), "{text}");
}

/// `ledger redact` by two maintainers: the field reads as redacted, its
/// key is nowhere in the data directory (free pages included: the key file
/// is overwritten in place, and no other file ever held it), and every
/// earlier checkpoint, proof and `ledger verify` still passes.
#[test]
fn redaction_by_two_maintainers_keeps_every_proof_and_leaves_no_key_behind() {
    let (s, token) = server_with_secrets_in_file();
    redaction_keeps_every_proof_and_leaves_no_key_behind(s, token);
}

/// The same with the data file sealed every few entries: the redacted
/// entry's row is in a sealed segment, never written again, and its
/// redaction is carried into each new data file.
#[test]
fn redaction_in_a_log_sealed_into_segments_keeps_every_proof_and_leaves_no_key_behind() {
    let (s, token) = server_with_secrets_in_segments();
    let sealed = || {
        std::fs::read_dir(s.path().join(ledger::store::SEGMENTS_DIR))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    assert!(sealed() > 2, "the secrets were never sealed into a segment");
    // Disclosures read from rows in sealed segments open their leaves.
    let auditor = Client::new(&s.base, Some(token.clone()));
    for e in all_entries(&auditor) {
        let leaf = base64::engine::general_purpose::STANDARD
            .decode(&e.leaf)
            .expect("leaf");
        let disclosures = e.disclosures.expect("disclosures for an auditor");
        verifier::entries::check_disclosures(e.index, &leaf, &disclosures)
            .unwrap_or_else(|err| panic!("{err}"));
    }
    redaction_keeps_every_proof_and_leaves_no_key_behind(s, token);
}

fn redaction_keeps_every_proof_and_leaves_no_key_behind(s: TestServer, token: String) {
    let c = s.client();
    let auditor = Client::new(&s.base, Some(token.clone()));
    let work = tempfile::tempdir().expect("work");
    let mut files = Vec::new();
    let mut p = s.poster(&c);
    for name in ["maint-a", "maint-b"] {
        let file = work.path().join(name);
        let out = run_ledger(&[
            "keygen",
            "--name",
            name,
            "--out",
            file.to_str().expect("utf8"),
        ]);
        assert!(out.status.success());
        let k = verifier::keys::read_signing_key(&file).expect("key");
        p.post(
            "operator",
            Event::PrincipalEnrolled(PrincipalEnrolled {
                sigstore: None,
                public_key: events::envelope::public_key_b64(&k.verifying_key()),
                identity: format!("{name}@example.org"),
                identity_name: None,
                roles: vec![Role::Maintainer],
            }),
        )
        .expect("enrol");
        files.push(file);
    }
    let target = all_entries(&auditor)
        .into_iter()
        .find(|e| {
            e.disclosures.iter().flatten().any(|d| {
                String::from_utf8_lossy(&B64URL.decode(d).unwrap_or_default())
                    .contains(SECRET_TITLE)
            })
        })
        .expect("the entry with the secret title")
        .index;
    let trusted = work.path().join("trusted-checkpoint");
    std::fs::write(&trusted, c.get("/checkpoint").expect("checkpoint").body).expect("write");
    let keys_before = std::fs::read(s.path().join(ledger::private::KEYS_FILE)).expect("keys");
    let target_s = target.to_string();
    let out = run_ledger(&[
        "redact",
        "--server",
        &s.base,
        "--key",
        &s.vkey,
        "--maintainer-key",
        files[0].to_str().expect("utf8"),
        "--confirming-key",
        files[1].to_str().expect("utf8"),
        "--entry",
        &target_s,
        "--field",
        "title",
        "--reason",
        "the title named a held-out case",
    ]);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let e: EntryView = auditor
        .get_json(&format!("/v1/entries/{target}"))
        .expect("entry");
    assert_eq!(e.redacted.as_deref(), Some(&["title".to_owned()][..]));
    let leaf = base64::engine::general_purpose::STANDARD
        .decode(&e.leaf)
        .expect("leaf");
    let disclosures = e.disclosures.expect("the others");
    assert_eq!(
        disclosures.len(),
        4,
        "the other three fields and the case's name"
    );
    verifier::entries::check_disclosures(target, &leaf, &disclosures).expect("the rest open");
    // Every earlier checkpoint is consistent with the new one, and every
    // entry still hashes into it.
    let v = run_ledger(&[
        "verify",
        "--server",
        &s.base,
        "--key",
        &s.vkey,
        "--trusted",
        trusted.to_str().expect("utf8"),
        "--quiet",
    ]);
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));
    // With a role, the walk checks every disclosure and reports the
    // redaction, recorded by its field.redacted entry.
    let v = run_ledger(&[
        "verify",
        "--server",
        &s.base,
        "--key",
        &s.vkey,
        &format!("--token={token}"),
        "--quiet",
    ]);
    let text = String::from_utf8_lossy(&v.stdout);
    assert!(
        v.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&v.stderr)
    );
    assert!(text.contains("; 1 redacted, each recorded"), "{text}");
    // The destroyed key: the one slot of the key file that turned to zeros.
    let keys_after = std::fs::read(s.path().join(ledger::private::KEYS_FILE)).expect("keys");
    let destroyed: Vec<&[u8]> = keys_before[32..]
        .chunks(32)
        .zip(keys_after[32..].chunks(32))
        .filter(|(b, a)| b != a)
        .map(|(b, a)| {
            assert_eq!(
                a,
                &[0u8; 32][..],
                "a key changed to something other than zeros"
            );
            b
        })
        .collect();
    assert_eq!(destroyed.len(), 1, "one key destroyed");
    let dir = s.stop();
    let mut stack = vec![dir.path().to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let bytes = std::fs::read(&path).expect("read");
            assert!(
                !bytes.windows(32).any(|w| w == destroyed[0]),
                "{} still holds the destroyed key",
                path.display()
            );
        }
    }
    let (code, text) = verify_dir(dir.path());
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("; 1 redacted"), "{text}");
    // A redaction the log records but the directory did not carry out (its
    // key put back, its row in the data file removed) is a failure: the
    // value can still be read.
    let slot = keys_before[32..]
        .chunks(32)
        .position(|k| k == destroyed[0])
        .expect("the destroyed key's slot");
    let mut keys_now = std::fs::read(dir.path().join(ledger::private::KEYS_FILE)).expect("keys");
    keys_now[32 + slot * 32..32 + slot * 32 + 32].copy_from_slice(destroyed[0]);
    std::fs::write(dir.path().join(ledger::private::KEYS_FILE), &keys_now).expect("keys");
    {
        use redb::ReadableTable as _;
        let db = redb::Database::open(dir.path().join(ledger::store::DB_FILE)).expect("db");
        let txn = db.begin_write().expect("txn");
        {
            let mut t = txn
                .open_table(ledger::store::REDACTED_PARTS)
                .expect("table");
            let rows: Vec<(u64, u16)> = t
                .iter()
                .expect("rows")
                .map(|r| r.expect("row").0.value())
                .collect();
            assert_eq!(rows.len(), 1, "{rows:?}");
            t.remove(rows[0]).expect("remove");
        }
        txn.commit().expect("commit");
    }
    let (code, text) = verify_dir(dir.path());
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("can still be read"), "{text}");
}

/// A backup taken by a reader with a role carries the disclosures, each
/// checked against its leaf, and a restore keeps them (a redacted one stays
/// redacted); one taken without a role keeps commitments only, and says so.
#[test]
fn a_backup_by_a_reader_with_a_role_restores_the_disclosures() {
    let (s, token) = server_with_secrets();
    let work = tempfile::tempdir().expect("work");
    let auditor = Client::new(&s.base, Some(token));
    let with = work.path().join("with.backup");
    let b = verifier::backup::backup(&auditor, &s.vkey, &with, &mut |_, _| {}).expect("backup");
    assert_eq!(b.without_disclosures, 0);
    let without = work.path().join("without.backup");
    let b2 =
        verifier::backup::backup(&s.client(), &s.vkey, &without, &mut |_, _| {}).expect("backup");
    assert!(b2.without_disclosures >= 3, "{b2:?}");
    let key = s.path().join("log.key");
    let restored = work.path().join("restored");
    verifier::backup::restore(&with, &restored, &key, None, &[], false, &mut |_, _| {})
        .expect("restore");
    let (code, text) = verify_dir(&restored);
    assert_eq!(code, Some(0), "{text}");
    assert!(!text.contains("disclosures: 0 kept"), "{text}");
    let bare = work.path().join("bare");
    verifier::backup::restore(&without, &bare, &key, None, &[], false, &mut |_, _| {})
        .expect("restore");
    let (code, text) = verify_dir(&bare);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("does not keep"), "{text}");
    // Served to a reader with a role, an entry whose disclosures the
    // restored directory does not keep comes without them, as to anyone
    // else, and claims nothing redacted: a walk by that reader passes.
    {
        let dir = tempfile::tempdir().expect("dir");
        verifier::backup::restore(&without, dir.path(), &key, None, &[], false, &mut |_, _| {})
            .expect("restore");
        let readers = dir.path().join("readers");
        let (token, line) = api::readers::new_token("auditor", "restored").expect("token");
        std::fs::write(&readers, format!("{line}\n")).expect("readers");
        let log_key = anchors::LogKey::from_private(&std::fs::read_to_string(&key).expect("key"))
            .expect("key");
        let r = TestServer::start_on(dir, log_key, s.operator.clone(), |c| {
            c.readers_file = Some(readers)
        });
        r.wait_ready();
        let c = Client::new(&r.base, Some(token));
        let page: EntryPage = c
            .get_json("/v1/entries?start=0&limit=1000")
            .expect("entries");
        let commits = |e: &EntryView| {
            serde_json::to_string(&e.payload)
                .expect("json")
                .contains("\"_sd\"")
        };
        let unkept: Vec<_> = page.entries.iter().filter(|e| commits(e)).collect();
        assert!(!unkept.is_empty());
        assert!(
            unkept
                .iter()
                .all(|e| e.disclosures.is_none() && e.redacted.is_none()),
            "{unkept:#?}"
        );
        let note = c.get("/checkpoint").expect("checkpoint").text();
        let cp = anchors::open_checkpoint(note.as_bytes(), &r.vkey).expect("checkpoint");
        let walked =
            verifier::entries_verified(&c, cp.size, &cp.root, &mut |_, _| Ok(()), &mut |_, _| {})
                .expect("the walk passes");
        assert_eq!(walked, verifier::entries::Walked::default());
    }
    // A backup whose disclosure was changed is refused by the restore.
    let text = std::fs::read_to_string(&with).expect("read");
    let line = text
        .lines()
        .find(|l| l.contains("\"disclosures\":[\""))
        .expect("a line with disclosures");
    let mut v: serde_json::Value = serde_json::from_str(line).expect("json");
    let d = v["disclosures"][0].as_str().expect("d").to_owned();
    let mut bytes = B64URL.decode(&d).expect("b64");
    let last = bytes.len() - 3;
    bytes[last] ^= 1;
    v["disclosures"][0] = B64URL.encode(&bytes).into();
    let forged = text.replacen(line, &v.to_string(), 1);
    let bad = work.path().join("forged.backup");
    std::fs::write(&bad, forged).expect("write");
    let e = verifier::backup::restore(
        &bad,
        &work.path().join("x"),
        &key,
        None,
        &[],
        false,
        &mut |_, _| {},
    )
    .expect_err("a forged disclosure is refused");
    assert!(e.to_string().contains("matches no commitment"), "{e:#}");
    // A backup that says a field was redacted, without holding the
    // redaction (one taken while a redaction landed past its checkpoint, or
    // an edited one), keeps none of that entry's disclosures: no key is
    // destroyed that the log cannot account for, and verify says what is
    // not kept.
    let mut v: serde_json::Value = serde_json::from_str(line).expect("json");
    let index = v["index"].as_u64().expect("index");
    let opened: serde_json::Value =
        serde_json::from_slice(&B64URL.decode(&d).expect("b64")).expect("disclosure");
    let field = opened[1].as_str().expect("field").to_owned();
    v["disclosures"]
        .as_array_mut()
        .expect("disclosures")
        .remove(0);
    v["redacted"] = serde_json::json!([field]);
    let claimed = work.path().join("claimed.backup");
    std::fs::write(&claimed, text.replacen(line, &v.to_string(), 1)).expect("write");
    let dest = work.path().join("claimed");
    verifier::backup::restore(&claimed, &dest, &key, None, &[], false, &mut |_, _| {})
        .expect("restore");
    let log = ledger::Ledger::open(&dest, ledger::Config::default()).expect("open");
    assert!(log.private_parts(index).expect("parts").is_empty());
    drop(log);
    let (code, text) = verify_dir(&dest);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("does not keep"), "{text}");
}

/// A server (here a proxy in front of an honest one) that withholds a
/// disclosure from a reader with a role by answering its field as redacted,
/// with no redaction in the log, is caught by the walk of the log.
#[test]
fn attack_a_disclosure_withheld_as_redacted_without_a_redaction_is_caught() {
    use axum::extract::{Request, State};
    use axum::response::IntoResponse as _;
    let (s, token) = server_with_secrets();
    let c = Client::new(&s.base, Some(token.clone()));
    let note = c.get("/checkpoint").expect("checkpoint").text();
    let cp = anchors::open_checkpoint(note.as_bytes(), &s.vkey).expect("checkpoint");
    let honest =
        verifier::entries_verified(&c, cp.size, &cp.root, &mut |_, _| Ok(()), &mut |_, _| {})
            .expect("an honest server passes");
    assert!(honest.disclosed >= 4 && honest.redacted == 0, "{honest:?}");

    #[derive(Clone)]
    struct Upstream(String, String);
    async fn forward(State(u): State<Upstream>, req: Request) -> axum::response::Response {
        let path = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_owned())
            .unwrap_or_default();
        let (base, token, p) = (u.0.clone(), u.1.clone(), path.clone());
        let Ok(Ok(reply)) =
            tokio::task::spawn_blocking(move || Client::new(&base, Some(token)).get(&p)).await
        else {
            return axum::http::StatusCode::BAD_GATEWAY.into_response();
        };
        let mut body = reply.body.clone();
        if path.starts_with("/v1/entries?") {
            let mut v: serde_json::Value = serde_json::from_slice(&body).expect("json");
            let entries = v["entries"].as_array_mut().expect("entries");
            if let Some(e) = entries
                .iter_mut()
                .find(|e| e["disclosures"].as_array().is_some_and(|d| !d.is_empty()))
            {
                let d = e["disclosures"]
                    .as_array_mut()
                    .expect("disclosures")
                    .remove(0);
                let opened: serde_json::Value =
                    serde_json::from_slice(&B64URL.decode(d.as_str().expect("text")).expect("b64"))
                        .expect("disclosure");
                e["redacted"] = serde_json::json!([opened[1]]);
            }
            body = serde_json::to_vec(&v).expect("json");
        }
        (
            axum::http::StatusCode::from_u16(reply.status).expect("status"),
            body,
        )
            .into_response()
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("rt");
    let app = axum::Router::new()
        .fallback(forward)
        .with_state(Upstream(s.base.clone(), token.clone()));
    let lying = Client::new(&serve_on_loopback(&rt, app), Some(token));
    match verifier::entries_verified(
        &lying,
        cp.size,
        &cp.root,
        &mut |_, _| Ok(()),
        &mut |_, _| {},
    ) {
        Err(verifier::CheckError::Disproved(why)) => {
            assert!(why.contains("no `field.redacted` entry"), "{why}")
        }
        other => panic!("a withheld disclosure passed: {other:?}"),
    }
}
