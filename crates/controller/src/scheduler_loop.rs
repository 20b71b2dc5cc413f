//! The scheduling loop, on its own OS thread because scheduler-core is synchronous and
//! CPU-bound: pop a pod, refresh the snapshot, run `schedule_one` with the pod's profile,
//! and turn the [`Decision`] into cache/queue updates plus [`Action`]s for the executor.

use std::sync::Arc;
use std::time::{Duration, Instant};

use scheduler_core::cache::Snapshot;
use scheduler_core::explain::{Record, simulator};
use scheduler_core::framework::{
    BindAction, Diagnosis, Framework, PostFilterResult, QueuedPodInfo,
};
use scheduler_core::group_preemption::{self, GroupPreemption};
use scheduler_core::plugins::volume_binding;
use scheduler_core::queue::QueueError;
use scheduler_core::schedule_group::{self, GroupOutcome, Route, WaitingMember};
use scheduler_core::schedule_one::{
    Decision, SchedulingAlgorithm, assume_decision, schedule_one, schedule_one_recorded,
};
use scheduler_core::types::pod_group::PodGroupInfo;
use scheduler_core::types::{PodInfo, PodKey};
use tokio::sync::mpsc::Sender;

use crate::binding::executor::Action;
use crate::binding::pod_group_status::ConditionWrite;
use crate::binding::pod_status::{self as status, Nomination};
use crate::binding::podref::PodRef;
use crate::informers::INFORMER_COUNT;
use crate::serving::explain::ExplainOptions;
use crate::serving::metrics;
use crate::state::{Shared, State};

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
    /// FailedScheduling reports for pods the queue keeps out ([`State::gate_reports`]).
    Reports(Vec<Action>),
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
}

impl SchedulingLoop {
    /// Runs until shutdown is requested. Dropping `self` at the end closes the action
    /// channel, which lets the executor finish in-flight bindings and stop.
    pub(crate) fn run(mut self) {
        let mut snapshot = Snapshot::new();
        while let Some(next) = self.next_pod() {
            match next {
                Next::Pod(q) => self.schedule(q, &mut snapshot),
                Next::Reports(actions) => actions.into_iter().for_each(|a| self.send(a)),
            }
        }
        tracing::info!("scheduling loop stopped");
    }

