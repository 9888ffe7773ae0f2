//! Private parts of entries: bytes a sequencer keeps beside an entry but
//! outside its leaf (the event log keeps there the disclosures of the
//! entry's committed fields, docs/PRIVACY.md), each encrypted under a key
//! of its own, so that destroying one key ([`KeyFile::shred`]) makes that
//! part unreadable for good while every leaf, hash and proof stays as it
//! was.
//!
//! - The ciphertexts are in the redb table `private_parts`, one row per
//!   entry that has any, written in the same durable transaction as the
//!   entry ([`encode_record`]). Like entries, rows are never changed or
//!   removed.
//! - The keys are in `private.keys` beside the data file (mode 0600): a
//!   32-byte header, then 32-byte slots, one per part (so no slot straddles
//!   a disk sector), written once and fsynced before the transaction that
//!   refers to them commits. The data file records how many slots its rows
//!   refer to (`private_next_slot`): a key file holding fewer is refused,
//!   never recreated or written over. Shredding overwrites a slot
//!   with zeros in place and fsyncs: the file is never rewritten or moved,
//!   so on a file system that overwrites in place (ext4, xfs) no copy of
//!   the key is left in the data directory. On a copy-on-write file system
//!   or a snapshotted volume, the old block may survive (docs/PRIVACY.md).
//!
//! Each part is sealed with ChaCha20-Poly1305 (RFC 8439) under its own
//! random key, with a zero nonce (a key seals exactly one message) and the
//! entry's index and the part's position as associated data, so a
//! ciphertext moved to another entry or position does not open. The
//! plaintext is the part's length (u32 BE), the part, and zeros up to a
//! multiple of [`PAD`] bytes, so a ciphertext's length tells the part's
//! length only to within [`PAD`] bytes.
//!
//! A redaction is recorded in the data file (`redacted_parts`) in the same
//! transaction as the entry that orders it, and a part listed there reads
//! as destroyed whatever the key file holds; its key is then overwritten,
//! and again at every open until it is.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::ChaCha20Poly1305;

use crate::error::{storage, Corruption, CorruptionKind, Error};

/// The `aux` record a restore from a backup without disclosures leaves:
/// the size (u64 BE) below which entries may commit to values whose
/// disclosures this directory never held.
pub const NOT_KEPT_AUX: &str = "private_not_kept_below";

/// The key file's name in the data directory.
pub const KEYS_FILE: &str = "private.keys";

const MAGIC: &[u8; 16] = b"ELPRIVATEKEYS/1\n";
/// The header: the magic, then zeros to one slot's width.
const HEADER: u64 = 32;
const SLOT: u64 = 32;
const RECORD_VERSION: u8 = 1;
/// Plaintexts are padded to a multiple of this many bytes.
pub const PAD: usize = 128;

/// What a batch writes for private parts, in its transaction.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    /// Sealed rows of `private_parts`: (entry index, row).
    pub rows: Vec<(u64, Vec<u8>)>,
    /// The number of key slots the rows now refer to, when it grew.
    pub next_slot: Option<u64>,
    /// Parts of earlier entries redacted by this batch: (index, part).
    pub redacted: Vec<(u64, u16)>,
}

impl Batch {
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty() && self.redacted.is_empty()
    }
}

/// A part as read back: its bytes, or gone because its key was shredded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Open(Vec<u8>),
    Shredded,
}

fn io(e: std::io::Error) -> Error {
    storage(redb::StorageError::Io(e))
}

/// Where the private parts' keys are: the key file beside a redb data
/// file (fixed 32-byte slots after a header), or the `private_keys` table
/// of a PostgreSQL log ([`crate::store::pg::PgKeys`]).
#[derive(Debug)]
pub struct KeyFile(Keys);

#[derive(Debug)]
enum Keys {
    File {
        file: File,
        path: PathBuf,
        slots: u64,
    },
    Database(crate::store::pg::PgKeys),
}

impl KeyFile {
    /// The keys of a PostgreSQL log.
    pub(crate) fn in_database(keys: crate::store::pg::PgKeys) -> KeyFile {
        KeyFile(Keys::Database(keys))
    }

