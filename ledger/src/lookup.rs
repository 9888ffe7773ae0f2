//! The two lookups that name an entry by something other than its index: by
//! leaf hash (proofs by hash) and by entry key (the event log's envelope
//! ids). They live beside the log, in `<data dir>/lookup/`, an LSM tree
//! ([fjall](https://docs.rs/fjall)), and off the commit path.
//!
//! ## Why apart from the log's file
//! Both are keyed by random hashes. Kept in the log's B-tree file they were
//! written in the transaction that commits each entry, and once the trees
//! outgrew memory every entry dirtied two random pages of them: at 10M
//! entries that doubled the server's CPU per event and quintupled the bytes
//! written (bench/README.md, R2.1). An LSM tree writes the same rows as
//! sequential appends (a journal, then sorted runs merged in the
//! background), so its cost per row does not grow with the log.
//!
//! ## Contract
//! - **Derived, never trusted.** Every answer is checked against the entry
//!   it names before it is used (a sequencer checks the id and digest; a
//!   proof by hash checks the leaf hash); `ledger verify` checks every row.
//! - **Complete below a watermark.** Each lookup has one, `size ‖ root`:
//!   every entry below `size` has its rows, and `root` is the log's tree
//!   root at that size. The rows of a batch and the watermarks are written
//!   in one atomic fjall batch, after the log's own commit and before its
//!   head is published; a crash loses a suffix of batches at most, never a
//!   row below a watermark.
//! - **Keys only from a keyed opener.** Only a sequencer that names entries
//!   by key ([`crate::Sequencer::KEYED`], the event log) moves the key
//!   watermark. A raw opener of the same directory (a CLI tool) indexes
//!   leaf hashes only and leaves the key watermark behind, so the event log
//!   indexes the keys it skipped before it sequences anything.
//! - **Bound to its log.** On open, a watermark past the log's head, or a
//!   root that is not the log's root at that size (another log's lookups,
//!   or the log restored from an older copy), discards the lookups; they
//!   are rebuilt from the entries.
//! - **Not durable by itself.** Rows reach the OS at once and the disk at
//!   the OS's pace (or [`Lookups::persist`]): a `kill -9` loses nothing, a
//!   power loss at most the unsynced tail, which the next open indexes
//!   again from the entries.
//!
//! ## Keyspaces
//! | keyspace | key | value |
//! |---|---|---|
//! | `leaf_index` | leaf hash (32) | first index with that leaf hash (u64 BE) |
//! | `entry_keys` | an entry's key (UTF-8) | first index with that key (u64 BE) ‖ content digest (32) |
//! | `meta` | `leaves_through` | the leaf-hash watermark: size (u64 BE) ‖ tree root at that size (32) |
//! | `meta` | `keys_through` | the key watermark, the same way |

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};

use crate::error::{Corruption, CorruptionKind, Error};
use crate::hash::Hash;

/// The lookup directory inside the data directory.
pub const LOOKUP_DIR: &str = "lookup";
/// `leaf hash → first index` ([`Lookups::leaf`]).
pub const LEAF_INDEX: &str = "leaf_index";
/// `entry key → first index ‖ digest` ([`Lookups::key`]).
pub const ENTRY_KEYS: &str = "entry_keys";
/// The watermarks: `leaves_through` and `keys_through`, each `size ‖ root`.
pub const META: &str = "meta";
/// The leaf-hash lookup's watermark in [`META`].
pub const LEAVES_THROUGH: &str = "leaves_through";
/// The key lookup's watermark in [`META`].
pub const KEYS_THROUGH: &str = "keys_through";

/// Memtable size per keyspace before it is flushed to a sorted run.
const MEMTABLE_BYTES: u64 = 8 * 1024 * 1024;
/// Block cache shared by the keyspaces.
const CACHE_BYTES: u64 = 32 * 1024 * 1024;

