//! Scenarios: ferrosched in-process against the fake API server (default) or a real cluster
//! (`FERROSCHED_E2E=cluster`), through the Kubernetes API only. See e2e/README.md.

mod harness;

use ferrosched_e2e::{ANN_SELECTED_NODE, Env};
use serde_json::{Value, json};

/// Asserts an event was written by `profile` (events.k8s.io: reportingController).
fn assert_reported_by(event: &Value, profile: &str) {
    assert_eq!(event["reportingController"], profile, "{event}");
}

fn required_node_affinity(key: &str, values: &[&str]) -> Value {
    json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": key, "operator": "In", "values": values}]}]}}})
}

/// Two profiles that score differently; pods go to the profile named by schedulerName, and
/// a pod for a scheduler nobody runs is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_profile_routing() {
    let mut env = Env::new("profiles").await;
    let busy = env.create_node(env.node("busy")).await;
    let idle = env.create_node(env.node("idle")).await;
    // Already running (bound at creation): half of busy's 4 CPUs.
    env.create_pod(env.pod("running").cpu("2").on_node(&busy))
        .await;
    // Same plugins except the scoring strategy; BalancedAllocation off so only it decides.
    let no_balance =
        "plugins:\n  score:\n    disabled:\n    - name: NodeResourcesBalancedAllocation\n";
    env.start_scheduler(&[
        (
            "pack",
            &format!(
                "{no_balance}pluginConfig:\n- name: NodeResourcesFit\n  args:\n    scoringStrategy:\n      type: MostAllocated\n"
            ),
        ),
        ("spread", no_balance),
    ])
    .await;
    let (pack, spread) = (env.profile("pack"), env.profile("spread"));

    // Created first: the informer delivers it before the pods created after it.
    let nobody = env.profile("nobody");
    env.create_pod(env.pod("foreign").scheduler(&nobody)).await;
    env.create_pod(env.pod("packed").cpu("500m").scheduler(&pack))
        .await;
    assert_eq!(env.wait_bound("packed").await, busy, "MostAllocated packs");
    env.create_pod(env.pod("spread").cpu("500m").scheduler(&spread))
        .await;
    assert_eq!(
        env.wait_bound("spread").await,
        idle,
        "LeastAllocated spreads"
    );

    let ev = env
        .wait_event("packed", "Scheduled", |n| n.ends_with(&busy))
        .await;
    assert_reported_by(&ev, &pack);
    assert_eq!(
        ev["note"],
        format!("Successfully assigned {}/packed to {busy}", env.ns)
    );
    let ev = env.wait_event("spread", "Scheduled", |_| true).await;
    assert_reported_by(&ev, &spread);

    // Both profiles have seen later pods: the foreign one was ignored, not just missed.
    let foreign = env.pod_now("foreign").await;
    assert_eq!(foreign.spec.unwrap().node_name, None);
    assert!(env.pod_scheduled("foreign").await.is_none());
    assert!(env.events_for("foreign").await.is_empty());
    env.finish().await;
}

/// A pod whose RuntimeClass does not exist yet waits with upstream's message; once the class
/// exists, its nodeSelector and tolerations put the pod on the sandbox node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_class_nodeselector_tolerations_and_late_creation() {
    let mut env = Env::new("runtimeclass").await;
    let plain = env.create_node(env.node("plain")).await;
    let sandbox = env
        .create_node(
            env.node("sandbox")
                .label("sandbox.example.com/runtime", "gvisor")
                .taint("sandbox.example.com/runtime", "gvisor", "NoSchedule"),
        )
        .await;
    env.start_default_scheduler().await;
    let class = env.name("gvisor");

    env.create_pod(env.pod("sandboxed").runtime_class(&class))
        .await;
    let not_found = format!("runtimeclass \"{class}\" not found");
    let ev = env
        .wait_event("sandboxed", "FailedScheduling", |n| n.contains(&not_found))
        .await;
    assert_reported_by(&ev, &env.profile("a"));
    env.wait_unschedulable("sandboxed", |m| m.contains(&not_found))
        .await;

    env.create_cluster::<k8s_openapi::api::node::v1::RuntimeClass>(json!({
        "metadata": {"name": class},
        "handler": "runsc",
        "scheduling": {
            "nodeSelector": {"sandbox.example.com/runtime": "gvisor"},
            "tolerations": [{"key": "sandbox.example.com/runtime", "operator": "Equal",
                             "value": "gvisor", "effect": "NoSchedule"}],
        },
    }))
    .await;
    assert_eq!(env.wait_bound("sandboxed").await, sandbox);
    let ev = env.wait_event("sandboxed", "Scheduled", |_| true).await;
    assert_reported_by(&ev, &env.profile("a"));

    // Without the class: the tainted sandbox node is out, plain is the only choice.
    env.create_pod(env.pod("ordinary")).await;
    assert_eq!(env.wait_bound("ordinary").await, plain);
    env.finish().await;
}

