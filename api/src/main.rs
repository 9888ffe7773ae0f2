//! `ledger`: the Evidence Ledger command-line program.
//!
//! Exit status: 0 success; 1 a check failed (verification, a proof, a
//! signature: the output names what and where); 2 any other error (bad
//! arguments, unreadable files, unreachable server).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use api::client::Client;
use api::config::ServeConfig;
use api::server::{ConsistencyProof, EntryPage, InclusionProof};
use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use ledger::merkle::{verify_consistency, verify_inclusion, Frontier};
use ledger::{Error, Hash};

/// jemalloc, not glibc's malloc, for the server's many short-lived buffers
/// freed on other threads than the one that made them: 12% more events/s
/// on the benchmark (docs/DECISIONS.md, bench/README.md).
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "ledger",
    version,
    about = "Evidence Ledger: a tamper-evident, RFC 6962 Merkle log of an evaluation harness's trust decisions"
)]
struct Cli {
    /// Log output format (logs go to stderr; level from LEDGER_LOG, default info for serve, warn otherwise).
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
    /// Run the HTTP server on a data directory.
    Serve(ServeArgs),
    /// Create a data directory: the log key, an operator key, and the genesis entries.
    Init {
        #[arg(long, env = "LEDGER_DATA_DIR", default_value = "./ledger-data")]
        data_dir: PathBuf,
        /// Checkpoint origin and note key name (a schemaless URL).
        #[arg(long, default_value = api::init::DEFAULT_ORIGIN)]
        origin: String,
        /// The operator's identity, recorded in the genesis entry.
        #[arg(long, default_value = "operator")]
        operator_identity: String,
        /// Use this existing operator key file instead of creating <data-dir>/operator.key.
        #[arg(long)]
        operator_key: Option<PathBuf>,
    },
    /// Write a new Ed25519 key file (note signer key format, mode 0600) and print its public parts.
    Keygen {
        /// The key's name (a principal's name, or the log origin for a log key).
        #[arg(long)]
        name: String,
        /// Where to write the key.
        #[arg(long)]
        out: PathBuf,
    },
    /// Verify a local data directory, or a remote server against a trusted checkpoint.
    Verify(VerifyArgs),
    /// Fetch and check an inclusion or consistency proof from a server.
    Proof(ProofArgs),
    /// Print the latest signed checkpoint (local: signed with the log key; remote: verified with --key).
    Checkpoint {
        #[command(flatten)]
        source: Source,
        /// Verifier key to check a remote checkpoint with.
        #[arg(long)]
        key: Option<String>,
    },
    /// Write every entry as JSON lines with its raw leaf (base64) and hashes.
    Export {
        #[command(flatten)]
        source: Source,
        /// Output file (default: standard output).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Audit a server trusting only the log's verifier key and a checkpoint saved by an earlier
    /// audit. Exit 0: consistent and proven (the new checkpoint is saved); 1: the server's
    /// answers do not verify; 2: usage or network error; 3: the server's checkpoint is stale.
    Audit(AuditArgs),
    /// Save a task class's projection as an offline proof bundle (checkpoint, raw evidence
    /// leaves, inclusion proofs, the projection, a signed attestation).
    Bundle {
        #[arg(long, env = "LEDGER_SERVER")]
        server: String,
        #[arg(long)]
        task_class: String,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, env = "LEDGER_READ_TOKEN", hide_env_values = true)]
        token: Option<String>,
    },
    /// Check an offline proof bundle with no server: signatures, every evidence proof, and that
    /// the stated statistics follow from the evidence. Exit 1 if it does not verify.
    VerifyBundle {
        file: PathBuf,
        /// The log's note verifier key (repeatable, for keys from before a rotation).
        #[arg(long = "key", required = true)]
        keys: Vec<String>,
    },
    /// Take an online, consistent backup through the API while the server keeps writing.
    Backup {
        #[arg(long, env = "LEDGER_SERVER")]
        server: String,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, env = "LEDGER_READ_TOKEN", hide_env_values = true)]
        token: Option<String>,
    },
    /// Restore a backup into an empty data directory, proving it against its signed checkpoint
    /// and the anchors before anything serves it.
    Restore {
        #[arg(long)]
        backup: PathBuf,
        #[arg(long)]
        data_dir: PathBuf,
        /// The log key to install in the restored directory.
        #[arg(long)]
        key_file: PathBuf,
        /// Anchors directory to check the restored log against.
        #[arg(long)]
        anchors: Option<PathBuf>,
        /// An earlier log verifier key whose anchors stay trusted (repeatable).
        #[arg(long = "anchor-key")]
        anchor_keys: Vec<String>,
        /// Restore even if the backup is older than a published anchor (the gap is reported).
        #[arg(long)]
        allow_behind_anchor: bool,
    },
    /// Enrol a principal: post a principal.enrolled event signed with the operator's key.
    Enrol {
        #[arg(long, env = "LEDGER_SERVER")]
        server: String,
        /// The operator's key file.
        #[arg(long)]
        operator_key: PathBuf,
        /// The new principal's public key (base64), as `ledger keygen` prints it.
        #[arg(long)]
        public_key: String,
        #[arg(long)]
        identity: String,
        /// A role (repeatable): harness, curator, gate, rag-writer, reconciler, promotion-gate,
        /// maintainer, operator, ledger.
        #[arg(long = "role", required = true)]
        roles: Vec<String>,
    },
    /// Post signed envelopes from files through POST /v1/events/batch and check every receipt.
    ///
    /// A file holds a JSON array of DSSE envelopes, or one envelope per line
    /// (`-` reads standard input). Every receipt is checked: its signed
    /// checkpoint, its inclusion proof, and that the proven leaf is the
    /// envelope posted. Refused envelopes are listed with their code and
    /// field. Exit status: 0 all acknowledged; 1 an envelope was refused or
    /// a receipt does not verify; 2 usage, file or network error. Re-running
    /// is safe: envelopes already in the log are acknowledged, not appended
    /// again.
    Post {
        #[arg(long, env = "LEDGER_SERVER")]
        server: String,
        /// The log's note verifier key. Without it the key is fetched from the
        /// server, which then vouches for its own receipts.
        #[arg(long)]
        key: Option<String>,
        /// Envelopes per request (1 to 1,000; a request is also kept under 512 KiB).
        #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..=1000))]
        batch: u64,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
        /// Files of envelopes.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Revoke a principal's key: post a principal.revoked event signed with the operator's key.
    Revoke {
        #[arg(long, env = "LEDGER_SERVER")]
        server: String,
        #[arg(long)]
        operator_key: PathBuf,
        /// The key id to revoke (hex SHA-256 of its public key).
        #[arg(long)]
        key_id: String,
        #[arg(long)]
        reason: String,
    },
    /// Publish the current signed checkpoint as an anchor and record it in the log.
    Anchor {
        #[command(subcommand)]
        action: AnchorAction,
    },
    /// Start a server on a fresh data directory, load a realistic sample bench through the API,
    /// print scores and recommendations, check every proof, and keep serving.
    Demo {
        /// Where to create the demo (default: a fresh temporary directory).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Listen address (port 0 picks a free port).
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: std::net::SocketAddr,
        /// Exit after the demo instead of serving until Ctrl-C.
        #[arg(long)]
        exit: bool,
    },
}