/// How the keyspaces are laid out. Most lookups are misses (a new envelope
/// id, a new leaf), answered by a table's Bloom filter: the filters (10 bits
/// per key) and the indexes are partitioned at every level, so a lookup
/// reads one small partition per table, never a whole table's filter.
fn keyspace_options() -> KeyspaceCreateOptions {
    use fjall::config::PartitioningPolicy;
    use fjall::config::{BloomConstructionPolicy, FilterPolicy, FilterPolicyEntry};
    KeyspaceCreateOptions::default()
        .max_memtable_size(MEMTABLE_BYTES)
        .filter_policy(FilterPolicy::all(FilterPolicyEntry::Bloom(
            BloomConstructionPolicy::BitsPerKey(10.0),
        )))
        .filter_block_partitioning_policy(PartitioningPolicy::all(true))
        .index_block_partitioning_policy(PartitioningPolicy::all(true))
}

/// Where [`Lookups::remove`] moves the lookups before deleting them.
const DISCARD_DIR: &str = "lookup.discard";

/// One entry's rows.
#[derive(Debug, Clone, Copy)]
pub struct LookupRow<'a> {
    pub index: u64,
    pub leaf_hash: &'a Hash,
    pub key: Option<(&'a str, [u8; 32])>,
}

/// The lookups of one data directory. Cheap to clone: clones share the
/// store, and a reopen ([`Lookups::reopen`]) reopens it for all of them.
#[derive(Clone)]
pub struct Lookups {
    /// The store's handles; `None` only while it is being reopened.
    handles: Arc<std::sync::RwLock<Option<Handles>>>,
    /// The watermarks' sizes (leaves, keys), as last written or read.
    through: Arc<[AtomicU64; 2]>,
    path: PathBuf,
}

/// An open fjall store and its three keyspaces.
struct Handles {
    db: Database,
    leaves: Keyspace,
    keys: Keyspace,
    meta: Keyspace,
}

impl std::fmt::Debug for Lookups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lookups")
            .field("path", &self.path)
            .field("leaves_through", &self.leaves_through())
            .field("keys_through", &self.keys_through())
            .finish()
    }
}

/// An error of the lookup store, as a storage error.
pub(crate) fn lookup_err(e: impl std::fmt::Display) -> Error {
    crate::error::storage(redb::StorageError::Io(std::io::Error::other(format!(
        "lookup index: {e}"
    ))))
}

fn bad(detail: impl Into<String>) -> Error {
    Corruption::new(0, CorruptionKind::Index, detail).into()
}

fn u64_at(b: &[u8], what: &str) -> Result<u64, Error> {
    b.get(..8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| bad(format!("a {what} row is shorter than 8 bytes")))
}

/// Decodes an `entry_keys` value.
pub fn decode_key_value(v: &[u8]) -> Result<(u64, [u8; 32]), Error> {
    if v.len() != 40 {
        return Err(bad(format!("an entry_keys row of {} bytes", v.len())));
    }
    let mut digest = [0u8; 32];
    digest.copy_from_slice(&v[8..]);
    Ok((u64_at(v, "entry_keys")?, digest))
}

/// Encodes an `entry_keys` value.
pub fn encode_key_value(index: u64, digest: &[u8; 32]) -> [u8; 40] {
    let mut v = [0u8; 40];
    v[..8].copy_from_slice(&index.to_be_bytes());
    v[8..].copy_from_slice(digest);
    v
}

/// Encodes the watermark.
pub fn encode_through(size: u64, root: &Hash) -> [u8; 40] {
    encode_key_value(size, &root.0)
}

/// A folder in the store's `keyspaces/` that is not named by a number.
fn stray_keyspace(path: &Path) -> Option<String> {
    let entries = std::fs::read_dir(path.join("keyspaces")).ok()?;
    for e in entries.flatten() {
        let numbered = e
            .file_name()
            .to_str()
            .is_some_and(|n| n.parse::<u64>().is_ok());
        if !numbered && e.file_type().is_ok_and(|t| t.is_dir()) {
            return Some(format!(
                "a stray folder {} in the store",
                e.path().display()
            ));
        }
    }
    None
}

impl Lookups {
    /// Opens (or creates) the lookups of the data directory `dir`.
    pub fn open(dir: &Path) -> Result<Lookups, Error> {
        Lookups::try_open(dir)?.map_err(lookup_err)
    }

