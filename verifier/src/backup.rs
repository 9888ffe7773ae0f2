//! Online backup and verified restore.
//!
//! A backup is JSON lines: a header with the signed checkpoint it covers,
//! then every entry `{index, leaf}` up to that checkpoint. It is taken
//! through the API while the server keeps writing: the checkpoint fixes the
//! prefix, and entries never change, so the copy is consistent. Every tree
//! hash, chain hash and index is a function of the leaves, so a restore
//! rebuilds a byte-identical log and proves it: the restored root must equal
//! the signed checkpoint's, and the log must be consistent with every anchor.

use std::collections::HashSet;
use std::io::{BufRead as _, Write as _};
use std::path::Path;

use anyhow::{anyhow, bail, Context};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::client::Client;
use crate::entries::entries_verified;

pub const BACKUP_FORMAT: &str = "evidence-ledger-backup/v1";

#[derive(Serialize, Deserialize)]
struct Header {
    format: String,
    checkpoint: String,
    verifier_key: String,
}

#[derive(Serialize, Deserialize)]
struct Line {
    index: u64,
    leaf: String,
    /// The disclosures of the entry's committed values, when the backup was
    /// taken by a reader with a role (docs/PRIVACY.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    disclosures: Option<Vec<String>>,
    /// The committed fields whose disclosure was destroyed by a redaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    redacted: Option<Vec<String>>,
}

/// What a backup covered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackedUp {
    pub size: u64,
    /// Entries that commit to values whose disclosures the backup does not
    /// hold: it was taken without a reader token with a role.
    pub without_disclosures: u64,
}

/// Takes a backup of `client`'s server into `out`, every entry proven into
/// the server's checkpoint signed by `vkey`, with the disclosures of its
/// committed values (checked against the leaf) when `client` is a reader
/// with a role.
pub fn backup(
    client: &Client,
    vkey: &str,
    out: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> anyhow::Result<BackedUp> {
    let mut without_disclosures = 0;
    let vkey = vkey.to_owned();
    let note = client.get_text("/checkpoint")?;
    let cp = anchors::open_checkpoint(note.as_bytes(), &vkey).context("the server's checkpoint")?;
    let tmp = out.with_extension("partial");
    // A backup taken by a reader with a role holds every disclosure: it is
    // as secret as the data directory. A partial file left behind keeps its
    // mode when opened again, so it is set here, not only at creation.
    let file = {
        use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .with_context(|| format!("creating {}", tmp.display()))?;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("restricting {}", tmp.display()))?;
        f
    };
    let mut w = std::io::BufWriter::new(file);
    serde_json::to_writer(
        &mut w,
        &Header {
            format: BACKUP_FORMAT.into(),
            checkpoint: note,
            verifier_key: vkey,
        },
    )?;
    w.write_all(b"\n")?;
    entries_verified(
        client,
        cp.size,
        &cp.root,
        &mut |e, leaf| {
            let redacted = e.redacted.clone().filter(|r| !r.is_empty());
            let disclosures = e
                .disclosures
                .clone()
                .filter(|d| !d.is_empty() || redacted.is_some());
            if disclosures.is_none()
                && events::decode_logged_leaf(leaf).is_ok_and(|(d, _)| commits(&d.payload.event))
            {
                without_disclosures += 1;
            }
            serde_json::to_writer(
                &mut w,
                &Line {
                    index: e.index,
                    leaf: e.leaf.clone(),
                    disclosures,
                    redacted,
                },
            )?;
            w.write_all(b"\n")?;
            Ok(())
        },
        progress,
    )
    .inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
    .context("no backup written")?;
    let f = w.into_inner().map_err(|e| anyhow!("{e}"))?;
    f.sync_all()?;
    std::fs::rename(&tmp, out)?;
    Ok(BackedUp {
        size: cp.size,
        without_disclosures,
    })
}

/// An append by [`ledger::RawPrivate`], which refuses nothing.
fn settled(
    r: Result<ledger::Receipt<()>, ledger::AppendError<std::convert::Infallible>>,
) -> anyhow::Result<()> {
    match r {
        Ok(_) => Ok(()),
        Err(ledger::AppendError::Ledger(e)) => Err(e.into()),
        Err(ledger::AppendError::Rejected { reason, .. }) => match reason {},
    }
}

