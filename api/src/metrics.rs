//! Prometheus metrics.

use std::sync::atomic::Ordering;
use std::sync::Mutex;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::server::AppState;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabel {
    pub code: String,
}

pub struct Metrics {
    registry: Mutex<Registry>,
    /// Seconds from a write's arrival to its durable acknowledgement.
    pub append_latency: Histogram,
    errors: Family<CodeLabel, Counter>,
    tree_size: Gauge,
    verify_status: Gauge,
    appends: Counter,
    batches: Counter,
    last_batch: Gauge,
    commit_failures: Counter,
    read_only: Gauge,
    /// Unix time of the newest anchor (published or found at startup).
    pub last_anchor: Gauge,
    data_file_bytes: Gauge,
    requests_in_flight: Gauge,
    anchor_failures: Counter,
    derived_mismatches: Counter,
    derived_check: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("ledger");
        let append_latency = Histogram::new(exponential_buckets(0.0001, 2.0, 16));
        let errors = Family::<CodeLabel, Counter>::default();
        let (tree_size, verify_status, last_batch) =
            (Gauge::default(), Gauge::default(), Gauge::default());
        let (appends, batches, commit_failures) =
            (Counter::default(), Counter::default(), Counter::default());
        registry.register(
            "append_latency_seconds",
            "Time from a write's arrival to its durable acknowledgement",
            append_latency.clone(),
        );
        registry.register(
            "problem_responses",
            "Problem (error) responses by stable code",
            errors.clone(),
        );
        registry.register("tree_size", "Entries in the log", tree_size.clone());
        registry.register(
            "verify_status",
            "1 verified, 0 failed, -1 verifying",
            verify_status.clone(),
        );
        registry.register("appends", "Entries appended since start", appends.clone());
        registry.register(
            "commit_batches",
            "Group commits since start",
            batches.clone(),
        );
        registry.register(
            "last_batch_size",
            "Entries in the latest group commit",
            last_batch.clone(),
        );
        registry.register(
            "commit_failures",
            "Failed commits since start",
            commit_failures.clone(),
        );
        let read_only = Gauge::default();
        registry.register(
            "storage_read_only",
            "1 while storage has failed: reads come from the last durable commit and writes are refused",
            read_only.clone(),
        );
        let (last_anchor, data_file_bytes) = (Gauge::default(), Gauge::default());
        registry.register(
            "last_anchor_timestamp_seconds",
            "Unix time of the newest anchor",
            last_anchor.clone(),
        );
        registry.register(
            "data_file_bytes",
            "Size of the data file (ledger.redb)",
            data_file_bytes.clone(),
        );
        let requests_in_flight = Gauge::default();
        registry.register(
            "http_requests_in_flight",
            "Requests holding one of the max_concurrent_requests slots, this scrape included",
            requests_in_flight.clone(),
        );
        let (anchor_failures, derived_mismatches) = (Counter::default(), Counter::default());
        registry.register(
            "anchor_failures",
            "Anchor checks that failed at startup and anchors that could not be published",
            anchor_failures.clone(),
        );
        registry.register(
            "derived_state_mismatches",
            "Saved derived state (projection or event-state snapshot) found not to match the log",
            derived_mismatches.clone(),
        );
        let derived_check = Gauge::default();
        registry.register(
            "derived_check_status",
            "The background check of derived state against the log: 1 passed, 0 failed, -1 running (until it passes, nothing built from derived state is signed)",
            derived_check.clone(),
        );
        Metrics {
            registry: Mutex::new(registry),
            append_latency,
            errors,
            tree_size,
            verify_status,
            appends,
            batches,
            last_batch,
            commit_failures,
            read_only,
            last_anchor,
            data_file_bytes,
            requests_in_flight,
            anchor_failures,
            derived_mismatches,
            derived_check,
        }
    }

    /// An anchor check failed, or an anchor could not be published.
    pub fn count_anchor_failure(&self) {
        self.anchor_failures.inc();
    }

    /// Saved derived state did not match the log it was derived from.
    pub fn count_derived_mismatch(&self) {
        self.derived_mismatches.inc();
    }

    pub fn count_error(&self, code: &str) {
        self.errors
            .get_or_create(&CodeLabel {
                code: code.to_owned(),
            })
            .inc();
    }

    pub fn render(&self, state: &AppState) -> String {
        let log = state.events.ledger();
        let stats = log.stats();
        self.tree_size.set(log.head().size as i64);
        self.verify_status
            .set(state.verify_status.load(Ordering::SeqCst));
        self.derived_check
            .set(state.derived_checked.load(Ordering::SeqCst));
        self.last_batch
            .set(stats.last_batch_size.load(Ordering::Relaxed) as i64);
        self.read_only
            .set(i64::from(stats.read_only.load(Ordering::Relaxed)));
        self.requests_in_flight
            .set(state.requests_in_flight() as i64);
        if let Ok(m) = std::fs::metadata(log.path()) {
            self.data_file_bytes.set(m.len() as i64);
        }
        let mut out = String::new();
        let reg = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        // The counters follow the log's own, which only grow; under the
        // registry's lock, so two scrapes never add the same steps twice.
        for (counter, now) in [
            (&self.appends, &stats.appends),
            (&self.batches, &stats.batches),
            (&self.commit_failures, &stats.commit_failures),
        ] {
            counter.inc_by(now.load(Ordering::Relaxed).saturating_sub(counter.get()));
        }
        let _ = encode(&mut out, &reg);
        out
    }
}
