//! Sealed records of derived state: bytes bound to the tree size and root
//! they were derived at, under a keyed BLAKE3 MAC.
//!
//! Derived state (the event-state snapshot, the projection checkpoint) is
//! kept in the data file so a start need not recompute it, but it is never
//! hashed into the log. A seal makes a change to it detectable by anyone
//! without the MAC key: a flipped byte, an overwritten number, a record
//! copied from another log or another size. It is an integrity check, not a
//! signature: whoever holds the key (it is derived from the ledger's key,
//! which sits on the same host) can seal anything. So a sealed record is
//! only ever a starting point; the callers check what it says against the
//! log before any number derived from it is served or signed.
//!
//! Layout: `magic (8) ‖ key id (8) ‖ size (u64 BE) ‖ root (32) ‖ MAC (32) ‖
//! body`; the MAC covers the magic, size, root and body. The key id (the
//! first 8 bytes of BLAKE3 of the MAC key) only tells a record sealed under
//! another key (after a log-key rotation) from one that was changed; it
//! proves nothing, and a record whose key id is not ours is simply not used.

use crate::Hash;

/// Why a sealed record was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// Too short, or another kind of record (its magic differs).
    #[error("not a {expected} record")]
    Malformed { expected: String },
    /// Sealed under another key (after a log-key rotation, say): not used,
    /// and not a sign of damage.
    #[error("it was sealed under another key")]
    OtherKey,
    /// The MAC does not match: the record was changed after it was sealed.
    #[error("its seal does not verify (the record was changed after it was sealed)")]
    BadSeal,
    /// Sealed at a size the log does not have.
    #[error("sealed at size {size}, but the log has {log_size} entries")]
    Beyond { size: u64, log_size: u64 },
    /// Sealed at a root the log does not have at that size.
    #[error("sealed at size {size} with root {sealed}, but the log's root there is {log}")]
    OtherRoot {
        size: u64,
        sealed: String,
        log: String,
    },
}

/// A MAC key for one kind of record, derived from a secret (the ledger's
/// signing key bytes) and a context naming the record kind.
pub fn derive_key(context: &str, secret: &[u8]) -> [u8; 32] {
    blake3::derive_key(context, secret)
}

/// The bytes before the body.
pub const HEADER: usize = 88;

/// The key id written with a record: names the key, proves nothing.
fn key_id(key: &[u8; 32]) -> [u8; 8] {
    let mut id = [0u8; 8];
    id.copy_from_slice(&blake3::hash(key).as_bytes()[..8]);
    id
}

fn mac(key: &[u8; 32], magic: &[u8; 8], size: u64, root: &Hash, body: &[u8]) -> blake3::Hash {
    let mut h = blake3::Hasher::new_keyed(key);
    h.update(magic);
    h.update(&size.to_be_bytes());
    h.update(&root.0);
    h.update(body);
    h.finalize()
}

/// Seals `body`, derived from the log at `(size, root)`.
pub fn seal(key: &[u8; 32], magic: &[u8; 8], size: u64, root: &Hash, body: &[u8]) -> Vec<u8> {
    let mut out = Unsealed::with_capacity(body.len());
    out.extend_from_slice(body);
    out.seal(key, magic, size, root)
}

/// A body written where its sealed record will be: after room for the
/// header, so that sealing it copies nothing. Derived state at 10M entries
/// is tens of megabytes; encoding it into a buffer of its own, then copying
/// it behind a header, held it in memory twice (and, grown by doubling, up
/// to twice again in freed pages the allocator keeps for a while).
#[derive(Debug)]
pub struct Unsealed(Vec<u8>);

impl Unsealed {
    /// An empty body with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Unsealed {
        let mut buf = Vec::with_capacity(HEADER.saturating_add(capacity));
        buf.resize(HEADER, 0);
        Unsealed(buf)
    }

    /// Appends `bytes` to the body.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    /// The body written so far.
    pub fn body(&self) -> &[u8] {
        &self.0[HEADER..]
    }

    /// The body written so far, to change in place.
    pub fn body_mut(&mut self) -> &mut [u8] {
        &mut self.0[HEADER..]
    }

    /// The sealed record: the same bytes as [`seal`] of the body.
    pub fn seal(mut self, key: &[u8; 32], magic: &[u8; 8], size: u64, root: &Hash) -> Vec<u8> {
        let tag = mac(key, magic, size, root, self.body());
        let head = &mut self.0[..HEADER];
        head[..8].copy_from_slice(magic);
        head[8..16].copy_from_slice(&key_id(key));
        head[16..24].copy_from_slice(&size.to_be_bytes());
        head[24..56].copy_from_slice(&root.0);
        head[56..].copy_from_slice(tag.as_bytes());
        self.0
    }
}

/// The body written so far (what [`Unsealed::body_mut`] gives).
impl AsMut<[u8]> for Unsealed {
    fn as_mut(&mut self) -> &mut [u8] {
        self.body_mut()
    }
}

impl Extend<u8> for Unsealed {
    fn extend<I: IntoIterator<Item = u8>>(&mut self, bytes: I) {
        self.0.extend(bytes);
    }
}

impl<'a> Extend<&'a u8> for Unsealed {
    fn extend<I: IntoIterator<Item = &'a u8>>(&mut self, bytes: I) {
        self.0.extend(bytes);
    }
}

