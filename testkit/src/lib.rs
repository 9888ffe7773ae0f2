//! Test support for the suites beside each crate (`ledger/tests`,
//! `events/tests`, …): a world of signed events ([`world`]), storage-fault
//! backends ([`faults`]), and raw disk access.
//!
//! [`RawDisk`] edits a closed data directory directly through redb, as an
//! attacker with disk access would: it knows the table layout documented in
//! `docs/FORMAT.md` and bypasses every API of the `ledger` crate.
//! [`RawLookups`] does the same to the lookups beside it, through fjall.

#![forbid(unsafe_code)]

pub mod faults;
pub mod pg;
pub mod world;

use std::path::{Path, PathBuf};

use ledger::entry_bundle::{bundle_of, EntryBundle, BUNDLE_SIZE};
use ledger::lookup;
use ledger::store::{Head, DB_FILE, ENTRY_BUNDLES, HASHES, META};
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

/// A log configuration pinned to the redb data file, whatever
/// `LEDGER_STORAGE` says: for the suites that attack the file's own layout
/// (entry bundles, redb pages) or inject faults below it.
pub fn file_config() -> Config {
    Config {
        backend: Some(faults::plain_file()),
        ..Config::default()
    }
}

/// [`build_log`] pinned to the redb data file ([`file_config`]).
pub fn build_file_log(dir: &Path, n: u64) {
    let log = Ledger::open(dir, file_config()).expect("open");
    let pending: Vec<_> = (0..n)
        .map(|i| log.submit(sample_leaf(i)).expect("submit"))
        .collect();
    for p in pending {
        p.wait().expect("append");
    }
}

/// Direct access to a closed data directory's tables: through redb for a
/// data file, or for a log in PostgreSQL as a database superuser with the
/// schema's triggers off (`session_replication_role = replica`), the
/// attacker who owns the database.
pub struct RawDisk(Raw);

enum Raw {
    File(Database),
    Postgres(Box<std::cell::RefCell<postgres::Client>>, String),
}

impl RawDisk {
    pub fn open(dir: &Path) -> RawDisk {
        match ledger::store::Location::of(dir).expect("location") {
            Some(ledger::store::Location::Postgres(at)) => {
                let mut c = postgres::Client::connect(&at.url, postgres::NoTls).expect("connect");
                c.batch_execute("SET session_replication_role = replica")
                    .expect("triggers off");
                RawDisk(Raw::Postgres(
                    Box::new(std::cell::RefCell::new(c)),
                    at.schema,
                ))
            }
            _ => RawDisk(Raw::File(Database::open(db_path(dir)).expect("raw open"))),
        }
    }

    /// The tables of one redb file of a data directory: a sealed segment
    /// (`segments/<size>.redb`) or the data file itself.
    pub fn open_file(path: &Path) -> RawDisk {
        RawDisk(Raw::File(Database::open(path).expect("raw open")))
    }

    fn db(&self) -> &Database {
        match &self.0 {
            Raw::File(db) => db,
            Raw::Postgres(..) => panic!("entry bundles and redb tables exist only in a data file; pin the log to redb (testkit::file_config)"),
        }
    }

    /// Runs `sql` (with `{s}` for the schema) on a PostgreSQL log; `None`
    /// for a data file.
    fn pg<T>(&self, f: impl FnOnce(&mut postgres::Client, &str) -> T) -> Option<T> {
        match &self.0 {
            Raw::File(_) => None,
            Raw::Postgres(c, s) => Some(f(&mut c.borrow_mut(), s)),
        }
    }

    /// The stored record (chain ‖ leaf) at `index`.
    pub fn entry_record(&self, index: u64) -> Option<Vec<u8>> {
        if let Some(r) = self.pg(|c, s| {
            c.query_opt(
                &format!("SELECT chain || leaf FROM {s}.entries WHERE idx = $1"),
                &[&(index as i64)],
            )
            .expect("select")
            .map(|r| r.get::<_, Vec<u8>>(0))
        }) {
            return r;
        }
        self.bundle(bundle_of(index))?
            .record(index)
            .map(|r| r.to_vec())
    }

