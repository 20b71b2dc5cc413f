//! The admission chain on pod writes, through kube's client: server defaults, Priority,
//! DefaultTolerationSeconds, RuntimeClass, and webhooks served here over HTTPS (a test CA),
//! including the built-in plugins' second run after a webhook's patch.

use std::sync::{Arc, Mutex};

use base64::Engine;
use fake_apiserver::{AdmissionPlugin, FakeApiServer};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use scheduler_core::policy;
use serde_json::{Value, json};

async fn client(server: &FakeApiServer) -> Client {
    let kc = Kubeconfig::read_from(server.kubeconfig()).unwrap();
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

fn pod(name: &str, spec: Value) -> Pod {
    let mut s = json!({"containers": [{"name": "c", "image": "i"}]});
    for (k, v) in spec.as_object().unwrap() {
        s[k] = v.clone();
    }
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": "x"}}, "spec": s}))
        .unwrap()
}

/// (code, message) of a refused request.
fn refusal(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("expected an API error, got {other}"),
    }
}

async fn create(server: &FakeApiServer, p: Pod) -> Result<Value, (u16, String)> {
    let pods: Api<Pod> = Api::namespaced(client(server).await, "ns");
    pods.create(&PostParams::default(), &p)
        .await
        .map(|p| serde_json::to_value(p).unwrap())
        .map_err(refusal)
}

fn priority_class(server: &FakeApiServer, name: &str, value: i64, global_default: bool) {
    server.apply(
        "priorityclasses",
        &json!({"metadata": {"name": name}, "value": value, "globalDefault": global_default}),
    );
}

fn keys(tolerations: &Value) -> Vec<&str> {
    tolerations
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["key"].as_str().unwrap_or(""))
        .collect()
}

// ---- a webhook over HTTPS ----

/// What a test webhook answers to an AdmissionReview request: (allowed, message, patch).
type Answer = Box<dyn Fn(&Value) -> (bool, String, Option<Value>) + Send + Sync>;

struct Hook {
    url: String,
    ca_bundle: String,
    /// Every AdmissionReview request received.
    seen: Arc<Mutex<Vec<Value>>>,
}

/// Serves `answer` at https://localhost:<port>/ with a certificate from a fresh CA.
async fn serve_hook(answer: Answer) -> Hook {
    let (cfg, pem) = fake_apiserver::tls::server_config(&["localhost"], &[]);
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let answer = Arc::new(answer);
    let seen2 = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, answer, seen) =
                (acceptor.clone(), Arc::clone(&answer), Arc::clone(&seen2));
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let (answer, seen) = (Arc::clone(&answer), Arc::clone(&seen));
                        async move {
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            let review: Value = serde_json::from_slice(&body).unwrap();
                            let request = review["request"].clone();
                            seen.lock().unwrap().push(request.clone());
                            let (allowed, message, patch) = answer(&request);
                            let mut response = json!({"uid": request["uid"], "allowed": allowed});
                            if !allowed {
                                response["status"] =
                                    json!({"code": 403, "reason": "Forbidden", "message": message});
                            }
                            if let Some(p) = patch {
                                response["patchType"] = json!("JSONPatch");
                                response["patch"] = json!(
                                    base64::engine::general_purpose::STANDARD.encode(p.to_string())
                                );
                            }
                            let out = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response});
                            Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                                Bytes::from(out.to_string()),
                            )))
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Hook {
        url: format!("https://localhost:{port}/"),
        ca_bundle: base64::engine::general_purpose::STANDARD.encode(pem),
        seen,
    }
}

/// Registers `hook` for pod `operations` in a Mutating- or ValidatingWebhookConfiguration.
fn register(server: &FakeApiServer, kind: &str, name: &str, url: &str, ca: &str, extra: Value) {
    let mut w = json!({
        "name": format!("{name}.test.io"),
        "clientConfig": {"url": url, "caBundle": ca},
        "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
        "admissionReviewVersions": ["v1"], "sideEffects": "None",
    });
    for (k, v) in extra.as_object().unwrap() {
        w[k] = v.clone();
    }
    let collection = match kind {
        "mutating" => "mutatingwebhookconfigurations",
        _ => "validatingwebhookconfigurations",
    };
    server.apply(
        collection,
        &json!({"metadata": {"name": name}, "webhooks": [w]}),
    );
}

