//! `ledger backup` and `ledger restore`: an online, consistent backup, and
//! a restore proven against its signed checkpoint and the anchors.

use std::path::PathBuf;

use clap::Args;
use verifier::Client;

use super::progress_bar;

#[derive(Args)]
pub struct BackupArgs {
    #[arg(long, env = "LEDGER_SERVER")]
    server: String,
    #[arg(long)]
    out: PathBuf,
    /// The log's note verifier key: every entry is proven into the
    /// server's checkpoint signed by it (without it, by the key the server
    /// gives, which then vouches for itself).
    #[arg(long)]
    key: Option<String>,
    #[arg(long, env = "LEDGER_READ_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

#[derive(Args)]
pub struct RestoreArgs {
    #[arg(long)]
    backup: PathBuf,
    #[arg(long)]
    data_dir: PathBuf,
    /// The log key to install in the restored directory.
    #[arg(long)]
    key_file: PathBuf,
    /// Anchors directory to check the restored log against.
    #[arg(long)]
    anchors: Option<PathBuf>,
    /// An earlier log verifier key whose anchors stay trusted (repeatable).
    #[arg(long = "anchor-key")]
    anchor_keys: Vec<String>,
    /// Restore even if the backup is older than a published anchor (the gap is reported).
    #[arg(long)]
    allow_behind_anchor: bool,
}

pub fn backup(a: BackupArgs) -> anyhow::Result<()> {
    let BackupArgs {
        server,
        out,
        key,
        token,
    } = a;
    let out = out.as_path();
    let client = Client::new(&server, token);
    let vkey = client.verifier_key(key, |k| {
        eprintln!("note: the backup is proven against the key the server gave ({k}); pass --key to prove it against a key you trust");
    })?;
    let pb = progress_bar(false, "backing up");
    let b = verifier::backup::backup(&client, &vkey, out, &mut |d, t| {
        pb.set_length(t);
        pb.set_position(d);
    })?;
    pb.finish_and_clear();
    println!(
        "backed up {} entries to {} (re-hashed into the signed checkpoint)",
        b.size,
        out.display()
    );
    if b.without_disclosures > 0 {
        eprintln!(
            "warning: {} entries commit to sensitive values whose disclosures this backup does not hold (no reader token with a role was given): a restore keeps their commitments only (docs/PRIVACY.md)",
            b.without_disclosures
        );
    }
    Ok(())
}

pub fn restore(a: RestoreArgs) -> anyhow::Result<()> {
    let dir = a.data_dir.as_path();
    let pb = progress_bar(false, "restoring");
    let r = verifier::backup::restore(
        &a.backup,
        dir,
        &a.key_file,
        a.anchors.as_deref(),
        &a.anchor_keys,
        a.allow_behind_anchor,
        &mut |d, t| {
            pb.set_length(t);
            pb.set_position(d);
        },
    )?;
    pb.finish_and_clear();
    println!("restored {} entries into {}: root matches the signed checkpoint; consistent with {} anchors", r.size, dir.display(), r.anchors_checked);
    for (anchor, gap) in &r.behind {
        println!("WARNING: behind anchor {anchor} by {gap} entries: those acknowledged entries are not in this restore");
    }
    Ok(())
}
