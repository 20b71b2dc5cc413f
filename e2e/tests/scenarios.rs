//! Scenarios: ferrosched in-process against the fake API server (default) or a real cluster
//! (`FERROSCHED_E2E=cluster`), through the Kubernetes API only. See e2e/README.md.

mod harness;

use ferrosched_e2e::{
    ANN_SELECTED_NODE, AdmissionPlugin, E2E_TAINT, Env, PodBuilder, RUN_LABEL, refusal,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
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

/// With the RuntimeClass admission plugin off (a cluster admin's choice): a pod whose
/// RuntimeClass does not exist yet is stored and waits with upstream's message; once the
/// class exists, its nodeSelector and tolerations put the pod on the sandbox node.
/// Fake server only: the plugin cannot be switched off through a real server's API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_class_nodeselector_tolerations_and_late_creation() {
    let mut env = Env::new("runtimeclass").await;
    if !env.disable_admission_plugin(AdmissionPlugin::RuntimeClass) {
        eprintln!(
            "skipped: needs the RuntimeClass admission plugin off (see runtime_class_admission_...)"
        );
        env.finish().await;
        return;
    }
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
    // The nomination was `node`; kube-apiserver 1.35+ (and the fake one) clears it with the
    // Binding, older servers leave it.
    let nominated = env
        .pod_now("preemptor")
        .await
        .status
        .and_then(|s| s.nominated_node_name);
    assert!(
        nominated.is_none() || nominated.as_deref() == Some(node.as_str()),
        "{nominated:?}"
    );
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

fn sandbox_class(name: &str) -> Value {
    json!({
        "metadata": {"name": name},
        "handler": "runsc",
        "scheduling": {
            "nodeSelector": {"sandbox.example.com/runtime": "gvisor"},
            "tolerations": [{"key": "sandbox.example.com/runtime", "operator": "Equal",
                             "value": "gvisor", "effect": "NoSchedule"}],
        },
    })
}

/// With the RuntimeClass admission plugin on (every cluster's default): a pod naming a
/// missing class is refused at creation; one naming an existing class is stored with the
/// class's nodeSelector and tolerations merged. What ferrosched's RuntimeClass predicate
/// adds then: a class deleted after its pod was admitted holds the pod back with
/// `runtimeclass "…" not found`, and its re-creation lets the pod bind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_class_admission_refuses_missing_classes_and_merges_present_ones() {
    let mut env = Env::new("runtimeclass-admission").await;
    let plain = env.create_node(env.node("plain")).await;
    env.start_default_scheduler().await;
    let class = env.name("gvisor");
    let (code, message) = refusal(
        env.try_create_pod(env.pod("early").runtime_class(&class))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (code, message),
        (
            403,
            format!(
                "pods \"early\" is forbidden: pod rejected: RuntimeClass \"{class}\" not found"
            )
        )
    );

    env.create_cluster::<RuntimeClass>(sandbox_class(&class))
        .await;
    let pod = env
        .create_pod(env.pod("sandboxed").runtime_class(&class))
        .await;
    let spec = pod.spec.unwrap();
    let selector = spec.node_selector.unwrap();
    assert_eq!(selector["sandbox.example.com/runtime"], "gvisor");
    assert_eq!(selector[RUN_LABEL], env.id);
    assert!(
        spec.tolerations
            .unwrap()
            .iter()
            .any(|t| t.key.as_deref() == Some("sandbox.example.com/runtime"))
    );
    // Only the plain node: the merged nodeSelector keeps the pod off it.
    env.wait_unschedulable("sandboxed", |m| {
        m.contains("didn't match Pod's node affinity/selector")
    })
    .await;

    // The class goes away after admission, and a node that would suit the pod appears; the
    // next attempt says the class is missing. The scheduler is paused meanwhile: its class
    // and node watches are separate streams, so a running one may see the node first and
    // (rightly) bind the pod while the class still looks present.
    env.stop_scheduler().await;
    let classes: Api<RuntimeClass> = Api::all(env.client.clone());
    classes
        .delete(&class, &DeleteParams::default())
        .await
        .unwrap();
    let sandbox = env
        .create_node(
            env.node("sandbox")
                .label("sandbox.example.com/runtime", "gvisor")
                .taint("sandbox.example.com/runtime", "gvisor", "NoSchedule"),
        )
        .await;
    env.start_default_scheduler().await;
    let not_found = format!("runtimeclass \"{class}\" not found");
    env.wait_unschedulable("sandboxed", |m| m.contains(&not_found))
        .await;
    env.create_cluster::<RuntimeClass>(sandbox_class(&class))
        .await;
    assert_eq!(env.wait_bound("sandboxed").await, sandbox);
    env.create_pod(env.pod("ordinary")).await;
    assert_eq!(env.wait_bound("ordinary").await, plain);
    env.finish().await;
}

