//! C2SP tlog-tiles (<https://c2sp.org/tlog-tiles>): the log as static
//! resources. Tile paths, the bytes of Merkle tree tiles and entry bundles,
//! and the tiles a tree size needs.
//!
//! - A tile at level `L` holds up to 256 consecutive hashes at tree level
//!   `8L`: leaf hashes at level 0, and at level 1 and above the Merkle Tree
//!   Hash of each *full* tile of the level below. A partial tile (width 1 to
//!   255) is the rightmost tile of its level for some tree size.
//! - An entry bundle holds the leaves of the level-0 tile with the same
//!   index and width, each as a big-endian u16 length and the leaf bytes; a
//!   leaf can therefore be at most [`MAX_ENTRY_BYTES`], and the log refuses
//!   longer ones when they are appended.
//! - Paths: `tile/<L>/<N>[.p/<W>]` and `tile/entries/<N>[.p/<W>]`, `N` in
//!   zero-padded 3-digit elements, all but the last prefixed with `x`.
//!
//! The stored-hash layout is Go's `sumdb/tlog` (see [`crate::merkle`]), whose
//! tiles are these with the height in the path (`tile/8/L/...`) and `data`
//! for entries; the paths here are C2SP's, written and parsed by this module
//! alone.

use std::fmt;

use crate::error::Error;
use crate::log::{Ledger, Sequencer};

/// The tile height: each tile spans 8 tree levels.
pub const HEIGHT: u8 = 8;
/// Hashes (or entries) in a full tile: 2^8.
pub const WIDTH: u32 = 1 << HEIGHT;
/// The longest leaf an entry bundle can hold: its length is a big-endian u16.
pub const MAX_ENTRY_BYTES: usize = u16::MAX as usize;
/// The highest level a path may name (C2SP: 0 to 63).
pub const MAX_LEVEL: u8 = 63;

/// `Cache-Control` for tiles and entry bundles: they never change.
pub const IMMUTABLE: &str = "public, max-age=604800, immutable";
/// `Cache-Control` for the checkpoint, which changes with every append.
pub const MUTABLE: &str = "no-cache";

/// What a tile holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Merkle tree hashes at tree level `8 * level`.
    Hashes { level: u8 },
    /// The leaves under the level-0 tile of the same index and width.
    Entries,
}

/// One tile or entry bundle: what it holds, its index in its level, and its
/// width (1 to 255 for a partial tile, 256 for a full one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TilePath {
    pub kind: Kind,
    pub index: u64,
    pub width: u32,
}

/// Why a tile path was refused: the rule it breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{path}` is not a C2SP tile path: {rule}")]
pub struct PathError {
    pub path: String,
    pub rule: &'static str,
}

impl TilePath {
    /// A hash tile; `None` unless `level <= 63` and `1 <= width <= 256`.
    pub fn hashes(level: u8, index: u64, width: u32) -> Option<TilePath> {
        (level <= MAX_LEVEL && (1..=WIDTH).contains(&width)).then_some(TilePath {
            kind: Kind::Hashes { level },
            index,
            width,
        })
    }

    /// An entry bundle; `None` unless `1 <= width <= 256`.
    pub fn entries(index: u64, width: u32) -> Option<TilePath> {
        (1..=WIDTH).contains(&width).then_some(TilePath {
            kind: Kind::Entries,
            index,
            width,
        })
    }

    /// The tree level the tile's hashes are at, divided by 8 (0 for bundles).
    pub fn level(&self) -> u8 {
        match self.kind {
            Kind::Hashes { level } => level,
            Kind::Entries => 0,
        }
    }

    pub fn is_partial(&self) -> bool {
        self.width < WIDTH
    }

    /// The same tile at full width.
    pub fn full(&self) -> TilePath {
        TilePath {
            width: WIDTH,
            ..*self
        }
    }

    /// The smallest tree size that holds this tile: `(N * 256 + W) * 256^L`.
    /// `None` when that exceeds `u64`, so that no tree holds it.
    pub fn tree_size_needed(&self) -> Option<u64> {
        let hashes = self
            .index
            .checked_mul(u64::from(WIDTH))?
            .checked_add(u64::from(self.width))?;
        let shift = u32::from(self.level()) * u32::from(HEIGHT);
        if shift >= 64 {
            return None;
        }
        let size = hashes.checked_shl(shift)?;
        // checked_shl only refuses shifts >= 64; bits shifted out are lost.
        (size >> shift == hashes).then_some(size)
    }

