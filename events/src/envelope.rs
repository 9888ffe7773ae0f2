//! Signed envelopes and leaf records.
//!
//! - A write is a [DSSE](https://github.com/secure-systems-lab/dsse) JSON
//!   envelope: `{"payload": base64(payload), "payloadType": PAYLOAD_TYPE,
//!   "signatures": [{"keyid": ..., "sig": base64(ed25519(PAE(type, payload)))}]}`.
//!   The payload bytes are canonical JSON ([`crate::canonical`]) of a
//!   [`Payload`]. Standard DSSE libraries in Python and Go sign and verify it.
//! - The leaf the log hashes is the canonical JSON of
//!   `{"envelope": <the envelope>, "sequenced_at": <ledger time>, "v": 1}`,
//!   so the signature stays with the event and the ledger's own clock is
//!   inside the hash.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::canonical::{self, StrictError, Value};
use crate::model::{Payload, SCHEMA_VERSION};
use crate::reject::{reject, RejectCode, Rejection};

/// The DSSE payloadType of every event.
pub const PAYLOAD_TYPE: &str = "application/vnd.evidence-ledger.event+json";
/// The leaf record's version.
pub const LEAF_VERSION: i64 = 1;

/// DSSE pre-authentication encoding:
/// `"DSSEv1" SP len(type) SP type SP len(payload) SP payload`.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {} {} ",
        payload_type.len(),
        payload_type,
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

/// A principal's key id: lower-case hex SHA-256 of its 32-byte public key.
pub fn key_id(key: &VerifyingKey) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// A new signing key from the operating system's random source.
pub fn generate_key() -> Result<SigningKey, getrandom::Error> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed)?;
    Ok(SigningKey::from_bytes(&seed))
}

/// Base64 of a public key, as `principal.enrolled` carries it.
pub fn public_key_b64(key: &VerifyingKey) -> String {
    B64.encode(key.as_bytes())
}

/// The DSSE envelope as posted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    pub payload: String,
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    pub signatures: Vec<EnvelopeSignature>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvelopeSignature {
    pub keyid: String,
    pub sig: String,
}

/// Canonical payload bytes of a typed payload.
pub fn payload_bytes(p: &Payload) -> Vec<u8> {
    let json = serde_json::to_value(p).unwrap_or(serde_json::Value::Null);
    match canonical::from_json(&json) {
        Some(v) => canonical::encode(&v),
        None => serde_json::to_vec(&json).unwrap_or_default(),
    }
}

/// A write as posted: a DSSE envelope alone, or, when the event commits to
/// sensitive values (schema 2), `{"disclosures": [...], "envelope": {...}}`
/// with one disclosure per committed field (docs/PRIVACY.md).
#[derive(Debug, Clone, PartialEq)]
pub struct Write<'a> {
    /// The envelope's JSON bytes as posted.
    pub envelope: &'a [u8],
    pub disclosures: Vec<String>,
}

/// Takes a posted write apart: an object whose first key is `envelope` or
/// `disclosures` is the wrapped form; anything else is an envelope alone.
pub fn split_write(body: &[u8]) -> Result<Write<'_>, Rejection> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Wrapped<'a> {
        #[serde(borrow)]
        envelope: &'a serde_json::value::RawValue,
        disclosures: Vec<String>,
    }
    if !matches!(first_key(body), Some(b"envelope" | b"disclosures")) {
        return Ok(Write {
            envelope: body,
            disclosures: Vec::new(),
        });
    }
    let w: Wrapped<'_> = serde_json::from_slice(body).map_err(|e| {
        Rejection::new(
            RejectCode::MalformedEnvelope,
            "",
            format!("not a write {{\"disclosures\": [...], \"envelope\": {{...}}}}: {e}"),
        )
    })?;
    let raw = w.envelope.get().as_bytes();
    // The raw value borrows from `body`: find it there.
    let start = raw.as_ptr() as usize - body.as_ptr() as usize;
    Ok(Write {
        envelope: &body[start..start + raw.len()],
        disclosures: w.disclosures,
    })
}

/// The first key of a JSON object, when it has one without escapes.
fn first_key(b: &[u8]) -> Option<&[u8]> {
    let ws = |b: &[u8], mut i: usize| {
        while b.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
            i += 1;
        }
        i
    };
    let i = ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    let i = ws(b, i + 1);
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let rest = &b[i + 1..];
    let end = rest.iter().position(|&c| c == b'"' || c == b'\\')?;
    (rest[end] == b'"').then_some(&rest[..end])
}

