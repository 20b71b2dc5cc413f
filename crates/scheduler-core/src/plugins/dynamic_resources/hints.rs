//! DynamicResources' queueing hints (upstream `isSchedulableAfterClaimChange` and
//! `isSchedulableAfterPodChange`): which claim events can let a pod with claims in.
//! Nodes, DeviceClasses and ResourceSlices have no hint upstream: they always queue.

use k8s_openapi::api::resource::v1 as dra;

use crate::framework::{EventObjects, QueueingHint};
use crate::types::PodInfo;
use crate::types::dra::DraObjects;
use crate::types::pod_group::PodGroupInfo;

/// The hint for `objects` about `pod`, which DynamicResources rejected.
pub(super) fn hint(pod: &PodInfo, objects: &EventObjects<'_>) -> QueueingHint {
    match objects {
        EventObjects::ResourceClaim { old, new, claims } => claim_changed(pod, *old, new, claims),
        EventObjects::PodGroup { old, new } => pod_group_changed(pod, *old, new),
        _ => QueueingHint::Queue,
    }
}

/// The pod's own PodGroup added, or its claims or their statuses changed (the claim made
/// for a template entry named): its claims resolve anew. Any other group: no help.
fn pod_group_changed(
    pod: &PodInfo,
    old: Option<&PodGroupInfo>,
    new: &PodGroupInfo,
) -> QueueingHint {
    if pod.pod_group.as_deref() != Some(&new.key) || pod.resource_claims.is_empty() {
        return QueueingHint::QueueSkip;
    }
    match old {
        Some(o)
            if o.resource_claims == new.resource_claims
                && o.claim_statuses == new.claim_statuses =>
        {
            QueueingHint::QueueSkip
        }
        _ => QueueingHint::Queue,
    }
}

/// A claim added (`old: None`) or updated, with the claims as the cache holds them after
/// the event. Errs on the side of queueing, as upstream.
fn claim_changed(
    pod: &PodInfo,
    old: Option<&dra::ResourceClaim>,
    new: &dra::ResourceClaim,
    claims: &DraObjects,
) -> QueueingHint {
    // The pod still lacks a claim, or one is deleting or not its own: this cannot help.
    let Ok(own) = super::pod_claims(pod, claims) else {
        return QueueingHint::QueueSkip;
    };
    // Devices were freed: any waiting pod may now find some.
    if old.is_some_and(is_allocated) && !is_allocated(new) {
        return QueueingHint::Queue;
    }
    let uid = new.metadata.uid.as_deref().unwrap_or_default();
    if !own.claims.iter().any(|c| c.uid == uid) {
        return QueueingHint::QueueSkip;
    }
    match old {
        None => QueueingHint::Queue,
        // Only the status matters (a finalizer or label added does not).
        Some(o) if o.status == new.status => QueueingHint::QueueSkip,
        Some(_) => QueueingHint::Queue,
    }
}

fn is_allocated(c: &dra::ResourceClaim) -> bool {
    c.status.as_ref().is_some_and(|s| s.allocation.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::{ActionType, ClusterEvent, EventResource, Plugin};
    use crate::plugins::dynamic_resources::DynamicResources;
    use crate::plugins::dynamic_resources::allocator::tests::{claim, req};
    use k8s_openapi::api::core::v1 as k8s;

    fn pod_using(names: &[&str]) -> PodInfo {
        let claims = names
            .iter()
            .map(|n| k8s::PodResourceClaim {
                name: n.to_string(),
                resource_claim_name: Some(n.to_string()),
                ..Default::default()
            })
            .collect();
        PodInfo::test("ns", "p")
            .edit(|p| p.spec.as_mut().unwrap().resource_claims = Some(claims))
            .build()
    }

    fn allocated(mut c: dra::ResourceClaim) -> dra::ResourceClaim {
        c.status.get_or_insert_default().allocation = Some(Default::default());
        c
    }

    fn ask(
        pod: &PodInfo,
        old: Option<&dra::ResourceClaim>,
        new: &dra::ResourceClaim,
        claims: &DraObjects,
    ) -> QueueingHint {
        let ev = ClusterEvent::new(EventResource::ResourceClaim, ActionType::UPDATE);
        let plugin = DynamicResources::default();
        plugin.queueing_hint(pod, &ev, &EventObjects::ResourceClaim { old, new, claims })
    }

    /// Upstream's TestIsSchedulableAfterClaimChange, in our words.
    #[test]
    fn claim_events_queue_only_what_can_help() {
        let mine = claim("mine", vec![req("r", "gpu")]);
        let other = claim("other", vec![req("r", "gpu")]);
        let pod = pod_using(&["mine"]);
        let with = |cs: &[&dra::ResourceClaim]| {
            let mut o = DraObjects::default();
            for c in cs {
                o.update_claim(c);
            }
            o
        };
        // The pod's claim was created.
        assert_eq!(ask(&pod, None, &mine, &with(&[&mine])), QueueingHint::Queue);
        // Another claim was created: the pod's own is still missing.
        assert_eq!(
            ask(&pod, None, &other, &with(&[&other])),
            QueueingHint::QueueSkip
        );
        // Another claim was created while the pod's exists: unrelated.
        let both = with(&[&mine, &other]);
        assert_eq!(ask(&pod, None, &other, &both), QueueingHint::QueueSkip);
        // Another claim was deallocated: its devices are free for this pod.
        let freed = ask(&pod, Some(&allocated(other.clone())), &other, &both);
        assert_eq!(freed, QueueingHint::Queue);
        // The pod's claim got allocated (status changed).
        let now = allocated(mine.clone());
        assert_eq!(
            ask(&pod, Some(&mine), &now, &with(&[&now, &other])),
            QueueingHint::Queue
        );
        // Only metadata changed (a driver added its finalizer).
        let mut finalized = mine.clone();
        finalized.metadata.finalizers = Some(vec!["example.com/driver".into()]);
        assert_eq!(
            ask(&pod, Some(&mine), &finalized, &with(&[&finalized])),
            QueueingHint::QueueSkip
        );
        // The pod's claim is being deleted: nothing helps until it is gone and recreated.
        let mut deleting = mine.clone();
        deleting.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()),
        );
        assert_eq!(
            ask(&pod, Some(&mine), &deleting, &with(&[&deleting])),
            QueueingHint::QueueSkip
        );
        // Without the objects the hint queues.
        let ev = ClusterEvent::new(EventResource::ResourceClaim, ActionType::ADD);
        assert_eq!(
            DynamicResources::default().queueing_hint(&pod, &ev, &EventObjects::None),
            QueueingHint::Queue
        );
    }
}
