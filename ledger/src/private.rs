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
//! - The keys are in `private.keys` beside the data file: a 16-byte header,
//!   then 32-byte slots, one per part, written once and fsynced before the
//!   transaction that refers to them commits. Shredding overwrites a slot
//!   with zeros in place and fsyncs: the file is never rewritten or moved,
//!   so on a file system that overwrites in place (ext4, xfs) no copy of
//!   the key is left in the data directory. On a copy-on-write file system
//!   or a snapshotted volume, the old block may survive (docs/PRIVACY.md).
//!
//! Each part is sealed with ChaCha20-Poly1305 (RFC 8439) under its own
//! random key, with a zero nonce (a key seals exactly one message) and the
//! entry's index and the part's position as associated data, so a
//! ciphertext moved to another entry or position does not open.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::ChaCha20Poly1305;

use crate::error::{storage, Corruption, CorruptionKind, Error};

/// The key file's name in the data directory.
pub const KEYS_FILE: &str = "private.keys";

const MAGIC: &[u8; 16] = b"ELPRIVATEKEYS/1\n";
const SLOT: u64 = 32;
const RECORD_VERSION: u8 = 1;

/// A part as read back: its bytes, or gone because its key was shredded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Open(Vec<u8>),
    Shredded,
}

fn io(e: std::io::Error) -> Error {
    storage(redb::StorageError::Io(e))
}

/// The key file: fixed 32-byte slots after a header.
#[derive(Debug)]
pub struct KeyFile {
    file: File,
    path: PathBuf,
    slots: u64,
}

impl KeyFile {
    /// Opens the key file in `dir`, creating it (and fsyncing the directory)
    /// when absent. A slot cut short by a crash is ignored: it was never
    /// referred to, since a commit refers to a slot only after the slot is
    /// durable, and the next append writes over it.
    pub fn open(dir: &Path) -> Result<KeyFile, Error> {
        let path = dir.join(KEYS_FILE);
        let created = !path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        if len < MAGIC.len() as u64 {
            file.write_all_at(MAGIC, 0).map_err(io)?;
            file.sync_all().map_err(io)?;
            if created {
                crate::store::sync_dir(dir)?;
            }
        } else {
            let mut head = [0u8; 16];
            file.read_exact_at(&mut head, 0).map_err(io)?;
            if &head != MAGIC {
                return Err(Corruption::new(
                    0,
                    CorruptionKind::Malformed,
                    format!("{} is not a private-parts key file", path.display()),
                )
                .into());
            }
        }
        let len = file.metadata().map_err(io)?.len().max(MAGIC.len() as u64);
        Ok(KeyFile {
            file,
            path,
            slots: (len - MAGIC.len() as u64) / SLOT,
        })
    }

    fn offset(slot: u64) -> u64 {
        MAGIC.len() as u64 + slot * SLOT
    }

    /// Writes `keys` to new slots and makes them durable; returns the first
    /// slot's number.
    pub fn append(&mut self, keys: &[[u8; 32]]) -> Result<u64, Error> {
        let first = self.slots;
        let bytes: Vec<u8> = keys.iter().flatten().copied().collect();
        self.file
            .write_all_at(&bytes, Self::offset(first))
            .map_err(io)?;
        self.file.sync_data().map_err(io)?;
        self.slots += keys.len() as u64;
        Ok(first)
    }

    /// The key in `slot`: `None` when shredded (all zeros) or never written.
    pub fn get(&self, slot: u64) -> Result<Option<[u8; 32]>, Error> {
        if slot >= self.slots {
            return Ok(None);
        }
        let mut key = [0u8; 32];
        self.file
            .read_exact_at(&mut key, Self::offset(slot))
            .map_err(io)?;
        Ok((key != [0u8; 32]).then_some(key))
    }

    /// Whether `slot` was ever written.
    pub fn written(&self, slot: u64) -> bool {
        slot < self.slots
    }

