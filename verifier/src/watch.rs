//! The watcher: follows a log through its C2SP tlog-tiles (`/checkpoint`,
//! `/tile/...`, from the ledger or from any static copy of its tiles) and
//! checks, at every step, that
//! - the checkpoint is signed by a trusted log key (and, with a policy,
//!   cosigned by a quorum of witnesses);
//! - it is consistent with the last checkpoint the watcher trusted (an RFC
//!   6962 consistency proof computed from tiles, which are themselves
//!   authenticated against the new root);
//! - every new entry in the entry bundles hashes to its authenticated leaf
//!   hash;
//! - every anchor in an anchors directory is a prefix of the tree.
//!
//! What it does not check: the entries' meaning (`ledger audit
//! --projections` replays them) or that two watchers saw the same tree
//! (witnesses, or watchers comparing checkpoints, do).

use std::cell::RefCell;
use std::collections::HashMap;

use anchors::{Anchor, Policy, VerifiedCheckpoint};
use ledger::merkle::{stored_hash_index, verify_consistency};
use ledger::tiles::{decode_bundle, TilePath, WIDTH};
use ledger::Hash;
use tlog_tiles::{HashReader as _, Tile, TileHashReader, TileReader};

use crate::Client;

/// The largest tree size a checkpoint may name and be followed: far above
/// any real log, and far from the u64 arithmetic of tile indices.
pub const MAX_TREE_SIZE: u64 = 1 << 62;

/// Why a step of the watcher failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Divergence {
    /// The checkpoint is not signed by a trusted key, or lacks a quorum.
    #[error("the checkpoint does not verify: {0}")]
    BadCheckpoint(String),
    /// The checkpoint is not an extension of the one trusted: a fork.
    #[error("the log is not consistent with the checkpoint trusted at size {trusted}: {reason}")]
    Fork { trusted: u64, reason: String },
    /// A served tile or entry bundle does not match the signed tree.
    #[error("the tiles do not match the signed tree: {0}")]
    BadTiles(String),
    /// An anchor is not a prefix of the served tree.
    #[error("an anchor disagrees with the log: {0}")]
    Anchor(String),
}

/// Why a step could not be made (nothing was disproved).
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error(transparent)]
    Diverged(#[from] Divergence),
    /// The served checkpoint is older than the one trusted (a stale cache
    /// or a rollback): not trusted, not replaced.
    #[error("the log serves size {served}, older than the trusted {trusted}")]
    Stale { trusted: u64, served: u64 },
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

/// Fetches C2SP tiles from a log; every tile fetched is kept for the
/// step (a `TileHashReader` authenticates it each time it is used). A tile
/// that cannot be fetched is told apart from one that does not match: the
/// first is an error of the step, the second a divergence.
pub struct TileFetcher<'a> {
    client: &'a Client,
    cache: RefCell<HashMap<Tile, Vec<u8>>>,
    fetched: RefCell<u64>,
    unavailable: RefCell<Option<String>>,
}

/// The most a tile, an entry bundle and a checkpoint may be.
const MAX_TILE: u64 = 32 * 256;
const MAX_BUNDLE: u64 = 256 * (2 + 65_535);
const MAX_CHECKPOINT: u64 = 64 * 1024;

impl<'a> TileFetcher<'a> {
    pub fn new(client: &'a Client) -> Self {
        TileFetcher {
            client,
            cache: RefCell::new(HashMap::new()),
            fetched: RefCell::new(0),
            unavailable: RefCell::new(None),
        }
    }

    /// Tiles and bundles fetched so far.
    pub fn fetched(&self) -> u64 {
        *self.fetched.borrow()
    }

    /// The body at a C2SP path (`tile/...`), at most `limit` bytes; `None`
    /// for a 404.
    fn fetch(&self, path: &str, limit: u64) -> anyhow::Result<Option<Vec<u8>>> {
        *self.fetched.borrow_mut() += 1;
        let r = self.client.get_limited(&format!("/{path}"), limit)?;
        match r.status {
            200 => Ok(Some(r.body)),
            404 => Ok(None),
            s => anyhow::bail!("GET /{path}: status {s}"),
        }
    }

    /// A hash tile's `width` hashes: the partial tile, or, when a log has
    /// replaced it by its full tile (C2SP allows deleting partial tiles
    /// then), the first `width` hashes of the full one.
    fn hash_tile(&self, level: u8, index: u64, width: u32) -> anyhow::Result<Vec<u8>> {
        let path = TilePath::hashes(level, index, width)
            .ok_or_else(|| anyhow::anyhow!("no tile {level}/{index} of width {width}"))?
            .to_string();
        if let Some(b) = self.fetch(&path, MAX_TILE)? {
            return Ok(b);
        }
        if width < WIDTH {
            let full = TilePath::hashes(level, index, WIDTH)
                .ok_or_else(|| anyhow::anyhow!("no full tile {level}/{index}"))?
                .to_string();
            if let Some(mut b) = self.fetch(&full, MAX_TILE)? {
                b.truncate(width as usize * 32);
                return Ok(b);
            }
        }
        anyhow::bail!("GET /{path}: not found")
    }

