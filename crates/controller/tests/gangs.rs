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

/// Three GPU nodes, each running a pod of the low-priority (10) `batch` group, whose
/// `disruptionMode` is `all`.
fn batch_group_in_all_mode(server: &FakeApiServer) {
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
}

/// A high-priority gang evicts a whole low-priority group in `all` mode and is bound, each
/// pod where preemption placed it; the victims are deleted by the scheduler (fake API
/// server: no kubelet, deletion is immediate).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_preempts_a_whole_low_priority_group() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "ml"}}));
    batch_group_in_all_mode(&server);
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

/// A single high-priority pod (no group) that needs one node evicts a whole low-priority
/// group in `all` mode, as upstream's workload-aware preemption: the group's pods on the
/// other nodes go too, so no half of it keeps running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_pod_preempting_a_group_in_all_mode_evicts_all_of_it() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "ml"}}));
    batch_group_in_all_mode(&server);
    let mut urgent = member("urgent", "none");
    urgent["spec"]
        .as_object_mut()
        .unwrap()
        .remove("schedulingGroup");
    urgent["spec"]["priority"] = json!(100);
    server.apply("pods", &urgent);
    let running = start(&server).await;
    wait_for("the pod bound after preemption", || {
        server.node_of("ml", "urgent").is_some()
    })
    .await;
    for i in 0..3 {
        assert!(
            server.get("pods", "ml", &format!("batch-{i}")).is_none(),
            "batch-{i} evicted with its group"
        );
    }
    support::stop_controller(running.stop, running.task).await;
}

/// The controller with PodGroup claims on (`--feature-gates=DRAWorkloadResourceClaims=true`).
async fn start_with_group_claims(server: &FakeApiServer) -> support::Started {
    start_with_gates(server, true, false).await
}

/// The controller with the given gates: DRAWorkloadResourceClaims, CompositePodGroup.
async fn start_with_gates(
    server: &FakeApiServer,
    group_claims: bool,
    composite: bool,
) -> support::Started {
    let loaded = scheduler_core::config::load_str(CONFIG, "test.yaml").unwrap();
    let client = controller::client(Some(&server.kubeconfig()))
        .await
        .unwrap();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(controller::run(controller::RunOptions {
        dra_workload_resource_claims: group_claims,
        composite_pod_groups: composite,
        ..controller::RunOptions::new(
            client,
            loaded,
            Box::pin(async move {
                let _ = rx.await;
            }),
        )
    }));
    support::Started { stop, task }
}

