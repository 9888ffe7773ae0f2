//! Posting signed events and checking every receipt: a [`Poster`] signs as
//! named actors (the demo, the CLI's operator commands), and
//! [`post_envelopes`] sends already-signed envelopes in batches (`ledger
//! post`). Nothing posted is taken on trust: each receipt's inclusion proof
//! and signed checkpoint are verified, and its leaf is checked to be the
//! envelope that was posted.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{anyhow, bail, Context};
use ed25519_dalek::SigningKey;
use events::envelope::{format_micros, public_key_b64};
use events::model::*;
use events::{key_id, sign_envelope, Clock as _, SystemClock};

use crate::check::ReceiptChecker;
use crate::client::{Client, Reply};
use crate::wire::{BatchResponse, Problem, WriteReceipt};
use crate::CheckError;

/// Posts signed events as named actors.
pub struct Poster<'a> {
    pub client: &'a Client,
    pub vkey: String,
    keys: BTreeMap<String, SigningKey>,
    next: u64,
    pub receipts_checked: usize,
}

fn key_for(name: &str) -> SigningKey {
    SigningKey::from_bytes(
        blake3::hash(format!("evidence-ledger demo key {name}").as_bytes()).as_bytes(),
    )
}

impl<'a> Poster<'a> {
    pub fn new(client: &'a Client, vkey: String, operator: SigningKey) -> Self {
        let mut keys = BTreeMap::new();
        keys.insert("operator".to_owned(), operator);
        Poster {
            client,
            vkey,
            keys,
            next: 0,
            receipts_checked: 0,
        }
    }

    pub fn key(&mut self, name: &str) -> SigningKey {
        self.keys
            .entry(name.to_owned())
            .or_insert_with(|| key_for(name))
            .clone()
    }

    pub fn envelope(&mut self, signer: &str, event: Event) -> Vec<u8> {
        self.next += 1;
        let key = self.key(signer);
        let p = Payload {
            schema: SCHEMA_VERSION,
            id: format!(
                "demo-{:06}-{}",
                self.next,
                &hex::encode(rand::random::<[u8; 4]>())
            ),
            signer: key_id(&key.verifying_key()),
            issued_at: format_micros(SystemClock.now_micros()),
            event,
        };
        sign_envelope(&key, &p)
    }

    /// Posts as `signer` (a name given to [`Poster::new`] or derived) and
    /// expects success; checks the receipt's proof and checkpoint.
    pub fn post(&mut self, signer: &str, event: Event) -> anyhow::Result<WriteReceipt> {
        let env = self.envelope(signer, event);
        let r = self.client.post_json("/v1/events", &env)?;
        if !(200..300).contains(&r.status) {
            bail!("write refused ({}): {}", r.status, r.text());
        }
        let rc: WriteReceipt = r.json()?;
        ReceiptChecker::new(&self.vkey).check(&rc, Some(&env))?;
        self.receipts_checked += 1;
        Ok(rc)
    }

    /// Posts and expects a refusal; returns it.
    pub fn post_refused(&mut self, signer: &str, event: Event) -> anyhow::Result<Reply> {
        let env = self.envelope(signer, event);
        let r = self.client.post_json("/v1/events", &env)?;
        if (200..300).contains(&r.status) {
            bail!("a write that should have been refused was accepted");
        }
        Ok(r)
    }

    pub fn enrol(&mut self, name: &str, role: Role) -> anyhow::Result<()> {
        let k = self.key(name);
        self.post(
            "operator",
            Event::PrincipalEnrolled(PrincipalEnrolled {
                public_key: public_key_b64(&k.verifying_key()),
                identity: format!("{name}@bench.example"),
                roles: vec![role],
            }),
        )?;
        Ok(())
    }
}

/// The envelopes of `path`, each with where it came from: a JSON array's
/// items (`file[i]`) or non-empty lines (`file:line`). `-` is standard input.
pub fn read_envelopes(path: &Path) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let bytes = if path == Path::new("-") {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut b).context("reading stdin")?;
        b
    } else {
        std::fs::read(path).with_context(|| format!("reading {}", path.display()))?
    };
    let text = std::str::from_utf8(&bytes)
        .with_context(|| format!("{}: not UTF-8 text", path.display()))?;
    let name = path.display();
    if text.trim_start().starts_with('[') {
        let items: Vec<Box<serde_json::value::RawValue>> = serde_json::from_str(text)
            .with_context(|| format!("{name}: not a JSON array of envelopes"))?;
        return Ok(items
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("{name}[{i}]"), v.get().as_bytes().to_vec()))
            .collect());
    }
    Ok(text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| (format!("{name}:{}", n + 1), l.trim().as_bytes().to_vec()))
        .collect())
}

/// The most bytes [`post_envelopes`] puts in one request body (under the
/// server's default limit of 1 MiB).
pub const POST_BODY_BYTES: usize = 512 * 1024;

/// What posting a list of envelopes came to.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Posted {
    pub appended: u64,
    pub existing: u64,
    pub refused: u64,
    /// The largest tree size a receipt was proven in.
    pub tree_size: u64,
}

/// Posts `envelopes` (label, bytes) in batches of at most `batch` and
/// [`POST_BODY_BYTES`], checking every receipt with `checker` against the
/// envelope that was posted. A refusal is passed to `refused` (label,
/// status, problem) and counted; a receipt that does not verify, or an
/// answer that does not match the batch, is [`CheckError::Disproved`]. `progress` gets the
/// number of envelopes answered so far.
pub fn post_envelopes(
    client: &Client,
    checker: &mut ReceiptChecker,
    envelopes: &[(String, Vec<u8>)],
    batch: usize,
    refused: &mut dyn FnMut(&str, u16, &Problem),
    progress: &mut dyn FnMut(u64),
) -> Result<Posted, CheckError> {
    let mut out = Posted::default();
    let mut rest = envelopes;
    let mut done = 0u64;
    while !rest.is_empty() {
        let mut n = 0;
        let mut bytes = 2;
        while n < rest.len() && n < batch && (n == 0 || bytes + rest[n].1.len() < POST_BODY_BYTES) {
            bytes += rest[n].1.len() + 1;
            n += 1;
        }
        let (chunk, later) = rest.split_at(n);
        rest = later;
        let r = client.post_batch(chunk.iter().map(|(_, env)| env.as_slice()))?;
        if r.status != 200 {
            return Err(anyhow!(
                "the server refused a batch of {n} ({}): {} (re-running is safe)",
                r.status,
                r.text()
            )
            .into());
        }
        let answer: BatchResponse = r.json()?;
        if answer.results.len() != n {
            return Err(CheckError::Disproved(format!(
                "the server answered {} results for {n} envelopes",
                answer.results.len()
            )));
        }
        for ((label, env), item) in chunk.iter().zip(&answer.results) {
            match (&item.receipt, &item.problem) {
                (Some(rc), _) => {
                    checker.check(rc, Some(env)).map_err(|e| {
                        CheckError::Disproved(format!(
                            "{label}: the receipt does not verify: {e:#}"
                        ))
                    })?;
                    if rc.existing {
                        out.existing += 1;
                    } else {
                        out.appended += 1;
                    }
                    out.tree_size = out.tree_size.max(rc.tree_size);
                }
                (None, Some(p)) => {
                    out.refused += 1;
                    refused(label, item.status, p);
                }
                (None, None) => {
                    return Err(CheckError::Disproved(format!(
                        "{label}: status {} with neither a receipt nor a problem",
                        item.status
                    )))
                }
            }
        }
        done += n as u64;
        progress(done);
    }
    Ok(out)
}
