//! The event layer on the log: stateless checks in the caller's thread,
//! stateful checks in log order inside the committer.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};

use ed25519_dalek::{SigningKey, VerifyingKey};

use crate::envelope::{
    decode_envelope, format_micros, key_id, public_key_b64, sign_envelope, Decoded,
};
use crate::handles::HandleValues;
use crate::model::*;
use crate::reject::{RejectCode, Rejection};
use crate::state::{parse_public_key, State};
use ledger::{
    AppendError, Config, Error, Ledger, LogView, PendingReceipt, Receipt, Sequenced, Sequencer,
};

/// The ledger's clock: µs since the Unix epoch, UTC. Injected so that tests
/// can move time (capability expiry).
pub trait Clock: Send + Sync + 'static {
    fn now_micros(&self) -> i64;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_micros(&self) -> i64 {
        chrono::Utc::now().timestamp_micros()
    }
}

/// A clock set by hand (tests, simulations).
#[derive(Debug, Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn new(micros: i64) -> Self {
        ManualClock(AtomicI64::new(micros))
    }
    pub fn set(&self, micros: i64) {
        self.0.store(micros, Ordering::SeqCst);
    }
    pub fn advance(&self, micros: i64) {
        self.0.fetch_add(micros, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_micros(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Public keys of enrolled principals, shared with submitting threads so
/// they can verify signatures before queueing. A cache: the committer's state
/// stays authoritative for enrolment and revocation.
#[derive(Debug, Default)]
pub struct KeyCache(RwLock<HashMap<String, VerifyingKey>>);

impl KeyCache {
    pub fn get(&self, id: &str) -> Option<VerifyingKey> {
        self.0
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .copied()
    }
    fn insert(&self, id: String, key: VerifyingKey) {
        self.0
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, key);
    }
    fn reset(&self, state: &State) {
        let mut m = self.0.write().unwrap_or_else(|p| p.into_inner());
        m.clear();
        for (id, p) in &state.principals {
            if let Some(Ok(k)) = p.public_key.as_ref().map(VerifyingKey::from_bytes) {
                m.insert(id.clone(), k);
            }
        }
    }
}

/// The part of entry `entry` that keeps the disclosure of its committed
/// field `field` ([`crate::disclose::part_of`]).
fn redacted_part(log: &dyn crate::state::Checkpoints, entry: u64, field: &str) -> Option<usize> {
    let (leaf, _) = log.entry_leaf(entry)?;
    let (d, _) = crate::envelope::decode_logged_leaf(&leaf).ok()?;
    crate::disclose::part_of(&d.payload.event, field)
}

/// An envelope whose signature verified, with the disclosures of its
/// committed fields, checked against them.
#[derive(Debug, Clone)]
pub struct Submission {
    decoded: Decoded,
    /// In [`crate::disclose::fields`] order: what is kept beside the entry.
    disclosures: Vec<String>,
    /// Its signer was not enrolled in the state the door knew, on a log
    /// other writers append to: the committer checks the signature once it
    /// has caught up with them ([`verify_submission_deferred`]).
    unverified: bool,
}

impl Submission {
    pub fn decoded(&self) -> &Decoded {
        &self.decoded
    }
}

/// Decodes a write (an envelope, or an envelope with the disclosures of its
/// committed fields, [`crate::envelope::split_write`]), checks each
/// disclosure and the rule of the value it discloses, and verifies the
/// envelope signature with the signer's enrolled key (or, for an enrolment,
/// the key it enrols).
pub fn verify_submission(bytes: &[u8], keys: &KeyCache) -> Result<Submission, Rejection> {
    verify_submission_deferred(bytes, keys, false)
}

/// [`verify_submission`], except that with `defer_unknown` a write whose
/// signer the door does not know yet is passed on unverified: on a log
/// others append to, the signer may have been enrolled by another writer
/// since this one last caught up, and the committer, which catches up
/// before it decides, checks the signature then (or refuses
/// `unknown_signer`).
pub fn verify_submission_deferred(
    bytes: &[u8],
    keys: &KeyCache,
    defer_unknown: bool,
) -> Result<Submission, Rejection> {
    // One answer per write: the fallback is never taken.
    verify_submissions_deferred(&[bytes], keys, defer_unknown)
        .pop()
        .unwrap_or_else(|| Err(unknown_signer()))
}

/// [`verify_submission_deferred`] for each of `writes`, with the same
/// answer for each, their signatures (the envelopes' and the case
/// co-signatures checked ahead, [`preverify_cosignatures`]) checked
/// together by [`crate::ed25519::verify_strict_many`].
pub fn verify_submissions_deferred<E: AsRef<[u8]>>(
    writes: &[E],
    keys: &KeyCache,
    defer_unknown: bool,
) -> Vec<Result<Submission, Rejection>> {
    /// A decoded write, its signer's key (`None`: passed on unverified),
    /// and what its signature and co-signatures sign.
    struct Staged {
        decoded: Decoded,
        disclosures: Vec<String>,
        key: Option<VerifyingKey>,
        signed: Vec<u8>,
        cosignatures: Vec<Cosignature>,
    }
    let staged: Vec<Result<Staged, Rejection>> = writes
        .iter()
        .map(|bytes| {
            let write = crate::envelope::split_write(bytes.as_ref())?;
            let d = decode_envelope(write.envelope)?;
            let disclosures = crate::disclose::open(&d.payload, &write.disclosures)?;
            let key = signer_key(&d, keys);
            if key.is_none() && !defer_unknown {
                return Err(unknown_signer());
            }
            let (signed, cosignatures) = match key {
                Some(_) => (
                    crate::envelope::pae(crate::envelope::PAYLOAD_TYPE, &d.payload_bytes),
                    cosignatures_to_preverify(&d, keys),
                ),
                None => (Vec::new(), Vec::new()),
            };
            Ok(Staged {
                decoded: d,
                disclosures,
                key,
                signed,
                cosignatures,
            })
        })
        .collect();
    let mut checks = Vec::new();
    for st in staged.iter().flatten() {
        if let Some(key) = &st.key {
            checks.push(crate::ed25519::Check {
                key,
                message: &st.signed,
                signature: &st.decoded.signature,
            });
            checks.extend(st.cosignatures.iter().map(|c| crate::ed25519::Check {
                key: &c.key,
                message: &c.statement,
                signature: &c.signature,
            }));
        }
    }
    let mut answers = crate::ed25519::verify_strict_many(&checks).into_iter();
    staged
        .into_iter()
        .map(|st| {
            let st = st?;
            let mut d = st.decoded;
            if st.key.is_none() {
                return Ok(Submission {
                    decoded: d,
                    disclosures: st.disclosures,
                    unverified: true,
                });
            }
            let envelope_ok = answers.next().unwrap_or(false);
            let cosigned: Vec<bool> = answers.by_ref().take(st.cosignatures.len()).collect();
            if !envelope_ok {
                return Err(crate::envelope::signature_invalid());
            }
            for (c, ok) in st.cosignatures.into_iter().zip(cosigned) {
                if ok {
                    d.preverified.push(c.preverified());
                }
            }
            Ok(Submission {
                decoded: d,
                disclosures: st.disclosures,
                unverified: false,
            })
        })
        .collect()
}

fn unknown_signer() -> Rejection {
    Rejection::new(
        RejectCode::UnknownSigner,
        "signer",
        "no enrolled principal has this key id",
    )
}

/// The key `d` must be signed with: its signer's enrolled key, or, for an
/// enrolment, the key it enrols when that is the signer's.
fn signer_key(d: &Decoded, keys: &KeyCache) -> Option<VerifyingKey> {
    keys.get(&d.keyid).or_else(|| match &d.payload.event {
        Event::PrincipalEnrolled(e) => {
            parse_public_key(&e.public_key).filter(|k| key_id(k) == d.keyid)
        }
        _ => None,
    })
}

/// Verifies a case's two curator co-signatures here, in the submitting
/// thread, with the keys the cache holds, and records the ones that verify
/// (see [`crate::envelope::Preverified`]). Nothing is refused here: a
/// co-signature that is missing from the record is checked in the committer,
/// in rule order, as before. Only `case.added` is handled: its statement is
/// made from the payload alone; other statements depend on the state.
fn preverify_cosignatures(d: &mut Decoded, keys: &KeyCache) {
    let cosignatures = cosignatures_to_preverify(d, keys);
    let checks: Vec<crate::ed25519::Check<'_>> = cosignatures
        .iter()
        .map(|c| crate::ed25519::Check {
            key: &c.key,
            message: &c.statement,
            signature: &c.signature,
        })
        .collect();
    let answers = crate::ed25519::verify_strict_many(&checks);
    for (c, ok) in cosignatures.into_iter().zip(answers) {
        if ok {
            d.preverified.push(c.preverified());
        }
    }
}

/// A co-signature [`preverify_cosignatures`] checks: its key as the cache
/// holds it, its signature, and the statement it signs.
struct Cosignature {
    key: VerifyingKey,
    signature: ed25519_dalek::Signature,
    statement: Vec<u8>,
    /// The statement's BLAKE3 digest, hashed once for both co-signatures.
    statement_digest: [u8; 32],
}

impl Cosignature {
    fn preverified(&self) -> crate::envelope::Preverified {
        crate::envelope::Preverified {
            public_key: self.key.to_bytes(),
            signature: self.signature.to_bytes(),
            statement_digest: self.statement_digest,
        }
    }
}

/// The co-signatures of a `case.added` whose keys the cache holds.
fn cosignatures_to_preverify(d: &Decoded, keys: &KeyCache) -> Vec<Cosignature> {
    let Event::CaseAdded(e) = &d.payload.event else {
        return Vec::new();
    };
    let statement = crate::envelope::case_provenance_statement(
        &e.case_id,
        &e.provenance.added_at,
        &e.case_digest,
    );
    let statement_digest = *blake3::hash(&statement).as_bytes();
    [&e.provenance.added_by, &e.provenance.reviewed_by]
        .into_iter()
        .filter_map(|cs| {
            Some(Cosignature {
                key: keys.get(&cs.key_id)?,
                signature: ed25519_dalek::Signature::from_bytes(&crate::state::signature_bytes(
                    &cs.signature,
                )?),
                statement: statement.clone(),
                statement_digest,
            })
        })
        .collect()
}

/// What an accepted event reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    pub id: String,
    pub kind: Kind,
    /// The ledger's sequencing time, µs since the Unix epoch, UTC: for a
    /// re-post of an envelope already in the log, the original entry's.
    pub sequenced_at: i64,
}

/// The `aux` name of the saved state snapshot ([`EventLog::save_state`]).
pub const STATE_AUX: &str = "event_state/v2";
const SNAPSHOT_MAGIC: &[u8; 8] = b"ELSTATE2";
const DELTA_MAGIC: &[u8; 8] = b"ELSTDLT1";

/// The `aux` name of the `n`-th delta after the state snapshot
/// ([`EventLog::save_state`]): the changes to the state since the snapshot
/// (`n` = 0) or the delta before.
pub fn state_delta_aux(n: usize) -> String {
    format!("{STATE_AUX}/delta/{n:06}")
}

/// What the saved snapshot and its deltas hold, as far as this process
/// knows: where the next delta goes, and whether a whole snapshot is due.
#[derive(Debug, Clone, Copy)]
struct Saved {
    /// The size the last record (snapshot or delta) was taken at.
    end: u64,
    /// The number of the next delta.
    next: usize,
    /// The bytes of the snapshot, and of its deltas so far: once the
    /// deltas reach half the snapshot (or number [`MAX_DELTAS`]), the next
    /// save is a whole snapshot (so a start reads about half as much
    /// again, and the bytes saved per entry stay proportional to what the
    /// entries change).
    snapshot_len: usize,
    deltas_len: usize,
}

/// At most this many deltas follow a whole snapshot: a start reads them
/// all, and on a log that changes little per save the bytes alone would
/// allow thousands.
const MAX_DELTAS: usize = 64;

impl Saved {
    fn whole_due(&self) -> bool {
        self.deltas_len >= self.snapshot_len / 2 || self.next >= MAX_DELTAS
    }
}

/// The key of the state snapshot's seal, derived from the ledger's key.
pub fn snapshot_seal_key(ledger_key: &SigningKey) -> [u8; 32] {
    ledger::sealed::derive_key(
        "evidence-ledger/v1 state snapshot mac",
        ledger_key.as_bytes(),
    )
}

/// The key of the door's value hashes ([`crate::handles`]), derived from
/// the ledger's key.
pub fn handle_index_key(ledger_key: &SigningKey) -> [u8; 32] {
    ledger::sealed::derive_key(
        "evidence-ledger/v1 handle value index",
        ledger_key.as_bytes(),
    )
}

/// The snapshot's state if its seal ([`ledger::sealed`]) verifies under
/// `key`, it was taken at a size the log has, the log's root at that size
/// is the one sealed with it, and its body decodes to a state of that size;
/// with the door's index of the values behind handles saved after it, when
/// `index_key` asks for it and there is one. Otherwise why not.
fn open_snapshot(
    key: &[u8; 32],
    index_key: Option<&[u8; 32]>,
    rec: &[u8],
    log: &LogView<'_>,
) -> Result<Result<(State, Option<HandleValues>), String>, Error> {
    let opened = ledger::sealed::open(key, SNAPSHOT_MAGIC, rec, log.head().size, |size| {
        log.root_at(size)
    })?;
    Ok(match opened {
        Ok(o) => State::decode_snapshot(o.body)
            .filter(|s| s.size == o.size)
            .map(|s| {
                let index = index_key
                    .and_then(|k| HandleValues::decode(*k, State::snapshot_trailer(o.body)));
                (s, index)
            })
            .ok_or_else(|| "its body does not decode to a state of its size".to_owned()),
        Err(e) => Err(e.to_string()),
    })
}

/// What a start resumed from, kept to compare with a replay of the log
/// ([`EventLog::check_snapshot`]).
#[derive(Debug, Clone)]
struct Resumed {
    /// The size the saved state (the snapshot and its deltas) ends at.
    size: u64,
    /// The digest of that state.
    state: blake3::Hash,
    /// The door's saved index at that size, a digest per binding
    /// ([`HandleValues::bindings`]), when the start resumed the index too.
    index: Option<Vec<(Option<u64>, [u8; 32])>>,
}

/// Folds the deltas saved after a snapshot into `state` (the snapshot's),
/// in order, while each one was taken where the one before ended. Stops at
/// the first that is absent or empty (the end of the chain) or taken
/// elsewhere (left by an earlier chain, possibly under an earlier key), and
/// at one that is refused (a seal that does not verify, a body that does not
/// decode, a record that cannot be read: then why). The first delta is never
/// under another key than the snapshot's: every whole save empties it.
/// Each delta's changes to the door's index are folded into `index`; one
/// without them (saved by an earlier build) or whose changes do not decode
/// drops it (the start then loads it from the kept disclosures).
/// Returns what was saved and the refusal, if any.
fn fold_deltas(
    key: &[u8; 32],
    state: &mut State,
    index: &mut Option<HandleValues>,
    snapshot_len: usize,
    log: &LogView<'_>,
) -> (Saved, Option<String>) {
    let mut saved = Saved {
        end: state.size,
        next: 0,
        snapshot_len,
        deltas_len: 0,
    };
    loop {
        let n = saved.next;
        let (mut delta, len) = match read_delta(key, n, state.size, log) {
            DeltaRead::Delta(delta, len) => (delta, len),
            DeltaRead::End => return (saved, None),
            DeltaRead::Refused(why) => return (saved, Some(why)),
        };
        let changes = delta.handle_index.take();
        if !state.apply_delta(*delta) {
            // Left by an earlier chain: not this one's.
            return (saved, None);
        }
        if let Some(ix) = index {
            let folded = changes.and_then(|c| {
                use base64::Engine as _;
                let b = base64::engine::general_purpose::STANDARD.decode(c).ok()?;
                ix.apply_changes(&b)
            });
            if folded.is_none() {
                *index = None;
            }
        }
        saved.end = state.size;
        saved.next += 1;
        saved.deltas_len += len;
    }
}

/// What the `n`-th saved delta holds for a state of size `at`.
enum DeltaRead {
    /// The next delta of the chain, and the bytes of its record.
    Delta(Box<crate::state::StateDelta>, usize),
    /// The chain ends here: absent or empty, left by an earlier chain
    /// (another `from`: not decoded, it may even be of an earlier build's
    /// layout), or after the first, sealed under another key (left from
    /// before a key rotation).
    End,
    /// Refused, and why: a seal that does not verify (the first delta also
    /// under another key: every whole save empties it), a body that does
    /// not decode to changes at its size, a record that cannot be read.
    Refused(String),
}

fn read_delta(key: &[u8; 32], n: usize, at: u64, log: &LogView<'_>) -> DeltaRead {
    let rec = match log.aux(&state_delta_aux(n)) {
        Ok(Some(rec)) if !rec.is_empty() => rec,
        Ok(_) => return DeltaRead::End,
        Err(e) => {
            return DeltaRead::Refused(format!("the event-state delta {n} cannot be read: {e}"))
        }
    };
    let opened = match ledger::sealed::open(key, DELTA_MAGIC, &rec, log.head().size, |size| {
        log.root_at(size)
    }) {
        Ok(Ok(o)) => o,
        Ok(Err(ledger::sealed::SealError::OtherKey)) if n > 0 => return DeltaRead::End,
        Ok(Err(e)) => {
            return DeltaRead::Refused(format!("the event-state delta {n} was refused: {e}"))
        }
        Err(e) => {
            return DeltaRead::Refused(format!("the event-state delta {n} cannot be read: {e}"))
        }
    };
    if crate::state::StateDelta::from_of(opened.body).is_some_and(|from| from != at) {
        return DeltaRead::End;
    }
    match crate::state::StateDelta::decode(opened.body).filter(|d| d.size == opened.size) {
        Some(delta) => DeltaRead::Delta(Box::new(delta), rec.len()),
        None => DeltaRead::Refused(format!(
            "the event-state delta {n} does not decode to changes at its size"
        )),
    }
}

/// The state at the log's head, and how it got there.
struct Rebuilt {
    state: State,
    /// The size of the saved state it started from, and its digest.
    resumed: Option<Resumed>,
    /// Why saved state was refused, if any was.
    refused: Option<String>,
    /// What is saved (the snapshot and its deltas), when it was used.
    saved: Option<Saved>,
    /// The door's saved index of the values behind handles, at the end of
    /// the saved state (before the entries after it), when asked for and
    /// saved whole with it.
    index: Option<SavedIndex>,
}

/// The door's index as saved, at the end of the saved state.
struct SavedIndex {
    index: HandleValues,
    /// The size of the saved state it goes with.
    size: u64,
    /// How many redactions that state held.
    redactions: usize,
}

/// The state at the log's head: the saved snapshot and its deltas (when
/// they check out) and the entries after them, each re-checked; otherwise
/// the whole log. The state comes back noting its changes from the end of
/// the saved deltas ([`State::track_changes`]), so the next save can be
/// one more delta.
fn rebuild_state(
    log: &LogView<'_>,
    key: &[u8; 32],
    index_key: Option<&[u8; 32]>,
    verify_signatures: bool,
) -> Result<Rebuilt, crate::state::ReplayError> {
    let refused = match log.aux(STATE_AUX).and_then(|rec| match rec {
        Some(rec) => open_snapshot(key, index_key, &rec, log).map(|s| Some((s, rec.len()))),
        None => Ok(None),
    }) {
        Ok(Some((Ok((mut state, mut index)), snapshot_len))) => {
            let snapshot = state.size;
            let (saved, refused) = fold_deltas(key, &mut state, &mut index, snapshot_len, log);
            if let Some(why) = &refused {
                tracing::error!(reason = %why, "derived state does not match the log; resuming from the saved state before it");
            }
            let from = state.size;
            tracing::info!(
                snapshot,
                deltas = saved.next,
                tail = log.head().size - from,
                "state from its snapshot, its deltas and the entries after them"
            );
            let index = index.map(|mut index| {
                // What folding the deltas noted is saved already.
                index.track_changes();
                SavedIndex {
                    index,
                    size: from,
                    redactions: state.redactions.len(),
                }
            });
            let resumed = Resumed {
                size: from,
                state: blake3::hash(&state.encode_snapshot()),
                index: index.as_ref().map(|i| i.index.bindings()),
            };
            state.track_changes();
            return Ok(Rebuilt {
                state: state.replay_from(log, verify_signatures)?,
                resumed: Some(resumed),
                refused,
                saved: Some(saved),
                index,
            });
        }
        Ok(None) => None,
        Ok(Some((Err(why), _))) if why == ledger::sealed::SealError::OtherKey.to_string() => {
            tracing::info!(
                "the event-state snapshot was sealed under another key; replaying the whole log"
            );
            None
        }
        Ok(Some((Err(why), _))) => Some(format!("the event-state snapshot was refused: {why}")),
        Err(e) => Some(format!("the event-state snapshot cannot be read: {e}")),
    };
    if let Some(why) = &refused {
        tracing::error!(reason = %why, "derived state does not match the log; replaying the whole log");
    }
    Ok(Rebuilt {
        state: State::replay(log, verify_signatures)?,
        resumed: None,
        refused,
        saved: None,
        index: None,
    })
}

/// The [`Sequencer`] for signed domain events.
pub struct EventSequencer {
    state: State,
    keys: Arc<KeyCache>,
    clock: Arc<dyn Clock>,
    ledger_key: SigningKey,
    ledger_key_id: String,
    /// Set when state could not be rebuilt after a failed commit.
    broken: bool,
    /// Set until [`EventLog::load_state`] has installed the state: every
    /// write is refused meanwhile.
    loading: bool,
    /// Ids sequenced since the last commit: not in the key index yet.
    pending: HashMap<String, Found>,
    /// Which value each schema-3 handle stands for ([`crate::handles`]).
    handles: crate::handles::HandleValues,
    /// The size the index in `handles` is complete at: every handle given
    /// below it is known (or was redacted).
    handles_known: u64,
    /// The number of redactions the state held at that size.
    redactions_known: usize,
    /// Key ids enrolled by this batch, not committed yet: a write the door
    /// passed unverified may not be signed by one (as at the door, a key
    /// signs only once its enrolment is in the log).
    enrolled_in_batch: std::collections::HashSet<String>,
}

/// The key index names an entry by its envelope id and payload digest.
fn envelope_key(d: &Decoded) -> ledger::EntryKey {
    ledger::EntryKey {
        name: d.payload.id.clone(),
        digest: d.payload_digest,
    }
}

/// Whether logged `leaf` is the entry the key index says it is (its
/// envelope id is `id` and its payload digest `digest`), and if so its
/// sequencing time when `leaf` carries envelope id `id` with
/// payload digest `digest`; `None` when it does not.
fn carries(leaf: &[u8], id: &str, digest: &[u8; 32]) -> Option<i64> {
    let (d, at) = crate::envelope::decode_logged_leaf(leaf).ok()?;
    let k = envelope_key(&d);
    (k.name == id && k.digest == *digest).then_some(at)
}

/// An entry found by its envelope id: its index, payload digest and
/// sequencing time.
#[derive(Debug, Clone, Copy)]
struct Found {
    index: u64,
    digest: [u8; 32],
    at: i64,
}

impl EventSequencer {
    fn now(&self) -> i64 {
        self.clock.now_micros().max(self.state.last_sequenced_at)
    }

    /// The index, payload digest and sequencing time of the entry with
    /// envelope id `id`: earlier in this batch, or committed. A committed answer comes from
    /// the key index and is checked against the entry it names; an index
    /// that is behind the log, unreadable or wrong refuses the write rather
    /// than risk accepting a reused id.
    fn find(&self, id: &str, log: &LogView<'_>) -> Result<Option<Found>, Rejection> {
        if let Some(&hit) = self.pending.get(id) {
            return Ok(Some(hit));
        }
        let unavailable = |why: &dyn std::fmt::Display| {
            tracing::error!(error = %why, id, "cannot look up an envelope id; refusing the write");
            Rejection::new(
                RejectCode::LedgerUnavailable,
                "",
                "the ledger cannot check envelope ids against its log; run `ledger verify`",
            )
        };
        match log.keys_complete() {
            Ok(true) => {}
            Ok(false) => return Err(unavailable(&"the envelope id index is behind the log")),
            Err(e) => return Err(unavailable(&e)),
        }
        let Some((index, digest)) = log.entry_key(id).map_err(|e| unavailable(&e))? else {
            return Ok(None);
        };
        let entry = log.entry(index).map_err(|e| unavailable(&e))?;
        if let Some(at) = carries(&entry.leaf, id, &digest) {
            Ok(Some(Found { index, digest, at }))
        } else {
            Err(unavailable(&format_args!(
                "the envelope id index names entry {index}, which does not carry that id and digest"
            )))
        }
    }

    fn blocked(
        &mut self,
        d: &Decoded,
        req: &TierApply,
        next: u64,
        at: i64,
        log: &LogView<'_>,
    ) -> Sequenced<Accepted, Rejection> {
        let refusal = Rejection::new(
            RejectCode::PromotionMustBeHumanAuthorized,
            "event.kind",
            "the ledger never applies a tier change; a tier changes only by tier.changed signed by two maintainers",
        );
        if let Err(r) = self.state.check_signer(d) {
            return Sequenced::Reject(r);
        }
        let id = format!(
            "apply-blocked-{}",
            &hex::encode(blake3::hash(d.payload.id.as_bytes()).as_bytes())[..32]
        );
        match self.find(&id, log) {
            // This request was refused and recorded before.
            Ok(Some(_)) => return Sequenced::Reject(refusal),
            Ok(None) => {}
            Err(r) => return Sequenced::Reject(r),
        }
        let payload = Payload {
            schema: self.state.schema(),
            id,
            signer: self.ledger_key_id.clone(),
            issued_at: format_micros(at),
            event: Event::PromotionApplyBlocked(PromotionApplyBlocked {
                task_class: req.task_class.clone(),
                requested_tier: req.to,
                requested_by: d.keyid.clone(),
                request_id: d.payload.id.clone(),
                code: refusal.code.as_str().to_owned(),
            }),
        };
        let record = match decode_envelope(&sign_envelope(&self.ledger_key, &payload)) {
            Ok(r) => r,
            Err(e) => return Sequenced::Reject(e),
        };
        if let Err(e) = self.state.check(&record, at, log) {
            tracing::error!(error = %e, "cannot record a blocked tier apply; is the ledger key enrolled with the ledger role?");
            return Sequenced::Reject(refusal);
        }
        self.state.apply(&record, next, at);
        let key = envelope_key(&record);
        self.pending.insert(
            key.name.clone(),
            Found {
                index: next,
                digest: record.payload_digest,
                at,
            },
        );
        Sequenced::RefuseRecorded {
            leaf: record.leaf_bytes(at),
            rejected: refusal,
            key: Some(key),
        }
    }
}

impl Sequencer for EventSequencer {
    type Input = Submission;
    type Accepted = Accepted;
    type Rejected = Rejection;

    fn sequence(
        &mut self,
        input: Submission,
        next: u64,
        log: &LogView<'_>,
    ) -> Sequenced<Accepted, Rejection> {
        if self.broken {
            return Sequenced::Reject(Rejection::new(
                RejectCode::LedgerUnavailable,
                "",
                "the ledger could not rebuild its state; restart it",
            ));
        }
        if self.loading {
            return Sequenced::Reject(catching_up());
        }
        if self.state.size < log.head().size {
            // The state was loaded at a head that other writers of a
            // shared log have since moved (the committer caught up while
            // the start loaded it): fold the rest in before deciding.
            self.caught_up(log);
            if self.broken || self.state.size < log.head().size {
                return Sequenced::Reject(Rejection::new(
                    RejectCode::LedgerUnavailable,
                    "",
                    "the ledger could not fold in what other writers appended; restart it",
                ));
            }
        }
        let Submission {
            decoded: mut d,
            disclosures,
            unverified,
        } = input;
        if unverified {
            // Caught up with every other writer before this batch: the
            // signer is enrolled now, or never was.
            let Some(key) =
                signer_key(&d, &self.keys).filter(|_| !self.enrolled_in_batch.contains(&d.keyid))
            else {
                return Sequenced::Reject(unknown_signer());
            };
            if let Err(r) = d.verify(&key) {
                return Sequenced::Reject(r);
            }
            preverify_cosignatures(&mut d, &self.keys);
        }
        let accepted = |at| Accepted {
            id: d.payload.id.clone(),
            kind: d.payload.event.kind(),
            sequenced_at: at,
        };
        let found = match self.find(&d.payload.id, log) {
            Ok(found) => found,
            Err(r) => return Sequenced::Reject(r),
        };
        if let Some(Found { index, digest, at }) = found {
            // A re-post is acknowledged with the original entry's
            // sequencing time: with the envelope, it rebuilds that leaf.
            return if digest == d.payload_digest {
                Sequenced::Existing {
                    index,
                    accepted: accepted(at),
                }
            } else {
                Sequenced::Reject(Rejection::new(
                    RejectCode::EnvelopeIdReused,
                    "id",
                    format!("entry {index} already has this id with different content"),
                ))
            };
        }
        let at = self.now();
        if let Event::TierApply(req) = &d.payload.event {
            let req = req.clone();
            return self.blocked(&d, &req, next, at, log);
        }
        if let Err(r) = self.state.check(&d, at, log) {
            return Sequenced::Reject(r);
        }
        if let Err(r) = self.handles.admit(
            &d.payload.event,
            d.payload.schema,
            &disclosures,
            &self.state,
            next,
        ) {
            return Sequenced::Reject(r);
        }
        self.state.apply(&d, next, at);
        if let Event::PrincipalEnrolled(e) = &d.payload.event {
            if let Some(k) = parse_public_key(&e.public_key) {
                self.enrolled_in_batch.insert(key_id(&k));
                self.keys.insert(key_id(&k), k);
            }
        }
        let key = envelope_key(&d);
        self.pending.insert(
            key.name.clone(),
            Found {
                index: next,
                digest: d.payload_digest,
                at,
            },
        );
        let shred = match &d.payload.event {
            Event::FieldRedacted(e) => {
                if crate::disclose::handle_field_path(&e.field) {
                    self.handles.redacted(e.entry, next);
                }
                redacted_part(log, e.entry, &e.field)
                    .map(|part| vec![(e.entry, part)])
                    .unwrap_or_default()
            }
            _ => Vec::new(),
        };
        Sequenced::Append {
            leaf: d.leaf_bytes(at),
            accepted: accepted(at),
            key: Some(key),
            private: disclosures.into_iter().map(String::into_bytes).collect(),
            shred,
        }
    }

    fn committed(&mut self) {
        self.pending.clear();
        self.enrolled_in_batch.clear();
        self.handles.committed();
        self.handles_known = self.state.size;
        self.redactions_known = self.state.redactions.len();
    }

    const KEYED: bool = true;

    fn key_of(leaf: &[u8]) -> Option<ledger::EntryKey> {
        crate::envelope::decode_logged_leaf(leaf)
            .ok()
            .map(|(d, _)| envelope_key(&d))
    }

    /// Entries other writers of a shared log appended are folded into the
    /// state (each re-checked against the rules and its signature, as at
    /// the door), the keys enrolled by them are known, and the door's index
    /// learns the handles they gave from their kept disclosures. A
    /// redaction among them, or the log's switch to schema 3, reloads the
    /// whole index. Anything that does not fold in rebuilds the state from
    /// the log as after a failed batch.
    fn caught_up(&mut self, log: &LogView<'_>) {
        self.pending.clear();
        self.enrolled_in_batch.clear();
        if self.loading {
            // The start's own load reads the whole log when it runs.
            self.handles.failed(0);
            return;
        }
        let from = self.state.size;
        let redactions = self.state.redactions.len();
        let state = match std::mem::take(&mut self.state).replay_from(log, true) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, from, "entries other writers appended do not fold in; rebuilding the state");
                return self.failed(log);
            }
        };
        self.handles.failed(from);
        self.index_to(&state, log, from, redactions, false);
        self.keys.reset(&state);
        self.state = state;
    }

    fn failed(&mut self, log: &LogView<'_>) {
        self.pending.clear();
        self.enrolled_in_batch.clear();
        if self.loading {
            self.handles.failed(0);
            return;
        }
        match rebuild_state(log, &snapshot_seal_key(&self.ledger_key), None, false) {
            // What is saved stays as the saver knows it: this state notes
            // its changes from the end of the saved deltas, which is at or
            // before where the saver's next delta starts.
            Ok(Rebuilt { state: s, .. }) => {
                // Other writers of a shared log may have appended since
                // the index was complete.
                let (known, redactions) = (self.handles_known, self.redactions_known);
                self.index_to(&s, log, known, redactions, true);
                self.keys.reset(&s);
                self.state = s;
            }
            Err(e) => {
                tracing::error!(error = %e, "state rebuild after a failed commit failed; refusing writes");
                self.broken = true;
            }
        }
    }
}

