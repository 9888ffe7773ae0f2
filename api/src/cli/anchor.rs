//! `ledger anchor publish`: sign the head as a checkpoint, publish it, and
//! record it in the log.

use std::path::PathBuf;
use std::sync::Arc;

use events::{Clock as _, SystemClock};

use clap::Subcommand;

#[derive(Subcommand)]
pub enum AnchorAction {
    /// Sign the head as a checkpoint, write it to the anchors directory (one file per anchor),
    /// and append an anchor.published event. Run it with the server stopped, or let
    /// `ledger serve` publish on its schedule.
    Publish {
        #[arg(long, env = "LEDGER_DATA_DIR", default_value = "./ledger-data")]
        data_dir: PathBuf,
        /// Anchors directory (default: <data-dir>/anchors). Commit it to git or copy it off the host.
        #[arg(long, env = "LEDGER_ANCHORS_DIR")]
        anchors: Option<PathBuf>,
    },
}

pub fn run(action: AnchorAction) -> anyhow::Result<()> {
    let AnchorAction::Publish { data_dir, anchors } = action;
    let key = verifier::keys::local_key(&data_dir)?;
    let log = events::EventLog::open(
        &data_dir,
        ledger::Config::default(),
        key.event_signing_key(),
        Arc::new(SystemClock),
    )?;
    let dir = anchors.unwrap_or_else(|| data_dir.join("anchors"));
    let p = api::anchor::publish(&log, &key, &dir, SystemClock.now_micros())?;
    println!(
        "published {}\nrecorded anchor.published at index {}",
        p.location, p.recorded_at
    );
    Ok(())
}
