//! The values behind schema-3 handles, as the door knows them
//! (docs/PRIVACY.md, "Handles").
//!
//! From schema 3 on, a case id, an identity or a workflow id is a handle
//! where its value is first named: the digest of the commitment to the
//! value beside it. Anyone can check from the log that a handle is such a
//! digest or one an earlier event gave ([`crate::State`]). What the log
//! cannot show to a reader without the values is that one value has one
//! handle: the ledger checks it here, at the door, where it holds the
//! disclosures. It refuses
//!
//! - a new handle for a value that already has one
//!   ([`RejectCode::HandleValueBound`]): two handles for one case would
//!   count it twice, two for one person would let them co-sign as two;
//! - an earlier handle named beside another value, or beside a value it can
//!   no longer read ([`RejectCode::HandleValueMismatch`]).
//!
//! The index holds keyed BLAKE3 hashes of the values, never the values,
//! under a key derived from the ledger's key: it is saved with the event
//! state ([`HandleValues::encode_into`], the changes since the last save
//! with each delta), where whoever reads the data file can read it, and a
//! hash of a guessable value (a case name, an e-mail address) cannot be
//! tried against a dictionary without the key. A start resumes it from
//! there and learns the handles given after it; without a saved index
//! (a log saved by an earlier build, a repaired snapshot) it is rebuilt
//! from the kept disclosures ([`HandleValues::load`]). A value whose
//! disclosure was redacted drops out of it: a later event may give that
//! value a new handle, and no event that names a value first can name the
//! old handle again.

use std::collections::HashMap;

use crate::disclose::{handle_field, parse, part_of, HandleClass};
use crate::model::{Event, SCHEMA_HANDLES};
use crate::reject::{RejectCode, Rejection};
use crate::state::State;

type ValueHash = [u8; 32];

/// The hash a reader's audit walk keeps of a value (in its own memory).
fn value_hash(class: HandleClass, value: &str) -> ValueHash {
    hash_with(blake3::Hasher::new(), class, value)
}

fn hash_with(mut h: blake3::Hasher, class: HandleClass, value: &str) -> ValueHash {
    h.update(class.as_str().as_bytes());
    h.update(&[0]);
    h.update(value.as_bytes());
    *h.finalize().as_bytes()
}

/// The tag before a saved index ([`HandleValues::encode_into`]).
const INDEX_TAG: &[u8; 8] = b"ELHVIDX1";
/// The tag before saved changes ([`HandleValues::take_changes`]).
const CHANGES_TAG: &[u8; 8] = b"ELHVCHG1";
/// A handle given by no entry (an identifier in clear), as saved.
const NO_ORIGIN: u64 = u64::MAX;

/// A change to the committed index, noted for the next save.
#[derive(Debug, Clone, PartialEq)]
enum Change {
    Bound(HandleClass, String, Option<u64>, ValueHash),
    Forgot(u64),
}

/// A handle the door accepted: recorded when its batch commits.
#[derive(Debug, Clone)]
struct Binding {
    /// The index of the entry that named it.
    at: u64,
    class: HandleClass,
    handle: String,
    /// The entry that gave it; `None` for a value in clear from before the
    /// switch to schema 3 (its handle is the value).
    origin: Option<u64>,
    value: ValueHash,
}

/// Which handle each value has, and which value each handle, by class.
/// The handle of a value is, of the handles bound to it, the one given
/// first (an identifier in clear before any entry's; then by the entry
/// that gave it), so the index is a function of its handles, whatever
/// order they were learnt in.
#[derive(Debug)]
pub struct HandleValues {
    /// The key of the value hashes.
    key: [u8; 32],
    by_handle: HashMap<(HandleClass, String), (Option<u64>, ValueHash)>,
    by_value: HashMap<(HandleClass, ValueHash), String>,
    /// The bindings made and the origins forgotten since the changes were
    /// last taken; `None` when they are not noted (a whole index was
    /// loaded), so that only a whole save holds this index.
    changes: Option<Vec<Change>>,
    /// Accepted in the batch being sequenced, not yet committed.
    pending: Vec<Binding>,
    /// Redactions of companions in that batch: (the entry that gave the
    /// handle, the redaction's index).
    pending_redactions: Vec<(u64, u64)>,
}