    /// Overwrites `slot` with zeros in place and makes that durable.
    pub fn shred(&mut self, slot: u64) -> Result<(), Error> {
        if slot >= self.slots {
            return Ok(());
        }
        self.file
            .write_all_at(&[0u8; 32], Self::offset(slot))
            .map_err(io)?;
        self.file.sync_data().map_err(io)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn aad(index: u64, part: u16) -> Vec<u8> {
    let mut a = b"evidence-ledger/v1 private part".to_vec();
    a.extend_from_slice(&index.to_be_bytes());
    a.extend_from_slice(&part.to_be_bytes());
    a
}

/// A fresh random key per part.
pub fn fresh_keys(n: usize) -> Result<Vec<[u8; 32]>, Error> {
    (0..n)
        .map(|_| {
            let mut k = [0u8; 32];
            getrandom::fill(&mut k)
                .map_err(|e| io(std::io::Error::other(format!("no randomness: {e}"))))?;
            Ok(k)
        })
        .collect()
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
        let sealed = cipher
            .encrypt(
                &[0u8; 12].into(),
                Payload {
                    msg: part,
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
    ChaCha20Poly1305::new(key.into())
        .decrypt(
            &[0u8; 12].into(),
            Payload {
                msg: ciphertext,
                aad: &aad(index, part),
            },
        )
        .map_err(|_| {
            Corruption::new(
                index,
                CorruptionKind::Malformed,
                format!("private part {part} does not authenticate under its key"),
            )
            .into()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_seals_and_opens_only_at_its_place() {
        let keys = fresh_keys(2).unwrap();
        let parts = vec![b"first".to_vec(), b"second".to_vec()];
        let row = encode_record(7, &parts, &keys, 40).unwrap();
        let sealed = decode_record(7, &row).unwrap();
        assert_eq!(sealed[1].slot, 41);
        assert_eq!(
            open_part(7, 1, &keys[1], &sealed[1].ciphertext).unwrap(),
            b"second"
        );
        // Another entry, another position, another key: none opens.
        assert!(open_part(8, 1, &keys[1], &sealed[1].ciphertext).is_err());
        assert!(open_part(7, 0, &keys[1], &sealed[1].ciphertext).is_err());
        assert!(open_part(7, 1, &keys[0], &sealed[1].ciphertext).is_err());
    }

    #[test]
    fn a_shredded_slot_reads_as_gone_and_its_bytes_are_zero() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = KeyFile::open(dir.path()).unwrap();
        let keys = fresh_keys(3).unwrap();
        let first = f.append(&keys).unwrap();
        assert_eq!(first, 0);
        f.shred(1).unwrap();
        let f = KeyFile::open(dir.path()).unwrap();
        assert_eq!(f.get(0).unwrap(), Some(keys[0]));
        assert_eq!(f.get(1).unwrap(), None);
        assert_eq!(f.get(2).unwrap(), Some(keys[2]));
        let raw = std::fs::read(dir.path().join(KEYS_FILE)).unwrap();
        assert!(!raw.windows(32).any(|w| w == keys[1]));
        assert!(raw.windows(32).any(|w| w == keys[2]));
    }

    #[test]
    fn a_slot_cut_short_by_a_crash_is_written_over() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = KeyFile::open(dir.path()).unwrap();
        f.append(&fresh_keys(1).unwrap()).unwrap();
        drop(f);
        let path = dir.path().join(KEYS_FILE);
        let mut raw = std::fs::read(&path).unwrap();
        raw.extend_from_slice(&[9u8; 10]);
        std::fs::write(&path, raw).unwrap();
        let mut f = KeyFile::open(dir.path()).unwrap();
        let k = fresh_keys(1).unwrap();
        assert_eq!(f.append(&k).unwrap(), 1);
        assert_eq!(f.get(1).unwrap(), Some(k[0]));
    }

    #[test]
    fn a_row_with_bytes_after_its_parts_is_corrupt() {
        let keys = fresh_keys(1).unwrap();
        let mut row = encode_record(1, &[b"x".to_vec()], &keys, 0).unwrap();
        row.push(0);
        assert!(decode_record(1, &row).is_err());
    }
}