/// A pod of `sa` that sets none of the scheduling fields a policy governs.
fn bare_pod(env: &Env, name: &str, sa: &str) -> PodBuilder {
    let mut pod = env.pod(name).0;
    let spec = pod["spec"].as_object_mut().unwrap();
    for field in ["schedulerName", "nodeSelector", "tolerations"] {
        spec.remove(field);
    }
    spec.insert("serviceAccountName".into(), json!(sa));
    PodBuilder(pod)
}

fn as_account(pod: PodBuilder, sa: &str) -> PodBuilder {
    pod.merge(json!({"spec": {"serviceAccountName": sa}}))
}

/// `ferrosched webhook` registered with the API server (mutating and validating), pods of
/// three service accounts: team-a may use one policy, team-b two (their union), nobody
/// none. Admitted, defaulted through the real admission chain (toleration appended after
/// the server's, priority class with its value), denied naming the field, and updates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduling_policy_webhook_admits_defaults_and_denies() {
    let mut env = Env::new("schedpol").await;
    let node = env.create_node(env.node("n")).await;
    env.start_default_scheduler().await;
    let gold = env.create_priority_class("gold", 1000).await;
    let silver = env.create_priority_class("silver", 10).await;
    let profile = env.profile("a");
    let id = env.id.clone();
    let own_toleration =
        json!({"key": E2E_TAINT, "operator": "Equal", "value": id, "effect": "NoSchedule"});
    let team = env
        .create_policy(
            "team",
            json!({
                "required": {"nodeSelectors": {RUN_LABEL: [id]}},
                "allowed": {
                    "schedulerNames": [profile], "priorityClassNames": [gold],
                    "tolerations": [{"keys": [E2E_TAINT], "operators": ["Equal"],
                                     "values": [id], "effects": ["NoSchedule"]}],
                },
                "default": {
                    "schedulerName": profile, "priorityClassName": gold,
                    "nodeSelector": {RUN_LABEL: id}, "tolerations": [own_toleration],
                },
            }),
        )
        .await;
    let gpu = env
        .create_policy(
            "gpu",
            json!({"allowed": {"tolerations": [{"keys": ["gpu"], "operators": ["Equal"],
                                                "values": ["a100"], "effects": ["NoSchedule"]}]}}),
        )
        .await;
    for sa in ["team-a", "team-b", "nobody"] {
        env.create_service_account(sa).await;
    }
    env.grant_policy("team-a", &team).await;
    env.grant_policy("team-b", &team).await;
    env.grant_policy("team-b", &gpu).await;
    env.start_policy_webhook().await;
    let denied = |e| {
        let (_, message) = refusal(e);
        assert!(
            message.contains(scheduling_policy::webhook::DENIED),
            "{message}"
        );
        message
    };

    // Defaulted: every field, after what the API server set (default-scheduler, priority
    // 0, the not-ready/unreachable tolerations).
    let pod = env.create_pod(bare_pod(&env, "defaulted", "team-a")).await;
    let spec = pod.spec.unwrap();
    assert_eq!(spec.scheduler_name.as_deref(), Some(profile.as_str()));
    assert_eq!(spec.priority_class_name.as_deref(), Some(gold.as_str()));
    assert_eq!(spec.priority, Some(1000));
    assert_eq!(spec.node_selector.unwrap()[RUN_LABEL], id);
    let keys: Vec<String> = spec
        .tolerations
        .unwrap()
        .into_iter()
        .filter_map(|t| t.key)
        .collect();
    assert!(keys.contains(&E2E_TAINT.to_string()), "{keys:?}");
    assert!(
        keys.contains(&"node.kubernetes.io/not-ready".to_string()),
        "{keys:?}"
    );
    assert_eq!(env.wait_bound("defaulted").await, node);

    // Admitted as written (the priority class still defaulted).
    env.create_pod(as_account(env.pod("admitted"), "team-a"))
        .await;
    assert_eq!(env.wait_bound("admitted").await, node);

    // Denied, naming the field.
    let message = denied(
        env.try_create_pod(as_account(env.pod("s").scheduler("other"), "team-a"))
            .await
            .unwrap_err(),
    );
    assert!(
        message.contains("spec.schedulerName \"other\" is not allowed"),
        "{message}"
    );
    let message = denied(
        env.try_create_pod(as_account(
            env.pod("t").toleration("gpu", "a100", "NoSchedule"),
            "team-a",
        ))
        .await
        .unwrap_err(),
    );
    assert!(
        message.contains("spec.tolerations[1] (key \"gpu\""),
        "{message}"
    );
    let message = denied(
        env.try_create_pod(as_account(
            env.pod("ns")
                .merge(json!({"spec": {"nodeSelector": {RUN_LABEL: "other"}}})),
            "team-a",
        ))
        .await
        .unwrap_err(),
    );
    assert!(
        message.contains(&format!("spec.nodeSelector[{RUN_LABEL}]")),
        "{message}"
    );
    let message = denied(
        env.try_create_pod(as_account(env.pod("pc").priority(&silver, 10), "team-a"))
            .await
            .unwrap_err(),
    );
    assert!(
        message.contains(&format!("spec.priorityClassName \"{silver}\"")),
        "{message}"
    );

    // The union of two policies: team-b may tolerate the GPU taint.
    env.create_pod(as_account(
        env.pod("union").toleration("gpu", "a100", "NoSchedule"),
        "team-b",
    ))
    .await;
    // An account without any policy: everything is denied.
    let message = denied(
        env.try_create_pod(as_account(env.pod("nobody"), "nobody"))
            .await
            .unwrap_err(),
    );
    assert!(message.contains("usable policies: none"), "{message}");

    // Updates: adding a toleration the policy does not allow is denied; relabelling passes.
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let current = pods.get("admitted").await.unwrap();
    let mut tolerations = serde_json::to_value(current.spec.unwrap().tolerations).unwrap();
    tolerations
        .as_array_mut()
        .unwrap()
        .push(json!({"key": "gpu", "operator": "Equal", "value": "a100", "effect": "NoSchedule"}));
    let err = pods
        .patch(
            "admitted",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"tolerations": tolerations}})),
        )
        .await
        .unwrap_err();
    let message = denied(err);
    assert!(message.contains("(key \"gpu\""), "{message}");
    pods.patch(
        "admitted",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"relabelled": "yes"}}})),
    )
    .await
    .unwrap();
    env.finish().await;
}