/// The body that posts `envelope` with `disclosures`: the envelope alone
/// when there are none.
pub fn write_body(envelope: &[u8], disclosures: &[String]) -> Vec<u8> {
    if disclosures.is_empty() {
        return envelope.to_vec();
    }
    let mut out = b"{\"disclosures\":".to_vec();
    out.extend_from_slice(&serde_json::to_vec(disclosures).unwrap_or_default());
    out.extend_from_slice(b",\"envelope\":");
    out.extend_from_slice(envelope);
    out.push(b'}');
    out
}

/// Commits `payload`'s sensitive values when its schema is 2 or later
/// ([`crate::disclose::commit`]), signs it with `key`, and returns the body
/// to post ([`write_body`]). A schema-1 payload is signed as it is.
pub fn sign_write(key: &SigningKey, payload: Payload) -> Vec<u8> {
    sign_write_bound(key, payload, &[])
}

/// [`sign_write`], with the disclosures of values given their handles
/// before the event was built ([`crate::disclose::bind`]).
pub fn sign_write_bound(
    key: &SigningKey,
    mut payload: Payload,
    bound: &[crate::disclose::Bound],
) -> Vec<u8> {
    let disclosures = if payload.schema != crate::model::SCHEMA_CLEAR {
        crate::disclose::commit_with(&mut payload, bound).unwrap_or_default()
    } else {
        Vec::new()
    };
    write_body(&sign_envelope(key, &payload), &disclosures)
}

/// Signs `payload` with `key` and returns the envelope's JSON bytes, ready to
/// post. (The client side; the ledger itself uses it for its own events.)
pub fn sign_envelope(key: &SigningKey, payload: &Payload) -> Vec<u8> {
    let bytes = payload_bytes(payload);
    let sig = key.sign(&pae(PAYLOAD_TYPE, &bytes));
    let env = Envelope {
        payload: B64.encode(&bytes),
        payload_type: PAYLOAD_TYPE.to_owned(),
        signatures: vec![EnvelopeSignature {
            keyid: key_id(&key.verifying_key()),
            sig: B64.encode(sig.to_bytes()),
        }],
    };
    serde_json::to_vec(&env).unwrap_or_default()
}

/// Signs a co-signed statement (docs/EVENTS.md).
pub fn cosign(key: &SigningKey, statement: &[u8]) -> crate::model::CoSignature {
    crate::model::CoSignature {
        sigstore_bundle: None,
        key_id: key_id(&key.verifying_key()),
        signature: B64.encode(key.sign(statement).to_bytes()),
    }
}

/// The statement two curators sign to add a case or approve a proposal.
pub fn case_provenance_statement(case_id: &str, added_at: &str, case_digest: &str) -> Vec<u8> {
    format!("evidence-ledger/v1 case-provenance\n{case_id}\n{added_at}\n{case_digest}").into_bytes()
}

/// The statement two curators sign to retire a case.
pub fn case_retire_statement(case_id: &str, case_digest: &str) -> Vec<u8> {
    format!("evidence-ledger/v1 case-retire\n{case_id}\n{case_digest}").into_bytes()
}

/// The statement two maintainers sign to change a tier.
pub fn tier_change_statement(
    task_class: &str,
    from: &str,
    to: &str,
    recommendation_index: u64,
) -> Vec<u8> {
    format!("evidence-ledger/v1 tier-change\n{task_class}\n{from}\n{to}\n{recommendation_index}")
        .into_bytes()
}

/// The statement two maintainers co-sign to redact `field` of entry `entry`
/// whose leaf hash is `leaf_hash` (hex).
pub fn field_redact_statement(entry: u64, leaf_hash: &str, field: &str) -> Vec<u8> {
    format!("evidence-ledger/v1 field-redact\n{entry}\n{leaf_hash}\n{field}").into_bytes()
}

