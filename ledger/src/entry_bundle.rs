//! Entry bundles: how format version 2 stores entries, [`BUNDLE_SIZE`] to a
//! row of the `entry_bundles` table (docs/FORMAT.md §4).
//!
//! A row's key is `index / BUNDLE_SIZE`. Its value is one codec byte and a
//! payload. The decoded payload is a sequence of records, in index order:
//!
//! ```text
//! index (u64 BE) ‖ length (u32 BE) ‖ chain hash (32) ‖ leaf bytes
//! ```
//!
//! where `length` counts the chain hash and the leaf bytes (the version-1
//! entry record). A bundle that is not yet full is stored raw
//! ([`CODEC_RAW`]: the payload follows the codec byte) and is rewritten by
//! the commits that add to it; the commit that fills it compresses it
//! ([`CODEC_ZSTD`]: the decoded length as u32 BE, then one zstd frame).
//! Readers accept either codec for any bundle.
//!
//! Nothing here is trusted: a bundle is storage, not evidence. Every record
//! is checked against the stored tree hashes by whoever reads it, and every
//! record carries its own index, so a missing, extra or moved record is
//! named at its index exactly as in format version 1.

use crate::error::{Corruption, CorruptionKind};

/// Entries per bundle.
pub const BUNDLE_SIZE: u64 = 16;
/// Codec byte: the payload follows as is.
pub const CODEC_RAW: u8 = 0;
/// Codec byte: decoded length (u32 BE), then one zstd frame.
pub const CODEC_ZSTD: u8 = 1;
/// The zstd level full bundles are written at (fast; higher levels gain
/// about 1% on log entries, see docs/DECISIONS.md).
const ZSTD_LEVEL: i32 = 1;
/// The largest decoded payload a reader accepts: a bound on what a tampered
/// row can make a reader allocate. Sixteen entries of the largest leaf a
/// log accepts by default (1 MiB) fit many times over.
pub const MAX_DECODED: usize = 256 << 20;
/// Bytes before each record's chain hash: index and length.
const RECORD_HEADER: usize = 8 + 4;

/// The bundle key of entry `index`.
pub fn bundle_of(index: u64) -> u64 {
    index / BUNDLE_SIZE
}

/// A decoded bundle: its payload and where each record lies in it.
#[derive(Debug, Clone)]
pub struct EntryBundle {
    key: u64,
    payload: Vec<u8>,
    /// (index, start, end) of each record (chain ‖ leaf) in `payload`.
    records: Vec<(u64, usize, usize)>,
}

fn malformed(key: u64, why: impl Into<String>) -> Corruption {
    Corruption::new(
        key.saturating_mul(BUNDLE_SIZE),
        CorruptionKind::Malformed,
        format!("entry bundle {key}: {}", why.into()),
    )
}

/// A zstd context kept per thread, made on first use.
type Kept<T> = std::cell::RefCell<Option<T>>;

thread_local! {
    /// Making a decompression context per bundle cost more than the
    /// decompression itself (a full verify spent 10% of its time in
    /// `ZSTD_createDCtx`).
    static DECOMPRESSOR: Kept<zstd::bulk::Decompressor<'static>> = const { Kept::new(None) };
    /// A fresh compression context per full bundle cost the committer an
    /// allocation of its tables, and the page faults to touch them, on
    /// every 16 entries.
    static COMPRESSOR: Kept<zstd::bulk::Compressor<'static>> = const { Kept::new(None) };
}

/// `f` with this thread's context in `kept`, made by `make` on first use.
fn with_kept<T: 'static, R>(
    kept: &'static std::thread::LocalKey<Kept<T>>,
    make: impl FnOnce() -> std::io::Result<T>,
    f: impl FnOnce(&mut T) -> std::io::Result<R>,
) -> std::io::Result<R> {
    kept.with(|cell| {
        let mut slot = cell.borrow_mut();
        let ctx = match slot.as_mut() {
            Some(c) => c,
            None => slot.insert(make()?),
        };
        f(ctx)
    })
}

/// Compresses `payload` into one zstd frame at [`ZSTD_LEVEL`] with this
/// thread's context. The frame is the same as a fresh context's: a bulk
/// compression starts a new frame with the context's parameters.
fn compress(payload: &[u8]) -> std::io::Result<Vec<u8>> {
    with_kept(
        &COMPRESSOR,
        || zstd::bulk::Compressor::new(ZSTD_LEVEL),
        |c| c.compress(payload),
    )
}

