use super::pod::{Spec, Status};
use super::*;
use crate::state::{is_terminal, scheduled_condition};
use scheduler_core::framework::NodeFingerprint;
use scheduler_core::types::PodInfo;
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// A `ferrosched bench --kubeconfig` pod as kube-apiserver serves it once bound: defaulted
/// fields, the kube-api-access volume ServiceAccount admission adds, managedFields.
const SERVED_POD: &str = include_str!("testdata/served-pod.json");
/// Every field a consumer reads set (pod-level and resize status, sidecars, DRA claims,
/// in-tree volumes, a preempted pod's conditions) beside the heavy fields none reads.
const RICH_POD: &str = include_str!("testdata/rich-pod.json");

/// The fields a lean pod keeps, as paths (`[]`: every item of a list). A path ending at a
/// k8s-openapi type keeps its whole subtree. Checked against the structs in `pod` (and
/// `LeanMeta`) both ways: the structs keep exactly these.
const KEPT: &[&str] = &[
    "metadata.annotations",
    "metadata.creationTimestamp",
    "metadata.deletionGracePeriodSeconds",
    "metadata.deletionTimestamp",
    "metadata.finalizers",
    "metadata.generateName",
    "metadata.generation",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.ownerReferences",
    "metadata.resourceVersion",
    "metadata.selfLink",
    "metadata.uid",
    "spec.affinity",
    "spec.containers[].image",
    "spec.containers[].name",
    "spec.containers[].ports",
    "spec.containers[].resources",
    "spec.containers[].restartPolicy",
    "spec.containers[].restartPolicyRules",
    "spec.containers[].volumeMounts[].bindMountOptions",
    "spec.ephemeralContainers[].name",
    "spec.ephemeralContainers[].volumeMounts[].bindMountOptions",
    "spec.hostNetwork",
    "spec.hostUsers",
    "spec.initContainers[].image",
    "spec.initContainers[].name",
    "spec.initContainers[].ports",
    "spec.initContainers[].resources",
    "spec.initContainers[].restartPolicy",
    "spec.initContainers[].restartPolicyRules",
    "spec.initContainers[].volumeMounts[].bindMountOptions",
    "spec.nodeName",
    "spec.nodeSelector",
    "spec.overhead",
    "spec.preemptionPolicy",
    "spec.priority",
    "spec.priorityClassName",
    "spec.resourceClaims",
    "spec.resources",
    "spec.runtimeClassName",
    "spec.schedulerName",
    "spec.schedulingGates",
    "spec.schedulingGroup",
    "spec.serviceAccountName",
    "spec.tolerations",
    "spec.topologySpreadConstraints",
    "spec.volumes[].awsElasticBlockStore",
    "spec.volumes[].azureDisk",
    "spec.volumes[].cinder",
    "spec.volumes[].ephemeral",
    "spec.volumes[].gcePersistentDisk",
    "spec.volumes[].iscsi",
    "spec.volumes[].name",
    "spec.volumes[].persistentVolumeClaim",
    "spec.volumes[].portworxVolume",
    "spec.volumes[].rbd",
    "status.allocatedResources",
    "status.conditions",
    "status.containerStatuses[].allocatedResources",
    "status.containerStatuses[].name",
    "status.containerStatuses[].resources",
    "status.initContainerStatuses[].allocatedResources",
    "status.initContainerStatuses[].name",
    "status.initContainerStatuses[].resources",
    "status.nominatedNodeName",
    "status.phase",
    "status.resourceClaimStatuses",
    "status.resources",
    "status.startTime",
];

