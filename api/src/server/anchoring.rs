//! Anchors in the server: checked against the log at start, published on
//! a schedule.

use std::sync::atomic::Ordering;

use ledger::Hash;

use crate::server::state::{AppState, VERIFY_OK};

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
        // own `anchor.published` entry and the state commitments saved
        // after it.
        if only_bookkeeping(log, cp.size, at.head.size) {
            state.anchored_at.store(at.head.size, Ordering::SeqCst);
        }
    }
    Ok(checked.len())
}

/// Whether the entries `from..to` are only the ledger's own bookkeeping,
/// which does not make a log worth anchoring again: the `anchor.published`
/// record of an anchor at `from`, and state commitments (each made when
/// the projection is saved). At most a few entries are read.
pub(crate) fn only_bookkeeping(
    log: &ledger::Ledger<events::EventSequencer>,
    from: u64,
    to: u64,
) -> bool {
    if from > to || to - from > 8 {
        return false;
    }
    (from..to).all(|index| {
        log.entry(index)
            .ok()
            .and_then(|e| events::decode_leaf(&e.leaf).ok())
            .is_some_and(|(d, _)| match &d.payload.event {
                // The record of the anchor at `from`, and records of where
                // earlier anchors were published since (Rekor).
                events::Event::AnchorPublished(a) => a.checkpoint.size <= from,
                events::Event::StateCommitted(c) => c.checkpoint.size == index,
                _ => false,
            })
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
    let head = state.events.ledger().head().size;
    let anchored = state.anchored_at.load(Ordering::SeqCst);
    if head == anchored {
        return Ok(None);
    }
    if only_bookkeeping(state.events.ledger(), anchored, head) {
        state.anchored_at.store(head, Ordering::SeqCst);
        return Ok(None);
    }
    publish_anchor(state).map(Some)
}

/// Publishes every anchor not yet in Rekor (`rekor_url`), oldest first, and
/// sets `ledger_rekor_pending_anchors` to how many are left; a failed run
/// counts `ledger_rekor_failures_total`, and the next run (after the next
/// anchor, or every `rekor_retry_secs`) catches up. Does nothing without
/// `rekor_url`.
pub fn rekor_tick(state: &AppState) {
    let Some(rekor) = &state.rekor else {
        return;
    };
    let dir = state.config.anchors_path();
    if !dir.exists() {
        return;
    }
    let check = crate::rekor::anchor_of(trusted_keys(state), state.log_key.origin().to_owned());
    match crate::rekor::publish_pending(&dir, rekor, &check) {
        Ok(done) => {
            state.metrics.rekor_pending.set(0);
            record_rekor(state, &done.published);
        }
        Err((done, e)) => {
            record_rekor(state, &done.published);
            state.metrics.rekor_failures.inc();
            let pending = crate::rekor::pending(&dir).unwrap_or(0);
            state.metrics.rekor_pending.set(pending as i64);
            tracing::warn!(
                published = done.published.len(),
                pending,
                error = format!("{e:#}"),
                "anchors not yet published to Rekor; the next run catches up"
            );
        }
    }
}

/// Records the anchors a run published to Rekor as `anchor.published`
/// entries naming the Rekor entry (`crate::rekor::record`). A failure is
/// logged: the bundle is kept, and the record is what is missing.
fn record_rekor(state: &AppState, published: &[crate::rekor::Entry]) {
    if published.is_empty() {
        return;
    }
    let now = state.clock.now_micros();
    match crate::rekor::record(
        &state.events,
        &state.log_key,
        &trusted_keys(state),
        published,
        now,
    ) {
        Ok(at) => {
            for (p, index) in published.iter().zip(at) {
                tracing::info!(anchor = %p.anchor.display(), location = %p.location, index, "anchor published to Rekor and recorded");
            }
        }
        Err(e) => tracing::error!(
            error = format!("{e:#}"),
            "an anchor published to Rekor could not be recorded in the log"
        ),
    }
}