/// A DRA scenario's environment and its DeviceClass `<kind>`, which selects the devices of
/// the driver `<kind>.example.com` (both names unique to the run); `None`, said on stderr,
/// where the cluster does not serve resource.k8s.io/v1.
async fn dra_env(name: &str, kind: &str) -> Option<(Env, String, String)> {
    use k8s_openapi::api::resource::v1::DeviceClass;
    let env = Env::new(name).await;
    if !env.serves("resource.k8s.io/v1").await {
        eprintln!("skipped: the cluster does not serve resource.k8s.io/v1 (DRA needs 1.34+)");
        env.finish().await;
        return None;
    }
    let driver = format!("{}.example.com", env.name(kind));
    let class = env.name(kind);
    env.create_cluster::<DeviceClass>(json!({
        "metadata": {"name": class},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == {driver:?}")}}]},
    }))
    .await;
    Some((env, driver, class))
}

/// DRA: a fake driver publishes a ResourceSlice per node (two GPUs each) through the API;
/// five pods each claim one GPU of the class. Four are bound, each to the node of the device
/// its claim was allocated (allocation and reservedFor written before the Binding), no
/// device twice; the fifth is unschedulable with `cannot allocate all claims`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_devices_published_by_a_fake_driver() {
    use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
    let Some((mut env, driver, class)) = dra_env("dra", "gpu").await else {
        return;
    };
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

