//! The load generator: N clients post signed, validated events through the
//! real HTTP API, closed-loop (each client waits for its answer) or
//! open-loop (a fixed total rate; latency is measured from each request's
//! scheduled time, so a slow server cannot hide queueing).
//!
//! The events are the realistic mix the ledger exists for: scores with
//! breakdowns (and now and then a failure mode) against held-out cases, and,
//! every `case_every`-th event, a new case co-signed by two curators (three
//! Ed25519 signatures for the server to check). Every client scores its own
//! open run.
//!
//! Every receipt is checked: its signed checkpoint (a byte-identical note
//! already verified is not re-verified), its RFC 6962 inclusion proof, and
//! that the included leaf *is the envelope this client posted*, rebuilt from
//! the envelope and the receipt's `sequenced_at`. Speed cannot come from
//! skipping work, or from answering with someone else's proof.
//!
//! Envelopes are signed before the clock starts (they are what a harness
//! would have ready to send); a client that runs out signs more inline, and
//! the report says how many.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ed25519_dalek::SigningKey;
use events::envelope::format_micros;
use events::key_id;
use events::model::SCHEMA_VERSION;
use events::model::*;
use events::sample::Sample;
use verifier::check::ReceiptChecker;
use verifier::client::Client;

/// What to run.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    pub clients: usize,
    pub duration: Duration,
    /// Total requests per second; 0 means closed loop.
    pub rate: f64,
    /// One event in this many adds a co-signed case; the rest are scores.
    pub case_every: u64,
    /// Envelopes signed ahead, over all clients, in closed loop (open loop
    /// signs `rate × duration`).
    pub presign: usize,
    /// Envelopes per request: 1 posts each to `POST /v1/events`; more posts
    /// them together to `POST /v1/events/batch`.
    pub batch: usize,
}

impl Default for LoadConfig {
    fn default() -> Self {
        LoadConfig {
            clients: 64,
            duration: Duration::from_secs(10),
            rate: 0.0,
            case_every: 10,
            presign: 300_000,
            batch: 1,
        }
    }
}

/// What happened.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    pub acknowledged: u64,
    pub proofs_checked: u64,
    pub scores: u64,
    pub cases: u64,
    /// Envelopes signed inside the timed window (the presigned ones ran out).
    pub signed_inline: u64,
    pub errors_by_code: BTreeMap<String, u64>,
    pub elapsed: Duration,
    pub latencies_us: Vec<u64>,
    /// CPU time this process used in the timed window, user and system:
    /// the clients' (and the server's too when it runs in this process).
    pub cpu_seconds: f64,
}

impl LoadReport {
    /// Counts one write whose receipt was checked, `latency_us` after it
    /// was scheduled.
    fn acknowledged(&mut self, latency_us: u64, case: bool) {
        self.latencies_us.push(latency_us);
        self.acknowledged += 1;
        self.proofs_checked += 1;
        if case {
            self.cases += 1;
        } else {
            self.scores += 1;
        }
    }

    pub fn throughput(&self) -> f64 {
        self.acknowledged as f64 / self.elapsed.as_secs_f64()
    }

    pub fn percentile_us(&self, q: f64) -> u64 {
        if self.latencies_us.is_empty() {
            return 0;
        }
        let mut v = self.latencies_us.clone();
        v.sort_unstable();
        v[((v.len() - 1) as f64 * q).round() as usize]
    }

    pub fn summary(&self) -> String {
        format!(
            "{} acknowledged in {:.2?} = {:.0} events/s ({} scores, {} co-signed cases); latency p50 {} µs, p99 {} µs, p999 {} µs; {} proofs and checkpoints verified; {} envelopes signed inline; this process's CPU {:.0} µs per event; errors {:?}",
            self.acknowledged,
            self.elapsed,
            self.throughput(),
            self.scores,
            self.cases,
            self.percentile_us(0.5),
            self.percentile_us(0.99),
            self.percentile_us(0.999),
            self.proofs_checked,
            self.signed_inline,
            self.cpu_seconds * 1e6 / self.acknowledged.max(1) as f64,
            self.errors_by_code
        )
    }