/// A NoSchedule taint keeps intolerant pods off a node; a toleration lets them on; the
/// PodScheduled=False message counts the tainted nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taints_and_tolerations() {
    let mut env = Env::new("taints").await;
    let small = env.create_node(env.node("small").cpu("1")).await;
    let gpu = env
        .create_node(
            env.node("gpu")
                .taint("example.com/gpu", "true", "NoSchedule"),
        )
        .await;
    env.start_default_scheduler().await;

    // Fits only on the tainted node.
    env.create_pod(env.pod("intolerant").cpu("2")).await;
    let tainted = format!(
        "{} node(s) had untolerated taint(s)",
        1 + env.foreign_tainted_nodes().await
    );
    env.wait_unschedulable("intolerant", |m| {
        m.contains(&tainted) && m.contains("1 Insufficient cpu")
    })
    .await;
    let ev = env
        .wait_event("intolerant", "FailedScheduling", |n| {
            n.contains("untolerated taint")
        })
        .await;
    assert_reported_by(&ev, &env.profile("a"));

    env.create_pod(env.pod("tolerant").cpu("2").toleration(
        "example.com/gpu",
        "true",
        "NoSchedule",
    ))
    .await;
    assert_eq!(env.wait_bound("tolerant").await, gpu);

    // Room on both nodes, but the taint leaves only one.
    for i in 0..3 {
        env.create_pod(env.pod(&format!("small-{i}")).cpu("200m"))
            .await;
    }
    for i in 0..3 {
        assert_eq!(env.wait_bound(&format!("small-{i}")).await, small);
    }
    assert!(
        env.pod_now("intolerant")
            .await
            .spec
            .unwrap()
            .node_name
            .is_none()
    );
    env.finish().await;
}

/// Required node affinity picks the zone; required pod anti-affinity spreads replicas over
/// hostnames and leaves the one too many unschedulable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_affinity_and_pod_anti_affinity() {
    let mut env = Env::new("affinity").await;
    let a1 = env.create_node(env.node("a1").zone("zone-a")).await;
    let b1 = env.create_node(env.node("b1").zone("zone-b")).await;
    let b2 = env.create_node(env.node("b2").zone("zone-b")).await;
    env.start_default_scheduler().await;

    let anti = json!({"labelSelector": {"matchLabels": {"app": "web"}},
                      "topologyKey": "kubernetes.io/hostname"});
    let web = |name: &str| {
        let mut affinity = required_node_affinity("topology.kubernetes.io/zone", &["zone-b"]);
        affinity["podAntiAffinity"] =
            json!({"requiredDuringSchedulingIgnoredDuringExecution": [anti.clone()]});
        env.pod(name).label("app", "web").affinity(affinity)
    };
    for name in ["web-0", "web-1", "web-2"] {
        env.create_pod(web(name)).await;
    }
    // Two of them get the two zone-b nodes; the third has none left.
    let mut placed = Vec::new();
    let mut pending = Vec::new();
    for name in ["web-0", "web-1", "web-2"] {
        let (env, name) = (&env, name);
        let outcome = env
            .eventually(
                format!("{name} bound or unschedulable"),
                move || async move {
                    let p = env.pod_now(name).await;
                    if let Some(n) = p.spec.and_then(|s| s.node_name) {
                        return Ok(Some(n));
                    }
                    match env.pod_scheduled(name).await {
                        Some(c) if c.status == "False" => Ok(None),
                        other => Err(format!("{other:?}")),
                    }
                },
            )
            .await;
        match outcome {
            Some(node) => placed.push(node),
            None => pending.push(name),
        }
    }
    placed.sort();
    assert_eq!(placed, vec![b1.clone(), b2.clone()], "one per zone-b host");
    assert_eq!(pending.len(), 1);
    env.wait_unschedulable(pending[0], |m| {
        m.contains("2 node(s) didn't match pod anti-affinity rules")
            && m.contains("didn't match Pod's node affinity/selector")
    })
    .await;

    // Node affinity alone: zone-a's only node.
    env.create_pod(env.pod("zonal").affinity(required_node_affinity(
        "topology.kubernetes.io/zone",
        &["zone-a"],
    )))
    .await;
    assert_eq!(env.wait_bound("zonal").await, a1);
    env.finish().await;
}

