//! A small, realistic world for event tests: every actor enrolled, one task
//! class registered, three held-out cases added by two curators, a run open.
//! Time is a [`ManualClock`] so expiry can be tested.

use std::sync::Arc;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ed25519_dalek::{Signer as _, SigningKey};
use events::envelope::{case_retire_statement, format_micros, pae, public_key_b64, PAYLOAD_TYPE};
use events::model::*;
use events::sample::{self, Sample};
use events::{
    cosign, genesis_envelopes, key_id, sign_envelope, Accepted, EventLog, ManualClock, RejectCode,
    Rejection,
};
use ledger::{AppendError, Config, Receipt};

/// 2026-11-01T00:00:00Z in µs.
pub const T0: i64 = 1_793_491_200_000_000;
pub const TASK_CLASS: &str = "migration-chainguard-distroless";
pub const RUBRIC: &str = "blake3:1111111111111111111111111111111111111111111111111111111111111111";
pub const IMAGE: &str = "sha256:3333333333333333333333333333333333333333333333333333333333333333";

/// A deterministic key per name.
pub fn key(name: &str) -> SigningKey {
    SigningKey::from_bytes(blake3::hash(name.as_bytes()).as_bytes())
}

/// The BLAKE3 case digest of a named case (the sample's: of its handle).
pub fn case_digest(name: &str) -> String {
    sample::digest(&sample::case_handle(name))
}

/// The cassette digest of a named case (the sample's: of its handle).
pub fn cassette_digest(name: &str) -> String {
    sample::cassette_digest(&sample::case_handle(name))
}

/// The event log in `dir` (opened, or created empty), with the ledger's
/// key of every world and a clock standing at [`T0`].
pub fn open_log(dir: &std::path::Path) -> EventLog {
    EventLog::open(
        dir,
        Config::default(),
        key("ledger"),
        Arc::new(ManualClock::new(T0)),
    )
    .expect("open the log")
}

/// The sample bench the world's events are built from.
pub fn sample() -> Sample {
    Sample::new(RUBRIC, IMAGE)
}

pub type Posted = Result<Receipt<Accepted>, AppendError<Rejection>>;

pub struct World {
    pub dir: tempfile::TempDir,
    pub log: EventLog,
    pub clock: Arc<ManualClock>,
    next_id: u64,
    /// The log size just before the last [`World::append`].
    pub size_before_last: u64,
    /// Every disclosure this world made, by digest: [`World::append`] sends
    /// a bare envelope with the disclosures of the values it commits to.
    disclosures: std::collections::HashMap<String, String>,
}

/// Every role with its key name.
pub const ACTORS: &[(&str, Role)] = &[
    ("harness", Role::Harness),
    ("curator-a", Role::Curator),
    ("curator-b", Role::Curator),
    ("gate", Role::Gate),
    ("rag-writer", Role::RagWriter),
    ("reconciler", Role::Reconciler),
    ("promotion-gate", Role::PromotionGate),
    ("maintainer-a", Role::Maintainer),
    ("maintainer-b", Role::Maintainer),
];

impl World {
    /// An empty log with genesis only (operator and ledger key).
    pub fn genesis() -> World {
        World::genesis_with(Config::default())
    }