impl std::io::Write for Unsealed {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.0.extend_from_slice(bytes);
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A record's fields, unchecked (for tools and tests that inspect one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Parts<'a> {
    pub magic: [u8; 8],
    pub size: u64,
    pub root: Hash,
    pub body: &'a [u8],
}

/// Splits a record into its fields without checking anything.
pub fn split(rec: &[u8]) -> Option<Parts<'_>> {
    if rec.len() < HEADER {
        return None;
    }
    let mut magic = [0u8; 8];
    magic.copy_from_slice(&rec[..8]);
    let mut size = [0u8; 8];
    size.copy_from_slice(&rec[16..24]);
    let mut root = [0u8; 32];
    root.copy_from_slice(&rec[24..56]);
    Some(Parts {
        magic,
        size: u64::from_be_bytes(size),
        root: Hash(root),
        body: &rec[HEADER..],
    })
}

/// A record opened by [`open`]: the size it was sealed at and its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened<'a> {
    pub size: u64,
    pub body: &'a [u8],
}

/// Opens a sealed record: the magic is `magic`, the MAC verifies under
/// `key`, and `root_at(size)` (the log's root at the sealed size, `None`
/// when the log is smaller) is the sealed root.
pub fn open<'a, E>(
    key: &[u8; 32],
    magic: &[u8; 8],
    rec: &'a [u8],
    log_size: u64,
    root_at: impl FnOnce(u64) -> Result<Hash, E>,
) -> Result<Result<Opened<'a>, SealError>, E> {
    let malformed = || SealError::Malformed {
        expected: String::from_utf8_lossy(magic).into_owned(),
    };
    let parts = match split(rec) {
        Some(p) if &p.magic == magic => p,
        _ => return Ok(Err(malformed())),
    };
    if rec[8..16] != key_id(key) {
        return Ok(Err(SealError::OtherKey));
    }
    let mut sealed = [0u8; 32];
    sealed.copy_from_slice(&rec[56..HEADER]);
    let (size, root, body) = (parts.size, parts.root, parts.body);
    // blake3::Hash compares in constant time.
    if blake3::Hash::from(sealed) != mac(key, magic, size, &root, body) {
        return Ok(Err(SealError::BadSeal));
    }
    if size > log_size {
        return Ok(Err(SealError::Beyond { size, log_size }));
    }
    let log_root = root_at(size)?;
    if log_root != root {
        return Ok(Err(SealError::OtherRoot {
            size,
            sealed: crate::hash::to_hex(&root),
            log: crate::hash::to_hex(&log_root),
        }));
    }
    Ok(Ok(Opened { size, body }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAGIC: &[u8; 8] = b"TESTREC1";

    fn root(n: u8) -> Hash {
        Hash([n; 32])
    }

    fn opened(key: &[u8; 32], rec: &[u8], log_size: u64, r: Hash) -> Result<u64, SealError> {
        open::<()>(key, MAGIC, rec, log_size, |_| Ok(r))
            .expect("root lookup")
            .map(|o| o.size)
    }

    #[test]
    fn a_sealed_record_opens_at_its_size_and_root() {
        let key = derive_key("test context", b"secret");
        let rec = seal(&key, MAGIC, 7, &root(1), b"body");
        let o = open::<()>(&key, MAGIC, &rec, 9, |s| {
            assert_eq!(s, 7);
            Ok(root(1))
        })
        .expect("lookup")
        .expect("opens");
        assert_eq!((o.size, o.body), (7, &b"body"[..]));
    }

    #[test]
    fn a_body_sealed_in_place_is_the_record_seal_makes() {
        let key = derive_key("test context", b"secret");
        let body: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        for capacity in [0, 10, 1000, 5000] {
            let mut u = Unsealed::with_capacity(capacity);
            assert!(u.body().is_empty());
            u.extend_from_slice(&body[..3]);
            u.extend(body[3..500].iter().copied());
            std::io::Write::write_all(&mut u, &body[500..]).expect("in memory");
            assert_eq!(u.body(), &body[..]);
            assert_eq!(
                u.seal(&key, MAGIC, 7, &root(1)),
                seal(&key, MAGIC, 7, &root(1), &body)
            );
        }
        let mut u = Unsealed::with_capacity(4);
        u.extend_from_slice(&[0; 4]);
        u.body_mut()[1] = 9;
        assert_eq!(
            u.seal(&key, MAGIC, 1, &root(2)),
            seal(&key, MAGIC, 1, &root(2), &[0, 9, 0, 0])
        );
    }

    #[test]
    fn every_single_bit_flip_is_refused() {
        let key = derive_key("test context", b"secret");
        let rec = seal(&key, MAGIC, 7, &root(1), b"a body of some length");
        for i in 0..rec.len() {
            for bit in 0..8 {
                let mut r = rec.clone();
                r[i] ^= 1 << bit;
                assert!(
                    opened(&key, &r, 9, root(1)).is_err(),
                    "a flip of bit {bit} of byte {i} was accepted"
                );
            }
        }
    }

    #[test]
    fn another_key_another_kind_another_root_or_size_is_refused() {
        let key = derive_key("test context", b"secret");
        let rec = seal(&key, MAGIC, 7, &root(1), b"body");
        let other = derive_key("test context", b"other secret");
        assert_eq!(opened(&other, &rec, 9, root(1)), Err(SealError::OtherKey));
        assert!(matches!(
            open::<()>(&key, b"OTHERREC", &rec, 9, |_| Ok(root(1))).expect("lookup"),
            Err(SealError::Malformed { .. })
        ));
        assert!(matches!(
            opened(&key, &rec, 9, root(2)),
            Err(SealError::OtherRoot { size: 7, .. })
        ));
        assert_eq!(
            opened(&key, &rec, 6, root(1)),
            Err(SealError::Beyond {
                size: 7,
                log_size: 6
            })
        );
        assert!(matches!(
            opened(&key, &rec[..HEADER - 1], 9, root(1)),
            Err(SealError::Malformed { .. })
        ));
    }
}
