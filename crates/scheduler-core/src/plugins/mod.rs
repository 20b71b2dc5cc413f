//! In-tree plugins, one file each, named after the upstream plugin they implement.

use std::sync::Arc;

use crate::framework::PluginFactory;

pub mod catalog;
pub mod default_binder;
pub mod default_preemption;
pub mod helper;
pub mod image_locality;
pub mod inter_pod_affinity;
pub mod names;
pub mod node_affinity;
pub mod node_name;
pub mod node_ports;
pub mod node_resources_balanced_allocation;
pub mod node_resources_fit;
pub mod node_unschedulable;
pub mod node_volume_limits;
pub mod pod_topology_spread;
pub mod queue_sort;
pub mod resource_allocation;
pub mod runtime_class;
pub mod scheduling_gates;
pub mod taint_toleration;
pub mod volume_binding;
pub mod volume_restrictions;
pub mod volume_zone;

/// Every plugin ferrosched has built, by name. Names in the catalog but not here are
/// "not built yet": profiles may name them and the framework skips them with a warning.
pub fn in_tree_factories() -> &'static [(&'static str, PluginFactory)] {
    &[
        (names::SCHEDULING_GATES, |_| {
            Ok(Arc::new(scheduling_gates::SchedulingGates))
        }),
        (names::PRIORITY_SORT, |_| {
            Ok(Arc::new(queue_sort::PrioritySort))
        }),
        (names::NODE_UNSCHEDULABLE, |_| {
            Ok(Arc::new(node_unschedulable::NodeUnschedulable))
        }),
        (names::NODE_NAME, |_| Ok(Arc::new(node_name::NodeName))),
        (names::TAINT_TOLERATION, |_| {
            Ok(Arc::new(taint_toleration::TaintToleration))
        }),
        (names::NODE_AFFINITY, |args| {
            Ok(Arc::new(node_affinity::NodeAffinity::from_args(args)?))
        }),
        (names::NODE_PORTS, |_| Ok(Arc::new(node_ports::NodePorts))),
        (names::IMAGE_LOCALITY, |_| {
            Ok(Arc::new(image_locality::ImageLocality))
        }),
        (names::DEFAULT_BINDER, |_| {
            Ok(Arc::new(default_binder::DefaultBinder))
        }),
        (names::RUNTIME_CLASS, |_| {
            Ok(Arc::new(runtime_class::RuntimeClass))
        }),
        (
            names::NODE_RESOURCES_FIT,
            node_resources_fit::NodeResourcesFit::factory,
        ),
        (
            names::NODE_RESOURCES_BALANCED_ALLOCATION,
            node_resources_balanced_allocation::NodeResourcesBalancedAllocation::factory,
        ),
        (
            names::INTER_POD_AFFINITY,
            inter_pod_affinity::InterPodAffinity::factory,
        ),
        (
            names::POD_TOPOLOGY_SPREAD,
            pod_topology_spread::PodTopologySpread::factory,
        ),
        (names::DEFAULT_PREEMPTION, default_preemption::factory),
        (names::VOLUME_RESTRICTIONS, |_| {
            Ok(Arc::new(volume_restrictions::VolumeRestrictions))
        }),
        (names::VOLUME_ZONE, |_| {
            Ok(Arc::new(volume_zone::VolumeZone))
        }),
        (names::NODE_VOLUME_LIMITS, |_| {
            Ok(Arc::new(node_volume_limits::NodeVolumeLimits))
        }),
        (
            names::VOLUME_BINDING,
            volume_binding::VolumeBinding::factory,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::Snapshot;
    use crate::framework::{Framework, NominatedPods, Registry};
    use crate::schedule_one::{Decision, SchedulingAlgorithm, schedule_one};
    use crate::types::{NodeInfo, PodInfo};

    /// The default profile, with the plugins built so far.
    fn default_framework() -> Framework {
        let loaded = crate::config::from_flags(None, None).unwrap();
        Framework::new(&loaded.profiles[0], &Registry::in_tree()).unwrap()
    }

    fn run(pod: &PodInfo, nodes: Vec<NodeInfo>) -> Decision {
        let mut alg = SchedulingAlgorithm::new(0, 7);
        let snap = Snapshot::from_node_infos(nodes);
        schedule_one(
            &default_framework(),
            &mut alg,
            &std::sync::Arc::new(pod.clone()),
            &snap,
            &NominatedPods::new(),
        )
    }

    #[test]
    fn default_profile_explains_node_plugin_rejections() {
        let pod = PodInfo::test("ns", "p").node_selector("zone", "y").build();
        let nodes = vec![
            NodeInfo::test("a")
                .label("zone", "y")
                .unschedulable()
                .build(),
            NodeInfo::test("b")
                .label("zone", "y")
                .taint("dedicated", "secret-team", "NoSchedule")
                .build(),
            NodeInfo::test("c").label("zone", "x").build(),
        ];
        match run(&pod, nodes) {
            Decision::Unschedulable {
                message,
                resolvable,
                ..
            } => {
                assert_eq!(
                    message,
                    "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, \
                     1 node(s) had untolerated taint(s), 1 node(s) were unschedulable. \
                     preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."
                );
                assert!(!resolvable);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn default_profile_scores_image_locality_through_the_framework() {
        const MB: i64 = 1024 * 1024;
        let pod = PodInfo::test("ns", "p").image("big").build();
        let nodes = vec![
            NodeInfo::test("without").pods(110).build(),
            NodeInfo::test("with")
                .pods(110)
                .image("big:latest", 900 * MB)
                .build(),
        ];
        match run(&pod, nodes) {
            Decision::Bind { node, result, .. } => {
                assert_eq!(node, "with");
                let with = result.breakdown("with").unwrap();
                // 900MB on 1 of 2 nodes: 450MB -> 100 * (450 - 23) / (1000 - 23) = 43
                assert!(
                    with.scores.contains(&(names::IMAGE_LOCALITY, 43)),
                    "{:?}",
                    with.scores
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn catalog_matches_built_plugins() {
        for (name, factory) in in_tree_factories() {
            let spec = catalog::lookup(name).unwrap_or_else(|| panic!("{name} not in catalog"));
            let plugin = factory(None).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(plugin.name(), *name);
            let mut built = plugin.points().implemented();
            let mut want = spec.points.to_vec();
            built.sort();
            want.sort();
            assert_eq!(built, want, "{name}");
        }
    }
}
