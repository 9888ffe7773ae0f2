//! `ledger`: the Evidence Ledger command-line program.
//!
//! Exit status: 0 success; 1 the log failed verification (the first bad index
//! is printed); 2 any other error (bad arguments, unreadable directory).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use ledger::merkle::{verify_consistency, verify_inclusion};
use ledger::{Config, Error, Hash, Ledger};

#[derive(Parser)]
#[command(
    name = "ledger",
    version,
    about = "Evidence Ledger: a tamper-evident, RFC 6962 Merkle log of an evaluation harness's trust decisions",
    long_about = None
)]
struct Cli {
    /// Log output format.
    #[arg(long, global = true, env = "LEDGER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Verify a local data directory: re-hash every entry, chain link and
    /// stored tree hash. Exits 1 and names the first bad index on failure.
    Verify {
        /// The data directory holding ledger.redb.
        #[arg(long, env = "LEDGER_DATA_DIR", default_value = "./ledger-data")]
        data_dir: PathBuf,
        /// Verify incrementally from a trusted tree size (requires --trusted-root).
        #[arg(long, requires = "trusted_root")]
        trusted_size: Option<u64>,
        /// The trusted RFC 6962 root at --trusted-size, as 64 hex digits.
        #[arg(long, requires = "trusted_size")]
        trusted_root: Option<String>,
        /// Do not draw a progress bar.
        #[arg(long)]
        quiet: bool,
    },
    /// Build a demo log of sample entries in a fresh directory, then verify it
    /// and check an inclusion and a consistency proof.
    Demo {
        /// Where to create the demo log (must not hold a log already). By
        /// default a fresh directory under the system's temporary directory.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// How many entries to append.
        #[arg(long, default_value_t = 10_000)]
        entries: u64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    let result = match cli.command {
        Command::Verify {
            data_dir,
            trusted_size,
            trusted_root,
            quiet,
        } => verify(&data_dir, trusted_size.zip(trusted_root), quiet),
        Command::Demo { data_dir, entries } => demo_dir(data_dir)
            .and_then(|dir| demo(&dir, entries))
            .map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("LEDGER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn parse_hash(s: &str) -> anyhow::Result<Hash> {
    let bytes = hex::decode(s).context("--trusted-root must be hex")?;
    let arr: [u8; 32] = bytes
        .try_into()
        .map_err(|_| anyhow::anyhow!("--trusted-root must be 32 bytes (64 hex digits)"))?;
    Ok(Hash(arr))
}

fn progress_bar(quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(0);
    pb.set_style(
        ProgressStyle::with_template(
            "{spinner} verifying [{bar:40}] {pos}/{len} entries ({per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    pb
}

fn verify(dir: &Path, trusted: Option<(u64, String)>, quiet: bool) -> anyhow::Result<ExitCode> {
    let pb = progress_bar(quiet);
    let mut progress = |done: u64, total: u64| {
        pb.set_length(total);
        pb.set_position(done);
    };
    let started = Instant::now();
    let result = match &trusted {
        None => ledger::verify_dir(dir, &mut progress),
        Some((size, root)) => {
            ledger::verify_dir_from(dir, *size, &parse_hash(root)?, &mut progress)
        }
    };
    pb.finish_and_clear();
    match result {
        Ok(v) => {
            println!(
                "OK: {} entries verified ({} re-hashed) in {:.2?}\nsize  {}\nroot  {}\nchain {}",
                v.size,
                v.checked,
                started.elapsed(),
                v.size,
                hex::encode(v.root.0),
                hex::encode(v.chain.0)
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(Error::Corrupt(c)) => {
            println!("FAILED: first bad index {}: {}", c.index, c.kind);
            if !c.detail.is_empty() {
                println!("detail: {}", c.detail);
            }
            Ok(ExitCode::from(1))
        }
        Err(e) => Err(e).with_context(|| format!("verifying {}", dir.display())),
    }
}

fn demo_dir(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match given {
        Some(dir) => Ok(dir),
        None => Ok(tempfile::Builder::new()
            .prefix("ledger-demo-")
            .tempdir()
            .context("creating a demo directory")?
            .keep()),
    }
}

fn demo(dir: &Path, entries: u64) -> anyhow::Result<()> {
    println!("demo log: {}", dir.display());
    if dir.join(ledger::store::DB_FILE).exists() {
        bail!(
            "{} already holds a log; pick a fresh --data-dir or remove it",
            dir.display()
        );
    }
    let log = Ledger::open(dir, Config::default())?;
    let started = Instant::now();
    // Submit in windows so group commit batches them, as concurrent clients would.
    let mut i = 0;
    while i < entries {
        let window: Vec<_> = (i..entries.min(i + 1000))
            .map(|k| log.submit(sample_entry(k)))
            .collect::<Result<_, _>>()?;
        for p in window {
            p.wait()?;
        }
        i = entries.min(i + 1000);
    }
    let head = log.head();
    println!(
        "appended {entries} entries durably in {:.2?} ({} commits)",
        started.elapsed(),
        log.stats()
            .batches
            .load(std::sync::atomic::Ordering::Relaxed)
    );
    println!("head: size {} root {}", head.size, hex::encode(head.root.0));

    if head.size > 0 {
        let index = head.size / 2;
        let e = log.entry(index)?;
        let proof = log.inclusion_proof(index, head.size)?;
        verify_inclusion(&e.leaf_hash, index, head.size, &proof, &head.root)?;
        println!(
            "inclusion proof for entry {index} ({} hashes) verifies: {}",
            proof.len(),
            String::from_utf8_lossy(&e.leaf)
        );
        let old = head.size.div_ceil(3);
        let old_root = log.root_at(old)?;
        let cproof = log.consistency_proof(old, head.size)?;
        verify_consistency(old, &old_root, head.size, &head.root, &cproof)?;
        println!(
            "consistency proof {old} -> {} ({} hashes) verifies",
            head.size,
            cproof.len()
        );
    }
    drop(log);
    let v = ledger::verify_dir(dir, &mut |_, _| {})?;
    println!("full verify: OK ({} entries)", v.size);
    println!("\nexplore further:");
    println!("  ledger verify --data-dir {}", dir.display());
    println!(
        "  ledger verify --data-dir {} --trusted-size {} --trusted-root {}",
        dir.display(),
        v.size,
        hex::encode(v.root.0)
    );
    Ok(())
}

/// A sample entry shaped like a harness score record (raw bytes; the signed
/// event envelope arrives with the domain events).
fn sample_entry(k: u64) -> Vec<u8> {
    let classes = [
        "migration-chainguard-distroless",
        "dependency-bump",
        "flaky-test-quarantine",
    ];
    format!(
        "{{\"demo\":true,\"task_class\":\"{}\",\"case_id\":\"case-{:04}\",\"score\":{:.3}}}",
        classes[(k % 3) as usize],
        k % 150,
        ((k * 7919) % 1000) as f64 / 1000.0
    )
    .into_bytes()
}
