//! A small in-process Kubernetes API server for the controller's tests: objects live in
//! memory as JSON, every write bumps one global resourceVersion and is appended to a watch
//! log. It serves exactly what the controller uses:
//!
//! - LIST (`GET /api/v1/pods` ...) with `metadata.resourceVersion`;
//! - WATCH (`?watch=true&resourceVersion=N`): newline-delimited watch events after N, then
//!   live ones; `fieldSelector` (`a.b=v`, `a.b!=v`) on both, with objects that stop
//!   matching sent as DELETED;
//! - `POST pods/{name}/binding` (sets spec.nodeName and PodScheduled=True; 409 if already
//!   bound or the UID differs, 404 if missing);
//! - `PATCH pods/{name}/status` (strategic merge: conditions merge by type, null deletes);
//! - `DELETE pods/{name}` (with an optional UID precondition);
//! - `POST events` and `PATCH events/{name}` (events.k8s.io/v1, series updates);
//! - PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes
//!   (storage.k8s.io/v1): list/watch; `PATCH` (JSON merge patch) of a PV or PVC, refused
//!   with 409 when the patch carries a `metadata.resourceVersion` that is not the stored one;
//! - Leases (coordination.k8s.io/v1): GET, POST (409 if present), PUT (409 unless the
//!   resourceVersion matches), for leader election.
//!
//! Tests add objects and read bindings and events with the helpers on [`FakeApiServer`], and
//! point the controller at it with [`FakeApiServer::kubeconfig`] (plain http). Every request
//! served (also ones no route matches) is logged as the API server's authorizer sees it
//! ([`RequestRecord`]: verb, group, resource, subresource, namespace, name), for RBAC tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::broadcast;

/// (collection, namespace, name); cluster-scoped objects have an empty namespace.
type Key = (String, String, String);

#[derive(Clone, Debug)]
struct WatchEvent {
    rv: u64,
    collection: String,
    type_: &'static str,
    object: Value,
    /// The object before a MODIFIED, for field-selector transitions.
    old: Option<Value>,
}

/// A field selector of `path=value` / `path!=value` terms joined by commas (dotted paths
/// such as `status.phase`; a missing field reads as "").
#[derive(Clone, Debug, Default)]
struct FieldSelector(Vec<(Vec<String>, bool, String)>);

impl FieldSelector {
    fn parse(s: Option<&String>) -> Self {
        let terms = s
            .map(|s| s.split(',').filter(|t| !t.is_empty()).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .map(|t| {
                let (path, eq, value) = match t.split_once("!=") {
                    Some((p, v)) => (p, false, v),
                    None => {
                        let (p, v) = t.split_once('=').expect("field selector term");
                        (p.trim_end_matches('='), true, v)
                    }
                };
                let path = path.split('.').map(str::to_string).collect();
                (path, eq, value.to_string())
            })
            .collect();
        FieldSelector(terms)
    }

    fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, eq, value)| {
            let field = path
                .iter()
                .try_fold(obj, |v, k| v.get(k))
                .and_then(Value::as_str)
                .unwrap_or("");
            (field == value) == *eq
        })
    }

    /// How a watcher with this selector sees the event, if at all.
    fn view(&self, e: &WatchEvent) -> Option<&'static str> {
        let now = self.matches(&e.object);
        match e.type_ {
            "MODIFIED" => {
                let before = e.old.as_ref().is_some_and(|o| self.matches(o));
                match (before, now) {
                    (true, true) => Some("MODIFIED"),
                    (true, false) => Some("DELETED"),
                    (false, true) => Some("ADDED"),
                    (false, false) => None,
                }
            }
            t => now.then_some(t),
        }
    }
}

#[derive(Default)]
struct Store {
    objects: BTreeMap<Key, Value>,
    rv: u64,
    log: Vec<WatchEvent>,
    bindings: Vec<(String, String)>,
    events: Vec<Value>,
    next_uid: u64,
    /// Watches starting before this resourceVersion get `410 Expired`.
    compacted: u64,
    /// Pods whose next binding loses a race: another scheduler binds them to the given
    /// node first, and ours gets 409.
    steal: BTreeMap<String, String>,
    /// How many of the next Binding requests fail with 503.
    failing_bindings: usize,
    /// LIST requests served per collection.
    lists: BTreeMap<String, usize>,
    /// Every request received, in order.
    requests: Vec<RequestRecord>,
}