    /// The decoded entry bundle under `key`, if any.
    pub fn bundle(&self, key: u64) -> Option<EntryBundle> {
        let txn = self.db().begin_read().expect("read");
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
        if let Some(h) = self.pg(|c, s| {
            let r = c
                .query_one(&format!("SELECT size, root, chain FROM {s}.head"), &[])
                .expect("head");
            let size: i64 = r.get(0);
            let root: Vec<u8> = r.get(1);
            let chain: Vec<u8> = r.get(2);
            Head {
                size: size as u64,
                root: Hash(root.try_into().expect("32")),
                chain: Hash(chain.try_into().expect("32")),
            }
        }) {
            return h;
        }
        let txn = self.db().begin_read().expect("read");
        let t = txn.open_table(META).expect("table");
        let v = t.get("head").expect("get").expect("head");
        Head::decode(v.value()).expect("decode head")
    }

    pub fn hash(&self, stored_index: u64) -> Option<Hash> {
        if let Some(h) = self.pg(|c, s| {
            c.query_opt(
                &format!("SELECT hash FROM {s}.hashes WHERE idx = $1"),
                &[&(stored_index as i64)],
            )
            .expect("select")
            .map(|r| Hash(r.get::<_, Vec<u8>>(0).try_into().expect("32")))
        }) {
            return h;
        }
        let txn = self.db().begin_read().expect("read");
        let t = txn.open_table(HASHES).expect("table");
        t.get(stored_index).expect("get").map(|v| Hash(v.value()))
    }

    fn write(&self, f: impl FnOnce(&redb::WriteTransaction)) {
        let txn = self.db().begin_write().expect("write");
        f(&txn);
        txn.commit().expect("commit");
    }

    /// Replaces the stored record of `index` with `record` (chain ‖ leaf).
    pub fn put_entry_record(&self, index: u64, record: &[u8]) {
        if self
            .pg(|c, s| {
                c.execute(
                    &format!("INSERT INTO {s}.entries (idx, chain, leaf) VALUES ($1, $2, $3) ON CONFLICT (idx) DO UPDATE SET chain = EXCLUDED.chain, leaf = EXCLUDED.leaf"),
                    &[&(index as i64), &&record[..32.min(record.len())], &&record[32.min(record.len())..]],
                )
                .expect("upsert");
            })
            .is_some()
        {
            return;
        }
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
        if self
            .pg(|c, s| {
                c.execute(
                    &format!("INSERT INTO {s}.hashes (idx, hash) VALUES ($1, $2) ON CONFLICT (idx) DO UPDATE SET hash = EXCLUDED.hash"),
                    &[&(stored_index as i64), &h.0.as_slice()],
                )
                .expect("upsert");
            })
            .is_some()
        {
            return;
        }
        self.write(|txn| {
            let mut t = txn.open_table(HASHES).expect("table");
            t.insert(stored_index, h.0).expect("insert");
        });
    }

    pub fn delete_entry(&self, index: u64) {
        if self
            .pg(|c, s| {
                c.execute(
                    &format!("DELETE FROM {s}.entries WHERE idx = $1"),
                    &[&(index as i64)],
                )
                .expect("delete");
            })
            .is_some()
        {
            return;
        }
        self.edit_bundle(index, |records| records.retain(|(i, _)| *i != index));
    }

