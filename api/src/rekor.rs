//! Anchors in Sigstore's transparency log (docs/SIGSTORE.md, "Anchors in
//! Rekor"): every anchor file of an anchors directory is signed with the
//! anchoring key (ECDSA P-256) or keyless, submitted to a Rekor v1 log as a
//! `hashedrekord` (or to a Rekor v2 log, with an RFC 3161 timestamp over
//! the signature from a timestamp authority, since a v2 entry carries no
//! time), and the bundle Rekor's answer makes is kept beside the
//! anchor as `<anchor>.sigstore.json`, but only once it verifies offline
//! against the pinned trusted root. An anchor whose bundle is missing (an
//! outage) is published by the next run: publication catches up.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, Context};
use sigstore_check::rekor::{self, AnchoringKey};
use sigstore_check::{Signer, TrustRoot};

/// The suffix of a kept bundle: `<anchor file>.sigstore.json`.
pub const BUNDLE_SUFFIX: &str = ".sigstore.json";

/// What signs the anchors published to Rekor.
pub enum Signing {
    /// The anchoring key, whose public key verifiers pin.
    Key(AnchoringKey),
    /// Keyless, under the operator's own identity: for each try a new
    /// ephemeral key, certified by the Fulcio at `fulcio` for the holder
    /// of the OIDC identity `token` (held in memory for this run, never
    /// written), whose claims say which identity the certificate names.
    Keyless {
        fulcio: String,
        token: String,
        claims: rekor::TokenClaims,
    },
}

impl Signing {
    /// Keyless signing with `token` through the Fulcio at `fulcio`.
    /// The token is a bearer credential: it is sent only over https, or
    /// to a loopback address.
    pub fn keyless(fulcio: impl Into<String>, token: &str) -> anyhow::Result<Signing> {
        let fulcio = fulcio.into();
        let loopback = ["http://127.0.0.1", "http://localhost", "http://[::1]"]
            .iter()
            .any(|p| {
                fulcio
                    .strip_prefix(p)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with([':', '/']))
            });
        if !fulcio.starts_with("https://") && !loopback {
            anyhow::bail!("the identity token goes to Fulcio only over https (or to a loopback address): {fulcio}");
        }
        let claims = rekor::token_claims(token).map_err(|e| anyhow!("{e}"))?;
        Ok(Signing::Keyless {
            fulcio,
            token: token.trim().to_owned(),
            claims,
        })
    }

    /// Whom a kept bundle must come from.
    pub fn signer(&self) -> Signer<'_> {
        match self {
            Signing::Key(k) => Signer::Key {
                pem: k.public_pem(),
            },
            Signing::Keyless { claims, .. } => Signer::Identity {
                identity: claims.identity(),
                issuer: &claims.issuer,
            },
        }
    }

    /// `message` signed for Rekor: with the anchoring key, or with a new
    /// ephemeral key and the certificate Fulcio gives it.
    fn sign(&self, message: &[u8]) -> anyhow::Result<rekor::Signed> {
        match self {
            Signing::Key(k) => rekor::sign(k, message).map_err(|e| anyhow!("{e}")),
            Signing::Keyless { fulcio, token, .. } => {
                let (ephemeral, _) = AnchoringKey::generate().map_err(|e| anyhow!("{e}"))?;
                let body = rekor::fulcio_request(&ephemeral, token).map_err(|e| anyhow!("{e}"))?;
                let r = verifier::Client::new(fulcio, None)
                    .post_json(rekor::FULCIO_CERT_PATH, &body)?;
                if !(200..300).contains(&r.status) {
                    // An answer that echoes the request must not print the
                    // token.
                    anyhow::bail!(
                        "Fulcio answered {} to the certificate request: {}",
                        r.status,
                        r.text()
                            .replace(token.as_str(), "<identity token>")
                            .chars()
                            .take(300)
                            .collect::<String>()
                    );
                }
                let leaf = rekor::fulcio_leaf(&r.body).map_err(|e| anyhow!("{e}"))?;
                rekor::sign_with_certificate(&ephemeral, &leaf, message).map_err(|e| anyhow!("{e}"))
            }
        }
    }
}

