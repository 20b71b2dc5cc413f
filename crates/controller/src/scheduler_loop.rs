//! The scheduling loop, on its own OS thread because scheduler-core is synchronous and
//! CPU-bound: pop a pod, refresh the snapshot, run `schedule_one` with the pod's profile,
//! and turn the [`Decision`] into cache/queue updates plus [`Action`]s for the executor.

use std::sync::Arc;
use std::time::{Duration, Instant};

use scheduler_core::cache::Snapshot;
use scheduler_core::framework::{BindAction, PostFilterResult};
use scheduler_core::schedule_one::{Decision, SchedulingAlgorithm, schedule_one};
use scheduler_core::types::PodInfo;
use tokio::sync::mpsc::UnboundedSender;

use crate::actions::Action;
use crate::informers::INFORMER_COUNT;
use crate::podref::PodRef;
use crate::queue::{Outcome, QueuedPod};
use crate::state::Shared;
use crate::status::{self, Nomination};

/// Longest sleep when nothing is due, so shutdown and the unschedulable flush are timely.
const IDLE_WAIT: Duration = Duration::from_secs(1);

pub struct SchedulingLoop {
    pub shared: Arc<Shared>,
    pub alg: SchedulingAlgorithm,
    pub actions: UnboundedSender<Action>,
}

impl SchedulingLoop {
    /// Runs until shutdown is requested. Dropping `self` at the end closes the action
    /// channel, which lets the executor finish in-flight bindings and stop.
    pub fn run(mut self) {
        let mut snapshot = Snapshot::new();
        while let Some(q) = self.next_pod() {
            self.schedule(q, &mut snapshot);
        }
        tracing::info!("scheduling loop stopped");
    }

    /// Blocks until a pod is ready (and every informer has synced) or shutdown.
    fn next_pod(&self) -> Option<QueuedPod> {
        let mut st = self.shared.lock();
        loop {
            if st.shutting_down {
                return None;
            }
            let now = Instant::now();
            if st.synced >= INFORMER_COUNT
                && let Some(q) = st.queue.pop(now)
            {
                return Some(q);
            }
            let wait = st
                .queue
                .next_wakeup()
                .map_or(IDLE_WAIT, |t| t.saturating_duration_since(now))
                .clamp(Duration::from_millis(1), IDLE_WAIT);
            st = self.shared.wait_timeout(st, wait);
        }
    }

    fn schedule(&mut self, q: QueuedPod, snapshot: &mut Snapshot) {
        let shared = Arc::clone(&self.shared);
        let profiles = Arc::clone(&shared.profiles);
        let key = q.pod.key().clone();
        let Some(fw) = profiles.for_scheduler_name(&q.pod.scheduler_name) else {
            let mut st = shared.lock();
            st.queue.remove(&key);
            st.queue.done(&key, Outcome::Error, None, Instant::now());
            return;
        };
        let scheduler_name = fw.profile_name().to_string();
        let nominated = {
            let mut st = shared.lock();
            // Being deleted, or already assumed (its binding is in flight): skip it, as
            // upstream's skipPodSchedule does.
            if q.pod.is_terminating || st.cache.is_assumed(&key) {
                st.queue.remove(&key);
                st.queue.done(&key, Outcome::Error, None, Instant::now());
                return;
            }
            st.cache.update_snapshot(snapshot);
            st.nominated.clone()
        };
        let decision = schedule_one(fw, &mut self.alg, &q.pod, snapshot, &nominated);
        let pod_ref = PodRef::of(&q.pod);
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
                st.nominated.remove(&key);
                if let Err(e) = st.cache.assume_pod(Arc::clone(&pod), &node) {
                    tracing::warn!(pod = %key, error = %e, "assume failed");
                    st.queue.done(&key, Outcome::Error, None, Instant::now());
                    drop(st);
                    fw.run_unreserve(&mut state, &pod, &node);
                    return;
                }
                drop(st);
                tracing::debug!(pod = %key, %node, "scheduled; binding");
                self.send(Action::Bind {
                    pod: pod_ref,
                    node,
                    scheduler_name,
                    info: pod,
                    state,
                });
            }
            Decision::Unschedulable {
                message,
                nomination,
                ..
            } => {
                let now = Instant::now();
                let mut st = shared.lock();
                let mut requeued = None;
                let mut change = Nomination::Keep;
                let mut preempt = None;
                match nomination {
                    None => {}
                    Some(PostFilterResult {
                        nominated_node_name: None,
                        ..
                    }) => {
                        st.nominated.remove(&key);
                        if q.pod.nominated_node_name.is_some() {
                            change = Nomination::Clear;
                            let mut p = PodInfo::clone(&q.pod);
                            p.nominated_node_name = None;
                            requeued = Some(Arc::new(p));
                        }
                    }
                    Some(PostFilterResult {
                        nominated_node_name: Some(node),
                        victims,
                        nominations_to_clear,
                    }) => {
                        let mut p = PodInfo::clone(&q.pod);
                        p.nominated_node_name = Some(node.clone());
                        let p = Arc::new(p);
                        st.nominated.add(Arc::clone(&p), &node);
                        if q.pod.nominated_node_name.as_deref() != Some(node.as_str()) {
                            change = Nomination::Set(node.clone());
                        }
                        requeued = Some(p);
                        let victims = victims
                            .iter()
                            .filter_map(|v| st.cache.get_pod(v).map(|p| PodRef::of(p)))
                            .collect();
                        let clear = nominations_to_clear
                            .iter()
                            .map(|k| {
                                st.nominated.remove(k);
                                st.queue
                                    .get(k)
                                    .map(|p| PodRef::of(p))
                                    .unwrap_or_else(|| PodRef {
                                        namespace: k.namespace.clone(),
                                        name: k.name.clone(),
                                        uid: String::new(),
                                    })
                            })
                            .collect();
                        preempt = Some(Action::Preempt {
                            preemptor: pod_ref.clone(),
                            scheduler_name: scheduler_name.clone(),
                            node,
                            victims,
                            clear,
                        });
                    }
                }
                let exists = st.queue.done(&key, Outcome::Unschedulable, requeued, now);
                drop(st);
                if !exists {
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
                    condition: q.scheduled_condition,
                    nomination: change,
                });
            }
            Decision::Error { message } => {
                let exists = shared
                    .lock()
                    .queue
                    .done(&key, Outcome::Error, None, Instant::now());
                tracing::warn!(pod = %key, %message, "scheduling error");
                if exists {
                    self.send(Action::Failure {
                        pod: pod_ref,
                        scheduler_name,
                        reason: status::REASON_SCHEDULER_ERROR,
                        message,
                        condition: q.scheduled_condition,
                        nomination: Nomination::Keep,
                    });
                }
            }
        }
    }

    fn send(&self, action: Action) {
        if self.actions.send(action).is_err() {
            tracing::warn!("action executor stopped; dropping an action");
        }
    }
}
