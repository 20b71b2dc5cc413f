//! A small in-process Kubernetes API server for ferrosched's tests and e2e scenarios:
//! objects live in memory as JSON, every write bumps one global resourceVersion and is
//! appended to a watch log. One generic handler serves every resource in [`RESOURCES`]
//! (core, apps, node, policy, scheduling, coordination, storage, and our
//! SchedulingPolicy) the way a real API server does, for the subset ferrosched uses:
//!
//! - LIST (paged with `limit`/`continue`) and WATCH, cluster-wide or in a namespace, with `fieldSelector` (`a.b=v`,
//!   `a.b!=v`) and `labelSelector` (`k=v`, `k!=v`, `k`, `!k`); watches resume after a
//!   resourceVersion, send a BOOKMARK when asked (`allowWatchBookmarks`), send objects
//!   that stop matching as DELETED, and answer `410 Expired` after [`FakeApiServer::expire_watches`];
//! - GET, POST (409 AlreadyExists, `generateName`), PUT and PATCH (JSON merge patch;
//!   a `metadata.resourceVersion` is a precondition: 409 when stale), DELETE (UID
//!   precondition) and DELETE of a collection by label selector;
//! - `POST pods/{name}/binding` (sets spec.nodeName and PodScheduled=True; 409 if already
//!   bound or the UID differs, 404 if missing) and `PATCH {resource}/{name}/status`
//!   (only status changes; conditions merge by type, null deletes);
//! - `POST events`, `PATCH events/{name}` and LIST (events.k8s.io/v1), kept in creation order;
//! - `POST subjectaccessreviews` (authorization.k8s.io/v1), answered from the grants added
//!   with [`FakeApiServer::grant`] (no RBAC objects are evaluated).
//!
//! It does no admission, defaulting or validation beyond that, and deletes at once (no
//! finalizers, no grace periods). Tests add objects and read bindings and events with the
//! helpers on [`FakeApiServer`], and point clients at it with [`FakeApiServer::kubeconfig`]
//! (plain http). Every request served (also ones nothing matches) is logged as the API
//! server's authorizer sees it ([`RequestRecord`]: verb, group, resource, subresource,
//! namespace, name), for RBAC tests.
//!
//! Faults, for robustness tests: [`FakeApiServer::fail_next`] answers the next N requests
//! matching a method, resource and subresource with an error code (and `Retry-After`);
//! [`FakeApiServer::go_down`] / [`FakeApiServer::come_back`] simulate an API server restart:
//! open watches end, new connections are refused and requests on open connections get 503
//! until it comes back with the same store (optionally compacted, so resumed watches get
//! 410 and clients must relist).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
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
}

/// A resource the server knows: its collection name (the URL's plural), API group and
/// version, kind, and whether it lives in namespaces.
#[derive(Clone, Copy, Debug)]
pub struct Resource {
    pub collection: &'static str,
    /// "" for the core group (`/api/v1`).
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
}

const fn res(
    collection: &'static str,
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> Resource {
    Resource {
        collection,
        group,
        version,
        kind,
        namespaced,
    }
}

/// Every resource served. Events (events.k8s.io/v1) are served too, by their own handlers.
pub const RESOURCES: &[Resource] = &[
    res("pods", "", "v1", "Pod", true),
    res("nodes", "", "v1", "Node", false),
    res("namespaces", "", "v1", "Namespace", false),
    res("services", "", "v1", "Service", true),
    res(
        "replicationcontrollers",
        "",
        "v1",
        "ReplicationController",
        true,
    ),
    res(
        "persistentvolumeclaims",
        "",
        "v1",
        "PersistentVolumeClaim",
        true,
    ),
    res("persistentvolumes", "", "v1", "PersistentVolume", false),
    res("replicasets", "apps", "v1", "ReplicaSet", true),
    res("statefulsets", "apps", "v1", "StatefulSet", true),
    res("runtimeclasses", "node.k8s.io", "v1", "RuntimeClass", false),
    res(
        "priorityclasses",
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        false,
    ),
    res(
        "poddisruptionbudgets",
        "policy",
        "v1",
        "PodDisruptionBudget",
        true,
    ),
    res("leases", "coordination.k8s.io", "v1", "Lease", true),
    res(
        "storageclasses",
        "storage.k8s.io",
        "v1",
        "StorageClass",
        false,
    ),
    res("csinodes", "storage.k8s.io", "v1", "CSINode", false),
    res("csidrivers", "storage.k8s.io", "v1", "CSIDriver", false),
    res(
        "csistoragecapacities",
        "storage.k8s.io",
        "v1",
        "CSIStorageCapacity",
        true,
    ),
    res(
        "volumeattachments",
        "storage.k8s.io",
        "v1",
        "VolumeAttachment",
        false,
    ),
    res(
        "resourceclaims",
        "resource.k8s.io",
        "v1",
        "ResourceClaim",
        true,
    ),
    res(
        "schedulingpolicies",
        "scheduling.ferrosched.io",
        "v1alpha1",
        "SchedulingPolicy",
        false,
    ),
];

/// The resource of a collection name (panics on an unknown one: a test bug).
pub fn resource(collection: &str) -> &'static Resource {
    RESOURCES
        .iter()
        .find(|r| r.collection == collection)
        .unwrap_or_else(|| panic!("the fake API server does not serve {collection:?}"))
}

