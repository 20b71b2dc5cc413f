//! The SchedulingPolicy admission webhook over real HTTPS: a CA and serving certificates made
//! here, AdmissionReview v1 bodies sent by a minimal HTTP/1.1 client over tokio-rustls, and
//! the answers checked as the API server would read them (allowed, the message, the base64
//! JSON patch applied to the pod). Most RBAC answers come from a fake authorizer;
//! `policies_from_the_watch_and_rbac_from_subject_access_reviews` (and tests/gate.rs) ask
//! the fake API server's SubjectAccessReviews.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use base64::Engine;
use controller::tls::{ReloadingCert, server_config};
use futures::future::BoxFuture;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, ServerName};
use scheduler_core::policy;
use scheduling_policy::authz::{Authorizer, ServiceAccount};
use scheduling_policy::informer::Policies;
use scheduling_policy::webhook::{
    self, BAD_REVIEW, DENIED, NOT_SYNCED, PriorityClassLookup, Webhook,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

// ---- certificates ----

struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        Ca {
            issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap(),
        }
    }

    fn der(&self) -> CertificateDer<'static> {
        self.issuer.der().clone()
    }

    /// A serving certificate for localhost: (cert PEM, key PEM, cert DER).
    fn serving(&self) -> (String, String, CertificateDer<'static>) {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        (cert.pem(), key.serialize_pem(), cert.der().clone())
    }
}

/// A fresh directory for one test's files.
fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ferrosched-webhook-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write_pair(dir: &Path, cert: &str, key: &str) -> (PathBuf, PathBuf) {
    let (c, k) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&c, cert).unwrap();
    std::fs::write(&k, key).unwrap();
    (c, k)
}

// ---- server and client ----

/// Grants `(namespace/name or */name, policy)` pairs; fails every question when `broken`.
struct FakeRbac {
    grants: Vec<(&'static str, &'static str)>,
    broken: AtomicBool,
}

impl Authorizer for FakeRbac {
    fn may_use<'a>(
        &'a self,
        sa: &'a ServiceAccount,
        policy: &'a str,
    ) -> BoxFuture<'a, controller::Result<bool>> {
        let any_ns = format!("*/{}", sa.name);
        let allowed = self
            .grants
            .iter()
            .any(|(s, p)| (*s == sa.to_string() || *s == any_ns) && *p == policy);
        let broken = self.broken.load(Ordering::SeqCst);
        Box::pin(async move {
            if broken {
                return Err(controller::Error::Kubeconfig("RBAC unavailable".into()));
            }
            Ok(allowed)
        })
    }
}

/// The cluster's PriorityClasses as the webhook asks about them: `cluster-default` is the
/// globalDefault one (preemptionPolicy PreemptLowerPriority).
struct FakeClasses;

impl PriorityClassLookup for FakeClasses {
    fn global_default<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, controller::Result<Option<policy::GlobalDefaultClass>>> {
        Box::pin(async move {
            Ok(
                (name == "cluster-default").then(|| policy::GlobalDefaultClass {
                    name: name.to_string(),
                    preemption_policy: Some("PreemptLowerPriority".into()),
                }),
            )
        })
    }
}

struct Server {
    addr: SocketAddr,
    ca: CertificateDer<'static>,
    policies: Arc<Policies>,
    rbac: Arc<FakeRbac>,
}

/// Serves the webhook on 127.0.0.1:0 with `policies` (YAML) listed and RBAC `grants`.
async fn start(name: &str, policies: &str, grants: Vec<(&'static str, &'static str)>) -> Server {
    let ca = Ca::new();
    let (cert, key, _) = ca.serving();
    let (c, k) = write_pair(&temp_dir(name), &cert, &key);
    let ps = Arc::new(Policies::default());
    if !policies.is_empty() {
        ps.store
            .replace_all(policy::parse(policies).unwrap_or_else(|e| panic!("{e:?}")));
        ps.mark_synced();
    }
    let rbac = Arc::new(FakeRbac {
        grants,
        broken: AtomicBool::new(false),
    });
    let addr = serve(Arc::new(ReloadingCert::new(c, k).unwrap()), &ps, &rbac).await;
    Server {
        addr,
        ca: ca.der(),
        policies: ps,
        rbac,
    }
}

