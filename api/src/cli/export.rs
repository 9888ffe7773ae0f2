//! `ledger export`: every entry as JSON lines, with its raw leaf and hashes.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use verifier::Client;

use super::{fail, Source};

#[derive(Args)]
pub struct ExportArgs {
    #[command(flatten)]
    source: Source,
    /// Output file (default: standard output).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Remote: the log's note verifier key. Every entry exported is proven
    /// into the server's checkpoint signed by it (without it, by the key
    /// the server gives).
    #[arg(long)]
    key: Option<String>,
}

pub fn run(a: ExportArgs) -> anyhow::Result<()> {
    let ExportArgs { source, out, key } = a;
    let out = out.as_deref();
    use std::io::Write as _;
    let mut w: Box<dyn std::io::Write> = match out {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let line = |w: &mut Box<dyn std::io::Write>,
                index: u64,
                leaf: &str,
                lh: &str,
                ch: &str|
     -> anyhow::Result<()> {
        writeln!(
            w,
            "{}",
            serde_json::json!({"index": index, "leaf": leaf, "leaf_hash": lh, "chain_hash": ch})
        )?;
        Ok(())
    };
    if let Some(server) = &source.server {
        let client = Client::new(server, source.token.clone());
        let key = match key {
            Some(k) => k,
            None => {
                let k = client.get("/v1/log/key")?.text().trim().to_owned();
                eprintln!("note: the export is proven against the key the server gave ({k}); pass --key to prove it against a key you trust");
                k
            }
        };
        let note = client.get("/checkpoint")?.text();
        let cp = anchors::open_checkpoint(note.as_bytes(), &key)
            .map_err(|e| fail(format!("checkpoint: {e}")))?;
        verifier::entries_verified(
            &client,
            cp.size,
            &cp.root,
            &mut |e, _| line(&mut w, e.index, &e.leaf, &e.leaf_hash, &e.chain_hash),
            &mut |_, _| {},
        )
        .map_err(super::checked)?;
    } else {
        let dir = source
            .data_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from("./ledger-data"));
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
    w.flush()?;
    Ok(())
}
