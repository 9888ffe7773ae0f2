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
use tlog_tiles::{HashReader as _, Tile, TileReader};

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
/// step (an [`AuthenticatedTiles`] authenticates it each time it is used). A tile
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

    /// A hash tile's `width` hashes ([`fetch_partial_or_full`]).
    fn hash_tile(&self, level: u8, index: u64, width: u32) -> anyhow::Result<Vec<u8>> {
        let mut requests = 0;
        let got = fetch_partial_or_full(
            self.client,
            TilePath::hashes(level, index, width),
            TilePath::hashes(level, index, WIDTH),
            MAX_TILE,
            &mut requests,
        );
        *self.fetched.borrow_mut() += requests;
        got.map(|(_, b)| b)
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

/// Stored hashes of the tree `(size, root)`, read from tiles that are each
/// authenticated before a hash in them is used: the tiles on the tree's
/// right edge by recomputing `root` from them, every other tile by its
/// subtree hash against its parent's, up to a tile of the right edge.
///
/// `tlog_tiles::TileHashReader` (0.2.0), like the Go code it ports, checks
/// tiles against their parents only from position `stx.len()` of its list,
/// which counts the right edge's hashes, not its tiles: the first few tiles
/// read for the indexes asked were never checked, so a server could rewrite
/// an entry and its leaf hash together and pass
/// (`a_growing_log_is_followed_and_every_divergence_is_caught`, the case of
/// a rewritten tile of leaf hashes).
pub struct AuthenticatedTiles<'a, R: TileReader> {
    size: u64,
    root: Hash,
    tiles: &'a R,
}

impl<'a, R: TileReader> AuthenticatedTiles<'a, R> {
    pub fn new(size: u64, root: Hash, tiles: &'a R) -> Self {
        AuthenticatedTiles { size, root, tiles }
    }

    /// The tile holding stored hash `index`, as wide as the tree allows.
    fn tile_of(&self, index: u64) -> Result<Tile, tlog_tiles::Error> {
        Tile::from_index(ledger::tiles::HEIGHT, index)
            .parent(0, self.size)
            .ok_or(tlog_tiles::Error::IndexesNotInTree)
    }
}

impl<R: TileReader> tlog_tiles::HashReader for AuthenticatedTiles<'_, R> {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, tlog_tiles::Error> {
        use tlog_tiles::Error as E;
        if self.size == 0
            || indexes
                .iter()
                .any(|&x| x >= stored_hash_index(0, self.size))
        {
            return Err(E::IndexesNotInTree);
        }
        // The right edge: the hashes of the perfect subtrees the tree is
        // made of, left to right, and the tiles that hold them.
        let edge = tlog_tiles::sub_tree_index(0, self.size, Vec::new());
        let edge_tiles = edge
            .iter()
            .map(|&x| self.tile_of(x))
            .collect::<Result<Vec<_>, E>>()?;
        let mut wanted: Vec<Tile> = Vec::new();
        let add = |t: Tile, wanted: &mut Vec<Tile>| {
            if !wanted.contains(&t) {
                wanted.push(t);
            }
        };
        for &t in &edge_tiles {
            add(t, &mut wanted);
        }
        // Each tile asked for, and its parents up to a tile of the edge.
        let mut checks: Vec<Tile> = Vec::new();
        for &x in indexes {
            let mut t = self.tile_of(x)?;
            while !edge_tiles.contains(&t) {
                if t.width() != 1 << t.height() {
                    // Only a full tile has a parent to be checked against.
                    return Err(E::BadMath);
                }
                add(t, &mut wanted);
                if !checks.contains(&t) {
                    checks.push(t);
                }
                t = t.parent(1, self.size).ok_or(E::BadMath)?;
            }
        }
        let data = self.tiles.read_tiles(&wanted)?;
        if data.len() != wanted.len()
            || wanted
                .iter()
                .zip(&data)
                .any(|(t, d)| d.len() != t.width() as usize * 32)
        {
            return Err(E::InconsistentTile);
        }
        let data_of = |t: &Tile| -> Result<&[u8], E> {
            let i = wanted.iter().position(|w| w == t).ok_or(E::BadMath)?;
            Ok(data[i].as_slice())
        };
        // The edge's tiles against the signed root.
        let mut root: Option<Hash> = None;
        for (x, t) in edge.iter().zip(&edge_tiles).rev() {
            let h = t.hash_at_index(data_of(t)?, *x)?;
            root = Some(match root {
                None => h,
                Some(right) => tlog_tiles::node_hash(h, right),
            });
        }
        if root != Some(self.root) {
            return Err(E::InconsistentTile);
        }
        // Every other tile used against its parent (which is checked in
        // turn, up to the edge).
        for t in &checks {
            let p = t.parent(1, self.size).ok_or(E::BadMath)?;
            let h = p.hash_at_index(
                data_of(&p)?,
                stored_hash_index(p.level() * p.height(), t.level_index()),
            )?;
            if h != Tile::subtree_hash(data_of(t)?) {
                return Err(E::InconsistentTile);
            }
        }
        indexes
            .iter()
            .map(|&x| {
                let t = self.tile_of(x)?;
                t.hash_at_index(data_of(&t)?, x)
            })
            .collect()
    }
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
        let r = AuthenticatedTiles::new(self.cp.size, self.cp.root, self.tiles);
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

