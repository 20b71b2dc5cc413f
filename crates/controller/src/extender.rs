//! Scheduler extenders over HTTP (upstream's `HTTPExtender`): each call is a JSON POST to
//! `<urlPrefix>/<verb>` with upstream's field names (`Pod`, `Nodes`/`NodeNames`,
//! `FailedNodes`, `FailedAndUnresolvableNodes`, `Host`/`Score`, `NodeNameToVictims`/
//! `NodeNameToMetaVictims`, `PodName`/`PodNamespace`/`PodUID`/`Node`, `Error`); answers are
//! read with any key case, as Go's decoder does.
//!
//! Connections are pooled per extender (HTTP/1.1 keep-alive, hyper's pool), over rustls with
//! ring for `https://` prefixes: the CA and client certificate from `tlsConfig` (files or
//! inline data), no verification when no CA is given or `insecure` is set (as kube-scheduler).
//! `httpTimeout` bounds each call, connection included.
//!
//! Where calls run: the [`Extender`] trait is synchronous, so [`HttpExtender`]'s filter,
//! prioritize and preempt calls are started on the tokio runtime and the calling thread
//! waits for the answer, holding no lock. For a single pod's filter and prioritize calls
//! that thread is one of tokio's blocking pool, not the scheduling loop, which goes on with
//! other pods meanwhile (`scheduler_loop::extenders`); preemption's calls and a gang's
//! still wait on the scheduling thread. The bind call runs in the executor's binding task,
//! like a Binding POST.
//!
//! The pod and nodes sent are the API objects, as upstream's (without
//! `metadata.managedFields`), from the side store [`objects::ApiObjects`] that the
//! informers fill only when extenders are configured; with `nodeCacheCapable` only node
//! names go. Where the store has no object (preemption's victims, which are bound pods;
//! `simulate`, which has no informers) ferrosched's views are sent instead: a pod's
//! metadata (name, namespace, uid, labels), spec (schedulerName, priority, nodeSelector,
//! nodeName) and one container carrying the pod's summed requests (as both requests and
//! limits for extended resources); a node's name, labels and allocatable (also as
//! capacity).

pub mod objects;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Map, Value, json};

use scheduler_core::config;
use scheduler_core::framework::{
    Extender, ExtenderFilterResult, ExtenderVictims, HostPriority, PreemptionAnswer,
};
use scheduler_core::types::{NodeInfo, PodInfo, Resource};

type Https = hyper_rustls::HttpsConnector<HttpConnector>;

/// One configured extender, called over HTTP(S).
pub struct HttpExtender {
    cfg: config::Extender,
    name: &'static str,
    client: Client<Https, Full<Bytes>>,
    runtime: tokio::runtime::Handle,
    /// The API objects to send, when the informers keep them.
    objects: Option<Arc<objects::ApiObjects>>,
}

impl std::fmt::Debug for HttpExtender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpExtender")
            .field("url_prefix", &self.cfg.url_prefix)
            .finish_non_exhaustive()
    }
}

/// Builds an extender per config entry; `runtime` runs their calls.
pub fn build_extenders(
    extenders: &[config::Extender],
    runtime: &tokio::runtime::Handle,
) -> Result<Vec<Arc<HttpExtender>>, String> {
    build_extenders_with(extenders, runtime, None)
}

/// [`build_extenders`], sending the API objects `objects` keeps.
pub fn build_extenders_with(
    extenders: &[config::Extender],
    runtime: &tokio::runtime::Handle,
    objects: Option<&Arc<objects::ApiObjects>>,
) -> Result<Vec<Arc<HttpExtender>>, String> {
    extenders
        .iter()
        .map(|e| {
            HttpExtender::new(e, runtime.clone())
                .map(|h| Arc::new(h.with_objects(objects.cloned())))
        })
        .collect()
}

/// The same list as the scheduling cycle takes it.
pub fn as_core(extenders: &[Arc<HttpExtender>]) -> Vec<Arc<dyn Extender>> {
    extenders
        .iter()
        .map(|e| Arc::clone(e) as Arc<dyn Extender>)
        .collect()
}

fn read_pem(file: &str, data: &str, what: &str) -> Result<Option<Vec<u8>>, String> {
    if !data.is_empty() {
        return base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map(Some)
            .map_err(|e| format!("tlsConfig.{what}Data: {e}"));
    }
    if !file.is_empty() {
        return std::fs::read(file)
            .map(Some)
            .map_err(|e| format!("tlsConfig.{what}File {file}: {e}"));
    }
    Ok(None)
}