/// The value `event`'s companion discloses, from the disclosures kept with
/// it (in [`crate::disclose::fields`] order).
pub fn companion_value(event: &Event, disclosures: &[String]) -> Option<String> {
    companion_disclosed(event, disclosures.get(companion_part(event)?)?)
}

/// The private part that keeps the disclosure of `event`'s handle value
/// (its companion), when it names one.
pub fn companion_part(event: &Event) -> Option<usize> {
    part_of(event, handle_field(event)?.name_path)
}

/// The value `disclosure`, the companion part of `event`, discloses.
pub fn companion_disclosed(event: &Event, disclosure: &str) -> Option<String> {
    handle_field(event)?;
    match parse(disclosure, "").ok()?.value {
        crate::canonical::Value::Str(s) => Some(s),
        _ => None,
    }
}

impl HandleValues {
    /// An empty index whose value hashes are keyed with `key`.
    pub fn new(key: [u8; 32]) -> HandleValues {
        HandleValues {
            key,
            by_handle: HashMap::new(),
            by_value: HashMap::new(),
            changes: None,
            pending: Vec::new(),
            pending_redactions: Vec::new(),
        }
    }

    fn hash(&self, class: HandleClass, value: &str) -> ValueHash {
        hash_with(blake3::Hasher::new_keyed(&self.key), class, value)
    }

    /// The index for `state`: every identifier in clear from before the
    /// log's switch to schema 3 (its own handle), and every handle a
    /// schema-3 event gave, with the value `disclosed` reads from the
    /// entry that gave it (`None` when redacted or not kept here). Its
    /// changes are not noted: the next save holds it whole.
    pub fn load<E>(
        key: [u8; 32],
        state: &State,
        mut disclosed: impl FnMut(u64) -> Result<Option<String>, E>,
    ) -> Result<HandleValues, E> {
        let mut v = HandleValues::new(key);
        v.learn(state, 0, &mut disclosed)?;
        let clear = |class, id: &String| state.handle_origin(class, id).is_none();
        let mut in_clear: Vec<(HandleClass, &String)> = Vec::new();
        in_clear.extend(
            state
                .cases
                .keys()
                .chain(state.proposals.values().map(|p| &p.draft.case_id))
                .map(|id| (HandleClass::Case, id)),
        );
        in_clear.extend(
            state
                .principals
                .values()
                .map(|p| (HandleClass::Identity, &p.identity)),
        );
        in_clear.extend(
            state
                .capabilities
                .values()
                .map(|c| (HandleClass::Workflow, &c.workflow_id)),
        );
        for (class, id) in in_clear {
            if clear(class, id) {
                let vh = v.hash(class, id);
                v.bind(class, id, None, vh);
            }
        }
        v.changes = None;
        Ok(v)
    }

    /// Learns every handle `state` records as given at entry `from` or
    /// later, with the value `disclosed` reads from that entry (`None` when
    /// redacted or not kept here): the handles other writers of a shared
    /// log gave since this index last saw it.
    pub fn learn<E>(
        &mut self,
        state: &State,
        from: u64,
        mut disclosed: impl FnMut(u64) -> Result<Option<String>, E>,
    ) -> Result<(), E> {
        let class_of = |key: &str| match key.split_once('/') {
            Some(("case", _)) => Some(HandleClass::Case),
            Some(("identity", _)) => Some(HandleClass::Identity),
            Some(("workflow", _)) => Some(HandleClass::Workflow),
            _ => None,
        };
        // The entries are read in log order (neighbours share a stored
        // bundle, decoded once), and bound in the order of the handles.
        // A handle bound already (this writer's own, settled) is not read
        // again.
        let unbound = |key: &String| {
            class_of(key).is_some_and(|class| {
                let handle = &key[class.as_str().len() + 1..];
                !self.by_handle.contains_key(&(class, handle.to_owned()))
            })
        };
        let mut origins: Vec<u64> = state
            .handles
            .iter()
            .filter(|(key, &origin)| origin >= from && unbound(key))
            .map(|(_, &origin)| origin)
            .collect();
        origins.sort_unstable();
        origins.dedup();
        let mut values = std::collections::HashMap::with_capacity(origins.len());
        for origin in origins {
            if let Some(value) = disclosed(origin)? {
                values.insert(origin, value);
            }
        }
        for (key, &origin) in &state.handles {
            let Some(class) = class_of(key).filter(|_| origin >= from) else {
                continue;
            };
            let handle = &key[class.as_str().len() + 1..];
            if let Some(value) = values.get(&origin) {
                let vh = self.hash(class, value);
                self.bind(class, handle, Some(origin), vh);
            }
        }
        Ok(())
    }