impl Resource {
    fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// One term of a label selector.
#[derive(Clone, Debug)]
enum LabelTerm {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
}

/// A label selector of `k=v`, `k==v`, `k!=v`, `k`, `!k` terms joined by commas (no set
/// expressions: nothing here sends them).
#[derive(Clone, Debug, Default)]
struct LabelSelector(Vec<LabelTerm>);

impl LabelSelector {
    fn parse(s: Option<&String>) -> Self {
        let terms = s
            .map(|s| s.split(',').filter(|t| !t.is_empty()).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .map(|t| {
                if let Some((k, v)) = t.split_once("!=") {
                    LabelTerm::NotEquals(k.to_string(), v.to_string())
                } else if let Some((k, v)) = t.split_once('=') {
                    LabelTerm::Equals(k.to_string(), v.trim_start_matches('=').to_string())
                } else if let Some(k) = t.strip_prefix('!') {
                    LabelTerm::NotExists(k.to_string())
                } else {
                    LabelTerm::Exists(t.to_string())
                }
            })
            .collect();
        LabelSelector(terms)
    }

    fn matches(&self, obj: &Value) -> bool {
        let labels = &obj["metadata"]["labels"];
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|t| match t {
            LabelTerm::Equals(k, v) => get(k) == Some(v.as_str()),
            LabelTerm::NotEquals(k, v) => get(k) != Some(v.as_str()),
            LabelTerm::Exists(k) => get(k).is_some(),
            LabelTerm::NotExists(k) => get(k).is_none(),
        })
    }
}

/// What a watcher or lister asked for: namespace, field and label selectors.
#[derive(Clone, Debug, Default)]
struct Filter {
    namespace: Option<String>,
    fields: FieldSelector,
    labels: LabelSelector,
}

impl Filter {
    fn matches(&self, obj: &Value) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| obj["metadata"]["namespace"].as_str() == Some(ns))
            && self.fields.matches(obj)
            && self.labels.matches(obj)
    }

    /// How a watcher with this filter sees the event, if at all.
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
    /// Collections answered with 404, as by a server without that API.
    disabled: std::collections::BTreeSet<&'static str>,
    /// What SubjectAccessReviews allow.
    grants: Vec<Grant>,
    /// Pods a Binding was POSTed for although they were already bound.
    double_bindings: Vec<String>,
    /// Injected faults and how many more requests each fails.
    faults: Vec<(Fault, usize)>,
    /// Between [`FakeApiServer::go_down`] and [`FakeApiServer::come_back`].
    down: bool,
}

/// One permission for SubjectAccessReviews: `subject` (a user or a group name) may `verb`
/// the `group`/`resource` object `name` (None: any), in `namespace` (None: cluster-wide, as
/// a ClusterRoleBinding; Some: as a RoleBinding there).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grant {
    pub subject: String,
    pub namespace: Option<String>,
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub name: Option<String>,
}