/// Which Rekor API publication writes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RekorApi {
    /// Rekor v1 (`/api/v1/log/entries`): the entry's SET states when it
    /// was logged, the verified time of the signature.
    V1,
    /// Rekor v2 (`/api/v2/log/entries`): an entry carries no time, so each
    /// signature is first timestamped by the RFC 3161 authority at `tsa`
    /// (its full URL, e.g. `https://timestamp.sigstore.dev/api/v1/timestamp`),
    /// which the pinned trusted root must name.
    V2 { tsa: String },
}

impl RekorApi {
    /// The API for `version` (1 or 2); v2 needs a timestamp authority.
    pub fn of(version: u8, tsa: Option<&str>) -> anyhow::Result<RekorApi> {
        match (version, tsa) {
            (1, None) => Ok(RekorApi::V1),
            (1, Some(_)) => anyhow::bail!(
                "a timestamp authority goes with Rekor v2 (a v1 entry's SET states its time)"
            ),
            (2, Some(tsa)) => Ok(RekorApi::V2 { tsa: tsa.to_owned() }),
            (2, None) => anyhow::bail!(
                "Rekor v2 needs a timestamp authority (--tsa URL, or tsa_url): a v2 entry carries no time"
            ),
            (v, _) => anyhow::bail!("Rekor API version {v}: 1 or 2"),
        }
    }
}

/// Where and how anchors are published to Rekor.
pub struct Rekor {
    /// The log's base URL (e.g. `https://rekor.sigstore.dev`).
    pub url: String,
    /// Its API (v1 by default).
    pub api: RekorApi,
    pub signing: Signing,
    /// The root a kept bundle must verify against.
    pub root: TrustRoot,
    /// Tries per anchor before the run gives up (an outage).
    pub attempts: u32,
    /// The wait before the second try; doubled before each later one.
    pub backoff: Duration,
    /// Held by a publication run, so that two never publish one anchor.
    running: std::sync::Mutex<()>,
}

impl Rekor {
    /// Publication to the Rekor v1 log at `url` with `key`, bundles checked
    /// against `root`: three tries per anchor, 0.5 s apart and doubling.
    pub fn new(url: impl Into<String>, key: AnchoringKey, root: TrustRoot) -> Rekor {
        Rekor::signed_by(url, Signing::Key(key), root)
    }

    /// Publication signed by `signing` (a key, or keyless).
    pub fn signed_by(url: impl Into<String>, signing: Signing, root: TrustRoot) -> Rekor {
        Rekor {
            url: url.into(),
            api: RekorApi::V1,
            signing,
            root,
            attempts: 3,
            backoff: Duration::from_millis(500),
            running: std::sync::Mutex::new(()),
        }
    }
}

/// The trusted root in `path`, or the Sigstore production root embedded in
/// `sigstore-verify` when none is given.
pub fn trust_root(path: Option<&Path>) -> anyhow::Result<TrustRoot> {
    match path {
        Some(p) => {
            let json = std::fs::read_to_string(p)
                .with_context(|| format!("reading the trusted root {}", p.display()))?;
            TrustRoot::from_json(&json).map_err(|e| anyhow!("{}: {e}", p.display()))
        }
        None => TrustRoot::production().map_err(|e| anyhow!("{e}")),
    }
}

/// The anchoring key in `path` (PKCS#8 PEM).
pub fn read_key(path: &Path) -> anyhow::Result<AnchoringKey> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the anchoring key {}", path.display()))?;
    AnchoringKey::from_pem(&text).map_err(|e| anyhow!("{}: {e}", path.display()))
}

/// An anchor file and the path its bundle has or would have.
type AnchorFile = (PathBuf, PathBuf);