    /// Binds `handle` to the value hashed `vh`, unless the handle is bound
    /// already; the value's handle is then the one given first.
    fn bind(&mut self, class: HandleClass, handle: &str, origin: Option<u64>, vh: ValueHash) {
        use std::collections::hash_map::Entry;
        match self.by_handle.entry((class, handle.to_owned())) {
            Entry::Occupied(_) => return,
            Entry::Vacant(e) => {
                e.insert((origin, vh));
            }
        }
        if let Some(c) = &mut self.changes {
            c.push(Change::Bound(class, handle.to_owned(), origin, vh));
        }
        match self.by_value.entry((class, vh)) {
            Entry::Vacant(e) => {
                e.insert(handle.to_owned());
            }
            Entry::Occupied(mut e) => {
                let held = self
                    .by_handle
                    .get(&(class, e.get().clone()))
                    .map(|(o, _)| *o);
                if held.is_none_or(|o| (origin, handle) < (o, e.get().as_str())) {
                    e.insert(handle.to_owned());
                }
            }
        }
    }

    fn handle_of(&self, class: HandleClass, vh: &ValueHash) -> Option<&str> {
        self.pending
            .iter()
            .find(|b| b.class == class && b.value == *vh)
            .map(|b| b.handle.as_str())
            .or_else(|| self.by_value.get(&(class, *vh)).map(String::as_str))
    }

    fn value_of(&self, class: HandleClass, handle: &str) -> Option<ValueHash> {
        self.pending
            .iter()
            .find(|b| b.class == class && b.handle == handle)
            .map(|b| b.value)
            .or_else(|| {
                self.by_handle
                    .get(&(class, handle.to_owned()))
                    .map(|(_, vh)| *vh)
            })
    }

    /// Checks the handle of a schema-3 event whose state rules passed
    /// (`state` is the state it was checked against), with the disclosures
    /// opened at the door, and records a new one as pending; appended at
    /// `index` if accepted.
    pub fn admit(
        &mut self,
        event: &Event,
        schema: u32,
        disclosures: &[String],
        state: &State,
        index: u64,
    ) -> Result<(), Rejection> {
        let Some(h) = handle_field(event) else {
            return Ok(());
        };
        if schema < SCHEMA_HANDLES {
            // A value named in clear, before the log's switch: its own
            // handle from then on.
            let vh = self.hash(h.class, h.handle);
            if self.handle_of(h.class, &vh).is_none() {
                self.pending.push(Binding {
                    at: index,
                    class: h.class,
                    handle: h.handle.to_owned(),
                    origin: None,
                    value: vh,
                });
            }
            return Ok(());
        }
        let class = h.class.as_str();
        let name_field = format!("event.body.{}", h.name_path);
        let handle_field = format!("event.body.{}", h.handle_path);
        let Some(value) = companion_value(event, disclosures) else {
            return Err(Rejection::new(
                RejectCode::DisclosureMissing,
                name_field,
                "no disclosure opens this field",
            ));
        };
        let vh = self.hash(h.class, &value);
        if h.derived() {
            match self.handle_of(h.class, &vh) {
                Some(existing) if existing == h.handle => Ok(()),
                Some(existing) => Err(Rejection::new(
                    RejectCode::HandleValueBound,
                    handle_field,
                    // Only an identity's handle is named: the operators who
                    // enrol people hold every identity anyway, and a writer
                    // of cases or capabilities must not learn which case or
                    // workflow a guessed value is (docs/PRIVACY.md).
                    if h.class == HandleClass::Identity {
                        format!(
                            "this {class} already has the handle `{existing}`: name that handle here, with the value committed beside it"
                        )
                    } else {
                        format!(
                            "this {class} already has a handle: name that handle here, with the value committed beside it"
                        )
                    },
                )),
                None if state.handle_origin(h.class, h.handle).is_some() => {
                    // Given before (the same disclosure), for a value the
                    // door no longer knows: redacted, or not kept here.
                    Err(Rejection::new(
                        RejectCode::HandleValueMismatch,
                        handle_field,
                        format!(
                            "the {class} this handle was given for at entry {} is redacted or not kept here, so it cannot be named again",
                            state.handle_origin(h.class, h.handle).unwrap_or_default()
                        ),
                    ))
                }
                None if self.value_of(h.class, h.handle).is_some() => Err(Rejection::new(
                    RejectCode::HandleValueMismatch,
                    handle_field.clone(),
                    format!("this is the handle of another {class} than the value committed in `{}`", h.name_path),
                )),
                None if self.value_of(h.class, &value).is_some() => Err(Rejection::new(
                    RejectCode::HandleValueBound,
                    name_field,
                    format!(
                        "the value committed here is itself the handle of a {class}: name that handle in `{}`, with the {class}'s value committed beside it",
                        h.handle_path
                    ),
                )),
                None => {
                    self.pending.push(Binding {
                        at: index,
                        class: h.class,
                        handle: h.handle.to_owned(),
                        origin: Some(index),
                        value: vh,
                    });
                    Ok(())
                }
            }
        } else {
            match self.value_of(h.class, h.handle) {
                Some(known) if known == vh => Ok(()),
                Some(_) => Err(Rejection::new(
                    RejectCode::HandleValueMismatch,
                    handle_field,
                    format!("this is the handle of another {class} than the value committed in `{}`", h.name_path),
                )),
                None => Err(Rejection::new(
                    RejectCode::HandleValueMismatch,
                    handle_field,
                    match state.handle_origin(h.class, h.handle) {
                        Some(origin) => format!(
                            "the {class} this handle was given for at entry {origin} is redacted or not kept here, so it cannot be named again"
                        ),
                        None => format!("no {class} has this handle"),
                    },
                )),
            }
        }
    }

