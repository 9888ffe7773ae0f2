//! `ledger verify`: a local data directory (every hash, the lookup tables,
//! optionally the anchors), or a remote server (its checkpoint, consistency
//! with a trusted one, and every entry re-hashed into the signed root).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use ledger::merkle::verify_consistency;
use ledger::Error;
use verifier::wire::ConsistencyProof;
use verifier::{parse_hash, parse_proof, Client};

use super::anchor_check::{AnchorSource, RekorCheck};
use super::{fail, progress_bar, Source};

#[derive(Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    source: Source,
    /// Local: verify incrementally from this trusted tree size (requires --trusted-root).
    #[arg(long, requires = "trusted_root")]
    trusted_size: Option<u64>,
    /// Local: the trusted RFC 6962 root at --trusted-size (64 hex digits).
    #[arg(long, requires = "trusted_size")]
    trusted_root: Option<String>,
    /// Remote: a file holding a trusted signed checkpoint; the server must be consistent with it.
    #[arg(long)]
    trusted: Option<PathBuf>,
    /// Local: the anchors to check the log against.
    #[command(flatten)]
    anchors: AnchorSource,
    /// Local, with --anchors: an anchor verifier key to trust (repeatable; default: the data
    /// directory's log key).
    #[arg(long = "anchor-key")]
    anchor_keys: Vec<String>,
    /// Local, with --anchors: the Rekor bundles kept beside the anchors.
    #[command(flatten)]
    rekor: RekorCheck,
    /// Remote: the log's note verifier key.
    #[arg(long)]
    key: Option<String>,
    /// Do not draw a progress bar.
    #[arg(long)]
    quiet: bool,
}

pub fn run(a: VerifyArgs) -> anyhow::Result<()> {
    if let Some(server) = &a.source.server {
        if a.anchors.given() || a.rekor.wanted() {
            anyhow::bail!(
                "--anchors and the Rekor checks read a local data directory; against a server run `ledger audit --server {server} --anchors DIR …`"
            );
        }
        let key = a
            .key
            .as_deref()
            .context("--key (the log's verifier key) is required with --server")?;
        return verify_remote(
            server,
            a.source.token.clone(),
            key,
            a.trusted.as_deref(),
            a.quiet,
        );
    }
    let dir = a
        .source
        .data_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("./ledger-data"));
    let pb = progress_bar(a.quiet, "verifying");
    let mut progress = |done: u64, total: u64| {
        pb.set_length(total);
        pb.set_position(done);
    };
    let started = Instant::now();
    let mut lookups = None;
    let result = match (a.trusted_size, &a.trusted_root) {
        (Some(size), Some(root)) => ledger::verify_dir_from(
            &dir,
            size,
            &parse_hash("--trusted-root", root.trim())?,
            &mut progress,
        ),
        _ => ledger::verify_dir(&dir, &mut progress).and_then(|v| {
            ledger::verify_dir_indexes::<events::EventSequencer>(&dir, &mut progress).map(|i| {
                lookups = Some(i);
                v
            })
        }),
    };
    pb.finish_and_clear();
    let kept = match &result {
        Ok(_) => Some(check_kept_disclosures(&dir).map_err(fail)?),
        Err(_) => None,
    };
    let scratch = tempfile::tempdir()?;
    a.rekor.refuse_unusable(&a.anchors)?;
    if let (Ok(_), Some(read)) = (&result, a.anchors.read(scratch.path())) {
        let key = verifier::keys::local_key(&dir)?;
        let mut keys = a.anchor_keys.clone();
        if keys.is_empty() {
            keys.push(key.verifier_key().to_owned());
        }
        let (label, anchors_path, list) = read.anchors()?;
        let log = ledger::Ledger::open(&dir, ledger::Config::default())?;
        let checked = anchors::check_anchors(&log, &list, &keys, key.origin())
            .map_err(|e| fail(e.to_string()))?;
        println!("consistent with {} anchors in {label}", checked.len());
        if a.rekor.wanted() {
            a.rekor.check(&anchors_path)?;
        }
    }
    match result {
        Ok(v) => {
            println!(
                "OK: {} entries verified ({} re-hashed) in {:.2?}\nsize  {}\nroot  {}\nchain {}",
                v.size,
                v.checked,
                started.elapsed(),
                v.size,
                ledger::hash::to_hex(&v.root),
                ledger::hash::to_hex(&v.chain)
            );
            if let Some((entries, open, redacted)) = kept {
                println!(
                    "disclosures: {open} kept beside {entries} entries, each opening its commitment; {redacted} redacted"
                );
            }
            if let Some(i) = lookups {
                println!(
                    "lookups: {} leaf-hash rows below {}, {} envelope-id rows below {}, checked{}",
                    i.leaf_rows,
                    i.covered,
                    i.key_rows,
                    i.keys_covered,
                    if i.covered.min(i.keys_covered) < v.size {
                        " (entries above are indexed when the server next opens the log)"
                    } else {
                        ""
                    }
                );
            }
            Ok(())
        }
        Err(Error::Corrupt(c)) => {
            let detail = if c.detail.is_empty() {
                String::new()
            } else {
                format!("\ndetail: {}", c.detail)
            };
            Err(fail(format!(
                "first bad index {}: {}{detail}",
                c.index, c.kind
            )))
        }
        Err(e) => Err(e).with_context(|| format!("verifying {}", dir.display())),
    }
}

