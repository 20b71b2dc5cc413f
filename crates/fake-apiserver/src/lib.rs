//! A small in-process Kubernetes API server for ferrosched's tests and e2e scenarios:
//! objects live in memory as JSON, every write bumps one global resourceVersion and is
//! appended to a watch log. One generic handler serves every resource in [`RESOURCES`]
//! (core, apps, node, policy, scheduling, coordination, storage, admissionregistration,
//! and our SchedulingPolicy) the way a real API server does, for the subset ferrosched uses:
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
//! - `GET /version` ([`VERSION`]) and discovery (`GET /api/v1`, `/apis/{group}/{version}`);
//! - `POST events`, `PATCH events/{name}` and LIST (events.k8s.io/v1), kept in creation order;
//! - `POST tokenreviews` (authentication.k8s.io/v1), answered from the tokens added with
//!   [`FakeApiServer::add_token`];
//! - `POST subjectaccessreviews` (authorization.k8s.io/v1), answered from the grants added
//!   with [`FakeApiServer::grant`] (no RBAC objects are evaluated).
//!
//! Pod CREATE and UPDATE pass the admission steps of a real API server that shape what a
//! scheduler sees ([`admission`]: schedulerName defaulting, Priority,
//! DefaultTolerationSeconds, RuntimeClass, then the registered mutating webhooks, the
//! built-in plugins again after a webhook's patch, and the validating webhooks), each of
//! which can be switched off ([`FakeApiServer::disable_admission_plugin`]). Beyond that it
//! does no defaulting or validation, and deletes at once (no finalizers, no grace periods). Tests add objects and read bindings and events with the
//! helpers on [`FakeApiServer`], and point clients at it with [`FakeApiServer::kubeconfig`]
//! (plain http; HTTPS with HTTP/2 as kube-apiserver serves it from
//! [`FakeApiServer::start_tls`]). Every request served (also ones nothing matches) is logged as the API
//! server's authorizer sees it ([`RequestRecord`]: verb, group, resource, subresource,
//! namespace, name), for RBAC tests.
//!
//! Faults, for robustness tests: [`FakeApiServer::fail_next`] answers the next N requests
//! matching a method, resource and subresource with an error code (and `Retry-After`), or
//! never answers them ([`Fault::hang`]);
//! [`FakeApiServer::go_down`] / [`FakeApiServer::come_back`] simulate an API server restart:
//! open watches end, new connections are refused and requests on open connections get 503
//! until it comes back with the same store (optionally compacted, so resumed watches get
//! 410 and clients must relist).
//!
//! # How a request flows
//!
//! ```text
//! client ──HTTP──▶ axum, on 127.0.0.1:<port>
//!   │
//!   ▼ faults::record_request   logs the RequestRecord; while down answers 503 and closes
//!   │                          the connection, else the first Fault with requests left
//!   │                          answers instead of the server
//!   ▼ handlers::dispatch       path → Target (group, version, namespace, collection,
//!   │                          name, subresource); events and SubjectAccessReviews
//!   │                          first, then the Resource in RESOURCES (404 when unknown
//!   │                          or disabled), then the method:
//!   ├─ handlers::pod_admission pods' POST, PUT, PATCH: admission (webhooks over HTTPS),
//!   │                          then handlers::objects
//!   ├─ handlers::objects       LIST or WATCH, POST, PUT, PATCH, DELETE (one or a
//!   │                          collection)
//!   ├─ handlers::subresources  pods/{name}/binding, {resource}/{name}/status
//!   ├─ handlers::events        events.k8s.io/v1: POST, PATCH, LIST
//!   └─ handlers::access_review SubjectAccessReviews, from the grants
//!   ▼ store                    one Mutex<Store>: objects by (collection, namespace,
//!   │                          name), one global resourceVersion; every put and remove
//!   │                          appends a WatchEvent to the log and broadcasts it
//!   ▼ watch                    a WATCH replays the log after its resourceVersion, then
//!                              follows the broadcast, each event seen through the
//!                              watcher's Filter (selectors)
//! ```
//!
//! Requests that check, then write (create, replace, patch, delete, binding, status) hold
//! one write lock, so two of them never interleave. Tests reach the same store through
//! the helpers on [`FakeApiServer`]; their writes (`apply`, `delete`) bump the
//! resourceVersion and reach watchers like API writes do.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Router;
use serde_json::Value;
use tokio::sync::broadcast;