    fn merge(&mut self, o: LoadReport) {
        self.acknowledged += o.acknowledged;
        self.proofs_checked += o.proofs_checked;
        self.scores += o.scores;
        self.cases += o.cases;
        self.signed_inline += o.signed_inline;
        self.latencies_us.extend(o.latencies_us);
        for (k, v) in o.errors_by_code {
            *self.errors_by_code.entry(k).or_default() += v;
        }
    }
}

/// Held-out cases registered before the HTTP load; scores cycle through them.
const PREPARED_CASES: usize = 16;

/// The principals, task class, cases and runs a load writes against, with
/// names unique to it (so one server can take several loads).
#[derive(Debug, Clone)]
pub struct Prepared {
    nonce: String,
    operator: SigningKey,
    harness: SigningKey,
    curators: [SigningKey; 2],
    pub task_class: String,
    runs: Vec<String>,
    cases: usize,
    /// Scores name cases by their ids in clear: the cases were added
    /// before the log's switch to schema 3 (a directory grown by an earlier
    /// build), and such an id is its case's handle.
    pub ids_in_clear: bool,
}

/// One rubric and one sandbox image for the whole load, as a task class's
/// bench has; real digests, not runs of one letter, so that compressed
/// storage is measured on bytes like a harness's.
const RUBRIC: &str = "blake3:6f1cd84e2b0a91c7d3e5f8a4b2c6e0d9a7f3b1c5e8d2a4f6b0c9e7d1a3f5b8c2";
const IMAGE: &str = "sha256:c3a9e1f7b5d2084c6e9a1f3b7d5c2e8a0f4b6d9c1e3a7f5b8d2c0e4a6f9b1d3c";

fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

fn derived_key(nonce: &str, name: &str) -> SigningKey {
    SigningKey::from_bytes(
        blake3::hash(format!("evidence-ledger bench key {nonce} {name}").as_bytes()).as_bytes(),
    )
}

impl Prepared {
    /// A fresh set of names and keys (keys derive from `nonce`, so a later
    /// process can sign for the same principals).
    pub fn new(nonce: &str, operator: SigningKey, clients: usize, cases: usize) -> Prepared {
        Prepared {
            operator,
            harness: derived_key(nonce, "harness"),
            curators: [
                derived_key(nonce, "curator-a"),
                derived_key(nonce, "curator-b"),
            ],
            task_class: format!("load-{nonce}"),
            runs: (0..clients.max(1))
                .map(|c| format!("load-{nonce}-run-{c}"))
                .collect(),
            cases: cases.max(1),
            nonce: nonce.to_owned(),
            ids_in_clear: false,
        }
    }

    /// A random nonce.
    pub fn fresh_nonce() -> String {
        hex::encode(rand_bytes())
    }

    fn sign(&self, key: &SigningKey, id: String, event: Event) -> Vec<u8> {
        let payload = Payload {
            schema: SCHEMA_VERSION,
            id,
            signer: key_id(&key.verifying_key()),
            issued_at: format_micros(now_micros()),
            event,
        };
        // The sample's handles: a case or an identity named first gets
        // the handle the sample gives it, so a score can name it.
        let bound = events::sample::bindings_for(&payload.event);
        events::envelope::sign_write_bound(key, payload, &bound)
    }

    /// The signed set-up, in order: enrol a harness and two curators,
    /// register the task class, add its held-out cases (each co-signed by
    /// both curators) and start one run per client.
    pub fn setup(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut n = 0;
        let mut next_id = || {
            n += 1;
            format!("load-{}-setup-{n}", self.nonce)
        };
        for (key, name, role) in [
            (&self.harness, "harness", Role::Harness),
            (&self.curators[0], "curator-a", Role::Curator),
            (&self.curators[1], "curator-b", Role::Curator),
        ] {
            let e = Event::PrincipalEnrolled(PrincipalEnrolled {
                sigstore: None,
                public_key: events::envelope::public_key_b64(&key.verifying_key()),
                identity: format!("{name}-{}@bench.example", self.nonce),
                identity_name: None,
                roles: vec![role],
            });
            out.push(self.sign(&self.operator, next_id(), e));
        }
        let tc =
            Event::TaskClassRegistered(sample().task_class(&self.task_class, (3, 0.7), (5, 0.9)));
        out.push(self.sign(&self.operator, next_id(), tc));
        for i in 0..self.cases {
            let e = case_added(self, &format!("load-{}-case-{i}", self.nonce));
            out.push(self.sign(&self.curators[0], next_id(), e));
        }
        for run_id in &self.runs {
            let e = Event::RunStarted(sample().run(&self.task_class, run_id, Isolation::Microvm));
            out.push(self.sign(&self.harness, next_id(), e));
        }
        out
    }

