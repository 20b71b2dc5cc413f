//! Gangs in `simulate`: the cases a new user met with a dump of six 8-GPU nodes and
//! PodGroups (issue: workload-aware scheduling), each now placed all or nothing.

use super::*;

/// `n` free 8-GPU nodes, plus `busy` more whose GPUs a bound pod of priority 1000 holds
/// (more than any gang here, so no gang preempts it).
fn gpu_nodes(n: usize, busy: usize) -> String {
    let mut s = String::new();
    for i in 0..n + busy {
        s.push_str(&format!(
            "---\napiVersion: v1\nkind: Node\nmetadata: {{name: gpu-{i}, labels: {{topology.kubernetes.io/zone: z{}}}}}\nstatus:\n  allocatable: {{cpu: '64', memory: 512Gi, pods: '110', nvidia.com/gpu: '8'}}\n",
            i % 2
        ));
        if i >= n {
            s.push_str(&format!(
                "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: holder-{i}, namespace: ml}}\nspec:\n  nodeName: gpu-{i}\n  priority: 1000\n  containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: '8'}}}}}}]\n"
            ));
        }
    }
    s
}

fn gang(name: &str, min_count: u32) -> String {
    format!(
        "---\napiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {{name: {name}, namespace: ml}}\nspec:\n  schedulingPolicy: {{gang: {{minCount: {min_count}}}}}\n"
    )
}

fn member(name: &str, group: &str, priority: i32) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: ml}}\nspec:\n  priority: {priority}\n  schedulingGroup: {{podGroupName: {group}}}\n  containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: '8'}}}}}}]\n"
    )
}

pub(super) fn simulate(text: &str) -> Report {
    let objects = load_str(text, "gangs.yaml").unwrap();
    let loaded = crate::config::from_flags(None, None).unwrap();
    run(&objects, &loaded, 1).unwrap()
}

pub(super) fn message(r: &Report, pod: &str) -> String {
    match r.outcome_of(pod) {
        Some(PodResult::Unschedulable { message } | PodResult::Gated { message }) => {
            message.clone()
        }
        other => panic!("{pod}: {other:?}"),
    }
}

#[test]
fn a_gang_larger_than_the_free_nodes_binds_none_and_a_smaller_one_fits() {
    // Six nodes, four of them busy: two free. A gang of three (priority 100) cannot fit;
    // a lower-priority gang of two can, and is bound.
    let mut text = gpu_nodes(2, 4);
    text.push_str(&gang("big", 3));
    text.push_str(&gang("small", 2));
    for i in 0..3 {
        text.push_str(&member(&format!("big-{i}"), "big", 100));
    }
    for i in 0..2 {
        text.push_str(&member(&format!("small-{i}"), "small", 10));
    }
    let r = simulate(&text);
    for i in 0..3 {
        let pod = format!("ml/big-{i}");
        assert_eq!(r.node_of(&pod), None, "{pod} must not be bound alone");
    }
    let mut small: Vec<&str> = (0..2)
        .map(|i| {
            r.node_of(&format!("ml/small-{i}"))
                .expect("the small gang fits")
        })
        .collect();
    small.sort();
    assert_eq!(small, ["gpu-0", "gpu-1"]);
    // Pods that would have fitted name the gang's reason; the third keeps its own.
    let messages: Vec<String> = (0..3)
        .map(|i| message(&r, &format!("ml/big-{i}")))
        .collect();
    assert_eq!(
        messages
            .iter()
            .filter(|m| m.as_str()
                == "pod group \"big\": minCount (3) cannot be satisfied: 2 scheduled, 0 remaining")
            .count(),
        2,
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("0/6 nodes are available:")),
        "{messages:?}"
    );
}

#[test]
fn missing_groups_and_short_gangs_wait_with_upstreams_messages() {
    let mut text = gpu_nodes(6, 0);
    text.push_str(&member("orphan", "nowhere", 0));
    text.push_str(&gang("short", 3));
    text.push_str(&member("short-0", "short", 0));
    text.push_str(&member("short-1", "short", 0));
    let r = simulate(&text);
    assert_eq!(
        r.outcome_of("ml/orphan"),
        Some(&PodResult::Gated {
            message: "waiting for pod's pod group \"nowhere\" to appear in scheduling queue".into()
        })
    );
    for p in ["ml/short-0", "ml/short-1"] {
        assert_eq!(
            r.outcome_of(p),
            Some(&PodResult::Gated {
                message: "waiting for minCount pods from a gang to appear in scheduling queue"
                    .into()
            })
        );
    }
    assert_eq!(r.scheduled(), 0);
}

