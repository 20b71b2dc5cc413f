//! The scheduling loop, on its own OS thread because scheduler-core is synchronous and
//! CPU-bound. Each popped pod goes through upstream's parts (`schedule_one.go`), and a pod of
//! a gang through its group's cycle built from the same parts (`schedule_one_podgroup.go`):
//!
//! * the scheduling cycle ([`cycle`]): refresh the snapshot, route the pod, run its
//!   profile's framework and sort the decision into a placement or a failure
//!   (scheduler-core's [`outcome`](scheduler_core::outcome)); a pod of a gang goes to its
//!   group's cycle ([`gang`]) instead, which ends with one or the other for each member;
//! * the failure handler ([`failure`]): preemption's victims first, then requeue with the
//!   plugins that may help, record the nomination and report FailedScheduling;
//! * the hand-off to binding ([`binding_handoff`]): assume the pod and send its binding
//!   cycle to the executor (`binding::executor`), which runs it asynchronously.

mod binding_handoff;
mod cycle;
mod extenders;
mod failure;
mod gang;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::{Duration, Instant};

use scheduler_core::cache::Snapshot;
use scheduler_core::explain::Record;
use scheduler_core::framework::{Framework, QueuedPodInfo};
use scheduler_core::outcome::{Eviction, Failure, Placement, PodOutcome};
use scheduler_core::schedule_one::SchedulingAlgorithm;
use scheduler_core::types::dra::ClaimDeallocation;
use tokio::sync::mpsc::Sender;

use crate::binding::executor::Action;
use crate::binding::pod_status::{self as status, Nomination};
use crate::informers::INFORMER_COUNT;
use crate::serving::explain::ExplainOptions;
use crate::state::Shared;
use binding_handoff::{Assume, HandOff, hand_off_to_binding};
use cycle::CycleResult;
pub(crate) use extenders::Waiting;
pub(crate) use failure::handle_binding_failure;
use failure::{Handled, handle_failure, start_preemption};

/// Longest sleep without a wake-up, so shutdown is noticed even if a notify is missed.
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// A popped pod and the scheduling cycle its pop started.
pub(crate) struct Popped {
    pub(crate) info: QueuedPodInfo,
    pub(crate) cycle: u64,
    /// When the attempt started, for `scheduler_scheduling_attempt_duration_seconds`.
    pub(crate) started: Instant,
}

/// What the loop does next.
enum Next {
    Pod(Popped),
    /// A pod whose extenders answered: its cycle goes on.
    Resume(Box<extenders::Answered>),
    /// FailedScheduling reports for pods the queue keeps out ([`State::gate_reports`]).
    ///
    /// [`State::gate_reports`]: crate::state::State::gate_reports
    Reports(Vec<Action>),
}

/// One attempt, as the failure handler and the binding hand-off need it: the profile, the
/// queue's scheduling cycle it started in, and when (a group's members share their
/// attempt).
#[derive(Clone)]
pub(crate) struct Attempt {
    pub(crate) scheduler_name: String,
    pub(crate) cycle: u64,
    pub(crate) started: Instant,
}

pub(crate) struct SchedulingLoop {
    pub(crate) shared: Arc<Shared>,
    pub(crate) alg: SchedulingAlgorithm,
    pub(crate) actions: Sender<Action>,
    pub(crate) explain: ExplainOptions,
    /// Reused by every recorded attempt.
    pub(crate) record: Record,
    /// The Workload API version serving PodGroups (discovery), for their conditions.
    pub(crate) pod_group_version: Option<&'static str>,
    /// Cycles waiting for their extenders, and the pods held behind them.
    pub(crate) waiting: extenders::Waiting,
}

impl SchedulingLoop {
    /// Runs until shutdown is requested. Dropping `self` at the end closes the action
    /// channel, which lets the executor finish in-flight bindings and stop.
    pub(crate) fn run(mut self) {
        let mut snapshot = Snapshot::new();
        while let Some(next) = self.next_pod() {
            match next {
                Next::Pod(q) => self.schedule(q, &mut snapshot),
                Next::Resume(a) => self.resume(*a, &mut snapshot),
                Next::Reports(actions) => actions.into_iter().for_each(|a| self.send(a)),
            }
        }
        tracing::info!("scheduling loop stopped");
    }

    /// Blocks until the queue yields a pod (and every informer has synced) or shutdown:
    /// upstream's blocking `Pop`. Informer events, flushes, finished bindings and extender
    /// answers notify. Pods kept out for good reasons the API server cannot show are
    /// reported first, then answered extender calls resumed and held pods taken.
    fn next_pod(&mut self) -> Option<Next> {
        let shared = Arc::clone(&self.shared);
        let profile_of = |p: &Popped| {
            shared
                .profiles
                .for_scheduler_name(&p.info.pod.scheduler_name)
                .map(|fw| fw.profile_name().to_string())
                .unwrap_or_default()
        };
        let mut st = shared.lock();
        loop {
            if st.shutting_down {
                return None;
            }
            if !st.gate_reports.is_empty() {
                let reports = std::mem::take(&mut st.gate_reports);
                let actions = reports
                    .into_iter()
                    .map(|r| Action::Failure {
                        condition: st.conditions.get(&r.key).cloned(),
                        pod: r.pod,
                        scheduler_name: r.scheduler_name,
                        reason: status::REASON_UNSCHEDULABLE,
                        message: r.message,
                        nomination: Nomination::Keep,
                    })
                    .collect();
                return Some(Next::Reports(actions));
            }
            if let Some(answered) = self.waiting.answered() {
                return Some(Next::Resume(answered));
            }
            if let Some(held) = self.waiting.take_held(profile_of) {
                return Some(Next::Pod(held));
            }
            if st.synced >= INFORMER_COUNT
                && let Some(info) = st.queue.pop()
            {
                let cycle = st.queue.scheduling_cycle();
                let popped = Popped {
                    info,
                    cycle,
                    started: Instant::now(),
                };
                let profile = profile_of(&popped);
                match self.waiting.hold_if_busy(popped, &profile) {
                    Some(popped) => return Some(Next::Pod(popped)),
                    None => continue,
                }
            }
            st = shared.wait_timeout(st, IDLE_WAIT);
        }
    }

