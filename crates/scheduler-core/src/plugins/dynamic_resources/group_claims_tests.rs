//! PodGroup claims (DRAWorkloadResourceClaims): a pod's entry matching its PodGroup's is the
//! group's claim, reserved for the group once and shared by its members.

use std::sync::Arc;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::resource::v1 as dra;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::json;

use super::allocator::tests::{claim, req};
use super::tests::{cluster, framework, run, snapshot_with, with_claims};
use super::*;
use crate::cache::Cache;
use crate::framework::{Code, NominatedPods};
use crate::schedule_one::{Decision, SchedulingAlgorithm, assume_decision, schedule_one};
use crate::types::dra::RESERVED_FOR_MAX_SIZE;
use crate::types::pod_group::GroupApi;

/// The Workload API PodGroup `ns/train` (uid `pg-train`) with these `spec.resourceClaims`
/// and `status.resourceClaimStatuses`.
fn train(claims: serde_json::Value, statuses: serde_json::Value) -> PodGroupInfo {
    PodGroupInfo::from_json(
        GroupApi::Workload,
        &json!({
            "metadata": {"name": "train", "namespace": "ns", "uid": "pg-train"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "resourceClaims": claims},
            "status": {"resourceClaimStatuses": statuses}
        }),
    )
    .unwrap()
}

/// A pod of `train` with one entry `entry`: `resourceClaimName` or, with `template`,
/// `resourceClaimTemplateName`.
fn member(pod: &str, entry: &str, source: &str, template: bool) -> PodInfo {
    PodInfo::test("ns", pod)
        .edit(|p| {
            let spec = p.spec.as_mut().unwrap();
            spec.scheduling_group = Some(k8s::PodSchedulingGroup {
                pod_group_name: Some("train".into()),
            });
            let mut c = k8s::PodResourceClaim {
                name: entry.into(),
                ..Default::default()
            };
            if template {
                c.resource_claim_template_name = Some(source.into());
            } else {
                c.resource_claim_name = Some(source.into());
            }
            spec.resource_claims = Some(vec![c]);
        })
        .build()
}

fn pg() -> ConsumerRef {
    ConsumerRef::pod_group("train", "pg-train")
}

fn bound_writes(d: Decision) -> (String, Vec<ClaimStatusWrite>) {
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

fn unschedulable(d: Decision) -> String {
    match d {
        Decision::Unschedulable { message, .. } => message,
        other => panic!("want Unschedulable: {other:?}"),
    }
}

/// A claim allocated on n1 (node selector) with these consumers.
fn allocated_on_n1(name: &str, consumers: Vec<ConsumerRef>) -> dra::ResourceClaim {
    let mut c = claim(name, vec![req("r", "gpu")]);
    c.status = Some(dra::ResourceClaimStatus {
        allocation: Some(dra::AllocationResult {
            node_selector: Some(k8s::NodeSelector {
                node_selector_terms: vec![k8s::NodeSelectorTerm {
                    match_fields: Some(vec![k8s::NodeSelectorRequirement {
                        key: "metadata.name".into(),
                        operator: "In".into(),
                        values: Some(vec!["n1".into()]),
                    }]),
                    ..Default::default()
                }],
            }),
            ..Default::default()
        }),
        reserved_for: Some(consumers.iter().map(ConsumerRef::to_k8s).collect()),
        ..Default::default()
    });
    c
}

#[test]
fn a_matching_entry_reserves_the_claim_for_the_pod_group() {
    let fw = framework(None);
    let mut o = cluster();
    o.update_pod_group(&train(
        json!([{"name": "a", "resourceClaimName": "a"}]),
        json!([]),
    ));
    let snap = snapshot_with(true, o.clone());
    let (node, writes) = bound_writes(run(&fw, &member("p", "a", "a", false), &snap));
    assert_eq!(node, "n1");
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].reserved_for, vec![pg()], "the group, not the pod");
    assert_eq!(
        writes[0].group,
        Some(GroupWrite {
            consumer: pg(),
            shared: false
        })
    );
    assert!(writes[0].allocation.is_some());

    // Same entry name, another claim: the pod's own claim, reserved for the pod.
    let (_, writes) = bound_writes(run(&fw, &member("p", "a", "b", false), &snap));
    assert_eq!(
        writes[0].reserved_for,
        vec![ConsumerRef::pod("p", "uid-ns-p")]
    );
    assert_eq!(writes[0].group, None);

    // The feature gate off: every claim is the pod's own.
    let mut off = o;
    off.set_workload_claims(false);
    let snap = snapshot_with(true, off);
    let (_, writes) = bound_writes(run(&fw, &member("p", "a", "a", false), &snap));
    assert_eq!(
        writes[0].reserved_for,
        vec![ConsumerRef::pod("p", "uid-ns-p")]
    );
}

