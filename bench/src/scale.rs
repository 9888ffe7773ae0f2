//! Scale runs (bench/README.md, targets 3–7): grow one data directory to each size
//! in turn (100k, 1M, 10M entries), and at each size measure
//!
//! - **proofs** through the HTTP API of a real `ledger serve` process:
//!   inclusion and consistency p50/p99 and proofs/s, every proof verified
//!   against a checkpoint whose signature was checked;
//! - **startup**: from spawning `ledger serve` to `/healthz` answering, and to
//!   `/readyz` (the background full verify has passed);
//! - **RSS**: the server's peak resident set (`VmHWM`) after the proof load;
//! - **full verify** of the data directory (`ledger::verify_dir`), in process;
//! - **disk**: the data file against the raw signed-event bytes;
//! - **projections**: `GET /v1/task-classes/{name}` latency on the task class
//!   holding every score, each request preceded by one new score, so each
//!   answer must fold new evidence in (incremental, not a rebuild).
//!
//! Growth is a bulk load, in process, through the same validation as the API
//! (`EventLog::submit`: signature checked, event sequenced against the log's
//! state, group-committed). Events are scores with breakdowns against
//! `cases` held-out cases, co-signed by two curators at set-up.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use events::{EventLog, SystemClock};
use serde::{Deserialize, Serialize};
use verifier::client::Client;

use crate::load::Prepared;

/// What to run.
#[derive(Debug, Clone)]
pub struct ScaleConfig {
    pub dir: PathBuf,
    pub sizes: Vec<u64>,
    /// Concurrent HTTP clients for the proof load.
    pub clients: usize,
    /// Proofs requested per size (half inclusion, half consistency).
    pub proofs: usize,
    /// Server starts per size (startup is the median).
    pub repeats: usize,
    /// Projection requests per size.
    pub projection_requests: usize,
    /// Held-out cases the scores spread over.
    pub cases: usize,
    /// The `ledger` binary to serve with.
    pub ledger_bin: PathBuf,
    /// Before the timed loads, wait until the server's background checks
    /// are done (its CPU idle), so that they do not share the cores with
    /// the load (minutes at 10M entries).
    pub quiet: bool,
}

/// What the directory holds, kept beside it so a later run can grow it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Sidecar {
    nonce: String,
    cases: usize,
    /// Signed envelope bytes of every entry this tool appended.
    raw_event_bytes: u64,
    /// Entries this tool appended (the rest are the genesis entries).
    appended: u64,
    /// Events appended per worker (the score counter).
    next_event: u64,
    /// The cases were added in schema 3, under handles; a directory grown
    /// by an earlier build has them in clear.
    #[serde(default)]
    handles: bool,
}

const WORKERS: usize = 2;
const SIDECAR: &str = "scale.json";

/// One size's figures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SizeReport {
    pub entries: u64,
    pub build_seconds: f64,
    pub build_events_per_s: f64,
    pub startup_healthz_ms: Vec<f64>,
    pub startup_readyz_ms: Vec<f64>,
    pub rss_peak_mb: f64,
    pub rss_mb: f64,
    pub inclusion_p50_us: u64,
    pub inclusion_p99_us: u64,
    pub consistency_p50_us: u64,
    pub consistency_p99_us: u64,
    pub proofs_per_s: f64,
    /// The same proof load run a second time, on a warm page cache.
    pub warm_inclusion_p99_us: u64,
    pub warm_consistency_p99_us: u64,
    pub warm_proofs_per_s: f64,
    /// The server process's CPU time (user + system) per proof in the
    /// first round: what the server alone spends, clients excluded.
    pub server_cpu_us_per_proof: f64,
    /// This process's CPU time per proof in the first round: what the
    /// checking clients spend (HTTP, JSON, and verifying each proof).
    pub client_cpu_us_per_proof: f64,
    /// The same two figures in the second (warm) round. On a shared host
    /// CPU per proof moves less than a rate does.
    pub warm_server_cpu_us_per_proof: f64,
    pub warm_client_cpu_us_per_proof: f64,
    pub proofs_verified: u64,
    pub verify_seconds: f64,
    pub verify_entries_per_s: f64,
    pub disk_bytes: u64,
    pub raw_event_bytes: u64,
    pub disk_allowance_bytes: u64,
    pub projection_scores: u64,
    pub projection_p50_us: u64,
    pub projection_p99_us: u64,
    /// `GET /v1/task-classes/{name}/view`: the numbers alone.
    pub numbers_p50_us: u64,
    pub numbers_p99_us: u64,
    /// `POST /v1/recommendations` through HTTP: the statistics recomputed
    /// and a `promotion.recommended` appended and acknowledged.
    pub recommendation_p50_us: u64,
    pub recommendation_p99_us: u64,
    /// The recommendation alone, computed in process (no HTTP, no proofs).
    pub view_p50_us: u64,
    pub view_p99_us: u64,
    /// Each timed request of the three loads above in the order it was
    /// asked (µs): with a few dozen requests the p99 is the slowest one,
    /// and these say where it fell.
    pub projection_us: Vec<u64>,
    pub numbers_us: Vec<u64>,
    pub recommendation_us: Vec<u64>,
}