/// Checks every disclosure kept beside the log (docs/PRIVACY.md) against
/// its entry's commitments: each entry that commits has one kept part per
/// committed field, and each part opens its field, or was destroyed by a
/// redaction that the log records (`field.redacted`): a key destroyed
/// without one is a failure; and no value named by a handle has two, nor a
/// handle two values. Returns (entries with commitments, parts
/// open, parts redacted).
fn check_kept_disclosures(dir: &Path) -> Result<(u64, u64, u64), String> {
    let log = ledger::Ledger::open(dir, ledger::Config::default()).map_err(|e| e.to_string())?;
    let size = log.head().size;
    // Below this size, a restore from a backup without disclosures may
    // have left entries without them; anywhere else a missing row is a loss.
    let not_kept_below = log
        .snapshot()
        .and_then(|s| s.aux(ledger::private::NOT_KEPT_AUX))
        .map_err(|e| e.to_string())?
        .and_then(|b| b.try_into().ok().map(u64::from_be_bytes))
        .unwrap_or(0);
    let (mut entries, mut open, mut redacted) = (0u64, 0u64, 0u64);
    let mut recorded = std::collections::BTreeSet::new();
    let mut not_kept = 0u64;
    let mut unkept = std::collections::BTreeSet::new();
    // Destroyed parts: (entry, field) → the part's position in the entry.
    let mut destroyed = std::collections::BTreeMap::new();
    // One value, one handle (docs/PRIVACY.md, "Handles"), from the kept
    // disclosures.
    let mut handles = events::handles::Audit::default();
    let mut start = 0;
    while start < size {
        let end = (start + 4096).min(size);
        for e in log.entries(start, end).map_err(|e| e.to_string())? {
            let (d, _) = events::decode_logged_leaf(&e.leaf)
                .map_err(|r| format!("entry {}: {r}", e.index))?;
            if let events::Event::FieldRedacted(r) = &d.payload.event {
                recorded.insert((r.entry, r.field.clone()));
            }
            // Values in clear, and redactions (which unbind what the entry
            // they name gave), whether or not this entry's own disclosures
            // are kept.
            if d.payload.schema < events::model::SCHEMA_HANDLES
                || matches!(d.payload.event, events::Event::FieldRedacted(_))
            {
                handles.see(e.index, &d.payload, None)?;
            }
            let paths: Vec<&'static str> = events::disclose::fields(&d.payload.event)
                .into_iter()
                .filter(|(_, _, s)| s.digest().is_some())
                .map(|(p, _, _)| p)
                .collect();
            let committed = paths.len();
            let parts = log.private_parts(e.index).map_err(|err| err.to_string())?;
            if committed > 0 && parts.is_empty() {
                if e.index >= not_kept_below {
                    return Err(format!(
                        "entry {}: commits to {committed} values, but no disclosure of them is kept (and this directory was not restored from a backup without them)",
                        e.index
                    ));
                }
                not_kept += 1;
                unkept.insert(e.index);
                continue;
            }
            if parts.len() != committed {
                return Err(format!(
                    "entry {}: {committed} committed fields, {} disclosures kept",
                    e.index,
                    parts.len()
                ));
            }
            if committed == 0 {
                continue;
            }
            entries += 1;
            let mut texts = Vec::new();
            for (i, (p, path)) in parts.into_iter().zip(&paths).enumerate() {
                match p {
                    ledger::private::Part::Open(b) => {
                        texts.push(String::from_utf8(b).map_err(|_| {
                            format!("entry {}: a kept disclosure is not UTF-8", e.index)
                        })?);
                        open += 1;
                    }
                    ledger::private::Part::Shredded => {
                        destroyed.insert((e.index, (*path).to_owned()), i);
                        redacted += 1;
                    }
                }
            }
            verifier::entries::check_disclosures(e.index, &e.leaf, &texts)
                .map_err(|err| err.to_string())?;
            if d.payload.schema >= events::model::SCHEMA_HANDLES {
                let opened = events::disclose::check_disclosed(&d.payload.event, &texts).ok();
                handles.see(e.index, &d.payload, opened.as_deref())?;
            }
        }
        start = end;
    }
    if let Some((entry, field)) = destroyed.keys().find(|d| !recorded.contains(*d)) {
        return Err(format!(
            "entry {entry}: the key of `{field}`'s disclosure is destroyed, but the log records no redaction of it"
        ));
    }
    // A recorded redaction whose disclosure still opens, or whose key is
    // still in the key file, was not carried out: the value it names can
    // still be recovered from this directory.
    for (entry, field) in recorded.iter().filter(|r| !unkept.contains(&r.0)) {
        let Some(&part) = destroyed.get(&(*entry, field.clone())) else {
            return Err(format!(
                "entry {entry}: the log records a redaction of `{field}`, but its disclosure can still be read from this directory"
            ));
        };
        if log
            .private_key_destroyed(*entry, part)
            .map_err(|e| e.to_string())?
            == Some(false)
        {
            return Err(format!(
                "entry {entry}: `{field}` reads as redacted, but its key is still in {}: the value can still be recovered from this directory",
                ledger::private::KEYS_FILE
            ));
        }
    }
    if not_kept > 0 {
        eprintln!(
            "note: {not_kept} entries commit to values whose disclosures this data directory does not keep (restored from a backup taken without a reader token)"
        );
    }
    Ok((entries, open, redacted))
}