/// Decompresses one zstd frame of at most `len` bytes with this thread's
/// context.
fn decompress(frame: &[u8], len: usize) -> std::io::Result<Vec<u8>> {
    with_kept(&DECOMPRESSOR, zstd::bulk::Decompressor::new, |d| {
        d.decompress(frame, len)
    })
}

impl EntryBundle {
    /// An empty bundle under `key`.
    pub fn empty(key: u64) -> EntryBundle {
        EntryBundle {
            key,
            payload: Vec::new(),
            records: Vec::new(),
        }
    }

    /// Decodes the stored value of bundle `key`. A value that does not
    /// decode is [`CorruptionKind::Malformed`] at the bundle's first index.
    pub fn decode(key: u64, value: &[u8]) -> Result<EntryBundle, Corruption> {
        let (&codec, rest) = value
            .split_first()
            .ok_or_else(|| malformed(key, "empty value"))?;
        let payload = match codec {
            CODEC_RAW => rest.to_vec(),
            CODEC_ZSTD => {
                if rest.len() < 4 {
                    return Err(malformed(key, "compressed value without its length"));
                }
                let (len, frame) = rest.split_at(4);
                let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
                if len > MAX_DECODED {
                    return Err(malformed(
                        key,
                        format!("decoded length {len} exceeds {MAX_DECODED}"),
                    ));
                }
                let out =
                    decompress(frame, len).map_err(|e| malformed(key, format!("zstd: {e}")))?;
                if out.len() != len {
                    return Err(malformed(
                        key,
                        format!("decoded {} bytes, header says {len}", out.len()),
                    ));
                }
                out
            }
            other => return Err(malformed(key, format!("unknown codec {other}"))),
        };
        let mut records = Vec::new();
        let mut at = 0;
        while at < payload.len() {
            if payload.len() - at < RECORD_HEADER {
                return Err(malformed(key, "truncated record header"));
            }
            let index = u64::from_be_bytes(payload[at..at + 8].try_into().unwrap_or([0; 8]));
            let len =
                u32::from_be_bytes(payload[at + 8..at + 12].try_into().unwrap_or([0; 4])) as usize;
            let start = at + RECORD_HEADER;
            if payload.len() - start < len {
                return Err(malformed(
                    key,
                    format!("record {index} runs past the end of the bundle"),
                ));
            }
            records.push((index, start, start + len));
            at = start + len;
        }
        if records.is_empty() {
            return Err(malformed(key, "holds no record"));
        }
        Ok(EntryBundle {
            key,
            payload,
            records,
        })
    }

    /// The bundle's key.
    pub fn key(&self) -> u64 {
        self.key
    }

    /// How many records it holds.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether it holds no record.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The record (chain ‖ leaf) stored for `index`, if any.
    pub fn record(&self, index: u64) -> Option<&[u8]> {
        self.records
            .iter()
            .find(|r| r.0 == index)
            .map(|&(_, s, e)| &self.payload[s..e])
    }