/// The (index, part) pairs a `field.redacted` leaf redacts, for the log
/// being rebuilt: its target is already in it. A redaction whose field the
/// target does not commit is left to the replay that follows, which refuses it.
fn redacted_by(
    r: &events::model::FieldRedacted,
    log: &ledger::Ledger<ledger::RawPrivate>,
) -> anyhow::Result<Vec<(u64, usize)>> {
    if r.entry >= log.head().size {
        return Ok(Vec::new());
    }
    let target = log.entry(r.entry)?;
    let part = events::decode_logged_leaf(&target.leaf)
        .ok()
        .and_then(|(t, _)| events::disclose::part_of(&t.payload.event, &r.field));
    Ok(part.map(|p| vec![(r.entry, p)]).unwrap_or_default())
}

/// The (entry, field) pairs the `field.redacted` entries of a backup name:
/// a first pass over the file, since a redaction comes after its target.
fn recorded_redactions(backup: &Path) -> anyhow::Result<HashSet<(u64, String)>> {
    let file =
        std::fs::File::open(backup).with_context(|| format!("reading {}", backup.display()))?;
    let mut recorded = HashSet::new();
    for line in std::io::BufReader::new(file).lines().skip(1) {
        let Ok(line) = serde_json::from_str::<Line>(&line?) else {
            // The rebuild refuses it, naming the entry.
            continue;
        };
        let Ok(leaf) = B64.decode(&line.leaf) else {
            continue;
        };
        if let Ok((d, _)) = events::decode_logged_leaf(&leaf) {
            if let events::Event::FieldRedacted(r) = &d.payload.event {
                recorded.insert((r.entry, r.field.clone()));
            }
        }
    }
    Ok(recorded)
}

/// Whether `event` holds a commitment.
fn commits(event: &events::Event) -> bool {
    events::disclose::fields(event)
        .iter()
        .any(|(_, _, s)| s.digest().is_some())
}

/// The private parts a restore keeps beside entry `index`: one per
/// committed field, in field order, each the disclosure that opens it
/// (checked), or `None` where the backup says it was redacted and holds the
/// `field.redacted` entry that did it (`recorded`). Empty when the backup
/// holds no disclosures for it, or says a field was redacted by an entry it
/// does not hold (a redaction after the backup's checkpoint, or an edited
/// backup): that entry's disclosures are then not kept, and `ledger verify`
/// says so, rather than a key destroyed with no redaction to show for it.
fn kept_parts(
    index: u64,
    event: Option<&events::Event>,
    line: &Line,
    recorded: &HashSet<(u64, String)>,
) -> anyhow::Result<Vec<Option<Vec<u8>>>> {
    let Some(disclosures) = &line.disclosures else {
        return Ok(Vec::new());
    };
    let redacted = line.redacted.clone().unwrap_or_default();
    if redacted
        .iter()
        .any(|path| !recorded.contains(&(index, path.clone())))
    {
        return Ok(Vec::new());
    }
    let event = event.ok_or_else(|| anyhow!("entry {index}: the leaf does not decode"))?;
    events::disclose::check_disclosed(event, disclosures)
        .map_err(|e| anyhow!("entry {index}: {e}"))?;
    let by_digest: std::collections::HashMap<String, &String> = disclosures
        .iter()
        .map(|d| (events::disclose::digest(d), d))
        .collect();
    events::disclose::fields(event)
        .into_iter()
        .filter_map(|(path, _, s)| s.digest().map(|g| (path, g.to_owned())))
        .map(|(path, digest)| match by_digest.get(&digest) {
            Some(d) => Ok(Some(d.as_bytes().to_vec())),
            None if redacted.iter().any(|r| r == path) => Ok(None),
            None => bail!("entry {index}: the backup holds no disclosure of `{path}`, and does not say it was redacted"),
        })
        .collect()
}

/// What a restore established.
#[derive(Debug, Clone)]
pub struct Restored {
    pub size: u64,
    pub anchors_checked: usize,
    /// Anchors the backup is behind: (anchor, entries missing).
    pub behind: Vec<(String, u64)>,
}

