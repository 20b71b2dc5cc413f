//! Pods nominated to a node by preemption keep their room from lower-priority pods, with
//! the default profile (upstream's two-pass filtering with nominated pods).

use std::sync::Arc;

use scheduler_core::cache::Snapshot;
use scheduler_core::config;
use scheduler_core::framework::{NominatedPods, ProfileRegistry, Registry};
use scheduler_core::schedule_one::{Decision, SchedulingAlgorithm, schedule_one};
use scheduler_core::types::{NodeInfo, PodInfo};

fn decide(pod: PodInfo, nominated: &NominatedPods) -> Decision {
    let loaded = config::from_flags(None, None).unwrap();
    let profiles = ProfileRegistry::new(&loaded.profiles, &Registry::in_tree()).unwrap();
    let fw = profiles.for_scheduler_name("").unwrap();
    let snap = Snapshot::from_node_infos(vec![
        NodeInfo::test("only")
            .cpu("2")
            .memory("4Gi")
            .pods(10)
            .build(),
    ]);
    schedule_one(
        fw,
        &mut SchedulingAlgorithm::new(0, 1),
        &Arc::new(pod),
        &snap,
        nominated,
    )
}

fn nominated_preemptor() -> NominatedPods {
    let mut n = NominatedPods::new();
    let preemptor = PodInfo::test("ns", "preemptor")
        .cpu("1500m")
        .priority(100)
        .nominated_node("only")
        .build();
    n.add(Arc::new(preemptor), "only");
    n
}

#[test]
fn lower_priority_pods_cannot_take_a_nominated_pods_room() {
    let d = decide(
        PodInfo::test("ns", "low").cpu("1").priority(10).build(),
        &nominated_preemptor(),
    );
    match d {
        Decision::Unschedulable { message, .. } => {
            assert!(
                message.starts_with("0/1 nodes are available: 1 Insufficient cpu."),
                "{message}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn higher_priority_pods_ignore_lower_priority_nominations() {
    let d = decide(
        PodInfo::test("ns", "high").cpu("1").priority(200).build(),
        &nominated_preemptor(),
    );
    assert!(
        matches!(d, Decision::Bind { ref node, .. } if node == "only"),
        "{d:?}"
    );
}

#[test]
fn without_nominations_the_node_fits() {
    let d = decide(
        PodInfo::test("ns", "low").cpu("1").priority(10).build(),
        &NominatedPods::new(),
    );
    assert!(matches!(d, Decision::Bind { .. }), "{d:?}");
}