    /// Opens (or creates) the lookups of `dir`: `Err` when another handle
    /// holds them, `Ok(Err(why))` when they cannot be read (damaged:
    /// rebuild). fjall panics on a folder in `keyspaces/` whose name is not
    /// a number, and that panic can abort the process while it unwinds, so
    /// such a folder is found here first; any other panic the store
    /// recovers from is caught and taken as damage too.
    pub(crate) fn try_open(dir: &Path) -> Result<Result<Lookups, String>, Error> {
        if let Some(why) = stray_keyspace(&dir.join(LOOKUP_DIR)) {
            return Ok(Err(why));
        }
        match std::panic::catch_unwind(|| Lookups::open_fjall(dir)) {
            Ok(Err(fjall::Error::Locked)) => Err(lookup_err(
                "held by another process or handle (one ledger per data directory)",
            )),
            Ok(Ok(l)) => Ok(Ok(l)),
            Ok(Err(e)) => Ok(Err(e.to_string())),
            Err(panic) => Ok(Err(format!(
                "the store panicked reading them: {}",
                crate::store::panic_message(&*panic)
            ))),
        }
    }

    fn open_fjall(dir: &Path) -> Result<Lookups, fjall::Error> {
        let path = dir.join(LOOKUP_DIR);
        let l = Lookups {
            handles: Arc::new(std::sync::RwLock::new(Some(Lookups::open_handles(&path)?))),
            through: Arc::new([AtomicU64::new(0), AtomicU64::new(0)]),
            path,
        };
        l.read_through()?;
        Ok(l)
    }

    /// Reads the watermarks' sizes from the store into [`Lookups::through`].
    /// A malformed watermark reads as none here; the open's binding check
    /// ([`Lookups::watermarks`]) refuses it and rebuilds.
    fn read_through(&self) -> Result<(), fjall::Error> {
        let g = self.handles.read().unwrap_or_else(|p| p.into_inner());
        let Some(h) = g.as_ref() else {
            return Ok(());
        };
        for (at, name) in [LEAVES_THROUGH, KEYS_THROUGH].into_iter().enumerate() {
            let size = h
                .meta
                .get(name)?
                .and_then(|v| decode_key_value(&v).ok())
                .map_or(0, |(s, _)| s);
            self.through[at].store(size, Ordering::Release);
        }
        Ok(())
    }

    /// Drops the store and opens it again, reading its watermarks anew:
    /// after a failed write (a full disk), fjall refuses every later write
    /// until it is reopened, and what it wrote before the failure is what
    /// the reopen finds. The committer calls this before it catches the
    /// lookups up again.
    pub fn reopen(&self) -> Result<(), Error> {
        let mut g = self.handles.write().unwrap_or_else(|p| p.into_inner());
        // The old store must be gone first: it holds the folder's lock.
        *g = None;
        let opened = std::panic::catch_unwind(|| Lookups::open_handles(&self.path))
            .map_err(|p| lookup_err(crate::store::panic_message(&*p)))?
            .map_err(lookup_err)?;
        *g = Some(opened);
        drop(g);
        self.read_through().map_err(lookup_err)
    }

    /// Runs `f` on the open store (an error while it is being reopened).
    fn with<T>(&self, f: impl FnOnce(&Handles) -> Result<T, Error>) -> Result<T, Error> {
        let g = self.handles.read().unwrap_or_else(|p| p.into_inner());
        match g.as_ref() {
            Some(h) => f(h),
            None => Err(lookup_err("the store is being reopened")),
        }
    }

    fn open_handles(path: &Path) -> Result<Handles, fjall::Error> {
        // One background worker: with two, fjall's first worker hands
        // every compaction request back to the queue while the other
        // compacts, and spins on it (a tenth of the server's CPU under load
        // at 10M entries, measured with `perf`); one worker flushes and
        // compacts in turn, which keeps up.
        let db = Database::builder(path)
            .cache_size(CACHE_BYTES)
            .worker_threads(1)
            .open()?;
        let leaves = db.keyspace(LEAF_INDEX, keyspace_options)?;
        let keys = db.keyspace(ENTRY_KEYS, keyspace_options)?;
        let meta = db.keyspace(META, keyspace_options)?;
        Ok(Handles {
            db,
            leaves,
            keys,
            meta,
        })
    }

