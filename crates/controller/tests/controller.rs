//! End to end: the controller against the in-process fake API server, through a kubeconfig,
//! exactly as `ferrosched run` starts it.

mod support;

use std::time::{Duration, Instant};

use fake_apiserver::FakeApiServer;
use serde_json::{Value, json};
use support::{http_get_as, wait_for};

const CONFIG: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
";

fn node(name: &str, cpu: &str, labels: Value) -> Value {
    json!({
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    })
}

fn pod(name: &str, cpu: &str, extra_spec: Value) -> Value {
    let mut spec = json!({
        "containers": [{"name": "c", "image": "img", "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}],
    });
    if let (Value::Object(s), Value::Object(e)) = (&mut spec, extra_spec) {
        s.extend(e);
    }
    json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

/// GET over plain HTTP/1.0; returns the status line and body.
async fn http_get(addr: std::net::SocketAddr, path: &str) -> (String, String) {
    http_get_as(addr, path, None).await
}

/// The value of one sample of `/metrics` (`name{labels}` exactly as exposed), if present.
async fn metric(addr: std::net::SocketAddr, sample: &str) -> Option<f64> {
    let (status, body) = http_get(addr, "/metrics").await;
    assert!(status.contains("200"), "{status}");
    body.lines()
        .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' ')?.parse().ok())
}

/// Polls `/metrics` every 20 ms for at most 10 s until `sample` has value `want`.
async fn wait_for_metric(addr: std::net::SocketAddr, sample: &str, want: f64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = metric(addr, sample).await;
        if got == Some(want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {sample} = {want}, last {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

const UNSCHEDULABLE_ATTEMPTS: &str =
    "scheduler_schedule_attempts_total{result=\"unschedulable\",profile=\"default-scheduler\"}";
const UNSCHEDULABLE_BY_FIT: &str =
    "scheduler_unschedulable_pods{plugin=\"NodeResourcesFit\",profile=\"default-scheduler\"}";
const SCHEDULED_ATTEMPTS: &str =
    "scheduler_schedule_attempts_total{result=\"scheduled\",profile=\"default-scheduler\"}";

struct Running {
    health: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<controller::Result<()>>,
}

impl Running {
    async fn stop(mut self) {
        support::stop_controller(self.stop.take().unwrap(), self.task).await;
    }
}

async fn start_controller(server: &FakeApiServer) -> Running {
    start_with(server, CONFIG, "test-host").await
}

async fn start_with(server: &FakeApiServer, config: &str, instance: &str) -> Running {
    start_full(server, config, instance, None).await
}

async fn start_full(
    server: &FakeApiServer,
    config: &str,
    instance: &str,
    health_auth: Option<std::sync::Arc<controller::auth::DelegatedAuth>>,
) -> Running {
    start_custom(server, config, |o| {
        o.instance_id = instance.into();
        o.health_auth = health_auth;
    })
    .await
}

/// The controller with a health listener and `customize`'s options.
async fn start_custom(
    server: &FakeApiServer,
    config: &str,
    customize: impl FnOnce(&mut controller::RunOptions),
) -> Running {
    let loaded = scheduler_core::config::load_str(config, "test.yaml").unwrap();
    let client = controller::client(Some(&server.kubeconfig()))
        .await
        .unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let health = listener.local_addr().unwrap();
    let mut opts = controller::RunOptions {
        health: Some(listener),
        ..controller::RunOptions::new(
            client,
            loaded,
            Box::pin(async move {
                let _ = rx.await;
            }),
        )
    };
    customize(&mut opts);
    let task = tokio::spawn(controller::run(opts));
    Running {
        health,
        stop: Some(tx),
        task,
    }
}

/// kube-apiserver serves HTTPS and offers HTTP/2; the controller's client takes it, so its
/// watches, bindings and events all share one connection. Over HTTP/1.1 every request in
/// flight opened its own TLS connection, which cost 40% more CPU per pod against a real
/// server (`benches/reports/2026-11-23-real-apiserver.md`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_shares_one_http2_connection_with_a_server_that_offers_it() {
    let server = FakeApiServer::start_tls().await;
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    server.apply("nodes", &node("n1", "4", json!({})));
    let names: Vec<String> = (0..40).map(|i| format!("p{i}")).collect();
    for n in &names {
        server.apply("pods", &pod(n, "10m", json!({})));
    }
    let c = start_controller(&server).await;
    wait_for("every pod bound", || {
        names.iter().all(|n| server.node_of("default", n).is_some())
    })
    .await;
    wait_for("a Scheduled event per pod", || {
        names.iter().all(|n| {
            server
                .events_for("default", n)
                .iter()
                .any(|e| e["reason"] == "Scheduled")
        })
    })
    .await;
    c.stop().await;
    let versions = server.http_versions();
    let served: usize = versions.values().sum();
    // Informer lists and watches, 40 bindings, 40 events.
    assert!(served > 80, "{versions:?}");
    assert_eq!(versions.get("HTTP/2.0"), Some(&served), "{versions:?}");
    assert_eq!(server.connections(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_binds_and_reports_like_kube_scheduler() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("controller=debug")
        .with_test_writer()
        .try_init();
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    server.apply("nodes", &node("n1", "2", json!({})));
    server.apply("nodes", &node("n2", "2", json!({})));
    server.apply(
        "nodes",
        &node("sandbox-1", "2", json!({"sandbox": "gvisor"})),
    );
    server.apply(
        "runtimeclasses",
        &json!({
            "metadata": {"name": "gvisor"},
            "handler": "runsc",
            "overhead": {"podFixed": {"cpu": "250m"}},
            "scheduling": {"nodeSelector": {"sandbox": "gvisor"}},
        }),
    );
    // Already running: counts against n1.
    server.apply("pods", &pod("running", "1", json!({"nodeName": "n1"})));
    for i in 0..4 {
        server.apply("pods", &pod(&format!("web-{i}"), "500m", json!({})));
    }
    server.apply(
        "pods",
        &pod("sandboxed", "500m", json!({"runtimeClassName": "gvisor"})),
    );
    server.apply(
        "pods",
        &pod(
            "foreign",
            "100m",
            json!({"schedulerName": "other-scheduler"}),
        ),
    );
    server.apply("pods", &pod("huge", "3", json!({})));

    let running = start_controller(&server).await;

    let schedulable = ["web-0", "web-1", "web-2", "web-3", "sandboxed"];
    wait_for("every schedulable pod bound", || {
        schedulable
            .iter()
            .all(|p| server.node_of("default", p).is_some())
    })
    .await;
    assert_eq!(
        server.node_of("default", "sandboxed").as_deref(),
        Some("sandbox-1")
    );

    // The unschedulable pod: FailedScheduling event and PodScheduled=False.
    wait_for("FailedScheduling for huge", || {
        server
            .events_for("default", "huge")
            .iter()
            .any(|e| e["reason"] == "FailedScheduling")
    })
    .await;
    let ev = server
        .events_for("default", "huge")
        .into_iter()
        .find(|e| e["reason"] == "FailedScheduling")
        .unwrap();
    assert_eq!(ev["type"], "Warning");
    assert_eq!(ev["action"], "Scheduling");
    assert_eq!(ev["reportingController"], "default-scheduler");
    assert_eq!(ev["reportingInstance"], "default-scheduler-test-host");
    let note = ev["note"].as_str().unwrap();
    assert!(
        note.starts_with("0/3 nodes are available: 3 Insufficient cpu."),
        "{note}"
    );
    wait_for("PodScheduled=False on huge", || {
        server.get("pods", "default", "huge").is_some_and(|p| {
            p["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter().any(|c| {
                    c["type"] == "PodScheduled"
                        && c["status"] == "False"
                        && c["reason"] == "Unschedulable"
                        && c["message"]
                            .as_str()
                            .is_some_and(|m| m.starts_with("0/3 nodes are available"))
                })
            })
        })
    })
    .await;

    // Scheduled events for bound pods.
    let scheduled = server
        .events_for("default", "web-0")
        .into_iter()
        .find(|e| e["reason"] == "Scheduled");
    let scheduled = match scheduled {
        Some(e) => e,
        None => {
            wait_for("Scheduled event", || {
                server
                    .events_for("default", "web-0")
                    .iter()
                    .any(|e| e["reason"] == "Scheduled")
            })
            .await;
            server
                .events_for("default", "web-0")
                .into_iter()
                .find(|e| e["reason"] == "Scheduled")
                .unwrap()
        }
    };
    let web0_node = server.node_of("default", "web-0").unwrap();
    assert_eq!(
        scheduled["note"],
        format!("Successfully assigned default/web-0 to {web0_node}")
    );
    assert_eq!(scheduled["type"], "Normal");
    assert_eq!(scheduled["action"], "Binding");

    // A pod created after startup is scheduled.
    server.apply("pods", &pod("late", "100m", json!({})));
    wait_for("late pod bound", || {
        server.node_of("default", "late").is_some()
    })
    .await;

    // A node added later makes the pending pod schedulable.
    server.apply("nodes", &node("big", "8", json!({})));
    wait_for("huge bound to the new node", || {
        server.node_of("default", "huge").as_deref() == Some("big")
    })
    .await;

    running.stop().await;

    // Exactly once each, never the foreign pod, and only to nodes with room.
    let bindings = server.bindings();
    let mut pods: Vec<&str> = bindings.iter().map(|(p, _)| p.as_str()).collect();
    pods.sort_unstable();
    let mut expected = vec![
        "default/huge",
        "default/late",
        "default/sandboxed",
        "default/web-0",
        "default/web-1",
        "default/web-2",
        "default/web-3",
    ];
    expected.sort_unstable();
    assert_eq!(pods, expected, "{bindings:?}");
    assert!(server.node_of("default", "foreign").is_none());
    // Repeated failures extend one event's series instead of creating new events.
    let failed: Vec<_> = server
        .events_for("default", "huge")
        .into_iter()
        .filter(|e| e["reason"] == "FailedScheduling")
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(server.events_for("default", "foreign").is_empty());
    let n1_web = bindings
        .iter()
        .filter(|(p, n)| p.starts_with("default/web-") && n == "n1")
        .count();
    assert!(n1_web <= 2, "n1 has 1 CPU left for 500m pods: {bindings:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_deleted_before_binding_is_dropped_and_shutdown_is_clean() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    server.apply("pods", &pod("waiting", "100m", json!({})));
    let running = start_controller(&server).await;
    // No nodes: the pod is reported unschedulable, then deleted.
    wait_for("FailedScheduling", || {
        server
            .events_for("default", "waiting")
            .iter()
            .any(|e| e["note"] == "no nodes available to schedule pods")
    })
    .await;
    let (status, body) = http_get(running.health, "/readyz").await;
    assert!(status.contains(" 200 "), "{status} {body}");
    let (status, _) = http_get(running.health, "/healthz").await;
    assert!(status.contains(" 200 "), "{status}");
    server.delete("pods", "default", "waiting");
    server.apply("nodes", &node("n1", "2", json!({})));
    server.apply("pods", &pod("after", "100m", json!({})));
    wait_for("after bound", || {
        server.node_of("default", "after").is_some()
    })
    .await;
    running.stop().await;
    assert_eq!(
        server.bindings(),
        vec![("default/after".into(), "n1".into())]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_missed_while_the_watch_was_down_is_applied_on_relist() {
    let server = FakeApiServer::start().await;
    server.apply("nodes", &node("small", "1", json!({})));
    server.apply("nodes", &node("doomed", "16", json!({})));
    server.apply("pods", &pod("probe", "100m", json!({})));
    let running = start_controller(&server).await;
    wait_for("probe bound", || {
        server.node_of("default", "probe").is_some()
    })
    .await;

    // The node disappears while the watch is down and its DELETED event is compacted away.
    server.delete_silently("nodes", "", "doomed");
    server.expire_watches();
    // The node informer relists (after the watcher's backoff) and must notice that "doomed"
    // is gone from the list. A real API server accepts a Binding to a missing node, so the
    // test waits for the relist before creating the pod that only "doomed" could hold.
    wait_for("node relist", || server.list_count("nodes") >= 2).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    server.apply("pods", &pod("big", "8", json!({})));
    wait_for("FailedScheduling counting only the surviving node", || {
        server.events_for("default", "big").iter().any(|e| {
            e["reason"] == "FailedScheduling"
                && e["note"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("0/1 nodes are available: 1 Insufficient cpu."))
        })
    })
    .await;
    running.stop().await;
    assert_eq!(server.node_of("default", "big"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_bound_by_someone_else_meanwhile_is_dropped_cleanly() {
    let server = FakeApiServer::start().await;
    server.apply("nodes", &node("n1", "4", json!({})));
    server.apply("nodes", &node("n2", "4", json!({})));
    server.steal_next_binding("default", "raced", "n2");
    // Transient API errors are retried, not reported.
    server.fail_next_bindings(2);
    server.apply("pods", &pod("raced", "100m", json!({})));
    let running = start_controller(&server).await;
    wait_for("raced assigned by the other scheduler", || {
        server.node_of("default", "raced").is_some()
    })
    .await;
    // The controller keeps working afterwards.
    server.apply("pods", &pod("next", "100m", json!({})));
    wait_for("next bound", || server.node_of("default", "next").is_some()).await;
    running.stop().await;
    assert_eq!(server.node_of("default", "raced").as_deref(), Some("n2"));
    let ours: Vec<_> = server
        .bindings()
        .into_iter()
        .filter(|(p, _)| p == "default/raced")
        .collect();
    assert!(ours.is_empty(), "{ours:?}");
    assert!(
        !server
            .events_for("default", "raced")
            .iter()
            .any(|e| e["reason"] == "Scheduled" || e["reason"] == "FailedScheduling"),
        "{:?}",
        server.events_for("default", "raced")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_high_priority_pod_preempts_a_low_priority_one() {
    let server = FakeApiServer::start().await;
    server.apply("nodes", &node("n1", "2", json!({})));
    server.apply(
        "pods",
        &pod("victim", "1500m", json!({"nodeName": "n1", "priority": 0})),
    );
    server.apply("pods", &pod("urgent", "1", json!({"priority": 1000})));
    let running = start_controller(&server).await;
    wait_for("urgent bound to n1", || {
        server.node_of("default", "urgent").as_deref() == Some("n1")
    })
    .await;
    let preemptions = metric(running.health, "scheduler_preemption_attempts_total").await;
    assert!(preemptions.is_some_and(|n| n >= 1.0), "{preemptions:?}");
    let victims = metric(running.health, "scheduler_preemption_victims_sum").await;
    assert!(victims.is_some_and(|n| n >= 1.0), "{victims:?}");
    running.stop().await;
    assert!(
        server.get("pods", "default", "victim").is_none(),
        "victim deleted"
    );
    let preempted = server
        .events_for("default", "victim")
        .into_iter()
        .find(|e| e["reason"] == "Preempted")
        .expect("Preempted event on the victim");
    assert_eq!(preempted["action"], "Preempting");
    assert_eq!(preempted["related"]["name"], "urgent");
    let failed = server
        .events_for("default", "urgent")
        .into_iter()
        .find(|e| e["reason"] == "FailedScheduling")
        .expect("FailedScheduling before preemption");
    assert!(
        failed["note"]
            .as_str()
            .unwrap()
            .starts_with("0/1 nodes are available: 1 Insufficient cpu."),
        "{failed}"
    );
}

/// Asynchronous preemption: while the victim's deletion is slow (the API server answers
/// 429 twice), the preemptor is nominated and waits; other pods keep being bound, and a
/// roomy node added meanwhile does not let the preemptor through before its victim is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preemptor_waits_for_its_victims_while_other_pods_are_scheduled() {
    let server = FakeApiServer::start().await;
    server.apply("nodes", &node("n1", "2", json!({})));
    server.apply("nodes", &node("n2", "1", json!({})));
    server.apply(
        "pods",
        &pod("victim", "1500m", json!({"nodeName": "n1", "priority": 0})),
    );
    server.fail_next(
        2,
        fake_apiserver::Fault::new("DELETE", "pods", 429).retry_after(2),
    );
    server.apply("pods", &pod("urgent", "1500m", json!({"priority": 1000})));
    let running = start_controller(&server).await;
    wait_for("urgent nominated to n1", || {
        server
            .get("pods", "default", "urgent")
            .is_some_and(|p| p["status"]["nominatedNodeName"] == "n1")
    })
    .await;
    // The deletion is still being retried: another pod is scheduled meanwhile.
    server.apply("pods", &pod("filler", "500m", json!({})));
    wait_for("filler bound to n2", || {
        server.node_of("default", "filler").as_deref() == Some("n2")
    })
    .await;
    // A node where the preemptor would fit appears; it still waits for its preemption.
    server.apply("nodes", &node("n3", "4", json!({})));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        server.get("pods", "default", "victim").is_some(),
        "victim deleted too early"
    );
    assert_eq!(server.node_of("default", "urgent"), None);
    assert_eq!(
        metric(running.health, UNSCHEDULABLE_ATTEMPTS).await,
        Some(1.0),
        "the preemptor was retried while its victim was being deleted"
    );
    wait_for("urgent bound", || {
        server.node_of("default", "urgent").is_some()
    })
    .await;
    assert!(server.get("pods", "default", "victim").is_none());
    wait_for_metric(
        running.health,
        "scheduler_preemption_goroutines_execution_total{result=\"success\"}",
        1.0,
    )
    .await;
    running.stop().await;
}

/// NominatedNodeNameForExpectation: a nomination set by someone else (an autoscaler that
/// made room for the pod) is tried first: the pod goes there although scoring prefers
/// another node, and the Binding clears the field. A pod without PreBind work gets no
/// nomination patch of ours.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nomination_set_by_an_autoscaler_is_tried_first() {
    let server = FakeApiServer::start().await;
    server.apply("nodes", &node("n1", "4", json!({})));
    server.apply("nodes", &node("n2", "4", json!({})));
    server.apply("pods", &pod("busy", "3", json!({"nodeName": "n2"})));
    let mut expected = pod("expected", "1", json!({}));
    expected["status"] = json!({"nominatedNodeName": "n2"});
    server.apply("pods", &expected);
    let running = start_controller(&server).await;
    wait_for("expected bound", || {
        server.node_of("default", "expected").is_some()
    })
    .await;
    assert_eq!(server.node_of("default", "expected").as_deref(), Some("n2"));
    let bound = server.get("pods", "default", "expected").unwrap();
    assert!(
        bound["status"].get("nominatedNodeName").is_none(),
        "{bound}"
    );
    // The same pod without a nomination goes where scoring sends it.
    server.apply("pods", &pod("free", "1", json!({})));
    wait_for("free bound", || server.node_of("default", "free").is_some()).await;
    assert_eq!(server.node_of("default", "free").as_deref(), Some("n1"));
    assert!(
        !server
            .requests()
            .iter()
            .any(|r| r.subresource == "status" && (r.name == "expected" || r.name == "free")),
        "a pod without PreBind work had its status patched"
    );
    running.stop().await;
}

/// An attempt that ends in an error (NodeAffinity's PreScore refuses a preferred term it
/// cannot parse) takes the pod's nomination away, as upstream's scheduling cycle does after
/// every error: it is nominated nowhere while it backs off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_that_fails_with_an_error_clears_the_nomination() {
    let server = FakeApiServer::start().await;
    // The nominated node is too small, so the pod is filtered on every node and scored.
    server.apply("nodes", &node("n0", "1", json!({})));
    server.apply("nodes", &node("n1", "4", json!({})));
    server.apply("nodes", &node("n2", "4", json!({})));
    let term = json!({"weight": 1, "preference": {"matchExpressions": [
        {"key": "rank", "operator": "Gt", "values": ["not-a-number"]}]}});
    let mut bad = pod(
        "bad",
        "2",
        json!({"affinity": {"nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [term]}}}),
    );
    bad["status"] = json!({"nominatedNodeName": "n0"});
    server.apply("pods", &bad);
    let running = start_controller(&server).await;
    wait_for("PodScheduled=False, reason SchedulerError", || {
        let pod = server.get("pods", "default", "bad").unwrap();
        pod["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter().any(|c| {
                c["type"] == "PodScheduled"
                    && c["status"] == "False"
                    && c["reason"] == "SchedulerError"
            })
        })
    })
    .await;
    wait_for("the nomination cleared", || {
        let pod = server.get("pods", "default", "bad").unwrap();
        pod["status"].get("nominatedNodeName").is_none()
    })
    .await;
    assert_eq!(server.node_of("default", "bad"), None);
    running.stop().await;
}

/// The pod's PodScheduled condition, if any.
fn pod_scheduled(server: &FakeApiServer, name: &str) -> Option<Value> {
    let pod = server.get("pods", "default", name)?;
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "PodScheduled")
        .cloned()
}

/// A Binding the API server refuses is reported by the failure handler, as any failed
/// attempt: PodScheduled=False with reason SchedulerError, its lastTransitionTime kept from
/// the earlier failure since the status stays False (upstream's `UpdatePodCondition`); the
/// next attempt binds the pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_binding_is_reported_like_any_failed_attempt() {
    let server = FakeApiServer::start().await;
    server.apply("pods", &pod("p", "1", json!({})));
    let running = start_controller(&server).await;
    wait_for(
        "PodScheduled=False, reason Unschedulable (no nodes)",
        || pod_scheduled(&server, "p").is_some_and(|c| c["reason"] == "Unschedulable"),
    )
    .await;
    let since = pod_scheduled(&server, "p").unwrap()["lastTransitionTime"].clone();
    assert!(since.is_string(), "{since}");
    // lastTransitionTime has a resolution of one second.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    server.fail_next_bindings(controller::client::ATTEMPTS as usize);
    server.apply("nodes", &node("n1", "4", json!({})));
    wait_for("PodScheduled=False, reason SchedulerError", || {
        pod_scheduled(&server, "p").is_some_and(|c| c["reason"] == "SchedulerError")
    })
    .await;
    let c = pod_scheduled(&server, "p").unwrap();
    assert_eq!(c["status"], "False");
    assert!(
        c["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("binding rejected")),
        "{c}"
    );
    assert_eq!(c["lastTransitionTime"], since, "{c}");
    wait_for("p bound", || server.node_of("default", "p").is_some()).await;
    running.stop().await;
}

/// A victim's deletion is refused (403): the preemption fails, the preemptor is activated
/// at once instead of waiting in the pool, preempts again and is bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_victim_deletion_activates_the_preemptor() {
    let server = FakeApiServer::start().await;
    server.apply("nodes", &node("n1", "2", json!({})));
    server.apply(
        "pods",
        &pod("victim", "1500m", json!({"nodeName": "n1", "priority": 0})),
    );
    server.fail_next(1, fake_apiserver::Fault::new("DELETE", "pods", 403));
    server.apply("pods", &pod("urgent", "1", json!({"priority": 1000})));
    let running = start_controller(&server).await;
    wait_for("urgent bound to n1", || {
        server.node_of("default", "urgent").as_deref() == Some("n1")
    })
    .await;
    assert!(server.get("pods", "default", "victim").is_none());
    for (result, want) in [("error", 1.0), ("success", 1.0)] {
        let sample =
            format!("scheduler_preemption_goroutines_execution_total{{result=\"{result}\"}}");
        assert_eq!(
            metric(running.health, &sample).await,
            Some(want),
            "{sample}"
        );
    }
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_finishes_frees_its_node() {
    let server = FakeApiServer::start().await;
    server.apply("nodes", &node("n1", "1", json!({})));
    server.apply("pods", &pod("job", "1", json!({"nodeName": "n1"})));
    server.apply("pods", &pod("next", "1", json!({})));
    let running = start_controller(&server).await;
    wait_for("next reported unschedulable", || {
        server
            .events_for("default", "next")
            .iter()
            .any(|e| e["reason"] == "FailedScheduling")
    })
    .await;
    // The job completes: the field-selected watch sees it leave (DELETED).
    let mut job = server.get("pods", "default", "job").unwrap();
    job["status"] = json!({"phase": "Succeeded"});
    server.apply("pods", &job);
    wait_for("next bound to n1", || {
        server.node_of("default", "next").as_deref() == Some("n1")
    })
    .await;
    running.stop().await;
}

const HA_CONFIG: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  leaseDuration: 2s
  renewDeadline: 1s
  retryPeriod: 100ms
  resourceNamespace: kube-system
  resourceName: ferrosched
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_schedules_and_a_standby_takes_over() {
    let server = FakeApiServer::start().await;
    server.apply("nodes", &node("n1", "4", json!({})));
    let a = start_with(&server, HA_CONFIG, "a").await;
    wait_for("a leads", || {
        server
            .lease_holder("kube-system", "ferrosched")
            .is_some_and(|h| h.starts_with("a_"))
    })
    .await;
    let b = start_with(&server, HA_CONFIG, "b").await;
    server.apply("pods", &pod("first", "100m", json!({})));
    wait_for("first bound", || {
        server.node_of("default", "first").is_some()
    })
    .await;
    // The standby renews nothing and schedules nothing.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let holder = server.lease_holder("kube-system", "ferrosched").unwrap();
    assert!(holder.starts_with("a_"), "{holder}");
    let scheduled = server
        .events_for("default", "first")
        .into_iter()
        .find(|e| e["reason"] == "Scheduled")
        .unwrap();
    assert_eq!(scheduled["reportingInstance"], "default-scheduler-a");

    // The leader stops cleanly and releases the lease: the standby takes over at once.
    a.stop().await;
    server.apply("pods", &pod("second", "100m", json!({})));
    wait_for("second bound by b", || {
        server.node_of("default", "second").is_some()
    })
    .await;
    assert!(
        server
            .lease_holder("kube-system", "ferrosched")
            .is_some_and(|h| h.starts_with("b_"))
    );
    b.stop().await;
    let mut bound: Vec<String> = server.bindings().into_iter().map(|(p, _)| p).collect();
    bound.sort();
    assert_eq!(bound, ["default/first", "default/second"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_loses_its_lease_stops() {
    let server = FakeApiServer::start().await;
    let mut a = start_with(&server, HA_CONFIG, "a").await;
    wait_for("a leads", || {
        server
            .lease_holder("kube-system", "ferrosched")
            .is_some_and(|h| h.starts_with("a_"))
    })
    .await;
    // Someone else takes the lease (as after a long network partition).
    let mut lease = server.get("leases", "kube-system", "ferrosched").unwrap();
    lease["spec"]["holderIdentity"] = json!("intruder");
    server.apply("leases", &lease);
    let result = tokio::time::timeout(Duration::from_secs(10), &mut a.task)
        .await
        .expect("stops within renewDeadline plus a renewal")
        .expect("task");
    assert!(
        matches!(result, Err(controller::Error::LeaderLost)),
        "{result:?}"
    );
    assert_eq!(
        server.lease_holder("kube-system", "ferrosched").as_deref(),
        Some("intruder"),
        "a lost leader does not release someone else's lease"
    );
}

/// A renew that the API server accepts and never answers: the leader must stop within
/// renewDeadline (not kube's minutes-long read timeout), the standby takes over once the
/// lease expires, and across the hand-over no pod is bound twice and no node overcommitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_renew_hangs_stops_within_renew_deadline_and_the_standby_takes_over() {
    let server = FakeApiServer::start().await;
    server.apply("nodes", &node("n1", "2", json!({})));
    server.apply("nodes", &node("n2", "2", json!({})));
    let mut a = start_with(&server, HA_CONFIG, "a").await;
    wait_for("a leads", || {
        server
            .lease_holder("kube-system", "ferrosched")
            .is_some_and(|h| h.starts_with("a_"))
    })
    .await;
    let b = start_with(&server, HA_CONFIG, "b").await;
    const LEADING: &str = "leader_election_master_status{name=\"ferrosched\"}";
    wait_for_metric(a.health, LEADING, 1.0).await;
    wait_for_metric(b.health, LEADING, 0.0).await;
    // 10 pods of 500m on 4 CPUs: 8 fit, 2 stay pending.
    let pods: Vec<String> = (0..10).map(|i| format!("p{i}")).collect();
    for p in &pods[..5] {
        server.apply("pods", &pod(p, "500m", json!({})));
    }
    // Only the leader PUTs the lease while it is held: a's next renew hangs.
    server.fail_next(1, fake_apiserver::Fault::hang("PUT", "leases"));
    for p in &pods[5..] {
        server.apply("pods", &pod(p, "500m", json!({})));
    }
    let hung_at = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(5), &mut a.task)
        .await
        .expect("a stops within renewDeadline, not kube's read timeout")
        .expect("task");
    assert!(
        matches!(result, Err(controller::Error::LeaderLost)),
        "{result:?}"
    );
    // renewDeadline (1s) after the last renew was sent, plus a retryPeriod and slack.
    assert!(
        hung_at.elapsed() < Duration::from_millis(2500),
        "{:?}",
        hung_at.elapsed()
    );
    assert_eq!(server.faults_left(), 0, "a's renew hung");
    wait_for("b leads", || {
        server
            .lease_holder("kube-system", "ferrosched")
            .is_some_and(|h| h.starts_with("b_"))
    })
    .await;
    wait_for_metric(b.health, LEADING, 1.0).await;
    // Pods created after a stopped are b's.
    server.apply(
        "pods",
        &pod("late", "500m", json!({"nodeSelector": {"none": "x"}})),
    );
    wait_for("8 of 10 bound", || {
        pods.iter()
            .filter(|p| server.node_of("default", p).is_some())
            .count()
            == 8
    })
    .await;
    wait_for("late reported unschedulable", || {
        server
            .events_for("default", "late")
            .iter()
            .any(|e| e["reason"] == "FailedScheduling")
    })
    .await;
    // Give a stale scheduler time to overcommit, if one were still running.
    tokio::time::sleep(Duration::from_millis(500)).await;
    b.stop().await;
    assert_eq!(server.double_bindings(), Vec::<String>::new());
    let mut per_pod = std::collections::BTreeMap::<String, usize>::new();
    let mut per_node = std::collections::BTreeMap::<String, usize>::new();
    for (p, n) in server.bindings() {
        *per_pod.entry(p).or_default() += 1;
        *per_node.entry(n).or_default() += 1;
    }
    assert!(per_pod.values().all(|&c| c == 1), "{per_pod:?}");
    assert_eq!(per_pod.len(), 8, "{per_pod:?}");
    // 4 pods of 500m fill a 2-CPU node.
    assert!(per_node.values().all(|&c| c <= 4), "{per_node:?}");
    let late_failed = server
        .events_for("default", "late")
        .into_iter()
        .find(|e| e["reason"] == "FailedScheduling")
        .map(|e| e["reportingInstance"].clone());
    assert_eq!(late_failed, Some(json!("default-scheduler-b")));
}

/// A binding hangs when leadership is lost: the leader does not wait for it (nor retry it),
/// it stops within renewDeadline, and the new leader binds the pod once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_in_flight_when_leadership_is_lost_is_cancelled_not_retried() {
    let server = FakeApiServer::start().await;
    server.apply("nodes", &node("n1", "4", json!({})));
    let mut a = start_with(&server, HA_CONFIG, "a").await;
    wait_for("a leads", || {
        server
            .lease_holder("kube-system", "ferrosched")
            .is_some_and(|h| h.starts_with("a_"))
    })
    .await;
    let b = start_with(&server, HA_CONFIG, "b").await;
    let binding_requests = |server: &FakeApiServer| {
        server
            .requests()
            .iter()
            .filter(|r| r.resource == "pods" && r.subresource == "binding")
            .count()
    };
    server.fail_next(
        1,
        fake_apiserver::Fault::hang("POST", "pods").subresource("binding"),
    );
    server.apply("pods", &pod("stuck", "100m", json!({})));
    wait_for("the binding is in flight", || {
        binding_requests(&server) == 1
    })
    .await;
    server.fail_next(1, fake_apiserver::Fault::hang("PUT", "leases"));
    let hung_at = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(5), &mut a.task)
        .await
        .expect("a does not wait for its hung binding")
        .expect("task");
    assert!(
        matches!(result, Err(controller::Error::LeaderLost)),
        "{result:?}"
    );
    assert!(
        hung_at.elapsed() < Duration::from_millis(2500),
        "{:?}",
        hung_at.elapsed()
    );
    assert_eq!(
        binding_requests(&server),
        1,
        "a sent nothing after losing the lease"
    );
    wait_for("b binds the pod", || {
        server.node_of("default", "stuck").is_some()
    })
    .await;
    b.stop().await;
    assert_eq!(
        server.bindings(),
        vec![("default/stuck".into(), "n1".into())]
    );
}

/// A burst of pods against a server that does not answer bindings: the controller keeps
/// at most MAX_ACTIONS_IN_FLIGHT bindings in flight and holds the rest back, instead of a
/// task and a request per assumed pod; once ACTIONS_QUEUED more wait for a slot, the
/// scheduling loop waits too and the rest of the burst stays in the active queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bindings_in_flight_are_bounded_when_the_server_falls_behind() {
    let server = FakeApiServer::start().await;
    for n in ["n1", "n2", "n3"] {
        server.apply("nodes", &node(n, "64", json!({})));
    }
    server.fail_next(
        10_000,
        fake_apiserver::Fault::hang("POST", "pods").subresource("binding"),
    );
    let held_back = 40;
    let burst = controller::MAX_ACTIONS_IN_FLIGHT + controller::ACTIONS_QUEUED + held_back;
    for i in 0..burst {
        server.apply("pods", &pod(&format!("burst-{i}"), "10m", json!({})));
    }
    let running = start_controller(&server).await;
    let binding_requests = || {
        server
            .requests()
            .iter()
            .filter(|r| r.resource == "pods" && r.subresource == "binding")
            .count()
    };
    wait_for("the bound is reached", || {
        binding_requests() >= controller::MAX_ACTIONS_IN_FLIGHT
    })
    .await;
    // Two more pods are out of the queue: the executor holds one action while it waits for
    // a slot, and the loop waits in the send of the next. Unbounded, the loop would have
    // assumed the whole burst (0 left).
    let active = "scheduler_pending_pods{queue=\"active\"}";
    let left = (held_back - 2) as f64;
    wait_for_metric(running.health, active, left).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(metric(running.health, active).await, Some(left));
    assert_eq!(binding_requests(), controller::MAX_ACTIONS_IN_FLIGHT);
    running.task.abort();
}

/// Scheduled events that the server never answers do not hold back bindings: a bound pod
/// gives its slot to the next binding before its event is written (upstream writes events
/// apart from the binding cycle), so more than MAX_ACTIONS_IN_FLIGHT pods are bound while
/// every event write hangs, and the writes in flight stay bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_scheduled_events_do_not_hold_binding_slots() {
    let server = FakeApiServer::start().await;
    // 64 pods' memory each.
    for n in ["n1", "n2", "n3", "n4"] {
        server.apply("nodes", &node(n, "64", json!({})));
    }
    server.fail_next(10_000, fake_apiserver::Fault::hang("POST", "events"));
    let burst = controller::MAX_ACTIONS_IN_FLIGHT + 72;
    for i in 0..burst {
        server.apply("pods", &pod(&format!("burst-{i}"), "10m", json!({})));
    }
    let running = start_controller(&server).await;
    wait_for("every pod is bound", || server.bindings().len() == burst).await;
    let event_posts = server
        .requests()
        .iter()
        .filter(|r| r.verb == "create" && r.resource == "events")
        .count();
    assert!(
        (1..=controller::SCHEDULED_EVENT_WRITES).contains(&event_posts),
        "{event_posts} event writes in flight"
    );
    running.task.abort();
}

/// SIGTERM (the shutdown future) in the middle of a burst of bindings: in-flight bindings
/// finish, no pod is bound twice or lost (a new leader binds the rest), and the lease is
/// released at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_mid_burst_binds_each_pod_once_loses_none_and_releases_the_lease() {
    let server = FakeApiServer::start().await;
    server.apply("nodes", &node("n1", "64", json!({})));
    let a = start_with(&server, HA_CONFIG, "a").await;
    wait_for("a leads", || {
        server
            .lease_holder("kube-system", "ferrosched")
            .is_some_and(|h| h.starts_with("a_"))
    })
    .await;
    let pods: Vec<String> = (0..60).map(|i| format!("burst-{i}")).collect();
    for p in &pods {
        server.apply("pods", &pod(p, "100m", json!({})));
    }
    wait_for("the burst started binding", || {
        !server.bindings().is_empty()
    })
    .await;
    a.stop().await;
    let bound_by_a = server.bindings().len();
    println!(
        "{bound_by_a} of {} bound before the shutdown ended",
        pods.len()
    );
    assert_eq!(
        server.lease_holder("kube-system", "ferrosched"),
        None,
        "the lease is released"
    );
    // Nothing more from a after it returned.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.bindings().len(), bound_by_a);

    let b = start_with(&server, HA_CONFIG, "b").await;
    wait_for("all bound", || {
        pods.iter().all(|p| server.node_of("default", p).is_some())
    })
    .await;
    b.stop().await;
    assert_eq!(server.double_bindings(), Vec::<String>::new());
    let mut per_pod = std::collections::BTreeMap::<String, usize>::new();
    for (p, _) in server.bindings() {
        *per_pod.entry(p).or_default() += 1;
    }
    assert_eq!(per_pod.len(), pods.len());
    assert!(per_pod.values().all(|&c| c == 1), "{per_pod:?}");
}

/// The secure port as kube-scheduler guards it: health paths for anyone (the kubelet's
/// probes carry no token), `/metrics` only for a token the API server authenticates
/// (TokenReview) whose user may `get /metrics` (SubjectAccessReview); reviews are cached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_need_an_authenticated_and_authorized_token_health_paths_do_not() {
    let server = FakeApiServer::start().await;
    const PROMETHEUS: &str = "system:serviceaccount:monitoring:prometheus";
    server.add_token("scraper-token", PROMETHEUS, &["system:serviceaccounts"]);
    server.add_token("alice-token", "alice", &["system:authenticated"]);
    server.grant(fake_apiserver::Grant::non_resource(
        PROMETHEUS, "get", "/metrics",
    ));
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
    let running = start_full(
        &server,
        CONFIG,
        "test-host",
        Some(std::sync::Arc::new(auth)),
    )
    .await;
    let addr = running.health;
    let (status, body) = http_get(addr, "/healthz").await;
    assert!(status.contains("200"), "{status} {body}");
    let (status, _) = http_get(addr, "/livez").await;
    assert!(status.contains("200"), "{status}");

    // No token: system:anonymous, which may not get /metrics.
    let (status, body) = http_get(addr, "/metrics").await;
    assert!(status.contains("403"), "{status}");
    assert!(
        body.contains("User \"system:anonymous\" cannot get path \"/metrics\""),
        "{body}"
    );
    // A token the API server does not know: 401, health paths included.
    for path in ["/metrics", "/healthz"] {
        let (status, _) = http_get_as(addr, path, Some("stolen-token")).await;
        assert!(status.contains("401"), "{path}: {status}");
    }
    // Authenticated but not authorized.
    let (status, body) = http_get_as(addr, "/metrics", Some("alice-token")).await;
    assert!(status.contains("403"), "{status}");
    assert!(body.contains("User \"alice\" cannot get path"), "{body}");
    // The scraper's service account.
    let reviews = |server: &FakeApiServer| {
        server
            .requests()
            .iter()
            .filter(|r| r.resource == "tokenreviews" || r.resource == "subjectaccessreviews")
            .count()
    };
    let (status, body) = http_get_as(addr, "/metrics", Some("scraper-token")).await;
    assert!(status.contains("200"), "{status} {body}");
    assert!(body.contains("scheduler_pending_pods"), "{body}");
    let after_first = reviews(&server);
    assert!(
        after_first >= 2,
        "a TokenReview and a SubjectAccessReview were made"
    );
    let (status, _) = http_get_as(addr, "/metrics", Some("scraper-token")).await;
    assert!(status.contains("200"), "{status}");
    assert_eq!(
        reviews(&server),
        after_first,
        "the second scrape is answered from the cache"
    );
    running.stop().await;
}

