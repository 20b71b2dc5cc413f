//! Carries out the scheduling loop's decisions against the API server, asynchronously, so a
//! slow binding never holds up the next scheduling cycle. Each action runs as its own task;
//! when the loop closes the channel, the executor waits for the in-flight ones to finish.

use std::sync::Arc;
use std::time::Instant;

use crate::retry::ApiClient;
use k8s_openapi::api::core::v1::PodCondition;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::binder::{BindError, bind};
use crate::events::{self, EventSpec, EventType, Recorder};
use crate::podref::PodRef;
use crate::queue::Outcome;
use crate::state::Shared;
use crate::status::{self, Nomination};
use scheduler_core::framework::CycleState;
use scheduler_core::types::{PodInfo, PodKey};

#[derive(Debug)]
pub enum Action {
    /// The binding cycle for an assumed pod.
    Bind {
        pod: PodRef,
        node: String,
        scheduler_name: String,
        /// The pod the plugins saw and the cycle state, for PostBind or Unreserve.
        info: Arc<PodInfo>,
        state: CycleState,
    },
    /// A failed attempt: FailedScheduling event plus PodScheduled=False (and nomination).
    Failure {
        pod: PodRef,
        scheduler_name: String,
        reason: &'static str,
        message: String,
        condition: Option<PodCondition>,
        nomination: Nomination,
    },
    /// Preemption chose `node`: delete the victims, clear nominations that no longer fit.
    Preempt {
        preemptor: PodRef,
        scheduler_name: String,
        node: String,
        victims: Vec<PodRef>,
        clear: Vec<PodRef>,
    },
}

pub struct Executor {
    pub client: ApiClient,
    pub recorder: Recorder,
    pub shared: Arc<Shared>,
}

impl Executor {
    pub async fn run(self: Arc<Self>, mut rx: mpsc::UnboundedReceiver<Action>) {
        let mut tasks = JoinSet::new();
        while let Some(action) = rx.recv().await {
            let me = Arc::clone(&self);
            tasks.spawn(async move { me.execute(action).await });
            // Reap finished tasks so the set does not grow without bound.
            while tasks.try_join_next().is_some() {}
        }
        let pending = tasks.len();
        if pending > 0 {
            tracing::info!(pending, "waiting for in-flight API calls");
        }
        while tasks.join_next().await.is_some() {}
    }

    async fn execute(&self, action: Action) {
        match action {
            Action::Bind {
                pod,
                node,
                scheduler_name,
                info,
                mut state,
            } => {
                let bound = self.bind(pod, &node, scheduler_name.clone()).await;
                if let Some(fw) = self.shared.profiles.for_scheduler_name(&scheduler_name) {
                    if bound {
                        fw.run_post_bind(&state, &info, &node);
                    } else {
                        fw.run_unreserve(&mut state, &info, &node);
                    }
                }
            }
            Action::Failure {
                pod,
                scheduler_name,
                reason,
                message,
                condition,
                nomination,
            } => {
                self.report_failure(
                    &pod,
                    &scheduler_name,
                    reason,
                    &message,
                    condition.as_ref(),
                    &nomination,
                )
                .await
            }
            Action::Preempt {
                preemptor,
                scheduler_name,
                node,
                victims,
                clear,
            } => {
                for v in &victims {
                    if status::preempt_victim(&self.client, v, &scheduler_name).await {
                        let note = format!("Preempted by pod {} on node {node}", preemptor.uid);
                        self.recorder
                            .record(EventSpec {
                                controller: &scheduler_name,
                                regarding: v,
                                related: Some(&preemptor),
                                type_: EventType::Normal,
                                reason: events::REASON_PREEMPTED,
                                action: events::ACTION_PREEMPTING,
                                note: &note,
                            })
                            .await;
                    }
                }
                for p in &clear {
                    status::clear_nomination(&self.client, p).await;
                }
            }
        }
    }

    async fn report_failure(
        &self,
        pod: &PodRef,
        scheduler_name: &str,
        reason: &str,
        message: &str,
        condition: Option<&PodCondition>,
        nomination: &Nomination,
    ) {
        self.recorder
            .record(EventSpec {
                controller: scheduler_name,
                regarding: pod,
                related: None,
                type_: EventType::Warning,
                reason: events::REASON_FAILED_SCHEDULING,
                action: events::ACTION_SCHEDULING,
                note: message,
            })
            .await;
        status::report_failure(&self.client, pod, reason, message, condition, nomination).await;
    }

    /// Returns whether the pod was bound.
    async fn bind(&self, pod: PodRef, node: &str, scheduler_name: String) -> bool {
        let key = PodKey::new(&pod.namespace, &pod.name);
        match bind(&self.client, &pod, node).await {
            Ok(()) => {
                {
                    let mut st = self.shared.lock();
                    st.cache.finish_binding(&key);
                    st.queue.done(&key, Outcome::Bound, None, Instant::now());
                }
                self.shared.notify();
                let note = format!(
                    "Successfully assigned {}/{} to {node}",
                    pod.namespace, pod.name
                );
                self.recorder
                    .record(EventSpec {
                        controller: &scheduler_name,
                        regarding: &pod,
                        related: None,
                        type_: EventType::Normal,
                        reason: events::REASON_SCHEDULED,
                        action: events::ACTION_BINDING,
                        note: &note,
                    })
                    .await;
                true
            }
            Err(BindError::Gone(e)) => {
                tracing::info!(%pod, %node, error = %e, "pod gone or bound elsewhere; dropping");
                let mut st = self.shared.lock();
                let _ = st.cache.forget_pod(&key);
                // If the informer still has it unassigned (e.g. re-created), it retries later.
                st.queue.done(&key, Outcome::Error, None, Instant::now());
                st.queue.move_all(Instant::now());
                drop(st);
                self.shared.notify();
                false
            }
            Err(BindError::Failed(e)) => {
                tracing::warn!(%pod, %node, error = %e, "binding failed");
                let (exists, condition) = {
                    let mut st = self.shared.lock();
                    let _ = st.cache.forget_pod(&key);
                    st.nominated.remove(&key);
                    let exists = st.queue.done(&key, Outcome::Error, None, Instant::now());
                    st.queue.move_all(Instant::now());
                    (exists, None)
                };
                self.shared.notify();
                if exists {
                    let message = format!("binding rejected: {e}");
                    self.report_failure(
                        &pod,
                        &scheduler_name,
                        status::REASON_SCHEDULER_ERROR,
                        &message,
                        condition,
                        &Nomination::Clear,
                    )
                    .await;
                }
                false
            }
        }
    }
}
