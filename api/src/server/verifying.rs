//! What the server walks, and when: the verified head a start resumes from,
//! the tail walked on a schedule, the whole log walked again in the
//! background, and the derived state checked again from the first entry.
//!
//! The verified head is a record in the data directory (the file
//! [`VERIFIED_HEAD_AUX`]) sealed with a key derived from the ledger's key
//! (`ledger::sealed`: a keyed BLAKE3 MAC over the size, the root and the
//! body): the size and root of a log whose entries below that size were
//! walked (every leaf re-hashed, every chain link and stored hash
//! recomputed) and which then passed its anchor check. It is not a
//! checkpoint: no note the server publishes (an anchor, `/checkpoint`, a
//! tile directory's checkpoint, an `anchor.published` entry) can stand in
//! for it. A start opens it, checks that the stored tree at its size still
//! hashes to its root (O(log n) stored hashes) and walks only the entries
//! after it. A record that does not open (a flipped byte, another record)
//! is refused, counted and logged, and the start walks the whole log; one
//! sealed at more entries than the log holds, or at a root the stored tree
//! does not hash to, fails the start. A walk that fails replaces it with a
//! record that makes the next start walk the whole log. docs/SECURITY.md
//! says what is checked when.

use std::sync::atomic::Ordering;
use std::time::Instant;

use ledger::sealed::SealError;
use ledger::Hash;

use crate::server::state::{AppState, VERIFY_FAILED, VERIFY_OK};

/// The file in the data directory that holds the verified head. A file of
/// its own, not a row of the data file: a start writes it before it knows
/// the data file is sound, and a write into a damaged redb file can end
/// the process (a panic inside redb whose clean-up panics again) where a
/// read becomes a typed error.
pub const VERIFIED_HEAD_AUX: &str = "verified-head";
/// The file that holds the time the derived state was last checked
/// against a replay of the log from its first entry.
pub const DERIVED_CHECKED_AUX: &str = "derived-checked";

/// The record `name` in the data directory, if there is one.
fn read_record(state: &AppState, name: &str) -> Result<Option<Vec<u8>>, String> {
    match std::fs::read(state.config.data_dir.join(name)) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("reading {name}: {e}")),
    }
}

/// Opens a record sealed with the verified-head key against the log: its
/// seal, and the log's root at the size it names ([`ledger::sealed::open`]).
fn open_sealed<'r>(
    state: &AppState,
    magic: &[u8; 8],
    rec: &'r [u8],
) -> Result<Result<ledger::sealed::Opened<'r>, SealError>, ledger::Error> {
    let log = state.events.ledger();
    ledger::sealed::open(&state.verified_key, magic, rec, log.head().size, |size| {
        log.root_at(size)
    })
}

