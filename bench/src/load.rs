//! The load generator: N clients post signed, validated events through the
//! real HTTP API, closed-loop (each client waits for its answer) or
//! open-loop (a fixed total rate; latency is measured from each request's
//! scheduled time, so a slow server cannot hide queueing). Every returned
//! inclusion proof and signed checkpoint is checked, so speed cannot come
//! from skipping work.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use api::client::Client;
use api::demo::Poster;
use ledger::events::model::{Event, Isolation, Role};

/// What to run.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    pub clients: usize,
    pub duration: Duration,
    /// Total requests per second; 0 means closed loop.
    pub rate: f64,
}

/// What happened.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    pub acknowledged: u64,
    pub proofs_checked: u64,
    pub errors_by_code: BTreeMap<String, u64>,
    pub elapsed: Duration,
    pub latencies_us: Vec<u64>,
}

impl LoadReport {
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
            "{} acknowledged in {:.2?} = {:.0} events/s; latency p50 {} µs, p99 {} µs, p999 {} µs; {} proofs and checkpoints verified; errors {:?}",
            self.acknowledged,
            self.elapsed,
            self.throughput(),
            self.percentile_us(0.5),
            self.percentile_us(0.99),
            self.percentile_us(0.999),
            self.proofs_checked,
            self.errors_by_code
        )
    }
}

/// Enrols a harness key and registers the task class the load writes to.
pub fn prepare(
    client: &Client,
    vkey: &str,
    operator: &ed25519_dalek::SigningKey,
) -> anyhow::Result<()> {
    let mut p = Poster::new(client, vkey.to_owned(), operator.clone());
    p.enrol("load-harness", Role::Harness)?;
    p.post("operator", Event::TaskClassRegistered(load_task_class()))?;
    Ok(())
}

fn load_task_class() -> ledger::events::model::TaskClassRegistered {
    use ledger::events::model::*;
    let mut tiers = BTreeMap::new();
    tiers.insert(
        Tier::Silver,
        TierRule {
            min_cases_for_promotion: 3,
            score_threshold: 0.7,
        },
    );
    tiers.insert(
        Tier::Gold,
        TierRule {
            min_cases_for_promotion: 5,
            score_threshold: 0.9,
        },
    );
    TaskClassRegistered {
        task_class: "load".into(),
        tiers,
        failure_modes: vec![],
        breakdown_keys: vec![],
        rubric_digest: format!("blake3:{}", "a".repeat(64)),
        initial_tier: Tier::Bronze,
    }
}

/// Runs the load against `base`.
pub fn run(
    base: &str,
    vkey: &str,
    operator: &ed25519_dalek::SigningKey,
    cfg: &LoadConfig,
) -> LoadReport {
    let report = Arc::new(Mutex::new(LoadReport::default()));
    let started = Instant::now();
    let deadline = started + cfg.duration;
    let per_client_interval =
        (cfg.rate > 0.0).then(|| Duration::from_secs_f64(cfg.clients as f64 / cfg.rate));
    let threads: Vec<_> = (0..cfg.clients)
        .map(|c| {
            let (base, vkey, op, report) = (
                base.to_owned(),
                vkey.to_owned(),
                operator.clone(),
                Arc::clone(&report),
            );
            std::thread::spawn(move || {
                let client = Client::new(&base, None);
                let mut p = Poster::new(&client, vkey.clone(), op);
                let mut local = LoadReport::default();
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
                    let env = p.envelope(
                        "load-harness",
                        Event::RunStarted(ledger::events::model::RunStarted {
                            run_id: format!("c{c}-{i}"),
                            task_class: "load".into(),
                            harness_version: "loadgen".into(),
                            rubric_digest: format!("blake3:{}", "a".repeat(64)),
                            sandbox_image_digest: format!("sha256:{}", "b".repeat(64)),
                            isolation_class: Isolation::Microvm,
                        }),
                    );
                    match client.post_json("/v1/events", &env) {
                        Ok(r) if r.status == 201 => {
                            local
                                .latencies_us
                                .push(scheduled.elapsed().as_micros() as u64);
                            match r
                                .json::<api::server::WriteReceipt>()
                                .map(|rc| api::check::check_receipt(&rc, &vkey))
                            {
                                Ok(Ok(())) => {
                                    local.acknowledged += 1;
                                    local.proofs_checked += 1;
                                }
                                _ => {
                                    *local
                                        .errors_by_code
                                        .entry("proof_failed".into())
                                        .or_default() += 1
                                }
                            }
                        }
                        Ok(r) => {
                            *local
                                .errors_by_code
                                .entry(r.code().unwrap_or_else(|| r.status.to_string()))
                                .or_default() += 1
                        }
                        Err(_) => *local.errors_by_code.entry("transport".into()).or_default() += 1,
                    }
                    if let Some(iv) = per_client_interval {
                        next += iv;
                    }
                }
                let mut all = report.lock().unwrap_or_else(|p| p.into_inner());
                all.acknowledged += local.acknowledged;
                all.proofs_checked += local.proofs_checked;
                all.latencies_us.extend(local.latencies_us);
                for (k, v) in local.errors_by_code {
                    *all.errors_by_code.entry(k).or_default() += v;
                }
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
    r
}