#[test]
fn coscheduling_groups_are_gangs_too() {
    let mut text = gpu_nodes(6, 0);
    text.push_str(
        "---\napiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: tf, namespace: ml}\nspec: {minMember: 3}\n",
    );
    for i in 0..2 {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: tf-{i}, namespace: ml, labels: {{scheduling.x-k8s.io/pod-group: tf}}}}\nspec:\n  containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: '8'}}}}}}]\n"
        ));
    }
    let r = simulate(&text);
    assert_eq!(
        message(&r, "ml/tf-0"),
        "pre-filter pod tf-0 cannot find enough sibling pods, current pods number: 2, minMember of group: 3"
    );
    assert_eq!(r.scheduled(), 0);

    // The third worker completes the quorum: all three are placed.
    text.push_str(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: tf-2, namespace: ml, labels: {scheduling.x-k8s.io/pod-group: tf}}\nspec:\n  containers: [{name: c, resources: {requests: {nvidia.com/gpu: '8'}}}]\n",
    );
    let r = simulate(&text);
    assert_eq!(r.scheduled(), 3);
}

#[test]
fn a_running_member_counts_toward_the_quorum() {
    // minCount 3: one worker already runs, two more fit in the two free nodes.
    let mut text = gpu_nodes(2, 0);
    text.push_str(&gang("resume", 3));
    text.push_str(
        "---\napiVersion: v1\nkind: Node\nmetadata: {name: gpu-run}\nstatus:\n  allocatable: {cpu: '64', memory: 512Gi, pods: '110', nvidia.com/gpu: '8'}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: resume-0, namespace: ml}\nspec:\n  nodeName: gpu-run\n  schedulingGroup: {podGroupName: resume}\n  containers: [{name: c, resources: {requests: {nvidia.com/gpu: '8'}}}]\n",
    );
    text.push_str(&member("resume-1", "resume", 0));
    text.push_str(&member("resume-2", "resume", 0));
    let r = simulate(&text);
    assert!(r.node_of("ml/resume-1").is_some());
    assert!(r.node_of("ml/resume-2").is_some());
}

#[test]
fn pod_groups_of_an_unknown_version_are_refused_by_name() {
    let text = "apiVersion: scheduling.k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g, namespace: ml}\nspec: {}\n";
    let errors = load_str(text, "g.yaml").unwrap_err();
    assert!(
        errors[0].message.starts_with(
            "PodGroup ml/g: apiVersion \"scheduling.k8s.io/v1alpha1\" is not supported; use scheduling.k8s.io/v1beta1 or"
        ),
        "{:?}",
        errors
    );
    let bad = "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: g, namespace: ml}\nspec: {schedulingPolicy: {gang: {minCount: 0}}}\n";
    let errors = load_str(bad, "g.yaml").unwrap_err();
    assert!(
        errors[0].message.contains("minCount: Invalid value: 0"),
        "{errors:?}"
    );
}

#[test]
fn a_topology_constrained_gang_is_not_split_across_zones() {
    // Six nodes over two zones (three each); two of zone z0 are busy. A gang of three with
    // a zone constraint fits only in z1, although z0 and z1 together have room to split it.
    let mut text = gpu_nodes(6, 0);
    text.push_str(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: busy-0, namespace: ml}\nspec:\n  nodeName: gpu-0\n  containers: [{name: c, resources: {requests: {nvidia.com/gpu: '8'}}}]\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: busy-2, namespace: ml}\nspec:\n  nodeName: gpu-2\n  containers: [{name: c, resources: {requests: {nvidia.com/gpu: '8'}}}]\n",
    );
    text.push_str(
        "---\napiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: zonal, namespace: ml}\nspec:\n  schedulingPolicy: {gang: {minCount: 3}}\n  schedulingConstraints: {topology: [{key: topology.kubernetes.io/zone}]}\n",
    );
    for i in 0..3 {
        text.push_str(&member(&format!("zonal-{i}"), "zonal", 0));
    }
    let r = simulate(&text);
    let nodes: Vec<&str> = (0..3)
        .map(|i| r.node_of(&format!("ml/zonal-{i}")).expect("placed"))
        .collect();
    // Odd-numbered nodes are zone z1.
    for n in &nodes {
        let i: usize = n.trim_start_matches("gpu-").parse().unwrap();
        assert_eq!(i % 2, 1, "{nodes:?} split across zones");
    }
}