/// One request in RBAC terms (the apiserver's RequestInfo): what a Role rule must allow.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RequestRecord {
    /// get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: String,
    /// "" for the core group.
    pub group: String,
    pub resource: String,
    /// "" or e.g. "binding", "status".
    pub subresource: String,
    /// "" for cluster-scoped or all-namespace requests.
    pub namespace: String,
    /// "" for collection requests (list, watch, create).
    pub name: String,
}

impl RequestRecord {
    /// Resource paths: `/api/v1/...` or `/apis/{group}/{version}/...`, then
    /// `[namespaces/{ns}/]{resource}[/{name}[/{subresource}]]`.
    fn parse(method: &str, path: &str, query: &str) -> RequestRecord {
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let (group, rest) = match segs.as_slice() {
            ["api", _version, rest @ ..] => ("", rest),
            ["apis", group, _version, rest @ ..] => (*group, rest),
            _ => ("", &segs[..0]),
        };
        let (namespace, rest) = match rest {
            ["namespaces", ns, rest @ ..] if !rest.is_empty() => (*ns, rest),
            _ => ("", rest),
        };
        let at = |i: usize| rest.get(i).copied().unwrap_or("").to_string();
        let name = at(1);
        let watch = query
            .split('&')
            .any(|kv| kv == "watch=true" || kv == "watch=1");
        let verb = match method {
            "GET" if watch => "watch",
            "GET" if name.is_empty() => "list",
            "GET" => "get",
            "POST" => "create",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" if name.is_empty() => "deletecollection",
            "DELETE" => "delete",
            other => other,
        };
        RequestRecord {
            verb: verb.to_string(),
            group: group.to_string(),
            resource: at(0),
            subresource: at(2),
            namespace: namespace.to_string(),
            name,
        }
    }
}

impl std::fmt::Display for RequestRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(f, "{} {group} {}", self.verb, self.resource)?;
        if !self.subresource.is_empty() {
            write!(f, "/{}", self.subresource)?;
        }
        if !self.namespace.is_empty() {
            write!(f, " namespace={}", self.namespace)?;
        }
        if !self.name.is_empty() {
            write!(f, " name={}", self.name)?;
        }
        Ok(())
    }
}

/// Middleware: logs every request before routing it.
async fn record_request(
    State(inner): State<Shared>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let record = RequestRecord::parse(
        req.method().as_str(),
        req.uri().path(),
        req.uri().query().unwrap_or(""),
    );
    inner.store.lock().unwrap().requests.push(record);
    next.run(req).await
}

struct Inner {
    store: Mutex<Store>,
    tx: broadcast::Sender<WatchEvent>,
    /// Bumped to end every open watch stream.
    generation: tokio::sync::watch::Sender<u64>,
    /// Serialises lease create/replace (check-then-write).
    lease_lock: Mutex<()>,
}

type Shared = Arc<Inner>;

