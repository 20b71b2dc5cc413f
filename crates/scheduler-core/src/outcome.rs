//! What becomes of each pod once a cycle is over, the same for the pod cycle
//! ([`schedule_one`](crate::schedule_one)) and the pod group cycle
//! ([`schedule_group`](crate::schedule_group)). Upstream splits its loop along these lines
//! (`schedule_one.go`, `schedule_one_podgroup.go`): a pod that did not get a node goes to the
//! failure handler, a pod that did is assumed and handed to its binding cycle, and a group's
//! cycle ends with one of the two for each of its pods.
//!
//! Pure: a [`Failure`] says what the failure handler does with a pod (its PodScheduled reason
//! and message, the plugins whose events may help it, what becomes of its nomination), a
//! [`Placement`] what the binding cycle gets, an [`Eviction`] which victims preemption chose.
//! The caller (the controller's loop) carries them out against its queue, cache and API.

use std::sync::Arc;

use crate::framework::{CycleState, Diagnosis, PostFilterResult, QueuedPodInfo};
use crate::group_preemption::GroupPreemption;
use crate::schedule_group::{GroupOutcome, PlacedMember, WaitingMember};
use crate::schedule_one::Decision;
use crate::types::dra::ClaimDeallocation;
use crate::types::{PodInfo, PodKey, PodVolumes};

/// Why a pod did not get a node: the reason of its PodScheduled=False condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureReason {
    /// Rejected by plugins (or no nodes at all): retried when an event may help.
    Unschedulable,
    /// Something failed: retried after backoff.
    SchedulerError,
}

/// What a failed attempt does to the pod's nomination (upstream's `NominatingInfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Nominating {
    /// Leave it as it is: PostFilter ran and had nothing to say about it, or the pod never
    /// reached a cycle (PreEnqueue kept it out).
    Keep,
    /// Remove it (upstream's `clearNominatedNode`): preemption ran and found no node for the
    /// pod, or the attempt ended otherwise than in a fit failure PostFilter looked at: an
    /// error, no nodes at all, no PostFilter plugins, a rejection at Reserve, Permit or
    /// PreBind, a pod that could not be assumed, a failed binding, a group cycle that
    /// failed with an error.
    Clear,
    /// Nominate the pod to this node: preemption makes room for it there.
    Set(String),
}

/// The failure handler's decision for one pod that is not bound this time.
#[derive(Clone, Debug)]
pub struct Failure {
    pub reason: FailureReason,
    /// The FailedScheduling text (event and condition).
    pub message: String,
    /// Which plugins rejected the pod, so only events they registered requeue it; `None`
    /// when none did (an error, or no nodes at all), which sends the pod through backoff.
    pub diagnosis: Option<Diagnosis>,
    pub nominating: Nominating,
}

impl Failure {
    /// Plugins rejected the pod (or there were no nodes: `diagnosis` `None`).
    pub fn unschedulable(message: String, diagnosis: Option<Diagnosis>) -> Self {
        Failure {
            reason: FailureReason::Unschedulable,
            message,
            diagnosis,
            nominating: Nominating::Keep,
        }
    }

    /// The attempt failed with an error: the pod loses its nomination, as upstream's does
    /// after every error.
    pub fn error(message: String) -> Self {
        Failure {
            reason: FailureReason::SchedulerError,
            message,
            diagnosis: None,
            nominating: Nominating::Clear,
        }
    }

    /// The same failure, with `nominating` for the pod's nomination.
    pub fn with_nominating(mut self, nominating: Nominating) -> Self {
        self.nominating = nominating;
        self
    }

    /// `pod` as it goes back to the queue: nominated where this failure leaves it.
    pub fn requeued_pod(&self, pod: &Arc<PodInfo>) -> Arc<PodInfo> {
        let node = match &self.nominating {
            Nominating::Keep => return Arc::clone(pod),
            Nominating::Clear => None,
            Nominating::Set(n) => Some(n.clone()),
        };
        if pod.nominated_node_name == node {
            return Arc::clone(pod);
        }
        let mut p = PodInfo::clone(pod);
        p.nominated_node_name = node;
        Arc::new(p)
    }