#[derive(Args)]
struct AuditArgs {
    /// The server's base URL.
    #[arg(long, env = "LEDGER_SERVER")]
    server: String,
    /// File with the trusted signed checkpoint; replaced by the new one after a passing audit.
    #[arg(long)]
    trusted: PathBuf,
    /// The log's note verifier key (repeat for keys from before a rotation).
    #[arg(long = "key", required = true)]
    keys: Vec<String>,
    /// How many random entries to re-hash and prove.
    #[arg(long, default_value_t = 32)]
    samples: usize,
    /// Trust the server's current checkpoint when --trusted does not exist yet (first audit).
    #[arg(long)]
    init: bool,
    #[arg(long, env = "LEDGER_READ_TOKEN", hide_env_values = true)]
    token: Option<String>,
    #[arg(long)]
    quiet: bool,
}

#[derive(Subcommand)]
enum AnchorAction {
    /// Sign the head as a checkpoint, write it to the anchors directory (one file per anchor),
    /// and append an anchor.published event. Run it with the server stopped, or let
    /// `ledger serve` publish on its schedule.
    Publish {
        #[arg(long, env = "LEDGER_DATA_DIR", default_value = "./ledger-data")]
        data_dir: PathBuf,
        /// Anchors directory (default: <data-dir>/anchors). Commit it to git or copy it off the host.
        #[arg(long, env = "LEDGER_ANCHORS_DIR")]
        anchors: Option<PathBuf>,
    },
}

#[derive(Args)]
struct ServeArgs {
    /// TOML config file (docs/CONFIG.md). Env: LEDGER_CONFIG.
    #[arg(long, env = "LEDGER_CONFIG")]
    config: Option<PathBuf>,
    #[arg(long, env = "LEDGER_DATA_DIR")]
    data_dir: Option<PathBuf>,
    #[arg(long, env = "LEDGER_LISTEN")]
    listen: Option<std::net::SocketAddr>,
    #[arg(long, env = "LEDGER_KEY_FILE")]
    key_file: Option<PathBuf>,
    #[arg(long, env = "LEDGER_READ_TOKEN", hide_env_values = true)]
    read_token: Option<String>,
    #[arg(long, env = "LEDGER_MAX_BODY_BYTES")]
    max_body_bytes: Option<usize>,
    #[arg(long, env = "LEDGER_REQUEST_TIMEOUT_MS")]
    request_timeout_ms: Option<u64>,
    #[arg(long, env = "LEDGER_HEADER_READ_TIMEOUT_MS")]
    header_read_timeout_ms: Option<u64>,
    #[arg(long, env = "LEDGER_IDLE_TIMEOUT_SECS")]
    idle_timeout_secs: Option<u64>,
    #[arg(long, env = "LEDGER_MAX_CONCURRENT_REQUESTS")]
    max_concurrent_requests: Option<usize>,
    #[arg(long, env = "LEDGER_WINDOW_DAYS")]
    window_days: Option<u32>,
    #[arg(long, env = "LEDGER_PROJECTION_SAVE_SECS")]
    projection_save_secs: Option<u64>,
    #[arg(long, env = "LEDGER_ANCHORS_DIR")]
    anchors_dir: Option<PathBuf>,
    #[arg(long, env = "LEDGER_ANCHOR_INTERVAL_SECS")]
    anchor_interval_secs: Option<u64>,
    /// An earlier log verifier key whose anchors stay trusted (repeatable).
    #[arg(long = "anchor-key")]
    anchor_keys: Vec<String>,
}