    /// The first leaf index the tile covers.
    pub fn first_entry(&self) -> Option<u64> {
        let shift = u32::from(self.level()) * u32::from(HEIGHT);
        let start = self.index.checked_mul(u64::from(WIDTH))?;
        if shift >= 64 {
            return (start == 0).then_some(0);
        }
        let first = start.checked_shl(shift)?;
        (first >> shift == start).then_some(first)
    }

    /// Parses a path as C2SP writes it (`tile/0/x001/234.p/7`), refusing
    /// every other spelling of the same tile (leading zeros, `x000`, a
    /// missing `x`, a `.p/256`).
    pub fn parse(path: &str) -> Result<TilePath, PathError> {
        let err = |rule| PathError {
            path: path.chars().take(80).collect(),
            rule,
        };
        if path.len() > 128 {
            return Err(err("longer than any tile path"));
        }
        let rest = path
            .strip_prefix("tile/")
            .ok_or_else(|| err("must start with `tile/`"))?;
        let (first, rest) = rest
            .split_once('/')
            .ok_or_else(|| err("must name a level and an index"))?;
        let kind = if first == "entries" {
            Kind::Entries
        } else {
            let level = decimal(first).ok_or_else(|| {
                err("the level must be `entries` or a decimal without leading zeros")
            })?;
            let level = u8::try_from(level)
                .ok()
                .filter(|l| *l <= MAX_LEVEL)
                .ok_or_else(|| err("the level must be at most 63"))?;
            Kind::Hashes { level }
        };
        let (index_part, width) = match rest.split_once(".p/") {
            Some((i, w)) => {
                let w = decimal(w)
                    .ok_or_else(|| err("the width must be a decimal without leading zeros"))?;
                let w = u32::try_from(w)
                    .ok()
                    .filter(|w| (1..WIDTH).contains(w))
                    .ok_or_else(|| err("a partial tile's width must be 1 to 255"))?;
                (i, w)
            }
            None => (rest, WIDTH),
        };
        let elements: Vec<&str> = index_part.split('/').collect();
        let mut index: u64 = 0;
        for (k, e) in elements.iter().enumerate() {
            let last = k + 1 == elements.len();
            let digits = if last {
                *e
            } else {
                e.strip_prefix('x')
                    .ok_or_else(|| err("every index element but the last starts with `x`"))?
            };
            if digits.len() != 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(err("each index element has exactly three digits"));
            }
            let v: u64 = digits
                .parse()
                .map_err(|_| err("each index element has exactly three digits"))?;
            index = index
                .checked_mul(1000)
                .and_then(|i| i.checked_add(v))
                .ok_or_else(|| err("the index exceeds 2^64 - 1"))?;
        }
        let t = TilePath { kind, index, width };
        if t.to_string() != path {
            return Err(err("the index has a redundant leading `x000` element"));
        }
        Ok(t)
    }
}

/// A decimal with no sign and no leading zeros (`0` itself is allowed).
fn decimal(s: &str) -> Option<u64> {
    let ok = !s.is_empty()
        && s.bytes().all(|b| b.is_ascii_digit())
        && (s == "0" || !s.starts_with('0'))
        && s.len() <= 20;
    if ok {
        s.parse().ok()
    } else {
        None
    }
}

impl fmt::Display for TilePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tile/")?;
        match self.kind {
            Kind::Hashes { level } => write!(f, "{level}/")?,
            Kind::Entries => f.write_str("entries/")?,
        }
        let mut groups = Vec::new();
        let mut n = self.index;
        loop {
            groups.push(n % 1000);
            n /= 1000;
            if n == 0 {
                break;
            }
        }
        for (k, g) in groups.iter().rev().enumerate() {
            if k + 1 == groups.len() {
                write!(f, "{g:03}")?;
            } else {
                write!(f, "x{g:03}/")?;
            }
        }
        if self.is_partial() {
            write!(f, ".p/{}", self.width)?;
        }
        Ok(())
    }
}

/// The hash tiles and entry bundles a reader of a tree of `new` entries
/// needs and a reader of `old` entries did not have: every tile completed
/// in between, and the partial tiles of `new`. `tiles_between(0, n)` is the
/// whole tile set of a tree of `n` entries. Hash tiles come first, by level,
/// then the bundles.
pub fn tiles_between(old: u64, new: u64) -> Vec<TilePath> {
    if new <= old {
        return Vec::new();
    }
    let mut hashes = Vec::new();
    let mut level: u8 = 0;
    loop {
        let shift = u32::from(level) * u32::from(HEIGHT);
        if shift >= 64 || new >> shift == 0 {
            break;
        }
        let (old_n, new_n) = (old >> shift, new >> shift);
        if old_n != new_n {
            let w = u64::from(WIDTH);
            for index in (old_n / w)..(new_n / w) {
                hashes.push(TilePath {
                    kind: Kind::Hashes { level },
                    index,
                    width: WIDTH,
                });
            }
            let width = (new_n % w) as u32;
            if width > 0 {
                hashes.push(TilePath {
                    kind: Kind::Hashes { level },
                    index: new_n / w,
                    width,
                });
            }
        }
        level += 1;
    }
    let bundles: Vec<TilePath> = hashes
        .iter()
        .filter(|t| t.level() == 0)
        .map(|t| TilePath {
            kind: Kind::Entries,
            ..*t
        })
        .collect();
    hashes.extend(bundles);
    hashes
}

