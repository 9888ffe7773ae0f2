//! Prometheus metrics.

use std::sync::Mutex;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// What the gauges and the log's own counters read at one scrape.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub tree_size: u64,
    /// `ledger_verify_status`: -1 running, 0 failed, 1 verified.
    pub verify_status: i64,
    /// `ledger_derived_check_status`: -1 running, 0 failed, 1 passed.
    pub derived_check: i64,
    pub last_batch: u64,
    pub read_only: bool,
    pub requests_in_flight: usize,
    /// The data file's size, when it could be read.
    pub data_file_bytes: Option<u64>,
    /// The log's counters since it opened (they only grow).
    pub appends: u64,
    pub batches: u64,
    pub commit_failures: u64,
    pub lookup_failures: u64,
    pub redaction_failures: u64,
    /// Committed entries the lookups by leaf hash or envelope id do not
    /// cover yet (0 but for a failed lookup write).
    pub lookups_behind: u64,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabel {
    pub code: String,
}

/// A request's method, route template (`/v1/entries/{index}`, never the
/// path itself, so the series stay few) and status.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabel {
    pub method: String,
    pub route: String,
    pub status: u16,
}

/// A request's method and route template.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabel {
    pub method: String,
    pub route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabel {
    version: String,
}

/// What the process reads of itself in /proc (Linux), at a scrape.
#[derive(Debug, Default)]
struct ProcessStats {
    cpu_seconds: Option<f64>,
    resident_bytes: Option<u64>,
    open_fds: Option<u64>,
}

