//! One attempt for a gang (upstream: `schedule_one_podgroup.go`, `algorithm_podgroup.go`):
//! the group's waiting pods are tried one after another against the same cluster state,
//! each placement assumed so the next pod sees it, and the group's quorum is checked after
//! every pod. Only when `minCount` of the group's pods are placed (counting those bound
//! before) is anything kept; otherwise every assumption is undone and no pod is bound.
//!
//! Pure like [`crate::schedule_one`]: the caller pops the members from its queue, holds the
//! cache while the cycle runs, and then binds the placed pods or requeues every member.

use std::sync::Arc;

use crate::cache::{Cache, Snapshot};
use crate::framework::{CycleState, Diagnosis, Framework, NominatedPods, QueuedPodInfo, Status};
use crate::plugins::gang_scheduling::min_count_feasible;
use crate::plugins::names::GANG_SCHEDULING;
use crate::pod_group_manager::{PodGroupManager, PodGroups};
use crate::schedule_one::{
    Decision, SchedulingAlgorithm, assume_decision, forget_decision, schedule_group_member,
};
use crate::types::PodInfo;
use crate::types::pod_group::{PodGroupInfo, PodGroupKey};

/// How a popped pod is scheduled.
#[derive(Debug)]
pub enum Route {
    /// On its own: no group, a basic group, or a profile without GangScheduling.
    Alone,
    /// In a group cycle with the rest of its gang.
    Gang(Arc<PodGroupInfo>),
    /// Not at all now: its group went away (or lost its quorum) after the pod was queued.
    /// Requeue it with this status, as if PreEnqueue had kept it out.
    Wait(Status),
}

/// Decides how `pod`, just popped, is scheduled. A pod of a gang is never scheduled alone:
/// if its group disappeared since PreEnqueue let it in, it waits again.
pub fn route(fw: &Framework, groups: &PodGroupManager, pod: &PodInfo) -> Route {
    let Some(key) = pod.pod_group.as_deref() else {
        return Route::Alone;
    };
    if !fw.has_pre_enqueue_plugin(GANG_SCHEDULING) {
        return Route::Alone;
    }
    let gate = fw.run_pre_enqueue(pod);
    if !gate.is_success() {
        return Route::Wait(gate);
    }
    match groups.read().get(key) {
        Some(g) if g.is_gang() => Route::Gang(Arc::clone(g)),
        _ => Route::Alone,
    }
}

/// How many of the group's pods are already placed: bound, or assumed while their binding
/// is under way (both are in the cache).
pub fn scheduled_members(groups: &PodGroups, key: &PodGroupKey, cache: &Cache) -> usize {
    groups
        .members(key)
        .filter(|(k, bound)| *bound || cache.get_pod(k).is_some())
        .count()
}

/// A member placed by a successful group cycle: assumed in the cache, to be bound.
#[derive(Debug)]
pub struct PlacedMember {
    pub queued: QueuedPodInfo,
    /// The effective pod the plugins saw (as in [`Decision::Bind`]).
    pub pod: Arc<PodInfo>,
    pub node: String,
    pub state: CycleState,
}

/// A member that is not bound this time, and why.
#[derive(Debug)]
pub struct WaitingMember {
    pub queued: QueuedPodInfo,
    /// The FailedScheduling text.
    pub message: String,
    /// Which plugins' events may help, for the queue; `None` for an error (backoff).
    pub diagnosis: Option<Diagnosis>,
}

/// The outcome of one group cycle.
#[derive(Debug)]
pub enum GroupOutcome {
    /// The quorum is met: bind every placed member (each in its own binding cycle). The
    /// members that did not fit wait, as pods of an already scheduled gang.
    Placed {
        placed: Vec<PlacedMember>,
        waiting: Vec<WaitingMember>,
    },
    /// The quorum cannot be met now: nothing was kept; every member waits.
    Unschedulable { waiting: Vec<WaitingMember> },
}

/// The FailedScheduling message of a pod of a gang that did not fit as a whole, for a pod
/// that would have fitted or was not tried: the gang's reason, naming the group. (A pod that
/// did not fit keeps its own `0/N nodes are available: ...`, as upstream's.)
pub fn group_failure_message(group: &PodGroupInfo, reason: &str) -> String {
    format!("pod group {:?}: {reason}", group.key.name)
}

