//! The crate's one error type, grouped by what the caller must do.

use std::sync::Arc;

/// What is wrong with a stored log, found by verify or by the self-check on open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CorruptionKind {
    /// The entry's bytes do not hash to the stored RFC 6962 leaf hash.
    Leaf,
    /// The stored chain hash is not `SHA-256(prev ‖ BLAKE3(entry))`.
    Chain,
    /// A stored interior tree hash, or the head's root, does not match the
    /// hash recomputed from the entries.
    Tree,
    /// An entry (or a stored hash it needs) is absent below the head's size.
    MissingEntry,
    /// An entry or stored hash exists beyond the head's size.
    ExtraEntry,
    /// A stored record or the head record has the wrong length or layout.
    Malformed,
    /// A derived lookup table (leaf hash or envelope id to index) disagrees
    /// with the entries: a row is missing, points at the wrong entry, or
    /// names nothing.
    Index,
}

impl std::fmt::Display for CorruptionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CorruptionKind::Leaf => "leaf hash mismatch",
            CorruptionKind::Chain => "chain hash mismatch",
            CorruptionKind::Tree => "tree hash mismatch",
            CorruptionKind::MissingEntry => "missing entry",
            CorruptionKind::ExtraEntry => "extra entry",
            CorruptionKind::Malformed => "malformed record",
            CorruptionKind::Index => "lookup index mismatch",
        })
    }
}

/// The first bad index of a log and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("log corrupt at index {index}: {kind}{}", detail_suffix(.detail))]
pub struct Corruption {
    /// The first bad entry index (for a bad interior hash: the last leaf of
    /// that subtree; for a bad head: the head's size).
    pub index: u64,
    pub kind: CorruptionKind,
    pub detail: String,
}

fn detail_suffix(d: &str) -> String {
    if d.is_empty() {
        String::new()
    } else {
        format!(" ({d})")
    }
}

impl Corruption {
    /// A corruption found at entry `index` (also by the layers above the
    /// log, when a replay finds an entry that breaks their rules).
    pub fn new(index: u64, kind: CorruptionKind, detail: impl Into<String>) -> Self {
        Corruption {
            index,
            kind,
            detail: detail.into(),
        }
    }
}

/// Errors from the log core.
///
/// - Invalid input: [`Error::IndexOutOfRange`], [`Error::InvalidSize`],
///   [`Error::EntryTooLarge`], [`Error::TileNotInTree`]. The caller asked for something that does not
///   exist; answer 4xx.
/// - Pushback: [`Error::Busy`], [`Error::Closed`], [`Error::HeadMoved`]. Try again later; answer 503.
/// - Fatal: [`Error::Corrupt`], [`Error::Storage`], [`Error::NewerFormat`].
///   Storage disagrees with itself or failed; stop serving and alert.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error("index {index} is not below tree size {size}")]
    IndexOutOfRange { index: u64, size: u64 },
    #[error("invalid tree size {size}: {rule}")]
    InvalidSize { size: u64, rule: &'static str },
    #[error("entry of {len} bytes exceeds the limit of {max} bytes")]
    EntryTooLarge { len: usize, max: usize },
    #[error("{tile} is not in the tree of size {size}")]
    TileNotInTree { tile: String, size: u64 },
    #[error("append queue is full; retry later")]
    Busy,
    #[error("the ledger is shutting down")]
    Closed,
    /// Another writer appended first: the shared database's head is at
    /// `found`, not at `expected` where this batch would have started.
    /// Nothing of the batch was written.
    #[error("the log's head moved to size {found} while this writer expected {expected}; nothing was written")]
    HeadMoved { expected: u64, found: u64 },
    #[error(transparent)]
    Corrupt(#[from] Corruption),
    #[error("storage error: {0}")]
    Storage(Arc<redb::Error>),
    #[error(
        "data directory was written in format version {found}; this build reads up to {supported}"
    )]
    NewerFormat { found: u32, supported: u32 },
}

/// Wraps any redb error as [`Error::Storage`].
pub(crate) fn storage<E: Into<redb::Error>>(e: E) -> Error {
    Error::Storage(Arc::new(e.into()))
}
