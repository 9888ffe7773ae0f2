//! `ledger tiles sync`: write the log as C2SP tlog-tiles static files.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};

#[derive(Subcommand)]
pub enum TilesAction {
    /// Bring a directory of C2SP tlog-tiles files (checkpoint, tiles, entry bundles) up to the
    /// log's current size, for any static web server, CDN or bucket. Only what the directory
    /// lacks is written; a directory holding another log, or another history, is refused. The
    /// server must not be running on the data directory (`ledger serve --tiles-dir` keeps a
    /// directory up to date while it serves).
    Sync(SyncArgs),
}

#[derive(Args)]
pub struct SyncArgs {
    /// The data directory.
    #[arg(long, env = "LEDGER_DATA_DIR", default_value = "./ledger-data")]
    data_dir: PathBuf,
    /// The log key that signs the checkpoint. Default: <data_dir>/log.key.
    #[arg(long, env = "LEDGER_KEY_FILE")]
    key_file: Option<PathBuf>,
    /// The directory to write.
    #[arg(long)]
    out: PathBuf,
    /// Write every tile again, whatever the directory holds.
    #[arg(long)]
    full: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

pub fn run(action: TilesAction) -> anyhow::Result<()> {
    let TilesAction::Sync(a) = action;
    let key_path = a.key_file.unwrap_or_else(|| a.data_dir.join("log.key"));
    let key_text = std::fs::read_to_string(&key_path)
        .with_context(|| format!("reading the log key {}", key_path.display()))?;
    let key = anchors::LogKey::from_private(&key_text)?;
    let log = ledger::Ledger::open(&a.data_dir, ledger::Config::default())
        .with_context(|| format!("opening {}", a.data_dir.display()))?;
    let pb = super::progress_bar_of(a.quiet, "writing tiles", "tiles");
    let s = api::tiles::sync_dir(&log, &key, &a.out, a.full, None, |done, total| {
        pb.set_length(total as u64);
        pb.set_position(done as u64);
    })?;
    pb.finish_and_clear();
    println!(
        "{}: tree size {} (was {}), {} tiles written",
        a.out.display(),
        s.size,
        s.from,
        s.written
    );
    Ok(())
}
