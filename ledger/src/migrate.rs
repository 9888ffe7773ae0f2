//! Moving a data directory's log between the redb file and a PostgreSQL
//! schema (`ledger migrate`).
//!
//! The copy is a re-append, not a byte copy of tables: every leaf read from
//! the source is integrated again from the empty tree, exactly as the
//! committer would ([`crate::log::integrate`]), so every stored hash, chain
//! hash and head the target holds is computed here, never taken on trust.
//! Each recomputed chain hash must equal the one stored with the entry, and
//! the head reached must equal the source's (size, root and chain); any
//! difference refuses the move and leaves the directory on its source.
//! Private parts are copied as sealed, with their keys at the same slots
//! (a shredded key stays zeros) and the redactions recorded; derived state
//! (`aux`) is copied as it is (it is sealed, and checked like any other
//! when it is loaded). The target is then verified in full before the
//! directory is pointed at it.
//!
//! The source is opened to write and held until the directory points at
//! the target, so no server of this directory can open it meanwhile; a
//! source in PostgreSQL that grew meanwhile (another frontend) is not
//! moved. The source is kept: the redb file renamed to `ledger.redb.moved`
//! (its sealed segments to `segments.moved`, its derived state to
//! `derived.redb.moved`, and `private.keys` to `private.keys.moved`), the
//! PostgreSQL schema
//! left as it is. Those copies hold every private part's key, including
//! the keys of parts redacted after the move: destroy them once the move
//! is trusted (docs/PRIVACY.md).

use std::path::Path;

use crate::error::{storage, Corruption, CorruptionKind, Error};
use crate::hash::Hash;
use crate::merkle::{stored_hash_index, Frontier};
use crate::store::pg::{PgAt, PgStore};
use crate::store::{Head, Location, Row, Store, StoredEntry};

/// Entries per transaction of the target.
const CHUNK: usize = 4096;

/// The suffix the source's redb file is renamed with once the directory
/// points at PostgreSQL.
pub const MOVED_SUFFIX: &str = ".moved";

/// Where a log is moved to.
#[derive(Debug, Clone)]
pub enum Target {
    /// `ledger.redb` in the data directory.
    File,
    /// A new schema of a PostgreSQL database.
    Postgres(PgAt),
}

/// What a move copied.
#[derive(Debug, Clone, PartialEq)]
pub struct Moved {
    /// The log's size, the same in both.
    pub size: u64,
    /// Its RFC 6962 root, the same in both.
    pub root: Hash,
    /// Entries with private parts.
    pub private_rows: u64,
    /// Key slots copied (shredded ones included, as zeros).
    pub keys: u64,
    /// Redacted parts recorded.
    pub redacted: u64,
}

fn refuse(why: impl Into<String>) -> Error {
    storage(redb::StorageError::Io(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        why.into(),
    )))
}

/// Moves the log of the data directory `dir` to `to`, reporting progress
/// as (entries copied, total); see the module's contract.
pub fn migrate(dir: &Path, to: Target, progress: &mut dyn FnMut(u64, u64)) -> Result<Moved, Error> {
    migrate_owned(dir, to, None, progress)
}

