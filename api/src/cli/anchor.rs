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
    },
}

pub fn run(action: AnchorAction) -> anyhow::Result<()> {
    let AnchorAction::Publish {
        data_dir,
        anchors,
        anchor_keys,
    } = action;
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
    Ok(())
}