    /// Opens the key file in `dir`, which must hold at least `referred`
    /// slots (the number the data file's rows refer to). When it is absent
    /// and nothing refers to a slot, it is created (mode 0600). A slot cut
    /// short by a crash, or written for a batch that then failed to commit,
    /// is past `referred` and is written over by the next append.
    pub fn open(dir: &Path, referred: u64) -> Result<KeyFile, Error> {
        let path = dir.join(KEYS_FILE);
        let lost = |why: String| -> Error {
            Corruption::new(
                0,
                CorruptionKind::Malformed,
                format!("{}: {why}; the kept disclosures cannot be read (restore the data directory with its {KEYS_FILE})", path.display()),
            )
            .into()
        };
        if !path.exists() && referred > 0 {
            return Err(lost(format!(
                "absent, while the log refers to {referred} key slots"
            )));
        }
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(0o600);
        }
        let file = options.open(&path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        if len < HEADER {
            let mut head = [0u8; HEADER as usize];
            head[..MAGIC.len()].copy_from_slice(MAGIC);
            file.write_all_at(&head, 0).map_err(io)?;
            file.sync_all().map_err(io)?;
            // The name must be as durable as the keys written under it.
            crate::store::sync_dir(dir)?;
        } else {
            let mut head = [0u8; 16];
            file.read_exact_at(&mut head, 0).map_err(io)?;
            if &head != MAGIC {
                return Err(lost("not a private-parts key file".into()));
            }
        }
        let len = file.metadata().map_err(io)?.len().max(HEADER);
        let slots = (len - HEADER) / SLOT;
        if slots < referred {
            return Err(lost(format!(
                "holds {slots} key slots, while the log refers to {referred}"
            )));
        }
        Ok(KeyFile(Keys::File {
            file,
            path,
            slots: referred,
        }))
    }

    fn offset(slot: u64) -> u64 {
        HEADER + slot * SLOT
    }

    /// Writes `keys` to new slots and makes them durable; returns the first
    /// slot's number.
    pub fn append(&mut self, keys: &[[u8; 32]]) -> Result<u64, Error> {
        match &mut self.0 {
            Keys::File { file, slots, .. } => {
                let first = *slots;
                let bytes: Vec<u8> = keys.iter().flatten().copied().collect();
                file.write_all_at(&bytes, Self::offset(first)).map_err(io)?;
                file.sync_data().map_err(io)?;
                *slots += keys.len() as u64;
                Ok(first)
            }
            Keys::Database(k) => crate::store::pg::off_runtime(|| k.append(keys)),
        }
    }

    /// The key in `slot`: `None` when shredded (all zeros) or never written.
    pub fn get(&self, slot: u64) -> Result<Option<[u8; 32]>, Error> {
        match &self.0 {
            Keys::File { file, slots, .. } => {
                if slot >= *slots {
                    return Ok(None);
                }
                let mut key = [0u8; 32];
                file.read_exact_at(&mut key, Self::offset(slot))
                    .map_err(io)?;
                Ok((key != [0u8; 32]).then_some(key))
            }
            Keys::Database(k) => crate::store::pg::off_runtime(|| k.get(slot)),
        }
    }

    /// Whether `slot` was ever written.
    pub fn written(&self, slot: u64) -> Result<bool, Error> {
        match &self.0 {
            Keys::File { slots, .. } => Ok(slot < *slots),
            Keys::Database(k) => crate::store::pg::off_runtime(|| k.written(slot)),
        }
    }

    /// Overwrites `slot` with zeros in place and makes that durable;
    /// `false` when the slot was never written. A slot of zeros already is
    /// left as it is.
    pub fn shred(&mut self, slot: u64) -> Result<bool, Error> {
        if let Keys::Database(k) = &self.0 {
            return crate::store::pg::off_runtime(|| k.shred(slot));
        }
        if !self.written(slot)? {
            return Ok(false);
        }
        if self.get(slot)?.is_none() {
            return Ok(true);
        }
        if let Keys::File { file, .. } = &self.0 {
            file.write_all_at(&[0u8; 32], Self::offset(slot))
                .map_err(io)?;
            file.sync_data().map_err(io)?;
        }
        Ok(true)
    }

    /// Where the keys are, for messages.
    pub fn describe(&self) -> String {
        match &self.0 {
            Keys::File { path, .. } => path.display().to_string(),
            Keys::Database(k) => format!("{k:?}"),
        }
    }
}

fn aad(index: u64, part: u16) -> Vec<u8> {
    let mut a = b"evidence-ledger/v1 private part".to_vec();
    a.extend_from_slice(&index.to_be_bytes());
    a.extend_from_slice(&part.to_be_bytes());
    a
}