/// Device binding conditions (DRADeviceBindingConditions, 1.36+): a fabric device every node
/// reaches must be attached before use. The claim is allocated and reserved, pinned to the
/// chosen node (`bindsToNode`), and the pod stays unbound until the fake driver reports the
/// device attached in the claim's `status.devices`; then it is bound to that node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_binding_conditions_reported_by_a_fake_driver() {
    use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
    let Some((mut env, driver, class)) = dra_env("dra-binding", "fabric").await else {
        return;
    };
    let mut nodes = Vec::new();
    for short in ["n1", "n2"] {
        nodes.push(env.create_node(env.node(short)).await);
    }
    let slice: ResourceSlice = env
        .create_cluster(json!({
            "metadata": {"name": env.name("fabric-pool")},
            "spec": {"driver": driver, "allNodes": true,
                     "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "dev-0", "bindsToNode": true,
                                  "bindingConditions": ["attached"],
                                  "bindingFailureConditions": ["failed"]}]},
        }))
        .await;
    if slice.spec.devices.unwrap_or_default()[0]
        .binding_conditions
        .is_none()
    {
        eprintln!("skipped: the cluster drops bindingConditions (DRADeviceBindingConditions off)");
        env.finish().await;
        return;
    }
    env.start_default_scheduler().await;
    env.create::<ResourceClaim>(json!({
        "metadata": {"name": "c1"},
        "spec": {"devices": {"requests": [{"name": "dev", "exactly": {"deviceClassName": class}}]}},
    }))
    .await;
    env.create_pod(env.pod("p1").merge(json!({"spec": {"resourceClaims": [
        {"name": "dev", "resourceClaimName": "c1"}]}})))
        .await;
    let claims: kube::Api<ResourceClaim> = kube::Api::namespaced(env.client.clone(), &env.ns);
    let node = env
        .eventually("c1 allocated and reserved", || async {
            let c = claims.get("c1").await.map_err(|e| e.to_string())?;
            let status = c.status.unwrap_or_default();
            let a = status.allocation.ok_or("not allocated")?;
            if status.reserved_for.is_none() {
                return Err("not reserved".to_string());
            }
            a.node_selector
                .and_then(|s| s.node_selector_terms.into_iter().next())
                .and_then(|t| t.match_fields)
                .and_then(|f| f.into_iter().next())
                .and_then(|r| r.values)
                .and_then(|v| v.into_iter().next())
                .ok_or_else(|| "no node in the allocation".to_string())
        })
        .await;
    assert!(nodes.contains(&node), "{node}");
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let waiting = env.pod_opt("p1").await.unwrap();
    assert_eq!(
        waiting.spec.and_then(|s| s.node_name),
        None,
        "not bound before the binding conditions hold"
    );
    let patch = json!({"status": {"devices": [{
        "driver": driver, "pool": "fabric", "device": "dev-0",
        "conditions": [{"type": "attached", "status": "True", "reason": "Attached",
                        "message": "attached by the fabric manager",
                        "lastTransitionTime": "2026-11-25T00:00:00Z"}],
    }]}});
    claims
        .patch_status(
            "c1",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .expect("the driver's device status");
    assert_eq!(env.wait_bound("p1").await, node);
    env.finish().await;
}

