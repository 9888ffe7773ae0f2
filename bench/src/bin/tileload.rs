//! `tileload`: read random full C2SP tiles from a ledger (or any static copy
//! of its tiles) with concurrent clients and report tile reads per second,
//! latency percentiles and bytes. Each answer is checked for its shape (a
//! hash tile is 256 hashes; an entry bundle splits into 256 leaves), not
//! authenticated: this measures the server, and `ledger watch` is the
//! reader that authenticates every tile.
//!
//!   tileload --server http://127.0.0.1:7878 --kind hashes --clients 8 --seconds 10
//!   tileload --server http://127.0.0.1:7878 --kind entries --clients 8 --seconds 10

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use ledger::tiles::{decode_bundle, TilePath, WIDTH};
use verifier::Client;

#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TileKind {
    /// Hash tiles of the levels `--levels` names, each drawn as often as
    /// the others (a proof reader fetches one tile per level).
    Hashes,
    /// Entry bundles (what a replaying reader fetches).
    Entries,
}

#[derive(Parser)]
#[command(
    name = "tileload",
    about = "Reads random full tiles from a ledger and reports tile reads per second"
)]
struct Args {
    /// The log's tiles prefix (the ledger's base URL).
    #[arg(long)]
    server: String,
    /// Which tiles to read.
    #[arg(long, value_enum, default_value_t = TileKind::Hashes)]
    kind: TileKind,
    /// The levels of hash tiles to read (those whose full tiles exist).
    #[arg(long, value_delimiter = ',', default_value = "0,1,2")]
    levels: Vec<u8>,
    /// Concurrent clients, each on a connection of its own.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// How long to read.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// A read token, if the server requires one.
    #[arg(long, env = "LEDGER_READ_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The server's process id: its CPU time over the run is reported per
    /// tile (from /proc).
    #[arg(long)]
    server_pid: Option<u32>,
}

#[derive(Default)]
struct Tally {
    reads: u64,
    bytes: u64,
    errors: u64,
    latencies_us: Vec<u64>,
}

/// splitmix64: a small, seeded generator, so that two runs read the same
/// tiles in the same order.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The tree size the server's checkpoint states.
fn tree_size(client: &Client) -> anyhow::Result<u64> {
    let note = client.get_text("/checkpoint")?;
    let size = note
        .lines()
        .nth(1)
        .and_then(|l| l.parse::<u64>().ok())
        .ok_or_else(|| anyhow::anyhow!("not a checkpoint: {note}"))?;
    Ok(size)
}

/// A random full tile of `kind` in a tree of `size`.
fn pick(kind: TileKind, levels: &[u8], size: u64, rng: &mut u64) -> anyhow::Result<TilePath> {
    let w = u64::from(WIDTH);
    match kind {
        TileKind::Entries => TilePath::entries(next(rng) % (size / w), WIDTH)
            .ok_or_else(|| anyhow::anyhow!("no such entry bundle")),
        TileKind::Hashes => {
            // Levels whose full tiles exist: level L has size / 256^(L+1).
            let levels: Vec<(u8, u64)> = levels
                .iter()
                .map(|&l| (l, size >> (8 * (u32::from(l) + 1)).min(63)))
                .filter(|&(_, n)| n > 0)
                .collect();
            anyhow::ensure!(!levels.is_empty(), "no full tile at those levels");
            let (level, n) = levels[(next(rng) % levels.len() as u64) as usize];
            TilePath::hashes(level, next(rng) % n, WIDTH)
                .ok_or_else(|| anyhow::anyhow!("no such tile"))
        }
    }
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let probe = Client::new(&a.server, a.token.clone());
    let size = tree_size(&probe)?;
    anyhow::ensure!(
        size >= u64::from(WIDTH),
        "the log holds {size} entries: no full tile yet"
    );
    let deadline = Instant::now() + Duration::from_secs(a.seconds);
    let tally = Arc::new(Mutex::new(Tally::default()));
    let server_cpu = a.server_pid.map(bench::cpu_seconds);
    let own_cpu = bench::cpu_seconds(std::process::id());
    let started = Instant::now();
    let threads: Vec<_> = (0..a.clients)
        .map(|c| {
            let (server, token, tally, kind, levels) = (
                a.server.clone(),
                a.token.clone(),
                Arc::clone(&tally),
                a.kind,
                a.levels.clone(),
            );
            std::thread::spawn(move || {
                let client = Client::new(&server, token);
                let mut rng = 0x7469_6c65_u64 ^ (c as u64).wrapping_mul(0x1234_5678_9abc);
                let mut local = Tally::default();
                while Instant::now() < deadline {
                    let Ok(t) = pick(kind, &levels, size, &mut rng) else {
                        local.errors += 1;
                        continue;
                    };
                    let at = Instant::now();
                    let ok = match client.get(&format!("/{t}")) {
                        Ok(r) if r.status == 200 => {
                            local.bytes += r.body.len() as u64;
                            match kind {
                                TileKind::Hashes => r.body.len() == 32 * WIDTH as usize,
                                TileKind::Entries => decode_bundle(&r.body)
                                    .is_some_and(|l| l.len() == WIDTH as usize),
                            }
                        }
                        _ => false,
                    };
                    if ok {
                        local.reads += 1;
                        local.latencies_us.push(at.elapsed().as_micros() as u64);
                    } else {
                        local.errors += 1;
                    }
                }
                let mut all = tally.lock().unwrap_or_else(|p| p.into_inner());
                all.reads += local.reads;
                all.bytes += local.bytes;
                all.errors += local.errors;
                all.latencies_us.extend(local.latencies_us);
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let mut t = std::mem::take(&mut *tally.lock().unwrap_or_else(|p| p.into_inner()));
    t.latencies_us.sort_unstable();
    let pct = |q: f64| {
        t.latencies_us
            .get(((t.latencies_us.len().saturating_sub(1)) as f64 * q).round() as usize)
            .copied()
            .unwrap_or(0)
    };
    let per_tile = |cpu: f64| cpu * 1e6 / t.reads.max(1) as f64;
    let server = match (a.server_pid, server_cpu) {
        (Some(pid), Some(before)) => format!(
            "; server CPU {:.1} µs per tile",
            per_tile(bench::cpu_seconds(pid) - before)
        ),
        _ => String::new(),
    };
    println!(
        "{} tiles in {:.2} s = {:.0} tiles/s ({:.1} MB/s) at size {size}; latency p50 {} µs, p99 {} µs; errors {}; this process's CPU {:.1} µs per tile{server}",
        t.reads,
        elapsed,
        t.reads as f64 / elapsed,
        t.bytes as f64 / elapsed / 1e6,
        pct(0.5),
        pct(0.99),
        t.errors,
        per_tile(bench::cpu_seconds(std::process::id()) - own_cpu),
    );
    Ok(())
}
