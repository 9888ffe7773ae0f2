//! Client-side checks: what the promotion gate or an auditor does with a
//! response, trusting nothing but the log's verifier key.

use anyhow::{anyhow, bail, Context};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ledger::merkle::verify_inclusion;
use ledger::Hash;

use crate::wire::{ProjectionResponse, WriteReceipt};

/// A hash in a JSON answer or an argument: exactly 64 hex digits (either
/// case). The error names `field`.
pub fn parse_hash(field: &str, s: &str) -> anyhow::Result<Hash> {
    ledger::hash::from_hex(s).ok_or_else(|| anyhow!("{field} must be hex: 32 bytes, 64 hex digits"))
}

/// A proof in a JSON answer: a list of hashes. The error names `field`.
pub fn parse_proof(field: &str, p: &[String]) -> anyhow::Result<Vec<Hash>> {
    p.iter().map(|h| parse_hash(field, h)).collect()
}

/// Checks a write receipt: the checkpoint is signed by `vkey`, covers the
/// entry, and the inclusion proof leads to its root.
pub fn check_receipt(r: &WriteReceipt, vkey: &str) -> anyhow::Result<()> {
    ReceiptChecker::new(vkey).check(r, None)
}

/// Checks write receipts against one verifier key, remembering the signed
/// checkpoints it has already verified (a group commit hands the same
/// checkpoint to every write of the batch). Every receipt's inclusion proof is
/// still checked; only a byte-identical checkpoint note skips its signature
/// check. Clones share the memory of verified notes, so many client threads
/// verify each note once between them.
#[derive(Clone)]
pub struct ReceiptChecker {
    vkey: String,
    verified: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, (u64, Hash)>>>,
}

impl ReceiptChecker {
    /// A checker trusting `vkey` (a note verifier key).
    pub fn new(vkey: &str) -> Self {
        ReceiptChecker {
            vkey: vkey.to_owned(),
            verified: Default::default(),
        }
    }

    /// Checks `r`. With `envelope` (the bytes that were posted: an envelope,
    /// or one with its disclosures), also checks that the included leaf is
    /// that envelope, sequenced at the receipt's `sequenced_at`: the proof
    /// is for this event, not some other entry.
    pub fn check(&mut self, r: &WriteReceipt, envelope: Option<&[u8]>) -> anyhow::Result<()> {
        let decoded = envelope
            .map(|body| {
                events::envelope::split_write(body)
                    .and_then(|w| events::decode_envelope(w.envelope))
                    .map_err(|e| anyhow!("the posted envelope does not decode: {e}"))
            })
            .transpose()?;
        self.check_decoded(r, decoded.as_ref())
    }

    /// [`ReceiptChecker::check`] with the posted envelope already decoded
    /// (a client that decoded what it signed before sending it).
    pub fn check_decoded(
        &self,
        r: &WriteReceipt,
        posted: Option<&events::envelope::Decoded>,
    ) -> anyhow::Result<()> {
        let known = self
            .verified
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&r.checkpoint)
            .copied();
        let (size, root) = match known {
            Some(v) => v,
            None => {
                let cp = anchors::open_checkpoint(r.checkpoint.as_bytes(), &self.vkey)
                    .context("checkpoint signature")?;
                let mut verified = self.verified.lock().unwrap_or_else(|p| p.into_inner());
                if verified.len() >= 4096 {
                    verified.clear();
                }
                verified.insert(r.checkpoint.clone(), (cp.size, cp.root));
                (cp.size, cp.root)
            }
        };
        if size != r.tree_size || ledger::hash::to_hex(&root) != r.root {
            bail!("the receipt's tree size or root differs from its signed checkpoint");
        }
        let leaf_hash = parse_hash("leaf_hash", &r.leaf_hash)?;
        if let Some(decoded) = posted {
            let at = events::envelope::parse_utc_micros(&r.sequenced_at)
                .ok_or_else(|| anyhow!("the receipt's sequenced_at is not a timestamp"))?;
            if ledger::leaf_hash(&decoded.leaf_bytes(at)) != leaf_hash {
                bail!(
                    "entry {} is not the posted envelope sequenced at {}",
                    r.index,
                    r.sequenced_at
                );
            }
        }
        verify_inclusion(
            &leaf_hash,
            r.index,
            size,
            &parse_proof("inclusion_proof", &r.inclusion_proof)?,
            &root,
        )
        .map_err(|e| anyhow!("inclusion proof of entry {}: {e}", r.index))
    }
}

