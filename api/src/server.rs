//! The HTTP server. Each handler's doc comment names its route. Errors become
//! HTTP only in [`crate::error`].

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anchors::LogKey;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use events::{Clock, EventLog, SystemClock};
use ledger::Hash;
use projections::driver::Projector;
use projections::Settings;
use serde::Deserialize;
use utoipa::{IntoParams, OpenApi, ToSchema};

use crate::config::ServeConfig;
use crate::error::ApiError;
use crate::metrics::Metrics;
use verifier::wire::*;

/// Verification status of the served log.
pub const VERIFY_RUNNING: i64 = -1;
pub const VERIFY_FAILED: i64 = 0;
pub const VERIFY_OK: i64 = 1;

/// Whether the projection has been loaded: unset while loading, then
/// `true` (loaded) or `false` (it cannot be: numbers are withheld).
#[derive(Default)]
struct ProjectionReady {
    state: Mutex<Option<bool>>,
    changed: std::sync::Condvar,
}

impl ProjectionReady {
    fn set(&self, loaded: bool) {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = Some(loaded);
        self.changed.notify_all();
    }

    /// Whether the load has ended and loaded (never waits).
    fn loaded(&self) -> bool {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) == Some(true)
    }

    /// Waits until the load has ended; whether it loaded.
    fn wait(&self) -> bool {
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
    projection_ready: ProjectionReady,
    pub log_key: LogKey,
    /// Seals the saved projection checkpoint ([`projections::driver::seal_key`]).
    projection_key: [u8; 32],
    /// Whether the loaded projection came from its sealed checkpoint (and
    /// so still has to be confirmed by [`deep_check`]).
    projection_from_checkpoint: std::sync::atomic::AtomicBool,
    /// [`deep_check`]'s status: `VERIFY_RUNNING`, `VERIFY_OK` or
    /// `VERIFY_FAILED`.
    pub derived_checked: AtomicI64,
    pub clock: Arc<dyn Clock>,
    pub config: ServeConfig,
    pub metrics: Metrics,
    pub verify_status: AtomicI64,
    pub verify_detail: Mutex<String>,
    inflight: tokio::sync::Semaphore,
    checkpoint_cache: Mutex<(u64, String)>,
    /// The head size at the last complete save of derived state
    /// (`u64::MAX` before the first).
    saved_at: AtomicU64,
    /// The head size right after the last anchor was published (or found
    /// at startup); `u64::MAX` before one.
    anchored_at: AtomicU64,
    request_counter: AtomicU64,
    request_prefix: String,
}

pub type Shared = Arc<AppState>;