impl Grant {
    fn allows(&self, spec: &Value) -> bool {
        let a = &spec["resourceAttributes"];
        let s = |v: &Value| v.as_str().unwrap_or("").to_string();
        let subject = s(&spec["user"]) == self.subject
            || spec["groups"]
                .as_array()
                .is_some_and(|gs| gs.iter().any(|g| g.as_str() == Some(&self.subject)));
        subject
            && self
                .namespace
                .as_ref()
                .is_none_or(|ns| *ns == s(&a["namespace"]))
            && s(&a["verb"]) == self.verb
            && s(&a["group"]) == self.group
            && s(&a["resource"]) == self.resource
            && self.name.as_ref().is_none_or(|n| *n == s(&a["name"]))
    }
}

/// `POST /apis/authorization.k8s.io/v1/subjectaccessreviews`: the review with its status.
fn subject_access_review(inner: &Inner, body: &Bytes) -> Response {
    let Ok(mut review) = serde_json::from_slice::<Value>(body) else {
        return status(StatusCode::BAD_REQUEST, "BadRequest", "bad review".into());
    };
    let allowed = {
        let st = inner.store.lock().unwrap();
        st.grants.iter().any(|g| g.allows(&review["spec"]))
    };
    review["status"] = json!({"allowed": allowed});
    (StatusCode::CREATED, axum::Json(review)).into_response()
}

/// Requests to fail: HTTP method, resource and subresource (`None`: the resource itself,
/// not a subresource), answered with `code` and a Kubernetes `Status` body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub method: String,
    pub resource: String,
    pub subresource: Option<String>,
    pub code: u16,
    /// Seconds for a `Retry-After` header (the API server sends one with 429s).
    pub retry_after: Option<u64>,
}

impl Fault {
    /// E.g. `Fault::new("GET", "pods", 500)`: lists and watches of pods fail.
    pub fn new(method: &str, resource: &str, code: u16) -> Fault {
        Fault {
            method: method.to_ascii_uppercase(),
            resource: resource.to_string(),
            subresource: None,
            code,
            retry_after: None,
        }
    }

    /// Match a subresource instead (`"binding"`, `"status"`).
    pub fn subresource(mut self, sub: &str) -> Fault {
        self.subresource = Some(sub.to_string());
        self
    }

    pub fn retry_after(mut self, secs: u64) -> Fault {
        self.retry_after = Some(secs);
        self
    }

    fn matches(&self, method: &str, r: &RequestRecord) -> bool {
        self.method.eq_ignore_ascii_case(method)
            && self.resource == r.resource
            && self.subresource.as_deref().unwrap_or("") == r.subresource
    }

    fn response(&self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let reason = match self.code {
            429 => "TooManyRequests",
            500 => "InternalError",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "Unknown",
        };
        let mut resp = status(code, reason, format!("injected fault: {}", self.code));
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert("retry-after", axum::http::HeaderValue::from(secs));
        }
        resp
    }
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
    let injected = {
        let mut st = inner.store.lock().unwrap();
        let method = req.method().as_str();
        let down = st.down;
        // While down, faults are not consumed: the outage answers first.
        let fault = st
            .faults
            .iter_mut()
            .filter(|_| !down)
            .find(|(f, left)| *left > 0 && f.matches(method, &record))
            .map(|(f, left)| {
                *left -= 1;
                f.response()
            });
        st.requests.push(record);
        if down {
            // Restarting: refuse, and close the connection as a dying server would.
            let mut resp = status(
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                "the server is shutting down".into(),
            );
            resp.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
            Some(resp)
        } else {
            fault
        }
    };
    match injected {
        Some(resp) => resp,
        None => next.run(req).await,
    }
}

struct Inner {
    store: Mutex<Store>,
    tx: broadcast::Sender<WatchEvent>,
    /// Bumped to end every open watch stream.
    generation: tokio::sync::watch::Sender<u64>,
    /// Serialises check-then-write requests (create, replace, patch, delete, binding).
    write_lock: Mutex<()>,
}

type Shared = Arc<Inner>;