/// An envelope whose payload is strict, canonical and typed. Its signature
/// has been parsed but not yet verified.
#[derive(Debug, Clone)]
pub struct Decoded {
    pub payload: Payload,
    pub payload_bytes: Vec<u8>,
    /// BLAKE3 of the payload bytes: what idempotency compares.
    pub payload_digest: [u8; 32],
    pub keyid: String,
    pub signature: Signature,
    /// Co-signatures already verified before queueing, outside the
    /// committer (see [`Preverified`]); empty when decoded.
    pub preverified: Vec<Preverified>,
    /// The envelope's `payload` and `sig` text as posted. The decoder takes
    /// only canonical base64 (padding as the encoder writes it, no stray
    /// bits), so this is exactly the encoding of `payload_bytes` and
    /// `signature`, and [`Decoded::leaf_bytes`] copies it instead of
    /// encoding again.
    payload_b64: String,
    sig_b64: String,
}

/// A co-signature that verified with `public_key` over the statement whose
/// BLAKE3 is `statement_digest`. The committer skips its own check of a
/// co-signature only when all three match what it would check: the enrolled
/// key, the signature bytes and the statement. Anything else (an unknown or
/// changed key, another statement) is verified in the committer as before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preverified {
    pub public_key: [u8; 32],
    pub signature: [u8; 64],
    pub statement_digest: [u8; 32],
}

/// Why an envelope whose signature does not verify is refused.
pub(crate) fn signature_invalid() -> Rejection {
    Rejection::new(
        RejectCode::SignatureInvalid,
        "signatures[0].sig",
        "signature does not verify for the signer's key",
    )
}

impl Decoded {
    /// Verifies the envelope signature with `key` (strict Ed25519).
    pub fn verify(&self, key: &VerifyingKey) -> Result<(), Rejection> {
        if crate::ed25519::verify_strict(
            key,
            &pae(PAYLOAD_TYPE, &self.payload_bytes),
            &self.signature,
        ) {
            Ok(())
        } else {
            Err(signature_invalid())
        }
    }

    /// The envelope in its canonical JSON form.
    pub fn envelope_value(&self) -> Value {
        let mut sig = std::collections::BTreeMap::new();
        sig.insert("keyid".to_owned(), Value::Str(self.keyid.clone()));
        sig.insert(
            "sig".to_owned(),
            Value::Str(B64.encode(self.signature.to_bytes())),
        );
        let mut env = std::collections::BTreeMap::new();
        env.insert(
            "payload".to_owned(),
            Value::Str(B64.encode(&self.payload_bytes)),
        );
        env.insert(
            "payloadType".to_owned(),
            Value::Str(PAYLOAD_TYPE.to_owned()),
        );
        env.insert(
            "signatures".to_owned(),
            Value::Array(vec![Value::Object(sig)]),
        );
        Value::Object(env)
    }

    /// The leaf bytes for this envelope, sequenced at `sequenced_at` (µs since
    /// the Unix epoch, UTC).
    pub fn leaf_bytes(&self, sequenced_at: i64) -> Vec<u8> {
        // The canonical encoding of
        // {"envelope": envelope_value(), "sequenced_at": …, "v": LEAF_VERSION},
        // written directly (keys in canonical order); a unit test checks it
        // against the generic encoder.
        // Base64 text needs no escaping in a JSON string.
        let mut out = String::with_capacity(self.payload_b64.len() + 320);
        out.push_str("{\"envelope\":{\"payload\":\"");
        out.push_str(&self.payload_b64);
        out.push_str("\",\"payloadType\":");
        canonical::write_str(&mut out, PAYLOAD_TYPE);
        out.push_str(",\"signatures\":[{\"keyid\":");
        canonical::write_str(&mut out, &self.keyid);
        out.push_str(",\"sig\":\"");
        out.push_str(&self.sig_b64);
        out.push_str("\"}]},\"sequenced_at\":");
        canonical::write_str(&mut out, &format_micros(sequenced_at));
        out.push_str(",\"v\":");
        out.push_str(&LEAF_VERSION.to_string());
        out.push('}');
        out.into_bytes()
    }

    /// At least the length of [`Decoded::leaf_bytes`]: the base64 fields
    /// need no escaping, a key id byte takes at most 6 (`\u00XX`), and the
    /// rest (keys, the payload type, the time, the version) is under 256.
    fn leaf_len_bound(&self) -> usize {
        self.payload_b64.len() + self.sig_b64.len() + 6 * self.keyid.len() + 256
    }