impl AppState {
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
    /// that injects faults, in tests).
    pub fn open_with_storage(
        config: ServeConfig,
        log_key: LogKey,
        clock: Arc<dyn Clock>,
        storage: ledger::Config,
    ) -> anyhow::Result<AppState> {
        let events = EventLog::open_degraded(
            &config.data_dir,
            storage,
            log_key.event_signing_key(),
            Arc::clone(&clock),
        )?;
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
        let damage = events.replay_error().map(str::to_owned);
        let projector = Projector::empty(settings);
        let projection_ready = ProjectionReady::default();
        if damage.is_some() {
            // Damage the state snapshot let the open skip (an entry before
            // the snapshot) surfaces here or in the background verify; either
            // way the server starts, serves checked reads, and never numbers.
            projection_ready.set(false);
        }
        let inflight = tokio::sync::Semaphore::new(config.max_concurrent_requests.max(1));
        let metrics = Metrics::new();
        if let Some(why) = events.snapshot_refused() {
            metrics.count_derived_mismatch();
            tracing::error!(reason = %why, "derived state does not match the log");
        }
        let projection_key = projections::driver::seal_key(&log_key.event_signing_key());
        Ok(AppState {
            events,
            projector: Mutex::new(projector),
            projection_ready,
            projection_key,
            projection_from_checkpoint: std::sync::atomic::AtomicBool::new(false),
            derived_checked: AtomicI64::new(VERIFY_RUNNING),
            log_key,
            clock,
            config,
            metrics,
            verify_status: AtomicI64::new(if damage.is_some() {
                VERIFY_FAILED
            } else {
                VERIFY_RUNNING
            }),
            verify_detail: Mutex::new(
                damage.unwrap_or_else(|| "verification has not finished".into()),
            ),
            inflight,
            checkpoint_cache: Mutex::new((u64::MAX, String::new())),
            saved_at: AtomicU64::new(u64::MAX),
            anchored_at: AtomicU64::new(u64::MAX),
            request_counter: AtomicU64::new(0),
            request_prefix: format!("{:08x}", rand::random::<u32>()),
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
    fn withhold_numbers(&self, detail: String) {
        *self.verify_detail.lock().unwrap_or_else(|p| p.into_inner()) = detail;
        self.verify_status.store(VERIFY_FAILED, Ordering::SeqCst);
    }

    /// Refuses what must never come from a log whose startup check failed:
    /// proofs and checkpoints (built from stored hashes the check found
    /// wrong) and writes (which would extend it). Checked reads of entries
    /// are still served: each is re-hashed against its stored leaf hash.
    fn refuse_if_failed(&self) -> Result<(), ApiError> {
        match self.verify_status.load(Ordering::SeqCst) {
            VERIFY_FAILED => self.answer(VERIFY_FAILED),
            _ => Ok(()),
        }
    }

    /// The answer for a check in `status`: go on, still running (503
    /// `log_verifying`), or failed (503 `log_unverified`, the reason logged).
    fn answer(&self, status: i64) -> Result<(), ApiError> {
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
    fn refuse_if_halted(&self) -> Result<(), ApiError> {
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
    fn require_derived_checked(&self) -> Result<(), ApiError> {
        self.require_verified()?;
        self.answer(self.derived_checked.load(Ordering::SeqCst))
    }

    fn require_verified(&self) -> Result<(), ApiError> {
        self.answer(self.verify_status.load(Ordering::SeqCst))
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
            let p = self.projector.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(e) = p.save(self.events.ledger(), &self.projection_key) {
                tracing::warn!(error = %e, "could not save the projection checkpoint");
                complete = false;
            }
        }
        match self.events.save_state() {
            Ok(Some(_)) => {}
            Ok(None) => complete = false,
            Err(e) => {
                tracing::warn!(error = %e, "could not save the event-state snapshot");
                complete = false;
            }
        }
        if complete {
            // The size read before saving: if the head moved meanwhile,
            // the next save runs again.
            self.saved_at.store(size, Ordering::SeqCst);
        }
        true
    }
}

/// Loads the projection into `state.projector`: the saved checkpoint only
/// if its seal verifies and the log has its root (a byte flip cannot pass
/// that), otherwise a fold from the first entry. A refused checkpoint is
/// counted (`ledger_derived_state_mismatches_total`) and logged. A
/// checkpoint that opened is checked against a rebuild from the log by
/// [`deep_check`] before anything is signed.
fn load_projection(state: &AppState) -> Result<(), String> {
    let started = Instant::now();
    let log = state.events.ledger();
    let settings = state
        .projector
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .settings()
        .clone();
    let (opened, resumed) = Projector::open(log, settings, &state.projection_key)
        .map_err(|e| format!("the projection cannot be loaded: {e}"))?;
    if let projections::driver::Resumed::Refused(m) = &resumed {
        state.metrics.count_derived_mismatch();
        tracing::error!(error = %m, "derived state does not match the log; the projection was rebuilt from the log");
    }
    let from_checkpoint = matches!(resumed, projections::driver::Resumed::At(_));
    state
        .projection_from_checkpoint
        .store(from_checkpoint, Ordering::SeqCst);
    *state.projector.lock().unwrap_or_else(|p| p.into_inner()) = opened;
    tracing::info!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        from_checkpoint,
        "projection loaded"
    );
    Ok(())
}

/// The projection resumed from a sealed checkpoint, checked against one
/// folded from the first entry ([`Projector::confirm`]); the rebuilt one
/// replaces it either way, and a disagreement is counted and logged.
fn confirm_projection(state: &AppState) -> Result<(), String> {
    if !state.projection_from_checkpoint.load(Ordering::SeqCst) {
        return Ok(());
    }
    let started = Instant::now();
    let log = state.events.ledger();
    let settings = state
        .projector
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .settings()
        .clone();
    let mut rebuilt = Projector::rebuild(log, settings)
        .map_err(|e| format!("the projection cannot be rebuilt: {e}"))?;
    // Compared on a copy, so views (and a shutdown's save) are not held up.
    let mut resumed = state
        .projector
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    match resumed.confirm(&mut rebuilt, log, state.clock.now_micros()) {
        Ok(()) => tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            "the saved projection agrees with the log"
        ),
        Err(projections::driver::DriverError::Mismatch(m)) => {
            state.metrics.count_derived_mismatch();
            tracing::error!(error = %m, "derived state does not match the log; serving the projection rebuilt from the log");
        }
        Err(e) => return Err(format!("the projection cannot be checked: {e}")),
    }
    drop(resumed);
    let mut live = state.projector.lock().unwrap_or_else(|p| p.into_inner());
    rebuilt
        .catch_up(log)
        .map_err(|e| format!("the projection cannot be caught up: {e}"))?;
    *live = rebuilt;
    Ok(())
}

/// The full verify of the log, then the check against every anchor.
fn verify_log(state: &AppState) -> Result<(), String> {
    let started = Instant::now();
    let v = state
        .events
        .ledger()
        .verify_full(&mut |_, _| {})
        .map_err(|e| e.to_string())?;
    tracing::info!(
        size = v.size,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "log verified"
    );
    let n = check_anchors(state).map_err(|e| {
        state.metrics.count_anchor_failure();
        format!("anchors: {e}")
    })?;
    tracing::info!(anchors = n, "the log is consistent with every anchor");
    Ok(())
}

/// The event-state snapshot this start resumed from, checked against a
/// replay of the log ([`EventLog::check_snapshot`]).
fn check_event_state(state: &AppState) -> Result<(), String> {
    if let Some(size) = state
        .events
        .check_snapshot()
        .inspect_err(|_| state.metrics.count_derived_mismatch())?
    {
        tracing::info!(size, "the event-state snapshot agrees with the log");
    }
    Ok(())
}

/// Runs `f`, a panic becoming an error naming `what`.
fn unpanicked(what: &str, f: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|_| Err(format!("{what} panicked")))
}

/// What readiness needs, before any number is served: the full verify of
/// the log and its anchors on this thread, and the projection loaded
/// ([`load_projection`]) on a second one. Projections are withheld (503
/// `log_verifying`) until both have passed, and for good (503
/// `log_unverified`, with the reason) if either fails. Returns whether the
/// server is ready.
pub fn ready_check(state: &AppState) -> bool {
    let (verified, loaded) = std::thread::scope(|s| {
        let loading = std::thread::Builder::new()
            .name("ledger-projection".into())
            .spawn_scoped(s, || {
                unpanicked("loading the projection", || load_projection(state))
            });
        let verified = unpanicked("the startup check", || verify_log(state));
        let loaded = match loading {
            Ok(h) => h
                .join()
                .unwrap_or_else(|_| Err("loading the projection panicked".into())),
            Err(e) => Err(format!("cannot start the projection thread: {e}")),
        };
        (verified, loaded)
    });
    match verified.and(loaded) {
        Ok(()) => {
            state.projection_ready.set(true);
            // A status already failed (the log did not replay at open)
            // stays failed.
            state
                .verify_status
                .compare_exchange(
                    VERIFY_RUNNING,
                    VERIFY_OK,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                )
                .is_ok()
        }
        Err(e) => {
            tracing::error!(error = %e, "the startup check FAILED; numbers, proofs and writes withheld");
            state.withhold_numbers(e);
            state.projection_ready.set(false);
            false
        }
    }
}

/// What the server checks in the background once it is ready, before it
/// signs anything built from derived state: the lookup tables against the
/// entries, the event-state snapshot against a replay of the log's rules,
/// and a projection resumed from its checkpoint against one folded from
/// the first entry. Until it has passed, recommendations and bundles
/// answer 503 `log_verifying` (`ledger_derived_check_status` -1). A bad
/// lookup table or event state withholds numbers, proofs and writes for
/// good (503 `log_unverified`); a disagreeing projection is replaced by the
/// rebuilt one and counted.
pub fn deep_check(state: &AppState) {
    let started = Instant::now();
    let result = unpanicked("the background check", || {
        state
            .events
            .ledger()
            .verify_indexes(&mut |_, _| {})
            .map_err(|e| format!("lookup tables: {e}"))?;
        tracing::info!("the lookup tables agree with the log");
        check_event_state(state)?;
        confirm_projection(state)
    });
    match result {
        Ok(()) => {
            tracing::info!(
                elapsed_ms = started.elapsed().as_millis() as u64,
                "derived state checked against the log"
            );
            state.derived_checked.store(VERIFY_OK, Ordering::SeqCst);
        }
        Err(e) => {
            tracing::error!(error = %e, "derived state cannot be trusted; numbers, proofs and writes withheld");
            state.derived_checked.store(VERIFY_FAILED, Ordering::SeqCst);
            state.withhold_numbers(e);
        }
    }
}

/// [`ready_check`], then (when it passed) [`deep_check`].
pub fn startup_check(state: &AppState) {
    if ready_check(state) {
        deep_check(state);
    }
}

/// Runs [`startup_check`] in the background.
pub fn start_verify(state: &Shared) {
    if state.verify_status.load(Ordering::SeqCst) == VERIFY_FAILED {
        return;
    }
    let st = Arc::clone(state);
    let spawned = std::thread::Builder::new()
        .name("ledger-verify".into())
        .spawn(move || startup_check(&st));
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start the verify thread; refusing projections");
        state.withhold_numbers(format!("cannot start the verify thread: {e}"));
        state.projection_ready.set(false);
    }
}

