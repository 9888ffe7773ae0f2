//! `ledger demo`: a realistic sample bench loaded through the HTTP API, so a
//! newcomer sees scores, recommendations and verified proofs in a minute.

use std::collections::BTreeMap;

use anyhow::bail;
use ed25519_dalek::SigningKey;
use events::envelope::format_micros;
use events::envelope::public_key_b64;
use events::model::*;
use events::sample::{self, Sample};

use events::{Clock as _, SystemClock};
use verifier::check::{check_projection, check_receipt};
use verifier::client::Client;
use verifier::client::Reply;
use verifier::post::{post_one, sign_event_bound};
use verifier::wire::WriteReceipt;
use verifier::wire::{ProjectionResponse, RecommendationResponse};

/// Posts signed events as named actors, checking every receipt. The keys
/// of actors it was not given are derived from their names: anyone can
/// compute them. For the demo and tests only; never enrol them in a log
/// that matters.
pub struct Poster<'a> {
    pub client: &'a Client,
    pub vkey: String,
    keys: BTreeMap<String, SigningKey>,
    /// The handle each case name was given, with its disclosure.
    handles: BTreeMap<String, events::disclose::Bound>,
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
            handles: BTreeMap::new(),
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
        // A case this poster gave a handle (the demo's, salted at random),
        // or else the handle the sample gives (tests that build events with
        // `events::sample`).
        let bound = match events::disclose::handle_field(&event)
            .and_then(|h| self.handles.values().find(|b| b.handle == h.handle))
        {
            Some(b) => vec![b.clone()],
            None => events::sample::bindings_for(&event),
        };
        sign_event_bound(&key, &format!("demo-{:06}", self.next), event, &bound)
    }

    /// The handle of case `name`: given here, with a random salt, the first
    /// time it is asked for.
    pub fn case_handle(&mut self, name: &str) -> anyhow::Result<String> {
        if let Some(b) = self.handles.get(name) {
            return Ok(b.handle.clone());
        }
        let b = events::disclose::bind("case_name", name)
            .map_err(|e| anyhow::anyhow!("no randomness for a salt: {e}"))?;
        let handle = b.handle.clone();
        self.handles.insert(name.to_owned(), b);
        Ok(handle)
    }

    /// Posts as `signer` (a name given to [`Poster::new`] or derived) and
    /// expects success; checks the receipt's proof and checkpoint.
    pub fn post(&mut self, signer: &str, event: Event) -> anyhow::Result<WriteReceipt> {
        let env = self.envelope(signer, event);
        let rc = post_one(self.client, &self.vkey, &env)?;
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
                sigstore: None,
                public_key: public_key_b64(&k.verifying_key()),
                identity: format!("{name}@bench.example"),
                identity_name: None,
                roles: vec![role],
            }),
        )?;
        Ok(())
    }
}

const RUBRIC: &str = "blake3:7d3c1c5e9a0b8f6e2d4c6a8b0e2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d8f";
const IMAGE: &str = "sha256:4c1f0e9a7b6d5c3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e";

