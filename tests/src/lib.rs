//! Helpers for the cross-crate integration and adversarial tests.
//!
//! [`RawDisk`] edits a closed data directory directly through redb, as an
//! attacker with disk access would: it knows the table layout documented in
//! `docs/FORMAT.md` and bypasses every API of the `ledger` crate.

#![forbid(unsafe_code)]

pub mod world;

use std::path::{Path, PathBuf};

use ledger::store::{Head, DB_FILE, ENTRIES, HASHES, META};
use ledger::{Config, Hash, Ledger};
use redb::{Database, ReadableDatabase};

/// The leaf bytes test logs are built from.
pub fn sample_leaf(i: u64) -> Vec<u8> {
    format!("{{\"entry\":{i},\"score\":0.{:03}}}", (i * 37) % 1000).into_bytes()
}

/// Builds a log of `n` sample leaves in `dir` and closes it.
pub fn build_log(dir: &Path, n: u64) {
    let log = Ledger::open(dir, Config::default()).expect("open");
    let pending: Vec<_> = (0..n)
        .map(|i| log.submit(sample_leaf(i)).expect("submit"))
        .collect();
    for p in pending {
        p.wait().expect("append");
    }
}

/// Direct access to a closed data directory's tables.
pub struct RawDisk {
    db: Database,
}

impl RawDisk {
    pub fn open(dir: &Path) -> RawDisk {
        RawDisk {
            db: Database::open(db_path(dir)).expect("raw open"),
        }
    }

    /// The stored record (chain ‖ leaf) at `index`.
    pub fn entry_record(&self, index: u64) -> Option<Vec<u8>> {
        let txn = self.db.begin_read().expect("read");
        let t = txn.open_table(ENTRIES).expect("table");
        t.get(index).expect("get").map(|v| v.value().to_vec())
    }

    pub fn head(&self) -> Head {
        let txn = self.db.begin_read().expect("read");
        let t = txn.open_table(META).expect("table");
        let v = t.get("head").expect("get").expect("head");
        Head::decode(v.value()).expect("decode head")
    }

    pub fn hash(&self, stored_index: u64) -> Option<Hash> {
        let txn = self.db.begin_read().expect("read");
        let t = txn.open_table(HASHES).expect("table");
        t.get(stored_index).expect("get").map(|v| Hash(v.value()))
    }

    fn write(&self, f: impl FnOnce(&redb::WriteTransaction)) {
        let txn = self.db.begin_write().expect("write");
        f(&txn);
        txn.commit().expect("commit");
    }

    /// Replaces the stored record of `index` with `record` (chain ‖ leaf).
    pub fn put_entry_record(&self, index: u64, record: &[u8]) {
        self.write(|txn| {
            let mut t = txn.open_table(ENTRIES).expect("table");
            t.insert(index, record).expect("insert");
        });
    }

    /// Changes the leaf bytes of `index`, keeping its stored chain hash.
    pub fn set_leaf(&self, index: u64, leaf: &[u8]) {
        let mut rec = self.entry_record(index).expect("entry exists")[..32].to_vec();
        rec.extend_from_slice(leaf);
        self.put_entry_record(index, &rec);
    }

    /// Changes the stored chain hash of `index`, keeping its leaf bytes.
    pub fn set_chain(&self, index: u64, chain: Hash) {
        let mut rec = self.entry_record(index).expect("entry exists");
        rec[..32].copy_from_slice(&chain.0);
        self.put_entry_record(index, &rec);
    }

    pub fn set_hash(&self, stored_index: u64, h: Hash) {
        self.write(|txn| {
            let mut t = txn.open_table(HASHES).expect("table");
            t.insert(stored_index, h.0).expect("insert");
        });
    }

    pub fn delete_entry(&self, index: u64) {
        self.write(|txn| {
            let mut t = txn.open_table(ENTRIES).expect("table");
            t.remove(index).expect("remove");
        });
    }

    /// Removes entries `from..` and their stored hashes, leaving the head.
    pub fn truncate_from(&self, from: u64) {
        let first_hash = ledger::merkle::stored_hash_index(0, from);
        self.write(|txn| {
            let mut t = txn.open_table(ENTRIES).expect("table");
            t.retain(|k, _| k < from).expect("retain");
            let mut h = txn.open_table(HASHES).expect("table");
            h.retain(|k, _| k < first_hash).expect("retain");
        });
    }

    pub fn set_head(&self, head: &Head) {
        self.write(|txn| {
            let mut t = txn.open_table(META).expect("table");
            t.insert("head", head.encode().as_slice()).expect("insert");
        });
    }
}

/// The data file inside a data directory.
pub fn db_path(dir: &Path) -> PathBuf {
    dir.join(DB_FILE)
}