fn doc(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

/// The rich pod with what it sets turned the other way where one setting hides another:
/// no pod-level status (container statuses count), not terminating, bind mount options on
/// the ephemeral container only, the restart-all rule on a regular container, terminal
/// phase, a resize that is not infeasible.
fn rich_pod_b() -> Value {
    let mut p = doc(RICH_POD);
    let meta = p["metadata"].as_object_mut().unwrap();
    meta.remove("deletionTimestamp");
    let spec = p["spec"].as_object_mut().unwrap();
    spec.remove("resources");
    spec.remove("preemptionPolicy");
    spec["containers"][0]["volumeMounts"][1]
        .as_object_mut()
        .unwrap()
        .remove("bindMountOptions");
    spec["ephemeralContainers"][0]["volumeMounts"][0]["bindMountOptions"] = json!(["ro"]);
    spec["initContainers"][1]
        .as_object_mut()
        .unwrap()
        .remove("restartPolicyRules");
    spec["containers"][0]["restartPolicyRules"][0]["action"] = json!("RestartAllContainers");
    let status = p["status"].as_object_mut().unwrap();
    status.remove("allocatedResources");
    status.remove("resources");
    status["phase"] = json!("Failed");
    status["conditions"][2]["reason"] = json!("Deferred");
    p
}

/// The rich pod with its bind mount options on an init container instead.
fn rich_pod_c() -> Value {
    let mut p = doc(RICH_POD);
    let spec = &mut p["spec"];
    let options = spec["containers"][0]["volumeMounts"][1]
        .as_object_mut()
        .unwrap()
        .remove("bindMountOptions")
        .unwrap();
    spec["initContainers"][0]["volumeMounts"][0]["bindMountOptions"] = options;
    p
}

/// The pods the equivalence tests decode.
fn test_pods() -> [(&'static str, Value); 4] {
    [
        ("served", doc(SERVED_POD)),
        ("rich", doc(RICH_POD)),
        ("rich b", rich_pod_b()),
        ("rich c", rich_pod_c()),
    ]
}

/// Everything the informer's consumers derive from a pod.
fn views(pod: &Pod) -> String {
    format!(
        "{:#?}\nterminal: {}\nscheduled: {:?}",
        PodInfo::from_pod(pod),
        is_terminal(pod),
        scheduled_condition(pod)
    )
}

/// Decodes `doc` fully and leanly; when the full decode succeeds the lean one must, with
/// the same views. Returns whether the full decode succeeded.
fn same_views(doc: &Value, what: &str) -> bool {
    same_views_of::<Pod>(doc, what, views)
}

fn same_views_of<K>(doc: &Value, what: &str, views: fn(&K) -> String) -> bool
where
    K: SpecAndStatus + serde::de::DeserializeOwned,
{
    let text = serde_json::to_vec(doc).unwrap();
    let Ok(full) = serde_json::from_slice::<K>(&text) else {
        // A malformed value the full decode rejects; the lean one may skip the field.
        return false;
    };
    match serde_json::from_slice::<Lean<K>>(&text) {
        Ok(Lean(lean)) => {
            let (lean, full) = (views(&lean), views(&full));
            let differ: Vec<_> = lean
                .lines()
                .zip(full.lines())
                .filter(|(l, f)| l != f)
                .collect();
            assert!(lean == full, "{what}: lean vs full views: {differ:?}");
        }
        Err(e) => panic!("{what}: the lean decode failed: {e}"),
    }
    true
}

/// JSON pointers of every value below the root.
fn pointers(v: &Value, at: &str, out: &mut Vec<String>) {
    let mut visit = |token: String, child: &Value| {
        let p = format!("{at}/{}", token.replace('~', "~0").replace('/', "~1"));
        out.push(p.clone());
        pointers(child, &p, out);
    };
    match v {
        Value::Object(m) => m.iter().for_each(|(k, c)| visit(k.clone(), c)),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, c)| visit(i.to_string(), c)),
        _ => {}
    }
}

fn remove_at(doc: &mut Value, pointer: &str) {
    let (parent, last) = pointer.rsplit_once('/').unwrap();
    let last = last.replace("~1", "/").replace("~0", "~");
    match doc.pointer_mut(parent).unwrap() {
        Value::Object(m) => {
            m.remove(&last);
        }
        Value::Array(a) => {
            a.remove(last.parse().unwrap());
        }
        _ => unreachable!("a pointer's parent holds it"),
    }
}

/// A different value of the same kind (a timestamp stays one).
fn changed(v: &Value) -> Option<Value> {
    Some(match v {
        Value::String(s) if s.starts_with("2026-") => json!(s.replacen("2026", "2025", 1)),
        Value::String(s) => json!(format!("{s}x")),
        Value::Bool(b) => json!(!b),
        Value::Number(n) => json!(n.as_i64()? + 1),
        _ => return None,
    })
}