/// Upstream's queueing: a pod rejected by NodeResourcesFit waits in the unschedulable pool
/// through events that cannot help it (a RuntimeClass added, well past its 1 s backoff) and
/// is retried when a node is added. Observed through `/metrics`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unfit_pod_is_retried_only_on_events_that_can_help_and_metrics_count_it() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    server.apply("nodes", &node("n1", "1", json!({})));
    server.apply("pods", &pod("small", "100m", json!({})));
    server.apply("pods", &pod("huge", "3", json!({})));
    let running = start_controller(&server).await;
    let m = running.health;
    wait_for_metric(m, UNSCHEDULABLE_ATTEMPTS, 1.0).await;
    wait_for_metric(m, SCHEDULED_ATTEMPTS, 1.0).await;
    wait_for_metric(m, "scheduler_pending_pods{queue=\"unschedulable\"}", 1.0).await;
    assert_eq!(metric(m, UNSCHEDULABLE_BY_FIT).await, Some(1.0));

    server.apply(
        "runtimeclasses",
        &json!({"metadata": {"name": "gvisor"}, "handler": "runsc"}),
    );
    // Backoff (1 s) plus a backoff flush (1 s) have passed: a requeue would have retried it.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(metric(m, UNSCHEDULABLE_ATTEMPTS).await, Some(1.0));
    assert_eq!(
        metric(m, "scheduler_pending_pods{queue=\"unschedulable\"}").await,
        Some(1.0)
    );

    server.apply("nodes", &node("big", "8", json!({})));
    wait_for("huge bound to the new node", || {
        server.node_of("default", "huge").as_deref() == Some("big")
    })
    .await;
    wait_for_metric(m, SCHEDULED_ATTEMPTS, 2.0).await;
    assert_eq!(metric(m, UNSCHEDULABLE_ATTEMPTS).await, Some(1.0));
    for (sample, want) in [
        ("scheduler_pending_pods{queue=\"active\"}", 0.0),
        ("scheduler_pending_pods{queue=\"backoff\"}", 0.0),
        ("scheduler_pending_pods{queue=\"unschedulable\"}", 0.0),
        ("scheduler_pending_pods{queue=\"gated\"}", 0.0),
        // small: bound at its first attempt; huge: at its second.
        (
            "scheduler_pod_scheduling_sli_duration_seconds_count{attempts=\"1\"}",
            1.0,
        ),
        (
            "scheduler_pod_scheduling_sli_duration_seconds_count{attempts=\"2\"}",
            1.0,
        ),
        (
            "scheduler_scheduling_attempt_duration_seconds_count{result=\"scheduled\",profile=\"default-scheduler\"}",
            2.0,
        ),
        (
            "scheduler_scheduling_attempt_duration_seconds_count{result=\"unschedulable\",profile=\"default-scheduler\"}",
            1.0,
        ),
        (
            "scheduler_framework_extension_point_duration_seconds_count{extension_point=\"Bind\",status=\"Success\",profile=\"default-scheduler\"}",
            2.0,
        ),
        // scheduler-core's extension points, every cycle (3: small, huge twice).
        (
            "scheduler_framework_extension_point_duration_seconds_count{extension_point=\"PreFilter\",status=\"Success\",profile=\"default-scheduler\"}",
            3.0,
        ),
        (
            "scheduler_framework_extension_point_duration_seconds_count{extension_point=\"Filter\",status=\"Success\",profile=\"default-scheduler\"}",
            3.0,
        ),
        (
            "scheduler_framework_extension_point_duration_seconds_count{extension_point=\"Reserve\",status=\"Success\",profile=\"default-scheduler\"}",
            2.0,
        ),
        // Plugins: only the first of the three cycles was sampled.
        (
            "scheduler_plugin_execution_duration_seconds_count{plugin=\"NodeResourcesFit\",extension_point=\"PreFilter\",status=\"Success\"}",
            1.0,
        ),
        // PreBind is timed for every pod, volumes or not.
        (
            "scheduler_framework_extension_point_duration_seconds_count{extension_point=\"PreBind\",status=\"Success\",profile=\"default-scheduler\"}",
            2.0,
        ),
        // DefaultPreemption ran (and found nothing) for huge's failed attempt.
        ("scheduler_preemption_attempts_total", 1.0),
        ("scheduler_preemption_victims_count", 0.0),
        // huge left the pool and was bound: no pod is held back any more.
        (UNSCHEDULABLE_BY_FIT, 0.0),
        // Both pods entered activeQ when added; huge went to the pool after its failed
        // attempt and back to activeQ (its backoff long over) when the node was added.
        (
            "scheduler_queue_incoming_pods_total{queue=\"active\",event=\"UnschedulablePodAdd\"}",
            2.0,
        ),
        (
            "scheduler_queue_incoming_pods_total{queue=\"unschedulable\",event=\"ScheduleAttemptFailure\"}",
            1.0,
        ),
        (
            "scheduler_queue_incoming_pods_total{queue=\"active\",event=\"NodeAdd\"}",
            1.0,
        ),
        // Informer events handled, labelled as upstream's handlers.
        (
            "scheduler_event_handling_duration_seconds_count{event=\"NodeAdd\"}",
            2.0,
        ),
        (
            "scheduler_event_handling_duration_seconds_count{event=\"UnschedulablePodAdd\"}",
            2.0,
        ),
        (
            "scheduler_event_handling_duration_seconds_count{event=\"AssignedPodAdd\"}",
            2.0,
        ),
        (
            "scheduler_event_handling_duration_seconds_count{event=\"RuntimeClassAdd\"}",
            1.0,
        ),
    ] {
        assert_eq!(metric(m, sample).await, Some(want), "{sample}");
    }
    running.stop().await;
}