    /// The leaf bytes through the generic canonical encoder: the definition
    /// [`Decoded::leaf_bytes`] is tested against.
    #[cfg(test)]
    fn leaf_bytes_generic(&self, sequenced_at: i64) -> Vec<u8> {
        let mut rec = std::collections::BTreeMap::new();
        rec.insert("envelope".to_owned(), self.envelope_value());
        rec.insert(
            "sequenced_at".to_owned(),
            Value::Str(format_micros(sequenced_at)),
        );
        rec.insert("v".to_owned(), Value::Int(LEAF_VERSION));
        canonical::encode(&Value::Object(rec))
    }
}

/// Decodes and checks a posted envelope: DSSE shape, payload type, base64,
/// strict canonical JSON, the typed schema, one signature by the payload's
/// signer. Does not verify the signature (see [`Decoded::verify`]).
pub fn decode_envelope(bytes: &[u8]) -> Result<Decoded, Rejection> {
    decode_envelope_as(bytes, Check::Door)
}

/// How much of the door's checking a decode repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// Everything: strict JSON, canonical form, types. For bytes from outside.
    Door,
    /// Types only. For a leaf read back from the log: it passed the door when
    /// it was appended, and the log's checked read has matched its bytes to
    /// the stored leaf hash.
    Logged,
}

fn decode_envelope_as(bytes: &[u8], check: Check) -> Result<Decoded, Rejection> {
    let env: Envelope = serde_json::from_slice(bytes).map_err(|e| {
        Rejection::new(
            RejectCode::MalformedEnvelope,
            "",
            format!("not a DSSE envelope: {e}"),
        )
    })?;
    if env.payload_type != PAYLOAD_TYPE {
        return reject(
            RejectCode::UnsupportedPayloadType,
            "payloadType",
            format!("must be {PAYLOAD_TYPE}"),
        );
    }
    let [sig] = env.signatures.as_slice() else {
        return reject(
            RejectCode::SignatureCount,
            "signatures",
            format!(
                "exactly one signature is required, found {}",
                env.signatures.len()
            ),
        );
    };
    let payload_bytes = B64.decode(env.payload.as_bytes()).or_else(|_| {
        reject(
            RejectCode::MalformedBase64,
            "payload",
            "not standard base64",
        )
    })?;
    let sig_bytes: [u8; 64] = B64
        .decode(sig.sig.as_bytes())
        .ok()
        .and_then(|v| v.try_into().ok())
        .ok_or_else(|| {
            Rejection::new(
                RejectCode::MalformedBase64,
                "signatures[0].sig",
                "not base64 of 64 bytes",
            )
        })?;
    let payload = match check {
        Check::Door => decode_payload(&payload_bytes)?,
        Check::Logged => supported(typed_payload(&payload_bytes)?)?,
    };
    if sig.keyid != payload.signer {
        return reject(
            RejectCode::SignerMismatch,
            "signatures[0].keyid",
            "must equal the payload's signer",
        );
    }
    let d = Decoded {
        payload_digest: *blake3::hash(&payload_bytes).as_bytes(),
        payload,
        payload_bytes,
        keyid: sig.keyid.clone(),
        signature: Signature::from_bytes(&sig_bytes),
        preverified: Vec::new(),
        sig_b64: sig.sig.clone(),
        payload_b64: env.payload,
    };
    // Every leaf must fit a C2SP entry bundle (a u16 length); the
    // sequencing time has a fixed width, so any time gives the length. The
    // leaf is built only when a bound on its length (the base64 fields as
    // they are, every key id byte escaped at worst, and the fixed parts)
    // does not already settle it: almost never.
    if check == Check::Door && d.leaf_len_bound() > ledger::tiles::MAX_ENTRY_BYTES {
        let len = d.leaf_bytes(0).len();
        if len > ledger::tiles::MAX_ENTRY_BYTES {
            return reject(
                RejectCode::EntryTooLarge,
                "payload",
                format!(
                    "the logged record would be {len} bytes; an entry holds at most {}",
                    ledger::tiles::MAX_ENTRY_BYTES
                ),
            );
        }
    }
    Ok(d)
}