/// Found by the fuzz harness: zones whose nodes have huge allocatable cpu and memory
/// (quantities up to 8Ei) overflowed the domain's placement score. The gang is still placed
/// in one zone.
#[test]
fn a_topology_constrained_gang_scores_zones_of_huge_nodes() {
    let mut text = String::new();
    for (i, zone, cpu) in [
        (0, "z0", "8Ei"),
        (1, "z0", "999999999999Ei"),
        (2, "z1", "64"),
    ] {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: Node\nmetadata: {{name: n{i}, labels: {{topology.kubernetes.io/zone: {zone}}}}}\nstatus:\n  allocatable: {{cpu: '{cpu}', memory: 8Ei, pods: '110'}}\n"
        ));
    }
    text.push_str(
        "---\napiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: zonal, namespace: ml}\nspec:\n  schedulingPolicy: {gang: {minCount: 2}}\n  schedulingConstraints: {topology: [{key: topology.kubernetes.io/zone}]}\n",
    );
    for i in 0..2 {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: zonal-{i}, namespace: ml}}\nspec:\n  schedulingGroup: {{podGroupName: zonal}}\n  containers: [{{name: c, resources: {{requests: {{cpu: '1'}}}}}}]\n"
        ));
    }
    let r = simulate(&text);
    let zone = |n: &str| if n == "n2" { "z1" } else { "z0" };
    let a = r.node_of("ml/zonal-0").expect("placed");
    let b = r.node_of("ml/zonal-1").expect("placed");
    assert_eq!(zone(a), zone(b), "{a} and {b} split across zones");
}

#[test]
fn scheduler_plugins_config_runs_coscheduling_groups_all_or_nothing() {
    let loaded = crate::config::load_str(
        include_str!("../../../../config/coscheduling.yaml"),
        "coscheduling.yaml",
    )
    .unwrap();
    let dump = |nodes: usize| {
        let mut text = gpu_nodes(nodes, 0);
        text.push_str(
            "---\napiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: tf, namespace: ml}\nspec: {minMember: 3}\n",
        );
        for i in 0..3 {
            text.push_str(&format!(
                "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: tf-{i}, namespace: ml, labels: {{scheduling.x-k8s.io/pod-group: tf}}}}\nspec:\n  schedulerName: scheduler-plugins-scheduler\n  containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: '8'}}}}}}]\n"
            ));
        }
        load_str(&text, "tf.yaml").unwrap()
    };
    // Two nodes for three workers: none bound.
    let r = run(&dump(2), &loaded, 1).unwrap();
    assert_eq!(r.scheduled(), 0);
    assert!(
        (0..3).all(|i| matches!(
            r.outcome_of(&format!("ml/tf-{i}")),
            Some(PodResult::Unschedulable { .. })
        )),
        "{:?}",
        r.outcomes
    );
    // Three nodes: all three.
    let r = run(&dump(3), &loaded, 1).unwrap();
    assert_eq!(r.scheduled(), 3, "{:?}", r.outcomes);
}

/// Four 8-GPU nodes held by a low-priority batch gang (one pod per node); a high-priority
/// gang of `size` arrives.
fn preemption_dump(batch_mode: &str, size: usize) -> String {
    let mut text = batch_dump(batch_mode);
    text.push_str(&format!(
        "---\napiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {{name: train, namespace: ml}}\nspec:\n  priority: 100\n  schedulingPolicy: {{gang: {{minCount: {size}}}}}\n"
    ));
    for i in 0..size {
        text.push_str(&member(&format!("train-{i}"), "train", 100));
    }
    text
}

/// Four 8-GPU nodes, each held by a pod of the low-priority `batch` group.
fn batch_dump(batch_mode: &str) -> String {
    let mut text = gpu_nodes(4, 0);
    text.push_str(&format!(
        "---\napiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {{name: batch, namespace: ml}}\nspec:\n  priority: 10\n  disruptionMode: {{{batch_mode}: {{}}}}\n  schedulingPolicy: {{gang: {{minCount: 1}}}}\n"
    ));
    for i in 0..4 {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: batch-{i}, namespace: ml}}\nspec:\n  nodeName: gpu-{i}\n  priority: 10\n  schedulingGroup: {{podGroupName: batch}}\n  containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: '8'}}}}}}]\n"
        ));
    }
    text
}