fn claim(name: &str, class: &str, size: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                 "resources": {"requests": {"storage": size}}},
        "status": {"phase": "Pending"},
    })
}

fn uses_claims(claims: &[&str]) -> Value {
    let volumes: Vec<Value> = claims
        .iter()
        .map(|c| json!({"name": c, "persistentVolumeClaim": {"claimName": c}}))
        .collect();
    json!({"volumes": volumes})
}

/// A StatefulSet-like pod with two WaitForFirstConsumer claims: one matches a local volume
/// on n2 (static binding: the controller sets the PV's claimRef), one is provisioned (the
/// controller annotates the claim with the chosen node). The test's PV controller binds
/// both; only then is the pod bound, to n2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binds_and_provisions_wait_for_first_consumer_claims_before_binding_the_pod() {
    use support::pv_controller::{self, ANN_SELECTED_NODE};
    let _ = tracing_subscriber::fmt()
        .with_env_filter("controller=debug")
        .with_test_writer()
        .try_init();
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    for n in ["n1", "n2"] {
        server.apply("nodes", &node(n, "4", json!({"kubernetes.io/hostname": n})));
    }
    server.apply(
        "storageclasses",
        &json!({"metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
                "volumeBindingMode": "WaitForFirstConsumer"}),
    );
    server.apply(
        "storageclasses",
        &json!({"metadata": {"name": "csi-wffc"}, "provisioner": "csi.example.com",
                "volumeBindingMode": "WaitForFirstConsumer"}),
    );
    server.apply(
        "persistentvolumes",
        &json!({
            "metadata": {"name": "local-n2"},
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                     "storageClassName": "local", "persistentVolumeReclaimPolicy": "Retain",
                     "local": {"path": "/mnt/disks/ssd1"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n2"]}]}]}}},
            "status": {"phase": "Available"},
        }),
    );
    server.apply(
        "persistentvolumeclaims",
        &claim("cache-web-0", "local", "5Gi"),
    );
    server.apply(
        "persistentvolumeclaims",
        &claim("data-web-0", "csi-wffc", "1Gi"),
    );
    server.apply(
        "pods",
        &pod("web-0", "100m", uses_claims(&["cache-web-0", "data-web-0"])),
    );
    let running = start_controller(&server).await;

    // The PV controller runs beside the scheduler (a reconcile pass every poll).
    wait_for("web-0 bound", || {
        pv_controller::reconcile(&server);
        server.node_of("default", "web-0").is_some()
    })
    .await;
    assert_eq!(server.node_of("default", "web-0").as_deref(), Some("n2"));
    let data = server
        .get("persistentvolumeclaims", "default", "data-web-0")
        .unwrap();
    assert_eq!(data["metadata"]["annotations"][ANN_SELECTED_NODE], "n2");
    assert_eq!(data["status"]["phase"], "Bound");
    let provisioned = data["spec"]["volumeName"].as_str().unwrap();
    assert!(server.get("persistentvolumes", "", provisioned).is_some());
    let cache = server
        .get("persistentvolumeclaims", "default", "cache-web-0")
        .unwrap();
    assert_eq!(cache["spec"]["volumeName"], "local-n2");
    let local = server.get("persistentvolumes", "", "local-n2").unwrap();
    assert_eq!(local["spec"]["claimRef"]["name"], "cache-web-0");
    assert_eq!(local["spec"]["claimRef"]["uid"], cache["metadata"]["uid"]);

    // Order: the claimRef and selected-node patches, then (claims bound) the Binding.
    let requests = server.requests();
    let at = |verb: &str, resource: &str, sub: &str| {
        requests
            .iter()
            .position(|r| r.verb == verb && r.resource == resource && r.subresource == sub)
            .unwrap_or_else(|| panic!("no {verb} {resource}/{sub}"))
    };
    let binding = at("create", "pods", "binding");
    assert!(at("patch", "persistentvolumes", "") < binding);
    assert!(at("patch", "persistentvolumeclaims", "") < binding);
    // NominatedNodeNameForExpectation: PreBind has work, so the pod is nominated to n2
    // first (its only status patch: it never failed); the Binding clears it again.
    let nominated = at("patch", "pods", "status");
    assert!(nominated < at("patch", "persistentvolumes", ""));
    let web = server.get("pods", "default", "web-0").unwrap();
    assert!(web["status"].get("nominatedNodeName").is_none(), "{web}");
    wait_for("the Scheduled event", || {
        server
            .events_for("default", "web-0")
            .iter()
            .any(|e| e["reason"] == "Scheduled")
    })
    .await;
    running.stop().await;
}