fn tls_config(cfg: &config::Extender) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let t = cfg.tls_config.clone().unwrap_or_default();
    let ca = read_pem(&t.ca_file, &t.ca_data, "ca")?;
    let builder = match ca {
        Some(pem) if !t.insecure => {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(&pem) {
                let c = c.map_err(|e| format!("tlsConfig CA: {e}"))?;
                roots.add(c).map_err(|e| format!("tlsConfig CA: {e}"))?;
            }
            builder.with_root_certificates(roots)
        }
        // kube-scheduler: HTTPS without a CA (or insecure) does not verify the server.
        _ => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(crate::tls::NoVerify(provider))),
    };
    let cert = read_pem(&t.cert_file, &t.cert_data, "cert")?;
    let key = read_pem(&t.key_file, &t.key_data, "key")?;
    match (cert, key) {
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_slice_iter(&cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("tlsConfig client certificate: {e}"))?;
            let key = PrivateKeyDer::from_pem_slice(&key)
                .map_err(|e| format!("tlsConfig client key: {e}"))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("tlsConfig client certificate: {e}"))
        }
        _ => Ok(builder.with_no_client_auth()),
    }
}

impl HttpExtender {
    pub fn new(cfg: &config::Extender, runtime: tokio::runtime::Handle) -> Result<Self, String> {
        let tls = tls_config(cfg).map_err(|e| format!("extender {}: {e}", cfg.url_prefix))?;
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(cfg.http_timeout));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .build(https);
        Ok(HttpExtender {
            name: Box::leak(cfg.url_prefix.clone().into_boxed_str()),
            cfg: cfg.clone(),
            client,
            runtime,
            objects: None,
        })
    }

    /// Sends the API objects `objects` keeps instead of the views.
    pub fn with_objects(mut self, objects: Option<Arc<objects::ApiObjects>>) -> Self {
        self.objects = objects;
        self
    }

    /// POSTs `body` to `<urlPrefix>/<verb>` within httpTimeout; the answer as JSON.
    async fn send(
        client: Client<Https, Full<Bytes>>,
        url: String,
        body: Vec<u8>,
        timeout: Duration,
        action: &'static str,
    ) -> Result<Value, String> {
        let request = hyper::Request::post(&url)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| format!("Post {url:?}: {e}"))?;
        let exchange = async {
            let resp = client
                .request(request)
                .await
                .map_err(|e| format!("Post {url:?}: {}", error_chain(&e)))?;
            let status = resp.status();
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| format!("Post {url:?}: {e}"))?
                .to_bytes();
            if status != hyper::StatusCode::OK {
                return Err(format!(
                    "failed {action} with extender at URL {url}, code {}",
                    status.as_u16()
                ));
            }
            serde_json::from_slice(&bytes)
                .map_err(|e| format!("Post {url:?}: decoding answer: {e}"))
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(r) => r,
            Err(_) => Err(format!(
                "Post {url:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers; httpTimeout {})",
                config::format_go_duration(timeout)
            )),
        }
    }

    fn url(&self, verb: &str) -> String {
        format!("{}/{verb}", self.cfg.url_prefix.trim_end_matches('/'))
    }

    /// Runs a call on the runtime and waits for it on this (non-runtime) thread.
    fn call_blocking(
        &self,
        verb: &str,
        body: Vec<u8>,
        action: &'static str,
    ) -> Result<Value, String> {
        let fut = Self::send(
            self.client.clone(),
            self.url(verb),
            body,
            self.cfg.http_timeout,
            action,
        );
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.runtime.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv()
            .unwrap_or_else(|_| Err("the runtime stopped during the extender call".into()))
    }

    /// The pod as sent: its API object when kept, else its view.
    fn pod_text(&self, pod: &PodInfo) -> String {
        match self.objects.as_ref().and_then(|o| o.pod(&pod.uid)) {
            Some(json) => json.to_string(),
            None => pod_json(pod).to_string(),
        }
    }

    /// Upstream's `ExtenderArgs` as JSON text: the pod, and the nodes whole (API objects
    /// when kept) or, for a `nodeCacheCapable` extender, their names.
    fn args(&self, pod: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Vec<u8> {
        let mut body = String::from("{\"Pod\":");
        body.push_str(&self.pod_text(pod));
        if self.cfg.node_cache_capable {
            let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
            body.push_str(",\"NodeNames\":");
            body.push_str(&Value::from(names).to_string());
        } else {
            body.push_str(",\"Nodes\":{\"items\":[");
            for (i, n) in nodes.iter().enumerate() {
                if i > 0 {
                    body.push(',');
                }
                match self.objects.as_ref().and_then(|o| o.node(&n.name)) {
                    Some(json) => body.push_str(&json),
                    None => body.push_str(&node_json(n).to_string()),
                }
            }
            body.push_str("]}");
        }
        body.push('}');
        body.into_bytes()
    }

    /// The bind call (upstream `HTTPExtender.Bind`), from the binding task.
    pub async fn bind(&self, pod: &PodInfo, node: &str) -> Result<(), String> {
        let body = json!({
            "PodName": pod.name(),
            "PodNamespace": pod.namespace(),
            "PodUID": pod.uid,
            "Node": node,
        });
        let v = Self::send(
            self.client.clone(),
            self.url(&self.cfg.bind_verb),
            body.to_string().into_bytes(),
            self.cfg.http_timeout,
            "bind",
        )
        .await?;
        match get_ci(&v, "Error").and_then(Value::as_str) {
            Some(e) if !e.is_empty() => Err(e.to_string()),
            _ => Ok(()),
        }
    }
}

