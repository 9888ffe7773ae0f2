//! The HTTP server: its state ([`state`]), the start-up and background
//! checks ([`checks`]), what is walked when ([`verifying`]), anchoring
//! ([`anchoring`]), the guard every request
//! passes ([`guard`]), and the handlers by OpenAPI tag ([`routes`]). The
//! route list in [`routes::all`] is both the router and the OpenAPI
//! document. Errors become HTTP only in [`crate::error`].

use std::sync::Arc;
use std::time::Duration;

use anchors::LogKey;
use axum::extract::DefaultBodyLimit;
use axum::Router;
use events::SystemClock;
use utoipa::OpenApi;

use crate::config::ServeConfig;

pub mod anchoring;
pub mod checks;
pub mod guard;
pub mod routes;
pub mod state;
pub mod verifying;
pub mod witnessing;

pub use anchoring::{anchor_tick, check_anchors, publish_anchor, trusted_keys};
pub use checks::{deep_check, ready_check, start_verify, startup_check};
pub use routes::writes::MAX_BATCH;
pub use state::{AppState, Shared, VERIFY_FAILED, VERIFY_OK, VERIFY_RUNNING};

/// The OpenAPI document's description, tags and the schemas every answer
/// is made of; the paths come from [`routes::all`].
#[derive(OpenApi)]
#[openapi(
    info(title = "Evidence Ledger", description = "A tamper-evident, RFC 6962 Merkle log of an evaluation harness's trust decisions. Errors are application/problem+json with a stable `code` (docs/reject_codes.md, docs/API.md)."),
    components(schemas(
        verifier::wire::Problem, verifier::wire::WriteReceipt, routes::writes::BatchBody,
        verifier::wire::BatchItem, verifier::wire::BatchResponse, verifier::wire::EntryView,
        verifier::wire::EntryPage, verifier::wire::InclusionProof, verifier::wire::ConsistencyProof,
        verifier::wire::LogInfo, verifier::wire::TaskClassSummary, verifier::wire::EvidenceProof,
        verifier::wire::ProjectionResponse, verifier::wire::RecommendationResponse,
        verifier::wire::EnvelopeBody, verifier::wire::EnvelopeSig
    )),
    paths(routes::tiles::get_tile),
    tags((name = "writes"), (name = "reads"), (name = "proofs"), (name = "tiles"), (name = "projections"), (name = "operations"))
)]
pub struct ApiDoc;

/// The OpenAPI document, with the list of every error code attached to the
/// Problem schema's description.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let (_, mut doc) = routes::all().split_for_parts();
    let mut codes: Vec<String> = events::RejectCode::ALL
        .iter()
        .map(|c| format!("`{}`: {}", c.as_str(), c.description()))
        .collect();
    codes.extend(
        crate::error::API_CODES
            .iter()
            .map(|(c, d)| format!("`{c}`: {d}")),
    );
    if let Some(components) = doc.components.as_mut() {
        if let Some(utoipa::openapi::RefOr::T(utoipa::openapi::schema::Schema::Object(o))) =
            components.schemas.get_mut("Problem")
        {
            o.description = Some(format!(
                "RFC 9457 problem details. Codes:\n- {}",
                codes.join("\n- ")
            ));
        }
    }
    doc
}

/// The router: every route of [`routes::all`], the answers for unknown
/// routes and methods, the body limit and the guard.
pub fn router(state: Shared) -> Router {
    let limit = state.config.max_body_bytes;
    let (routes, _) = routes::all().split_for_parts();
    routes
        .route(
            routes::explorer::PREFIX,
            axum::routing::get(routes::explorer::redirect),
        )
        .route("/explorer/", axum::routing::get(routes::explorer::index))
        .route(
            "/explorer/{file}",
            axum::routing::get(routes::explorer::file),
        )
        // On matched routes only: names the route template for the access
        // log and the per-route metrics the guard writes.
        .route_layer(axum::middleware::from_fn(guard::name_route))
        .fallback(guard::not_found)
        .method_not_allowed_fallback(guard::method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            guard::guard,
        ))
        .with_state(state)
}

/// Warns when the log key file (or the key file of the kept disclosures)
/// can be read by anyone but its owner: the log key signs checkpoints, and
/// whoever reads it can sign a rewritten log; whoever reads `private.keys`
/// and the data file reads every sensitive value.
pub fn warn_if_exposed(path: &std::path::Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        if let Ok(m) = std::fs::metadata(path) {
            let mode = m.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                tracing::warn!(
                    path = %path.display(),
                    mode = format!("{mode:o}"),
                    "a key file can be read by other users; run `chmod 600` on it"
                );
                return true;
            }
        }
    }
    let _ = path;
    false
}

/// Opens the data directory and serves until `shutdown` resolves.
pub async fn serve(
    config: ServeConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let key_path = config.key_path();
    let key_text = std::fs::read_to_string(&key_path).map_err(|e| {
        anyhow::anyhow!(
            "cannot read the log key {}: {e}; run `ledger init --data-dir {}` first",
            key_path.display(),
            config.data_dir.display()
        )
    })?;
    warn_if_exposed(&key_path);
    warn_if_exposed(&config.data_dir.join(ledger::private::KEYS_FILE));
    let log_key = LogKey::from_private(&key_text)?;
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let state = Arc::new(AppState::open(config, log_key, Arc::new(SystemClock))?);
    tracing::info!(addr = %listener.local_addr()?, size = state.events.ledger().head().size, "serving");
    run(state, listener, shutdown).await
}