    /// Removes the lookups of `dir` (they are rebuilt from the entries).
    /// They are first renamed away, and the rename made durable, so that a
    /// crash part-way through the deletion never leaves some of their rows
    /// where the next open would read them.
    pub fn remove(dir: &Path) -> Result<(), Error> {
        let discard = dir.join(DISCARD_DIR);
        let gone = |r: std::io::Result<()>| match r {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(lookup_err(e)),
        };
        gone(std::fs::remove_dir_all(&discard))?;
        gone(std::fs::rename(dir.join(LOOKUP_DIR), &discard))?;
        crate::store::sync_dir(dir)?;
        gone(std::fs::remove_dir_all(&discard))
    }

    /// Why these lookups, whose watermarks are `marks`, are not those of
    /// the log `snap` holds at `size`, if they are not: a watermark past
    /// `size`, or whose root is not the log's root at its size (another
    /// log's lookups, or the log restored from an older copy), or rows in a
    /// lookup without a watermark (a deletion cut short, or rows planted:
    /// no open of this build leaves them).
    pub(crate) fn not_this_logs(
        &self,
        snap: &crate::store::Snapshot,
        size: u64,
        marks: &[Option<(u64, Hash)>; 2],
    ) -> Result<Option<String>, Error> {
        for (at, root) in marks.iter().flatten() {
            if *at > size {
                return Ok(Some(format!(
                    "they cover {at} entries and the log has {size}"
                )));
            }
            let r = crate::store::Reader::new(snap);
            let log_root = tlog_tiles::tree_hash(*at, &r).map_err(|e| r.take_err(e))?;
            if log_root != *root {
                return Ok(Some(format!("their root at size {at} is not the log's")));
            }
        }
        self.with(|h| {
            for (mark, k) in marks.iter().zip([&h.leaves, &h.keys]) {
                if mark.is_none() && !k.is_empty().map_err(lookup_err)? {
                    return Ok(Some("they hold rows without a watermark".to_owned()));
                }
            }
            Ok(None)
        })
    }

    /// The watermarks as stored, leaf hashes then keys: every entry below
    /// `size` has its rows in that lookup, and `root` is the tree root at
    /// `size`. `None` for a lookup never written.
    pub fn watermarks(&self) -> Result<[Option<(u64, Hash)>; 2], Error> {
        let read = |name: &str| -> Result<Option<(u64, Hash)>, Error> {
            match self.with(|h| h.meta.get(name).map_err(lookup_err))? {
                None => Ok(None),
                Some(v) => {
                    let (size, root) = decode_key_value(&v)
                        .map_err(|_| bad(format!("the lookup watermark {name} is malformed")))?;
                    Ok(Some((size, Hash(root))))
                }
            }
        };
        Ok([read(LEAVES_THROUGH)?, read(KEYS_THROUGH)?])
    }

    /// The size below which every entry has its leaf-hash row.
    pub fn leaves_through(&self) -> u64 {
        self.through[0].load(Ordering::Acquire)
    }

    /// The size below which every entry has its key row (if it has a key).
    pub fn keys_through(&self) -> u64 {
        self.through[1].load(Ordering::Acquire)
    }

