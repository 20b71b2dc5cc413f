//! The workload-scheduling workloads, after upstream scheduler_perf's `podgroup/` test cases
//! (`podgroup/gangscheduling`, `podgroup/basicscheduling`, `podgroup/tas`) and its
//! `workload_preemption/` case `GangPreemptionPodGroups`: every pod names a PodGroup
//! (`spec.schedulingGroup.podGroupName`), and the [`Runner`] schedules a gang's pods in one
//! pod group cycle, as the controller and `simulate` do, preempting for a gang that does not
//! fit.

use serde_json::json;

use super::*;
use crate::types::pod_group::{GroupApi, PodGroupInfo};

/// Gangs (`schedulingPolicy.gang.minCount` = the group's size): each placed all or nothing.
pub const GANG_SCHEDULING: &str = "GangScheduling";
/// Groups with `schedulingPolicy.basic`: their pods are scheduled one by one.
pub const BASIC_SCHEDULING: &str = "BasicScheduling";
/// Gangs constrained to one rack (`schedulingConstraints.topology`), on racks of
/// [`NODES_PER_RACK`] nodes.
pub const TOPOLOGY_AWARE_SCHEDULING: &str = "TopologyAwareScheduling";

/// High-priority gangs that must preempt whole low-priority gangs
/// (`workload_preemption/`'s `GangPreemptionPodGroups`): see [`build_group`].
pub const GANG_PREEMPTION_POD_GROUPS: &str = "GangPreemptionPodGroups";

/// The workloads whose pods name PodGroups.
pub const GROUP_WORKLOADS: &[&str] = &[
    GANG_SCHEDULING,
    BASIC_SCHEDULING,
    TOPOLOGY_AWARE_SCHEDULING,
    GANG_PREEMPTION_POD_GROUPS,
];

/// `GangPreemptionPodGroups`: low-priority pods per node before the measured gangs come
/// (upstream's cases: 500 on 100 nodes), 600m each, so 3000m of each node's 4 CPUs is taken.
pub const LOW_PRIORITY_PODS_PER_NODE: usize = 5;
/// `GangPreemptionPodGroups`: the PodGroups' `spec.priority`, low and high (upstream's).
pub const LOW_GROUP_PRIORITY: i32 = 1000;
pub const HIGH_GROUP_PRIORITY: i32 = 9_999_999;
/// `GangPreemptionPodGroups`: CPU per pod, low and high (upstream's): a high-priority pod
/// (3500m) fits only on a node with no low-priority pod left.
pub const LOW_GROUP_CPU: &str = "600m";
pub const HIGH_GROUP_CPU: &str = "3500m";
/// `GangPreemptionPodGroups`: the host port of the first group; each group has its own, so
/// no two pods of a group share a node (upstream: 8000 + group for low, 9000 + group for
/// high; here the high groups' ports follow the low groups', so they never collide).
pub const FIRST_GROUP_HOST_PORT: usize = 10000;

/// The rack label of `podgroup/tas`'s nodes, its groups' topology key.
pub const RACK_LABEL: &str = "topology.kubernetes.io/rack";
/// Nodes per rack (and per zone) in `podgroup/tas/templates/node.yaml`.
pub const NODES_PER_RACK: usize = 100;

/// A workload's default `podsPerGroup`: upstream's in its 5,000-node cases of small groups
/// (`5000Nodes_1000Gangs_3000Pods`; `5000Nodes_750Gangs_3000Pods` for topology).
/// For `GangPreemptionPodGroups`: 10, as its `100Nodes_10PreemptorGangs_10Pods_…` case.
pub fn default_pods_per_group(name: &str) -> usize {
    match name {
        TOPOLOGY_AWARE_SCHEDULING => 4,
        GANG_PREEMPTION_POD_GROUPS => 10,
        _ => 3,
    }
}

