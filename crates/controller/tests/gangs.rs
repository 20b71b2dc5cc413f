//! Gangs through the controller, against the fake API server: a gang is bound all or
//! nothing, waits for its PodGroup and its quorum, and waits (saying why) when the cluster
//! does not serve the API its group lives in.

mod support;

use std::time::Duration;

use fake_apiserver::FakeApiServer;
use serde_json::{Value, json};
use support::wait_for;

const CONFIG: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
";

fn gpu_node(name: &str) -> Value {
    json!({
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}},
    })
}

fn member(name: &str, group: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "schedulingGroup": {"podGroupName": group},
            "containers": [{"name": "c", "image": "trainer",
                            "resources": {"requests": {"nvidia.com/gpu": "8"}}}],
        },
    })
}

fn gang(name: &str, min_count: u32) -> Value {
    json!({
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    })
}

async fn start(server: &FakeApiServer) -> support::Started {
    support::start(server, CONFIG).await
}

fn failed_scheduling(server: &FakeApiServer, pod: &str) -> Option<String> {
    server
        .events_for("ml", pod)
        .iter()
        .rev()
        .find(|e| e["reason"] == "FailedScheduling")
        .and_then(|e| e["note"].as_str().map(str::to_string))
}

/// The scheduler's condition on the PodGroup, if written.
fn group_condition(server: &FakeApiServer, group: &str) -> Option<Value> {
    let g = server.get("podgroups", "ml", group)?;
    g["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "PodGroupInitiallyScheduled")
        .cloned()
}

fn bound(server: &FakeApiServer, pods: &[&str]) -> Vec<String> {
    pods.iter()
        .filter_map(|p| server.node_of("ml", p))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_is_bound_all_or_nothing() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "ml"}}));
    server.apply("nodes", &gpu_node("g1"));
    server.apply("nodes", &gpu_node("g2"));
    server.apply("podgroups", &gang("train", 3));
    let pods = ["w0", "w1", "w2"];
    for p in pods {
        server.apply("pods", &member(p, "train"));
    }
    let running = start(&server).await;

    // Two nodes for three 8-GPU pods: nobody is bound, everybody hears why.
    wait_for("every member's FailedScheduling", || {
        pods.iter().all(|p| failed_scheduling(&server, p).is_some())
    })
    .await;
    let notes: Vec<String> = pods
        .iter()
        .map(|p| failed_scheduling(&server, p).unwrap())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("pod group \"train\": minCount (3) cannot be satisfied")),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("0/2 nodes are available")),
        "{notes:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(bound(&server, &pods).is_empty(), "no member is bound alone");
    // The PodGroup says so too.
    wait_for("the group's Unschedulable condition", || {
        group_condition(&server, "train").is_some()
    })
    .await;
    let c = group_condition(&server, "train").unwrap();
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("False"), Some("Unschedulable"))
    );
    assert_eq!(
        c["message"],
        "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"
    );
    assert!(c["lastTransitionTime"].is_string());

    // A third node: the whole gang fits and is bound, one pod per node.
    server.apply("nodes", &gpu_node("g3"));
    wait_for("the whole gang bound", || bound(&server, &pods).len() == 3).await;
    let mut nodes = bound(&server, &pods);
    nodes.sort();
    assert_eq!(nodes, ["g1", "g2", "g3"]);
    assert!(server.double_bindings().is_empty());
    wait_for("the group's Scheduled condition", || {
        group_condition(&server, "train").is_some_and(|c| c["status"] == "True")
    })
    .await;
    assert_eq!(
        group_condition(&server, "train").unwrap()["reason"],
        "Scheduled"
    );
    support::stop_controller(running.stop, running.task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_waits_for_its_group_and_quorum_then_binds() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "ml"}}));
    for n in ["g1", "g2", "g3"] {
        server.apply("nodes", &gpu_node(n));
    }
    // A lone pod of an ordinary kind still schedules meanwhile.
    server.apply(
        "pods",
        &json!({"metadata": {"name": "solo", "namespace": "ml"},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    );
    server.apply("pods", &member("w0", "train"));
    server.apply("pods", &member("w1", "train"));
    let running = start(&server).await;
    wait_for("the solo pod bound", || {
        server.node_of("ml", "solo").is_some()
    })
    .await;

    // No PodGroup yet, then a PodGroup wanting three: the two pods wait.
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.apply("podgroups", &gang("train", 3));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(bound(&server, &["w0", "w1"]).is_empty());

    // The third member completes the quorum: all three are bound.
    server.apply("pods", &member("w2", "train"));
    wait_for("the gang bound", || {
        bound(&server, &["w0", "w1", "w2"]).len() == 3
    })
    .await;
    support::stop_controller(running.stop, running.task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lowering_min_count_lets_a_short_gang_go() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "ml"}}));
    server.apply("nodes", &gpu_node("g1"));
    server.apply("nodes", &gpu_node("g2"));
    server.apply("podgroups", &gang("train", 3));
    server.apply("pods", &member("w0", "train"));
    server.apply("pods", &member("w1", "train"));
    let running = start(&server).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(bound(&server, &["w0", "w1"]).is_empty());
    server.apply("podgroups", &gang("train", 2));
    wait_for("the gang of two bound", || {
        bound(&server, &["w0", "w1"]).len() == 2
    })
    .await;
    support::stop_controller(running.stop, running.task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_api_a_pod_naming_a_group_is_never_bound() {
    let server = FakeApiServer::start().await;
    server.disable("podgroups");
    server.disable(fake_apiserver::COSCHEDULING_POD_GROUPS);
    server.apply("namespaces", &json!({"metadata": {"name": "ml"}}));
    server.apply("nodes", &gpu_node("g1"));
    server.apply(
        "pods",
        &json!({"metadata": {"name": "tf-0", "namespace": "ml",
                             "labels": {"scheduling.x-k8s.io/pod-group": "tf"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    );
    server.apply(
        "pods",
        &json!({"metadata": {"name": "solo", "namespace": "ml"},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    );
    let running = start(&server).await;
    wait_for("the solo pod bound", || {
        server.node_of("ml", "solo").is_some()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.node_of("ml", "tf-0"), None);
    support::stop_controller(running.stop, running.task).await;
}

/// A high-priority gang evicts a whole low-priority group in `all` mode and is bound, each
/// pod where preemption placed it; the victims are deleted by the scheduler (fake API
/// server: no kubelet, deletion is immediate).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_preempts_a_whole_low_priority_group() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "ml"}}));
    for n in ["g0", "g1", "g2"] {
        server.apply("nodes", &gpu_node(n));
    }
    let mut batch = gang("batch", 1);
    batch["spec"]["priority"] = json!(10);
    batch["spec"]["disruptionMode"] = json!({"all": {}});
    server.apply("podgroups", &batch);
    for (i, n) in ["g0", "g1", "g2"].iter().enumerate() {
        let mut p = member(&format!("batch-{i}"), "batch");
        p["spec"]["nodeName"] = json!(n);
        p["spec"]["priority"] = json!(10);
        server.apply("pods", &p);
    }
    let mut train = gang("train", 2);
    train["spec"]["priority"] = json!(100);
    server.apply("podgroups", &train);
    for i in 0..2 {
        let mut p = member(&format!("train-{i}"), "train");
        p["spec"]["priority"] = json!(100);
        server.apply("pods", &p);
    }
    let running = start(&server).await;
    wait_for("the gang bound after preemption", || {
        bound(&server, &["train-0", "train-1"]).len() == 2
    })
    .await;
    // The batch group went as a unit: all three, though two nodes were enough.
    for i in 0..3 {
        assert!(
            server.get("pods", "ml", &format!("batch-{i}")).is_none(),
            "batch-{i} evicted with its group"
        );
    }
    assert!(server.double_bindings().is_empty());
    support::stop_controller(running.stop, running.task).await;
}