    /// Why the last read failed, when it was an error of the fetch.
    fn take_unavailable(&self) -> Option<String> {
        self.unavailable.borrow_mut().take()
    }
}

impl TileReader for TileFetcher<'_> {
    fn height(&self) -> u8 {
        ledger::tiles::HEIGHT
    }

    fn read_tiles(&self, tiles: &[Tile]) -> Result<Vec<Vec<u8>>, tlog_tiles::Error> {
        let mut out = Vec::with_capacity(tiles.len());
        for t in tiles {
            if let Some(d) = self.cache.borrow().get(t) {
                out.push(d.clone());
                continue;
            }
            let data = self
                .hash_tile(t.level(), t.level_index(), t.width())
                .map_err(|e| {
                    *self.unavailable.borrow_mut() = Some(format!("{e:#}"));
                    tlog_tiles::Error::InvalidTile
                })?;
            if data.len() != t.width() as usize * 32 {
                // Served, but not a tile of this width: not the tree signed.
                return Err(tlog_tiles::Error::InconsistentTile);
            }
            self.cache.borrow_mut().insert(*t, data.clone());
            out.push(data);
        }
        Ok(out)
    }

    fn save_tiles(&self, _tiles: &[Tile], _data: &[Vec<u8>]) {}
}

/// A failed read of authenticated hashes: an error of the step when a tile
/// could not be fetched, a divergence when what was served does not match
/// the signed root.
fn tile_failure(tiles: &TileFetcher<'_>, e: &tlog_tiles::Error, what: &str) -> WatchError {
    match tiles.take_unavailable() {
        Some(why) => WatchError::Other(anyhow::anyhow!("{what}: {why}")),
        None => Divergence::BadTiles(format!("{what}: {e}")).into(),
    }
}

/// The served tree, as far as tiles authenticated against its signed root
/// can show it: what [`anchors::check_anchors`] reads.
struct TiledLog<'a> {
    cp: &'a VerifiedCheckpoint,
    tiles: &'a TileFetcher<'a>,
}

impl anchors::LogAccess for TiledLog<'_> {
    fn size(&self) -> u64 {
        self.cp.size
    }
    fn root(&self) -> Hash {
        self.cp.root
    }
    fn consistency_proof(&self, old: u64, new: u64) -> Result<Vec<Hash>, String> {
        let r = TileHashReader::new(self.cp.size, self.cp.root, self.tiles);
        tlog_tiles::prove_tree(new, old, &r).map_err(|e| {
            // Remembered for the caller, which tells the two apart.
            let why = self.tiles.take_unavailable();
            let text = why.clone().unwrap_or_else(|| e.to_string());
            *self.tiles.unavailable.borrow_mut() = why;
            text
        })
    }
}

/// What one step established.
#[derive(Debug, Clone)]
pub struct Step {
    pub checkpoint: VerifiedCheckpoint,
    /// The signed note, to keep as the next trusted checkpoint.
    pub note: String,
    /// Entries checked in their bundles this step.
    pub new_entries: u64,
    pub anchors_checked: usize,
    pub tiles_fetched: u64,
    /// Witnesses whose cosignatures counted (with a policy).
    pub cosigned_by: Vec<String>,
}