/// The verifier keys anchors may be signed with: the current log key and
/// any earlier ones configured after a rotation.
pub fn trusted_keys(state: &AppState) -> Vec<String> {
    let mut keys = vec![state.log_key.verifier_key().to_owned()];
    keys.extend(state.config.anchor_keys.iter().cloned());
    keys
}

/// The log at one head: the anchor check reads size and root once, so a
/// write landing meanwhile cannot pair one head's size with another's root.
struct AtHead<'a> {
    log: &'a ledger::Ledger<events::EventSequencer>,
    head: ledger::Head,
}

impl anchors::LogAccess for AtHead<'_> {
    fn size(&self) -> u64 {
        self.head.size
    }
    fn root(&self) -> Hash {
        self.head.root
    }
    fn consistency_proof(&self, old: u64, new: u64) -> Result<Vec<Hash>, String> {
        self.log
            .consistency_proof(old, new)
            .map_err(|e| e.to_string())
    }
}

/// Checks the log against every anchor in the anchors directory (each
/// signed by a trusted key, and the head an extension of it); returns how
/// many were checked. Sets `ledger_last_anchor_timestamp_seconds` from the
/// newest anchor file. Run by the startup check, before the server is
/// ready.
pub fn check_anchors(state: &AppState) -> Result<usize, String> {
    let dir = state.config.anchors_path();
    let found = anchors::anchor::read_dir(&dir).map_err(|e| e.to_string())?;
    let log = state.events.ledger();
    let at = AtHead {
        log,
        head: log.head(),
    };
    let checked = anchors::check_anchors(&at, &found, &trusted_keys(state), state.log_key.origin())
        .map_err(|e| e.to_string())?;
    if let (Some(newest), Some(cp)) = (found.last(), checked.last()) {
        let modified = std::fs::metadata(dir.join(&newest.name))
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
        if let Some(t) = modified {
            state.metrics.last_anchor.set(t.as_secs() as i64);
        }
        // The log was already anchored here: an idle log is not anchored
        // again. The newest anchor covers the head, or everything but its
        // own `anchor.published` entry.
        if at.head.size == cp.size || (at.head.size == cp.size + 1 && records_anchor(log, cp.size))
        {
            state.anchored_at.store(at.head.size, Ordering::SeqCst);
        }
    }
    Ok(checked.len())
}

/// Whether entry `index` is the `anchor.published` record of an anchor at
/// size `index`.
fn records_anchor(log: &ledger::Ledger<events::EventSequencer>, index: u64) -> bool {
    log.entry(index)
        .ok()
        .and_then(|e| events::decode_leaf(&e.leaf).ok())
        .is_some_and(|(d, _)| {
            matches!(&d.payload.event,
                events::Event::AnchorPublished(a) if a.checkpoint.size == index)
        })
}

/// Signs a checkpoint at the head, publishes it to the anchors directory,
/// and records an `anchor.published` event signed with the ledger's key.
/// Returns where the anchor went.
pub fn publish_anchor(state: &AppState) -> anyhow::Result<String> {
    let now = state.clock.now_micros();
    let published = crate::anchor::publish(
        &state.events,
        &state.log_key,
        &state.config.anchors_path(),
        now,
    )?;
    state.metrics.last_anchor.set(now.div_euclid(1_000_000));
    // Anchored: everything before the anchor's own entry. A write that
    // landed meanwhile, after it, is anchored by the next tick.
    state
        .anchored_at
        .store(published.recorded_at + 1, Ordering::SeqCst);
    Ok(published.location)
}

/// One tick of the anchor schedule: publishes an anchor when the log is
/// verified (never anchor a log that failed its check) and has grown since
/// the last anchor. Returns where it went, if it published.
pub fn anchor_tick(state: &AppState) -> anyhow::Result<Option<String>> {
    if state.verify_status.load(Ordering::SeqCst) != VERIFY_OK {
        return Ok(None);
    }
    if state.events.ledger().head().size == state.anchored_at.load(Ordering::SeqCst) {
        return Ok(None);
    }
    publish_anchor(state).map(Some)
}

fn hexh(h: &Hash) -> String {
    ledger::hash::hex32(&h.0)
}

fn parse_hash(field: &str, s: &str) -> Result<Hash, ApiError> {
    ledger::hash::parse_hex32(s)
        .map(Hash)
        .ok_or_else(|| ApiError::param(field, "must be 64 hex digits"))
}

// Numeric query parameters are taken as text and parsed strictly, so that
// an empty or malformed value (`?limit=`) is a 400, never silently "absent".

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// First index (default 0).
    #[param(value_type = Option<u64>, minimum = 0)]
    pub start: Option<String>,
    /// Entries per page, 1–1000 (default 100).
    #[param(value_type = Option<u64>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct InclusionQuery {
    /// The entry index (or give `leaf_hash`).
    #[param(value_type = Option<u64>, minimum = 0)]
    pub index: Option<String>,
    /// Hex leaf hash (instead of `index`).
    pub leaf_hash: Option<String>,
    /// Tree size to prove against (default: the current size).
    #[param(value_type = Option<u64>, minimum = 1)]
    pub tree_size: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ConsistencyQuery {
    /// The older tree size.
    #[param(value_type = u64, minimum = 0)]
    pub first: String,
    /// The newer tree size (default: the current size).
    #[param(value_type = Option<u64>, minimum = 0)]
    pub second: Option<String>,
}