/// Parses payload bytes: strict JSON, canonical, typed, supported schema.
pub fn decode_payload(bytes: &[u8]) -> Result<Payload, Rejection> {
    // Bytes the one-pass check settles pass both steps below; the rest
    // take them, which also name the fault.
    if canonical::is_canonical(bytes) {
        return supported(typed_payload(bytes)?);
    }
    let value = canonical::parse_strict(bytes).map_err(|e| match e {
        StrictError::Syntax(m) => Rejection::new(RejectCode::MalformedJson, "", m),
        StrictError::DuplicateKey(k) => Rejection::new(
            RejectCode::DuplicateKey,
            k.clone(),
            format!("key `{k}` appears twice"),
        ),
        StrictError::IntegerPrecision(n) => Rejection::new(
            RejectCode::IntegerPrecision,
            "",
            format!("integer {n} is outside ±(2^53 − 1)"),
        ),
    })?;
    let payload = supported(typed_payload(bytes)?)?;
    if let Err(canon) = canonical::require_canonical(bytes, &value) {
        return reject(
            RejectCode::NonCanonicalPayload,
            "payload",
            format!(
                "payload bytes are not canonical JSON (sorted keys, no whitespace; see docs/FORMAT.md); expected {} bytes: {}",
                canon.len(),
                String::from_utf8_lossy(&canon[..canon.len().min(200)])
            ),
        );
    }
    Ok(payload)
}

/// `payload`, if its schema is one this ledger reads (1 to 3) and its
/// sensitive fields are in the form that schema says
/// ([`crate::disclose::check_form`]).
fn supported(payload: Payload) -> Result<Payload, Rejection> {
    if !(crate::model::SCHEMA_CLEAR..=SCHEMA_VERSION).contains(&payload.schema) {
        return reject(
            RejectCode::UnsupportedSchema,
            "schema",
            format!(
                "schema {} is not supported; this ledger accepts 1 to {SCHEMA_VERSION}",
                payload.schema
            ),
        );
    }
    crate::disclose::check_form(&payload)?;
    Ok(payload)
}

/// Deserializes a payload in two steps so that errors inside an event body
/// carry their full path (`event.body.score.breakdown`): serde loses paths
/// inside adjacently tagged enums. The body is kept as raw JSON text between
/// the steps, so the payload is parsed once, not converted through a tree.
fn typed_payload(bytes: &[u8]) -> Result<Payload, Rejection> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct RawEvent<'a> {
        kind: String,
        #[serde(borrow)]
        body: &'a serde_json::value::RawValue,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct RawPayload<'a> {
        schema: u32,
        id: String,
        signer: String,
        issued_at: String,
        #[serde(borrow)]
        event: RawEvent<'a>,
    }
    let raw: RawPayload<'_> = deserialize_naming_path(bytes, "")?;
    let kind = raw.event.kind;
    let body = raw.event.body;
    let event = crate::model::Kind::from_name(&kind)
        .ok_or_else(|| {
            Rejection::new(
                RejectCode::UnknownEventKind,
                "event.kind",
                format!("`{kind}` is not an event kind (docs/EVENTS.md lists them)"),
            )
        })?
        .event(body.get().as_bytes())?;
    Ok(Payload {
        schema: raw.schema,
        id: raw.id,
        signer: raw.signer,
        issued_at: raw.issued_at,
        event,
    })
}

/// Deserializes a `T` from the JSON value at the start of `bytes`. Only a
/// failure pays for tracking the path to the field at fault: it parses
/// again under `serde_path_to_error`, which fails the same way, naming where.
pub(crate) fn deserialize_naming_path<'de, T: Deserialize<'de>>(
    bytes: &'de [u8],
    prefix: &str,
) -> Result<T, Rejection> {
    match T::deserialize(&mut serde_json::Deserializer::from_slice(bytes)) {
        Ok(t) => Ok(t),
        Err(plain) => {
            match serde_path_to_error::deserialize::<_, T>(
                &mut serde_json::Deserializer::from_slice(bytes),
            ) {
                Err(e) => Err(typed_error(e, prefix)),
                // Not reached: the same input fails the same way. Should it
                // pass, the first failure still refuses, without a path.
                Ok(_) => Err(Rejection::new(
                    RejectCode::InvalidValue,
                    prefix,
                    plain.to_string(),
                )),
            }
        }
    }
}