impl EventSequencer {
    /// Brings the door's index to `state`, the log's as `log` reads it,
    /// from `known` (the size it was complete at, when the state held
    /// `redactions` redactions): loaded whole after a redaction since, or
    /// on a log that switched to handles since; otherwise it learns the
    /// handles given since, holding first what a failed batch accepted to
    /// what the log records (`after_failure`). A value that cannot be read
    /// refuses writes.
    fn index_to(
        &mut self,
        state: &State,
        log: &LogView<'_>,
        known: u64,
        redactions: usize,
        after_failure: bool,
    ) {
        let disclosed = |origin| disclosed_in(log, origin);
        let reload =
            state.redactions.len() != redactions || state.handles_from.is_none_or(|h| h >= known);
        let settled = if reload {
            HandleValues::load(handle_index_key(&self.ledger_key), state, disclosed)
                .map(|h| self.handles = h)
        } else if after_failure {
            self.handles.failed_against(state, known, disclosed)
        } else {
            self.handles.learn(state, known, disclosed)
        };
        match settled {
            Ok(()) => {
                self.handles_known = state.size;
                self.redactions_known = state.redactions.len();
            }
            Err(e) => {
                tracing::error!(error = %e, after_failure, "the values behind handles cannot be read; refusing writes");
                self.broken = true;
            }
        }
    }
}

