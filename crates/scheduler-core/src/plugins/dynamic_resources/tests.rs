use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::resource::v1 as dra;

use super::allocator::tests::{claim, count, gpu_class, gpus, local, req};
use super::*;
use crate::cache::Cache;
use crate::framework::{Code, Framework, NominatedPods, Registry};
use crate::schedule_one::{Decision, SchedulingAlgorithm, assume_decision, schedule_one};
use crate::types::dra::ClaimAllocation;

/// A pod whose entries each name an existing claim (`<entry>` -> claim `<entry>`).
pub(super) fn with_claims(names: &[&str]) -> PodInfo {
    pod_named("p", names)
}

fn pod_named(pod: &str, claims: &[&str]) -> PodInfo {
    let claims: Vec<k8s::PodResourceClaim> = claims
        .iter()
        .map(|n| k8s::PodResourceClaim {
            name: n.to_string(),
            resource_claim_name: Some(n.to_string()),
            ..Default::default()
        })
        .collect();
    PodInfo::test("ns", pod)
        .edit(|p| p.spec.as_mut().unwrap().resource_claims = Some(claims))
        .build()
}

/// A pod with one claim from template `tmpl`, named in its status as `generated` if given.
fn templated(generated: Option<&str>) -> PodInfo {
    PodInfo::test("ns", "p")
        .edit(|p| {
            p.spec.as_mut().unwrap().resource_claims = Some(vec![k8s::PodResourceClaim {
                name: "gpu".into(),
                resource_claim_template_name: Some("tmpl".into()),
                ..Default::default()
            }]);
            if let Some(g) = generated {
                p.status.get_or_insert_default().resource_claim_statuses =
                    Some(vec![k8s::PodResourceClaimStatus {
                        name: "gpu".into(),
                        resource_claim_name: Some(g.into()),
                    }]);
            }
        })
        .build()
}

fn node_a_b() -> Vec<NodeInfo> {
    vec![
        NodeInfo::test("n1").pods(10).build(),
        NodeInfo::test("n2").pods(10).build(),
    ]
}

pub(super) fn snapshot_with(served: bool, objects: DraObjects) -> Snapshot {
    let mut s = Snapshot::from_node_infos(node_a_b()).with_dra_api_served(served);
    s.dra = objects;
    s
}

/// Two GPUs on n1, none on n2; claims `a`, `b`, `c` of one GPU each.
pub(super) fn cluster() -> DraObjects {
    let mut o = DraObjects::default();
    o.update_slice(&local("n1", gpus(2)));
    o.update_class(&gpu_class());
    for c in ["a", "b", "c"] {
        o.update_claim(&claim(c, vec![req("r", "gpu")]));
    }
    o
}

/// The default profile, or the first profile of `yaml` (shared with extended_tests.rs).
pub(super) fn framework(yaml: Option<&str>) -> Framework {
    let loaded = match yaml {
        None => crate::config::from_flags(None, None).unwrap(),
        Some(y) => crate::config::load_str(y, "test.yaml").unwrap(),
    };
    Framework::new(&loaded.profiles[0], &Registry::in_tree()).unwrap()
}

/// One whole scheduling cycle of `pod` (shared with extended_tests.rs).
pub(super) fn run(fw: &Framework, pod: &PodInfo, snap: &Snapshot) -> Decision {
    let mut alg = SchedulingAlgorithm::new(0, 7);
    schedule_one(
        fw,
        &mut alg,
        &Arc::new(pod.clone()),
        snap,
        &NominatedPods::new(),
    )
}

/// Runs a whole cycle and returns the Unschedulable message; panics on any other decision.
fn rejected(fw: &Framework, pod: &PodInfo, snap: &Snapshot) -> (String, bool) {
    match run(fw, pod, snap) {
        Decision::Unschedulable {
            message,
            resolvable,
            ..
        } => (message, resolvable),
        other => panic!("want Unschedulable: {other:?}"),
    }
}

