//! Device binding conditions end to end: the controller against the fake API server, with a
//! fake driver that writes the claims' `status.devices` conditions through the status
//! subresource, as a real (fabric-attached device) driver does.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fake_apiserver::FakeApiServer;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use support::wait_for;

const DRIVER: &str = "fabric.example.com";

fn config(binding_timeout: &str) -> String {
    format!(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {{leaderElect: false}}
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: DynamicResources
    args:
      bindingTimeout: {binding_timeout}
"
    )
}

/// Two nodes, a class for the driver, one fabric device reachable from both that must be
/// attached (`attached`) before use and may fail (`failed`), bound to the node it is
/// allocated for; claim `c1` and pod `p1` using it.
fn cluster(server: &FakeApiServer) {
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    for n in ["n1", "n2"] {
        server.apply(
            "nodes",
            &json!({"metadata": {"name": n},
                    "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}),
        );
    }
    server.apply(
        "deviceclasses",
        &json!({"metadata": {"name": "fabric"},
                "spec": {"selectors": [{"cel": {"expression": format!("device.driver == {DRIVER:?}")}}]}}),
    );
    server.apply(
        "resourceslices",
        &json!({"metadata": {"name": "fabric-pool"},
                "spec": {"driver": DRIVER,
                         "pool": {"name": "pool", "generation": 1, "resourceSliceCount": 1},
                         "allNodes": true,
                         "devices": [{"name": "dev-0", "bindsToNode": true,
                                      "bindingConditions": ["attached"],
                                      "bindingFailureConditions": ["failed"]}]}}),
    );
    server.apply(
        "resourceclaims",
        &json!({"metadata": {"name": "c1", "namespace": "default"},
                "spec": {"devices": {"requests": [{"name": "dev", "exactly": {"deviceClassName": "fabric"}}]}}}),
    );
    server.apply(
        "pods",
        &json!({"metadata": {"name": "p1", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "img"}],
                         "resourceClaims": [{"name": "dev", "resourceClaimName": "c1"}]}}),
    );
}

struct Running {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<controller::Result<()>>,
}

async fn start(server: &FakeApiServer, binding_timeout: &str) -> Running {
    start_gated(server, binding_timeout, true).await
}

async fn start_gated(server: &FakeApiServer, binding_timeout: &str, gate: bool) -> Running {
    let loaded = scheduler_core::config::load_str(&config(binding_timeout), "test.yaml").unwrap();
    let client = controller::client(Some(&server.kubeconfig()))
        .await
        .unwrap();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(controller::run(controller::RunOptions {
        dra_device_binding_conditions: gate,
        ..controller::RunOptions::new(
            client,
            loaded,
            Box::pin(async move {
                let _ = rx.await;
            }),
        )
    }));
    Running { stop, task }
}

impl Running {
    async fn stop(self) {
        support::stop_controller(self.stop, self.task).await;
    }
}

async fn claims_api(server: &FakeApiServer) -> Api<ResourceClaim> {
    let client = controller::client(Some(&server.kubeconfig()))
        .await
        .unwrap();
    Api::namespaced(client, "default")
}

/// The driver's per-device status: `condition` True for `device`.
async fn report(api: &Api<ResourceClaim>, device: &str, condition: &str) -> Result<(), String> {
    let patch = json!({"status": {"devices": [{
        "driver": DRIVER, "pool": "pool", "device": device,
        "conditions": [{"type": condition, "status": "True", "reason": "Fabric",
                        "message": format!("{condition} by the fabric manager"),
                        "lastTransitionTime": "2026-11-25T00:00:00Z"}],
    }]}});
    api.patch_status("c1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|e| match e {
            kube::Error::Api(s) => format!("{}: {}", s.code, s.message),
            e => e.to_string(),
        })
}

fn allocated(server: &FakeApiServer) -> Option<Value> {
    server.get("resourceclaims", "default", "c1").and_then(|c| {
        let a = c["status"]["allocation"].clone();
        (!a.is_null()).then_some(a)
    })
}

fn bound_requests(server: &FakeApiServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.subresource == "binding" && r.name == "p1")
        .count()
}

fn events(server: &FakeApiServer, reason: &str) -> Vec<String> {
    server
        .events_for("default", "p1")
        .into_iter()
        .filter(|e| e["reason"] == reason)
        .filter_map(|e| e["note"].as_str().map(str::to_string))
        .collect()
}

/// Allocated and reserved first, then nothing is bound until the driver reports the
/// binding condition; the allocation carries the conditions, its timestamp and the node
/// (bindsToNode). A status for a device that is not allocated is refused (422).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pod_is_bound_only_after_the_binding_conditions_hold() {
    let server = FakeApiServer::start().await;
    cluster(&server);
    let running = start(&server, "10m").await;
    wait_for("c1 allocated", || allocated(&server).is_some()).await;
    let a = allocated(&server).unwrap();
    let result = &a["devices"]["results"][0];
    assert_eq!(result["device"], "dev-0");
    assert_eq!(result["bindingConditions"], json!(["attached"]));
    assert_eq!(result["bindingFailureConditions"], json!(["failed"]));
    assert!(a["allocationTimestamp"].is_string(), "{a}");
    let node = a["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]
        .as_str()
        .unwrap()
        .to_string();
    let claim = server.get("resourceclaims", "default", "c1").unwrap();
    let pod = server.get("pods", "default", "p1").unwrap();
    assert_eq!(
        claim["status"]["reservedFor"][0]["uid"],
        pod["metadata"]["uid"]
    );
    wait_for("BindingConditionsPending event", || {
        events(&server, "BindingConditionsPending")
            == [format!(
                "waiting for binding conditions for device on node {node}"
            )]
    })
    .await;
    // Waiting: no Binding however long the conditions take.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        bound_requests(&server),
        0,
        "nothing bound before the conditions hold"
    );
    assert_eq!(server.node_of("default", "p1"), None);

    let api = claims_api(&server).await;
    let refused = report(&api, "dev-9", "attached").await.unwrap_err();
    assert!(
        refused.starts_with("422: ")
            && refused.contains("must be an allocated device in the claim"),
        "{refused}"
    );
    report(&api, "dev-0", "attached").await.unwrap();
    wait_for("p1 bound", || server.node_of("default", "p1").is_some()).await;
    assert_eq!(server.node_of("default", "p1"), Some(node));
    let claim = server.get("resourceclaims", "default", "c1").unwrap();
    assert_eq!(
        claim["status"]["devices"][0]["conditions"][0]["type"],
        "attached"
    );
    assert!(events(&server, "FailedScheduling").is_empty());
    running.stop().await;
}

