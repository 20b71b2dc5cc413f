//! The workload-scheduling workloads, after upstream scheduler_perf's `podgroup/` test cases
//! (`podgroup/gangscheduling`, `podgroup/basicscheduling`, `podgroup/tas`) and its
//! `workload_preemption/` cases `GangPreemptionPodGroups` and
//! `GangPreemptionTopologySpreading`, and `default_preemption/`'s
//! `PreemptionPodGroupDisruptionMode`: pods name PodGroups
//! (`spec.schedulingGroup.podGroupName`), and the [`Runner`] schedules a gang's pods in one
//! pod group cycle, as the controller and `simulate` do, preempting for a gang that does not
//! fit (or, for a single pod, evicting victims' groups as their `disruptionMode` says).

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

/// High-priority gangs whose pods spread over zones (`maxSkew: 1`, DoNotSchedule) and must
/// preempt low-priority pods that fill every node (`workload_preemption/`'s
/// `GangPreemptionTopologySpreading`).
pub const GANG_PREEMPTION_TOPOLOGY_SPREADING: &str = "GangPreemptionTopologySpreading";

/// `default_preemption/`'s `PreemptionPodGroupDisruptionMode`: single high-priority pods that
/// each need a whole node, over nodes full of low-priority pods that are in no group, in
/// PodGroups of `disruptionMode: single`, or of `disruptionMode: all` (upstream's three
/// workloads, named after them).
pub const DISRUPTION_MODE_NO_POD_GROUP: &str = "PreemptionPodGroupDisruptionMode/NoPodGroup";
pub const DISRUPTION_MODE_SINGLE: &str =
    "PreemptionPodGroupDisruptionMode/PodGroup_DisruptionSingle";
pub const DISRUPTION_MODE_ALL: &str = "PreemptionPodGroupDisruptionMode/PodGroup_DisruptionAll";

/// The workloads whose pods name PodGroups.
pub const GROUP_WORKLOADS: &[&str] = &[
    GANG_SCHEDULING,
    BASIC_SCHEDULING,
    TOPOLOGY_AWARE_SCHEDULING,
    GANG_PREEMPTION_POD_GROUPS,
    GANG_PREEMPTION_TOPOLOGY_SPREADING,
    DISRUPTION_MODE_NO_POD_GROUP,
    DISRUPTION_MODE_SINGLE,
    DISRUPTION_MODE_ALL,
];

/// The preemption workloads after upstream's 10:1 victim ratio: low-priority pods per node
/// (300m each, so 3000m of a node's 4 CPUs is taken), and the preemptors' CPU (3970m: a
/// preemptor fits only where all ten are gone) and priority (upstream's normalized 10000).
pub const VICTIMS_PER_NODE: usize = 10;
pub const VICTIM_CPU: &str = "300m";
pub const PREEMPTOR_CPU: &str = "3970m";
pub const PREEMPTOR_PRIORITY: i32 = 10_000;
/// The victims' priority (below the preemptors').
pub const VICTIM_PRIORITY: i32 = 100;

