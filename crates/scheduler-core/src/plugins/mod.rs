//! In-tree plugins, one file each, named after the upstream plugin they implement.

use std::sync::Arc;

use crate::framework::PluginFactory;

pub mod catalog;
pub mod coscheduling;
pub mod default_binder;
pub mod default_preemption;
pub mod dynamic_resources;
pub mod gang_scheduling;
pub mod helper;
pub mod image_locality;
pub mod inter_pod_affinity;
pub mod names;
pub mod node_affinity;
pub mod node_declared_features;
pub mod node_name;
pub mod node_ports;
pub mod node_resources_balanced_allocation;
pub mod node_resources_fit;
pub mod node_unschedulable;
pub mod node_volume_limits;
pub mod pod_group_pods_count;
pub mod pod_topology_spread;
pub mod queue_sort;
pub mod resource_allocation;
pub mod runtime_class;
pub mod scheduling_gates;
pub mod scheduling_policy;
pub mod taint_toleration;
pub mod topology_placement_generator;
pub mod volume_binding;
pub mod volume_restrictions;
pub mod volume_zone;

/// Makes the registry's group plugins (GangScheduling, Coscheduling, and DefaultPreemption
/// for victims' disruption modes) read `groups`, the
/// PodGroups and members the caller keeps current.
pub fn register_group_plugins(
    registry: &mut crate::framework::Registry,
    groups: Arc<crate::pod_group_manager::PodGroupManager>,
) {
    gang_scheduling::register(registry, Arc::clone(&groups));
    default_preemption::register(registry, Arc::clone(&groups));
    coscheduling::register(registry, groups);
}