pub(super) fn preempted(r: &Report) -> Vec<String> {
    let mut v: Vec<String> = r
        .outcomes
        .iter()
        .filter_map(|o| match &o.result {
            PodResult::Scheduled { preempted, .. } => Some(preempted.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    v.sort();
    v
}

#[test]
fn a_gang_preempts_a_whole_victim_group_in_all_mode() {
    let r = simulate(&preemption_dump("all", 2));
    for i in 0..2 {
        assert!(
            r.node_of(&format!("ml/train-{i}")).is_some(),
            "{:?}",
            r.outcomes
        );
    }
    // The batch group goes as a unit: all four, though two nodes would have done.
    assert_eq!(
        preempted(&r),
        ["ml/batch-0", "ml/batch-1", "ml/batch-2", "ml/batch-3"]
    );
}

#[test]
fn in_single_mode_only_the_pods_in_the_way_go() {
    let r = simulate(&preemption_dump("single", 2));
    for i in 0..2 {
        assert!(
            r.node_of(&format!("ml/train-{i}")).is_some(),
            "{:?}",
            r.outcomes
        );
    }
    assert_eq!(preempted(&r).len(), 2, "{:?}", preempted(&r));
}

#[test]
fn a_gang_spares_the_pods_a_disruption_budget_protects() {
    // Without a budget batch-2 and batch-3 (least important by name) go; a budget that
    // allows no disruption of them makes the gang take batch-0 and batch-1 instead.
    let mut text = preemption_dump("single", 2);
    for i in [2, 3] {
        text = text.replace(
            &format!("name: batch-{i}, namespace: ml}}"),
            &format!("name: batch-{i}, namespace: ml, labels: {{tier: keep}}}}"),
        );
    }
    assert_eq!(preempted(&simulate(&text)), ["ml/batch-2", "ml/batch-3"]);
    text.push_str(
        "---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: keep, namespace: ml}\nspec: {selector: {matchLabels: {tier: keep}}, maxUnavailable: 0}\nstatus: {disruptionsAllowed: 0}\n",
    );
    let r = simulate(&text);
    assert_eq!(
        preempted(&r),
        ["ml/batch-0", "ml/batch-1"],
        "{:?}",
        r.outcomes
    );
}

/// [`preemption_dump`]'s batch group, and one high-priority pod (no group) that needs a
/// whole node.
fn single_preemptor_dump(batch_mode: &str) -> String {
    let mut text = batch_dump(batch_mode);
    text.push_str(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: urgent, namespace: ml}\nspec:\n  priority: 100\n  containers: [{name: c, resources: {requests: {nvidia.com/gpu: '8'}}}]\n",
    );
    text
}

#[test]
fn a_single_pod_evicting_one_member_of_an_all_mode_group_evicts_the_group() {
    // Upstream's workload-aware preemption for a pod without a group: the victim's group is
    // in disruptionMode all, so its other three pods go too, on their own nodes.
    let r = simulate(&single_preemptor_dump("all"));
    assert!(r.node_of("ml/urgent").is_some(), "{:?}", r.outcomes);
    assert_eq!(
        preempted(&r),
        ["ml/batch-0", "ml/batch-1", "ml/batch-2", "ml/batch-3"]
    );
    // In single mode only the pod in the way goes.
    let r = simulate(&single_preemptor_dump("single"));
    assert!(r.node_of("ml/urgent").is_some(), "{:?}", r.outcomes);
    assert_eq!(preempted(&r).len(), 1, "{:?}", preempted(&r));
}

#[test]
fn a_group_unit_is_not_a_victim_when_its_priority_is_not_lower() {
    // The batch PodGroup's spec.priority (100) is what counts, not its pods' (10): the
    // preemptor (100) cannot evict the group, even one of its pods.
    let text = single_preemptor_dump("all").replace(
        "metadata: {name: batch, namespace: ml}\nspec:\n  priority: 10\n",
        "metadata: {name: batch, namespace: ml}\nspec:\n  priority: 100\n",
    );
    let r = simulate(&text);
    assert!(r.node_of("ml/urgent").is_none(), "{:?}", r.outcomes);
    assert!(preempted(&r).is_empty(), "{:?}", preempted(&r));
}

#[test]
fn a_gang_preemption_cannot_help_evicts_nothing() {
    // Five pods, four nodes: evicting everything still leaves the gang short.
    let r = simulate(&preemption_dump("single", 5));
    assert_eq!(r.scheduled(), 0);
    assert!(preempted(&r).is_empty());
    assert!(
        message(&r, "ml/train-1").contains("minCount (5) cannot be satisfied"),
        "{:?}",
        r.outcomes
    );
}

/// Four plain nodes; a node-local NIC driver publishes `devices` NICs on `nic-2` only.
fn nic_cluster(devices: usize) -> String {
    let mut s = String::new();
    for i in 0..4 {
        s.push_str(&format!(
            "---\napiVersion: v1\nkind: Node\nmetadata: {{name: nic-{i}}}\nstatus:\n  allocatable: {{cpu: '64', memory: 512Gi, pods: '110'}}\n"
        ));
    }
    s.push_str(
        "---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: nic.example.com}\nspec:\n  selectors:\n  - cel: {expression: 'device.driver == \"nic.example.com\"'}\n",
    );
    let devices: Vec<String> = (0..devices).map(|d| format!("{{name: nic-{d}}}")).collect();
    s.push_str(&format!(
        "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: nic-2-nic}}\nspec:\n  driver: nic.example.com\n  nodeName: nic-2\n  pool: {{name: nic-2, generation: 1, resourceSliceCount: 1}}\n  devices: [{}]\n",
        devices.join(", ")
    ));
    s
}

/// A gang of `members` whose PodGroup has the claim entry `fabric` (`source` is
/// `resourceClaimName: X` or `resourceClaimTemplateName: X`), each member's entry the same.
fn fabric_gang(members: usize, source: &str) -> String {
    let mut s = format!(
        "---\napiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {{name: train, namespace: ml, uid: pg-train}}\nspec:\n  schedulingPolicy: {{gang: {{minCount: {members}}}}}\n  resourceClaims: [{{name: fabric, {source}}}]\n"
    );
    for i in 0..members {
        s.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: train-{i}, namespace: ml}}\nspec:\n  schedulingGroup: {{podGroupName: train}}\n  resourceClaims: [{{name: fabric, {source}}}]\n  containers: [{{name: c, resources: {{requests: {{cpu: '1'}}}}}}]\n"
        ));
    }
    s
}