/// The anchor files of `dir` (`*.checkpoint`), oldest first, with the path
/// their bundle has or would have; and the bundles of `dir` that stand
/// beside no anchor file.
fn listing(dir: &Path) -> anyhow::Result<(Vec<AnchorFile>, Vec<PathBuf>)> {
    let mut anchors = Vec::new();
    let mut bundles = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = e?.path();
        // As `anchors::anchor::read_dir` names them.
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.ends_with(".checkpoint") {
            let bundle = path.with_file_name(format!("{name}{BUNDLE_SUFFIX}"));
            anchors.push((path, bundle));
        } else if name.ends_with(BUNDLE_SUFFIX) {
            bundles.push(path);
        }
    }
    anchors.sort();
    let kept: std::collections::HashSet<&PathBuf> = anchors.iter().map(|(_, b)| b).collect();
    let strays = bundles.into_iter().filter(|b| !kept.contains(b)).collect();
    Ok((anchors, strays))
}

/// [`listing`]'s anchor files.
fn anchor_files(dir: &Path) -> anyhow::Result<Vec<AnchorFile>> {
    listing(dir).map(|(anchors, _)| anchors)
}

/// The check [`publish_pending`] holds each anchor's bytes to: a signed
/// checkpoint of the log `origin`, under one of `trusted` keys.
pub fn anchor_of(trusted: Vec<String>, origin: String) -> impl Fn(&[u8]) -> anyhow::Result<()> {
    move |note| {
        let a = anchors::Anchor {
            name: String::new(),
            note: note.to_vec(),
        };
        anchors::open_anchor(&a, &trusted, &origin)
            .map(|_| ())
            .map_err(anyhow::Error::from)
    }
}

/// How many anchors of `dir` have no kept bundle yet.
pub fn pending(dir: &Path) -> anyhow::Result<usize> {
    Ok(anchor_files(dir)?
        .iter()
        .filter(|(_, bundle)| !bundle.exists())
        .count())
}

/// What a publication run did.
#[derive(Debug, Default)]
pub struct Published {
    /// Anchors published by this run, oldest first.
    pub published: Vec<Entry>,
    /// Anchors that already had a bundle.
    pub already: usize,
}

/// Publishes every anchor of `dir` that has no bundle yet, oldest first.
/// Each anchor file is read once, and those bytes must pass `check` (that
/// they are a signed checkpoint of this log) before the anchoring key signs
/// them: a file swapped into the directory is never signed. Stops at the
/// first anchor that cannot be published after `rekor.attempts` tries,
/// with what was published before it; the anchor files themselves are
/// never touched.
pub fn publish_pending(
    dir: &Path,
    rekor: &Rekor,
    check: &dyn Fn(&[u8]) -> anyhow::Result<()>,
) -> Result<Published, (Published, anyhow::Error)> {
    let _one = rekor.running.lock().unwrap_or_else(|p| p.into_inner());
    let mut done = Published::default();
    let files = match anchor_files(dir) {
        Ok(f) => f,
        Err(e) => return Err((done, e)),
    };
    for (anchor, bundle) in files {
        if bundle.exists() {
            done.already += 1;
            continue;
        }
        match publish_one(&anchor, &bundle, rekor, check) {
            Ok(entry) => done.published.push(entry),
            Err(e) => {
                let e = e.context(format!(
                    "{} is kept locally, without a Rekor bundle; the next publication tries again",
                    anchor.display()
                ));
                return Err((done, e));
            }
        }
    }
    Ok(done)
}

