//! What `ledger verify` and `ledger audit` share to check anchors: where
//! the anchors are read from, and the offline check of the Rekor bundle
//! kept beside each.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use clap::Args;

use super::fail;

/// Where the anchors are read from.
#[derive(Args, Clone, Default)]
pub struct AnchorSource {
    /// Also check the log against every anchor in this directory.
    #[arg(long, conflicts_with = "anchors_repo")]
    pub anchors: Option<PathBuf>,
    /// Also check the log against every anchor in this git repository
    /// (cloned into a scratch directory; any URL `git clone` takes).
    #[arg(long, value_name = "URL")]
    pub anchors_repo: Option<String>,
}

/// Anchors read from an [`AnchorSource`]: a name for messages, the
/// directory they were read from (the one given, or the clone) and what
/// was read.
pub struct ReadAnchors {
    pub label: String,
    pub path: PathBuf,
    pub list: Result<Vec<anchors::Anchor>, anchors::AnchorError>,
}

impl AnchorSource {
    /// Reads the anchors, cloning a repository into `scratch`; `None` when
    /// no source was given.
    pub fn read(&self, scratch: &Path) -> Option<ReadAnchors> {
        let cloned = scratch.join("anchors");
        match (&self.anchors, &self.anchors_repo) {
            (Some(d), _) => Some(ReadAnchors {
                label: d.display().to_string(),
                path: d.clone(),
                list: anchors::anchor::read_dir(d),
            }),
            (None, Some(url)) => Some(ReadAnchors {
                label: url.clone(),
                list: anchors::git::clone_anchors(url, &cloned),
                path: cloned,
            }),
            (None, None) => None,
        }
    }

    pub fn given(&self) -> bool {
        self.anchors.is_some() || self.anchors_repo.is_some()
    }
}

impl ReadAnchors {
    /// The anchors, or the failed check a rewritten anchors history is
    /// (other errors are errors).
    pub fn anchors(self) -> anyhow::Result<(String, PathBuf, Vec<anchors::Anchor>)> {
        let list = self.list.map_err(|e| match e {
            anchors::AnchorError::HistoryRewritten { .. } => fail(e.to_string()),
            e => anyhow::Error::from(e),
        })?;
        Ok((self.label, self.path, list))
    }
}

/// The offline check of the Rekor bundle kept beside each anchor.
#[derive(Args, Clone, Default)]
pub struct RekorCheck {
    /// With --anchors: also check each anchor's kept Rekor bundle offline, as a
    /// signature by this anchoring key (PEM, `ledger anchor rekor-keygen`) logged in Rekor.
    #[arg(long, conflicts_with = "rekor_identity")]
    pub rekor_pub: Option<PathBuf>,
    /// With --anchors: check each anchor's kept Rekor bundle as a keyless signature
    /// (`ledger anchor publish --fulcio`) by this Sigstore identity: the SAN its certificate
    /// names (an e-mail address or a URI), compared exactly.
    #[arg(long, requires = "rekor_issuer")]
    pub rekor_identity: Option<String>,
    /// With --rekor-identity: the OIDC issuer its certificate names.
    #[arg(long, requires = "rekor_identity")]
    pub rekor_issuer: Option<String>,
    /// With --rekor-pub or --rekor-identity: fail on an anchor without a kept bundle (by
    /// default it is listed as not yet published: right after an anchor, or during a Rekor
    /// outage, it has none yet).
    #[arg(long)]
    pub rekor_require_all: bool,
    /// With --rekor-pub or --rekor-identity: the Sigstore trusted root (default: the production
    /// root embedded in this build).
    #[arg(long, env = "LEDGER_SIGSTORE_ROOT")]
    pub sigstore_root: Option<PathBuf>,
}

impl RekorCheck {
    /// Whether bundles are to be checked.
    pub fn wanted(&self) -> bool {
        self.rekor_pub.is_some() || self.rekor_identity.is_some()
    }

    /// Refuses options that cannot be honoured: a bundle check without
    /// anchors, or its modifiers without a bundle check.
    pub fn refuse_unusable(&self, source: &AnchorSource) -> anyhow::Result<()> {
        if self.wanted() && !source.given() {
            bail!("--rekor-pub and --rekor-identity check the bundles beside anchors: give --anchors or --anchors-repo");
        }
        if !self.wanted() && (self.rekor_require_all || self.sigstore_root.is_some()) {
            bail!(
                "--rekor-require-all and --sigstore-root go with --rekor-pub or --rekor-identity"
            );
        }
        Ok(())
    }

    /// Checks the bundle beside each anchor in `dir` offline and prints
    /// what was checked; a bundle that does not verify is a failed check.
    pub fn check(&self, dir: &Path) -> anyhow::Result<()> {
        let pem = match &self.rekor_pub {
            Some(path) => std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?,
            None => String::new(),
        };
        let (signer, by) = match (&self.rekor_identity, &self.rekor_issuer) {
            (Some(identity), Some(issuer)) => (
                sigstore_check::Signer::Identity { identity, issuer },
                format!("{identity} (issuer {issuer})"),
            ),
            _ => (
                sigstore_check::Signer::Key { pem: &pem },
                "the anchoring key".to_owned(),
            ),
        };
        let root = api::rekor::trust_root(self.sigstore_root.as_deref())?;
        let r = api::rekor::check_bundles(dir, &signer, &root, self.rekor_require_all)
            .map_err(|e| fail(format!("{e:#}")))?;
        println!(
            "Rekor: {} anchors' bundles verified offline (logged, signed by {by}, over the anchor's bytes)",
            r.verified
        );
        if !r.missing.is_empty() {
            eprintln!(
                "note: {} anchors are not yet published to Rekor (the next `ledger anchor publish --rekor` publishes them): {}",
                r.missing.len(),
                r.missing.join(", ")
            );
        }
        Ok(())
    }
}
