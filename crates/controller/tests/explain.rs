//! `run --explain` against the fake API server: a pending pod's last explanation is served
//! at /debug/explain behind the secure port's authorization, and `--explain-annotations`
//! writes kube-scheduler-simulator's result annotations for the profiles it names only.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use controller::explain::ExplainOptions;
use fake_apiserver::FakeApiServer;
use serde_json::{Value, json};
use support::{http_get_as, wait_for};

const CONFIG: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
profiles:
- schedulerName: default-scheduler
- schedulerName: quiet
";

fn node(name: &str, cpu: &str) -> Value {
    json!({
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    })
}

fn pod(name: &str, cpu: &str, scheduler: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "c", "image": "img", "resources": {"requests": {"cpu": cpu}}}],
        },
    })
}

struct Running {
    health: std::net::SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<controller::Result<()>>,
}

async fn start(
    server: &FakeApiServer,
    auth: Option<Arc<controller::auth::DelegatedAuth>>,
    explain: ExplainOptions,
) -> Running {
    start_with(server, auth, explain, CONFIG).await
}

async fn start_with(
    server: &FakeApiServer,
    auth: Option<Arc<controller::auth::DelegatedAuth>>,
    explain: ExplainOptions,
    config: &str,
) -> Running {
    let loaded = scheduler_core::config::load_str(config, "test.yaml").unwrap();
    let client = controller::client(Some(&server.kubeconfig()))
        .await
        .unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let health = listener.local_addr().unwrap();
    let task = tokio::spawn(controller::run(controller::RunOptions {
        health: Some(listener),
        health_auth: auth,
        explain,
        ..controller::RunOptions::new(
            client,
            loaded,
            Box::pin(async move {
                let _ = rx.await;
            }),
        )
    }));
    Running {
        health,
        stop: tx,
        task,
    }
}