fn bound(d: Decision) -> (String, Vec<ClaimStatusWrite>) {
    match d {
        Decision::Bind { node, state, .. } => (
            node,
            decided_claim_writes(&state)
                .map(<[_]>::to_vec)
                .unwrap_or_default(),
        ),
        other => panic!("want Bind: {other:?}"),
    }
}

fn devices(w: &ClaimStatusWrite) -> Vec<String> {
    w.allocation
        .as_ref()
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
        .map(|r| r.device.clone())
        .collect()
}

/// (case, pod, API served, want: None = skip, Some(code, message))
type PreFilterCase = (&'static str, PodInfo, bool, Option<(Code, String)>);

#[test]
fn pre_filter_cases() {
    let mut objects = cluster();
    let mut deleting = claim("deleting", vec![req("r", "gpu")]);
    deleting.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()),
    );
    objects.update_claim(&deleting);
    objects.update_claim(&claim("no-class", vec![req("r", "missing")]));
    objects.update_claim(&claim(
        "unknown",
        vec![dra::DeviceRequest {
            name: "r".into(),
            ..Default::default()
        }],
    ));
    let mut full = claim("full", vec![req("r", "gpu")]);
    full.status = Some(dra::ResourceClaimStatus {
        allocation: Some(Default::default()),
        reserved_for: Some(
            (0..256)
                .map(|i| dra::ResourceClaimConsumerReference {
                    resource: "pods".into(),
                    name: format!("p{i}"),
                    uid: format!("u{i}"),
                    ..Default::default()
                })
                .collect(),
        ),
        ..Default::default()
    });
    objects.update_claim(&full);
    let mut foreign = claim("p-gpu-x1", vec![req("r", "gpu")]);
    foreign.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: "other".into(),
            uid: "uid-other".into(),
            controller: Some(true),
            ..Default::default()
        },
    ]);
    objects.update_claim(&foreign);

    let cases: Vec<PreFilterCase> = vec![
        ("no claims: plugin skips", with_claims(&[]), true, None),
        (
            "no claims, no DRA API: skips too",
            with_claims(&[]),
            false,
            None,
        ),
        (
            "claims, server without resource.k8s.io/v1",
            with_claims(&["a"]),
            false,
            Some((Code::UnschedulableAndUnresolvable, API_NOT_SERVED.into())),
        ),
        (
            "claim missing",
            with_claims(&["a", "gone"]),
            true,
            Some((
                Code::UnschedulableAndUnresolvable,
                "resourceclaim.resource.k8s.io \"gone\" not found".into(),
            )),
        ),
        (
            "claim deleting",
            with_claims(&["deleting"]),
            true,
            Some((
                Code::UnschedulableAndUnresolvable,
                "resourceclaim \"deleting\" is being deleted".into(),
            )),
        ),
        (
            "template claim not created yet",
            templated(None),
            true,
            Some((
                Code::UnschedulableAndUnresolvable,
                "pod \"ns/p\": ResourceClaim not created yet".into(),
            )),
        ),
        (
            "generated claim owned by another pod",
            templated(Some("p-gpu-x1")),
            true,
            Some((
                Code::UnschedulableAndUnresolvable,
                "ResourceClaim ns/p-gpu-x1 was not created for pod ns/p (pod is not owner)".into(),
            )),
        ),
        (
            "reservedFor full",
            with_claims(&["full"]),
            true,
            Some((Code::UnschedulableAndUnresolvable, CLAIM_IN_USE.into())),
        ),
        (
            "class missing",
            with_claims(&["no-class"]),
            true,
            Some((
                Code::UnschedulableAndUnresolvable,
                "request r: device class missing does not exist".into(),
            )),
        ),
        (
            "unknown request type",
            with_claims(&["unknown"]),
            true,
            Some((
                Code::UnschedulableAndUnresolvable,
                "resource claim ns/unknown, request r: unknown request type".into(),
            )),
        ),
        (
            "allocatable",
            with_claims(&["a", "b"]),
            true,
            Some((Code::Success, String::new())),
        ),
    ];
    for (name, pod, served, want) in cases {
        let snap = snapshot_with(served, objects.clone());
        let (r, s) = DynamicResources::default().pre_filter(&mut CycleState::new(), &pod, &snap);
        assert!(r.is_none(), "{name}");
        match want {
            None => assert!(s.is_skip(), "{name}: {s}"),
            Some((code, msg)) => {
                assert_eq!(s.code(), code, "{name}: {s}");
                assert_eq!(s.message(), msg, "{name}");
            }
        }
    }
}

