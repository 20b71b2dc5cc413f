//! InterPodAffinity end to end: cache -> snapshot -> framework -> schedule_one.

use std::sync::Arc;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use scheduler_core::cache::{Cache, Snapshot};
use scheduler_core::config::ExpandedProfile;
use scheduler_core::framework::{ExtensionPoint, Framework, NominatedPods, Registry};
use scheduler_core::plugins::names;
use scheduler_core::schedule_one::{Decision, SchedulingAlgorithm, schedule_one};
use scheduler_core::types::{NodeInfo, PodInfo};

const ZONE: &str = "topology.kubernetes.io/zone";
const HOST: &str = "kubernetes.io/hostname";

fn framework() -> Framework {
    let mut spec = ExpandedProfile {
        scheduler_name: "default-scheduler".into(),
        ..ExpandedProfile::default()
    };
    let ipa = vec![names::INTER_POD_AFFINITY.to_string()];
    spec.points
        .insert(ExtensionPoint::QueueSort, vec![names::PRIORITY_SORT.into()]);
    spec.points
        .insert(ExtensionPoint::Bind, vec![names::DEFAULT_BINDER.into()]);
    for p in [
        ExtensionPoint::PreFilter,
        ExtensionPoint::Filter,
        ExtensionPoint::PreScore,
        ExtensionPoint::Score,
    ] {
        spec.points.insert(p, ipa.clone());
    }
    spec.score_weights = vec![(names::INTER_POD_AFFINITY.into(), 2)];
    Framework::new(&spec, &Registry::in_tree()).unwrap()
}

fn anti_affinity(topology: &str, app: &str) -> k8s::Affinity {
    k8s::Affinity {
        pod_anti_affinity: Some(k8s::PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![k8s::PodAffinityTerm {
                label_selector: Some(meta::LabelSelector {
                    match_labels: Some([("app".to_string(), app.to_string())].into()),
                    match_expressions: None,
                }),
                topology_key: topology.to_string(),
                ..Default::default()
            }]),
            preferred_during_scheduling_ignored_during_execution: None,
        }),
        ..Default::default()
    }
}

fn replica(i: usize, topology: &str) -> Arc<PodInfo> {
    Arc::new(
        PodInfo::test("default", &format!("web-{i}"))
            .label("app", "web")
            .affinity(anti_affinity(topology, "web"))
            .build(),
    )
}

fn zoned_cache(zones: usize, per_zone: usize) -> Cache {
    let mut c = Cache::new();
    for z in 0..zones {
        for n in 0..per_zone {
            let name = format!("z{z}-n{n}");
            c.add_node(
                &NodeInfo::test(&name)
                    .label(ZONE, &format!("z{z}"))
                    .label(HOST, &name)
                    .build_node(),
            );
        }
    }
    c
}

fn zone_of(node: &str) -> &str {
    node.split('-').next().unwrap()
}

/// The seed scenario: replicas with required anti-affinity on the zone spread one per zone,
/// and the replica that finds every zone taken gets upstream's message.
#[test]
fn replicas_spread_across_zones_until_none_is_free() {
    let fw = framework();
    let mut cache = zoned_cache(3, 2);
    let mut snapshot = Snapshot::new();
    let mut alg = SchedulingAlgorithm::new(0, 7);
    let mut zones = Vec::new();
    for i in 0..3 {
        cache.update_snapshot(&mut snapshot);
        let pod = replica(i, ZONE);
        match schedule_one(&fw, &mut alg, &pod, &snapshot, &NominatedPods::new()) {
            Decision::Bind { node, .. } => {
                zones.push(zone_of(&node).to_string());
                cache.assume_pod(pod, &node).unwrap();
            }
            other => panic!("replica {i}: {other:?}"),
        }
    }
    zones.sort();
    assert_eq!(zones, ["z0", "z1", "z2"]);

    cache.update_snapshot(&mut snapshot);
    match schedule_one(
        &fw,
        &mut alg,
        &replica(3, ZONE),
        &snapshot,
        &NominatedPods::new(),
    ) {
        Decision::Unschedulable {
            message,
            resolvable,
            ..
        } => {
            assert_eq!(
                message,
                "0/6 nodes are available: 6 node(s) didn't match pod anti-affinity rules."
            );
            assert!(resolvable, "anti-affinity rejections are Unschedulable");
        }
        other => panic!("{other:?}"),
    }
}

/// A pod nominated to a zone (by an earlier preemption) counts there for pods of equal or
/// lower priority, through AddPod.
#[test]
fn nominated_replicas_block_their_zone() {
    let fw = framework();
    let cache = zoned_cache(2, 1);
    let snapshot = cache.snapshot();
    let mut nominated = NominatedPods::new();
    nominated.add(replica(0, ZONE), "z0-n0");
    let mut alg = SchedulingAlgorithm::new(0, 1);
    for attempt in 0..5 {
        match schedule_one(&fw, &mut alg, &replica(1, ZONE), &snapshot, &nominated) {
            Decision::Bind { node, .. } => assert_eq!(node, "z1-n0", "attempt {attempt}"),
            other => panic!("{other:?}"),
        }
    }
}

/// Required affinity to pods that exist nowhere is unresolvable.
#[test]
fn unmatched_affinity_is_unresolvable() {
    let fw = framework();
    let snapshot = zoned_cache(2, 1).snapshot();
    let pod = PodInfo::test("default", "p")
        .affinity(k8s::Affinity {
            pod_affinity: Some(k8s::PodAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![
                    k8s::PodAffinityTerm {
                        label_selector: Some(meta::LabelSelector {
                            match_labels: Some([("app".to_string(), "db".to_string())].into()),
                            match_expressions: None,
                        }),
                        topology_key: ZONE.into(),
                        ..Default::default()
                    },
                ]),
                preferred_during_scheduling_ignored_during_execution: None,
            }),
            ..Default::default()
        })
        .build();
    let pod = Arc::new(pod);
    let mut alg = SchedulingAlgorithm::new(0, 1);
    match schedule_one(&fw, &mut alg, &pod, &snapshot, &NominatedPods::new()) {
        Decision::Unschedulable {
            message,
            resolvable,
            ..
        } => {
            assert_eq!(
                message,
                "0/2 nodes are available: 2 node(s) didn't match pod affinity rules."
            );
            assert!(!resolvable);
        }
        other => panic!("{other:?}"),
    }
}