/// Whether a group workload makes sense at these sizes; the error says why not.
/// `GangPreemptionPodGroups` needs a node per measured pod (each takes 3500m of a node's 4
/// CPUs) and at most `nodes` pods per group (a group's pods each need a node of their own),
/// and one host port per group.
pub fn check_group_sizes(
    name: &str,
    nodes: usize,
    measured: usize,
    pods_per_group: Option<usize>,
) -> Result<(), String> {
    if name != GANG_PREEMPTION_POD_GROUPS {
        return Ok(());
    }
    let size = pods_per_group.unwrap_or_else(|| default_pods_per_group(name));
    let groups =
        (LOW_PRIORITY_PODS_PER_NODE * nodes).div_ceil(size.max(1)) + measured.div_ceil(size.max(1));
    if measured > nodes {
        Err(format!(
            "{name} places one measured pod per node: {measured} measured pods need at least {measured} nodes, not {nodes}"
        ))
    } else if size > nodes {
        Err(format!(
            "{name} places a group's pods on different nodes: {size} pods per group need at least {size} nodes, not {nodes}"
        ))
    } else if FIRST_GROUP_HOST_PORT + groups > 65535 {
        Err(format!(
            "{name} gives each group a host port: {groups} groups are too many; use more pods per group"
        ))
    } else {
        Ok(())
    }
}

/// `podgroup/tas`'s node: scheduler_perf's default node in zone and rack `i / 100`.
pub fn rack_node(i: usize) -> core::Node {
    let mut n = node(i);
    let labels = n.metadata.labels.get_or_insert_with(Default::default);
    let domain = i / NODES_PER_RACK;
    labels.insert(
        "topology.kubernetes.io/zone".to_string(),
        format!("zone-{domain}"),
    );
    labels.insert(RACK_LABEL.to_string(), format!("rack-{domain}"));
    n
}

/// Upstream's `gang-pod.yaml` and `basic-pod.yaml`: one container requesting 100m CPU and
/// 100Mi, naming its group.
pub fn group_pod(namespace: &str, group: &str) -> core::Pod {
    with_spec(pod(namespace, "x", &[]), |s| {
        s.scheduling_group = Some(core::PodSchedulingGroup {
            pod_group_name: Some(group.to_string()),
        });
        s.containers[0].resources = Some(core::ResourceRequirements {
            requests: Some(quantities(&[("cpu", "100m"), ("memory", "100Mi")])),
            ..Default::default()
        });
    })
}

/// A `scheduling.k8s.io/v1beta1` PodGroup as upstream's templates write it, read into its
/// view by the informers' parser: a gang of `min_count` (or a basic group when `None`),
/// constrained to one domain of `topology_key` when given.
pub fn pod_group(
    namespace: &str,
    name: &str,
    min_count: Option<usize>,
    topology_key: Option<&str>,
) -> PodGroupInfo {
    group_view(namespace, name, min_count, topology_key, None)
}

fn group_view(
    namespace: &str,
    name: &str,
    min_count: Option<usize>,
    topology_key: Option<&str>,
    priority: Option<i32>,
) -> PodGroupInfo {
    let policy = match min_count {
        Some(n) => json!({ "gang": { "minCount": n } }),
        None => json!({ "basic": {} }),
    };
    let mut spec = json!({ "schedulingPolicy": policy });
    if let Some(key) = topology_key {
        spec["schedulingConstraints"] = json!({ "topology": [{ "key": key }] });
    }
    if let Some(p) = priority {
        spec["priority"] = json!(p);
    }
    let object = json!({
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": { "name": name, "namespace": namespace },
        "spec": spec,
    });
    PodGroupInfo::from_json(GroupApi::Workload, &object).expect("a valid PodGroup")
}

/// `workload_preemption/templates/gang-pod.yaml`: a group's pod requesting `cpu` and 100Mi,
/// with the group's host port. (Its priority is its PodGroup's.)
pub fn preemption_pod(namespace: &str, group: &str, cpu: &str, host_port: usize) -> core::Pod {
    let mut p = group_pod(namespace, group);
    let c = &mut p.spec.as_mut().expect("group_pod sets a spec").containers[0];
    c.resources = Some(core::ResourceRequirements {
        requests: Some(quantities(&[("cpu", cpu), ("memory", "100Mi")])),
        ..Default::default()
    });
    c.ports = Some(vec![core::ContainerPort {
        container_port: 80,
        host_port: Some(i32::try_from(host_port).unwrap_or(i32::MAX)),
        ..Default::default()
    }]);
    p
}