#[derive(Args, Clone)]
struct Source {
    /// A local data directory (the server must not be running on it).
    #[arg(long, env = "LEDGER_DATA_DIR", conflicts_with = "server")]
    data_dir: Option<PathBuf>,
    /// A server's base URL, e.g. http://127.0.0.1:7878.
    #[arg(long, env = "LEDGER_SERVER")]
    server: Option<String>,
    /// Bearer token for servers that require one for reads.
    #[arg(long, env = "LEDGER_READ_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

#[derive(Args)]
struct VerifyArgs {
    #[command(flatten)]
    source: Source,
    /// Local: verify incrementally from this trusted tree size (requires --trusted-root).
    #[arg(long, requires = "trusted_root")]
    trusted_size: Option<u64>,
    /// Local: the trusted RFC 6962 root at --trusted-size (64 hex digits).
    #[arg(long, requires = "trusted_size")]
    trusted_root: Option<String>,
    /// Remote: a file holding a trusted signed checkpoint; the server must be consistent with it.
    #[arg(long)]
    trusted: Option<PathBuf>,
    /// Local: also check the log against every anchor in this directory.
    #[arg(long)]
    anchors: Option<PathBuf>,
    /// Local, with --anchors: an anchor verifier key to trust (repeatable; default: the data
    /// directory's log key).
    #[arg(long = "anchor-key")]
    anchor_keys: Vec<String>,
    /// Remote: the log's note verifier key.
    #[arg(long)]
    key: Option<String>,
    /// Do not draw a progress bar.
    #[arg(long)]
    quiet: bool,
}

#[derive(Args)]
struct ProofArgs {
    /// The server's base URL.
    #[arg(long, env = "LEDGER_SERVER")]
    server: String,
    /// The log's note verifier key (checks the proof's checkpoint).
    #[arg(long)]
    key: String,
    /// Prove inclusion of this index.
    #[arg(long, conflicts_with_all = ["leaf_hash", "first"])]
    index: Option<u64>,
    /// Prove inclusion of the entry with this leaf hash.
    #[arg(long, conflicts_with = "first")]
    leaf_hash: Option<String>,
    /// Prove consistency from this tree size to the current one.
    #[arg(long)]
    first: Option<u64>,
    #[arg(long, env = "LEDGER_READ_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

/// A check that failed, with the exit status and label it is reported with:
/// 1 `FAILED` (verification, a proof, a signature), 3 `STALE` (a server's
/// checkpoint older than the trusted one).
#[derive(Debug)]
struct Failure {
    status: u8,
    label: &'static str,
    message: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}
impl std::error::Error for Failure {}

fn fail(msg: impl Into<String>) -> anyhow::Error {
    Failure {
        status: 1,
        label: "FAILED",
        message: msg.into(),
    }
    .into()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let default_level = if matches!(cli.command, Command::Serve(_)) {
        "info"
    } else {
        "warn"
    };
    init_logging(cli.log_format, default_level);
    let result = match cli.command {
        Command::Serve(a) => serve(a),
        Command::Init {
            data_dir,
            origin,
            operator_identity,
            operator_key,
        } => init(
            &data_dir,
            &origin,
            &operator_identity,
            operator_key.as_deref(),
        ),
        Command::Keygen { name, out } => keygen(&name, &out),
        Command::Verify(a) => verify(a),
        Command::Proof(a) => proof(a),
        Command::Checkpoint { source, key } => checkpoint(&source, key.as_deref()),
        Command::Export { source, out } => export(&source, out.as_deref()),
        Command::Demo {
            data_dir,
            listen,
            exit,
        } => demo(data_dir, listen, exit),
        Command::Anchor {
            action: AnchorAction::Publish { data_dir, anchors },
        } => anchor_publish(&data_dir, anchors),
        Command::Audit(a) => audit(a),
        Command::Backup { server, out, token } => backup_cmd(&server, &out, token),
        Command::Restore {
            backup,
            data_dir,
            key_file,
            anchors,
            anchor_keys,
            allow_behind_anchor,
        } => restore_cmd(
            &backup,
            &data_dir,
            &key_file,
            anchors.as_deref(),
            &anchor_keys,
            allow_behind_anchor,
        ),
        Command::Enrol {
            server,
            operator_key,
            public_key,
            identity,
            roles,
        } => enrol(&server, &operator_key, &public_key, &identity, &roles),
        Command::Post {
            server,
            key,
            batch,
            quiet,
            files,
        } => post_files(&server, key, batch as usize, quiet, &files),
        Command::Revoke {
            server,
            operator_key,
            key_id,
            reason,
        } => revoke(&server, &operator_key, &key_id, &reason),
        Command::Bundle {
            server,
            task_class,
            out,
            token,
        } => bundle(&server, &task_class, &out, token),
        Command::VerifyBundle { file, keys } => verify_bundle(&file, &keys),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.downcast_ref::<Failure>().is_some() => {
            let f = e
                .downcast_ref::<Failure>()
                .map(|f| (f.status, f.label))
                .unwrap_or((1, "FAILED"));
            println!("{}: {e}", f.1);
            ExitCode::from(f.0)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn init_logging(format: LogFormat, default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("LEDGER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down");
}

fn serve_config(a: ServeArgs) -> anyhow::Result<ServeConfig> {
    let file = match &a.config {
        Some(p) => ServeConfig::from_file(p)?,
        None => ServeConfig::default(),
    };
    Ok(ServeConfig {
        data_dir: a.data_dir.unwrap_or(file.data_dir),
        listen: a.listen.unwrap_or(file.listen),
        key_file: a.key_file.or(file.key_file),
        read_token: a.read_token.or(file.read_token),
        max_body_bytes: a.max_body_bytes.unwrap_or(file.max_body_bytes),
        request_timeout_ms: a.request_timeout_ms.unwrap_or(file.request_timeout_ms),
        header_read_timeout_ms: a
            .header_read_timeout_ms
            .unwrap_or(file.header_read_timeout_ms),
        idle_timeout_secs: a.idle_timeout_secs.unwrap_or(file.idle_timeout_secs),
        max_concurrent_requests: a
            .max_concurrent_requests
            .unwrap_or(file.max_concurrent_requests),
        window_days: a.window_days.unwrap_or(file.window_days),
        projection_save_secs: a.projection_save_secs.unwrap_or(file.projection_save_secs),
        anchors_dir: a.anchors_dir.or(file.anchors_dir),
        anchor_interval_secs: a.anchor_interval_secs.unwrap_or(file.anchor_interval_secs),
        anchor_keys: if a.anchor_keys.is_empty() {
            file.anchor_keys
        } else {
            a.anchor_keys
        },
    })
}

fn serve(a: ServeArgs) -> anyhow::Result<()> {
    let config = serve_config(a)?;
    runtime()?.block_on(api::server::serve(config, shutdown_signal()))
}

fn init(
    dir: &Path,
    origin: &str,
    identity: &str,
    operator_key: Option<&Path>,
) -> anyhow::Result<()> {
    let i = api::init::init(dir, origin, identity, operator_key)?;
    println!("initialised {}", dir.display());
    println!("log key (secret):      {}", i.log_key_path.display());
    println!(
        "operator key (secret): {}  <- move it off this machine after enrolling principals",
        i.operator_key_path.display()
    );
    println!("verifier key:          {}", i.log_key.verifier_key());
    println!(
        "operator key id:       {}",
        events::key_id(&i.operator.verifying_key())
    );
    println!("\nnext: ledger serve --data-dir {}", dir.display());
    Ok(())
}

fn keygen(name: &str, out: &Path) -> anyhow::Result<()> {
    let k = api::init::new_principal_key(name)?;
    api::init::write_secret(out, &k.private_key())?;
    let vk = k.signing_key().verifying_key();
    println!("wrote {} (mode 0600)", out.display());
    println!("key id:       {}", events::key_id(&vk));
    println!("public key:   {}", events::envelope::public_key_b64(&vk));
    println!("verifier key: {}", k.verifier_key());
    let ek = k.event_signing_key().verifying_key();
    println!(
        "used as a log key, its ledger event key is {} (public key {}): enrol it with role ledger",
        events::key_id(&ek),
        events::envelope::public_key_b64(&ek)
    );
    Ok(())
}

fn progress_bar(quiet: bool, what: &str) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(0);
    let tpl = format!(
        "{{spinner}} {what} [{{bar:40}}] {{pos}}/{{len}} entries ({{per_sec}}, eta {{eta}})"
    );
    pb.set_style(
        ProgressStyle::with_template(&tpl)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb
}

fn parse_hash(what: &str, s: &str) -> anyhow::Result<Hash> {
    ledger::hash::parse_hex32(s.trim())
        .map(Hash)
        .ok_or_else(|| anyhow::anyhow!("{what} must be hex: 32 bytes, 64 hex digits"))
}

fn verify(a: VerifyArgs) -> anyhow::Result<()> {
    if let Some(server) = &a.source.server {
        let key = a
            .key
            .as_deref()
            .context("--key (the log's verifier key) is required with --server")?;
        return verify_remote(
            server,
            a.source.token.clone(),
            key,
            a.trusted.as_deref(),
            a.quiet,
        );
    }
    let dir = a
        .source
        .data_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("./ledger-data"));
    let pb = progress_bar(a.quiet, "verifying");
    let mut progress = |done: u64, total: u64| {
        pb.set_length(total);
        pb.set_position(done);
    };
    let started = Instant::now();
    let result = match (a.trusted_size, &a.trusted_root) {
        (Some(size), Some(root)) => ledger::verify_dir_from(
            &dir,
            size,
            &parse_hash("--trusted-root", root)?,
            &mut progress,
        ),
        _ => ledger::verify_dir(&dir, &mut progress).and_then(|v| {
            ledger::verify_dir_indexes::<events::EventSequencer>(&dir, &mut progress).map(|_| v)
        }),
    };
    pb.finish_and_clear();
    if let (Ok(_), Some(anchor_dir)) = (&result, &a.anchors) {
        let key = local_key(&dir)?;
        let mut keys = a.anchor_keys.clone();
        if keys.is_empty() {
            keys.push(key.verifier_key().to_owned());
        }
        let list = anchors::anchor::read_dir(anchor_dir)?;
        let log = ledger::Ledger::open(&dir, ledger::Config::default())?;
        let checked = anchors::check_anchors(&log, &list, &keys, key.origin())
            .map_err(|e| fail(e.to_string()))?;
        println!(
            "consistent with {} anchors in {}",
            checked.len(),
            anchor_dir.display()
        );
    }
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
            Ok(())
        }
        Err(Error::Corrupt(c)) => {
            let detail = if c.detail.is_empty() {
                String::new()
            } else {
                format!("\ndetail: {}", c.detail)
            };
            Err(fail(format!(
                "first bad index {}: {}{detail}",
                c.index, c.kind
            )))
        }
        Err(e) => Err(e).with_context(|| format!("verifying {}", dir.display())),
    }
}

/// Remote verify: the latest checkpoint is signed by the key; it is
/// consistent with the trusted checkpoint (if given); and every entry the
/// server returns re-hashes into exactly the checkpoint's root.
fn verify_remote(
    server: &str,
    token: Option<String>,
    key: &str,
    trusted: Option<&Path>,
    quiet: bool,
) -> anyhow::Result<()> {
    let client = Client::new(server, token);
    let note = client.get("/checkpoint")?;
    if note.status != 200 {
        bail!("GET /checkpoint: status {}", note.status);
    }
    let cp = anchors::open_checkpoint(note.text().as_bytes(), key)
        .map_err(|e| fail(format!("latest checkpoint: {e}")))?;
    if let Some(path) = trusted {
        let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let old = anchors::open_checkpoint(&text, key)
            .map_err(|e| fail(format!("trusted checkpoint: {e}")))?;
        if old.size > cp.size {
            return Err(fail(format!(
                "the server's checkpoint (size {}) is older than the trusted one (size {})",
                cp.size, old.size
            )));
        }
        let p: ConsistencyProof = client.get_json(&format!(
            "/v1/proofs/consistency?first={}&second={}",
            old.size, cp.size
        ))?;
        let proof: Vec<Hash> = p
            .proof
            .iter()
            .map(|h| parse_hash("proof", h))
            .collect::<Result<_, _>>()?;
        verify_consistency(old.size, &old.root, cp.size, &cp.root, &proof).map_err(|e| {
            fail(format!(
                "the server's log is not consistent with the trusted checkpoint (size {}): {e}",
                old.size
            ))
        })?;
        println!(
            "consistent with the trusted checkpoint at size {}",
            old.size
        );
    }
    let pb = progress_bar(quiet, "downloading and re-hashing");
    pb.set_length(cp.size);
    let mut frontier = Frontier::new();
    let mut next = 0;
    while next < cp.size {
        let page: EntryPage = client.get_json(&format!("/v1/entries?start={next}&limit=1000"))?;
        if page.entries.is_empty() {
            return Err(fail(format!(
                "the server returned no entries at {next} below its checkpoint size {}",
                cp.size
            )));
        }
        for e in page.entries {
            if e.index != next {
                return Err(fail(format!("expected entry {next}, got {}", e.index)));
            }
            if next >= cp.size {
                break;
            }
            let leaf = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, &e.leaf)
                .context("leaf is not base64")?;
            let lh = ledger::leaf_hash(&leaf);
            if hex::encode(lh.0) != e.leaf_hash {
                return Err(fail(format!(
                    "first bad index {next}: the leaf does not hash to the leaf hash served"
                )));
            }
            frontier.push(lh);
            next += 1;
        }
        pb.set_position(next);
    }
    pb.finish_and_clear();
    if frontier.root() != cp.root {
        return Err(fail(format!(
            "the {} entries served do not hash to the signed root",
            cp.size
        )));
    }
    println!(
        "OK: {} entries re-hashed into the signed root {}",
        cp.size,
        hex::encode(cp.root.0)
    );
    Ok(())
}

fn proof(a: ProofArgs) -> anyhow::Result<()> {
    let client = Client::new(&a.server, a.token.clone());
    if let Some(first) = a.first {
        let p: ConsistencyProof =
            client.get_json(&format!("/v1/proofs/consistency?first={first}"))?;
        let cp = anchors::open_checkpoint(p.checkpoint.as_bytes(), &a.key)
            .map_err(|e| fail(format!("checkpoint: {e}")))?;
        let proof: Vec<Hash> = p
            .proof
            .iter()
            .map(|h| parse_hash("proof", h))
            .collect::<Result<_, _>>()?;
        verify_consistency(
            p.first,
            &parse_hash("first_root", &p.first_root)?,
            cp.size,
            &cp.root,
            &proof,
        )
        .map_err(|e| fail(format!("consistency proof: {e}")))?;
        println!("{}", serde_json::to_string_pretty(&p)?);
        println!(
            "OK: consistency {} -> {} verifies against the signed checkpoint",
            p.first, p.second
        );
        return Ok(());
    }
    let q = match (a.index, &a.leaf_hash) {
        (Some(i), None) => format!("index={i}"),
        (None, Some(h)) => format!("leaf_hash={h}"),
        _ => bail!("give one of --index, --leaf-hash or --first"),
    };
    let p: InclusionProof = client.get_json(&format!("/v1/proofs/inclusion?{q}"))?;
    let cp = anchors::open_checkpoint(p.checkpoint.as_bytes(), &a.key)
        .map_err(|e| fail(format!("checkpoint: {e}")))?;
    let proof: Vec<Hash> = p
        .proof
        .iter()
        .map(|h| parse_hash("proof", h))
        .collect::<Result<_, _>>()?;
    verify_inclusion(
        &parse_hash("leaf_hash", &p.leaf_hash)?,
        p.index,
        cp.size,
        &proof,
        &cp.root,
    )
    .map_err(|e| fail(format!("inclusion proof: {e}")))?;
    println!("{}", serde_json::to_string_pretty(&p)?);
    println!(
        "OK: entry {} is included in the signed tree of size {}",
        p.index, cp.size
    );
    Ok(())
}

fn local_key(dir: &Path) -> anyhow::Result<anchors::LogKey> {
    let text = std::fs::read_to_string(dir.join("log.key"))
        .with_context(|| format!("reading {}/log.key", dir.display()))?;
    Ok(anchors::LogKey::from_private(&text)?)
}

fn checkpoint(source: &Source, key: Option<&str>) -> anyhow::Result<()> {
    if let Some(server) = &source.server {
        let client = Client::new(server, source.token.clone());
        let note = client.get("/checkpoint")?.text();
        if let Some(k) = key {
            let cp = anchors::open_checkpoint(note.as_bytes(), k)
                .map_err(|e| fail(format!("checkpoint: {e}")))?;
            eprintln!(
                "signature OK; size {} root {}",
                cp.size,
                hex::encode(cp.root.0)
            );
        }
        print!("{note}");
        return Ok(());
    }
    let dir = source
        .data_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("./ledger-data"));
    let key = local_key(&dir)?;
    let log = ledger::Ledger::open(&dir, ledger::Config::default())?;
    let head = log.head();
    print!("{}", key.sign_checkpoint(head.size, &head.root)?);
    Ok(())
}

