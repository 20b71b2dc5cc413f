//! scheduler-plugins' Coscheduling through the controller, against the fake API server: a
//! group short of its `minResources` is reported and retried when its PodGroup changes, and
//! the PodGroup's status moves as scheduler-plugins' controller moves it.

mod support;

use std::time::Duration;

use fake_apiserver::{COSCHEDULING_POD_GROUPS, FakeApiServer};
use serde_json::{Value, json};
use support::wait_for;

/// scheduler-plugins' documented profile, for pods of the default scheduler name.
const CONFIG: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
profiles:
  - schedulerName: default-scheduler
    plugins:
      multiPoint:
        enabled:
          - name: Coscheduling
        disabled:
          - name: PrioritySort
";

fn node(name: &str) -> Value {
    json!({
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
    })
}

fn worker(name: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "ml",
                     "labels": {"scheduling.x-k8s.io/pod-group": "tf"},
                     "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
                                          "name": "tf-job", "uid": "j1"}]},
        "spec": {"containers": [{"name": "c", "image": "trainer",
                                 "resources": {"requests": {"cpu": "1"}}}]},
    })
}

fn pod_group(min_member: u32, min_cpu: &str) -> Value {
    json!({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "tf", "namespace": "ml", "uid": "g1",
                     "creationTimestamp": "2026-01-02T03:04:05Z"},
        "spec": {"minMember": min_member, "minResources": {"cpu": min_cpu}},
    })
}

fn status(server: &FakeApiServer) -> Value {
    server
        .get(COSCHEDULING_POD_GROUPS, "ml", "tf")
        .map(|g| g["status"].clone())
        .unwrap_or(Value::Null)
}

/// What the kubelet would report: the pod's phase.
fn set_phase(server: &FakeApiServer, pod: &str, phase: &str) {
    let mut p = server.get("pods", "ml", pod).unwrap();
    p["status"]["phase"] = json!(phase);
    server.apply("pods", &p);
}

fn failed_scheduling(server: &FakeApiServer, pod: &str) -> Option<String> {
    server
        .events_for("ml", pod)
        .iter()
        .rev()
        .find(|e| e["reason"] == "FailedScheduling")
        .and_then(|e| e["note"].as_str().map(str::to_string))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_short_of_its_min_resources_waits_then_binds_when_it_asks_less() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "ml"}}));
    server.apply("nodes", &node("n1"));
    server.apply("nodes", &node("n2"));
    // Two 1-cpu workers would fit, but the group asks for 10 cpu of the cluster's 8.
    server.apply(COSCHEDULING_POD_GROUPS, &pod_group(2, "10"));
    server.apply("pods", &worker("w0"));
    server.apply("pods", &worker("w1"));
    let running = support::start(&server, CONFIG).await;
    for w in ["w0", "w1"] {
        wait_for("FailedScheduling with the resource gap", || {
            failed_scheduling(&server, w).as_deref()
                == Some("0/2 nodes are available: resource gap: map[cpu:2].")
        })
        .await;
    }
    assert_eq!(server.node_of("ml", "w0"), None);

    // The group asks for what the cluster has: its pods are retried and bound.
    server.apply(COSCHEDULING_POD_GROUPS, &pod_group(2, "8"));
    wait_for("the group bound", || {
        server.node_of("ml", "w0").is_some() && server.node_of("ml", "w1").is_some()
    })
    .await;
    support::stop_controller(running.stop, running.task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pod_group_status_follows_its_pods_as_scheduler_plugins_controller_keeps_it() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "ml"}}));
    server.apply("nodes", &node("n1"));
    server.apply(COSCHEDULING_POD_GROUPS, &pod_group(2, "2"));
    server.apply("pods", &worker("w0"));
    let running = support::start(&server, CONFIG).await;
    // One pod of two: Pending, nothing counted.
    wait_for("Pending", || status(&server)["phase"] == "Pending").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        status(&server),
        json!({"phase": "Pending"}),
        "not yet occupied"
    );

    // The second pod: Scheduling, occupied by the pods' owner; both are bound.
    server.apply("pods", &worker("w1"));
    wait_for("Scheduling", || {
        status(&server) == json!({"phase": "Scheduling", "occupiedBy": "ml/tf-job"})
    })
    .await;
    wait_for("the group bound", || {
        server.node_of("ml", "w0").is_some() && server.node_of("ml", "w1").is_some()
    })
    .await;

    // The kubelet runs them: Running, two running.
    set_phase(&server, "w0", "Running");
    set_phase(&server, "w1", "Running");
    wait_for("Running", || {
        status(&server) == json!({"phase": "Running", "occupiedBy": "ml/tf-job", "running": 2})
    })
    .await;

    // Both finish: Finished, two succeeded (running dropped, as scheduler-plugins omits 0).
    set_phase(&server, "w0", "Succeeded");
    set_phase(&server, "w1", "Succeeded");
    wait_for("Finished", || {
        status(&server) == json!({"phase": "Finished", "occupiedBy": "ml/tf-job", "succeeded": 2})
    })
    .await;

    // Written only when something changed: a quiet second sends no more status patches.
    let patches = || {
        server
            .requests()
            .iter()
            .filter(|r| r.verb == "patch" && r.resource == "podgroups")
            .count()
    };
    let before = patches();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(patches(), before);
    support::stop_controller(running.stop, running.task).await;
}
