//! Publishing an anchor: sign the head as a checkpoint, write it to the
//! anchors directory, and record it in the log as `anchor.published`. The
//! server runs it on its schedule; `ledger anchor publish` runs it with the
//! server stopped.

use std::path::Path;

use events::EventLog;

/// An anchor that was published and recorded.
#[derive(Debug, Clone)]
pub struct Published {
    /// Where the anchor went.
    pub location: String,
    /// The index of the `anchor.published` entry that records it.
    pub recorded_at: u64,
}

/// Signs a checkpoint at `log`'s head with `key`, publishes it to
/// `anchors_dir`, and records an `anchor.published` event signed with the
/// ledger's event key. `now` is µs since the Unix epoch, UTC.
///
/// An anchor is never taken back, so nothing is signed unless the record
/// of it will be accepted: the ledger's event key must be enrolled in
/// `log` with the `ledger` role and not revoked. The caller checks the log
/// itself (the server's ready check; `ledger anchor publish` verifies the
/// data directory and its anchors first).
pub fn publish(
    log: &EventLog,
    key: &anchors::LogKey,
    anchors_dir: &Path,
    now: i64,
) -> anyhow::Result<Published> {
    log.check_ledger_key()
        .map_err(|e| anyhow::anyhow!("no anchor published: {e}"))?;
    let head = log.ledger().head();
    let note = key.sign_checkpoint(head.size, &head.root)?;
    // An anchors directory that is a git work tree gets each anchor as a
    // commit, pushed to its remote (anchors::git).
    let target: Box<dyn anchors::AnchorTarget> = if anchors::git::is_repo(anchors_dir) {
        Box::new(anchors::GitTarget::new(anchors_dir))
    } else {
        Box::new(anchors::DirTarget::new(anchors_dir.to_path_buf()))
    };
    let location = target.publish(&note, head.size, now.div_euclid(1_000_000))?;
    let envelope = events::anchor_published_envelope(
        &key.event_signing_key(),
        log.schema(),
        (head.size, &head.root),
        &note,
        &location,
        now,
    );
    let recorded = log
        .append(&envelope)
        .map_err(|e| anyhow::anyhow!("recording the anchor: {e:?}"))?;
    Ok(Published {
        location,
        recorded_at: recorded.appended.index,
    })
}