fn export(source: &Source, out: Option<&Path>) -> anyhow::Result<()> {
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
        let mut next = Some(0);
        while let Some(start) = next {
            let page: EntryPage =
                client.get_json(&format!("/v1/entries?start={start}&limit=1000"))?;
            for e in &page.entries {
                line(&mut w, e.index, &e.leaf, &e.leaf_hash, &e.chain_hash)?;
            }
            next = page.next;
        }
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
                    &hex::encode(e.leaf_hash.0),
                    &hex::encode(e.chain_hash.0),
                )?;
            }
            start += 4096;
        }
    }
    w.flush()?;
    Ok(())
}

fn audit(a: AuditArgs) -> anyhow::Result<()> {
    let trusted = match std::fs::read(&a.trusted) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && a.init => None,
        Err(e) => bail!(
            "reading {}: {e} (use --init for a first audit)",
            a.trusted.display()
        ),
    };
    let client = Client::new(&a.server, a.token.clone());
    let pb = if a.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(0)
    };
    pb.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    let result = api::audit::audit(
        &client,
        &a.keys,
        trusted.as_deref(),
        a.samples,
        seed,
        &mut |what, done, total| {
            pb.set_message(what.to_owned());
            pb.set_length(total);
            pb.set_position(done);
        },
    );
    pb.finish_and_clear();
    match result {
        Ok(r) => {
            match r.previous_size {
                Some(p) => println!(
                    "checkpoint: size {} is consistent with the trusted size {p}",
                    r.size
                ),
                None => println!(
                    "checkpoint: size {} (first audit: trusted on first use)",
                    r.size
                ),
            }
            println!(
                "entries:     {} random entries re-hashed and proven",
                r.entries_checked
            );
            println!(
                "projections: {} task classes, {} evidence proofs verified",
                r.projections_checked, r.evidence_checked
            );
            let tmp = a.trusted.with_extension("tmp");
            std::fs::write(&tmp, &r.checkpoint)?;
            std::fs::rename(&tmp, &a.trusted)?;
            println!(
                "OK: saved the new trusted checkpoint to {}",
                a.trusted.display()
            );
            Ok(())
        }
        Err(api::audit::AuditError::Failed(f @ api::audit::AuditFailure::Stale { .. })) => {
            Err(Failure {
                status: 3,
                label: "STALE",
                message: f.to_string(),
            }
            .into())
        }
        Err(api::audit::AuditError::Failed(f)) => Err(fail(f.to_string())),
        Err(api::audit::AuditError::Other(e)) => Err(e),
    }
}