    /// [`World::genesis`], the log opened with `config`.
    pub fn genesis_with(config: Config) -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        let clock = Arc::new(ManualClock::new(T0));
        let log = EventLog::open(dir.path(), config, key("ledger"), clock.clone()).expect("open");
        for env in genesis_envelopes(
            &key("operator"),
            "operator@example.org",
            &key("ledger").verifying_key(),
            &format_micros(T0),
        ) {
            log.append(&env).expect("genesis");
        }
        World {
            dir,
            log,
            clock,
            next_id: 0,
            size_before_last: 0,
            disclosures: Default::default(),
        }
    }

    /// Genesis and every actor enrolled; nothing else.
    pub fn with_actors() -> World {
        World::with_actors_with(Config::default())
    }

    /// [`World::with_actors`], the log opened with `config`.
    pub fn with_actors_with(config: Config) -> World {
        let mut w = World::genesis_with(config);
        for (name, role) in ACTORS {
            w.enrol(name, &[*role]).expect("enrol");
        }
        w
    }

    /// Genesis, every actor, one task class, cases `case-1..=3`, run `run-1`.
    pub fn new() -> World {
        World::new_with(Config::default())
    }

    /// [`World::new`], the log opened with `config` (a fault-injecting
    /// storage engine, say).
    pub fn new_with(config: Config) -> World {
        let mut w = World::with_actors_with(config);
        w.post(
            "operator",
            Event::TaskClassRegistered(task_class(TASK_CLASS)),
        )
        .expect("register");
        for i in 1..=3 {
            let c = w.case_added(&format!("case-{i}"), "held-out");
            w.post("curator-a", Event::CaseAdded(c)).expect("case");
        }
        w.post(
            "harness",
            Event::RunStarted(run("run-1", Isolation::Microvm)),
        )
        .expect("run");
        w
    }

    pub fn enrol(&mut self, name: &str, roles: &[Role]) -> Posted {
        self.post(
            "operator",
            Event::PrincipalEnrolled(PrincipalEnrolled {
                sigstore: None,
                public_key: public_key_b64(&key(name).verifying_key()),
                identity: format!("{name}@example.org"),
                identity_name: None,
                roles: roles.to_vec(),
            }),
        )
    }

    /// A payload of `event` by `signer` in the schema this build writes, its sensitive values
    /// committed ([`World::commit`]).
    pub fn payload(&mut self, signer: &str, event: Event) -> Payload {
        self.next_id += 1;
        let mut p = Payload {
            schema: SCHEMA_VERSION,
            id: format!("env-{:08}", self.next_id),
            signer: key_id(&key(signer).verifying_key()),
            issued_at: format_micros(self.clock_now()),
            event,
        };
        self.commit(&mut p);
        p
    }

    /// Commits the sensitive values `p` holds in clear, remembering their
    /// disclosures for [`World::append`]. A value named first gets the
    /// handle the sample gives it ([`events::sample::binding`]), so a test
    /// can name it again by [`events::sample::case_handle`].
    pub fn commit(&mut self, p: &mut Payload) {
        let bound = events::sample::bindings_for(&p.event);
        for d in events::disclose::commit_with(p, &bound).expect("randomness") {
            self.disclosures.insert(events::disclose::digest(&d), d);
        }
    }

    /// `body` as posted: a bare envelope that commits to values this world
    /// disclosed gets their disclosures beside it; anything else (a write
    /// that has them, bytes that do not decode) is left as it is.
    pub fn with_disclosures(&self, body: &[u8]) -> Vec<u8> {
        let Ok(w) = events::envelope::split_write(body) else {
            return body.to_vec();
        };
        if !w.disclosures.is_empty() || w.envelope.len() != body.len() {
            return body.to_vec();
        }
        let Ok(d) = events::decode_envelope(body) else {
            return body.to_vec();
        };
        let known: Vec<String> = events::disclose::fields(&d.payload.event)
            .into_iter()
            .filter_map(|(_, _, slot)| slot.digest().and_then(|g| self.disclosures.get(g)))
            .cloned()
            .collect();
        events::envelope::write_body(body, &known)
    }

    fn clock_now(&self) -> i64 {
        use events::Clock as _;
        self.clock.now_micros()
    }

    /// The body that posts `event` signed by `signer`: its sensitive values
    /// committed, with their disclosures beside the envelope when it has
    /// any ([`events::envelope::sign_write`]).
    pub fn envelope(&mut self, signer: &str, event: Event) -> Vec<u8> {
        let p = self.payload(signer, event);
        self.with_disclosures(&sign_envelope(&key(signer), &p))
    }

    /// The envelope alone, without the disclosures of the values it commits
    /// to ([`World::append`] adds them): for tests that change its bytes.
    pub fn bare_envelope(&mut self, signer: &str, event: Event) -> Vec<u8> {
        let p = self.payload(signer, event);
        sign_envelope(&key(signer), &p)
    }

    pub fn post(&mut self, signer: &str, event: Event) -> Posted {
        let env = self.envelope(signer, event);
        self.append(&env)
    }

    /// Appends raw envelope bytes (with the disclosures this world made
    /// for them, [`World::with_disclosures`]), remembering the size just
    /// before.
    pub fn append(&mut self, envelope: &[u8]) -> Posted {
        self.size_before_last = self.size();
        let body = self.with_disclosures(envelope);
        self.log.append(&body)
    }

    pub fn size(&self) -> u64 {
        self.log.ledger().head().size
    }

    /// Records `trusted_root` (a Sigstore `trusted_root.json`) as the root
    /// in force, for this log's `origin`, by the operator.
    pub fn trust_sigstore_root(&mut self, origin: &str, trusted_root: &str) {
        self.post("operator", root_trusted(origin, trusted_root))
            .expect("root recorded");
    }

    /// Enrols `who` by Sigstore identity (SAN `identity` at `issuer`) with
    /// `roles`, by the operator.
    pub fn enrol_by_identity(&mut self, who: &str, identity: &str, issuer: &str, roles: Vec<Role>) {
        self.post(
            "operator",
            enrolled_by_identity(who, identity, issuer, roles),
        )
        .expect("enrolled by identity");
    }

    /// A case added and co-signed by curators a and b.
    pub fn case_added(&self, id: &str, curation_class: &str) -> CaseAdded {
        sample().case_added(
            TASK_CLASS,
            id,
            curation_class,
            &format_micros(T0),
            (&key("curator-a"), &key("curator-b")),
        )
    }

    /// A co-signed case of `task_class`.
    pub fn case_for(&self, task_class: &str, id: &str, curation_class: &str) -> CaseAdded {
        let mut c = self.case_added(id, curation_class);
        c.task_class = task_class.into();
        c
    }

    /// A redaction of `field` of entry `entry`, requested and confirmed by
    /// the maintainers `by` names (the reason: a pasted secret).
    pub fn redaction(&self, entry: u64, field: &str, by: (&str, &str)) -> FieldRedacted {
        let leaf_hash =
            ledger::hash::to_hex(&self.log.ledger().entry(entry).expect("entry").leaf_hash);
        let st = events::envelope::field_redact_statement(entry, &leaf_hash, field);
        FieldRedacted {
            entry,
            leaf_hash,
            field: field.into(),
            reason: "a secret was pasted into it".into(),
            requested_by: events::cosign(&key(by.0), &st),
            confirmed_by: events::cosign(&key(by.1), &st),
        }
    }

    /// Case `id` (its name) retired, co-signed by curators a and b.
    pub fn retire(&self, id: &str) -> CaseRetired {
        let handle = events::sample::case_handle(id);
        let st = case_retire_statement(&handle, &case_digest(id));
        CaseRetired {
            case_id: handle,
            reason: "superseded".into(),
            retired_by: cosign(&key("curator-a"), &st),
            reviewed_by: cosign(&key("curator-b"), &st),
        }
    }
}