/// Every source of an error, joined (hyper's own Display hides the cause).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// A key looked up as Go's JSON decoder does: exact first, then case-insensitively.
fn get_ci<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    let o = v.as_object()?;
    o.get(key)
        .or_else(|| {
            o.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v)
        })
        .filter(|v| !v.is_null())
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

fn names_of(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

impl Extender for HttpExtender {
    fn config(&self) -> &config::Extender {
        &self.cfg
    }

    fn name(&self) -> &'static str {
        self.name
    }

    fn filter(
        &self,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> Result<ExtenderFilterResult, String> {
        let v = self.call_blocking(&self.cfg.filter_verb, self.args(pod, nodes), "filter")?;
        if let Some(e) = get_ci(&v, "Error").and_then(Value::as_str)
            && !e.is_empty()
        {
            return Err(e.to_string());
        }
        let node_names =
            if let (true, Some(n)) = (self.cfg.node_cache_capable, get_ci(&v, "NodeNames")) {
                names_of(n)
            } else if let Some(list) = get_ci(&v, "Nodes") {
                get_ci(list, "items")
                    .and_then(Value::as_array)
                    .map(|items| {
                        items
                            .iter()
                            .filter_map(|n| {
                                get_ci(n, "metadata")
                                    .and_then(|m| get_ci(m, "name"))
                                    .and_then(Value::as_str)
                                    .map(str::to_string)
                            })
                            .collect()
                    })
                    .unwrap_or_default()
            } else {
                Vec::new()
            };
        Ok(ExtenderFilterResult {
            node_names,
            failed: string_map(get_ci(&v, "FailedNodes")),
            failed_and_unresolvable: string_map(get_ci(&v, "FailedAndUnresolvableNodes")),
        })
    }

    fn prioritize(
        &self,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> Result<Vec<HostPriority>, String> {
        let v = self.call_blocking(
            &self.cfg.prioritize_verb,
            self.args(pod, nodes),
            "prioritize",
        )?;
        Ok(v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|hp| {
                        Some(HostPriority {
                            host: get_ci(hp, "Host")?.as_str()?.to_string(),
                            score: get_ci(hp, "Score").and_then(Value::as_i64).unwrap_or(0),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    fn process_preemption(
        &self,
        pod: &PodInfo,
        victims: &BTreeMap<String, ExtenderVictims>,
    ) -> Result<PreemptionAnswer, String> {
        let mut args = Map::new();
        let pod_object =
            serde_json::from_str(&self.pod_text(pod)).unwrap_or_else(|_| pod_json(pod));
        args.insert("Pod".into(), pod_object);
        if self.cfg.node_cache_capable {
            let meta: Map<String, Value> = victims
                .iter()
                .map(|(n, v)| {
                    let pods: Vec<Value> = v.pods.iter().map(|p| json!({"UID": p.uid})).collect();
                    (
                        n.clone(),
                        json!({"Pods": pods, "NumPDBViolations": v.num_pdb_violations}),
                    )
                })
                .collect();
            args.insert("NodeNameToMetaVictims".into(), Value::Object(meta));
        } else {
            let full: Map<String, Value> = victims
                .iter()
                .map(|(n, v)| {
                    let pods: Vec<Value> = v.pods.iter().map(|p| pod_json(p)).collect();
                    (
                        n.clone(),
                        json!({"Pods": pods, "NumPDBViolations": v.num_pdb_violations}),
                    )
                })
                .collect();
            args.insert("NodeNameToVictims".into(), Value::Object(full));
        }
        let body = Value::Object(args).to_string().into_bytes();
        let v = self.call_blocking(&self.cfg.preempt_verb, body, "preempt")?;
        let mut out = PreemptionAnswer::new();
        if let Some(m) = get_ci(&v, "NodeNameToMetaVictims").and_then(Value::as_object) {
            for (node, mv) in m {
                let uids = get_ci(mv, "Pods")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|p| get_ci(p, "UID").and_then(Value::as_str))
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default();
                let pdb = get_ci(mv, "NumPDBViolations")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                out.insert(node.clone(), (uids, pdb));
            }
        }
        Ok(out)
    }
}

fn quantities(r: &Resource, only_scalar: bool) -> Map<String, Value> {
    let mut m = Map::new();
    if !only_scalar {
        if r.milli_cpu > 0 {
            m.insert("cpu".into(), format!("{}m", r.milli_cpu).into());
        }
        if r.memory > 0 {
            m.insert("memory".into(), r.memory.to_string().into());
        }
        if r.ephemeral_storage > 0 {
            m.insert(
                "ephemeral-storage".into(),
                r.ephemeral_storage.to_string().into(),
            );
        }
        if r.allowed_pod_number > 0 {
            m.insert("pods".into(), r.allowed_pod_number.to_string().into());
        }
    }
    for (name, v) in &r.scalar {
        m.insert(name.to_string(), v.to_string().into());
    }
    m
}

/// The pod as ferrosched's view knows it (see the module doc).
pub fn pod_json(pod: &PodInfo) -> Value {
    let labels: Map<String, Value> = pod
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), v.clone().into()))
        .collect();
    let selector: Map<String, Value> = pod
        .node_selector
        .iter()
        .map(|(k, v)| (k.clone(), v.clone().into()))
        .collect();
    let mut spec = json!({
        "schedulerName": pod.scheduler_name,
        "priority": pod.priority,
        "containers": [{
            "name": "requests",
            "resources": {
                "requests": quantities(&pod.requests, false),
                "limits": quantities(&pod.requests, true),
            }
        }],
    });
    if !selector.is_empty() {
        spec["nodeSelector"] = Value::Object(selector);
    }
    if let Some(n) = &pod.node_name {
        spec["nodeName"] = n.clone().into();
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name(),
            "namespace": pod.namespace(),
            "uid": pod.uid,
            "labels": labels,
        },
        "spec": spec,
    })
}

/// The node as ferrosched's view knows it (see the module doc).
pub fn node_json(node: &NodeInfo) -> Value {
    let labels: Map<String, Value> = node
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), v.clone().into()))
        .collect();
    let alloc = quantities(&node.allocatable, false);
    json!({
        "metadata": {"name": node.name, "labels": labels},
        "status": {"allocatable": alloc, "capacity": alloc},
    })
}

