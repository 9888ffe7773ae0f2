//! # ledger: the Evidence Ledger's log core
//!
//! An append-only log of opaque entries ("leaves"). It is durable, hashed into an
//! RFC 6962 / RFC 9162 Merkle tree stored on disk, and linked in a SHA-256 hash
//! chain. This crate can prove inclusion and consistency, and can verify itself.
//!
//! It is transport-agnostic. It has no HTTP, no JSON, no checkpoint signing and
//! no event semantics: callers hand it the exact bytes to be hashed, and it
//! returns indices, hashes and proofs. Signed notes live in `anchors`, event
//! meaning in `events`, HTTP in `api`.
//!
//! ## Map
//! - [`hash`]: the three per-entry hashes (RFC 6962 leaf hash, BLAKE3 content
//!   digest, SHA-256 chain hash). The byte layouts are in `docs/FORMAT.md`.
//! - [`merkle`]: proof verification (no storage) and the stored-hash layout.
//! - [`store`]: the redb tables and the only code that touches them.
//! - [`lookup`]: the lookups by leaf hash and entry key, beside the redb
//!   file and off the commit path.
//! - [`Ledger`]: open with a self-check, group-committed appends, reads and
//!   proofs.
//! - [`verify`]: full and incremental verification of a data directory.
//! - [`tiles`]: the log as C2SP tlog-tiles (tile paths, tile and entry
//!   bundle bytes).
//!
//! Signed domain events live in the `events` crate, which plugs into the
//! committer through [`Sequencer`]; this crate knows nothing of them.
//!
//! ## Invariants
//! - There is no update and no delete of an entry. The store exposes only
//!   `append_batch`; nothing rewrites or removes a row of the entries or hashes
//!   tables.
//! - An append is acknowledged only after the transaction holding its entry,
//!   its stored hashes, its chain hash and the new head has been committed with
//!   `Durability::Immediate` (fsync'd).
//! - The head (size, root, chain) advances only by a commit, and the in-memory
//!   head only after that commit returns.

pub mod entry_bundle;
pub mod error;
pub mod hash;
pub mod kept;
mod log;
pub mod lookup;
pub mod merkle;
pub mod migrate;
mod overlay;
pub mod private;
pub mod sealed;
pub mod store;
pub mod tiles;
pub mod verify;

pub use error::{Corruption, CorruptionKind, Error};
pub use hash::{chain_hash, content_digest, leaf_hash, Hash, GENESIS_CHAIN};
pub use log::{
    AppendError, Appended, Config, Entry, EntryKey, Ledger, LogView, LookupsState, PendingAppend,
    PendingReceipt, ProvenEntry, Raw, RawPrivate, Receipt, RestoredLeaf, Sequenced, Sequencer,
    Stats,
};
pub use store::Head;
pub use verify::{
    verify_dir, verify_dir_from, verify_dir_indexes, verify_indexes, IndexesVerified, Verified,
};
