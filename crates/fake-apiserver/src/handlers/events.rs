//! Events (events.k8s.io/v1): create, patch and LIST, kept in creation order beside the
//! store's objects (no resourceVersions of their own, no watch).

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{status, strategic_merge};
use crate::store::Inner;

pub(super) fn create_event(inner: &Inner, ns: &str, body: &Bytes) -> Response {
    let Ok(mut event) = serde_json::from_slice::<Value>(body) else {
        return status(StatusCode::BAD_REQUEST, "BadRequest", "bad event".into());
    };
    event["metadata"]["namespace"] = json!(ns);
    inner.store.lock().unwrap().events.push(event.clone());
    (StatusCode::CREATED, axum::Json(event)).into_response()
}

/// LIST of events (no watch), in one namespace or all: the e2e scenarios read events
/// through the API, as they must on a real cluster.
pub(super) fn list_events(inner: &Inner, ns: Option<&str>) -> Response {
    let st = inner.store.lock().unwrap();
    let items: Vec<Value> = st
        .events
        .iter()
        .filter(|e| ns.is_none_or(|ns| e["metadata"]["namespace"] == ns))
        .map(|e| {
            let mut e = e.clone();
            e["apiVersion"] = json!("events.k8s.io/v1");
            e["kind"] = json!("Event");
            e
        })
        .collect();
    axum::Json(json!({
        "apiVersion": "events.k8s.io/v1", "kind": "EventList",
        "metadata": {"resourceVersion": st.rv.to_string()}, "items": items,
    }))
    .into_response()
}

pub(super) fn patch_event(inner: &Inner, ns: &str, name: &str, body: &Bytes) -> Response {
    let Ok(patch) = serde_json::from_slice::<Value>(body) else {
        return status(StatusCode::BAD_REQUEST, "BadRequest", "bad patch".into());
    };
    let mut st = inner.store.lock().unwrap();
    let found = st
        .events
        .iter_mut()
        .find(|e| e["metadata"]["namespace"] == ns && e["metadata"]["name"] == name);
    match found {
        Some(e) => {
            // JSON merge patch: maps merge, null deletes, everything else replaces.
            strategic_merge(e, &patch);
            axum::Json(e.clone()).into_response()
        }
        None => status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("events.events.k8s.io \"{name}\" not found"),
        ),
    }
}
