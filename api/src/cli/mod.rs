//! The `ledger` program's flags and dispatch: one module per subcommand.
//!
//! Exit status: 0 success; 1 a check failed (verification, a proof, a
//! signature: the output names what and where); 2 any other error (bad
//! arguments, unreadable files, unreachable server); 3 (`audit`) the
//! server's checkpoint is older than the trusted one.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};

mod anchor;
mod anchor_check;
mod audit;
mod backup;
mod bundle;
mod demo;
mod export;
mod init;
mod migrate;
mod post;
mod proof;
mod serve;
mod state;
mod tiles;
mod verify;
mod watch;
mod witness;

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
    Serve(Box<serve::ServeArgs>),
    /// Create a data directory: the log key, an operator key, and the genesis entries.
    Init(init::InitArgs),
    /// Write a new Ed25519 key file (note signer key format, mode 0600) and print its public parts.
    Keygen(init::KeygenArgs),
    /// Make a token for a reader with a role (auditor, gate, maintainer), who receives the
    /// disclosures of sensitive values: prints the token once, and the line to add to the
    /// server's readers file (docs/PRIVACY.md).
    ReaderToken(init::ReaderTokenArgs),
    /// Verify a local data directory, or a remote server against a trusted checkpoint.
    Verify(verify::VerifyArgs),
    /// Fetch and check an inclusion or consistency proof from a server.
    Proof(proof::ProofArgs),
    /// Print the latest signed checkpoint (local: signed with the log key; remote: verified with --key).
    Checkpoint(proof::CheckpointArgs),
    /// Write every entry as JSON lines with its raw leaf (base64) and hashes.
    Export(export::ExportArgs),
    /// Audit a server trusting only the log's verifier key and a checkpoint saved by an earlier
    /// audit. Exit 0: consistent and proven (the new checkpoint is saved); 1: the server's
    /// answers do not verify; 2: usage or network error; 3: the server's checkpoint is stale.
    Audit(audit::AuditArgs),
    /// Save a task class's projection as an offline proof bundle (checkpoint, raw evidence
    /// leaves, inclusion proofs, the projection, a signed attestation).
    Bundle(bundle::BundleArgs),
    /// Fetch a task class's committed state and check, without replaying the log, that its
    /// decision numbers follow from every case record the ledger committed in its log (or that
    /// the class is absent). Exit 1 if it does not verify.
    State(state::StateArgs),
    /// Check an offline proof bundle with no server: signatures, every evidence proof, and that
    /// the stated statistics follow from the evidence. Exit 1 if it does not verify.
    VerifyBundle(bundle::VerifyBundleArgs),
    /// Take an online, consistent backup through the API while the server keeps writing.
    Backup(backup::BackupArgs),
    /// Restore a backup into an empty data directory, proving it against its signed checkpoint
    /// and the anchors before anything serves it.
    Restore(backup::RestoreArgs),
    /// Move a data directory's log between the redb file and a PostgreSQL schema: every hash
    /// recomputed, the copy proven to reach the source's size and root, the source kept.
    Migrate(migrate::MigrateArgs),
    /// Enrol a principal: post a principal.enrolled event signed with the operator's key.
    Enrol(post::EnrolArgs),
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
    Post(post::PostArgs),
    /// Record the Sigstore trusted root (and the log's origin) that co-signatures by Sigstore
    /// identity are verified against from the next entry on: post a sigstore.root_trusted event
    /// signed with the operator's key (docs/SIGSTORE.md).
    SigstoreRoot(post::SigstoreRootArgs),
    /// Revoke a principal's key: post a principal.revoked event signed with the operator's key.
    Revoke(post::RevokeArgs),
    /// Redact one committed field of an entry, by two maintainers: post a field.redacted event;
    /// the ledger then destroys the key of that field's kept disclosure. The entry, its
    /// commitment and every proof, checkpoint and anchor stay valid (docs/PRIVACY.md).
    Redact(post::RedactArgs),
    /// Publish the current signed checkpoint as an anchor and record it in the log.
    Anchor {
        #[command(subcommand)]
        action: anchor::AnchorAction,
    },
    /// The log as C2SP tlog-tiles static files.
    Tiles {
        #[command(subcommand)]
        action: tiles::TilesAction,
    },
    /// Follow a log through its C2SP tiles (the ledger or any static copy): every checkpoint
    /// signed (and, with --policy, witnessed), consistent with the last one trusted, every new
    /// entry matching its leaf hash, every anchor a prefix. Exit 1 on divergence, or serve
    /// ledger_watch_* metrics for an alert (--metrics-listen).
    Watch(watch::WatchArgs),
    /// A C2SP tlog-witness: cosign the checkpoints of the logs it follows.
    Witness {
        #[command(subcommand)]
        action: witness::WitnessAction,
    },
    /// Start a server on a fresh data directory, load a realistic sample bench through the API,
    /// print scores and recommendations, check every proof, and keep serving.
    Demo(demo::DemoArgs),
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

/// A check's error as the program reports it: a disproof is a failed check
/// (exit 1), anything else an error (exit 2).
fn checked(e: verifier::CheckError) -> anyhow::Error {
    match e {
        verifier::CheckError::Disproved(m) => fail(m),
        verifier::CheckError::Other(e) => e,
    }
}

/// Parses the command line, runs the subcommand, and reports its outcome.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let serving = matches!(
        cli.command,
        Command::Serve(_)
            | Command::Witness {
                action: witness::WitnessAction::Serve(_)
            }
    );
    let default_level = if serving { "info" } else { "warn" };
    init_logging(cli.log_format, default_level);
    let result = match cli.command {
        Command::Serve(a) => serve::run(*a),
        Command::Init(a) => init::run(a),
        Command::Keygen(a) => init::keygen(a),
        Command::ReaderToken(a) => init::reader_token(a),
        Command::Verify(a) => verify::run(a),
        Command::Proof(a) => proof::run(a),
        Command::Checkpoint(a) => proof::checkpoint(a),
        Command::Export(a) => export::run(a),
        Command::Demo(a) => demo::run(a),
        Command::Anchor { action } => anchor::run(action),
        Command::Tiles { action } => tiles::run(action),
        Command::Witness { action } => witness::run(action),
        Command::Watch(a) => watch::run(a),
        Command::Audit(a) => audit::run(a),
        Command::Backup(a) => backup::backup(a),
        Command::Restore(a) => backup::restore(a),
        Command::Migrate(a) => migrate::run(a),
        Command::Enrol(a) => post::enrol(a),
        Command::SigstoreRoot(a) => post::sigstore_root(a),
        Command::Post(a) => post::run(a),
        Command::Revoke(a) => post::revoke(a),
        Command::Redact(a) => post::redact(a),
        Command::Bundle(a) => bundle::bundle(a),
        Command::VerifyBundle(a) => bundle::verify_bundle(a),
        Command::State(a) => state::run(a),
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

fn progress_bar(quiet: bool, what: &str) -> ProgressBar {
    progress_bar_of(quiet, what, "entries")
}

/// A progress bar counting `unit`s.
fn progress_bar_of(quiet: bool, what: &str, unit: &str) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(0);
    let tpl = format!(
        "{{spinner}} {what} [{{bar:40}}] {{pos}}/{{len}} {unit} ({{per_sec}}, eta {{eta}})"
    );
    pb.set_style(
        ProgressStyle::with_template(&tpl)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb
}
