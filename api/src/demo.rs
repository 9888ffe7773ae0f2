//! `ledger demo`: a realistic sample bench loaded through the HTTP API, so a
//! newcomer sees scores, recommendations and verified proofs in a minute.

use std::collections::BTreeMap;

use anyhow::{bail, Context};
use ed25519_dalek::SigningKey;
use events::envelope::{case_provenance_statement, format_micros, public_key_b64};
use events::model::*;
use events::{cosign, key_id, sign_envelope};

use crate::check::{check_projection, check_receipt, ReceiptChecker};
use crate::client::{Client, Reply};
use crate::server::{ProjectionResponse, RecommendationResponse, WriteReceipt};

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
            issued_at: format_micros(chrono_now()),
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

fn chrono_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

const RUBRIC: &str = "blake3:7d3c1c5e9a0b8f6e2d4c6a8b0e2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d8f";
const IMAGE: &str = "sha256:4c1f0e9a7b6d5c3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e";

fn digest(s: &str) -> String {
    format!("blake3:{}", blake3::hash(s.as_bytes()).to_hex())
}

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
    let classes = [
        ("migration-chainguard-distroless", 40, 0.9),
        ("dependency-bump", 30, 0.78),
        ("flaky-test-quarantine", 20, 0.55),
    ];
    let mut seed = 7u64;
    for (tc, n, base) in classes {
        let mut tiers = BTreeMap::new();
        tiers.insert(
            Tier::Silver,
            TierRule {
                min_cases_for_promotion: 15,
                score_threshold: 0.7,
            },
        );
        tiers.insert(
            Tier::Gold,
            TierRule {
                min_cases_for_promotion: 35,
                score_threshold: 0.85,
            },
        );
        p.post(
            "operator",
            Event::TaskClassRegistered(TaskClassRegistered {
                task_class: tc.into(),
                tiers,
                failure_modes: vec![
                    FailureMode {
                        code: "build_broken".into(),
                        severity: "block".into(),
                        description: "the change does not build".into(),
                    },
                    FailureMode {
                        code: "lint_regression".into(),
                        severity: "warn".into(),
                        description: "new lint warnings".into(),
                    },
                ],
                breakdown_keys: vec!["correctness".into(), "minimality".into()],
                rubric_digest: RUBRIC.into(),
                initial_tier: Tier::Bronze,
            }),
        )?;
        for i in 0..n {
            let case_id = format!("{tc}-{i:03}");
            let added_at = format_micros(chrono_now());
            let st = case_provenance_statement(&case_id, &added_at, &digest(&case_id));
            let (a, b) = (p.key("curator-ada"), p.key("curator-grace"));
            p.post(
                "curator-ada",
                Event::CaseAdded(CaseAdded {
                    task_class: tc.into(),
                    case_id: case_id.clone(),
                    title: format!("{tc} case {i}"),
                    disposition: Disposition::Positive,
                    difficulty: ["easy", "medium", "hard"][i % 3].into(),
                    curation_class: "held-out".into(),
                    provenance: Provenance {
                        source: CaseSource::Curated,
                        source_ref: format!("bench/{tc}/cases/{case_id}"),
                        added_at,
                        added_by: cosign(&a, &st),
                        reviewed_by: cosign(&b, &st),
                    },
                    case_digest: digest(&case_id),
                    cassette_digest: digest(&format!("cassette {case_id}")),
                }),
            )?;
        }
        let run_id = format!("{tc}-run-1");
        p.post(
            "harness",
            Event::RunStarted(RunStarted {
                run_id: run_id.clone(),
                task_class: tc.into(),
                harness_version: "harness 1.4.2".into(),
                rubric_digest: RUBRIC.into(),
                sandbox_image_digest: IMAGE.into(),
                isolation_class: Isolation::Microvm,
            }),
        )?;
        for i in 0..n {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let jitter = ((seed >> 33) % 200) as f64 / 1000.0 - 0.1;
            let v = (base + jitter).clamp(0.0, 1.0);
            let mut breakdown = BTreeMap::new();
            breakdown.insert("correctness".to_owned(), v);
            p.post(
                "harness",
                Event::ScoreRecorded(score(tc, &run_id, &format!("{tc}-{i:03}"), v, breakdown)),
            )?;
        }
        p.post("harness", Event::RunFinished(RunFinished { run_id }))?;
        println!("{tc}: registered, {n} held-out cases co-signed by two curators, one microvm run scored");
    }
    // The poisoned attempt and the banned breakdown key.
    let tc = "flaky-test-quarantine";
    p.post(
        "harness",
        Event::RunStarted(RunStarted {
            run_id: "flaky-run-2".into(),
            task_class: tc.into(),
            harness_version: "harness 1.4.2".into(),
            rubric_digest: RUBRIC.into(),
            sandbox_image_digest: IMAGE.into(),
            isolation_class: Isolation::Microvm,
        }),
    )?;
    let mut poisoned = score(
        tc,
        "flaky-run-2",
        "flaky-test-quarantine-000",
        1.0,
        BTreeMap::new(),
    );
    poisoned.case_digest = digest("a softened copy of flaky-test-quarantine-000");
    let r = p.post_refused("harness", Event::ScoreRecorded(poisoned))?;
    println!(
        "refused a poisoned score ({}): {}",
        r.status,
        r.code().unwrap_or_default()
    );
    let mut bd = BTreeMap::new();
    bd.insert("llm_confidence".to_owned(), 0.99);
    let r = p.post_refused(
        "harness",
        Event::ScoreRecorded(score(
            tc,
            "flaky-run-2",
            "flaky-test-quarantine-001",
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

fn score(
    tc: &str,
    run_id: &str,
    case: &str,
    v: f64,
    breakdown: BTreeMap<String, f64>,
) -> ScoreRecorded {
    let now = format_micros(chrono_now());
    ScoreRecorded {
        run_id: run_id.into(),
        task_class: tc.into(),
        case_id: case.into(),
        case_digest: digest(case),
        rubric_digest: RUBRIC.into(),
        cassette_digest: digest(&format!("cassette {case}")),
        harness_version: "harness 1.4.2".into(),
        image_digest: IMAGE.into(),
        score: BenchScore {
            passed: v >= 0.6,
            score: v,
            breakdown,
            failure_modes: vec![],
            cost_usd: 0.04,
            duration_seconds: 42.0,
        },
        started_at: now.clone(),
        finished_at: now,
        operator_fingerprint: "SHA256:demo-operator".into(),
    }
}

fn print_view(p: &ProjectionResponse) {
    let v = &p.view;
    let f = |path: &[&str]| -> String {
        let mut cur = v;
        for k in path {
            cur = &cur[*k];
        }
        match cur {
            serde_json::Value::Number(n) if n.is_u64() => n.to_string(),
            serde_json::Value::Number(n) => {
                n.as_f64().map(|x| format!("{x:.3}")).unwrap_or_default()
            }
            serde_json::Value::Null => "-".into(),
            other => other.to_string().trim_matches('"').to_owned(),
        }
    };
    println!(
        "{:<32} tier {:<6} held-out {:>3} cases  mean {} [{}, {}]  pass rate {}  -> recommend {}",
        f(&["task_class"]),
        f(&["tier"]),
        f(&["held_out", "cases"]),
        f(&["held_out", "mean"]),
        f(&["held_out", "mean_ci", "low"]),
        f(&["held_out", "mean_ci", "high"]),
        f(&["held_out", "pass_rate"]),
        f(&["recommendation", "recommended_tier"]),
    );
    if let Some(rules) = v["recommendation"]["rationale"].as_array() {
        for r in rules {
            println!(
                "    {} {:<40} {}",
                if r["holds"].as_bool() == Some(true) {
                    "✓"
                } else {
                    "✗"
                },
                r["rule"].as_str().unwrap_or_default(),
                r["detail"].as_str().unwrap_or_default()
            );
        }
    }
}

/// Reads a principal key file (note signer key format) as a signing key.
pub fn read_signing_key(path: &std::path::Path) -> anyhow::Result<SigningKey> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(anchors::LogKey::from_private(&text)?.signing_key())
}