fn num(field: &str, v: &Option<String>) -> Result<Option<u64>, ApiError> {
    match v {
        None => Ok(None),
        Some(s) => match s.parse::<u64>() {
            // The OpenAPI type is int64: values above 2^63 - 1 are out of range.
            Ok(n) if n <= i64::MAX as u64 => Ok(Some(n)),
            _ => Err(ApiError::param(
                field,
                "must be an integer from 0 to 2^63 - 1",
            )),
        },
    }
}

fn receipt(
    state: &AppState,
    r: &ledger::Receipt<events::Accepted>,
) -> Result<WriteReceipt, ApiError> {
    let a = &r.appended;
    let proof = state
        .events
        .ledger()
        .inclusion_proof(a.index, a.tree_size)?;
    let checkpoint = state.checkpoint(a.tree_size, &a.root)?;
    Ok(receipt_at(r, (a.tree_size, &a.root), &proof, checkpoint))
}

/// The receipt of `r` proven in the tree `(size, root)`, which holds it:
/// `proof` is the inclusion proof there and `checkpoint` the signed note.
fn receipt_at(
    r: &ledger::Receipt<events::Accepted>,
    (tree_size, root): (u64, &Hash),
    proof: &[Hash],
    checkpoint: String,
) -> WriteReceipt {
    let a = &r.appended;
    WriteReceipt {
        index: a.index,
        leaf_hash: hexh(&a.leaf_hash),
        chain_hash: hexh(&a.chain_hash),
        tree_size,
        root: hexh(root),
        inclusion_proof: proof.iter().map(hexh).collect(),
        checkpoint,
        id: r.accepted.id.clone(),
        kind: r.accepted.kind.as_str().to_owned(),
        existing: r.existing,
        sequenced_at: events::envelope::format_micros(r.accepted.sequenced_at),
    }
}

fn json_body(headers: &HeaderMap, body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mime = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if mime != "application/json" {
        return Err(ApiError::UnsupportedMediaType);
    }
    body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge
        } else {
            ApiError::param("body", "the request body could not be read")
        }
    })
}