fn typed_error(e: serde_path_to_error::Error<serde_json::Error>, prefix: &str) -> Rejection {
    let inner = e.path().to_string();
    let path = match (prefix.is_empty(), inner.is_empty() || inner == ".") {
        (true, _) => inner,
        (false, true) => prefix.to_owned(),
        (false, false) => format!("{prefix}.{inner}"),
    };
    // serde_json names the byte position of text it parsed; the path says
    // where, and the message stays the same whatever the input's layout.
    let inner_err = e.inner();
    let mut msg = inner_err.to_string();
    let at = format!(
        " at line {} column {}",
        inner_err.line(),
        inner_err.column()
    );
    if inner_err.line() > 0 && msg.ends_with(&at) {
        msg.truncate(msg.len() - at.len());
    }
    let ticked = msg.split('`').nth(1).unwrap_or("").to_owned();
    let join = |p: &str, f: &str| {
        if p.is_empty() || p == "." {
            f.to_owned()
        } else {
            format!("{p}.{f}")
        }
    };
    if msg.starts_with("unknown field") {
        let field = if path.ends_with(&ticked) {
            path.clone()
        } else {
            join(&path, &ticked)
        };
        Rejection::new(RejectCode::UnknownField, field, msg)
    } else if msg.starts_with("missing field") {
        Rejection::new(RejectCode::MissingField, join(&path, &ticked), msg)
    } else if msg.starts_with("duplicate field") {
        Rejection::new(RejectCode::DuplicateKey, join(&path, &ticked), msg)
    } else if msg.starts_with("unknown variant") {
        Rejection::new(RejectCode::InvalidValue, path, msg)
    } else if msg.starts_with("invalid type") || msg.starts_with("invalid length") {
        Rejection::new(RejectCode::InvalidType, path, msg)
    } else {
        Rejection::new(RejectCode::InvalidValue, path, msg)
    }
}

/// Decodes a leaf written by the ledger: the envelope and its sequencing
/// time (µs since the Unix epoch, UTC).
pub fn decode_leaf(leaf: &[u8]) -> Result<(Decoded, i64), Rejection> {
    decode_leaf_as(leaf, Check::Door)
}

/// Decodes a leaf read back from the log through a checked read, for folds
/// over the log (projections): the types are parsed as in [`decode_leaf`],
/// but the strict-JSON and canonical-form checks are not repeated. The
/// leaf's bytes are the ones that passed those checks at the door, pinned
/// by its leaf hash. Replays that re-check every rule use [`decode_leaf`].
pub fn decode_logged_leaf(leaf: &[u8]) -> Result<(Decoded, i64), Rejection> {
    decode_leaf_as(leaf, Check::Logged)
}

fn decode_leaf_as(leaf: &[u8], check: Check) -> Result<(Decoded, i64), Rejection> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Leaf<'a> {
        #[serde(borrow)]
        envelope: &'a serde_json::value::RawValue,
        sequenced_at: String,
        v: i64,
    }
    let rec: Leaf<'_> = serde_json::from_slice(leaf).map_err(|e| {
        Rejection::new(
            RejectCode::MalformedEnvelope,
            "",
            format!("not a leaf record: {e}"),
        )
    })?;
    if rec.v != LEAF_VERSION {
        return reject(
            RejectCode::UnsupportedSchema,
            "v",
            format!("leaf version {}", rec.v),
        );
    }
    let decoded = decode_envelope_as(rec.envelope.get().as_bytes(), check)?;
    let at = parse_utc_micros(&rec.sequenced_at).ok_or_else(|| {
        Rejection::new(
            RejectCode::InvalidTimestamp,
            "sequenced_at",
            "not RFC 3339 UTC",
        )
    })?;
    Ok((decoded, at))
}

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
pub fn format_micros(micros: i64) -> String {
    chrono::DateTime::from_timestamp_micros(micros)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
        .unwrap_or_else(|| "invalid".to_owned())
}

/// Parses an RFC 3339 timestamp that ends in `Z` (UTC).
pub fn parse_utc_micros(s: &str) -> Option<i64> {
    if !s.ends_with('Z') || s.len() > 40 {
        return None;
    }
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.timestamp_micros())
}