#[test]
fn pre_enqueue_waits_for_the_generated_claim() {
    let s = DynamicResources::default().pre_enqueue(&templated(None));
    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(s.message(), "pod \"ns/p\": ResourceClaim not created yet");
    assert!(
        DynamicResources::default()
            .pre_enqueue(&templated(Some("p-gpu-1")))
            .is_success()
    );
    assert!(
        DynamicResources::default()
            .pre_enqueue(&with_claims(&["a"]))
            .is_success()
    );
    let neither = PodInfo::test("ns", "p")
        .edit(|p| {
            p.spec.as_mut().unwrap().resource_claims = Some(vec![k8s::PodResourceClaim {
                name: "x".into(),
                ..Default::default()
            }])
        })
        .build();
    assert_eq!(
        DynamicResources::default().pre_enqueue(&neither).message(),
        "pod \"ns/p\": resource claim reference not supported"
    );
    // The status update naming the claim is the event that retries the pod.
    let a = crate::framework::pod_update_actions(&templated(None), &templated(Some("g")));
    assert!(a.intersects(ActionType::UPDATE_POD_GENERATED_RESOURCE_CLAIM));
}

#[test]
fn a_claim_is_allocated_and_reserved_by_the_decision() {
    let fw = framework(None);
    let mut o = cluster();
    // A generated claim owned by the pod.
    let mut owned = claim("p-gpu-1", vec![count(req("r", "gpu"), 2)]);
    owned.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: "p".into(),
            uid: "uid-ns-p".into(),
            controller: Some(true),
            ..Default::default()
        },
    ]);
    o.update_claim(&owned);
    let snap = snapshot_with(true, o);
    let (node, writes) = bound(run(&fw, &templated(Some("p-gpu-1")), &snap));
    assert_eq!(node, "n1", "only n1 has the devices");
    assert_eq!(writes.len(), 1);
    let w = &writes[0];
    assert_eq!(
        (w.name.as_str(), w.resource_version.as_str()),
        ("p-gpu-1", "1")
    );
    assert_eq!(devices(w), vec!["gpu-0", "gpu-1"]);
    assert_eq!(w.reserved_for, vec![ConsumerRef::pod("p", "uid-ns-p")]);
    assert!(w.add_finalizer);
    let sel = w
        .allocation
        .as_ref()
        .unwrap()
        .node_selector
        .as_ref()
        .unwrap();
    assert_eq!(
        sel.node_selector_terms[0].match_fields.as_ref().unwrap()[0].values,
        Some(vec!["n1".into()])
    );
}