/// `POST /v1/events`: append one signed event.
#[utoipa::path(post, path = "/v1/events", tag = "writes", request_body(content = EnvelopeBody, content_type = "application/json"),
    responses(
        (status = 201, description = "Appended; durable before this response", body = WriteReceipt),
        (status = 200, description = "Already in the log (idempotent re-post); nothing appended", body = WriteReceipt),
        (status = 400, description = "Malformed envelope or payload", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Unknown signer or bad signature", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Role, revocation, or tier.apply (recorded)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Conflict (id reused, already exists, capability spent)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A domain rule refused the event", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Overloaded or timed out; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn post_event(
    State(state): State<Shared>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = json_body(&headers, body)?;
    state.refuse_if_failed()?;
    state.refuse_if_halted()?;
    let started = Instant::now();
    let pending = state.events.submit(&body)?;
    let r = pending.wait_async().await?;
    state
        .metrics
        .append_latency
        .observe(started.elapsed().as_secs_f64());
    let rc = receipt(&state, &r)?;
    let status = if r.existing {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(rc)).into_response())
}

/// The most envelopes one `POST /v1/events/batch` takes.
pub const MAX_BATCH: usize = 1000;

/// The body of `POST /v1/events/batch`: a JSON array of 1 to 1,000 items,
/// each a DSSE envelope as `POST /v1/events` takes it (`EnvelopeBody`).
/// Each item is judged alone: one that is not an envelope is refused in its
/// own result (400 `malformed_envelope`) and the others still go in.
#[derive(ToSchema)]
#[schema(value_type = Vec<serde_json::Value>, min_items = 1, max_items = 1000)]
pub struct BatchBody(pub Vec<serde_json::Value>);

/// `POST /v1/events/batch`: many signed events in one request.
#[utoipa::path(post, path = "/v1/events/batch", tag = "writes", request_body(content = BatchBody, content_type = "application/json"),
    responses(
        (status = 200, description = "One result per envelope, in order: a receipt (201 or 200) or a problem document. Every receipt is proven in the same checkpoint", body = BatchResponse),
        (status = 400, description = "The body is not a JSON array of 1 to 1,000 items (nothing appended)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Overloaded or timed out; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn post_events_batch(
    State(state): State<Shared>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<BatchResponse>, ApiError> {
    let body = json_body(&headers, body)?;
    state.refuse_if_failed()?;
    state.refuse_if_halted()?;
    let started = Instant::now();
    // One batch's checks are split across the cores only while the server
    // has no more requests than cores in hand; when it has, they are
    // already busy with other requests, and splitting would only add threads.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = if state.requests_in_flight() > cores {
        1
    } else {
        cores
    };
    let st = Arc::clone(&state);
    // Parsed on the blocking thread, into envelopes borrowed from the body.
    let pending = tokio::task::spawn_blocking(move || {
        let items: Vec<&serde_json::value::RawValue> = serde_json::from_slice(&body)
            .map_err(|_| ApiError::param("body", "must be a JSON array of DSSE envelopes"))?;
        if items.is_empty() || items.len() > MAX_BATCH {
            return Err(ApiError::param(
                "body",
                format!("must hold 1 to {MAX_BATCH} envelopes, not {}", items.len()),
            ));
        }
        let raw: Vec<&[u8]> = items.iter().map(|i| i.get().as_bytes()).collect();
        Ok(st.events.submit_many(&raw, threads))
    })
    .await
    .map_err(|e| ApiError::Internal(format!("batch verification: {e}")))??;
    let mut outcomes = Vec::with_capacity(pending.len());
    for p in pending {
        outcomes.push(match p {
            Ok(p) => p.wait_async().await.map_err(ApiError::from),
            Err(e) => Err(ApiError::from(e)),
        });
    }
    let elapsed = started.elapsed().as_secs_f64();
    for _ in outcomes.iter().filter(|o| o.is_ok()) {
        state.metrics.append_latency.observe(elapsed);
    }
    let st = Arc::clone(&state);
    tokio::task::spawn_blocking(move || batch_answer(&st, outcomes))
        .await
        .map_err(|e| ApiError::Internal(format!("batch receipts: {e}")))?
        .map(Json)
}

/// Receipts for a batch's acknowledged envelopes, all proven in the largest
/// tree any of them was acknowledged in, from one read snapshot and one
/// signed checkpoint.
fn batch_answer(
    state: &AppState,
    outcomes: Vec<Result<ledger::Receipt<events::Accepted>, ApiError>>,
) -> Result<BatchResponse, ApiError> {
    let acked: Vec<&ledger::Appended> = outcomes
        .iter()
        .filter_map(|o| o.as_ref().ok())
        .map(|r| &r.appended)
        .collect();
    let newest = acked
        .iter()
        .map(|a| (a.tree_size, a.root))
        .max_by_key(|(size, _)| *size);
    let (proofs, checkpoint) = match newest {
        Some((size, root)) => {
            let indices: Vec<u64> = acked.iter().map(|a| a.index).collect();
            let proofs = state.events.ledger().inclusion_proofs(&indices, size)?;
            (proofs, state.checkpoint(size, &root)?)
        }
        None => (Vec::new(), String::new()),
    };
    let mut proofs = proofs.into_iter();
    let mut appended = 0;
    let mut results = Vec::with_capacity(outcomes.len());
    for o in outcomes {
        results.push(match o {
            Ok(r) => {
                let (size, root) = newest.unwrap_or_default();
                let proof = proofs.next().unwrap_or_default();
                let rc = receipt_at(&r, (size, &root), &proof, checkpoint.clone());
                appended += u64::from(!r.existing);
                BatchItem {
                    status: if r.existing { 200 } else { 201 },
                    receipt: Some(rc),
                    problem: None,
                }
            }
            Err(e) => BatchItem {
                status: e.status().as_u16(),
                receipt: None,
                problem: Some(e.problem()),
            },
        });
    }
    Ok(BatchResponse {
        results,
        appended,
        tree_size: newest.map_or(0, |(size, _)| size),
    })
}

fn entry_view(e: ledger::Entry) -> Result<EntryView, ApiError> {
    let (d, at) = events::decode_leaf(&e.leaf)
        .map_err(|r| ApiError::LogCorrupt(format!("entry {}: {r}", e.index)))?;
    let payload = serde_json::from_slice(&d.payload_bytes).unwrap_or(serde_json::Value::Null);
    Ok(EntryView {
        index: e.index,
        leaf: B64.encode(&e.leaf),
        leaf_hash: hexh(&e.leaf_hash),
        chain_hash: hexh(&e.chain_hash),
        sequenced_at: events::envelope::format_micros(at),
        id: d.payload.id.clone(),
        kind: d.payload.event.kind().as_str().to_owned(),
        signer: d.keyid,
        payload,
    })
}

fn path_u64(p: Result<Path<u64>, PathRejection>, field: &str) -> Result<u64, ApiError> {
    p.map(|Path(v)| v)
        .map_err(|_| ApiError::param(field, "must be a non-negative integer"))
}

/// `GET /v1/entries/{index}`: one entry.
#[utoipa::path(get, path = "/v1/entries/{index}", tag = "reads", params(("index" = u64, Path, description = "Entry index")),
    responses((status = 200, body = EntryView), (status = 400, body = Problem, content_type = "application/problem+json"), (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn get_entry(
    State(state): State<Shared>,
    index: Result<Path<u64>, PathRejection>,
) -> Result<Json<EntryView>, ApiError> {
    let index = path_u64(index, "index")?;
    let size = state.events.ledger().head().size;
    if index >= size {
        return Err(ApiError::NotFound(format!(
            "no entry {index}; the log has {size}"
        )));
    }
    Ok(Json(entry_view(state.events.ledger().entry(index)?)?))
}

/// `GET /v1/entries?start=&limit=`: a page of entries.
#[utoipa::path(get, path = "/v1/entries", tag = "reads", params(PageQuery),
    responses((status = 200, body = EntryPage), (status = 400, body = Problem, content_type = "application/problem+json")))]
pub async fn get_entries(
    State(state): State<Shared>,
    q: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Json<EntryPage>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::param("query", e.body_text()))?;
    let limit = num("limit", &q.limit)?.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::param("limit", "must be between 1 and 1000"));
    }
    let start = num("start", &q.start)?.unwrap_or(0);
    let size = state.events.ledger().head().size;
    let end = start.saturating_add(limit).min(size);
    let entries = state
        .events
        .ledger()
        .entries(start, end)?
        .into_iter()
        .map(entry_view)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Json(EntryPage {
        entries,
        next: (end < size).then_some(end),
        tree_size: size,
    }))
}