/// The `anchor.published` envelope, signed with the ledger's key, that
/// records the publication of the checkpoint `note` at `(size, root)` to
/// `location` at time `now` (µs, UTC), in the log's schema `schema`
/// ([`crate::EventLog::schema`]). Its id is fixed by the size and the
/// note, so recording the same anchor twice is one entry.
pub fn anchor_published_envelope(
    ledger_key: &SigningKey,
    schema: u32,
    (size, root): (u64, &ledger::Hash),
    note: &str,
    location: &str,
    now: i64,
) -> Vec<u8> {
    // One record per anchor and place (the anchor file, then the Rekor
    // entry of the same anchor), each under its own id.
    let place = {
        let mut h = blake3::Hasher::new();
        h.update(note.as_bytes());
        h.update(b"\0");
        h.update(location.as_bytes());
        h.finalize()
    };
    let payload = crate::model::Payload {
        schema,
        id: format!("anchor-{size}-{}", &hex::encode(place.as_bytes())[..16]),
        signer: key_id(&ledger_key.verifying_key()),
        issued_at: format_micros(now),
        event: crate::model::Event::AnchorPublished(crate::model::AnchorPublished {
            checkpoint: crate::model::CheckpointRef {
                size,
                root: ledger::hash::to_hex(root),
            },
            location: location.to_owned(),
        }),
    };
    sign_envelope(ledger_key, &payload)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Event, RunStarted};

    fn decoded_with(id: &str) -> Decoded {
        let key = SigningKey::from_bytes(&[7u8; 32]);
        let payload = Payload {
            schema: SCHEMA_VERSION,
            id: id.to_owned(),
            signer: key_id(&key.verifying_key()),
            issued_at: "2026-11-22T00:00:00.000000Z".to_owned(),
            event: Event::RunStarted(RunStarted {
                run_id: "r\"1\\\u{1}é".to_owned(),
                task_class: "tc".to_owned(),
                harness_version: "h\n1".to_owned(),
                rubric_digest: format!("blake3:{}", "ab".repeat(32)),
                sandbox_image_digest: format!("sha256:{}", "cd".repeat(32)),
                isolation_class: crate::model::Isolation::Microvm,
            }),
        };
        match decode_envelope(&sign_envelope(&key, &payload)) {
            Ok(d) => d,
            Err(e) => panic!("own envelope does not decode: {e}"),
        }
    }

    #[test]
    fn direct_leaf_bytes_equal_the_generic_canonical_encoding() {
        for id in [
            "plain",
            "quote\"back\\slash",
            "ctl\u{1}\u{1f}\ttab",
            "ünïcødé ✓",
        ] {
            let d = decoded_with(id);
            assert!(d.leaf_len_bound() >= d.leaf_bytes(0).len(), "{id}");
            for at in [0, 1_763_769_600_123_456, -1] {
                assert_eq!(
                    d.leaf_bytes(at),
                    d.leaf_bytes_generic(at),
                    "id {id:?} at {at}"
                );
            }
        }
    }

    #[test]
    fn non_canonical_base64_does_not_decode() {
        // `QQ==` is the encoding of `A`: stray bits, missing or extra
        // padding are refused, so a posted text is the only encoding of
        // what it decodes to, and the leaf copies it (`leaf_bytes`).
        assert_eq!(B64.decode("QQ==").ok(), Some(b"A".to_vec()));
        for bad in ["QR==", "QQ", "QQ=", "QQ===", "QUI", "QUJ="] {
            assert!(B64.decode(bad).is_err(), "{bad}");
        }
    }

    proptest::proptest! {
        /// Any base64 the decoder takes is the encoding of what it decodes
        /// to: one character of a true encoding changed, anywhere.
        #[test]
        fn base64_that_decodes_is_the_encoding_of_its_bytes(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..48),
            at in proptest::prelude::any::<usize>(),
            ch in "[A-Za-z0-9+/=]",
        ) {
            let mut text = B64.encode(&bytes);
            if !text.is_empty() {
                let i = at % text.len();
                text.replace_range(i..=i, &ch);
            }
            if let Ok(back) = B64.decode(&text) {
                proptest::prop_assert_eq!(B64.encode(back), text);
            }
        }
    }

    #[test]
    fn a_leaf_decodes_to_the_envelope_it_was_built_from() {
        let d = decoded_with("round-trip");
        let (back, at) = match decode_leaf(&d.leaf_bytes(42)) {
            Ok(x) => x,
            Err(e) => panic!("leaf does not decode: {e}"),
        };
        assert_eq!(at, 42);
        assert_eq!(back.payload_bytes, d.payload_bytes);
        assert_eq!(back.payload, d.payload);
    }
}