/// The pod with each of its values, one at a time, removed or changed.
fn variants(base: &Value) -> Vec<(String, Value)> {
    let mut ptrs = Vec::new();
    pointers(base, "", &mut ptrs);
    let mut out = Vec::new();
    for p in ptrs {
        let mut removed = base.clone();
        remove_at(&mut removed, &p);
        out.push((format!("without {p}"), removed));
        if let Some(new) = changed(base.pointer(&p).unwrap()) {
            let mut edited = base.clone();
            *edited.pointer_mut(&p).unwrap() = new;
            out.push((format!("{p} changed"), edited));
        }
    }
    out
}

#[test]
fn lean_pods_give_the_views_full_pods_give() {
    for (name, base) in test_pods() {
        assert!(same_views(&base, name), "{name} must decode");
    }
}

/// The property the lean decode rests on: no consumer reads a skipped field. Each value of
/// the test pods is removed or changed in turn; a field a consumer reads but the lean
/// decode skipped would change the full views and not the lean ones.
#[test]
fn no_skipped_field_is_read() {
    for (name, base) in test_pods() {
        let variants = variants(&base);
        let decoded = variants
            .iter()
            .filter(|(what, d)| same_views(d, &format!("{name}: {what}")))
            .count();
        // Only changed timestamps-that-are-not and the like fail to decode.
        assert!(decoded * 10 >= variants.len() * 9, "{name}: {decoded}");
    }
}

/// Field paths present in `v` (`[]` for list items), nulls left out.
fn field_paths(v: &Value, at: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, c) in m.iter().filter(|(_, c)| !c.is_null()) {
                let p = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                out.insert(p.clone());
                field_paths(c, &p, out);
            }
        }
        Value::Array(a) => a
            .iter()
            .for_each(|c| field_paths(c, &format!("{at}[]"), out)),
        _ => {}
    }
}

/// `path` is `root` or lies below it.
fn under(path: &str, root: &str) -> bool {
    path.strip_prefix(root)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}

/// What the lean structs themselves hold of `doc` (before conversion to k8s-openapi types).
fn lean_parts(doc: &Value) -> Value {
    let meta: LeanMeta = serde_json::from_value(doc["metadata"].clone()).unwrap();
    let spec: Spec = serde_json::from_value(doc["spec"].clone()).unwrap();
    let status: Status = serde_json::from_value(doc["status"].clone()).unwrap();
    json!({"metadata": meta, "spec": spec, "status": status})
}

#[test]
fn the_lean_structs_keep_exactly_the_listed_fields() {
    let mut kept = BTreeSet::new();
    for (_, d) in test_pods() {
        field_paths(&lean_parts(&d), "", &mut kept);
    }
    // Every kept path is listed, sits under a listed path, or leads to one.
    for path in &kept {
        assert!(
            KEPT.iter().any(|k| under(path, k) || under(k, path)),
            "{path} is kept but not listed"
        );
    }
    for k in KEPT {
        assert!(
            kept.contains(*k),
            "{k} is listed but the lean decode drops it"
        );
    }
    // And the skipping is real: the served pod's heavy parts are gone.
    let mut all = BTreeSet::new();
    field_paths(&doc(RICH_POD), "", &mut all);
    for skipped in [
        "metadata.managedFields",
        "spec.containers[].env",
        "spec.containers[].livenessProbe",
        "spec.containers[].volumeMounts[].mountPath",
        "spec.volumes[].projected",
        "spec.securityContext",
        "status.containerStatuses[].state",
        "status.podIPs",
    ] {
        assert!(all.contains(skipped), "{skipped} is in the rich pod");
        assert!(!kept.contains(skipped), "{skipped} is skipped");
    }
}