mod admission;
mod faults;
mod handlers;
mod managed_fields;
mod protobuf;
mod requests;
mod selectors;
mod store;
pub mod tls;
mod watch;

pub use admission::AdmissionPlugin;
pub use faults::Fault;
pub use handlers::Grant;
pub use requests::RequestRecord;
pub use store::{COSCHEDULING_POD_GROUPS, RESOURCES, Resource, resource};
use store::{Inner, Shared, Store};

/// The `gitVersion` `GET /version` answers: the Kubernetes release whose API the server
/// follows, marked as this fake.
pub const VERSION: &str = "v1.37.0-fake-apiserver";

/// The listen backlog: kube-apiserver (Go's `net.Listen`) asks for the kernel's maximum
/// (`net.core.somaxconn`, 4096 on current kernels). tokio's default of 1024 overflows when a
/// plain-HTTP client opens hundreds of connections at once (a scheduler evicting hundreds of
/// preemption victims): the kernel drops the SYNs and the clients retry only after 1, 3, 7
/// and 15 seconds.
pub(crate) const LISTEN_BACKLOG: u32 = 4096;

/// A running fake API server: its address, the shared store, and the accept loop (which
/// [`FakeApiServer::go_down`] stops and [`FakeApiServer::come_back`] restarts). Dropping
/// it stops the server and removes its kubeconfig directory.
pub struct FakeApiServer {
    pub addr: SocketAddr,
    inner: Shared,
    /// The accept loop; `None` while down.
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    app: Router,
    dir: PathBuf,
    /// Set by [`FakeApiServer::start_tls`]: serve HTTPS, HTTP/2 where the client takes it.
    tls: Option<Arc<tls::Tls>>,
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        if let Some(t) = self.task.lock().unwrap().take() {
            t.abort();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Serves `app` on `listener` until aborted: plain HTTP/1.1, or HTTPS as `tls` says.
fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    tls: Option<&Arc<tls::Tls>>,
    inner: &Shared,
) -> tokio::task::JoinHandle<()> {
    match tls {
        Some(t) => tls::serve(listener, app, Arc::clone(t), Arc::clone(inner)),
        None => tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        }),
    }
}

impl FakeApiServer {
    /// Serves plain HTTP/1.1: what most tests need, cheap to start.
    pub async fn start() -> FakeApiServer {
        Self::start_with(None).await
    }

    /// Serves HTTPS as kube-apiserver does: a certificate from a CA made for this server
    /// (in the kubeconfig), ALPN `h2` and `http/1.1`. Clients that speak HTTP/2 then use
    /// one connection; [`FakeApiServer::connections`] and
    /// [`FakeApiServer::http_versions`] show what they did.
    pub async fn start_tls() -> FakeApiServer {
        Self::start_with(Some(Arc::new(tls::Tls::new()))).await
    }