/// Checks a projection's proof bundle: the checkpoint is signed by `vkey`;
/// every evidence leaf re-hashes to its leaf hash and is included at its
/// index under the checkpoint's root; the evidence is exactly the set the
/// projection says it used; and the held-out statistics, recomputed from
/// the evidence leaves alone with the stated settings and seed
/// ([`projections::evidence`]), equal the ones stated. Returns the number
/// of evidence entries checked.
pub fn check_projection(p: &ProjectionResponse, vkey: &str) -> anyhow::Result<usize> {
    let cp =
        anchors::open_checkpoint(p.checkpoint.as_bytes(), vkey).context("checkpoint signature")?;
    if cp.size != p.tree_size || ledger::hash::to_hex(&cp.root) != p.root {
        bail!("the projection's tree size or root differs from its signed checkpoint");
    }
    if p.view.tree_size != cp.size || p.view.root != p.root {
        bail!("the projection was computed at another tree size or root");
    }
    let claimed: Vec<(u64, &str)> = p
        .view
        .evidence
        .iter()
        .map(|e| (e.index, e.leaf_hash.as_str()))
        .collect();
    let given: Vec<(u64, &str)> = p
        .evidence
        .iter()
        .map(|e| (e.index, e.leaf_hash.as_str()))
        .collect();
    if claimed != given {
        bail!("the evidence bundle does not match the evidence the projection used");
    }
    let mut leaves = Vec::with_capacity(p.evidence.len());
    for e in &p.evidence {
        let leaf = B64.decode(&e.leaf).context("evidence leaf is not base64")?;
        let lh = ledger::leaf_hash(&leaf);
        if ledger::hash::to_hex(&lh) != e.leaf_hash {
            bail!(
                "evidence {}: the leaf does not hash to its leaf hash",
                e.index
            );
        }
        verify_inclusion(
            &lh,
            e.index,
            cp.size,
            &parse_proof("proof", &e.proof)?,
            &cp.root,
        )
        .map_err(|err| anyhow!("evidence {}: {err}", e.index))?;
        leaves.push((lh, leaf));
    }
    // Recompute what the evidence implies: the same check the server runs
    // before it serves or signs a view.
    let leaves: Vec<(ledger::Hash, &[u8])> =
        leaves.iter().map(|(h, l)| (*h, l.as_slice())).collect();
    projections::evidence::check_view(&p.view, &leaves)
        .context("the stated held-out statistics do not follow from the evidence")?;
    Ok(p.evidence.len())
}

/// The first line of a bundle attestation note.
pub const BUNDLE_STATEMENT: &str = "evidence-ledger/v1 projection-bundle";

/// Builds an offline proof bundle: the canonical JSON of
/// `{"attestation": <signed note>, "body": <projection response>}`. The
/// attestation is a signed note, by the log key, whose text is the statement,
/// the origin and the SHA-256 of the body's canonical JSON.
pub fn make_bundle(key: &anchors::LogKey, p: &ProjectionResponse) -> anyhow::Result<Vec<u8>> {
    use events::canonical;
    let body = canonical::from_json(&serde_json::to_value(p)?)
        .ok_or_else(|| anyhow!("projection has no canonical form"))?;
    let body_bytes = canonical::encode(&body);
    let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&body_bytes));
    let note =
        key.sign_text(format!("{BUNDLE_STATEMENT}\n{}\n{digest}\n", key.origin()).as_bytes())?;
    let mut m = std::collections::BTreeMap::new();
    m.insert("attestation".to_owned(), canonical::Value::Str(note));
    m.insert("body".to_owned(), body);
    Ok(canonical::encode(&canonical::Value::Object(m)))
}

