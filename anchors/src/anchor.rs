//! Anchors: signed checkpoints published somewhere the log's host cannot
//! rewrite, and the check that the log is consistent with every one of them.
//!
//! A local hash chain and tree only catch clumsy tampering: someone with the
//! data directory (adversary A3) can rebuild a whole consistent log. An anchor
//! published elsewhere pins (size, root) under the log key's signature; a
//! rebuilt log cannot match it without the key, and not even with the key
//! once the anchor is out of the attacker's reach.

use std::path::{Path, PathBuf};

use ledger::merkle::{verify_consistency, ProofError};
use ledger::Hash;

use crate::checkpoint::{open_checkpoint_any, VerifiedCheckpoint};

/// Why the log does not match an anchor. Each names the anchor.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnchorError {
    /// The anchor is not a well-formed signed note, or no trusted key
    /// verifies it.
    #[error("anchor {anchor}: signed by no trusted key ({reason})")]
    UnknownKey { anchor: String, reason: String },
    /// The log has the anchor's size but a different root: it was rewritten.
    #[error("anchor {anchor}: the log was rewritten: at size {size} its root is {log_root}, the anchor says {anchor_root}")]
    Rewrite {
        anchor: String,
        size: u64,
        log_root: String,
        anchor_root: String,
    },
    /// The log is smaller than the anchor: entries were removed.
    #[error("anchor {anchor}: the log was truncated: it has {log_size} entries, the anchor covers {anchor_size}")]
    Truncation {
        anchor: String,
        log_size: u64,
        anchor_size: u64,
    },
    /// The log is larger but not an extension of the anchored tree: it forked.
    #[error("anchor {anchor}: the log forked after it: no consistency from size {anchor_size} to {log_size} ({reason})")]
    Fork {
        anchor: String,
        anchor_size: u64,
        log_size: u64,
        reason: String,
    },
    /// The anchor names another log.
    #[error("anchor {anchor}: origin `{found}` is not this log's `{expected}`")]
    WrongLog {
        anchor: String,
        expected: String,
        found: String,
    },
    /// An anchor once published was changed or removed in the anchors
    /// repository's history.
    #[error(
        "anchor {anchor} was {change} in commit {commit}: published anchors are only ever added"
    )]
    HistoryRewritten {
        anchor: String,
        commit: String,
        change: String,
    },
    #[error("anchors: {0}")]
    Io(String),
}

/// An anchor read from a publication target.
#[derive(Debug, Clone)]
pub struct Anchor {
    /// Where it came from (a file name).
    pub name: String,
    pub note: Vec<u8>,
}

/// Where anchors are published. The built-in target is a directory; a
/// Sigstore Rekor target can be added behind a cargo feature.
pub trait AnchorTarget: Send + Sync {
    /// Publishes `note` (a signed checkpoint of `size` entries) and returns
    /// where it went. Must be durable when it returns and must never
    /// overwrite an earlier anchor.
    fn publish(&self, note: &str, size: u64, unix_seconds: i64) -> Result<String, AnchorError>;
    /// Every anchor published so far.
    fn list(&self) -> Result<Vec<Anchor>, AnchorError>;
}

/// A directory of anchor files, one per anchor, named
/// `<UTC date>T<time>Z-<size>.checkpoint`. Meant to be committed to git or
/// copied where the log's host cannot rewrite it.
#[derive(Debug, Clone)]
pub struct DirTarget {
    pub dir: PathBuf,
}

impl DirTarget {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        DirTarget { dir: dir.into() }
    }
}

fn io(e: std::io::Error) -> AnchorError {
    AnchorError::Io(e.to_string())
}

fn file_name(size: u64, unix_seconds: i64) -> String {
    let days = unix_seconds.div_euclid(86_400);
    let secs = unix_seconds.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}{:02}{:02}Z-{size:012}.checkpoint",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    )
}