/// `GET /v1/entries/by-id/{id}`: the entry with an envelope id.
#[utoipa::path(get, path = "/v1/entries/by-id/{id}", tag = "reads", params(("id" = String, Path, description = "Envelope id")),
    responses((status = 200, body = EntryView), (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn get_entry_by_id(
    State(state): State<Shared>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<EntryView>, ApiError> {
    let Path(id) = id.map_err(|_| ApiError::param("id", "must be a string"))?;
    let index = state
        .events
        .find_id(&id)
        .ok_or_else(|| ApiError::NotFound(format!("no envelope with id `{id}`")))?;
    Ok(Json(entry_view(state.events.ledger().entry(index)?)?))
}

/// `GET /v1/proofs/inclusion`: an RFC 6962 inclusion proof by index or leaf hash.
#[utoipa::path(get, path = "/v1/proofs/inclusion", tag = "proofs", params(InclusionQuery),
    responses((status = 200, body = InclusionProof), (status = 400, body = Problem, content_type = "application/problem+json"), (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn get_inclusion(
    State(state): State<Shared>,
    q: Result<Query<InclusionQuery>, QueryRejection>,
) -> Result<Json<InclusionProof>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::param("query", e.body_text()))?;
    state.refuse_if_failed()?;
    let log = state.events.ledger();
    let head = log.head();
    let tree_size = num("tree_size", &q.tree_size)?.unwrap_or(head.size);
    if tree_size == 0 || tree_size > head.size {
        return Err(ApiError::param(
            "tree_size",
            format!("must be between 1 and the current size {}", head.size),
        ));
    }
    let index = match (num("index", &q.index)?, q.leaf_hash) {
        (Some(i), None) => {
            if i >= tree_size {
                return Err(ApiError::param(
                    "index",
                    format!("must be below tree_size {tree_size}"),
                ));
            }
            i
        }
        (None, Some(h)) => {
            let h = parse_hash("leaf_hash", &h)?;
            let e = log
                .find_leaf(&h)?
                .ok_or_else(|| ApiError::NotFound("no entry has this leaf hash".into()))?;
            if e.index >= tree_size {
                return Err(ApiError::NotFound(format!(
                    "the entry is at index {}, not in a tree of size {tree_size}",
                    e.index
                )));
            }
            e.index
        }
        _ => {
            return Err(ApiError::param(
                "index",
                "give exactly one of index or leaf_hash",
            ))
        }
    };
    let (leaf_hash, root, proof) = log.inclusion_at(index, tree_size)?;
    Ok(Json(InclusionProof {
        index,
        tree_size,
        leaf_hash: hexh(&leaf_hash),
        root: hexh(&root),
        proof: proof.iter().map(hexh).collect(),
        checkpoint: state.checkpoint(tree_size, &root)?,
    }))
}

/// `GET /v1/proofs/consistency`: an RFC 6962 consistency proof between two sizes.
#[utoipa::path(get, path = "/v1/proofs/consistency", tag = "proofs", params(ConsistencyQuery),
    responses((status = 200, body = ConsistencyProof), (status = 400, body = Problem, content_type = "application/problem+json")))]
pub async fn get_consistency(
    State(state): State<Shared>,
    q: Result<Query<ConsistencyQuery>, QueryRejection>,
) -> Result<Json<ConsistencyProof>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::param("query", e.body_text()))?;
    state.refuse_if_failed()?;
    let log = state.events.ledger();
    let head = log.head();
    let second = num("second", &q.second)?.unwrap_or(head.size);
    let first = num("first", &Some(q.first.clone()))?.unwrap_or(0);
    if second > head.size {
        return Err(ApiError::param(
            "second",
            format!("must not exceed the current size {}", head.size),
        ));
    }
    if first > second {
        return Err(ApiError::param("first", "must not exceed second"));
    }
    let (r1, r2, proof) = log.consistency_at(first, second)?;
    Ok(Json(ConsistencyProof {
        first,
        second,
        first_root: hexh(&r1),
        second_root: hexh(&r2),
        proof: proof.iter().map(hexh).collect(),
        checkpoint: state.checkpoint(second, &r2)?,
    }))
}

/// `GET /checkpoint`: the latest C2SP checkpoint in a signed note (text/plain).
#[utoipa::path(get, path = "/checkpoint", tag = "proofs", responses((status = 200, content_type = "text/plain", body = String, description = "C2SP tlog-checkpoint in a signed note")))]
pub async fn get_checkpoint(State(state): State<Shared>) -> Result<Response, ApiError> {
    state.refuse_if_failed()?;
    let head = state.events.ledger().head();
    let note = state.checkpoint(head.size, &head.root)?;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], note).into_response())
}

/// `GET /v1/log/key`: the log's note verifier key (text/plain).
#[utoipa::path(get, path = "/v1/log/key", tag = "proofs", responses((status = 200, content_type = "text/plain", body = String)))]
pub async fn get_key(State(state): State<Shared>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{}\n", state.log_key.verifier_key()),
    )
        .into_response()
}

fn verify_status_name(v: i64) -> &'static str {
    match v {
        VERIFY_OK => "verified",
        VERIFY_RUNNING => "verifying",
        _ => "failed",
    }
}

/// `GET /v1/log`: origin, keys, size, root and verification status.
#[utoipa::path(get, path = "/v1/log", tag = "proofs", responses((status = 200, body = LogInfo)))]
pub async fn get_log(State(state): State<Shared>) -> Json<LogInfo> {
    let head = state.events.ledger().head();
    Json(LogInfo {
        origin: state.log_key.origin().to_owned(),
        verifier_key: state.log_key.verifier_key().to_owned(),
        ledger_key_id: events::key_id(&state.log_key.event_signing_key().verifying_key()),
        tree_size: head.size,
        root: hexh(&head.root),
        verify_status: verify_status_name(state.verify_status.load(Ordering::SeqCst)).to_owned(),
    })
}

/// `GET /v1/task-classes`: registered task classes and their tiers.
#[utoipa::path(get, path = "/v1/task-classes", tag = "projections", responses((status = 200, body = [TaskClassSummary]), (status = 503, body = Problem, content_type = "application/problem+json")))]
pub async fn get_task_classes(
    State(state): State<Shared>,
) -> Result<Json<Vec<TaskClassSummary>>, ApiError> {
    state.require_verified()?;
    Ok(Json(
        state
            .events
            .task_class_tiers()
            .into_iter()
            .map(|(task_class, tier)| TaskClassSummary {
                task_class,
                tier: tier.as_str().to_owned(),
            })
            .collect(),
    ))
}

fn projection_response(
    state: &AppState,
    view: projections::TaskClassView,
) -> Result<ProjectionResponse, ApiError> {
    let log = state.events.ledger();
    let root = parse_hash("root", &view.root)?;
    let indices: Vec<u64> = view.evidence.iter().map(|e| e.index).collect();
    let proven = log.entries_with_proofs(&indices, view.tree_size)?;
    // Nothing is served (or signed into a bundle) that does not follow from
    // the evidence it cites, re-read from the log.
    let leaves: Vec<&[u8]> = proven.iter().map(|(e, _)| e.leaf.as_slice()).collect();
    if let Some((e, _)) = proven
        .iter()
        .zip(&view.evidence)
        .find(|((entry, _), cited)| hexh(&entry.leaf_hash) != cited.leaf_hash)
        .map(|(p, _)| p)
    {
        return Err(ApiError::DerivedStateMismatch(format!(
            "evidence {} is not the entry the view names",
            e.index
        )));
    }
    projections::evidence::check_view(&view, &leaves).map_err(|e| {
        state.metrics.count_derived_mismatch();
        ApiError::DerivedStateMismatch(format!(
            "the view of `{}` does not follow from its evidence: {e}",
            view.task_class
        ))
    })?;
    let evidence = proven
        .into_iter()
        .zip(&view.evidence)
        .map(|((entry, proof), e)| EvidenceProof {
            index: e.index,
            leaf_hash: e.leaf_hash.clone(),
            leaf: B64.encode(&entry.leaf),
            proof: proof.iter().map(hexh).collect(),
        })
        .collect();
    Ok(ProjectionResponse {
        checkpoint: state.checkpoint(view.tree_size, &root)?,
        verifier_key: state.log_key.verifier_key().to_owned(),
        tree_size: view.tree_size,
        root: view.root.clone(),
        view,
        evidence,
    })
}

