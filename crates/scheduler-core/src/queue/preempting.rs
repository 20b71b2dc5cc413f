//! Pods whose preemption is being carried out (upstream's asynchronous preemption,
//! `SchedulerAsyncPreemption`, on by default since 1.33). The scheduling loop nominates the
//! preemptor and hands the victims' deletion to the caller's executor; until it reports back,
//! the preemptor must not be tried again, or it could preempt a second set of victims for the
//! same room. Upstream keeps it out with DefaultPreemption's PreEnqueue check; here the queue
//! runs the same check after the profile's PreEnqueue plugins and names DefaultPreemption as
//! the gating plugin.

use super::{QueueKind, SchedulingQueue, Strategy};
use crate::plugins::names::DEFAULT_PREEMPTION;
use crate::types::{PodInfo, PodKey};

/// Upstream's PreEnqueue message for a pod whose preemption is still under way.
pub const WAITING_FOR_PREEMPTION_MSG: &str =
    "waiting for the preemption for this pod to be finished";

impl SchedulingQueue {
    /// The pod (in flight, just failed with a nomination) starts preempting: until
    /// [`preemption_finished`](Self::preemption_finished), every move towards activeQ or
    /// backoffQ keeps it gated in the unschedulable pool. Call it before requeueing the pod.
    pub fn preemption_started(&mut self, pod: &PodInfo) {
        self.preempting.insert(pod.uid.clone());
    }

    /// Whether the pod with this UID is waiting for its victims to go.
    pub fn is_preempting(&self, uid: &str) -> bool {
        self.preempting.contains(uid)
    }

    /// The victims' deletions are over. On success a pod that an event tried to move
    /// meanwhile (so it is gated by DefaultPreemption) gets that move now; one still waiting
    /// for an event keeps waiting (the victims' deletion events will come). On failure the
    /// pod is moved to activeQ wherever it waits (upstream activates it, so it is not left
    /// in the pool with nothing to wake it). Returns where the pod went, if it moved.
    pub fn preemption_finished(
        &mut self,
        key: &PodKey,
        uid: &str,
        succeeded: bool,
    ) -> Option<QueueKind> {
        if !self.preempting.remove(uid) {
            return None;
        }
        let waiting = self.get(key).is_some_and(|i| i.pod.uid == uid);
        if !waiting {
            return None;
        }
        let gated_by_us = self
            .unschedulable
            .get(key)
            .is_some_and(|i| i.gating_plugin == Some(DEFAULT_PREEMPTION));
        if succeeded && !gated_by_us {
            return None;
        }
        let info = self.remove_waiting(key)?;
        let kind = if succeeded {
            self.requeue(info, Strategy::AfterBackoff)
        } else {
            self.move_to_active(info, true)
        };
        if kind == QueueKind::Active || kind == QueueKind::Backoff {
            self.counters.incoming(kind, super::FORCE_ACTIVATE);
        }
        Some(kind)
    }
}
