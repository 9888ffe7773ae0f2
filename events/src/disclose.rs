//! Sensitive fields as commitments (docs/PRIVACY.md).
//!
//! From schema 2 on, each field listed by [`fields`] holds `{"_sd": digest}`
//! instead of its value. The value travels beside the envelope in a
//! *disclosure*, shaped as RFC 9901 (SD-JWT) shapes one for an object
//! property: the base64url (no padding) of the canonical JSON array
//! `[salt, field, value]`, where `salt` is the base64url of 16 to 64 random
//! bytes and `field` the field's path in the body (`provenance.source_ref`).
//! The digest is the base64url of the SHA-256 of the disclosure's ASCII
//! bytes (RFC 9901, "Hashing Disclosures"). The signature and the leaf hash cover the digest,
//! never the value, so neither can be used to test a guessed value; and the
//! path inside the disclosure keeps a disclosure from opening another field.
//!
//! The ledger checks every disclosure at the door ([`open`]) and runs the
//! field's rule on the value before anything is appended; it keeps the
//! disclosures beside the log, each encrypted under its own key
//! (`ledger::private`), and hands them only to readers whose role allows
//! it. Any holder of a disclosure checks it against the leaf with
//! [`check_disclosed`].

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use base64::Engine;
use sha2::{Digest, Sha256};

use crate::canonical::{self, Value};
use crate::model::{Commitment, Disposition, Event, Payload, Sensitive, SCHEMA_CLEAR};
use crate::reject::{RejectCode, Rejection};

/// The fewest and most random bytes a salt may have.
pub const SALT_BYTES: std::ops::RangeInclusive<usize> = 16..=64;

/// The salt length this build writes (RFC 9901 recommends 128 bits or more).
const WRITE_SALT_BYTES: usize = 32;

/// What a sensitive field's value must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Free text (docs/EVENTS.md *text*).
    Text,
    /// `positive|negative|ambiguous`.
    Disposition,
}

/// One sensitive field of an event: where it is, what it must hold, and its
/// value or commitment.
pub trait Slot {
    /// The commitment's digest, when committed.
    fn digest(&self) -> Option<&str>;
    /// The value as JSON, when in clear.
    fn clear_json(&self) -> Option<Value>;
    /// Replaces the value with a commitment.
    fn set_committed(&mut self, c: Commitment);
}

impl Slot for Sensitive<String> {
    fn digest(&self) -> Option<&str> {
        self.committed()
    }
    fn clear_json(&self) -> Option<Value> {
        self.clear().map(|s| Value::Str(s.clone()))
    }
    fn set_committed(&mut self, c: Commitment) {
        *self = Sensitive::Committed(c);
    }
}

impl Slot for Sensitive<Disposition> {
    fn digest(&self) -> Option<&str> {
        self.committed()
    }
    fn clear_json(&self) -> Option<Value> {
        self.clear()
            .map(|d| Value::Str(disposition_name(*d).to_owned()))
    }
    fn set_committed(&mut self, c: Commitment) {
        *self = Sensitive::Committed(c);
    }
}

fn disposition_name(d: Disposition) -> &'static str {
    match d {
        Disposition::Positive => "positive",
        Disposition::Negative => "negative",
        Disposition::Ambiguous => "ambiguous",
    }
}

fn disposition(s: &str) -> Option<Disposition> {
    match s {
        "positive" => Some(Disposition::Positive),
        "negative" => Some(Disposition::Negative),
        "ambiguous" => Some(Disposition::Ambiguous),
        _ => None,
    }
}