    /// The enrolment of a gate for this bench (signed by the operator), and
    /// the `i`-th `promotion.requested` it signs for the task class: what
    /// `POST /v1/recommendations` takes.
    pub fn gate_enrolment(&self) -> Vec<u8> {
        let gate = derived_key(&self.nonce, "gate");
        let e = Event::PrincipalEnrolled(PrincipalEnrolled {
            sigstore: None,
            public_key: events::envelope::public_key_b64(&gate.verifying_key()),
            identity: format!("gate-{}@bench.example", self.nonce),
            identity_name: None,
            roles: vec![Role::PromotionGate],
        });
        self.sign(&self.operator, format!("load-{}-gate", self.nonce), e)
    }

    /// See [`Prepared::gate_enrolment`].
    pub fn promotion_request(&self, i: u64) -> Vec<u8> {
        let gate = derived_key(&self.nonce, "gate");
        let e = Event::PromotionRequested(events::model::PromotionRequested {
            task_class: self.task_class.clone(),
        });
        self.sign(&gate, format!("load-{}-request-{i}", self.nonce), e)
    }

    /// The `i`-th event of `client`: a new co-signed case when
    /// `case_every` divides `i + 1`, otherwise a score on the client's run.
    /// The key the load's scores are signed with.
    pub fn harness_key(&self) -> &SigningKey {
        &self.harness
    }

    pub fn event(&self, client: usize, i: u64, case_every: u64) -> (Vec<u8>, bool) {
        let case = case_every > 0 && i % case_every == case_every - 1;
        let id = format!("load-{}-{client}-{i}", self.nonce);
        let env = if case {
            let case_id = format!("load-{}-c{client}-{i}", self.nonce);
            self.sign(&self.curators[0], id, case_added(self, &case_id))
        } else {
            self.sign(&self.harness, id, score(self, client, i))
        };
        (env, case)
    }
}

/// Sets up a load on a server through its API, checking every receipt.
pub fn prepare(
    client: &Client,
    vkey: &str,
    operator: &SigningKey,
    clients: usize,
) -> anyhow::Result<Prepared> {
    let p = Prepared::new(
        &Prepared::fresh_nonce(),
        operator.clone(),
        clients,
        PREPARED_CASES,
    );
    let mut checker = ReceiptChecker::new(vkey);
    for env in p.setup() {
        let r = client.post_json("/v1/events", &env)?;
        if r.status != 201 {
            anyhow::bail!("set-up write refused ({}): {}", r.status, r.text());
        }
        checker.check(&r.json()?, Some(&env))?;
    }
    Ok(p)
}

fn rand_bytes() -> [u8; 6] {
    let mut b = [0u8; 6];
    let t = now_micros().to_le_bytes();
    let h = blake3::hash(&[&t[..], &std::process::id().to_le_bytes()[..]].concat());
    b.copy_from_slice(&h.as_bytes()[..6]);
    b
}

fn sample() -> Sample {
    let mut s = Sample::new(RUBRIC, IMAGE);
    s.harness_version = "loadgen".into();
    s
}

fn case_added(p: &Prepared, case_id: &str) -> Event {
    let added_at = format_micros(now_micros());
    let mut case = sample().case_added(
        &p.task_class,
        case_id,
        "held-out",
        &added_at,
        (&p.curators[0], &p.curators[1]),
    );
    case.title = format!("load case {case_id}").into();
    Event::CaseAdded(case)
}