/// While the binding cycle waits for a provisioned claim, the volume the provisioner made is
/// checked against the chosen node: one whose node affinity names another zone fails the
/// attempt with upstream's message instead of binding the pod where it cannot mount it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provisioned_volume_whose_affinity_misses_the_node_fails_the_binding() {
    use support::pv_controller::ANN_SELECTED_NODE;
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    server.apply(
        "nodes",
        &node("n1", "4", json!({"topology.kubernetes.io/zone": "a"})),
    );
    server.apply(
        "storageclasses",
        &json!({"metadata": {"name": "csi-wffc"}, "provisioner": "csi.example.com",
                "volumeBindingMode": "WaitForFirstConsumer"}),
    );
    server.apply("persistentvolumeclaims", &claim("data", "csi-wffc", "1Gi"));
    server.apply("pods", &pod("db", "100m", uses_claims(&["data"])));
    let running = start_controller(&server).await;

    wait_for("the claim is given the node", || {
        server
            .get("persistentvolumeclaims", "default", "data")
            .is_some_and(|c| c["metadata"]["annotations"][ANN_SELECTED_NODE] == "n1")
    })
    .await;
    // A provisioner that got the topology wrong: the volume lives in zone b.
    let pvc = server
        .get("persistentvolumeclaims", "default", "data")
        .unwrap();
    let pv = json!({
        "metadata": {"name": "pv-in-b"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": "csi-wffc",
                 "csi": {"driver": "csi.example.com", "volumeHandle": "v1"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["b"]}]}]}}},
    });
    support::pv_controller::bind(&server, pvc, pv);
    let want = "running PreBind plugin \"VolumeBinding\": binding volumes: pv \"pv-in-b\" \
                node affinity doesn't match node \"n1\": no matching NodeSelectorTerms";
    wait_for("FailedScheduling naming the volume and the node", || {
        server
            .events_for("default", "db")
            .iter()
            .any(|e| e["reason"] == "FailedScheduling" && e["note"] == want)
    })
    .await;
    assert_eq!(server.node_of("default", "db"), None);
    running.stop().await;
}