/// A fresh random key per part, from one read of the system's randomness
/// for all of them.
pub fn fresh_keys(n: usize) -> Result<Vec<[u8; 32]>, Error> {
    let mut bytes = vec![0u8; n * 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| io(std::io::Error::other(format!("no randomness: {e}"))))?;
    Ok(bytes
        .chunks_exact(32)
        .map(|c| <[u8; 32]>::try_from(c).unwrap_or_default())
        .collect())
}

/// Seals each of `parts` of entry `index` under its key (`keys[i]`, in
/// slot `first_slot + i`) and encodes the row: a version byte, the count
/// (u16), then per part its slot (u64), its length (u32) and the
/// ciphertext with its tag, all big-endian.
pub fn encode_record(
    index: u64,
    parts: &[Vec<u8>],
    keys: &[[u8; 32]],
    first_slot: u64,
) -> Result<Vec<u8>, Error> {
    let mut out = vec![RECORD_VERSION];
    out.extend_from_slice(&(parts.len() as u16).to_be_bytes());
    for (i, (part, key)) in parts.iter().zip(keys).enumerate() {
        let cipher = ChaCha20Poly1305::new(key.into());
        let mut padded = (part.len() as u32).to_be_bytes().to_vec();
        padded.extend_from_slice(part);
        padded.resize(padded.len().div_ceil(PAD) * PAD, 0);
        let sealed = cipher
            .encrypt(
                &[0u8; 12].into(),
                Payload {
                    msg: &padded,
                    aad: &aad(index, i as u16),
                },
            )
            .map_err(|_| io(std::io::Error::other("sealing a private part failed")))?;
        out.extend_from_slice(&(first_slot + i as u64).to_be_bytes());
        out.extend_from_slice(&(sealed.len() as u32).to_be_bytes());
        out.extend_from_slice(&sealed);
    }
    Ok(out)
}

/// One part of a row: its key's slot and its ciphertext.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    pub slot: u64,
    pub ciphertext: Vec<u8>,
}

/// Decodes a row of `private_parts` for entry `index`.
pub fn decode_record(index: u64, b: &[u8]) -> Result<Vec<Sealed>, Error> {
    let bad = |why: &str| -> Error {
        Corruption::new(
            index,
            CorruptionKind::Malformed,
            format!("private parts: {why}"),
        )
        .into()
    };
    let (&version, rest) = b.split_first().ok_or_else(|| bad("empty row"))?;
    if version != RECORD_VERSION {
        return Err(bad("unknown row version"));
    }
    let count = u16::from_be_bytes(
        rest.get(..2)
            .and_then(|c| c.try_into().ok())
            .ok_or_else(|| bad("short row"))?,
    );
    let mut at = 2usize;
    let mut out = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let head = rest.get(at..at + 12).ok_or_else(|| bad("short row"))?;
        let slot = u64::from_be_bytes(head[..8].try_into().map_err(|_| bad("short row"))?);
        let len = u32::from_be_bytes(head[8..].try_into().map_err(|_| bad("short row"))?) as usize;
        at += 12;
        let ciphertext = rest
            .get(at..at + len)
            .ok_or_else(|| bad("short row"))?
            .to_vec();
        at += len;
        out.push(Sealed { slot, ciphertext });
    }
    if at != rest.len() {
        return Err(bad("bytes after the last part"));
    }
    Ok(out)
}