/// Whether a workload's measured pods need a node each (they preempt whole nodes).
fn one_measured_pod_per_node(name: &str) -> bool {
    matches!(
        name,
        GANG_PREEMPTION_POD_GROUPS
            | GANG_PREEMPTION_TOPOLOGY_SPREADING
            | DISRUPTION_MODE_NO_POD_GROUP
            | DISRUPTION_MODE_SINGLE
            | DISRUPTION_MODE_ALL
    )
}

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
/// For `GangPreemptionTopologySpreading`: 16 (`100Nodes_6PreemptorGangs_16Pods_…`); for
/// `PreemptionPodGroupDisruptionMode` (the victims' groups): 10.
pub fn default_pods_per_group(name: &str) -> usize {
    match name {
        TOPOLOGY_AWARE_SCHEDULING => 4,
        GANG_PREEMPTION_POD_GROUPS => 10,
        GANG_PREEMPTION_TOPOLOGY_SPREADING => 16,
        DISRUPTION_MODE_NO_POD_GROUP | DISRUPTION_MODE_SINGLE | DISRUPTION_MODE_ALL => 10,
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
    if one_measured_pod_per_node(name) && measured > nodes {
        return Err(format!(
            "{name} places one measured pod per node: {measured} measured pods need at least {measured} nodes, not {nodes}"
        ));
    }
    if name != GANG_PREEMPTION_POD_GROUPS {
        return Ok(());
    }
    let size = pods_per_group.unwrap_or_else(|| default_pods_per_group(name));
    let groups =
        (LOW_PRIORITY_PODS_PER_NODE * nodes).div_ceil(size.max(1)) + measured.div_ceil(size.max(1));
    if size > nodes {
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
    group_view_with(namespace, name, min_count, topology_key, priority, None)
}

/// [`group_view`] with a `disruptionMode` (`single` or `all`).
fn group_view_with(
    namespace: &str,
    name: &str,
    min_count: Option<usize>,
    topology_key: Option<&str>,
    priority: Option<i32>,
    disruption: Option<&str>,
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
    if let Some(mode) = disruption {
        spec["disruptionMode"] = json!({ mode: {} });
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

/// A single pod of `cpu` and 100Mi at `priority` (upstream's `pod-low-priority.yaml` and
/// `pod-high-priority.yaml` shapes).
fn priority_pod(namespace: &str, cpu: &str, priority: i32) -> core::Pod {
    with_spec(pod(namespace, "x", &[]), |s| {
        s.priority = Some(priority);
        s.containers[0].resources = Some(core::ResourceRequirements {
            requests: Some(quantities(&[("cpu", cpu), ("memory", "100Mi")])),
            ..Default::default()
        });
    })
}

/// [`VICTIMS_PER_NODE`] low-priority pods per node, 300m each (the init pods).
fn victims(namespace: &str, nodes: usize) -> Vec<core::Pod> {
    pods(VICTIMS_PER_NODE * nodes, "victim", |_| {
        priority_pod(namespace, VICTIM_CPU, VICTIM_PRIORITY)
    })
}

/// `GangPreemptionTopologySpreading`: nodes in three zones full of victims, then `measured`
/// high-priority pods in gangs of `size`, each pod spreading its gang over the zones
/// (`maxSkew: 1`, DoNotSchedule) and fitting only on a node emptied of victims.
fn gang_preemption_spreading(nodes: usize, measured: usize, size: usize) -> Workload {
    let ns = "bench";
    let size = size.max(1);
    let groups = (0..measured.div_ceil(size))
        .map(|g| {
            let members = size.min(measured - g * size);
            group_view(
                ns,
                &format!("gang-{g}"),
                Some(members),
                None,
                Some(PREEMPTOR_PRIORITY),
            )
        })
        .collect();
    let gang_pods = pods(measured, "gang-pod", |i| {
        let group = format!("gang-{}", i / size);
        let mut p = group_pod(ns, &group);
        p.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("gang".to_string(), group.clone());
        with_spec(p, |s| {
            s.priority = Some(PREEMPTOR_PRIORITY);
            s.containers[0].resources = Some(core::ResourceRequirements {
                requests: Some(quantities(&[("cpu", PREEMPTOR_CPU), ("memory", "100Mi")])),
                ..Default::default()
            });
            s.topology_spread_constraints = Some(vec![core::TopologySpreadConstraint {
                max_skew: 1,
                topology_key: "topology.kubernetes.io/zone".into(),
                when_unsatisfiable: "DoNotSchedule".into(),
                label_selector: Some(meta::LabelSelector {
                    match_labels: Some([("gang".to_string(), group)].into()),
                    ..Default::default()
                }),
                ..Default::default()
            }]);
        })
    });
    Workload {
        name: GANG_PREEMPTION_TOPOLOGY_SPREADING.to_string(),
        nodes: (0..nodes).map(node).collect(),
        init_pods: victims(ns, nodes),
        measured_pods: gang_pods,
        config: config::from_flags(None, None).expect("default config is valid"),
        dra: DraWorkload::default(),
        pod_groups: groups,
        pods_per_group: Some(size),
    }
}

/// `PreemptionPodGroupDisruptionMode/*`: nodes full of victims (alone, or in PodGroups of
/// `size` in `disruptionMode` `single` or `all`), then `measured` single high-priority pods
/// that each need a whole node.
fn disruption_mode(name: &str, nodes: usize, measured: usize, size: usize) -> Workload {
    let ns = "bench";
    let size = size.max(1);
    let mode = match name {
        DISRUPTION_MODE_SINGLE => Some("single"),
        DISRUPTION_MODE_ALL => Some("all"),
        _ => None,
    };
    let mut init = victims(ns, nodes);
    let mut groups = Vec::new();
    if let Some(mode) = mode {
        for g in 0..init.len().div_ceil(size) {
            groups.push(group_view_with(
                ns,
                &format!("victims-{g}"),
                None,
                None,
                Some(VICTIM_PRIORITY),
                Some(mode),
            ));
        }
        for (i, p) in init.iter_mut().enumerate() {
            p.spec.as_mut().expect("pods have specs").scheduling_group =
                Some(core::PodSchedulingGroup {
                    pod_group_name: Some(format!("victims-{}", i / size)),
                });
        }
    }
    Workload {
        name: name.to_string(),
        nodes: (0..nodes).map(node).collect(),
        init_pods: init,
        measured_pods: pods(measured, "preemptor", |_| {
            priority_pod(ns, PREEMPTOR_CPU, PREEMPTOR_PRIORITY)
        }),
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
/// pods are in different groups. The preemption workloads ignore `init`: their init pods
/// fill every node ([`LOW_PRIORITY_PODS_PER_NODE`] or [`VICTIMS_PER_NODE`] per node; see
/// [`check_group_sizes`] for the sizes they need).
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
    match name {
        GANG_PREEMPTION_POD_GROUPS => return Some(gang_preemption(nodes, measured, size)),
        GANG_PREEMPTION_TOPOLOGY_SPREADING => {
            return Some(gang_preemption_spreading(nodes, measured, size));
        }
        DISRUPTION_MODE_NO_POD_GROUP | DISRUPTION_MODE_SINGLE | DISRUPTION_MODE_ALL => {
            return Some(disruption_mode(name, nodes, measured, size));
        }
        _ => {}
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
