//! scheduler-plugins' check of a group's `spec.minResources` against the whole cluster, pure:
//! the amounts asked for (and `pods`: `minMember`) are taken from each node's free amounts
//! in turn (allocatable minus requested, as if the group's own pods were not there), and
//! whatever is still missing after the last node is the gap.

use std::collections::BTreeMap;

use crate::cache::Snapshot;
use crate::types::NodeInfo;
use crate::types::pod_group::PodGroupInfo;
use crate::types::quantity::Quantity;
use crate::types::resource::{
    RESOURCE_CPU, RESOURCE_EPHEMERAL_STORAGE, RESOURCE_MEMORY, RESOURCE_PODS, Resource,
};

/// What the cluster lacks for `group`'s `minResources` (each missing amount by resource
/// name), or `None` when its nodes have enough free together (or the group asks nothing).
pub fn resource_gap(
    group: &PodGroupInfo,
    snapshot: &Snapshot,
) -> Option<BTreeMap<String, Quantity>> {
    let min = group.min_resources.as_ref()?;
    let mut want: BTreeMap<String, Quantity> = min.clone();
    // scheduler-plugins asks for room for minMember pods, whatever minResources says.
    let min_member = i64::from(group.min_count_as_set());
    want.insert(RESOURCE_PODS.to_string(), Quantity::from_value(min_member));
    want.retain(|_, q| q.nanos() > 0);
    for node in snapshot.node_infos() {
        if want.is_empty() {
            return None;
        }
        if !node.node_known {
            continue;
        }
        let free = Free::of(node, group);
        want.retain(|name, q| {
            let left = q.nanos().saturating_sub(free.get(name).nanos());
            *q = Quantity::from_nanos(left);
            left > 0
        });
    }
    (!want.is_empty()).then_some(want)
}

/// scheduler-plugins' wording of the gap (`resource gap: map[...]`). It prints Go's internal
/// form of each quantity; ferrosched prints the quantity (`2`, `1500m`, bytes for memory).
pub fn gap_message(gap: &BTreeMap<String, Quantity>) -> String {
    let items: Vec<String> = gap
        .iter()
        .map(|(name, q)| format!("{name}:{}", format_quantity(*q)))
        .collect();
    format!("resource gap: map[{}]", items.join(" "))
}

/// A quantity in the coarsest exact unit: whole units, else milli, micro or nano.
fn format_quantity(q: Quantity) -> String {
    let n = q.nanos();
    if n % 1_000_000_000 == 0 {
        format!("{}", n / 1_000_000_000)
    } else if n % 1_000_000 == 0 {
        format!("{}m", n / 1_000_000)
    } else if n % 1_000 == 0 {
        format!("{}u", n / 1_000)
    } else {
        format!("{n}n")
    }
}

/// One node's free amounts with the group's own pods taken off it.
struct Free<'a> {
    node: &'a NodeInfo,
    /// The group's pods' requests on the node, and how many they are.
    own: Resource,
    own_pods: i64,
}

impl<'a> Free<'a> {
    fn of(node: &'a NodeInfo, group: &PodGroupInfo) -> Self {
        let mut own = Resource::default();
        let mut own_pods = 0;
        for p in &node.pods {
            if p.pod_group.as_deref() == Some(&group.key) {
                own.add(&p.requests);
                own_pods += 1;
            }
        }
        Free {
            node,
            own,
            own_pods,
        }
    }