impl SizeReport {
    /// A block of `key value` lines.
    pub fn summary(&self) -> String {
        let med = |v: &[f64]| {
            let mut v = v.to_vec();
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or(0.0)
        };
        let minmax = |v: &[f64]| {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(0.0, f64::max);
            format!("{lo:.0}–{hi:.0}")
        };
        format!(
            "entries {}\n  build: {:.1} s ({:.0} events/s, bulk, in process)\n  startup to /healthz: median {:.0} ms (min–max {} ms, {} starts)\n  startup to /readyz: median {:.0} ms (min–max {} ms)\n  RSS: peak {:.0} MB, after load {:.0} MB\n  inclusion proof: p50 {} µs, p99 {} µs\n  consistency proof: p50 {} µs, p99 {} µs\n  proofs: {:.0}/s through HTTP; CPU per proof: the server {:.0} µs, the clients {:.0} µs\n  the same again (warm cache): inclusion p99 {} µs, consistency p99 {} µs, {:.0}/s; CPU per proof: the server {:.0} µs, the clients {:.0} µs; {} proofs verified in all\n  full verify: {:.1} s ({:.0} entries/s)\n  disk: {} bytes = {:.0} B/entry; raw events {:.0} B/entry; allowance raw×1.3+100 = {:.0} B/entry ({})\n  projection over {} scores: p50 {} µs, p99 {} µs (HTTP, with every evidence entry and its proof); the numbers alone: p50 {} µs, p99 {} µs (HTTP); the view alone in process: p50 {} µs, p99 {} µs\n  POST /v1/recommendations: p50 {} µs, p99 {} µs (HTTP, the statistics recomputed and the recommendation appended, durable)",
            self.entries,
            self.build_seconds,
            self.build_events_per_s,
            med(&self.startup_healthz_ms),
            minmax(&self.startup_healthz_ms),
            self.startup_healthz_ms.len(),
            med(&self.startup_readyz_ms),
            minmax(&self.startup_readyz_ms),
            self.rss_peak_mb,
            self.rss_mb,
            self.inclusion_p50_us,
            self.inclusion_p99_us,
            self.consistency_p50_us,
            self.consistency_p99_us,
            self.proofs_per_s,
            self.server_cpu_us_per_proof,
            self.client_cpu_us_per_proof,
            self.warm_inclusion_p99_us,
            self.warm_consistency_p99_us,
            self.warm_proofs_per_s,
            self.warm_server_cpu_us_per_proof,
            self.warm_client_cpu_us_per_proof,
            self.proofs_verified,
            self.verify_seconds,
            self.verify_entries_per_s,
            self.disk_bytes,
            self.disk_bytes as f64 / self.entries.max(1) as f64,
            self.raw_event_bytes as f64 / self.entries.max(1) as f64,
            self.disk_allowance_bytes as f64 / self.entries.max(1) as f64,
            if self.disk_bytes <= self.disk_allowance_bytes {
                "within"
            } else {
                "over"
            },
            self.projection_scores,
            self.projection_p50_us,
            self.projection_p99_us,
            self.numbers_p50_us,
            self.numbers_p99_us,
            self.view_p50_us,
            self.view_p99_us,
            self.recommendation_p50_us,
            self.recommendation_p99_us,
        ) + &format!(
            "\n  the slowest request: projection {}, numbers {}, recommendations {}",
            slowest(&self.projection_us),
            slowest(&self.numbers_us),
            slowest(&self.recommendation_us),
        )
    }
}

/// "N µs, request K of M" for the slowest of `lat` (in the order asked).
fn slowest(lat: &[u64]) -> String {
    match lat.iter().enumerate().max_by_key(|(_, us)| **us) {
        Some((k, us)) => format!("{us} µs, request {} of {}", k + 1, lat.len()),
        None => "none timed".to_owned(),
    }
}

