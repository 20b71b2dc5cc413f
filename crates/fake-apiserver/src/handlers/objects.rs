//! The verbs on a resource's objects: LIST (paged) or WATCH, POST, PUT, PATCH, DELETE and
//! DELETE of a collection, with the conflict rules of a real API server (AlreadyExists,
//! stale resourceVersion and UID preconditions). GET of one object is served by
//! [`dispatch`](super::dispatch) straight from the store.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{not_found, status, strategic_merge};
use crate::managed_fields;
use crate::selectors::{FieldSelector, Filter, LabelSelector};
use crate::store::{Inner, Resource, Shared, resource};
use crate::watch;

pub(super) async fn list_or_watch(
    inner: Shared,
    collection: &'static str,
    namespace: Option<String>,
    params: BTreeMap<String, String>,
    protobuf: bool,
) -> Response {
    let watch = matches!(params.get("watch").map(String::as_str), Some("true" | "1"));
    let filter = Filter {
        namespace,
        fields: FieldSelector::parse(params.get("fieldSelector")),
        labels: LabelSelector::parse(params.get("labelSelector")),
    };
    if !watch {
        return list(&inner, collection, &filter, &params, protobuf);
    }
    watch::watch(&inner, collection, filter, &params, protobuf)
}

/// LIST, paged with `limit` and `continue` (except at `resourceVersion=0`, see below).
fn list(
    inner: &Inner,
    collection: &'static str,
    filter: &Filter,
    params: &BTreeMap<String, String>,
    protobuf: bool,
) -> Response {
    let r = resource(collection);
    let mut st = inner.store.lock().unwrap();
    // Pages (`limit`, `continue`) as kube's watcher asks for them (500 a page). The
    // token carries the first page's resourceVersion, which every page reports, so a
    // watch started after the last page replays whatever changed meanwhile (a real
    // API server serves all pages from that one snapshot instead).
    let token = params.get("continue").filter(|t| !t.is_empty());
    // `resourceVersion=0` (any version; kube's watcher with `any_semantic`) is served
    // whole from kube-apiserver's watch cache, `limit` ignored: 1.28 does so, and so the
    // client must cope with one body holding every object.
    let from_watch_cache =
        token.is_none() && params.get("resourceVersion").is_some_and(|v| v == "0");
    let limit = params
        .get("limit")
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|&n| n > 0 && !from_watch_cache);
    let (list_rv, after) = match token.and_then(|t| t.split_once(':')) {
        Some((rv, key)) => {
            let (ns, name) = key.split_once('/').unwrap_or(("", key));
            (
                rv.parse().unwrap_or(st.rv),
                Some((ns.to_string(), name.to_string())),
            )
        }
        None => {
            *st.lists.entry(collection.to_string()).or_default() += 1;
            (st.rv, None)
        }
    };
    let mut matching = st
        .objects
        .iter()
        .filter(|((c, ns, name), v)| {
            c == collection
                && after
                    .as_ref()
                    .is_none_or(|(a_ns, a_name)| (ns, name) > (a_ns, a_name))
                && filter.matches(v)
        })
        .peekable();
    let mut items = Vec::new();
    let mut last = None;
    for ((_, ns, name), v) in matching.by_ref() {
        items.push(v.clone());
        last = Some(format!("{list_rv}:{ns}/{name}"));
        if limit.is_some_and(|n| items.len() >= n) {
            break;
        }
    }
    let more = matching.peek().is_some();
    let token = last.filter(|_| more);
    if protobuf
        && let Ok(body) =
            crate::protobuf::list(collection, &items, &list_rv.to_string(), token.as_deref())
    {
        *st.protobuf_served
            .entry(collection.to_string())
            .or_default() += 1;
        return (
            [(
                axum::http::header::CONTENT_TYPE,
                crate::protobuf::CONTENT_TYPE,
            )],
            body,
        )
            .into_response();
    }
    let mut metadata = json!({"resourceVersion": list_rv.to_string()});
    if let Some(t) = token {
        metadata["continue"] = json!(t);
    }
    let body = json!({
        "apiVersion": r.api_version(),
        "kind": format!("{}List", r.kind),
        "metadata": metadata,
        "items": items,
    });
    axum::Json(body).into_response()
}

pub(super) fn conflict_modified(collection: &str, name: &str) -> Response {
    status(
        StatusCode::CONFLICT,
        "Conflict",
        format!(
            "Operation cannot be fulfilled on {collection} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
        ),
    )
}

/// The request body as a JSON object.
pub(super) fn decode(body: &Bytes) -> Option<Value> {
    serde_json::from_slice::<Value>(body)
        .ok()
        .filter(Value::is_object)
}

pub(super) fn bad_body() -> Response {
    status(
        StatusCode::BAD_REQUEST,
        "BadRequest",
        "the body is not a JSON object".into(),
    )
}