impl AnchorTarget for DirTarget {
    fn publish(&self, note: &str, size: u64, unix_seconds: i64) -> Result<String, AnchorError> {
        use std::io::Write as _;
        std::fs::create_dir_all(&self.dir).map_err(io)?;
        let path = self.dir.join(file_name(size, unix_seconds));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io)?;
        f.write_all(note.as_bytes()).map_err(io)?;
        f.sync_all().map_err(io)?;
        if let Ok(d) = std::fs::File::open(&self.dir) {
            let _ = d.sync_all();
        }
        Ok(path.display().to_string())
    }

    fn list(&self) -> Result<Vec<Anchor>, AnchorError> {
        let mut out = Vec::new();
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(io(e)),
        };
        for e in entries {
            let e = e.map_err(io)?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".checkpoint") {
                out.push(Anchor {
                    name,
                    note: std::fs::read(e.path()).map_err(io)?,
                });
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}

/// Verifies an anchor's signature with any of `trusted_keys` (old keys stay
/// trusted after a rotation) and checks it names `origin`.
pub fn open_anchor(
    a: &Anchor,
    trusted_keys: &[String],
    origin: &str,
) -> Result<VerifiedCheckpoint, AnchorError> {
    match open_checkpoint_any(&a.note, trusted_keys) {
        Ok((cp, _)) if cp.origin == origin => Ok(cp),
        Ok((cp, _)) => Err(AnchorError::WrongLog {
            anchor: a.name.clone(),
            expected: origin.to_owned(),
            found: cp.origin,
        }),
        Err(e) => Err(AnchorError::UnknownKey {
            anchor: a.name.clone(),
            reason: e.to_string(),
        }),
    }
}

/// What the check needs from the log: its size and root, and consistency
/// proofs from the log (which need not be trusted: they are verified here).
pub trait LogAccess {
    fn size(&self) -> u64;
    fn root(&self) -> Hash;
    fn consistency_proof(&self, old: u64, new: u64) -> Result<Vec<Hash>, String>;
}

impl<S: ledger::Sequencer> LogAccess for ledger::Ledger<S> {
    fn size(&self) -> u64 {
        self.head().size
    }
    fn root(&self) -> Hash {
        self.head().root
    }
    fn consistency_proof(&self, old: u64, new: u64) -> Result<Vec<Hash>, String> {
        ledger::Ledger::consistency_proof(self, old, new).map_err(|e| e.to_string())
    }
}

/// Checks the log against every anchor: each is signed by a trusted key, and
/// the log is the anchored tree or an extension of it (an RFC 6962
/// consistency proof from the anchor to the log's head, verified here).
/// Returns the anchors checked, oldest first.
pub fn check_anchors(
    log: &dyn LogAccess,
    anchors: &[Anchor],
    trusted_keys: &[String],
    origin: &str,
) -> Result<Vec<VerifiedCheckpoint>, AnchorError> {
    let (size, root) = (log.size(), log.root());
    let mut out = Vec::with_capacity(anchors.len());
    for a in anchors {
        let cp = open_anchor(a, trusted_keys, origin)?;
        if cp.size > size {
            return Err(AnchorError::Truncation {
                anchor: a.name.clone(),
                log_size: size,
                anchor_size: cp.size,
            });
        }
        if cp.size == size {
            if cp.root != root {
                return Err(AnchorError::Rewrite {
                    anchor: a.name.clone(),
                    size,
                    log_root: ledger::hash::to_hex(&root),
                    anchor_root: ledger::hash::to_hex(&cp.root),
                });
            }
        } else {
            let proof =
                log.consistency_proof(cp.size, size)
                    .map_err(|reason| AnchorError::Fork {
                        anchor: a.name.clone(),
                        anchor_size: cp.size,
                        log_size: size,
                        reason,
                    })?;
            verify_consistency(cp.size, &cp.root, size, &root, &proof).map_err(
                |e: ProofError| AnchorError::Fork {
                    anchor: a.name.clone(),
                    anchor_size: cp.size,
                    log_size: size,
                    reason: e.to_string(),
                },
            )?;
        }
        out.push(cp);
    }
    Ok(out)
}

/// Reads anchors from a directory (for callers without a target object).
pub fn read_dir(dir: &Path) -> Result<Vec<Anchor>, AnchorError> {
    DirTarget::new(dir).list()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchor_file_names_sort_by_time_and_show_size() {
        assert_eq!(
            file_name(42, 0),
            "1970-01-01T000000Z-000000000042.checkpoint"
        );
        assert_eq!(
            file_name(7, 1_795_305_600 + 3_661),
            "2026-11-22T010101Z-000000000007.checkpoint"
        );
    }
}
