//! Witnessing: the server submits its head to the witnesses its policy
//! names (C2SP tlog-witness `add-checkpoint`, with a consistency proof from
//! the size each witness last cosigned), keeps the cosignatures that verify,
//! and, once they meet the quorum, serves that cosigned checkpoint at
//! `/checkpoint` (and in the tiles directory).
//!
//! A witness that refuses, is down or answers with a cosignature that does
//! not verify is counted (`ledger_witness_failures_total`) and passed over;
//! the checkpoint served stays the last one with a quorum.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anchors::cosign::{cosignatures, Witness};
use anyhow::{anyhow, bail, Context};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ledger::Head;

use crate::server::state::{AppState, VERIFY_OK};

/// The name the newest witnessed checkpoint is saved under among the
/// derived records (checked against the witness policy when read, not
/// sealed).
pub const WITNESSED: &str = "witnessed_checkpoint";

/// The witnessed checkpoint saved by an earlier run, if it still passes
/// `policy` and names a root this log has: what `/checkpoint` serves until
/// the witnesses cosign a newer one.
pub fn load_witnessed(
    log: &ledger::Ledger<events::EventSequencer>,
    policy: &anchors::Policy,
    vkey: &str,
) -> Option<(u64, String)> {
    let bytes = log.get_aux(WITNESSED).ok().flatten()?;
    let note = String::from_utf8(bytes).ok()?;
    let w = match policy.open_checkpoint(note.as_bytes(), vkey) {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!(error = %e, "the saved witnessed checkpoint does not pass the policy; waiting for a new quorum");
            return None;
        }
    };
    let size = w.checkpoint.size;
    let ours = size <= log.head().size && log.root_at(size).ok() == Some(w.checkpoint.root);
    if !ours {
        tracing::error!(
            size,
            "the saved witnessed checkpoint names a root this log does not have"
        );
        return None;
    }
    Some((size, note))
}

/// Submits the head to every witness when it has grown since the last
/// quorum; the size newly witnessed, if any.
pub fn witness_tick(st: &AppState) -> anyhow::Result<Option<u64>> {
    let Some(policy) = &st.policy else {
        return Ok(None);
    };
    if st.verify_status.load(Ordering::SeqCst) != VERIFY_OK {
        return Ok(None);
    }
    let head = st.events.ledger().head();
    let done = st
        .witnessed
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .is_some_and(|(size, _)| *size == head.size);
    if done || head.size == 0 {
        return Ok(None);
    }
    let note = st
        .checkpoint(head.size, &head.root)
        .map_err(|e| anyhow!("signing the checkpoint: {e:?}"))?;
    let mut cosigned = note.clone();
    let mut names = BTreeSet::new();
    // All witnesses at once: a slow one delays the quorum by its own time
    // only, not by the sum of every witness's.
    let answers: Vec<(&Witness, anyhow::Result<String>)> = std::thread::scope(|scope| {
        let asks: Vec<_> = policy
            .witnesses()
            .iter()
            .map(|w| (w, scope.spawn(|| submit(st, w, head, &note))))
            .collect();
        asks.into_iter()
            .map(|(w, h)| {
                let r = h
                    .join()
                    .unwrap_or_else(|_| Err(anyhow!("the submission to `{}` panicked", w.name)));
                (w, r)
            })
            .collect()
    });
    for (w, answer) in answers {
        match answer {
            Ok(line) => {
                cosigned.push_str(&line);
                names.insert(w.name.clone());
            }
            Err(e) => {
                st.metrics.count_witness_failure();
                tracing::warn!(witness = %w.name, error = format!("{e:#}"), "a witness did not cosign");
            }
        }
    }
    if !policy.satisfied_by(&names) {
        bail!(
            "no witness quorum for size {}: cosigned by {names:?}",
            head.size
        );
    }
    // The note as it will be served must pass the same check a client runs.
    policy
        .open_checkpoint(cosigned.as_bytes(), st.log_key.verifier_key())
        .context("the cosigned checkpoint does not pass the policy")?;
    // Kept with the derived state too, so that a restart serves it at
    // once instead of waiting for a new quorum.
    if let Err(e) = st.events.ledger().put_aux(WITNESSED, cosigned.as_bytes()) {
        tracing::warn!(error = %e, "could not save the witnessed checkpoint");
    }
    *st.witnessed.lock().unwrap_or_else(|p| p.into_inner()) = Some((head.size, cosigned));
    st.metrics
        .witnessed_size
        .set(i64::try_from(head.size).unwrap_or(i64::MAX));
    Ok(Some(head.size))
}

/// One witness's cosignature line for `note` (the head), or why not. A 409
/// tells the size the witness holds; the request is made again from there.
fn submit(st: &AppState, w: &Witness, head: Head, note: &str) -> anyhow::Result<String> {
    let url = w
        .url
        .as_deref()
        .ok_or_else(|| anyhow!("no URL for witness `{}`", w.name))?;
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(10)))
        .http_status_as_error(false)
        .build()
        .into();
    let mut old = st
        .witness_sizes
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&w.name)
        .copied()
        .unwrap_or(0);
    for _ in 0..2 {
        if old > head.size {
            bail!(
                "the witness holds size {old}, more than this log's {}: it has seen a longer log of this origin",
                head.size
            );
        }
        let proof = if old == 0 || old == head.size {
            Vec::new()
        } else {
            st.events.ledger().consistency_proof(old, head.size)?
        };
        let mut body = format!("old {old}\n");
        for h in &proof {
            body.push_str(&B64.encode(h.0));
            body.push('\n');
        }
        body.push('\n');
        body.push_str(note);
        let mut resp = agent
            .post(format!("{url}/add-checkpoint"))
            .header("content-type", "text/plain; charset=utf-8")
            .send(body.as_bytes())
            .with_context(|| format!("POST {url}/add-checkpoint"))?;
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .with_config()
            .limit(64 * 1024)
            .read_to_string()
            .unwrap_or_default();
        match status {
            200 => {
                let line = text
                    .lines()
                    .filter(|l| l.starts_with("— "))
                    .map(|l| format!("{l}\n"))
                    .find(|l| {
                        cosignatures(
                            format!("{note}{l}").as_bytes(),
                            std::slice::from_ref(&w.verifier),
                        )
                        .is_ok_and(|c| !c.is_empty())
                    })
                    .ok_or_else(|| anyhow!("no cosignature in the answer verifies with its key"))?;
                st.witness_sizes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(w.name.clone(), head.size);
                return Ok(line);
            }
            409 => {
                old = text
                    .trim()
                    .parse()
                    .map_err(|_| anyhow!("409 without a size: {text}"))?;
            }
            s => bail!("status {s}: {}", text.trim()),
        }
    }
    bail!("the witness's size kept changing")
}
