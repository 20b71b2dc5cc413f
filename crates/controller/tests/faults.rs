//! Fault tests: the controller against the fake API server while it restarts, throttles,
//! fails requests and expires watches. Whatever happens, every pending pod is bound exactly
//! once (no Binding is ever POSTed for a pod already bound) and none is lost.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use fake_apiserver::{FakeApiServer, Fault};
use serde_json::{Value, json};

/// Short backoffs keep the tests fast.
const CONFIG: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
";

fn node(name: &str, cpu: &str) -> Value {
    json!({
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}},
    })
}

fn pod(name: &str, cpu: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "img",
            "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]},
    })
}

/// Polls `f` every 20 ms for at most `limit`.
async fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

struct Running {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<controller::Result<()>>,
}

impl Running {
    async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(15), self.task)
            .await
            .expect("controller stops promptly")
            .expect("controller task")
            .expect("controller exits cleanly");
    }
}

async fn start(server: &FakeApiServer, config: &str) -> Running {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("controller=debug")
        .with_test_writer()
        .try_init();
    let support::Started { stop, task } = support::start(server, config).await;
    Running { stop, task }
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

fn all_bound(server: &FakeApiServer, pods: &[String]) -> bool {
    pods.iter().all(|p| server.node_of("default", p).is_some())
}

/// Every pod in `pods` was bound by exactly one successful Binding, and no Binding was
/// POSTed for a pod that was already bound.
fn assert_bound_exactly_once(server: &FakeApiServer, pods: &[String]) {
    let mut count: BTreeMap<String, usize> = BTreeMap::new();
    for (p, _) in server.bindings() {
        *count.entry(p).or_default() += 1;
    }
    for p in pods {
        assert_eq!(
            count.get(&format!("default/{p}")),
            Some(&1),
            "bindings of {p}"
        );
    }
    assert_eq!(server.double_bindings(), Vec::<String>::new());
}

fn binding_requests(server: &FakeApiServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.verb == "create" && r.resource == "pods" && r.subresource == "binding")
        .count()
}

/// (a) The API server restarts while pods are being bound and more arrive while it is down;
/// etcd was compacted meanwhile, so resumed watches get 410 and the informers relist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_restart_mid_watch_loses_and_duplicates_nothing() {
    let server = FakeApiServer::start().await;
    server.apply("nodes", &node("n1", "64"));
    server.apply("nodes", &node("n2", "64"));
    let first = names("before", 5);
    for p in &first {
        server.apply("pods", &pod(p, "100m"));
    }
    let running = start(&server, CONFIG).await;
    wait_for("the first pods bound", Duration::from_secs(10), || {
        all_bound(&server, &first)
    })
    .await;
    let lists_before = server.list_count("pods");

    // Pods arrive and the server goes down right away: some bindings are in flight.
    let racing = names("racing", 10);
    for p in &racing {
        server.apply("pods", &pod(p, "100m"));
    }
    server.go_down(true);
    // Written to the store while the server is down: only a relist can reveal them.
    let during = names("during", 10);
    for p in &during {
        server.apply("pods", &pod(p, "100m"));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    server.come_back().await;

    let every: Vec<String> = [first, racing, during].concat();
    wait_for(
        "every pod bound after the restart",
        Duration::from_secs(30),
        || all_bound(&server, &every),
    )
    .await;
    assert!(
        server.list_count("pods") > lists_before,
        "the pod informer relisted"
    );
    running.stop().await;
    assert_bound_exactly_once(&server, &every);
}

/// (b) 429s with Retry-After and 5xx answers on lists, watches, bindings, status patches
/// and events: retried, nothing lost, nothing bound twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_and_server_errors_on_any_request_lose_nothing() {
    let server = FakeApiServer::start().await;
    server.apply("nodes", &node("n1", "4"));
    // Informers: the first pod list and watches throttled, node requests failing.
    server.fail_next(2, Fault::new("GET", "pods", 429).retry_after(1));
    server.fail_next(2, Fault::new("GET", "nodes", 500));
    // Binding cycle and failure reporting.
    server.fail_next(3, Fault::new("POST", "pods", 500).subresource("binding"));
    server.fail_next(
        2,
        Fault::new("POST", "pods", 429)
            .subresource("binding")
            .retry_after(1),
    );
    server.fail_next(2, Fault::new("PATCH", "pods", 503).subresource("status"));
    server.fail_next(2, Fault::new("POST", "events", 500));
    let pods = names("p", 8);
    for p in &pods {
        server.apply("pods", &pod(p, "100m"));
    }
    server.apply("pods", &pod("huge", "64"));
    let running = start(&server, CONFIG).await;

    wait_for("every pod bound", Duration::from_secs(20), || {
        all_bound(&server, &pods)
    })
    .await;
    wait_for(
        "huge reported unschedulable",
        Duration::from_secs(20),
        || {
            server
                .get("pods", "default", "huge")
                .and_then(|p| {
                    p["status"]["conditions"].as_array().map(|cs| {
                        cs.iter()
                            .any(|c| c["type"] == "PodScheduled" && c["reason"] == "Unschedulable")
                    })
                })
                .unwrap_or(false)
                && server
                    .events_for("default", "huge")
                    .iter()
                    .any(|e| e["reason"] == "FailedScheduling")
        },
    )
    .await;
    assert_eq!(server.faults_left(), 0, "every injected fault was hit");
    running.stop().await;
    assert_bound_exactly_once(&server, &pods);
    assert_eq!(server.node_of("default", "huge"), None);
}

