//! `ledger demo`: a server on a fresh data directory with a sample bench
//! loaded through the API, every proof checked.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::bail;
use api::config::ServeConfig;
use clap::Args;
use verifier::Client;

use super::{runtime, shutdown_signal};

#[derive(Args)]
pub struct DemoArgs {
    /// Where to create the demo (default: a fresh temporary directory).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Listen address (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: std::net::SocketAddr,
    /// Exit after the demo instead of serving until Ctrl-C.
    #[arg(long)]
    exit: bool,
}

pub fn run(a: DemoArgs) -> anyhow::Result<()> {
    let DemoArgs {
        data_dir: dir,
        listen,
        exit,
    } = a;
    let dir = match dir {
        Some(d) => d,
        None => tempfile::Builder::new()
            .prefix("ledger-demo-")
            .tempdir()?
            .keep(),
    };
    println!("demo data directory: {}", dir.display());
    let init = api::init::init(
        &dir,
        api::init::DEFAULT_ORIGIN,
        "operator@bench.example",
        None,
        None,
    )?;
    let vkey = init.log_key.verifier_key().to_owned();
    let rt = runtime()?;
    let listener = rt.block_on(tokio::net::TcpListener::bind(listen))?;
    let addr = listener.local_addr()?;
    // An auditor who receives the disclosures of sensitive values
    // (docs/PRIVACY.md): its token is printed below, its digest listed.
    let (auditor_token, line) = api::readers::new_token("auditor", "demo-auditor")?;
    let readers_file = dir.join("readers");
    std::fs::write(&readers_file, format!("{line}\n"))?;
    let config = ServeConfig {
        data_dir: dir.clone(),
        listen: addr,
        readers_file: Some(readers_file),
        // The demo's curator by Sigstore identity signs with the synthetic
        // test instance (docs/SIGSTORE.md); no other server accepts it.
        sigstore_allow_synthetic_root: true,
        ..ServeConfig::default()
    };
    let state = std::sync::Arc::new(api::server::AppState::open(
        config,
        init.log_key,
        std::sync::Arc::new(events::SystemClock),
    )?);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = rt.spawn(api::server::run(state, listener, async {
        let _ = stop_rx.await;
    }));
    let base = format!("http://{addr}");
    let client = Client::new(&base, None);
    let started = Instant::now();
    while client.get("/readyz").map(|r| r.status).unwrap_or(0) != 200 {
        if started.elapsed().as_secs() > 30 {
            bail!("the demo server did not become ready");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    println!("server listening on {base}\n");
    api::demo::load_bench(&client, init.operator, &vkey)?;
    println!("\ndone in {:.1?}.", started.elapsed());
    println!("auditor reader token (receives disclosures of sensitive values): {auditor_token}");
    println!("Explore:");
    println!("  curl {base}/checkpoint");
    println!("  curl {base}/v1/task-classes/migration-chainguard-distroless");
    println!("  curl '{base}/v1/entries?start=0&limit=5'");
    println!(
        "  curl -H 'Authorization: Bearer {auditor_token}' '{base}/v1/entries?start=3&limit=1'   (as an auditor: with the disclosures of sensitive values)"
    );
    println!("  open {base}/explorer/");
    println!("  curl '{base}/v1/proofs/inclusion?index=10'");
    println!("  curl {base}/openapi.json");
    println!("  ledger verify --server {base} --key '{vkey}'");
    println!("  ledger proof --server {base} --key '{vkey}' --index 10");
    println!(
        "  ledger verify --data-dir {}   (after stopping the server)",
        dir.display()
    );
    if exit {
        let _ = stop_tx.send(());
        rt.block_on(server)??;
        return Ok(());
    }
    println!("\nserving until Ctrl-C");
    rt.block_on(async {
        shutdown_signal().await;
        let _ = stop_tx.send(());
        server.await
    })??;
    Ok(())
}