/// A high-priority pod on a full node: the low-priority victim is deleted (Preempted event),
/// the preemptor is nominated to the node and then bound there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemption() {
    let mut env = Env::new("preemption").await;
    let low = env.create_priority_class("low", 10).await;
    let high = env.create_priority_class("high", 1000).await;
    let node = env.create_node(env.node("only").cpu("1")).await;
    env.start_default_scheduler().await;
    let profile = env.profile("a");

    env.create_pod(env.pod("victim").cpu("800m").priority(&low, 10))
        .await;
    assert_eq!(env.wait_bound("victim").await, node);
    env.create_pod(env.pod("preemptor").cpu("800m").priority(&high, 1000))
        .await;

    let ev = env
        .wait_event("victim", "Preempted", |n| {
            n.ends_with(&format!("on node {node}"))
        })
        .await;
    assert_reported_by(&ev, &profile);
    assert_eq!(ev["related"]["name"], "preemptor");
    let ev = env
        .wait_event("preemptor", "FailedScheduling", |n| {
            n.contains("Insufficient cpu")
        })
        .await;
    assert_reported_by(&ev, &profile);
    let env_ref = &env;
    env.eventually("the victim deleted", move || async move {
        let env = env_ref;
        match env.pod_opt("victim").await {
            None => Ok(()),
            Some(p) => Err(format!("{:?}", p.metadata.deletion_timestamp)),
        }
    })
    .await;
    assert_eq!(env.wait_bound("preemptor").await, node);
    let nominated = env
        .pod_now("preemptor")
        .await
        .status
        .and_then(|s| s.nominated_node_name);
    assert_eq!(nominated.as_deref(), Some(node.as_str()));
    env.finish().await;
}

/// No node fits (there are none of the run's): FailedScheduling; a node appears and the
/// pod is bound to it without any other change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_becomes_schedulable_when_a_node_appears() {
    let mut env = Env::new("nodeappears").await;
    env.start_default_scheduler().await;
    env.create_pod(env.pod("early")).await;
    let ev = env.wait_event("early", "FailedScheduling", |_| true).await;
    assert_reported_by(&ev, &env.profile("a"));
    env.wait_unschedulable("early", |_| true).await;

    let node = env.create_node(env.node("late")).await;
    assert_eq!(env.wait_bound("early").await, node);
    let cond = env.pod_scheduled("early").await.expect("PodScheduled");
    assert_eq!(cond.status, "True");
    let ev = env.wait_event("early", "Scheduled", |_| true).await;
    assert_eq!(
        ev["note"],
        format!("Successfully assigned {}/early to {node}", env.ns)
    );
    env.finish().await;
}

/// A StatefulSet-like pod (web-0 with claim data-web-0) whose WaitForFirstConsumer claim is
/// provisioned: the scheduler annotates the claim with its node, the provisioner makes a
/// volume there, the PV controller binds them, and only then is the pod bound to that node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_first_consumer_claim_gets_selected_node_and_pod_binds_there() {
    let mut env = Env::new("wffc").await;
    let class = env.create_wffc_storage_class("wffc").await;
    let n1 = env.create_node(env.node("n1")).await;
    let n2 = env.create_node(env.node("n2")).await;
    env.start_default_scheduler().await;

    env.create::<k8s_openapi::api::core::v1::PersistentVolumeClaim>(json!({
        "metadata": {"name": "data-web-0", "labels": {"app": "web"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                 "resources": {"requests": {"storage": "1Gi"}}},
    }))
    .await;
    env.create_pod(
        env.pod("web-0")
            .label("app", "web")
            .label("statefulset.kubernetes.io/pod-name", "web-0")
            .claim("data-web-0"),
    )
    .await;

    let node = env.wait_bound("web-0").await;
    assert!(node == n1 || node == n2, "{node}");
    let claim = env.claim("data-web-0").await;
    assert_eq!(
        claim
            .metadata
            .annotations
            .unwrap_or_default()
            .get(ANN_SELECTED_NODE),
        Some(&node)
    );
    assert_eq!(claim.status.and_then(|s| s.phase).as_deref(), Some("Bound"));
    let volume = claim
        .spec
        .unwrap()
        .volume_name
        .expect("claim bound to a volume");
    let pv = serde_json::to_value(env.volume(&volume).await).unwrap();
    assert_eq!(
        pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"],
        json!([node])
    );
    assert_eq!(pv["spec"]["claimRef"]["name"], "data-web-0");
    let ev = env.wait_event("web-0", "Scheduled", |_| true).await;
    assert_reported_by(&ev, &env.profile("a"));
    env.finish().await;
}