    /// Every record, in stored order: (index, chain ‖ leaf).
    pub fn records(&self) -> impl Iterator<Item = (u64, &[u8])> + '_ {
        self.records
            .iter()
            .map(|&(i, s, e)| (i, &self.payload[s..e]))
    }

    /// The index of the last record, if any.
    pub fn last_index(&self) -> Option<u64> {
        self.records.last().map(|r| r.0)
    }

    /// Appends a record for `index` made of `chain` and `leaf`.
    pub fn push(&mut self, index: u64, chain: &[u8; 32], leaf: &[u8]) {
        self.push_record(index, &[chain.as_slice(), leaf]);
    }

    /// Appends a record for `index` whose bytes are the concatenation of
    /// `parts` (a version-1 entry record is one part).
    pub fn push_record(&mut self, index: u64, parts: &[&[u8]]) {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        self.payload.extend_from_slice(&index.to_be_bytes());
        self.payload
            .extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
        let start = self.payload.len();
        for p in parts {
            self.payload.extend_from_slice(p);
        }
        self.records.push((index, start, self.payload.len()));
    }

    /// Replaces the record list with `records` (for tools that rewrite a
    /// bundle, such as the tamper tests' raw disk access).
    pub fn from_records<'a>(
        key: u64,
        records: impl IntoIterator<Item = (u64, &'a [u8])>,
    ) -> EntryBundle {
        let mut b = EntryBundle::empty(key);
        for (i, r) in records {
            b.push_record(i, &[r]);
        }
        b
    }

    /// Whether the bundle holds its last possible index, so that no later
    /// append rewrites it.
    pub fn is_full(&self) -> bool {
        self.last_index() == Some(self.key * BUNDLE_SIZE + BUNDLE_SIZE - 1)
    }

    /// The stored value: compressed when the bundle is full, raw otherwise.
    pub fn encode(&self) -> std::io::Result<Vec<u8>> {
        if self.is_full() {
            self.encode_with(CODEC_ZSTD)
        } else {
            self.encode_with(CODEC_RAW)
        }
    }

    /// The stored value with the given codec.
    pub fn encode_with(&self, codec: u8) -> std::io::Result<Vec<u8>> {
        match codec {
            CODEC_RAW => {
                let mut out = Vec::with_capacity(1 + self.payload.len());
                out.push(CODEC_RAW);
                out.extend_from_slice(&self.payload);
                Ok(out)
            }
            CODEC_ZSTD => {
                let len = u32::try_from(self.payload.len()).map_err(|_| {
                    std::io::Error::new(std::io::ErrorKind::InvalidInput, "bundle over 4 GiB")
                })?;
                let frame = compress(&self.payload)?;
                let mut out = Vec::with_capacity(5 + frame.len());
                out.push(CODEC_ZSTD);
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(&frame);
                Ok(out)
            }
            other => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("unknown codec {other}"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(key: u64, n: u64) -> EntryBundle {
        let mut b = EntryBundle::empty(key);
        for i in key * BUNDLE_SIZE..key * BUNDLE_SIZE + n {
            b.push(i, &[i as u8; 32], format!("leaf {i}").as_bytes());
        }
        b
    }

    #[test]
    fn a_partial_bundle_is_raw_and_a_full_one_compressed() {
        let partial = bundle(3, 5).encode().expect("encode");
        assert_eq!(partial[0], CODEC_RAW);
        let full = bundle(3, BUNDLE_SIZE).encode().expect("encode");
        assert_eq!(full[0], CODEC_ZSTD);
    }

    #[test]
    fn a_reused_compression_context_writes_the_frame_a_fresh_one_does() {
        // Stored bytes must not depend on what the thread compressed before.
        let (small, full) = (bundle(1, 3), bundle(4, BUNDLE_SIZE));
        for b in [&full, &small, &full] {
            let fresh = zstd::bulk::compress(&b.payload, ZSTD_LEVEL).expect("fresh");
            assert_eq!(compress(&b.payload).expect("reused"), fresh);
        }
    }

    #[test]
    fn both_codecs_round_trip_every_record() {
        let b = bundle(2, BUNDLE_SIZE);
        for codec in [CODEC_RAW, CODEC_ZSTD] {
            let d = EntryBundle::decode(2, &b.encode_with(codec).expect("encode")).expect("decode");
            assert_eq!(d.len(), BUNDLE_SIZE as usize);
            for (i, r) in d.records() {
                assert_eq!(&r[..32], &[i as u8; 32]);
                assert_eq!(&r[32..], format!("leaf {i}").as_bytes());
                assert_eq!(d.record(i), Some(r));
            }
            assert_eq!(d.record(2 * BUNDLE_SIZE + BUNDLE_SIZE), None);
        }
    }

    #[test]
    fn a_malformed_value_is_named_at_the_bundle_s_first_index() {
        let full = bundle(4, BUNDLE_SIZE).encode().expect("encode");
        let cases: Vec<Vec<u8>> = vec![
            vec![],
            vec![9, 1, 2],
            vec![CODEC_ZSTD, 0, 0],
            // A decoded length above the bound: refused before allocating.
            [
                vec![CODEC_ZSTD],
                u32::MAX.to_be_bytes().to_vec(),
                full[5..].to_vec(),
            ]
            .concat(),
            // A decoded length other than the frame's.
            [
                vec![CODEC_ZSTD],
                7u32.to_be_bytes().to_vec(),
                full[5..].to_vec(),
            ]
            .concat(),
            full[..full.len() - 3].to_vec(),
            // A raw record whose length runs past the end.
            [
                vec![CODEC_RAW],
                64u64.to_be_bytes().to_vec(),
                99u32.to_be_bytes().to_vec(),
            ]
            .concat(),
            vec![CODEC_RAW, 0, 0, 0],
            vec![CODEC_RAW],
        ];
        for v in cases {
            let e = EntryBundle::decode(4, &v).expect_err("malformed accepted");
            assert_eq!((e.index, e.kind), (64, CorruptionKind::Malformed), "{v:?}");
        }
    }
}