/// Entry bundles fetched ahead of the one being checked, on this many
/// connections: a bundle's round trip, not the check, is what a watcher
/// that fetches one at a time waits on.
const PREFETCH_CONNECTIONS: usize = 4;
/// The most bundles fetched and not yet checked: bounds the memory a walk
/// takes (at most this many bundles of [`MAX_BUNDLE`] bytes from a hostile
/// server; a few MB from an honest one).
const PREFETCH_AHEAD: u64 = 8;

/// One bundle and the leaf-hash tile beside it, as fetched (not yet
/// authenticated), with how many requests that took.
struct Fetched {
    bundle: anyhow::Result<(String, Vec<u8>)>,
    leaf_tile: anyhow::Result<Vec<u8>>,
    requests: u64,
}

/// Bundle `n` (of `width` entries) and its tile of leaf hashes: the
/// partial ones, or, where a log has replaced them by full ones, those.
fn fetch_bundle(client: &Client, n: u64, width: u32) -> Fetched {
    let mut requests = 0;
    let bundle = fetch_partial_or_full(
        client,
        TilePath::entries(n, width),
        TilePath::entries(n, WIDTH),
        MAX_BUNDLE,
        &mut requests,
    );
    let leaf_tile = fetch_partial_or_full(
        client,
        TilePath::hashes(0, n, width),
        TilePath::hashes(0, n, WIDTH),
        MAX_TILE,
        &mut requests,
    )
    .map(|(_, b)| b);
    Fetched {
        bundle,
        leaf_tile,
        requests,
    }
}

/// The body of tile or bundle `partial` with the partial path, or, when a
/// log has replaced it by `full` (C2SP allows deleting partial tiles then),
/// the full one's: a hash tile cut to the partial width, a bundle whole
/// (its check cuts it). Returns the partial path with the body, and counts
/// the requests made in `requests`.
fn fetch_partial_or_full(
    client: &Client,
    partial: Option<TilePath>,
    full: Option<TilePath>,
    limit: u64,
    requests: &mut u64,
) -> anyhow::Result<(String, Vec<u8>)> {
    let partial = partial.ok_or_else(|| anyhow::anyhow!("no such tile or bundle"))?;
    let path = partial.to_string();
    // What lies past the partial width is not in the signed tree.
    let cut = |mut b: Vec<u8>| {
        if matches!(partial.kind, ledger::tiles::Kind::Hashes { .. }) {
            b.truncate(partial.width as usize * 32);
        }
        b
    };
    *requests += 1;
    if let Some(b) = fetch_body(client, &path, limit)? {
        return Ok((path, cut(b)));
    }
    if partial.width < WIDTH {
        let full = full
            .ok_or_else(|| anyhow::anyhow!("no full tile for {path}"))?
            .to_string();
        *requests += 1;
        if let Some(b) = fetch_body(client, &full, limit)? {
            return Ok((path, cut(b)));
        }
        anyhow::bail!("GET /{path}: not found (nor {full})");
    }
    anyhow::bail!("GET /{path}: not found")
}

/// The body at a C2SP path, at most `limit` bytes; `None` for a 404.
fn fetch_body(client: &Client, path: &str, limit: u64) -> anyhow::Result<Option<Vec<u8>>> {
    let r = client.get_limited(&format!("/{path}"), limit)?;
    match r.status {
        200 => Ok(Some(r.body)),
        404 => Ok(None),
        s => anyhow::bail!("GET /{path}: status {s}"),
    }
}

