//! The failure handler (upstream's `handleSchedulingFailure`), one pod at a time, for a pod
//! its own cycle did not place and for each member of a group that is not bound this time
//! alike: requeue it with the plugins whose events may help, record its nomination, and
//! report FailedScheduling with PodScheduled=False. Preemption's victims, which PostFilter
//! (or workload-aware preemption) chose before, go to the executor first. A pod whose
//! binding cycle failed comes here too ([`handle_binding_failure`]), from the executor.

use std::sync::Arc;

use scheduler_core::framework::{ActionType, ClusterEvent, EventResource, QueuedPodInfo};
use scheduler_core::outcome::{Eviction, Failure, FailureReason, Nominating};
use scheduler_core::queue::QueueError;
use scheduler_core::types::{PodInfo, PodKey};

use super::Attempt;
use crate::binding::executor::Action;
use crate::binding::pod_status as status;
use crate::binding::podref::PodRef;
use crate::serving::metrics;
use crate::state::State;

/// What the failure handler did with a pod.
pub(crate) struct Handled {
    /// The attempt's result, for `scheduler_schedule_attempts_total` (counted whatever
    /// became of the pod, as upstream).
    pub(crate) result: &'static str,
    /// The FailedScheduling report to send; `None` when the pod was deleted meanwhile.
    pub(crate) report: Option<Action>,
}

/// Requeues `queued` after its failed attempt (under the state lock) and returns its report.
pub(crate) fn handle_failure(
    st: &mut State,
    queued: QueuedPodInfo,
    failure: Failure,
    attempt: &Attempt,
) -> Handled {
    let key = queued.pod.key().clone();
    let (result, reason) = match failure.reason {
        FailureReason::Unschedulable => {
            (metrics::RESULT_UNSCHEDULABLE, status::REASON_UNSCHEDULABLE)
        }
        FailureReason::SchedulerError => (metrics::RESULT_ERROR, status::REASON_SCHEDULER_ERROR),
    };
    let nomination = failure.nomination_change(&queued.pod);
    let pod = failure.requeued_pod(&queued.pod);
    let requeued = QueuedPodInfo {
        pod: Arc::clone(&pod),
        ..queued
    };
    let added = st.queue.add_unschedulable_if_not_present(
        requeued,
        failure.diagnosis.as_ref(),
        attempt.cycle,
    );
    match failure.reason {
        FailureReason::Unschedulable => {
            tracing::debug!(pod = %key, message = %failure.message, "unschedulable")
        }
        FailureReason::SchedulerError => {
            tracing::warn!(pod = %key, message = %failure.message, "scheduling error")
        }
    }
    if matches!(added, Err(QueueError::Deleted(_))) {
        return Handled {
            result,
            report: None,
        };
    }
    // Only for a pod still there: a deleted pod's nomination would outlive it.
    match &failure.nominating {
        Nominating::Set(node) => st.queue.add_nominated(&pod, Some(node)),
        Nominating::Clear => st.queue.delete_nominated_if_exists(&key),
        Nominating::Keep => {}
    }
    let report = Action::Failure {
        pod: PodRef::of(&pod),
        scheduler_name: attempt.scheduler_name.clone(),
        reason,
        message: failure.message,
        condition: st.conditions.get(&key).cloned(),
        nomination: nomination.into(),
    };
    Handled {
        result,
        report: Some(report),
    }
}

/// The rest of upstream's `handleBindingCycleError`, for a pod whose binding cycle failed
/// (PreBind or Bind; the executor has forgotten its assumption, and runs Unreserve after):
/// the failure handler takes it with the binding's error, as any pod whose attempt failed
/// with one (requeued through backoff, its nomination cleared, FailedScheduling reported),
/// then every other pod may fit where it was assumed (AssignedPod Delete). `prebind_node`:
/// the node the binding cycle nominated the pod to before PreBind
/// (NominatedNodeNameForExpectation), a nomination that goes too.
pub(crate) fn handle_binding_failure(
    st: &mut State,
    queued: QueuedPodInfo,
    prebind_node: Option<&str>,
    message: String,
    attempt: &Attempt,
) -> Handled {
    let uid = queued.pod.uid.clone();
    let queued = match prebind_node {
        Some(node) if queued.pod.nominated_node_name.as_deref() != Some(node) => {
            let mut p = PodInfo::clone(&queued.pod);
            p.nominated_node_name = Some(node.to_string());
            QueuedPodInfo {
                pod: Arc::new(p),
                ..queued
            }
        }
        _ => queued,
    };
    let handled = handle_failure(st, queued, Failure::error(message), attempt);
    let others = move |p: &PodInfo| p.uid != uid;
    st.queue.move_all_to_active_or_backoff(
        ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
        Some(&others),
    );
    handled
}

/// Starts carrying out preemption's decision (upstream's asynchronous preemption): the
/// preemptor waits, gated, until the executor reports its live victims deleted, and the
/// lower-priority pods nominated to the node lose their nomination first. Returns the
/// executor's action, if there is anything to do. Call it before the preemptor is requeued.
pub(crate) fn start_preemption(
    st: &mut State,
    eviction: Eviction,
    scheduler_name: &str,
) -> Option<Action> {
    let victims = live_victims(st, &eviction.victims);
    if !victims.is_empty() {
        st.queue.preemption_started(&eviction.preemptor);
    }
    let clear: Vec<PodRef> = eviction
        .nominations_to_clear
        .iter()
        .map(|k| {
            st.queue.delete_nominated_if_exists(k);
            st.queue
                .get(k)
                .map(|p| PodRef::of(&p.pod))
                .unwrap_or_else(|| PodRef {
                    namespace: k.namespace.clone(),
                    name: k.name.clone(),
                    uid: String::new(),
                })
        })
        .collect();
    if victims.is_empty() && clear.is_empty() {
        return None;
    }
    Some(Action::Preempt {
        preemptor: PodRef::of(&eviction.preemptor),
        preemptor_key: eviction.preemptor.key().clone(),
        scheduler_name: scheduler_name.to_string(),
        node: eviction.node,
        victims,
        clear,
    })
}

/// The victims to evict: those whose graceful deletion already started need no call.
fn live_victims(st: &State, victims: &[PodKey]) -> Vec<PodRef> {
    victims
        .iter()
        .filter_map(|v| st.cache.get_pod(v))
        .filter(|p| !p.is_terminating)
        .map(|p| PodRef::of(p))
        .collect()
}
