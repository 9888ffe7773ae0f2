//! The start-up checks: the ready check (the log since its verified head,
//! the anchors, the sealed projection) and the background check (lookup tables, the
//! event-state replay, the projection against a rebuild).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use projections::driver::Projector;

use crate::server::anchoring::check_anchors;
use crate::server::state::{AppState, Shared, VERIFY_FAILED, VERIFY_OK, VERIFY_RUNNING};

/// Loads the projection into `state.projector`: the saved checkpoint only
/// if its seal verifies and the log has its root (a byte flip cannot pass
/// that), otherwise a fold from the first entry. A refused checkpoint is
/// counted (`ledger_derived_state_mismatches_total`) and logged. A
/// checkpoint that opened is checked against a rebuild from the log by
/// [`deep_check`] before anything is signed.
pub(crate) fn load_projection(state: &AppState) -> Result<(), String> {
    let started = Instant::now();
    let log = state.events.ledger();
    let settings = state.projector().settings().clone();
    let (opened, resumed) = Projector::open(log, settings, &state.projection_key)
        .map_err(|e| format!("the projection cannot be loaded: {e}"))?;
    if let projections::driver::Resumed::Refused(m) = &resumed {
        state.metrics.count_derived_mismatch();
        tracing::error!(error = %m, "derived state does not match the log; the projection was rebuilt from the log");
    }
    // Resumed at a state commitment: checked against the log's own
    // commitment (the ledger's signed entry, under the verified root), not
    // rebuilt. Resumed anywhere else: confirmed by a rebuild in the
    // background before anything is signed.
    let from_checkpoint = matches!(resumed, projections::driver::Resumed::At(_));
    state
        .projection_from_checkpoint
        .store(from_checkpoint, Ordering::SeqCst);
    *state.projector() = opened;
    tracing::info!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        from_checkpoint,
        "projection loaded"
    );
    Ok(())
}

/// The projection, checked against one folded from the first entry
/// ([`Projector::confirm`]); the rebuilt one replaces it either way, and a
/// disagreement is counted and logged. Unless `always`, only when it
/// resumed from a checkpoint no state commitment vouched for.
pub(crate) fn confirm_projection(state: &AppState, always: bool) -> Result<(), String> {
    if !always && !state.projection_from_checkpoint.load(Ordering::SeqCst) {
        return Ok(());
    }
    let started = Instant::now();
    let log = state.events.ledger();
    let settings = state.projector().settings().clone();
    let mut rebuilt = Projector::rebuild(log, settings)
        .map_err(|e| format!("the projection cannot be rebuilt: {e}"))?;
    // Compared on a copy, so views (and a shutdown's save) are not held up.
    let mut resumed = state.projector().clone();
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
    let mut live = state.projector();
    rebuilt
        .catch_up(log)
        .map_err(|e| format!("the projection cannot be caught up: {e}"))?;
    *live = rebuilt;
    Ok(())
}

/// The log walked from its verified head (the whole log when there is
/// none: [`crate::server::verifying::verify_at_start`]), then checked
/// against every anchor.
pub(crate) fn verify_log(state: &AppState) -> Result<(), String> {
    let walk = crate::server::verifying::verify_at_start(state)?;
    state
        .walked_all
        .store(walk.from.is_none(), Ordering::SeqCst);
    let n = check_anchors(state).map_err(|e| {
        state.metrics.count_anchor_failure();
        format!("anchors: {e}")
    })?;
    tracing::info!(anchors = n, "the log is consistent with every anchor");
    // Only now: a head is recorded as verified once it has passed both.
    crate::server::verifying::record_verified(state, walk.size, &walk.root);
    Ok(())
}

/// The event-state snapshot this start resumed from, checked against a
/// replay of the log ([`EventLog::check_snapshot`]).
pub(crate) fn check_event_state(state: &AppState) -> Result<(), String> {
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
pub(crate) fn unpanicked(what: &str, f: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|_| Err(format!("{what} panicked")))
}

/// What readiness needs, before any number is served: the walk of the log
/// from its verified head and the check against its anchors on this thread, and the projection loaded
/// ([`load_projection`]) on a second one. Projections are withheld (503
/// `log_verifying`) until both have passed, and for good (503
/// `log_unverified`, with the reason) if either fails. Returns whether the
/// server is ready.
pub fn ready_check(state: &AppState) -> bool {
    std::thread::scope(|s| ready_check_with(state, spawn_projection_load(s, state)))
}