fn read_sidecar(dir: &Path) -> anyhow::Result<Option<Sidecar>> {
    match std::fs::read(dir.join(SIDECAR)) {
        Ok(b) => Ok(Some(serde_json::from_slice(&b)?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn write_sidecar(dir: &Path, s: &Sidecar) -> anyhow::Result<()> {
    std::fs::write(dir.join(SIDECAR), serde_json::to_vec_pretty(s)?)?;
    Ok(())
}

fn prepared(dir: &Path, side: &Sidecar) -> anyhow::Result<Prepared> {
    let operator = verifier::keys::read_signing_key(&dir.join("operator.key"))?;
    let mut p = Prepared::new(&side.nonce, operator, WORKERS, side.cases);
    p.ids_in_clear = !side.handles;
    Ok(p)
}

/// Creates the directory (if new) and grows its log to `target` entries.
/// Returns the seconds spent and the events appended.
pub fn grow(cfg: &ScaleConfig, target: u64) -> anyhow::Result<(f64, u64)> {
    grow_with(cfg, target, true).map(|(secs, n, _)| (secs, n))
}

/// [`grow`], saving the derived state at the end (as a server does on a
/// clean stop) only when `save` is set: without it, the entries appended
/// are a tail the next start must catch up, as after a crash. Returns the
/// seconds spent, the events appended and the log's size (a save appends
/// its state commitment).
fn grow_with(cfg: &ScaleConfig, target: u64, save: bool) -> anyhow::Result<(f64, u64, u64)> {
    let dir = &cfg.dir;
    let mut side = match read_sidecar(dir)? {
        Some(s) => s,
        None => {
            api::init::init(dir, "scale.bench/log", "operator", None, None)?;
            Sidecar {
                nonce: Prepared::fresh_nonce(),
                cases: cfg.cases,
                raw_event_bytes: 0,
                appended: 0,
                next_event: 0,
                handles: true,
            }
        }
    };
    let p = prepared(dir, &side)?;
    let key = verifier::keys::local_key(dir)?;
    let events = EventLog::open(
        dir,
        ledger::Config::default(),
        key.event_signing_key(),
        Arc::new(SystemClock),
    )?;
    let started = Instant::now();
    let mut appended = 0u64;
    if side.appended == 0 {
        for env in p.setup() {
            events
                .append(&env)
                .map_err(|e| anyhow!("set-up event refused: {e:?}"))?;
            side.raw_event_bytes += env.len() as u64;
            side.appended += 1;
            appended += 1;
        }
    }
    let head = events.ledger().head().size;
    if head >= target {
        if save {
            save_derived(&events, &key)?;
        }
        let size = events.ledger().head().size;
        write_sidecar(dir, &side)?;
        return Ok((started.elapsed().as_secs_f64(), appended, size));
    }
    let todo = target - head;
    let bar = progress(todo, "growing");
    let raw = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let first = side.next_event;
    let failed = std::sync::Mutex::new(None::<String>);
    std::thread::scope(|s| {
        for w in 0..WORKERS {
            let (events, p, raw, done, bar, failed) = (&events, &p, &raw, &done, &bar, &failed);
            s.spawn(move || {
                let mine = (todo + (WORKERS - 1 - w) as u64) / WORKERS as u64;
                let mut pending = std::collections::VecDeque::new();
                for k in 0..mine {
                    let (env, _) = p.event(w, first + k, 0);
                    raw.fetch_add(env.len() as u64, Ordering::Relaxed);
                    loop {
                        match events.submit(&env) {
                            Ok(r) => {
                                pending.push_back(r);
                                break;
                            }
                            Err(ledger::AppendError::Ledger(ledger::Error::Busy)) => {
                                if let Some(r) = pending.pop_front() {
                                    settle(r, done, bar, failed);
                                }
                            }
                            Err(e) => {
                                *failed.lock().unwrap_or_else(|p| p.into_inner()) =
                                    Some(format!("{e:?}"));
                                return;
                            }
                        }
                    }
                    while pending.len() > 4096 {
                        if let Some(r) = pending.pop_front() {
                            settle(r, done, bar, failed);
                        }
                    }
                }
                for r in pending {
                    settle(r, done, bar, failed);
                }
            });
        }
    });
    bar.finish_and_clear();
    if let Some(e) = failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        bail!("bulk load failed: {e}");
    }
    let n = done.load(Ordering::Relaxed);
    side.raw_event_bytes += raw.load(Ordering::Relaxed);
    side.appended += n;
    side.next_event = first + todo.div_ceil(WORKERS as u64) + 1;
    appended += n;
    // What a running server saves periodically and on shutdown.
    if save {
        save_derived(&events, &key)?;
    }
    let size = events.ledger().head().size;
    drop(events);
    write_sidecar(dir, &side)?;
    Ok((started.elapsed().as_secs_f64(), appended, size))
}

/// Saves the event-state snapshot and the projection checkpoint, as a
/// running server does every `projection_save_secs` and on shutdown. The
/// projection resumes from a checkpoint a state commitment vouches for
/// (nothing to save when that commitment is the log's last entry); any
/// other is folded again from the first entry, as a server's background
/// check does before it commits.
fn save_derived(events: &EventLog, key: &anchors::LogKey) -> anyhow::Result<()> {
    use projections::driver::{Projector, Resumed};
    let settings = projections::fold::Settings::default();
    let log = events.ledger();
    let seal = projections::driver::seal_key(&key.event_signing_key());
    let (mut projector, resumed) = Projector::resume(log, settings.clone(), &seal)?;
    match resumed {
        Resumed::Committed { index, .. } if index + 1 == log.head().size => {
            events.save_state()?;
            return Ok(());
        }
        Resumed::Committed { .. } => {
            projector.catch_up(log)?;
        }
        _ => projector = Projector::rebuild(log, settings)?,
    }
    commit_and_save(events, key, &mut projector)
}

/// What a server's save does: the projection's state committed in the log
/// (a `state.committed` entry), then the projection checkpoint and the
/// event-state snapshot saved. A checkpoint at a commitment is what lets
/// the next start skip folding the log from its first entry to confirm it;
/// one saved without would make every start after a scale run do that.
fn commit_and_save(
    events: &EventLog,
    key: &anchors::LogKey,
    projector: &mut projections::driver::Projector,
) -> anyhow::Result<()> {
    projections::driver::commit_state(
        events,
        projector,
        &key.event_signing_key(),
        events::Clock::now_micros(&SystemClock),
    )?;
    projector.save(
        events.ledger(),
        &projections::driver::seal_key(&key.event_signing_key()),
    )?;
    events.save_state()?;
    Ok(())
}

fn settle(
    r: ledger::PendingReceipt<events::EventSequencer>,
    done: &AtomicU64,
    bar: &indicatif::ProgressBar,
    failed: &std::sync::Mutex<Option<String>>,
) {
    match r.wait() {
        Ok(_) => {
            done.fetch_add(1, Ordering::Relaxed);
            bar.inc(1);
        }
        Err(e) => {
            *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!("{e:?}"));
        }
    }
}

fn progress(n: u64, what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(n);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg} [{bar:40}] {pos}/{len} ({per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message(what.to_owned());
    bar
}

/// How long a start took, from spawning the process (ms).
struct StartTimes {
    healthz_ms: f64,
    caught_up_ms: f64,
    readyz_ms: f64,
}

/// Recovery after a crash with `tail` entries after the last saved
/// event-state snapshot: the times of each start (ms from spawning the
/// server).
#[derive(Debug, Clone, Default, Serialize)]
pub struct RecoveryReport {
    pub snapshot_at: u64,
    pub tail: u64,
    pub healthz_ms: Vec<f64>,
    pub caught_up_ms: Vec<f64>,
    pub readyz_ms: Vec<f64>,
}

impl RecoveryReport {
    pub fn summary(&self) -> String {
        let med = |v: &[f64]| {
            let mut v = v.to_vec();
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
        };
        let range = |v: &[f64]| {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(0.0, f64::max);
            format!("{lo:.0}–{hi:.0}")
        };
        format!(
            "tail {} after a snapshot at {} ({} starts, each after SIGKILL): /healthz median {:.0} ms ({}), event state caught up {:.0} ms ({}), /readyz {:.0} ms ({})",
            self.tail,
            self.snapshot_at,
            self.healthz_ms.len(),
            med(&self.healthz_ms),
            range(&self.healthz_ms),
            med(&self.caught_up_ms),
            range(&self.caught_up_ms),
            med(&self.readyz_ms),
            range(&self.readyz_ms),
        )
    }
}

/// Grows a fresh directory to `base` entries and saves its derived state,
/// appends `tail` more without saving (what a crash leaves), then starts
/// the server `cfg.repeats` times, each stopped with SIGKILL, and times each
/// start. The directory must not exist.
pub fn recovery(cfg: &ScaleConfig, base: u64, tail: u64) -> anyhow::Result<RecoveryReport> {
    if cfg.dir.exists() {
        bail!(
            "{} exists; recovery runs need a fresh directory",
            cfg.dir.display()
        );
    }
    // The save appends a state commitment: the tail starts after it.
    let (_, _, saved_at) = grow_with(cfg, base, true)?;
    grow_with(cfg, saved_at + tail, false)?;
    let mut rep = RecoveryReport {
        snapshot_at: saved_at,
        tail,
        ..RecoveryReport::default()
    };
    for _ in 0..cfg.repeats.max(1) {
        let (server, t) = Server::start_timed(cfg)?;
        rep.healthz_ms.push(t.healthz_ms);
        rep.caught_up_ms.push(t.caught_up_ms);
        rep.readyz_ms.push(t.readyz_ms);
        server.kill9();
    }
    Ok(rep)
}

/// A `ledger serve` child process, killed on drop.
struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    /// Stops the server as an operator would (SIGTERM: it saves its derived
    /// state and exits), killing it if it has not exited within a minute.
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Spawns the server; returns it with the times to `/healthz` and
    /// `/readyz`.
    fn start(cfg: &ScaleConfig) -> anyhow::Result<(Server, f64, f64)> {
        let (server, t) = Server::start_timed(cfg)?;
        Ok((server, t.healthz_ms, t.readyz_ms))
    }

    /// Stops the server as a crash would (SIGKILL): nothing is saved.
    fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Spawns the server (saving derived state only hourly, so that only a
    /// clean stop saves it); returns it with the times to `/healthz`, to
    /// the event state caught up (`/readyz` no longer 503
    /// `ledger_unavailable`: writes are taken) and to `/readyz`.
    fn start_timed(cfg: &ScaleConfig) -> anyhow::Result<(Server, StartTimes)> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let t0 = Instant::now();
        let child = Command::new(&cfg.ledger_bin)
            .args(["serve", "--data-dir"])
            .arg(&cfg.dir)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("LEDGER_LOG", "warn")
            .env("LEDGER_PROJECTION_SAVE_SECS", "3600")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("spawning {}", cfg.ledger_bin.display()))?;
        let server = Server {
            child,
            base: format!("http://127.0.0.1:{port}"),
        };
        let client = Client::new(&server.base, None);
        let wait = |path: &str| -> anyhow::Result<f64> {
            loop {
                if client.get(path).map(|r| r.status).unwrap_or(0) == 200 {
                    return Ok(t0.elapsed().as_secs_f64() * 1000.0);
                }
                if t0.elapsed() > Duration::from_secs(3600) {
                    bail!("the server did not answer {path} within an hour");
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        };
        let healthz_ms = wait("/healthz")?;
        let caught_up_ms = loop {
            match client.get("/readyz") {
                Ok(r) if r.status == 200 || !r.text().contains("ledger_unavailable") => {
                    break t0.elapsed().as_secs_f64() * 1000.0
                }
                _ if t0.elapsed() > Duration::from_secs(3600) => {
                    bail!("the server did not catch up its state within an hour")
                }
                _ => std::thread::sleep(Duration::from_millis(2)),
            }
        };
        let readyz_ms = wait("/readyz")?;
        Ok((
            server,
            StartTimes {
                healthz_ms,
                caught_up_ms,
                readyz_ms,
            },
        ))
    }

    /// Waits until the server has used less than 2% of a core over two
    /// seconds (its background checks done), for at most 20 minutes.
    fn wait_quiet(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20 * 60);
        while Instant::now() < deadline {
            let before = self.cpu_seconds();
            std::thread::sleep(Duration::from_secs(2));
            if self.cpu_seconds() - before < 0.04 {
                return Ok(());
            }
        }
        bail!("the server was still busy after 20 minutes")
    }

    /// CPU time the server process has used.
    fn cpu_seconds(&self) -> f64 {
        crate::cpu_seconds(self.child.id())
    }

    fn status_kb(&self, field: &str) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with(field))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse().ok())
            })
            .unwrap_or(0)
    }
}