fn publish_one(
    anchor: &Path,
    bundle_path: &Path,
    rekor: &Rekor,
    check: &dyn Fn(&[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<Entry> {
    let note = std::fs::read(anchor).with_context(|| format!("reading {}", anchor.display()))?;
    check(&note).with_context(|| format!("{} is not an anchor of this log", anchor.display()))?;
    let client = verifier::Client::new(&rekor.url, None);
    let mut wait = rekor.backoff;
    let mut last = anyhow!("no attempt made");
    let mut answer = None;
    for attempt in 1..=rekor.attempts.max(1) {
        if attempt > 1 {
            std::thread::sleep(wait);
            wait = wait.saturating_mul(2);
        }
        // Each try signs afresh (ECDSA signatures are randomised), so it is
        // a new entry: a try whose answer was lost leaves an entry in the
        // log that nothing refers to, and the retry is not refused as a
        // duplicate of it.
        let signed = match rekor.signing.sign(&note) {
            Ok(signed) => signed,
            Err(e) => {
                last = e;
                continue;
            }
        };
        match submit(&client, rekor, &signed) {
            Ok((body, stamp)) => {
                answer = Some((signed, body, stamp));
                break;
            }
            Err(e) => last = e,
        }
    }
    let (signed, answer, stamp) = answer.ok_or(last)?;
    let logged = match &stamp {
        None => rekor::bundle(&signed, &answer),
        Some(stamp) => rekor::bundle_v2(&signed, &answer, stamp),
    }
    .map_err(|e| anyhow!("{e}"))?;
    // Kept only if it proves what it should, offline, as every later check
    // will read it. A refusal here comes after Rekor logged the entry: the
    // entry stays in Rekor with nothing referring to it, and the next run
    // signs and submits again.
    sigstore_check::verify_message(&logged.bundle, &note, &rekor.signing.signer(), &rekor.root)
    .map_err(|e| {
        anyhow!("Rekor logged the anchor, but its answer does not make a bundle that verifies against the pinned trusted root (is the root current?): {e}")
    })?;
    write_new(bundle_path, logged.bundle.as_bytes())?;
    // In a git anchors directory the bundle is committed and pushed beside
    // its anchor. It is kept either way: a push that fails is reported, and
    // the next commit's push carries it.
    let dir = bundle_path.parent().unwrap_or(Path::new("."));
    if anchors::git::is_repo(dir) {
        let name = bundle_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        anchors::GitTarget::new(dir)
            .add_file(
                &name,
                &format!("rekor: logIndex {} for {name}", logged.log_index),
            )
            .with_context(|| format!("committing {name} (kept in the work tree)"))?;
    }
    Ok(Entry {
        anchor: anchor.to_path_buf(),
        note,
        location: match &logged.uuid {
            Some(uuid) => format!(
                "rekor {} logIndex {} uuid {uuid}",
                rekor.url, logged.log_index
            ),
            None => format!("rekor-v2 {} logIndex {}", rekor.url, logged.log_index),
        },
    })
}

/// One try at logging `signed`: Rekor's answer to the submission, and for
/// Rekor v2 the timestamp authority's answer (a DER `TimeStampResp`) over
/// the signature, obtained first.
fn submit(
    client: &verifier::Client,
    rekor: &Rekor,
    signed: &rekor::Signed,
) -> anyhow::Result<(Vec<u8>, Option<Vec<u8>>)> {
    let refused = |who: &str, what: &str, r: &verifier::client::Reply| {
        anyhow!(
            "{who} answered {} to the {what}: {}",
            r.status,
            r.text().chars().take(300).collect::<String>()
        )
    };
    match &rekor.api {
        RekorApi::V1 => {
            let r = client.post_json(rekor::ENTRIES_PATH, &signed.request)?;
            if r.status != 201 {
                return Err(refused("Rekor", "submission", &r));
            }
            Ok((r.body, None))
        }
        RekorApi::V2 { tsa } => {
            let t = verifier::Client::new(tsa, None).post(
                "",
                rekor::TIMESTAMP_QUERY,
                &signed.timestamp_request(),
            )?;
            if t.status != 200 {
                return Err(refused("the timestamp authority", "timestamp request", &t));
            }
            // Checked before anything is logged: a timestamp that would not
            // verify in the bundle would leave an entry in Rekor that
            // nothing refers to.
            signed
                .check_timestamp(&t.body, &rekor.root)
                .map_err(|e| anyhow!("{e}"))?;
            let r = client.post_json(rekor::ENTRIES_V2_PATH, &signed.request_v2())?;
            if !(200..300).contains(&r.status) {
                return Err(refused("Rekor v2", "submission", &r));
            }
            Ok((r.body, Some(t.body)))
        }
    }
}

/// An anchor published to Rekor by a run.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The anchor file.
    pub anchor: PathBuf,
    /// Its bytes, as signed.
    pub note: Vec<u8>,
    /// Where Rekor logged it: `rekor <url> logIndex <n> uuid <uuid>` (v1)
    /// or `rekor-v2 <url> logIndex <n>`, the location an
    /// `anchor.published` record names.
    pub location: String,
}

/// Writes `bytes` to `path` whole or not at all, durably, never over a
/// file: a temporary file beside it, synced, then linked into place (a link
/// fails where a file exists), so a crash or a full disk leaves no partial
/// bundle that would count as published.
fn write_new(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("creating a file in {}", dir.display()))?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist_noclobber(path)
        .map_err(|e| anyhow!("keeping {}: {}", path.display(), e.error))?;
    ledger::store::sync_dir(dir)?;
    Ok(())
}

/// What the check of the kept bundles found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Checked {
    /// Anchors whose bundle verified against them.
    pub verified: usize,
    /// Anchors without a bundle (not yet published to Rekor).
    pub missing: Vec<String>,
}