pub struct FakeApiServer {
    pub addr: SocketAddr,
    inner: Shared,
    /// The accept loop; `None` while down.
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    app: Router,
    dir: PathBuf,
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        if let Some(t) = self.task.lock().unwrap().take() {
            t.abort();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
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

fn status(code: StatusCode, reason: &str, message: String) -> Response {
    let body = json!({
        "apiVersion": "v1", "kind": "Status", "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16(),
    });
    (code, axum::Json(body)).into_response()
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
        let r = resource(collection);
        object["apiVersion"] = json!(r.api_version());
        object["kind"] = json!(r.kind);
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
    namespace: Option<String>,
    params: BTreeMap<String, String>,
) -> Response {
    let watch = matches!(params.get("watch").map(String::as_str), Some("true" | "1"));
    let filter = Filter {
        namespace,
        fields: FieldSelector::parse(params.get("fieldSelector")),
        labels: LabelSelector::parse(params.get("labelSelector")),
    };
    let r = resource(collection);
    if !watch {
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
        return axum::Json(body).into_response();
    }
    let since: u64 = params
        .get("resourceVersion")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let bookmarks = params.get("allowWatchBookmarks").map(String::as_str) == Some("true");
    // Subscribe before reading the log so nothing falls between the two.
    let rx = inner.tx.subscribe();
    let mut gen_rx = inner.generation.subscribe();
    gen_rx.mark_unchanged();
    let (backlog, now) = {
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
        let backlog: Vec<WatchEvent> = st
            .log
            .iter()
            .filter(|e| e.rv > since && e.collection == collection)
            .cloned()
            .collect();
        (backlog, st.rv)
    };
    let last = backlog.last().map_or(since, |e| e.rv);
    let line = move |e: &WatchEvent| -> Option<Result<Bytes, Infallible>> {
        let type_ = filter.view(e)?;
        let mut s = json!({"type": type_, "object": e.object}).to_string();
        s.push('\n');
        Some(Ok(Bytes::from(s)))
    };
    let mut first: Vec<Result<Bytes, Infallible>> = backlog.iter().filter_map(&line).collect();
    if bookmarks {
        // A bookmark after the backlog: the client may resume from `now` even if none of
        // the events since matched its selector.
        let mut s = json!({"type": "BOOKMARK", "object": {
            "apiVersion": r.api_version(), "kind": r.kind,
            "metadata": {"resourceVersion": now.to_string()},
        }})
        .to_string();
        s.push('\n');
        first.push(Ok(Bytes::from(s)));
    }
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
                    // Events were dropped for this slow watcher: end the stream (as a real
                    // API server ends a watch that falls behind) so the client resumes from
                    // its last resourceVersion and gets the missed events from the log.
                    Err(broadcast::error::RecvError::Lagged(_)) => return None,
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
            }
        }
    })
    .filter_map(move |e| futures::future::ready(line(&e)));
    Response::builder()
        .header("content-type", "application/json")
        .body(Body::from_stream(futures::stream::iter(first).chain(live)))
        .unwrap()
}

fn bind(inner: &Inner, ns: &str, name: &str, binding: &Value) -> Response {
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

/// PATCH of a status subresource: only `status` may change.
fn patch_status(inner: &Inner, collection: &str, ns: &str, name: &str, body: &Bytes) -> Response {
    let Ok(patch) = serde_json::from_slice::<Value>(body) else {
        return status(StatusCode::BAD_REQUEST, "BadRequest", "bad patch".into());
    };
    let Some(mut object) = inner.get(collection, ns, name) else {
        return not_found(collection, name);
    };
    if let Some(s) = patch.get("status") {
        if object.get("status").is_none() {
            object["status"] = json!({});
        }
        strategic_merge(&mut object["status"], s);
    }
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

fn create_event(inner: &Inner, ns: &str, body: &Bytes) -> Response {
    let Ok(mut event) = serde_json::from_slice::<Value>(body) else {
        return status(StatusCode::BAD_REQUEST, "BadRequest", "bad event".into());
    };
    event["metadata"]["namespace"] = json!(ns);
    inner.store.lock().unwrap().events.push(event.clone());
    (StatusCode::CREATED, axum::Json(event)).into_response()
}

/// LIST of events (no watch), in one namespace or all: the e2e scenarios read events
/// through the API, as they must on a real cluster.
fn list_events(inner: &Inner, ns: Option<&str>) -> Response {
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

fn patch_event(inner: &Inner, ns: &str, name: &str, body: &Bytes) -> Response {
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
async fn dispatch(
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
            (&Method::POST, None) => create_event(&inner, ns, &body),
            (&Method::PATCH, Some(name)) => patch_event(&inner, ns, name, &body),
            (&Method::GET, None) => list_events(&inner, t.namespace.as_deref()),
            _ => unknown(),
        };
    }
    if t.group == "authorization.k8s.io"
        && t.collection == "subjectaccessreviews"
        && t.name.is_none()
        && method == Method::POST
    {
        return subject_access_review(&inner, &body);
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
            bind(&inner, &ns, &name, &binding)
        }
        (Method::PATCH, Some(name), Some("status")) => {
            let _guard = inner.write_lock.lock().unwrap();
            patch_status(&inner, collection, &ns, &name, &body)
        }
        _ => status(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            format!("the fake API server does not serve this on {collection}"),
        ),
    }
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

fn serve(listener: tokio::net::TcpListener, app: Router) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    })
}