    /// The batch committed: its handles are the log's.
    pub fn committed(&mut self) {
        self.settle(u64::MAX);
    }

    /// The batch failed; the log holds `size` entries (a batch that reported
    /// failure may still have persisted): what it accepted below `size` is
    /// the log's, the rest is not.
    pub fn failed(&mut self, size: u64) {
        self.settle(size);
    }

    fn settle(&mut self, size: u64) {
        for b in std::mem::take(&mut self.pending) {
            if b.at < size {
                self.bind(b.class, &b.handle, b.origin, b.value);
            }
        }
        for (origin, at) in std::mem::take(&mut self.pending_redactions) {
            if at < size {
                self.forget(origin);
            }
        }
    }

    /// The batch failed, and `state` is the log's state after it, which
    /// other writers of a shared log may have appended to meanwhile, on a
    /// log that had switched to handles before `known` (the size this index
    /// was complete at) and with no redaction since (otherwise the caller
    /// loads the index whole): a handle the batch gave is the log's where
    /// `state` records it as given at that entry, and the handles given
    /// from `known` are learnt from their kept disclosures.
    pub fn failed_against<E>(
        &mut self,
        state: &State,
        known: u64,
        disclosed: impl FnMut(u64) -> Result<Option<String>, E>,
    ) -> Result<(), E> {
        for b in std::mem::take(&mut self.pending) {
            let logged = b.at < state.size
                && b.origin.is_some()
                && state.handle_origin(b.class, &b.handle) == b.origin;
            if logged {
                self.bind(b.class, &b.handle, b.origin, b.value);
            }
        }
        self.pending_redactions.clear();
        self.learn(state, known, disclosed)
    }

    /// Entry `at` redacts the companion of entry `origin`: once it commits,
    /// the value of the handle `origin` gave is forgotten.
    pub fn redacted(&mut self, origin: u64, at: u64) {
        self.pending_redactions.push((origin, at));
    }