/// What a verified bundle establishes.
#[derive(Debug, Clone)]
pub struct BundleSummary {
    pub task_class: String,
    pub tree_size: u64,
    pub evidence: usize,
    pub recommended_tier: String,
    /// With a `witnessed` part: the size of the witnessed tree the body's
    /// tree is proven a prefix of, and the key names of the witnesses whose
    /// cosignatures counted (none without a policy).
    pub witnessed: Option<(u64, Vec<String>)>,
}

/// Verifies an offline proof bundle with no server; see
/// [`verify_bundle_with`] (no witness policy).
pub fn verify_bundle(bytes: &[u8], keys: &[String]) -> anyhow::Result<BundleSummary> {
    verify_bundle_with(bytes, keys, None)
}

/// Verifies an offline proof bundle with no server:
/// 1. the file is exactly canonical JSON (so no byte can change unnoticed);
/// 2. the attestation is signed by a trusted key and names the body's hash;
/// 3. the checkpoint is signed, every evidence leaf re-hashes and is
///    included under its root, and the held-out statistics recomputed from
///    the evidence leaves equal the ones stated ([`check_projection`]);
/// 4. a `witnessed` part, when there is one (`ledger bundle --policy`): a
///    checkpoint signed by the same log key, and a consistency proof from
///    the body's tree to it. With `policy`, that part is required and its
///    checkpoint must carry the policy's quorum of cosignatures.
pub fn verify_bundle_with(
    bytes: &[u8],
    keys: &[String],
    policy: Option<&anchors::Policy>,
) -> anyhow::Result<BundleSummary> {
    use events::canonical;
    let value = canonical::parse_strict(bytes).map_err(|e| anyhow!("not strict JSON: {e:?}"))?;
    if canonical::encode(&value) != bytes {
        bail!("the bundle is not in canonical form (it was edited)");
    }
    let canonical::Value::Object(top) = &value else {
        bail!("not a bundle object")
    };
    let witnessed_part = top.get("witnessed");
    if top.len() != 2 + usize::from(witnessed_part.is_some()) {
        bail!("a bundle has exactly `attestation`, `body` and, when witnessed, `witnessed`");
    }
    let (Some(canonical::Value::Str(note)), Some(body)) = (top.get("attestation"), top.get("body"))
    else {
        bail!("a bundle has a string `attestation` and an object `body`");
    };
    let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(canonical::encode(
        body,
    )));
    let (text, key) = anchors::open_note_any(note.as_bytes(), keys)
        .map_err(|e| anyhow!("the attestation is not signed by a trusted key: {e}"))?;
    let text = String::from_utf8_lossy(&text);
    let origin = key.split('+').next().unwrap_or_default();
    if text != format!("{BUNDLE_STATEMENT}\n{origin}\n{digest}\n") {
        bail!("the attestation does not cover this body");
    }
    let p: ProjectionResponse = serde_json::from_value(canonical::to_json(body))
        .context("the body is not a projection response")?;
    let n = check_projection(&p, key)?;
    let witnessed = match (witnessed_part, policy) {
        (None, None) => None,
        (None, Some(_)) => bail!("the policy needs a witnessed checkpoint and the bundle has none (make it with `ledger bundle --policy`)"),
        (Some(w), policy) => {
            let w: Witnessed = serde_json::from_value(canonical::to_json(w))
                .context("the `witnessed` part")?;
            Some(check_witnessed(&p, &w, key, policy)?)
        }
    };
    Ok(BundleSummary {
        task_class: p.view.task_class,
        tree_size: p.tree_size,
        evidence: n,
        recommended_tier: p.view.recommendation.recommended_tier.as_str().to_owned(),
        witnessed,
    })
}

/// A bundle's `witnessed` part: a checkpoint a witness quorum cosigned, and
/// the RFC 6962 consistency proof from the body's tree to it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Witnessed {
    pub checkpoint: String,
    pub consistency: Vec<String>,
}

