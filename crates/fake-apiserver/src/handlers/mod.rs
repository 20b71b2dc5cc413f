//! The HTTP side: one fallback handler, [`dispatch`], parses the path into a [`Target`]
//! (group, version, namespace, collection, name, subresource), finds the resource, and
//! calls the handler for the method, answering errors with Kubernetes `Status` bodies.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::store::{RESOURCES, Shared, resource};

mod access_review;
mod claim_status;
mod composite_pod_groups;
mod events;
mod objects;
mod pod_admission;
mod pod_groups;
mod resource_slices;
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
    headers: HeaderMap,
    Query(params): Query<BTreeMap<String, String>>,
    body: Bytes,
) -> Response {
    let manager = crate::managed_fields::manager(
        params.get("fieldManager").map(String::as_str),
        headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok()),
    );
    // kube-apiserver answers a path no API serves (an API group or version it lacks, a
    // resource it does not know) from its not-found handler: plain text, no Status.
    let unknown = || {
        (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "404 page not found\n",
        )
            .into_response()
    };
    if method == Method::GET && uri.path() == "/version" {
        return axum::Json(version()).into_response();
    }
    if method == Method::GET
        && let Some(list) = discovery(&inner, uri.path())
    {
        return axum::Json(list).into_response();
    }
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
    if t.group == "authentication.k8s.io"
        && t.collection == "tokenreviews"
        && t.name.is_none()
        && method == Method::POST
    {
        return access_review::token_review(&inner, &body);
    }
    let Some(r) = RESOURCES
        .iter()
        .find(|r| r.plural == t.collection && r.group == t.group && r.version == t.version)
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
    if collection == "pods" && t.subresource.is_none() {
        let user = crate::admission::UserInfo::of(&inner, &headers);
        match (&method, &t.name) {
            (&Method::POST, None) => {
                return pod_admission::create(&inner, r, &ns, &body, user, &manager).await;
            }
            (&Method::PUT, Some(name)) => {
                return pod_admission::replace(&inner, r, &ns, name, &body, user, &manager).await;
            }
            (&Method::PATCH, Some(name)) => {
                return pod_admission::patch(&inner, r, &ns, name, &body, user, &manager).await;
            }
            _ => {}
        }
    }
    match (method, t.name, t.subresource.as_deref()) {
        (Method::GET, None, None) => {
            let namespace = t.namespace.filter(|_| r.namespaced);
            let protobuf = crate::protobuf::encodes(collection)
                && crate::protobuf::wanted(
                    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()),
                );
            objects::list_or_watch(Arc::clone(&inner), collection, namespace, params, protobuf)
                .await
        }
        (Method::GET, Some(name), None) => match inner.get(collection, &ns, &name) {
            Some(o) => axum::Json(o).into_response(),
            None => not_found(collection, &name),
        },
        (Method::POST, None, None) => objects::create(&inner, r, &ns, &body, &manager),
        (Method::PUT, Some(name), None) => objects::replace(&inner, r, &ns, &name, &body, &manager),
        (Method::PATCH, Some(name), None) => {
            objects::patch(&inner, collection, &ns, &name, &body, &manager)
        }
        (Method::DELETE, Some(name), None) => {
            let _guard = inner.write_lock.lock().unwrap();
            objects::delete_object(&inner, collection, &ns, &name, &body)
        }
        (Method::DELETE, None, None) => {
            objects::delete_collection(&inner, collection, &ns, &params)
        }
        (Method::POST, Some(name), Some("binding")) if collection == "pods" => {
            let Ok(binding) = serde_json::from_slice::<Value>(&body) else {
                return status(StatusCode::BAD_REQUEST, "BadRequest", "bad binding".into());
            };
            let _guard = inner.write_lock.lock().unwrap();
            subresources::bind(&inner, &ns, &name, &binding)
        }
        (Method::PATCH, Some(name), Some("status")) => {
            let _guard = inner.write_lock.lock().unwrap();
            subresources::patch_status(&inner, collection, &ns, &name, &body, &manager)
        }
        _ => status(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            format!("the fake API server does not serve this on {collection}"),
        ),
    }
}

/// `GET /version`, as kube-apiserver answers it: the release whose APIs the server serves
/// (PodGroups in `scheduling.k8s.io/v1beta1`: 1.37), marked as this fake in `gitVersion`.
fn version() -> Value {
    json!({
        "major": "1", "minor": "37", "gitVersion": crate::VERSION,
        "gitCommit": "", "gitTreeState": "clean", "buildDate": "",
        "goVersion": "", "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    })
}

/// `GET /apis/{group}/{version}` (and `/api/v1`): the group version's resources, as an
/// `APIResourceList`, leaving out disabled ones; None for another path or a group version
/// with nothing served.
fn discovery(inner: &Shared, path: &str) -> Option<Value> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, version) = match segs.as_slice() {
        ["api", version] => ("", *version),
        ["apis", group, version] => (*group, *version),
        _ => return None,
    };
    let disabled = inner.store.lock().unwrap().disabled.clone();
    let resources: Vec<Value> = RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version && !disabled.contains(r.collection))
        .map(|r| {
            json!({"name": r.plural, "singularName": "", "namespaced": r.namespaced,
                   "kind": r.kind, "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]})
        })
        .collect();
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
                "resources": resources}),
    )
}

/// An error answer: a Kubernetes `Status` body (`Failure`, `reason`, `message`) with `code`.
pub(crate) fn status(code: StatusCode, reason: &str, message: String) -> Response {
    let body = json!({
        "apiVersion": "v1", "kind": "Status", "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16(),
    });
    (code, axum::Json(body)).into_response()
}

/// 404 for a missing object, worded as the API server words it.
fn not_found(collection: &str, name: &str) -> Response {
    let r = resource(collection);
    let what = if r.group.is_empty() {
        r.plural.to_string()
    } else {
        format!("{}.{}", r.plural, r.group)
    };
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("{what} \"{name}\" not found"),
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