/// Brings `tiles_dir` up to the log's size (once the log has verified: a
/// log that failed its check is not published).
fn sync_tiles(st: &AppState) {
    let Some(dir) = &st.config.tiles_dir else {
        return;
    };
    if st.verify_status.load(std::sync::atomic::Ordering::SeqCst) != VERIFY_OK {
        return;
    }
    // With witnesses, the directory publishes the newest cosigned
    // checkpoint, as `/checkpoint` does; none yet, nothing to publish.
    let note = if st.policy.is_some() {
        let w = st.witnessed.lock().unwrap_or_else(|p| p.into_inner());
        match w.as_ref() {
            Some((_, n)) => Some(n.clone()),
            None => return,
        }
    } else {
        None
    };
    let synced = crate::tiles::sync_dir(
        st.events.ledger(),
        &st.log_key,
        dir,
        false,
        note.as_deref(),
        |_, _| {},
    );
    match synced {
        Ok(s) => {
            st.metrics
                .tiles_synced_size
                .set(i64::try_from(s.size).unwrap_or(i64::MAX));
            if s.written > 0 {
                tracing::debug!(size = s.size, written = s.written, "tiles directory synced");
            }
        }
        Err(e) => {
            st.metrics.count_tiles_failure();
            tracing::error!(error = format!("{e:#}"), dir = %dir.display(), "could not sync the tiles directory");
        }
    }
}

/// Runs `job` on a blocking thread every `period` (the first run one period
/// from now), until the returned task is aborted.
fn every(
    state: &Shared,
    period: Duration,
    job: impl Fn(&AppState) + Send + Sync + Copy + 'static,
) -> tokio::task::JoinHandle<()> {
    let state = Arc::clone(state);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.tick().await;
        loop {
            tick.tick().await;
            let st = Arc::clone(&state);
            if let Err(e) = tokio::task::spawn_blocking(move || job(&st)).await {
                tracing::error!(error = %e, "a background job failed");
            }
        }
    })
}

/// Serves `state` on `listener` until `shutdown` resolves; verifies the log
/// in the background and saves the projection checkpoint periodically and
/// on shutdown.
pub async fn run(
    state: Shared,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    start_verify(&state);
    let saver = every(
        &state,
        Duration::from_secs(state.config.projection_save_secs.max(1)),
        |st| {
            if st.projection_ready.wait() {
                let mut p = st.projector();
                let _ = p.catch_up(st.events.ledger());
            }
            st.save_derived();
        },
    );
    // The event-state snapshot also follows the log's growth, so that a
    // start after a crash replays a bounded tail before it takes writes.
    let snapshotter = (state.config.state_snapshot_entries > 0).then(|| {
        every(&state, Duration::from_secs(1), |st| {
            st.save_state_if_behind();
        })
    });
    let tiler = state.config.tiles_dir.is_some().then(|| {
        every(
            &state,
            Duration::from_secs(state.config.tiles_sync_secs.max(1)),
            sync_tiles,
        )
    });
    let witnesser = state.policy.is_some().then(|| {
        every(
            &state,
            Duration::from_secs(state.config.witness_interval_secs.max(1)),
            |st| match witnessing::witness_tick(st) {
                Ok(Some(size)) => tracing::info!(size, "checkpoint witnessed"),
                Ok(None) => {}
                Err(e) => tracing::warn!(error = format!("{e:#}"), "checkpoint not witnessed"),
            },
        )
    });
    let anchorer = (state.config.anchor_interval_secs > 0).then(|| {
        every(
            &state,
            Duration::from_secs(state.config.anchor_interval_secs),
            |st| match anchor_tick(st) {
                Ok(Some(at)) => {
                    tracing::info!(location = %at, "anchor published");
                    anchoring::rekor_tick(st);
                }
                Ok(None) => {}
                Err(e) => {
                    st.metrics.count_anchor_failure();
                    tracing::error!(error = %e, "could not publish an anchor");
                }
            },
        )
    });
    // Anchors not yet in Rekor (an outage) are published again on their
    // own schedule.
    let rekor = state.rekor.is_some().then(|| {
        every(
            &state,
            Duration::from_secs(state.config.rekor_retry_secs.max(1)),
            anchoring::rekor_tick,
        )
    });
    // The verified head follows the log, so that a start walks only what
    // came after it; the whole log is walked again on its own schedule.
    let tail_walker = (state.config.verify_tail_secs > 0).then(|| {
        every(
            &state,
            Duration::from_secs(state.config.verify_tail_secs),
            verifying::verify_tail,
        )
    });
    let reverifier = (state.config.reverify_interval_secs > 0).then(|| {
        every(
            &state,
            Duration::from_secs(state.config.reverify_interval_secs),
            verifying::reverify_tick,
        )
    });
    let request = Duration::from_millis(state.config.request_timeout_ms);
    let limits = crate::listen::Limits {
        header_read_timeout: Duration::from_millis(state.config.header_read_timeout_ms.max(1)),
        // Never close a connection whose request is still within its time.
        idle_timeout: Duration::from_secs(state.config.idle_timeout_secs.max(1))
            .max(request + Duration::from_secs(1)),
    };
    crate::listen::serve(listener, router(Arc::clone(&state)), limits, shutdown).await?;
    saver.abort();
    for job in [
        anchorer,
        rekor,
        tiler,
        witnesser,
        snapshotter,
        tail_walker,
        reverifier,
    ]
    .into_iter()
    .flatten()
    {
        job.abort();
    }
    // The derived state saved (with its state commitment), then what this
    // run appended walked, so that the next start need walk nothing.
    let st = Arc::clone(&state);
    tokio::task::spawn_blocking(move || {
        st.save_derived();
        verifying::verify_tail(&st);
    })
    .await?;
    Ok(())
}