#[test]
fn a_claim_reserved_for_the_group_serves_every_member_past_the_256_limit() {
    let fw = framework(None);
    let mut o = cluster();
    o.update_pod_group(&train(
        json!([{"name": "a", "resourceClaimName": "a"}]),
        json!([]),
    ));
    let mut consumers: Vec<ConsumerRef> = (0..RESERVED_FOR_MAX_SIZE - 1)
        .map(|i| ConsumerRef::pod(&format!("o{i}"), &format!("uid-o{i}")))
        .collect();
    consumers.push(pg());
    o.update_claim(&allocated_on_n1("a", consumers));
    let snap = snapshot_with(true, o.clone());
    // A member: reserved through its group, nothing to write, placed where the claim is.
    let (node, writes) = bound_writes(run(&fw, &member("m", "a", "a", false), &snap));
    assert_eq!((node.as_str(), writes.len()), ("n1", 0));
    // Anyone else would need a 257th entry.
    let m = unschedulable(run(&fw, &with_claims(&["a"]), &snap));
    assert!(m.contains(CLAIM_IN_USE), "{m}");
    // A group claim reserved for 256 others (not the group) is refused the same way.
    let full: Vec<ConsumerRef> = (0..RESERVED_FOR_MAX_SIZE)
        .map(|i| ConsumerRef::pod(&format!("o{i}"), &format!("uid-o{i}")))
        .collect();
    o.update_claim(&allocated_on_n1("a", full));
    let m = unschedulable(run(
        &fw,
        &member("m", "a", "a", false),
        &snapshot_with(true, o),
    ));
    assert!(m.contains(CLAIM_IN_USE), "{m}");
}

#[test]
fn members_reuse_the_pending_allocation_of_their_group_claim() {
    let fw = framework(None);
    let mut cache = Cache::new();
    for n in ["n1", "n2"] {
        cache.add_node(&NodeInfo::test(n).pods(10).build_node());
    }
    cache.set_dra_api_served(true);
    *cache.dra_mut() = cluster();
    cache.dra_mut().update_pod_group(&train(
        json!([{"name": "a", "resourceClaimName": "a"}]),
        json!([]),
    ));
    let mut decided = Vec::new();
    for p in ["m1", "m2"] {
        let pod = Arc::new(member(p, "a", "a", false));
        let mut alg = SchedulingAlgorithm::new(0, 7);
        let snap = cache.snapshot();
        match schedule_one(&fw, &mut alg, &pod, &snap, &NominatedPods::new()) {
            Decision::Bind {
                node, pod, state, ..
            } => {
                assert_eq!(node, "n1", "{p}: where the allocation is");
                let w = decided_claim_writes(&state).unwrap().to_vec();
                assume_decision(&mut cache, Arc::clone(&pod), &node, &state).unwrap();
                decided.push(w);
            }
            other => panic!("{p}: {other:?}"),
        }
    }
    let (first, second) = (&decided[0][0], &decided[1][0]);
    assert_eq!(second.group.as_ref().map(|g| g.shared), Some(true));
    assert_eq!(second.allocation, first.allocation, "the same devices");
    assert_eq!(second.reserved_for, vec![pg()], "one entry for both");
    assert_eq!(second.resource_version, first.resource_version);

    // The informer's copy is still the unallocated claim (what a 409 is judged against).
    let reported = cache.dra().reported_claim("ns", "a").unwrap();
    assert!(reported.allocation.is_none());
    // A pod outside the group waits for the write, as for any claim being written.
    let snap = cache.snapshot();
    let (_, s) =
        DynamicResources::default().pre_filter(&mut CycleState::new(), &with_claims(&["a"]), &snap);
    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    // The second member's binding failed: the first one's allocation stays assumed.
    cache.dra_mut().forget_claim_writes(&decided[1]);
    let snap = cache.snapshot();
    assert!(snap.dra().is_assumed("ns", "a"));
    assert!(snap.dra().claim("ns", "a").unwrap().allocation.is_some());
    // And the first one's too: the claim is as the informer has it.
    cache.dra_mut().forget_claim_writes(&decided[0]);
    let snap = cache.snapshot();
    assert!(!snap.dra().is_assumed("ns", "a"));
    assert!(snap.dra().claim("ns", "a").unwrap().allocation.is_none());
}