/// The value the schema-3 companion of entry `origin` of `log` discloses,
/// from the disclosures kept beside it ([`companion_in`]): `None` when
/// redacted or not kept here (a restore from a backup taken without a
/// role); an error when it cannot be read.
fn disclosed_in(log: &LogView<'_>, origin: u64) -> Result<Option<String>, Error> {
    companion_in(&log.entry(origin)?.leaf, |part| {
        Ok(log.private_part(origin, part)?.into_iter().collect())
    })
}

/// The value the schema-3 companion of the logged `leaf` discloses, from
/// its kept private parts (`parts` reads them): `None` when the leaf names
/// no value or the part was redacted.
fn companion_in(
    leaf: &[u8],
    part: impl FnOnce(usize) -> Result<Vec<ledger::private::Part>, Error>,
) -> Result<Option<String>, Error> {
    let Ok((d, _)) = crate::envelope::decode_logged_leaf(leaf) else {
        return Ok(None);
    };
    let Some(at) = crate::handles::companion_part(&d.payload.event) else {
        return Ok(None);
    };
    // Only the companion's part is read (one key), not every part.
    let disclosure = match part(at)?.into_iter().next() {
        Some(ledger::private::Part::Open(b)) => String::from_utf8(b).unwrap_or_default(),
        Some(ledger::private::Part::Shredded) | None => return Ok(None),
    };
    Ok(crate::handles::companion_disclosed(
        &d.payload.event,
        &disclosure,
    ))
}