impl ProcessStats {
    fn read() -> ProcessStats {
        // utime and stime, fields 14 and 15 of /proc/self/stat, counted
        // after the command name's closing parenthesis, in USER_HZ (100 on
        // Linux).
        let cpu_seconds = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|s| {
                let rest = s.rsplit_once(')')?.1;
                let f: Vec<&str> = rest.split_whitespace().collect();
                let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
                Some(ticks as f64 / 100.0)
            });
        let resident_bytes = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
                let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
                Some(kb * 1024)
            });
        let open_fds = std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count() as u64);
        ProcessStats {
            cpu_seconds,
            resident_bytes,
            open_fds,
        }
    }
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
    lookup_failures: Counter,
    redaction_failures: Counter,
    lookups_behind: Gauge,
    read_only: Gauge,
    /// Unix time of the newest anchor (published or found at startup).
    pub last_anchor: Gauge,
    data_file_bytes: Gauge,
    requests_in_flight: Gauge,
    anchor_failures: Counter,
    /// Anchors of the anchors directory not yet published to Rekor, as of
    /// the last publication run (`rekor_url`).
    pub rekor_pending: Gauge,
    /// Publication runs to Rekor that left an anchor unpublished.
    pub rekor_failures: Counter,
    derived_mismatches: Counter,
    derived_check: Gauge,
    /// Tree size of the verified head: every entry below it has been
    /// walked (leaf, chain link and stored hashes recomputed).
    pub verified_size: Gauge,
    /// Unix time the last walk of the whole log passed.
    pub last_full_verify: Gauge,
    /// Unix time the derived state last matched a replay from the first entry.
    pub last_derived_check: Gauge,
    verify_failures: Counter,
    /// Tree size of the tiles directory's checkpoint (`tiles_dir`).
    pub tiles_synced_size: Gauge,
    tiles_failures: Counter,
    tile_cache_hits: Counter,
    tile_cache_misses: Counter,
    /// Tree size of the newest checkpoint a witness quorum cosigned.
    pub witnessed_size: Gauge,
    witness_failures: Counter,
    requests: Family<RequestLabel, Counter>,
    request_seconds: Family<RouteLabel, Histogram>,
    process_cpu: Counter<f64, std::sync::atomic::AtomicU64>,
    process_resident: Gauge,
    process_fds: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut top = Registry::default();
        // The standard process metrics, unprefixed as every exporter
        // writes them.
        let process_cpu = Counter::<f64, std::sync::atomic::AtomicU64>::default();
        let (process_resident, process_fds): (Gauge, Gauge) = (Gauge::default(), Gauge::default());
        let process_start: Gauge = Gauge::default();
        top.register(
            "process_cpu_seconds",
            "User and system CPU time spent, in seconds",
            process_cpu.clone(),
        );
        top.register(
            "process_resident_memory_bytes",
            "Resident memory size, in bytes",
            process_resident.clone(),
        );
        top.register(
            "process_open_fds",
            "Open file descriptors",
            process_fds.clone(),
        );
        process_start.set(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64),
        );
        top.register(
            "process_start_time_seconds",
            "When the process started (when its metrics were created), Unix time",
            process_start,
        );
        let registry = top.sub_registry_with_prefix("ledger");
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
        let (lookup_failures, lookups_behind) = (Counter::default(), Gauge::default());
        registry.register(
            "lookup_failures",
            "Failed writes of the lookups by leaf hash and envelope id since start (until one succeeds, writes are refused)",
            lookup_failures.clone(),
        );
        let redaction_failures = Counter::default();
        registry.register(
            "redaction_key_failures",
            "Keys of redacted disclosures that could not be destroyed when asked since start (the disclosures read as destroyed; the next open retries)",
            redaction_failures.clone(),
        );
        registry.register(
            "lookups_behind_entries",
            "Committed entries the lookups by leaf hash or envelope id do not cover yet",
            lookups_behind.clone(),
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
            "Size of the data file (ledger.redb), its sealed segments and the derived state (derived.redb)",
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
        let (rekor_pending, rekor_failures) = (Gauge::default(), Counter::default());
        registry.register(
            "rekor_pending_anchors",
            "Anchors not yet published to Rekor as of the last run (rekor_url; the next run catches up)",
            rekor_pending.clone(),
        );
        registry.register(
            "rekor_failures",
            "Runs of publication to Rekor that left an anchor unpublished",
            rekor_failures.clone(),
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
        let (verified_size, last_full_verify, verify_failures) =
            (Gauge::default(), Gauge::default(), Counter::default());
        let last_derived_check = Gauge::default();
        registry.register(
            "last_derived_check_timestamp_seconds",
            "Unix time the derived state (event-state snapshot, projection) last matched a replay of the log from its first entry",
            last_derived_check.clone(),
        );
        registry.register(
            "verified_size",
            "Tree size of the verified head: every entry below it has been walked (a start walks only what came after it)",
            verified_size.clone(),
        );
        registry.register(
            "last_full_verify_timestamp_seconds",
            "Unix time the last walk of the whole log passed (at start or on the reverify_interval_secs schedule)",
            last_full_verify.clone(),
        );
        registry.register(
            "verify_failures",
            "Walks of the log after the start (its tail, or the whole log again) that failed: numbers, proofs and writes are then withheld",
            verify_failures.clone(),
        );
        let (tile_cache_hits, tile_cache_misses) = (Counter::default(), Counter::default());
        registry.register(
            "tile_cache_hits",
            "GET /tile/... answers served from the tile cache (tile_cache_mb)",
            tile_cache_hits.clone(),
        );
        registry.register(
            "tile_cache_misses",
            "GET /tile/... answers read from the log (not in the tile cache)",
            tile_cache_misses.clone(),
        );
        let (tiles_synced_size, tiles_failures) = (Gauge::default(), Counter::default());
        registry.register(
            "tiles_synced_size",
            "Tree size of the checkpoint in the static tiles directory (tiles_dir)",
            tiles_synced_size.clone(),
        );
        registry.register(
            "tiles_sync_failures",
            "Syncs of the static tiles directory that failed",
            tiles_failures.clone(),
        );
        let build = Family::<BuildLabel, Gauge>::default();
        build
            .get_or_create(&BuildLabel {
                version: env!("CARGO_PKG_VERSION").to_owned(),
            })
            .set(1);
        registry.register("build_info", "The running build: always 1, labelled", build);
        let requests = Family::<RequestLabel, Counter>::default();
        registry.register(
            "http_requests",
            "Requests answered, by method, route template and status",
            requests.clone(),
        );
        let request_seconds = Family::<RouteLabel, Histogram>::new_with_constructor(
            (|| Histogram::new(exponential_buckets(0.0001, 2.0, 18))) as fn() -> Histogram,
        );
        registry.register(
            "http_request_duration_seconds",
            "Time from a request's arrival to its answer, by method and route template",
            request_seconds.clone(),
        );
        let (witnessed_size, witness_failures) = (Gauge::default(), Counter::default());
        registry.register(
            "witnessed_size",
            "Tree size of the newest checkpoint a quorum of witnesses cosigned (witness_policy)",
            witnessed_size.clone(),
        );
        registry.register(
            "witness_failures",
            "Submissions to a witness that brought no valid cosignature",
            witness_failures.clone(),
        );
        Metrics {
            registry: Mutex::new(top),
            append_latency,
            errors,
            tree_size,
            verify_status,
            appends,
            batches,
            last_batch,
            commit_failures,
            lookup_failures,
            redaction_failures,
            lookups_behind,
            read_only,
            last_anchor,
            data_file_bytes,
            requests_in_flight,
            anchor_failures,
            rekor_pending,
            rekor_failures,
            derived_mismatches,
            derived_check,
            verified_size,
            last_full_verify,
            last_derived_check,
            verify_failures,
            tiles_synced_size,
            tiles_failures,
            tile_cache_hits,
            tile_cache_misses,
            witnessed_size,
            witness_failures,
            requests,
            request_seconds,
            process_cpu,
            process_resident,
            process_fds,
        }
    }

    /// One request answered: `route` is its route template (or
    /// `unmatched`), `seconds` from arrival to answer.
    pub fn observe_request(&self, method: &str, route: &str, status: u16, seconds: f64) {
        self.requests
            .get_or_create(&RequestLabel {
                method: method.to_owned(),
                route: route.to_owned(),
                status,
            })
            .inc();
        self.request_seconds
            .get_or_create(&RouteLabel {
                method: method.to_owned(),
                route: route.to_owned(),
            })
            .observe(seconds);
    }

    /// A witness brought no valid cosignature.
    pub fn count_witness_failure(&self) {
        self.witness_failures.inc();
    }

    /// A sync of the static tiles directory failed.
    pub fn count_tiles_failure(&self) {
        self.tiles_failures.inc();
    }

    /// A walk of the log after the start failed.
    pub fn count_verify_failure(&self) {
        self.verify_failures.inc();
    }

    /// A tile answered from the tile cache (`hit`) or read from the log.
    pub fn count_tile_read(&self, hit: bool) {
        if hit {
            self.tile_cache_hits.inc();
        } else {
            self.tile_cache_misses.inc();
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

    /// Renders every metric, the gauges set from `s` (read by the
    /// caller from the server's state and the log at one moment).
    pub fn render(&self, s: &Snapshot) -> String {
        self.tree_size.set(s.tree_size as i64);
        self.verify_status.set(s.verify_status);
        self.derived_check.set(s.derived_check);
        self.last_batch.set(s.last_batch as i64);
        self.read_only.set(i64::from(s.read_only));
        self.lookups_behind.set(s.lookups_behind as i64);
        self.requests_in_flight.set(s.requests_in_flight as i64);
        if let Some(bytes) = s.data_file_bytes {
            self.data_file_bytes.set(bytes as i64);
        }
        let p = ProcessStats::read();
        if let Some(cpu) = p.cpu_seconds {
            self.process_cpu
                .inc_by((cpu - self.process_cpu.get()).max(0.0));
        }
        if let Some(rss) = p.resident_bytes {
            self.process_resident.set(rss as i64);
        }
        if let Some(fds) = p.open_fds {
            self.process_fds.set(fds as i64);
        }
        let mut out = String::new();
        let reg = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        // The counters follow the log's own, which only grow; under the
        // registry's lock, so two scrapes never add the same steps twice.
        for (counter, now) in [
            (&self.appends, s.appends),
            (&self.batches, s.batches),
            (&self.commit_failures, s.commit_failures),
            (&self.lookup_failures, s.lookup_failures),
            (&self.redaction_failures, s.redaction_failures),
        ] {
            counter.inc_by(now.saturating_sub(counter.get()));
        }
        let _ = encode(&mut out, &reg);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line<'a>(text: &'a str, name: &str) -> Option<&'a str> {
        text.lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
    }

    #[test]
    fn renders_the_snapshot_and_counters_only_grow() {
        let m = Metrics::new();
        let mut s = Snapshot {
            tree_size: 7,
            verify_status: 1,
            derived_check: -1,
            last_batch: 3,
            read_only: true,
            requests_in_flight: 2,
            data_file_bytes: Some(4096),
            appends: 5,
            batches: 2,
            commit_failures: 0,
            lookup_failures: 0,
            redaction_failures: 0,
            lookups_behind: 0,
        };
        let text = m.render(&s);
        assert_eq!(line(&text, "ledger_tree_size"), Some("ledger_tree_size 7"));
        assert_eq!(
            line(&text, "ledger_verify_status"),
            Some("ledger_verify_status 1")
        );
        assert_eq!(
            line(&text, "ledger_derived_check_status"),
            Some("ledger_derived_check_status -1")
        );
        assert_eq!(
            line(&text, "ledger_storage_read_only"),
            Some("ledger_storage_read_only 1")
        );
        assert_eq!(
            line(&text, "ledger_appends_total"),
            Some("ledger_appends_total 5")
        );
        // A second scrape adds only what the log counted since.
        s.appends = 9;
        let text = m.render(&s);
        assert_eq!(
            line(&text, "ledger_appends_total"),
            Some("ledger_appends_total 9")
        );
        // The log's counters restart from zero when it reopens; the
        // exported counter never goes back.
        s.appends = 1;
        let text = m.render(&s);
        assert_eq!(
            line(&text, "ledger_appends_total"),
            Some("ledger_appends_total 9")
        );
    }
}