/// One round of the proof load: latencies in µs, the rate, and the CPU
/// per proof of the server and of this process (the clients).
struct ProofRound {
    inclusion: Vec<u64>,
    consistency: Vec<u64>,
    rate: f64,
    server_cpu_us: f64,
    client_cpu_us: f64,
}

/// Runs [`proof_load`] and measures the CPU the server and this process
/// spend on it.
fn measured_proof_load(
    server: &Server,
    vkey: &str,
    cfg: &ScaleConfig,
) -> anyhow::Result<ProofRound> {
    let (s0, c0) = (server.cpu_seconds(), crate::cpu_seconds(std::process::id()));
    let (inclusion, consistency, rate) = proof_load(&server.base, vkey, cfg.clients, cfg.proofs)?;
    let n = (inclusion.len() + consistency.len()).max(1) as f64;
    Ok(ProofRound {
        server_cpu_us: (server.cpu_seconds() - s0) * 1e6 / n,
        client_cpu_us: (crate::cpu_seconds(std::process::id()) - c0) * 1e6 / n,
        inclusion,
        consistency,
        rate,
    })
}

/// A tiny deterministic generator for request parameters.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n.max(1)
    }
}

fn pct(v: &mut [u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// Inclusion and consistency proofs through HTTP, each verified.
fn proof_load(
    base: &str,
    vkey: &str,
    clients: usize,
    total: usize,
) -> anyhow::Result<(Vec<u64>, Vec<u64>, f64)> {
    let client = Client::new(base, None);
    let note = client.get("/checkpoint")?.text();
    let cp = anchors::open_checkpoint(note.as_bytes(), vkey).context("checkpoint")?;
    let (size, root) = (cp.size, cp.root);
    let per = total / clients.max(1);
    let started = Instant::now();
    let results: Vec<anyhow::Result<(Vec<u64>, Vec<u64>)>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..clients)
            .map(|c| {
                s.spawn(move || -> anyhow::Result<(Vec<u64>, Vec<u64>)> {
                    let client = Client::new(base, None);
                    let mut rng = Rng(c as u64 + 1);
                    let (mut inc, mut con) = (Vec::new(), Vec::new());
                    for k in 0..per {
                        let t = Instant::now();
                        if k % 2 == 0 {
                            let index = rng.below(size);
                            let r = client.get(&format!(
                                "/v1/proofs/inclusion?index={index}&tree_size={size}"
                            ))?;
                            inc.push(t.elapsed().as_micros() as u64);
                            let body: verifier::wire::InclusionProof = r.json()?;
                            let leaf = verifier::check::parse_hash("leaf_hash", &body.leaf_hash)?;
                            ledger::merkle::verify_inclusion(
                                &leaf,
                                index,
                                size,
                                &verifier::check::parse_proof("proof", &body.proof)?,
                                &root,
                            )
                            .map_err(|e| anyhow!("inclusion {index}: {e}"))?;
                        } else {
                            let old = 1 + rng.below(size - 1);
                            let r = client.get(&format!(
                                "/v1/proofs/consistency?first={old}&second={size}"
                            ))?;
                            con.push(t.elapsed().as_micros() as u64);
                            let body: verifier::wire::ConsistencyProof = r.json()?;
                            if body.second_root != ledger::hash::to_hex(&root) {
                                bail!("consistency proof to a root other than the checkpoint's");
                            }
                            // The old root is the server's claim; the proof must
                            // tie it to the signed root, or it does not verify.
                            ledger::merkle::verify_consistency(
                                old,
                                &verifier::check::parse_hash("first_root", &body.first_root)?,
                                size,
                                &root,
                                &verifier::check::parse_proof("proof", &body.proof)?,
                            )
                            .map_err(|e| anyhow!("consistency {old}: {e}"))?;
                        }
                    }
                    Ok((inc, con))
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(anyhow!("client panicked"))))
            .collect()
    });
    let elapsed = started.elapsed().as_secs_f64();
    let (mut inc, mut con) = (Vec::new(), Vec::new());
    for r in results {
        let (i, c) = r?;
        inc.extend(i);
        con.extend(c);
    }
    let rate = (inc.len() + con.len()) as f64 / elapsed;
    Ok((inc, con, rate))
}

/// Reserves `n` envelope numbers in the sidecar before they are used, so
/// that a run that fails part-way (an append whose answer was lost still
/// lands in the log) never signs a different envelope under a used id.
fn reserve(dir: &Path, side: &mut Sidecar, n: usize) -> anyhow::Result<u64> {
    let first = side.next_event;
    side.next_event += n as u64;
    write_sidecar(dir, side)?;
    Ok(first)
}

/// `GET path` after each new score of `events` (so each answer folds new
/// evidence in), the request alone timed; `check` checks each answer. The
/// latencies are returned.
fn after_each_score(
    base: &str,
    vkey: &str,
    p: &Prepared,
    side: &mut Sidecar,
    events: std::ops::Range<u64>,
    path: &str,
    mut check: impl FnMut(&verifier::client::Reply) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<u64>> {
    let client = Client::new(base, None);
    let mut lat = Vec::with_capacity(events.clone().count());
    let mut checker = verifier::check::ReceiptChecker::new(vkey);
    for i in events {
        let (env, _) = p.event(0, i, 0);
        let r = client.post_json("/v1/events", &env)?;
        if r.status != 201 {
            bail!("score refused ({}): {}", r.status, r.text());
        }
        checker.check(&r.json()?, Some(&env))?;
        side.raw_event_bytes += env.len() as u64;
        side.appended += 1;
        let t = Instant::now();
        let r = client.get(path)?;
        lat.push(t.elapsed().as_micros() as u64);
        if r.status != 200 {
            bail!("GET {path} failed ({}): {}", r.status, r.text());
        }
        check(&r)?;
    }
    Ok(lat)
}

/// Projection reads with every evidence entry and its proof, each checked
/// ([`after_each_score`]); also the scores in the window of the last.
fn projection_load(
    base: &str,
    vkey: &str,
    p: &Prepared,
    side: &mut Sidecar,
    first: u64,
    n: usize,
) -> anyhow::Result<(u64, Vec<u64>)> {
    let path = format!("/v1/task-classes/{}", p.task_class);
    let mut scores = 0;
    let lat = after_each_score(base, vkey, p, side, first..first + n as u64, &path, |r| {
        let v: verifier::wire::ProjectionResponse = r.json()?;
        verifier::check::check_projection(&v, vkey)?;
        scores = v.view.scores_in_window as u64;
        Ok(())
    })?;
    Ok((scores, lat))
}

/// The numbers alone (`GET /v1/task-classes/{name}/view`), each after one
/// new score ([`after_each_score`]); the checkpoint of each answer is
/// checked, the numbers cannot be.
fn numbers_load(
    base: &str,
    vkey: &str,
    p: &Prepared,
    side: &mut Sidecar,
    first: u64,
    n: usize,
) -> anyhow::Result<Vec<u64>> {
    let path = format!("/v1/task-classes/{}/view", p.task_class);
    let keys = [vkey.to_owned()];
    after_each_score(base, vkey, p, side, first..first + n as u64, &path, |r| {
        let v: verifier::wire::ViewResponse = r.json()?;
        anchors::open_checkpoint_any(v.checkpoint.as_bytes(), &keys)?;
        Ok(())
    })
}

/// `POST /v1/recommendations` timed `n` times, each a new
/// `promotion.requested` by a gate the bench enrols once (a refusal as
/// already enrolled is fine): the ledger recomputes the held-out
/// statistics from the log, appends a `promotion.recommended` and answers
/// with its receipt. The first request is not counted (it waits for the
/// server's check of its derived state, and builds the running totals the
/// later ones reuse).
fn recommendation_load(base: &str, p: &Prepared, first: u64, n: usize) -> anyhow::Result<Vec<u64>> {
    let client = Client::new(base, None);
    let r = client.post_json("/v1/events", &p.gate_enrolment())?;
    // An earlier run enrolled it: its envelope (another issued time, the
    // same id) or its key is already in the log.
    let again = matches!(
        r.code().as_deref(),
        Some("envelope_id_reused" | "principal_exists")
    );
    if r.status != 201 && r.status != 200 && !again {
        bail!("gate not enrolled ({}): {}", r.status, r.text());
    }
    // Recommendations wait for the background check of the derived state
    // after a start (503 `log_verifying`); the first answered one is not
    // timed.
    let deadline = Instant::now() + std::time::Duration::from_secs(1800);
    loop {
        let r = client.post_json("/v1/recommendations", &p.promotion_request(first))?;
        match r.status {
            201 => break,
            503 if Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(500))
            }
            _ => bail!("recommendation refused ({}): {}", r.status, r.text()),
        }
    }
    let mut lat = Vec::with_capacity(n);
    for k in 1..=n as u64 {
        let env = p.promotion_request(first + k);
        let t = Instant::now();
        let r = client.post_json("/v1/recommendations", &env)?;
        lat.push(t.elapsed().as_micros() as u64);
        if r.status != 201 {
            bail!("recommendation refused ({}): {}", r.status, r.text());
        }
    }
    Ok(lat)
}