/// A log of signed domain events.
pub struct EventLog {
    ledger: Ledger<EventSequencer>,
    keys: Arc<KeyCache>,
    replay_error: std::sync::Mutex<Option<String>>,
    snapshot_key: [u8; 32],
    /// The key of the door's value hashes ([`handle_index_key`]).
    index_key: [u8; 32],
    restored_from: std::sync::Mutex<Option<u64>>,
    /// The size of the saved state the door's index of the values behind
    /// handles was resumed from at the last load, if it was.
    index_resumed: std::sync::Mutex<Option<u64>>,
    /// True until [`EventLog::load_state`] has installed the state.
    catching_up: std::sync::atomic::AtomicBool,
    /// Whether a log whose events do not replay still opens (writes
    /// refused).
    degraded: bool,
    /// Every submission passes it (shared); [`EventLog::with_writes_held`]
    /// holds it (exclusive).
    door: std::sync::RwLock<()>,
    /// The entries [`EventLog::load_state`] replayed without checking their
    /// signatures (from the snapshot to the head), for
    /// [`EventLog::check_tail_signatures`].
    unsigned_tail: std::sync::Mutex<(u64, u64)>,
    /// Held by [`EventLog::load_state`]: one load at a time.
    loading: std::sync::Mutex<()>,
    /// Held while the event-state snapshot or a delta is written (a
    /// periodic save, or [`EventLog::check_snapshot`] replacing a bad one),
    /// so that a save cannot overwrite a repair it did not see: what is
    /// saved, as far as this process knows (`None`: the next save is a
    /// whole snapshot).
    snapshot_write: std::sync::Mutex<Option<Saved>>,
    /// The length of the last snapshot saved: the next one's buffer size.
    snapshot_len: std::sync::atomic::AtomicUsize,
    /// The size and digest of the state the snapshot held, kept until
    /// [`EventLog::check_snapshot`] has compared it with a replay of the log.
    resumed: std::sync::Mutex<Option<Resumed>>,
    /// Set when the snapshot disagreed with the log: the live state is not
    /// saved again.
    distrusted: std::sync::atomic::AtomicBool,
    snapshot_refused: std::sync::Mutex<Option<String>>,
    /// The log's checkpoint origin, when the server said it
    /// ([`EventLog::set_origin`]).
    origin: std::sync::OnceLock<(String, bool)>,
}

