//! The workload-scheduling workloads, after upstream scheduler_perf's `podgroup/` test cases
//! (`podgroup/gangscheduling`, `podgroup/basicscheduling`, `podgroup/tas`): every pod names
//! a PodGroup (`spec.schedulingGroup.podGroupName`), and the [`Runner`] schedules a gang's
//! pods in one pod group cycle, as the controller and `simulate` do.

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

/// The workloads whose pods name PodGroups.
pub const GROUP_WORKLOADS: &[&str] =
    &[GANG_SCHEDULING, BASIC_SCHEDULING, TOPOLOGY_AWARE_SCHEDULING];

/// The rack label of `podgroup/tas`'s nodes, its groups' topology key.
pub const RACK_LABEL: &str = "topology.kubernetes.io/rack";
/// Nodes per rack (and per zone) in `podgroup/tas/templates/node.yaml`.
pub const NODES_PER_RACK: usize = 100;

/// A workload's default `podsPerGroup`: upstream's in its 5,000-node cases of small groups
/// (`5000Nodes_1000Gangs_3000Pods`; `5000Nodes_750Gangs_3000Pods` for topology).
pub fn default_pods_per_group(name: &str) -> usize {
    if name == TOPOLOGY_AWARE_SCHEDULING {
        4
    } else {
        3
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
    let policy = match min_count {
        Some(n) => json!({ "gang": { "minCount": n } }),
        None => json!({ "basic": {} }),
    };
    let mut spec = json!({ "schedulingPolicy": policy });
    if let Some(key) = topology_key {
        spec["schedulingConstraints"] = json!({ "topology": [{ "key": key }] });
    }
    let object = json!({
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": { "name": name, "namespace": namespace },
        "spec": spec,
    });
    PodGroupInfo::from_json(GroupApi::Workload, &object).expect("a valid PodGroup")
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
/// pods are in different groups.
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