    /// Removes entries `from..` and their stored hashes, leaving the head.
    pub fn truncate_from(&self, from: u64) {
        let first_hash = ledger::merkle::stored_hash_index(0, from);
        if self
            .pg(|c, s| {
                c.execute(
                    &format!("DELETE FROM {s}.entries WHERE idx >= $1"),
                    &[&(from as i64)],
                )
                .expect("delete");
                c.execute(
                    &format!("DELETE FROM {s}.hashes WHERE idx >= $1"),
                    &[&(first_hash as i64)],
                )
                .expect("delete");
            })
            .is_some()
        {
            return;
        }
        self.edit_bundle(from, |records| records.retain(|(i, _)| *i < from));
        self.write(|txn| {
            let mut t = txn.open_table(ENTRY_BUNDLES).expect("table");
            t.retain(|k, _| k * BUNDLE_SIZE < from).expect("retain");
            let mut h = txn.open_table(HASHES).expect("table");
            h.retain(|k, _| k < first_hash).expect("retain");
        });
    }

    pub fn set_head(&self, head: &Head) {
        if self
            .pg(|c, s| {
                c.execute(
                    &format!("UPDATE {s}.head SET size = $1, root = $2, chain = $3"),
                    &[
                        &(head.size as i64),
                        &head.root.0.as_slice(),
                        &head.chain.0.as_slice(),
                    ],
                )
                .expect("update");
            })
            .is_some()
        {
            return;
        }
        self.write(|txn| {
            let mut t = txn.open_table(META).expect("table");
            t.insert("head", head.encode().as_slice()).expect("insert");
        });
    }
}

/// Every private-part key of the log in `dir`, by slot, read past the
/// ledger (open or not): `private.keys` beside a data file (after its
/// 32-byte header), the `private_keys` table of a log in PostgreSQL.
pub fn raw_keys(dir: &Path) -> Vec<[u8; 32]> {
    if let Some(ledger::store::Location::Postgres(at)) =
        ledger::store::Location::of(dir).expect("location")
    {
        let mut c = postgres::Client::connect(&at.url, postgres::NoTls).expect("connect");
        let s = at.schema;
        return c
            .query(
                &format!("SELECT key FROM {s}.private_keys ORDER BY slot"),
                &[],
            )
            .expect("select")
            .iter()
            .map(|r| r.get::<_, Vec<u8>>(0).try_into().expect("32"))
            .collect();
    }
    let raw = std::fs::read(dir.join(ledger::private::KEYS_FILE)).expect("keys");
    raw[32..]
        .chunks(32)
        .map(|c| c.try_into().expect("32"))
        .collect()
}

/// Writes `key` into slot `slot` of the log in `dir` as it is, past the
/// ledger and, in PostgreSQL, past the trigger that allows only zeros.
pub fn put_raw_key(dir: &Path, slot: u64, key: [u8; 32]) {
    if let Some(ledger::store::Location::Postgres(at)) =
        ledger::store::Location::of(dir).expect("location")
    {
        let mut c = postgres::Client::connect(&at.url, postgres::NoTls).expect("connect");
        c.batch_execute("SET session_replication_role = replica")
            .expect("triggers off");
        let s = at.schema;
        c.execute(
            &format!("UPDATE {s}.private_keys SET key = $2 WHERE slot = $1"),
            &[&(slot as i64), &key.as_slice()],
        )
        .expect("update");
        return;
    }
    let path = dir.join(ledger::private::KEYS_FILE);
    let mut raw = std::fs::read(&path).expect("keys");
    let at = 32 + 32 * slot as usize;
    raw[at..at + 32].copy_from_slice(&key);
    std::fs::write(&path, raw).expect("write keys");
}

/// Direct access to a closed data directory's lookups (`lookup/`), through
/// fjall, bypassing the `ledger` crate.
pub struct RawLookups {
    db: fjall::Database,
    leaves: fjall::Keyspace,
    keys: fjall::Keyspace,
    meta: fjall::Keyspace,
}

impl RawLookups {
    pub fn open(dir: &Path) -> RawLookups {
        let db = fjall::Database::builder(dir.join(lookup::LOOKUP_DIR))
            .open()
            .expect("open lookups");
        let ks = |name| {
            db.keyspace(name, fjall::KeyspaceCreateOptions::default)
                .expect("keyspace")
        };
        RawLookups {
            leaves: ks(lookup::LEAF_INDEX),
            keys: ks(lookup::ENTRY_KEYS),
            meta: ks(lookup::META),
            db,
        }
    }