/// An unbound Immediate claim makes the pod unschedulable with upstream's message; once the
/// claim is bound (by the PV controller), the claim's update retries the pod and it binds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_waiting_for_an_immediate_claim_is_scheduled_once_the_claim_is_bound() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    server.apply(
        "nodes",
        &node("n1", "4", json!({"kubernetes.io/hostname": "n1"})),
    );
    server.apply(
        "storageclasses",
        &json!({"metadata": {"name": "standard"}, "provisioner": "csi.example.com"}),
    );
    server.apply("persistentvolumeclaims", &claim("logs", "standard", "1Gi"));
    server.apply("pods", &pod("app", "100m", uses_claims(&["logs"])));
    let running = start_controller(&server).await;

    wait_for("FailedScheduling for the unbound claim", || {
        server.events_for("default", "app").iter().any(|e| {
            e["reason"] == "FailedScheduling"
                && e["note"]
                    .as_str()
                    .unwrap_or("")
                    .contains("pod has unbound immediate PersistentVolumeClaims")
        })
    })
    .await;
    assert_eq!(server.node_of("default", "app"), None);

    let pvc = server
        .get("persistentvolumeclaims", "default", "logs")
        .unwrap();
    let pv = json!({
        "metadata": {"name": "pv-logs"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": "standard",
                 "csi": {"driver": "csi.example.com", "volumeHandle": "logs"}},
    });
    support::pv_controller::bind(&server, pvc, pv);
    wait_for("app bound after its claim was bound", || {
        server.node_of("default", "app").is_some()
    })
    .await;
    // Nothing left for the scheduler to write: the claim was bound already.
    assert!(
        !server
            .requests()
            .iter()
            .any(|r| r.verb == "patch" && r.resource.starts_with("persistentvolume"))
    );
    running.stop().await;
}

/// Nobody provisions within `bindTimeoutSeconds`: the attempt fails with upstream's
/// message, the assumed volumes and pod are forgotten and the pod is retried with backoff;
/// once a PV controller is there, the retry binds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_binding_timeout_fails_the_attempt_and_the_pod_is_retried() {
    let config = format!(
        "{CONFIG}profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: VolumeBinding
    args: {{bindTimeoutSeconds: 1}}
"
    );
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    server.apply(
        "nodes",
        &node("n1", "4", json!({"kubernetes.io/hostname": "n1"})),
    );
    server.apply(
        "storageclasses",
        &json!({"metadata": {"name": "csi-wffc"}, "provisioner": "csi.example.com",
                "volumeBindingMode": "WaitForFirstConsumer"}),
    );
    server.apply("persistentvolumeclaims", &claim("data", "csi-wffc", "1Gi"));
    server.apply("pods", &pod("slow", "100m", uses_claims(&["data"])));
    let running = start_with(&server, &config, "test-host").await;

    wait_for("FailedScheduling after the bind timeout", || {
        server.events_for("default", "slow").iter().any(|e| {
            e["reason"] == "FailedScheduling"
                && e["note"]
                    == "running PreBind plugin \"VolumeBinding\": binding volumes: context deadline exceeded"
        })
    })
    .await;
    assert_eq!(server.node_of("default", "slow"), None);
    // The status patch follows the event.
    wait_for("PodScheduled=False, reason SchedulerError", || {
        let pod = server.get("pods", "default", "slow").unwrap();
        pod["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter().any(|c| {
                c["type"] == "PodScheduled"
                    && c["status"] == "False"
                    && c["reason"] == "SchedulerError"
            })
        })
    })
    .await;

    wait_for("slow bound once claims get provisioned", || {
        support::pv_controller::reconcile(&server);
        server.node_of("default", "slow").is_some()
    })
    .await;
    running.stop().await;
}

/// Two zones, a WaitForFirstConsumer class whose CSI driver reports storage capacity, and
/// a 5Gi claim.
fn capacity_cluster(server: &FakeApiServer) {
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    // The hostname label as every kubelet sets it: the test provisioner pins each volume to
    // it, and the binding cycle checks the volume's affinity against the node.
    for (n, zone) in [("in-a", "a"), ("in-b", "b")] {
        server.apply(
            "nodes",
            &node(
                n,
                "4",
                json!({"topology.kubernetes.io/zone": zone, "kubernetes.io/hostname": n}),
            ),
        );
    }
    server.apply(
        "storageclasses",
        &json!({"metadata": {"name": "lvm"}, "provisioner": "lvm.csi.example.com",
                "volumeBindingMode": "WaitForFirstConsumer"}),
    );
    server.apply(
        "csidrivers",
        &json!({"metadata": {"name": "lvm.csi.example.com"}, "spec": {"storageCapacity": true}}),
    );
    server.apply("persistentvolumeclaims", &claim("data", "lvm", "5Gi"));
    server.apply("pods", &pod("db", "100m", uses_claims(&["data"])));
}

/// No CSIStorageCapacity anywhere: the pod fails with upstream's message. Capacity reported
/// in zone b retries it (a CSIStorageCapacity add), and the claim is provisioned there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provisioning_waits_for_reported_storage_capacity() {
    use support::pv_controller::{self, ANN_SELECTED_NODE};
    let server = FakeApiServer::start().await;
    capacity_cluster(&server);
    let running = start_controller(&server).await;

    wait_for("FailedScheduling for lack of storage", || {
        server.events_for("default", "db").iter().any(|e| {
            e["reason"] == "FailedScheduling"
                && e["note"]
                    .as_str()
                    .unwrap_or("")
                    .contains("2 node(s) did not have enough free storage")
        })
    })
    .await;
    assert_eq!(server.node_of("default", "db"), None);

    server.apply(
        "csistoragecapacities",
        &json!({
            "metadata": {"name": "lvm-b", "namespace": "kube-system"},
            "storageClassName": "lvm",
            "nodeTopology": {"matchLabels": {"topology.kubernetes.io/zone": "b"}},
            "capacity": "10Gi",
        }),
    );
    wait_for("db bound once capacity is reported", || {
        pv_controller::reconcile(&server);
        server.node_of("default", "db").is_some()
    })
    .await;
    assert_eq!(server.node_of("default", "db").as_deref(), Some("in-b"));
    let data = server
        .get("persistentvolumeclaims", "default", "data")
        .unwrap();
    assert_eq!(data["metadata"]["annotations"][ANN_SELECTED_NODE], "in-b");
    running.stop().await;
}

/// A server without the optional APIs (CSIDriver and CSIStorageCapacity, and
/// resource.k8s.io/v1 as on every server before 1.34, which answers their paths with a
/// plain-text 404): the controller becomes ready anyway and provisions without a capacity
/// check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_the_optional_apis_is_tolerated() {
    let server = FakeApiServer::start().await;
    capacity_cluster(&server);
    server.disable("csidrivers");
    server.disable("csistoragecapacities");
    server.disable("resourceclaims");
    let running = start_controller(&server).await;
    wait_for("db bound without a capacity check", || {
        support::pv_controller::reconcile(&server);
        server.node_of("default", "db").is_some()
    })
    .await;
    let (status, body) = http_get(running.health, "/readyz").await;
    assert!(status.contains("200"), "{status}: {body}");
    running.stop().await;
}

/// A volume still attached to the only node (a VolumeAttachment, no pod) fills its attach
/// limit of 1: the pod's volume does not fit until the attachment is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_still_attached_holds_its_attach_slot_until_detached() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    server.apply("nodes", &node("n1", "4", json!({})));
    server.apply(
        "csinodes",
        &json!({"metadata": {"name": "n1"}, "spec": {"drivers": [
            {"name": "ebs.csi.aws.com", "nodeID": "i-1", "allocatable": {"count": 1}}]}}),
    );
    for (pv, handle) in [("pv-old", "vol-old"), ("pv-new", "vol-new")] {
        server.apply(
            "persistentvolumes",
            &json!({
                "metadata": {"name": pv},
                "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                         "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": handle}},
                "status": {"phase": "Bound"},
            }),
        );
    }
    let mut data = claim("data", "", "1Gi");
    data["spec"]["volumeName"] = json!("pv-new");
    data["metadata"]["annotations"] = json!({"pv.kubernetes.io/bind-completed": "yes"});
    data["status"]["phase"] = json!("Bound");
    server.apply("persistentvolumeclaims", &data);
    server.apply(
        "volumeattachments",
        &json!({"metadata": {"name": "va-old"},
                "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "n1",
                         "source": {"persistentVolumeName": "pv-old"}}}),
    );
    server.apply("pods", &pod("app", "100m", uses_claims(&["data"])));
    let running = start_controller(&server).await;

    wait_for("FailedScheduling for the attach limit", || {
        server.events_for("default", "app").iter().any(|e| {
            e["reason"] == "FailedScheduling"
                && e["note"]
                    .as_str()
                    .unwrap_or("")
                    .contains("1 node(s) exceed max volume count")
        })
    })
    .await;
    assert_eq!(server.node_of("default", "app"), None);
    server.delete("volumeattachments", "", "va-old");
    wait_for("app bound once the old volume is detached", || {
        server.node_of("default", "app").is_some()
    })
    .await;
    running.stop().await;
}

/// A pod with `spec.resourceClaims` on a server without resource.k8s.io/v1 (a 1.28-1.33
/// cluster): refused with a message saying why, never bound, while its neighbours schedule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_with_resource_claims_is_never_bound_without_dra() {
    let server = FakeApiServer::start().await;
    // A 1.33 server: no resource.k8s.io/v1 (discovery and the collection answer 404).
    server.disable("resourceclaims");
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    server.apply("nodes", &node("n1", "4", json!({})));
    server.apply(
        "pods",
        &pod(
            "gpu-job",
            "100m",
            json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]}),
        ),
    );
    server.apply("pods", &pod("plain", "100m", json!({})));
    let running = start_controller(&server).await;

    wait_for("plain bound", || {
        server.node_of("default", "plain").is_some()
    })
    .await;
    wait_for("FailedScheduling for gpu-job", || {
        server
            .events_for("default", "gpu-job")
            .iter()
            .any(|e| e["reason"] == "FailedScheduling")
    })
    .await;
    let ev = server
        .events_for("default", "gpu-job")
        .into_iter()
        .find(|e| e["reason"] == "FailedScheduling")
        .unwrap();
    let note = ev["note"].as_str().unwrap();
    assert!(
        note.starts_with(&format!(
            "0/1 nodes are available: {}.",
            scheduler_core::plugins::dynamic_resources::API_NOT_SERVED
        )),
        "{note}"
    );
    assert!(server.node_of("default", "gpu-job").is_none());
    assert!(
        !server
            .requests()
            .iter()
            .any(|r| r.name == "gpu-job" && r.subresource == "binding"),
        "no Binding may be POSTed for a pod with unallocated claims"
    );
    running.stop().await;
}

const GPU_DRIVER: &str = "gpu.example.com";

fn gpu_slice(node: &str, devices: &[&str]) -> Value {
    device_slice(GPU_DRIVER, node, devices)
}