fn backup_cmd(server: &str, out: &Path, token: Option<String>) -> anyhow::Result<()> {
    let client = Client::new(server, token);
    let pb = progress_bar(false, "backing up");
    let size = api::backup::backup(&client, out, &mut |d, t| {
        pb.set_length(t);
        pb.set_position(d);
    })?;
    pb.finish_and_clear();
    println!(
        "backed up {size} entries to {} (re-hashed into the signed checkpoint)",
        out.display()
    );
    Ok(())
}

fn restore_cmd(
    backup: &Path,
    dir: &Path,
    key_file: &Path,
    anchors: Option<&Path>,
    anchor_keys: &[String],
    allow: bool,
) -> anyhow::Result<()> {
    let pb = progress_bar(false, "restoring");
    let r = api::backup::restore(
        backup,
        dir,
        key_file,
        anchors,
        anchor_keys,
        allow,
        &mut |d, t| {
            pb.set_length(t);
            pb.set_position(d);
        },
    )?;
    pb.finish_and_clear();
    println!("restored {} entries into {}: root matches the signed checkpoint; consistent with {} anchors", r.size, dir.display(), r.anchors_checked);
    for (anchor, gap) in &r.behind {
        println!("WARNING: behind anchor {anchor} by {gap} entries: those acknowledged entries are not in this restore");
    }
    Ok(())
}