/// A misspelt key in a test pod would be skipped by both decodes and prove nothing: every
/// key must be a field k8s-openapi knows (a full decode serializes it back).
#[test]
fn the_test_pods_name_only_real_fields() {
    for (name, d) in test_pods() {
        let full: Pod = serde_json::from_value(d.clone()).unwrap();
        let (mut given, mut known) = (BTreeSet::new(), BTreeSet::new());
        field_paths(&d, "", &mut given);
        field_paths(&serde_json::to_value(&full).unwrap(), "", &mut known);
        let unknown: Vec<_> = given.difference(&known).collect();
        assert!(unknown.is_empty(), "{name}: unknown fields {unknown:?}");
    }
}

#[test]
fn a_served_pod_keeps_no_projected_volume_and_no_mount() {
    let Lean(pod): Lean<Pod> = serde_json::from_str(SERVED_POD).unwrap();
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.volumes.as_deref().map(<[_]>::len), Some(0));
    let c = &spec.containers[0];
    assert_eq!(c.volume_mounts.as_deref().map(<[_]>::len), Some(0));
    assert_eq!(c.termination_message_path, None);
    assert_eq!(pod.metadata.managed_fields, None);
    assert_eq!(pod.status.as_ref().unwrap().qos_class, None);
}

/// Everything the informer's consumers derive from a node: the cache's view and the
/// update fingerprint.
fn node_views(node: &Node) -> String {
    let info = scheduler_core::types::NodeInfo::from_node(node);
    format!(
        "{}\n{:?}\n{:?}\n{}\n{:?}\n{:?}\n{:?}\n{:?}",
        info.name,
        info.labels,
        info.taints,
        info.unschedulable,
        info.allocatable,
        info.images,
        info.declared_features,
        NodeFingerprint::of(node),
    )
}

fn test_nodes() -> [(&'static str, Value); 3] {
    let small = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n-1", "uid": "n", "resourceVersion": "7",
            "labels": {"kubernetes.io/hostname": "n-1", "topology.kubernetes.io/zone": "a"},
            "managedFields": [{"manager": "kubelet", "operation": "Update",
                "apiVersion": "v1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:allocatable": {"f:cpu": {}}}}}]},
        "spec": {"unschedulable": true, "taints": [{"key": "gpu", "value": "true",
            "effect": "NoSchedule", "timeAdded": "2026-11-20T08:00:00Z"}]},
        "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
            "images": [{"names": ["nginx:1.27"], "sizeBytes": 70000000}],
            "declaredFeatures": ["GuaranteedQoSPodCPUResize"],
            "conditions": [{"type": "Ready", "status": "True"}]}
    });
    [
        ("small", small),
        ("served", doc(include_str!("testdata/served-node.json"))),
        ("kubelet", doc(include_str!("testdata/kubelet-node.json"))),
    ]
}

#[test]
fn lean_nodes_give_the_views_full_nodes_give() {
    for (name, base) in test_nodes() {
        assert!(same_views_of(&base, name, node_views), "{name} must decode");
    }
}

/// As for pods: each value of the test nodes removed or changed in turn changes the lean
/// views exactly as it changes the full ones.
#[test]
fn no_skipped_node_field_is_read() {
    for (name, base) in test_nodes() {
        let variants = variants(&base);
        let decoded = variants
            .iter()
            .filter(|(what, d)| same_views_of(d, &format!("{name}: {what}"), node_views))
            .count();
        assert!(decoded * 10 >= variants.len() * 9, "{name}: {decoded}");
    }
}

/// A kubelet's node is mostly what scheduling does not read: the lean one keeps none of it.
#[test]
fn a_lean_node_keeps_only_what_scheduling_reads() {
    let text = serde_json::to_vec(&doc(include_str!("testdata/kubelet-node.json"))).unwrap();
    let Lean(node): Lean<Node> = serde_json::from_slice(&text).unwrap();
    let status = node.status.expect("status");
    assert!(status.capacity.is_none() && status.node_info.is_none());
    assert!(status.addresses.is_none() && status.daemon_endpoints.is_none());
    assert!(status.allocatable.is_some() && status.images.is_some());
    let conditions = status.conditions.expect("conditions");
    assert!(!conditions.is_empty());
    assert!(
        conditions
            .iter()
            .all(|c| c.message.is_none() && c.reason.is_none())
    );
    assert_eq!(node.metadata.managed_fields, None);
}

