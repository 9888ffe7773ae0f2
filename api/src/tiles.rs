//! The log as static files: a directory holding the C2SP tlog-tiles
//! resources (`checkpoint`, `tile/<L>/<N>[.p/<W>]`, `tile/entries/<N>...`)
//! that any static web server, CDN or bucket can serve. The bytes are the
//! ones `GET /tile/...` and `GET /checkpoint` answer with
//! ([`ledger::Ledger::tile`], [`anchors::LogKey::sign_checkpoint`]).
//!
//! A sync writes only what the directory lacks: it reads the directory's
//! checkpoint, checks it with the log key and against the log's own root at
//! that size (a directory of another log, or of a rewritten one, is refused,
//! never overwritten), writes every tile completed since and the partial
//! tiles of the new size, and replaces the checkpoint last. Each file is
//! written beside its place and renamed, after an fsync, so a reader never
//! sees a torn tile, and a crash mid-sync leaves the old checkpoint with
//! every tile it needs. A partial tile is deleted once its full tile is
//! written (C2SP allows it; readers fall back to the full tile).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anchors::LogKey;
use anyhow::{bail, Context};
use ledger::tiles::{tiles_between, TilePath};
use ledger::{Ledger, Sequencer};

/// What a sync did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synced {
    /// The tree size the directory held before (0 when it was empty).
    pub from: u64,
    /// The tree size its checkpoint names now.
    pub size: u64,
    /// Tiles and entry bundles written.
    pub written: usize,
}

/// The checkpoint file's name in a tiles directory.
pub const CHECKPOINT: &str = "checkpoint";

/// Brings `dir` up to the log's current size, or to the size of `note`
/// when given (a checkpoint signed by `key` that the log holds: the newest
/// witnessed one, which may be behind the head). `progress(done, total)`
/// is called as tiles are written. With `full`, every tile is written again
/// and a directory holding another log or another history is overwritten;
/// one holding a longer tree of this very key is still refused (a rewrite
/// would roll its published size back).
pub fn sync_dir<S: Sequencer>(
    log: &Ledger<S>,
    key: &LogKey,
    dir: &Path,
    full: bool,
    note: Option<&str>,
    mut progress: impl FnMut(usize, usize),
) -> anyhow::Result<Synced> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    if full {
        let longer = std::fs::read(dir.join(CHECKPOINT))
            .ok()
            .and_then(|n| anchors::open_checkpoint(&n, key.verifier_key()).ok())
            .filter(|cp| cp.size > log.head().size);
        if let Some(cp) = longer {
            bail!(
                "{} publishes a tree of {} entries signed by this key, more than this log's {}: refusing to roll it back",
                dir.display(),
                cp.size,
                log.head().size
            );
        }
    }
    let from = match held_size(log, key, dir) {
        Ok(n) if !full => n,
        Ok(_) => 0,
        Err(e) if full => {
            tracing::warn!(error = %e, "rewriting the whole tiles directory");
            0
        }
        Err(e) => return Err(e),
    };
    let (size, note) = match note {
        Some(n) => {
            let cp = anchors::open_checkpoint(n.as_bytes(), key.verifier_key())
                .context("the checkpoint to publish")?;
            if log.root_at(cp.size)? != cp.root {
                bail!("the checkpoint to publish names a root this log does not have");
            }
            (cp.size, n.to_owned())
        }
        None => {
            let head = log.head();
            (head.size, key.sign_checkpoint(head.size, &head.root)?)
        }
    };
    if size < from {
        // The directory is ahead of what may be published (a witnessed
        // checkpoint lags the head): leave it as it is.
        return Ok(Synced {
            from,
            size: from,
            written: 0,
        });
    }
    let tiles = tiles_between(from, size);
    let total = tiles.len();
    for (done, t) in tiles.iter().enumerate() {
        let bytes = log.tile(t).map_err(|e| match e {
            ledger::Error::EntryTooLarge { len, max } => anyhow::anyhow!(
                "{t} cannot be written: it holds an entry of {len} bytes, more than the {max} an entry bundle holds (appended before that limit; docs/UPGRADES.md)"
            ),
            e => anyhow::Error::from(e).context(format!("reading {t} from the log")),
        })?;
        write_atomic(&dir.join(t.to_string()), &bytes)?;
        if !t.is_partial() {
            remove_partials(dir, t)?;
        }
        progress(done + 1, total);
    }
    if size > from || !dir.join(CHECKPOINT).exists() {
        write_atomic(&dir.join(CHECKPOINT), note.as_bytes())?;
    }
    Ok(Synced {
        from,
        size,
        written: total,
    })
}