/// `GET /v1/task-classes/{name}`: the projection with its proof bundle.
#[utoipa::path(get, path = "/v1/task-classes/{name}", tag = "projections", params(("name" = String, Path, description = "Task class")),
    responses((status = 200, body = ProjectionResponse), (status = 404, body = Problem, content_type = "application/problem+json"), (status = 503, body = Problem, content_type = "application/problem+json", description = "Log verifying or failed verification: no numbers")))]
pub async fn get_task_class(
    State(state): State<Shared>,
    name: Result<Path<String>, PathRejection>,
) -> Result<Json<ProjectionResponse>, ApiError> {
    let Path(name) = name.map_err(|_| ApiError::param("name", "must be a string"))?;
    state.require_verified()?;
    let st = Arc::clone(&state);
    let resp = tokio::task::spawn_blocking(move || -> Result<ProjectionResponse, ApiError> {
        let view = {
            let mut p = st.projector.lock().unwrap_or_else(|p| p.into_inner());
            p.view_at_head(st.events.ledger(), &name, st.clock.now_micros())?
        };
        projection_response(&st, view)
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))??;
    Ok(Json(resp))
}

/// `GET /v1/task-classes/{name}/bundle`: an offline proof bundle of the
/// projection (canonical JSON with a signed attestation; `ledger
/// verify-bundle` checks it without a server).
#[utoipa::path(get, path = "/v1/task-classes/{name}/bundle", tag = "projections", params(("name" = String, Path, description = "Task class")),
    responses((status = 200, content_type = "application/json", body = Object, description = "{attestation, body}: see docs/API.md"), (status = 404, body = Problem, content_type = "application/problem+json"), (status = 503, body = Problem, content_type = "application/problem+json")))]
pub async fn get_bundle(
    State(state): State<Shared>,
    name: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    state.require_derived_checked()?;
    let Json(p) = get_task_class(State(Arc::clone(&state)), name).await?;
    let bytes = verifier::check::make_bundle(&state.log_key, &p)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(([(header::CONTENT_TYPE, "application/json")], bytes).into_response())
}

/// `POST /v1/recommendations`: post a signed promotion.requested envelope;
/// the ledger computes and appends a promotion.recommended event.
#[utoipa::path(post, path = "/v1/recommendations", tag = "writes", request_body(content = EnvelopeBody, content_type = "application/json"),
    responses(
        (status = 201, body = RecommendationResponse, description = "Recommendation appended (advisory; humans promote)"),
        (status = 200, body = RecommendationResponse, description = "This request was answered before"),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json"),
        (status = 413, body = Problem, content_type = "application/problem+json"),
        (status = 415, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 422, body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
pub async fn post_recommendation(
    State(state): State<Shared>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = json_body(&headers, body)?;
    state.require_derived_checked()?;
    let st = Arc::clone(&state);
    let (status, resp) = tokio::task::spawn_blocking(
        move || -> Result<(StatusCode, RecommendationResponse), ApiError> {
            let now = st.clock.now_micros();
            let rec = {
                let mut p = st.projector.lock().unwrap_or_else(|p| p.into_inner());
                projections::driver::recommend(
                    &st.events,
                    &mut p,
                    &st.log_key.event_signing_key(),
                    &body,
                    now,
                )?
            };
            let status = if rec.receipt.existing {
                StatusCode::OK
            } else {
                StatusCode::CREATED
            };
            Ok((
                status,
                RecommendationResponse {
                    recommendation: receipt(&st, &rec.receipt)?,
                    projection: projection_response(&st, rec.view)?,
                },
            ))
        },
    )
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))??;
    Ok((status, Json(resp)).into_response())
}

/// `GET /healthz`: the process is up.
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, description = "alive")))]
pub async fn healthz() -> &'static str {
    "ok\n"
}

/// `GET /readyz`: ready when the log has been verified.
#[utoipa::path(get, path = "/readyz", tag = "operations", responses((status = 200, description = "verified and serving"), (status = 503, body = Problem, content_type = "application/problem+json")))]
pub async fn readyz(State(state): State<Shared>) -> Result<&'static str, ApiError> {
    state.refuse_if_halted()?;
    state.require_verified().map(|()| "ready\n")
}

/// `GET /metrics`: Prometheus text exposition.
#[utoipa::path(get, path = "/metrics", tag = "operations", responses((status = 200, content_type = "application/openmetrics-text", body = String, description = "OpenMetrics / Prometheus text exposition")))]
pub async fn metrics(State(state): State<Shared>) -> Response {
    let body = state.metrics.render(&state);
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

/// `GET /openapi.json`: this API's OpenAPI 3.1 document.
#[utoipa::path(get, path = "/openapi.json", tag = "operations", responses((status = 200, content_type = "application/json", body = Object)))]
pub async fn openapi_json() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        openapi().to_json().unwrap_or_default(),
    )
        .into_response()
}

#[derive(OpenApi)]
#[openapi(
    info(title = "Evidence Ledger", description = "A tamper-evident, RFC 6962 Merkle log of an evaluation harness's trust decisions. Errors are application/problem+json with a stable `code` (docs/reject_codes.md, docs/API.md)."),
    paths(post_event, post_events_batch, post_recommendation, get_entry, get_entries, get_entry_by_id, get_inclusion, get_consistency, get_checkpoint, get_key, get_log, get_task_classes, get_task_class, get_bundle, healthz, readyz, metrics, openapi_json),
    components(schemas(Problem, WriteReceipt, BatchBody, BatchItem, BatchResponse, EntryView, EntryPage, InclusionProof, ConsistencyProof, LogInfo, TaskClassSummary, EvidenceProof, ProjectionResponse, RecommendationResponse, EnvelopeBody, EnvelopeSig)),
    tags((name = "writes"), (name = "reads"), (name = "proofs"), (name = "projections"), (name = "operations"))
)]
pub struct ApiDoc;