/// Appends while [`EventLog::with_writes_held`] holds every other write.
pub struct HeldDoor<'a>(&'a EventLog);

impl HeldDoor<'_> {
    /// [`EventLog::append`], past the held door.
    pub fn append(&self, envelope: &[u8]) -> Result<Receipt<Accepted>, AppendError<Rejection>> {
        let sub = self
            .0
            .checked(envelope)
            .map_err(|reason| AppendError::Rejected {
                reason,
                recorded: None,
            })?;
        self.0.ledger.append_input(sub)
    }

    /// The log behind the door.
    pub fn log(&self) -> &EventLog {
        self.0
    }
}

/// The refusal of a write while the state is being caught up.
fn catching_up() -> Rejection {
    Rejection::new(
        RejectCode::LedgerUnavailable,
        "",
        "the ledger is catching up its state after a start; retry shortly",
    )
}

impl EventLog {
    /// Opens (or creates) the event log in `dir`. `ledger_key` signs the
    /// ledger's own records (blocked applies, recommendations); it must be
    /// enrolled with the `ledger` role for those to be recorded. The state is
    /// rebuilt from the saved snapshot and the log after it before this
    /// returns ([`EventLog::load_state`]).
    pub fn open(
        dir: &Path,
        config: Config,
        ledger_key: SigningKey,
        clock: Arc<dyn Clock>,
    ) -> Result<EventLog, Error> {
        let log = Self::open_inner(dir, config, ledger_key, clock, false)?;
        log.load_state()?;
        // The lookups too: writes are refused while they open.
        log.ledger.lookups()?;
        Ok(log)
    }

    /// Opens the log without its state: in O(log n), serving checked reads
    /// and proofs at once, and refusing every write with
    /// `ledger_unavailable` until [`EventLog::load_state`] (which the caller
    /// runs, in the background) has caught the state up. A log whose events
    /// do not replay (damage the O(log n) open-time self-check cannot see)
    /// then refuses writes for good; [`EventLog::replay_error`] says why.
    /// Reads stay checked. How a server starts in bounded time whatever the
    /// tail since its last snapshot, and says, rather than hides, that its
    /// log is damaged.
    pub fn open_deferred(
        dir: &Path,
        config: Config,
        ledger_key: SigningKey,
        clock: Arc<dyn Clock>,
    ) -> Result<EventLog, Error> {
        Self::open_inner(dir, config, ledger_key, clock, true)
    }

    fn open_inner(
        dir: &Path,
        config: Config,
        ledger_key: SigningKey,
        clock: Arc<dyn Clock>,
        degraded: bool,
    ) -> Result<EventLog, Error> {
        let keys = Arc::new(KeyCache::default());
        let k2 = Arc::clone(&keys);
        let snapshot_key = snapshot_seal_key(&ledger_key);
        let index_key = handle_index_key(&ledger_key);
        let ledger = Ledger::open_with(dir, config, move |_, _| {
            Ok(EventSequencer {
                state: State::default(),
                keys: k2,
                clock,
                ledger_key_id: key_id(&ledger_key.verifying_key()),
                ledger_key,
                broken: false,
                loading: true,
                pending: HashMap::new(),
                handles: HandleValues::new(index_key),
                handles_known: 0,
                redactions_known: 0,
                enrolled_in_batch: Default::default(),
            })
        })?;
        Ok(EventLog {
            ledger,
            keys,
            replay_error: std::sync::Mutex::new(None),
            snapshot_key,
            index_key,
            restored_from: std::sync::Mutex::new(None),
            index_resumed: std::sync::Mutex::new(None),
            catching_up: std::sync::atomic::AtomicBool::new(true),
            degraded,
            door: std::sync::RwLock::new(()),
            unsigned_tail: std::sync::Mutex::new((0, 0)),
            loading: std::sync::Mutex::new(()),
            snapshot_write: std::sync::Mutex::new(None),
            snapshot_len: std::sync::atomic::AtomicUsize::new(0),
            resumed: std::sync::Mutex::new(None),
            distrusted: std::sync::atomic::AtomicBool::new(false),
            snapshot_refused: std::sync::Mutex::new(None),
            origin: std::sync::OnceLock::new(),
        })
    }

    /// The state rebuilt from `view` ([`rebuild_state`]) and the door's
    /// index of the values behind handles: the saved one, with the handles
    /// the entries after it gave, read from their kept disclosures; or,
    /// when none was saved with the state or the entries after it redact a
    /// value (or switch the log to handles), loaded from the kept
    /// disclosures of every handle, read through the same view in log
    /// order. A part that cannot be read stops the load, rather than let
    /// the door forget a value.
    fn catch_up(&self, view: &LogView<'_>) -> Result<(Rebuilt, HandleValues), Error> {
        let mut rebuilt = rebuild_state(view, &self.snapshot_key, Some(&self.index_key), false)
            .map_err(|e| match e {
                crate::state::ReplayError::Log(e) => e,
                crate::state::ReplayError::Invalid { index, rejection } => ledger::Corruption::new(
                    index,
                    ledger::CorruptionKind::Malformed,
                    format!("logged event does not replay: {rejection}"),
                )
                .into(),
            })?;
        let state = &rebuilt.state;
        let disclosed = |origin| disclosed_in(view, origin);
        let started = std::time::Instant::now();
        let handles = match rebuilt.index.take() {
            Some(SavedIndex {
                mut index,
                size,
                redactions,
            }) if state.redactions.len() == redactions
                && state.handles_from.is_some_and(|h| h < size) =>
            {
                index.learn(state, size, disclosed)?;
                tracing::info!(
                    handles = index.len(),
                    from = size,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "the index of the values behind handles resumed from the saved state"
                );
                *self.index_resumed.lock().unwrap_or_else(|p| p.into_inner()) = Some(size);
                index
            }
            _ => {
                let index = HandleValues::load(self.index_key, state, disclosed)?;
                tracing::info!(
                    handles = index.len(),
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "the index of the values behind handles loaded from the kept disclosures"
                );
                *self.index_resumed.lock().unwrap_or_else(|p| p.into_inner()) = None;
                index
            }
        };
        Ok((rebuilt, handles))
    }