/// DeviceClass `gpu` for the GPU driver's devices, backing the extended resource
/// `example.com/gpu`.
fn extended_gpu_class() -> Value {
    json!({"metadata": {"name": "gpu"},
           "spec": {"extendedResourceName": "example.com/gpu",
                    "selectors": [{"cel": {"expression": format!("device.driver == {GPU_DRIVER:?}")}}]}})
}

fn device_slice(driver: &str, node: &str, devices: &[&str]) -> Value {
    json!({
        "metadata": {"name": format!("{node}-{driver}")},
        "spec": {
            "driver": driver,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "nodeName": node,
            "devices": devices.iter().map(|d| json!({"name": d})).collect::<Vec<_>>(),
        },
    })
}

fn gpu_claim(name: &str, owner: Option<(&str, &str)>) -> Value {
    device_claim(name, "gpu", owner)
}

fn device_claim(name: &str, class: &str, owner: Option<(&str, &str)>) -> Value {
    let mut c = json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "dev", "exactly": {"deviceClassName": class}}]}},
    });
    if let Some((pod, uid)) = owner {
        c["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Pod",
            "name": pod, "uid": uid, "controller": true}]);
    }
    c
}

fn allocated_device(server: &FakeApiServer, claim: &str) -> Option<String> {
    let c = server.get("resourceclaims", "default", claim)?;
    c["status"]["allocation"]["devices"]["results"][0]["device"]
        .as_str()
        .map(str::to_string)
}

fn scheduled_message(server: &FakeApiServer, pod: &str) -> Option<String> {
    let p = server.get("pods", "default", pod)?;
    p["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "PodScheduled")
        .and_then(|c| c["message"].as_str().map(str::to_string))
}

/// Consumable capacity through the API: two pods' claims get shares of one NIC that
/// allows multiple allocations; the status written carries each share's `shareID` and
/// `consumedCapacity` (rounded to the policy's step), which the API server accepts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_get_shares_of_a_device_allowing_multiple_allocations() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    server.apply("nodes", &node("n1", "4", json!({})));
    server.apply(
        "deviceclasses",
        &json!({"metadata": {"name": "gpu"},
                "spec": {"selectors": [{"cel": {"expression": format!("device.driver == {GPU_DRIVER:?}")}}]}}),
    );
    let mut slice = gpu_slice("n1", &["nic-0"]);
    slice["spec"]["devices"][0] = json!({
        "name": "nic-0",
        "allowMultipleAllocations": true,
        "capacity": {"bandwidth": {"value": "10G",
            "requestPolicy": {"default": "1G", "validRange": {"min": "1G", "step": "1G"}}}},
    });
    server.apply("resourceslices", &slice);
    for (claim, bw) in [("c1", "4G"), ("c2", "2500M")] {
        let mut c = gpu_claim(claim, None);
        c["spec"]["devices"]["requests"][0]["exactly"]["capacity"] =
            json!({"requests": {"bandwidth": bw}});
        server.apply("resourceclaims", &c);
    }
    for (p, claim) in [("p1", "c1"), ("p2", "c2")] {
        let with_claim = json!({"resourceClaims": [{"name": "nic", "resourceClaimName": claim}]});
        server.apply("pods", &pod(p, "100m", with_claim));
    }
    let running = start_controller(&server).await;
    wait_for("both pods bound", || {
        server.node_of("default", "p1").is_some() && server.node_of("default", "p2").is_some()
    })
    .await;
    let result = |claim: &str| {
        let c = server.get("resourceclaims", "default", claim).unwrap();
        c["status"]["allocation"]["devices"]["results"][0].clone()
    };
    let (r1, r2) = (result("c1"), result("c2"));
    assert_eq!(r1["device"], "nic-0", "{r1}");
    assert_eq!(r2["device"], "nic-0", "{r2}");
    assert_eq!(r1["consumedCapacity"]["bandwidth"], "4G", "{r1}");
    assert_eq!(
        r2["consumedCapacity"]["bandwidth"], "3G",
        "rounded up: {r2}"
    );
    let (s1, s2) = (
        r1["shareID"].as_str().unwrap(),
        r2["shareID"].as_str().unwrap(),
    );
    assert_eq!(s1.len(), 36, "{s1}");
    assert_ne!(s1, s2);
    running.stop().await;
}

/// One GPU offered as MIG slices and as a vGPU profile on one counter set, the two modes
/// in different compatibility groups (KEP-5963's example, in our words): the counter set
/// in a slice of its own, the partitions in a second slice of the pool.
fn apply_mig_and_vgpu(server: &FakeApiServer) {
    let part = |name: &str, mode: &str, sm: &str| {
        json!({"name": name, "attributes": {"mode": {"string": mode}},
               "consumesCounters": [{"counterSet": "gpu-0", "compatibilityGroups": [mode],
                                     "counters": {"sm": {"value": sm}}}]})
    };
    let pool = json!({"name": "n1", "generation": 1, "resourceSliceCount": 2});
    server.apply(
        "resourceslices",
        &json!({"metadata": {"name": "n1-gpu-counters"},
                "spec": {"driver": GPU_DRIVER, "pool": pool,
                         "sharedCounters": [{"name": "gpu-0", "counters": {"sm": {"value": "100"}}}]}}),
    );
    server.apply(
        "resourceslices",
        &json!({"metadata": {"name": "n1-gpu-devices"},
                "spec": {"driver": GPU_DRIVER, "pool": pool, "nodeName": "n1",
                         "devices": [part("mig-0", "mig", "20"), part("vgpu-0", "vgpu", "50"),
                                     part("mig-1", "mig", "20")]}}),
    );
}

/// A claim for one GPU partition in `mode`, and a pod using it.
fn partition_pod(server: &FakeApiServer, pod_name: &str, mode: &str) {
    let mut c = gpu_claim(pod_name, None);
    c["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = json!([{"cel": {"expression":
        format!("device.attributes[{GPU_DRIVER:?}].mode == {mode:?}")}}]);
    server.apply("resourceclaims", &c);
    let with_claim = json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": pod_name}]});
    server.apply("pods", &pod(pod_name, "100m", with_claim));
}

/// Node n1 with the MIG/vGPU GPU, class `gpu`, and the controller with the
/// DRADeviceCompatibilityGroups gate as given.
async fn gpu_modes_cluster(on: bool) -> (FakeApiServer, Running) {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    server.apply("nodes", &node("n1", "4", json!({})));
    server.apply(
        "deviceclasses",
        &json!({"metadata": {"name": "gpu"},
                "spec": {"selectors": [{"cel": {"expression": format!("device.driver == {GPU_DRIVER:?}")}}]}}),
    );
    apply_mig_and_vgpu(&server);
    let running = start_custom(&server, CONFIG, |o| o.dra_device_compatibility_groups = on).await;
    (server, running)
}

/// Waits until the pod's PodScheduled message says no device could be allocated (the first
/// attempt may come before the claim reached the informer: "not found").
async fn wait_for_no_device(server: &FakeApiServer, pod: &str) {
    wait_for("no compatible device", || {
        scheduled_message(server, pod).is_some_and(|m| {
            m.starts_with("0/1 nodes are available: 1 cannot allocate all claims.")
        })
    })
    .await;
}

/// Compatibility groups through the API (gate on): a MIG slice is taken first; a vGPU
/// claim on the same counter set then finds no compatible device and its pod stays
/// pending with the DynamicResources reason, while a second MIG claim is placed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compatibility_groups_keep_a_gpus_modes_apart() {
    let (server, running) = gpu_modes_cluster(true).await;
    partition_pod(&server, "first-mig", "mig");
    wait_for("first-mig bound", || {
        server.node_of("default", "first-mig").is_some()
    })
    .await;
    partition_pod(&server, "vgpu", "vgpu");
    wait_for_no_device(&server, "vgpu").await;
    partition_pod(&server, "second-mig", "mig");
    wait_for("second-mig bound", || {
        server.node_of("default", "second-mig").is_some()
    })
    .await;
    let device = |claim: &str| {
        let c = server.get("resourceclaims", "default", claim).unwrap();
        c["status"]["allocation"]["devices"]["results"][0]["device"].clone()
    };
    assert_eq!(device("first-mig"), "mig-0");
    assert_eq!(device("second-mig"), "mig-1");
    assert!(server.node_of("default", "vgpu").is_none());
    running.stop().await;
}

/// Gate off (upstream's default in 1.37): devices declaring compatibility groups are never
/// allocated, so a claim only they could satisfy leaves its pod pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_gate_off_devices_declaring_groups_are_never_allocated() {
    let (server, running) = gpu_modes_cluster(false).await;
    partition_pod(&server, "mig", "mig");
    wait_for_no_device(&server, "mig").await;
    assert!(server.node_of("default", "mig").is_none());
    running.stop().await;
}

/// A DeviceTaintRule taints a device as if its slice did: a pod whose claim does not
/// tolerate the taint stays pending with upstream's message, and deleting the rule (a
/// ResourceSlice update for the queue) schedules it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_taint_rule_keeps_untolerating_pods_off_until_deleted() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    server.apply("nodes", &node("n1", "4", json!({})));
    server.apply(
        "deviceclasses",
        &json!({"metadata": {"name": "gpu"},
                "spec": {"selectors": [{"cel": {"expression": format!("device.driver == {GPU_DRIVER:?}")}}]}}),
    );
    server.apply("resourceslices", &gpu_slice("n1", &["gpu-0"]));
    server.apply(
        "devicetaintrules",
        &json!({"metadata": {"name": "maintenance"},
                "spec": {"deviceSelector": {"driver": GPU_DRIVER, "device": "gpu-0"},
                         "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"}}}),
    );
    server.apply("resourceclaims", &gpu_claim("c1", None));
    let with_claim = json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": "c1"}]});
    server.apply("pods", &pod("p1", "100m", with_claim));
    let running = start_controller(&server).await;

    let want = "0/1 nodes are available: 1 cannot allocate all claims. still not schedulable, \
                preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling..";
    wait_for("p1 refused: its device is tainted", || {
        scheduled_message(&server, "p1").as_deref() == Some(want)
    })
    .await;
    assert!(server.node_of("default", "p1").is_none());
    assert_eq!(allocated_device(&server, "c1"), None);

    server.delete("devicetaintrules", "", "maintenance");
    wait_for("p1 bound once the rule is gone", || {
        server.node_of("default", "p1").is_some()
    })
    .await;
    assert_eq!(allocated_device(&server, "c1").as_deref(), Some("gpu-0"));
    running.stop().await;
}