/// Checks the entries `from..cp.size` in their bundles against the leaf
/// hashes of tiles authenticated by `cp`'s root. Bundles and their tiles
/// of leaf hashes are fetched ahead on a few connections and checked in
/// order; a leaf-hash tile is authenticated (through its parents, up to
/// the signed root) before any hash in it is used, and dropped once its
/// bundle is checked: what a walk keeps grows with the log only by the
/// tiles above the leaves (about an eighth of a byte per entry).
fn check_entries(
    tiles: &TileFetcher<'_>,
    cp: &VerifiedCheckpoint,
    from: u64,
) -> Result<u64, WatchError> {
    if from >= cp.size {
        return Ok(0);
    }
    let reader = AuthenticatedTiles::new(cp.size, cp.root, tiles);
    let w = u64::from(WIDTH);
    let first = from / w;
    let end = cp.size.div_ceil(w);
    let width_of = |n: u64| (cp.size - n * w).min(w) as u32;
    let client = tiles.client;
    // Set once the walk ends (done or diverged): the fetchers take no
    // further bundle, so a divergence is reported without waiting for them.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let stop = &stop;
    let result = std::thread::scope(|scope| -> Result<(), WatchError> {
        let (jobs_tx, jobs_rx) = crossbeam_channel::unbounded::<u64>();
        let (done_tx, done_rx) = crossbeam_channel::unbounded::<(u64, Fetched)>();
        for _ in 0..PREFETCH_CONNECTIONS {
            let (jobs, done) = (jobs_rx.clone(), done_tx.clone());
            scope.spawn(move || {
                for n in jobs {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        return;
                    }
                    // A panic in one fetch is that bundle's error, not a
                    // walk that waits for it for ever.
                    let fetched = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        fetch_bundle(client, n, width_of(n))
                    }))
                    .unwrap_or_else(|_| Fetched {
                        bundle: Err(anyhow::anyhow!("fetching bundle {n} panicked")),
                        leaf_tile: Err(anyhow::anyhow!("fetching bundle {n} panicked")),
                        requests: 0,
                    });
                    if done.send((n, fetched)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(done_tx);
        let mut queued = first;
        let queue_to = |limit: u64, queued: &mut u64| {
            while *queued < limit.min(end) {
                // The workers outlive this loop: a send cannot fail.
                let _ = jobs_tx.send(*queued);
                *queued += 1;
            }
        };
        queue_to(first + PREFETCH_AHEAD, &mut queued);
        let mut ready = std::collections::BTreeMap::new();
        for n in first..end {
            let fetched = loop {
                if let Some(f) = ready.remove(&n) {
                    break f;
                }
                let (k, f) = done_rx
                    .recv()
                    .map_err(|_| anyhow::anyhow!("the bundle fetchers stopped"))?;
                ready.insert(k, f);
            };
            queue_to(n + 1 + PREFETCH_AHEAD, &mut queued);
            if let Err(e) = check_bundle(tiles, &reader, n, width_of(n), fetched) {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
                return Err(e);
            }
        }
        Ok(())
    });
    result?;
    Ok(cp.size - from)
}

/// Checks bundle `n` (of `width` entries) against its tile of leaf hashes,
/// authenticated by `reader` before it is used.
fn check_bundle(
    tiles: &TileFetcher<'_>,
    reader: &AuthenticatedTiles<'_, TileFetcher<'_>>,
    n: u64,
    width: u32,
    fetched: Fetched,
) -> Result<(), WatchError> {
    *tiles.fetched.borrow_mut() += fetched.requests;
    let (path, body) = fetched.bundle?;
    let start = n * u64::from(WIDTH);
    let mut leaves =
        decode_bundle(&body).ok_or_else(|| Divergence::BadTiles(format!("{path} is malformed")))?;
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
    // The tile of leaf hashes, as fetched, stands in the fetcher's cache for
    // the one the reader asks for; the reader authenticates it against its
    // parents and the signed root as it would a tile it fetched itself.
    let leaf_tile = Tile::new(ledger::tiles::HEIGHT, 0, n, width, false);
    match fetched.leaf_tile {
        Ok(data) if data.len() == width as usize * 32 => {
            tiles.cache.borrow_mut().insert(leaf_tile, data);
        }
        Ok(_) => {
            return Err(Divergence::BadTiles(format!(
                "the tile of leaf hashes beside {path} is not {width} hashes"
            ))
            .into())
        }
        Err(e) => return Err(e.into()),
    }
    // Every entry of the bundle, those before `from` too: their hashes are
    // in the same tile, and a server that changed them is caught.
    let first = start;
    let indexes: Vec<u64> = (first..start + u64::from(width))
        .map(|i| stored_hash_index(0, i))
        .collect();
    let hashes = reader.read_hashes(&indexes);
    tiles.cache.borrow_mut().remove(&leaf_tile);
    let hashes =
        hashes.map_err(|e| tile_failure(tiles, &e, &format!("the leaf hashes of {path}")))?;
    for (k, h) in hashes.iter().enumerate() {
        let i = first + k as u64;
        if ledger::leaf_hash(leaves[(i - start) as usize]) != *h {
            return Err(Divergence::BadTiles(format!(
                "entry {i} in {path} does not hash to its leaf hash"
            ))
            .into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serves the hash tiles it holds, as a static copy of a log's would.
    struct Served(HashMap<Tile, Vec<u8>>);

    impl TileReader for Served {
        fn height(&self) -> u8 {
            ledger::tiles::HEIGHT
        }
        fn read_tiles(&self, tiles: &[Tile]) -> Result<Vec<Vec<u8>>, tlog_tiles::Error> {
            tiles
                .iter()
                .map(|t| self.0.get(t).cloned().ok_or(tlog_tiles::Error::InvalidTile))
                .collect()
        }
        fn save_tiles(&self, _tiles: &[Tile], _data: &[Vec<u8>]) {}
    }

    /// Every hash tile of a log of `size` entries, from the log itself.
    fn log_of(size: u64) -> (tempfile::TempDir, ledger::Ledger<ledger::Raw>, Served) {
        let dir = tempfile::tempdir().expect("dir");
        let log = ledger::Ledger::open(dir.path(), ledger::Config::default()).expect("open");
        for i in 0..size {
            log.append(format!("entry {i}").into_bytes())
                .expect("append");
        }
        let mut tiles = HashMap::new();
        for level in 0u8..3 {
            let count = size >> (8 * u32::from(level));
            for n in 0..count.div_ceil(u64::from(WIDTH)) {
                let w = (count - n * u64::from(WIDTH)).min(u64::from(WIDTH)) as u32;
                let path = TilePath::hashes(level, n, w).expect("path");
                let data = log.tile(&path).expect("tile");
                tiles.insert(Tile::new(ledger::tiles::HEIGHT, level, n, w, false), data);
            }
        }
        (dir, log, Served(tiles))
    }

    #[test]
    fn every_tile_a_leaf_hash_is_read_through_is_authenticated_at_every_size() {
        for size in [1u64, 2, 255, 256, 257, 511, 512, 700, 1000] {
            let (_dir, log, served) = log_of(size);
            let root = log.head().root;
            let leaves: Vec<u64> = (0..size).map(|i| stored_hash_index(0, i)).collect();
            let honest = AuthenticatedTiles::new(size, root, &served)
                .read_hashes(&leaves)
                .expect("the honest tiles are read");
            for (i, h) in honest.iter().enumerate() {
                assert_eq!(*h, log.leaf_hash(i as u64).expect("leaf"), "size {size}");
            }
            // One hash changed, first or last of each tile in turn: every
            // read through that tile fails, whether the tile is on the
            // right edge (the root no longer follows) or not (its parent
            // no longer does).
            for (tile, data) in &served.0 {
                for at in [0, data.len() / 32 - 1] {
                    let mut bad = served.0.clone();
                    if let Some(d) = bad.get_mut(tile) {
                        d[at * 32] ^= 1;
                    }
                    let got =
                        AuthenticatedTiles::new(size, root, &Served(bad)).read_hashes(&leaves);
                    assert!(
                        matches!(got, Err(tlog_tiles::Error::InconsistentTile)),
                        "size {size}: tile {tile:?} changed at hash {at} was used: {got:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_crates_own_reader_misses_a_changed_tile_that_this_one_catches() {
        // Size 700: the right edge is 6 hashes in 2 tiles, so the crate's
        // reader checks parents from position 6 of a list of 3 tiles.
        let (_dir, log, served) = log_of(700);
        let root = log.head().root;
        let leaves: Vec<u64> = (256..512).map(|i| stored_hash_index(0, i)).collect();
        let mut bad = served.0.clone();
        if let Some(d) = bad.get_mut(&Tile::new(ledger::tiles::HEIGHT, 0, 1, WIDTH, false)) {
            d[0] ^= 1;
        }
        let bad = Served(bad);
        assert!(
            tlog_tiles::TileHashReader::new(700, root, &bad)
                .read_hashes(&leaves)
                .is_ok(),
            "the crate's reader now checks this tile: AuthenticatedTiles may no longer be needed"
        );
        assert!(matches!(
            AuthenticatedTiles::new(700, root, &bad).read_hashes(&leaves),
            Err(tlog_tiles::Error::InconsistentTile)
        ));
    }
}