/// Lists an event's sensitive fields, in this order: the one list of what
/// schema 2 commits. `$r` is `&` or `&mut`.
macro_rules! sensitive_fields {
    ($event:expr, $slot:ty, $($r:tt)+) => {{
        let v: Vec<(&'static str, Rule, $slot)> = match $event {
            Event::PrincipalRevoked(e) => vec![("reason", Rule::Text, $($r)+ e.reason)],
            Event::CaseAdded(e) => vec![
                ("title", Rule::Text, $($r)+ e.title),
                ("disposition", Rule::Disposition, $($r)+ e.disposition),
                ("difficulty", Rule::Text, $($r)+ e.difficulty),
                ("provenance.source_ref", Rule::Text, $($r)+ e.provenance.source_ref),
            ],
            Event::CaseRetired(e) => vec![("reason", Rule::Text, $($r)+ e.reason)],
            Event::CaseProposed(e) => vec![
                ("draft.title", Rule::Text, $($r)+ e.draft.title),
                ("draft.disposition", Rule::Disposition, $($r)+ e.draft.disposition),
                ("draft.difficulty", Rule::Text, $($r)+ e.draft.difficulty),
                ("production_ref", Rule::Text, $($r)+ e.production_ref),
            ],
            Event::ProposalRejected(e) => vec![("reason", Rule::Text, $($r)+ e.reason)],
            Event::ScoreRecorded(e) => vec![(
                "operator_fingerprint",
                Rule::Text,
                $($r)+ e.operator_fingerprint,
            )],
            Event::RagRecordQuarantined(e) => vec![("reason", Rule::Text, $($r)+ e.reason)],
            Event::FieldRedacted(e) => vec![("reason", Rule::Text, $($r)+ e.reason)],
            _ => Vec::new(),
        };
        v
    }};
}

/// The sensitive fields schema 2 commits, in order: path in the body, rule,
/// and the field.
pub fn fields(event: &Event) -> Vec<(&'static str, Rule, &dyn Slot)> {
    sensitive_fields!(event, &dyn Slot, &)
}

fn fields_mut(event: &mut Event) -> Vec<(&'static str, Rule, &mut dyn Slot)> {
    sensitive_fields!(event, &mut dyn Slot, &mut)
}

/// The position among `event`'s kept disclosures of its committed field
/// `path`: the part of the entry that holds that field's disclosure.
pub fn part_of(event: &Event, path: &str) -> Option<usize> {
    fields(event)
        .into_iter()
        .filter(|(_, _, s)| s.digest().is_some())
        .position(|(p, _, _)| p == path)
}

/// The paths of the fields schema 2 commits, for each kind: the list
/// docs/EVENTS.md and the field-class test hold to the catalogue.
pub fn committed_paths(kind: crate::model::Kind) -> &'static [&'static str] {
    use crate::model::Kind::*;
    match kind {
        PrincipalRevoked | CaseRetired | ProposalRejected | RagRecordQuarantined
        | FieldRedacted => &["reason"],
        CaseAdded => &[
            "title",
            "disposition",
            "difficulty",
            "provenance.source_ref",
        ],
        CaseProposed => &[
            "draft.title",
            "draft.disposition",
            "draft.difficulty",
            "production_ref",
        ],
        ScoreRecorded => &["operator_fingerprint"],
        _ => &[],
    }
}

fn reject<T>(
    code: RejectCode,
    field: impl Into<String>,
    msg: impl Into<String>,
) -> Result<T, Rejection> {
    Err(Rejection::new(code, field, msg))
}

/// Schema 1 holds every sensitive value in clear; schema 2 holds a
/// commitment in each sensitive field and nothing else committed.
pub fn check_form(payload: &Payload) -> Result<(), Rejection> {
    let clear_schema = payload.schema == SCHEMA_CLEAR;
    for (path, _, slot) in fields(&payload.event) {
        let field = format!("event.body.{path}");
        match (clear_schema, slot.digest()) {
            (true, Some(_)) => {
                return reject(
                    RejectCode::CommitmentNotAllowed,
                    field,
                    "schema 1 holds this field in clear; commitments need schema 2",
                )
            }
            (false, None) => {
                return reject(
                    RejectCode::SensitiveValueInClear,
                    field,
                    "schema 2 holds a commitment {\"_sd\": digest} in this field, never the value (docs/PRIVACY.md)",
                )
            }
            (false, Some(d)) if !is_digest(d) => {
                return reject(
                    RejectCode::InvalidValue,
                    format!("{field}._sd"),
                    "must be the base64url (no padding) of a 32-byte SHA-256 digest",
                )
            }
            _ => {}
        }
    }
    Ok(())
}

fn is_digest(d: &str) -> bool {
    d.len() == 43
        && B64URL
            .decode(d.as_bytes())
            .is_ok_and(|b| b.len() == 32 && B64URL.encode(&b) == d)
}

/// The digest of a disclosure: base64url of the SHA-256 of its bytes.
pub fn digest(disclosure: &str) -> String {
    B64URL.encode(Sha256::digest(disclosure.as_bytes()))
}