/// A fake driver: on each new allocation of c1 (no device status yet) it reports `first`
/// the first time (nothing if empty), `attached` afterwards; counts the allocations.
fn fake_driver(api: Api<ResourceClaim>, first: &'static str) -> Arc<AtomicUsize> {
    let seen = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&seen);
    tokio::spawn(async move {
        let mut last = None;
        loop {
            if let Ok(Some(c)) = api.get_opt("c1").await {
                let status = c.status.unwrap_or_default();
                let rv = c.metadata.resource_version;
                if status.allocation.is_some() && status.devices.is_none() && last != rv {
                    last = rv;
                    let condition = match count.fetch_add(1, Ordering::SeqCst) {
                        0 => first,
                        _ => "attached",
                    };
                    if !condition.is_empty() {
                        let _ = report(&api, "dev-0", condition).await;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    seen
}

/// A True failure condition ends the wait: FailedScheduling with upstream's message, the
/// claim's allocation (and device status) taken back, and the pod retried, which allocates
/// again and binds once the driver reports the device attached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_condition_deallocates_the_claim_and_retries_the_pod() {
    let server = FakeApiServer::start().await;
    cluster(&server);
    let api = claims_api(&server).await;
    let allocations = fake_driver(api, "failed");
    let running = start(&server, "10m").await;
    wait_for("p1 bound after the retry", || {
        server.node_of("default", "p1").is_some()
    })
    .await;
    assert_eq!(allocations.load(Ordering::SeqCst), 2, "allocated twice");
    let failed = events(&server, "FailedScheduling");
    assert!(
        failed.iter().any(|m| m
            == "running PreBind plugin \"DynamicResources\": claim c1 binding failed: \
                reason=Fabric, message=\"failed by the fabric manager\""),
        "{failed:?}"
    );
    // Between the two allocations the claim was written without allocation, reservation
    // or device status, and only one Binding was ever posted.
    let requests = server.requests();
    let writes: Vec<_> = requests
        .iter()
        .filter(|r| r.resource == "resourceclaims" && r.subresource == "status")
        .collect();
    assert!(writes.len() >= 4, "{}", writes.len());
    assert_eq!(bound_requests(&server), 1);
    let claim = server.get("resourceclaims", "default", "c1").unwrap();
    assert_eq!(
        claim["status"]["devices"][0]["conditions"][0]["type"],
        "attached"
    );
    running.stop().await;
}

/// Conditions that never come: after `bindingTimeout` (1s here) the claim is deallocated
/// and the pod retried; the second allocation is attached and the pod binds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_timeout_deallocates_the_claim_and_retries_the_pod() {
    let server = FakeApiServer::start().await;
    cluster(&server);
    let api = claims_api(&server).await;
    let allocations = fake_driver(api, "");
    let running = start(&server, "1s").await;
    wait_for("p1 bound after the retry", || {
        server.node_of("default", "p1").is_some()
    })
    .await;
    assert_eq!(allocations.load(Ordering::SeqCst), 2, "allocated twice");
    let failed = events(&server, "FailedScheduling");
    let prefix = "running PreBind plugin \"DynamicResources\": ";
    assert!(
        failed
            .iter()
            .any(|m| m == &format!("{prefix}device binding timeout")
                || m == &format!("{prefix}claim c1 binding timeout")),
        "{failed:?}"
    );
    assert_eq!(bound_requests(&server), 1);
    running.stop().await;
}

/// With the feature gate off (`--feature-gates=DRADeviceBindingConditions=false`), a
/// device with binding conditions is never allocated, as upstream's allocator skips it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_feature_gate_such_devices_are_not_allocated() {
    let server = FakeApiServer::start().await;
    cluster(&server);
    let running = start_gated(&server, "10m", false).await;
    wait_for("FailedScheduling", || {
        !events(&server, "FailedScheduling").is_empty()
    })
    .await;
    let failed = events(&server, "FailedScheduling");
    assert!(
        failed[0].starts_with("0/2 nodes are available: 2 cannot allocate all claims."),
        "{failed:?}"
    );
    assert_eq!(allocated(&server), None);
    assert_eq!(bound_requests(&server), 0);
    running.stop().await;
}

/// Shutting down does not wait out `bindingTimeout`: the wait gives up (upstream's PreBind
/// context is cancelled), the claim's allocation is taken back and the controller stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_the_wait_and_takes_the_allocation_back() {
    let server = FakeApiServer::start().await;
    cluster(&server);
    let running = start(&server, "10m").await;
    wait_for("c1 allocated", || allocated(&server).is_some()).await;
    wait_for("waiting", || {
        !events(&server, "BindingConditionsPending").is_empty()
    })
    .await;
    let started = std::time::Instant::now();
    running.stop().await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(allocated(&server), None, "the allocation was taken back");
    assert_eq!(bound_requests(&server), 0);
}