/// [`migrate`], a new PostgreSQL schema created through `owner_url` (a
/// login that is to own it), the target's login granted only what a writer
/// needs ([`PgStore::create_owned`]).
pub fn migrate_owned(
    dir: &Path,
    to: Target,
    owner_url: Option<&str>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Moved, Error> {
    let from =
        Location::of(dir)?.ok_or_else(|| refuse(format!("{} holds no log", dir.display())))?;
    match (&from, &to) {
        (Location::File, Target::File) => {
            return Err(refuse("the log is already in the data file"));
        }
        (Location::Postgres(_), Target::Postgres(_)) => {
            return Err(refuse(
                "the log is already in PostgreSQL; move it to the file first, or copy the schema with PostgreSQL's own tools",
            ));
        }
        _ => {}
    }
    let created_file = matches!(to, Target::File);
    for name in [
        crate::store::DB_FILE,
        crate::store::SEGMENTS_DIR,
        crate::store::DERIVED_FILE,
    ] {
        if created_file && dir.join(name).exists() {
            return Err(refuse(format!(
                "{} exists beside the storage file; move it away first",
                dir.join(name).display()
            )));
        }
    }
    let keys_existed = dir.join(crate::private::KEYS_FILE).exists();
    // The source stays open until the directory points at the target, so
    // that no server can open it meanwhile (the redb file's lock), and its
    // head is read again just before the switch: a log in PostgreSQL that
    // another frontend wrote meanwhile is not moved.
    let result = (|| {
        let source = Store::open(dir)?;
        let target = match &to {
            Target::Postgres(at) => {
                match owner_url {
                    Some(owner) => PgStore::create_owned(at, owner)?,
                    None => PgStore::create(at)?,
                }
                Store::Postgres(crate::store::pg::off_runtime(|| PgStore::open(at))?)
            }
            // One data file, never sealed while it is copied: the server
            // that opens it seals it in place.
            Target::File => {
                let store = crate::store::file::FileStore::open_with(dir, None)?;
                store.set_segment_entries(0);
                Store::File(store)
            }
        };
        let moved = copy(dir, &source, &target, progress)?;
        let snap = target.snapshot()?;
        let v = crate::verify::verify_snapshot(&snap, &mut |_, _| {})?;
        if v.size != moved.size || v.root != moved.root {
            return Err(Corruption::new(
                v.size,
                CorruptionKind::Tree,
                "the copy does not verify to the source's head",
            )
            .into());
        }
        drop(snap);
        drop(target);
        if source.snapshot()?.head()?.size != moved.size {
            return Err(refuse(
                "the source grew while it was copied (a frontend still writes it): stop every server of this log and move it again",
            ));
        }
        Ok((moved, source))
    })();
    let (moved, source) = match result {
        Ok(m) => m,
        Err(e) => {
            // A half-written file must not be found by the next attempt.
            if created_file {
                let _ = std::fs::remove_file(dir.join(crate::store::DB_FILE));
                let _ = std::fs::remove_file(dir.join(crate::store::DERIVED_FILE));
                if !keys_existed {
                    let _ = std::fs::remove_file(dir.join(crate::private::KEYS_FILE));
                }
            }
            return Err(e);
        }
    };
    // Point the directory at the target: the new pointer first, then the
    // old one moved aside, so that a crash in between leaves a directory
    // that names the target (the file and the schema are both whole).
    match to {
        Target::Postgres(at) => {
            crate::store::pg::point_at(dir, &at)?;
            for name in [
                crate::store::DB_FILE,
                crate::private::KEYS_FILE,
                crate::store::SEGMENTS_DIR,
                crate::store::DERIVED_FILE,
            ] {
                let p = dir.join(name);
                if p.exists() {
                    std::fs::rename(&p, dir.join(format!("{name}{MOVED_SUFFIX}")))
                        .map_err(|e| storage(redb::StorageError::Io(e)))?;
                }
            }
        }
        Target::File => {
            std::fs::rename(
                dir.join(crate::store::STORAGE_FILE),
                dir.join(format!("{}{MOVED_SUFFIX}", crate::store::STORAGE_FILE)),
            )
            .map_err(|e| storage(redb::StorageError::Io(e)))?;
        }
    }
    crate::store::sync_dir(dir)?;
    drop(source);
    Ok(moved)
}

fn copy(
    dir: &Path,
    source: &Store,
    target: &Store,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Moved, Error> {
    let snap = source.snapshot()?;
    let want = snap.head()?;
    let tsnap = target.snapshot()?;
    if tsnap.head()? != Head::EMPTY {
        return Err(refuse("the target already holds a log"));
    }
    // Keys first, at the same slots, so that every private row committed
    // below names a key the target holds.
    let slots = snap.private_next_slot()?;
    let mut keys_copied = 0;
    if slots > 0 {
        let from_keys = source.open_keys(dir, &snap)?;
        let mut to_keys = target.open_keys(dir, &tsnap)?;
        let mut start = 0;
        while start < slots {
            let end = (start + CHUNK as u64).min(slots);
            let mut chunk = Vec::with_capacity((end - start) as usize);
            for slot in start..end {
                chunk.push(match from_keys.get(slot)? {
                    Some(k) => k,
                    None if from_keys.written(slot)? => [0; 32],
                    None => {
                        return Err(refuse(format!(
                            "key slot {slot} is missing from {}",
                            from_keys.describe()
                        )))
                    }
                });
            }
            let first = to_keys.append(&chunk)?;
            if first != start {
                return Err(refuse(format!(
                    "the target gave key slot {first} where {start} was expected"
                )));
            }
            keys_copied = end;
            start = end;
        }
    }
    drop(tsnap);
    let redacted = snap.redacted_parts()?;
    let (mut frontier, mut head) = (Frontier::new(), Head::EMPTY);
    let mut private_rows = 0;
    let mut records = snap.records_from(0)?;
    progress(0, want.size);
    loop {
        let mut batch: Vec<(u64, StoredEntry)> = Vec::with_capacity(CHUNK);
        for r in records.by_ref() {
            let (index, rec) = r?;
            batch.push((index, StoredEntry::decode(index, &rec)?));
            if batch.len() == CHUNK {
                break;
            }
        }
        if batch.is_empty() {
            break;
        }
        for (at, (index, _)) in batch.iter().enumerate() {
            let expected = head.size + at as u64;
            if *index != expected {
                return Err(Corruption::new(
                    expected,
                    CorruptionKind::MissingEntry,
                    "entry index sequence broken",
                )
                .into());
            }
        }
        let leaves: Vec<Vec<u8>> = batch.iter().map(|(_, e)| e.leaf.clone()).collect();
        let got = crate::log::integrate(&frontier, &head, &leaves);
        for ((index, e), &(_, chain)) in batch.iter().zip(&got.acks) {
            if e.chain != chain {
                return Err(Corruption::new(
                    *index,
                    CorruptionKind::Chain,
                    "stored chain hash differs from the one recomputed",
                )
                .into());
            }
        }
        let rows: Vec<Row<'_>> = batch
            .iter()
            .zip(&leaves)
            .zip(got.stored)
            .map(|(((index, e), leaf), hashes)| Row {
                index: *index,
                leaf,
                chain: e.chain,
                first_hash_index: stored_hash_index(0, *index),
                hashes,
            })
            .collect();
        let mut private = crate::private::Batch::default();
        for (index, _) in &batch {
            if let Some(row) = snap.private_row(*index)? {
                private.rows.push((*index, row));
            }
        }
        private_rows += private.rows.len() as u64;
        let last = got.head.size == want.size;
        if last {
            private.next_slot = Some(slots);
            private.redacted = redacted.clone();
        }
        if got.head.size > want.size {
            return Err(Corruption::new(
                want.size,
                CorruptionKind::ExtraEntry,
                "entry beyond the head",
            )
            .into());
        }
        target.commit(&rows, &private, &got.head)?;
        (frontier, head) = (got.frontier, got.head);
        progress(head.size, want.size);
    }
    if head != want {
        return Err(Corruption::new(
            head.size,
            CorruptionKind::Tree,
            format!(
                "the entries re-appended reach size {} and root {}, not the source's head (size {}, root {})",
                head.size,
                crate::hash::to_hex(&head.root),
                want.size,
                crate::hash::to_hex(&want.root)
            ),
        )
        .into());
    }
    if want.size == 0 && (!redacted.is_empty() || slots > 0) {
        return Err(refuse("an empty log with private parts"));
    }
    for (name, value) in snap.aux_all()? {
        target.put_aux(&name, &value)?;
    }
    Ok(Moved {
        size: want.size,
        root: want.root,
        private_rows,
        keys: keys_copied,
        redacted: redacted.len() as u64,
    })
}