/// Checks a `witnessed` part against the body `p` (signed with `key`).
fn check_witnessed(
    p: &ProjectionResponse,
    w: &Witnessed,
    key: &str,
    policy: Option<&anchors::Policy>,
) -> anyhow::Result<(u64, Vec<String>)> {
    let body =
        anchors::open_checkpoint(p.checkpoint.as_bytes(), key).context("the body's checkpoint")?;
    let (cp, by) = match policy {
        Some(pol) => {
            let wc = pol
                .open_checkpoint(w.checkpoint.as_bytes(), key)
                .map_err(|e| anyhow!("the witnessed checkpoint: {e}"))?;
            let by = wc.cosigned.into_iter().map(|c| c.witness).collect();
            (wc.checkpoint, by)
        }
        None => (
            anchors::open_checkpoint(w.checkpoint.as_bytes(), key)
                .context("the witnessed checkpoint")?,
            Vec::new(),
        ),
    };
    let proof = parse_proof("witnessed.consistency", &w.consistency)?;
    ledger::merkle::verify_consistency(body.size, &body.root, cp.size, &cp.root, &proof).map_err(
        |e| {
            anyhow!(
                "the body's tree of size {} is not proven a prefix of the witnessed tree of size {}: {e}",
                body.size,
                cp.size
            )
        },
    )?;
    Ok((cp.size, by))
}

/// Adds a `witnessed` part to `bundle`: waits (up to `wait`) until the
/// server's `/checkpoint` meets `policy` and covers the bundle's tree,
/// fetches the consistency proof from the bundle's tree to it, and checks
/// the result as [`verify_bundle_with`] will. Returns the new bundle bytes.
pub fn witness_bundle(
    client: &crate::Client,
    bundle: &[u8],
    keys: &[String],
    policy: &anchors::Policy,
    wait: std::time::Duration,
) -> anyhow::Result<Vec<u8>> {
    use events::canonical;
    let first = verify_bundle_with(bundle, keys, None)?;
    let deadline = std::time::Instant::now() + wait;
    let (note, size) = loop {
        let note = client.get_text("/checkpoint")?;
        let open = keys
            .iter()
            .find_map(|k| policy.open_checkpoint(note.as_bytes(), k).ok());
        match open {
            Some(w) if w.checkpoint.size >= first.tree_size => break (note, w.checkpoint.size),
            _ if std::time::Instant::now() >= deadline => bail!(
                "no checkpoint meeting the policy covers the bundle's tree of size {} within {} s",
                first.tree_size,
                wait.as_secs()
            ),
            _ => std::thread::sleep(std::time::Duration::from_millis(500)),
        }
    };
    let proof = if size == first.tree_size {
        Vec::new()
    } else {
        let c: crate::wire::ConsistencyProof = client.get_json(&format!(
            "/v1/proofs/consistency?first={}&second={size}",
            first.tree_size
        ))?;
        c.proof
    };
    let mut value =
        canonical::parse_strict(bundle).map_err(|e| anyhow!("not strict JSON: {e:?}"))?;
    let canonical::Value::Object(top) = &mut value else {
        bail!("not a bundle object")
    };
    let w = serde_json::to_value(Witnessed {
        checkpoint: note,
        consistency: proof,
    })?;
    top.insert(
        "witnessed".to_owned(),
        canonical::from_json(&w)
            .ok_or_else(|| anyhow!("the witnessed part is not canonical JSON"))?,
    );
    let out = canonical::encode(&value);
    verify_bundle_with(&out, keys, Some(policy))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_is_64_hex_digits_and_an_error_names_its_field() {
        let h = "ab".repeat(32);
        assert_eq!(
            parse_hash("root", &h.to_uppercase()).expect("hash").0,
            [0xab; 32]
        );
        for bad in [
            &format!(" {h}"),
            "",
            "ab",
            &"ab".repeat(33),
            &format!("0x{}", "ab".repeat(31)),
            &"zz".repeat(32),
        ] {
            let e = parse_hash("first_root", bad).expect_err("not a hash");
            assert!(e.to_string().starts_with("first_root must be hex"), "{e}");
        }
        let e = parse_proof("proof", &[h.clone(), "nope".into()]).expect_err("bad proof");
        assert!(e.to_string().starts_with("proof must be hex"), "{e}");
        assert_eq!(
            parse_proof("proof", &[h.clone(), h]).expect("proof").len(),
            2
        );
    }
}
