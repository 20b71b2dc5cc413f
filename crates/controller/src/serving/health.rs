//! `/healthz`, `/livez`, `/readyz`, `/metrics` ([`crate::serving::metrics`]), `/configz`
//! ([`crate::serving::configz`]), `/flagz` and `/statusz` ([`crate::serving::componentz`]),
//! over HTTPS on
//! `--secure-port` (10259) as kube-scheduler serves them, so its probes (`scheme: HTTPS`)
//! work unchanged; plain HTTP only for tests. Behind delegated authentication and
//! authorization ([`crate::serving::auth`]) when given one (`ferrosched run` always does).
//! Ready once every informer has listed; not ready while shutting down.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;

use crate::informers::INFORMER_COUNT;
use crate::serving::auth::{self, DelegatedAuth};
use crate::serving::{componentz, configz, explain, metrics};
use crate::state::Shared;

/// /healthz and /livez: fail when this process leads but has stopped renewing its lease
/// (as kube-scheduler's leaderElection check), so the kubelet restarts a stuck leader.
async fn healthz(State(shared): State<Arc<Shared>>) -> (StatusCode, String) {
    match shared.leader.check(tokio::time::Instant::now()) {
        Ok(()) => (StatusCode::OK, "ok".into()),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("[-]leaderElection failed: {e}\n"),
        ),
    }
}

async fn readyz(State(shared): State<Arc<Shared>>) -> (StatusCode, String) {
    let (synced, stopping) = {
        let st = shared.lock();
        (st.synced, st.shutting_down)
    };
    if let Err(e) = shared.leader.check(tokio::time::Instant::now()) {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("[-]leaderElection failed: {e}\n"),
        )
    } else if stopping {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "[-]shutdown failed: process is shutting down\n".into(),
        )
    } else if synced < INFORMER_COUNT {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("[-]informer-sync failed: {synced}/{INFORMER_COUNT} informers synced\n"),
        )
    } else {
        (StatusCode::OK, "ok".into())
    }
}

async fn metrics(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    let (pending, counters, cache) = {
        let st = shared.lock();
        let cache = metrics::CacheSizes {
            nodes: st.cache.node_count(),
            pods: st.cache.pod_count(),
            assumed_pods: st.cache.assumed_pod_count(),
        };
        (st.queue.pending_pods(), st.queue.counters().clone(), cache)
    };
    (
        [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
        shared.metrics.render(pending, &counters, cache),
    )
}

/// Serves until the task is aborted: over TLS with `tls`, each connection bounded by
/// `limits`, else plain HTTP (tests).
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    shared: Arc<Shared>,
    auth: Option<Arc<DelegatedAuth>>,
    limits: crate::serving::conn::ServeLimits,
) {
    let mut app = Router::new()
        .route("/healthz", get(healthz))
        .route("/livez", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/configz", get(configz::serve))
        .route("/flagz", get(componentz::flagz))
        .route("/statusz", get(componentz::statusz))
        .route("/debug/explain", get(explain::list))
        .route("/debug/explain/{namespace}/{pod}", get(explain::one))
        .with_state(shared);
    if let Some(auth) = auth {
        // Around the whole router, so unknown paths are authorized too (as upstream).
        app = app.layer(axum::middleware::from_fn_with_state(auth, auth::guard));
    }
    if let Some(tls) = tls {
        crate::serving::tls::serve_with(listener, tls, app, limits, std::future::pending()).await;
    } else if let Err(e) = axum::serve(listener, app).await {
        tracing::warn!(error = %e, "health server stopped");
    }
}