    /// Blocks until the queue yields a pod (and every informer has synced) or shutdown:
    /// upstream's blocking `Pop`. Informer events, flushes and finished bindings notify.
    /// Pods kept out for good reasons the API server cannot show are reported first.
    fn next_pod(&self) -> Option<Next> {
        let mut st = self.shared.lock();
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
            if st.synced >= INFORMER_COUNT
                && let Some(info) = st.queue.pop()
            {
                let cycle = st.queue.scheduling_cycle();
                return Some(Next::Pod(Popped {
                    info,
                    cycle,
                    started: Instant::now(),
                }));
            }
            st = self.shared.wait_timeout(st, IDLE_WAIT);
        }
    }

    fn schedule(&mut self, q: Popped, snapshot: &mut Snapshot) {
        let Popped {
            info: q,
            cycle,
            started,
        } = q;
        let shared = Arc::clone(&self.shared);
        let profiles = Arc::clone(&shared.profiles);
        let key = q.pod.key().clone();
        let Some(fw) = profiles.for_scheduler_name(&q.pod.scheduler_name) else {
            shared.lock().queue.done(&q.pod);
            return;
        };
        let scheduler_name = fw.profile_name().to_string();
        let nominated = {
            let mut st = shared.lock();
            // Being deleted, or already assumed (its binding is in flight): skip it, as
            // upstream's skipPodSchedule does.
            if q.pod.is_terminating || st.cache.is_assumed(&key) {
                st.queue.done(&q.pod);
                return;
            }
            st.cache.update_snapshot(snapshot);
            st.queue.nominated_pods().clone()
        };
        // A pod of a gang is scheduled with its group, never alone.
        // Most pods name no group: they take no lock for it.
        let route = if q.pod.pod_group.is_none() {
            Route::Alone
        } else {
            let groups = Arc::clone(&shared.lock().groups);
            schedule_group::route(fw, &groups, &q.pod)
        };
        match route {
            Route::Alone => {}
            Route::Gang(group) => {
                self.schedule_gang(q, cycle, started, fw, &group, snapshot);
                return;
            }
            Route::Wait(status) => {
                let mut diagnosis = Diagnosis::default();
                diagnosis.unschedulable_plugins.extend(status.plugin());
                let waiting = WaitingMember {
                    queued: q,
                    message: status.message(),
                    diagnosis: Some(diagnosis),
                };
                let mut st = shared.lock();
                let actions = requeue_waiting(&mut st, &scheduler_name, cycle, vec![waiting], &[]);
                drop(st);
                self.finish_gang_attempt(&scheduler_name, started, actions);
                return;
            }
        }
        let recorded = self.explain.records(&scheduler_name);
        let decision = if recorded {
            schedule_one_recorded(
                fw,
                &mut self.alg,
                &q.pod,
                snapshot,
                &nominated,
                &mut self.record,
            )
        } else {
            schedule_one(fw, &mut self.alg, &q.pod, snapshot, &nominated)
        };
        shared
            .metrics
            .cycle(&scheduler_name, &self.alg.take_cycle_timings());
        shared
            .metrics
            .batch(&scheduler_name, &self.alg.take_batch_stats());
        let pod_ref = PodRef::of(&q.pod);
        // Named and worded only when kept: a pending pod's for /debug/explain, any pod's
        // for the simulator's annotations.
        let placed = matches!(decision, Decision::Bind { .. });
        let annotate = recorded && self.explain.annotates(&scheduler_name);
        let explanation = (recorded && (annotate || (self.explain.serve && !placed)))
            .then(|| Arc::new(self.record.render(fw, &q.pod, snapshot, &decision)));
        if annotate && let Some(e) = &explanation {
            self.send(Action::Annotate {
                pod: pod_ref.clone(),
                annotations: simulator::simulator_annotations(e),
            });
        }
        if let Some(e) = explanation.filter(|_| !placed) {
            shared.lock().explain.put(key.clone(), e);
        }
        match decision {
            Decision::Bind {
                node,
                pod,
                action,
                mut state,
                ..
            } => {
                let BindAction::Binding { .. } = action;
                let mut st = shared.lock();
                st.queue.delete_nominated_if_exists(&key);
                st.explain.remove(&key);
                if let Err(e) = assume_decision(&mut st.cache, Arc::clone(&pod), &node, &state) {
                    tracing::warn!(pod = %key, error = %e, "assume failed");
                    let _ = st.queue.add_unschedulable_if_not_present(q, None, cycle);
                    drop(st);
                    shared.metrics.attempt(
                        metrics::RESULT_ERROR,
                        &scheduler_name,
                        started.elapsed(),
                    );
                    self.shared.notify();
                    fw.run_unreserve(&mut state, &pod, &node);
                    return;
                }
                // VolumeBinding's decision (assumed above) for the binding cycle to carry out.
                let volumes = volume_binding::decided_bindings(&state).cloned();
                drop(st);
                tracing::debug!(pod = %key, %node, "scheduled; binding");
                self.send(Action::Bind {
                    pod: pod_ref,
                    node,
                    scheduler_name,
                    info: pod,
                    state,
                    volumes,
                    queued: q,
                    cycle,
                    started,
                });
            }
            Decision::Unschedulable {
                message,
                diagnosis,
                nomination,
                deallocate,
                ..
            } => {
                let mut st = shared.lock();
                let mut change = Nomination::Keep;
                let mut preempt = None;
                // Upstream's failure handler: requeue, then record the nominating info.
                let mut requeue = q.clone();
                let mut nominate: Option<Option<String>> = None;
                if nomination.is_some() {
                    shared.metrics.preemption_attempt();
                }
                match nomination {
                    None => {}
                    Some(PostFilterResult {
                        nominated_node_name: None,
                        ..
                    }) => {
                        nominate = Some(None);
                        if q.pod.nominated_node_name.is_some() {
                            change = Nomination::Clear;
                            let mut p = PodInfo::clone(&q.pod);
                            p.nominated_node_name = None;
                            requeue.pod = Arc::new(p);
                        }
                    }
                    Some(PostFilterResult {
                        nominated_node_name: Some(node),
                        victims,
                        nominations_to_clear,
                    }) => {
                        let mut p = PodInfo::clone(&q.pod);
                        p.nominated_node_name = Some(node.clone());
                        requeue.pod = Arc::new(p);
                        if q.pod.nominated_node_name.as_deref() != Some(node.as_str()) {
                            change = Nomination::Set(node.clone());
                        }
                        nominate = Some(Some(node.clone()));
                        shared.metrics.preemption_victims(victims.len());
                        let victims = live_victims(&st, &victims);
                        // Asynchronous preemption: the preemptor waits (gated) until the
                        // executor reports the victims' deletion; the loop goes on.
                        if !victims.is_empty() {
                            st.queue.preemption_started(&q.pod);
                        }
                        let clear = nominations_to_clear
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
                        preempt = Some(Action::Preempt {
                            preemptor: pod_ref.clone(),
                            preemptor_key: key.clone(),
                            scheduler_name: scheduler_name.clone(),
                            node,
                            victims,
                            clear,
                        });
                    }
                }
                let nominated_pod = Arc::clone(&requeue.pod);
                let result =
                    st.queue
                        .add_unschedulable_if_not_present(requeue, diagnosis.as_ref(), cycle);
                let deleted = matches!(result, Err(QueueError::Deleted(_)));
                if !deleted {
                    match &nominate {
                        Some(Some(node)) => st.queue.add_nominated(&nominated_pod, Some(node)),
                        Some(None) => st.queue.delete_nominated_if_exists(&key),
                        None => {}
                    }
                }
                let condition = st.conditions.get(&key).cloned();
                drop(st);
                self.shared.notify();
                shared.metrics.attempt(
                    metrics::RESULT_UNSCHEDULABLE,
                    &scheduler_name,
                    started.elapsed(),
                );
                // Upstream writes it in PostFilter, whatever became of the pod since.
                if let Some(claim) = deallocate {
                    self.send(Action::Deallocate { claim });
                }
                if deleted {
                    shared
                        .lock()
                        .queue
                        .preemption_finished(&key, &q.pod.uid, true);
                    return;
                }
                tracing::debug!(pod = %key, %message, "unschedulable");
                if let Some(p) = preempt {
                    self.send(p);
                }
                self.send(Action::Failure {
                    pod: pod_ref,
                    scheduler_name,
                    reason: status::REASON_UNSCHEDULABLE,
                    message,
                    condition,
                    nomination: change,
                });
            }
            Decision::Error { message } => {
                let (deleted, condition) = {
                    let mut st = shared.lock();
                    let result = st.queue.add_unschedulable_if_not_present(q, None, cycle);
                    (
                        matches!(result, Err(QueueError::Deleted(_))),
                        st.conditions.get(&key).cloned(),
                    )
                };
                self.shared.notify();
                shared
                    .metrics
                    .attempt(metrics::RESULT_ERROR, &scheduler_name, started.elapsed());
                tracing::warn!(pod = %key, %message, "scheduling error");
                if !deleted {
                    self.send(Action::Failure {
                        pod: pod_ref,
                        scheduler_name,
                        reason: status::REASON_SCHEDULER_ERROR,
                        message,
                        condition,
                        nomination: Nomination::Keep,
                    });
                }
            }
        }
    }

    /// One attempt for a gang (upstream's pod group cycle): the group's other waiting pods
    /// join `q`, all are tried against the cache with the state held, and either every
    /// placed pod goes to its binding cycle (quorum met) or every member is requeued with
    /// nothing assumed. The lock is held for the whole cycle, so no informer event changes
    /// the cluster between two members' placements.
    fn schedule_gang(
        &mut self,
        q: QueuedPodInfo,
        cycle: u64,
        started: Instant,
        fw: &Framework,
        group: &PodGroupInfo,
        snapshot: &mut Snapshot,
    ) {
        let shared = Arc::clone(&self.shared);
        let scheduler_name = fw.profile_name().to_string();
        let mut st = shared.lock();
        let siblings: Vec<PodKey> = {
            let groups = st.groups.read();
            groups
                .members(&group.key)
                .map(|(k, _)| k.clone())
                .filter(|k| k != q.pod.key())
                // Upstream schedules a group's pods of one profile together.
                .filter(|k| {
                    st.queue
                        .get(k)
                        .is_some_and(|w| w.pod.scheduler_name == q.pod.scheduler_name)
                })
                .collect()
        };
        let mut members = vec![q];
        members.extend(st.queue.pop_group_members(&siblings));
        // Members are tried in queue order, the popped pod first among equals.
        members.sort_by(|a, b| {
            if fw.queue_sort_less(b, a) {
                std::cmp::Ordering::Greater
            } else if fw.queue_sort_less(a, b) {
                std::cmp::Ordering::Less
            } else {
                std::cmp::Ordering::Equal
            }
        });
        let before = schedule_group::scheduled_members(&st.groups.read(), &group.key, &st.cache);
        let nominated = st.queue.nominated_pods().clone();
        let tried = members.len();
        let outcome = schedule_group::schedule_group(
            fw,
            &mut self.alg,
            group,
            &before,
            members,
            &mut st.cache,
            snapshot,
            &nominated,
        );
        let condition = schedule_group::scheduled_condition(group, &outcome)
            .zip(self.pod_group_version)
            .map(|(condition, version)| {
                Action::PodGroupCondition(ConditionWrite {
                    group: group.key.clone(),
                    version,
                    generation: group.generation,
                    transition: group
                        .scheduled_condition
                        .as_ref()
                        .is_none_or(|c| c.status != condition.status),
                    condition,
                })
            });
        let (placed, waiting, preemption) = match outcome {
            GroupOutcome::Placed { placed, waiting } => (placed, waiting, None),
            GroupOutcome::Unschedulable {
                waiting,
                error: false,
                ..
            } if fw.has_post_filter_plugins() => {
                // Workload-aware preemption: for the whole gang, or nothing.
                let members: Vec<QueuedPodInfo> =
                    waiting.iter().map(|w| w.queued.clone()).collect();
                let groups = Arc::clone(&st.groups);
                let st = &mut *st;
                let decision = group_preemption::preempt_for_group(
                    fw,
                    &mut self.alg,
                    group,
                    &before,
                    &members,
                    &groups.read(),
                    &mut st.cache,
                    snapshot,
                    &nominated,
                );
                (Vec::new(), waiting, Some(decision))
            }
            GroupOutcome::Unschedulable { waiting, .. } => (Vec::new(), waiting, None),
        };
        tracing::debug!(
            group = %group.key,
            tried,
            placed = placed.len(),
            "pod group cycle"
        );
        let mut actions = Vec::with_capacity(tried + 1);
        actions.extend(condition);
        for p in placed {
            let key = p.queued.pod.key().clone();
            st.queue.delete_nominated_if_exists(&key);
            st.explain.remove(&key);
            actions.push(Action::Bind {
                pod: PodRef::of(&p.queued.pod),
                node: p.node,
                scheduler_name: scheduler_name.clone(),
                volumes: volume_binding::decided_bindings(&p.state).cloned(),
                info: p.pod,
                state: p.state,
                queued: p.queued,
                cycle,
                started,
            });
        }
        let mut nominations = Vec::new();
        if let Some(GroupPreemption::Preempt {
            victims,
            nominations: placed_at,
            message,
        }) = preemption
        {
            tracing::debug!(group = %group.key, %message, "pod group preemption");
            shared.metrics.preemption_attempt();
            shared.metrics.preemption_victims(victims.len());
            let victims = live_victims(&st, &victims);
            // The first nominated member carries the evictions and waits (gated) until they
            // are done; the others wait for the deletions' events.
            let first = waiting
                .iter()
                .find(|w| placed_at.iter().any(|(k, _)| k == w.queued.pod.key()));
            if let (Some(first), false) = (first, victims.is_empty()) {
                let pod = &first.queued.pod;
                let node = placed_at
                    .iter()
                    .find(|(k, _)| k == pod.key())
                    .map(|(_, n)| n.clone())
                    .unwrap_or_default();
                st.queue.preemption_started(pod);
                actions.push(Action::Preempt {
                    preemptor: PodRef::of(pod),
                    preemptor_key: pod.key().clone(),
                    scheduler_name: scheduler_name.clone(),
                    node,
                    victims,
                    clear: Vec::new(),
                });
            }
            nominations = placed_at;
        }
        actions.extend(requeue_waiting(
            &mut st,
            &scheduler_name,
            cycle,
            waiting,
            &nominations,
        ));
        drop(st);
        self.finish_gang_attempt(&scheduler_name, started, actions);
    }

    /// Wakes the loop, counts the attempts that did not bind and hands the actions over
    /// (outside the lock: sending may wait for the executor).
    fn finish_gang_attempt(&self, scheduler_name: &str, started: Instant, actions: Vec<Action>) {
        self.shared.notify();
        for a in &actions {
            if let Action::Failure { reason, .. } = a {
                let result = if *reason == status::REASON_SCHEDULER_ERROR {
                    metrics::RESULT_ERROR
                } else {
                    metrics::RESULT_UNSCHEDULABLE
                };
                self.shared
                    .metrics
                    .attempt(result, scheduler_name, started.elapsed());
            }
        }
        for a in actions {
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

/// The victims to evict: those whose graceful deletion already started need no call.
fn live_victims(st: &State, victims: &[PodKey]) -> Vec<PodRef> {
    victims
        .iter()
        .filter_map(|v| st.cache.get_pod(v))
        .filter(|p| !p.is_terminating)
        .map(|p| PodRef::of(p))
        .collect()
}

/// Requeues the members of a gang that are not bound this time (upstream's failure handler
/// per pod), nominating those group preemption placed (`nominations`), and returns their
/// FailedScheduling reports.
fn requeue_waiting(
    st: &mut State,
    scheduler_name: &str,
    cycle: u64,
    waiting: Vec<WaitingMember>,
    nominations: &[(PodKey, String)],
) -> Vec<Action> {
    let mut actions = Vec::new();
    for mut w in waiting {
        let node = nominations
            .iter()
            .find(|(k, _)| k == w.queued.pod.key())
            .map(|(_, n)| n.clone());
        let nomination = match &node {
            Some(n) if w.queued.pod.nominated_node_name.as_ref() != Some(n) => {
                let mut p = PodInfo::clone(&w.queued.pod);
                p.nominated_node_name = Some(n.clone());
                w.queued.pod = Arc::new(p);
                Nomination::Set(n.clone())
            }
            _ => Nomination::Keep,
        };
        let pod = Arc::clone(&w.queued.pod);
        let key = pod.key().clone();
        let reason = if w.diagnosis.is_some() {
            status::REASON_UNSCHEDULABLE
        } else {
            status::REASON_SCHEDULER_ERROR
        };
        let result =
            st.queue
                .add_unschedulable_if_not_present(w.queued, w.diagnosis.as_ref(), cycle);
        if matches!(result, Err(QueueError::Deleted(_))) {
            continue;
        }
        if let Some(n) = &node {
            st.queue.add_nominated(&pod, Some(n));
        }
        actions.push(Action::Failure {
            pod: PodRef::of(&pod),
            scheduler_name: scheduler_name.to_string(),
            reason,
            message: w.message,
            condition: st.conditions.get(&key).cloned(),
            nomination,
        });
    }
    actions
}
