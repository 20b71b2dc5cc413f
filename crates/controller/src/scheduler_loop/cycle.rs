//! The scheduling cycle of a popped pod (upstream's `schedulingCycle`): skip a pod that
//! needs none, refresh the snapshot, route a pod of a gang to its group, run the profile's
//! framework (recorded when `run --explain` asks) and sort the decision into what the
//! failure handler or the binding hand-off does next.

use std::sync::Arc;

use scheduler_core::cache::Snapshot;
use scheduler_core::explain::{Record, simulator};
use scheduler_core::framework::{Diagnosis, Framework, NominatedPods, QueuedPodInfo};
use scheduler_core::outcome::{Failure, PodOutcome, pod_outcome};
use scheduler_core::schedule_extenders::{self, ExtenderCalls};
use scheduler_core::schedule_group::{self, Route};
use scheduler_core::schedule_one::{Decision, schedule_one, schedule_one_recorded};
use scheduler_core::types::PodInfo;
use scheduler_core::types::composite_pod_group::CompositeKey;
use scheduler_core::types::pod_group::PodGroupInfo;

use super::{Attempt, SchedulingLoop};
use crate::binding::executor::Action;
use crate::binding::podref::PodRef;

/// How a scheduling cycle ended. One per attempt, moved once: not worth boxing.
#[allow(clippy::large_enum_variant)]
pub(super) enum CycleResult {
    /// Nothing to schedule (being deleted, or already assumed): the attempt is over.
    Skipped,
    /// A pod of a gang: its group's cycle schedules it.
    Gang(QueuedPodInfo, Arc<PodGroupInfo>),
    /// A pod of a tree of groups (CompositePodGroup): the root's cycle schedules it.
    Tree(QueuedPodInfo, CompositeKey),
    /// Decided: to bind, or to the failure handler (a pod of a gang whose group went away
    /// too, as if PreEnqueue had kept it out).
    Done(QueuedPodInfo, PodOutcome),
    /// Waiting for its extenders' answers ([`super::extenders`]), with the attempt's
    /// record when `run --explain` records its profile.
    Extenders(QueuedPodInfo, ExtenderCalls, Option<Box<Record>>),
}

impl SchedulingLoop {
    pub(super) fn scheduling_cycle(
        &mut self,
        fw: &Framework,
        q: QueuedPodInfo,
        attempt: &Attempt,
        snapshot: &mut Snapshot,
    ) -> CycleResult {
        let Some(nominated) = self.prepare(&q, snapshot) else {
            return CycleResult::Skipped;
        };
        match self.route(fw, &q.pod) {
            Route::Alone => {}
            Route::Gang(group) => return CycleResult::Gang(q, group),
            Route::Tree(root) => return CycleResult::Tree(q, root),
            Route::Wait(status) => {
                let mut diagnosis = Diagnosis::default();
                diagnosis.unschedulable_plugins.extend(status.plugin());
                let failure = Failure::unschedulable(status.message(), Some(diagnosis));
                let outcome = PodOutcome::Fail {
                    failure,
                    eviction: None,
                    deallocate: None,
                };
                return CycleResult::Done(q, outcome);
            }
        }
        if schedule_extenders::needs_extender_calls(fw, &q.pod) {
            // Cut around the extender calls, which run off the loop. Its own record, as
            // other pods' attempts use the loop's while it waits.
            let mut record = self
                .explain
                .records(&attempt.scheduler_name)
                .then(|| Box::new(Record::new()));
            let step = schedule_extenders::begin(
                fw,
                &mut self.alg,
                &q.pod,
                snapshot,
                &nominated,
                record.as_deref_mut(),
            );
            return self.stepped(fw, q, step, attempt, snapshot, record);
        }
        let decision = self.run_framework(fw, &q.pod, snapshot, &nominated, attempt);
        self.decided(q, decision)
    }

