//! Test support for the suites beside each crate (`ledger/tests`,
//! `events/tests`, …): a world of signed events ([`world`]), storage-fault
//! backends ([`faults`]), and raw disk access.
//!
//! [`RawDisk`] edits a closed data directory directly through redb, as an
//! attacker with disk access would: it knows the table layout documented in
//! `docs/FORMAT.md` and bypasses every API of the `ledger` crate.

#![forbid(unsafe_code)]

pub mod faults;
pub mod world;

use std::path::{Path, PathBuf};

use ledger::entry_bundle::{bundle_of, EntryBundle, BUNDLE_SIZE};
use ledger::store::{Head, AUX, DB_FILE, ENTRY_BUNDLES, ENTRY_KEYS, HASHES, LEAF_INDEX, META};
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
        self.bundle(bundle_of(index))?
            .record(index)
            .map(|r| r.to_vec())
    }

    /// The decoded entry bundle under `key`, if any.
    pub fn bundle(&self, key: u64) -> Option<EntryBundle> {
        let txn = self.db.begin_read().expect("read");
        let t = txn.open_table(ENTRY_BUNDLES).expect("table");
        t.get(key)
            .expect("get")
            .map(|v| EntryBundle::decode(key, v.value()).expect("bundle decodes"))
    }

    /// Replaces the stored value of bundle `key` with `value`, as is.
    pub fn put_bundle_value(&self, key: u64, value: &[u8]) {
        self.write(|txn| {
            let mut t = txn.open_table(ENTRY_BUNDLES).expect("table");
            t.insert(key, value).expect("insert");
        });
    }

    /// Rewrites the bundle holding `index` with its records passed through
    /// `edit` (a list of (index, chain ‖ leaf) in stored order), removing
    /// the bundle when none is left.
    fn edit_bundle(&self, index: u64, edit: impl FnOnce(&mut Vec<(u64, Vec<u8>)>)) {
        let key = bundle_of(index);
        let mut records: Vec<(u64, Vec<u8>)> = self
            .bundle(key)
            .map(|b| b.records().map(|(i, r)| (i, r.to_vec())).collect())
            .unwrap_or_default();
        edit(&mut records);
        self.write(|txn| {
            let mut t = txn.open_table(ENTRY_BUNDLES).expect("table");
            if records.is_empty() {
                t.remove(key).expect("remove");
            } else {
                let b =
                    EntryBundle::from_records(key, records.iter().map(|(i, r)| (*i, r.as_slice())));
                t.insert(key, b.encode().expect("encode").as_slice())
                    .expect("insert");
            }
        });
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
        self.edit_bundle(index, |records| {
            match records.iter().position(|(i, _)| *i >= index) {
                Some(p) if records[p].0 == index => records[p].1 = record.to_vec(),
                Some(p) => records.insert(p, (index, record.to_vec())),
                None => records.push((index, record.to_vec())),
            }
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
        self.edit_bundle(index, |records| records.retain(|(i, _)| *i != index));
    }

    /// Removes entries `from..` and their stored hashes, leaving the head.
    pub fn truncate_from(&self, from: u64) {
        let first_hash = ledger::merkle::stored_hash_index(0, from);
        self.edit_bundle(from, |records| records.retain(|(i, _)| *i < from));
        self.write(|txn| {
            let mut t = txn.open_table(ENTRY_BUNDLES).expect("table");
            t.retain(|k, _| k * BUNDLE_SIZE < from).expect("retain");
            let mut h = txn.open_table(HASHES).expect("table");
            h.retain(|k, _| k < first_hash).expect("retain");
        });
    }

    /// The derived state saved under `name` in the `aux` table.
    pub fn aux(&self, name: &str) -> Option<Vec<u8>> {
        let txn = self.db.begin_read().expect("read");
        let t = txn.open_table(AUX).ok()?;
        t.get(name).expect("get").map(|v| v.value().to_vec())
    }

    /// Replaces the derived state saved under `name`.
    pub fn put_aux(&self, name: &str, bytes: &[u8]) {
        self.write(|txn| {
            let mut t = txn.open_table(AUX).expect("table");
            t.insert(name, bytes).expect("insert");
        });
    }

    /// The key index's row for `name`: (first index, content digest).
    pub fn entry_key(&self, name: &str) -> Option<(u64, [u8; 32])> {
        let txn = self.db.begin_read().expect("read");
        let t = txn.open_table(ENTRY_KEYS).ok()?;
        t.get(name).expect("get").map(|v| v.value())
    }

    /// Writes the key index's row for `name`.
    pub fn put_entry_key(&self, name: &str, index: u64, digest: [u8; 32]) {
        self.write(|txn| {
            let mut t = txn.open_table(ENTRY_KEYS).expect("table");
            t.insert(name, (index, digest)).expect("insert");
        });
    }

    /// Removes the key index's row for `name`.
    pub fn delete_entry_key(&self, name: &str) {
        self.write(|txn| {
            let mut t = txn.open_table(ENTRY_KEYS).expect("table");
            t.remove(name).expect("remove");
        });
    }

    /// The leaf-hash lookup's row for `leaf_hash`.
    pub fn leaf_index(&self, leaf_hash: &Hash) -> Option<u64> {
        let txn = self.db.begin_read().expect("read");
        let t = txn.open_table(LEAF_INDEX).ok()?;
        t.get(leaf_hash.0).expect("get").map(|v| v.value())
    }

    /// Writes (or with `None`, removes) the leaf-hash lookup's row for
    /// `leaf_hash`.
    pub fn set_leaf_index(&self, leaf_hash: &Hash, index: Option<u64>) {
        self.write(|txn| {
            let mut t = txn.open_table(LEAF_INDEX).expect("table");
            match index {
                Some(i) => {
                    t.insert(leaf_hash.0, i).expect("insert");
                }
                None => {
                    t.remove(leaf_hash.0).expect("remove");
                }
            }
        });
    }

    /// Removes the key index's rows for entries `from..` and sets
    /// `keys_through` to `from`: a file whose index stopped there. With
    /// `from == 0` the table itself is removed, as in a file written by a
    /// build without it.
    pub fn rewind_entry_keys(&self, from: u64) {
        self.write(|txn| {
            if from == 0 {
                txn.delete_table(ENTRY_KEYS).expect("delete");
                let mut m = txn.open_table(META).expect("table");
                m.remove("keys_through").expect("remove");
                return;
            }
            let mut t = txn.open_table(ENTRY_KEYS).expect("table");
            t.retain(|_, (i, _)| i < from).expect("retain");
            let mut m = txn.open_table(META).expect("table");
            m.insert("keys_through", from.to_be_bytes().as_slice())
                .expect("insert");
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
