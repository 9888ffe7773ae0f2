//! `ledger anchor publish`: sign the head as a checkpoint, publish it, and
//! record it in the log.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Subcommand;
use events::{Clock as _, SystemClock};

use super::{fail, progress_bar};

#[derive(Subcommand)]
pub enum AnchorAction {
    /// Sign the head as a checkpoint, write it to the anchors directory (one file per anchor),
    /// and append an anchor.published event. The data directory is verified, and checked
    /// against every anchor already published, before anything is signed. Run it with the
    /// server stopped, or let `ledger serve` publish on its schedule.
    Publish {
        #[arg(long, env = "LEDGER_DATA_DIR", default_value = "./ledger-data")]
        data_dir: PathBuf,
        /// Anchors directory (default: <data-dir>/anchors). Commit it to git or copy it off the host.
        #[arg(long, env = "LEDGER_ANCHORS_DIR")]
        anchors: Option<PathBuf>,
        /// An earlier log verifier key whose anchors stay trusted (repeatable).
        #[arg(long = "anchor-key")]
        anchor_keys: Vec<String>,
        #[command(flatten)]
        rekor: Box<RekorArgs>,
    },
    /// Make an anchoring key for Rekor (ECDSA P-256, PKCS#8 PEM, mode 0600) and print its public
    /// key, which verifiers pin (`ledger verify --anchors DIR --rekor-pub FILE`).
    RekorKeygen {
        /// Where to write the private key; the public key goes beside it as FILE.pub.
        #[arg(long)]
        out: PathBuf,
    },
}

/// Publication of anchors to a Rekor log (docs/SIGSTORE.md).
#[derive(clap::Args)]
pub struct RekorArgs {
    /// Also publish to this Rekor log (e.g. https://rekor.sigstore.dev for v1,
    /// https://log2025-1.rekor.sigstore.dev for v2): every anchor of the
    /// directory without a kept bundle, oldest first, so an outage catches up on the next run.
    #[arg(long, env = "LEDGER_REKOR_URL")]
    rekor: Option<String>,
    /// The Rekor API --rekor serves: 1, or 2 (whose entries carry no time: each signature is
    /// timestamped by --tsa first).
    #[arg(
        long,
        env = "LEDGER_REKOR_VERSION",
        default_value_t = 1,
        value_parser = clap::value_parser!(u8).range(1..=2),
        requires = "rekor"
    )]
    rekor_version: u8,
    /// With --rekor-version 2: the RFC 3161 timestamp authority's URL (e.g.
    /// https://timestamp.sigstore.dev/api/v1/timestamp), which the trusted root must name.
    #[arg(long, env = "LEDGER_TSA_URL", requires = "rekor")]
    tsa: Option<String>,
    /// The anchoring key (`ledger anchor rekor-keygen`).
    #[arg(
        long,
        env = "LEDGER_REKOR_KEY",
        requires = "rekor",
        conflicts_with = "fulcio"
    )]
    rekor_key: Option<PathBuf>,
    /// Keyless instead of --rekor-key: sign under the operator's own Sigstore identity, with a
    /// short-lived certificate from this Fulcio (e.g. https://fulcio.sigstore.dev) for an
    /// ephemeral key. Needs an OIDC identity token (--identity-token-file or
    /// LEDGER_IDENTITY_TOKEN), which is used for this run and never stored.
    #[arg(long, env = "LEDGER_FULCIO_URL", requires = "rekor")]
    fulcio: Option<String>,
    /// With --fulcio: a file holding the OIDC identity token (`-` reads standard input).
    #[arg(long, requires = "fulcio", conflicts_with = "identity_token")]
    identity_token_file: Option<PathBuf>,
    /// With --fulcio: the OIDC identity token itself (prefer the file or standard input: an
    /// argument shows in the process list).
    #[arg(
        long,
        env = "LEDGER_IDENTITY_TOKEN",
        hide_env_values = true,
        requires = "fulcio"
    )]
    identity_token: Option<String>,
    /// The Sigstore trusted root a kept bundle must verify against (default: the production
    /// root embedded in this build).
    #[arg(long, env = "LEDGER_SIGSTORE_ROOT")]
    sigstore_root: Option<PathBuf>,
    /// Tries per anchor before giving up until the next run.
    #[arg(long, default_value_t = 3)]
    rekor_attempts: u32,
}