/// The size of the tree `dir` holds now: 0 for a directory with no
/// checkpoint; otherwise its checkpoint must verify with `key` and name a
/// root this log has at that size.
fn held_size<S: Sequencer>(log: &Ledger<S>, key: &LogKey, dir: &Path) -> anyhow::Result<u64> {
    let path = dir.join(CHECKPOINT);
    let note = match std::fs::read(&path) {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let cp = anchors::open_checkpoint(&note, key.verifier_key()).with_context(|| {
        format!(
            "{} is not a checkpoint of this log; refusing to write over another log's tiles (--full rewrites it)",
            path.display()
        )
    })?;
    let head = log.head();
    if cp.size > head.size {
        bail!(
            "{} names a tree of {} entries and this log has {}: the directory holds a longer log; refusing to write over it",
            path.display(),
            cp.size,
            head.size
        );
    }
    if log.root_at(cp.size)? != cp.root {
        bail!(
            "{} names a root at size {} that this log does not have: the directory holds another history; refusing to write over it",
            path.display(),
            cp.size
        );
    }
    Ok(cp.size)
}

/// Removes the partial versions of full tile `t` (`<path>.p/`), if any.
fn remove_partials(dir: &Path, t: &TilePath) -> anyhow::Result<()> {
    let p = dir.join(format!("{t}.p"));
    match std::fs::remove_dir_all(&p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", p.display())),
    }
}

/// Writes `bytes` to `path` by way of a scratch file in the same directory,
/// fsynced and renamed; then fsyncs the directory.
fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let parent = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    std::fs::create_dir_all(&parent).with_context(|| format!("creating {}", parent.display()))?;
    let mut f = tempfile::NamedTempFile::new_in(&parent)
        .with_context(|| format!("creating a scratch file in {}", parent.display()))?;
    f.write_all(bytes)?;
    f.as_file().sync_all()?;
    // Readers of a static server need the file readable by others.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        f.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    }
    f.persist(path)
        .with_context(|| format!("writing {}", path.display()))?;
    std::fs::File::open(&parent)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing {}", parent.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw_log(n: u64) -> (tempfile::TempDir, Ledger<ledger::Raw>) {
        let d = tempfile::tempdir().expect("tempdir");
        let log = Ledger::open(d.path(), ledger::Config::default()).expect("open");
        for i in 0..n {
            log.append(format!("entry {i}").into_bytes())
                .expect("append");
        }
        (d, log)
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).expect("read_dir") {
                let p = e.expect("entry").path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    let rel = p.strip_prefix(dir).expect("prefix");
                    out.push(rel.to_string_lossy().into_owned());
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn a_sync_writes_what_is_new_and_drops_replaced_partials() {
        let key = LogKey::generate("tiles.test/log").expect("key");
        let (_d, log) = raw_log(300);
        let out = tempfile::tempdir().expect("out");
        let s = sync_dir(&log, &key, out.path(), false, None, |_, _| {}).expect("sync");
        assert_eq!((s.from, s.size, s.written), (0, 300, 5));
        assert_eq!(
            files(out.path()),
            [
                "checkpoint",
                "tile/0/000",
                "tile/0/001.p/44",
                "tile/1/000.p/1",
                "tile/entries/000",
                "tile/entries/001.p/44"
            ]
        );
        for i in 300..600 {
            log.append(format!("entry {i}").into_bytes())
                .expect("append");
        }
        let s = sync_dir(&log, &key, out.path(), false, None, |_, _| {}).expect("sync");
        assert_eq!((s.from, s.size), (300, 600));
        let f = files(out.path());
        assert!(!f.iter().any(|p| p.starts_with("tile/0/001.p")), "{f:?}");
        assert!(f.contains(&"tile/0/002.p/88".to_owned()), "{f:?}");
        assert!(f.contains(&"tile/1/000.p/2".to_owned()), "{f:?}");
        // Nothing new: nothing written.
        let s = sync_dir(&log, &key, out.path(), false, None, |_, _| {}).expect("sync");
        assert_eq!(s.written, 0);
    }

    #[test]
    fn a_directory_of_another_history_is_refused() {
        let key = LogKey::generate("tiles.test/log").expect("key");
        let (_d1, log) = raw_log(10);
        let (_d2, other) = raw_log(0);
        for i in 0..10 {
            other
                .append(format!("other {i}").into_bytes())
                .expect("append");
        }
        let out = tempfile::tempdir().expect("out");
        sync_dir(&other, &key, out.path(), false, None, |_, _| {}).expect("sync");
        let e = sync_dir(&log, &key, out.path(), false, None, |_, _| {}).expect_err("refused");
        assert!(e.to_string().contains("another history"), "{e}");
        // Another key's checkpoint is refused too; --full overrides both.
        let other_key = LogKey::generate("tiles.test/other").expect("key");
        let e =
            sync_dir(&log, &other_key, out.path(), false, None, |_, _| {}).expect_err("refused");
        assert!(
            e.to_string().contains("not a checkpoint of this log"),
            "{e:#}"
        );
        sync_dir(&log, &key, out.path(), true, None, |_, _| {}).expect("full");
        let note = std::fs::read(out.path().join(CHECKPOINT)).expect("checkpoint");
        let cp = anchors::open_checkpoint(&note, key.verifier_key()).expect("verifies");
        assert_eq!(cp.root, log.head().root);
        // Even --full does not roll a published tree of this key back.
        let (_d3, shorter) = raw_log(4);
        let e = sync_dir(&shorter, &key, out.path(), true, None, |_, _| {}).expect_err("refused");
        assert!(e.to_string().contains("refusing to roll it back"), "{e}");
    }
}