/// Gang scheduling (the Workload API's PodGroups, 1.36+ with the API turned on; the fake API
/// server serves `v1beta1`): a gang of three that two nodes cannot hold is not bound at all,
/// each pod says why, the PodGroup says it too; a third node and the whole gang is bound,
/// one pod per node. Skipped where the cluster does not serve `scheduling.k8s.io/v1beta1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_is_bound_all_or_nothing() {
    use k8s_openapi::api::scheduling::v1beta1::PodGroup;
    let mut env = Env::new("gang").await;
    if !env.serves("scheduling.k8s.io/v1beta1").await {
        eprintln!("skipped: the cluster does not serve scheduling.k8s.io/v1beta1 PodGroups");
        env.finish().await;
        return;
    }
    let mut nodes = Vec::new();
    for short in ["n1", "n2"] {
        nodes.push(env.create_node(env.node(short).cpu("1")).await);
    }
    env.start_default_scheduler().await;
    let group = env.name("train");
    env.create::<PodGroup>(json!({
        "metadata": {"name": group},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
    }))
    .await;
    let pods = ["w0", "w1", "w2"];
    for p in pods {
        env.create_pod(
            env.pod(p)
                .cpu("800m")
                .merge(json!({"spec": {"schedulingGroup": {"podGroupName": group}}})),
        )
        .await;
    }
    for p in pods {
        env.wait_unschedulable(p, |m| {
            m.contains("minCount (3) cannot be satisfied") || m.contains("Insufficient cpu")
        })
        .await;
    }
    for p in pods {
        let bound = env.pod_now(p).await.spec.and_then(|s| s.node_name);
        assert_eq!(bound, None, "{p} must not be bound without its gang");
    }
    let groups: kube::Api<PodGroup> = kube::Api::namespaced(env.client.clone(), &env.ns);
    let (groups, name) = (&groups, &group);
    env.eventually(
        "the PodGroup's Unschedulable condition",
        move || async move {
            let pg = groups.get(name).await.map_err(|e| e.to_string())?;
            let condition = pg.status.and_then(|s| s.conditions).and_then(|c| {
                c.into_iter()
                    .find(|c| c.type_ == "PodGroupInitiallyScheduled")
            });
            match condition.map(|c| (c.status, c.reason)) {
                Some((s, r)) if s == "False" && r == "Unschedulable" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;

    nodes.push(env.create_node(env.node("n3").cpu("1")).await);
    let mut placed = Vec::new();
    for p in pods {
        placed.push(env.wait_bound(p).await);
    }
    placed.sort();
    nodes.sort();
    assert_eq!(placed, nodes, "one pod per node");
    env.finish().await;
}

const TEAM: &str = "example.com/team";
const PREFERRED: &str = "example.com/preferred";

/// A scheduler extender served in-process over HTTP, as an admin's service would be: its
/// filter keeps the nodes of the pod's team (a node annotation against the pod's, read
/// from the objects it is sent), its prioritize gives 10 to nodes annotated as preferred.
async fn serve_team_extender() -> String {
    use axum::routing::post;
    let team = |o: &Value| o["metadata"]["annotations"][TEAM].clone();
    let filter = move |axum::Json(args): axum::Json<Value>| async move {
        let pod_team = team(&args["Pod"]);
        let (mut kept, mut failed) = (Vec::new(), serde_json::Map::new());
        for node in args["Nodes"]["items"].as_array().into_iter().flatten() {
            if !pod_team.is_null() && team(node) == pod_team {
                kept.push(node.clone());
            } else {
                let name = node["metadata"]["name"].as_str().unwrap_or_default();
                failed.insert(name.to_string(), json!("not on the pod's team"));
            }
        }
        axum::Json(json!({"Nodes": {"items": kept}, "FailedNodes": failed}))
    };
    let prioritize = |axum::Json(args): axum::Json<Value>| async move {
        let scores: Vec<Value> = args["Nodes"]["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|n| {
                let preferred = n["metadata"]["annotations"][PREFERRED] == "true";
                json!({"Host": n["metadata"]["name"], "Score": if preferred { 10 } else { 0 }})
            })
            .collect();
        axum::Json(Value::from(scores))
    };
    let app = axum::Router::new()
        .route("/filter", post(filter))
        .route("/prioritize", post(prioritize));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// An HTTP extender's filter and prioritize decide where a pod lands: the plugins alone
/// would pick the emptiest node, of another team; the extender drops it and prefers the
/// busiest node of the pod's team. A pod of no team fits nowhere, with the extender's
/// reason in FailedScheduling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_extender_filters_and_prioritizes() {
    let mut env = Env::new("extender").await;
    env.create_node(env.node("red").annotate(TEAM, "red")).await;
    let blue = env
        .create_node(env.node("blue").annotate(TEAM, "blue"))
        .await;
    let preferred = env
        .create_node(
            env.node("preferred")
                .annotate(TEAM, "blue")
                .annotate(PREFERRED, "true"),
        )
        .await;
    env.create_pod(env.pod("busy-blue").cpu("1").on_node(&blue))
        .await;
    env.create_pod(env.pod("busy-preferred").cpu("2").on_node(&preferred))
        .await;
    let url = serve_team_extender().await;
    env.start_scheduler_with(
        &[("a", "")],
        &format!(
            "extenders:\n- urlPrefix: {url}\n  filterVerb: filter\n  prioritizeVerb: prioritize\n  weight: 5\n"
        ),
    )
    .await;
    let annotated = |team: &str| json!({"metadata": {"annotations": {TEAM: team}}});
    env.create_pod(env.pod("web").cpu("500m").merge(annotated("blue")))
        .await;
    assert_eq!(env.wait_bound("web").await, preferred);
    env.create_pod(env.pod("teamless").cpu("500m")).await;
    env.wait_unschedulable("teamless", |m| m.contains("not on the pod's team"))
        .await;
    let ev = env
        .wait_event("teamless", "FailedScheduling", |n| {
            n.contains("not on the pod's team")
        })
        .await;
    assert_reported_by(&ev, &env.profile("a"));
    env.finish().await;
}