    /// Catches the state up to the head: the saved snapshot (when its seal
    /// and root check out) and the rules replayed over every entry after it,
    /// without a second signature check (each was checked when it was
    /// appended; the entries' bytes are checked against their leaf hashes
    /// as they are read, and the full verify proves them into the root).
    /// Writes are refused until it has run, so the head does not move
    /// under it. Does nothing once the state is loaded. On a log whose
    /// events do not replay, an error, or (opened degraded) writes refused
    /// for good and [`EventLog::replay_error`] set.
    pub fn load_state(&self) -> Result<(), Error> {
        use std::sync::atomic::Ordering::SeqCst;
        let _one = self.loading.lock().unwrap_or_else(|p| p.into_inner());
        if !self.catching_up.load(SeqCst) {
            return Ok(());
        }
        let started = std::time::Instant::now();
        let replayed = ledger::store::guarded("catching up the event state", || {
            self.ledger.with_replay_view(|view| self.catch_up(view))
        })
        .and_then(|r| r);
        match replayed {
            Ok((
                Rebuilt {
                    state,
                    resumed,
                    refused,
                    saved,
                    index: _,
                },
                handles,
            )) => {
                let size = state.size;
                *self
                    .snapshot_write
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = saved;
                self.keys.reset(&state);
                self.ledger.inspect_mut(|s| {
                    s.state = state;
                    s.handles = handles;
                    s.handles_known = size;
                    s.redactions_known = s.state.redactions.len();
                    s.loading = false;
                });
                let from = resumed.as_ref().map(|r| r.size);
                *self.restored_from.lock().unwrap_or_else(|p| p.into_inner()) = from;
                *self.unsigned_tail.lock().unwrap_or_else(|p| p.into_inner()) =
                    (from.unwrap_or(0), size);
                *self.resumed.lock().unwrap_or_else(|p| p.into_inner()) = resumed;
                *self
                    .snapshot_refused
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = refused;
                tracing::info!(
                    size,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "event state caught up"
                );
            }
            Err(e) if self.degraded => {
                tracing::error!(error = %e, "the log does not replay; refusing writes");
                *self.replay_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                self.ledger.inspect_mut(|s| {
                    s.broken = true;
                    s.loading = false;
                });
            }
            Err(e) => return Err(e),
        }
        self.catching_up.store(false, SeqCst);
        Ok(())
    }

    /// Checks the signature of every entry [`EventLog::load_state`] replayed
    /// without one (from the snapshot to the head it loaded at), against the
    /// keys enrolled: what keeps an entry appended to the data file by
    /// someone without a key (its hashes recomputed, so the log still
    /// verifies and extends its anchors) from passing. Returns how many
    /// entries it checked.
    pub fn check_tail_signatures(&self) -> Result<u64, String> {
        let (from, to) = *self.unsigned_tail.lock().unwrap_or_else(|p| p.into_inner());
        const CHUNK: u64 = 1024;
        let mut at = from;
        while at < to {
            let end = to.min(at + CHUNK);
            let entries = self.ledger.entries(at, end).map_err(|e| e.to_string())?;
            for e in entries {
                let bad = |why: String| format!("entry {}: {why}", e.index);
                let (d, _) =
                    crate::envelope::decode_logged_leaf(&e.leaf).map_err(|r| bad(r.to_string()))?;
                let key = signer_key(&d, &self.keys)
                    .ok_or_else(|| bad("signed by a key no principal enrolled".into()))?;
                d.verify(&key).map_err(|r| bad(r.to_string()))?;
            }
            at = end;
        }
        Ok(to - from)
    }

