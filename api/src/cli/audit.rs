//! `ledger audit`: check a server trusting only the log's verifier key and
//! the checkpoint an earlier audit saved.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use verifier::audit::{AuditError, AuditFailure};
use verifier::Client;

use super::anchor_check::{AnchorSource, RekorCheck};
use super::{fail, Failure};

#[derive(Args)]
pub struct AuditArgs {
    /// The server's base URL.
    #[arg(long, env = "LEDGER_SERVER")]
    server: String,
    /// File with the trusted signed checkpoint; replaced by the new one after a passing audit.
    #[arg(long)]
    trusted: PathBuf,
    /// The log's note verifier key (repeat for keys from before a rotation).
    #[arg(long = "key", required = true)]
    keys: Vec<String>,
    /// How many random entries to re-hash and prove.
    #[arg(long, default_value_t = 32)]
    samples: usize,
    /// Trust the server's current checkpoint when --trusted does not exist yet (first audit).
    #[arg(long)]
    init: bool,
    /// Also check every projection for completeness: replay the log into
    /// the replica kept in this directory (made on first use; each run
    /// fetches only what is new) and compare each served projection with
    /// the replica's, field by field.
    #[arg(long, value_name = "DIR")]
    projections: Option<PathBuf>,
    /// With --projections: the window every projection must state, in days
    /// (the server's `window_days`).
    #[arg(long, default_value_t = 30)]
    window_days: u32,
    /// With --projections: how far a projection's stated time may be from
    /// this machine's clock, in seconds.
    #[arg(long, default_value_t = 300)]
    max_skew_secs: u32,
    /// A C2SP tlog-policy file: the audited checkpoint must carry
    /// cosignatures from a quorum of its witnesses (exit 1 otherwise).
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// The anchors the audited tree must extend: each signed by the log's
    /// key (--key), and the audited checkpoint consistent with it (the
    /// server's consistency proofs, checked here).
    #[command(flatten)]
    anchors: AnchorSource,
    /// With --anchors: the Rekor bundles kept beside the anchors.
    #[command(flatten)]
    rekor: RekorCheck,
    #[arg(long, env = "LEDGER_READ_TOKEN", hide_env_values = true)]
    token: Option<String>,
    #[arg(long)]
    quiet: bool,
}

/// Reads a witness policy file.
pub(super) fn read_policy(path: &std::path::Path) -> anyhow::Result<anchors::Policy> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
    anchors::Policy::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Checks a checkpoint note against a policy with the first of `keys` the
/// policy allows and that signed it; the witnesses that cosigned it.
pub(super) fn witnessed(
    policy: &anchors::Policy,
    note: &[u8],
    keys: &[String],
) -> anyhow::Result<Vec<String>> {
    let mut last = None;
    for k in keys {
        match policy.open_checkpoint(note, k) {
            Ok(w) => return Ok(w.cosigned.into_iter().map(|c| c.witness).collect()),
            Err(e) => last = Some(e),
        }
    }
    Err(fail(format!(
        "the checkpoint does not meet the witness policy: {}",
        last.map_or_else(|| "no key given".to_owned(), |e| e.to_string())
    )))
}