/// A claim made by kube-controller-manager for the group's template: named by the group's
/// status, owned by the group; until then the pod waits with upstream's words.
#[test]
fn a_group_template_claim_comes_from_the_group_status() {
    let fw = framework(None);
    let claims = json!([{"name": "gpu", "resourceClaimTemplateName": "tmpl"}]);
    let pod = member("p", "gpu", "tmpl", true);
    // PreEnqueue leaves the claim's name to the group: the pod's status names nothing.
    assert!(DynamicResources::default().pre_enqueue(&pod).is_success());

    let mut o = cluster();
    o.update_pod_group(&train(claims.clone(), json!([])));
    let m = unschedulable(run(&fw, &pod, &snapshot_with(true, o.clone())));
    assert!(
        m.contains("PodGroup ns/train: ResourceClaim not created yet"),
        "{m}"
    );

    o.update_pod_group(&train(
        claims.clone(),
        json!([{"name": "gpu", "resourceClaimName": "train-gpu-x"}]),
    ));
    let mut made = claim("train-gpu-x", vec![req("r", "gpu")]);
    made.metadata.owner_references = Some(vec![meta::OwnerReference {
        api_version: "scheduling.k8s.io/v1beta1".into(),
        kind: "PodGroup".into(),
        name: "train".into(),
        uid: "pg-train".into(),
        controller: Some(true),
        ..Default::default()
    }]);
    o.update_claim(&made);
    let (_, writes) = bound_writes(run(&fw, &pod, &snapshot_with(true, o.clone())));
    assert_eq!(writes[0].name, "train-gpu-x");
    assert_eq!(writes[0].reserved_for, vec![pg()]);

    // Owned by someone else: refused, naming the group.
    made.metadata.owner_references.as_mut().unwrap()[0].name = "other".into();
    o.update_claim(&made);
    let m = unschedulable(run(&fw, &pod, &snapshot_with(true, o.clone())));
    assert!(
        m.contains("ResourceClaim ns/train-gpu-x was not created for PodGroup ns/train (PodGroup is not owner)"),
        "{m}"
    );

    // A status entry without a claim: nothing needed.
    o.update_pod_group(&train(claims, json!([{"name": "gpu"}])));
    let (_, writes) = bound_writes(run(&fw, &pod, &snapshot_with(true, o)));
    assert!(writes.is_empty());

    // Not in a Workload group: the pod's own template claim, which must be named first.
    let alone = PodInfo::test("ns", "p")
        .edit(|p| {
            p.spec.as_mut().unwrap().resource_claims = Some(vec![k8s::PodResourceClaim {
                name: "gpu".into(),
                resource_claim_template_name: Some("tmpl".into()),
                ..Default::default()
            }])
        })
        .build();
    assert_eq!(
        DynamicResources::default().pre_enqueue(&alone).message(),
        "pod \"ns/p\": ResourceClaim not created yet"
    );
}

#[test]
fn a_pod_group_update_naming_the_claim_retries_its_members() {
    let pod = member("p", "gpu", "tmpl", true);
    let claims = json!([{"name": "gpu", "resourceClaimTemplateName": "tmpl"}]);
    let before = train(claims.clone(), json!([]));
    let after = train(
        claims,
        json!([{"name": "gpu", "resourceClaimName": "train-gpu-x"}]),
    );
    let event = ClusterEvent::new(EventResource::PodGroup, ActionType::UPDATE);
    let hint = |old: &PodGroupInfo, new: &PodGroupInfo| {
        DynamicResources::default().queueing_hint(
            &pod,
            &event,
            &crate::framework::EventObjects::PodGroup {
                old: Some(old),
                new,
            },
        )
    };
    assert_eq!(hint(&before, &after), crate::framework::QueueingHint::Queue);
    assert_eq!(
        hint(&after, &after),
        crate::framework::QueueingHint::QueueSkip
    );
    let mut other = after.clone();
    other.key.name = "other".into();
    assert_eq!(
        hint(&before, &other),
        crate::framework::QueueingHint::QueueSkip
    );
}