type Loading<'scope> = std::io::Result<std::thread::ScopedJoinHandle<'scope, Result<(), String>>>;

/// Starts [`load_projection`] on a thread of its own.
fn spawn_projection_load<'scope>(
    s: &'scope std::thread::Scope<'scope, '_>,
    state: &'scope AppState,
) -> Loading<'scope> {
    std::thread::Builder::new()
        .name("ledger-projection".into())
        .spawn_scoped(s, || {
            unpanicked("loading the projection", || load_projection(state))
        })
}

/// Waits for the projection's load.
fn join_projection_load(loading: Loading<'_>) -> Result<(), String> {
    match loading {
        Ok(h) => h
            .join()
            .unwrap_or_else(|_| Err("loading the projection panicked".into())),
        Err(e) => Err(format!("cannot start the projection thread: {e}")),
    }
}

/// [`ready_check`] with the projection's load already started.
fn ready_check_with(state: &AppState, loading: Loading<'_>) -> bool {
    let verified = unpanicked("the startup check", || verify_log(state));
    let loaded = join_projection_load(loading);
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

/// The derived state checked against a replay of the log from its first
/// entry: the event-state snapshot this start resumed from, and the
/// projection against one folded from the first entry (which replaces
/// it). The caller records it (`ledger_last_derived_check_timestamp_seconds`)
/// once the log it replayed has been walked too.
pub(crate) fn check_derived_from_first_entry(state: &AppState) -> Result<(), String> {
    check_event_state(state)?;
    confirm_projection(state, true)
}

/// What the server checks in the background once it is ready, before it
/// signs anything (recommendations, bundles, state answers answer 503
/// `log_verifying` until then, `ledger_derived_check_status` -1):
/// - the derived state against a replay from the first entry when that is
///   due ([`check_derived_from_first_entry`]: never done, or last done
///   `reverify_interval_secs` ago), and otherwise a projection resumed from
///   a checkpoint no state commitment vouched for against one folded from
///   the first entry;
/// - the whole log walked again and checked against its anchors, when the
///   start walked only what came after its verified head
///   ([`crate::server::verifying::walk_all`]): a signed number must not
///   rest on an entry the start did not walk.
///
/// Then, after signing is allowed, the lookup tables. A failure of any of
/// these withholds numbers, proofs and writes for good (503
/// `log_unverified`); a disagreeing projection is replaced by the rebuilt
/// one and counted.
pub fn deep_check(state: &AppState) {
    use crate::server::verifying;
    let started = Instant::now();
    let mut replayed = false;
    let result = unpanicked("the background check", || {
        if verifying::derived_check_due(state) {
            check_derived_from_first_entry(state)?;
            replayed = true;
        } else {
            confirm_projection(state, false)?;
        }
        tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            "derived state checked against the log"
        );
        if !state.walked_all.load(Ordering::SeqCst) {
            verifying::walk_all(state)?;
        }
        Ok(())
    });
    match result {
        Ok(()) => {
            if replayed {
                // Only now: the entries it replayed have been walked.
                verifying::record_derived_check(state);
            }
            tracing::info!(
                elapsed_ms = started.elapsed().as_millis() as u64,
                "the background check passed: signing allowed"
            );
            state.derived_checked.store(VERIFY_OK, Ordering::SeqCst);
            warm_evidence(state);
        }
        Err(e) => {
            state.derived_checked.store(VERIFY_FAILED, Ordering::SeqCst);
            if state.verify_status.load(Ordering::SeqCst) != VERIFY_FAILED {
                verifying::fail(state, format!("the background check: {e}"));
            }
            return;
        }
    }
    if let Err(e) = unpanicked("checking the lookup tables", || {
        verifying::check_indexes(state)
    }) {
        if state.verify_status.load(Ordering::SeqCst) != VERIFY_FAILED {
            verifying::fail(state, e);
        }
    }
}