/// Runs the cycle for `members` (the group's pods waiting in the queue, in queue order) of
/// `group`, of which `scheduled_before` pods are already bound or assumed.
#[allow(clippy::too_many_arguments)]
pub fn schedule_group(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    group: &PodGroupInfo,
    scheduled_before: usize,
    members: Vec<QueuedPodInfo>,
    cache: &mut Cache,
    snapshot: &mut Snapshot,
    nominated: &NominatedPods,
) -> GroupOutcome {
    let min = group.min_count();
    let mut remaining = members.len();
    let mut placed: Vec<PlacedMember> = Vec::new();
    // Members that did not fit, with their own message and diagnosis.
    let mut rejected: Vec<(QueuedPodInfo, String, Option<Diagnosis>)> = Vec::new();
    let mut verdict = min_count_feasible(min, scheduled_before, remaining);
    let mut members = members.into_iter();
    if verdict.is_ok() {
        for q in members.by_ref() {
            cache.update_snapshot(snapshot);
            remaining -= 1;
            match schedule_group_member(fw, alg, &q.pod, snapshot, nominated) {
                Decision::Bind {
                    node,
                    pod,
                    mut state,
                    ..
                } => match assume_decision(cache, Arc::clone(&pod), &node, &state) {
                    Ok(()) => placed.push(PlacedMember {
                        queued: q,
                        pod,
                        node,
                        state,
                    }),
                    Err(e) => {
                        fw.run_unreserve(&mut state, &pod, &node);
                        rejected.push((q, e.to_string(), None));
                    }
                },
                Decision::Unschedulable {
                    message, diagnosis, ..
                } => rejected.push((q, message, diagnosis)),
                Decision::Error { message } => {
                    // Upstream stops at an error: the rest of the group is not evaluated.
                    verdict = Err(format!(
                        "failed to schedule other pod from a pod group: {message}"
                    ));
                    rejected.push((q, message, None));
                    break;
                }
            }
            verdict = min_count_feasible(min, scheduled_before + placed.len(), remaining);
            if verdict.is_err() {
                break;
            }
        }
    }
    let untried: Vec<QueuedPodInfo> = members.collect();

    if verdict == Ok(true) {
        let waiting = rejected
            .into_iter()
            .map(|(queued, message, diagnosis)| WaitingMember {
                queued,
                message,
                diagnosis,
            })
            .chain(untried.into_iter().map(|queued| WaitingMember {
                queued,
                message: group_failure_message(group, "not tried"),
                diagnosis: None,
            }))
            .collect();
        return GroupOutcome::Placed { placed, waiting };
    }

    // Not enough: undo every assumption, newest first, and let the whole group wait for
    // whatever could help any of its pods (or for its missing pods).
    let reason = match &verdict {
        Err(reason) => reason.clone(),
        Ok(_) => format!(
            "minCount ({min}) is not yet satisfied: {} scheduled, 0 remaining",
            scheduled_before + placed.len()
        ),
    };
    let errored = rejected.iter().any(|(_, _, d)| d.is_none()) && placed.is_empty();
    let mut diagnosis = Diagnosis::default();
    diagnosis.unschedulable_plugins.insert(GANG_SCHEDULING);
    for (_, _, d) in &rejected {
        if let Some(d) = d {
            diagnosis
                .unschedulable_plugins
                .extend(d.unschedulable_plugins.iter().copied());
            diagnosis
                .pending_plugins
                .extend(d.pending_plugins.iter().copied());
        }
    }
    let shared = (!errored).then_some(diagnosis);
    let mut waiting = Vec::new();
    for mut p in placed.into_iter().rev() {
        forget_decision(cache, &p.pod, &p.state);
        fw.run_unreserve(&mut p.state, &p.pod, &p.node);
        waiting.push(WaitingMember {
            message: group_failure_message(group, &reason),
            queued: p.queued,
            diagnosis: shared.clone(),
        });
    }
    for (queued, own, _) in rejected {
        waiting.push(WaitingMember {
            message: own,
            queued,
            diagnosis: shared.clone(),
        });
    }
    for queued in untried {
        waiting.push(WaitingMember {
            message: group_failure_message(group, &reason),
            queued,
            diagnosis: shared.clone(),
        });
    }
    GroupOutcome::Unschedulable { waiting }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::{QueuedPodInfo, Registry};
    use crate::types::pod_group::{GroupApi, GroupPolicy, PodGroupKey};
    use crate::types::{NodeInfo, PodInfo};
    use k8s_openapi::api::core::v1 as k8s;

    fn framework() -> Framework {
        let loaded = crate::config::from_flags(None, None).unwrap();
        Framework::new(&loaded.profiles[0], &Registry::in_tree()).unwrap()
    }

    fn gpu_node(name: &str) -> k8s::Node {
        NodeInfo::test(name)
            .cpu("64")
            .memory("256Gi")
            .pods(110)
            .allocatable("nvidia.com/gpu", "8")
            .build_node()
    }

    fn member(name: &str, gpus: &str) -> QueuedPodInfo {
        let pod = PodInfo::test("ml", name)
            .request("nvidia.com/gpu", gpus)
            .edit(|p| {
                p.spec.as_mut().unwrap().scheduling_group = Some(k8s::PodSchedulingGroup {
                    pod_group_name: Some("train".into()),
                })
            })
            .build();
        QueuedPodInfo::new(Arc::new(pod), 0)
    }

    fn gang(min_count: u32) -> PodGroupInfo {
        PodGroupInfo {
            key: PodGroupKey::new(GroupApi::Workload, "ml", "train"),
            uid: "u".into(),
            policy: GroupPolicy::Gang { min_count },
        }
    }

    fn cache_with(nodes: &[&str]) -> Cache {
        let mut cache = Cache::new();
        for n in nodes {
            cache.add_node(&gpu_node(n));
        }
        cache
    }

    fn run(
        cache: &mut Cache,
        group: &PodGroupInfo,
        before: usize,
        members: Vec<QueuedPodInfo>,
    ) -> GroupOutcome {
        let fw = framework();
        let mut alg = SchedulingAlgorithm::new(0, 1);
        let mut snapshot = Snapshot::new();
        schedule_group(
            &fw,
            &mut alg,
            group,
            before,
            members,
            cache,
            &mut snapshot,
            &NominatedPods::new(),
        )
    }

    #[test]
    fn a_gang_that_fits_is_placed_on_distinct_nodes() {
        let mut cache = cache_with(&["g1", "g2", "g3"]);
        let members = vec![member("w0", "8"), member("w1", "8"), member("w2", "8")];
        let GroupOutcome::Placed { placed, waiting } = run(&mut cache, &gang(3), 0, members) else {
            panic!("the gang fits");
        };
        assert!(waiting.is_empty());
        let mut nodes: Vec<_> = placed.iter().map(|p| p.node.clone()).collect();
        nodes.sort();
        assert_eq!(nodes, ["g1", "g2", "g3"]);
        // Kept: every member is assumed in the cache, ready to bind.
        assert!(placed.iter().all(|p| cache.is_assumed(p.pod.key())));
    }

    #[test]
    fn a_gang_short_of_room_keeps_nothing() {
        // Three 8-GPU pods, two free nodes: two would fit, the third cannot.
        let mut cache = cache_with(&["g1", "g2"]);
        let members = vec![member("w0", "8"), member("w1", "8"), member("w2", "8")];
        let GroupOutcome::Unschedulable { waiting } = run(&mut cache, &gang(3), 0, members) else {
            panic!("the gang must not be placed");
        };
        assert_eq!(waiting.len(), 3);
        for w in &waiting {
            assert!(
                !cache.is_assumed(w.queued.pod.key()),
                "nothing stays assumed"
            );
            let d = w.diagnosis.as_ref().expect("unschedulable, not an error");
            assert!(d.unschedulable_plugins.contains(GANG_SCHEDULING));
            assert!(d.unschedulable_plugins.contains("NodeResourcesFit"));
        }
        // The pods that fitted name the gang's reason; the one that did not keeps its own.
        let mut messages: Vec<&str> = waiting.iter().map(|w| w.message.as_str()).collect();
        messages.sort();
        assert_eq!(
            messages,
            [
                "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
                "pod group \"train\": minCount (3) cannot be satisfied: 2 scheduled, 0 remaining",
                "pod group \"train\": minCount (3) cannot be satisfied: 2 scheduled, 0 remaining",
            ]
        );
        // The nodes are free again: a later pod sees all of their GPUs.
        let mut snapshot = Snapshot::new();
        cache.update_snapshot(&mut snapshot);
        assert!(
            snapshot
                .node_infos()
                .iter()
                .all(|n| n.requested.scalar_value("nvidia.com/gpu") == 0)
        );
    }

    #[test]
    fn min_count_below_the_group_size_places_what_fits() {
        // minCount 2 of 3 pods, room for 2: the two are placed, the third waits.
        let mut cache = cache_with(&["g1", "g2"]);
        let members = vec![member("w0", "8"), member("w1", "8"), member("w2", "8")];
        let GroupOutcome::Placed { placed, waiting } = run(&mut cache, &gang(2), 0, members) else {
            panic!("the quorum fits");
        };
        assert_eq!(placed.len(), 2);
        assert_eq!(waiting.len(), 1);
        assert!(waiting[0].message.contains("Insufficient nvidia.com/gpu"));
    }

    #[test]
    fn members_bound_before_count_toward_the_quorum() {
        // minCount 3: one member is already running, so two more suffice.
        let mut cache = cache_with(&["g1", "g2"]);
        let members = vec![member("w1", "8"), member("w2", "8")];
        assert!(matches!(
            run(&mut cache, &gang(3), 1, members),
            GroupOutcome::Placed { .. }
        ));
        // Without it, the same two pods cannot meet minCount 3 and nothing is tried.
        let mut cache = cache_with(&["g1", "g2"]);
        let members = vec![member("w1", "8"), member("w2", "8")];
        let GroupOutcome::Unschedulable { waiting } = run(&mut cache, &gang(3), 0, members) else {
            panic!("two pods cannot meet minCount 3");
        };
        assert_eq!(
            waiting[0].message,
            "pod group \"train\": minCount (3) cannot be satisfied: 0 scheduled, 2 remaining"
        );
    }
}
