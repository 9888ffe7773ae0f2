//! `ledger bundle` and `ledger verify-bundle`: an offline proof bundle of a
//! projection, and its check with no server.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use verifier::Client;

use super::fail;

#[derive(Args)]
pub struct BundleArgs {
    #[arg(long, env = "LEDGER_SERVER")]
    server: String,
    #[arg(long)]
    task_class: String,
    #[arg(long)]
    out: PathBuf,
    #[arg(long, env = "LEDGER_READ_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

#[derive(Args)]
pub struct VerifyBundleArgs {
    file: PathBuf,
    /// The log's note verifier key (repeatable, for keys from before a rotation).
    #[arg(long = "key", required = true)]
    keys: Vec<String>,
}

pub fn bundle(a: BundleArgs) -> anyhow::Result<()> {
    let out = a.out.as_path();
    let client = Client::new(&a.server, a.token);
    let r = client.get(&format!("/v1/task-classes/{}/bundle", a.task_class))?;
    if r.status != 200 {
        bail!("status {}: {}", r.status, r.text());
    }
    std::fs::write(out, &r.body).with_context(|| format!("writing {}", out.display()))?;
    println!(
        "wrote {} ({} bytes); check it with: ledger verify-bundle {} --key <verifier key>",
        out.display(),
        r.body.len(),
        out.display()
    );
    Ok(())
}

pub fn verify_bundle(a: VerifyBundleArgs) -> anyhow::Result<()> {
    let file = a.file.as_path();
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let s = verifier::check::verify_bundle(&bytes, &a.keys).map_err(|e| fail(format!("{e:#}")))?;
    println!(
        "OK: {} at tree size {}: {} evidence entries proven, statistics recomputed, recommendation {}",
        s.task_class, s.tree_size, s.evidence, s.recommended_tier
    );
    Ok(())
}