/// The claim of a pod's DRA-backed extended resources that an earlier scheduler created and
/// left (it crashed before the binding): an attempt refuses every node and deletes it
/// (finalizer, then the object; a refused write leaves it for a later attempt), the
/// deletion retries the pod, and the next attempt creates a new claim and binds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extended_resource_claim_left_by_a_crash_is_deleted_then_made_anew() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    server.apply("nodes", &node("n1", "4", json!({})));
    server.apply("deviceclasses", &extended_gpu_class());
    server.apply("resourceslices", &gpu_slice("n1", &["gpu-0"]));
    let mut ext = pod("p", "100m", json!({}));
    ext["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"] = json!("1");
    let uid = server.apply("pods", &ext)["metadata"]["uid"].clone();
    // What the crashed scheduler wrote: the claim, its finalizer, allocation and reservation.
    let mut left = json!({
        "metadata": {"name": "p-extended-resources-old", "namespace": "default",
            "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
            "finalizers": ["resource.kubernetes.io/delete-protection"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": uid,
                                 "controller": true}]},
        "spec": {"devices": {"requests": [{"name": "container-0-request-1",
            "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}]}},
    });
    left["status"] = json!({
        "allocation": {"devices": {"results": [{"request": "container-0-request-1",
            "driver": GPU_DRIVER, "pool": "n1", "device": "gpu-0"}]}},
        "reservedFor": [{"resource": "pods", "name": "p", "uid": uid}],
    });
    server.apply("resourceclaims", &left);
    // The first deletion is refused (the claim changed meanwhile): the claim stays, the pod
    // waits for a change that may help it.
    server.fail_next(
        1,
        fake_apiserver::Fault::new("PATCH", "resourceclaims", 409),
    );
    let running = start_controller(&server).await;
    wait_for("the refused finalizer patch", || server.faults_left() == 0).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        server
            .get("resourceclaims", "default", "p-extended-resources-old")
            .is_some()
    );
    assert!(server.node_of("default", "p").is_none());
    // A node relabelled retries the pod; this time the claim goes.
    server.apply("nodes", &node("n1", "4", json!({"zone": "a"})));

    wait_for("p bound to n1", || {
        server.node_of("default", "p").as_deref() == Some("n1")
    })
    .await;
    assert!(
        server
            .get("resourceclaims", "default", "p-extended-resources-old")
            .is_none(),
        "the left-over claim is deleted"
    );
    let p = server.get("pods", "default", "p").unwrap();
    let name = p["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
        .as_str()
        .expect("the pod's status names its new claim")
        .to_string();
    assert!(name.starts_with("p-extended-resources-") && name != "p-extended-resources-old");
    assert_eq!(allocated_device(&server, &name).as_deref(), Some("gpu-0"));
    // The first attempt said why (upstream's messages), before the deletion.
    let requests = server.requests();
    let deleted_at = requests
        .iter()
        .position(|r| {
            r.resource == "resourceclaims"
                && r.verb == "delete"
                && r.name == "p-extended-resources-old"
        })
        .expect("deleted");
    let created_at = requests
        .iter()
        .position(|r| r.resource == "resourceclaims" && r.verb == "create")
        .expect("a new claim created");
    assert!(deleted_at < created_at);
    assert!(
        server.events_for("default", "p").iter().any(|e| e["note"].as_str().is_some_and(|n| {
            n.starts_with("0/1 nodes are available: 1 cannot schedule extended resource claim. deletion of ResourceClaim completed, preemption: ")
        })),
        "{:?}",
        server.events_for("default", "p")
    );
    running.stop().await;
}

/// DRA end to end through the fake API server: a claim is allocated (finalizer, allocation,
/// reservedFor) before the pod's Binding; two pods never get the same device; a failed
/// binding leaves nothing allocated; a pod whose claim comes from a template waits until
/// the claim exists and its status names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_claims_are_allocated_and_reserved_before_the_binding() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    server.apply("nodes", &node("n1", "4", json!({})));
    server.apply("nodes", &node("n2", "4", json!({})));
    server.apply(
        "deviceclasses",
        &json!({"metadata": {"name": "gpu"},
                "spec": {"selectors": [{"cel": {"expression": format!("device.driver == {GPU_DRIVER:?}")}}]}}),
    );
    server.apply("resourceslices", &gpu_slice("n1", &["gpu-0"]));
    server.apply("resourceclaims", &gpu_claim("c1", None));
    server.apply("resourceclaims", &gpu_claim("c2", None));
    let with_claim =
        |claim: &str| json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]});
    // The first binding fails (503 on every one of the client's attempts): the claim
    // written for it must be taken back.
    server.fail_next_bindings(controller::client::ATTEMPTS as usize);
    server.apply("pods", &pod("p1", "100m", with_claim("c1")));
    server.apply("pods", &pod("p2", "100m", with_claim("c2")));
    server.apply(
        "pods",
        &pod(
            "p3",
            "100m",
            json!({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "tmpl"}]}),
        ),
    );
    let running = start_controller(&server).await;

    wait_for("one of p1/p2 bound", || {
        server.node_of("default", "p1").is_some() || server.node_of("default", "p2").is_some()
    })
    .await;
    let (winner, loser) = if server.node_of("default", "p1").is_some() {
        (("p1", "c1"), ("p2", "c2"))
    } else {
        (("p2", "c2"), ("p1", "c1"))
    };
    assert_eq!(server.node_of("default", winner.0).as_deref(), Some("n1"));
    let claim = server.get("resourceclaims", "default", winner.1).unwrap();
    assert_eq!(
        allocated_device(&server, winner.1).as_deref(),
        Some("gpu-0")
    );
    let pod_uid = server.get("pods", "default", winner.0).unwrap()["metadata"]["uid"].clone();
    assert_eq!(claim["status"]["reservedFor"][0]["uid"], pod_uid);
    assert_eq!(claim["status"]["reservedFor"][0]["resource"], "pods");
    assert_eq!(
        claim["metadata"]["finalizers"],
        json!(["resource.kubernetes.io/delete-protection"])
    );
    assert_eq!(
        claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"],
        json!(["n1"])
    );
    // The claim status was written before the Binding.
    let requests = server.requests();
    let status_at = requests
        .iter()
        .rposition(|r| {
            r.resource == "resourceclaims" && r.subresource == "status" && r.name == winner.1
        })
        .expect("claim status written");
    let binding_at = requests
        .iter()
        .rposition(|r| r.subresource == "binding" && r.name == winner.0)
        .expect("binding posted");
    assert!(status_at < binding_at);
    // The failed first binding's claim was taken back (nothing allocated for a pod that was
    // not bound): after the last failed attempt its claim's status is written again before
    // any other Binding, one allocation in total, and the loser is refused.
    let bindings: Vec<usize> = requests
        .iter()
        .enumerate()
        .filter(|(_, r)| r.subresource == "binding")
        .map(|(i, _)| i)
        .collect();
    let attempts = controller::client::ATTEMPTS as usize;
    assert!(
        bindings.len() > attempts,
        "the failed binding was tried {attempts} times, then one more binding"
    );
    let failed = &requests[bindings[attempts - 1]];
    let failed_claim = if failed.name == "p1" { "c1" } else { "c2" };
    assert!(
        requests[bindings[attempts - 1]..bindings[attempts]]
            .iter()
            .any(|r| r.resource == "resourceclaims"
                && r.subresource == "status"
                && r.name == failed_claim),
        "the claim of the pod whose binding failed is written back before the next Binding"
    );
    // Refused, as its PodScheduled condition says (its events may show the earlier binding
    // failure instead: a later FailedScheduling only extends that event's series, as
    // upstream's recorder does).
    wait_for("the other pod refused", || {
        server.get("pods", "default", loser.0).is_some_and(|p| {
            p["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter().any(|c| {
                    c["type"] == "PodScheduled"
                        && c["message"]
                            .as_str()
                            .is_some_and(|m| m.contains("cannot allocate all claims"))
                })
            })
        })
    })
    .await;
    assert!(server.node_of("default", loser.0).is_none());
    assert_eq!(
        allocated_device(&server, loser.1),
        None,
        "never the same device twice"
    );
    assert!(
        server.get("resourceclaims", "default", loser.1).unwrap()["status"]["reservedFor"]
            .is_null()
    );

    // The template pod waits (gated by PreEnqueue, as upstream: no attempt, no event).
    assert!(server.node_of("default", "p3").is_none());
    assert!(
        !server
            .requests()
            .iter()
            .any(|r| r.name == "p3" && r.subresource == "binding")
    );
    // The claim controller's part: the claim, then the pod's status; the devices (another
    // driver's, so the refused pod, still retrying, cannot take them) on n2.
    server.apply(
        "deviceclasses",
        &json!({"metadata": {"name": "tpu"},
                "spec": {"selectors": [{"cel": {"expression": "device.driver == \"tpu.example.com\""}}]}}),
    );
    server.apply(
        "resourceslices",
        &device_slice("tpu.example.com", "n2", &["tpu-0"]),
    );
    let p3 = server.get("pods", "default", "p3").unwrap();
    let uid = p3["metadata"]["uid"].as_str().unwrap().to_string();
    server.apply(
        "resourceclaims",
        &device_claim("p3-gpu-abc", "tpu", Some(("p3", &uid))),
    );
    let mut p3 = p3;
    p3["status"]["resourceClaimStatuses"] =
        json!([{"name": "gpu", "resourceClaimName": "p3-gpu-abc"}]);
    server.apply("pods", &p3);
    wait_for("p3 bound", || server.node_of("default", "p3").is_some()).await;
    assert_eq!(server.node_of("default", "p3").as_deref(), Some("n2"));
    assert_eq!(
        allocated_device(&server, "p3-gpu-abc").as_deref(),
        Some("tpu-0")
    );
    running.stop().await;
}

/// How the initial lists are asked for. Nodes and pods: one request each at
/// `resourceVersion=0`, which kube-apiserver (and the fake, copying v1.28) serves whole
/// from its watch cache, in protobuf, decoded as it streams (client-go's reflector asks the
/// same way). Every node counts: only the last node has room for the pod. (As JSON,
/// `contentType: application/json`, both come page by page, 100 a page: see the source's
/// tests.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_initial_lists_come_whole_from_the_cache_or_in_pages() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    for i in 0..1200 {
        let cpu = if i == 1199 { "8" } else { "1" };
        server.apply("nodes", &node(&format!("n{i:04}"), cpu, json!({})));
    }
    for i in 0..250 {
        let mut p = pod(&format!("bound-{i}"), "1m", json!({}));
        p["spec"]["nodeName"] = json!("n0000");
        server.apply("pods", &p);
    }
    server.apply("pods", &pod("wide", "4", json!({})));
    let running = start_controller(&server).await;
    wait_for("wide bound", || server.node_of("default", "wide").is_some()).await;
    assert_eq!(server.node_of("default", "wide").as_deref(), Some("n1199"));
    let lists = |resource: &str| {
        server
            .requests()
            .iter()
            .filter(|r| r.verb == "list" && r.resource == resource)
            .count()
    };
    assert_eq!(lists("nodes"), 1, "1,200 nodes in one response");
    assert!(server.protobuf_served("nodes") >= 1);
    assert_eq!(lists("pods"), 1, "251 pods in one response");
    assert!(server.protobuf_served("pods") >= 1);
    running.stop().await;
}