/// The sample bench: three task classes, 90 held-out cases, one microvm run
/// each, a rejected poisoned score and a rejected banned breakdown key.
pub fn load_bench(client: &Client, operator: SigningKey, vkey: &str) -> anyhow::Result<()> {
    let mut p = Poster::new(client, vkey.to_owned(), operator);
    for (name, role) in [
        ("harness", Role::Harness),
        ("curator-ada", Role::Curator),
        ("curator-grace", Role::Curator),
        ("reconciler", Role::Reconciler),
        ("promotion-gate", Role::PromotionGate),
        ("maintainer-lin", Role::Maintainer),
        ("maintainer-ken", Role::Maintainer),
    ] {
        p.enrol(name, role)?;
    }
    println!("enrolled 7 principals (harness, two curators, reconciler, promotion gate, two maintainers)");
    let mut sigstore = SigstoreDemo::enrol(&mut p, vkey)?;
    let classes = [
        ("migration-chainguard-distroless", 40, 0.9),
        ("dependency-bump", 30, 0.78),
        ("flaky-test-quarantine", 20, 0.55),
    ];
    let sample = Sample::new(RUBRIC, IMAGE);
    let mut seed = 7u64;
    for (tc, n, base) in classes {
        p.post(
            "operator",
            Event::TaskClassRegistered(sample.task_class(tc, (15, 0.7), (35, 0.85))),
        )?;
        for i in 0..n {
            let case_id = format!("{tc}-{i:03}");
            let added_at = format_micros(SystemClock.now_micros());
            let (a, b) = (p.key("curator-ada"), p.key("curator-grace"));
            let handle = p.case_handle(&case_id)?;
            let mut case =
                sample.case_added_as(tc, &handle, &case_id, "held-out", &added_at, (&a, &b));
            case.difficulty = ["easy", "medium", "hard"][i % 3].into();
            if i < SigstoreDemo::CASES && tc == classes[0].0 {
                sigstore.review(&mut case)?;
                let rc = p.post("curator-ada", Event::CaseAdded(case))?;
                sigstore.cosigned.push((case_id, rc.index));
            } else {
                p.post("curator-ada", Event::CaseAdded(case))?;
            }
        }
        let run_id = format!("{tc}-run-1");
        p.post(
            "harness",
            Event::RunStarted(sample.run(tc, &run_id, Isolation::Microvm)),
        )?;
        for i in 0..n {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let jitter = ((seed >> 33) % 200) as f64 / 1000.0 - 0.1;
            let v = (base + jitter).clamp(0.0, 1.0);
            let mut breakdown = BTreeMap::new();
            breakdown.insert("correctness".to_owned(), v);
            let name = format!("{tc}-{i:03}");
            let handle = p.case_handle(&name)?;
            p.post(
                "harness",
                Event::ScoreRecorded(score(&sample, tc, &run_id, (&name, handle), v, breakdown)),
            )?;
        }
        p.post("harness", Event::RunFinished(RunFinished { run_id }))?;
        println!("{tc}: registered, {n} held-out cases co-signed by two curators, one microvm run scored");
    }
    sigstore.show();
    // The poisoned attempt and the banned breakdown key.
    let tc = "flaky-test-quarantine";
    p.post(
        "harness",
        Event::RunStarted(sample.run(tc, "flaky-run-2", Isolation::Microvm)),
    )?;
    let handle = p.case_handle("flaky-test-quarantine-000")?;
    let mut poisoned = score(
        &sample,
        tc,
        "flaky-run-2",
        ("flaky-test-quarantine-000", handle),
        1.0,
        BTreeMap::new(),
    );
    poisoned.case_digest = sample::digest("a softened copy of flaky-test-quarantine-000");
    let r = p.post_refused("harness", Event::ScoreRecorded(poisoned))?;
    println!(
        "refused a poisoned score ({}): {}",
        r.status,
        r.code().unwrap_or_default()
    );
    let mut bd = BTreeMap::new();
    bd.insert("llm_confidence".to_owned(), 0.99);
    let handle = p.case_handle("flaky-test-quarantine-001")?;
    let r = p.post_refused(
        "harness",
        Event::ScoreRecorded(score(
            &sample,
            tc,
            "flaky-run-2",
            ("flaky-test-quarantine-001", handle),
            1.0,
            bd,
        )),
    )?;
    println!(
        "refused a banned breakdown key ({}): {}",
        r.status,
        r.code().unwrap_or_default()
    );
    let r = p.post_refused(
        "promotion-gate",
        Event::TierApply(TierApply {
            task_class: tc.into(),
            to: Tier::Gold,
        }),
    )?;
    println!(
        "refused an attempt to apply a tier ({}): {} — and recorded it",
        r.status,
        r.code().unwrap_or_default()
    );

    println!();
    let mut proofs = 0;
    for (tc, _, _) in classes {
        let env = p.envelope(
            "promotion-gate",
            Event::PromotionRequested(PromotionRequested {
                task_class: tc.into(),
            }),
        );
        let r = client.post_json("/v1/recommendations", &env)?;
        if !(200..300).contains(&r.status) {
            bail!("recommendation for {tc} failed: {}", r.text());
        }
        let rec: RecommendationResponse = r.json()?;
        check_receipt(&rec.recommendation, vkey)?;
        proofs += check_projection(&rec.projection, vkey)? + 1;
        print_view(&rec.projection);
    }
    let fetched: ProjectionResponse =
        client.get_json("/v1/task-classes/migration-chainguard-distroless")?;
    proofs += check_projection(&fetched, vkey)?;
    println!(
        "checked {} write receipts and {proofs} evidence and recommendation proofs against signed checkpoints: all verify",
        p.receipts_checked
    );
    Ok(())
}

/// A curator enrolled by Sigstore identity, from the SYNTHETIC Sigstore
/// instance (`sigstore_check::synthetic`: a test CA, CT log and Rekor key
/// whose private keys are public), so the demo runs offline. Its trusted
/// root is recorded in the demo's log; a real log records Sigstore's.
struct SigstoreDemo {
    synthetic: sigstore_check::synthetic::Synthetic,
    origin: String,
    cosigned: Vec<(String, u64)>,
}

