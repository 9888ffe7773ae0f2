//! What the server walks, and when: the verified head a start resumes from,
//! the tail walked on a schedule, and the whole log walked again in the
//! background.
//!
//! The verified head is a checkpoint signed with the log key, kept in the
//! data file (`aux`, [`VERIFIED_HEAD_AUX`]): the size and root of a log
//! whose entries up to that size were walked (every leaf re-hashed, every
//! chain link and stored hash recomputed). A start checks the signature,
//! checks that the stored tree at that size still hashes to that root
//! (O(log n) stored hashes) and walks only the entries after it. A marker
//! that does not open (a flipped byte, another key) is refused, counted and
//! logged, and the start walks the whole log instead; one that names more
//! entries than the log holds is a log that lost entries, and the start
//! fails. docs/SECURITY.md says what is checked when.

use std::sync::atomic::Ordering;
use std::time::Instant;

use ledger::Hash;

use crate::server::state::{AppState, VERIFY_OK};

/// The `aux` name of the verified-head marker.
pub const VERIFIED_HEAD_AUX: &str = "verified-head/v1";

/// What the data file says the last walk reached.
pub(crate) enum Marker {
    /// None was saved.
    Absent,
    /// A checkpoint this log's key signed: entries below `size` were walked.
    At { size: u64, root: Hash },
    /// One was saved but does not open with the log key.
    Refused(String),
}

/// Reads the verified-head marker and opens it with the log key (only the
/// current one: after a key rotation the first start walks everything).
pub(crate) fn read_marker(state: &AppState) -> Result<Marker, String> {
    let Some(bytes) = state
        .events
        .ledger()
        .get_aux(VERIFIED_HEAD_AUX)
        .map_err(|e| format!("reading the verified head: {e}"))?
    else {
        return Ok(Marker::Absent);
    };
    match anchors::open_checkpoint(&bytes, state.log_key.verifier_key()) {
        Ok(cp) if cp.origin == state.log_key.origin() => Ok(Marker::At {
            size: cp.size,
            root: cp.root,
        }),
        Ok(cp) => Ok(Marker::Refused(format!(
            "the verified head names the log {:?}",
            cp.origin
        ))),
        Err(e) => Ok(Marker::Refused(format!(
            "the verified head does not open with the log key: {e}"
        ))),
    }
}

/// Records `(size, root)` as the verified head, when it is ahead of the one
/// recorded: in memory (where the next tail walk starts), then in the data
/// file as a checkpoint signed with the log key. A failure to save it (a
/// full disk, storage read-only) is logged and costs only time: the next
/// start walks from the head saved before.
pub(crate) fn record_verified(state: &AppState, size: u64, root: &Hash) {
    let mut at = state.verified.lock().unwrap_or_else(|p| p.into_inner());
    if at.is_some_and(|(s, _)| s >= size) {
        return;
    }
    *at = Some((size, *root));
    state
        .metrics
        .verified_size
        .set(i64::try_from(size).unwrap_or(i64::MAX));
    let saved = state
        .log_key
        .sign_checkpoint(size, root)
        .map_err(|e| e.to_string())
        .and_then(|note| {
            state
                .events
                .ledger()
                .put_aux(VERIFIED_HEAD_AUX, note.as_bytes())
                .map_err(|e| e.to_string())
        });
    if let Err(e) = saved {
        tracing::warn!(error = %e, size, "could not save the verified head; the next start walks from the one saved before");
    }
}

/// What the start's walk covered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartWalk {
    /// The verified head it resumed from; `None`: it walked the whole log.
    pub from: Option<u64>,
    /// The size it reached (now the verified head).
    pub size: u64,
    /// Entries it re-hashed.
    pub walked: u64,
}

/// The start's walk: from the verified head when one opens (and the whole
/// log when none does), then the head it reached recorded.
pub fn verify_at_start(state: &AppState) -> Result<StartWalk, String> {
    let started = Instant::now();
    let log = state.events.ledger();
    let from = match read_marker(state)? {
        Marker::At { size, root } => Some((size, root)),
        Marker::Absent => None,
        Marker::Refused(why) => {
            state.metrics.count_derived_mismatch();
            tracing::error!(reason = %why, "the verified head was refused; walking the whole log");
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
    record_verified(state, v.size, &v.root);
    if from.is_none() {
        state.metrics.last_full_verify.set(now_secs(state));
    }
    Ok(StartWalk {
        from: from.map(|(s, _)| s),
        size: v.size,
        walked: v.checked,
    })
}

/// Walks the entries appended since the verified head and records the head
/// reached (the `verify_tail_secs` schedule, and a clean stop). Skipped
/// while the log is not verified, and while another walk runs (a walk of
/// the whole log records the head it reaches itself). A failure withholds numbers, proofs and
/// writes for good, counts and logs.
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

/// The whole log walked again, then checked against every anchor, then its
/// lookup tables checked: right after a start that resumed from a verified
/// head ([`crate::server::deep_check`]) and every `reverify_interval_secs`.
/// Returns the error, having withheld numbers, proofs and writes for good,
/// counted and logged.
pub fn reverify(state: &AppState) -> Result<(), String> {
    let walking = state.walking.lock().unwrap_or_else(|p| p.into_inner());
    let started = Instant::now();
    let log = state.events.ledger();
    let checked = log
        .verify_full(&mut |_, _| {})
        .map_err(|e| format!("the whole log walked again: {e}"))
        .and_then(|v| {
            record_verified(state, v.size, &v.root);
            tracing::info!(
                size = v.size,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "the whole log verified again"
            );
            crate::server::check_anchors(state).map_err(|e| {
                state.metrics.count_anchor_failure();
                format!("anchors: {e}")
            })
        });
    if let Err(e) = checked {
        fail(state, e.clone());
        return Err(e);
    }
    state.metrics.last_full_verify.set(now_secs(state));
    drop(walking);
    check_indexes(state)
}

/// The lookup tables checked against the entries ([`ledger::Ledger::verify_indexes`]).
/// Returns the error, having withheld numbers, proofs and writes for good,
/// counted and logged.
pub fn check_indexes(state: &AppState) -> Result<(), String> {
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
        crate::server::checks::check_event_state(state)?;
        crate::server::checks::confirm_projection(state, true)
    });
    if let Err(e) = derived {
        fail(state, e);
    }
}

fn fail(state: &AppState, detail: String) {
    state.metrics.count_verify_failure();
    tracing::error!(error = %detail, "the log FAILED a background check; numbers, proofs and writes withheld");
    state.withhold_numbers(detail);
}

fn now_secs(state: &AppState) -> i64 {
    state.clock.now_micros().div_euclid(1_000_000)
}