/// Encodes leaves as an entry bundle: each as a big-endian u16 length, then
/// the bytes. A leaf longer than [`MAX_ENTRY_BYTES`] is
/// [`Error::EntryTooLarge`].
pub fn encode_bundle<'a>(leaves: impl IntoIterator<Item = &'a [u8]>) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    for leaf in leaves {
        let len = u16::try_from(leaf.len()).map_err(|_| Error::EntryTooLarge {
            len: leaf.len(),
            max: MAX_ENTRY_BYTES,
        })?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(leaf);
    }
    Ok(out)
}

/// Splits an entry bundle into its leaves; `None` when a length runs past
/// the end, or when it holds more than the [`WIDTH`] entries a bundle can
/// (so that a hostile body of empty entries cannot make a huge list).
pub fn decode_bundle(mut bytes: &[u8]) -> Option<Vec<&[u8]>> {
    let mut leaves = Vec::new();
    while !bytes.is_empty() {
        if leaves.len() == WIDTH as usize {
            return None;
        }
        let (len, rest) = bytes.split_first_chunk::<2>()?;
        let len = usize::from(u16::from_be_bytes(*len));
        if rest.len() < len {
            return None;
        }
        let (leaf, rest) = rest.split_at(len);
        leaves.push(leaf);
        bytes = rest;
    }
    Some(leaves)
}