impl FakeApiServer {
    pub async fn start() -> FakeApiServer {
        let (tx, _) = broadcast::channel(4096);
        let inner = Arc::new(Inner {
            store: Mutex::new(Store::default()),
            tx,
            generation: tokio::sync::watch::channel(0).0,
            write_lock: Mutex::new(()),
        });
        let app = Router::new()
            .fallback(dispatch)
            .layer(axum::middleware::from_fn_with_state(
                Arc::clone(&inner),
                record_request,
            ))
            .with_state(Arc::clone(&inner));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = serve(listener, app.clone());
        let dir = std::env::temp_dir().join(format!(
            "ferrosched-fake-apiserver-{}-{}",
            std::process::id(),
            addr.port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        FakeApiServer {
            addr,
            inner,
            task: Mutex::new(Some(task)),
            app,
            dir,
        }
    }

    /// The next `n` requests matching `fault` get its error (see [`Fault`]). Faults are
    /// checked in the order added; `usize::MAX` fails until [`Self::clear_faults`].
    pub fn fail_next(&self, n: usize, fault: Fault) {
        self.inner.store.lock().unwrap().faults.push((fault, n));
    }

    /// Removes every injected fault.
    pub fn clear_faults(&self) {
        self.inner.store.lock().unwrap().faults.clear();
    }

    /// How many requests matched `fault` but were not failed yet: 0 once all were served.
    pub fn faults_left(&self) -> usize {
        let st = self.inner.store.lock().unwrap();
        st.faults.iter().map(|(_, left)| *left).sum()
    }

    /// "Restarts" the server, first half: ends every open watch, stops accepting
    /// connections, and answers requests on connections still open with 503 (closing them).
    /// The store is kept. With `compact`, resuming a watch from any resourceVersion seen so
    /// far fails with 410 Expired once the server is back (as after an etcd compaction).
    pub fn go_down(&self, compact: bool) {
        {
            let mut st = self.inner.store.lock().unwrap();
            st.down = true;
            if compact {
                st.rv += 1;
                st.compacted = st.rv;
            }
        }
        if let Some(t) = self.task.lock().unwrap().take() {
            t.abort();
        }
        self.inner.generation.send_modify(|g| *g += 1);
    }

    /// Second half of a restart: accepts connections on the same address again.
    pub async fn come_back(&self) {
        let mut tries = 0;
        let listener = loop {
            // The old listener closes when its aborted task is dropped; retry briefly.
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.set_reuseaddr(true).unwrap();
            match socket.bind(self.addr).and_then(|()| socket.listen(1024)) {
                Ok(l) => break l,
                Err(_) if tries < 100 => {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                Err(e) => panic!("rebinding {}: {e}", self.addr),
            }
        };
        *self.task.lock().unwrap() = Some(serve(listener, self.app.clone()));
        self.inner.store.lock().unwrap().down = false;
    }

    /// Serve 404 for `collection` from now on, as a server without that API does.
    pub fn disable(&self, collection: &str) {
        let r = resource(collection);
        self.inner
            .store
            .lock()
            .unwrap()
            .disabled
            .insert(r.collection);
    }

    /// Lets SubjectAccessReviews allow what `grant` describes.
    pub fn grant(&self, grant: Grant) {
        self.inner.store.lock().unwrap().grants.push(grant);
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

    /// Pods (ns/name) a Binding was POSTed for while already bound (409): a scheduler that
    /// binds every pod exactly once leaves this empty.
    pub fn double_bindings(&self) -> Vec<String> {
        self.inner.store.lock().unwrap().double_bindings.clone()
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