    /// Upstream's `ScheduleOne`: the scheduling cycle, then the failure handler or the
    /// hand-off to binding; a pod of a gang is scheduled with its group.
    fn schedule(&mut self, popped: Popped, snapshot: &mut Snapshot) {
        let profiles = Arc::clone(&self.shared.profiles);
        let Some(fw) = profiles.for_scheduler_name(&popped.info.pod.scheduler_name) else {
            self.shared.lock().queue.done(&popped.info.pod);
            return;
        };
        let attempt = Attempt {
            scheduler_name: fw.profile_name().to_string(),
            cycle: popped.cycle,
            started: popped.started,
        };
        let result = self.scheduling_cycle(fw, popped.info, &attempt, snapshot);
        self.carry_out(fw, result, attempt, snapshot);
    }

    /// What follows a scheduling cycle: the group's cycle, the binding hand-off, the
    /// failure handler, or the wait for the pod's extenders.
    fn carry_out(
        &mut self,
        fw: &Framework,
        result: CycleResult,
        attempt: Attempt,
        snapshot: &mut Snapshot,
    ) {
        let attempt = &attempt;
        match result {
            CycleResult::Skipped => {}
            CycleResult::Extenders(q, calls, record) => {
                self.call_extenders(q, calls, attempt.clone(), record)
            }
            CycleResult::Gang(q, group) => self.schedule_gang(fw, q, &group, attempt, snapshot),
            CycleResult::Tree(q, root) => self.schedule_tree(fw, q, &root, attempt, snapshot),
            CycleResult::Done(q, PodOutcome::Bind(placement)) => {
                self.bind_pod(fw, q, placement, attempt)
            }
            CycleResult::Done(
                q,
                PodOutcome::Fail {
                    failure,
                    eviction,
                    deallocate,
                },
            ) => self.fail_pod(q, failure, eviction, deallocate, attempt),
        }
    }

    /// A pod its own cycle placed: assumed and handed to its binding cycle (or, if it cannot
    /// be assumed, to the failure handler).
    fn bind_pod(&self, fw: &Framework, q: QueuedPodInfo, placement: Placement, attempt: &Attempt) {
        let mut st = self.shared.lock();
        let handed = hand_off_to_binding(&mut st, fw, q, placement, attempt, Assume::Now);
        drop(st);
        match handed {
            HandOff::Bind(bind) => self.send(bind),
            HandOff::Failed(handled) => self.finish_attempt(attempt, Vec::new(), vec![handled]),
        }
    }

    /// A pod its own cycle did not place: PostFilter's decisions are carried out (the
    /// claim deallocation whatever becomes of the pod; the eviction only if the pod is
    /// still there), then the failure handler takes it.
    fn fail_pod(
        &self,
        q: QueuedPodInfo,
        failure: Failure,
        eviction: Option<Eviction>,
        deallocate: Option<ClaimDeallocation>,
        attempt: &Attempt,
    ) {
        let mut st = self.shared.lock();
        let preempt = eviction.and_then(|e| start_preemption(&mut st, e, &attempt.scheduler_name));
        let (key, uid) = (q.pod.key().clone(), q.pod.uid.clone());
        let handled = handle_failure(&mut st, q, failure, attempt);
        let mut actions: Vec<Action> = deallocate
            .map(|claim| Action::Deallocate { claim })
            .into_iter()
            .collect();
        if handled.report.is_some() {
            actions.extend(preempt);
        } else {
            // Deleted meanwhile: nobody waits for its victims.
            st.queue.preemption_finished(&key, &uid, true);
        }
        drop(st);
        self.finish_attempt(attempt, actions, vec![handled]);
    }

    /// Ends an attempt outside the lock (sending may wait for the executor): wakes the
    /// loop, counts the attempt of every pod the failure handler took, and sends `actions`,
    /// then the failure reports.
    fn finish_attempt(&self, attempt: &Attempt, actions: Vec<Action>, handled: Vec<Handled>) {
        self.shared.notify();
        for h in &handled {
            self.shared.metrics.attempt(
                h.result,
                &attempt.scheduler_name,
                attempt.started.elapsed(),
            );
        }
        let reports = handled.into_iter().filter_map(|h| h.report);
        for a in actions.into_iter().chain(reports) {
            self.send(a);
        }
    }

    /// Blocks while [`ACTIONS_QUEUED`] actions wait for the executor: the loop runs far
    /// ahead of an API server, and each waiting binding holds its pod's cycle state.
    ///
    /// [`ACTIONS_QUEUED`]: crate::binding::executor::ACTIONS_QUEUED
    fn send(&self, action: Action) {
        if self.actions.blocking_send(action).is_err() {
            tracing::warn!("action executor stopped; dropping an action");
        }
    }
}