fn fabric_claim(count: u32) -> String {
    format!(
        "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {{name: fabric, namespace: ml}}\nspec:\n  devices:\n    requests:\n    - name: nic\n      exactly: {{deviceClassName: nic.example.com, allocationMode: ExactCount, count: {count}}}\n"
    )
}

/// (device, shared) of each member's devices.
fn devices_of(r: &Report, pod: &str) -> Vec<(String, String, bool)> {
    r.outcomes
        .iter()
        .find(|o| o.pod == pod)
        .unwrap()
        .devices
        .iter()
        .map(|d| (d.claim.clone(), d.device.clone(), d.shared))
        .collect()
}

/// The group's claim is allocated once, for the whole gang: the first member allocates
/// the only NIC, the second reuses that allocation, and both land on the node the NIC is
/// attached to.
#[test]
fn a_gang_sharing_its_group_claim_gets_one_allocation_on_the_device_node() {
    let mut text = nic_cluster(1);
    text.push_str(&fabric_claim(1));
    text.push_str(&fabric_gang(2, "resourceClaimName: fabric"));
    let r = simulate(&text);
    assert_eq!(r.node_of("ml/train-0"), Some("nic-2"));
    assert_eq!(r.node_of("ml/train-1"), Some("nic-2"));
    let first = devices_of(&r, "ml/train-0");
    let second = devices_of(&r, "ml/train-1");
    assert_eq!(first, [("ml/fabric".into(), "nic-0".into(), false)]);
    assert_eq!(
        second,
        [("ml/fabric".into(), "nic-0".into(), true)],
        "the same device, reused"
    );
}

/// A plain claim the members share (their own `resourceClaimName`, not the PodGroup's): the
/// first member's allocation, assumed in the gang's cycle, is what the second one sees, so
/// both land with the one NIC and it is allocated once.
#[test]
fn gang_members_sharing_a_plain_claim_see_each_others_allocation() {
    let mut text = nic_cluster(1);
    text.push_str(&fabric_claim(1));
    let gang = fabric_gang(2, "resourceClaimName: fabric").replace(
        "  resourceClaims: [{name: fabric, resourceClaimName: fabric}]\n---",
        "---",
    );
    let group = gang
        .split("---")
        .find(|d| d.contains("kind: PodGroup"))
        .unwrap();
    assert!(!group.contains("resourceClaims"), "{group}");
    text.push_str(&gang);
    let r = simulate(&text);
    assert_eq!(r.node_of("ml/train-0"), Some("nic-2"), "{:?}", r.outcomes);
    assert_eq!(r.node_of("ml/train-1"), Some("nic-2"), "{:?}", r.outcomes);
    let devices: Vec<_> = (0..2)
        .flat_map(|i| devices_of(&r, &format!("ml/train-{i}")))
        .collect();
    assert_eq!(
        devices.iter().filter(|d| !d.2).count(),
        1,
        "one allocation: {devices:?}"
    );
}