/// The recommendation alone, in process: `n` views of the task class, each
/// after one new score is appended (so each folds new evidence in), timed
/// from the request to the finished view (`Projector::view_at_head`).
fn view_load(cfg: &ScaleConfig, n: usize) -> anyhow::Result<Vec<u64>> {
    let mut side = read_sidecar(&cfg.dir)?.ok_or_else(|| anyhow!("no {SIDECAR}"))?;
    let p = prepared(&cfg.dir, &side)?;
    let key = verifier::keys::local_key(&cfg.dir)?;
    let events = EventLog::open(
        &cfg.dir,
        ledger::Config::default(),
        key.event_signing_key(),
        Arc::new(SystemClock),
    )?;
    let settings = projections::fold::Settings::default();
    let (mut projector, resumed) = projections::driver::Projector::open(
        events.ledger(),
        settings,
        &projections::driver::seal_key(&key.event_signing_key()),
    )?;
    let clock = SystemClock;
    // The first view builds the running totals; every later one is incremental.
    projector.view_at_head(
        events.ledger(),
        &p.task_class,
        events::Clock::now_micros(&clock),
    )?;
    let mut lat = Vec::with_capacity(n);
    let first = reserve(&cfg.dir, &mut side, n)?;
    for k in 0..n as u64 {
        let (env, _) = p.event(0, first + k, 0);
        events
            .append(&env)
            .map_err(|e| anyhow!("score refused: {e:?}"))?;
        side.raw_event_bytes += env.len() as u64;
        side.appended += 1;
        let t = Instant::now();
        let v = projector.view_at_head(
            events.ledger(),
            &p.task_class,
            events::Clock::now_micros(&clock),
        )?;
        lat.push(t.elapsed().as_micros() as u64);
        if v.tree_size != events.ledger().head().size {
            bail!(
                "view at {} while the head is at {}",
                v.tree_size,
                events.ledger().head().size
            );
        }
    }
    // A state is committed only on a checkpoint a commitment vouched for
    // (a server commits only what its background check confirmed);
    // otherwise it is saved as it stands, and the next start confirms it.
    if matches!(resumed, projections::driver::Resumed::Committed { .. }) {
        commit_and_save(&events, &key, &mut projector)?;
    } else {
        projector.save(
            events.ledger(),
            &projections::driver::seal_key(&key.event_signing_key()),
        )?;
        events.save_state()?;
    }
    drop(events);
    write_sidecar(&cfg.dir, &side)?;
    Ok(lat)
}