impl Running {
    async fn stop(self) {
        support::stop_controller(self.stop, self.task).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_pods_explanation_is_served_to_authorized_users_only() {
    let server = FakeApiServer::start().await;
    const ADMIN: &str = "alice";
    server.add_token("alice-token", ADMIN, &["system:authenticated"]);
    server.add_token("bob-token", "bob", &["system:authenticated"]);
    server.grant(fake_apiserver::Grant::non_resource(
        ADMIN,
        "get",
        "/debug/explain",
    ));
    server.grant(fake_apiserver::Grant::non_resource(
        ADMIN,
        "get",
        "/debug/explain/*",
    ));
    server.apply("nodes", &node("small-1", "1"));
    server.apply("nodes", &node("small-2", "2"));
    let client = controller::client(Some(&server.kubeconfig()))
        .await
        .unwrap();
    let auth = controller::auth::DelegatedAuth::new(
        Some(client.clone()),
        Some(client),
        controller::auth::DEFAULT_ALWAYS_ALLOW_PATHS
            .map(String::from)
            .to_vec(),
    );
    let running = start(
        &server,
        Some(Arc::new(auth)),
        ExplainOptions {
            serve: true,
            ..Default::default()
        },
    )
    .await;
    server.apply("pods", &pod("huge", "8", "default-scheduler"));
    server.apply("pods", &pod("fits", "500m", "default-scheduler"));
    wait_for("fits is bound", || {
        server.node_of("default", "fits").is_some()
    })
    .await;
    let addr = running.health;
    let path = "/debug/explain/default/huge";
    let deadline = Instant::now() + Duration::from_secs(10);
    let body = loop {
        let (status, b) = http_get_as(addr, path, Some("alice-token")).await;
        if status.contains("200") {
            break b;
        }
        assert!(status.contains("404"), "{status} {b}");
        assert!(Instant::now() < deadline, "never explained: {b}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let e: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(e["schema"], "ferrosched.io/explain/v1");
    assert_eq!(e["pod"], "default/huge");
    assert_eq!(e["outcome"], "unschedulable");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.starts_with("0/2 nodes are available: 2 Insufficient cpu."),
        "{message}"
    );
    let verdicts: Vec<(&str, &str)> = e["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["node"].as_str().unwrap(), n["plugin"].as_str().unwrap()))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("small-1", "NodeResourcesFit"),
            ("small-2", "NodeResourcesFit")
        ]
    );
    // The table, as `ferrosched explain` prints it.
    let (status, table) =
        http_get_as(addr, &format!("{path}?format=table"), Some("alice-token")).await;
    assert!(status.contains("200"), "{status}");
    assert!(table.contains("Insufficient cpu"), "{table}");
    // The list names the pending pod and not the bound one.
    let (status, list) = http_get_as(addr, "/debug/explain", Some("alice-token")).await;
    assert!(status.contains("200"), "{status} {list}");
    let list: Value = serde_json::from_str(&list).unwrap();
    let pods: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["pod"].as_str().unwrap())
        .collect();
    assert_eq!(pods, ["default/huge"]);
    // No token: system:anonymous may not; nor may an authenticated user without the grant.
    let (status, body) = http_get_as(addr, path, None).await;
    assert!(status.contains("403"), "{status}");
    assert!(
        body.contains("User \"system:anonymous\" cannot get path \"/debug/explain/default/huge\""),
        "{body}"
    );
    let (status, _) = http_get_as(addr, "/debug/explain", Some("bob-token")).await;
    assert!(status.contains("403"), "{status}");
    // A node big enough appears: the pod is bound and its explanation dropped.
    server.apply("nodes", &node("big", "16"));
    wait_for("huge is bound", || {
        server.node_of("default", "huge").is_some()
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, b) = http_get_as(addr, path, Some("alice-token")).await;
        if status.contains("404") {
            assert!(b.contains("no explanation for pod default/huge"), "{b}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still kept after binding: {status}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    running.stop().await;
}

/// The explanation kept for `namespace/pod`, once there is one (10 s at most).
async fn explanation(addr: std::net::SocketAddr, namespace: &str, pod: &str) -> Value {
    let path = format!("/debug/explain/{namespace}/{pod}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, b) = http_get_as(addr, &path, None).await;
        if status.contains("200") {
            return serde_json::from_str(&b).unwrap();
        }
        assert!(status.contains("404"), "{status} {b}");
        assert!(Instant::now() < deadline, "{path} never explained: {b}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A gang too big for the cluster: its members are never tried alone, and each one's kept
/// explanation is its group cycle's, with the group section saying the quorum failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_gangs_members_are_explained_by_their_group_cycle() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "ml"}}));
    for n in ["g1", "g2"] {
        server.apply(
            "nodes",
            &json!({
                "metadata": {"name": n},
                "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110",
                                           "nvidia.com/gpu": "8"}},
            }),
        );
    }
    server.apply(
        "podgroups",
        &json!({
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
        }),
    );
    let members = ["w0", "w1", "w2"];
    for m in members {
        server.apply(
            "pods",
            &json!({
                "metadata": {"name": m, "namespace": "ml"},
                "spec": {
                    "schedulingGroup": {"podGroupName": "train"},
                    "containers": [{"name": "c", "image": "trainer",
                                    "resources": {"requests": {"nvidia.com/gpu": "8"}}}],
                },
            }),
        );
    }
    let running = start(
        &server,
        None,
        ExplainOptions {
            serve: true,
            ..Default::default()
        },
    )
    .await;
    for m in members {
        let e = explanation(running.health, "ml", m).await;
        assert_eq!(e["pod"], format!("ml/{m}"));
        assert_eq!(e["outcome"], "unschedulable", "{e:#}");
        let g = &e["group"];
        assert_eq!(g["podGroup"], "ml/train", "{e:#}");
        assert_eq!(g["policy"], "gang");
        assert_eq!(g["minCount"], 3);
        assert_eq!(g["outcome"], "unschedulable", "{g:#}");
        let reason = g["message"].as_str().unwrap();
        assert!(
            reason.starts_with("minCount (3) cannot be satisfied"),
            "{reason}"
        );
        assert_eq!(g["pods"]["queued"], 3, "{g:#}");
        assert_eq!(g["pods"]["total"], 3, "{g:#}");
        let results: Vec<&str> = g["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["result"].as_str().unwrap())
            .collect();
        assert_eq!(results, ["fitted", "fitted", "unschedulable"], "{g:#}");
        // The FailedScheduling message the pod gets.
        let message = e["message"].as_str().unwrap();
        assert!(
            message.starts_with("pod group \"train\": minCount (3)")
                || message.starts_with("0/2 nodes are available"),
            "{message}"
        );
    }
    assert!(server.node_of("ml", "w0").is_none());
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_explain_the_debug_path_says_how_to_turn_it_on() {
    let server = FakeApiServer::start().await;
    let running = start(&server, None, ExplainOptions::default()).await;
    let (status, body) = http_get_as(running.health, "/debug/explain/default/x", None).await;
    assert!(status.contains("404"), "{status}");
    assert_eq!(body, controller::explain::NOT_RECORDING);
    running.stop().await;
}

fn annotations(server: &FakeApiServer, name: &str) -> serde_json::Map<String, Value> {
    server
        .get("pods", "default", name)
        .and_then(|p| p["metadata"]["annotations"].as_object().cloned())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulator_annotations_are_written_for_the_profiles_named_only() {
    let server = FakeApiServer::start().await;
    server.apply("nodes", &node("n1", "4"));
    server.apply("nodes", &node("n2", "1"));
    let running = start(
        &server,
        None,
        ExplainOptions {
            annotate_profiles: BTreeSet::from(["default-scheduler".to_string()]),
            ..Default::default()
        },
    )
    .await;
    server.apply("pods", &pod("shown", "2", "default-scheduler"));
    server.apply("pods", &pod("unshown", "2", "quiet"));
    wait_for("both bound", || {
        server.node_of("default", "shown").is_some()
            && server.node_of("default", "unshown").is_some()
    })
    .await;
    wait_for("annotations written", || {
        annotations(&server, "shown").contains_key("scheduler-simulator/selected-node")
    })
    .await;
    let a = annotations(&server, "shown");
    assert_eq!(a["scheduler-simulator/selected-node"], "n1");
    let filter: Value =
        serde_json::from_str(a["scheduler-simulator/filter-result"].as_str().unwrap()).unwrap();
    assert_eq!(filter["n1"]["NodeResourcesFit"], "passed");
    assert_eq!(filter["n2"]["NodeResourcesFit"], "Insufficient cpu");
    // Filters after the rejecting one never ran on n2.
    assert!(filter["n2"].get("VolumeBinding").is_none(), "{filter}");
    assert_eq!(filter["n1"]["VolumeBinding"], "passed");
    assert_eq!(filter["n2"]["TaintToleration"], "passed");
    // One feasible node: scoring was skipped, as the simulator would show it.
    assert_eq!(a["scheduler-simulator/score-result"], "{}");
    assert_eq!(a["scheduler-simulator/finalscore-result"], "{}");
    // The other profile's pod carries none.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let quiet = annotations(&server, "unshown");
    assert!(
        !quiet.keys().any(|k| k.starts_with("scheduler-simulator/")),
        "{quiet:?}"
    );
    running.stop().await;
}

/// A pod every node of which an extender refuses: its cycle waits for the extender off the
/// scheduling loop, and its kept explanation names the extender's verdict on each node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extenders_verdicts_are_explained() {
    let server = FakeApiServer::start().await;
    server.apply("nodes", &node("n1", "4"));
    server.apply("nodes", &node("n2", "4"));
    let refuse_all = |axum::Json(args): axum::Json<Value>| async move {
        let failed: serde_json::Map<String, Value> = args["Nodes"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                let name = n["metadata"]["name"].as_str().unwrap().to_string();
                (name, json!("reserved for another team"))
            })
            .collect();
        axum::Json(json!({"Nodes": {"items": []}, "FailedNodes": failed}))
    };
    let app = axum::Router::new().route("/filter", axum::routing::post(refuse_all));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let config = format!("{CONFIG}extenders:\n- urlPrefix: {url}\n  filterVerb: filter\n");
    let running = start_with(
        &server,
        None,
        ExplainOptions {
            serve: true,
            ..Default::default()
        },
        &config,
    )
    .await;
    server.apply("pods", &pod("refused", "100m", "default-scheduler"));
    let e = explanation(running.health, "default", "refused").await;
    assert_eq!(e["outcome"], "unschedulable", "{e:#}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.starts_with("0/2 nodes are available: 2 reserved for another team."),
        "{message}"
    );
    let verdicts: Vec<(&str, &str)> = e["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["node"].as_str().unwrap(), n["plugin"].as_str().unwrap()))
        .collect();
    assert_eq!(
        verdicts,
        [("n1", url.as_str()), ("n2", url.as_str())],
        "{e:#}"
    );
    running.stop().await;
}