pub fn run(action: AnchorAction) -> anyhow::Result<()> {
    let (data_dir, anchors, anchor_keys, rekor) = match action {
        AnchorAction::Publish {
            data_dir,
            anchors,
            anchor_keys,
            rekor,
        } => (data_dir, anchors, anchor_keys, rekor),
        AnchorAction::RekorKeygen { out } => return rekor_keygen(&out),
    };
    // The Rekor settings are read before anything is signed: a bad key or
    // root fails the run while nothing is published.
    let rekor = match &rekor.rekor {
        Some(url) => {
            let signing = match (&rekor.fulcio, &rekor.rekor_key) {
                (Some(fulcio), _) => {
                    let token = identity_token(&rekor)?;
                    let s = api::rekor::Signing::keyless(fulcio.clone(), &token)?;
                    if let api::rekor::Signing::Keyless { claims, .. } = &s {
                        eprintln!(
                            "keyless: certificates for {} (issuer {}) from {fulcio}",
                            claims.identity(),
                            claims.issuer
                        );
                    }
                    s
                }
                (None, Some(key)) => api::rekor::Signing::Key(api::rekor::read_key(key)?),
                (None, None) => anyhow::bail!(
                    "--rekor needs --rekor-key (the anchoring key) or --fulcio (keyless)"
                ),
            };
            let mut r = api::rekor::Rekor::signed_by(
                url.clone(),
                signing,
                api::rekor::trust_root(rekor.sigstore_root.as_deref())?,
            );
            r.attempts = rekor.rekor_attempts;
            r.api = api::rekor::RekorApi::of(rekor.rekor_version, rekor.tsa.as_deref())?;
            Some(r)
        }
        None => None,
    };
    let key = verifier::keys::local_key(&data_dir)?;
    // An anchor is never taken back: sign only a log that verifies and
    // extends every anchor already published.
    let pb = progress_bar(false, "verifying before anchoring");
    let verified = ledger::verify_dir(&data_dir, &mut |done, total| {
        pb.set_length(total);
        pb.set_position(done);
    });
    pb.finish_and_clear();
    verified.map_err(|e| fail(format!("no anchor published: the log does not verify: {e}")))?;
    let log = events::EventLog::open(
        &data_dir,
        ledger::Config::default(),
        key.event_signing_key(),
        Arc::new(SystemClock),
    )?;
    let dir = anchors.unwrap_or_else(|| data_dir.join("anchors"));
    let published = anchors::anchor::read_dir(&dir)
        .with_context(|| format!("reading the anchors in {}", dir.display()))?;
    let mut trusted = vec![key.verifier_key().to_owned()];
    trusted.extend(anchor_keys);
    anchors::check_anchors(log.ledger(), &published, &trusted, key.origin()).map_err(|e| {
        fail(format!(
            "no anchor published: the log does not extend the anchors already published: {e}"
        ))
    })?;
    let p = api::anchor::publish(&log, &key, &dir, SystemClock.now_micros())?;
    println!(
        "published {}\nrecorded anchor.published at index {}",
        p.location, p.recorded_at
    );
    if let Some(rekor) = rekor {
        let check = api::rekor::anchor_of(trusted.clone(), key.origin().to_owned());
        let run = api::rekor::publish_pending(&dir, &rekor, &check);
        let (done, failed) = match run {
            Ok(done) => (done, None),
            Err((done, e)) => (done, Some(e)),
        };
        let recorded = api::rekor::record(
            &log,
            &key,
            &trusted,
            &done.published,
            SystemClock.now_micros(),
        )?;
        for (p, index) in done.published.iter().zip(recorded) {
            println!(
                "Rekor: {} published at {}, bundle verified and kept beside it; recorded at index {index}",
                p.anchor.display(),
                p.location
            );
        }
        if let Some(e) = failed {
            return Err(e.context(format!(
                "Rekor: {} anchor(s) published before this one failed",
                done.published.len()
            )));
        }
        println!(
            "Rekor: {} anchor(s) published; {} already were",
            done.published.len(),
            done.already
        );
    }
    Ok(())
}

/// The OIDC identity token for keyless publication: from the file (or
/// standard input for `-`), or as given.
fn identity_token(a: &RekorArgs) -> anyhow::Result<String> {
    let token = match (&a.identity_token_file, &a.identity_token) {
        (Some(path), _) if path.as_os_str() == "-" => {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)?;
            s
        }
        (Some(path), _) => std::fs::read_to_string(path)
            .with_context(|| format!("reading the identity token {}", path.display()))?,
        (None, Some(t)) => t.clone(),
        (None, None) => anyhow::bail!(
            "--fulcio needs an OIDC identity token: --identity-token-file FILE, or LEDGER_IDENTITY_TOKEN"
        ),
    };
    Ok(token.trim().to_owned())
}

/// `ledger anchor rekor-keygen --out FILE`.
fn rekor_keygen(out: &std::path::Path) -> anyhow::Result<()> {
    let (key, text) =
        sigstore_check::rekor::AnchoringKey::generate().map_err(|e| anyhow::anyhow!("{e}"))?;
    verifier::keys::write_secret(out, &text)?;
    let public = std::path::PathBuf::from(format!("{}.pub", out.display()));
    {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&public)
            .with_context(|| format!("creating {}", public.display()))?;
        f.write_all(key.public_pem().as_bytes())?;
        f.sync_all()?;
    }
    println!(
        "wrote {} (keep it secret: it publishes anchors in the log's name) and {}\n{}",
        out.display(),
        public.display(),
        key.public_pem()
    );
    Ok(())
}