/// The disclosure of `value` for the field at `path` with `salt`.
pub fn disclosure(salt: &[u8], path: &str, value: &Value) -> String {
    let array = Value::Array(vec![
        Value::Str(B64URL.encode(salt)),
        Value::Str(path.to_owned()),
        value.clone(),
    ]);
    B64URL.encode(canonical::encode(&array))
}

/// A disclosure taken apart.
#[derive(Debug, Clone, PartialEq)]
pub struct Opened {
    pub path: String,
    pub value: Value,
}

/// Takes a disclosure apart: base64url of canonical JSON `[salt, path,
/// value]`, the salt 16 to 64 bytes.
pub fn parse(disclosure: &str, at: &str) -> Result<Opened, Rejection> {
    let malformed = |why: &str| {
        Rejection::new(
            RejectCode::DisclosureMalformed,
            at,
            format!("{why}; a disclosure is the base64url (no padding) of the canonical JSON array [salt, field, value]"),
        )
    };
    let bytes = B64URL
        .decode(disclosure.as_bytes())
        .ok()
        .filter(|b| B64URL.encode(b) == disclosure)
        .ok_or_else(|| malformed("not base64url without padding"))?;
    let value = canonical::parse_strict(&bytes).map_err(|_| malformed("not strict JSON"))?;
    if canonical::require_canonical(&bytes, &value).is_err() {
        return Err(malformed("not canonical JSON"));
    }
    let Value::Array(mut parts) = value else {
        return Err(malformed("not a JSON array"));
    };
    if parts.len() != 3 {
        return Err(malformed("not three elements"));
    }
    let value = parts.pop().unwrap_or(Value::Null);
    let (Value::Str(salt), Value::Str(path)) = (&parts[0], &parts[1]) else {
        return Err(malformed("the salt and the field must be strings"));
    };
    let salt_ok = B64URL
        .decode(salt.as_bytes())
        .is_ok_and(|s| SALT_BYTES.contains(&s.len()) && B64URL.encode(&s) == *salt);
    if !salt_ok {
        return Err(malformed("the salt must be base64url of 16 to 64 bytes"));
    }
    Ok(Opened {
        path: path.clone(),
        value,
    })
}

/// Checks `disclosures` against the commitments of `payload` (schema 2) at
/// the door: each committed field needs exactly one disclosure whose digest
/// it holds, naming that field, whose value passes the field's rule; a
/// disclosure no field commits to is refused. Returns the disclosures in
/// [`fields`] order: what the ledger keeps.
pub fn open(payload: &Payload, disclosures: &[String]) -> Result<Vec<String>, Rejection> {
    let mut used = vec![false; disclosures.len()];
    let mut kept = Vec::new();
    let committed = fields(&payload.event);
    if committed.iter().all(|(_, _, s)| s.digest().is_none()) && disclosures.is_empty() {
        return Ok(kept);
    }
    let digests: Vec<String> = disclosures.iter().map(|d| digest(d)).collect();
    for (path, rule, slot) in committed {
        let Some(want) = slot.digest().map(str::to_owned) else {
            continue;
        };
        let field = format!("event.body.{path}");
        let Some(i) = digests.iter().position(|d| *d == want) else {
            return reject(
                RejectCode::DisclosureMissing,
                field,
                "no disclosure has this field's digest",
            );
        };
        if used[i] {
            return reject(
                RejectCode::DisclosureMissing,
                field,
                "one disclosure cannot open two fields",
            );
        }
        used[i] = true;
        let opened = parse(&disclosures[i], &format!("disclosures[{i}]"))?;
        if opened.path != path {
            return reject(
                RejectCode::DisclosureFieldMismatch,
                format!("disclosures[{i}]"),
                format!(
                    "it discloses `{}`, but its digest is in `{path}`",
                    opened.path
                ),
            );
        }
        check_value(rule, &opened.value, &field)?;
        kept.push(disclosures[i].clone());
    }
    if let Some(i) = used.iter().position(|u| !u) {
        return reject(
            RejectCode::DisclosureUnused,
            format!("disclosures[{i}]"),
            "no field of the event commits to this disclosure",
        );
    }
    Ok(kept)
}

/// A disclosed value's rule, as for the value in clear.
fn check_value(rule: Rule, v: &Value, field: &str) -> Result<(), Rejection> {
    let Value::Str(s) = v else {
        return reject(
            RejectCode::InvalidType,
            field,
            "the disclosed value must be a string",
        );
    };
    match rule {
        Rule::Text => crate::state::check_text(s, field),
        Rule::Disposition if disposition(s).is_some() => Ok(()),
        Rule::Disposition => reject(
            RejectCode::InvalidValue,
            field,
            "must be positive, negative or ambiguous",
        ),
    }
}