fn post_as_operator(server: &str, operator_key: &Path, event: events::Event) -> anyhow::Result<()> {
    let key = api::demo::read_signing_key(operator_key)?;
    let client = Client::new(server, None);
    let vkey = client.get("/v1/log/key")?.text().trim().to_owned();
    let mut poster = api::demo::Poster::new(&client, vkey, key);
    let r = poster.post("operator", event)?;
    println!(
        "appended at index {} (tree size {}); proof and checkpoint verified",
        r.index, r.tree_size
    );
    Ok(())
}

fn enrol(
    server: &str,
    operator_key: &Path,
    public_key: &str,
    identity: &str,
    roles: &[String],
) -> anyhow::Result<()> {
    let roles = roles
        .iter()
        .map(|r| {
            serde_json::from_value(serde_json::Value::String(r.clone()))
                .map_err(|_| anyhow::anyhow!("unknown role `{r}`"))
        })
        .collect::<anyhow::Result<Vec<events::Role>>>()?;
    post_as_operator(
        server,
        operator_key,
        events::Event::PrincipalEnrolled(events::model::PrincipalEnrolled {
            public_key: public_key.to_owned(),
            identity: identity.to_owned(),
            roles,
        }),
    )
}

/// The envelopes of `path`, each with where it came from: a JSON array's
/// items (`file[i]`) or non-empty lines (`file:line`).
fn read_envelopes(path: &Path) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let bytes = if path == Path::new("-") {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut b).context("reading stdin")?;
        b
    } else {
        std::fs::read(path).with_context(|| format!("reading {}", path.display()))?
    };
    let text = std::str::from_utf8(&bytes)
        .with_context(|| format!("{}: not UTF-8 text", path.display()))?;
    let name = path.display();
    if text.trim_start().starts_with('[') {
        let items: Vec<Box<serde_json::value::RawValue>> = serde_json::from_str(text)
            .with_context(|| format!("{name}: not a JSON array of envelopes"))?;
        return Ok(items
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("{name}[{i}]"), v.get().as_bytes().to_vec()))
            .collect());
    }
    Ok(text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| (format!("{name}:{}", n + 1), l.trim().as_bytes().to_vec()))
        .collect())
}

