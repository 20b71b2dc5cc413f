//! The HTTP side: one fallback handler, [`dispatch`], parses the path into a [`Target`]
//! (group, version, namespace, collection, name, subresource), finds the resource, and
//! calls the handler for the method, answering errors with Kubernetes `Status` bodies.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::selectors::{FieldSelector, Filter, LabelSelector};
use crate::store::{Inner, RESOURCES, Resource, Shared, resource};
use crate::watch;

mod access_review;
mod events;
mod subresources;

pub use access_review::Grant;

/// Where a request goes: `/api/v1/...` or `/apis/{group}/{version}/...`, then
/// `[namespaces/{ns}/]{collection}[/{name}[/{subresource}]]`.
struct Target {
    group: String,
    version: String,
    namespace: Option<String>,
    collection: String,
    name: Option<String>,
    subresource: Option<String>,
}

impl Target {
    fn parse(path: &str) -> Option<Target> {
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let (group, version, rest) = match segs.as_slice() {
            ["api", version, rest @ ..] => ("", *version, rest),
            ["apis", group, version, rest @ ..] => (*group, *version, rest),
            _ => return None,
        };
        let (namespace, rest) = match rest {
            ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
            _ => (None, rest),
        };
        let (collection, rest) = rest.split_first()?;
        if rest.len() > 2 {
            return None;
        }
        Some(Target {
            group: group.to_string(),
            version: version.to_string(),
            namespace,
            collection: collection.to_string(),
            name: rest.first().map(|s| s.to_string()),
            subresource: rest.get(1).map(|s| s.to_string()),
        })
    }
}

/// The one handler: finds the resource, then does what a real API server would for the
/// method (the subset ferrosched, its tests and e2e scenarios use).
pub(crate) async fn dispatch(
    State(inner): State<Shared>,
    method: Method,
    uri: Uri,
    Query(params): Query<BTreeMap<String, String>>,
    body: Bytes,
) -> Response {
    let unknown = || {
        status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("the server could not find the requested resource ({uri})"),
        )
    };
    let Some(t) = Target::parse(uri.path()) else {
        return unknown();
    };
    if t.group == "events.k8s.io" && t.collection == "events" {
        let ns = t.namespace.as_deref().unwrap_or("");
        return match (&method, &t.name) {
            (&Method::POST, None) => events::create_event(&inner, ns, &body),
            (&Method::PATCH, Some(name)) => events::patch_event(&inner, ns, name, &body),
            (&Method::GET, None) => events::list_events(&inner, t.namespace.as_deref()),
            _ => unknown(),
        };
    }
    if t.group == "authorization.k8s.io"
        && t.collection == "subjectaccessreviews"
        && t.name.is_none()
        && method == Method::POST
    {
        return access_review::subject_access_review(&inner, &body);
    }
    let Some(r) = RESOURCES
        .iter()
        .find(|r| r.collection == t.collection && r.group == t.group && r.version == t.version)
    else {
        return unknown();
    };
    if inner.store.lock().unwrap().disabled.contains(r.collection) {
        return unknown();
    }
    // Namespaced collections are listed across namespaces without one; everything else
    // needs the namespace exactly when the resource is namespaced.
    let ns = match (&t.namespace, r.namespaced, &t.name, &method) {
        (Some(ns), true, _, _) => ns.clone(),
        (None, true, None, &Method::GET) | (None, false, _, _) => String::new(),
        _ => return unknown(),
    };
    let collection = r.collection;
    match (method, t.name, t.subresource.as_deref()) {
        (Method::GET, None, None) => {
            let namespace = t.namespace.filter(|_| r.namespaced);
            list_or_watch(Arc::clone(&inner), collection, namespace, params).await
        }
        (Method::GET, Some(name), None) => match inner.get(collection, &ns, &name) {
            Some(o) => axum::Json(o).into_response(),
            None => not_found(collection, &name),
        },
        (Method::POST, None, None) => create(&inner, r, &ns, &body),
        (Method::PUT, Some(name), None) => replace(&inner, r, &ns, &name, &body),
        (Method::PATCH, Some(name), None) => patch(&inner, collection, &ns, &name, &body),
        (Method::DELETE, Some(name), None) => {
            let _guard = inner.write_lock.lock().unwrap();
            delete_object(&inner, collection, &ns, &name, &body)
        }
        (Method::DELETE, None, None) => delete_collection(&inner, collection, &ns, &params),
        (Method::POST, Some(name), Some("binding")) if collection == "pods" => {
            let Ok(binding) = serde_json::from_slice::<Value>(&body) else {
                return status(StatusCode::BAD_REQUEST, "BadRequest", "bad binding".into());
            };
            let _guard = inner.write_lock.lock().unwrap();
            subresources::bind(&inner, &ns, &name, &binding)
        }
        (Method::PATCH, Some(name), Some("status")) => {
            let _guard = inner.write_lock.lock().unwrap();
            subresources::patch_status(&inner, collection, &ns, &name, &body)
        }
        _ => status(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            format!("the fake API server does not serve this on {collection}"),
        ),
    }
}