pub struct FakeApiServer {
    pub addr: SocketAddr,
    inner: Shared,
    task: tokio::task::JoinHandle<()>,
    dir: PathBuf,
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn status(code: StatusCode, reason: &str, message: String) -> Response {
    let body = json!({
        "apiVersion": "v1", "kind": "Status", "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16(),
    });
    (code, axum::Json(body)).into_response()
}

fn collection_kind(collection: &str) -> (&'static str, &'static str) {
    match collection {
        "pods" => ("v1", "Pod"),
        "nodes" => ("v1", "Node"),
        "namespaces" => ("v1", "Namespace"),
        "runtimeclasses" => ("node.k8s.io/v1", "RuntimeClass"),
        "poddisruptionbudgets" => ("policy/v1", "PodDisruptionBudget"),
        "leases" => ("coordination.k8s.io/v1", "Lease"),
        "persistentvolumeclaims" => ("v1", "PersistentVolumeClaim"),
        "persistentvolumes" => ("v1", "PersistentVolume"),
        "storageclasses" => ("storage.k8s.io/v1", "StorageClass"),
        "csinodes" => ("storage.k8s.io/v1", "CSINode"),
        _ => ("v1", "Unknown"),
    }
}

impl Inner {
    /// Stores `object`, stamping resourceVersion (and uid/creationTimestamp on create),
    /// and emits the watch event.
    fn put(&self, collection: &str, mut object: Value) -> Value {
        let mut st = self.store.lock().unwrap();
        let ns = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let name = object["metadata"]["name"]
            .as_str()
            .expect("objects have names")
            .to_string();
        let key = (collection.to_string(), ns, name);
        let (api_version, kind) = collection_kind(collection);
        object["apiVersion"] = json!(api_version);
        object["kind"] = json!(kind);
        let existed = st.objects.contains_key(&key);
        if !existed {
            if object["metadata"]["uid"].is_null() {
                st.next_uid += 1;
                object["metadata"]["uid"] = json!(format!("uid-{}", st.next_uid));
            }
            if object["metadata"]["creationTimestamp"].is_null() {
                object["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
            }
        }
        st.rv += 1;
        let rv = st.rv;
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        let old = st.objects.insert(key, object.clone());
        let ev = WatchEvent {
            rv,
            collection: collection.to_string(),
            type_: if existed { "MODIFIED" } else { "ADDED" },
            object: object.clone(),
            old,
        };
        st.log.push(ev.clone());
        let _ = self.tx.send(ev);
        object
    }

    fn remove(&self, collection: &str, ns: &str, name: &str) -> Option<Value> {
        let mut st = self.store.lock().unwrap();
        let key = (collection.to_string(), ns.to_string(), name.to_string());
        let mut object = st.objects.remove(&key)?;
        st.rv += 1;
        let rv = st.rv;
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        let ev = WatchEvent {
            rv,
            collection: collection.to_string(),
            type_: "DELETED",
            object: object.clone(),
            old: None,
        };
        st.log.push(ev.clone());
        let _ = self.tx.send(ev);
        Some(object)
    }

    fn get(&self, collection: &str, ns: &str, name: &str) -> Option<Value> {
        let st = self.store.lock().unwrap();
        st.objects
            .get(&(collection.to_string(), ns.to_string(), name.to_string()))
            .cloned()
    }
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
    params: BTreeMap<String, String>,
) -> Response {
    let watch = matches!(params.get("watch").map(String::as_str), Some("true" | "1"));
    let selector = FieldSelector::parse(params.get("fieldSelector"));
    if !watch {
        let mut st = inner.store.lock().unwrap();
        *st.lists.entry(collection.to_string()).or_default() += 1;
        let items: Vec<Value> = st
            .objects
            .iter()
            .filter(|((c, _, _), v)| c == collection && selector.matches(v))
            .map(|(_, v)| v.clone())
            .collect();
        let (api_version, kind) = collection_kind(collection);
        let body = json!({
            "apiVersion": api_version,
            "kind": format!("{kind}List"),
            "metadata": {"resourceVersion": st.rv.to_string()},
            "items": items,
        });
        return axum::Json(body).into_response();
    }
    let since: u64 = params
        .get("resourceVersion")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // Subscribe before reading the log so nothing falls between the two.
    let rx = inner.tx.subscribe();
    let mut gen_rx = inner.generation.subscribe();
    gen_rx.mark_unchanged();
    let backlog: Vec<WatchEvent> = {
        let st = inner.store.lock().unwrap();
        if since < st.compacted {
            // What a real API server sends: HTTP 200, then an ERROR event with 410.
            let body = json!({"type": "ERROR", "object": {
                "apiVersion": "v1", "kind": "Status", "status": "Failure", "code": 410,
                "reason": "Expired",
                "message": format!("too old resource version: {since} ({})", st.compacted),
            }})
            .to_string()
                + "\n";
            return Response::builder()
                .header("content-type", "application/json")
                .body(Body::from(body))
                .unwrap();
        }
        st.log
            .iter()
            .filter(|e| e.rv > since && e.collection == collection)
            .cloned()
            .collect()
    };
    let last = backlog.last().map_or(since, |e| e.rv);
    let line = move |e: &WatchEvent| -> Option<Result<Bytes, Infallible>> {
        let type_ = selector.view(e)?;
        let mut s = json!({"type": type_, "object": e.object}).to_string();
        s.push('\n');
        Some(Ok(Bytes::from(s)))
    };
    let backlog = futures::stream::iter(backlog.iter().filter_map(&line).collect::<Vec<_>>());
    let live = futures::stream::unfold((rx, gen_rx), move |(mut rx, mut gen_rx)| async move {
        loop {
            tokio::select! {
                // expire_watches(): end the stream, as a dropped connection would.
                _ = gen_rx.changed() => return None,
                r = rx.recv() => match r {
                    Ok(e) if e.collection == collection && e.rv > last => {
                        return Some((e, (rx, gen_rx)));
                    }
                    Ok(_) => continue,
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
            }
        }
    })
    .filter_map(move |e| futures::future::ready(line(&e)));
    Response::builder()
        .header("content-type", "application/json")
        .body(Body::from_stream(backlog.chain(live)))
        .unwrap()
}

async fn bind(
    State(inner): State<Shared>,
    Path((ns, name)): Path<(String, String)>,
    axum::Json(binding): axum::Json<Value>,
) -> Response {
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
    let Some(mut pod) = inner.get("pods", &ns, &name) else {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("pods \"{name}\" not found"),
        );
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
    strategic_merge(
        &mut pod,
        &json!({"status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}}),
    );
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

async fn patch_status(
    State(inner): State<Shared>,
    Path((ns, name)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let Ok(patch) = serde_json::from_slice::<Value>(&body) else {
        return status(StatusCode::BAD_REQUEST, "BadRequest", "bad patch".into());
    };
    let Some(mut pod) = inner.get("pods", &ns, &name) else {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("pods \"{name}\" not found"),
        );
    };
    // Only status may change through the status subresource.
    if let Some(s) = patch.get("status") {
        if pod.get("status").is_none() {
            pod["status"] = json!({});
        }
        strategic_merge(&mut pod["status"], s);
    }
    axum::Json(inner.put("pods", pod)).into_response()
}

async fn delete_pod(
    State(inner): State<Shared>,
    Path((ns, name)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let opts: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let Some(pod) = inner.get("pods", &ns, &name) else {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("pods \"{name}\" not found"),
        );
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
    let removed = inner.remove("pods", &ns, &name).unwrap_or(pod);
    axum::Json(removed).into_response()
}

async fn create_event(
    State(inner): State<Shared>,
    Path(ns): Path<String>,
    axum::Json(mut event): axum::Json<Value>,
) -> Response {
    event["metadata"]["namespace"] = json!(ns);
    inner.store.lock().unwrap().events.push(event.clone());
    (StatusCode::CREATED, axum::Json(event)).into_response()
}

async fn patch_event(
    State(inner): State<Shared>,
    Path((ns, name)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let Ok(patch) = serde_json::from_slice::<Value>(&body) else {
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

async fn get_lease(
    State(inner): State<Shared>,
    Path((ns, name)): Path<(String, String)>,
) -> Response {
    match inner.get("leases", &ns, &name) {
        Some(l) => axum::Json(l).into_response(),
        None => status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("leases.coordination.k8s.io \"{name}\" not found"),
        ),
    }
}

async fn create_lease(
    State(inner): State<Shared>,
    Path(ns): Path<String>,
    axum::Json(mut lease): axum::Json<Value>,
) -> Response {
    lease["metadata"]["namespace"] = json!(ns);
    let name = lease["metadata"]["name"].as_str().unwrap_or("").to_string();
    // Check and insert under one lock, so two candidates cannot both create it.
    let _guard = inner.lease_lock.lock().unwrap();
    if inner.get("leases", &ns, &name).is_some() {
        return status(
            StatusCode::CONFLICT,
            "AlreadyExists",
            format!("leases.coordination.k8s.io \"{name}\" already exists"),
        );
    }
    (StatusCode::CREATED, axum::Json(inner.put("leases", lease))).into_response()
}

/// PUT with optimistic concurrency: the body's resourceVersion must be the stored one.
async fn replace_lease(
    State(inner): State<Shared>,
    Path((ns, name)): Path<(String, String)>,
    axum::Json(mut lease): axum::Json<Value>,
) -> Response {
    let _guard = inner.lease_lock.lock().unwrap();
    let Some(current) = inner.get("leases", &ns, &name) else {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("leases.coordination.k8s.io \"{name}\" not found"),
        );
    };
    if lease["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"] {
        return status(
            StatusCode::CONFLICT,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on leases.coordination.k8s.io \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
        );
    }
    lease["metadata"]["namespace"] = json!(ns);
    lease["metadata"]["uid"] = current["metadata"]["uid"].clone();
    lease["metadata"]["creationTimestamp"] = current["metadata"]["creationTimestamp"].clone();
    axum::Json(inner.put("leases", lease)).into_response()
}

/// JSON merge patch of a PV or PVC (the object stays in its collection). A
/// `metadata.resourceVersion` in the patch is an optimistic-concurrency precondition.
async fn merge_patch(
    inner: Shared,
    collection: &'static str,
    ns: String,
    name: String,
    body: Bytes,
) -> Response {
    let Ok(patch) = serde_json::from_slice::<Value>(&body) else {
        return status(StatusCode::BAD_REQUEST, "BadRequest", "bad patch".into());
    };
    let Some(mut object) = inner.get(collection, &ns, &name) else {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("{collection} \"{name}\" not found"),
        );
    };
    if let Some(rv) = patch["metadata"]["resourceVersion"].as_str()
        && object["metadata"]["resourceVersion"].as_str() != Some(rv)
    {
        return status(
            StatusCode::CONFLICT,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {collection} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
        );
    }
    strategic_merge(&mut object, &patch);
    axum::Json(inner.put(collection, object)).into_response()
}

fn collection_route(collection: &'static str) -> axum::routing::MethodRouter<Shared> {
    get(
        move |State(inner): State<Shared>, Query(params): Query<BTreeMap<String, String>>| {
            list_or_watch(inner, collection, params)
        },
    )
}

impl FakeApiServer {
    pub async fn start() -> FakeApiServer {
        let (tx, _) = broadcast::channel(4096);
        let inner = Arc::new(Inner {
            store: Mutex::new(Store::default()),
            tx,
            generation: tokio::sync::watch::channel(0).0,
            lease_lock: Mutex::new(()),
        });
        let app = Router::new()
            .route("/api/v1/pods", collection_route("pods"))
            .route("/api/v1/nodes", collection_route("nodes"))
            .route("/api/v1/namespaces", collection_route("namespaces"))
            .route(
                "/apis/node.k8s.io/v1/runtimeclasses",
                collection_route("runtimeclasses"),
            )
            .route(
                "/apis/policy/v1/poddisruptionbudgets",
                collection_route("poddisruptionbudgets"),
            )
            .route(
                "/api/v1/persistentvolumeclaims",
                collection_route("persistentvolumeclaims"),
            )
            .route(
                "/api/v1/persistentvolumes",
                collection_route("persistentvolumes"),
            )
            .route(
                "/apis/storage.k8s.io/v1/storageclasses",
                collection_route("storageclasses"),
            )
            .route(
                "/apis/storage.k8s.io/v1/csinodes",
                collection_route("csinodes"),
            )
            .route(
                "/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}",
                axum::routing::patch(
                    |State(inner): State<Shared>,
                     Path((ns, name)): Path<(String, String)>,
                     body: Bytes| {
                        merge_patch(inner, "persistentvolumeclaims", ns, name, body)
                    },
                ),
            )
            .route(
                "/api/v1/persistentvolumes/{name}",
                axum::routing::patch(
                    |State(inner): State<Shared>, Path(name): Path<String>, body: Bytes| {
                        merge_patch(inner, "persistentvolumes", String::new(), name, body)
                    },
                ),
            )
            .route("/api/v1/namespaces/{ns}/pods/{name}/binding", post(bind))
            .route(
                "/api/v1/namespaces/{ns}/pods/{name}/status",
                axum::routing::patch(patch_status),
            )
            .route("/api/v1/namespaces/{ns}/pods/{name}", delete(delete_pod))
            .route(
                "/apis/events.k8s.io/v1/namespaces/{ns}/events",
                post(create_event),
            )
            .route(
                "/apis/events.k8s.io/v1/namespaces/{ns}/events/{name}",
                axum::routing::patch(patch_event),
            )
            .route(
                "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
                post(create_lease),
            )
            .route(
                "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}",
                get(get_lease).put(replace_lease),
            )
            .fallback(|req: axum::extract::Request| async move {
                status(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    format!("the server could not find {}", req.uri()),
                )
            })
            .layer(axum::middleware::from_fn_with_state(
                Arc::clone(&inner),
                record_request,
            ))
            .with_state(Arc::clone(&inner));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let dir = std::env::temp_dir().join(format!(
            "ferrosched-fake-apiserver-{}-{}",
            std::process::id(),
            addr.port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        FakeApiServer {
            addr,
            inner,
            task,
            dir,
        }
    }

    /// A kubeconfig file (plain http, no auth) pointing at this server.
    pub fn kubeconfig(&self) -> PathBuf {
        let path = self.dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://{}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\ncurrent-context: fake\nusers:\n- name: fake\n  user: {{}}\n",
            self.addr
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Creates or replaces an object of `collection` ("pods", "nodes", "namespaces",
    /// "runtimeclasses", "poddisruptionbudgets", "persistentvolumeclaims",
    /// "persistentvolumes", "storageclasses", "csinodes") from any serializable Kubernetes object.
    pub fn apply<T: serde::Serialize>(&self, collection: &str, object: &T) -> Value {
        self.inner
            .put(collection, serde_json::to_value(object).unwrap())
    }

    pub fn delete(&self, collection: &str, ns: &str, name: &str) -> Option<Value> {
        self.inner.remove(collection, ns, name)
    }

    pub fn get(&self, collection: &str, ns: &str, name: &str) -> Option<Value> {
        self.inner.get(collection, ns, name)
    }

    /// Removes an object without a watch event (as if the event was compacted away while
    /// the watch was down). Follow with [`Self::expire_watches`].
    pub fn delete_silently(&self, collection: &str, ns: &str, name: &str) {
        let key = (collection.to_string(), ns.to_string(), name.to_string());
        self.inner.store.lock().unwrap().objects.remove(&key);
    }

    /// Ends every open watch and makes resuming from any resourceVersion seen so far fail
    /// with 410 Expired, so clients must relist.
    pub fn expire_watches(&self) {
        {
            let mut st = self.inner.store.lock().unwrap();
            st.rv += 1;
            st.compacted = st.rv;
        }
        self.inner.generation.send_modify(|g| *g += 1);
    }

    /// The next binding of `ns/name` loses a race: the pod is bound to `other_node` by
    /// "someone else" and the controller's Binding gets 409 Conflict.
    pub fn steal_next_binding(&self, ns: &str, name: &str, other_node: &str) {
        self.inner
            .store
            .lock()
            .unwrap()
            .steal
            .insert(format!("{ns}/{name}"), other_node.to_string());
    }

    /// The next `n` Binding requests fail with 503 Service Unavailable.
    pub fn fail_next_bindings(&self, n: usize) {
        self.inner.store.lock().unwrap().failing_bindings = n;
    }

    /// How many LIST requests `collection` has served (2 or more: a relist happened).
    pub fn list_count(&self, collection: &str) -> usize {
        let st = self.inner.store.lock().unwrap();
        st.lists.get(collection).copied().unwrap_or(0)
    }

    /// Every stored object of `collection`.
    pub fn list(&self, collection: &str) -> Vec<Value> {
        let st = self.inner.store.lock().unwrap();
        st.objects
            .iter()
            .filter(|((c, _, _), _)| c == collection)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// The current holder of a Lease.
    pub fn lease_holder(&self, ns: &str, name: &str) -> Option<String> {
        self.get("leases", ns, name)
            .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_string))
    }

    /// The node a pod is bound to.
    pub fn node_of(&self, ns: &str, name: &str) -> Option<String> {
        self.get("pods", ns, name)
            .and_then(|p| p["spec"]["nodeName"].as_str().map(str::to_string))
    }

    /// Every successful binding so far: (ns/name, node).
    pub fn bindings(&self) -> Vec<(String, String)> {
        self.inner.store.lock().unwrap().bindings.clone()
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.inner.store.lock().unwrap().requests.clone()
    }

    /// Every event written so far.
    pub fn events(&self) -> Vec<Value> {
        self.inner.store.lock().unwrap().events.clone()
    }

    /// Events about one pod.
    pub fn events_for(&self, ns: &str, name: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e["regarding"]["namespace"] == ns && e["regarding"]["name"] == name)
            .collect()
    }
}
