//! Posting signed events and checking every receipt: [`post_one`] sends
//! one envelope ([`sign_event`] signs one), and [`post_envelopes`] sends
//! already-signed envelopes in batches (`ledger post`). Nothing posted is taken on trust: each receipt's inclusion proof
//! and signed checkpoint are verified, and its leaf is checked to be the
//! envelope that was posted.

use std::path::Path;

use anyhow::{anyhow, Context};
use ed25519_dalek::SigningKey;
use events::envelope::format_micros;
use events::model::*;
use events::{key_id, Clock as _, SystemClock};

use crate::check::ReceiptChecker;
use crate::client::Client;
use crate::wire::{BatchResponse, Problem, WriteReceipt};
use crate::CheckError;

/// Signs `event` with `key` as a new envelope: a fresh id (`prefix`, then
/// 128 random bits as 32 hex digits) issued now, its sensitive values
/// committed, in the schema this build writes. Returns the body to post:
/// the envelope, with the disclosures of its committed values when it has
/// any ([`events::envelope::sign_write`]).
pub fn sign_event(key: &SigningKey, prefix: &str, event: Event) -> Vec<u8> {
    sign_event_bound(key, prefix, event, &[])
}

/// [`sign_event`], with the disclosures of values given their handles
/// before the event was built ([`events::disclose::bind`]).
pub fn sign_event_bound(
    key: &SigningKey,
    prefix: &str,
    event: Event,
    bound: &[events::disclose::Bound],
) -> Vec<u8> {
    let payload = Payload {
        schema: SCHEMA_VERSION,
        id: format!("{prefix}-{}", hex::encode(rand::random::<[u8; 16]>())),
        signer: key_id(&key.verifying_key()),
        issued_at: format_micros(SystemClock.now_micros()),
        event,
    };
    events::envelope::sign_write_bound(key, payload, bound)
}

/// How posts are retried when the server answers 503 (it is starting, or
/// busy): up to `attempts` more times, each after the `Retry-After` delay
/// it gave (or a doubling one from 100 ms), never longer than `max_wait`.
/// Re-posting is safe: an envelope already in the log is acknowledged, not
/// appended again.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    pub attempts: u32,
    pub max_wait: std::time::Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            attempts: 5,
            max_wait: std::time::Duration::from_secs(10),
        }
    }
}

impl Retry {
    /// No retries.
    pub const NONE: Retry = Retry {
        attempts: 0,
        max_wait: std::time::Duration::ZERO,
    };

    /// How long to wait before retry number `n` (0-based), given the
    /// server's `Retry-After`.
    fn delay(&self, n: u32, retry_after: Option<u64>) -> std::time::Duration {
        let backoff = std::time::Duration::from_millis(100u64.saturating_mul(1 << n.min(10)));
        retry_after
            .map(std::time::Duration::from_secs)
            .unwrap_or(backoff)
            .min(self.max_wait)
    }

    /// `send`, again while it answers 503 and attempts remain.
    fn run(
        &self,
        mut send: impl FnMut() -> anyhow::Result<crate::client::Reply>,
    ) -> anyhow::Result<crate::client::Reply> {
        let mut n = 0;
        loop {
            let r = send()?;
            if r.status != 503 || n >= self.attempts {
                return Ok(r);
            }
            std::thread::sleep(self.delay(n, r.retry_after));
            n += 1;
        }
    }
}

/// Posts one signed envelope to `POST /v1/events` and checks its receipt
/// against `vkey`: the signed checkpoint, the inclusion proof, and that the
/// proven leaf is this envelope. A refusal is an error that names the
/// status and the problem; a receipt that does not verify is
/// [`CheckError::Disproved`].
pub fn post_one(client: &Client, vkey: &str, envelope: &[u8]) -> Result<WriteReceipt, CheckError> {
    post_one_retrying(client, vkey, envelope, Retry::NONE)
}

/// [`post_one`], retried as `retry` says while the server answers 503.
pub fn post_one_retrying(
    client: &Client,
    vkey: &str,
    envelope: &[u8],
    retry: Retry,
) -> Result<WriteReceipt, CheckError> {
    let r = retry.run(|| client.post_json("/v1/events", envelope))?;
    if !(200..300).contains(&r.status) {
        return Err(anyhow!("write refused ({}): {}", r.status, r.text()).into());
    }
    let rc: WriteReceipt = r.json()?;
    ReceiptChecker::new(vkey)
        .check(&rc, Some(envelope))
        .map_err(|e| CheckError::Disproved(format!("the receipt does not verify: {e:#}")))?;
    Ok(rc)
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
/// envelope that was posted. Each checked receipt is passed to `receipt`
/// (label, receipt); a refusal is passed to `refused` (label,
/// status, problem) and counted; a receipt that does not verify, or an
/// answer that does not match the batch, is [`CheckError::Disproved`]. `progress` gets the
/// number of envelopes answered so far.
#[allow(clippy::too_many_arguments)]
pub fn post_envelopes(
    client: &Client,
    checker: &mut ReceiptChecker,
    envelopes: &[(String, Vec<u8>)],
    batch: usize,
    retry: Retry,
    refused: &mut dyn FnMut(&str, u16, &Problem),
    receipt: &mut dyn FnMut(&str, &WriteReceipt),
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
        let (first, later) = rest.split_at(n);
        rest = later;
        // Envelopes the server answered 503 for (it was starting or busy)
        // are posted again, as `retry` says; the rest are done.
        let mut chunk: Vec<&(String, Vec<u8>)> = first.iter().collect();
        let mut attempt = 0;
        while !chunk.is_empty() {
            let n = chunk.len();
            let r = retry.run(|| client.post_batch(chunk.iter().map(|(_, env)| env.as_slice())))?;
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
            let mut again = Vec::new();
            for (&entry, item) in chunk.iter().zip(&answer.results) {
                let (label, env) = entry;
                if item.status == 503 && attempt < retry.attempts {
                    again.push(entry);
                    continue;
                }
                match (&item.receipt, &item.problem) {
                    (Some(rc), _) => {
                        checker.check(rc, Some(env)).map_err(|e| {
                            CheckError::Disproved(format!(
                                "{label}: the receipt does not verify: {e:#}"
                            ))
                        })?;
                        receipt(label, rc);
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
            done += (n - again.len()) as u64;
            progress(done);
            if !again.is_empty() {
                std::thread::sleep(retry.delay(attempt, None));
            }
            attempt += 1;
            chunk = again;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_event_carries_an_id_with_128_random_bits() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let id = |env: Vec<u8>| {
            events::envelope::decode_envelope(&env)
                .expect("decodes")
                .payload
                .id
        };
        let event = || {
            Event::RunFinished(RunFinished {
                run_id: "run-1".into(),
            })
        };
        let (a, b) = (
            id(sign_event(&key, "operator", event())),
            id(sign_event(&key, "operator", event())),
        );
        let hex_part = a.strip_prefix("operator-").expect("prefix");
        assert_eq!(hex_part.len(), 32, "{a}");
        assert!(hex_part.bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert_ne!(a, b);
    }
}