/// (c) Every Binding fails for a while: the pod goes to the error backoffQ and is not popped
/// early, so the binding requests over the window stay within what the backoff allows; it
/// is bound once the server recovers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistently_failing_binding_backs_off_then_succeeds() {
    const INITIAL: u64 = 2;
    const MAX: u64 = 4;
    const WINDOW: Duration = Duration::from_secs(5);
    let config = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {{leaderElect: false}}
podInitialBackoffSeconds: {INITIAL}
podMaxBackoffSeconds: {MAX}
"
    );
    let server = FakeApiServer::start().await;
    server.apply("nodes", &node("n1", "4"));
    server.fail_next(
        usize::MAX,
        Fault::new("POST", "pods", 500).subresource("binding"),
    );
    server.apply("pods", &pod("stuck", "100m"));
    let running = start(&server, &config).await;
    wait_for("the first binding request", Duration::from_secs(10), || {
        binding_requests(&server) > 0
    })
    .await;
    // Measuring a rate over a fixed window: the sleep is the window, not a guess.
    tokio::time::sleep(WINDOW).await;
    let seen = binding_requests(&server);
    println!("{seen} binding requests in {WINDOW:?}");

    // Binding attempts that can start within the window: the first, then one more per
    // backoff (initial * 2^(n-1), capped) that ends inside it. Each attempt makes at most
    // retry::ATTEMPTS requests. Popping errored pods early would exceed this.
    let mut attempts = 1u32;
    let (mut elapsed, mut backoff) = (0u64, INITIAL);
    loop {
        elapsed += backoff;
        if Duration::from_secs(elapsed) >= WINDOW {
            break;
        }
        attempts += 1;
        backoff = (backoff * 2).min(MAX);
    }
    let bound = usize::try_from(attempts * controller::client::ATTEMPTS).unwrap();
    assert!(
        (1..=bound).contains(&seen),
        "{seen} binding requests in {WINDOW:?}, at most {bound} expected"
    );
    assert!(
        server
            .events_for("default", "stuck")
            .iter()
            .any(|e| e["reason"] == "FailedScheduling"
                && e["note"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("binding rejected"))),
        "{:?}",
        server.events_for("default", "stuck")
    );

    server.clear_faults();
    let stuck = vec!["stuck".to_string()];
    wait_for(
        "stuck bound once bindings work",
        Duration::from_secs(15),
        || all_bound(&server, &stuck),
    )
    .await;
    running.stop().await;
    assert_bound_exactly_once(&server, &stuck);
}

/// A 429 storm with `Retry-After` on Bindings: the only retry layer gives one logical write
/// exactly `ATTEMPTS` requests (kube's own retry layer under ours would have made up to 16
/// per attempt and hidden the failure), waits as long as the server asked between them,
/// and then fails into backoff; the next attempt binds the pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttling_storm_costs_at_most_attempts_requests_per_write_and_honours_retry_after() {
    let server = FakeApiServer::start().await;
    server.apply("nodes", &node("n1", "4"));
    let attempts = usize::try_from(controller::client::ATTEMPTS).unwrap();
    let binding_429 = |secs| {
        Fault::new("POST", "pods", 429)
            .subresource("binding")
            .retry_after(secs)
    };
    // The first two answers ask for 1 s each, the rest of the storm for none (fast test).
    server.fail_next(2, binding_429(1));
    server.fail_next(attempts - 2, binding_429(0));
    let running = start(&server, CONFIG).await;
    let started = Instant::now();
    server.apply("pods", &pod("throttled", "100m"));
    let pods = vec!["throttled".to_string()];
    wait_for("throttled bound", Duration::from_secs(15), || {
        all_bound(&server, &pods)
    })
    .await;
    let took = started.elapsed();
    running.stop().await;
    assert_eq!(
        binding_requests(&server),
        attempts + 1,
        "one failed write of ATTEMPTS requests, then one that succeeds"
    );
    assert!(
        server
            .events_for("default", "throttled")
            .iter()
            .any(|e| e["reason"] == "FailedScheduling"
                && e["note"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("binding rejected"))),
        "the first write gave up after {attempts} requests: {:?}",
        server.events_for("default", "throttled")
    );
    assert!(
        took >= Duration::from_secs(2),
        "Retry-After ignored: {took:?}"
    );
    assert_bound_exactly_once(&server, &pods);
}

/// (d) Watches expire again and again (410 on resume) while pods keep arriving: each relist
/// finds the new pods, and none is bound twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_expiring_repeatedly_while_pods_arrive_lose_nothing() {
    let server = FakeApiServer::start().await;
    server.apply("nodes", &node("n1", "64"));
    let running = start(&server, CONFIG).await;
    wait_for("the informers listed", Duration::from_secs(10), || {
        server.list_count("pods") >= 1
    })
    .await;
    let mut every = Vec::new();
    for round in 0..3 {
        let batch = names(&format!("round{round}"), 5);
        for p in &batch {
            server.apply("pods", &pod(p, "100m"));
        }
        server.expire_watches();
        every.extend(batch);
        let lists = server.list_count("pods");
        wait_for("the pod informer relisted", Duration::from_secs(10), || {
            server.list_count("pods") > lists
        })
        .await;
    }
    wait_for("every pod bound", Duration::from_secs(15), || {
        all_bound(&server, &every)
    })
    .await;
    running.stop().await;
    assert_bound_exactly_once(&server, &every);
}
