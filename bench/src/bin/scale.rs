//! `scale`: grow one data directory to each size in turn and measure
//! proofs, startup, RSS, full verify, disk and projections there (targets
//! 3–7). See bench/README.md for the figures and what they mean.
//!
//!   cargo build --release -p api --bin ledger -p bench --bin scale
//!   target/release/scale --dir /var/tmp/scale --sizes 100000,1000000,10000000

use std::path::PathBuf;

use clap::Parser;

/// The ledger server's allocator (api/src/main.rs), here too: for the
/// in-process server, and so that the client's share of the two cores is
/// not spent in glibc's malloc.
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "scale",
    about = "Scale runs: grow a log to each size and measure proofs, startup, RSS, verify, disk and projections"
)]
struct Args {
    /// The data directory to grow (created if missing; reused to grow further).
    #[arg(long, default_value = "scale-data")]
    dir: PathBuf,
    /// Sizes to grow to and measure at, in order.
    #[arg(long, value_delimiter = ',', default_value = "100000,1000000,10000000")]
    sizes: Vec<u64>,
    /// Concurrent HTTP clients for the proof load.
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// Proofs per size (half inclusion, half consistency), each verified.
    #[arg(long, default_value_t = 20_000)]
    proofs: usize,
    /// Server starts per size; startup is reported as median, min and max.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Projection requests per size, each after one new score.
    #[arg(long, default_value_t = 200)]
    projection_requests: usize,
    /// Held-out cases the scores spread over.
    #[arg(long, default_value_t = 1000)]
    cases: usize,
    /// The `ledger` binary (default: beside this one).
    #[arg(long)]
    ledger_bin: Option<PathBuf>,
    /// Instead of the scale run: recovery after a crash. For each tail, a
    /// fresh directory under --dir is grown to --recovery-base entries with
    /// its derived state saved, then by the tail without saving; the server
    /// is started --repeats times, each stopped with SIGKILL, and the times
    /// to /healthz, to the event state caught up and to /readyz reported.
    #[arg(long, value_delimiter = ',')]
    recovery_tails: Vec<u64>,
    /// Wait until the server's background checks are done (its CPU idle)
    /// before the timed loads.
    #[arg(long)]
    quiet_server: bool,
    /// The entries before the snapshot in a recovery run.
    #[arg(long, default_value_t = 100_000)]
    recovery_base: u64,
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let ledger_bin = match a.ledger_bin {
        Some(p) => p,
        None => std::env::current_exe()?
            .parent()
            .map(|d| d.join("ledger"))
            .unwrap_or_else(|| PathBuf::from("ledger")),
    };
    if !a.recovery_tails.is_empty() {
        let mut reports = Vec::new();
        for &tail in &a.recovery_tails {
            let cfg = bench::scale::ScaleConfig {
                dir: a.dir.join(format!("recovery-{tail}")),
                sizes: Vec::new(),
                clients: a.clients,
                proofs: a.proofs,
                repeats: a.repeats,
                projection_requests: a.projection_requests,
                cases: a.cases,
                ledger_bin: ledger_bin.clone(),
                quiet: a.quiet_server,
            };
            let rep = bench::scale::recovery(&cfg, a.recovery_base, tail)?;
            println!("{}", rep.summary());
            reports.push(rep);
        }
        eprintln!("{}", serde_json::to_string_pretty(&reports)?);
        return Ok(());
    }
    let cfg = bench::scale::ScaleConfig {
        dir: a.dir,
        sizes: a.sizes,
        clients: a.clients,
        proofs: a.proofs,
        repeats: a.repeats,
        projection_requests: a.projection_requests,
        cases: a.cases,
        ledger_bin,
        quiet: a.quiet_server,
    };
    let reports = bench::scale::run(&cfg, &mut std::io::stdout())?;
    eprintln!("{}", serde_json::to_string_pretty(&reports)?);
    Ok(())
}