/// A loopback extender that keeps every node and scores none, for `ferrosched bench
/// --extender-noop`: what the calls themselves cost. Serves HTTP/1.1 on `listener` until
/// the runtime stops.
pub async fn serve_noop(listener: tokio::net::TcpListener) {
    while let Ok((tcp, _)) = listener.accept().await {
        let _ = tcp.set_nodelay(true);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(
                |req: hyper::Request<hyper::body::Incoming>| async move {
                    let prioritize = req.uri().path().ends_with("/prioritize");
                    let body = req
                        .into_body()
                        .collect()
                        .await
                        .map(|b| b.to_bytes())
                        .unwrap_or_default();
                    let args: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let answer = noop_answer(&args, prioritize);
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(Bytes::from(
                        answer.to_string(),
                    ))))
                },
            );
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                .await;
        });
    }
}

fn noop_answer(args: &Value, prioritize: bool) -> Value {
    let names: Vec<Value> = match get_ci(args, "NodeNames") {
        Some(n) => n.as_array().cloned().unwrap_or_default(),
        None => get_ci(args, "Nodes")
            .and_then(|l| get_ci(l, "items"))
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .map(|n| n["metadata"]["name"].clone())
                    .collect()
            })
            .unwrap_or_default(),
    };
    if prioritize {
        return names
            .into_iter()
            .map(|n| json!({"Host": n, "Score": 0}))
            .collect();
    }
    if get_ci(args, "NodeNames").is_some() {
        json!({"NodeNames": names})
    } else {
        let items: Vec<Value> = names
            .into_iter()
            .map(|n| json!({"metadata": {"name": n}}))
            .collect();
        json!({"Nodes": {"items": items}})
    }
}