/// A mutating webhook that defaults like a SchedulingPolicy whose `default` is `defaults`
/// (YAML), through `policy::apply_defaults` (the webhook's code), or through the defaulting
/// before the admission-chain fix (`old`: a bare `add` of each unset field).
async fn policy_hook(defaults: &str, old: bool) -> Hook {
    let text = format!(
        "apiVersion: scheduling.ferrosched.io/v1alpha1\nkind: SchedulingPolicy\nmetadata: {{name: p}}\nspec:\n  default:\n{}",
        defaults
            .lines()
            .map(|l| format!("    {l}\n"))
            .collect::<String>()
    );
    let spec = policy::parse(&text).unwrap().remove(0).spec;
    serve_hook(Box::new(move |req| {
        let pod: k8s_openapi::api::core::v1::Pod =
            serde_json::from_value(req["object"].clone()).unwrap();
        if old {
            // Before the fix: priorityClassName added, the server's spec.priority left.
            let s = pod.spec.unwrap();
            let mut ops = vec![];
            if let Some(n) = &spec.defaults.priority_class_name
                && s.priority_class_name.is_none()
            {
                ops.push(json!({"op": "add", "path": "/spec/priorityClassName", "value": n}));
            }
            return (true, String::new(), Some(Value::Array(ops)));
        }
        let d = policy::apply_defaults(&pod, &spec);
        (
            true,
            String::new(),
            Some(serde_json::to_value(&d.patch).unwrap()),
        )
    }))
    .await
}

// ---- built-in plugins ----