/// Two CPU nodes; a node-local NIC driver with one NIC on `n2`.
fn nic_cluster(server: &FakeApiServer) {
    server.apply("namespaces", &json!({"metadata": {"name": "ml"}}));
    for n in ["n1", "n2"] {
        server.apply(
            "nodes",
            &json!({"metadata": {"name": n},
                    "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}}),
        );
    }
    server.apply(
        "deviceclasses",
        &json!({"metadata": {"name": "nic"},
                "spec": {"selectors": [{"cel": {"expression": "device.driver == \"nic.example.com\""}}]}}),
    );
    server.apply(
        "resourceslices",
        &json!({"metadata": {"name": "n2-nic"},
                "spec": {"driver": "nic.example.com", "nodeName": "n2",
                         "pool": {"name": "n2", "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": "nic-0"}]}}),
    );
}

/// A gang whose PodGroup has the claim entry `fabric` (`source`), each member's the same.
fn fabric_gang(server: &FakeApiServer, source: Value) {
    let mut entry = json!({"name": "fabric"});
    entry
        .as_object_mut()
        .unwrap()
        .extend(source.as_object().unwrap().clone());
    let mut g = gang("train", 2);
    g["spec"]["resourceClaims"] = json!([entry.clone()]);
    server.apply("podgroups", &g);
    for p in ["w0", "w1"] {
        server.apply(
            "pods",
            &json!({"metadata": {"name": p, "namespace": "ml"},
                    "spec": {"schedulingGroup": {"podGroupName": "train"},
                             "resourceClaims": [entry.clone()],
                             "containers": [{"name": "c", "image": "trainer"}]}}),
        );
    }
}

/// The claim's `status.reservedFor` must be the PodGroup alone.
fn assert_reserved_for_the_group(server: &FakeApiServer, claim: &str) {
    let uid = server.get("podgroups", "ml", "train").unwrap()["metadata"]["uid"].clone();
    let c = server.get("resourceclaims", "ml", claim).unwrap();
    assert_eq!(
        c["status"]["reservedFor"],
        json!([{"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "train", "uid": uid}]),
        "one entry for the whole group"
    );
    let devices = &c["status"]["allocation"]["devices"]["results"];
    assert_eq!(devices.as_array().map(Vec::len), Some(1), "{c}");
    assert_eq!(devices[0]["device"], "nic-0");
    assert!(
        c["metadata"]["finalizers"].as_array().is_some_and(|f| f
            .iter()
            .any(|f| f == "resource.kubernetes.io/delete-protection")),
        "{c}"
    );
}

/// A gang sharing its PodGroup's claim: the claim is allocated once, reserved for the
/// PodGroup (one `reservedFor` entry, not one per pod), and both pods are bound on the node
/// the device is attached to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_sharing_a_group_claim_is_bound_with_one_reservation() {
    let server = FakeApiServer::start().await;
    nic_cluster(&server);
    server.apply(
        "resourceclaims",
        &json!({"metadata": {"name": "fabric", "namespace": "ml"},
                "spec": {"devices": {"requests": [{"name": "nic", "exactly": {"deviceClassName": "nic"}}]}}}),
    );
    fabric_gang(&server, json!({"resourceClaimName": "fabric"}));
    let running = start_with_group_claims(&server).await;
    wait_for("the gang bound", || {
        bound(&server, &["w0", "w1"]).len() == 2
    })
    .await;
    assert_eq!(bound(&server, &["w0", "w1"]), ["n2", "n2"]);
    // Both bindings' writes have landed (the second finds the first's and adds nothing).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_reserved_for_the_group(&server, "fabric");
    assert!(server.double_bindings().is_empty());
    // Both bindings wrote to the claim (whichever came second read it again on 409).
    let patches = server
        .requests()
        .iter()
        .filter(|r| r.resource == "resourceclaims" && r.name == "fabric" && r.verb == "patch")
        .count();
    assert!(patches >= 2, "{patches}");
    // The second reads the claim back from the informer: no grant beyond the writes'.
    assert!(
        !server
            .requests()
            .iter()
            .any(|r| r.resource == "resourceclaims" && r.verb == "get")
    );
    support::stop_controller(running.stop, running.task).await;
}

/// A gang whose PodGroup claim comes from a template waits, saying why, until
/// kube-controller-manager (the test, here) makes the claim for the group and names it in
/// the group's status; the PodGroup update retries the gang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_template_claim_is_waited_for_then_shared() {
    let server = FakeApiServer::start().await;
    nic_cluster(&server);
    fabric_gang(&server, json!({"resourceClaimTemplateName": "one-nic"}));
    let running = start_with_group_claims(&server).await;
    wait_for("the gang's FailedScheduling", || {
        failed_scheduling(&server, "w0")
            .is_some_and(|m| m.contains("PodGroup ml/train: ResourceClaim not created yet"))
    })
    .await;
    assert!(bound(&server, &["w0", "w1"]).is_empty());

    let group = server.get("podgroups", "ml", "train").unwrap();
    server.apply(
        "resourceclaims",
        &json!({"metadata": {"name": "train-fabric-k2x9", "namespace": "ml",
                             "ownerReferences": [{"apiVersion": "scheduling.k8s.io/v1beta1",
                                                  "kind": "PodGroup", "name": "train",
                                                  "uid": group["metadata"]["uid"],
                                                  "controller": true}]},
                "spec": {"devices": {"requests": [{"name": "nic", "exactly": {"deviceClassName": "nic"}}]}}}),
    );
    let mut named = group.clone();
    named["status"]["resourceClaimStatuses"] =
        json!([{"name": "fabric", "resourceClaimName": "train-fabric-k2x9"}]);
    server.apply("podgroups", &named);
    wait_for("the gang bound", || {
        bound(&server, &["w0", "w1"]).len() == 2
    })
    .await;
    assert_eq!(bound(&server, &["w0", "w1"]), ["n2", "n2"]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_reserved_for_the_group(&server, "train-fabric-k2x9");
    support::stop_controller(running.stop, running.task).await;
}

/// Both members' bindings fail: what their PreBind wrote into the group's claim is either
/// taken back (by the last member placed) or left for the group, and the gang's next
/// attempt binds both with the claim still reserved once, for the PodGroup.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_gang_binding_leaves_the_group_claim_reusable() {
    let server = FakeApiServer::start().await;
    nic_cluster(&server);
    server.apply(
        "resourceclaims",
        &json!({"metadata": {"name": "fabric", "namespace": "ml"},
                "spec": {"devices": {"requests": [{"name": "nic", "exactly": {"deviceClassName": "nic"}}]}}}),
    );
    fabric_gang(&server, json!({"resourceClaimName": "fabric"}));
    server.fail_next_bindings(2 * controller::client::ATTEMPTS as usize);
    let running = start_with_group_claims(&server).await;
    wait_for("a failed binding reported", || {
        failed_scheduling(&server, "w0").is_some() || failed_scheduling(&server, "w1").is_some()
    })
    .await;
    wait_for("the gang bound on its next attempt", || {
        bound(&server, &["w0", "w1"]).len() == 2
    })
    .await;
    assert_eq!(bound(&server, &["w0", "w1"]), ["n2", "n2"]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_reserved_for_the_group(&server, "fabric");
    support::stop_controller(running.stop, running.task).await;
}

fn composite(name: &str, min_group_count: u32) -> Value {
    json!({
        "apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"workloadRef": {"workloadName": "train", "templateName": name},
                 "schedulingPolicy": {"gang": {"minGroupCount": min_group_count}}},
    })
}

fn child(name: &str, parent: &str, min_count: u32) -> Value {
    let mut g = gang(name, min_count);
    g["spec"]["parentCompositePodGroupName"] = json!(parent);
    g
}

/// With the CompositePodGroup gate on, a job of two slices that needs both binds nothing
/// while only three nodes exist (one slice would fit), and all four pods once a fourth node
/// comes; each slice's condition says Scheduled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_of_groups_is_bound_only_when_its_root_quorum_is_met() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "ml"}}));
    for n in ["g1", "g2", "g3"] {
        server.apply("nodes", &gpu_node(n));
    }
    server.apply("compositepodgroups", &composite("job", 2));
    server.apply("podgroups", &child("a", "job", 2));
    server.apply("podgroups", &child("b", "job", 2));
    let pods = ["a0", "a1", "b0", "b1"];
    for p in pods {
        server.apply("pods", &member(p, &p[..1]));
    }
    let running = start_with_gates(&server, false, true).await;
    wait_for("every pod's FailedScheduling", || {
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
            .any(|n| n.contains("composite pod group \"job\": minCount (2) cannot be satisfied")),
        "{notes:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(bound(&server, &pods).is_empty(), "no slice is bound alone");

    server.apply("nodes", &gpu_node("g4"));
    wait_for("all four bound", || bound(&server, &pods).len() == 4).await;
    wait_for("both slices' conditions", || {
        ["a", "b"]
            .iter()
            .all(|g| group_condition(&server, g).is_some_and(|c| c["reason"] == "Scheduled"))
    })
    .await;
    support::stop_controller(running.stop, running.task).await;
}

/// With the gate off (the default), the parent is ignored: each slice is its own gang, so
/// the slice that fits is bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_gate_off_each_group_of_a_tree_is_its_own_gang() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "ml"}}));
    for n in ["g1", "g2", "g3"] {
        server.apply("nodes", &gpu_node(n));
    }
    server.apply("compositepodgroups", &composite("job", 2));
    server.apply("podgroups", &child("a", "job", 2));
    server.apply("podgroups", &child("b", "job", 2));
    let pods = ["a0", "a1", "b0", "b1"];
    for p in pods {
        server.apply("pods", &member(p, &p[..1]));
    }
    let running = start(&server).await;
    wait_for("one slice bound", || bound(&server, &pods).len() == 2).await;
    let slices: Vec<bool> = ["a", "b"]
        .iter()
        .map(|g| bound(&server, &[&format!("{g}0"), &format!("{g}1")]).len() == 2)
        .collect();
    assert!(
        slices == [true, false] || slices == [false, true],
        "{slices:?}"
    );
    support::stop_controller(running.stop, running.task).await;
}

/// A high-priority job of two one-pod slices (both needed) on three nodes held by
/// low-priority pods: preemption for the root evicts two of them, never one alone, and both
/// slices are bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_preempts_for_its_root_quorum() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "ml"}}));
    for (i, n) in ["g0", "g1", "g2"].iter().enumerate() {
        server.apply("nodes", &gpu_node(n));
        let mut p = member(&format!("low-{i}"), "none");
        p["spec"].as_object_mut().unwrap().remove("schedulingGroup");
        p["spec"]["nodeName"] = json!(n);
        p["spec"]["priority"] = json!(1);
        server.apply("pods", &p);
    }
    let mut job = composite("job", 2);
    job["spec"]["priority"] = json!(100);
    server.apply("compositepodgroups", &job);
    for s in ["a", "b"] {
        let mut g = child(s, "job", 1);
        g["spec"]["priority"] = json!(100);
        server.apply("podgroups", &g);
        let mut p = member(&format!("{s}0"), s);
        p["spec"]["priority"] = json!(100);
        server.apply("pods", &p);
    }
    let running = start_with_gates(&server, false, true).await;
    wait_for("both slices bound after preemption", || {
        bound(&server, &["a0", "b0"]).len() == 2
    })
    .await;
    let left = (0..3)
        .filter(|i| server.get("pods", "ml", &format!("low-{i}")).is_some())
        .count();
    assert_eq!(left, 1, "two victims for two slices");
    assert!(server.double_bindings().is_empty());
    support::stop_controller(running.stop, running.task).await;
}
