//! `ledger proof` and `ledger checkpoint`: fetch a proof or the latest
//! checkpoint and check it against the log's verifier key.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use ledger::merkle::{verify_consistency, verify_inclusion};
use verifier::wire::{ConsistencyProof, InclusionProof};
use verifier::{parse_hash, parse_proof, Client};

use super::{fail, Source};

#[derive(Args)]
pub struct ProofArgs {
    /// The server's base URL.
    #[arg(long, env = "LEDGER_SERVER")]
    server: String,
    /// The log's note verifier key (checks the proof's checkpoint).
    #[arg(long)]
    key: String,
    /// Prove inclusion of this index.
    #[arg(long, conflicts_with_all = ["leaf_hash", "first"])]
    index: Option<u64>,
    /// Prove inclusion of the entry with this leaf hash.
    #[arg(long, conflicts_with = "first")]
    leaf_hash: Option<String>,
    /// Prove consistency from this tree size to the current one.
    #[arg(long)]
    first: Option<u64>,
    /// A C2SP tlog-policy file: prove the entry into the server's witnessed
    /// checkpoint (`GET /checkpoint`), which must carry a quorum of its
    /// witnesses' cosignatures, instead of the log's own checkpoint.
    #[arg(long, value_name = "FILE", conflicts_with = "first")]
    policy: Option<PathBuf>,
    #[arg(long, env = "LEDGER_READ_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

#[derive(Args)]
pub struct CheckpointArgs {
    #[command(flatten)]
    source: Source,
    /// Verifier key to check a remote checkpoint with.
    #[arg(long)]
    key: Option<String>,
    /// With --key: a C2SP tlog-policy file the checkpoint must meet.
    #[arg(long, value_name = "FILE", requires = "key")]
    policy: Option<PathBuf>,
}

pub fn run(a: ProofArgs) -> anyhow::Result<()> {
    let client = Client::new(&a.server, a.token.clone());
    if let Some(first) = a.first {
        let p: ConsistencyProof =
            client.get_json(&format!("/v1/proofs/consistency?first={first}"))?;
        let cp = anchors::open_checkpoint(p.checkpoint.as_bytes(), &a.key)
            .map_err(|e| fail(format!("checkpoint: {e}")))?;
        if p.first != first || p.second != cp.size {
            return Err(fail(format!(
                "asked for a proof from size {first}; the answer is from {} to {} under a checkpoint of size {}",
                p.first, p.second, cp.size
            )));
        }
        let proof = parse_proof("proof", &p.proof)?;
        verify_consistency(
            p.first,
            &parse_hash("first_root", &p.first_root)?,
            cp.size,
            &cp.root,
            &proof,
        )
        .map_err(|e| fail(format!("consistency proof: {e}")))?;
        println!("{}", serde_json::to_string_pretty(&p)?);
        println!(
            "OK: the server's root at size {} ({}) is a prefix of the signed tree of size {}; compare that root with one you trust",
            p.first, p.first_root, p.second
        );
        return Ok(());
    }
    let q = match (a.index, &a.leaf_hash) {
        (Some(i), None) => format!("index={i}"),
        (None, Some(h)) => format!("leaf_hash={h}"),
        _ => bail!("give one of --index, --leaf-hash or --first"),
    };
    let (p, cp, witnessed_by) = match &a.policy {
        None => {
            let p: InclusionProof = client.get_json(&format!("/v1/proofs/inclusion?{q}"))?;
            let cp = anchors::open_checkpoint(p.checkpoint.as_bytes(), &a.key)
                .map_err(|e| fail(format!("checkpoint: {e}")))?;
            (p, cp, None)
        }
        Some(file) => {
            // The tree to prove into is the witnessed one, not the one the
            // proof's answer names.
            let policy = super::audit::read_policy(file)?;
            let note = client.get_text("/checkpoint")?;
            let w = policy
                .open_checkpoint(note.as_bytes(), &a.key)
                .map_err(|e| fail(format!("the witnessed checkpoint: {e}")))?;
            let size = w.checkpoint.size;
            let r = client.get(&format!("/v1/proofs/inclusion?{q}&tree_size={size}"))?;
            if r.status == 400 || r.status == 404 {
                bail!(
                    "the entry is not in the witnessed tree of size {size} yet ({}); try again after the next witnessing",
                    r.text().trim()
                );
            }
            let p: InclusionProof = r.json()?;
            if p.tree_size != size {
                return Err(fail(format!(
                    "asked for a proof in the witnessed tree of size {size}, got one of size {}",
                    p.tree_size
                )));
            }
            let by: Vec<String> = w.cosigned.into_iter().map(|c| c.witness).collect();
            (p, w.checkpoint, Some(by))
        }
    };
    let asked = match (a.index, &a.leaf_hash) {
        (Some(i), _) => p.index == i,
        (_, Some(h)) => p.leaf_hash.eq_ignore_ascii_case(h),
        _ => false,
    };
    if !asked {
        return Err(fail(format!(
            "the proof is of entry {} (leaf hash {}), not of the one asked for",
            p.index, p.leaf_hash
        )));
    }
    let proof = parse_proof("proof", &p.proof)?;
    verify_inclusion(
        &parse_hash("leaf_hash", &p.leaf_hash)?,
        p.index,
        cp.size,
        &proof,
        &cp.root,
    )
    .map_err(|e| fail(format!("inclusion proof: {e}")))?;
    println!("{}", serde_json::to_string_pretty(&p)?);
    match witnessed_by {
        None => println!(
            "OK: entry {} is included in the signed tree of size {}",
            p.index, cp.size
        ),
        Some(by) => println!(
            "OK: entry {} is included in the tree of size {} signed by the log and cosigned by {}",
            p.index,
            cp.size,
            by.join(", ")
        ),
    }
    Ok(())
}

pub fn checkpoint(a: CheckpointArgs) -> anyhow::Result<()> {
    let CheckpointArgs {
        source,
        key,
        policy,
    } = a;
    let key = key.as_deref();
    if let Some(server) = &source.server {
        let client = Client::new(server, source.token.clone());
        let note = client.get_text("/checkpoint")?;
        if let (Some(k), Some(file)) = (key, &policy) {
            let p = super::audit::read_policy(file)?;
            let w = p
                .open_checkpoint(note.as_bytes(), k)
                .map_err(|e| fail(format!("checkpoint: {e}")))?;
            let by: Vec<String> = w
                .cosigned
                .into_iter()
                .map(|c| format!("{} at {}", c.witness, c.timestamp))
                .collect();
            eprintln!(
                "signature OK, cosigned by {} (POSIX seconds); size {} root {}",
                by.join(", "),
                w.checkpoint.size,
                ledger::hash::to_hex(&w.checkpoint.root)
            );
        } else if let Some(k) = key {
            let cp = anchors::open_checkpoint(note.as_bytes(), k)
                .map_err(|e| fail(format!("checkpoint: {e}")))?;
            eprintln!(
                "signature OK; size {} root {}",
                cp.size,
                ledger::hash::to_hex(&cp.root)
            );
        }
        print!("{note}");
        return Ok(());
    }
    let dir = source
        .data_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("./ledger-data"));
    let key = verifier::keys::local_key(&dir)?;
    let log = ledger::Ledger::open(&dir, ledger::Config::default())?;
    let head = log.head();
    print!("{}", key.sign_checkpoint(head.size, &head.root)?);
    Ok(())
}