    /// Writes the rows of entries `from..to` that each lookup lacks (those
    /// at or past its watermark) and moves each lookup it writes to
    /// `(to, root)`: the leaf lookup, and with `keyed` the key lookup, in
    /// one atomic batch. A lookup whose watermark is already at or past
    /// `to` is left as it is (a raw opener indexed leaf hashes further than
    /// the keys). Refuses, writing nothing, when a lookup it moves stops
    /// before `from` (rows would be missing below its new watermark).
    ///
    /// A leaf hash or key keeps the first index recorded for it, but only
    /// a row below the lookup's watermark counts: a row naming an entry at
    /// or past the watermark was never written by a batch that moved it
    /// (planted, or left by a log that was cut back), and is overwritten.
    /// `keys_known_new` skips the look-up for keys: the caller (a keyed
    /// sequencer, [`crate::Sequencer::KEYED`]) has looked each one up
    /// already and found it absent. It also skips the look-up of the leaf
    /// hash of a row that has a key, when the key lookup reaches at least
    /// as far as the leaf lookup: a key is a function of its leaf
    /// ([`crate::Sequencer::key_of`]), so an earlier entry with the same
    /// leaf hash would have the same key, below the key lookup's watermark,
    /// and the key would not be new (short of a SHA-256 collision).
    pub(crate) fn add(
        &self,
        from: u64,
        rows: &[LookupRow<'_>],
        to: u64,
        root: &Hash,
        keyed: bool,
        keys_known_new: bool,
    ) -> Result<(), Error> {
        let (leaves_at, keys_at) = (self.leaves_through(), self.keys_through());
        let move_leaves = leaves_at < to;
        let move_keys = keyed && keys_at < to;
        for (name, at, moved) in [
            ("leaf-hash", leaves_at, move_leaves),
            ("key", keys_at, move_keys),
        ] {
            if moved && at < from {
                return Err(bad(format!(
                    "the {name} lookup is complete below {at}; rows {from}..{to} do not continue it"
                )));
            }
        }
        // Whether a stored row holds a first index below `at`.
        let holds = |k: &Keyspace, key: &[u8], at: u64| -> Result<bool, Error> {
            match k.get(key).map_err(lookup_err)? {
                None => Ok(false),
                Some(v) => Ok(u64_at(&v, "lookup")? < at),
            }
        };
        self.with(|h| {
            let mut batch = h.db.batch().durability(Some(PersistMode::Buffer));
            let mut seen_leaves = std::collections::HashSet::new();
            let mut seen_keys = std::collections::HashSet::new();
            for r in rows {
                let leaf_new_by_key = keys_known_new && r.key.is_some() && keys_at >= leaves_at;
                if move_leaves
                    && r.index >= leaves_at
                    && seen_leaves.insert(r.leaf_hash.0)
                    && (leaf_new_by_key || !holds(&h.leaves, &r.leaf_hash.0, leaves_at)?)
                {
                    batch.insert(&h.leaves, r.leaf_hash.0, r.index.to_be_bytes());
                }
                if let Some((name, digest)) = r.key.filter(|_| move_keys && r.index >= keys_at) {
                    if seen_keys.insert(name)
                        && (keys_known_new || !holds(&h.keys, name.as_bytes(), keys_at)?)
                    {
                        batch.insert(&h.keys, name, encode_key_value(r.index, &digest));
                    }
                }
            }
            if move_leaves {
                batch.insert(&h.meta, LEAVES_THROUGH, encode_through(to, root));
            }
            if move_keys {
                batch.insert(&h.meta, KEYS_THROUGH, encode_through(to, root));
            }
            batch.commit().map_err(lookup_err)?;
            Ok(())
        })?;
        if move_leaves {
            self.through[0].store(to, Ordering::Release);
        }
        if move_keys {
            self.through[1].store(to, Ordering::Release);
        }
        Ok(())
    }

    /// The first index recorded for key `name`, and its digest.
    pub fn key(&self, name: &str) -> Result<Option<(u64, [u8; 32])>, Error> {
        self.with(|h| {
            h.keys
                .get(name)
                .map_err(lookup_err)?
                .map(|v| decode_key_value(&v))
                .transpose()
        })
    }

    /// The first index recorded for `leaf_hash`.
    pub fn leaf(&self, leaf_hash: &Hash) -> Result<Option<u64>, Error> {
        self.with(|h| {
            h.leaves
                .get(leaf_hash.0)
                .map_err(lookup_err)?
                .map(|v| u64_at(&v, "leaf_index"))
                .transpose()
        })
    }

    /// Leaf-hash rows naming an entry below `leaves`, and key rows naming
    /// an entry below `keys`. Reads every row.
    pub fn rows_below(&self, leaves: u64, keys: u64) -> Result<(u64, u64), Error> {
        self.with(|h| {
            let mut leaf_rows = 0;
            for g in h.leaves.iter() {
                let v = g.value().map_err(lookup_err)?;
                if u64_at(&v, "leaf_index")? < leaves {
                    leaf_rows += 1;
                }
            }
            let mut key_rows = 0;
            for g in h.keys.iter() {
                let v = g.value().map_err(lookup_err)?;
                if decode_key_value(&v)?.0 < keys {
                    key_rows += 1;
                }
            }
            Ok((leaf_rows, key_rows))
        })
    }

    /// Writes what the OS holds of the journal to the disk.
    pub fn persist(&self) -> Result<(), Error> {
        self.with(|h| h.db.persist(PersistMode::SyncData).map_err(lookup_err))
    }

    /// The bytes the lookups take on disk.
    pub fn disk_space(&self) -> Result<u64, Error> {
        self.with(|h| h.db.disk_space().map_err(lookup_err))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reopen, as after a failed write: every clone reads the reopened
    /// store, with the watermarks and rows written before, and writes on.
    #[test]
    fn a_reopen_keeps_what_was_written_and_serves_every_clone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let l = Lookups::open(dir.path()).expect("open");
        let clone = l.clone();
        let a = Hash([1; 32]);
        let rows = [LookupRow {
            index: 0,
            leaf_hash: &a,
            key: Some(("x", [9; 32])),
        }];
        l.add(0, &rows, 1, &Hash([5; 32]), true, false)
            .expect("add");
        l.persist().expect("persist");
        l.reopen().expect("reopen");
        assert_eq!((clone.leaves_through(), clone.keys_through()), (1, 1));
        assert_eq!(clone.leaf(&a).expect("read"), Some(0));
        assert_eq!(clone.key("x").expect("read"), Some((0, [9; 32])));
        let b = Hash([2; 32]);
        let more = [LookupRow {
            index: 1,
            leaf_hash: &b,
            key: None,
        }];
        clone
            .add(1, &more, 2, &Hash([6; 32]), true, false)
            .expect("add");
        assert_eq!(l.leaf(&b).expect("read"), Some(1));
        assert_eq!(l.leaves_through(), 2);
    }

    /// The committer's path: keys it found absent, and with them their
    /// leaf hashes, are written without being read first; a row without a
    /// key still keeps the first index of its leaf hash.
    #[test]
    fn keys_known_new_index_their_leaves_and_unkeyed_rows_keep_first_indices() {
        let dir = tempfile::tempdir().expect("tempdir");
        let l = Lookups::open(dir.path()).expect("open");
        let (a, b) = (Hash([1; 32]), Hash([2; 32]));
        let rows = [
            LookupRow {
                index: 0,
                leaf_hash: &a,
                key: Some(("x", [9; 32])),
            },
            LookupRow {
                index: 1,
                leaf_hash: &b,
                key: Some(("y", [8; 32])),
            },
        ];
        l.add(0, &rows, 2, &Hash([5; 32]), true, true).expect("add");
        let again = [LookupRow {
            index: 2,
            leaf_hash: &a,
            key: None,
        }];
        l.add(2, &again, 3, &Hash([6; 32]), true, true)
            .expect("add");
        assert_eq!(l.leaf(&a).expect("read"), Some(0));
        assert_eq!(l.leaf(&b).expect("read"), Some(1));
        assert_eq!(l.key("y").expect("read"), Some((1, [8; 32])));
        assert_eq!(l.rows_below(3, 3).expect("rows"), (2, 2));
    }

    #[test]
    fn rows_keep_their_first_index_and_the_watermark_moves_with_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let l = Lookups::open(dir.path()).expect("open");
        assert_eq!(l.watermarks().expect("read"), [None, None]);
        let (a, b) = (Hash([1; 32]), Hash([2; 32]));
        let rows = [
            LookupRow {
                index: 0,
                leaf_hash: &a,
                key: Some(("x", [9; 32])),
            },
            LookupRow {
                index: 1,
                leaf_hash: &a,
                key: None,
            },
        ];
        l.add(0, &rows, 2, &Hash([5; 32]), true, false)
            .expect("add");
        let again = [LookupRow {
            index: 2,
            leaf_hash: &b,
            key: Some(("x", [8; 32])),
        }];
        l.add(2, &again, 3, &Hash([6; 32]), true, false)
            .expect("add");
        assert_eq!(l.leaf(&a).expect("read"), Some(0));
        assert_eq!(l.leaf(&b).expect("read"), Some(2));
        assert_eq!(l.key("x").expect("read"), Some((0, [9; 32])));
        assert_eq!(l.rows_below(3, 3).expect("rows"), (2, 1));
        assert_eq!(l.rows_below(1, 0).expect("rows"), (1, 0));
        // A gap: refused, nothing written.
        assert!(l.add(4, &again, 9, &Hash([0; 32]), true, false).is_err());
        // An unkeyed opener moves the leaf watermark only.
        let c = Hash([3; 32]);
        let raw = [LookupRow {
            index: 3,
            leaf_hash: &c,
            key: Some(("y", [7; 32])),
        }];
        l.add(3, &raw, 4, &Hash([7; 32]), false, false)
            .expect("add");
        assert_eq!((l.leaves_through(), l.keys_through()), (4, 3));
        assert_eq!(l.key("y").expect("read"), None);
        drop(l);
        let l = Lookups::open(dir.path()).expect("reopen");
        assert_eq!((l.leaves_through(), l.keys_through()), (4, 3));
        assert_eq!(
            l.watermarks().expect("read"),
            [Some((4, Hash([7; 32]))), Some((3, Hash([6; 32])))]
        );
        // The keyed opener catches the keys up from their own watermark.
        l.add(3, &raw, 4, &Hash([7; 32]), true, false).expect("add");
        assert_eq!(l.key("y").expect("read"), Some((3, [7; 32])));
        assert_eq!(l.leaf(&c).expect("read"), Some(3));
    }

