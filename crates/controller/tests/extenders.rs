//! Scheduler extenders over HTTP and HTTPS against an in-process fake extender: the JSON
//! each verb sends and reads, client certificates, errors, timeouts, connection reuse; then
//! the controller end to end against the fake API server with a filtering and prioritizing
//! extender over HTTPS and a binder extender for a managed resource.

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use base64::Engine as _;
use controller::extender::HttpExtender;
use fake_apiserver::FakeApiServer;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use scheduler_core::config;
use scheduler_core::framework::{Extender, ExtenderVictims};
use scheduler_core::types::{NodeInfo, PodInfo};
use serde_json::{Value, json};
use support::wait_for;

/// What the fake extender does and what it saw.
#[derive(Default)]
struct Fake {
    /// filter: node -> why it is rejected.
    reject: BTreeMap<String, String>,
    /// prioritize: the node that gets 10 (others 0).
    prefer: Option<String>,
    /// bind: sets spec.nodeName through this server.
    api: Option<Arc<FakeApiServer>>,
    /// preempt: the victims kept per node (UIDs); others vetoed.
    keep: BTreeMap<String, Vec<String>>,
    seen: Mutex<Vec<(String, Value)>>,
    connections: AtomicUsize,
}

impl Fake {
    fn seen(&self, verb: &str) -> Vec<Value> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(v, _)| v == verb)
            .map(|(_, b)| b.clone())
            .collect()
    }
}

type S = State<Arc<Fake>>;

fn note(f: &Fake, verb: &str, body: &Value) {
    f.seen
        .lock()
        .unwrap()
        .push((verb.to_string(), body.clone()));
}