    /// A decided cycle: preemption counted, the decision sorted into its outcome (a
    /// placement's scores, read by then, handed back to the algorithm for reuse).
    pub(super) fn decided(&mut self, q: QueuedPodInfo, mut decision: Decision) -> CycleResult {
        if let Decision::Bind { result, .. } = &mut decision {
            self.alg.recycle(std::mem::take(result));
        }
        if let Decision::Unschedulable {
            nomination: Some(r),
            ..
        } = &decision
        {
            self.shared.metrics.preemption_attempt();
            if r.nominated_node_name.is_some() {
                self.shared.metrics.preemption_victims(r.victims.len());
            }
        }
        let outcome = pod_outcome(&q.pod, decision);
        CycleResult::Done(q, outcome)
    }

    /// Skips a pod being deleted, or already assumed (its binding is in flight), as
    /// upstream's `skipPodSchedule` does; otherwise refreshes the snapshot and returns the
    /// nominated pods the cycle counts.
    fn prepare(&self, q: &QueuedPodInfo, snapshot: &mut Snapshot) -> Option<NominatedPods> {
        let mut st = self.shared.lock();
        if q.pod.is_terminating || st.cache.is_assumed(q.pod.key()) {
            st.queue.done(&q.pod);
            return None;
        }
        st.cache.update_snapshot(snapshot);
        Some(st.queue.nominated_pods().clone())
    }

    /// A pod of a gang is scheduled with its group, never alone. Most pods name no group:
    /// they take no lock for it.
    fn route(&self, fw: &Framework, pod: &PodInfo) -> Route {
        if pod.pod_group.is_none() {
            return Route::Alone;
        }
        let groups = Arc::clone(&self.shared.lock().groups);
        schedule_group::route(fw, &groups, pod)
    }

    /// Runs the framework on the pod (`schedule_one`), recording the attempt when its
    /// explanation is wanted, and counts the cycle's timings and batching.
    fn run_framework(
        &mut self,
        fw: &Framework,
        pod: &Arc<PodInfo>,
        snapshot: &Snapshot,
        nominated: &NominatedPods,
        attempt: &Attempt,
    ) -> Decision {
        let name = &attempt.scheduler_name;
        let recorded = self.explain.records(name);
        let started = std::time::Instant::now();
        let decision = if recorded {
            schedule_one_recorded(
                fw,
                &mut self.alg,
                pod,
                snapshot,
                nominated,
                &mut self.record,
            )
        } else {
            schedule_one(fw, &mut self.alg, pod, snapshot, nominated)
        };
        let metrics = &self.shared.metrics;
        if matches!(decision, Decision::Bind { .. }) {
            metrics.algorithm(started.elapsed());
        }
        metrics.cycle(name, &self.alg.take_cycle_timings());
        metrics.batch(name, &self.alg.take_batch_stats());
        if recorded {
            self.explain_attempt(fw, pod, snapshot, &decision, name, &self.record);
        }
        decision
    }

    /// Names and words a recorded attempt (`record`) only when kept: a pending pod's for
    /// /debug/explain, any pod's for the simulator's annotations.
    pub(super) fn explain_attempt(
        &self,
        fw: &Framework,
        pod: &Arc<PodInfo>,
        snapshot: &Snapshot,
        decision: &Decision,
        scheduler_name: &str,
        record: &Record,
    ) {
        let placed = matches!(decision, Decision::Bind { .. });
        let annotate = self.explain.annotates(scheduler_name);
        let kept = annotate || (self.explain.serve && !placed);
        if !kept {
            return;
        }
        let explanation = Arc::new(record.render(fw, pod, snapshot, decision));
        if annotate {
            self.send(Action::Annotate {
                pod: PodRef::of(pod),
                annotations: simulator::simulator_annotations(&explanation),
            });
        }
        if !placed {
            self.shared
                .lock()
                .explain
                .put(pod.key().clone(), explanation);
        }
    }
}