/// What a reader learns by checking what it was given against the leaf.
#[derive(Debug, Clone, PartialEq)]
pub struct Disclosed {
    /// The field's path in the body.
    pub path: &'static str,
    /// The value, or `None` where nothing was disclosed.
    pub value: Option<Value>,
}

/// Checks disclosures a reader received against the event's commitments,
/// as any holder of them can: each must be a well-formed disclosure whose
/// digest one committed field holds and that names that field, and each
/// field is opened at most once. Returns every committed field, with its
/// value where it was disclosed.
pub fn check_disclosed(event: &Event, disclosures: &[String]) -> Result<Vec<Disclosed>, String> {
    let committed: Vec<(&'static str, String)> = fields(event)
        .into_iter()
        .filter_map(|(p, _, s)| s.digest().map(|d| (p, d.to_owned())))
        .collect();
    let mut out: Vec<Disclosed> = committed
        .iter()
        .map(|(p, _)| Disclosed {
            path: p,
            value: None,
        })
        .collect();
    for (i, d) in disclosures.iter().enumerate() {
        let want = digest(d);
        let Some(at) = committed.iter().position(|(_, c)| *c == want) else {
            return Err(format!(
                "disclosure {i} matches no commitment in the entry (a wrong value or salt, or another entry's)"
            ));
        };
        let opened = parse(d, &format!("disclosures[{i}]")).map_err(|r| r.to_string())?;
        if opened.path != committed[at].0 {
            return Err(format!(
                "disclosure {i} names `{}` but opens `{}`",
                opened.path, committed[at].0
            ));
        }
        if out[at].value.is_some() {
            return Err(format!("disclosure {i} opens `{}` twice", opened.path));
        }
        out[at].value = Some(opened.value);
    }
    Ok(out)
}

/// Commits every sensitive value `payload` holds in clear, with fresh
/// random salts, and sets its schema to 2: what a client does before it
/// signs. Returns the disclosures to send beside the envelope.
pub fn commit(payload: &mut Payload) -> Result<Vec<String>, getrandom::Error> {
    let mut out = Vec::new();
    for (path, _, slot) in fields_mut(&mut payload.event) {
        let Some(value) = slot.clear_json() else {
            continue;
        };
        let mut salt = [0u8; WRITE_SALT_BYTES];
        getrandom::fill(&mut salt)?;
        let d = disclosure(&salt, path, &value);
        slot.set_committed(Commitment { sd: digest(&d) });
        out.push(d);
    }
    payload.schema = crate::model::SCHEMA_VERSION;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 9901's example disclosure of `"given_name": "John"` and its
    /// digest: the hashing this module does is SD-JWT's.
    #[test]
    fn the_digest_is_sd_jwts() {
        let d = "WyIyR0xDNDJzS1F2ZUNmR2ZyeU5STjl3IiwgImdpdmVuX25hbWUiLCAiSm9obiJd";
        assert_eq!(digest(d), "jsu9yVulwQQlhFlM_3JlzMaSFzglhQG0DpfayQwLUK4");
    }

    #[test]
    fn a_disclosure_parses_to_what_it_was_made_of() {
        let d = disclosure(&[7u8; 16], "title", &Value::Str("a \"title\"".into()));
        let o = parse(&d, "d").expect("ok");
        assert_eq!(o.path, "title");
        assert_eq!(o.value, Value::Str("a \"title\"".into()));
    }

    #[test]
    fn a_short_salt_or_a_non_canonical_array_is_malformed() {
        let short = disclosure(&[7u8; 15], "title", &Value::Str("t".into()));
        assert_eq!(
            parse(&short, "d").expect_err("refused").code,
            RejectCode::DisclosureMalformed
        );
        let spaced = B64URL.encode(br#"["AAAAAAAAAAAAAAAAAAAAAA", "title", "t"]"#);
        assert_eq!(
            parse(&spaced, "d").expect_err("refused").code,
            RejectCode::DisclosureMalformed
        );
        let padded = format!("{}=", disclosure(&[7u8; 16], "t", &Value::Str("x".into())));
        assert_eq!(
            parse(&padded, "d").expect_err("refused").code,
            RejectCode::DisclosureMalformed
        );
    }
}