fn node_names(body: &Value) -> Vec<String> {
    if let Some(n) = body["NodeNames"].as_array() {
        return n.iter().map(|s| s.as_str().unwrap().to_string()).collect();
    }
    body["Nodes"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

async fn filter(State(f): S, axum::Json(body): axum::Json<Value>) -> axum::Json<Value> {
    note(&f, "filter", &body);
    let names = node_names(&body);
    let pass: Vec<&String> = names
        .iter()
        .filter(|n| !f.reject.contains_key(*n))
        .collect();
    let failed: BTreeMap<&String, &String> =
        f.reject.iter().filter(|(n, _)| names.contains(n)).collect();
    let mut out = json!({"FailedNodes": failed});
    if body["NodeNames"].is_array() {
        out["NodeNames"] = json!(pass);
    } else {
        let items: Vec<Value> = pass
            .iter()
            .map(|n| json!({"metadata": {"name": n}}))
            .collect();
        out["Nodes"] = json!({"items": items});
    }
    axum::Json(out)
}

async fn prioritize(State(f): S, axum::Json(body): axum::Json<Value>) -> axum::Json<Value> {
    note(&f, "prioritize", &body);
    let list: Vec<Value> = node_names(&body)
        .into_iter()
        .map(|n| {
            let score = if f.prefer.as_deref() == Some(n.as_str()) {
                10
            } else {
                0
            };
            json!({"Host": n, "Score": score})
        })
        .collect();
    axum::Json(Value::Array(list))
}

async fn bind(State(f): S, axum::Json(body): axum::Json<Value>) -> axum::Json<Value> {
    note(&f, "bind", &body);
    if let Some(api) = &f.api {
        let ns = body["PodNamespace"].as_str().unwrap();
        let name = body["PodName"].as_str().unwrap();
        let mut pod = api.get("pods", ns, name).unwrap();
        pod["spec"]["nodeName"] = body["Node"].clone();
        api.apply("pods", &pod);
    }
    axum::Json(json!({}))
}

async fn preempt(State(f): S, axum::Json(body): axum::Json<Value>) -> axum::Json<Value> {
    note(&f, "preempt", &body);
    let kept: BTreeMap<&String, Value> = f
        .keep
        .iter()
        .map(|(n, uids)| {
            let pods: Vec<Value> = uids.iter().map(|u| json!({"UID": u})).collect();
            (n, json!({"Pods": pods, "NumPDBViolations": 0}))
        })
        .collect();
    axum::Json(json!({"NodeNameToMetaVictims": kept}))
}

async fn fail() -> (axum::http::StatusCode, &'static str) {
    (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "down")
}

async fn answer_error() -> axum::Json<Value> {
    axum::Json(json!({"Error": "the extender's cache is not ready"}))
}

/// Keeps the nodes whose `example.com/team` annotation is the pod's.
async fn same_team(State(f): S, axum::Json(body): axum::Json<Value>) -> axum::Json<Value> {
    note(&f, "same-team", &body);
    let team = |o: &Value| o["metadata"]["annotations"]["example.com/team"].clone();
    let pod_team = team(&body["Pod"]);
    let items: Vec<Value> = body["Nodes"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| !pod_team.is_null() && team(n) == pod_team)
        .cloned()
        .collect();
    axum::Json(json!({"Nodes": {"items": items}}))
}

/// Answers long after any test's httpTimeout.
async fn slow(State(f): S, axum::Json(body): axum::Json<Value>) -> axum::Json<Value> {
    note(&f, "slow", &body);
    tokio::time::sleep(Duration::from_secs(60)).await;
    axum::Json(json!({}))
}

fn app(f: Arc<Fake>) -> Router {
    Router::new()
        .route("/filter", post(filter))
        .route("/prioritize", post(prioritize))
        .route("/bind", post(bind))
        .route("/preempt", post(preempt))
        .route("/fail/filter", post(fail))
        .route("/fail/prioritize", post(fail))
        .route("/error/filter", post(answer_error))
        .route("/slow/filter", post(slow))
        .route("/team/filter", post(same_team))
        .with_state(f)
}

/// A CA, the server's certificate for 127.0.0.1, and a client certificate, all PEM.
struct Pki {
    ca: String,
    server_cert: String,
    server_key: String,
    client_cert: String,
    client_key: String,
}

fn pki() -> Pki {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let leaf = |names: Vec<String>| {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = leaf(vec!["127.0.0.1".into()]);
    let (client_cert, client_key) = leaf(vec!["ferrosched".into()]);
    Pki {
        ca: ca.pem(),
        server_cert,
        server_key,
        client_cert,
        client_key,
    }
}

/// Serves the fake on a local port: plain HTTP, or HTTPS requiring a client certificate
/// signed by `pki`'s CA.
async fn serve(f: Arc<Fake>, tls: Option<&Pki>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tls.map(|p| {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(p.ca.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::clone(&provider),
        )
        .build()
        .unwrap();
        let cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                CertificateDer::pem_slice_iter(p.server_cert.as_bytes())
                    .map(Result::unwrap)
                    .collect(),
                PrivateKeyDer::from_pem_slice(p.server_key.as_bytes()).unwrap(),
            )
            .unwrap();
        tokio_rustls::TlsAcceptor::from(Arc::new(cfg))
    });
    let router = app(Arc::clone(&f));
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            f.connections.fetch_add(1, Ordering::Relaxed);
            let (router, acceptor) = (router.clone(), acceptor.clone());
            tokio::spawn(async move {
                let service = TowerToHyperService::new(router);
                let http = hyper::server::conn::http1::Builder::new();
                match acceptor {
                    Some(a) => {
                        if let Ok(s) = a.accept(tcp).await {
                            let _ = http.serve_connection(TokioIo::new(s), service).await;
                        }
                    }
                    None => {
                        let _ = http.serve_connection(TokioIo::new(tcp), service).await;
                    }
                }
            });
        }
    });
    addr
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn ext(prefix: String) -> config::Extender {
    config::Extender {
        url_prefix: prefix,
        filter_verb: "filter".into(),
        prioritize_verb: "prioritize".into(),
        preempt_verb: "preempt".into(),
        bind_verb: String::new(),
        weight: 1,
        http_timeout: Duration::from_secs(5),
        ..Default::default()
    }
}

