//! `simulate --pod-template` against the real thing: the number of copies it says fit is
//! the number `run` binds on the fake API server when one more than that is created, and
//! the copy left over fails for the reason the simulation gave.

mod support;

use fake_apiserver::FakeApiServer;
use scheduler_core::simulate::{self, capacity};
use serde_json::Value;
use support::wait_for;

const CONFIG: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
";

/// n1 has 1 CPU free (a bound pod holds the other), n2 room for 3 pods only (its pod
/// limit), n3 a taint the copies do not tolerate; one pending pod takes a slot first.
const DUMP: &str = "
apiVersion: v1
kind: Namespace
metadata: {name: default}
---
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status: {allocatable: {cpu: '2', memory: 8Gi, pods: '110'}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}
status: {allocatable: {cpu: '4', memory: 8Gi, pods: '3'}}
---
apiVersion: v1
kind: Node
metadata: {name: n3, labels: {kubernetes.io/hostname: n3}}
spec:
  taints: [{key: dedicated, value: db, effect: NoSchedule}]
status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}
---
apiVersion: v1
kind: Pod
metadata: {name: running, namespace: default}
spec:
  nodeName: n1
  containers: [{name: c, image: img, resources: {requests: {cpu: '1', memory: 128Mi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: pending, namespace: default}
spec:
  containers: [{name: c, image: img, resources: {requests: {cpu: 500m, memory: 128Mi}}}]
";

const TEMPLATE: &str = "
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: img, resources: {requests: {cpu: 500m, memory: 128Mi}}}]
";

fn bound(server: &FakeApiServer, names: &[String]) -> usize {
    names
        .iter()
        .filter(|n| server.node_of("default", n).is_some())
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_count_of_copies_is_what_run_binds() {
    let objects = simulate::load_str(DUMP, "dump.yaml").unwrap();
    let loaded = scheduler_core::config::load_str(CONFIG, "config.yaml").unwrap();
    let template = capacity::read_template(TEMPLATE, "web.yaml").unwrap();
    let answer = capacity::how_many_fit(&objects, &loaded, 1, &template, None, &[]).unwrap();
    let capacity::Stop::Unschedulable { message } = &answer.stopped_by else {
        panic!("{answer:?}");
    };
    // By hand: 2 x 500m on n1 and 3 pods on n2, one of the five taken by `pending`.
    assert_eq!(answer.placed, 4, "{answer:?}");

    let server = FakeApiServer::start().await;
    let docs: Vec<Value> = serde_saphyr::from_str_multiple(DUMP).unwrap();
    for doc in docs.iter().filter(|d| !d.is_null()) {
        let collection = match doc["kind"].as_str().unwrap() {
            "Namespace" => "namespaces",
            "Node" => "nodes",
            "Pod" => "pods",
            other => panic!("{other}"),
        };
        server.apply(collection, doc);
    }
    let started = support::start(&server, CONFIG).await;
    // The dump's pending pod first, as the simulation placed it before any copy.
    wait_for("the dump's pending pod bound", || {
        server.node_of("default", "pending").is_some()
    })
    .await;
    let pod = &template.pod;
    let names: Vec<String> = (0..=answer.placed).map(|i| format!("web-{i}")).collect();
    for name in &names {
        let mut copy = pod.clone();
        copy.metadata.name = Some(name.clone());
        server.apply("pods", &copy);
    }
    wait_for("every copy bound but one, which failed", || {
        bound(&server, &names) == answer.placed
            && names.iter().any(|n| {
                server.node_of("default", n).is_none()
                    && server
                        .events_for("default", n)
                        .iter()
                        .any(|e| e["reason"] == "FailedScheduling")
            })
    })
    .await;
    let left = names
        .iter()
        .find(|n| server.node_of("default", n).is_none())
        .unwrap();
    let events = server.events_for("default", left);
    let failed = events
        .iter()
        .find(|e| e["reason"] == "FailedScheduling")
        .unwrap();
    // `run` also tried preemption (and says so after the same diagnosis); copies never do.
    let live = failed["note"].as_str().unwrap();
    assert!(live.starts_with(message.as_str()), "{live}\nvs {message}");
    support::stop_controller(started.stop, started.task).await;
    // Still that many once the controller has stopped: no binding was in flight.
    assert_eq!(bound(&server, &names), answer.placed);
    // Per node, the copies landed where room was left: none on the tainted node.
    assert!(
        names
            .iter()
            .all(|n| server.node_of("default", n).as_deref() != Some("n3"))
    );
    assert_eq!(
        answer.nodes.iter().map(|n| n.copies).sum::<usize>(),
        answer.placed
    );
}