    fn forget(&mut self, origin: u64) {
        let gone: Vec<(HandleClass, String, ValueHash)> = self
            .by_handle
            .iter()
            .filter(|(_, (o, _))| *o == Some(origin))
            .map(|((c, h), (_, vh))| (*c, h.clone(), *vh))
            .collect();
        if gone.is_empty() {
            return;
        }
        if let Some(c) = &mut self.changes {
            c.push(Change::Forgot(origin));
        }
        for (c, h, vh) in gone {
            self.by_handle.remove(&(c, h.clone()));
            if self.by_value.get(&(c, vh)) != Some(&h) {
                continue;
            }
            // Another handle bound to the value (two writers of a shared
            // log can each give one) stands for it now.
            let next = self
                .by_handle
                .iter()
                .filter(|((c2, _), (_, v2))| *c2 == c && *v2 == vh)
                .map(|((_, h2), (o2, _))| (*o2, h2))
                .min()
                .map(|(_, h2)| h2.clone());
            match next {
                Some(h2) => self.by_value.insert((c, vh), h2),
                None => self.by_value.remove(&(c, vh)),
            };
        }
    }

    /// Whether changes were noted since they were last taken.
    pub fn has_changes(&self) -> bool {
        self.changes.as_ref().is_some_and(|c| !c.is_empty())
    }

    /// Whether changes are noted ([`HandleValues::track_changes`]).
    pub fn noting_changes(&self) -> bool {
        self.changes.is_some()
    }

    /// Notes the changes from here on, for [`HandleValues::take_changes`].
    pub fn track_changes(&mut self) {
        self.changes = Some(Vec::new());
    }

    /// The changes since they were last taken or noting began, encoded
    /// (to be saved beside the event state's delta, and folded in by
    /// [`HandleValues::apply_changes`]); noting goes on. `None` when
    /// changes are not noted: only a whole save holds this index.
    pub fn take_changes(&mut self) -> Option<Vec<u8>> {
        let changes = std::mem::take(self.changes.as_mut()?);
        let mut out = CHANGES_TAG.to_vec();
        out.extend_from_slice(&(changes.len() as u64).to_be_bytes());
        for c in &changes {
            match c {
                Change::Bound(class, handle, origin, vh) => {
                    out.push(0);
                    put_binding(&mut out, *class, handle, *origin, vh);
                }
                Change::Forgot(origin) => {
                    out.push(1);
                    out.extend_from_slice(&origin.to_be_bytes());
                }
            }
        }
        Some(out)
    }

    /// Folds in changes [`HandleValues::take_changes`] encoded; `None`
    /// (and the index as it may be, half changed) when they do not decode.
    pub fn apply_changes(&mut self, b: &[u8]) -> Option<()> {
        let mut r = Reader(b.strip_prefix(CHANGES_TAG)?);
        for _ in 0..r.u64()? {
            match r.take(1)?[0] {
                0 => {
                    let (class, handle, origin, vh) = r.binding()?;
                    self.check_clear(class, &handle, origin, &vh)?;
                    self.bind(class, &handle, origin, vh);
                }
                1 => self.forget(r.u64()?),
                _ => return None,
            }
        }
        r.0.is_empty().then_some(())
    }

    /// Appends the committed index (every handle, the entry that gave it,
    /// and the keyed hash of its value) to `out`, behind a tag.
    pub fn encode_into(&self, out: &mut impl std::io::Write) {
        let mut b = INDEX_TAG.to_vec();
        b.extend_from_slice(&(self.by_handle.len() as u64).to_be_bytes());
        for ((class, handle), (origin, vh)) in &self.by_handle {
            put_binding(&mut b, *class, handle, *origin, vh);
        }
        // Writes to memory: they do not fail.
        let _ = out.write_all(&b);
    }

    /// The index [`HandleValues::encode_into`] wrote at the start of `b`,
    /// its value hashes keyed with `key`, noting its changes from here on;
    /// `None` when `b` holds none or it does not decode.
    pub fn decode(key: [u8; 32], b: &[u8]) -> Option<HandleValues> {
        let mut r = Reader(b.strip_prefix(INDEX_TAG)?);
        let mut v = HandleValues::new(key);
        let n = r.u64()?;
        v.by_handle
            .reserve(usize::try_from(n).ok()?.min(b.len() / 44));
        for _ in 0..n {
            let (class, handle, origin, vh) = r.binding()?;
            v.check_clear(class, &handle, origin, &vh)?;
            v.bind(class, &handle, origin, vh);
        }
        if !r.0.is_empty() {
            return None;
        }
        v.track_changes();
        Some(v)
    }

