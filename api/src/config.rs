//! Server configuration. Precedence: command-line flag, then environment
//! variable (`LEDGER_*`), then the TOML config file, then the default.
//! docs/CONFIG.md lists every option.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Every server option, with its default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServeConfig {
    /// Data directory (ledger.redb, log.key). Env: LEDGER_DATA_DIR.
    pub data_dir: PathBuf,
    /// Listen address. Env: LEDGER_LISTEN.
    pub listen: SocketAddr,
    /// The log key file (note signer key). Default: <data_dir>/log.key. Env: LEDGER_KEY_FILE.
    pub key_file: Option<PathBuf>,
    /// If set, reads need `Authorization: Bearer <token>`. Env: LEDGER_READ_TOKEN.
    pub read_token: Option<String>,
    /// Readers with a role, who receive the disclosures of sensitive values
    /// (api::readers, docs/PRIVACY.md). Env: LEDGER_READERS_FILE.
    pub readers_file: Option<PathBuf>,
    /// Largest request body, bytes. Env: LEDGER_MAX_BODY_BYTES.
    pub max_body_bytes: usize,
    /// Per-request time limit, milliseconds. Env: LEDGER_REQUEST_TIMEOUT_MS.
    pub request_timeout_ms: u64,
    /// A request's headers must arrive within this many milliseconds, or the
    /// connection is closed (slow-loris clients). Env: LEDGER_HEADER_READ_TIMEOUT_MS.
    pub header_read_timeout_ms: u64,
    /// A connection with nothing read or written for this many seconds is
    /// closed (never less than the request time limit plus one second).
    /// Env: LEDGER_IDLE_TIMEOUT_SECS.
    pub idle_timeout_secs: u64,
    /// Requests handled at once; more get 503 + Retry-After. Env: LEDGER_MAX_CONCURRENT_REQUESTS.
    pub max_concurrent_requests: usize,
    /// Projection window in days. Env: LEDGER_WINDOW_DAYS.
    pub window_days: u32,
    /// Save the projection checkpoint and the event-state snapshot every this
    /// many seconds (and on shutdown). Env: LEDGER_PROJECTION_SAVE_SECS.
    pub projection_save_secs: u64,
    /// Also save the event-state snapshot whenever the log has grown by this
    /// many entries since the last one (checked every second; 0: only every
    /// `projection_save_secs`), which bounds what a start after a crash
    /// replays before it takes writes. Env: LEDGER_STATE_SNAPSHOT_ENTRIES.
    pub state_snapshot_entries: u64,
    /// Seal the data file into a segment once it holds this many entries
    /// and continue the log in a new one, so that what each commit writes
    /// does not grow with the log (0: never). Env: LEDGER_SEGMENT_ENTRIES.
    pub segment_entries: u64,
    /// Anchors directory. Default: <data_dir>/anchors. Env: LEDGER_ANCHORS_DIR.
    pub anchors_dir: Option<PathBuf>,
    /// Publish an anchor every this many seconds; 0 disables. Env: LEDGER_ANCHOR_INTERVAL_SECS.
    pub anchor_interval_secs: u64,
    /// Earlier log verifier keys whose anchors stay trusted after a key rotation.
    pub anchor_keys: Vec<String>,
    /// Also publish every anchor to this Rekor log (docs/SIGSTORE.md,
    /// "Anchors in Rekor"), keeping each verified bundle beside its anchor.
    /// Env: LEDGER_REKOR_URL.
    pub rekor_url: Option<String>,
    /// The Rekor API `rekor_url` serves: 1 (default) or 2. Env:
    /// LEDGER_REKOR_VERSION.
    pub rekor_version: u8,
    /// With `rekor_version` 2: the RFC 3161 timestamp authority (its full
    /// URL) whose timestamp over each signature gives the bundle its
    /// verified time. Env: LEDGER_TSA_URL.
    pub tsa_url: Option<String>,
    /// The anchoring key for Rekor (`ledger anchor rekor-keygen`); needed
    /// with `rekor_url`. Env: LEDGER_REKOR_KEY.
    pub rekor_key_file: Option<PathBuf>,
    /// The Sigstore trusted root a kept bundle must verify against
    /// (default: the production root embedded in this build).
    /// Env: LEDGER_SIGSTORE_ROOT.
    pub sigstore_root: Option<PathBuf>,
    /// Try again to publish the anchors not yet in Rekor every this many
    /// seconds. Env: LEDGER_REKOR_RETRY_SECS.
    pub rekor_retry_secs: u64,
    /// Accept a `sigstore.root_trusted` event that records the SYNTHETIC
    /// test root (`sigstore_check::synthetic`, whose keys are public): for
    /// demos and tests only. Env: LEDGER_SIGSTORE_ALLOW_SYNTHETIC_ROOT.
    pub sigstore_allow_synthetic_root: bool,
    /// Keep a C2SP tlog-tiles directory (checkpoint, tiles, entry bundles)
    /// up to date here, for a static server or CDN. Env: LEDGER_TILES_DIR.
    pub tiles_dir: Option<PathBuf>,
    /// Sync `tiles_dir` every this many seconds. Env: LEDGER_TILES_SYNC_SECS.
    pub tiles_sync_secs: u64,
    /// Keep the tiles and entry bundles `GET /tile/...` served, up to this
    /// many MiB, to serve them again without reading the log (a tile never
    /// changes); 0 keeps none. Env: LEDGER_TILE_CACHE_MB.
    pub tile_cache_mb: u64,
    /// A C2SP tlog-policy file naming witnesses (with their add-checkpoint
    /// URLs) and the quorum: checkpoints are submitted to them, and
    /// `/checkpoint` serves the newest one a quorum cosigned.
    /// Env: LEDGER_WITNESS_POLICY.
    pub witness_policy: Option<PathBuf>,
    /// Submit the head to the witnesses every this many seconds when it
    /// has grown. Env: LEDGER_WITNESS_INTERVAL_SECS.
    pub witness_interval_secs: u64,
    /// Walk the entries appended since the last verified head every this
    /// many seconds, and record the head they reach as the verified head
    /// (a sealed record in the data file): what a start walks before it
    /// is ready is what came after it. 0: only at start and on a clean
    /// stop. Env: LEDGER_VERIFY_TAIL_SECS.
    pub verify_tail_secs: u64,
    /// Walk the whole log again (every leaf, chain link and stored hash),
    /// check it against every anchor and the lookup tables, and check the
    /// derived state against a replay from the first entry, every this
    /// many seconds. A start walks the whole log again in the background,
    /// and replays the derived state when its last replay is this old.
    /// 0: both after every start, never on a schedule.
    /// Env: LEDGER_REVERIFY_INTERVAL_SECS.
    pub reverify_interval_secs: u64,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            data_dir: PathBuf::from("./ledger-data"),
            listen: SocketAddr::from(([127, 0, 0, 1], 7878)),
            key_file: None,
            read_token: None,
            readers_file: None,
            max_body_bytes: 1 << 20,
            request_timeout_ms: 10_000,
            header_read_timeout_ms: 10_000,
            idle_timeout_secs: 60,
            max_concurrent_requests: 1024,
            window_days: 30,
            projection_save_secs: 60,
            state_snapshot_entries: 50_000,
            segment_entries: ledger::store::SEGMENT_ENTRIES,
            anchors_dir: None,
            anchor_interval_secs: 86_400,
            anchor_keys: Vec::new(),
            rekor_url: None,
            rekor_version: 1,
            tsa_url: None,
            rekor_key_file: None,
            sigstore_root: None,
            rekor_retry_secs: 600,
            sigstore_allow_synthetic_root: false,
            tiles_dir: None,
            tiles_sync_secs: 5,
            tile_cache_mb: 64,
            witness_policy: None,
            witness_interval_secs: 5,
            verify_tail_secs: 30,
            reverify_interval_secs: 86_400,
        }
    }
}

impl ServeConfig {
    /// The log key file in use.
    pub fn key_path(&self) -> PathBuf {
        self.key_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join("log.key"))
    }

    /// The anchors directory in use.
    pub fn anchors_path(&self) -> PathBuf {
        self.anchors_dir
            .clone()
            .unwrap_or_else(|| self.data_dir.join("anchors"))
    }

    /// Reads a TOML config file.
    pub fn from_file(path: &std::path::Path) -> anyhow::Result<ServeConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    }
}
