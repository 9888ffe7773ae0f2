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
use crate::model::{
    Commitment, Disposition, Event, Payload, Sensitive, SCHEMA_CLEAR, SCHEMA_HANDLES,
};
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
    /// An identifier (docs/EVENTS.md *identifier*).
    Ident,
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
/// schemas 2 and 3 commit (a schema-3 companion last, when the event holds
/// one). `$r` is `&` or `&mut`.
macro_rules! sensitive_fields {
    ($event:expr, $slot:ty, $($r:tt)+) => {{
        // A schema-3 companion (the value behind a handle) comes last,
        // when the event holds one: the parts of schema-2 entries keep
        // their places.
        let v: Vec<(&'static str, Rule, $slot)> = match $event {
            Event::PrincipalEnrolled(e) => ($($r)+ e.identity_name).into_iter().map(|n| ("identity_name", Rule::Text, n as $slot)).collect::<Vec<_>>(),
            Event::CapabilityMinted(e) => ($($r)+ e.workflow_name).into_iter().map(|n| ("workflow_name", Rule::Ident, n as $slot)).collect::<Vec<_>>(),
            Event::PrincipalRevoked(e) => vec![("reason", Rule::Text, $($r)+ e.reason)],
            Event::CaseAdded(e) => {
                let mut v: Vec<(&'static str, Rule, $slot)> = vec![
                    ("title", Rule::Text, $($r)+ e.title),
                    ("disposition", Rule::Disposition, $($r)+ e.disposition),
                    ("difficulty", Rule::Text, $($r)+ e.difficulty),
                    ("provenance.source_ref", Rule::Text, $($r)+ e.provenance.source_ref),
                ];
                v.extend(($($r)+ e.case_name).into_iter().map(|n| ("case_name", Rule::Ident, n as $slot)));
                v
            }
            Event::CaseRetired(e) => vec![("reason", Rule::Text, $($r)+ e.reason)],
            Event::CaseProposed(e) => {
                let mut v: Vec<(&'static str, Rule, $slot)> = vec![
                    ("draft.title", Rule::Text, $($r)+ e.draft.title),
                    ("draft.disposition", Rule::Disposition, $($r)+ e.draft.disposition),
                    ("draft.difficulty", Rule::Text, $($r)+ e.draft.difficulty),
                    ("production_ref", Rule::Text, $($r)+ e.production_ref),
                ];
                v.extend(($($r)+ e.draft.case_name).into_iter().map(|n| ("draft.case_name", Rule::Ident, n as $slot)));
                v
            }
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

/// The sensitive fields schemas 2 and 3 commit, in order: path in the
/// body, rule, and the field.
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

/// The paths of the fields schemas 2 and 3 commit, for each kind (the
/// schema-3 companions last): the list docs/EVENTS.md and the field-class
/// test hold to the catalogue.
pub fn committed_paths(kind: crate::model::Kind) -> &'static [&'static str] {
    use crate::model::Kind::*;
    match kind {
        PrincipalRevoked | CaseRetired | ProposalRejected | RagRecordQuarantined
        | FieldRedacted => &["reason"],
        PrincipalEnrolled => &["identity_name"],
        CapabilityMinted => &["workflow_name"],
        CaseAdded => &[
            "title",
            "disposition",
            "difficulty",
            "provenance.source_ref",
            "case_name",
        ],
        CaseProposed => &[
            "draft.title",
            "draft.disposition",
            "draft.difficulty",
            "production_ref",
            "draft.case_name",
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

/// What a schema-3 handle names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HandleClass {
    /// A case id (`case.added`, a `case.proposed` draft).
    Case,
    /// A principal's identity (`principal.enrolled`).
    Identity,
    /// A RAG workflow id (`rag.capability.minted`).
    Workflow,
}

impl HandleClass {
    pub fn as_str(self) -> &'static str {
        match self {
            HandleClass::Case => "case",
            HandleClass::Identity => "identity",
            HandleClass::Workflow => "workflow",
        }
    }
}

/// An identifier that names a sensitive value where the value is first
/// named: in schema 3 a handle, with the value committed beside it.
#[derive(Debug, Clone, Copy)]
pub struct HandleField<'a> {
    pub class: HandleClass,
    /// The identifier's path in the body (`case_id`, `draft.case_id`).
    pub handle_path: &'static str,
    /// The identifier: the value in clear (schema 1 and 2), its handle
    /// (schema 3).
    pub handle: &'a str,
    /// The companion's path in the body (`case_name`, `draft.case_name`).
    pub name_path: &'static str,
    /// The companion: the commitment to the value (schema 3 only).
    pub name: Option<&'a Sensitive<String>>,
}

impl HandleField<'_> {
    /// The handle is the digest of the commitment beside it: the event
    /// gives the value its handle.
    pub fn derived(&self) -> bool {
        self.name.and_then(|n| n.committed()) == Some(self.handle)
    }
}

/// The kinds that name a case, a person or a workflow first: those with a
/// [`handle_field`].
pub const NAMING_KINDS: [crate::model::Kind; 4] = [
    crate::model::Kind::CaseAdded,
    crate::model::Kind::CaseProposed,
    crate::model::Kind::PrincipalEnrolled,
    crate::model::Kind::CapabilityMinted,
];

/// The identifier of `event` that names a sensitive value where that value
/// is first named, if it has one.
pub fn handle_field(event: &Event) -> Option<HandleField<'_>> {
    let (class, handle_path, handle, name_path, name) = match event {
        Event::CaseAdded(e) => (
            HandleClass::Case,
            "case_id",
            &e.case_id,
            "case_name",
            &e.case_name,
        ),
        Event::CaseProposed(e) => (
            HandleClass::Case,
            "draft.case_id",
            &e.draft.case_id,
            "draft.case_name",
            &e.draft.case_name,
        ),
        Event::PrincipalEnrolled(e) => (
            HandleClass::Identity,
            "identity",
            &e.identity,
            "identity_name",
            &e.identity_name,
        ),
        Event::CapabilityMinted(e) => (
            HandleClass::Workflow,
            "workflow_id",
            &e.workflow_id,
            "workflow_name",
            &e.workflow_name,
        ),
        _ => return None,
    };
    Some(HandleField {
        class,
        handle_path,
        handle,
        name_path,
        name: name.as_ref(),
    })
}

/// Whether `path` is a schema-3 companion: the value behind a handle.
pub fn handle_field_path(path: &str) -> bool {
    matches!(
        path,
        "case_name" | "draft.case_name" | "identity_name" | "workflow_name"
    )
}

/// Schema 1 holds every sensitive value in clear; schema 2 holds a
/// commitment in each sensitive field and nothing else committed; schema 3
/// also holds, beside each identifier that names a sensitive value where
/// that value is first named, the commitment to the value
/// ([`handle_field`]), and schemas 1 and 2 hold no such companion.
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
                    "from schema 2, this field holds a commitment {\"_sd\": digest}, never the value (docs/PRIVACY.md)",
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
    if let Some(h) = handle_field(&payload.event) {
        let field = format!("event.body.{}", h.name_path);
        match (payload.schema >= SCHEMA_HANDLES, h.name.is_some()) {
            (false, true) => {
                return reject(
                    RejectCode::UnknownField,
                    field,
                    format!(
                        "schema 3 adds this field; schema {} does not have it",
                        payload.schema
                    ),
                )
            }
            (true, false) => {
                return reject(
                    RejectCode::MissingField,
                    field,
                    format!(
                        "schema 3 commits here the value `{}` is the handle of (docs/PRIVACY.md, \"Handles\")",
                        h.handle_path
                    ),
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
        Rule::Ident => crate::state::check_ident(s, field),
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

/// A value given a handle before the event that names it is built (a
/// case's handle goes into the statement its curators co-sign): the handle
/// and the disclosure behind it, with a fresh random salt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound {
    /// The handle: the digest of [`Bound::disclosure`].
    pub handle: String,
    pub disclosure: String,
}

/// Gives `value`, for the companion field at `path` (`case_name`,
/// `draft.case_name`, `identity_name`, `workflow_name`), a handle.
pub fn bind(path: &str, value: &str) -> Result<Bound, getrandom::Error> {
    let mut salt = [0u8; WRITE_SALT_BYTES];
    getrandom::fill(&mut salt)?;
    Ok(bind_with_salt(&salt, path, value))
}

/// [`bind`] with a given salt (tests and samples that must be repeatable).
pub fn bind_with_salt(salt: &[u8], path: &str, value: &str) -> Bound {
    let disclosure = disclosure(salt, path, &Value::Str(value.to_owned()));
    Bound {
        handle: digest(&disclosure),
        disclosure,
    }
}

/// Commits every sensitive value `payload` holds in clear, with fresh
/// random salts, and sets a schema-1 payload's schema to the one this
/// build writes (a schema-2 payload stays schema 2): what a client does
/// before it signs. Returns the disclosures to send beside the
/// envelope.
///
/// A schema-3 companion ([`handle_field`]) in clear whose identifier holds
/// the same value is a value named here first: the identifier becomes the
/// new commitment's digest, its handle. A companion already committed is
/// opened by the disclosure of `bound` whose digest it holds (a value
/// given its handle by [`bind`] before the event was built).
pub fn commit(payload: &mut Payload) -> Result<Vec<String>, getrandom::Error> {
    commit_with(payload, &[])
}

/// [`commit`], with the disclosures of values already bound: a field
/// committed already is opened by the one whose digest it holds, and a
/// field in clear is committed with the one that discloses its path and
/// value, when `bound` has it.
pub fn commit_with(
    payload: &mut Payload,
    bound: &[Bound],
) -> Result<Vec<String>, getrandom::Error> {
    if payload.schema < crate::model::SCHEMA_COMMITTED {
        payload.schema = crate::model::SCHEMA_VERSION;
    }
    if payload.schema >= SCHEMA_HANDLES {
        // A companion left out is the identifier's value in clear: the
        // value is named here first, under the identifier.
        if let Some((id, name @ None)) = handle_field_mut(&mut payload.event) {
            *name = Some(Sensitive::Clear(id.clone()));
        }
    }
    let derive = handle_field(&payload.event)
        .filter(|h| h.name.and_then(|n| n.clear()).map(String::as_str) == Some(h.handle))
        .is_some();
    let mut out = Vec::new();
    let mut handle = None;
    for (path, _, slot) in fields_mut(&mut payload.event) {
        if let Some(d) = slot.digest() {
            if let Some(b) = bound.iter().find(|b| b.handle == d) {
                out.push(b.disclosure.clone());
            }
            continue;
        }
        let Some(value) = slot.clear_json() else {
            continue;
        };
        let given = bound
            .iter()
            .find(|b| parse(&b.disclosure, "").is_ok_and(|o| o.path == path && o.value == value));
        let d = match given {
            Some(b) => b.disclosure.clone(),
            None => {
                let mut salt = [0u8; WRITE_SALT_BYTES];
                getrandom::fill(&mut salt)?;
                disclosure(&salt, path, &value)
            }
        };
        let sd = digest(&d);
        if derive && handle_field_path(path) {
            handle = Some(sd.clone());
        }
        slot.set_committed(Commitment { sd });
        out.push(d);
    }
    if let (Some(h), Some((id, _))) = (handle, handle_field_mut(&mut payload.event)) {
        *id = h;
    }
    Ok(out)
}

/// The identifier and the companion of [`handle_field`], to change.
fn handle_field_mut(event: &mut Event) -> Option<(&mut String, &mut Option<Sensitive<String>>)> {
    match event {
        Event::CaseAdded(e) => Some((&mut e.case_id, &mut e.case_name)),
        Event::CaseProposed(e) => Some((&mut e.draft.case_id, &mut e.draft.case_name)),
        Event::PrincipalEnrolled(e) => Some((&mut e.identity, &mut e.identity_name)),
        Event::CapabilityMinted(e) => Some((&mut e.workflow_id, &mut e.workflow_name)),
        _ => None,
    }
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