    async fn start_with(tls: Option<Arc<tls::Tls>>) -> FakeApiServer {
        let (tx, _) = broadcast::channel(4096);
        let inner = Arc::new(Inner {
            store: Mutex::new(Store::default()),
            tx,
            generation: tokio::sync::watch::channel(0).0,
            write_lock: Mutex::new(()),
            admission: Default::default(),
        });
        let app = Router::new()
            .fallback(handlers::dispatch)
            .layer(axum::middleware::from_fn_with_state(
                Arc::clone(&inner),
                faults::record_request,
            ))
            .with_state(Arc::clone(&inner));
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        // As tokio's TcpListener::bind: without it, connections left in TIME_WAIT keep a
        // restarted server (`come_back`) from binding its port again.
        socket.set_reuseaddr(true).unwrap();
        socket.bind(([127, 0, 0, 1], 0).into()).unwrap();
        let listener = socket.listen(LISTEN_BACKLOG).unwrap();
        let addr = listener.local_addr().unwrap();
        let task = serve(listener, app.clone(), tls.as_ref(), &inner);
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
            tls,
        }
    }

    /// Switches an emulated admission plugin off (all are on at start), as
    /// `--disable-admission-plugins` does on a real API server.
    pub fn disable_admission_plugin(&self, plugin: AdmissionPlugin) {
        self.inner.admission.set(plugin, false);
    }

    pub fn enable_admission_plugin(&self, plugin: AdmissionPlugin) {
        self.inner.admission.set(plugin, true);
    }

    /// Lets TokenReviews authenticate `token` as `user` in `groups`.
    pub fn add_token(&self, token: &str, user: &str, groups: &[&str]) {
        self.inner.store.lock().unwrap().tokens.insert(
            token.into(),
            (user.into(), groups.iter().map(|g| g.to_string()).collect()),
        );
    }

    /// Lets SubjectAccessReviews allow what `grant` describes.
    pub fn grant(&self, grant: Grant) {
        self.inner.store.lock().unwrap().grants.push(grant);
    }

    /// A kubeconfig file (no auth) pointing at this server: plain http, or https with the
    /// server's CA after [`FakeApiServer::start_tls`].
    pub fn kubeconfig(&self) -> PathBuf {
        use base64::Engine;
        let path = self.dir.join("kubeconfig");
        let cluster = match &self.tls {
            None => format!("server: http://{}", self.addr),
            Some(t) => format!(
                "server: https://{}\n    certificate-authority-data: {}",
                self.addr,
                base64::engine::general_purpose::STANDARD.encode(&t.ca_pem)
            ),
        };
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    {cluster}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\ncurrent-context: fake\nusers:\n- name: fake\n  user: {{}}\n",
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Creates or replaces an object of `collection` ("pods", "nodes", "namespaces",
    /// "runtimeclasses", "poddisruptionbudgets", "persistentvolumeclaims",
    /// "persistentvolumes", "storageclasses", "csinodes") from any serializable Kubernetes object.
    ///
    /// Like every write, it waits for in-flight read-modify-write requests (a status patch,
    /// a binding): one of those must not write back an object this call replaced or deleted.
    pub fn apply<T: serde::Serialize>(&self, collection: &str, object: &T) -> Value {
        let _guard = self.inner.write_lock.lock().unwrap();
        self.inner
            .put(collection, serde_json::to_value(object).unwrap())
    }

    pub fn delete(&self, collection: &str, ns: &str, name: &str) -> Option<Value> {
        let _guard = self.inner.write_lock.lock().unwrap();
        self.inner.remove(collection, ns, name)
    }

    pub fn get(&self, collection: &str, ns: &str, name: &str) -> Option<Value> {
        self.inner.get(collection, ns, name)
    }

    /// Requests served per HTTP version, as `{:?}` prints it (`HTTP/1.1`, `HTTP/2.0`).
    pub fn http_versions(&self) -> std::collections::BTreeMap<String, usize> {
        self.inner.store.lock().unwrap().http_versions.clone()
    }

    /// Lists and watches of `collection` answered in protobuf (the client asked for it;
    /// only nodes and pods are encoded, see the crate's `protobuf` module).
    pub fn protobuf_served(&self, collection: &str) -> usize {
        let st = self.inner.store.lock().unwrap();
        st.protobuf_served.get(collection).copied().unwrap_or(0)
    }

    /// TCP connections accepted so far (counted by [`FakeApiServer::start_tls`]'s servers).
    pub fn connections(&self) -> usize {
        self.inner.store.lock().unwrap().connections
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