#[test]
fn an_item_without_metadata_or_spec_decodes_to_defaults() {
    let Lean(pod): Lean<Pod> = serde_json::from_value(json!({"status": null})).unwrap();
    assert_eq!(pod, Pod::default());
    let Lean(pod): Lean<Pod> =
        serde_json::from_value(json!({"spec": {"containers": null, "volumes": null}})).unwrap();
    assert_eq!(pod.spec, Some(PodSpec::default()));
}

#[test]
fn a_malformed_field_is_still_an_error() {
    for (bad, expected) in [
        (json!({"metadata": {"labels": 3}}), "map"),
        (json!({"spec": {"containers": [{"image": 3}]}}), "string"),
        (json!({"spec": {"volumes": {"name": "v"}}}), "a list"),
        (json!({"status": {"conditions": [{"type": 1}]}}), "string"),
    ] {
        let err = serde_json::from_value::<Lean<Pod>>(bad.clone())
            .unwrap_err()
            .to_string();
        assert!(err.contains(expected), "{bad}: {err}");
    }
}

/// What the lean decode saves, for `valgrind --tool=callgrind` (instructions) and
/// `--tool=dhat` (allocations); it checks nothing. `LEAN_PROBE` picks what each of
/// `LEAN_PROBE_N` rounds (default 1,000) does with the served pod: decode it and build the
/// views in full (`pod-full`), without managedFields only (`pod-before`, the decode before
/// the pod mirrors) or leanly (`pod-lean`); `-decode` appended: decode only. `node-before-*`
/// / `node-lean-*`: a node event as the informer handled it before (lean decode,
/// fingerprint, a copy for the cache) and now (moved into the cache), for the bench node
/// (`served`) or a kubelet's node with images (`kubelet`). Empty: nothing, the baseline to
/// subtract. Run: `cargo test --release -p controller --lib decode_cost_probe -- --ignored`
/// under valgrind with the variables set.
#[test]
#[ignore = "a measurement probe, run under valgrind"]
fn decode_cost_probe() {
    use std::hint::black_box;
    let probe = std::env::var("LEAN_PROBE").unwrap_or_default();
    let rounds: usize = std::env::var("LEAN_PROBE_N").map_or(1000, |n| n.parse().unwrap());
    // Compact, as a server sends it; decoded from a `str` as kube decodes watch lines.
    let compact = |text: &str| serde_json::to_string(&doc(text)).unwrap();
    let pod = compact(SERVED_POD);
    let served_node = compact(include_str!("testdata/served-node.json"));
    let kubelet_node = compact(include_str!("testdata/kubelet-node.json"));
    let (probe, views) = match probe.strip_suffix("-decode") {
        Some(p) => (p, false),
        None => (probe.as_str(), true),
    };
    let pod_views = |p: Pod| {
        if views {
            black_box((
                PodInfo::from_pod(&p),
                is_terminal(&p),
                scheduled_condition(&p),
            ));
        }
        black_box(p);
    };
    for _ in 0..rounds {
        match probe.split('-').collect::<Vec<_>>()[..] {
            ["pod", "full"] => pod_views(serde_json::from_str::<Pod>(black_box(&pod)).unwrap()),
            ["pod", "before"] => {
                let p: Parts<PodSpec, PodStatus> = serde_json::from_str(black_box(&pod)).unwrap();
                pod_views(Pod {
                    metadata: p.metadata.unwrap_or_default().into(),
                    spec: p.spec,
                    status: p.status,
                });
            }
            ["pod", "lean"] => pod_views(
                serde_json::from_str::<Lean<Pod>>(black_box(&pod))
                    .unwrap()
                    .0,
            ),
            ["node", how, kind] => {
                let text = if kind == "kubelet" {
                    &kubelet_node
                } else {
                    &served_node
                };
                let Lean(n) = serde_json::from_str::<Lean<Node>>(black_box(text)).unwrap();
                let fp = NodeFingerprint::of(&n);
                let kept = if how == "before" { n.clone() } else { n };
                black_box((fp, std::sync::Arc::new(kept)));
            }
            [""] => {}
            _ => panic!("unknown LEAN_PROBE {probe:?}"),
        }
    }
}