/// Checks every kept bundle of `dir` offline: it must verify, against the
/// pinned root, as a Rekor-logged signature by `signer` (the anchoring key,
/// or the operator's identity for keyless publication) over exactly the
/// bytes of its anchor file. A bundle without its anchor
/// is a failure too, and so is an anchor without a bundle when
/// `require_all` is set (otherwise it is listed as missing). `Err` names
/// the first that fails.
pub fn check_bundles(
    dir: &Path,
    signer: &Signer<'_>,
    root: &TrustRoot,
    require_all: bool,
) -> anyhow::Result<Checked> {
    let mut checked = Checked::default();
    let (files, strays) = listing(dir)?;
    if let Some(path) = strays.first() {
        anyhow::bail!("{}: a Rekor bundle without its anchor file", path.display());
    }
    for (anchor, bundle) in files {
        let name = anchor.display().to_string();
        let json = match std::fs::read_to_string(&bundle) {
            Ok(json) => json,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if require_all {
                    anyhow::bail!("{name}: no Rekor bundle kept beside it");
                }
                checked.missing.push(name);
                continue;
            }
            Err(e) => return Err(e).with_context(|| format!("reading {}", bundle.display())),
        };
        let note = std::fs::read(&anchor).with_context(|| format!("reading {name}"))?;
        sigstore_check::verify_message(&json, &note, signer, root)
            .map_err(|e| anyhow!("{}: {e}", bundle.display()))?;
        checked.verified += 1;
    }
    Ok(checked)
}

/// Records each anchor `published` to Rekor in the log, as an
/// `anchor.published` entry signed with the ledger's key whose location
/// names the Rekor entry: anyone replaying the log learns where to find
/// it. Returns the indices of the records.
pub fn record(
    log: &events::EventLog,
    key: &anchors::LogKey,
    trusted: &[String],
    published: &[Entry],
    now: i64,
) -> anyhow::Result<Vec<u64>> {
    let mut at = Vec::new();
    for p in published {
        let (cp, _) = anchors::open_checkpoint_any(&p.note, trusted)
            .map_err(|e| anyhow!("{}: {e}", p.anchor.display()))?;
        let note = String::from_utf8_lossy(&p.note);
        let envelope = events::anchor_published_envelope(
            &key.event_signing_key(),
            log.schema(),
            (cp.size, &cp.root),
            &note,
            &p.location,
            now,
        );
        let r = log
            .append(&envelope)
            .map_err(|e| anyhow!("recording the Rekor entry of {}: {e:?}", p.anchor.display()))?;
        at.push(r.appended.index);
    }
    Ok(at)
}