/// DynamicResources' PostFilter through the fake API server: a claim allocated (by
/// someone before) for a node the pod cannot use, reserved for nobody, keeps the pod off
/// every node; the scheduler removes its allocation (resourceVersion precondition), the
/// claim update retries the pod, and the claim is allocated anew where the pod fits.
/// Nodes n1 (zone a, gpu-0) and n2 (zone b, gpu-1); claim `stale` allocated gpu-1 on n2 for
/// nobody; pod `p` may only run in zone a and uses the claim.
fn stale_claim_cluster(server: &FakeApiServer) {
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    server.apply("nodes", &node("n1", "4", json!({"zone": "a"})));
    server.apply("nodes", &node("n2", "4", json!({"zone": "b"})));
    server.apply(
        "deviceclasses",
        &json!({"metadata": {"name": "gpu"},
                "spec": {"selectors": [{"cel": {"expression": format!("device.driver == {GPU_DRIVER:?}")}}]}}),
    );
    server.apply("resourceslices", &gpu_slice("n1", &["gpu-0"]));
    server.apply("resourceslices", &gpu_slice("n2", &["gpu-1"]));
    let mut stale = gpu_claim("stale", None);
    stale["status"] = json!({"allocation": {
        "devices": {"results": [{"request": "dev", "driver": GPU_DRIVER, "pool": "n2", "device": "gpu-1"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]},
    }});
    server.apply("resourceclaims", &stale);
    assert_eq!(allocated_device(server, "stale").as_deref(), Some("gpu-1"));
    // The pod may only run in zone a (n1); its claim's devices are on n2.
    server.apply(
        "pods",
        &pod(
            "p",
            "100m",
            json!({"nodeSelector": {"zone": "a"},
                   "resourceClaims": [{"name": "gpu", "resourceClaimName": "stale"}]}),
        ),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_allocated_for_an_unusable_node_is_deallocated_and_allocated_again() {
    let server = FakeApiServer::start().await;
    stale_claim_cluster(&server);
    let running = start_controller(&server).await;

    wait_for("p bound", || server.node_of("default", "p").is_some()).await;
    assert_eq!(server.node_of("default", "p").as_deref(), Some("n1"));
    assert_eq!(allocated_device(&server, "stale").as_deref(), Some("gpu-0"));
    let claim = server.get("resourceclaims", "default", "stale").unwrap();
    let pod_uid = server.get("pods", "default", "p").unwrap()["metadata"]["uid"].clone();
    assert_eq!(
        claim["status"]["reservedFor"],
        json!([{"resource": "pods", "name": "p", "uid": pod_uid}])
    );
    let failed = server
        .events_for("default", "p")
        .into_iter()
        .find(|e| e["reason"] == "FailedScheduling")
        .expect("the first attempt failed");
    let note = failed["note"].as_str().unwrap();
    assert!(
        note.contains(&format!(
            ". {}, preemption: ",
            scheduler_core::plugins::dynamic_resources::DEALLOCATION_COMPLETED
        )),
        "{note}"
    );
    // The deallocation came before the claim's new allocation, both on the status.
    let writes = server
        .requests()
        .iter()
        .filter(|r| {
            r.resource == "resourceclaims" && r.subresource == "status" && r.name == "stale"
        })
        .count();
    assert_eq!(
        writes, 2,
        "one deallocation, one allocation with reservation"
    );
    running.stop().await;
}

/// The deallocation refused (409: the claim changed since the scheduler read it): the claim
/// keeps its allocation, the pod stays unbound, and a later change of the claim retries it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_deallocation_leaves_the_claim_alone() {
    let server = FakeApiServer::start().await;
    stale_claim_cluster(&server);
    server.fail_next(
        1,
        fake_apiserver::Fault::new("PATCH", "resourceclaims", 409).subresource("status"),
    );
    let running = start_controller(&server).await;
    wait_for("the deallocation attempted", || {
        server
            .requests()
            .iter()
            .any(|r| r.resource == "resourceclaims" && r.subresource == "status")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(allocated_device(&server, "stale").as_deref(), Some("gpu-1"));
    assert!(server.node_of("default", "p").is_none());
    // Someone deallocates the claim: the pod is retried and gets gpu-0 on n1.
    server.apply("resourceclaims", &gpu_claim("stale", None));
    wait_for("p bound", || server.node_of("default", "p").is_some()).await;
    assert_eq!(server.node_of("default", "p").as_deref(), Some("n1"));
    assert_eq!(allocated_device(&server, "stale").as_deref(), Some("gpu-0"));
    running.stop().await;
}

/// The newer DRA fields through the fake API server and the informers: a partitioned GPU
/// (shared counters) is handed out whole to one pod, so the next pod finds its halves'
/// counters spent; a pod asking for an extended resource a DeviceClass backs gets a claim
/// created, allocated and reserved for it before its Binding (deleted again when the
/// Binding fails), and a node advertising the resource needs no claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitionable_devices_and_dra_backed_extended_resources() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    server.apply("nodes", &node("n1", "4", json!({})));
    server.apply("deviceclasses", &extended_gpu_class());
    let mut slice = gpu_slice("n1", &[]);
    let consuming = |name: &str, memory: &str| {
        json!({"name": name, "consumesCounters": [{"counterSet": "gpu-0",
               "counters": {"memory": {"value": memory}}}]})
    };
    slice["spec"]["devices"] = json!([
        consuming("gpu-0", "8Gi"),
        consuming("gpu-0-half-0", "4Gi"),
        consuming("gpu-0-half-1", "4Gi"),
    ]);
    slice["spec"]["sharedCounters"] =
        json!([{"name": "gpu-0", "counters": {"memory": {"value": "8Gi"}}}]);
    server.apply("resourceslices", &slice);
    server.apply("resourceclaims", &gpu_claim("c1", None));
    server.apply("resourceclaims", &gpu_claim("c2", None));
    let with_claim =
        |claim: &str| json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]});
    server.apply("pods", &pod("p1", "100m", with_claim("c1")));
    let running = start_controller(&server).await;

    wait_for("p1 bound", || server.node_of("default", "p1").is_some()).await;
    assert_eq!(allocated_device(&server, "c1").as_deref(), Some("gpu-0"));
    server.apply("pods", &pod("p2", "100m", with_claim("c2")));
    wait_for("p2 refused: the halves' counters are spent", || {
        server.events_for("default", "p2").iter().any(|e| {
            e["note"]
                .as_str()
                .is_some_and(|n| n.contains("cannot allocate all claims"))
        })
    })
    .await;
    assert_eq!(allocated_device(&server, "c2"), None);

    // Extended resources: DRA provides them on n1 from a second pool. p2 takes one of its
    // two devices first (so the scheduler has seen the pool).
    let mut extra = gpu_slice("n1", &["gpu-1", "gpu-2"]);
    extra["metadata"]["name"] = json!("n1-extra");
    extra["spec"]["pool"]["name"] = json!("n1-extra");
    server.apply("resourceslices", &extra);
    wait_for("p2 bound once a plain GPU appears", || {
        server.node_of("default", "p2").is_some()
    })
    .await;
    assert_eq!(allocated_device(&server, "c2").as_deref(), Some("gpu-1"));
    // p3's first Binding fails (all five attempts of the retrying client): the claim
    // created for it is deleted again, then a new one is created, allocated and reserved
    // before the next Binding.
    server.fail_next_bindings(5);
    let mut ext = pod("p3", "100m", json!({}));
    ext["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"] = json!("1");
    server.apply("pods", &ext);
    wait_for("p3 bound to n1", || {
        server.node_of("default", "p3").as_deref() == Some("n1")
    })
    .await;
    let ext_claims: Vec<Value> = server
        .list("resourceclaims")
        .into_iter()
        .filter(|c| {
            c["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"] == "true"
        })
        .collect();
    let [claim] = &ext_claims[..] else {
        panic!("one extended resource claim, the failed attempt's deleted: {ext_claims:?}")
    };
    let name = claim["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("p3-extended-resources-"), "{name}");
    let p3 = server.get("pods", "default", "p3").unwrap();
    assert_eq!(
        claim["metadata"]["ownerReferences"][0]["uid"],
        p3["metadata"]["uid"]
    );
    assert_eq!(claim["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(
        claim["spec"]["devices"]["requests"][0],
        json!({"name": "container-0-request-1", "exactly": {"deviceClassName": "gpu",
               "allocationMode": "ExactCount", "count": 1}})
    );
    assert_eq!(allocated_device(&server, name).as_deref(), Some("gpu-2"));
    assert_eq!(
        claim["status"]["reservedFor"][0]["uid"],
        p3["metadata"]["uid"]
    );
    assert_eq!(
        p3["status"]["extendedResourceClaimStatus"],
        json!({"resourceClaimName": name, "requestMappings": [
            {"containerName": "c", "resourceName": "example.com/gpu",
             "requestName": "container-0-request-1"}]})
    );
    let requests = server.requests();
    let claim_at = requests
        .iter()
        .rposition(|r| r.resource == "resourceclaims" && r.verb == "create")
        .unwrap();
    let binding_at = requests
        .iter()
        .rposition(|r| r.subresource == "binding" && r.name == "p3")
        .unwrap();
    assert!(claim_at < binding_at);
    assert!(
        requests
            .iter()
            .any(|r| r.resource == "resourceclaims" && r.verb == "delete"),
        "the failed attempt's claim was deleted"
    );
    // No device left on n1: a node advertising the resource through a device plugin takes
    // the next such pod, with no claim.
    let mut n2 = node("n2", "4", json!({}));
    n2["status"]["allocatable"]["example.com/gpu"] = json!("2");
    server.apply("nodes", &n2);
    let mut ext = pod("p4", "100m", json!({}));
    ext["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"] = json!("1");
    server.apply("pods", &ext);
    wait_for("p4 bound to n2", || {
        server.node_of("default", "p4").as_deref() == Some("n2")
    })
    .await;
    running.stop().await;
}

/// Opportunistic batching's counters under upstream's names: identical pods that fill a
/// node each, in a profile without default spreading, take the previous pod's next-best
/// node as a hint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batching_counters_are_exported() {
    const BATCHABLE: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
";
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    for i in 0..4 {
        server.apply("nodes", &node(&format!("n{i}"), "4", json!({})));
    }
    for i in 0..4 {
        server.apply("pods", &pod(&format!("p{i}"), "3", json!({})));
    }
    let running = start_with(&server, BATCHABLE, "test-host").await;
    let m = running.health;
    wait_for_metric(m, SCHEDULED_ATTEMPTS, 4.0).await;
    let used = "scheduler_batch_attempts_total{profile=\"default-scheduler\",result=\"hint_used\"}";
    let none = "scheduler_batch_attempts_total{profile=\"default-scheduler\",result=\"no_hint\"}";
    let used = metric(m, used).await.unwrap_or(0.0);
    let none = metric(m, none).await.unwrap_or(0.0);
    // The first pod has nothing to reuse; the later ones are hinted (one whose attempt came
    // more than 500 ms after the previous one, on a loaded machine, finds the list expired).
    assert!(
        none >= 1.0 && used >= 1.0,
        "no_hint {none}, hint_used {used}"
    );
    assert_eq!(used + none, 4.0, "hint_used {used}, no_hint {none}");
    let (_, body) = http_get(m, "/metrics").await;
    assert!(
        body.contains(
            "# HELP scheduler_batch_attempts Counts of results when we attempt to use batching."
        ),
        "{body}"
    );
    running.stop().await;
}

/// SIGTERM while a binding waits for a WaitForFirstConsumer volume (bindTimeoutSeconds 600
/// by default, and no PV controller here): the wait is given up at once, shutdown ends in a
/// few seconds (well inside a Deployment's 30 s grace period) and the lease is released,
/// so the next leader retries the pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_gives_up_a_binding_waiting_for_its_volume_and_releases_the_lease() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    server.apply(
        "nodes",
        &node("n1", "4", json!({"kubernetes.io/hostname": "n1"})),
    );
    server.apply(
        "storageclasses",
        &json!({"metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
                "volumeBindingMode": "WaitForFirstConsumer"}),
    );
    server.apply(
        "persistentvolumes",
        &json!({
            "metadata": {"name": "local-n1"},
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                     "storageClassName": "local", "persistentVolumeReclaimPolicy": "Retain",
                     "local": {"path": "/mnt/disks/ssd1"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}},
            "status": {"phase": "Available"},
        }),
    );
    server.apply("persistentvolumeclaims", &claim("data", "local", "5Gi"));
    server.apply("pods", &pod("db-0", "100m", uses_claims(&["data"])));
    let a = start_with(&server, HA_CONFIG, "a").await;
    wait_for("the binding waits for the volume (claimRef set)", || {
        server
            .get("persistentvolumes", "", "local-n1")
            .is_some_and(|pv| pv["spec"]["claimRef"]["name"] == "data")
    })
    .await;
    assert!(
        server
            .lease_holder("kube-system", "ferrosched")
            .is_some_and(|h| h.starts_with("a_"))
    );
    let t = Instant::now();
    a.stop().await;
    println!("shutdown took {:?}", t.elapsed());
    assert_eq!(
        server.lease_holder("kube-system", "ferrosched"),
        None,
        "the lease is released"
    );
    assert_eq!(server.node_of("default", "db-0"), None);

    // The next leader retries the pod; with the volume bound it binds.
    let b = start_with(&server, HA_CONFIG, "b").await;
    wait_for("db-0 bound by the next leader", || {
        support::pv_controller::reconcile(&server);
        server.node_of("default", "db-0").is_some()
    })
    .await;
    b.stop().await;
}

/// Nodes travel in protobuf when the server offers it (kube-apiserver does, and the fake does
/// for nodes) and as JSON when `clientConnection.contentType` asks for JSON. Either way a
/// node added, changed and deleted after start-up reaches the scheduler through the watch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_are_read_in_protobuf_or_json_as_the_client_connection_says() {
    for (extra, protobuf) in [
        ("", true),
        ("clientConnection: {contentType: application/json}\n", false),
    ] {
        let server = FakeApiServer::start().await;
        server.apply("nodes", &node("first", "1", json!({"zone": "a"})));
        let running = start_with(&server, &format!("{CONFIG}{extra}"), "test-host").await;
        server.apply("pods", &pod("one", "500m", json!({})));
        wait_for("one bound to the listed node", || {
            server.node_of("default", "one").as_deref() == Some("first")
        })
        .await;

        // Added after the list, tainted: a pod that tolerates the taint goes there.
        let mut second = node("second", "4", json!({"zone": "b"}));
        second["spec"] = json!({"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]});
        server.apply("nodes", &second);
        let tolerant = json!({"tolerations": [{"key": "k", "operator": "Exists"}]});
        server.apply("pods", &pod("tolerant", "1", tolerant));
        wait_for("tolerant bound to the watched node", || {
            server.node_of("default", "tolerant").as_deref() == Some("second")
        })
        .await;
        // Only that node has room for "two", which does not tolerate the taint.
        server.apply("pods", &pod("two", "2", json!({})));
        wait_for("two refused for the taint", || {
            server.events_for("default", "two").iter().any(|e| {
                e["reason"] == "FailedScheduling"
                    && e["note"]
                        .as_str()
                        .is_some_and(|n| n.contains("untolerated taint"))
            })
        })
        .await;
        // The taint is removed (a MODIFIED event): "two" goes there.
        second["spec"] = json!({});
        server.apply("nodes", &second);
        wait_for("two bound once the taint is gone", || {
            server.node_of("default", "two").as_deref() == Some("second")
        })
        .await;

        // The node is deleted (a DELETED event): a pod only it had room for stays pending.
        server.delete("nodes", "", "second");
        wait_for_metric(
            running.health,
            "scheduler_event_handling_duration_seconds_count{event=\"NodeDelete\"}",
            1.0,
        )
        .await;
        server.apply("pods", &pod("three", "600m", json!({})));
        wait_for("three refused by the one node left", || {
            server.events_for("default", "three").iter().any(|e| {
                e["reason"] == "FailedScheduling"
                    && e["note"].as_str().is_some_and(|n| {
                        n.starts_with("0/1 nodes are available: 1 Insufficient cpu.")
                    })
            })
        })
        .await;
        running.stop().await;
        assert_eq!(server.node_of("default", "three"), None);
        assert_eq!(
            server.protobuf_served("nodes") >= 2,
            protobuf,
            "list and watch in protobuf: {protobuf} ({extra:?})"
        );
    }
}