    /// What changes on `pod`'s `status.nominatedNodeName`: [`Nominating::Keep`] when this
    /// failure leaves it as it is.
    pub fn nomination_change(&self, pod: &PodInfo) -> Nominating {
        let current = pod.nominated_node_name.as_deref();
        match &self.nominating {
            Nominating::Set(n) if current != Some(n.as_str()) => Nominating::Set(n.clone()),
            Nominating::Clear if current.is_some() => Nominating::Clear,
            _ => Nominating::Keep,
        }
    }
}

/// What preemption decided to evict so that `preemptor` fits on `node`.
#[derive(Debug)]
pub struct Eviction {
    /// The pod that waits (gated) until the victims are gone.
    pub preemptor: Arc<PodInfo>,
    pub node: String,
    pub victims: Vec<PodKey>,
    /// Lower-priority pods nominated to `node` that may no longer fit there.
    pub nominations_to_clear: Vec<PodKey>,
}

/// A pod its cycle placed: what its binding cycle needs.
#[derive(Debug)]
pub struct Placement {
    pub node: String,
    /// The effective pod the plugins saw (RuntimeClass overhead included): what the cache
    /// counts, and what PostBind or Unreserve see.
    pub pod: Arc<PodInfo>,
    pub state: CycleState,
}

impl Placement {
    /// VolumeBinding's decision (assumed with the pod) for the binding cycle to carry out;
    /// `None` when the pod's claims need nothing.
    pub fn volumes(&self) -> Option<PodVolumes> {
        crate::plugins::volume_binding::decided_bindings(&self.state).cloned()
    }
}

/// One pod's attempt, decided. One per attempt, moved once or twice: not worth boxing the
/// failure's diagnosis to even out the variants.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum PodOutcome {
    /// Assume the pod on its node and hand it to its binding cycle.
    Bind(Placement),
    /// Carry out what PostFilter decided, then hand the pod to the failure handler.
    Fail {
        failure: Failure,
        /// Preemption chose a node: the victims to evict first.
        eviction: Option<Eviction>,
        /// DynamicResources' PostFilter: a claim allocation to remove.
        deallocate: Option<ClaimDeallocation>,
    },
}

/// Sorts the pod cycle's [`Decision`] for `pod` (the popped pod) into a binding hand-off or
/// a failure. A pod preemption found a node for is nominated to it; a pod PostFilter ran
/// for and returned nothing keeps its nomination; every other pod that failed loses it
/// (upstream's `schedulingCycle`: preemption in vain, no nodes, no PostFilter plugins, a
/// rejection after Filter, an error).
pub fn pod_outcome(pod: &Arc<PodInfo>, decision: Decision) -> PodOutcome {
    match decision {
        Decision::Bind {
            node, pod, state, ..
        } => PodOutcome::Bind(Placement { node, pod, state }),
        Decision::Unschedulable {
            message,
            diagnosis,
            nomination,
            post_filter_ran,
            deallocate,
            ..
        } => {
            let failure = Failure::unschedulable(message, diagnosis);
            let (nominating, eviction) = match nomination {
                None if post_filter_ran => (Nominating::Keep, None),
                None => (Nominating::Clear, None),
                Some(PostFilterResult {
                    nominated_node_name: None,
                    ..
                }) => (Nominating::Clear, None),
                Some(PostFilterResult {
                    nominated_node_name: Some(node),
                    victims,
                    nominations_to_clear,
                }) => (
                    Nominating::Set(node.clone()),
                    Some(Eviction {
                        preemptor: Arc::clone(pod),
                        node,
                        victims,
                        nominations_to_clear,
                    }),
                ),
            };
            PodOutcome::Fail {
                failure: failure.with_nominating(nominating),
                eviction,
                deallocate,
            }
        }
        Decision::Error { message } => PodOutcome::Fail {
            failure: Failure::error(message),
            eviction: None,
            deallocate: None,
        },
    }
}