/// Every plugin ferrosched has built, by name. Names in the catalog but not here are
/// "not built yet": profiles may name them and the framework skips them with a warning.
pub fn in_tree_factories() -> &'static [(&'static str, PluginFactory)] {
    &[
        (names::SCHEDULING_GATES, |_| {
            Ok(Arc::new(scheduling_gates::SchedulingGates))
        }),
        (names::GANG_SCHEDULING, |_| {
            // No groups known: every pod that names one waits (see the module doc).
            Ok(Arc::new(gang_scheduling::GangScheduling::new(
                std::sync::Arc::default(),
            )))
        }),
        (names::COSCHEDULING, |args| {
            // As GangScheduling: no groups known until `coscheduling::register`.
            Ok(Arc::new(coscheduling::Coscheduling::new(
                std::sync::Arc::default(),
                args,
            )?))
        }),
        (names::SCHEDULING_POLICY, |_| {
            Ok(Arc::new(
                scheduling_policy::SchedulingPolicyPlugin::default(),
            ))
        }),
        (names::PRIORITY_SORT, |_| {
            Ok(Arc::new(queue_sort::PrioritySort))
        }),
        (names::NODE_UNSCHEDULABLE, |_| {
            Ok(Arc::new(node_unschedulable::NodeUnschedulable))
        }),
        (names::NODE_NAME, |_| Ok(Arc::new(node_name::NodeName))),
        (names::NODE_DECLARED_FEATURES, |_| {
            Ok(Arc::new(node_declared_features::NodeDeclaredFeatures))
        }),
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
        (names::TOPOLOGY_PLACEMENT_GENERATOR, |_| {
            Ok(Arc::new(
                topology_placement_generator::TopologyPlacementGenerator,
            ))
        }),
        (names::POD_GROUP_PODS_COUNT, |_| {
            Ok(Arc::new(pod_group_pods_count::PodGroupPodsCount))
        }),
        (names::DEFAULT_BINDER, |_| {
            Ok(Arc::new(default_binder::DefaultBinder))
        }),
        (names::RUNTIME_CLASS, |_| {
            Ok(Arc::new(runtime_class::RuntimeClass))
        }),
        (
            names::DYNAMIC_RESOURCES,
            dynamic_resources::DynamicResources::factory,
        ),
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
mod filter_summary_tests;
#[cfg(test)]
mod score_nodes_tests;

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
        // The snapshot `run` schedules on, for reading the result's scored nodes.
        let snap = Snapshot::from_node_infos(nodes.clone());
        match run(&pod, nodes) {
            Decision::Bind { node, result, .. } => {
                assert_eq!(node, "with");
                let with = result.breakdown(&snap, "with").unwrap();
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

    fn run_with_volumes(
        pod: &PodInfo,
        nodes: Vec<NodeInfo>,
        volumes: crate::types::VolumeObjects,
    ) -> Decision {
        let mut alg = SchedulingAlgorithm::new(0, 7);
        let snap = Snapshot::from_node_infos(nodes).with_volumes(volumes);
        schedule_one(
            &default_framework(),
            &mut alg,
            &std::sync::Arc::new(pod.clone()),
            &snap,
            &NominatedPods::new(),
        )
    }

    #[test]
    fn default_profile_binds_volumes_and_explains_volume_rejections() {
        use crate::types::testing::volumes::{csi_node, pv, pvc, sc, store};
        let nodes = || {
            vec![
                NodeInfo::test("a")
                    .pods(110)
                    .label("kubernetes.io/hostname", "a")
                    .label("topology.kubernetes.io/zone", "za")
                    .build(),
                NodeInfo::test("b")
                    .pods(110)
                    .label("kubernetes.io/hostname", "b")
                    .label("topology.kubernetes.io/zone", "zb")
                    .build(),
                NodeInfo::test("c")
                    .pods(110)
                    .label("kubernetes.io/hostname", "c")
                    .label("topology.kubernetes.io/zone", "zb")
                    .build(),
            ]
        };
        let mut vols = store(
            vec![
                pvc("ns", "local").class("local").build(),
                pvc("ns", "now").class("fast").build(),
                pvc("ns", "zonal").bound("zonal-pv").build(),
                pvc("ns", "csi").class("csi").build(),
            ],
            vec![
                pv("on-b", "local", "1Gi").local_on("b").build(),
                pv("zonal-pv", "", "1Gi")
                    .label("topology.kubernetes.io/zone", "za")
                    .claim("ns", "zonal")
                    .build(),
            ],
            vec![
                sc("local", "kubernetes.io/no-provisioner", true, &[]),
                sc("fast", "csi.example.com", false, &[]),
                sc("csi", "csi.example.com", true, &[]),
            ],
        );
        vols.put_csi_node(csi_node("a", &[("csi.example.com", Some(0))]));

        // WaitForFirstConsumer: the only node with a matching volume wins, and the decision
        // is left in the cycle state for the controller.
        let pod = PodInfo::test("ns", "p").pvc("local").build();
        match run_with_volumes(&pod, nodes(), vols.clone()) {
            Decision::Bind { node, state, .. } => {
                assert_eq!(node, "b");
                let d = volume_binding::decided_bindings(&state).unwrap();
                assert_eq!(d.static_bindings[0].pv, "on-b");
            }
            other => panic!("{other:?}"),
        }

        let unschedulable = |pod: &PodInfo| match run_with_volumes(pod, nodes(), vols.clone()) {
            Decision::Unschedulable {
                message,
                resolvable,
                ..
            } => (message, resolvable),
            other => panic!("{other:?}"),
        };
        let pod = PodInfo::test("ns", "p").pvc("now").build();
        assert_eq!(
            unschedulable(&pod),
            (
                "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. \
                 preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."
                    .to_string(),
                false
            )
        );
        // Zonal volume in za, but a (the only za node) cannot attach another CSI volume.
        let pod = PodInfo::test("ns", "p").pvc("zonal").pvc("csi").build();
        let (message, resolvable) = unschedulable(&pod);
        assert_eq!(
            message,
            "0/3 nodes are available: 1 node(s) exceed max volume count, \
             2 node(s) had no available volume zone. \
             preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, \
             2 Preemption is not helpful for scheduling.."
        );
        assert!(resolvable);
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