/// The group's template claim is made once, for the group (as kube-controller-manager
/// does), owned by it, and shared the same way.
#[test]
fn a_group_template_claim_is_made_for_the_group_and_shared() {
    let mut text = nic_cluster(2);
    text.push_str(
        "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: one-nic, namespace: ml}\nspec:\n  spec:\n    devices:\n      requests:\n      - name: nic\n        exactly: {deviceClassName: nic.example.com}\n",
    );
    text.push_str(&fabric_gang(3, "resourceClaimTemplateName: one-nic"));
    let r = simulate(&text);
    for i in 0..3 {
        let pod = format!("ml/train-{i}");
        assert_eq!(r.node_of(&pod), Some("nic-2"), "{pod}");
        let d = devices_of(&r, &pod);
        assert_eq!(d.len(), 1, "{pod}: {d:?}");
        assert_eq!(
            d[0].0, "ml/train-fabric-sim",
            "the group's claim, not the pod's"
        );
    }
    let allocated: Vec<_> = (0..3)
        .flat_map(|i| devices_of(&r, &format!("ml/train-{i}")))
        .filter(|d| !d.2)
        .collect();
    assert_eq!(allocated.len(), 1, "one allocation: {allocated:?}");

    // Without the template, kube-controller-manager makes no claim: the gang waits, saying so.
    let text = text.replace("name: one-nic, namespace: ml", "name: other, namespace: ml");
    let r = simulate(&text);
    assert_eq!(r.scheduled(), 0);
    let m = message(&r, "ml/train-0");
    assert!(
        m.contains("PodGroup ml/train: ResourceClaim not created yet"),
        "{m}"
    );
}

/// A group claim that cannot be allocated anywhere places nobody, with the DRA reason.
#[test]
fn a_gang_whose_group_claim_cannot_be_allocated_places_nobody() {
    let mut text = nic_cluster(1);
    text.push_str(&fabric_claim(2));
    text.push_str(&fabric_gang(2, "resourceClaimName: fabric"));
    let r = simulate(&text);
    assert_eq!(r.scheduled(), 0);
    let messages: Vec<String> = (0..2)
        .map(|i| message(&r, &format!("ml/train-{i}")))
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("0/4 nodes are available: 4 cannot allocate all claims.")),
        "{messages:?}"
    );
}

/// A hundred 8-GPU nodes, each running five single low-priority pods of one GPU (their
/// names interleave the nodes); a gang of ten 8-GPU pods needs ten empty nodes. Upstream
/// reprieves every pod it can, so exactly the fifty pods of ten nodes go, though most of
/// the five hundred candidates rank above them.
#[test]
fn a_gang_evicts_only_the_pods_of_the_nodes_it_needs() {
    let mut text = gpu_nodes(100, 0);
    for j in 0..500 {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: low-{j}, namespace: ml}}\nspec:\n  nodeName: gpu-{}\n  priority: 1\n  containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: '1'}}}}}}]\n",
            j % 100
        ));
    }
    text.push_str(&gang("train", 10));
    for i in 0..10 {
        text.push_str(&member(&format!("train-{i}"), "train", 100));
    }
    let r = simulate(&text);
    let victims = preempted(&r);
    assert_eq!(victims.len(), 50, "{victims:?}");
    // The victims empty exactly the nodes the gang lands on.
    let mut emptied: Vec<String> = victims
        .iter()
        .map(|v| {
            let j: usize = v.trim_start_matches("ml/low-").parse().unwrap();
            format!("gpu-{}", j % 100)
        })
        .collect();
    emptied.sort();
    emptied.dedup();
    let mut used: Vec<String> = (0..10)
        .map(|i| {
            r.node_of(&format!("ml/train-{i}"))
                .expect("placed")
                .to_string()
        })
        .collect();
    used.sort();
    assert_eq!(emptied, used);
}