/// Static binding: a WaitForFirstConsumer claim of a no-provisioner class matches a local
/// volume that exists only on n2. The scheduler picks n2 and sets the volume's claimRef;
/// the PV controller binds the claim; the pod is bound to n2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_first_consumer_claim_binds_to_a_local_volume_on_its_node() {
    let mut env = Env::new("localpv").await;
    let class = env.name("local");
    env.create_cluster::<k8s_openapi::api::storage::v1::StorageClass>(json!({
        "metadata": {"name": class},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
    }))
    .await;
    env.create_node(env.node("n1")).await;
    let n2 = env.create_node(env.node("n2")).await;
    let pv_name = env.name("local-n2");
    env.create_cluster::<k8s_openapi::api::core::v1::PersistentVolume>(json!({
        "metadata": {"name": pv_name},
        "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": class, "persistentVolumeReclaimPolicy": "Retain",
                 "volumeMode": "Filesystem",
                 "local": {"path": "/mnt/disks/e2e"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [n2]}]}]}}},
    }))
    .await;
    env.start_default_scheduler().await;

    env.create::<k8s_openapi::api::core::v1::PersistentVolumeClaim>(json!({
        "metadata": {"name": "cache-web-0"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                 "resources": {"requests": {"storage": "5Gi"}}},
    }))
    .await;
    env.create_pod(env.pod("web-0").label("app", "web").claim("cache-web-0"))
        .await;

    assert_eq!(env.wait_bound("web-0").await, n2);
    let claim = env.claim("cache-web-0").await;
    assert_eq!(
        claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()),
        Some(pv_name.as_str())
    );
    let pv = env.volume(&pv_name).await;
    let claim_ref = pv.spec.and_then(|s| s.claim_ref).expect("claimRef");
    assert_eq!(claim_ref.name.as_deref(), Some("cache-web-0"));
    assert_eq!(claim_ref.uid, claim.metadata.uid);
    // Nothing to provision: no selected-node annotation.
    assert!(
        !claim
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key(ANN_SELECTED_NODE)
    );
    env.finish().await;
}

/// DRA: a fake driver publishes a ResourceSlice per node (two GPUs each) through the API;
/// five pods each claim one GPU of the class. Four are bound, each to the node of the device
/// its claim was allocated (allocation and reservedFor written before the Binding), no
/// device twice; the fifth is unschedulable with `cannot allocate all claims`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_devices_published_by_a_fake_driver() {
    use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
    let mut env = Env::new("dra").await;
    let driver = format!("{}.example.com", env.name("gpu"));
    let class = env.name("gpu");
    env.create_cluster::<DeviceClass>(json!({
        "metadata": {"name": class},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == {driver:?}")}}]},
    }))
    .await;
    let mut nodes = Vec::new();
    for short in ["n1", "n2"] {
        let node = env.create_node(env.node(short)).await;
        // The fake driver's kubelet plugin: one pool per node, one slice.
        env.create_cluster::<ResourceSlice>(json!({
            "metadata": {"name": format!("{node}-gpus")},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "a100"}}},
                                 {"name": "gpu-1", "attributes": {"model": {"string": "a100"}}}]},
        }))
        .await;
        nodes.push(node);
    }
    env.start_default_scheduler().await;
    for i in 0..5 {
        env.create::<ResourceClaim>(json!({
            "metadata": {"name": format!("gpu-{i}")},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": class,
                "selectors": [{"cel": {"expression":
                    format!("device.attributes[{driver:?}].model == \"a100\"")}}]}}]}},
        }))
        .await;
        env.create_pod(
            env.pod(&format!("p{i}"))
                .merge(json!({"spec": {"resourceClaims": [
            {"name": "gpu", "resourceClaimName": format!("gpu-{i}")}]}})),
        )
        .await;
    }
    let claims: kube::Api<ResourceClaim> = kube::Api::namespaced(env.client.clone(), &env.ns);
    let mut taken = std::collections::BTreeSet::new();
    let mut unbound = Vec::new();
    let bound = env
        .eventually("four pods bound", || async {
            let mut n = Vec::new();
            for i in 0..5 {
                if let Some(node) = env
                    .pod_opt(&format!("p{i}"))
                    .await
                    .and_then(|p| p.spec.and_then(|s| s.node_name))
                {
                    n.push((i, node));
                }
            }
            if n.len() == 4 {
                Ok(n)
            } else {
                Err(format!("{n:?}"))
            }
        })
        .await;
    for i in 0..5 {
        if !bound.iter().any(|(b, _)| *b == i) {
            unbound.push(i);
        }
    }
    for (i, node) in &bound {
        assert!(nodes.contains(node), "{node}");
        let c = claims.get(&format!("gpu-{i}")).await.unwrap();
        let status = c.status.expect("claim status written");
        let result = &status
            .allocation
            .expect("allocated")
            .devices
            .unwrap()
            .results
            .unwrap()[0];
        assert_eq!(&result.pool, node, "the device is on the pod's node");
        assert!(
            taken.insert((result.pool.clone(), result.device.clone())),
            "{result:?} twice"
        );
        assert_eq!(status.reserved_for.unwrap()[0].name, format!("p{i}"));
    }
    assert_eq!(unbound.len(), 1);
    env.wait_unschedulable(&format!("p{}", unbound[0]), |m| {
        m.contains("cannot allocate all claims")
    })
    .await;
    env.finish().await;
}