/// The OpenAPI document, with the list of every error code attached to the
/// Problem schema's description.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    let mut codes: Vec<String> = events::RejectCode::ALL
        .iter()
        .map(|c| format!("`{}`: {}", c.as_str(), c.description()))
        .collect();
    codes.extend(
        crate::error::API_CODES
            .iter()
            .map(|(c, d)| format!("`{c}`: {d}")),
    );
    if let Some(components) = doc.components.as_mut() {
        if let Some(utoipa::openapi::RefOr::T(utoipa::openapi::schema::Schema::Object(o))) =
            components.schemas.get_mut("Problem")
        {
            o.description = Some(format!(
                "RFC 9457 problem details. Codes:\n- {}",
                codes.join("\n- ")
            ));
        }
    }
    doc
}

async fn not_found() -> ApiError {
    ApiError::NotFound("no such route".into())
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

/// Request ids, read tokens, the concurrency limit and the time limit.
async fn guard(State(state): State<Shared>, req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 64 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_owned)
        .unwrap_or_else(|| {
            format!(
                "{}-{}",
                state.request_prefix,
                state.request_counter.fetch_add(1, Ordering::Relaxed)
            )
        });
    let path = req.uri().path().to_owned();
    let resp = async {
        if let Some(token) = &state.config.read_token {
            let open = matches!(path.as_str(), "/healthz" | "/readyz" | "/metrics");
            let is_read = req.method() == axum::http::Method::GET;
            let ok = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .is_some_and(|t| constant_time_eq(t.as_bytes(), token.as_bytes()));
            if is_read && !open && !ok {
                return ApiError::ReadTokenRequired.into_response();
            }
        }
        let Ok(_permit) = state.inflight.try_acquire() else {
            return ApiError::Overloaded.into_response();
        };
        match tokio::time::timeout(
            Duration::from_millis(state.config.request_timeout_ms),
            next.run(req),
        )
        .await
        {
            Ok(r) => r,
            Err(_) => ApiError::Timeout.into_response(),
        }
    }
    .await;
    let mut resp = resp;
    if let Some(crate::error::ErrorCode(code)) = resp.extensions().get::<crate::error::ErrorCode>()
    {
        state.metrics.count_error(code);
    }
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert("x-request-id", v);
    }
    resp
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The router.
pub fn router(state: Shared) -> Router {
    let limit = state.config.max_body_bytes;
    Router::new()
        .route("/v1/events", post(post_event))
        .route("/v1/events/batch", post(post_events_batch))
        .route("/v1/recommendations", post(post_recommendation))
        .route("/v1/entries", get(get_entries))
        .route("/v1/entries/{index}", get(get_entry))
        .route("/v1/entries/by-id/{id}", get(get_entry_by_id))
        .route("/v1/proofs/inclusion", get(get_inclusion))
        .route("/v1/proofs/consistency", get(get_consistency))
        .route("/checkpoint", get(get_checkpoint))
        .route("/v1/log", get(get_log))
        .route("/v1/log/key", get(get_key))
        .route("/v1/task-classes", get(get_task_classes))
        .route("/v1/task-classes/{name}", get(get_task_class))
        .route("/v1/task-classes/{name}/bundle", get(get_bundle))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi_json))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            guard,
        ))
        .with_state(state)
}

/// Warns when the log key file can be read by anyone but its owner: the
/// key signs checkpoints, and whoever reads it can sign a rewritten log.
pub fn warn_if_exposed(path: &std::path::Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        if let Ok(m) = std::fs::metadata(path) {
            let mode = m.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                tracing::warn!(
                    path = %path.display(),
                    mode = format!("{mode:o}"),
                    "the log key file can be read by other users; run `chmod 600` on it"
                );
                return true;
            }
        }
    }
    let _ = path;
    false
}

/// Opens the data directory and serves until `shutdown` resolves.
pub async fn serve(
    config: ServeConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let key_path = config.key_path();
    let key_text = std::fs::read_to_string(&key_path).map_err(|e| {
        anyhow::anyhow!(
            "cannot read the log key {}: {e}; run `ledger init --data-dir {}` first",
            key_path.display(),
            config.data_dir.display()
        )
    })?;
    warn_if_exposed(&key_path);
    let log_key = LogKey::from_private(&key_text)?;
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let state = Arc::new(AppState::open(config, log_key, Arc::new(SystemClock))?);
    tracing::info!(addr = %listener.local_addr()?, size = state.events.ledger().head().size, "serving");
    run(state, listener, shutdown).await
}

/// Runs `job` on a blocking thread every `period` (the first run one period
/// from now), until the returned task is aborted.
fn every(
    state: &Shared,
    period: Duration,
    job: impl Fn(&AppState) + Send + Sync + Copy + 'static,
) -> tokio::task::JoinHandle<()> {
    let state = Arc::clone(state);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.tick().await;
        loop {
            tick.tick().await;
            let st = Arc::clone(&state);
            if let Err(e) = tokio::task::spawn_blocking(move || job(&st)).await {
                tracing::error!(error = %e, "a background job failed");
            }
        }
    })
}

/// Serves `state` on `listener` until `shutdown` resolves; verifies the log
/// in the background and saves the projection checkpoint periodically and
/// on shutdown.
pub async fn run(
    state: Shared,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    start_verify(&state);
    let saver = every(
        &state,
        Duration::from_secs(state.config.projection_save_secs.max(1)),
        |st| {
            if st.projection_ready.wait() {
                let mut p = st.projector.lock().unwrap_or_else(|p| p.into_inner());
                let _ = p.catch_up(st.events.ledger());
            }
            st.save_derived();
        },
    );
    let anchorer = (state.config.anchor_interval_secs > 0).then(|| {
        every(
            &state,
            Duration::from_secs(state.config.anchor_interval_secs),
            |st| match anchor_tick(st) {
                Ok(Some(at)) => tracing::info!(location = %at, "anchor published"),
                Ok(None) => {}
                Err(e) => {
                    st.metrics.count_anchor_failure();
                    tracing::error!(error = %e, "could not publish an anchor");
                }
            },
        )
    });
    let request = Duration::from_millis(state.config.request_timeout_ms);
    let limits = crate::listen::Limits {
        header_read_timeout: Duration::from_millis(state.config.header_read_timeout_ms.max(1)),
        // Never close a connection whose request is still within its time.
        idle_timeout: Duration::from_secs(state.config.idle_timeout_secs.max(1))
            .max(request + Duration::from_secs(1)),
    };
    crate::listen::serve(listener, router(Arc::clone(&state)), limits, shutdown).await?;
    saver.abort();
    if let Some(a) = anchorer {
        a.abort();
    }
    state.save_derived();
    Ok(())
}
