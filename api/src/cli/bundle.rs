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
    /// A C2SP tlog-policy file: wait until the server's witnessed checkpoint
    /// covers the bundle's tree and add it, with the consistency proof, as
    /// the bundle's `witnessed` part (needs --key).
    #[arg(long, value_name = "FILE", requires = "keys")]
    policy: Option<PathBuf>,
    /// With --policy: the log's note verifier key (repeatable).
    #[arg(long = "key")]
    keys: Vec<String>,
    /// With --policy: how long to wait for the witnesses, in seconds.
    #[arg(long, default_value_t = 120)]
    wait_secs: u64,
    #[arg(long, env = "LEDGER_READ_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

#[derive(Args)]
pub struct VerifyBundleArgs {
    file: PathBuf,
    /// The log's note verifier key (repeatable, for keys from before a rotation).
    #[arg(long = "key", required = true)]
    keys: Vec<String>,
    /// A C2SP tlog-policy file: the bundle's tree must be proven a prefix of
    /// a checkpoint that carries the policy's quorum of cosignatures.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
}

pub fn bundle(a: BundleArgs) -> anyhow::Result<()> {
    let out = a.out.as_path();
    let client = Client::new(&a.server, a.token);
    let r = client.get(&format!("/v1/task-classes/{}/bundle", a.task_class))?;
    if r.status != 200 {
        bail!("status {}: {}", r.status, r.text());
    }
    let body = match &a.policy {
        None => r.body,
        Some(file) => {
            let policy = super::audit::read_policy(file)?;
            verifier::check::witness_bundle(
                &client,
                &r.body,
                &a.keys,
                &policy,
                std::time::Duration::from_secs(a.wait_secs),
            )
            .map_err(|e| fail(format!("{e:#}")))?
        }
    };
    std::fs::write(out, &body).with_context(|| format!("writing {}", out.display()))?;
    println!(
        "wrote {} ({} bytes); check it with: ledger verify-bundle {} --key <verifier key>",
        out.display(),
        body.len(),
        out.display()
    );
    Ok(())
}

pub fn verify_bundle(a: VerifyBundleArgs) -> anyhow::Result<()> {
    let file = a.file.as_path();
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let policy = a
        .policy
        .as_deref()
        .map(super::audit::read_policy)
        .transpose()?;
    let s = verifier::check::verify_bundle_with(&bytes, &a.keys, policy.as_ref())
        .map_err(|e| fail(format!("{e:#}")))?;
    let witnessed = match &s.witnessed {
        Some((size, by)) if !by.is_empty() => format!(
            "; a prefix of the tree of size {size} cosigned by {}",
            by.join(", ")
        ),
        Some((size, _)) => format!("; a prefix of the log's tree of size {size}"),
        None => String::new(),
    };
    println!(
        "OK: {} at tree size {}: {} evidence entries proven, statistics recomputed, recommendation {}{witnessed}",
        s.task_class, s.tree_size, s.evidence, s.recommended_tier
    );
    Ok(())
}
