//! The server's state: the event log, the projector, the keys, the
//! metrics, and what the start-up checks found.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anchors::LogKey;
use events::{Clock, EventLog};
use ledger::Hash;
use projections::driver::Projector;
use projections::Settings;

use crate::config::ServeConfig;
use crate::error::ApiError;
use crate::metrics::Metrics;

/// Verification status of the served log.
pub const VERIFY_RUNNING: i64 = -1;
pub const VERIFY_FAILED: i64 = 0;
pub const VERIFY_OK: i64 = 1;

/// Whether the projection has been loaded: unset while loading, then
/// `true` (loaded) or `false` (it cannot be: numbers are withheld).
#[derive(Default)]
pub(crate) struct ProjectionReady {
    pub(crate) state: Mutex<Option<bool>>,
    pub(crate) changed: std::sync::Condvar,
}

impl ProjectionReady {
    pub(crate) fn set(&self, loaded: bool) {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = Some(loaded);
        self.changed.notify_all();
    }

    /// Whether the load has ended and loaded (never waits).
    pub(crate) fn loaded(&self) -> bool {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) == Some(true)
    }

    /// Waits until the load has ended; whether it loaded.
    pub(crate) fn wait(&self) -> bool {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(loaded) = *st {
                return loaded;
            }
            st = self.changed.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Everything a request handler needs.
pub struct AppState {
    pub events: EventLog,
    pub projector: Mutex<Projector>,
    /// Whether `projector` holds the loaded projection (see
    /// [`start_verify`]); until then it is an empty placeholder that is
    /// never answered from or saved.
    pub(crate) projection_ready: ProjectionReady,
    pub log_key: LogKey,
    /// Seals the saved projection checkpoint ([`projections::driver::seal_key`]).
    pub(crate) projection_key: [u8; 32],
    /// Seals the verified head and the derived-check record
    /// ([`crate::server::verifying::seal_key`]).
    pub(crate) verified_key: [u8; 32],
    /// Whether the loaded projection came from its sealed checkpoint (and
    /// so still has to be confirmed by [`deep_check`]).
    pub(crate) projection_from_checkpoint: std::sync::atomic::AtomicBool,
    /// [`deep_check`]'s status: `VERIFY_RUNNING`, `VERIFY_OK` or
    /// `VERIFY_FAILED`.
    pub derived_checked: AtomicI64,
    pub clock: Arc<dyn Clock>,
    pub config: ServeConfig,
    pub metrics: Metrics,
    pub verify_status: AtomicI64,
    pub verify_detail: Mutex<String>,
    pub(crate) inflight: tokio::sync::Semaphore,
    pub(crate) checkpoint_cache: Mutex<(u64, String)>,
    /// The head size at the last complete save of derived state
    /// (`u64::MAX` before the first).
    pub(crate) saved_at: AtomicU64,
    /// The size of the last event-state snapshot saved by
    /// [`AppState::save_state_if_behind`].
    pub(crate) state_saved_at: AtomicU64,
    /// Set once the background check has verified the signatures of the
    /// entries the start replayed without them: the event-state snapshot
    /// may be saved from then on (before the rest of the check, so that a
    /// crash loop still saves one).
    pub(crate) tail_signed: std::sync::atomic::AtomicBool,
    /// The head size right after the last anchor was published (or found
    /// at startup); `u64::MAX` before one.
    pub(crate) anchored_at: AtomicU64,
    pub(crate) request_counter: AtomicU64,
    pub(crate) request_prefix: String,
    /// The witness policy (`witness_policy`), when checkpoints are witnessed.
    pub policy: Option<anchors::Policy>,
    /// Readers with a role (`readers_file`), who receive disclosures.
    pub readers: crate::readers::Readers,
    /// Where anchors are also published (`rekor_url`), when they are.
    pub rekor: Option<crate::rekor::Rekor>,
    /// The newest checkpoint cosigned by a quorum: (size, signed note).
    pub witnessed: Mutex<Option<(u64, String)>>,
    /// The size each witness last cosigned, by its policy name.
    pub(crate) witness_sizes: Mutex<std::collections::BTreeMap<String, u64>>,
    /// The verified head recorded in the data file (`server::verifying`):
    /// entries below its size have been walked.
    pub(crate) verified: Mutex<Option<(u64, Hash)>>,
    /// Held by every walk of the log after the start's, so that two never
    /// run at once.
    pub(crate) walking: Mutex<()>,
    /// Whether the start walked the whole log (no verified head to resume
    /// from); if not, the background check walks it.
    pub(crate) walked_all: std::sync::atomic::AtomicBool,
    /// The tiles and entry bundles served, kept to serve again
    /// (`tile_cache_mb`).
    pub(crate) tile_cache: crate::server::routes::tiles::TileCache,
    /// The base64 of the evidence leaves projection answers write, by leaf
    /// hash: the same leaves with every answer, and encoding them was a
    /// fifth of an answer's time at 10M entries (`perf record`).
    pub(crate) leaf_base64: ledger::kept::Kept<[u8; 32], Arc<str>>,
}

pub type Shared = Arc<AppState>;

impl AppState {
    /// `e` as an answer, counting a derived-state mismatch
    /// (`ledger_derived_state_mismatches_total`).
    pub fn derived_error(&self, e: projections::driver::DriverError) -> crate::error::ApiError {
        if matches!(e, projections::driver::DriverError::Mismatch(_)) {
            self.metrics.count_derived_mismatch();
        }
        e.into()
    }

    /// The projector, locked. A panic while it was held does not keep it
    /// locked for good: every caller takes it as it was left.
    pub fn projector(&self) -> std::sync::MutexGuard<'_, Projector> {
        self.projector.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What the metrics read at one scrape: the gauges and the log's own
    /// counters.
    pub fn metrics_snapshot(&self) -> crate::metrics::Snapshot {
        let log = self.events.ledger();
        let stats = log.stats();
        crate::metrics::Snapshot {
            tree_size: log.head().size,
            verify_status: self.verify_status.load(Ordering::SeqCst),
            derived_check: self.derived_checked.load(Ordering::SeqCst),
            last_batch: stats.last_batch_size.load(Ordering::Relaxed),
            read_only: stats.read_only.load(Ordering::Relaxed),
            requests_in_flight: self.requests_in_flight(),
            data_file_bytes: ledger::store::disk_bytes(log.path()),
            appends: stats.appends.load(Ordering::Relaxed),
            batches: stats.batches.load(Ordering::Relaxed),
            commit_failures: stats.commit_failures.load(Ordering::Relaxed),
            lookup_failures: stats.lookup_failures.load(Ordering::Relaxed),
            redaction_failures: stats.redaction_failures.load(Ordering::Relaxed),
            // While a start opens them, the lookups count as behind by
            // the whole log.
            lookups_behind: {
                let size = log.head().size;
                log.lookups_if_open().map_or(size, |l| {
                    size.saturating_sub(l.leaves_through().min(l.keys_through()))
                })
            },
        }
    }

    /// Requests now holding one of the `max_concurrent_requests` slots
    /// (the health, readiness and metrics routes take one too).
    pub fn requests_in_flight(&self) -> usize {
        self.config
            .max_concurrent_requests
            .max(1)
            .saturating_sub(self.inflight.available_permits())
    }

    /// Opens the data directory's event log with the log key and starts
    /// nothing; see [`start_verify`] and [`router`].
    pub fn open(
        config: ServeConfig,
        log_key: LogKey,
        clock: Arc<dyn Clock>,
    ) -> anyhow::Result<AppState> {
        Self::open_with_storage(config, log_key, clock, ledger::Config::default())
    }

    /// [`AppState::open`] with the log's own settings (a storage backend
    /// that injects faults, in tests); `segment_entries` is `config`'s.
    pub fn open_with_storage(
        config: ServeConfig,
        log_key: LogKey,
        clock: Arc<dyn Clock>,
        storage: ledger::Config,
    ) -> anyhow::Result<AppState> {
        let storage = ledger::Config {
            segment_entries: config.segment_entries,
            ..storage
        };
        // O(log n): the event state is caught up in the background
        // (`checks::load_event_state`), so the server listens at once and
        // serves checked reads, proofs and checkpoints meanwhile; writes
        // answer 503 `ledger_unavailable` until it is done.
        let events = EventLog::open_deferred(
            &config.data_dir,
            storage,
            log_key.event_signing_key(),
            Arc::clone(&clock),
        )?;
        events.set_origin(log_key.origin(), config.sigstore_allow_synthetic_root);
        let settings = Settings {
            window_seconds: i64::from(config.window_days) * 24 * 3600,
            ..Settings::default()
        };
        // The projection is loaded in the background by `start_verify`
        // (its checkpoint is decoded whole: about 1 s at 10M entries), so
        // the server listens, takes writes and serves proofs meanwhile.
        // Numbers wait for it as they wait for the verify.
        events
            .check_ledger_key()
            .map_err(|e| anyhow::anyhow!("refusing to serve: {e}"))?;
        let projector = Projector::empty(settings);
        let projection_ready = ProjectionReady::default();
        let inflight = tokio::sync::Semaphore::new(config.max_concurrent_requests.max(1));
        let metrics = Metrics::new();
        let projection_key = projections::driver::seal_key(&log_key.event_signing_key());
        let verified_key = crate::server::verifying::seal_key(&log_key.event_signing_key());
        let policy = match &config.witness_policy {
            None => None,
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
                let p = anchors::Policy::parse(&text)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
                p.allows_log(log_key.verifier_key())
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
                if let Some(w) = p.witnesses().iter().find(|w| w.url.is_none()) {
                    anyhow::bail!(
                        "{}: witness `{}` has no URL to submit checkpoints to",
                        path.display(),
                        w.name
                    );
                }
                Some(p)
            }
        };
        let readers = match &config.readers_file {
            Some(path) => crate::readers::Readers::load(path)?,
            None => crate::readers::Readers::default(),
        };
        // Read at start: a bad anchoring key or trusted root refuses the
        // start rather than the first anchor.
        if config.rekor_url.is_none() && (config.tsa_url.is_some() || config.rekor_version != 1) {
            anyhow::bail!("rekor_version and tsa_url go with rekor_url");
        }
        let rekor = match (&config.rekor_url, &config.rekor_key_file) {
            (None, _) => None,
            (Some(_), None) => anyhow::bail!("rekor_url needs rekor_key_file (the anchoring key)"),
            (Some(url), Some(key)) => {
                let mut r = crate::rekor::Rekor::new(
                    url.clone(),
                    crate::rekor::read_key(key)?,
                    crate::rekor::trust_root(config.sigstore_root.as_deref())?,
                );
                r.api =
                    crate::rekor::RekorApi::of(config.rekor_version, config.tsa_url.as_deref())?;
                Some(r)
            }
        };
        let witnessed = policy.as_ref().and_then(|p| {
            crate::server::witnessing::load_witnessed(events.ledger(), p, log_key.verifier_key())
        });
        let tile_cache = crate::server::routes::tiles::TileCache::new(
            config.tile_cache_mb.saturating_mul(1 << 20),
        );
        Ok(AppState {
            events,
            projector: Mutex::new(projector),
            projection_ready,
            projection_key,
            verified_key,
            projection_from_checkpoint: std::sync::atomic::AtomicBool::new(false),
            derived_checked: AtomicI64::new(VERIFY_RUNNING),
            log_key,
            clock,
            config,
            metrics,
            verify_status: AtomicI64::new(VERIFY_RUNNING),
            verify_detail: Mutex::new("verification has not finished".into()),
            inflight,
            checkpoint_cache: Mutex::new((u64::MAX, String::new())),
            saved_at: AtomicU64::new(u64::MAX),
            state_saved_at: AtomicU64::new(0),
            tail_signed: std::sync::atomic::AtomicBool::new(false),
            anchored_at: AtomicU64::new(u64::MAX),
            request_counter: AtomicU64::new(0),
            request_prefix: format!("{:08x}", rand::random::<u32>()),
            witnessed: Mutex::new(witnessed),
            policy,
            readers,
            rekor,
            witness_sizes: Mutex::new(std::collections::BTreeMap::new()),
            verified: Mutex::new(None),
            walking: Mutex::new(()),
            walked_all: std::sync::atomic::AtomicBool::new(false),
            tile_cache,
            leaf_base64: ledger::kept::Kept::new(
                ledger::Ledger::<events::EventSequencer>::PROVEN_ENTRIES,
            ),
        })
    }

    /// A signed checkpoint note for `(size, root)`, cached per size.
    pub fn checkpoint(&self, size: u64, root: &Hash) -> Result<String, ApiError> {
        let mut cache = self
            .checkpoint_cache
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if cache.0 == size {
            return Ok(cache.1.clone());
        }
        let note = self
            .log_key
            .sign_checkpoint(size, root)
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        *cache = (size, note.clone());
        Ok(note)
    }

    /// Marks the log unverified for good, with `detail` as the reason:
    /// numbers are withheld (503 `log_unverified`).
    pub(crate) fn withhold_numbers(&self, detail: String) {
        *self.verify_detail.lock().unwrap_or_else(|p| p.into_inner()) = detail;
        self.verify_status.store(VERIFY_FAILED, Ordering::SeqCst);
    }

    /// Refuses what must never come from a log whose startup check failed:
    /// proofs and checkpoints (built from stored hashes the check found
    /// wrong) and writes (which would extend it). Checked reads of entries
    /// are still served: each is re-hashed against its stored leaf hash.
    pub(crate) fn refuse_if_failed(&self) -> Result<(), ApiError> {
        match self.verify_status.load(Ordering::SeqCst) {
            VERIFY_FAILED => self.answer(VERIFY_FAILED),
            _ => Ok(()),
        }
    }

    /// The answer for a check in `status`: go on, still running (503
    /// `log_verifying`), or failed (503 `log_unverified`, the reason logged).
    pub(crate) fn answer(&self, status: i64) -> Result<(), ApiError> {
        match status {
            VERIFY_OK => Ok(()),
            VERIFY_RUNNING => Err(ApiError::LogVerifying),
            _ => Err(ApiError::LogUnverified(
                self.verify_detail
                    .lock()
                    .map(|d| d.clone())
                    .unwrap_or_default(),
            )),
        }
    }

    /// Refuses writes once the committer has stopped (it never should: a
    /// storage panic inside a batch is caught there), so that a halt is
    /// an answer that says so, not a queue that never drains.
    pub(crate) fn refuse_if_halted(&self) -> Result<(), ApiError> {
        if self.events.ledger().committer_running() {
            Ok(())
        } else {
            Err(ApiError::WritesHalted(
                "the committer thread has stopped; restart the server".into(),
            ))
        }
    }

    /// Refuses to sign anything built from derived state (a recommendation,
    /// a bundle attestation) until [`deep_check`] has passed.
    pub(crate) fn require_derived_checked(&self) -> Result<(), ApiError> {
        self.require_verified()?;
        self.answer(self.derived_checked.load(Ordering::SeqCst))
    }

    /// 503 `ledger_unavailable` at once while a start opens the lookups by
    /// leaf hash and envelope id (a lookup would wait for them on a runtime
    /// thread), and for good if opening them failed.
    pub(crate) fn refuse_until_lookups_open(&self) -> Result<(), ApiError> {
        match self.events.lookups_refusal() {
            None => Ok(()),
            Some(rejection) => Err(ApiError::Rejected {
                rejection,
                recorded: None,
            }),
        }
    }

    pub(crate) fn require_verified(&self) -> Result<(), ApiError> {
        self.answer(self.verify_status.load(Ordering::SeqCst))
    }

    /// Saves the event-state snapshot when the log has grown by
    /// `state_snapshot_entries` since the last one: what bounds the tail a
    /// start after a crash replays before it takes writes. Only once the
    /// background check has verified the signatures the start skipped (the
    /// rest of that check need not have finished: it replays the log from
    /// the first entry up to the snapshot this start resumed from, so a
    /// newer snapshot launders nothing). Returns whether it saved.
    pub fn save_state_if_behind(&self) -> bool {
        let every = self.config.state_snapshot_entries;
        let size = self.events.ledger().head().size;
        let last = self.state_saved_at.load(Ordering::SeqCst);
        if every == 0
            || size.saturating_sub(last) < every
            || !self.tail_signed.load(Ordering::SeqCst)
            || self.derived_checked.load(Ordering::SeqCst) == VERIFY_FAILED
            || self.verify_status.load(Ordering::SeqCst) == VERIFY_FAILED
        {
            return false;
        }
        match self.events.save_state() {
            Ok(Some(at)) => {
                self.state_saved_at.store(at, Ordering::SeqCst);
                true
            }
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(error = %e, "could not save the event-state snapshot");
                false
            }
        }
    }

    /// Saves the derived state that makes the next start fast: the
    /// projection checkpoint and the event-state snapshot. Both are
    /// rebuildable from the log and never hashed into it. Skipped when the
    /// log has not grown since the last complete save: both are encoded
    /// whole, which at 10M entries is seconds of work and gigabytes of
    /// writes. Returns whether it saved.
    pub fn save_derived(&self) -> bool {
        let size = self.events.ledger().head().size;
        if self.saved_at.load(Ordering::SeqCst) == size {
            return false;
        }
        let mut complete = true;
        let mut after_commitment = 0;
        if self.verify_status.load(Ordering::SeqCst) != VERIFY_OK {
            // A log that failed a check takes no entry (a commitment) and
            // gets nothing re-sealed over it.
            return false;
        }
        if self.derived_checked.load(Ordering::SeqCst) != VERIFY_OK {
            // Never save derived state the background check has not
            // confirmed: it would re-seal whatever this start loaded.
            return false;
        }
        if !self.projection_ready.loaded() {
            // Never overwrite a good checkpoint with the placeholder (and
            // never wait for a startup check still running: a shutdown
            // then saves what it can).
            complete = false;
        } else {
            let mut p = self.projector();
            // Saved at a state commitment, so that the next start checks it
            // against the log's own commitment rather than a rebuild; when
            // the log takes no commitment (storage read-only, writes
            // refused), saved where it stands, and rebuilt to check.
            match projections::driver::commit_state(
                &self.events,
                &mut p,
                &self.log_key.event_signing_key(),
                self.clock.now_micros(),
            ) {
                // The commitment is this save's own entry: without other
                // writes after it, the next save has nothing new.
                Ok(c) => after_commitment = c.index + 1,
                Err(e) => {
                    tracing::warn!(error = %e, "could not commit the state; the projection checkpoint is saved without a commitment")
                }
            }
            let started = std::time::Instant::now();
            match p.save(self.events.ledger(), &self.projection_key) {
                Ok(bytes) => tracing::info!(
                    size = p.projection().size(),
                    bytes,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "projection checkpoint saved"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "could not save the projection checkpoint");
                    complete = false;
                }
            }
        }
        match self.events.save_state() {
            Ok(Some(at)) => self.state_saved_at.store(at, Ordering::SeqCst),
            Ok(None) => complete = false,
            Err(e) => {
                tracing::warn!(error = %e, "could not save the event-state snapshot");
                complete = false;
            }
        }
        if complete {
            // The size read before saving (or just after the commitment
            // this save appended): if the head moved meanwhile, the next
            // save runs again.
            self.saved_at
                .store(size.max(after_commitment), Ordering::SeqCst);
        }
        true
    }
}