impl PlacedMember {
    /// The member's queue entry and its placement (assumed by the group cycle).
    pub fn into_placement(self) -> (QueuedPodInfo, Placement) {
        let PlacedMember {
            queued,
            pod,
            node,
            state,
        } = self;
        (queued, Placement { node, pod, state })
    }
}

impl WaitingMember {
    /// The member's queue entry and its failure: a member without a diagnosis failed with
    /// an error (its own, or another member's that stopped the cycle).
    pub fn into_failure(self) -> (QueuedPodInfo, Failure) {
        let failure = match self.diagnosis {
            Some(d) => Failure::unschedulable(self.message, Some(d)),
            None => Failure::error(self.message),
        };
        (self.queued, failure)
    }
}

/// What becomes of each member after a group cycle (upstream's
/// `submitPodGroupAlgorithmResult`).
#[derive(Debug, Default)]
pub struct GroupResult {
    /// Assumed by the cycle: each to its binding cycle.
    pub placed: Vec<(QueuedPodInfo, Placement)>,
    /// Each to the failure handler.
    pub failed: Vec<(QueuedPodInfo, Failure)>,
    /// Workload-aware preemption's victims, carried by the first member it nominated.
    pub eviction: Option<Eviction>,
}

/// Sorts a group cycle's `outcome`, and what workload-aware preemption then decided for the
/// group (`None` when it did not run), into each member's hand-off or failure;
/// `post_filter`: whether the profile has PostFilter plugins. Preemption nominates the
/// members it placed; when it ran and found no room, every member loses its nomination, as a
/// single pod does when its own preemption finds no node (upstream clears the members'
/// nominations whenever the group is rejected without waiting on preemption); while the
/// group's earlier victims are still going, members keep theirs. As upstream's pod group
/// cycle, every member loses its nomination when the cycle failed with an error, and every
/// member that is not bound does in a profile without PostFilter plugins (its own fit
/// failure goes to no PostFilter, as a single pod's).
pub fn group_result(
    outcome: GroupOutcome,
    preemption: Option<GroupPreemption>,
    post_filter: bool,
) -> GroupResult {
    let (placed, waiting, error) = match outcome {
        GroupOutcome::Placed { placed, waiting } => (placed, waiting, false),
        GroupOutcome::Unschedulable { waiting, error, .. } => (Vec::new(), waiting, error),
    };
    let mut result = GroupResult {
        placed: placed
            .into_iter()
            .map(PlacedMember::into_placement)
            .collect(),
        ..GroupResult::default()
    };
    let in_vain = matches!(preemption, Some(GroupPreemption::NotHelpful { .. }));
    if error || !post_filter || in_vain {
        result.failed = waiting
            .into_iter()
            .map(|w| {
                let (queued, failure) = w.into_failure();
                (queued, failure.with_nominating(Nominating::Clear))
            })
            .collect();
        return result;
    }
    let (victims, nominations) = match preemption {
        Some(GroupPreemption::Preempt {
            victims,
            nominations,
            ..
        }) => (victims, nominations),
        _ => (Vec::new(), Vec::new()),
    };
    let node_of = |k: &PodKey| nominations.iter().find(|(n, _)| n == k).map(|(_, n)| n);
    for w in waiting {
        let (queued, mut failure) = w.into_failure();
        if let Some(node) = node_of(queued.pod.key()) {
            failure = failure.with_nominating(Nominating::Set(node.clone()));
            if result.eviction.is_none() {
                result.eviction = Some(Eviction {
                    preemptor: Arc::clone(&queued.pod),
                    node: node.clone(),
                    victims: Vec::new(),
                    nominations_to_clear: Vec::new(),
                });
            }
        }
        result.failed.push((queued, failure));
    }
    if let Some(e) = &mut result.eviction {
        e.victims = victims;
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::names::GANG_SCHEDULING;
    use crate::types::dra::ClaimDeallocation;

    fn pod(name: &str, nominated: Option<&str>) -> Arc<PodInfo> {
        let b = PodInfo::test("default", name);
        Arc::new(match nominated {
            Some(n) => b.nominated_node(n).build(),
            None => b.build(),
        })
    }

    fn waiting(name: &str, nominated: Option<&str>, diagnosis: bool) -> WaitingMember {
        let mut d = Diagnosis::default();
        d.unschedulable_plugins.insert(GANG_SCHEDULING);
        WaitingMember {
            queued: QueuedPodInfo::new(pod(name, nominated), 0),
            message: format!("{name} waits"),
            diagnosis: diagnosis.then_some(d),
        }
    }

    /// No node fits; PostFilter ran and returned `nomination`.
    fn unschedulable(nomination: Option<PostFilterResult>) -> Decision {
        Decision::Unschedulable {
            message: "0/1 nodes are available".into(),
            diagnosis: Some(Diagnosis::default()),
            nomination,
            post_filter_ran: true,
            deallocate: None,
            resolvable: true,
        }
    }

    fn nominating(p: &Arc<PodInfo>, d: Decision) -> Nominating {
        match pod_outcome(p, d) {
            PodOutcome::Fail { failure, .. } => failure.nominating,
            PodOutcome::Bind(_) => panic!("a failure"),
        }
    }

    #[test]
    fn a_pod_failure_follows_its_preemption() {
        let p = pod("p", Some("old"));
        // PostFilter ran and had nothing to say: the nomination stays.
        let PodOutcome::Fail {
            failure, eviction, ..
        } = pod_outcome(&p, unschedulable(None))
        else {
            panic!("a failure");
        };
        assert_eq!(failure.reason, FailureReason::Unschedulable);
        assert_eq!(failure.nominating, Nominating::Keep);
        assert!(eviction.is_none());
        assert!(Arc::ptr_eq(&failure.requeued_pod(&p), &p));

        // Preemption in vain: cleared.
        let none = PostFilterResult {
            nominated_node_name: None,
            victims: Vec::new(),
            nominations_to_clear: Vec::new(),
        };
        let PodOutcome::Fail { failure, .. } = pod_outcome(&p, unschedulable(Some(none))) else {
            panic!("a failure");
        };
        assert_eq!(failure.nomination_change(&p), Nominating::Clear);
        assert_eq!(failure.requeued_pod(&p).nominated_node_name, None);
        // A pod that had no nomination has nothing to clear.
        assert_eq!(failure.nomination_change(&pod("q", None)), Nominating::Keep);

        // Preemption found a node: nominated there, victims to evict.
        let found = PostFilterResult {
            nominated_node_name: Some("n1".into()),
            victims: vec![PodKey::new("default", "v")],
            nominations_to_clear: vec![PodKey::new("default", "low")],
        };
        let PodOutcome::Fail {
            failure, eviction, ..
        } = pod_outcome(&p, unschedulable(Some(found)))
        else {
            panic!("a failure");
        };
        assert_eq!(failure.nomination_change(&p), Nominating::Set("n1".into()));
        assert_eq!(
            failure.requeued_pod(&p).nominated_node_name.as_deref(),
            Some("n1")
        );
        let e = eviction.unwrap();
        assert_eq!((e.node.as_str(), e.victims.len()), ("n1", 1));
        assert_eq!(e.nominations_to_clear, [PodKey::new("default", "low")]);
        assert!(Arc::ptr_eq(&e.preemptor, &p));
        // Nominated where it already is: nothing changes on its status.
        assert_eq!(
            failure.nomination_change(&pod("r", Some("n1"))),
            Nominating::Keep
        );
    }

    /// Upstream's `schedulingCycle` clears the nomination whenever the attempt did not end in
    /// a fit failure PostFilter looked at.
    #[test]
    fn a_pod_loses_its_nomination_unless_post_filter_kept_it() {
        let p = pod("p", Some("old"));
        let error = Decision::Error {
            message: "boom".into(),
        };
        assert_eq!(nominating(&p, error), Nominating::Clear);
        // No nodes at all; no PostFilter plugins; Reserve, Permit or PreBind said no.
        let no_nodes = Decision::Unschedulable {
            message: "no nodes available to schedule pods".into(),
            diagnosis: None,
            nomination: None,
            post_filter_ran: false,
            deallocate: None,
            resolvable: false,
        };
        assert_eq!(nominating(&p, no_nodes), Nominating::Clear);
        let mut without_post_filter = unschedulable(None);
        if let Decision::Unschedulable {
            post_filter_ran, ..
        } = &mut without_post_filter
        {
            *post_filter_ran = false;
        }
        assert_eq!(nominating(&p, without_post_filter), Nominating::Clear);
        // Its status loses the nomination; a pod that had none is left alone.
        let failure = Failure::error("boom".into());
        assert_eq!(failure.nomination_change(&p), Nominating::Clear);
        assert_eq!(failure.requeued_pod(&p).nominated_node_name, None);
        assert_eq!(failure.nomination_change(&pod("q", None)), Nominating::Keep);
        // PostFilter ran: what it returned decides.
        assert_eq!(nominating(&p, unschedulable(None)), Nominating::Keep);
    }

    #[test]
    fn an_error_is_a_scheduler_error_through_backoff() {
        let p = pod("p", None);
        let PodOutcome::Fail {
            failure,
            eviction,
            deallocate,
        } = pod_outcome(
            &p,
            Decision::Error {
                message: "boom".into(),
            },
        )
        else {
            panic!("a failure");
        };
        assert_eq!(failure.reason, FailureReason::SchedulerError);
        assert_eq!(failure.message, "boom");
        assert!(failure.diagnosis.is_none());
        assert!(eviction.is_none() && deallocate.is_none());
        let claim = ClaimDeallocation {
            namespace: "default".into(),
            name: "c".into(),
            uid: String::new(),
            resource_version: String::new(),
            delete: false,
        };
        let d = Decision::Unschedulable {
            message: "m".into(),
            diagnosis: None,
            nomination: None,
            post_filter_ran: false,
            deallocate: Some(claim),
            resolvable: false,
        };
        let PodOutcome::Fail {
            failure,
            deallocate,
            ..
        } = pod_outcome(&p, d)
        else {
            panic!("a failure");
        };
        // No nodes at all is Unschedulable, though no plugin rejected the pod.
        assert_eq!(failure.reason, FailureReason::Unschedulable);
        assert!(deallocate.is_some());
    }

    fn unschedulable_group(members: Vec<WaitingMember>) -> GroupOutcome {
        GroupOutcome::Unschedulable {
            reason: "minCount (2) cannot be satisfied".into(),
            error: false,
            waiting: members,
        }
    }

    #[test]
    fn members_go_through_the_same_failures_as_pods() {
        // Those without a diagnosis failed with an error: they lose their nomination.
        let r = group_result(
            unschedulable_group(vec![
                waiting("a", Some("n0"), true),
                waiting("b", Some("n0"), false),
            ]),
            Some(GroupPreemption::Waiting {
                message: String::new(),
            }),
            true,
        );
        let reasons: Vec<_> = r.failed.iter().map(|(_, f)| f.reason).collect();
        assert_eq!(
            reasons,
            [FailureReason::Unschedulable, FailureReason::SchedulerError]
        );
        let nominating: Vec<_> = r.failed.iter().map(|(_, f)| f.nominating.clone()).collect();
        assert_eq!(nominating, [Nominating::Keep, Nominating::Clear]);
        assert_eq!(r.failed[0].1.message, "a waits");
        assert!(r.placed.is_empty() && r.eviction.is_none());
    }

    /// Upstream's pod group cycle clears every member's nomination after a group error, and
    /// a member's whose fit failure no PostFilter looked at.
    #[test]
    fn a_group_error_or_no_post_filter_clears_every_nomination() {
        let members = || vec![waiting("a", Some("n0"), true), waiting("b", None, true)];
        let error = GroupOutcome::Unschedulable {
            reason: "failed to schedule other pod from a pod group: boom".into(),
            error: true,
            waiting: members(),
        };
        let r = group_result(error, None, true);
        assert!(
            r.failed
                .iter()
                .all(|(_, f)| f.nominating == Nominating::Clear)
        );
        let (a, failure) = &r.failed[0];
        assert_eq!(failure.nomination_change(&a.pod), Nominating::Clear);

        // No PostFilter plugins: the members of a gang that did not fit, and those of a
        // placed gang that did not fit themselves.
        let r = group_result(unschedulable_group(members()), None, false);
        assert!(
            r.failed
                .iter()
                .all(|(_, f)| f.nominating == Nominating::Clear)
        );
        let placed = GroupOutcome::Placed {
            placed: Vec::new(),
            waiting: members(),
        };
        let r = group_result(placed, None, false);
        assert!(
            r.failed
                .iter()
                .all(|(_, f)| f.nominating == Nominating::Clear)
        );
        // With PostFilter plugins, a member of a placed gang keeps its nomination (no
        // preemption ran for it).
        let placed = GroupOutcome::Placed {
            placed: Vec::new(),
            waiting: members(),
        };
        let r = group_result(placed, None, true);
        assert_eq!(r.failed[0].1.nominating, Nominating::Keep);
    }

    #[test]
    fn group_preemption_nominates_or_clears_like_pod_preemption() {
        let members = || {
            vec![
                waiting("a", Some("n0"), true),
                waiting("b", None, true),
                waiting("c", None, true),
            ]
        };
        // Room made for b and c: both nominated, b carries the evictions.
        let preempt = GroupPreemption::Preempt {
            victims: vec![PodKey::new("default", "v")],
            nominations: vec![
                (PodKey::new("default", "c"), "n2".into()),
                (PodKey::new("default", "b"), "n1".into()),
            ],
            message: String::new(),
        };
        let r = group_result(unschedulable_group(members()), Some(preempt), true);
        let nominating: Vec<_> = r.failed.iter().map(|(_, f)| f.nominating.clone()).collect();
        assert_eq!(
            nominating,
            [
                Nominating::Keep,
                Nominating::Set("n1".into()),
                Nominating::Set("n2".into())
            ]
        );
        let e = r.eviction.unwrap();
        assert_eq!(e.preemptor.name(), "b");
        assert_eq!(e.node, "n1");
        assert_eq!(e.victims, [PodKey::new("default", "v")]);

        // Preemption could not help: every nomination goes, as for a single pod.
        let r = group_result(
            unschedulable_group(members()),
            Some(GroupPreemption::NotHelpful {
                message: "no lower-priority pods to preempt".into(),
            }),
            true,
        );
        assert!(
            r.failed
                .iter()
                .all(|(_, f)| f.nominating == Nominating::Clear)
        );
        let (a, failure) = &r.failed[0];
        assert_eq!(failure.nomination_change(&a.pod), Nominating::Clear);
        assert!(r.eviction.is_none());

        // Earlier victims still going: nominations stay.
        let r = group_result(
            unschedulable_group(members()),
            Some(GroupPreemption::Waiting {
                message: String::new(),
            }),
            true,
        );
        assert!(
            r.failed
                .iter()
                .all(|(_, f)| f.nominating == Nominating::Keep)
        );
    }
}
