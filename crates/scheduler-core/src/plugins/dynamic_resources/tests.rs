use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as k8s;

use super::*;
use crate::framework::{Code, Framework, NominatedPods, Registry};
use crate::schedule_one::{Decision, SchedulingAlgorithm, schedule_one};
use crate::types::NodeInfo;

fn with_claims(names: &[&str]) -> PodInfo {
    let claims: Vec<k8s::PodResourceClaim> = names
        .iter()
        .map(|n| k8s::PodResourceClaim {
            name: n.to_string(),
            resource_claim_name: Some(format!("{n}-claim")),
            ..Default::default()
        })
        .collect();
    PodInfo::test("ns", "p")
        .edit(|p| p.spec.as_mut().unwrap().resource_claims = Some(claims))
        .build()
}

fn snapshot(served: bool) -> Snapshot {
    Snapshot::from_node_infos(vec![
        NodeInfo::test("a").pods(10).build(),
        NodeInfo::test("b").pods(10).build(),
    ])
    .with_dra_api_served(served)
}

fn framework(yaml: Option<&str>) -> Framework {
    let loaded = match yaml {
        None => crate::config::from_flags(None, None).unwrap(),
        Some(y) => crate::config::load_str(y, "test.yaml").unwrap(),
    };
    Framework::new(&loaded.profiles[0], &Registry::in_tree()).unwrap()
}

/// Runs a whole cycle and returns the Unschedulable message; panics on any other decision
/// (binding a pod with unallocated claims must never happen).
fn rejected(fw: &Framework, pod: &PodInfo, snap: &Snapshot) -> (String, bool) {
    let mut alg = SchedulingAlgorithm::new(0, 7);
    match schedule_one(
        fw,
        &mut alg,
        &Arc::new(pod.clone()),
        snap,
        &NominatedPods::new(),
    ) {
        Decision::Unschedulable {
            message,
            resolvable,
            ..
        } => (message, resolvable),
        other => panic!("a pod with resource claims must not be scheduled: {other:?}"),
    }
}

#[test]
fn pre_filter_cases() {
    // (case, claims, API served, want: None = skip, Some(message))
    let cases: Vec<(&str, Vec<&str>, bool, Option<&str>)> = vec![
        ("no claims: plugin skips", vec![], true, None),
        ("no claims, no DRA API: skips too", vec![], false, None),
        (
            "claims, server without resource.k8s.io/v1",
            vec!["gpu"],
            false,
            Some(API_NOT_SERVED),
        ),
        (
            "claims, DRA served but no allocator yet",
            vec!["gpu", "nic"],
            true,
            Some(ALLOCATION_NOT_SUPPORTED),
        ),
    ];
    for (name, claims, served, want) in cases {
        let pod = with_claims(&claims);
        let (r, s) = DynamicResources.pre_filter(&mut CycleState::new(), &pod, &snapshot(served));
        assert!(r.is_none(), "{name}");
        match want {
            None => assert!(s.is_skip(), "{name}: {s}"),
            Some(msg) => {
                assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{name}");
                assert_eq!(s.message(), msg, "{name}");
            }
        }
    }
}

#[test]
fn default_profile_never_binds_a_pod_with_claims() {
    let fw = framework(None);
    for (served, msg) in [(false, API_NOT_SERVED), (true, ALLOCATION_NOT_SUPPORTED)] {
        let (message, resolvable) = rejected(&fw, &with_claims(&["gpu"]), &snapshot(served));
        assert!(
            message.starts_with(&format!("0/2 nodes are available: {msg}.")),
            "{message}"
        );
        assert!(!resolvable, "preemption cannot help: {message}");
    }
    // The same pod without claims schedules: the rejection is about the claims only.
    let mut alg = SchedulingAlgorithm::new(0, 7);
    let plain = Arc::new(PodInfo::test("ns", "p").build());
    let d = schedule_one(
        &fw,
        &mut alg,
        &plain,
        &snapshot(false),
        &NominatedPods::new(),
    );
    assert!(matches!(d, Decision::Bind { .. }), "{d:?}");
}

#[test]
fn profile_without_the_plugin_rejects_pods_with_claims() {
    let fw = framework(Some(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
         profiles:\n- schedulerName: no-dra\n  plugins:\n    multiPoint:\n      disabled:\n      - name: DynamicResources\n",
    ));
    for served in [false, true] {
        let (message, resolvable) = rejected(&fw, &with_claims(&["gpu"]), &snapshot(served));
        let want = disabled_in_profile("no-dra");
        assert!(
            message.starts_with(&format!("0/2 nodes are available: {want}.")),
            "{message}"
        );
        assert!(want.contains("DynamicResources plugin is disabled in profile \"no-dra\""));
        assert!(!resolvable);
    }
    // Pods without claims are not affected.
    let mut alg = SchedulingAlgorithm::new(0, 7);
    let plain = Arc::new(PodInfo::test("ns", "p").build());
    let d = schedule_one(
        &fw,
        &mut alg,
        &plain,
        &snapshot(true),
        &NominatedPods::new(),
    );
    assert!(matches!(d, Decision::Bind { .. }), "{d:?}");
}

#[test]
fn claim_slice_and_class_changes_requeue_the_pod() {
    let fw = framework(None);
    let rejecting: BTreeSet<&'static str> = [DYNAMIC_RESOURCES].into_iter().collect();
    for resource in [
        EventResource::ResourceClaim,
        EventResource::ResourceSlice,
        EventResource::DeviceClass,
    ] {
        for action in [ActionType::ADD, ActionType::UPDATE] {
            let event = ClusterEvent::new(resource, action);
            let who: Vec<_> = fw
                .events_to_register()
                .interested(&event, &rejecting)
                .collect();
            assert_eq!(who, vec![DYNAMIC_RESOURCES], "{resource:?} {action:?}");
        }
    }
    let node_add = ClusterEvent::new(EventResource::Node, ActionType::ADD);
    assert_eq!(
        fw.events_to_register()
            .interested(&node_add, &rejecting)
            .count(),
        0
    );
}

#[test]
fn cache_hands_claims_and_the_served_flag_to_snapshots() {
    use k8s_openapi::api::resource::v1 as dra;
    let mut cache = crate::cache::Cache::new();
    assert!(
        !cache.snapshot().dra_api_served(),
        "not served until discovery says so"
    );
    cache.set_dra_api_served(true);
    let mut c = dra::ResourceClaim::default();
    c.metadata.namespace = Some("ns".into());
    c.metadata.name = Some("gpu-claim".into());
    cache.dra_mut().update_claim(&c);
    let mut snap = cache.snapshot();
    assert!(snap.dra_api_served());
    assert!(snap.dra().claim("ns", "gpu-claim").is_some());
    cache.dra_mut().remove_claim("ns", "gpu-claim");
    cache.update_snapshot(&mut snap);
    assert!(snap.dra().claim("ns", "gpu-claim").is_none());
}
