//! Client-side checks: what the promotion gate or an auditor does with a
//! response, trusting nothing but the log's verifier key.

use anyhow::{anyhow, bail, Context};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ledger::merkle::verify_inclusion;
use ledger::Hash;

use crate::server::{ProjectionResponse, WriteReceipt};

fn hash(s: &str) -> anyhow::Result<Hash> {
    let v = hex::decode(s).context("hash is not hex")?;
    Ok(Hash(
        v.try_into().map_err(|_| anyhow!("hash is not 32 bytes"))?,
    ))
}

fn proof(p: &[String]) -> anyhow::Result<Vec<Hash>> {
    p.iter().map(|h| hash(h)).collect()
}

/// Checks a write receipt: the checkpoint is signed by `vkey`, covers the
/// entry, and the inclusion proof leads to its root.
pub fn check_receipt(r: &WriteReceipt, vkey: &str) -> anyhow::Result<()> {
    let cp =
        anchors::open_checkpoint(r.checkpoint.as_bytes(), vkey).context("checkpoint signature")?;
    if cp.size != r.tree_size || hex::encode(cp.root.0) != r.root {
        bail!("the receipt's tree size or root differs from its signed checkpoint");
    }
    verify_inclusion(
        &hash(&r.leaf_hash)?,
        r.index,
        cp.size,
        &proof(&r.inclusion_proof)?,
        &cp.root,
    )
    .map_err(|e| anyhow!("inclusion proof of entry {}: {e}", r.index))
}

/// Checks a projection's proof bundle: the checkpoint is signed by `vkey`;
/// every evidence leaf re-hashes to its leaf hash and is included at its
/// index under the checkpoint's root; and the evidence is exactly the set the
/// projection says it used. Returns the number of evidence entries checked.
pub fn check_projection(p: &ProjectionResponse, vkey: &str) -> anyhow::Result<usize> {
    let cp =
        anchors::open_checkpoint(p.checkpoint.as_bytes(), vkey).context("checkpoint signature")?;
    if cp.size != p.tree_size || hex::encode(cp.root.0) != p.root {
        bail!("the projection's tree size or root differs from its signed checkpoint");
    }
    if p.view.get("tree_size").and_then(|v| v.as_u64()) != Some(cp.size) {
        bail!("the projection was computed at another tree size");
    }
    let claimed: Vec<(u64, String)> = p
        .view
        .get("evidence")
        .and_then(|e| e.as_array())
        .ok_or_else(|| anyhow!("the projection lists no evidence"))?
        .iter()
        .map(|e| {
            (
                e["index"].as_u64().unwrap_or(u64::MAX),
                e["leaf_hash"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let given: Vec<(u64, String)> = p
        .evidence
        .iter()
        .map(|e| (e.index, e.leaf_hash.clone()))
        .collect();
    if claimed != given {
        bail!("the evidence bundle does not match the evidence the projection used");
    }
    for e in &p.evidence {
        let leaf = B64.decode(&e.leaf).context("evidence leaf is not base64")?;
        let lh = ledger::leaf_hash(&leaf);
        if hex::encode(lh.0) != e.leaf_hash {
            bail!(
                "evidence {}: the leaf does not hash to its leaf hash",
                e.index
            );
        }
        verify_inclusion(&lh, e.index, cp.size, &proof(&e.proof)?, &cp.root)
            .map_err(|err| anyhow!("evidence {}: {err}", e.index))?;
    }
    Ok(p.evidence.len())
}