impl Default for World {
    fn default() -> Self {
        World::new()
    }
}

pub fn task_class(name: &str) -> TaskClassRegistered {
    sample().task_class(name, (3, 0.7), (5, 0.85))
}

pub fn run(id: &str, isolation: Isolation) -> RunStarted {
    sample().run(TASK_CLASS, id, isolation)
}

/// The handle a world gives `value` named first in the companion field
/// `path` ([`events::sample::binding`]).
pub fn handle(path: &str, value: &str) -> String {
    events::sample::binding(path, value).handle
}

/// The handle a world gives the case a proposal drafts as `name`.
pub fn draft_handle(name: &str) -> String {
    handle("draft.case_name", name)
}

/// A `sigstore.root_trusted` recording `trusted_root` for `origin`.
pub fn root_trusted(origin: &str, trusted_root: &str) -> Event {
    Event::SigstoreRootTrusted(SigstoreRootTrusted {
        origin: origin.into(),
        trusted_root: trusted_root.into(),
    })
}

/// A `principal.enrolled` of `who` by Sigstore identity (SAN `identity`
/// at `issuer`), with `roles`.
pub fn enrolled_by_identity(who: &str, identity: &str, issuer: &str, roles: Vec<Role>) -> Event {
    Event::PrincipalEnrolled(PrincipalEnrolled {
        public_key: String::new(),
        sigstore: Some(SigstoreIdentity {
            identity: identity.into(),
            issuer: issuer.into(),
        }),
        identity: format!("{who}@people.example"),
        identity_name: None,
        roles,
    })
}

/// A valid score for `case` (its name) in `run-1`.
pub fn score(case: &str, value: f64) -> ScoreRecorded {
    let mut s = sample().score(TASK_CLASS, "run-1", case, value, &format_micros(T0));
    s.finished_at = format_micros(T0 + 31_500_000);
    s.score.cost_usd = 0.12;
    s
}

/// A valid score of `case` in `task_class`'s run `run_id`.
pub fn score_for(task_class: &str, run_id: &str, case: &str, value: f64) -> ScoreRecorded {
    let mut s = score(case, value);
    s.task_class = task_class.into();
    s.run_id = run_id.into();
    s
}

/// A run of `task_class`.
pub fn run_for(task_class: &str, id: &str, isolation: Isolation) -> RunStarted {
    let mut r = run(id, isolation);
    r.task_class = task_class.into();
    r
}

/// Signs arbitrary payload bytes (for hostile, hand-written payloads).
pub fn sign_raw(signer: &str, payload: &[u8]) -> Vec<u8> {
    let k = key(signer);
    let sig = k.sign(&pae(PAYLOAD_TYPE, payload));
    serde_json::json!({
        "payload": B64.encode(payload),
        "payloadType": PAYLOAD_TYPE,
        "signatures": [{"keyid": key_id(&k.verifying_key()), "sig": B64.encode(sig.to_bytes())}],
    })
    .to_string()
    .into_bytes()
}

/// The rejection of `r`, or a panic naming what happened instead.
pub fn rejection(r: Posted) -> (Rejection, bool) {
    match r {
        Err(AppendError::Rejected { reason, recorded }) => (reason, recorded.is_some()),
        Err(AppendError::Ledger(e)) => panic!("expected a rejection, got ledger error {e}"),
        Ok(rc) => panic!(
            "expected a rejection, got accepted entry {}",
            rc.appended.index
        ),
    }
}

/// Asserts `r` was refused with `code`, and returns the rejection.
pub fn expect_code(r: Posted, code: RejectCode) -> Rejection {
    let (rej, _) = rejection(r);
    assert_eq!(rej.code, code, "wrong code: {rej}");
    rej
}