fn score(p: &Prepared, client: usize, i: u64) -> Event {
    let case_id = format!("load-{}-case-{}", p.nonce, i as usize % p.cases);
    // A cheap deterministic spread of values in [0.5, 1.0) that differs
    // between reruns of a case (so a new score changes the case's latest
    // value, and a projection must recompute its statistics).
    let x = ((i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) % 1000) as f64 / 2000.0 + 0.5;
    let mut breakdown = BTreeMap::new();
    breakdown.insert("correctness".to_owned(), x);
    breakdown.insert("minimality".to_owned(), 1.0 - x / 2.0);
    let failure_modes = if i.is_multiple_of(7) {
        vec![ScoreFailureMode {
            code: "lint_regression".into(),
            severity: "warn".into(),
        }]
    } else {
        vec![]
    };
    let now = format_micros(now_micros());
    let run_id = &p.runs[client % p.runs.len()];
    let mut s = sample().score(&p.task_class, run_id, &case_id, x, &now);
    if p.ids_in_clear {
        s.case_id = case_id;
    }
    s.score.passed = x >= 0.7;
    s.score.breakdown = breakdown;
    s.score.failure_modes = failure_modes;
    s.score.cost_usd = 0.03;
    s.operator_fingerprint = "SHA256:loadgen".into();
    Event::ScoreRecorded(s)
}

/// One event to post: its signed envelope, the same envelope decoded (to
/// rebuild the leaf a receipt must prove), and whether it is a case.
struct Planned {
    envelope: Vec<u8>,
    decoded: events::envelope::Decoded,
    case: bool,
}

/// The `i`-th event of `client`, signed and decoded. What the client decodes
/// is its own envelope, so a failure here is a bug in the generator.
fn plan(p: &Prepared, cfg: &LoadConfig, client: usize, i: u64) -> Planned {
    let (envelope, case) = p.event(client, i, cfg.case_every);
    let decoded = match events::envelope::split_write(&envelope)
        .and_then(|w| events::decode_envelope(w.envelope))
    {
        Ok(d) => d,
        Err(e) => panic!("the load generator signed an envelope it cannot decode: {e}"),
    };
    Planned {
        envelope,
        decoded,
        case,
    }
}

/// Signs each client's envelopes ahead of the run, on every core.
fn presign(p: &Prepared, cfg: &LoadConfig) -> Vec<Vec<Planned>> {
    let per_client = if cfg.rate > 0.0 {
        (cfg.rate * cfg.duration.as_secs_f64() / cfg.clients as f64).ceil() as usize + 8
    } else {
        cfg.presign / cfg.clients.max(1)
    };
    let mut out: Vec<Vec<Planned>> = (0..cfg.clients).map(|_| Vec::new()).collect();
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        let chunk = cfg.clients.div_ceil(workers).max(1);
        for (w, slots) in out.chunks_mut(chunk).enumerate() {
            s.spawn(move || {
                for (k, slot) in slots.iter_mut().enumerate() {
                    let c = w * chunk + k;
                    *slot = (0..per_client as u64).map(|i| plan(p, cfg, c, i)).collect();
                }
            });
        }
    });
    out
}