/// Replaces the record `name` in the data directory durably: written to a
/// temporary file, synced, renamed over it, and the directory synced.
fn write_record(state: &AppState, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = &state.config.data_dir;
    let tmp = dir.join(format!(".{name}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, dir.join(name))?;
    std::fs::File::open(dir)?.sync_all()
}
const HEAD_MAGIC: &[u8; 8] = b"ELVHEAD1";
const CHECKED_MAGIC: &[u8; 8] = b"ELDCHK01";
/// What a failed walk leaves in place of the verified head.
const FAILED: &[u8] = b"failed";

/// The key the verified head and the derived-check record are sealed with.
pub fn seal_key(ledger_key: &ed25519_dalek::SigningKey) -> [u8; 32] {
    ledger::sealed::derive_key(
        "evidence-ledger/v1 verified head mac",
        ledger_key.as_bytes(),
    )
}

/// The sealed verified-head record of `(size, root)`.
pub fn seal_head(key: &[u8; 32], size: u64, root: &Hash) -> Vec<u8> {
    ledger::sealed::seal(key, HEAD_MAGIC, size, root, b"")
}

/// What the data file says the last walk reached.
enum Marker {
    /// None was saved, or one sealed under another key (after a key
    /// rotation).
    Absent,
    /// The last walk failed.
    Failed,
    /// Entries below `size` were walked; the stored tree hashes to `root`.
    At { size: u64, root: Hash },
    /// One was saved but does not open.
    Refused(String),
}

fn read_marker(state: &AppState) -> Result<Marker, String> {
    let Some(rec) = read_record(state, VERIFIED_HEAD_AUX)? else {
        return Ok(Marker::Absent);
    };
    if rec == FAILED {
        return Ok(Marker::Failed);
    }
    let opened = open_sealed(state, HEAD_MAGIC, &rec)
        .map_err(|e| format!("reading the verified head: {e}"))?;
    match opened {
        Ok(o) => Ok(Marker::At {
            size: o.size,
            root: ledger::sealed::split(&rec)
                .map(|p| p.root)
                .ok_or("the verified head does not split")?,
        }),
        Err(SealError::OtherKey) => Ok(Marker::Absent),
        // Sealed by this ledger, and the log no longer matches it.
        Err(e @ (SealError::Beyond { .. } | SealError::OtherRoot { .. })) => Err(format!(
            "the log does not match its verified head ({e}): entries were lost or the tree changed"
        )),
        Err(e) => Ok(Marker::Refused(format!(
            "the verified head was refused: {e}"
        ))),
    }
}

/// Records `(size, root)` as the verified head, when it is ahead of the one
/// recorded: in memory (where the next tail walk starts), then sealed in
/// the data file. A failure to save it (a full disk, storage read-only) is
/// logged and costs only time: the next start walks from the head saved
/// before. Call it only for a log whose walk and anchor check have passed.
pub(crate) fn record_verified(state: &AppState, size: u64, root: &Hash) {
    let mut at = state.verified.lock().unwrap_or_else(|p| p.into_inner());
    // A walk that ends after another found damage records nothing: the
    // next start must walk the whole log ([`fail`] sets the status before
    // it takes this lock).
    if at.is_some_and(|(s, _)| s >= size)
        || state.verify_status.load(Ordering::SeqCst) == VERIFY_FAILED
    {
        return;
    }
    *at = Some((size, *root));
    state
        .metrics
        .verified_size
        .set(i64::try_from(size).unwrap_or(i64::MAX));
    let rec = seal_head(&state.verified_key, size, root);
    if let Err(e) = write_record(state, VERIFIED_HEAD_AUX, &rec) {
        tracing::warn!(error = %e, size, "could not save the verified head; the next start walks from the one saved before");
    }
}

/// What the start's walk covered.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StartWalk {
    /// The verified head it resumed from; `None`: it walked the whole log.
    pub from: Option<u64>,
    /// The size it reached.
    pub size: u64,
    /// The root there.
    pub root: Hash,
    /// Entries it re-hashed.
    pub walked: u64,
}

/// The start's walk: from the verified head when one opens (and the whole
/// log when none does). The caller records the head reached
/// ([`record_verified`]) once the anchors have passed too.
pub fn verify_at_start(state: &AppState) -> Result<StartWalk, String> {
    let started = Instant::now();
    let log = state.events.ledger();
    let from = match read_marker(state)? {
        Marker::At { size, root } => Some((size, root)),
        Marker::Absent => None,
        Marker::Failed => {
            tracing::warn!("the last walk of this log failed; walking the whole log");
            None
        }
        Marker::Refused(why) => {
            state.metrics.count_derived_mismatch();
            tracing::error!(reason = %why, "walking the whole log");
            None
        }
    };
    let v = match from {
        Some((size, root)) => log
            .verify_from(size, &root, &mut |_, _| {})
            .map_err(|e| format!("the log since its verified head at {size}: {e}"))?,
        None => log.verify_full(&mut |_, _| {}).map_err(|e| e.to_string())?,
    };
    tracing::info!(
        size = v.size,
        from = from.map_or(0, |(s, _)| s),
        walked = v.checked,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "log verified"
    );
    if from.is_none() {
        state.metrics.last_full_verify.set(now_secs(state));
    }
    Ok(StartWalk {
        from: from.map(|(s, _)| s),
        size: v.size,
        root: v.root,
        walked: v.checked,
    })
}

/// Walks the entries appended since the verified head and records the head
/// reached (the `verify_tail_secs` schedule, and a clean stop). Skipped
/// while the log is not verified, and while another walk runs (a walk of
/// the whole log records the head it reaches itself). A failure withholds
/// numbers, proofs and writes for good, counts and logs.
pub fn verify_tail(state: &AppState) {
    if state.verify_status.load(Ordering::SeqCst) != VERIFY_OK {
        return;
    }
    let _walking = match state.walking.try_lock() {
        Ok(g) => g,
        Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    let Some((size, root)) = *state.verified.lock().unwrap_or_else(|p| p.into_inner()) else {
        return;
    };
    let log = state.events.ledger();
    if log.head().size == size {
        return;
    }
    let started = Instant::now();
    match log.verify_from(size, &root, &mut |_, _| {}) {
        Ok(v) => {
            tracing::debug!(
                from = size,
                size = v.size,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "the log's tail verified"
            );
            record_verified(state, v.size, &v.root);
        }
        Err(e) => fail(
            state,
            format!("the log since its verified head at {size} failed its check: {e}"),
        ),
    }
}

/// The whole log walked again, then checked against every anchor; the head
/// walked is recorded as verified. Returns the error, having withheld
/// numbers, proofs and writes for good, counted and logged.
pub fn walk_all(state: &AppState) -> Result<(), String> {
    let _walking = state.walking.lock().unwrap_or_else(|p| p.into_inner());
    let started = Instant::now();
    let log = state.events.ledger();
    let checked = log
        .verify_full(&mut |_, _| {})
        .map_err(|e| format!("the whole log walked again: {e}"))
        .and_then(|v| {
            tracing::info!(
                size = v.size,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "the whole log verified again"
            );
            crate::server::check_anchors(state).map_err(|e| {
                state.metrics.count_anchor_failure();
                format!("anchors: {e}")
            })?;
            Ok(v)
        });
    match checked {
        Ok(v) => {
            record_verified(state, v.size, &v.root);
            state.metrics.last_full_verify.set(now_secs(state));
            Ok(())
        }
        Err(e) => {
            fail(state, e.clone());
            Err(e)
        }
    }
}

/// The lookup tables checked against the entries ([`ledger::Ledger::verify_indexes`]).
/// Returns the error, having withheld numbers, proofs and writes for good,
/// counted and logged.
pub fn check_indexes(state: &AppState) -> Result<(), String> {
    // Lookups that could not be opened are not evidence against the log:
    // they already refuse writes and lookups until a restart (/readyz says
    // why), and the log's own checks stand.
    if let ledger::LookupsState::Failed(why) = state.events.ledger().lookups_state() {
        tracing::error!(reason = %why, "the lookup tables are not checked: they could not be opened");
        return Ok(());
    }
    let started = Instant::now();
    match state.events.ledger().verify_indexes(&mut |_, _| {}) {
        Ok(_) => {
            tracing::info!(
                elapsed_ms = started.elapsed().as_millis() as u64,
                "the lookup tables agree with the log"
            );
            Ok(())
        }
        Err(e) => {
            let e = format!("lookup tables: {e}");
            fail(state, e.clone());
            Err(e)
        }
    }
}

/// [`walk_all`], then [`check_indexes`].
pub fn reverify(state: &AppState) -> Result<(), String> {
    walk_all(state)?;
    check_indexes(state)
}

/// When the derived state was last checked against a replay of the log
/// from its first entry (unix seconds), as recorded in the data directory; the
/// gauge `ledger_last_derived_check_timestamp_seconds` follows it.
pub(crate) fn last_derived_check(state: &AppState) -> Option<i64> {
    let rec = read_record(state, DERIVED_CHECKED_AUX).ok()??;
    let opened = open_sealed(state, CHECKED_MAGIC, &rec).ok()?.ok()?;
    let secs = i64::from_be_bytes(opened.body.try_into().ok()?);
    state.metrics.last_derived_check.set(secs);
    Some(secs)
}

/// Whether the derived state is due a check from the first entry: never
/// checked, or last checked `reverify_interval_secs` ago or more (with
/// 0, after every start).
pub(crate) fn derived_check_due(state: &AppState) -> bool {
    let every = i64::try_from(state.config.reverify_interval_secs).unwrap_or(i64::MAX);
    let now = now_secs(state);
    match last_derived_check(state) {
        // A time ahead of the clock (the clock set back) is due too.
        Some(at) if every > 0 && at <= now => now - at >= every,
        _ => true,
    }
}

/// Records that the derived state was checked from the first entry now.
pub(crate) fn record_derived_check(state: &AppState) {
    let log = state.events.ledger();
    let head = log.head();
    let now = now_secs(state);
    let rec = ledger::sealed::seal(
        &state.verified_key,
        CHECKED_MAGIC,
        head.size,
        &head.root,
        &now.to_be_bytes(),
    );
    if let Err(e) = write_record(state, DERIVED_CHECKED_AUX, &rec) {
        tracing::warn!(error = %e, "could not record the check of derived state");
    }
    state.metrics.last_derived_check.set(now);
}

/// One tick of the `reverify_interval_secs` schedule, once the start's own
/// checks have passed: [`reverify`], then the derived state checked again
/// from the first entry: the event-state snapshot this start resumed from
/// against a replay of the log's rules, and the projection against one
/// folded from the first entry (which replaces it; a disagreement is
/// counted and logged).
pub fn reverify_tick(state: &AppState) {
    if state.verify_status.load(Ordering::SeqCst) != VERIFY_OK
        || state.derived_checked.load(Ordering::SeqCst) != VERIFY_OK
        || reverify(state).is_err()
    {
        return;
    }
    let derived = crate::server::checks::unpanicked("the scheduled check of derived state", || {
        crate::server::checks::check_derived_from_first_entry(state)
    });
    match derived {
        Ok(()) => record_derived_check(state),
        Err(e) => fail(state, e),
    }
}

/// A check of the log failed: numbers, proofs and writes are withheld for
/// good, the failure counted and logged, and the data file told, so that
/// the next start walks the whole log and replays the derived state before
/// it trusts either.
pub(crate) fn fail(state: &AppState, detail: String) {
    state.metrics.count_verify_failure();
    tracing::error!(error = %detail, "the log FAILED a check; numbers, proofs and writes withheld");
    state.withhold_numbers(detail);
    // Under the lock `record_verified` takes, after the status is set: a
    // walk still running cannot seal a head over this afterwards.
    let mut at = state.verified.lock().unwrap_or_else(|p| p.into_inner());
    *at = None;
    let marked = write_record(state, VERIFIED_HEAD_AUX, FAILED)
        .and_then(|()| write_record(state, DERIVED_CHECKED_AUX, FAILED));
    if let Err(e) = marked {
        tracing::warn!(error = %e, "could not record the failed check in the data file");
    }
}

fn now_secs(state: &AppState) -> i64 {
    state.clock.now_micros().div_euclid(1_000_000)
}