/// Rebuilds a data directory from a backup, then proves it: the root equals
/// the backup's signed checkpoint, the log is consistent with every anchor
/// it reaches, and every event replays under the rules. A backup behind an
/// anchor (older than a checkpoint already published) is refused unless
/// `allow_behind` is set; the gap is reported either way.
pub fn restore(
    backup: &Path,
    data_dir: &Path,
    key_file: &Path,
    anchors_dir: Option<&Path>,
    anchor_keys: &[String],
    allow_behind: bool,
    progress: &mut dyn FnMut(u64, u64),
) -> anyhow::Result<Restored> {
    for name in [
        ledger::store::DB_FILE,
        ledger::private::KEYS_FILE,
        ledger::store::SEGMENTS_DIR,
        ledger::store::DERIVED_FILE,
    ] {
        if data_dir.join(name).exists() {
            bail!(
                "{} already holds {name}; restore into an empty directory",
                data_dir.display()
            );
        }
    }
    let key = anchors::LogKey::from_private(
        &std::fs::read_to_string(key_file)
            .with_context(|| format!("reading {}", key_file.display()))?,
    )?;
    let mut trusted = vec![key.verifier_key().to_owned()];
    trusted.extend(anchor_keys.iter().cloned());
    let file =
        std::fs::File::open(backup).with_context(|| format!("reading {}", backup.display()))?;
    let mut lines = std::io::BufReader::new(file).lines();
    let header: Header =
        serde_json::from_str(&lines.next().ok_or_else(|| anyhow!("empty backup"))??)
            .context("backup header")?;
    if header.format != BACKUP_FORMAT {
        bail!("not an {BACKUP_FORMAT} file (format {})", header.format);
    }
    let (cp, _) = anchors::open_checkpoint_any(header.checkpoint.as_bytes(), &trusted)
        .map_err(|e| anyhow!("the backup's checkpoint is not signed by this log's key: {e}"))?;

    let anchor_list = match anchors_dir {
        Some(d) => anchors::anchor::read_dir(d)?,
        None => Vec::new(),
    };
    let mut behind = Vec::new();
    let mut reachable = Vec::new();
    for a in &anchor_list {
        let acp = anchors::open_anchor(a, &trusted, key.origin())?;
        if acp.size > cp.size {
            behind.push((a.name.clone(), acp.size - cp.size));
        } else {
            reachable.push(a.clone());
        }
    }
    if !behind.is_empty() && !allow_behind {
        let (name, gap) = &behind[behind.len() - 1];
        bail!(
            "the backup (size {}) is behind anchor {name}: {gap} acknowledged entries would be lost; \
             pass --allow-behind-anchor to restore anyway (the server will then report the truncation)",
            cp.size
        );
    }

    // Everything is rebuilt and proven in a scratch directory beside the
    // destination; only a log that passed every check is renamed into
    // place. A refused restore leaves no log behind.
    let made_dir = !data_dir.exists();
    std::fs::create_dir_all(data_dir)?;
    let proven = (|| -> anyhow::Result<()> {
        let scratch = tempfile::Builder::new()
            .prefix(".restoring-")
            .tempdir_in(data_dir)
            .with_context(|| format!("creating a scratch directory in {}", data_dir.display()))?;
        rebuild(
            scratch.path(),
            backup,
            &cp,
            &key,
            &reachable,
            &trusted,
            progress,
        )?;
        // The key first: a directory with the log must have its key.
        let dest = data_dir.join("log.key");
        match std::fs::read_to_string(&dest) {
            Ok(there) => {
                let same = anchors::LogKey::from_private(&there)
                    .is_ok_and(|k| k.verifier_key() == key.verifier_key());
                if !same {
                    bail!("{} holds another log key", dest.display());
                }
            }
            Err(_) => crate::keys::write_secret(&dest, key.private_key().as_str())?,
        }
        // The keys of the kept disclosures first: a directory with the log
        // must have them. A hard link never replaces a file: a log that
        // appeared in the destination meanwhile is kept, and the restore
        // is refused (and what it linked removed).
        let keys = ledger::private::KEYS_FILE;
        let linked_keys = scratch.path().join(keys).exists();
        if linked_keys {
            std::fs::hard_link(scratch.path().join(keys), data_dir.join(keys)).with_context(
                || {
                    format!(
                        "moving {keys} into {} (is one there now?)",
                        data_dir.display()
                    )
                },
            )?;
        }
        let db = ledger::store::DB_FILE;
        if let Err(e) = std::fs::hard_link(scratch.path().join(db), data_dir.join(db)) {
            if linked_keys {
                let _ = std::fs::remove_file(data_dir.join(keys));
            }
            return Err(e).with_context(|| {
                format!(
                    "moving the proven log into {} (is a log there now?)",
                    data_dir.display()
                )
            });
        }
        ledger::store::sync_dir(data_dir)
            .with_context(|| format!("syncing {}", data_dir.display()))?;
        Ok(())
    })();
    if let Err(e) = proven {
        if made_dir {
            // Only what this restore made, and only if nothing else is in it.
            let _ = std::fs::remove_dir(data_dir);
        }
        return Err(e);
    }
    Ok(Restored {
        size: cp.size,
        anchors_checked: reachable.len(),
        behind,
    })
}