/// Runs the load against `base`.
pub fn run(base: &str, vkey: &str, prepared: &Prepared, cfg: &LoadConfig) -> LoadReport {
    let planned = presign(prepared, cfg);
    let report = Arc::new(Mutex::new(LoadReport::default()));
    let started = Instant::now();
    let deadline = started + cfg.duration;
    let batch = cfg.batch.max(1);
    let per_client_interval = (cfg.rate > 0.0)
        .then(|| Duration::from_secs_f64(cfg.clients as f64 * batch as f64 / cfg.rate));
    // One memory of verified checkpoint notes for all clients: a batch's
    // note is signature-checked once, not once per client that sees it.
    let checker = ReceiptChecker::new(vkey);
    let cpu_before = crate::cpu_seconds(std::process::id());
    let threads: Vec<_> = planned
        .into_iter()
        .enumerate()
        .map(|(c, mine)| {
            let (base, checker, report) = (base.to_owned(), checker.clone(), Arc::clone(&report));
            let (prepared, cfg) = (prepared.clone(), cfg.clone());
            std::thread::spawn(move || {
                let client = Client::new(&base, None);
                let mut local = LoadReport::default();
                let mut mine = mine.into_iter();
                let mut next = Instant::now();
                for i in 0u64.. {
                    if per_client_interval.is_some() {
                        let now = Instant::now();
                        if next > now {
                            std::thread::sleep(next - now);
                        }
                    }
                    if Instant::now() >= deadline {
                        break;
                    }
                    let scheduled = if per_client_interval.is_some() {
                        next
                    } else {
                        Instant::now()
                    };
                    let mut next_event = |k: u64| {
                        mine.next().unwrap_or_else(|| {
                            local.signed_inline += 1;
                            plan(&prepared, &cfg, c, i * batch as u64 + k)
                        })
                    };
                    if batch == 1 {
                        let ev = next_event(0);
                        post_one(&client, &checker, &ev, scheduled, &mut local);
                    } else {
                        let evs: Vec<Planned> = (0..batch as u64).map(&mut next_event).collect();
                        post_batch(&client, &checker, &evs, scheduled, &mut local);
                    }
                    if let Some(iv) = per_client_interval {
                        next += iv;
                    }
                }
                report
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .merge(local);
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    let mut r = Arc::try_unwrap(report)
        .map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()))
        .unwrap_or_default();
    r.elapsed = started.elapsed();
    r.cpu_seconds = crate::cpu_seconds(std::process::id()) - cpu_before;
    r
}

/// Posts `evs` as one batch and checks every result: each must be a
/// receipt for its own envelope (errors are counted by code).
fn post_batch(
    client: &Client,
    checker: &ReceiptChecker,
    evs: &[Planned],
    scheduled: Instant,
    local: &mut LoadReport,
) {
    let fail = |local: &mut LoadReport, code: String, n: u64| {
        *local.errors_by_code.entry(code).or_default() += n
    };
    let answer = match client.post_batch(evs.iter().map(|e| e.envelope.as_slice())) {
        Ok(r) if r.status == 200 => r.json::<verifier::wire::BatchResponse>(),
        Ok(r) => {
            fail(
                local,
                r.code().unwrap_or_else(|| r.status.to_string()),
                evs.len() as u64,
            );
            return;
        }
        Err(_) => {
            fail(local, "transport".into(), evs.len() as u64);
            return;
        }
    };
    let latency = scheduled.elapsed().as_micros() as u64;
    let Ok(answer) = answer.map_err(|_| ()).and_then(|a| {
        if a.results.len() == evs.len() {
            Ok(a)
        } else {
            Err(())
        }
    }) else {
        fail(local, "proof_failed".into(), evs.len() as u64);
        return;
    };
    for (item, ev) in answer.results.iter().zip(evs) {
        match (&item.receipt, &item.problem) {
            (Some(rc), _) if item.status == 201 => {
                if checker.check_decoded(rc, Some(&ev.decoded)).is_err() {
                    fail(local, "proof_failed".into(), 1);
                    continue;
                }
                local.acknowledged(latency, ev.case);
            }
            (_, Some(p)) => fail(local, p.code.clone(), 1),
            _ => fail(local, item.status.to_string(), 1),
        }
    }
}

fn post_one(
    client: &Client,
    checker: &ReceiptChecker,
    ev: &Planned,
    scheduled: Instant,
    local: &mut LoadReport,
) {
    let mut fail = |code: String| *local.errors_by_code.entry(code).or_default() += 1;
    match client.post_json("/v1/events", &ev.envelope) {
        Ok(r) if r.status == 201 => {
            let latency = scheduled.elapsed().as_micros() as u64;
            match r
                .json::<verifier::wire::WriteReceipt>()
                .and_then(|rc| checker.check_decoded(&rc, Some(&ev.decoded)))
            {
                Ok(()) => local.acknowledged(latency, ev.case),
                Err(_) => fail("proof_failed".into()),
            }
        }
        Ok(r) => fail(r.code().unwrap_or_else(|| r.status.to_string())),
        Err(_) => fail("transport".into()),
    }
}