impl<S: Sequencer> Ledger<S> {
    /// The bytes of tile `t` of the committed tree: 32 bytes per hash for a
    /// hash tile, the encoded leaves for an entry bundle. Each leaf is a
    /// checked read (matched to its stored leaf hash). A tile the tree of
    /// the current size does not hold yet is [`Error::TileNotInTree`].
    pub fn tile(&self, t: &TilePath) -> Result<Vec<u8>, Error> {
        crate::store::guarded("reading a tile", || {
            let size = self.head().size;
            let fits = t.tree_size_needed().is_some_and(|n| n <= size);
            if !fits {
                return Err(Error::TileNotInTree {
                    tile: t.to_string(),
                    size,
                });
            }
            let snap = self.snapshot()?;
            match t.kind {
                Kind::Hashes { level } => {
                    let r = crate::store::Reader::new(&snap);
                    tlog_tiles::Tile::new(HEIGHT, level, t.index, t.width, false)
                        .read_data(&r)
                        .map_err(|e| r.take_err(e))
                }
                Kind::Entries => {
                    let first = t.index * u64::from(WIDTH);
                    let entries =
                        crate::log::checked_entries(&snap, first, first + u64::from(t.width))?;
                    encode_bundle(entries.iter().map(|e| e.leaf.as_slice()))
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> TilePath {
        TilePath::parse(s).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn paths_are_those_of_the_spec() {
        // The spec's example: index 1234067 is x001/x234/067.
        let t = TilePath::hashes(4, 1_234_067, 1).expect("tile");
        assert_eq!(t.to_string(), "tile/4/x001/x234/067.p/1");
        assert_eq!(p("tile/4/x001/x234/067.p/1"), t);
        let full = TilePath::hashes(0, 1_234_067, 256).expect("tile");
        assert_eq!(full.to_string(), "tile/0/x001/x234/067");
        assert_eq!(
            TilePath::entries(0, 7).expect("bundle").to_string(),
            "tile/entries/000.p/7"
        );
        assert_eq!(
            p("tile/entries/x001/000"),
            TilePath::entries(1000, 256).expect("bundle")
        );
        assert_eq!(
            TilePath::hashes(63, u64::MAX, 255)
                .expect("tile")
                .to_string(),
            "tile/63/x018/x446/x744/x073/x709/x551/615.p/255"
        );
    }

    #[test]
    fn every_other_spelling_is_refused() {
        for bad in [
            "tile/0/1",
            "tile/0/0001",
            "tile/00/000",
            "tile/01/000",
            "tile/64/000",
            "tile/0/x000/001",
            "tile/0/001/002",
            "tile/0/x001/x002",
            "tile/0/000.p/0",
            "tile/0/000.p/256",
            "tile/0/000.p/07",
            "tile/0/000.p/",
            "tile/data/000",
            "tile/8/0/000",
            "tile/entries",
            "tile/0/",
            "/tile/0/000",
            "tile/0/000/",
            "tile/0/x018/x446/x744/x073/x709/x551/616",
            "tile/-1/000",
            "tile/+1/000",
        ] {
            assert!(TilePath::parse(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn the_spec_example_of_a_tree_of_70000() {
        // "a tree of size 70,000 will be represented by 273 full level 0
        // tiles, one partial level 0 tile of width 112, one full level 1
        // tile, one partial level 1 tile of width 17, and one partial level
        // 2 tile of width 1."
        let all = tiles_between(0, 70_000);
        let hashes: Vec<_> = all.iter().filter(|t| t.kind != Kind::Entries).collect();
        let count = |level: u8, width: u32| {
            hashes
                .iter()
                .filter(|t| t.level() == level && t.width == width)
                .count()
        };
        assert_eq!(count(0, 256), 273);
        assert_eq!(count(0, 112), 1);
        assert_eq!(count(1, 256), 1);
        assert_eq!(count(1, 17), 1);
        assert_eq!(count(2, 1), 1);
        assert_eq!(hashes.len(), 273 + 4);
        // And one bundle per level-0 tile.
        assert_eq!(all.len() - hashes.len(), 274);
        // "a tree of size 256 will be represented by a full level 0 tile and
        // a partial level 1 tile of width 1."
        let t256 = tiles_between(0, 256);
        assert_eq!(
            t256.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["tile/0/000", "tile/1/000.p/1", "tile/entries/000"]
        );
        // Every tile lies within the tree; the partial tiles are exactly
        // floor(s / 256^l) mod 256 wide.
        for t in &all {
            assert!(t.tree_size_needed().is_some_and(|n| n <= 70_000), "{t}");
        }
    }

    #[test]
    fn growing_adds_only_what_is_new() {
        let mut have = std::collections::BTreeSet::new();
        let mut old = 0;
        for new in [1, 5, 255, 256, 257, 700, 65_536, 65_537, 70_000] {
            for t in tiles_between(old, new) {
                have.insert(t);
            }
            let full: std::collections::BTreeSet<_> = tiles_between(0, new).into_iter().collect();
            assert!(full.is_subset(&have), "at {new}");
            old = new;
        }
        assert!(tiles_between(10, 10).is_empty());
        assert!(tiles_between(10, 5).is_empty());
    }

    #[test]
    fn sizes_needed_and_first_entries() {
        let t = TilePath::hashes(1, 2, 17).expect("tile");
        assert_eq!(t.tree_size_needed(), Some((2 * 256 + 17) * 256));
        assert_eq!(t.first_entry(), Some(2 * 256 * 256));
        assert_eq!(
            TilePath::hashes(8, 0, 1).expect("tile").tree_size_needed(),
            None
        );
        assert_eq!(
            TilePath::hashes(7, 0, 1).expect("tile").tree_size_needed(),
            Some(1 << 56)
        );
        assert_eq!(
            TilePath::hashes(0, u64::MAX, 256)
                .expect("tile")
                .tree_size_needed(),
            None
        );
    }

    #[test]
    fn bundles_round_trip_and_refuse_long_leaves() {
        let leaves: Vec<Vec<u8>> = vec![vec![], b"abc".to_vec(), vec![7; MAX_ENTRY_BYTES]];
        let b = encode_bundle(leaves.iter().map(Vec::as_slice)).expect("encode");
        assert_eq!(&b[..5], &[0, 0, 0, 3, b'a']);
        let back = decode_bundle(&b).expect("decode");
        assert_eq!(back, leaves.iter().map(Vec::as_slice).collect::<Vec<_>>());
        assert!(decode_bundle(&[0, 5, 1]).is_none());
        assert!(decode_bundle(&[0]).is_none());
        // 256 empty entries are a bundle; 257 are not.
        assert_eq!(decode_bundle(&[0; 512]).map(|l| l.len()), Some(256));
        assert!(decode_bundle(&[0; 514]).is_none());
        let long = vec![0u8; MAX_ENTRY_BYTES + 1];
        assert!(matches!(
            encode_bundle([long.as_slice()]),
            Err(Error::EntryTooLarge {
                len: 65_536,
                max: 65_535
            })
        ));
    }
}