    /// The free amount of `name`: nothing of a resource the node does not offer.
    fn get(&self, name: &str) -> Quantity {
        let (alloc, req) = (&self.node.allocatable, &self.node.requested);
        let used = |n: &str| req.get(n).saturating_sub(self.own.get(n));
        match name {
            RESOURCE_CPU => {
                Quantity::from_milli(alloc.milli_cpu.saturating_sub(used(RESOURCE_CPU)))
            }
            RESOURCE_MEMORY | RESOURCE_EPHEMERAL_STORAGE => {
                Quantity::from_value(alloc.get(name).saturating_sub(used(name)))
            }
            RESOURCE_PODS => {
                let pods = self.node.pods.len() as i64 - self.own_pods;
                Quantity::from_value(alloc.allowed_pod_number.saturating_sub(pods))
            }
            _ if alloc.scalar.iter().any(|(n, _)| &**n == name) => {
                Quantity::from_value(alloc.get(name).saturating_sub(used(name)))
            }
            _ => Quantity::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::Cache;
    use crate::types::PodInfo;
    use crate::types::pod_group::{GroupApi, GroupPolicy, PodGroupKey};
    use crate::types::quantity::parse_quantity;

    fn group(min_member: u32, min: &[(&str, &str)]) -> PodGroupInfo {
        let mut g = PodGroupInfo::new(
            PodGroupKey::new(GroupApi::Coscheduling, "ns", "pg1"),
            GroupPolicy::Gang {
                min_count: min_member,
            },
        );
        g.min_resources = Some(
            min.iter()
                .map(|(n, q)| (n.to_string(), parse_quantity(q).unwrap()))
                .collect(),
        );
        g
    }

    fn running(name: &str, node: &str, cpu: &str, group: Option<&str>) -> PodInfo {
        let mut b = PodInfo::test("ns", name).request("cpu", cpu).node(node);
        if let Some(g) = group {
            b = b.label("scheduling.x-k8s.io/pod-group", g);
        }
        b.build()
    }

    fn snapshot(nodes: &[(&str, &str)], pods: Vec<PodInfo>) -> Snapshot {
        let mut cache = Cache::new();
        for (n, cpu) in nodes {
            cache.add_node(
                &NodeInfo::test(n)
                    .cpu(cpu)
                    .memory("4Gi")
                    .pods(10)
                    .build_node(),
            );
        }
        for p in pods {
            cache.add_pod(std::sync::Arc::new(p)).unwrap();
        }
        let mut s = Snapshot::new();
        cache.update_snapshot(&mut s);
        s
    }

    /// scheduler-plugins' TestCheckClusterResource, on one 3-cpu node.
    #[test]
    fn the_groups_own_pods_count_as_free() {
        let g = group(0, &[("cpu", "4")]);
        // Enough: another pod's 2 cpu leave 1 free on n1, plus n2's 3.
        let s = snapshot(
            &[("n1", "3"), ("n2", "3")],
            vec![running("p1", "n1", "2", None)],
        );
        assert_eq!(resource_gap(&g, &s), None);
        // Not enough: 2 and 1 cpu taken by others on the only node.
        let s = snapshot(
            &[("n1", "3")],
            vec![
                running("p1", "n1", "2", None),
                running("p2", "n1", "1", None),
            ],
        );
        let gap = resource_gap(&g, &s).unwrap();
        assert_eq!(gap_message(&gap), "resource gap: map[cpu:4]");
        // p1 is the group's own: its 2 cpu count as free, 3 - 1 = 2 short of 4.
        let s = snapshot(
            &[("n1", "3")],
            vec![
                running("p1", "n1", "2", Some("pg1")),
                running("p2", "n1", "1", None),
            ],
        );
        assert_eq!(
            gap_message(&resource_gap(&g, &s).unwrap()),
            "resource gap: map[cpu:2]"
        );
    }

    #[test]
    fn pods_are_min_member_and_unknown_resources_are_never_free() {
        // Two nodes of 4 cpu: 6 fits across them (the check is cluster-wide).
        let s = snapshot(&[("n1", "4"), ("n2", "4")], Vec::new());
        assert_eq!(resource_gap(&group(3, &[("cpu", "6")]), &s), None);
        let gap = resource_gap(&group(3, &[("cpu", "10")]), &s).unwrap();
        assert_eq!(gap_message(&gap), "resource gap: map[cpu:2]");
        // 10 pods per node: 25 members cannot have room.
        let gap = resource_gap(&group(25, &[("cpu", "1")]), &s).unwrap();
        assert_eq!(gap_message(&gap), "resource gap: map[pods:5]");
        // A resource no node offers; fractions keep their unit.
        let gap =
            resource_gap(&group(1, &[("nvidia.com/gpu", "2"), ("cpu", "8500m")]), &s).unwrap();
        assert_eq!(
            gap_message(&gap),
            "resource gap: map[cpu:500m nvidia.com/gpu:2]"
        );
        // Nothing asked, nothing checked.
        let mut none = group(3, &[]);
        none.min_resources = None;
        assert_eq!(resource_gap(&none, &s), None);
    }
}