#[test]
fn concurrent_pods_never_get_the_same_device() {
    let fw = framework(None);
    let mut cache = Cache::new();
    for n in ["n1", "n2"] {
        cache.add_node(&NodeInfo::test(n).pods(10).build_node());
    }
    cache.set_dra_api_served(true);
    *cache.dra_mut() = cluster();
    let mut got = Vec::new();
    for (pod, c) in [("p1", "a"), ("p2", "b")] {
        let snap = cache.snapshot();
        let pod = Arc::new(pod_named(pod, &[c]));
        let mut alg = SchedulingAlgorithm::new(0, 7);
        match schedule_one(&fw, &mut alg, &pod, &snap, &NominatedPods::new()) {
            Decision::Bind {
                node, pod, state, ..
            } => {
                let w = decided_claim_writes(&state).unwrap().to_vec();
                got.extend(w.iter().flat_map(devices));
                assume_decision(&mut cache, pod, &node, &state).unwrap();
                assert!(cache.snapshot().dra().is_assumed("ns", c));
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(got, vec!["gpu-0", "gpu-1"]);
    let (message, resolvable) = rejected(&fw, &pod_named("p3", &["c"]), &cache.snapshot());
    assert!(
        message.starts_with("0/2 nodes are available: 2 cannot allocate all claims. still not schedulable, preemption: "),
        "{message}"
    );
    assert!(!resolvable);

    // p2's binding failed: its device is free again.
    let w = ClaimStatusWrite {
        namespace: "ns".into(),
        name: "b".into(),
        uid: String::new(),
        resource_version: "1".into(),
        allocation: None,
        reserved_for: Vec::new(),
        add_finalizer: false,
        finalizers: Vec::new(),
        group: None,
        create: None,
    };
    cache.dra_mut().forget_claim_writes(&[w]);
    let (_, writes) = bound(run(&fw, &pod_named("p3", &["c"]), &cache.snapshot()));
    assert_eq!(devices(&writes[0]), vec!["gpu-1"]);
}

#[test]
fn shared_allocated_claim_constrains_the_pod_and_gains_a_consumer() {
    let fw = framework(None);
    let mut o = cluster();
    let mut shared = claim("shared", vec![req("r", "gpu")]);
    shared.status = Some(dra::ResourceClaimStatus {
        allocation: Some(dra::AllocationResult {
            node_selector: Some(k8s::NodeSelector {
                node_selector_terms: vec![k8s::NodeSelectorTerm {
                    match_fields: Some(vec![k8s::NodeSelectorRequirement {
                        key: "metadata.name".into(),
                        operator: "In".into(),
                        values: Some(vec!["n2".into()]),
                    }]),
                    ..Default::default()
                }],
            }),
            ..Default::default()
        }),
        reserved_for: Some(vec![dra::ResourceClaimConsumerReference {
            resource: "pods".into(),
            name: "other".into(),
            uid: "uid-other".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    o.update_claim(&shared);
    let snap = snapshot_with(true, o);
    let (node, writes) = bound(run(&fw, &with_claims(&["shared"]), &snap));
    assert_eq!(node, "n2");
    assert_eq!(writes[0].allocation, None, "already allocated");
    assert!(!writes[0].add_finalizer);
    assert_eq!(
        writes[0].reserved_for,
        vec![
            ConsumerRef::pod("other", "uid-other"),
            ConsumerRef::pod("p", "uid-ns-p")
        ]
    );
    // Shared claim on n2 plus a new claim whose devices are only on n1: nowhere.
    let (message, _) = rejected(&fw, &with_claims(&["shared", "a"]), &snap);
    assert!(
        message.starts_with(
            "0/2 nodes are available: 1 cannot allocate all claims, 1 resourceclaim not available on the node."
        ),
        "{message}"
    );

    // Already reserved for this pod: nothing to write.
    let mut o = cluster();
    let mut mine = shared.clone();
    mine.status.as_mut().unwrap().reserved_for = Some(vec![dra::ResourceClaimConsumerReference {
        resource: "pods".into(),
        name: "p".into(),
        uid: "uid-ns-p".into(),
        ..Default::default()
    }]);
    o.update_claim(&mine);
    let (node, writes) = bound(run(&fw, &with_claims(&["shared"]), &snapshot_with(true, o)));
    assert_eq!((node.as_str(), writes.len()), ("n2", 0));
}

#[test]
fn a_claim_being_written_for_another_pod_makes_the_pod_wait() {
    let mut o = cluster();
    o.assume_claim_writes(&[ClaimStatusWrite {
        namespace: "ns".into(),
        name: "a".into(),
        uid: "uid-a".into(),
        resource_version: "1".into(),
        allocation: None,
        reserved_for: vec![ConsumerRef::pod("p1", "uid-p1")],
        add_finalizer: false,
        finalizers: Vec::new(),
        group: None,
        create: None,
    }]);
    let (_, s) = DynamicResources::default().pre_filter(
        &mut CycleState::new(),
        &with_claims(&["a"]),
        &snapshot_with(true, o),
    );
    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(
        s.message(),
        "resource claim ns/a is in the process of being allocated"
    );
}

#[test]
fn selector_errors_fail_the_attempt_with_the_expression_named() {
    let fw = framework(None);
    let mut o = cluster();
    o.update_class(&super::allocator::tests::class(
        "gpu",
        &["device.driver =="],
    ));
    match run(&fw, &with_claims(&["a"]), &snapshot_with(true, o)) {
        Decision::Error { message } => {
            assert!(
                message.contains("class gpu: selector #0: CEL compile error"),
                "{message}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn default_profile_never_binds_without_the_api() {
    let fw = framework(None);
    let (message, resolvable) =
        rejected(&fw, &with_claims(&["a"]), &snapshot_with(false, cluster()));
    assert!(
        message.starts_with(&format!("0/2 nodes are available: {API_NOT_SERVED}.")),
        "{message}"
    );
    assert!(!resolvable, "preemption cannot help: {message}");
    // The same pod without claims schedules: the rejection is about the claims only.
    let d = run(
        &fw,
        &PodInfo::test("ns", "p").build(),
        &snapshot_with(false, cluster()),
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
        let (message, resolvable) =
            rejected(&fw, &with_claims(&["a"]), &snapshot_with(served, cluster()));
        let want = disabled_in_profile("no-dra");
        assert!(
            message.starts_with(&format!("0/2 nodes are available: {want}.")),
            "{message}"
        );
        assert!(!resolvable);
    }
    let d = run(
        &fw,
        &PodInfo::test("ns", "p").build(),
        &snapshot_with(true, cluster()),
    );
    assert!(matches!(d, Decision::Bind { .. }), "{d:?}");
}

#[test]
fn claim_slice_class_node_and_pod_changes_requeue_the_pod() {
    let fw = framework(None);
    let rejecting: BTreeSet<&'static str> = [DYNAMIC_RESOURCES].into_iter().collect();
    let mut events = vec![
        ClusterEvent::new(EventResource::Node, ActionType::ADD),
        ClusterEvent::new(EventResource::Node, ActionType::UPDATE_NODE_LABEL),
        ClusterEvent::new(
            EventResource::UnscheduledPod,
            ActionType::UPDATE_POD_GENERATED_RESOURCE_CLAIM,
        ),
    ];
    for resource in [
        EventResource::ResourceClaim,
        EventResource::ResourceSlice,
        EventResource::DeviceClass,
    ] {
        for action in [ActionType::ADD, ActionType::UPDATE] {
            events.push(ClusterEvent::new(resource, action));
        }
    }
    // A claim deleted frees its devices (upstream's newest registration).
    events.push(ClusterEvent::new(
        EventResource::ResourceClaim,
        ActionType::DELETE,
    ));
    for event in events {
        let who: Vec<_> = fw
            .events_to_register()
            .interested(&event, &rejecting)
            .collect();
        assert_eq!(who, vec![DYNAMIC_RESOURCES], "{event:?}");
    }
    let delete = ClusterEvent::new(EventResource::ResourceSlice, ActionType::DELETE);
    assert_eq!(
        fw.events_to_register()
            .interested(&delete, &rejecting)
            .count(),
        0
    );
}

#[test]
fn cache_hands_claims_and_the_served_flag_to_snapshots() {
    let mut cache = Cache::new();
    assert!(
        !cache.snapshot().dra_api_served(),
        "not served until discovery says so"
    );
    cache.set_dra_api_served(true);
    cache.dra_mut().update_claim(&claim("gpu-claim", vec![]));
    let mut snap = cache.snapshot();
    assert!(snap.dra_api_served());
    assert!(snap.dra().claim("ns", "gpu-claim").is_some());
    cache.dra_mut().remove_claim("ns", "gpu-claim");
    cache.update_snapshot(&mut snap);
    assert!(snap.dra().claim("ns", "gpu-claim").is_none());
}

#[test]
fn preemption_frees_the_devices_of_victims_claims() {
    let fw = framework(None);
    let mut o = cluster();
    // n1's two GPUs are held by claims reserved for low-priority pods running there.
    for (c, dev, holder) in [
        ("held-0", "gpu-0", "victim-0"),
        ("held-1", "gpu-1", "victim-1"),
    ] {
        let mut held = claim(c, vec![req("r", "gpu")]);
        held.status = Some(dra::ResourceClaimStatus {
            allocation: Some(dra::AllocationResult {
                devices: Some(dra::DeviceAllocationResult {
                    results: Some(vec![dra::DeviceRequestAllocationResult {
                        request: "r".into(),
                        driver: super::allocator::tests::DRIVER.into(),
                        pool: "n1".into(),
                        device: dev.into(),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            reserved_for: Some(vec![dra::ResourceClaimConsumerReference {
                resource: "pods".into(),
                name: holder.into(),
                uid: format!("uid-ns-{holder}"),
                ..Default::default()
            }]),
            ..Default::default()
        });
        o.update_claim(&held);
    }
    let mut n1 = NodeInfo::test("n1").pods(10).build();
    for (i, holder) in ["victim-0", "victim-1"].iter().enumerate() {
        let mut p = pod_named(holder, &[&format!("held-{i}")]);
        p.node_name = Some("n1".into());
        n1.add_pod(Arc::new(p));
    }
    let mut snap = Snapshot::from_node_infos(vec![n1, NodeInfo::test("n2").pods(10).build()])
        .with_dra_api_served(true);
    snap.dra = o;
    let preemptor = with_claims(&["a"]);
    // As upstream (1.34), a node whose devices are all taken is unresolvable: preemption
    // does not try it.
    match run(&fw, &preemptor, &snap) {
        Decision::Unschedulable {
            message,
            resolvable,
            ..
        } => {
            assert!(
                message.starts_with("0/2 nodes are available: 2 cannot allocate all claims."),
                "{message}"
            );
            assert!(!resolvable);
        }
        other => panic!("{other:?}"),
    }
    // Where preemption does evaluate n1 (another plugin's reason), removing a victim frees
    // the devices of the claims reserved only for it, and adding it back takes them again.
    let mut state = CycleState::new();
    let (_, s) = DynamicResources::default().pre_filter(&mut state, &preemptor, &snap);
    assert!(s.is_success(), "{s}");
    let n1 = snap.get("n1").unwrap().clone();
    assert_eq!(
        DynamicResources::default()
            .filter(&state, &preemptor, &n1)
            .message(),
        CANNOT_ALLOCATE_ALL_CLAIMS
    );
    let victim = n1.pods[0].clone();
    let mut without = n1.as_ref().clone();
    without.remove_pod(victim.key()).unwrap();
    assert!(
        DynamicResources::default()
            .remove_pod(&mut state, &preemptor, &victim, &without)
            .is_success()
    );
    assert!(
        DynamicResources::default()
            .filter(&state, &preemptor, &without)
            .is_success()
    );
    assert!(
        DynamicResources::default()
            .add_pod(&mut state, &preemptor, &victim, &n1)
            .is_success()
    );
    assert_eq!(
        DynamicResources::default()
            .filter(&state, &preemptor, &n1)
            .message(),
        CANNOT_ALLOCATE_ALL_CLAIMS
    );
}

/// A clock that moves one second on every reading.
fn ticking() -> std::time::Instant {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    static TICKS: AtomicU64 = AtomicU64::new(0);
    *START.get_or_init(std::time::Instant::now)
        + std::time::Duration::from_secs(TICKS.fetch_add(1, Ordering::Relaxed))
}

/// `filterTimeout` (upstream DRASchedulerFilterTimeout): a search for devices that runs
/// past the limit on a node leaves that node unresolvable with upstream's message; without
/// a limit (`0s`) the same search finishes and the node fits.
#[test]
fn filter_timeout_stops_the_search_on_a_node() {
    let snap = snapshot_with(true, cluster());
    let pod = with_claims(&["a"]);
    let n1 = snap.get("n1").unwrap().clone();
    for (limit, want) in [
        (
            Some(std::time::Duration::from_millis(500)),
            Some(FILTER_TIMED_OUT),
        ),
        (Some(std::time::Duration::from_secs(3600)), None),
        (None, None),
    ] {
        let pl = DynamicResources::with_timeout(limit, ticking);
        let mut state = CycleState::new();
        assert!(pl.pre_filter(&mut state, &pod, &snap).1.is_success());
        let s = pl.filter(&state, &pod, &n1);
        match want {
            Some(m) => {
                assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{limit:?}");
                assert_eq!(s.message(), m);
            }
            None => assert!(s.is_success(), "{limit:?}: {s}"),
        }
    }
}

/// `filterTimeout` holds inside one selector evaluation too: a class whose selector walks
/// 50,000 elements (well under the cost limit) reads the clock hundreds of times while it
/// runs, so with a 60s limit and a clock that moves 1s per reading, the node times out in
/// the middle of the evaluation, not after it.
#[test]
fn filter_timeout_stops_a_long_selector_evaluation() {
    let mut o = cluster();
    let walk = format!(
        "[{}].all(x, [{}].all(y, true))",
        vec!["1"; 50].join(","),
        vec!["1"; 1_000].join(",")
    );
    o.update_class(&super::allocator::tests::class("gpu", &[&walk]));
    let snap = snapshot_with(true, o);
    let pod = with_claims(&["a"]);
    let n1 = snap.get("n1").unwrap().clone();
    for (limit, want) in [
        (
            Some(std::time::Duration::from_secs(60)),
            Some(FILTER_TIMED_OUT),
        ),
        (None, None),
    ] {
        let pl = DynamicResources::with_timeout(limit, ticking);
        let mut state = CycleState::new();
        assert!(pl.pre_filter(&mut state, &pod, &snap).1.is_success());
        let s = pl.filter(&state, &pod, &n1);
        match want {
            Some(m) => assert_eq!(s.message(), m, "{limit:?}"),
            None => assert!(s.is_success(), "{limit:?}: {s}"),
        }
    }
}

/// The factory reads `filterTimeout` from the profile's args: `0s` turns the limit off,
/// anything else is the limit; no args is upstream's default of 10s.
#[test]
fn filter_timeout_comes_from_the_args() {
    use crate::config::DynamicResourcesArgs;
    let args = |t: u64| {
        PluginArgs::DynamicResources(DynamicResourcesArgs {
            filter_timeout: std::time::Duration::from_secs(t),
            binding_timeout: std::time::Duration::from_secs(600),
        })
    };
    let timeout = |a: Option<&PluginArgs>| DynamicResources::from_args(a).filter_timeout;
    assert_eq!(timeout(Some(&args(0))), None);
    assert_eq!(
        timeout(Some(&args(2))),
        Some(std::time::Duration::from_secs(2))
    );
    assert_eq!(timeout(None), Some(std::time::Duration::from_secs(10)));
}

/// A claim preferring two GPUs, else one (`firstAvailable`).
fn two_else_one() -> dra::ResourceClaim {
    let sub = |name: &str, n: i64| dra::DeviceSubRequest {
        name: name.into(),
        device_class_name: "gpu".into(),
        count: Some(n),
        ..Default::default()
    };
    claim(
        "pair",
        vec![dra::DeviceRequest {
            name: "r".into(),
            first_available: Some(vec![sub("two", 2), sub("one", 1)]),
            ..Default::default()
        }],
    )
}

/// Score (upstream, with DRAPrioritizedList): a node where an earlier `firstAvailable`
/// subrequest can be satisfied scores higher (8 for the first, 7 for the second, then
/// normalised to 0..100), so the pod goes where it gets its first choice; claims without
/// `firstAvailable` score 0 everywhere.
#[test]
fn score_prefers_nodes_with_earlier_subrequests() {
    let mut o = DraObjects::default();
    o.update_slice(&local("n1", gpus(1)));
    o.update_slice(&local("n2", gpus(2)));
    o.update_class(&gpu_class());
    o.update_claim(&two_else_one());
    o.update_claim(&claim("plain", vec![req("r", "gpu")]));
    let snap = snapshot_with(true, o);
    let pl = DynamicResources::default();
    let scores = |pod: &PodInfo| {
        let mut state = CycleState::new();
        assert!(pl.pre_filter(&mut state, pod, &snap).1.is_success());
        let nodes = ["n1", "n2"].map(|n| snap.get(n).unwrap().clone());
        for n in &nodes {
            assert!(pl.filter(&state, pod, n).is_success());
        }
        let raw: Vec<i64> = nodes
            .iter()
            .map(|n| pl.score(&state, pod, n).unwrap())
            .collect();
        let mut normalized: Vec<NodeScore> = raw
            .iter()
            .zip(["n1", "n2"])
            .map(|(s, name)| NodeScore { name, score: *s })
            .collect();
        assert!(
            pl.normalize_scores(&state, pod, &mut normalized)
                .is_success()
        );
        (raw, normalized.iter().map(|s| s.score).collect::<Vec<_>>())
    };
    assert_eq!(scores(&with_claims(&["pair"])), (vec![7, 8], vec![87, 100]));
    assert_eq!(scores(&with_claims(&["plain"])), (vec![0, 0], vec![0, 0]));
    // A pod without claims: nothing to score.
    let none = PodInfo::test("ns", "p").build();
    assert_eq!(
        pl.score(&CycleState::new(), &none, snap.get("n1").unwrap()),
        Ok(0)
    );
    // Through the default profile, the pod lands where it gets two GPUs.
    let (node, _) = bound(run(&framework(None), &with_claims(&["pair"]), &snap));
    assert_eq!(node, "n2");
}

/// The score reads the allocation of claims allocated already and the node's allocation
/// for the others, in order; too few allocations is an internal error, not a panic.
#[test]
fn first_available_score_of_allocated_and_found_claims() {
    let mut o = DraObjects::default();
    o.update_class(&gpu_class());
    o.update_claim(&two_else_one());
    let pending = o.claim("ns", "pair").unwrap().clone();
    let result = |request: &str| dra::AllocationResult {
        devices: Some(dra::DeviceAllocationResult {
            results: Some(vec![dra::DeviceRequestAllocationResult {
                request: request.into(),
                driver: "d".into(),
                pool: "p".into(),
                device: "x".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut allocated = (*pending).clone();
    allocated.allocation = Some(ClaimAllocation::from_result(&result("r/one")));
    let allocated = Arc::new(allocated);
    let claims = [allocated.clone(), pending.clone()];
    assert_eq!(
        first_available_score(&claims, &[result("r/two")]),
        Ok(7 + 8)
    );
    assert!(
        first_available_score(&[pending.clone(), pending], &[result("r/two")])
            .unwrap_err()
            .contains("smaller than number of claims")
    );
}
