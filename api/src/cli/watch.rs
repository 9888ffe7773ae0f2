//! `ledger watch`: follow a log through its C2SP tiles and alert when it
//! diverges (verifier::watch does the checking).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use verifier::watch::{step, WatchError};
use verifier::Client;

use super::{fail, Failure};

#[derive(Args)]
pub struct WatchArgs {
    /// The log's tiles prefix: the ledger's base URL, or any static copy of
    /// its tiles (serve --tiles-dir behind a web server or CDN).
    #[arg(long = "log", env = "LEDGER_SERVER")]
    log: String,
    /// The log's note verifier key (repeat for keys from before a rotation).
    #[arg(long = "key", required = true)]
    keys: Vec<String>,
    /// The file holding the last checkpoint the watcher trusted; made on the
    /// first run, replaced after each step that verifies.
    #[arg(long, default_value = "./watch.checkpoint")]
    state: PathBuf,
    /// Anchors the log must extend (a directory of signed checkpoints).
    #[arg(long)]
    anchors: Option<PathBuf>,
    /// A C2SP tlog-policy file: every checkpoint must carry a quorum of its
    /// witnesses' cosignatures.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Seconds between steps.
    #[arg(long, default_value_t = 60)]
    interval: u64,
    /// One step, then exit: 0 consistent, 1 diverged, 2 error, 3 stale.
    #[arg(long)]
    once: bool,
    /// Serve Prometheus metrics here (ledger_watch_*); on divergence the
    /// watcher then keeps serving `ledger_watch_divergence 1` instead of
    /// exiting.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<std::net::SocketAddr>,
    #[arg(long, env = "LEDGER_READ_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

/// The watcher's metrics.
#[derive(Clone, Default)]
struct Metrics {
    size: Gauge,
    last_success: Gauge,
    divergence: Gauge,
    stale: Gauge,
    errors: Counter,
    entries: Counter,
}

impl Metrics {
    fn registry(&self) -> Registry {
        let mut r = Registry::with_prefix("ledger_watch");
        r.register(
            "checkpoint_size",
            "Tree size of the last checkpoint that verified",
            self.size.clone(),
        );
        r.register(
            "last_success_timestamp_seconds",
            "Unix time of the last step that verified",
            self.last_success.clone(),
        );
        r.register(
            "divergence",
            "1 once the log has diverged from what the watcher trusted (a fork, bad tiles, a bad signature or quorum, an anchor it does not extend)",
            self.divergence.clone(),
        );
        r.register(
            "stale",
            "1 while the log serves a checkpoint older than the one trusted",
            self.stale.clone(),
        );
        r.register(
            "errors",
            "Steps that could not be made (network, a server error)",
            self.errors.clone(),
        );
        r.register(
            "entries_checked",
            "Entries checked in their bundles against authenticated leaf hashes",
            self.entries.clone(),
        );
        r
    }
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

pub fn run(a: WatchArgs) -> anyhow::Result<()> {
    let policy = a
        .policy
        .as_deref()
        .map(super::audit::read_policy)
        .transpose()?;
    let anchors = match &a.anchors {
        Some(d) => {
            anchors::anchor::read_dir(d).with_context(|| format!("reading {}", d.display()))?
        }
        None => Vec::new(),
    };
    let mut trusted = match std::fs::read(&a.state) {
        Ok(n) => Some(
            anchors::open_checkpoint_any(&n, &a.keys)
                .map(|(cp, _)| cp)
                .map_err(|e| fail(format!("{}: {e}", a.state.display())))?,
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("reading {}", a.state.display())),
    };
    let metrics = Metrics::default();
    let registry = Arc::new(std::sync::Mutex::new(metrics.registry()));
    let serving = match a.metrics_listen {
        Some(addr) => Some(serve_metrics(addr, Arc::clone(&registry))?),
        None => None,
    };
    let client = Client::new(&a.log, a.token.clone());
    loop {
        let result = step(
            &client,
            &a.keys,
            policy.as_ref(),
            trusted.as_ref(),
            &anchors,
        );
        match result {
            Ok(s) => {
                verifier::keys::replace_durably(&a.state, s.note.as_bytes())?;
                metrics.stale.set(0);
                metrics
                    .size
                    .set(i64::try_from(s.checkpoint.size).unwrap_or(i64::MAX));
                metrics.last_success.set(now_secs());
                metrics.entries.inc_by(s.new_entries);
                let witnessed = if s.cosigned_by.is_empty() {
                    String::new()
                } else {
                    format!(", cosigned by {}", s.cosigned_by.join(", "))
                };
                println!(
                    "OK: size {} consistent with {}{witnessed}; {} new entries checked, {} anchors, {} tiles fetched",
                    s.checkpoint.size,
                    trusted
                        .as_ref()
                        .map_or("nothing (first step)".to_owned(), |t| format!("the trusted size {}", t.size)),
                    s.new_entries,
                    s.anchors_checked,
                    s.tiles_fetched
                );
                trusted = Some(s.checkpoint);
            }
            Err(WatchError::Diverged(d)) => {
                metrics.divergence.set(1);
                tracing::error!(divergence = %d, "the log diverged");
                if serving.is_none() || a.once {
                    return Err(fail(d.to_string()));
                }
                println!("DIVERGED: {d}; serving ledger_watch_divergence 1 until restarted");
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
            Err(WatchError::Stale { trusted: t, served }) => {
                metrics.stale.set(1);
                let msg = format!("the log serves size {served}, older than the trusted {t}");
                if a.once {
                    return Err(Failure {
                        status: 3,
                        label: "STALE",
                        message: msg,
                    }
                    .into());
                }
                tracing::warn!("{msg}");
            }
            Err(WatchError::Other(e)) => {
                metrics.errors.inc();
                if a.once {
                    return Err(e);
                }
                tracing::warn!(error = format!("{e:#}"), "a watch step failed");
            }
        }
        if a.once {
            return Ok(());
        }
        std::thread::sleep(Duration::from_secs(a.interval.max(1)));
    }
}

/// Serves `/metrics` on `addr` from a thread of its own.
fn serve_metrics(
    addr: std::net::SocketAddr,
    registry: Arc<std::sync::Mutex<Registry>>,
) -> anyhow::Result<std::thread::JoinHandle<()>> {
    let rt = super::runtime()?;
    let listener = rt.block_on(tokio::net::TcpListener::bind(addr))?;
    Ok(std::thread::spawn(move || {
        let app = axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || {
                let registry = Arc::clone(&registry);
                async move {
                    let mut out = String::new();
                    let r = registry.lock().unwrap_or_else(|p| p.into_inner());
                    let _ = prometheus_client::encoding::text::encode(&mut out, &r);
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        out,
                    )
                }
            }),
        );
        let _ = rt.block_on(async move { axum::serve(listener, app).await });
    }))
}