#[tokio::test]
async fn server_defaults_priority_and_default_tolerations_on_create() {
    let server = FakeApiServer::start().await;
    let p = create(&server, pod("plain", json!({}))).await.unwrap();
    assert_eq!(p["spec"]["schedulerName"], "default-scheduler");
    assert_eq!(p["spec"]["priority"], 0);
    assert!(p["spec"].get("priorityClassName").is_none());
    assert_eq!(
        keys(&p["spec"]["tolerations"]),
        [
            "node.kubernetes.io/not-ready",
            "node.kubernetes.io/unreachable"
        ]
    );
    assert_eq!(p["spec"]["tolerations"][0]["tolerationSeconds"], 300);

    priority_class(&server, "gold", 1000, false);
    let p = create(&server, pod("gold", json!({"priorityClassName": "gold"})))
        .await
        .unwrap();
    assert_eq!(p["spec"]["priority"], 1000);
    assert_eq!(p["spec"]["preemptionPolicy"], "PreemptLowerPriority");
    // An equal value is accepted; another is refused with upstream's message.
    create(
        &server,
        pod(
            "equal",
            json!({"priorityClassName": "gold", "priority": 1000}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        create(&server, pod("wrong", json!({"priorityClassName": "gold", "priority": 5}))).await.unwrap_err(),
        (403, "pods \"wrong\" is forbidden: the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name".into())
    );
    assert_eq!(
        create(&server, pod("never", json!({"priorityClassName": "gold", "preemptionPolicy": "Never"}))).await.unwrap_err(),
        (403, "pods \"never\" is forbidden: the string value of PreemptionPolicy (Never) must not be provided in pod spec; priority admission controller computed PreemptLowerPriority from the given PriorityClass name".into())
    );
    assert_eq!(
        create(
            &server,
            pod("missing", json!({"priorityClassName": "nope"}))
        )
        .await
        .unwrap_err(),
        (
            403,
            "pods \"missing\" is forbidden: no PriorityClass with name nope was found".into()
        )
    );
    let p = create(
        &server,
        pod(
            "system",
            json!({"priorityClassName": "system-node-critical"}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(p["spec"]["priority"], 2_000_001_000);

    // A globalDefault class names itself on pods without one (the lowest of several).
    priority_class(&server, "cluster-default", 7, true);
    priority_class(&server, "cluster-default-high", 9, true);
    let p = create(&server, pod("defaulted", json!({}))).await.unwrap();
    assert_eq!(p["spec"]["priorityClassName"], "cluster-default");
    assert_eq!(p["spec"]["priority"], 7);

    // A pod tolerating every NoExecute taint gets no default toleration.
    let p = create(
        &server,
        pod(
            "tolerant",
            json!({"tolerations": [{"operator": "Exists", "effect": "NoExecute"}]}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(p["spec"]["tolerations"].as_array().unwrap().len(), 1);

    // Switched off, as a cluster admin can: the pod is stored as sent.
    server.disable_admission_plugin(AdmissionPlugin::Priority);
    server.disable_admission_plugin(AdmissionPlugin::DefaultTolerationSeconds);
    let p = create(&server, pod("off", json!({"priority": 5})))
        .await
        .unwrap();
    assert_eq!(p["spec"]["priority"], 5);
    assert!(p["spec"].get("tolerations").is_none());
}

#[tokio::test]
async fn priority_is_kept_on_update() {
    let server = FakeApiServer::start().await;
    priority_class(&server, "gold", 1000, false);
    create(&server, pod("p", json!({"priorityClassName": "gold"})))
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client(&server).await, "ns");
    let mut p = pods.get("p").await.unwrap();
    let spec = p.spec.as_mut().unwrap();
    spec.priority = None;
    spec.preemption_policy = None;
    let p = pods.replace("p", &PostParams::default(), &p).await.unwrap();
    let spec = p.spec.unwrap();
    assert_eq!(spec.priority, Some(1000));
    assert_eq!(
        spec.preemption_policy.as_deref(),
        Some("PreemptLowerPriority")
    );
}

#[tokio::test]
async fn runtime_class_admission_refuses_a_missing_class_and_merges_a_present_one() {
    let server = FakeApiServer::start().await;
    assert_eq!(
        create(
            &server,
            pod("sandboxed", json!({"runtimeClassName": "gvisor"}))
        )
        .await
        .unwrap_err(),
        (
            403,
            "pods \"sandboxed\" is forbidden: pod rejected: RuntimeClass \"gvisor\" not found"
                .into()
        )
    );
    server.apply(
        "runtimeclasses",
        &json!({"metadata": {"name": "gvisor"}, "handler": "runsc",
                "overhead": {"podFixed": {"cpu": "250m"}},
                "scheduling": {"nodeSelector": {"sandbox": "gvisor"},
                               "tolerations": [{"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}]}}),
    );
    let p = create(
        &server,
        pod(
            "sandboxed",
            json!({"runtimeClassName": "gvisor", "nodeSelector": {"disk": "ssd"},
                                "tolerations": [{"key": "a", "operator": "Exists"}]}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(p["spec"]["overhead"], json!({"cpu": "250m"}));
    assert_eq!(
        p["spec"]["nodeSelector"],
        json!({"disk": "ssd", "sandbox": "gvisor"})
    );
    assert_eq!(
        keys(&p["spec"]["tolerations"]),
        [
            "a",
            "node.kubernetes.io/not-ready",
            "node.kubernetes.io/unreachable",
            "sandbox"
        ]
    );
    assert_eq!(
        create(&server, pod("conflict", json!({"runtimeClassName": "gvisor", "nodeSelector": {"sandbox": "kata"}}))).await.unwrap_err(),
        (403, "pods \"conflict\" is forbidden: conflict: runtimeClass.scheduling.nodeSelector[sandbox] = gvisor; pod.spec.nodeSelector[sandbox] = kata".into())
    );
    assert_eq!(
        create(&server, pod("overhead", json!({"runtimeClassName": "gvisor", "overhead": {"cpu": "1"}}))).await.unwrap_err(),
        (403, "pods \"overhead\" is forbidden: pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead".into())
    );
    assert_eq!(
        create(&server, pod("stray-overhead", json!({"overhead": {"cpu": "1"}}))).await.unwrap_err(),
        (403, "pods \"stray-overhead\" is forbidden: pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead".into())
    );
    // Off: a pod naming a missing class is stored and waits for its class.
    server.disable_admission_plugin(AdmissionPlugin::RuntimeClass);
    let p = create(&server, pod("late", json!({"runtimeClassName": "kata"})))
        .await
        .unwrap();
    assert_eq!(p["spec"]["runtimeClassName"], "kata");
    assert!(p["spec"].get("nodeSelector").is_none());
}

// ---- webhooks ----

/// The bug the real API server showed: a webhook that adds a priorityClassName and leaves
/// the spec.priority the Priority plugin computed gets the pod refused when the plugin runs
/// again; the defaulting of `policy::apply_defaults` is admitted with the class's value.
#[tokio::test]
async fn a_priority_class_default_must_remove_the_computed_priority() {
    let server = FakeApiServer::start().await;
    priority_class(&server, "gold", 1000, false);
    let old = policy_hook("priorityClassName: gold", true).await;
    register(
        &server,
        "mutating",
        "policy",
        &old.url,
        &old.ca_bundle,
        json!({}),
    );
    assert_eq!(
        create(&server, pod("p", json!({}))).await.unwrap_err(),
        (403, "pods \"p\" is forbidden: the integer value of priority (0) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name".into())
    );
    // The webhook saw the pod as the server had it by then: priority 0, default tolerations.
    let seen = old.seen.lock().unwrap()[0].clone();
    assert_eq!(seen["object"]["spec"]["priority"], 0);
    assert_eq!(seen["object"]["spec"]["schedulerName"], "default-scheduler");
    assert_eq!(
        seen["object"]["spec"]["tolerations"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(seen["operation"], "CREATE");
    assert_eq!(seen["userInfo"]["username"], "system:admin");

    let new = policy_hook("priorityClassName: gold", false).await;
    register(
        &server,
        "mutating",
        "policy",
        &new.url,
        &new.ca_bundle,
        json!({}),
    );
    let p = create(&server, pod("p", json!({}))).await.unwrap();
    assert_eq!(p["spec"]["priorityClassName"], "gold");
    assert_eq!(p["spec"]["priority"], 1000);
    assert_eq!(p["spec"]["preemptionPolicy"], "PreemptLowerPriority");
}

#[tokio::test]
async fn a_toleration_default_is_appended_to_the_servers_defaults() {
    let server = FakeApiServer::start().await;
    let hook = policy_hook(
        "tolerations: [{key: dedicated, operator: Equal, value: team-a, effect: NoSchedule}]",
        false,
    )
    .await;
    register(
        &server,
        "mutating",
        "policy",
        &hook.url,
        &hook.ca_bundle,
        json!({}),
    );
    let p = create(&server, pod("p", json!({}))).await.unwrap();
    assert_eq!(
        keys(&p["spec"]["tolerations"]),
        [
            "node.kubernetes.io/not-ready",
            "node.kubernetes.io/unreachable",
            "dedicated"
        ]
    );
}

#[tokio::test]
async fn reinvocation_runs_the_built_in_plugins_on_the_patched_pod() {
    let server = FakeApiServer::start().await;
    server.apply(
        "runtimeclasses",
        &json!({"metadata": {"name": "kata"}, "handler": "kata",
                "scheduling": {"nodeSelector": {"sandbox": "kata"}}}),
    );
    // A webhook replacing the tolerations drops the server's; they come back. Its
    // runtimeClassName is not admitted by RuntimeClass again (CREATE only runs it once the
    // chain reruns: the class's nodeSelector is merged).
    let hook = serve_hook(Box::new(|_| {
        (true, String::new(), Some(json!([
            {"op": "replace", "path": "/spec/tolerations", "value": [{"key": "x", "operator": "Exists"}]},
            {"op": "add", "path": "/spec/runtimeClassName", "value": "kata"},
        ])))
    }))
    .await;
    register(
        &server,
        "mutating",
        "m",
        &hook.url,
        &hook.ca_bundle,
        json!({}),
    );
    let p = create(&server, pod("p", json!({}))).await.unwrap();
    assert_eq!(
        keys(&p["spec"]["tolerations"]),
        [
            "x",
            "node.kubernetes.io/not-ready",
            "node.kubernetes.io/unreachable"
        ]
    );
    assert_eq!(p["spec"]["nodeSelector"], json!({"sandbox": "kata"}));
    // Not IfNeeded: called once.
    assert_eq!(hook.seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn validating_webhooks_deny_with_their_message_and_see_updates() {
    let server = FakeApiServer::start().await;
    let hook = serve_hook(Box::new(|req| {
        let tolerations = req["object"]["spec"]["tolerations"]
            .as_array()
            .map_or(0, Vec::len);
        if tolerations > 2 {
            (
                false,
                format!(
                    "{} spec.tolerations[0] is not allowed",
                    req["operation"].as_str().unwrap()
                ),
                None,
            )
        } else {
            (true, String::new(), None)
        }
    }))
    .await;
    register(
        &server,
        "validating",
        "v",
        &hook.url,
        &hook.ca_bundle,
        json!({}),
    );
    let (code, message) = create(
        &server,
        pod(
            "p",
            json!({"tolerations": [{"key": "k", "operator": "Exists"}]}),
        ),
    )
    .await
    .unwrap_err();
    assert_eq!(code, 403);
    assert_eq!(
        message,
        "admission webhook \"v.test.io\" denied the request: CREATE spec.tolerations[0] is not allowed"
    );
    create(&server, pod("p", json!({}))).await.unwrap();
    // UPDATE through PATCH: adding a toleration is denied, relabelling passes.
    let pods: Api<Pod> = Api::namespaced(client(&server).await, "ns");
    let p = pods.get("p").await.unwrap();
    let mut tolerations = serde_json::to_value(&p.spec.as_ref().unwrap().tolerations).unwrap();
    tolerations
        .as_array_mut()
        .unwrap()
        .push(json!({"key": "k", "operator": "Exists"}));
    let err = pods
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"tolerations": tolerations}})),
        )
        .await
        .unwrap_err();
    assert_eq!(
        refusal(err).1,
        "admission webhook \"v.test.io\" denied the request: UPDATE spec.tolerations[0] is not allowed"
    );
    pods.patch(
        "p",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "y"}}})),
    )
    .await
    .unwrap();
    let last = hook.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(last["operation"], "UPDATE");
    assert_eq!(last["oldObject"]["metadata"]["labels"]["app"], "x");
}

#[tokio::test]
async fn failure_policy_selectors_and_the_requesting_user() {
    let server = FakeApiServer::start().await;
    // Nothing listens there: Fail refuses, Ignore admits.
    let dead = "https://localhost:1/";
    register(&server, "validating", "dead", dead, "", json!({}));
    let (code, message) = create(&server, pod("p", json!({}))).await.unwrap_err();
    assert_eq!(code, 500);
    assert!(
        message.starts_with("Internal error occurred: failed calling webhook \"dead.test.io\": failed to call webhook: Post \"https://localhost:1/?timeout=10s\""),
        "{message}"
    );
    register(
        &server,
        "validating",
        "dead",
        dead,
        "",
        json!({"failurePolicy": "Ignore"}),
    );
    create(&server, pod("p", json!({}))).await.unwrap();

    // Selectors: only pods labelled app=x in namespaces labelled team=a reach the webhook.
    let hook = serve_hook(Box::new(|_| (false, "no".into(), None))).await;
    register(
        &server,
        "validating",
        "picky",
        &hook.url,
        &hook.ca_bundle,
        json!({"namespaceSelector": {"matchLabels": {"team": "a"}},
               "objectSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["x"]}]}}),
    );
    create(&server, pod("outside", json!({}))).await.unwrap();
    server.apply(
        "namespaces",
        &json!({"metadata": {"name": "ns", "labels": {"team": "a"}}}),
    );
    assert_eq!(
        create(&server, pod("inside", json!({})))
            .await
            .unwrap_err()
            .0,
        403
    );
    assert_eq!(hook.seen.lock().unwrap().len(), 1);

    // The user it is told about: impersonation headers, as kubectl --as sends them.
    let kc = Kubeconfig::read_from(server.kubeconfig()).unwrap();
    let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    config.auth_info.impersonate = Some("system:serviceaccount:ns:builder".into());
    config.auth_info.impersonate_groups = Some(vec!["system:serviceaccounts".into()]);
    let pods: Api<Pod> = Api::namespaced(Client::try_from(config).unwrap(), "ns");
    let _ = pods
        .create(&PostParams::default(), &pod("as-sa", json!({})))
        .await;
    let seen = hook.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        seen["userInfo"]["username"],
        "system:serviceaccount:ns:builder"
    );
    assert_eq!(
        seen["userInfo"]["groups"],
        json!(["system:serviceaccounts", "system:authenticated"])
    );

    // Switched off, no webhook is called.
    server.disable_admission_plugin(AdmissionPlugin::ValidatingAdmissionWebhook);
    create(&server, pod("unchecked", json!({}))).await.unwrap();
    assert_eq!(hook.seen.lock().unwrap().len(), 2);
}

/// With a globalDefault class the Priority plugin names it on the pod and copies its
/// preemptionPolicy; a policy default must replace the class and remove both derived
/// fields, or the plugin's second run refuses the pod.
#[tokio::test]
async fn a_priority_class_default_replaces_the_global_default_class() {
    let server = FakeApiServer::start().await;
    priority_class(&server, "gold", 1000, false);
    server.apply(
        "priorityclasses",
        &json!({"metadata": {"name": "cluster-default"}, "value": 5, "globalDefault": true,
                "preemptionPolicy": "Never"}),
    );
    let spec = policy::parse(
        "apiVersion: scheduling.ferrosched.io/v1alpha1\nkind: SchedulingPolicy\nmetadata: {name: p}\nspec:\n  default:\n    priorityClassName: gold\n",
    )
    .unwrap()
    .remove(0)
    .spec;
    let server_set = policy::ServerSet {
        global_default_class: Some(policy::GlobalDefaultClass {
            name: "cluster-default".into(),
            preemption_policy: Some("Never".into()),
        }),
    };
    // Keeping the copied preemptionPolicy: refused by the reinvoked Priority plugin.
    let (spec2, set2) = (spec.clone(), server_set.clone());
    let keeps = serve_hook(Box::new(move |req| {
        let pod: Pod = serde_json::from_value(req["object"].clone()).unwrap();
        let ops: Vec<Value> = policy::apply_defaults_after(&pod, &spec2, &set2)
            .patch
            .iter()
            .map(|op| serde_json::to_value(op).unwrap())
            .filter(|op| op["path"] != "/spec/preemptionPolicy")
            .collect();
        (true, String::new(), Some(Value::Array(ops)))
    }))
    .await;
    register(
        &server,
        "mutating",
        "policy",
        &keeps.url,
        &keeps.ca_bundle,
        json!({}),
    );
    assert_eq!(
        create(&server, pod("p", json!({}))).await.unwrap_err(),
        (403, "pods \"p\" is forbidden: the string value of PreemptionPolicy (Never) must not be provided in pod spec; priority admission controller computed PreemptLowerPriority from the given PriorityClass name".into())
    );
    let seen = keeps.seen.lock().unwrap()[0]["object"]["spec"].clone();
    assert_eq!(seen["priorityClassName"], "cluster-default");
    assert_eq!(seen["priority"], 5);

    // The whole patch: admitted with gold's value and policy.
    let full = serve_hook(Box::new(move |req| {
        let pod: Pod = serde_json::from_value(req["object"].clone()).unwrap();
        let d = policy::apply_defaults_after(&pod, &spec, &server_set);
        (
            true,
            String::new(),
            Some(serde_json::to_value(&d.patch).unwrap()),
        )
    }))
    .await;
    register(
        &server,
        "mutating",
        "policy",
        &full.url,
        &full.ca_bundle,
        json!({}),
    );
    let p = create(&server, pod("p", json!({}))).await.unwrap();
    assert_eq!(p["spec"]["priorityClassName"], "gold");
    assert_eq!(p["spec"]["priority"], 1000);
    assert_eq!(p["spec"]["preemptionPolicy"], "PreemptLowerPriority");
}