fn https_ext(addr: SocketAddr, p: &Pki) -> config::Extender {
    let mut e = ext(format!("https://{addr}"));
    e.enable_https = true;
    e.tls_config = Some(config::ExtenderTlsConfig {
        ca_data: b64(&p.ca),
        cert_data: b64(&p.client_cert),
        key_data: b64(&p.client_key),
        ..Default::default()
    });
    e
}

fn nodes() -> Vec<Arc<NodeInfo>> {
    ["n1", "n2", "n3"]
        .iter()
        .map(|n| Arc::new(NodeInfo::test(n).cpu("4").label("zone", "a").build()))
        .collect()
}

fn pod() -> PodInfo {
    PodInfo::test("default", "p")
        .uid("uid-p")
        .cpu("100m")
        .label("app", "web")
        .build()
}

/// Runs the blocking calls off the runtime's threads, as the scheduling thread makes them.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

fn new_ext(cfg: &config::Extender) -> Arc<HttpExtender> {
    Arc::new(HttpExtender::new(cfg, tokio::runtime::Handle::current()).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_and_prioritize_over_http_send_whole_nodes() {
    let fake = Arc::new(Fake {
        reject: BTreeMap::from([("n1".into(), "n1 has no free slot".into())]),
        prefer: Some("n3".into()),
        ..Default::default()
    });
    let addr = serve(Arc::clone(&fake), None).await;
    let e = new_ext(&ext(format!("http://{addr}")));
    let e2 = Arc::clone(&e);
    let (filtered, scores) = blocking(move || {
        (
            e2.filter(&pod(), &nodes()).unwrap(),
            e2.prioritize(&pod(), &nodes()).unwrap(),
        )
    })
    .await;
    assert_eq!(filtered.node_names, ["n2", "n3"]);
    assert_eq!(filtered.failed["n1"], "n1 has no free slot");
    let n3 = scores.iter().find(|h| h.host == "n3").unwrap();
    assert_eq!(n3.score, 10);
    let sent = &fake.seen("filter")[0];
    assert_eq!(sent["Pod"]["metadata"]["name"], "p");
    assert_eq!(sent["Pod"]["metadata"]["uid"], "uid-p");
    assert_eq!(sent["Pod"]["metadata"]["labels"]["app"], "web");
    assert_eq!(sent["Nodes"]["items"][0]["metadata"]["labels"]["zone"], "a");
    assert_eq!(
        sent["Nodes"]["items"][0]["status"]["allocatable"]["cpu"],
        "4000m"
    );
    assert!(sent.get("NodeNames").is_none());
    // Both calls went over one kept-alive connection.
    assert_eq!(fake.connections.load(Ordering::Relaxed), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_cache_capable_sends_names_only() {
    let fake = Arc::new(Fake {
        reject: BTreeMap::from([("n2".into(), "busy".into())]),
        ..Default::default()
    });
    let addr = serve(Arc::clone(&fake), None).await;
    let mut cfg = ext(format!("http://{addr}"));
    cfg.node_cache_capable = true;
    let e = new_ext(&cfg);
    let r = blocking(move || e.filter(&pod(), &nodes()).unwrap()).await;
    assert_eq!(r.node_names, ["n1", "n3"]);
    let sent = &fake.seen("filter")[0];
    assert_eq!(sent["NodeNames"], json!(["n1", "n2", "n3"]));
    assert!(sent.get("Nodes").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_a_client_certificate_inline_and_from_files() {
    let p = pki();
    let fake = Arc::new(Fake::default());
    let addr = serve(Arc::clone(&fake), Some(&p)).await;
    let e = new_ext(&https_ext(addr, &p));
    let r = blocking(move || e.filter(&pod(), &nodes())).await;
    assert_eq!(r.unwrap().node_names.len(), 3);

    let dir = std::env::temp_dir().join(format!("ferrosched-ext-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |n: &str, s: &str| {
        let f = dir.join(n);
        std::fs::write(&f, s).unwrap();
        f.to_string_lossy().into_owned()
    };
    let mut cfg = ext(format!("https://{addr}"));
    cfg.enable_https = true;
    cfg.tls_config = Some(config::ExtenderTlsConfig {
        ca_file: write("ca.pem", &p.ca),
        cert_file: write("c.pem", &p.client_cert),
        key_file: write("k.pem", &p.client_key),
        ..Default::default()
    });
    let e = new_ext(&cfg);
    let r = blocking(move || e.filter(&pod(), &nodes())).await;
    assert_eq!(r.unwrap().node_names.len(), 3);
    std::fs::remove_dir_all(&dir).unwrap();

    // Without the client certificate the server refuses the handshake.
    let mut cfg = https_ext(addr, &p);
    if let Some(t) = &mut cfg.tls_config {
        t.cert_data.clear();
        t.key_data.clear();
    }
    let e = new_ext(&cfg);
    let r = blocking(move || e.filter(&pod(), &nodes())).await;
    assert!(r.is_err());
    // A CA that did not sign the server's certificate: not trusted.
    let other = pki();
    let mut cfg = https_ext(addr, &p);
    if let Some(t) = &mut cfg.tls_config {
        t.ca_data = b64(&other.ca);
    }
    let e = new_ext(&cfg);
    let err = blocking(move || e.filter(&pod(), &nodes()))
        .await
        .unwrap_err();
    assert!(err.contains("certificate"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_and_timeouts_are_errors_with_upstreams_words() {
    let fake = Arc::new(Fake::default());
    let addr = serve(Arc::clone(&fake), None).await;
    let e = new_ext(&ext(format!("http://{addr}/fail")));
    let err = blocking(move || e.filter(&pod(), &nodes()))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        format!("failed filter with extender at URL http://{addr}/fail/filter, code 500")
    );
    let e = new_ext(&ext(format!("http://{addr}/error")));
    let err = blocking(move || e.filter(&pod(), &nodes()))
        .await
        .unwrap_err();
    assert_eq!(err, "the extender's cache is not ready");
    // A slow extender: the call ends at httpTimeout with a deadline error.
    let mut cfg = ext(format!("http://{addr}/slow"));
    cfg.http_timeout = Duration::from_millis(200);
    let e = new_ext(&cfg);
    let err = blocking(move || e.filter(&pod(), &nodes()))
        .await
        .unwrap_err();
    assert!(err.contains("context deadline exceeded"), "{err}");
    // Nobody listening.
    let gone = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = gone.local_addr().unwrap().port();
    drop(gone);
    let e = new_ext(&ext(format!("http://127.0.0.1:{port}")));
    let err = blocking(move || e.filter(&pod(), &nodes()))
        .await
        .unwrap_err();
    assert!(
        err.starts_with(&format!("Post \"http://127.0.0.1:{port}/filter\"")),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preempt_and_bind_payloads() {
    let fake = Arc::new(Fake {
        keep: BTreeMap::from([("n1".into(), vec!["v2".into()])]),
        ..Default::default()
    });
    let addr = serve(Arc::clone(&fake), None).await;
    let victims = |uids: &[&str]| ExtenderVictims {
        pods: uids
            .iter()
            .map(|u| Arc::new(PodInfo::test("default", u).uid(u).build()))
            .collect(),
        num_pdb_violations: 1,
    };
    let map = BTreeMap::from([
        ("n1".to_string(), victims(&["v1", "v2"])),
        ("n2".to_string(), victims(&["v3"])),
    ]);
    for cache_capable in [false, true] {
        let mut cfg = ext(format!("http://{addr}"));
        cfg.node_cache_capable = cache_capable;
        let e = new_ext(&cfg);
        let m = map.clone();
        let answer = blocking(move || e.process_preemption(&pod(), &m).unwrap()).await;
        assert_eq!(answer.len(), 1);
        assert_eq!(answer["n1"].0, ["v2"]);
    }
    let sent = fake.seen("preempt");
    assert_eq!(
        sent[0]["NodeNameToVictims"]["n1"]["Pods"][1]["metadata"]["uid"],
        "v2"
    );
    assert_eq!(sent[0]["NodeNameToVictims"]["n1"]["NumPDBViolations"], 1);
    assert_eq!(
        sent[1]["NodeNameToMetaVictims"]["n1"]["Pods"][0]["UID"],
        "v1"
    );
    assert!(sent[1].get("NodeNameToVictims").is_none());

    let mut cfg = ext(format!("http://{addr}"));
    cfg.bind_verb = "bind".into();
    let e = new_ext(&cfg);
    e.bind(&pod(), "n2").await.unwrap();
    assert_eq!(
        fake.seen("bind")[0],
        json!({"PodName": "p", "PodNamespace": "default", "PodUID": "uid-p", "Node": "n2"})
    );
}

// --- end to end ------------------------------------------------------------------------

fn api_node(name: &str) -> Value {
    json!({
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    })
}

fn api_pod(name: &str, requests: Value, scheduler: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "c", "image": "img",
                "resources": {"requests": requests.clone(), "limits": requests}}],
        },
    })
}

fn tls_yaml(p: &Pki) -> String {
    format!(
        "  enableHTTPS: true\n  tlsConfig:\n    caData: {}\n    certData: {}\n    keyData: {}\n",
        b64(&p.ca),
        b64(&p.client_cert),
        b64(&p.client_key)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_runs_a_filtering_https_extender_and_a_binder() {
    let server = Arc::new(FakeApiServer::start().await);
    for n in ["n1", "n2", "n3"] {
        server.apply("nodes", &api_node(n));
    }
    let p = pki();
    let scorer = Arc::new(Fake {
        reject: BTreeMap::from([("n1".into(), "n1 is reserved".into())]),
        prefer: Some("n2".into()),
        ..Default::default()
    });
    let scorer_addr = serve(Arc::clone(&scorer), Some(&p)).await;
    let binder = Arc::new(Fake {
        api: Some(Arc::clone(&server)),
        ..Default::default()
    });
    let binder_addr = serve(Arc::clone(&binder), None).await;
    let cfg = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {{leaderElect: false}}
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
extenders:
- urlPrefix: https://{scorer_addr}
  filterVerb: filter
  prioritizeVerb: prioritize
  weight: 5
{}- urlPrefix: http://{binder_addr}
  bindVerb: bind
  managedResources:
  - name: example.com/gpu
    ignoredByScheduler: true
",
        tls_yaml(&p)
    );
    let started = support::start(&server, &cfg).await;
    server.apply(
        "pods",
        &api_pod("web", json!({"cpu": "100m"}), "default-scheduler"),
    );
    server.apply(
        "pods",
        &api_pod(
            "gpu",
            json!({"cpu": "100m", "example.com/gpu": "1"}),
            "default-scheduler",
        ),
    );
    wait_for("both pods bound", || {
        server.node_of("default", "web").is_some() && server.node_of("default", "gpu").is_some()
    })
    .await;
    // Filtered (not n1) and prioritized (n2 by 5 * 10 * 10 = 500 points).
    assert_eq!(server.node_of("default", "web").as_deref(), Some("n2"));
    assert_eq!(server.node_of("default", "gpu").as_deref(), Some("n2"));
    // The plain pod through a Binding; the gpu pod by the binder extender, never a Binding.
    let bindings = server.bindings();
    assert!(
        bindings.iter().any(|(p, _)| p == "default/web"),
        "{bindings:?}"
    );
    assert!(
        !bindings.iter().any(|(p, _)| p == "default/gpu"),
        "{bindings:?}"
    );
    let binds = binder.seen("bind");
    assert_eq!(binds.len(), 1);
    assert_eq!(binds[0]["PodName"], "gpu");
    assert_eq!(binds[0]["Node"], "n2");
    assert!(binder.seen("filter").is_empty());
    support::stop_controller(started.stop, started.task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_skips_an_ignorable_failing_extender_and_reports_another() {
    let server = Arc::new(FakeApiServer::start().await);
    server.apply("nodes", &api_node("n1"));
    let fake = Arc::new(Fake::default());
    let addr = serve(Arc::clone(&fake), None).await;
    let cfg = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {{leaderElect: false}}
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
profiles:
- schedulerName: default-scheduler
- schedulerName: other
extenders:
- urlPrefix: http://{addr}/fail
  filterVerb: filter
  ignorable: true
- urlPrefix: http://{addr}/error
  filterVerb: filter
  managedResources:
  - name: example.com/broken
    ignoredByScheduler: true
"
    );
    let started = support::start(&server, &cfg).await;
    server.apply("pods", &api_pod("ok", json!({"cpu": "100m"}), "other"));
    server.apply(
        "pods",
        &api_pod(
            "broken",
            json!({"example.com/broken": "1"}),
            "default-scheduler",
        ),
    );
    wait_for("the plain pod bound past the ignorable failure", || {
        server.node_of("default", "ok").is_some()
    })
    .await;
    wait_for("FailedScheduling with the extender's error", || {
        server.events_for("default", "broken").iter().any(|e| {
            e["reason"] == "FailedScheduling"
                && e["note"]
                    .as_str()
                    .is_some_and(|n| n.contains("the extender's cache is not ready"))
        })
    })
    .await;
    assert!(server.node_of("default", "broken").is_none());
    support::stop_controller(started.stop, started.task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_benchs_noop_extender_keeps_every_node_and_scores_none() {
    for cache_capable in [true, false] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(controller::extender::serve_noop(listener));
        let mut cfg = ext(format!("http://{addr}"));
        cfg.node_cache_capable = cache_capable;
        let e = new_ext(&cfg);
        let (f, p) = blocking(move || {
            (
                e.filter(&pod(), &nodes()).unwrap(),
                e.prioritize(&pod(), &nodes()).unwrap(),
            )
        })
        .await;
        assert_eq!(f.node_names, ["n1", "n2", "n3"]);
        assert!(f.failed.is_empty());
        assert_eq!(p.len(), 3);
        assert!(p.iter().all(|h| h.score == 0));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_extender_times_out_while_the_other_profile_keeps_scheduling() {
    let server = Arc::new(FakeApiServer::start().await);
    server.apply("nodes", &api_node("n1"));
    let fake = Arc::new(Fake::default());
    let addr = serve(Arc::clone(&fake), None).await;
    // Only pods asking for example.com/slow reach the slow extender, which never answers
    // within its httpTimeout.
    let cfg = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {{leaderElect: false}}
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
profiles:
- schedulerName: default-scheduler
- schedulerName: other
extenders:
- urlPrefix: http://{addr}/slow
  filterVerb: filter
  httpTimeout: 3s
  managedResources:
  - name: example.com/slow
    ignoredByScheduler: true
"
    );
    let started = support::start(&server, &cfg).await;
    server.apply(
        "pods",
        &api_pod(
            "stuck",
            json!({"example.com/slow": "1"}),
            "default-scheduler",
        ),
    );
    wait_for("the slow pod's filter call", || {
        !fake.seen("slow").is_empty()
    })
    .await;
    // While that call waits, the other profile's pods are scheduled.
    for i in 0..3 {
        server.apply(
            "pods",
            &api_pod(&format!("ok-{i}"), json!({"cpu": "10m"}), "other"),
        );
    }
    wait_for("the other profile's pods bound", || {
        (0..3).all(|i| server.node_of("default", &format!("ok-{i}")).is_some())
    })
    .await;
    wait_for("FailedScheduling with the timeout", || {
        server.events_for("default", "stuck").iter().any(|e| {
            e["reason"] == "FailedScheduling"
                && e["note"].as_str().is_some_and(|n| {
                    n.contains("context deadline exceeded") && n.contains("httpTimeout 3s")
                })
        })
    })
    .await;
    // In the API server's order: every binding of the other profile before the slow
    // pod's first failure was written (its PodScheduled=False status).
    let failed_write = |r: &fake_apiserver::RequestRecord| {
        r.name == "stuck" && r.subresource == "status" && r.verb == "patch"
    };
    wait_for("the slow pod's PodScheduled=False", || {
        server.requests().iter().any(failed_write)
    })
    .await;
    let requests = server.requests();
    let failed = requests.iter().position(failed_write).unwrap();
    for i in 0..3 {
        let name = format!("ok-{i}");
        let bound = requests
            .iter()
            .position(|r| r.name == name && r.subresource == "binding")
            .expect("bound");
        assert!(bound < failed, "ok-{i} bound after the slow pod failed");
    }
    // Retried after its backoff: the extender is asked again.
    wait_for("the slow pod's second attempt", || {
        fake.seen("slow").len() >= 2
    })
    .await;
    assert!(server.node_of("default", "stuck").is_none());
    support::stop_controller(started.stop, started.task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extenders_are_sent_the_api_objects_annotations_and_taints_included() {
    let server = Arc::new(FakeApiServer::start().await);
    let team_node = |name: &str, team: &str| {
        let mut n = api_node(name);
        n["metadata"]["annotations"] = json!({"example.com/team": team});
        n
    };
    server.apply("nodes", &team_node("n1", "red"));
    let mut n2 = team_node("n2", "blue");
    n2["spec"] = json!({"taints": [{"key": "dedicated", "value": "blue", "effect": "NoSchedule"}]});
    server.apply("nodes", &n2);
    server.apply("nodes", &api_node("n3"));
    let fake = Arc::new(Fake::default());
    let addr = serve(Arc::clone(&fake), None).await;
    let cfg = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {{leaderElect: false}}
extenders:
- urlPrefix: http://{addr}/team
  filterVerb: filter
"
    );
    let started = support::start(&server, &cfg).await;
    let mut pod = api_pod("blue", json!({"cpu": "100m"}), "default-scheduler");
    pod["metadata"]["annotations"] = json!({"example.com/team": "blue"});
    pod["spec"]["tolerations"] =
        json!([{"key": "dedicated", "operator": "Equal", "value": "blue", "effect": "NoSchedule"}]);
    server.apply("pods", &pod);
    wait_for("the pod bound", || {
        server.node_of("default", "blue").is_some()
    })
    .await;
    // Only the annotations decide: n2, by the pod's annotation and n2's.
    assert_eq!(server.node_of("default", "blue").as_deref(), Some("n2"));
    let body = fake.seen("same-team").remove(0);
    let sent_pod = &body["Pod"];
    assert_eq!(
        sent_pod["metadata"]["annotations"]["example.com/team"],
        "blue"
    );
    assert_eq!(sent_pod["spec"]["tolerations"][0]["key"], "dedicated");
    assert_eq!(sent_pod["spec"]["containers"][0]["image"], "img");
    assert!(
        sent_pod["metadata"].get("managedFields").is_none(),
        "{sent_pod}"
    );
    let nodes = body["Nodes"]["items"].as_array().unwrap();
    let sent_n2 = nodes
        .iter()
        .find(|n| n["metadata"]["name"] == "n2")
        .expect("n2 sent");
    assert_eq!(sent_n2["spec"]["taints"][0]["key"], "dedicated");
    assert_eq!(sent_n2["status"]["allocatable"]["cpu"], "4");
    assert!(
        nodes
            .iter()
            .all(|n| n["metadata"].get("managedFields").is_none())
    );
    support::stop_controller(started.stop, started.task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_ignorable_extender_is_skipped_at_its_timeout() {
    let server = Arc::new(FakeApiServer::start().await);
    server.apply("nodes", &api_node("n1"));
    let fake = Arc::new(Fake::default());
    let addr = serve(Arc::clone(&fake), None).await;
    let cfg = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {{leaderElect: false}}
extenders:
- urlPrefix: http://{addr}/slow
  filterVerb: filter
  httpTimeout: 300ms
  ignorable: true
"
    );
    let started = support::start(&server, &cfg).await;
    server.apply(
        "pods",
        &api_pod("p", json!({"cpu": "100m"}), "default-scheduler"),
    );
    wait_for("the pod bound past the ignorable extender", || {
        server.node_of("default", "p").is_some()
    })
    .await;
    assert_eq!(fake.seen("slow").len(), 1);
    assert!(
        !server
            .events_for("default", "p")
            .iter()
            .any(|e| e["reason"] == "FailedScheduling")
    );
    support::stop_controller(started.stop, started.task).await;
}
