//! `ledger witness`: a C2SP tlog-witness that cosigns checkpoints of the
//! logs it follows (api::witness), and its key.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};

use super::{runtime, shutdown_signal};

#[derive(Subcommand)]
pub enum WitnessAction {
    /// Serve POST /add-checkpoint (C2SP tlog-witness): cosign each checkpoint of a known log
    /// that is consistent with the last one cosigned for it, and keep that one in --state-dir.
    Serve(ServeArgs),
    /// Write a new witness cosigning key (Ed25519, C2SP tlog-cosignature type 0x04, mode 0600)
    /// and print its verifier key, the line logs and verifiers put in their policy.
    Keygen(KeygenArgs),
}

#[derive(Args)]
pub struct ServeArgs {
    /// The witness's cosigning key file (`ledger witness keygen`).
    #[arg(long, env = "LEDGER_WITNESS_KEY")]
    key: PathBuf,
    /// A log's note verifier key to witness (repeatable; several keys of one origin are all
    /// trusted, as after a rotation).
    #[arg(long = "log", required = true)]
    logs: Vec<String>,
    /// Where the latest cosigned checkpoint of each log is kept.
    #[arg(
        long,
        env = "LEDGER_WITNESS_STATE_DIR",
        default_value = "./witness-state"
    )]
    state_dir: PathBuf,
    /// Listen address.
    #[arg(long, env = "LEDGER_WITNESS_LISTEN", default_value = "127.0.0.1:7879")]
    listen: std::net::SocketAddr,
}

#[derive(Args)]
pub struct KeygenArgs {
    /// The witness's name, a schemaless URL by convention (witness.example.org/w1).
    #[arg(long)]
    name: String,
    /// Where to write the key.
    #[arg(long)]
    out: PathBuf,
}

pub fn run(action: WitnessAction) -> anyhow::Result<()> {
    match action {
        WitnessAction::Keygen(a) => {
            let k = anchors::CosignerKey::generate(&a.name)?;
            verifier::keys::write_secret(&a.out, &k.private_key())?;
            println!("wrote {} (mode 0600)", a.out.display());
            println!("verifier key: {}", k.verifier_key());
            Ok(())
        }
        WitnessAction::Serve(a) => {
            let text = std::fs::read_to_string(&a.key)
                .with_context(|| format!("reading the witness key {}", a.key.display()))?;
            let key = anchors::CosignerKey::from_private(&text)?;
            let w = Arc::new(api::witness::Witness::open(key, &a.logs, &a.state_dir)?);
            runtime()?.block_on(async move {
                let listener = tokio::net::TcpListener::bind(a.listen).await?;
                tracing::info!(addr = %listener.local_addr()?, key = %w.verifier_key(), "witness serving");
                api::listen::serve(
                    listener,
                    w.router(),
                    api::listen::Limits {
                        header_read_timeout: Duration::from_secs(10),
                        idle_timeout: Duration::from_secs(60),
                    },
                    shutdown_signal(),
                )
                .await?;
                Ok(())
            })
        }
    }
}