/// POST: 409 AlreadyExists when the name is taken; `generateName` gets a unique suffix.
/// Pods lose any status they were sent, as on a real API server; Nodes keep theirs.
pub(super) fn create(
    inner: &Inner,
    r: &Resource,
    ns: &str,
    body: &Bytes,
    manager: &str,
) -> Response {
    let Some(mut object) = decode(body) else {
        return bad_body();
    };
    let _guard = inner.write_lock.lock().unwrap();
    if object["metadata"]["name"]
        .as_str()
        .is_none_or(str::is_empty)
    {
        let Some(prefix) = object["metadata"]["generateName"].as_str() else {
            return status(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid",
                "metadata.name: Required value: name or generateName is required".into(),
            );
        };
        let n = {
            let mut st = inner.store.lock().unwrap();
            st.next_uid += 1;
            st.next_uid
        };
        object["metadata"]["name"] = json!(format!("{prefix}{n:05x}"));
    }
    if r.namespaced {
        object["metadata"]["namespace"] = json!(ns);
    }
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    if inner.get(r.collection, ns, &name).is_some() {
        return status(
            StatusCode::CONFLICT,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", r.plural),
        );
    }
    if r.collection == "pods"
        && let Some(o) = object.as_object_mut()
    {
        o.remove("status");
        object["status"] = json!({"phase": "Pending"});
    }
    if let Err(e) = super::pod_groups::prepare(r, None, &mut object) {
        return *e;
    }
    if let Err(e) = super::resource_slices::prepare(r, &object) {
        return *e;
    }
    let written = object.clone();
    object["apiVersion"] = json!(r.api_version());
    managed_fields::record(&mut object, manager, &written, None);
    (
        StatusCode::CREATED,
        axum::Json(inner.put(r.collection, object)),
    )
        .into_response()
}

/// PUT with optimistic concurrency: a resourceVersion in the body must be the stored one.
pub(super) fn replace(
    inner: &Inner,
    r: &Resource,
    ns: &str,
    name: &str,
    body: &Bytes,
    manager: &str,
) -> Response {
    let Some(mut object) = decode(body) else {
        return bad_body();
    };
    let _guard = inner.write_lock.lock().unwrap();
    let Some(current) = inner.get(r.collection, ns, name) else {
        return not_found(r.collection, name);
    };
    if let Some(rv) = object["metadata"]["resourceVersion"].as_str()
        && current["metadata"]["resourceVersion"].as_str() != Some(rv)
    {
        return conflict_modified(r.collection, name);
    }
    object["metadata"]["name"] = json!(name);
    if r.namespaced {
        object["metadata"]["namespace"] = json!(ns);
    }
    object["metadata"]["uid"] = current["metadata"]["uid"].clone();
    object["metadata"]["creationTimestamp"] = current["metadata"]["creationTimestamp"].clone();
    if let Err(e) = super::pod_groups::prepare(r, Some(&current), &mut object) {
        return *e;
    }
    if let Err(e) = super::resource_slices::prepare(r, &object) {
        return *e;
    }
    let written = object.clone();
    object["apiVersion"] = json!(r.api_version());
    object["metadata"]["managedFields"] = current["metadata"]["managedFields"].clone();
    managed_fields::record(&mut object, manager, &written, None);
    axum::Json(inner.put(r.collection, object)).into_response()
}

/// PATCH as a JSON merge patch (strategic merge for `conditions` lists). A
/// `metadata.resourceVersion` in the patch is an optimistic-concurrency precondition.
pub(super) fn patch(
    inner: &Inner,
    collection: &str,
    ns: &str,
    name: &str,
    body: &Bytes,
    manager: &str,
) -> Response {
    let Some(patch) = decode(body) else {
        return bad_body();
    };
    let _guard = inner.write_lock.lock().unwrap();
    let Some(mut object) = inner.get(collection, ns, name) else {
        return not_found(collection, name);
    };
    if let Some(rv) = patch["metadata"]["resourceVersion"].as_str()
        && object["metadata"]["resourceVersion"].as_str() != Some(rv)
    {
        return conflict_modified(collection, name);
    }
    let current = object.clone();
    strategic_merge(&mut object, &patch);
    if let Err(e) = super::pod_groups::prepare(resource(collection), Some(&current), &mut object) {
        return *e;
    }
    managed_fields::record(&mut object, manager, &patch, None);
    axum::Json(inner.put(collection, object)).into_response()
}

/// DELETE with an optional UID precondition (any collection; deletion is immediate).
pub(super) fn delete_object(
    inner: &Inner,
    collection: &str,
    ns: &str,
    name: &str,
    body: &Bytes,
) -> Response {
    let opts: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let Some(pod) = inner.get(collection, ns, name) else {
        return not_found(collection, name);
    };
    if let Some(uid) = opts["preconditions"]["uid"].as_str()
        && pod["metadata"]["uid"].as_str() != Some(uid)
    {
        return status(
            StatusCode::CONFLICT,
            "Conflict",
            "precondition failed: UID".into(),
        );
    }
    let removed = inner.remove(collection, ns, name).unwrap_or(pod);
    axum::Json(removed).into_response()
}

/// DELETE of a collection: every object in the namespace matching `labelSelector`.
pub(super) fn delete_collection(
    inner: &Inner,
    collection: &str,
    ns: &str,
    params: &BTreeMap<String, String>,
) -> Response {
    let labels = LabelSelector::parse(params.get("labelSelector"));
    let _guard = inner.write_lock.lock().unwrap();
    let doomed: Vec<(String, String)> = {
        let st = inner.store.lock().unwrap();
        st.objects
            .iter()
            .filter(|((c, o_ns, _), v)| {
                c == collection && (ns.is_empty() || o_ns == ns) && labels.matches(v)
            })
            .map(|((_, o_ns, name), _)| (o_ns.clone(), name.clone()))
            .collect()
    };
    let items: Vec<Value> = doomed
        .iter()
        .filter_map(|(o_ns, name)| inner.remove(collection, o_ns, name))
        .collect();
    let r = resource(collection);
    axum::Json(json!({"apiVersion": r.api_version(), "kind": format!("{}List", r.kind), "metadata": {}, "items": items})).into_response()
}
