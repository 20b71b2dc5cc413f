//! `/configz`: the effective KubeSchedulerConfiguration (file or built-in default, then
//! the command line's flags, then defaulting) as JSON, under `componentconfig` as
//! kube-scheduler serves it. The document is the one `ferrosched config print -o json`
//! prints ([`scheduler_core::config::to_json`]). Behind the same authentication and
//! authorization as `/metrics`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use scheduler_core::config::KubeSchedulerConfiguration;

use crate::state::Shared;

/// The response body for `cfg`: `{"componentconfig": {...}}`, rendered once at start.
pub fn body(cfg: &KubeSchedulerConfiguration) -> String {
    let doc = serde_json::json!({ "componentconfig": scheduler_core::config::to_json(cfg) });
    serde_json::to_string(&doc).expect("a JSON value serializes") + "\n"
}

pub(crate) async fn serve(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        shared.configz.clone(),
    )
}
