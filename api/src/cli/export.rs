//! `ledger export`: every entry as JSON lines, with its raw leaf and hashes.
//! Nothing is written out until every entry is proven: the lines go to a
//! scratch file that becomes `--out` (or is copied to standard output) only
//! when the whole export checks.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use verifier::Client;

use super::{checked, fail, Source};

#[derive(Args)]
pub struct ExportArgs {
    #[command(flatten)]
    source: Source,
    /// Output file (default: standard output).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Remote: the log's note verifier key. Every entry exported is proven
    /// into the server's checkpoint signed by it (without it, by the key
    /// the server gives, which then vouches for itself).
    #[arg(long)]
    key: Option<String>,
}

/// One exported line.
fn line(
    w: &mut impl std::io::Write,
    index: u64,
    leaf: &str,
    leaf_hash: &str,
    chain_hash: &str,
) -> anyhow::Result<()> {
    let v = serde_json::json!({
        "index": index, "leaf": leaf, "leaf_hash": leaf_hash, "chain_hash": chain_hash
    });
    writeln!(w, "{v}")?;
    Ok(())
}

pub fn run(a: ExportArgs) -> anyhow::Result<()> {
    let ExportArgs { source, out, key } = a;
    // The scratch file sits beside `--out`, so that the rename is atomic.
    let scratch_dir = out
        .as_deref()
        .and_then(|p| p.parent())
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(std::env::temp_dir, PathBuf::from);
    let scratch = tempfile::NamedTempFile::new_in(&scratch_dir)
        .with_context(|| format!("creating a scratch file in {}", scratch_dir.display()))?;
    let mut w = std::io::BufWriter::new(scratch);
    if let Some(server) = &source.server {
        let client = Client::new(server, source.token.clone());
        let key = client.verifier_key(key, |k| {
            eprintln!("note: the export is proven against the key the server gave ({k}); pass --key to prove it against a key you trust");
        })?;
        let note = client.get_text("/checkpoint")?;
        let cp = anchors::open_checkpoint(note.as_bytes(), &key)
            .map_err(|e| fail(format!("checkpoint: {e}")))?;
        verifier::entries_verified(
            &client,
            cp.size,
            &cp.root,
            &mut |e, _| line(&mut w, e.index, &e.leaf, &e.leaf_hash, &e.chain_hash),
            &mut |_, _| {},
        )
        .map_err(checked)?;
    } else {
        let dir = source
            .data_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from("./ledger-data"));
        // Local reads are checked: each entry re-hashes to its stored leaf
        // hash, or the read fails.
        let log = ledger::Ledger::open(&dir, ledger::Config::default())?;
        let size = log.head().size;
        let mut start = 0;
        while start < size {
            for e in log.entries(start, start + 4096)? {
                let leaf =
                    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &e.leaf);
                line(
                    &mut w,
                    e.index,
                    &leaf,
                    &ledger::hash::to_hex(&e.leaf_hash),
                    &ledger::hash::to_hex(&e.chain_hash),
                )?;
            }
            start += 4096;
        }
    }
    let scratch = w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))?;
    match out {
        Some(p) => {
            scratch.as_file().sync_all()?;
            scratch
                .persist(&p)
                .with_context(|| format!("writing {}", p.display()))?;
        }
        None => {
            let mut f = scratch.reopen()?;
            std::io::copy(&mut f, &mut std::io::stdout().lock())?;
        }
    }
    Ok(())
}