async fn serve(cert: Arc<ReloadingCert>, ps: &Arc<Policies>, rbac: &Arc<FakeRbac>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hook = Arc::new(Webhook {
        policies: Arc::clone(ps),
        authz: Arc::clone(rbac) as Arc<dyn Authorizer>,
        priority_classes: Arc::new(FakeClasses),
    });
    tokio::spawn(controller::tls::serve(
        listener,
        Arc::new(server_config(cert).unwrap()),
        webhook::router(hook),
        std::future::pending(),
    ));
    addr
}

struct Reply {
    status: u16,
    body: Vec<u8>,
    /// The certificate the server presented.
    peer: CertificateDer<'static>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One HTTP/1.1 request over a new TLS connection that trusts only `ca`.
async fn request(
    addr: SocketAddr,
    ca: &CertificateDer<'static>,
    method: &str,
    path: &str,
    body: &[u8],
) -> Reply {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let peer = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.write_all(body).await.unwrap();
    let mut raw = Vec::new();
    // A peer that closes without close_notify still sent a complete response.
    let _ = tls.read_to_end(&mut raw).await;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete response head");
    let head = String::from_utf8_lossy(&raw[..split]).to_lowercase();
    assert!(!head.contains("transfer-encoding: chunked"), "{head}");
    let status = head[9..12].parse().unwrap();
    Reply {
        status,
        body: raw[split + 4..].to_vec(),
        peer,
    }
}

impl Server {
    async fn post(&self, path: &str, review: &Value) -> Reply {
        request(
            self.addr,
            &self.ca,
            "POST",
            path,
            review.to_string().as_bytes(),
        )
        .await
    }

    /// `/validate`: (allowed, message).
    async fn validate(&self, review: &Value) -> (bool, String) {
        let r = self.post("/validate", review).await;
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json();
        assert_eq!(v["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(v["kind"], "AdmissionReview");
        assert_eq!(v["response"]["uid"], "uid-1");
        (
            v["response"]["allowed"].as_bool().unwrap(),
            v["response"]["status"]["message"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        )
    }

    /// `/mutate`: the pod after applying the returned patch (and the patch itself).
    async fn mutate(&self, review: &Value) -> (Value, Value) {
        let r = self.post("/mutate", review).await;
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json();
        let resp = &v["response"];
        assert_eq!(resp["uid"], "uid-1");
        assert_eq!(resp["allowed"], true);
        let mut pod = review["request"]["object"].clone();
        let Some(b64) = resp.get("patch") else {
            assert!(resp.get("patchType").is_none());
            return (pod, json!([]));
        };
        assert_eq!(resp["patchType"], "JSONPatch");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().expect("base64 string"))
            .unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
        json_patch::patch(&mut pod, &patch).unwrap();
        (pod, serde_json::from_slice(&bytes).unwrap())
    }
}

// ---- admission bodies ----

fn pod(ns: &str, sa: Option<&str>, spec: Value) -> Value {
    let mut s = json!({"containers": [{"name": "c", "image": "registry.example/app"}]});
    if let Some(sa) = sa {
        s["serviceAccountName"] = json!(sa);
    }
    for (k, v) in spec.as_object().unwrap() {
        s[k] = v.clone();
    }
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": ns}, "spec": s})
}

fn review(operation: &str, object: &Value, old: Option<&Value>) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "uid-1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "p",
            "namespace": object["metadata"]["namespace"],
            "operation": operation,
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": object,
            "oldObject": old,
            "dryRun": false
        }
    })
}

fn create(object: &Value) -> Value {
    review("CREATE", object, None)
}

