//! PostFilter: which claim (if any) is handed to the controller for deallocation.

use k8s_openapi::api::resource::v1 as dra;

use super::allocator::tests::{claim, count, only_node, req};
use super::tests::{cluster, framework, run, snapshot_with, with_claims};
use super::*;
use crate::schedule_one::Decision;

/// Claim `name` (one GPU request), allocated for node `node` only, reserved for `users`
/// (pod name, uid).
fn allocated_for(name: &str, node: &str, users: &[(&str, &str)]) -> dra::ResourceClaim {
    let mut c = claim(name, vec![req("r", "gpu")]);
    c.metadata.resource_version = Some("42".into());
    c.status = Some(dra::ResourceClaimStatus {
        allocation: Some(dra::AllocationResult {
            node_selector: Some(only_node(node)),
            ..Default::default()
        }),
        reserved_for: (!users.is_empty()).then(|| {
            users
                .iter()
                .map(|(n, u)| dra::ResourceClaimConsumerReference {
                    resource: "pods".into(),
                    name: n.to_string(),
                    uid: u.to_string(),
                    ..Default::default()
                })
                .collect()
        }),
        ..Default::default()
    });
    c
}

/// The failed attempt's message, claim to deallocate and nomination.
fn failed(pod: &PodInfo, objects: DraObjects) -> (String, Option<ClaimDeallocation>, bool) {
    match run(&framework(None), pod, &snapshot_with(true, objects)) {
        Decision::Unschedulable {
            message,
            deallocate,
            nomination,
            ..
        } => {
            let nominates = nomination.is_some_and(|n| n.nominated_node_name.is_some());
            (message, deallocate, nominates)
        }
        other => panic!("want Unschedulable: {other:?}"),
    }
}

#[test]
fn a_claim_allocated_for_no_usable_node_and_reserved_for_nobody_is_deallocated() {
    let mut o = cluster();
    o.update_claim(&allocated_for("gone", "n3", &[]));
    let (message, deallocate, nominates) = failed(&with_claims(&["gone"]), o);
    assert_eq!(
        deallocate,
        Some(ClaimDeallocation {
            delete: false,
            namespace: "ns".into(),
            name: "gone".into(),
            uid: "uid-gone".into(),
            resource_version: "42".into(),
        })
    );
    assert_eq!(
        message,
        "0/2 nodes are available: 2 resourceclaim not available on the node. \
         deallocation of ResourceClaim completed, preemption: 0/2 nodes are available: \
         2 Preemption is not helpful for scheduling.."
    );
    assert!(!nominates, "preemption's outcome is untouched");
}

#[test]
fn a_claim_reserved_only_for_the_pod_itself_is_deallocated_too() {
    let mut o = cluster();
    o.update_claim(&allocated_for("gone", "n3", &[("p", "uid-ns-p")]));
    let (message, deallocate, _) = failed(&with_claims(&["gone"]), o);
    assert_eq!(deallocate.map(|d| d.name), Some("gone".to_string()));
    assert!(message.contains(DEALLOCATION_COMPLETED), "{message}");
}

#[test]
fn a_claim_another_pod_uses_is_left_alone() {
    for users in [
        vec![("other", "uid-other")],
        vec![("p", "uid-ns-p"), ("other", "uid-other")],
    ] {
        let mut o = cluster();
        o.update_claim(&allocated_for("busy", "n3", &users));
        let (message, deallocate, _) = failed(&with_claims(&["busy"]), o);
        assert_eq!(deallocate, None, "{users:?}");
        assert!(
            message.contains(". still not schedulable, preemption: "),
            "{message}"
        );
    }
}

#[test]
fn claims_that_did_not_block_any_node_are_left_alone() {
    // The claim is allocated for n1, usable there; the pod's other claim finds no devices
    // anywhere, so nothing allocated stood in the way.
    let mut o = cluster();
    o.update_claim(&allocated_for("here", "n1", &[]));
    o.update_claim(&claim("many", vec![count(req("r", "gpu"), 3)]));
    let (message, deallocate, _) = failed(&with_claims(&["here", "many"]), o);
    assert_eq!(deallocate, None);
    assert!(message.contains(STILL_NOT_SCHEDULABLE), "{message}");
}

#[test]
fn without_claims_in_the_attempt_there_is_nothing_to_deallocate() {
    // PreFilter rejected the pod: its claim does not exist.
    let (message, deallocate, _) = failed(&with_claims(&["missing"]), cluster());
    assert_eq!(deallocate, None);
    assert!(
        message.contains(". no new claims to deallocate, preemption: "),
        "{message}"
    );
}

#[test]
fn pods_without_claims_get_no_post_filter_message() {
    let pod = PodInfo::test("ns", "p")
        .node_selector("zone", "nowhere")
        .build();
    let (message, deallocate, _) = failed(&pod, cluster());
    assert_eq!(deallocate, None);
    assert_eq!(
        message,
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. \
         preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.."
    );
}
