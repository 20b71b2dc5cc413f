//! `/healthz`, `/livez`, `/readyz` and `/metrics` ([`crate::metrics`]) over plain HTTP (kube-scheduler serves them on
//! `--secure-port`, 10259, over HTTPS; probes must use `scheme: HTTP` here).
//! Ready once every informer has listed; not ready while shutting down.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;

use crate::informers::INFORMER_COUNT;
use crate::metrics;
use crate::state::Shared;

async fn healthz() -> (StatusCode, &'static str) {
    (StatusCode::OK, "ok")
}

async fn readyz(State(shared): State<Arc<Shared>>) -> (StatusCode, String) {
    let (synced, stopping) = {
        let st = shared.lock();
        (st.synced, st.shutting_down)
    };
    if stopping {
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
    let pending = shared.lock().queue.pending_pods();
    (
        [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
        shared.metrics.render(pending),
    )
}

/// Serves until the task is aborted.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/livez", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(shared);
    if let Err(e) = axum::serve(listener, app).await {
        tracing::warn!(error = %e, "health server stopped");
    }
}