/// One step of the watcher. `trusted` is the last checkpoint it trusted
/// (none on a first run, which trusts what it sees), `anchors` the anchors
/// to hold the log to.
pub fn step(
    client: &Client,
    keys: &[String],
    policy: Option<&Policy>,
    trusted: Option<&VerifiedCheckpoint>,
    anchors: &[Anchor],
) -> Result<Step, WatchError> {
    let r = client.get_limited("/checkpoint", MAX_CHECKPOINT)?;
    if r.status != 200 {
        return Err(anyhow::anyhow!("GET /checkpoint: status {}", r.status).into());
    }
    let note = String::from_utf8(r.body)
        .map_err(|_| anyhow::anyhow!("GET /checkpoint: not UTF-8 text"))?;
    let (cp, key) = match anchors::open_checkpoint_any(note.as_bytes(), keys) {
        Ok(ok) => ok,
        // Not a checkpoint at all (an error page): nothing was signed.
        Err(
            e @ (anchors::CheckpointError::MalformedNote(_)
            | anchors::CheckpointError::MalformedCheckpoint),
        ) => return Err(anyhow::anyhow!("GET /checkpoint: {e}").into()),
        Err(e) => return Err(Divergence::BadCheckpoint(e.to_string()).into()),
    };
    if cp.size > MAX_TREE_SIZE {
        // Signed, and absurd: no log holds 2^62 entries.
        return Err(Divergence::BadCheckpoint(format!(
            "a signed tree of {} entries, more than any log can hold",
            cp.size
        ))
        .into());
    }
    let cosigned_by = match policy {
        None => Vec::new(),
        Some(p) => p
            .open_checkpoint(note.as_bytes(), key)
            .map_err(|e| Divergence::BadCheckpoint(e.to_string()))?
            .cosigned
            .into_iter()
            .map(|c| c.witness)
            .collect(),
    };
    let tiles = TileFetcher::new(client);
    let log = TiledLog {
        cp: &cp,
        tiles: &tiles,
    };
    let from =
        match trusted {
            None => 0,
            Some(t) if cp.size < t.size => {
                return Err(WatchError::Stale {
                    trusted: t.size,
                    served: cp.size,
                })
            }
            Some(t) => {
                let fork = |reason: String| Divergence::Fork {
                    trusted: t.size,
                    reason,
                };
                if t.size == cp.size {
                    if t.root != cp.root {
                        return Err(fork("two roots for one size".into()).into());
                    }
                } else if t.size > 0 {
                    let proof = anchors::LogAccess::consistency_proof(&log, t.size, cp.size)
                        .map_err(|e| match tiles.take_unavailable() {
                            Some(_) => {
                                WatchError::Other(anyhow::anyhow!("consistency from tiles: {e}"))
                            }
                            None => {
                                Divergence::BadTiles(format!("consistency from tiles: {e}")).into()
                            }
                        })?;
                    verify_consistency(t.size, &t.root, cp.size, &cp.root, &proof)
                        .map_err(|e| fork(e.to_string()))?;
                }
                t.size
            }
        };
    let new_entries = check_entries(&tiles, &cp, from)?;
    let checked =
        anchors::check_anchors(&log, anchors, keys, &cp.origin).map_err(|e| {
            match tiles.take_unavailable() {
                Some(why) => WatchError::Other(anyhow::anyhow!("checking the anchors: {why}")),
                None => Divergence::Anchor(e.to_string()).into(),
            }
        })?;
    Ok(Step {
        new_entries,
        anchors_checked: checked.len(),
        tiles_fetched: tiles.fetched(),
        checkpoint: cp,
        note,
        cosigned_by,
    })
}

/// Checks the entries `from..cp.size` in their bundles against the leaf
/// hashes of tiles authenticated by `cp`'s root.
fn check_entries(
    tiles: &TileFetcher<'_>,
    cp: &VerifiedCheckpoint,
    from: u64,
) -> Result<u64, WatchError> {
    let reader = TileHashReader::new(cp.size, cp.root, tiles);
    let w = u64::from(WIDTH);
    let mut n = from / w;
    while n * w < cp.size {
        let start = n * w;
        let width = (cp.size - start).min(w) as u32;
        let path = TilePath::entries(n, width)
            .ok_or_else(|| anyhow::anyhow!("bundle {n} of width {width}"))?
            .to_string();
        // A partial bundle may have been replaced by its full one.
        let body = match tiles.fetch(&path, MAX_BUNDLE)? {
            Some(b) => b,
            None if width < WIDTH => {
                let full = TilePath::entries(n, WIDTH)
                    .ok_or_else(|| anyhow::anyhow!("bundle {n}"))?
                    .to_string();
                tiles
                    .fetch(&full, MAX_BUNDLE)?
                    .ok_or_else(|| anyhow::anyhow!("GET /{path}: not found (nor {full})"))?
            }
            None => return Err(anyhow::anyhow!("GET /{path}: not found").into()),
        };
        let mut leaves = decode_bundle(&body)
            .ok_or_else(|| Divergence::BadTiles(format!("{path} is malformed")))?;
        if leaves.len() == WIDTH as usize && width < WIDTH {
            leaves.truncate(width as usize);
        }
        if leaves.len() != width as usize {
            return Err(Divergence::BadTiles(format!(
                "{path} holds {} entries, not {width}",
                leaves.len()
            ))
            .into());
        }
        let first = start.max(from);
        let indexes: Vec<u64> = (first..start + u64::from(width))
            .map(|i| stored_hash_index(0, i))
            .collect();
        let hashes = reader
            .read_hashes(&indexes)
            .map_err(|e| tile_failure(tiles, &e, &format!("the leaf hashes of {path}")))?;
        for (k, h) in hashes.iter().enumerate() {
            let i = first + k as u64;
            if ledger::leaf_hash(leaves[(i - start) as usize]) != *h {
                return Err(Divergence::BadTiles(format!(
                    "entry {i} in {path} does not hash to its leaf hash"
                ))
                .into());
            }
        }
        n += 1;
    }
    Ok(cp.size - from)
}