    /// An identifier in clear is its own handle: a saved binding of one
    /// to another value is refused (`None`), so that even a record sealed
    /// with the key cannot bind a value in clear to another.
    fn check_clear(
        &self,
        class: HandleClass,
        handle: &str,
        origin: Option<u64>,
        vh: &ValueHash,
    ) -> Option<()> {
        (origin.is_some() || self.hash(class, handle) == *vh).then_some(())
    }

    /// The committed index, one digest per binding (its class, handle, the
    /// entry that gave it and its value's hash) beside that entry, sorted:
    /// to compare the index a start resumed with one loaded from the kept
    /// disclosures, leaving out the handles of values redacted since.
    pub fn bindings(&self) -> Vec<(Option<u64>, [u8; 32])> {
        let mut b = Vec::new();
        let mut all: Vec<(Option<u64>, [u8; 32])> = self
            .by_handle
            .iter()
            .map(|((class, handle), (origin, vh))| {
                b.clear();
                put_binding(&mut b, *class, handle, *origin, vh);
                (*origin, *blake3::hash(&b).as_bytes())
            })
            .collect();
        all.sort_unstable();
        all
    }

    /// How many handles the committed index binds.
    pub fn len(&self) -> usize {
        self.by_handle.len()
    }

    /// Whether it binds none.
    pub fn is_empty(&self) -> bool {
        self.by_handle.is_empty()
    }
}

fn put_binding(
    out: &mut Vec<u8>,
    class: HandleClass,
    handle: &str,
    origin: Option<u64>,
    vh: &ValueHash,
) {
    out.push(class_code(class));
    out.extend_from_slice(&origin.unwrap_or(NO_ORIGIN).to_be_bytes());
    out.extend_from_slice(vh);
    out.extend_from_slice(&(handle.len() as u32).to_be_bytes());
    out.extend_from_slice(handle.as_bytes());
}

fn class_code(class: HandleClass) -> u8 {
    match class {
        HandleClass::Case => 0,
        HandleClass::Identity => 1,
        HandleClass::Workflow => 2,
    }
}

/// Reads what [`put_binding`] and the counts wrote.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }

    fn binding(&mut self) -> Option<(HandleClass, String, Option<u64>, ValueHash)> {
        let class = match self.take(1)?[0] {
            0 => HandleClass::Case,
            1 => HandleClass::Identity,
            2 => HandleClass::Workflow,
            _ => return None,
        };
        let origin = Some(self.u64()?).filter(|&o| o != NO_ORIGIN);
        let vh: ValueHash = self.take(32)?.try_into().ok()?;
        let len = u32::from_be_bytes(self.take(4)?.try_into().ok()?) as usize;
        let handle = String::from_utf8(self.take(len)?.to_vec()).ok()?;
        Some((class, handle, origin, vh))
    }
}

/// "One value, one handle", as a reader holding the disclosures checks it
/// over a walk of the log from its first entry (`ledger verify`): the check
/// the door makes, made again from what was served or kept, and forgetting
/// what the door forgets. A value is bound to its handle where a schema-3
/// event gives the handle (or, named in clear before the switch, to
/// itself); an event that names an earlier handle is held to the value
/// bound to it, when the walk knows it; a redaction of the companion that
/// gave a handle unbinds it.
#[derive(Debug, Default)]
pub struct Audit {
    /// The handle each value has, and the entry that gave it.
    by_value: HashMap<(HandleClass, ValueHash), (String, u64)>,
    /// The value each handle stands for, and the entry that gave it.
    by_handle: HashMap<(HandleClass, String), (ValueHash, u64)>,
}