pub fn run(a: AuditArgs) -> anyhow::Result<()> {
    let trusted = match std::fs::read(&a.trusted) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && a.init => None,
        Err(e) => bail!(
            "reading {}: {e} (use --init for a first audit)",
            a.trusted.display()
        ),
    };
    let policy = a.policy.as_deref().map(read_policy).transpose()?;
    a.rekor.refuse_unusable(&a.anchors)?;
    let client = Client::new(&a.server, a.token.clone());
    let pb = if a.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(0)
    };
    pb.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    let result = verifier::audit::audit(
        &client,
        &a.keys,
        trusted.as_deref(),
        a.samples,
        seed,
        &mut |what, done, total| {
            pb.set_message(what.to_owned());
            pb.set_length(total);
            pb.set_position(done);
        },
    );
    pb.finish_and_clear();
    match result {
        Ok(r) => {
            if let Some(p) = &policy {
                let by = witnessed(p, r.checkpoint.as_bytes(), &a.keys)?;
                println!("witnesses:   cosigned by {} ({})", by.len(), by.join(", "));
            }
            let scratch = tempfile::tempdir()?;
            if let Some(read) = a.anchors.read(scratch.path()) {
                let (label, anchors_path, list) = read.anchors()?;
                let served = verifier::audit::ServedLog {
                    client: &client,
                    size: r.size,
                    root: r.root,
                };
                let checked = anchors::check_anchors(&served, &list, &a.keys, &r.origin)
                    .map_err(|e| fail(e.to_string()))?;
                println!(
                    "anchors:     the audited tree extends all {} anchors in {label}",
                    checked.len()
                );
                if a.rekor.wanted() {
                    a.rekor.check(&anchors_path)?;
                }
            }
            match r.previous_size {
                Some(p) => println!(
                    "checkpoint: size {} is consistent with the trusted size {p}",
                    r.size
                ),
                None => println!(
                    "checkpoint: size {} (first audit: trusted on first use)",
                    r.size
                ),
            }
            println!(
                "entries:     {} random entries re-hashed and proven",
                r.entries_checked
            );
            println!(
                "projections: {} task classes, {} evidence proofs verified",
                r.projections_checked, r.evidence_checked
            );
            if let Some(dir) = &a.projections {
                let mut replica = verifier::replay::Replica::open(dir)?;
                if let Some(why) = replica.refused() {
                    eprintln!("note: the replica's saved projection was refused ({why}); it was folded again from the replica's log");
                }
                if let Some(why) = replica.rules_refused() {
                    eprintln!("note: the replica's saved rule state was refused ({why}); every entry it holds is checked against the rules again");
                }
                let rules = verifier::audit::ReplayRules {
                    audited: (r.size, r.root),
                    origin: r.origin.clone(),
                    settings: projections::Settings {
                        window_seconds: i64::from(a.window_days) * 24 * 3600,
                        ..projections::Settings::default()
                    },
                    now_micros: events::Clock::now_micros(&events::SystemClock),
                    max_skew_micros: i64::from(a.max_skew_secs) * 1_000_000,
                };
                let pb = if a.quiet {
                    ProgressBar::hidden()
                } else {
                    ProgressBar::new(0)
                };
                let replayed = verifier::audit::audit_projections(
                    &client,
                    &a.keys,
                    &rules,
                    &mut replica,
                    &mut |what, done, total| {
                        pb.set_message(what.to_owned());
                        pb.set_length(total);
                        pb.set_position(done);
                    },
                );
                pb.finish_and_clear();
                let replayed = match replayed {
                    Ok(r) => r,
                    Err(AuditError::Failed(f @ AuditFailure::Stale { .. })) => {
                        return Err(Failure {
                            status: 3,
                            label: "STALE",
                            message: f.to_string(),
                        }
                        .into())
                    }
                    Err(AuditError::Failed(f)) => return Err(fail(f.to_string())),
                    Err(AuditError::Other(e)) => return Err(e),
                };
                println!(
                    "replay:      {} task classes equal the replica's projections at size {} ({} new entries checked against the signed tree and the event rules, every signature again, and folded into {}; {} signed recommendations among them equal to the replica's); window {} days, confidence {}, {} resamples, stated times within {} s of this clock",
                    replayed.task_classes,
                    replayed.size,
                    replayed.followed,
                    dir.display(),
                    replayed.recommendations,
                    a.window_days,
                    rules.settings.confidence,
                    rules.settings.resamples,
                    a.max_skew_secs
                );
            }
            verifier::keys::replace_durably(&a.trusted, r.checkpoint.as_bytes())?;
            println!(
                "OK: saved the new trusted checkpoint to {}",
                a.trusted.display()
            );
            Ok(())
        }
        Err(AuditError::Failed(f @ AuditFailure::Stale { .. })) => Err(Failure {
            status: 3,
            label: "STALE",
            message: f.to_string(),
        }
        .into()),
        Err(AuditError::Failed(f)) => Err(fail(f.to_string())),
        Err(AuditError::Other(e)) => Err(e),
    }
}