/// Remote verify: the latest checkpoint is signed by the key; it is
/// consistent with the trusted checkpoint (if given); and every entry the
/// server returns re-hashes into exactly the checkpoint's root.
fn verify_remote(
    server: &str,
    token: Option<String>,
    key: &str,
    trusted: Option<&Path>,
    quiet: bool,
) -> anyhow::Result<()> {
    let client = Client::new(server, token);
    let note = client.get("/checkpoint")?;
    if note.status != 200 {
        bail!("GET /checkpoint: status {}", note.status);
    }
    let cp = anchors::open_checkpoint(note.text().as_bytes(), key)
        .map_err(|e| fail(format!("latest checkpoint: {e}")))?;
    if let Some(path) = trusted {
        let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let old = anchors::open_checkpoint(&text, key)
            .map_err(|e| fail(format!("trusted checkpoint: {e}")))?;
        if old.size > cp.size {
            return Err(fail(format!(
                "the server's checkpoint (size {}) is older than the trusted one (size {})",
                cp.size, old.size
            )));
        }
        let p: ConsistencyProof = client.get_json(&format!(
            "/v1/proofs/consistency?first={}&second={}",
            old.size, cp.size
        ))?;
        let proof = parse_proof("proof", &p.proof)?;
        verify_consistency(old.size, &old.root, cp.size, &cp.root, &proof).map_err(|e| {
            fail(format!(
                "the server's log is not consistent with the trusted checkpoint (size {}): {e}",
                old.size
            ))
        })?;
        println!(
            "consistent with the trusted checkpoint at size {}",
            old.size
        );
    }
    let pb = progress_bar(quiet, "downloading and re-hashing");
    pb.set_length(cp.size);
    let result = verifier::entries_verified(
        &client,
        cp.size,
        &cp.root,
        &mut |_, _| Ok(()),
        &mut |done, _| pb.set_position(done),
    );
    pb.finish_and_clear();
    let walked = result.map_err(super::checked)?;
    println!(
        "OK: {} entries re-hashed into the signed root {}",
        cp.size,
        ledger::hash::to_hex(&cp.root)
    );
    if walked != verifier::entries::Walked::default() {
        println!(
            "disclosures: {} opened their commitments; {} redacted, each recorded by a field.redacted entry",
            walked.disclosed, walked.redacted
        );
    }
    Ok(())
}