/// The most bytes `ledger post` puts in one request body (under the
/// server's default limit of 1 MiB).
const POST_BODY_BYTES: usize = 512 * 1024;

fn post_files(
    server: &str,
    key: Option<String>,
    batch: usize,
    quiet: bool,
    files: &[PathBuf],
) -> anyhow::Result<()> {
    let mut envelopes = Vec::new();
    for f in files {
        envelopes.extend(read_envelopes(f)?);
    }
    if envelopes.is_empty() {
        bail!("no envelopes in the {} file(s) given", files.len());
    }
    let client = Client::new(server, None);
    let vkey = match key {
        Some(k) => k,
        None => {
            let k = client.get("/v1/log/key")?.text().trim().to_owned();
            eprintln!("note: receipts are checked against the key the server gave ({k}); pass --key to check them against a key you trust");
            k
        }
    };
    let mut checker = api::check::ReceiptChecker::new(&vkey);
    let pb = progress_bar(quiet, "posting envelopes:");
    pb.set_length(envelopes.len() as u64);
    let (mut appended, mut existing, mut refused, mut tree_size) = (0u64, 0u64, 0u64, 0u64);
    let mut rest = envelopes.as_slice();
    while !rest.is_empty() {
        let mut n = 0;
        let mut bytes = 2;
        while n < rest.len() && n < batch && (n == 0 || bytes + rest[n].1.len() < POST_BODY_BYTES) {
            bytes += rest[n].1.len() + 1;
            n += 1;
        }
        let (chunk, later) = rest.split_at(n);
        rest = later;
        let r = client.post_batch(chunk.iter().map(|(_, env)| env.as_slice()))?;
        if r.status != 200 {
            bail!(
                "the server refused a batch of {n} ({}): {} (re-running is safe)",
                r.status,
                r.text()
            );
        }
        let answer: api::server::BatchResponse = r.json()?;
        if answer.results.len() != n {
            return Err(fail(format!(
                "the server answered {} results for {n} envelopes",
                answer.results.len()
            )));
        }
        for ((label, env), item) in chunk.iter().zip(&answer.results) {
            match (&item.receipt, &item.problem) {
                (Some(rc), _) => {
                    checker.check(rc, Some(env)).map_err(|e| {
                        fail(format!("{label}: the receipt does not verify: {e:#}"))
                    })?;
                    if rc.existing {
                        existing += 1;
                    } else {
                        appended += 1;
                    }
                    tree_size = tree_size.max(rc.tree_size);
                }
                (None, Some(p)) => {
                    refused += 1;
                    let field = p
                        .field
                        .as_deref()
                        .map(|f| format!(" on {f}"))
                        .unwrap_or_default();
                    pb.suspend(|| {
                        println!(
                            "{label}: refused {} {}{field}: {}",
                            item.status, p.code, p.detail
                        )
                    });
                }
                (None, None) => {
                    return Err(fail(format!(
                        "{label}: status {} with neither a receipt nor a problem",
                        item.status
                    )))
                }
            }
        }
        pb.inc(n as u64);
    }
    pb.finish_and_clear();
    println!(
        "{} envelopes: {appended} appended, {existing} already in the log, {refused} refused; every receipt's proof and checkpoint verified (tree size {tree_size})",
        envelopes.len()
    );
    if refused > 0 {
        return Err(fail(format!("{refused} envelope(s) refused")));
    }
    Ok(())
}

