//! Subresources: `POST pods/{name}/binding` (with its injected failures and lost races)
//! and `PATCH {resource}/{name}/status`.

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{not_found, status, strategic_merge};
use crate::store::Inner;

pub(super) fn bind(inner: &Inner, ns: &str, name: &str, binding: &Value) -> Response {
    {
        let mut st = inner.store.lock().unwrap();
        if st.failing_bindings > 0 {
            st.failing_bindings -= 1;
            return status(
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                "the server is currently unable to handle the request".into(),
            );
        }
    }
    let Some(mut pod) = inner.get("pods", ns, name) else {
        return not_found("pods", name);
    };
    if let Some(uid) = binding["metadata"]["uid"].as_str()
        && pod["metadata"]["uid"].as_str() != Some(uid)
    {
        return status(
            StatusCode::CONFLICT,
            "Conflict",
            format!("Operation cannot be fulfilled on pods/binding \"{name}\": UID mismatch"),
        );
    }
    if pod["spec"]["nodeName"]
        .as_str()
        .is_some_and(|n| !n.is_empty())
    {
        inner
            .store
            .lock()
            .unwrap()
            .double_bindings
            .push(format!("{ns}/{name}"));
        return status(
            StatusCode::CONFLICT,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on pods/binding \"{name}\": pod {name} is already assigned to node \"{}\"",
                pod["spec"]["nodeName"].as_str().unwrap()
            ),
        );
    }
    let stolen = inner
        .store
        .lock()
        .unwrap()
        .steal
        .remove(&format!("{ns}/{name}"));
    if let Some(other) = stolen {
        pod["spec"]["nodeName"] = json!(other);
        inner.put("pods", pod);
        return status(
            StatusCode::CONFLICT,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on pods/binding \"{name}\": pod {name} is already assigned to node \"{other}\""
            ),
        );
    }
    let node = binding["target"]["name"].as_str().unwrap_or("").to_string();
    pod["spec"]["nodeName"] = json!(node);
    // kube-apiserver 1.35+ (ClearingNominatedNodeNameAfterBinding, beta, on): a bound pod
    // keeps no nominatedNodeName, whoever set it.
    if let Some(status) = pod["status"].as_object_mut() {
        status.remove("nominatedNodeName");
    }
    set_scheduled(&mut pod);
    inner.put("pods", pod);
    inner
        .store
        .lock()
        .unwrap()
        .bindings
        .push((format!("{ns}/{name}"), node));
    (
        StatusCode::CREATED,
        axum::Json(json!({"apiVersion": "v1", "kind": "Status", "status": "Success", "code": 201})),
    )
        .into_response()
}

/// The binding's PodScheduled condition replaces the old one whole, as kube-apiserver's
/// binding storage does: the scheduler's `Unschedulable` reason and message do not survive
/// next to `status: True`. The transition time stays when the status was already True.
fn set_scheduled(pod: &mut Value) {
    // The fake's clock is the fixed instant it stamps everywhere.
    let now = "2026-01-01T00:00:00Z";
    if !pod["status"].is_object() {
        pod["status"] = json!({});
    }
    let conditions = pod["status"]
        .as_object_mut()
        .unwrap()
        .entry("conditions")
        .or_insert_with(|| json!([]));
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let list = conditions.as_array_mut().unwrap();
    let old = list.iter().position(|c| c["type"] == "PodScheduled");
    let since = match old.map(|i| &list[i]) {
        Some(c) if c["status"] == "True" => c["lastTransitionTime"].clone(),
        _ => json!(now),
    };
    let fresh = json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": since});
    match old {
        Some(i) => list[i] = fresh,
        None => list.push(fresh),
    }
}

/// PATCH of a status subresource: only `status` may change. A `metadata.resourceVersion` in
/// the patch is an optimistic-concurrency precondition (409 when the object changed).
pub(super) fn patch_status(
    inner: &Inner,
    collection: &str,
    ns: &str,
    name: &str,
    body: &Bytes,
    manager: &str,
) -> Response {
    let Ok(patch) = serde_json::from_slice::<Value>(body) else {
        return status(StatusCode::BAD_REQUEST, "BadRequest", "bad patch".into());
    };
    let Some(mut object) = inner.get(collection, ns, name) else {
        return not_found(collection, name);
    };
    if let Some(rv) = patch["metadata"]["resourceVersion"].as_str()
        && object["metadata"]["resourceVersion"].as_str() != Some(rv)
    {
        return super::objects::conflict_modified(collection, name);
    }
    if let Some(s) = patch.get("status") {
        if object.get("status").is_none() {
            object["status"] = json!({});
        }
        strategic_merge(&mut object["status"], s);
        if collection == "podgroups"
            && let Err(e) = super::pod_groups::check_status(&object)
        {
            return *e;
        }
        if collection == "resourceclaims" {
            let mut errors = super::claim_status::device_status_errors(&object["status"]);
            errors.extend(super::claim_status::reserved_for_errors(&object["status"]));
            errors.extend(super::claim_status::allocation_errors(&object["status"]));
            if !errors.is_empty() {
                return status(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid",
                    format!(
                        "ResourceClaim.resource.k8s.io {name:?} is invalid: {}",
                        match errors.as_slice() {
                            [one] => one.clone(),
                            many => format!("[{}]", many.join(", ")),
                        }
                    ),
                );
            }
        }
        let written = json!({ "status": s });
        crate::managed_fields::record(&mut object, manager, &written, Some("status"));
    }
    axum::Json(inner.put(collection, object)).into_response()
}