    /// Whether the state is still being caught up ([`EventLog::load_state`]):
    /// writes are refused until it is done.
    pub fn catching_up(&self) -> bool {
        self.catching_up.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Why writes and lookups by envelope id or leaf hash are refused while
    /// a start opens the lookups, or for good when opening them failed;
    /// `None` once they are open.
    pub fn lookups_refusal(&self) -> Option<Rejection> {
        let detail = match self.ledger.lookups_state() {
            ledger::LookupsState::Open => return None,
            ledger::LookupsState::Opening => "opening the lookups by leaf hash and envelope id after a start: reads, proofs and checkpoints are served; writes and lookups wait, retry shortly".to_owned(),
            ledger::LookupsState::Failed(why) => format!(
                "the lookups by leaf hash and envelope id could not be opened ({why}): writes and lookups are refused until restart"
            ),
        };
        Some(Rejection::new(RejectCode::LedgerUnavailable, "", detail))
    }

    /// Verifies `envelope`, or refuses it while the state is caught up or
    /// the lookups are opened (which can take minutes when they are rebuilt:
    /// a write is refused at once rather than held that long).
    fn checked(&self, envelope: &[u8]) -> Result<Submission, Rejection> {
        // One answer per envelope: the fallback is never taken.
        self.checked_many(&[envelope])
            .pop()
            .unwrap_or_else(|| Err(catching_up()))
    }

    /// [`EventLog::checked`] for each of `envelopes`, their signatures
    /// checked together ([`verify_submissions_deferred`]).
    fn checked_many<E: AsRef<[u8]>>(&self, envelopes: &[E]) -> Vec<Result<Submission, Rejection>> {
        let refused = if self.catching_up() {
            Some(catching_up())
        } else {
            self.lookups_refusal()
        };
        if let Some(refused) = refused {
            return envelopes.iter().map(|_| Err(refused.clone())).collect();
        }
        verify_submissions_deferred(envelopes, &self.keys, self.ledger.is_shared())
            .into_iter()
            .map(|sub| sub.and_then(|sub| self.origin_checked(sub)))
            .collect()
    }

    /// `sub`, unless it records a Sigstore root this server must refuse:
    /// one for another origin, or the synthetic test root where it is not
    /// allowed.
    fn origin_checked(&self, sub: Submission) -> Result<Submission, Rejection> {
        if let (Event::SigstoreRootTrusted(e), Some((origin, synthetic_ok))) =
            (&sub.decoded.payload.event, self.origin.get())
        {
            if &e.origin != origin {
                return Err(Rejection::new(
                    RejectCode::SigstoreOriginMismatch,
                    "event.body.origin",
                    format!("this log's origin is {origin:?}"),
                ));
            }
            if !synthetic_ok && sigstore_check::synthetic::is_synthetic(&e.trusted_root) {
                return Err(Rejection::new(
                    RejectCode::SigstoreTrustRootInvalid,
                    "event.body.trusted_root",
                    "this root names keys of the synthetic test instance, which anyone can sign with; this server is not configured for a demo (sigstore_allow_synthetic_root)",
                ));
            }
        }
        Ok(sub)
    }

    /// The origin of this log's checkpoints, and whether the synthetic
    /// Sigstore test root may be recorded: a `sigstore.root_trusted` event
    /// naming another origin, or (unless allowed) recording that root, is
    /// refused at the door. Set once, by the server that holds the log key.
    pub fn set_origin(&self, origin: &str, allow_synthetic_root: bool) {
        let _ = self.origin.set((origin.to_owned(), allow_synthetic_root));
    }

    /// The size of the state snapshot this open started from (the entries
    /// after it were replayed), or `None` when it replayed the whole log.
    pub fn restored_from(&self) -> Option<u64> {
        *self.restored_from.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Checks the event-state snapshot this open resumed from (if any)
    /// against a replay of the log up to the snapshot's size, re-checking
    /// every entry's rules (not its signatures: those were checked when it
    /// was appended, and the bytes are proven by the full verify): a
    /// snapshot whose seal verified can still have been
    /// sealed by someone holding the ledger's key. `Ok(None)` when the open
    /// replayed the whole log; `Ok(Some(size))` when the snapshot agreed.
    /// On a disagreement the replayed state is saved over the snapshot (so
    /// the next open starts right) and the error says so; the live state,
    /// which was folded from the bad snapshot, must not be trusted, and a
    /// server refuses writes and numbers until it is restarted.
    pub fn check_snapshot(&self) -> Result<Option<u64>, String> {
        let Some(resumed) = self
            .resumed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        else {
            return Ok(None);
        };
        let size = resumed.size;
        let replayed = ledger::store::guarded("checking the event-state snapshot", || {
            self.ledger.with_replay_view_at(size, |view| {
                // The rules, not the signatures: every signature was
                // checked when its entry was appended, and the entries' bytes
                // are proven by the full verify that runs beside this.
                let state = State::replay(view, false).map_err(|e| e.to_string())?;
                // The saved index, against one loaded from the kept
                // disclosures at the same size.
                let index = match resumed.index {
                    Some(_) => Some(
                        HandleValues::load(self.index_key, &state, |origin| {
                            disclosed_in(view, origin)
                        })
                        .map_err(|e| e.to_string())?
                        .bindings(),
                    ),
                    None => None,
                };
                Ok::<_, String>((state, index))
            })
        })
        .map_err(|e| e.to_string())
        .and_then(|r| r)
        .map_err(|e| format!("the event-state snapshot cannot be checked: {e}"))?;
        let (replayed, index) = replayed;
        let state_agrees = blake3::hash(&replayed.encode_snapshot()) == resumed.state;
        let index_agrees = match (&resumed.index, &index) {
            (Some(saved), Some(loaded)) => {
                // A value redacted since the start reads as gone to the
                // load: the handles of every redacted companion are left
                // out of both (those redacted before it are in neither).
                let gone = self.redacted_origins();
                let kept = |b: &[(Option<u64>, [u8; 32])]| {
                    b.iter()
                        .filter(|(origin, _)| origin.is_none_or(|o| !gone.contains(&o)))
                        .copied()
                        .collect::<Vec<_>>()
                };
                kept(saved) == kept(loaded)
            }
            _ => true,
        };
        if state_agrees && index_agrees {
            return Ok(Some(size));
        }
        let what = if state_agrees {
            "the index of the values behind handles saved with the event-state snapshot"
        } else {
            "the event-state snapshot"
        };
        let mut saved = self
            .snapshot_write
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        self.distrusted
            .store(true, std::sync::atomic::Ordering::SeqCst);
        *saved = None;
        let root = self.ledger.root_at(size).map_err(|e| e.to_string())?;
        // The deltas saved after it were taken from the same state: the
        // first is emptied with the snapshot's replacement, which ends
        // the chain.
        if let Err(e) = self.ledger.put_aux_all(&[
            (
                STATE_AUX,
                &ledger::sealed::seal(
                    &self.snapshot_key,
                    SNAPSHOT_MAGIC,
                    size,
                    &root,
                    &replayed.encode_snapshot(),
                ),
            ),
            (&state_delta_aux(0), &[]),
        ]) {
            tracing::error!(error = %e, "could not replace the disagreeing event-state snapshot");
        }
        // The replayed state is saved without an index: the next start
        // loads the index from the kept disclosures.
        Err(format!(
            "{what} at size {size} disagrees with a replay of the log; \
             writes are refused until the server restarts (the replayed state was saved)"
        ))
    }

    /// The size of the saved state the door's index of the values behind
    /// handles was resumed from at the last load (`None`: it was loaded
    /// from the kept disclosures of every handle).
    pub fn handle_index_resumed(&self) -> Option<u64> {
        *self.index_resumed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The entries whose handle-giving companion the committed state
    /// records as redacted.
    fn redacted_origins(&self) -> std::collections::HashSet<u64> {
        self.ledger.inspect_mut(|s| {
            s.state
                .redactions
                .iter()
                .filter(|(_, field)| crate::disclose::handle_field_path(field))
                .map(|(entry, _)| *entry)
                .collect()
        })
    }

    /// Why a saved event-state snapshot was refused on open (its seal did
    /// not verify, or it names a root the log does not have), if one was:
    /// the state was then replayed from the whole log. Derived state that
    /// does not match the log is a sign of bit rot or of tampering with the
    /// data file; a server counts and reports it.
    pub fn snapshot_refused(&self) -> Option<String> {
        self.snapshot_refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Saves the committed state, so the next open replays only the
    /// entries after it: as the changes since the last save (a delta, the
    /// keys the entries since then changed) while the deltas since the
    /// last whole snapshot are under half its size, otherwise whole (the
    /// snapshot, which ends the chain of deltas). Both are derived data in
    /// `aux`, never hashed into the log; each is sealed with a MAC keyed
    /// from the ledger's key and bound to the tree size and root it was
    /// taken at, a delta also to the size it continues from. An open that
    /// finds the snapshot altered, or at a root the log does not have,
    /// ignores it and replays the whole log; one that finds a delta
    /// altered resumes from the saved state before it. Returns the size it
    /// was taken at, or `None` when the state is not trustworthy (a failed
    /// rebuild). It briefly holds up the committer while it takes the
    /// changes (or encodes the whole state).
    pub fn save_state(&self) -> Result<Option<u64>, Error> {
        let started = std::time::Instant::now();
        let logged = |size: u64, whole: bool, bytes: usize| {
            tracing::info!(
                size,
                whole,
                bytes,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "event state saved"
            );
        };
        let mut saved = self
            .snapshot_write
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if self.replay_error().is_some()
            || self.distrusted.load(std::sync::atomic::Ordering::SeqCst)
        {
            return Ok(None);
        }
        let continues = saved.filter(|s| !s.whole_due());
        // Written where the sealed record will be, sized by the last save
        // (the state grows slowly), so that the state lock is not held
        // while the buffer grows by copying.
        let hint = self.snapshot_len.load(std::sync::atomic::Ordering::Relaxed);
        let taken = self.ledger.inspect_mut(|s| {
            if s.broken || s.loading {
                return None;
            }
            // A delta continues the chain where it ended, when the state
            // and the door's index have noted every change since (from
            // there or earlier: a key noted twice is written with its
            // value now).
            if let Some(c) = continues {
                if s.state.tracked_from().is_some_and(|from| from <= c.end)
                    && s.handles.noting_changes()
                {
                    if let Some(mut d) = s.state.take_delta() {
                        use base64::Engine as _;
                        d.from = c.end;
                        let index_moved = s.handles.has_changes();
                        d.handle_index = s
                            .handles
                            .take_changes()
                            .map(|b| base64::engine::general_purpose::STANDARD.encode(b));
                        return Some(Err((d, index_moved)));
                    }
                }
            }
            // The state, then the door's index of the values behind
            // handles (after the state's JSON, where a start that does not
            // read it ignores it).
            let mut body = ledger::sealed::Unsealed::with_capacity(hint + hint / 16);
            s.state.encode_snapshot_into(&mut body);
            s.handles.encode_into(&mut body);
            s.state.track_changes();
            s.handles.track_changes();
            Some(Ok((s.state.size, body)))
        });
        match taken {
            None => Ok(None),
            Some(Err((delta, index_moved))) => {
                let Some(c) = continues else {
                    return Ok(None);
                };
                let size = delta.size;
                if size == c.end {
                    if index_moved {
                        // Changes to the index without a new entry (never
                        // expected): taken, so the next save is whole.
                        *saved = None;
                    }
                    return Ok(Some(size));
                }
                // Until this delta is saved, the next save is whole: the
                // changes it holds have been taken.
                *saved = None;
                let root = self.ledger.root_at(size)?;
                let rec = ledger::sealed::seal(
                    &self.snapshot_key,
                    DELTA_MAGIC,
                    size,
                    &root,
                    &delta.encode(),
                );
                self.ledger.put_aux(&state_delta_aux(c.next), &rec)?;
                logged(size, false, rec.len());
                *saved = Some(Saved {
                    end: size,
                    next: c.next + 1,
                    deltas_len: c.deltas_len + rec.len(),
                    ..c
                });
                Ok(Some(size))
            }
            Some(Ok((size, body))) => {
                *saved = None;
                self.snapshot_len
                    .store(body.body().len(), std::sync::atomic::Ordering::Relaxed);
                let root = self.ledger.root_at(size)?;
                let rec = body.seal(&self.snapshot_key, SNAPSHOT_MAGIC, size, &root);
                // The first delta emptied with it: the chain starts again.
                self.ledger
                    .put_aux_all(&[(STATE_AUX, &rec), (&state_delta_aux(0), &[])])?;
                logged(size, true, rec.len());
                *saved = Some(Saved {
                    end: size,
                    next: 0,
                    snapshot_len: rec.len(),
                    deltas_len: 0,
                });
                Ok(Some(size))
            }
        }
    }

    /// Why the log did not replay, when opened with [`EventLog::open_deferred`]
    /// and caught up with [`EventLog::load_state`].
    pub fn replay_error(&self) -> Option<String> {
        self.replay_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The underlying log (reads, proofs, head).
    pub fn ledger(&self) -> &Ledger<EventSequencer> {
        &self.ledger
    }

    /// Verifies `envelope` and queues it; wait on the result for the receipt.
    pub fn submit(
        &self,
        envelope: &[u8],
    ) -> Result<PendingReceipt<EventSequencer>, AppendError<Rejection>> {
        self.queue(self.checked(envelope))
    }

    /// Queues a checked envelope, or passes on why it was refused.
    fn queue(
        &self,
        checked: Result<Submission, Rejection>,
    ) -> Result<PendingReceipt<EventSequencer>, AppendError<Rejection>> {
        let sub = checked.map_err(|reason| AppendError::Rejected {
            reason,
            recorded: None,
        })?;
        let _open = self.door.read().unwrap_or_else(|p| p.into_inner());
        Ok(self.ledger.submit_input(sub)?)
    }

    /// Verifies each of `envelopes` and queues the ones that pass, in the
    /// order given; one result per envelope, in that order. The checks that
    /// need no state (decoding, signatures, curator co-signatures) run on up
    /// to `threads` threads for a batch large enough to be worth it; each
    /// envelope is decided exactly as [`EventLog::submit`] decides it.
    /// Entries other callers submit meanwhile may fall between these.
    /// Signers are looked up among enrolled keys when each envelope is
    /// checked, so an envelope signed by a key that an earlier envelope of
    /// the same batch enrols is refused with `unknown_signer`.
    pub fn submit_many<E: AsRef<[u8]> + Sync>(
        &self,
        envelopes: &[E],
        threads: usize,
    ) -> Vec<Result<PendingReceipt<EventSequencer>, AppendError<Rejection>>> {
        /// Below this many envelopes per thread, one thread checks them all.
        const PER_THREAD: usize = 16;
        let threads = threads.clamp(1, envelopes.len().div_ceil(PER_THREAD).max(1));
        let check =
            |chunk: &[E]| -> Vec<Result<Submission, Rejection>> { self.checked_many(chunk) };
        let checked: Vec<Result<Submission, Rejection>> = if threads == 1 {
            check(envelopes)
        } else {
            let size = envelopes.len().div_ceil(threads);
            std::thread::scope(|scope| {
                let handles: Vec<_> = envelopes
                    .chunks(size)
                    .skip(1)
                    .map(|chunk| scope.spawn(move || check(chunk)))
                    .collect();
                let mut all = check(&envelopes[..size.min(envelopes.len())]);
                for h in handles {
                    match h.join() {
                        Ok(part) => all.extend(part),
                        Err(panic) => std::panic::resume_unwind(panic),
                    }
                }
                all
            })
        };
        checked.into_iter().map(|c| self.queue(c)).collect()
    }

    /// Verifies `envelope`, appends it, and blocks until it is durable or
    /// refused.
    pub fn append(&self, envelope: &[u8]) -> Result<Receipt<Accepted>, AppendError<Rejection>> {
        self.queue(self.checked(envelope))?.wait()
    }

    /// Runs `f` with every other write held at the door: submissions made
    /// meanwhile wait until `f` returns, so what `f` appends through its
    /// [`HeldDoor`] lands at the head once the writes already queued have
    /// landed. For records that must name the log just before them (a
    /// state commitment) under a steady stream of writes. Keep `f` short:
    /// writers wait for it.
    pub fn with_writes_held<R>(&self, f: impl FnOnce(&HeldDoor<'_>) -> R) -> R {
        let _held = self.door.write().unwrap_or_else(|p| p.into_inner());
        f(&HeldDoor(self))
    }

    /// The index of the committed entry with envelope id `id`, if any: the
    /// key lookup's answer, checked against the entry it names (an answer
    /// that does not check out is logged and treated as absent). An error
    /// when the lookup cannot answer (it is behind the log, or unreadable):
    /// never "absent" for an entry that may exist.
    pub fn find_id(&self, id: &str) -> Result<Option<u64>, Error> {
        let Some((entry, digest)) = self.ledger.find_key(id)? else {
            return Ok(None);
        };
        if carries(&entry.leaf, id, &digest).is_some() {
            return Ok(Some(entry.index));
        }
        tracing::warn!(
            id,
            index = entry.index,
            "the envelope id index names an entry without that id"
        );
        Ok(None)
    }

    /// Registered task classes and their current tiers (committed state),
    /// without copying the rest of the state.
    /// The origin the log's Sigstore trusted roots name, once one is
    /// recorded (every later root must name the same one).
    pub fn sigstore_origin(&self) -> Option<String> {
        self.ledger
            .inspect(|s| s.state.sigstore.as_ref().map(|t| t.origin.clone()))
    }

    pub fn task_class_tiers(&self) -> Vec<(String, crate::model::Tier)> {
        self.ledger.inspect(|s| {
            s.state
                .task_classes
                .iter()
                .map(|(k, v)| (k.clone(), v.tier))
                .collect()
        })
    }

    /// Checks that the ledger's own key (the one this log was opened with)
    /// is an enrolled principal with the `ledger` role and not revoked: the
    /// key genesis enrolled, or one enrolled later for a rotation. A log
    /// with no entries yet has nobody enrolled and passes. The error says
    /// what is wrong; a server refuses to start with it, since every record
    /// the ledger signs would be refused or, worse, be signed by a key
    /// nobody enrolled.
    ///
    /// Before the state is loaded ([`EventLog::open_deferred`]), a key that
    /// genesis enrolled with the `ledger` role passes at once (the first
    /// entries are read); any other key waits for the state to be loaded
    /// here, and is then checked against it. Call it again once the state
    /// is loaded to catch a revocation.
    pub fn check_ledger_key(&self) -> Result<(), String> {
        if self.catching_up() {
            if self.enrolled_at_genesis() {
                return Ok(());
            }
            self.load_state().map_err(|e| e.to_string())?;
        }
        self.ledger.inspect(|s| {
            if s.state.size == 0 {
                return Ok(());
            }
            match s.state.principals.get(&s.ledger_key_id) {
                None => Err(format!(
                    "the ledger key {} is not enrolled in this log (is this the log key `ledger init` made for it?)",
                    s.ledger_key_id
                )),
                Some(p) if p.revoked => Err(format!(
                    "the ledger key {} ({}) was revoked",
                    s.ledger_key_id, p.identity
                )),
                Some(p) if !p.roles.contains(&crate::model::Role::Ledger) => Err(format!(
                    "the ledger key {} ({}) is enrolled without the `ledger` role",
                    s.ledger_key_id, p.identity
                )),
                Some(_) => Ok(()),
            }
        })
    }

    /// Whether one of the log's first entries enrols the ledger's key with
    /// the `ledger` role (as `ledger init` does).
    fn enrolled_at_genesis(&self) -> bool {
        /// How many entries genesis spans, with room to spare.
        const GENESIS: u64 = 8;
        let id = self.ledger.inspect(|s| s.ledger_key_id.clone());
        let end = self.ledger.head().size.min(GENESIS);
        let Ok(entries) = self.ledger.entries(0, end) else {
            return false;
        };
        entries.iter().any(|e| {
            crate::envelope::decode_logged_leaf(&e.leaf).is_ok_and(|(d, _)| {
                matches!(&d.payload.event, Event::PrincipalEnrolled(p)
                    if parse_public_key(&p.public_key).is_some_and(|k| key_id(&k) == id)
                        && p.roles.contains(&crate::model::Role::Ledger))
            })
        })
    }

    /// The schema the log accepts now and the ledger writes its own events
    /// in ([`State::schema`]).
    pub fn schema(&self) -> u32 {
        self.ledger.inspect(|s| s.state.schema())
    }

    /// A copy of the live (committed) state.
    pub fn state(&self) -> State {
        self.ledger.inspect(|s| s.state.clone())
    }

    /// The state rebuilt from the committed log, re-verifying every signature.
    pub fn replay_state(&self) -> Result<State, crate::state::ReplayError> {
        let snap = self.ledger.snapshot()?;
        let head = self.ledger.head();
        State::replay(&LogView::without_lookups(&snap, head), true)
    }
}

/// The two writes that start a log: the operator enrolling its own key,
/// then enrolling the ledger's key with the `ledger` role. Each is an
/// envelope with the disclosure of the identity it commits to
/// ([`crate::envelope::sign_write`]).
pub fn genesis_envelopes(
    operator: &SigningKey,
    operator_identity: &str,
    ledger_key: &VerifyingKey,
    issued_at: &str,
) -> [Vec<u8>; 2] {
    let op_id = key_id(&operator.verifying_key());
    let enrol = |id: &str, key: &VerifyingKey, identity: &str, roles: Vec<Role>| Payload {
        schema: SCHEMA_VERSION,
        id: id.to_owned(),
        signer: op_id.clone(),
        issued_at: issued_at.to_owned(),
        event: Event::PrincipalEnrolled(PrincipalEnrolled {
            sigstore: None,
            public_key: public_key_b64(key),
            identity: identity.to_owned(),
            identity_name: None,
            roles,
        }),
    };
    [
        crate::envelope::sign_write(
            operator,
            enrol(
                "genesis-operator",
                &operator.verifying_key(),
                operator_identity,
                vec![Role::Operator],
            ),
        ),
        crate::envelope::sign_write(
            operator,
            enrol(
                "genesis-ledger-key",
                ledger_key,
                "evidence-ledger",
                vec![Role::Ledger],
            ),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_save_is_due_at_half_the_snapshot_or_at_the_cap() {
        let saved = |next, deltas_len| Saved {
            end: 10,
            next,
            snapshot_len: 1000,
            deltas_len,
        };
        assert!(!saved(0, 0).whole_due());
        assert!(!saved(MAX_DELTAS - 1, 499).whole_due());
        assert!(saved(3, 500).whole_due(), "deltas at half the snapshot");
        assert!(saved(MAX_DELTAS, 10).whole_due(), "the cap");
    }
}