/// Replays the backup's entries into a new log in `dir` and proves it: the
/// size and root equal the backup's signed checkpoint (a refusal names
/// which differs), the log is consistent with every anchor it reaches, and
/// every event replays under the rules.
fn rebuild(
    dir: &Path,
    backup: &Path,
    cp: &anchors::VerifiedCheckpoint,
    key: &anchors::LogKey,
    reachable: &[anchors::Anchor],
    trusted: &[String],
    progress: &mut dyn FnMut(u64, u64),
) -> anyhow::Result<()> {
    let recorded = &recorded_redactions(backup)?;
    let file =
        std::fs::File::open(backup).with_context(|| format!("reading {}", backup.display()))?;
    // The header was read by the caller.
    let lines = std::io::BufReader::new(file).lines().skip(1);
    {
        let log = ledger::Ledger::open_with(dir, restore_config(), |_, _| Ok(ledger::RawPrivate))?;
        let mut pending: Vec<ledger::PendingReceipt<ledger::RawPrivate>> = Vec::new();
        let mut expected = 0;
        // One past the last entry whose disclosures the backup lacks.
        let mut not_kept_below = 0;
        for line in lines {
            let line: Line = serde_json::from_str(&line?).context("backup entry")?;
            if line.index != expected {
                bail!("backup entry {} where {expected} was expected", line.index);
            }
            let leaf = B64.decode(&line.leaf)?;
            // Decoded once; a leaf that does not decode is appended as it
            // is, and refused by the replay that follows.
            let event = events::decode_logged_leaf(&leaf)
                .ok()
                .map(|(d, _)| d.payload.event);
            let parts = kept_parts(line.index, event.as_ref(), &line, recorded)?;
            if parts.is_empty() && event.as_ref().is_some_and(commits) {
                not_kept_below = line.index + 1;
            }
            let redacts = match &event {
                Some(events::Event::FieldRedacted(r)) => {
                    // Its target must be in the log to find the part it names.
                    for p in pending.drain(..) {
                        settled(p.wait())?;
                    }
                    redacted_by(r, &log)?
                }
                _ => Vec::new(),
            };
            pending.push(log.submit_input((leaf, parts, redacts))?);
            expected += 1;
            if pending.len() >= 1000 {
                for p in pending.drain(..) {
                    settled(p.wait())?;
                }
                progress(expected, cp.size);
            }
        }
        for p in pending {
            settled(p.wait())?;
        }
        let head = log.head();
        if head.size != cp.size {
            bail!(
                "the backup holds {} entries, but its signed checkpoint covers {}",
                head.size,
                cp.size
            );
        }
        if head.root != cp.root {
            bail!(
                "the backup's entries hash to root {} at size {}, but its signed checkpoint says {}: an entry was changed",
                ledger::hash::to_hex(&head.root),
                head.size,
                ledger::hash::to_hex(&cp.root)
            );
        }
        anchors::check_anchors(&log, reachable, trusted, key.origin())?;
        if not_kept_below > 0 {
            // `ledger verify` then tells disclosures a backup never held
            // from rows removed later.
            log.put_aux(ledger::private::NOT_KEPT_AUX, &not_kept_below.to_be_bytes())?;
        }
        progress(cp.size, cp.size);
    }
    // Every event must replay under the rules.
    events::EventLog::open(
        dir,
        restore_config(),
        key.event_signing_key(),
        std::sync::Arc::new(events::SystemClock),
    )
    .context("the restored events do not replay")?;
    Ok(())
}

/// A restore writes a redb data file and moves it into place, whatever
/// `LEDGER_STORAGE` says: a log kept in PostgreSQL is backed up and
/// restored with PostgreSQL's own tools (ops/postgres.md), and can be moved
/// there afterwards with `ledger migrate`. The restored log is one data
/// file, never sealed while it is rebuilt (only that file is moved into
/// place): the server that opens it seals it in place.
fn restore_config() -> ledger::Config {
    ledger::Config {
        backend: Some(ledger::store::BackendFactory::file()),
        segment_entries: 0,
        ..ledger::Config::default()
    }
}
