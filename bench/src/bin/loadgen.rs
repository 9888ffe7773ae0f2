//! `loadgen`: drive a ledger server with signed events and report
//! throughput, latency percentiles and errors by code. Every receipt's proof
//! and checkpoint is verified.
//!
//!   loadgen --clients 64 --seconds 10                 # against a fresh in-process server
//!   loadgen --clients 16 --rate 2000 --seconds 30     # open loop at 2,000 events/s
//!   loadgen --server http://127.0.0.1:7878 --operator-key ledger-data/operator.key

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bench::load::{prepare, run, LoadConfig};
use clap::Parser;

/// The ledger server's allocator (api/src/main.rs), here too: for the
/// in-process server, and so that the client's share of the two cores is
/// not spent in glibc's malloc.
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "loadgen",
    about = "Load generator for the Evidence Ledger HTTP API"
)]
struct Args {
    /// Concurrent clients.
    #[arg(long, default_value_t = 64)]
    clients: usize,
    /// How long to run.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Total events per second (open loop); 0 for closed loop.
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// An existing server (default: start one in-process on a fresh directory).
    #[arg(long)]
    server: Option<String>,
    /// The operator key of --server (to enrol the load's harness key).
    #[arg(long)]
    operator_key: Option<PathBuf>,
    /// One event in this many adds a case co-signed by two curators; the
    /// rest are scores with breakdowns. 0 for scores only.
    #[arg(long, default_value_t = 10)]
    case_every: u64,
    /// Envelopes to sign before the clock starts, over all clients, in
    /// closed loop (default: 30,000 per second of the run; open loop signs
    /// rate × seconds). Clients that run out sign inline, and the report
    /// counts them.
    #[arg(long)]
    presign: Option<usize>,
    /// Envelopes per request: 1 posts each to POST /v1/events; more posts
    /// them together to POST /v1/events/batch (at most 1,000). Latency is
    /// then each envelope's request's latency.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    batch: u64,
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let cfg = LoadConfig {
        clients: a.clients,
        duration: Duration::from_secs(a.seconds),
        rate: a.rate,
        case_every: a.case_every,
        presign: a.presign.unwrap_or(30_000 * a.seconds as usize),
        batch: a.batch as usize,
    };
    let (_keep, rt, base, vkey, operator) = match &a.server {
        Some(s) => {
            let key = a
                .operator_key
                .as_ref()
                .ok_or_else(|| anyhow::anyhow!("--operator-key is required with --server"))?;
            let op = verifier::keys::read_signing_key(key)?;
            let vkey = verifier::client::Client::new(s, None)
                .get("/v1/log/key")?
                .text()
                .trim()
                .to_owned();
            (None, None, s.clone(), vkey, op)
        }
        None => {
            let dir = tempfile::tempdir()?;
            let init = api::init::init(dir.path(), "loadgen.local/log", "operator", None, None)?;
            let vkey = init.log_key.verifier_key().to_owned();
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
            let addr = listener.local_addr()?;
            let config = api::config::ServeConfig {
                data_dir: dir.path().to_path_buf(),
                listen: addr,
                ..Default::default()
            };
            let state = Arc::new(api::server::AppState::open(
                config,
                init.log_key,
                Arc::new(events::SystemClock),
            )?);
            rt.spawn(api::server::run(state, listener, std::future::pending()));
            let operator = init.operator.clone();
            (
                Some(dir),
                Some(rt),
                format!("http://{addr}"),
                vkey,
                operator,
            )
        }
    };
    let client = verifier::client::Client::new(&base, None);
    for _ in 0..500 {
        if client.get("/readyz").map(|r| r.status).unwrap_or(0) == 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let prepared = prepare(&client, &vkey, &operator, cfg.clients)?;
    let report = run(&base, &vkey, &prepared, &cfg);
    println!("{}", report.summary());
    if rt.is_some() {
        println!("(the server ran in this process: its CPU is in the figure per event)");
    }
    drop(rt);
    if !report.errors_by_code.is_empty() {
        anyhow::bail!("errors: {:?}", report.errors_by_code);
    }
    Ok(())
}