/// Opens part `part` of entry `index` with `key`; a ciphertext that does
/// not authenticate is corruption (changed, or moved from elsewhere).
pub fn open_part(
    index: u64,
    part: u16,
    key: &[u8; 32],
    ciphertext: &[u8],
) -> Result<Vec<u8>, Error> {
    let bad = |why: &str| -> Error {
        Corruption::new(
            index,
            CorruptionKind::Malformed,
            format!("private part {part} {why}"),
        )
        .into()
    };
    let padded = ChaCha20Poly1305::new(key.into())
        .decrypt(
            &[0u8; 12].into(),
            Payload {
                msg: ciphertext,
                aad: &aad(index, part),
            },
        )
        .map_err(|_| bad("does not authenticate under its key"))?;
    let len = padded
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_be_bytes)
        .ok_or_else(|| bad("is shorter than its length"))? as usize;
    padded
        .get(4..4 + len)
        .map(<[u8]>::to_vec)
        .ok_or_else(|| bad("is shorter than its length"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_seals_and_opens_only_at_its_place() {
        let keys = fresh_keys(2).expect("ok");
        let parts = vec![b"first".to_vec(), b"second".to_vec()];
        let row = encode_record(7, &parts, &keys, 40).expect("ok");
        let sealed = decode_record(7, &row).expect("ok");
        assert_eq!(sealed[1].slot, 41);
        assert_eq!(
            open_part(7, 1, &keys[1], &sealed[1].ciphertext).expect("ok"),
            b"second"
        );
        // Another entry, another position, another key: none opens.
        assert!(open_part(8, 1, &keys[1], &sealed[1].ciphertext).is_err());
        assert!(open_part(7, 0, &keys[1], &sealed[1].ciphertext).is_err());
        assert!(open_part(7, 1, &keys[0], &sealed[1].ciphertext).is_err());
    }

    #[test]
    fn fresh_keys_are_as_many_as_asked_and_all_different() {
        assert!(fresh_keys(0).expect("ok").is_empty());
        let keys = fresh_keys(64).expect("ok");
        assert_eq!(keys.len(), 64);
        let distinct: std::collections::HashSet<_> = keys.iter().collect();
        assert_eq!(distinct.len(), 64);
        assert!(keys.iter().all(|k| k != &[0u8; 32]));
    }

    #[test]
    fn a_shredded_slot_reads_as_gone_and_its_bytes_are_zero() {
        let dir = tempfile::tempdir().expect("ok");
        let mut f = KeyFile::open(dir.path(), 0).expect("ok");
        let keys = fresh_keys(3).expect("ok");
        let first = f.append(&keys).expect("ok");
        assert_eq!(first, 0);
        assert!(f.shred(1).expect("ok"));
        assert!(!f.shred(7).expect("ok"), "a slot never written");
        let f = KeyFile::open(dir.path(), 3).expect("ok");
        assert_eq!(f.get(0).expect("ok"), Some(keys[0]));
        assert_eq!(f.get(1).expect("ok"), None);
        assert_eq!(f.get(2).expect("ok"), Some(keys[2]));
        let raw = std::fs::read(dir.path().join(KEYS_FILE)).expect("ok");
        assert!(!raw.windows(32).any(|w| w == keys[1]));
        assert!(raw.windows(32).any(|w| w == keys[2]));
    }

    #[test]
    fn a_slot_cut_short_by_a_crash_is_written_over() {
        let dir = tempfile::tempdir().expect("ok");
        let mut f = KeyFile::open(dir.path(), 0).expect("ok");
        f.append(&fresh_keys(1).expect("ok")).expect("ok");
        drop(f);
        let path = dir.path().join(KEYS_FILE);
        let mut raw = std::fs::read(&path).expect("ok");
        raw.extend_from_slice(&[9u8; 10]);
        std::fs::write(&path, raw).expect("ok");
        let mut f = KeyFile::open(dir.path(), 1).expect("ok");
        let k = fresh_keys(1).expect("ok");
        assert_eq!(f.append(&k).expect("ok"), 1);
        assert_eq!(f.get(1).expect("ok"), Some(k[0]));
    }

    #[test]
    fn a_key_file_behind_the_log_is_refused_never_recreated() {
        let dir = tempfile::tempdir().expect("ok");
        let e = KeyFile::open(dir.path(), 2)
            .expect_err("refused")
            .to_string();
        assert!(e.contains("absent"), "{e}");
        assert!(!dir.path().join(KEYS_FILE).exists());
        let mut f = KeyFile::open(dir.path(), 0).expect("ok");
        f.append(&fresh_keys(1).expect("ok")).expect("ok");
        let e = KeyFile::open(dir.path(), 2)
            .expect_err("refused")
            .to_string();
        assert!(e.contains("holds 1 key slots"), "{e}");
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.path().join(KEYS_FILE))
            .expect("ok")
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "readable by others: {mode:o}");
    }

    #[test]
    fn a_ciphertext_tells_a_parts_length_only_to_within_the_padding() {
        let keys = fresh_keys(2).expect("ok");
        let row =
            encode_record(1, &[b"positive".to_vec(), b"ambiguous".to_vec()], &keys, 0).expect("ok");
        let sealed = decode_record(1, &row).expect("ok");
        assert_eq!(sealed[0].ciphertext.len(), sealed[1].ciphertext.len());
        assert_eq!(
            open_part(1, 1, &keys[1], &sealed[1].ciphertext).expect("ok"),
            b"ambiguous"
        );
    }

    #[test]
    fn a_row_with_bytes_after_its_parts_is_corrupt() {
        let keys = fresh_keys(1).expect("ok");
        let mut row = encode_record(1, &[b"x".to_vec()], &keys, 0).expect("ok");
        row.push(0);
        assert!(decode_record(1, &row).is_err());
    }
}