/// `GangPreemptionPodGroups`: [`LOW_PRIORITY_PODS_PER_NODE`] low-priority pods per node in
/// gangs of `size` (the init pods), then `measured` high-priority pods in gangs of `size`,
/// each of which fits only where every low-priority pod was preempted.
fn gang_preemption(nodes: usize, measured: usize, size: usize) -> Workload {
    let ns = "bench";
    let size = size.max(1);
    let mut groups = Vec::new();
    let mut port = FIRST_GROUP_HOST_PORT;
    let mut gangs = |prefix: &str, n: usize, priority: i32, cpu: &str| {
        let first_port = port;
        for g in 0..n.div_ceil(size) {
            let members = size.min(n - g * size);
            let name = format!("{prefix}-{g}");
            groups.push(group_view(ns, &name, Some(members), None, Some(priority)));
            port += 1;
        }
        pods(n, &format!("{prefix}-pod"), |i| {
            let g = i / size;
            preemption_pod(ns, &format!("{prefix}-{g}"), cpu, first_port + g)
        })
    };
    let low = gangs(
        "low-group",
        LOW_PRIORITY_PODS_PER_NODE * nodes,
        LOW_GROUP_PRIORITY,
        LOW_GROUP_CPU,
    );
    let high = gangs("high-group", measured, HIGH_GROUP_PRIORITY, HIGH_GROUP_CPU);
    Workload {
        name: GANG_PREEMPTION_POD_GROUPS.to_string(),
        nodes: (0..nodes).map(node).collect(),
        init_pods: low,
        measured_pods: high,
        config: config::from_flags(None, None).expect("default config is valid"),
        dra: DraWorkload::default(),
        pod_groups: groups,
        pods_per_group: Some(size),
    }
}

/// `n` pods in groups of `size` (`{prefix}-{g}`, pods in group order, as upstream's
/// `DivideInt .Index .podsPerGroup`); the last group takes what is left, its quorum too.
fn grouped(
    name: &str,
    namespace: &str,
    prefix: &str,
    n: usize,
    size: usize,
) -> (Vec<core::Pod>, Vec<PodGroupInfo>) {
    let size = size.max(1);
    let (gang, topology) = match name {
        GANG_SCHEDULING => (true, None),
        TOPOLOGY_AWARE_SCHEDULING => (true, Some(RACK_LABEL)),
        _ => (false, None),
    };
    let groups = (0..n.div_ceil(size))
        .map(|g| {
            let members = size.min(n - g * size);
            let min_count = gang.then_some(members);
            pod_group(namespace, &format!("{prefix}-{g}"), min_count, topology)
        })
        .collect();
    let pods = pods(n, &format!("{prefix}-pod"), |i| {
        group_pod(namespace, &format!("{prefix}-{}", i / size))
    });
    (pods, groups)
}

/// Builds a workload of [`GROUP_WORKLOADS`] with `nodes` nodes and `init` and `measured` pods
/// in groups of `pods_per_group` (default: [`default_pods_per_group`]); init and measured
/// pods are in different groups. `GangPreemptionPodGroups` ignores `init`: its init pods are
/// [`LOW_PRIORITY_PODS_PER_NODE`] per node (see [`check_group_sizes`] for the sizes it needs).
pub fn build_group(
    name: &str,
    nodes: usize,
    init: usize,
    measured: usize,
    pods_per_group: Option<usize>,
) -> Option<Workload> {
    if !GROUP_WORKLOADS.contains(&name) {
        return None;
    }
    let ns = "bench";
    let size = pods_per_group.unwrap_or_else(|| default_pods_per_group(name));
    if name == GANG_PREEMPTION_POD_GROUPS {
        return Some(gang_preemption(nodes, measured, size));
    }
    let (init_pods, mut pod_groups) = grouped(name, ns, "init-group", init, size);
    let (measured_pods, measured_groups) = grouped(name, ns, "group", measured, size);
    pod_groups.extend(measured_groups);
    let make_node = if name == TOPOLOGY_AWARE_SCHEDULING {
        rack_node
    } else {
        node
    };
    Some(Workload {
        name: name.to_string(),
        nodes: (0..nodes).map(make_node).collect(),
        init_pods,
        measured_pods,
        config: config::from_flags(None, None).expect("default config is valid"),
        dra: DraWorkload::default(),
        pod_groups,
        pods_per_group: Some(size),
    })
}