pub(crate) fn status(code: StatusCode, reason: &str, message: String) -> Response {
    let body = json!({
        "apiVersion": "v1", "kind": "Status", "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16(),
    });
    (code, axum::Json(body)).into_response()
}

fn not_found(collection: &str, name: &str) -> Response {
    let r = resource(collection);
    let what = if r.group.is_empty() {
        collection.to_string()
    } else {
        format!("{collection}.{}", r.group)
    };
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("{what} \"{name}\" not found"),
    )
}

fn conflict_modified(collection: &str, name: &str) -> Response {
    status(
        StatusCode::CONFLICT,
        "Conflict",
        format!(
            "Operation cannot be fulfilled on {collection} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
        ),
    )
}

/// The request body as a JSON object.
fn decode(body: &Bytes) -> Option<Value> {
    serde_json::from_slice::<Value>(body)
        .ok()
        .filter(Value::is_object)
}

fn bad_body() -> Response {
    status(
        StatusCode::BAD_REQUEST,
        "BadRequest",
        "the body is not a JSON object".into(),
    )
}

/// Strategic-merge-patch subset: maps merge recursively, `null` deletes, `conditions`
/// lists merge by `type`, other lists are replaced.
fn strategic_merge(target: &mut Value, patch: &Value) {
    let (Value::Object(t), Value::Object(p)) = (&mut *target, patch) else {
        *target = patch.clone();
        return;
    };
    for (k, v) in p {
        if k.starts_with('$') {
            continue;
        }
        if v.is_null() {
            t.remove(k);
        } else if k == "conditions" && v.is_array() {
            let list = t.entry(k.clone()).or_insert_with(|| json!([]));
            if !list.is_array() {
                *list = json!([]);
            }
            let list = list.as_array_mut().unwrap();
            for c in v.as_array().unwrap() {
                match list.iter_mut().find(|e| e["type"] == c["type"]) {
                    Some(existing) => strategic_merge(existing, c),
                    None => list.push(c.clone()),
                }
            }
        } else if v.is_object() && t.get(k).is_some_and(Value::is_object) {
            strategic_merge(t.get_mut(k).unwrap(), v);
        } else {
            t.insert(k.clone(), v.clone());
        }
    }
}

async fn list_or_watch(
    inner: Shared,
    collection: &'static str,
    namespace: Option<String>,
    params: BTreeMap<String, String>,
) -> Response {
    let watch = matches!(params.get("watch").map(String::as_str), Some("true" | "1"));
    let filter = Filter {
        namespace,
        fields: FieldSelector::parse(params.get("fieldSelector")),
        labels: LabelSelector::parse(params.get("labelSelector")),
    };
    if !watch {
        return list(&inner, collection, &filter, &params);
    }
    watch::watch(&inner, collection, filter, &params)
}

/// LIST, paged with `limit` and `continue`.
fn list(
    inner: &Inner,
    collection: &'static str,
    filter: &Filter,
    params: &BTreeMap<String, String>,
) -> Response {
    let r = resource(collection);
    let mut st = inner.store.lock().unwrap();
    // Pages (`limit`, `continue`) as kube's watcher asks for them (500 a page). The
    // token carries the first page's resourceVersion, which every page reports, so a
    // watch started after the last page replays whatever changed meanwhile (a real
    // API server serves all pages from that one snapshot instead).
    let limit = params
        .get("limit")
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|&n| n > 0);
    let token = params.get("continue").filter(|t| !t.is_empty());
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
    let mut metadata = json!({"resourceVersion": list_rv.to_string()});
    if more && let Some(t) = last {
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

/// POST: 409 AlreadyExists when the name is taken; `generateName` gets a unique suffix.
/// Pods lose any status they were sent, as on a real API server; Nodes keep theirs.
fn create(inner: &Inner, r: &Resource, ns: &str, body: &Bytes) -> Response {
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
            format!("{} \"{name}\" already exists", r.collection),
        );
    }
    if r.collection == "pods"
        && let Some(o) = object.as_object_mut()
    {
        o.remove("status");
        object["status"] = json!({"phase": "Pending"});
    }
    (
        StatusCode::CREATED,
        axum::Json(inner.put(r.collection, object)),
    )
        .into_response()
}

/// PUT with optimistic concurrency: a resourceVersion in the body must be the stored one.
fn replace(inner: &Inner, r: &Resource, ns: &str, name: &str, body: &Bytes) -> Response {
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
    axum::Json(inner.put(r.collection, object)).into_response()
}

/// PATCH as a JSON merge patch (strategic merge for `conditions` lists). A
/// `metadata.resourceVersion` in the patch is an optimistic-concurrency precondition.
fn patch(inner: &Inner, collection: &str, ns: &str, name: &str, body: &Bytes) -> Response {
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
    strategic_merge(&mut object, &patch);
    axum::Json(inner.put(collection, object)).into_response()
}

/// DELETE with an optional UID precondition (any collection; deletion is immediate).
fn delete_object(inner: &Inner, collection: &str, ns: &str, name: &str, body: &Bytes) -> Response {
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
fn delete_collection(
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