    #[test]
    fn keys_catch_up_in_chunks_behind_leaf_hashes_a_raw_opener_indexed_further() {
        let dir = tempfile::tempdir().expect("tempdir");
        let l = Lookups::open(dir.path()).expect("open");
        let hashes: Vec<Hash> = (0..4u8).map(|i| Hash([i + 1; 32])).collect();
        let names = ["a", "b", "c", "d"];
        let rows: Vec<LookupRow<'_>> = (0..4)
            .map(|i| LookupRow {
                index: i as u64,
                leaf_hash: &hashes[i],
                key: Some((names[i], [i as u8; 32])),
            })
            .collect();
        // A raw opener indexes the leaf hashes of all four entries.
        l.add(0, &rows, 4, &Hash([4; 32]), false, false)
            .expect("raw");
        assert_eq!((l.leaves_through(), l.keys_through()), (4, 0));
        // The keyed opener then catches the keys up in two chunks; the leaf
        // watermark stays where it is.
        l.add(0, &rows[..2], 2, &Hash([2; 32]), true, false)
            .expect("chunk 1");
        assert_eq!((l.leaves_through(), l.keys_through()), (4, 2));
        l.add(2, &rows[2..], 4, &Hash([4; 32]), true, false)
            .expect("chunk 2");
        assert_eq!((l.leaves_through(), l.keys_through()), (4, 4));
        assert_eq!(
            l.watermarks().expect("read"),
            [Some((4, Hash([4; 32]))), Some((4, Hash([4; 32])))]
        );
        for (i, name) in names.iter().enumerate() {
            assert_eq!(l.key(name).expect("read"), Some((i as u64, [i as u8; 32])));
        }
    }

    #[test]
    fn a_row_above_the_watermark_is_overwritten_not_kept_as_the_first() {
        // A row naming an entry the lookup does not cover yet was never
        // written by a batch that moved the watermark (planted, or left by
        // a log cut back): kept as "first", it would hide the real entry.
        let dir = tempfile::tempdir().expect("tempdir");
        let l = Lookups::open(dir.path()).expect("open");
        let h = Hash([9; 32]);
        l.with(|s| {
            s.keys
                .insert("x", encode_key_value(7, &[1; 32]))
                .map_err(lookup_err)?;
            s.leaves.insert(h.0, 7u64.to_be_bytes()).map_err(lookup_err)
        })
        .expect("plant");
        let rows = [LookupRow {
            index: 0,
            leaf_hash: &h,
            key: Some(("x", [2; 32])),
        }];
        l.add(0, &rows, 1, &Hash([1; 32]), true, false)
            .expect("add");
        assert_eq!(l.key("x").expect("read"), Some((0, [2; 32])));
        assert_eq!(l.leaf(&h).expect("read"), Some(0));
    }
}