impl SigstoreDemo {
    /// How many cases of the first task class the Sigstore curator reviews.
    const CASES: usize = 5;

    fn identity() -> SigstoreIdentity {
        SigstoreIdentity {
            identity: sigstore_check::synthetic::CURATOR.into(),
            issuer: sigstore_check::synthetic::ISSUER.into(),
        }
    }

    /// Records the synthetic trusted root with the log's origin (the name
    /// in its verifier key) and enrols the curator by identity.
    fn enrol(p: &mut Poster<'_>, vkey: &str) -> anyhow::Result<SigstoreDemo> {
        let synthetic = sigstore_check::synthetic::Synthetic::load()?;
        let origin = vkey.split('+').next().unwrap_or_default().to_owned();
        let root = p.post(
            "operator",
            Event::SigstoreRootTrusted(SigstoreRootTrusted {
                origin: origin.clone(),
                trusted_root: sigstore_check::synthetic::TRUSTED_ROOT.into(),
            }),
        )?;
        p.post(
            "operator",
            Event::PrincipalEnrolled(PrincipalEnrolled {
                sigstore: Some(Self::identity()),
                public_key: String::new(),
                identity: "curator-sigstore@bench.example".into(),
                identity_name: None,
                roles: vec![Role::Curator],
            }),
        )?;
        println!(
            "recorded a Sigstore trusted root at entry {} (the SYNTHETIC test instance: its keys are public, for this demo only) and enrolled a curator by Sigstore identity {} (issuer {})",
            root.index,
            sigstore_check::synthetic::CURATOR,
            sigstore_check::synthetic::ISSUER
        );
        Ok(SigstoreDemo {
            synthetic,
            origin,
            cosigned: Vec::new(),
        })
    }

    /// The case's review co-signature becomes a Sigstore bundle by the
    /// curator over the statement for this log and the curator role.
    fn review(&self, case: &mut CaseAdded) -> anyhow::Result<()> {
        let st = events::envelope::case_provenance_statement(
            &case.case_id,
            &case.provenance.added_at,
            &case.case_digest,
        );
        let message = events::sigstore_statement(&self.origin, Role::Curator, &st);
        case.provenance.reviewed_by = CoSignature {
            key_id: events::sigstore_principal_id(&Self::identity()),
            signature: String::new(),
            sigstore_bundle: Some(self.synthetic.sign("curator", &message)?),
        };
        Ok(())
    }

    fn show(&self) {
        let list: Vec<String> = self
            .cosigned
            .iter()
            .map(|(name, index)| format!("{name} (entry {index})"))
            .collect();
        println!(
            "cases reviewed by Sigstore identity {}, each bundle verified offline by the ledger at append time and kept in its entry: {}",
            sigstore_check::synthetic::CURATOR,
            list.join(", ")
        );
    }
}

/// A score of the demo: passed at 0.6 or more, with `breakdown`.
fn score(
    sample: &Sample,
    tc: &str,
    run_id: &str,
    (case, handle): (&str, String),
    v: f64,
    breakdown: BTreeMap<String, f64>,
) -> ScoreRecorded {
    let now = format_micros(SystemClock.now_micros());
    let mut s = sample.score(tc, run_id, case, v, &now);
    s.case_digest = sample::digest(&handle);
    s.cassette_digest = sample::cassette_digest(&handle);
    s.case_id = handle;
    s.score.passed = v >= 0.6;
    s.score.breakdown = breakdown;
    s.operator_fingerprint = "SHA256:demo-operator".into();
    s
}

fn print_view(p: &ProjectionResponse) {
    let v = &p.view;
    let num = |x: Option<f64>| x.map_or_else(|| "-".to_owned(), |x| format!("{x:.3}"));
    let h = &v.held_out;
    println!(
        "{:<32} tier {:<6} held-out {:>3} cases  mean {} [{}, {}]  pass rate {}  -> recommend {}",
        v.task_class,
        v.tier.as_str(),
        h.cases,
        num(h.mean),
        num(h.mean_ci.as_ref().map(|i| i.low)),
        num(h.mean_ci.as_ref().map(|i| i.high)),
        num(h.pass_rate),
        v.recommendation.recommended_tier.as_str(),
    );
    for r in &v.recommendation.rationale {
        println!(
            "    {} {:<40} {}",
            if r.holds { "✓" } else { "✗" },
            r.rule,
            r.detail
        );
    }
}
