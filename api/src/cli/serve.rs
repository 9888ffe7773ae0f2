//! `ledger serve`: run the HTTP server on a data directory.

use std::path::PathBuf;

use api::config::ServeConfig;
use clap::Args;

use super::{runtime, shutdown_signal};

#[derive(Args)]
pub struct ServeArgs {
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
    /// Readers with a role, who receive the disclosures of sensitive values
    /// (one `<role> sha256:<token digest> <name>` per line; `ledger reader-token`).
    #[arg(long, env = "LEDGER_READERS_FILE")]
    readers_file: Option<PathBuf>,
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
    /// Save the event-state snapshot whenever the log has grown by this many
    /// entries (0: only every --projection-save-secs).
    #[arg(long, env = "LEDGER_STATE_SNAPSHOT_ENTRIES")]
    state_snapshot_entries: Option<u64>,
    /// Seal the data file into a segment once it holds this many entries
    /// and continue in a new one (0: never).
    #[arg(long, env = "LEDGER_SEGMENT_ENTRIES")]
    segment_entries: Option<u64>,
    #[arg(long, env = "LEDGER_ANCHORS_DIR")]
    anchors_dir: Option<PathBuf>,
    #[arg(long, env = "LEDGER_ANCHOR_INTERVAL_SECS")]
    anchor_interval_secs: Option<u64>,
    /// An earlier log verifier key whose anchors stay trusted (repeatable).
    #[arg(long = "anchor-key")]
    anchor_keys: Vec<String>,
    /// Also publish every anchor to this Rekor log (docs/SIGSTORE.md).
    #[arg(long, env = "LEDGER_REKOR_URL")]
    rekor_url: Option<String>,
    /// The Rekor API --rekor-url serves: 1 (default) or 2 (needs --tsa-url).
    #[arg(long, env = "LEDGER_REKOR_VERSION", value_parser = clap::value_parser!(u8).range(1..=2))]
    rekor_version: Option<u8>,
    /// With --rekor-version 2: the RFC 3161 timestamp authority's URL (e.g.
    /// https://timestamp.sigstore.dev/api/v1/timestamp).
    #[arg(long, env = "LEDGER_TSA_URL")]
    tsa_url: Option<String>,
    /// The anchoring key for Rekor (`ledger anchor rekor-keygen`).
    #[arg(long, env = "LEDGER_REKOR_KEY")]
    rekor_key: Option<PathBuf>,
    /// The Sigstore trusted root kept bundles must verify against (default: the embedded
    /// production root).
    #[arg(long, env = "LEDGER_SIGSTORE_ROOT")]
    sigstore_root: Option<PathBuf>,
    /// Try again to publish the anchors not yet in Rekor every this many seconds.
    #[arg(long, env = "LEDGER_REKOR_RETRY_SECS")]
    rekor_retry_secs: Option<u64>,
    /// Accept recording the SYNTHETIC Sigstore test root, whose keys are public (demos and
    /// tests only; docs/SIGSTORE.md).
    #[arg(long, env = "LEDGER_SIGSTORE_ALLOW_SYNTHETIC_ROOT")]
    sigstore_allow_synthetic_root: bool,
    /// Keep a C2SP tlog-tiles directory up to date for a static server.
    #[arg(long, env = "LEDGER_TILES_DIR")]
    tiles_dir: Option<PathBuf>,
    #[arg(long, env = "LEDGER_TILES_SYNC_SECS")]
    tiles_sync_secs: Option<u64>,
    /// Keep up to this many MiB of the tiles served, to serve them again without
    /// reading the log; 0 keeps none.
    #[arg(long, env = "LEDGER_TILE_CACHE_MB")]
    tile_cache_mb: Option<u64>,
    /// A C2SP tlog-policy file: the witnesses (with URLs) to submit checkpoints to, and the quorum.
    #[arg(long, env = "LEDGER_WITNESS_POLICY")]
    witness_policy: Option<PathBuf>,
    #[arg(long, env = "LEDGER_WITNESS_INTERVAL_SECS")]
    witness_interval_secs: Option<u64>,
    /// Walk what was appended since the last verified head every this many
    /// seconds, so a start walks only what came after (0: only at start
    /// and on a clean stop).
    #[arg(long, env = "LEDGER_VERIFY_TAIL_SECS")]
    verify_tail_secs: Option<u64>,
    /// Walk the whole log again every this many seconds (0: only once,
    /// right after a start).
    #[arg(long, env = "LEDGER_REVERIFY_INTERVAL_SECS")]
    reverify_interval_secs: Option<u64>,
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
        readers_file: a.readers_file.or(file.readers_file),
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
        state_snapshot_entries: a
            .state_snapshot_entries
            .unwrap_or(file.state_snapshot_entries),
        segment_entries: a.segment_entries.unwrap_or(file.segment_entries),
        anchors_dir: a.anchors_dir.or(file.anchors_dir),
        anchor_interval_secs: a.anchor_interval_secs.unwrap_or(file.anchor_interval_secs),
        anchor_keys: if a.anchor_keys.is_empty() {
            file.anchor_keys
        } else {
            a.anchor_keys
        },
        rekor_url: a.rekor_url.or(file.rekor_url),
        rekor_version: a.rekor_version.unwrap_or(file.rekor_version),
        tsa_url: a.tsa_url.or(file.tsa_url),
        rekor_key_file: a.rekor_key.or(file.rekor_key_file),
        sigstore_root: a.sigstore_root.or(file.sigstore_root),
        rekor_retry_secs: a.rekor_retry_secs.unwrap_or(file.rekor_retry_secs),
        sigstore_allow_synthetic_root: a.sigstore_allow_synthetic_root
            || file.sigstore_allow_synthetic_root,
        tiles_dir: a.tiles_dir.or(file.tiles_dir),
        tiles_sync_secs: a.tiles_sync_secs.unwrap_or(file.tiles_sync_secs),
        tile_cache_mb: a.tile_cache_mb.unwrap_or(file.tile_cache_mb),
        witness_policy: a.witness_policy.or(file.witness_policy),
        witness_interval_secs: a
            .witness_interval_secs
            .unwrap_or(file.witness_interval_secs),
        verify_tail_secs: a.verify_tail_secs.unwrap_or(file.verify_tail_secs),
        reverify_interval_secs: a
            .reverify_interval_secs
            .unwrap_or(file.reverify_interval_secs),
    })
}

pub fn run(a: ServeArgs) -> anyhow::Result<()> {
    let config = serve_config(a)?;
    runtime()?.block_on(api::server::serve(config, shutdown_signal()))
}