/// Measures the directory as it is now.
pub fn measure(cfg: &ScaleConfig) -> anyhow::Result<SizeReport> {
    let mut rep = SizeReport::default();
    let key = verifier::keys::local_key(&cfg.dir)?;
    let vkey = key.verifier_key().to_owned();

    // Full verify, in process, with nothing else running.
    let t = Instant::now();
    let v = ledger::verify_dir(&cfg.dir, &mut |_, _| {})?;
    rep.verify_seconds = t.elapsed().as_secs_f64();
    rep.entries = v.size;
    rep.verify_entries_per_s = v.size as f64 / rep.verify_seconds;

    for k in 0..cfg.repeats.max(1) {
        let (server, healthz, readyz) = Server::start(cfg)?;
        rep.startup_healthz_ms.push(healthz);
        rep.startup_readyz_ms.push(readyz);
        if k + 1 < cfg.repeats.max(1) {
            continue;
        }
        if cfg.quiet {
            server.wait_quiet()?;
        }
        let mut cold = measured_proof_load(&server, &vkey, cfg)?;
        rep.server_cpu_us_per_proof = cold.server_cpu_us;
        rep.client_cpu_us_per_proof = cold.client_cpu_us;
        rep.inclusion_p50_us = pct(&mut cold.inclusion, 0.5);
        rep.inclusion_p99_us = pct(&mut cold.inclusion, 0.99);
        rep.consistency_p50_us = pct(&mut cold.consistency, 0.5);
        rep.consistency_p99_us = pct(&mut cold.consistency, 0.99);
        rep.proofs_per_s = cold.rate;
        // The same load again: the first round reads the hashes it needs
        // from a page cache that may not hold them yet (right after a
        // start, or after building the log); the second shows a warm one.
        let mut warm = measured_proof_load(&server, &vkey, cfg)?;
        rep.warm_server_cpu_us_per_proof = warm.server_cpu_us;
        rep.warm_client_cpu_us_per_proof = warm.client_cpu_us;
        rep.warm_inclusion_p99_us = pct(&mut warm.inclusion, 0.99);
        rep.warm_consistency_p99_us = pct(&mut warm.consistency, 0.99);
        rep.warm_proofs_per_s = warm.rate;
        rep.proofs_verified = [&cold, &warm]
            .iter()
            .map(|r| (r.inclusion.len() + r.consistency.len()) as u64)
            .sum();
        rep.rss_peak_mb = server.status_kb("VmHWM:") as f64 / 1024.0;
        rep.rss_mb = server.status_kb("VmRSS:") as f64 / 1024.0;

        let mut side = read_sidecar(&cfg.dir)?.ok_or_else(|| anyhow!("no {SIDECAR}"))?;
        let p = prepared(&cfg.dir, &side)?;
        let n = cfg.projection_requests;
        let first = reserve(&cfg.dir, &mut side, 2 * n)?;
        let (scores, mut lat) = projection_load(&server.base, &vkey, &p, &mut side, first, n)?;
        rep.projection_scores = scores;
        rep.projection_us = lat.clone();
        rep.projection_p50_us = pct(&mut lat, 0.5);
        rep.projection_p99_us = pct(&mut lat, 0.99);
        let mut lat = numbers_load(&server.base, &vkey, &p, &mut side, first + n as u64, n)?;
        write_sidecar(&cfg.dir, &side)?;
        rep.numbers_us = lat.clone();
        rep.numbers_p50_us = pct(&mut lat, 0.5);
        rep.numbers_p99_us = pct(&mut lat, 0.99);
        let mut side = read_sidecar(&cfg.dir)?.ok_or_else(|| anyhow!("no {SIDECAR}"))?;
        let first = reserve(&cfg.dir, &mut side, cfg.projection_requests + 1)?;
        let mut lat = recommendation_load(&server.base, &p, first, cfg.projection_requests)?;
        rep.recommendation_us = lat.clone();
        rep.recommendation_p50_us = pct(&mut lat, 0.5);
        rep.recommendation_p99_us = pct(&mut lat, 0.99);
    }

    let mut lat = view_load(cfg, cfg.projection_requests)?;
    rep.view_p50_us = pct(&mut lat, 0.5);
    rep.view_p99_us = pct(&mut lat, 0.99);

    let side = read_sidecar(&cfg.dir)?.ok_or_else(|| anyhow!("no {SIDECAR}"))?;
    rep.disk_bytes = ledger::store::disk_bytes(&cfg.dir.join(ledger::store::DB_FILE))
        .ok_or_else(|| anyhow!("no data file in {}", cfg.dir.display()))?;
    rep.raw_event_bytes = side.raw_event_bytes;
    rep.disk_allowance_bytes =
        (side.raw_event_bytes as f64 * 1.3) as u64 + 100 * side.appended.max(1);
    Ok(rep)
}

/// Grows and measures at each size in turn, printing as it goes.
pub fn run(cfg: &ScaleConfig, out: &mut dyn std::io::Write) -> anyhow::Result<Vec<SizeReport>> {
    if !cfg.ledger_bin.is_file() {
        bail!(
            "{} not found; build it first: cargo build --release -p api --bin ledger",
            cfg.ledger_bin.display()
        );
    }
    let mut reports = Vec::new();
    for &size in &cfg.sizes {
        let (secs, n) = grow(cfg, size)?;
        let mut rep = measure(cfg)?;
        rep.build_seconds = secs;
        rep.build_events_per_s = n as f64 / secs.max(1e-9);
        writeln!(out, "{}", rep.summary())?;
        out.flush()?;
        reports.push(rep);
    }
    Ok(reports)
}