    /// The key lookup's row for `name`: (first index, content digest).
    pub fn entry_key(&self, name: &str) -> Option<(u64, [u8; 32])> {
        let v = self.keys.get(name).expect("get")?;
        Some(lookup::decode_key_value(&v).expect("row"))
    }

    /// Writes the key lookup's row for `name`.
    pub fn put_entry_key(&self, name: &str, index: u64, digest: [u8; 32]) {
        self.keys
            .insert(name, lookup::encode_key_value(index, &digest))
            .expect("insert");
    }

    /// Removes the key lookup's row for `name`.
    pub fn delete_entry_key(&self, name: &str) {
        self.keys.remove(name).expect("remove");
    }

    /// The leaf-hash lookup's row for `leaf_hash`.
    pub fn leaf_index(&self, leaf_hash: &Hash) -> Option<u64> {
        let v = self.leaves.get(leaf_hash.0).expect("get")?;
        Some(u64::from_be_bytes(v[..8].try_into().expect("u64")))
    }

    /// Writes (or with `None`, removes) the leaf-hash lookup's row for
    /// `leaf_hash`.
    pub fn set_leaf_index(&self, leaf_hash: &Hash, index: Option<u64>) {
        match index {
            Some(i) => self.leaves.insert(leaf_hash.0, i.to_be_bytes()),
            None => self.leaves.remove(leaf_hash.0),
        }
        .expect("write");
    }

    /// The watermarks, leaf hashes then keys: (size, root at that size).
    pub fn watermarks(&self) -> [Option<(u64, Hash)>; 2] {
        [lookup::LEAVES_THROUGH, lookup::KEYS_THROUGH].map(|name| {
            let v = self.meta.get(name).expect("get")?;
            let (size, root) = lookup::decode_key_value(&v).expect("watermark");
            Some((size, Hash(root)))
        })
    }

    /// Sets both watermarks to `size` with `root`, as the lookups of a log
    /// of that size would have them.
    pub fn set_watermark(&self, size: u64, root: &Hash) {
        for name in [lookup::LEAVES_THROUGH, lookup::KEYS_THROUGH] {
            self.meta
                .insert(name, lookup::encode_through(size, root))
                .expect("insert");
        }
    }

    /// Removes both watermarks, leaving the rows.
    pub fn remove_watermarks(&self) {
        for name in [lookup::LEAVES_THROUGH, lookup::KEYS_THROUGH] {
            self.meta.remove(name).expect("remove");
        }
    }

    /// Removes every row naming an entry at `from` or later and sets both
    /// watermarks to `(from, root)`: lookups that stopped there.
    pub fn rewind(&self, from: u64, root: &Hash) {
        for g in self.leaves.iter() {
            let (k, v) = g.into_inner().expect("row");
            if u64::from_be_bytes(v[..8].try_into().expect("u64")) >= from {
                self.leaves.remove(k).expect("remove");
            }
        }
        for g in self.keys.iter() {
            let (k, v) = g.into_inner().expect("row");
            if lookup::decode_key_value(&v).expect("row").0 >= from {
                self.keys.remove(k).expect("remove");
            }
        }
        self.set_watermark(from, root);
    }
}

impl Drop for RawLookups {
    fn drop(&mut self) {
        self.db
            .persist(fjall::PersistMode::SyncAll)
            .expect("persist");
    }
}

/// Copies a closed data directory (the data file and the lookups beside
/// it) into `to`.
pub fn copy_data_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read dir") {
        let e = e.expect("entry");
        let target = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_data_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).expect("copy");
        }
    }
}

/// The data file inside a data directory.
pub fn db_path(dir: &Path) -> PathBuf {
    dir.join(DB_FILE)
}