fn revoke(server: &str, operator_key: &Path, key_id: &str, reason: &str) -> anyhow::Result<()> {
    post_as_operator(
        server,
        operator_key,
        events::Event::PrincipalRevoked(events::model::PrincipalRevoked {
            key_id: key_id.to_owned(),
            reason: reason.to_owned(),
        }),
    )
}

fn bundle(server: &str, task_class: &str, out: &Path, token: Option<String>) -> anyhow::Result<()> {
    let client = Client::new(server, token);
    let r = client.get(&format!("/v1/task-classes/{task_class}/bundle"))?;
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

fn verify_bundle(file: &Path, keys: &[String]) -> anyhow::Result<()> {
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let s = api::check::verify_bundle(&bytes, keys).map_err(|e| fail(format!("{e:#}")))?;
    println!(
        "OK: {} at tree size {}: {} evidence entries proven, statistics recomputed, recommendation {}",
        s.task_class, s.tree_size, s.evidence, s.recommended_tier
    );
    Ok(())
}

fn anchor_publish(dir: &Path, anchors_dir: Option<PathBuf>) -> anyhow::Result<()> {
    let key = local_key(dir)?;
    let config = ServeConfig {
        data_dir: dir.to_path_buf(),
        anchors_dir,
        ..ServeConfig::default()
    };
    let state = api::server::AppState::open(config, key, std::sync::Arc::new(events::SystemClock))?;
    let at = api::server::publish_anchor(&state)?;
    let head = state.events.ledger().head();
    println!(
        "published {at}
recorded anchor.published at index {}",
        head.size - 1
    );
    Ok(())
}

fn demo(dir: Option<PathBuf>, listen: std::net::SocketAddr, exit: bool) -> anyhow::Result<()> {
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
    )?;
    let vkey = init.log_key.verifier_key().to_owned();
    let rt = runtime()?;
    let listener = rt.block_on(tokio::net::TcpListener::bind(listen))?;
    let addr = listener.local_addr()?;
    let config = ServeConfig {
        data_dir: dir.clone(),
        listen: addr,
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
    println!("\ndone in {:.1?}. Explore:", started.elapsed());
    println!("  curl {base}/checkpoint");
    println!("  curl {base}/v1/task-classes/migration-chainguard-distroless");
    println!("  curl '{base}/v1/entries?start=0&limit=5'");
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