/// Reads back the evidence of the task classes' views at the head once,
/// as the first answer for each would ([`projections::driver::check_evidence`]:
/// checked reads, which the log then keeps in memory), so that the first
/// answer after a start is not the slowest: at 1M scores, reading 300
/// scattered entries from the log took most of that answer's 13–14 ms.
/// Stops before the kept entries would pass half of what the log keeps
/// ([`ledger::Ledger::PROVEN_ENTRIES`]), so that answers do not drop what
/// this read. Nothing is served or signed from it; a view whose evidence
/// does not check out is counted and logged here, as an answer would count
/// it, and the answers for it are refused as before.
pub(crate) fn warm_evidence(state: &AppState) {
    let started = Instant::now();
    let log = state.events.ledger();
    let budget = ledger::Ledger::<events::EventSequencer>::PROVEN_ENTRIES / 2;
    let (mut classes, mut entries) = (0, 0);
    for (name, _) in state.events.task_class_tiers() {
        let view = {
            let mut p = state.projector();
            match p.view_at_head(log, &name, state.clock.now_micros()) {
                Ok(view) => view,
                Err(_) => continue,
            }
        };
        if entries + view.evidence.len() > budget {
            break;
        }
        if let Err(e) = projections::driver::check_evidence(log, &view) {
            let why = e.to_string();
            // Counted as an answer would count it.
            let _ = state.derived_error(e);
            tracing::warn!(task_class = %name, error = %why, "the evidence of a view does not check out");
            continue;
        }
        classes += 1;
        entries += view.evidence.len();
    }
    tracing::info!(
        task_classes = classes,
        entries,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "evidence read back ahead of the first answers"
    );
}

/// Catches the event state up ([`EventLog::load_state`]: the saved
/// snapshot and the rules over the entries after it), which writes wait
/// for. A refused snapshot is counted and logged; a log whose events do not
/// replay (damage the open-time self-check cannot see) is an error: the
/// server goes on serving checked reads, and never numbers or writes.
///
/// [`EventLog::load_state`]: events::EventLog::load_state
pub(crate) fn load_event_state(state: &AppState) -> Result<(), String> {
    state
        .events
        .load_state()
        .map_err(|e| format!("the event state cannot be caught up: {e}"))?;
    // The snapshot this start resumed from bounds the tail a crash would
    // replay as well as a new one would: no need to save it again.
    if let Some(at) = state.events.restored_from() {
        state.state_saved_at.fetch_max(at, Ordering::SeqCst);
    }
    if let Some(why) = state.events.snapshot_refused() {
        state.metrics.count_derived_mismatch();
        tracing::error!(reason = %why, "derived state does not match the log");
    }
    if let Some(damage) = state.events.replay_error() {
        return Err(damage);
    }
    // The door refuses a Sigstore root for another origin; one appended
    // past it (by a tool that opened the data directory without the
    // server's origin) would have bundles checked against statements for
    // another log.
    if let Some(recorded) = state.events.sigstore_origin() {
        if recorded != state.log_key.origin() {
            return Err(format!(
                "refusing to serve: the log records a Sigstore trusted root for origin {recorded:?}; this log's origin is {:?}",
                state.log_key.origin()
            ));
        }
    }
    // Checked against genesis at open; now against the whole state (a
    // revoked ledger key).
    state
        .events
        .check_ledger_key()
        .map_err(|e| format!("refusing to serve: {e}"))
}

/// The event state caught up ([`load_event_state`]), then [`ready_check`],
/// then (when it passed) [`deep_check`]. The projection is loaded from the
/// start, beside the event state (neither reads the other, and the head
/// does not move until the event state is caught up).
pub fn startup_check(state: &AppState) {
    let ready = std::thread::scope(|s| {
        let loading = spawn_projection_load(s, state);
        let loaded = unpanicked("catching up the event state", || {
            load_event_state(state)?;
            // The signatures the catch-up did not check (writes are taken
            // meanwhile, each checked at the door), before the server is
            // ready: before it witnesses, anchors or serves a number, and
            // before an event-state snapshot may seal the entries in.
            let n = state
                .events
                .check_tail_signatures()
                .map_err(|e| format!("a signature of the log does not verify: {e}"))?;
            tracing::info!(
                entries = n,
                "the signatures of the entries replayed at start verify"
            );
            state.tail_signed.store(true, Ordering::SeqCst);
            Ok(())
        });
        if let Err(e) = loaded {
            let _ = join_projection_load(loading);
            tracing::error!(error = %e, "the event state cannot be trusted; numbers, proofs and writes withheld");
            state.withhold_numbers(e);
            state.projection_ready.set(false);
            return false;
        }
        ready_check_with(state, loading)
    });
    // The background check after the lookups are open: it walks the whole
    // log (half a minute at 10M entries), and on two cores it would hold
    // up the journal replay that readiness waits for. It checks the
    // lookups too (and fails if they could not be opened), so it would
    // wait for them anyway.
    if ready {
        let _ = state.events.ledger().lookups();
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