/// The proposal's `restricted` and `privileged` policies and two of its examples.
const POLICIES: &str = "apiVersion: scheduling.ferrosched.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: restricted
spec:
  allowed:
    schedulerNames: [\"default-scheduler\"]
---
apiVersion: scheduling.ferrosched.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: privileged
spec:
  allowed:
    schedulerNames: []
    priorityClassNames: []
    nodeSelectors: {}
    tolerations: []
    affinities: {}
---
# Restricted multi-arch by nodeSelector.
apiVersion: scheduling.ferrosched.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: multiarch
spec:
  required:
    schedulerNames: [\"default-scheduler\"]
    nodeSelectors:
      beta.kubernetes.io/arch: [\"amd64\", \"arm64\"]
      beta.kubernetes.io/os: [\"Linux\", \"Windows\"]
  default:
    schedulerName: \"default-scheduler\"
    nodeSelector:
      beta.kubernetes.io/arch: \"amd64\"
      beta.kubernetes.io/os: \"Linux\"
---
# Only a single priority class.
apiVersion: scheduling.ferrosched.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: single-priority
spec:
  required:
    priorityClasseNames: [\"high-priority\"]
  default:
    priorityClasseName: \"high-priority\"
---
# Fine-grain allowed tolerations.
apiVersion: scheduling.ferrosched.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: fine-tolerations
spec:
  allowed:
    schedulerNames: []
    tolerations:
    - keys: [\"mykey\"]
      operators: [\"Equal\"]
      values: [\"value\"]
      effects: [\"NoSchedule\"]
    - keys: [\"other_key\"]
      operators: [\"Exists\"]
      effects: [\"NoExecute\"]
";

/// Who may use what: as manifests/policy/examples.yaml (restricted for everyone, privileged
/// for kube-system), plus one account per example.
fn grants() -> Vec<(&'static str, &'static str)> {
    vec![
        ("*/default", "restricted"),
        ("*/arch", "restricted"),
        ("*/arch", "multiarch"),
        ("*/gold", "single-priority"),
        ("*/gold", "restricted"),
        ("*/tolerant", "fine-tolerations"),
        ("kube-system/default", "privileged"),
    ]
}

// ---- tests ----

#[tokio::test]
async fn validate_denies_a_pod_outside_its_policies_listing_every_violation() {
    let s = start("deny", POLICIES, grants()).await;
    let (allowed, msg) = s.validate(&create(&pod("team", None, json!({})))).await;
    assert!(allowed, "{msg}");
    let bad = pod(
        "team",
        None,
        json!({
            "schedulerName": "other",
            "priorityClassName": "gold",
            "nodeSelector": {"disk": "ssd"},
            "tolerations": [{"key": "k", "operator": "Exists"}]
        }),
    );
    let (allowed, msg) = s.validate(&create(&bad)).await;
    assert!(!allowed);
    assert_eq!(
        msg,
        format!(
            "{DENIED} (service account team/default; usable policies: restricted): \
             spec.schedulerName \"other\" is not allowed; allowed: [\"default-scheduler\"]; \
             spec.priorityClassName \"gold\" is not allowed; allowed: none; \
             spec.nodeSelector[disk] is not allowed; \
             spec.tolerations[0] (key \"k\" Exists, any effect) is not allowed"
        )
    );
    // kube-system's service accounts may use `privileged` too (RoleBinding in the
    // namespace): the same pod passes there.
    let mut privileged = bad.clone();
    privileged["metadata"]["namespace"] = json!("kube-system");
    assert_eq!(
        s.validate(&create(&privileged)).await,
        (true, String::new())
    );
    // A service account that may use no policy gets the empty policy: nothing allowed.
    let (allowed, msg) = s
        .validate(&create(&pod("team", Some("nobody"), json!({}))))
        .await;
    assert!(!allowed);
    assert_eq!(
        msg,
        format!(
            "{DENIED} (service account team/nobody; usable policies: none): \
             spec.schedulerName \"default-scheduler\" is not allowed; allowed: none"
        )
    );
}

#[tokio::test]
async fn mutate_sets_the_defaults_of_the_merged_policy_and_the_result_validates() {
    let s = start("mutate", POLICIES, grants()).await;
    // Restricted multi-arch by nodeSelector: no nodeSelector at all gets both keys.
    let p = pod("team", Some("arch"), json!({}));
    let (mutated, patch) = s.mutate(&create(&p)).await;
    assert_eq!(
        patch,
        json!([
            {"op": "add", "path": "/spec/schedulerName", "value": "default-scheduler"},
            {"op": "add", "path": "/spec/nodeSelector",
             "value": {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "Linux"}},
        ])
    );
    let mut want = p.clone();
    want["spec"]["schedulerName"] = json!("default-scheduler");
    want["spec"]["nodeSelector"] =
        json!({"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "Linux"});
    assert_eq!(mutated, want);
    assert_eq!(s.validate(&create(&mutated)).await, (true, String::new()));
    // Unmutated, the same pod is denied: the required key is missing.
    let (allowed, msg) = s.validate(&create(&p)).await;
    assert!(!allowed);
    assert!(
        msg.ends_with(
            "spec.nodeSelector[beta.kubernetes.io/arch] is required: one of [\"amd64\", \"arm64\"]; \
             spec.nodeSelector[beta.kubernetes.io/os] is required: one of [\"Linux\", \"Windows\"]"
        ),
        "{msg}"
    );
    // Per key: an arm64 pod keeps its arch and gets the OS; `/` escaped as `~1`.
    let p = pod(
        "team",
        Some("arch"),
        json!({"schedulerName": "default-scheduler",
               "nodeSelector": {"beta.kubernetes.io/arch": "arm64"}}),
    );
    let (mutated, patch) = s.mutate(&create(&p)).await;
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/spec/nodeSelector/beta.kubernetes.io~1os", "value": "Linux"}])
    );
    assert_eq!(
        mutated["spec"]["nodeSelector"],
        json!({"beta.kubernetes.io/arch": "arm64", "beta.kubernetes.io/os": "Linux"})
    );
    // Only a single priority class: set when unset, merged with `restricted` (Option 1).
    let p = pod("team", Some("gold"), json!({}));
    let (mutated, _) = s.mutate(&create(&p)).await;
    assert_eq!(mutated["spec"]["priorityClassName"], "high-priority");
    assert_eq!(s.validate(&create(&mutated)).await, (true, String::new()));
    let (allowed, msg) = s
        .validate(&create(&pod(
            "team",
            Some("gold"),
            json!({"priorityClassName": "low"}),
        )))
        .await;
    assert!(!allowed);
    assert!(
        msg.ends_with(
            "spec.priorityClassName \"low\" is not allowed; required: one of [\"high-priority\"]"
        ),
        "{msg}"
    );
    // Nothing to default: no patch, no patchType.
    let (mutated, patch) = s.mutate(&create(&pod("team", None, json!({})))).await;
    assert_eq!(patch, json!([]));
    assert_eq!(mutated, pod("team", None, json!({})));
}

/// The pod as a real API server hands it over: Priority admission resolved `spec.priority`
/// (and named the globalDefault class), DefaultTolerationSeconds added its tolerations.
#[tokio::test]
async fn mutate_treats_what_the_api_server_set_as_unset() {
    let s = start("server-set", POLICIES, grants()).await;
    let server_tolerations = json!([
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    ]);
    // No globalDefault class: spec.priority 0 must go, or the reinvoked Priority plugin
    // refuses the pod ("the integer value of priority (0) must not be provided ...").
    let p = pod(
        "team",
        Some("gold"),
        json!({"schedulerName": "default-scheduler", "priority": 0, "tolerations": server_tolerations}),
    );
    let (mutated, patch) = s.mutate(&create(&p)).await;
    assert_eq!(
        patch,
        json!([
            {"op": "add", "path": "/spec/priorityClassName", "value": "high-priority"},
            {"op": "remove", "path": "/spec/priority"},
        ])
    );
    assert!(mutated["spec"].get("priority").is_none());
    assert_eq!(mutated["spec"]["tolerations"], server_tolerations);
    // The globalDefault class the server named counts as unset, with what it copied.
    let p = pod(
        "team",
        Some("gold"),
        json!({"priorityClassName": "cluster-default", "priority": 7,
               "preemptionPolicy": "PreemptLowerPriority"}),
    );
    let (mutated, _) = s.mutate(&create(&p)).await;
    assert_eq!(mutated["spec"]["priorityClassName"], "high-priority");
    assert!(mutated["spec"].get("priority").is_none(), "{mutated}");
    assert!(
        mutated["spec"].get("preemptionPolicy").is_none(),
        "{mutated}"
    );
    // Any other class is the pod's own choice: left for /validate to judge.
    let p = pod(
        "team",
        Some("gold"),
        json!({"priorityClassName": "low", "priority": 1}),
    );
    let (_, patch) = s.mutate(&create(&p)).await;
    assert_eq!(patch, json!([]));
}

#[tokio::test]
async fn fine_grain_tolerations_example_end_to_end() {
    let s = start("tolerations", POLICIES, grants()).await;
    let ok = pod(
        "team",
        Some("tolerant"),
        json!({"tolerations": [
            {"key": "mykey", "operator": "Equal", "value": "value", "effect": "NoSchedule"},
            {"key": "other_key", "operator": "Exists", "effect": "NoExecute"},
            // Added by the API server to every pod: never evaluated.
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 300}
        ]}),
    );
    assert_eq!(s.validate(&create(&ok)).await, (true, String::new()));
    let bad = pod(
        "team",
        Some("tolerant"),
        json!({"tolerations": [
            {"key": "mykey", "operator": "Equal", "value": "other", "effect": "NoSchedule"},
            {"key": "other_key", "operator": "Exists", "effect": "NoSchedule"}
        ]}),
    );
    let (allowed, msg) = s.validate(&create(&bad)).await;
    assert!(!allowed);
    assert!(
        msg.contains("usable policies: fine-tolerations): spec.tolerations[0] ")
            && msg.contains("; spec.tolerations[1] "),
        "{msg}"
    );
}

#[tokio::test]
async fn updates_are_checked_only_when_a_scheduling_field_changes() {
    let s = start("update", POLICIES, grants()).await;
    // A pod created before the policies: relabelling it is not the webhook's business.
    let old = pod("team", None, json!({"nodeSelector": {"disk": "ssd"}}));
    let mut relabelled = old.clone();
    relabelled["metadata"]["labels"] = json!({"app": "x"});
    assert_eq!(
        s.validate(&review("UPDATE", &relabelled, Some(&old))).await,
        (true, String::new())
    );
    // Adding a toleration to a running pod is.
    let allowed_pod = pod("team", None, json!({}));
    let mut tolerated = allowed_pod.clone();
    tolerated["spec"]["tolerations"] = json!([{"key": "k", "operator": "Exists"}]);
    let (allowed, msg) = s
        .validate(&review("UPDATE", &tolerated, Some(&allowed_pod)))
        .await;
    assert!(!allowed);
    assert!(msg.ends_with("spec.tolerations[0] (key \"k\" Exists, any effect) is not allowed"));
    // DELETE and CONNECT are never policed; /mutate leaves updates alone.
    assert_eq!(
        s.validate(&review("DELETE", &tolerated, None)).await,
        (true, String::new())
    );
    let arch = pod("team", Some("arch"), json!({}));
    let (_, patch) = s.mutate(&review("UPDATE", &arch, Some(&arch))).await;
    assert_eq!(patch, json!([]));
}

#[tokio::test]
async fn undecidable_requests_are_left_to_the_failure_policy() {
    // Not listed yet: 503 everywhere (healthz too, so the pod is not Ready).
    let s = start("unsynced", "", grants()).await;
    let r = request(s.addr, &s.ca, "GET", "/healthz", b"").await;
    assert_eq!((r.status, r.text()), (503, NOT_SYNCED.to_string()));
    let r = s
        .post("/validate", &create(&pod("team", None, json!({}))))
        .await;
    assert_eq!((r.status, r.text()), (503, NOT_SYNCED.to_string()));
    s.policies.mark_synced();
    let r = request(s.addr, &s.ca, "GET", "/healthz", b"").await;
    assert_eq!((r.status, r.text()), (200, "ok".to_string()));
    // RBAC cannot be asked: 500, not a denial.
    s.policies
        .store
        .replace_all(policy::parse(POLICIES).unwrap());
    s.rbac.broken.store(true, Ordering::SeqCst);
    let r = s
        .post("/validate", &create(&pod("team", None, json!({}))))
        .await;
    assert_eq!(r.status, 500, "{}", r.text());
    assert!(r.text().contains("RBAC unavailable"), "{}", r.text());
    // Not an AdmissionReview: 400.
    let r = request(s.addr, &s.ca, "POST", "/mutate", b"{\"kind\": \"Pod\"}").await;
    assert_eq!(r.status, 400);
    assert!(r.text().starts_with(BAD_REVIEW), "{}", r.text());
}

#[tokio::test]
async fn a_replaced_certificate_is_served_on_the_next_handshake() {
    let ca = Ca::new();
    let (cert1, key1, der1) = ca.serving();
    let dir = temp_dir("reload");
    let (c, k) = write_pair(&dir, &cert1, &key1);
    let ps = Arc::new(Policies::default());
    ps.mark_synced();
    let rbac = Arc::new(FakeRbac {
        grants: vec![],
        broken: AtomicBool::new(false),
    });
    let addr = serve(Arc::new(ReloadingCert::new(&c, &k).unwrap()), &ps, &rbac).await;
    let ca_der = ca.der();
    let r = request(addr, &ca_der, "GET", "/healthz", b"").await;
    assert_eq!((r.status, &r.peer), (200, &der1));

    // Rotated in place: the server keeps running and the next handshake sees the new one.
    let (cert2, key2, der2) = ca.serving();
    write_pair(&dir, &cert2, &key2);
    let r = request(addr, &ca_der, "GET", "/healthz", b"").await;
    assert_eq!((r.status, &r.peer), (200, &der2));

    // Half-rotated (new certificate, old key): not usable, the last good pair stays.
    let (cert3, _, _) = ca.serving();
    std::fs::write(&c, cert3).unwrap();
    let r = request(addr, &ca_der, "GET", "/healthz", b"").await;
    assert_eq!((r.status, &r.peer), (200, &der2));
    std::fs::write(&c, "not a certificate").unwrap();
    let r = request(addr, &ca_der, "GET", "/healthz", b"").await;
    assert_eq!(&r.peer, &der2);

    // A bad pair at start is an error, not a server without a certificate.
    assert!(ReloadingCert::new(&c, &k).is_err());
    assert!(ReloadingCert::new(dir.join("missing.crt"), &k).is_err());
    let _ = std::fs::remove_dir_all(dir);
}

/// The real thing against the fake API server: policies come from the watch (an invalid
/// one is left out), RBAC from SubjectAccessReviews (cached), answers over HTTPS.
#[tokio::test]
async fn policies_from_the_watch_and_rbac_from_subject_access_reviews() {
    use fake_apiserver::{FakeApiServer, Grant};
    use scheduling_policy::authz::{CachedAuthorizer, SarAuthorizer};

    let api = FakeApiServer::start().await;
    for p in policy::parse(POLICIES).unwrap() {
        api.apply("schedulingpolicies", &p);
    }
    // Invalid (an empty required list): must grant nothing, even to whoever may use it.
    api.apply(
        "schedulingpolicies",
        &json!({"apiVersion": "scheduling.ferrosched.io/v1alpha1", "kind": "SchedulingPolicy",
                "metadata": {"name": "broken"},
                "spec": {"required": {"schedulerNames": []}, "allowed": {"tolerations": []}}}),
    );
    let use_policy = |subject: &str, namespace: Option<&str>, name: &str| Grant {
        subject: subject.into(),
        namespace: namespace.map(str::to_string),
        verb: "use".into(),
        group: "scheduling.ferrosched.io".into(),
        resource: "schedulingpolicies".into(),
        name: Some(name.into()),
    };
    // As manifests/policy/examples.yaml: everyone `restricted`, kube-system `privileged`.
    api.grant(use_policy("system:authenticated", None, "restricted"));
    api.grant(use_policy(
        "system:serviceaccounts:kube-system",
        Some("kube-system"),
        "privileged",
    ));
    api.grant(use_policy("system:serviceaccount:team:ci", None, "broken"));

    let client = controller::client(Some(&api.kubeconfig())).await.unwrap();
    let ps = Arc::new(Policies::default());
    let watch = tokio::spawn(scheduling_policy::informer::watch(
        client.clone(),
        Arc::clone(&ps),
        || {},
    ));
    for _ in 0..200 {
        if ps.is_synced() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(ps.is_synced());
    assert_eq!(
        ps.store.names(),
        [
            "fine-tolerations",
            "multiarch",
            "privileged",
            "restricted",
            "single-priority"
        ]
    );

    let authz = CachedAuthorizer::new(
        SarAuthorizer::new(client),
        std::time::Duration::from_secs(30),
        std::time::Duration::from_secs(10),
    );
    let ca = Ca::new();
    let (cert, key, _) = ca.serving();
    let (c, k) = write_pair(&temp_dir("sar"), &cert, &key);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hook = Arc::new(Webhook {
        policies: Arc::clone(&ps),
        authz: Arc::new(authz),
        priority_classes: Arc::new(FakeClasses),
    });
    tokio::spawn(controller::tls::serve(
        listener,
        Arc::new(server_config(Arc::new(ReloadingCert::new(c, k).unwrap())).unwrap()),
        webhook::router(hook),
        std::future::pending(),
    ));
    let s = Server {
        addr,
        ca: ca.der(),
        policies: Arc::clone(&ps),
        rbac: Arc::new(FakeRbac {
            grants: vec![],
            broken: AtomicBool::new(false),
        }),
    };
    let tolerating = |ns: &str, sa: Option<&str>| {
        pod(
            ns,
            sa,
            json!({"tolerations": [{"key": "k", "operator": "Exists"}]}),
        )
    };
    assert_eq!(
        s.validate(&create(&tolerating("kube-system", None))).await,
        (true, String::new())
    );
    let (allowed, msg) = s.validate(&create(&tolerating("team", Some("ci")))).await;
    assert!(!allowed);
    assert_eq!(
        msg,
        format!(
            "{DENIED} (service account team/ci; usable policies: restricted): \
             spec.tolerations[0] (key \"k\" Exists, any effect) is not allowed"
        )
    );
    let sars = || {
        api.requests()
            .iter()
            .filter(|r| r.resource == "subjectaccessreviews" && r.verb == "create")
            .count()
    };
    // One review per (service account, policy): five policies, two service accounts.
    assert_eq!(sars(), 10);
    s.validate(&create(&tolerating("team", Some("ci")))).await;
    assert_eq!(sars(), 10, "answered from the cache");

    // A policy deleted or broken by an update stops counting at once.
    api.delete("schedulingpolicies", "", "privileged");
    for _ in 0..200 {
        if !ps.store.names().contains(&"privileged".to_string()) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (allowed, _) = s.validate(&create(&tolerating("kube-system", None))).await;
    assert!(!allowed);
    watch.abort();
}

/// The largest AdmissionReview the API server sends: an UPDATE carries the pod twice
/// (object and oldObject). A ~1.1 MB pod (within etcd's 1.5 MiB) makes a ~2.2 MB review,
/// over axum's default 2 MiB limit.
#[tokio::test]
async fn an_update_of_a_large_pod_is_answered_and_an_oversized_body_is_refused_with_413() {
    let s = start("large", POLICIES, grants()).await;
    let mut old = pod("team", None, json!({}));
    old["metadata"]["annotations"] = json!({"big": "x".repeat(1_100_000)});
    let mut new = old.clone();
    new["metadata"]["labels"] = json!({"app": "x"});
    let body = review("UPDATE", &new, Some(&old));
    assert!(body.to_string().len() > 2_200_000);
    assert_eq!(
        s.validate(&body).await,
        (true, String::new()),
        "answered, not 413"
    );
    // Over the limit (7 MiB: two objects of the API server's 3 MiB request limit plus
    // 1 MiB): still 413, saying why.
    let mut huge = old.clone();
    huge["metadata"]["annotations"] = json!({"big": "x".repeat(7 * 1024 * 1024)});
    let r = s.post("/validate", &review("CREATE", &huge, None)).await;
    assert_eq!(r.status, 413, "{}", r.text());
    assert!(r.text().contains("7340032 bytes"), "{}", r.text());
}

/// Anything but an AdmissionReview v1 about a pod, with what its operation needs, is a
/// 400 with the reason (never "allowed", never echoed back).
#[tokio::test]
async fn malformed_admission_reviews_are_refused_with_400_and_the_reason() {
    let s = start("strict", POLICIES, grants()).await;
    let p = pod("team", None, json!({}));
    let ok = create(&p);
    let with = |f: &dyn Fn(&mut Value)| {
        let mut r = ok.clone();
        f(&mut r);
        r
    };
    let cases: Vec<(Value, &str)> = vec![
        (
            with(&|r| r["apiVersion"] = json!("evil/v0")),
            "apiVersion \"evil/v0\" is not admission.k8s.io/v1",
        ),
        (
            with(&|r| {
                r.as_object_mut().unwrap().remove("apiVersion");
            }),
            "missing field `apiVersion`",
        ),
        (
            with(&|r| r["kind"] = json!("Pod")),
            "kind \"Pod\" is not AdmissionReview",
        ),
        (
            with(&|r| {
                r.as_object_mut().unwrap().remove("request");
            }),
            "no request",
        ),
        (
            with(&|r| r["request"]["uid"] = json!("")),
            "request.uid is empty",
        ),
        (
            with(&|r| {
                r["request"]["kind"] =
                    json!({"group": "apps", "version": "v1", "kind": "Deployment"})
            }),
            "request.kind apps/v1, Kind=Deployment is not a v1 Pod",
        ),
        (
            with(&|r| {
                r["request"]["resource"] =
                    json!({"group": "", "version": "v1", "resource": "secrets"})
            }),
            "request.resource /v1, Resource=secrets is not v1 pods",
        ),
        (
            with(&|r| r["request"]["subResource"] = json!("status")),
            "request.subResource \"status\": only pods themselves are reviewed",
        ),
        (
            with(&|r| {
                r["request"].as_object_mut().unwrap().remove("object");
            }),
            "request.object is required for CREATE",
        ),
        (
            review("UPDATE", &p, None),
            "request.oldObject is required for UPDATE",
        ),
    ];
    for (body, want) in cases {
        for path in ["/validate", "/mutate"] {
            let r = s.post(path, &body).await;
            assert_eq!(r.status, 400, "{path} {want}: {}", r.text());
            let text = r.text();
            assert!(
                text.starts_with(&format!("{BAD_REVIEW}: {want}")),
                "{path}: {text}"
            );
        }
    }
    // The valid one still passes.
    assert_eq!(s.validate(&ok).await, (true, String::new()));
}

/// One HTTP/1.1 request over TLS presenting `client` (certificate chain and key), if any.
/// `Err` when the handshake fails.
async fn request_as(
    addr: SocketAddr,
    ca: &CertificateDer<'static>,
    client: Option<(CertificateDer<'static>, String)>,
    path: &str,
    body: &[u8],
) -> std::io::Result<(u16, String)> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let cfg = match client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            use rustls::pki_types::PrivateKeyDer;
            use rustls::pki_types::pem::PemObject;
            builder
                .with_client_auth_cert(
                    vec![cert],
                    PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
                )
                .unwrap()
        }
    };
    let tcp = TcpStream::connect(addr).await?;
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await?;
    let method = if body.is_empty() { "GET" } else { "POST" };
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await?;
    tls.write_all(body).await?;
    let mut raw = Vec::new();
    let read = tls.read_to_end(&mut raw).await;
    if raw.is_empty() {
        read?;
        return Err(std::io::Error::other("closed without an answer"));
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text[9..12].parse().unwrap();
    let body = text
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_string();
    Ok((status, body))
}

impl Ca {
    /// A client certificate (TLS client auth) signed by this CA: (cert DER, key PEM).
    fn client(&self, name: &str) -> (CertificateDer<'static>, String) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.der().clone(), key.serialize_pem())
    }
}

/// `ferrosched webhook` as it runs (`webhook::run`, policies from the fake API server): the
/// connection limits it is given, and with a client CA, /mutate and /validate only for
/// callers presenting a certificate that CA signed (the API server's, from the kubeconfig
/// of its AdmissionConfiguration); /healthz stays open for the kubelet's probes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_serves_with_its_limits_and_authenticates_the_api_server_by_client_certificate() {
    let api = fake_apiserver::FakeApiServer::start().await;
    let client = controller::client(Some(&api.kubeconfig())).await.unwrap();
    let dir = temp_dir("run");
    let serving_ca = Ca::new();
    let (cert, key, _) = serving_ca.serving();
    let (c, k) = write_pair(&dir, &cert, &key);
    let client_ca = Ca::new();
    let ca_file = dir.join("client-ca.crt");
    std::fs::write(&ca_file, client_ca.issuer.pem()).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let header = std::time::Duration::from_millis(400);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(webhook::run(webhook::WebhookOptions {
        client,
        listener,
        cert: Arc::new(ReloadingCert::new(c, k).unwrap()),
        allowed_ttl: std::time::Duration::from_secs(30),
        denied_ttl: std::time::Duration::from_secs(10),
        limits: controller::conn::ServeLimits {
            header_timeout: header,
            max_connections: 8,
            ..Default::default()
        },
        client_ca: Some(ca_file),
        shutdown: Box::pin(async move {
            let _ = stopped.await;
        }),
    }));
    let ca = serving_ca.der();
    let apiserver = client_ca.client("kube-apiserver");
    for _ in 0..200 {
        if matches!(
            request_as(addr, &ca, None, "/healthz", b"").await,
            Ok((200, _))
        ) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let body = create(&pod("team", None, json!({}))).to_string();
    // No certificate: health yes, admission no.
    assert_eq!(
        request_as(addr, &ca, None, "/healthz", b"").await.unwrap(),
        (200, "ok".to_string())
    );
    let (status, text) = request_as(addr, &ca, None, "/validate", body.as_bytes())
        .await
        .unwrap();
    assert_eq!(status, 401, "{text}");
    assert_eq!(text, webhook::CLIENT_CERT_REQUIRED);
    // The API server's certificate: answered.
    let (status, text) = request_as(
        addr,
        &ca,
        Some(apiserver.clone()),
        "/validate",
        body.as_bytes(),
    )
    .await
    .unwrap();
    assert_eq!(status, 200, "{text}");
    // A certificate another CA signed: the handshake fails.
    let stranger = Ca::new().client("someone");
    assert!(
        request_as(addr, &ca, Some(stranger), "/validate", body.as_bytes())
            .await
            .is_err()
    );
    // The connection limits apply: an unfinished head is closed after header_timeout.
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    tls.write_all(b"POST /validate HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let t = std::time::Instant::now();
    let mut sink = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        tls.read_to_end(&mut sink),
    )
    .await
    .expect("closed after the header timeout")
    .ok();
    assert!(t.elapsed() >= header.mul_f64(0.9), "{:?}", t.elapsed());
    let _ = stop.send(());
    task.await.unwrap().unwrap();
    let _ = std::fs::remove_dir_all(dir);
}