impl Audit {
    /// Takes entry `index` (its payload, and the values of its committed
    /// fields when the walk holds them: `None` without a role). A schema-3
    /// companion that was not disclosed (redacted, or no role) is passed
    /// over. Returns why the entry breaks the rule.
    pub fn see(
        &mut self,
        index: u64,
        payload: &crate::model::Payload,
        opened: Option<&[crate::disclose::Disclosed]>,
    ) -> Result<(), String> {
        if let Event::FieldRedacted(r) = &payload.event {
            if crate::disclose::handle_field_path(&r.field) {
                self.by_handle.retain(|_, (_, at)| *at != r.entry);
                self.by_value.retain(|_, (_, at)| *at != r.entry);
            }
            return Ok(());
        }
        let Some(h) = handle_field(&payload.event) else {
            return Ok(());
        };
        let class = h.class;
        let value = if payload.schema < SCHEMA_HANDLES {
            h.handle.to_owned()
        } else {
            let disclosed = opened
                .and_then(|o| o.iter().find(|d| d.path == h.name_path))
                .and_then(|d| d.value.clone());
            match disclosed {
                Some(crate::canonical::Value::Str(v)) => v,
                _ => return Ok(()),
            }
        };
        let vh = value_hash(class, &value);
        let gives = payload.schema < SCHEMA_HANDLES || h.derived();
        if !gives {
            return match self.by_handle.get(&(class, h.handle.to_owned())) {
                Some((known, at)) if *known != vh => Err(format!(
                    "entry {index}: names the handle `{}` of another {} (given at entry {at}) beside its value",
                    h.handle,
                    class.as_str()
                )),
                _ => Ok(()),
            };
        }
        match self.by_value.get(&(class, vh)) {
            Some((other, _)) if other == h.handle => return Ok(()),
            Some((other, at)) => {
                return Err(format!(
                    "entry {index}: this {} already has the handle `{other}` (entry {at}), and is given another",
                    class.as_str()
                ))
            }
            None => {}
        }
        if let Some((_, at)) = self.by_handle.get(&(class, h.handle.to_owned())) {
            return Err(format!(
                "entry {index}: the handle `{}` was given to another {} at entry {at}",
                h.handle,
                class.as_str()
            ));
        }
        self.by_value
            .insert((class, vh), (h.handle.to_owned(), index));
        self.by_handle
            .insert((class, h.handle.to_owned()), (vh, index));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::Value;
    use crate::disclose::Disclosed;
    use crate::model::{Commitment, FieldRedacted, Payload, PrincipalEnrolled, Role, Sensitive};

    fn payload(schema: u32, event: Event) -> Payload {
        Payload {
            schema,
            id: "enrol-someone".into(),
            signer: "0".repeat(64),
            issued_at: "2026-11-01T00:00:00Z".into(),
            event,
        }
    }

    /// An enrolment under `identity`; in schema 3 its companion's digest
    /// is `companion` (the handle it gives when that is `identity`).
    fn enrol(schema: u32, identity: &str, companion: &str) -> Payload {
        payload(
            schema,
            Event::PrincipalEnrolled(PrincipalEnrolled {
                sigstore: None,
                public_key: String::new(),
                identity: identity.into(),
                identity_name: (schema >= SCHEMA_HANDLES).then(|| {
                    Sensitive::Committed(Commitment {
                        sd: companion.into(),
                    })
                }),
                roles: vec![Role::Curator],
            }),
        )
    }

    fn cosignature() -> crate::model::CoSignature {
        crate::model::CoSignature {
            sigstore_bundle: None,
            key_id: String::new(),
            signature: String::new(),
        }
    }

    fn named(value: &str) -> Vec<Disclosed> {
        vec![Disclosed {
            path: "identity_name",
            value: Some(Value::Str(value.into())),
        }]
    }

    fn maps(v: &HandleValues) -> (Vec<String>, Vec<String>) {
        let mut h: Vec<String> = v.by_handle.iter().map(|e| format!("{e:?}")).collect();
        let mut b: Vec<String> = v.by_value.iter().map(|e| format!("{e:?}")).collect();
        h.sort();
        b.sort();
        (h, b)
    }

    #[test]
    fn a_saved_index_and_its_changes_give_the_same_index_back() {
        let key = [7; 32];
        let mut live = HandleValues::new(key);
        let case = live.hash(HandleClass::Case, "GHSA-1");
        let bob = live.hash(HandleClass::Identity, "bob@example.org");
        live.bind(HandleClass::Identity, "bob@example.org", None, bob);
        live.bind(HandleClass::Case, "h-1", Some(3), case);
        let mut whole = Vec::new();
        live.encode_into(&mut whole);
        let mut saved = HandleValues::decode(key, &whole).expect("decodes");
        assert_eq!(maps(&saved), maps(&live));
        live.track_changes();
        live.bind(HandleClass::Workflow, "h-2", Some(5), [2; 32]);
        live.bind(HandleClass::Case, "h-3", Some(9), [3; 32]);
        live.forget(9);
        let changes = live.take_changes().expect("noted");
        saved.apply_changes(&changes).expect("applies");
        assert_eq!(maps(&saved), maps(&live));
        assert_eq!(saved.bindings(), live.bindings());
        assert_eq!(live.take_changes().expect("noted")[8..], 0u64.to_be_bytes());
        // Cut short or under another tag, nothing decodes.
        assert!(HandleValues::decode(key, &whole[..whole.len() - 1]).is_none());
        assert!(HandleValues::decode(key, &changes).is_none());
        assert!(saved.apply_changes(&changes[..changes.len() - 1]).is_none());
        // An identifier in clear bound to another value is refused.
        let mut forged = HandleValues::new(key);
        forged.bind(HandleClass::Identity, "bob@example.org", None, [1; 32]);
        let mut b = Vec::new();
        forged.encode_into(&mut b);
        assert!(HandleValues::decode(key, &b).is_none());
        assert!(
            HandleValues::new(key).take_changes().is_none(),
            "a new index notes no changes: its first save is whole"
        );
    }

    #[test]
    fn a_value_has_the_handle_given_first_whatever_the_order_learnt() {
        let mut v = HandleValues::new([0; 32]);
        v.bind(HandleClass::Case, "later", Some(8), [5; 32]);
        v.bind(HandleClass::Case, "earlier", Some(4), [5; 32]);
        assert_eq!(v.handle_of(HandleClass::Case, &[5; 32]), Some("earlier"));
        v.forget(4);
        assert_eq!(v.handle_of(HandleClass::Case, &[5; 32]), Some("later"));
        v.forget(8);
        assert_eq!(v.handle_of(HandleClass::Case, &[5; 32]), None);
    }

    #[test]
    fn the_value_hashes_are_keyed() {
        let a = HandleValues::new([1; 32]).hash(HandleClass::Case, "GHSA-1");
        let b = HandleValues::new([2; 32]).hash(HandleClass::Case, "GHSA-1");
        assert_ne!(a, b);
        assert_ne!(a, value_hash(HandleClass::Case, "GHSA-1"));
    }

    #[test]
    fn the_audit_finds_two_handles_for_one_value_and_two_values_for_one_handle() {
        let mut a = Audit::default();
        a.see(0, &enrol(1, "bob@example.org", ""), None)
            .expect("in clear");
        a.see(
            1,
            &enrol(3, "h-alice", "h-alice"),
            Some(&named("alice@example.org")),
        )
        .expect("a handle given");
        a.see(
            2,
            &enrol(3, "h-alice", "c-2"),
            Some(&named("alice@example.org")),
        )
        .expect("her handle again, for her");
        a.see(3, &enrol(3, "h-other", "h-other"), None)
            .expect("not disclosed: nothing to check");
        let two_handles = a
            .see(
                4,
                &enrol(3, "h-alice-2", "h-alice-2"),
                Some(&named("alice@example.org")),
            )
            .expect_err("a second handle for alice");
        assert!(two_handles.contains("`h-alice` (entry 1)"), "{two_handles}");
        let two_values = a
            .see(
                5,
                &enrol(3, "h-alice", "c-5"),
                Some(&named("mallory@example.org")),
            )
            .expect_err("alice's handle for mallory");
        assert!(two_values.contains("given at entry 1"), "{two_values}");
        let clear_then_new = a
            .see(
                6,
                &enrol(3, "h-bob", "h-bob"),
                Some(&named("bob@example.org")),
            )
            .expect_err("bob was named in clear, his handle is his id");
        assert!(
            clear_then_new.contains("`bob@example.org`"),
            "{clear_then_new}"
        );
        // A redaction of the companion that gave alice's handle unbinds it,
        // as the door forgets it.
        a.see(
            7,
            &payload(
                3,
                Event::FieldRedacted(FieldRedacted {
                    entry: 1,
                    leaf_hash: String::new(),
                    field: "identity_name".into(),
                    reason: Sensitive::Clear(String::new()),
                    requested_by: cosignature(),
                    confirmed_by: cosignature(),
                }),
            ),
            None,
        )
        .expect("a redaction");
        a.see(
            8,
            &enrol(3, "h-alice-3", "h-alice-3"),
            Some(&named("alice@example.org")),
        )
        .expect("her value is no longer bound");
    }
}
