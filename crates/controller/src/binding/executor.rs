//! Carries out the scheduling loop's decisions against the API server, asynchronously, so a
//! slow binding never holds up the next scheduling cycle. Each action runs as its own task;
//! when the loop closes the channel, the executor waits for the in-flight ones to finish.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::retry::ApiClient;
use k8s_openapi::api::core::v1::PodCondition;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinSet;

use crate::binding::binder::{BindError, bind};
use crate::binding::event_recorder::{self as events, EventSpec, EventType, Recorder};
use crate::binding::pod_status::{self as status, Nomination, VictimOutcome};
use crate::binding::podref::PodRef;
use crate::scheduler_loop::{Attempt, handle_binding_failure};
use crate::serving::metrics;
use crate::state::Shared;
use scheduler_core::framework::{CycleState, QueuedPodInfo};
use scheduler_core::types::{PodInfo, PodKey, PodVolumes};
use std::collections::HashMap;

use crate::binding::claims::{deallocate, undo_claims, write_claims};
use crate::binding::volumes::{DEFAULT_BIND_TIMEOUT, bind_pod_volumes};
use scheduler_core::plugins::dynamic_resources::binding_conditions::{
    BindingWait, decided_binding_wait,
};
use scheduler_core::plugins::dynamic_resources::decided_claim_writes;
use scheduler_core::types::dra::{ClaimDeallocation, ClaimStatusWrite};

/// What PreBind plugins decided for the binding cycle to carry out (already assumed).
#[derive(Clone, Copy)]
struct Prebind<'a> {
    volumes: Option<&'a PodVolumes>,
    claims: Option<&'a [ClaimStatusWrite]>,
    /// Claims whose devices' binding conditions must hold before the Binding.
    wait: Option<&'a BindingWait>,
}

impl Prebind<'_> {
    /// Whether a PreBind plugin has something to do (upstream's PreBindPreFlight succeeds).
    fn has_work(&self) -> bool {
        self.volumes.is_some() || self.claims.is_some_and(|c| !c.is_empty()) || self.wait.is_some()
    }
}

#[derive(Debug)]
pub(crate) enum Action {
    /// The binding cycle for an assumed pod.
    Bind {
        pod: PodRef,
        node: String,
        scheduler_name: String,
        /// The pod the plugins saw and the cycle state, for PostBind or Unreserve.
        info: Arc<PodInfo>,
        state: CycleState,
        /// VolumeBinding's decision (already assumed in the cache), carried out before the
        /// Binding is POSTed; `None` when the pod's claims need nothing.
        volumes: Option<PodVolumes>,
        /// The popped queue entry and its scheduling cycle: the attempt ends when the
        /// binding does ([`SchedulingQueue::done`] or a requeue on failure).
        ///
        /// [`SchedulingQueue::done`]: scheduler_core::queue::SchedulingQueue::done
        queued: QueuedPodInfo,
        cycle: u64,
        /// When the attempt started (the pop).
        started: Instant,
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
    /// DynamicResources' PostFilter: remove this claim's allocation (sent before the
    /// pod's Failure, as upstream writes it before the pod is requeued).
    Deallocate { claim: ClaimDeallocation },
    /// The scheduler's condition on a Workload API PodGroup after a pod group cycle.
    PodGroupCondition(crate::binding::pod_group_status::ConditionWrite),
    /// Preemption chose `node`: clear nominations that no longer fit, delete the victims,
    /// then tell the queue the preemptor's preemption is over (it waits gated meanwhile).
    Preempt {
        preemptor: PodRef,
        preemptor_key: PodKey,
        scheduler_name: String,
        node: String,
        victims: Vec<PodRef>,
        clear: Vec<PodRef>,
    },
    /// kube-scheduler-simulator's result annotations for the attempt (`run
    /// --explain-annotations`), merged into the pod's metadata.
    Annotate {
        pod: PodRef,
        annotations: std::collections::BTreeMap<String, String>,
    },
}

impl Action {
    /// A binding that first waits for its volumes (up to `bindTimeoutSeconds`) must not
    /// hold a slot meanwhile, or a few slow provisioners would stall every binding.
    /// The same holds for one waiting for device binding conditions (up to
    /// `bindingTimeout`).
    fn may_wait_long(&self) -> bool {
        match self {
            Action::Bind { volumes, state, .. } => {
                volumes.is_some() || decided_binding_wait(state).is_some()
            }
            _ => false,
        }
    }
}

pub(crate) struct Executor {
    pub(crate) client: ApiClient,
    pub(crate) recorder: Recorder,
    pub(crate) shared: Arc<Shared>,
    /// VolumeBinding's `bindTimeoutSeconds` per profile.
    pub(crate) bind_timeouts: HashMap<String, Duration>,
    /// Keeps each pod's PodScheduled condition writes in attempt order.
    pub(crate) status_order: StatusOrder,
    /// Turns true when the loop closed the channel (shutdown): waits for device binding
    /// conditions give up then, as upstream's PreBind does when its context is cancelled.
    pub(crate) closing: tokio::sync::watch::Sender<bool>,
    /// The configured extenders; the binder among them binds the pods it is interested in.
    pub(crate) extenders: Vec<Arc<crate::extender::HttpExtender>>,
    /// Bounds the Scheduled events written after their bindings gave up their slots.
    pub(crate) scheduled_events: ScheduledEvents,
}

/// A bound pod's Scheduled event, still holding its binding's slot.
pub(crate) struct ScheduledEvent {
    pod: PodRef,
    node: String,
    scheduler_name: String,
    slot: Option<OwnedSemaphorePermit>,
}

/// The two bounds on Scheduled events written apart from their bindings.
pub(crate) struct ScheduledEvents {
    /// Bound pods whose event is not written yet (waiting or in flight).
    pending: Semaphore,
    /// Event writes in flight.
    writing: Semaphore,
}

impl Default for ScheduledEvents {
    fn default() -> Self {
        ScheduledEvents {
            pending: Semaphore::new(SCHEDULED_EVENTS_PENDING),
            writing: Semaphore::new(SCHEDULED_EVENT_WRITES),
        }
    }
}

/// Failure reports run in parallel tasks, so two quick attempts of one pod could write its
/// PodScheduled condition out of order and leave the older message (an e2e scenario saw a
/// claim "not found" after the claim had arrived and the pod had been tried again). Each
/// report takes a ticket in the order the loop sent it; writes for one pod go one at a time
/// and only the newest ticket writes.
#[derive(Default)]
pub(crate) struct StatusOrder {
    next: std::sync::atomic::AtomicU64,
    /// Per pod (namespace, name): its newest ticket and the lock its writes take.
    latest: std::sync::Mutex<HashMap<(String, String), Latest>>,
}

type Latest = (u64, Arc<tokio::sync::Mutex<()>>);

impl StatusOrder {
    fn key(pod: &PodRef) -> (String, String) {
        (pod.namespace.clone(), pod.name.clone())
    }

    /// A ticket newer than every earlier one for `pod`.
    fn take(&self, pod: &PodRef) -> u64 {
        let ticket = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let mut m = self.latest.lock().unwrap_or_else(|p| p.into_inner());
        let e = m.entry(Self::key(pod)).or_default();
        e.0 = ticket;
        ticket
    }

    /// Runs `write` if `ticket` is still the newest for `pod`, after any write in progress.
    async fn write_if_latest<F: std::future::Future<Output = ()>>(
        &self,
        pod: &PodRef,
        ticket: u64,
        write: F,
    ) {
        let lock = {
            let m = self.latest.lock().unwrap_or_else(|p| p.into_inner());
            match m.get(&Self::key(pod)) {
                Some((latest, lock)) if *latest == ticket => Arc::clone(lock),
                _ => return,
            }
        };
        let _one_at_a_time = lock.lock().await;
        let still_latest = {
            let m = self.latest.lock().unwrap_or_else(|p| p.into_inner());
            m.get(&Self::key(pod)).is_some_and(|(l, _)| *l == ticket)
        };
        if still_latest {
            write.await;
        }
        let mut m = self.latest.lock().unwrap_or_else(|p| p.into_inner());
        if m.get(&Self::key(pod)).is_some_and(|(l, _)| *l == ticket) {
            m.remove(&Self::key(pod));
        }
    }
}

/// How many actions may talk to the API server at once. The scheduling loop runs ahead of
/// a real API server (it accepts a few hundred bindings a second); without a bound every
/// assumed pod held a task, its request and its response buffers until the server caught
/// up (~2 KiB of task per pod, thousands at once in a burst). 128 keeps the one HTTP/2
/// connection busy (kube-apiserver allows 200 mutating requests in flight in all).
pub const MAX_ACTIONS_IN_FLIGHT: usize = 128;

/// How many more actions may wait for a slot before the scheduling loop waits too. The
/// loop assumes pods far faster than a real API server binds them; unbounded, a burst of
/// 2,000 pending pods queued as many bindings, each holding its pod's cycle state (6-8 MiB
/// more peak RSS against a real kube-apiserver, `benches/reports/2026-11-25c-*`).
pub const ACTIONS_QUEUED: usize = 64;

/// How many bound pods' Scheduled events may wait to be written once their bindings gave
/// their slots to the next ones. A burst binds this far ahead of its events; beyond it a
/// binding waits for an event to be written. Each waiting event is a small task (its pod's
/// name and node), well under 1 MiB for all of them.
pub const SCHEDULED_EVENTS_PENDING: usize = 1024;

/// Scheduled events written at once. With [`MAX_ACTIONS_IN_FLIGHT`] they stay under
/// kube-apiserver's default 200 mutating requests in flight.
pub const SCHEDULED_EVENT_WRITES: usize = 64;

/// How long shutdown waits for in-flight actions once the scheduling loop has stopped;
/// then the rest are cancelled. Waits for volumes and device binding conditions give up at
/// once (`closing`), so this bounds only API calls: with the lease release (at most
/// renewDeadline, 10 s by default) it stays well inside a pod's default 30 s termination
/// grace period. A pod whose binding was cancelled is retried by the next leader.
pub const SHUTDOWN_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Leadership lost: cancels every in-flight action and drops the queued ones.
async fn cancel_all(mut tasks: JoinSet<()>, mut rx: mpsc::Receiver<Action>) {
    let cancelled = tasks.len();
    tasks.abort_all();
    rx.close();
    tracing::warn!(cancelled, "leadership lost: cancelled in-flight API calls");
    while tasks.join_next().await.is_some() {}
}

/// True once the fence is raised; false (never, for `select!`) if its sender is gone.
async fn fenced(fence: &mut tokio::sync::watch::Receiver<bool>) -> bool {
    fence.wait_for(|f| *f).await.is_ok()
}

impl Executor {
    /// Runs actions until the channel closes, then waits for the in-flight ones. When
    /// `fence` turns true (leadership lost) every in-flight action is cancelled and queued
    /// ones are dropped: a request already sent may still land, but none follows it.
    ///
    /// At most [`MAX_ACTIONS_IN_FLIGHT`] actions run at once (a binding that waits for its
    /// volumes does not count, nor one that only writes its Scheduled event); the rest
    /// wait in the channel as plain values.
    pub(crate) async fn run(
        self: Arc<Self>,
        mut rx: mpsc::Receiver<Action>,
        mut fence: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut tasks = JoinSet::new();
        let permits = Arc::new(Semaphore::new(MAX_ACTIONS_IN_FLIGHT));
        loop {
            tokio::select! {
                biased;
                true = fenced(&mut fence) => return cancel_all(tasks, rx).await,
                action = rx.recv() => {
                    let Some(action) = action else {
                        self.closing.send_replace(true);
                        break;
                    };
                    let permit = if action.may_wait_long() {
                        None
                    } else {
                        tokio::select! {
                            biased;
                            true = fenced(&mut fence) => return cancel_all(tasks, rx).await,
                            p = Arc::clone(&permits).acquire_owned() => p.ok(),
                        }
                    };
                    let ticket = match &action {
                        Action::Failure { pod, .. } => self.status_order.take(pod),
                        _ => 0,
                    };
                    let me = Arc::clone(&self);
                    // The API calls' futures take kilobytes; boxed, the task tokio moves
                    // around while spawning and finishing it stays small. The box owns the
                    // action, so once it is done a bound pod's event waits in a task of
                    // ~560 bytes, not ~940 (up to SCHEDULED_EVENTS_PENDING of them).
                    let action = Box::pin({
                        let me = Arc::clone(&me);
                        async move { me.execute(action, ticket, permit).await }
                    });
                    let task = async move {
                        if let Some(event) = action.await {
                            me.scheduled_event(event).await;
                        }
                    };
                    tasks.spawn(task);
                    // Reap finished tasks so the set does not grow without bound.
                    while tasks.try_join_next().is_some() {}
                }
            }
        }
        let pending = tasks.len();
        if pending > 0 {
            tracing::info!(pending, "waiting for in-flight API calls");
        }
        let give_up = tokio::time::sleep(SHUTDOWN_DRAIN_TIMEOUT);
        tokio::pin!(give_up);
        loop {
            tokio::select! {
                biased;
                true = fenced(&mut fence) => {
                    tasks.abort_all();
                    while tasks.join_next().await.is_some() {}
                    return;
                }
                next = tasks.join_next() => if next.is_none() { return },
                () = &mut give_up => {
                    tracing::warn!(
                        cancelled = tasks.len(),
                        timeout = ?SHUTDOWN_DRAIN_TIMEOUT,
                        "shutting down: in-flight API calls did not finish; cancelled"
                    );
                    tasks.abort_all();
                    while tasks.join_next().await.is_some() {}
                    return;
                }
            }
        }
    }

    /// `ticket`: the failure report's place in its pod's order (Failure only); `slot`: the
    /// action's place among [`MAX_ACTIONS_IN_FLIGHT`], held until its API calls are done.
    /// A bound pod's Scheduled event is returned, with the slot, for
    /// [`Self::scheduled_event`]. The futures of the rarer paths are boxed, so a plain
    /// binding's future stays small.
    async fn execute(
        &self,
        action: Action,
        ticket: u64,
        slot: Option<OwnedSemaphorePermit>,
    ) -> Option<ScheduledEvent> {
        match action {
            Action::Bind {
                pod,
                node,
                scheduler_name,
                info,
                mut state,
                volumes,
                queued,
                cycle,
                started,
            } => {
                let _binding = self.shared.metrics.binding_started();
                let attempts = queued.attempts;
                let first = queued.initial_attempt_timestamp;
                // DynamicResources' decision (assumed in the cache with the pod).
                let claims = decided_claim_writes(&state).map(<[_]>::to_vec);
                let wait = decided_binding_wait(&state).cloned();
                let prebind = Prebind {
                    volumes: volumes.as_ref(),
                    claims: claims.as_deref(),
                    wait: wait.as_ref(),
                };
                if prebind.has_work() && info.nominated_node_name.as_deref() != Some(node.as_str())
                {
                    Box::pin(status::set_nomination(&self.client, &pod, &node)).await;
                }
                let attempt = Attempt {
                    scheduler_name,
                    cycle,
                    started,
                };
                let bound = self.bind(&pod, &node, &attempt, queued, prebind).await;
                let scheduler_name = attempt.scheduler_name;
                let m = &self.shared.metrics;
                if bound {
                    m.attempt(
                        metrics::RESULT_SCHEDULED,
                        &scheduler_name,
                        started.elapsed(),
                    );
                    if let Some(first) = first {
                        let now = self.shared.clock.now();
                        let took = now.saturating_sub(Duration::from_nanos(first));
                        m.scheduled_e2e(attempts, took);
                    }
                } else {
                    m.attempt(metrics::RESULT_ERROR, &scheduler_name, started.elapsed());
                }
                if let Some(fw) = self.shared.profiles.for_scheduler_name(&scheduler_name) {
                    let t = Instant::now();
                    if bound {
                        fw.run_post_bind(&state, &info, &node);
                        m.extension_point("PostBind", "Success", &scheduler_name, t.elapsed());
                    } else {
                        fw.run_unreserve(&mut state, &info, &node);
                        m.extension_point("Unreserve", "Success", &scheduler_name, t.elapsed());
                    }
                }
                if bound {
                    return Some(ScheduledEvent {
                        pod,
                        node,
                        scheduler_name,
                        slot,
                    });
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
                Box::pin(self.report_failure(
                    &pod,
                    &scheduler_name,
                    reason,
                    &message,
                    condition.as_ref(),
                    &nomination,
                    ticket,
                ))
                .await
            }
            Action::Deallocate { claim } => {
                Box::pin(deallocate(&self.client, &claim)).await;
            }
            Action::PodGroupCondition(write) => {
                Box::pin(crate::binding::pod_group_status::write(
                    &self.client,
                    &write,
                ))
                .await;
            }
            Action::Annotate { pod, annotations } => {
                Box::pin(status::annotate(&self.client, &pod, &annotations)).await;
            }
            Action::Preempt {
                preemptor,
                preemptor_key,
                scheduler_name,
                node,
                victims,
                clear,
            } => {
                let started = Instant::now();
                let ok =
                    Box::pin(self.preempt(&preemptor, &scheduler_name, &node, &victims, &clear))
                        .await;
                if !victims.is_empty() {
                    self.shared
                        .metrics
                        .preemption_goroutine(ok, started.elapsed());
                    self.shared.lock().queue.preemption_finished(
                        &preemptor_key,
                        &preemptor.uid,
                        ok,
                    );
                    self.shared.notify();
                }
            }
        }
        None
    }

    /// Upstream `prepareCandidateAsync`: lower-priority pods nominated to the node lose
    /// their nomination first, then every victim but the last is deleted in parallel, then
    /// the last one, skipped if another failed. Returns false if any API call failed.
    async fn preempt(
        &self,
        preemptor: &PodRef,
        scheduler_name: &str,
        node: &str,
        victims: &[PodRef],
        clear: &[PodRef],
    ) -> bool {
        let mut ok = true;
        for p in clear {
            ok &= status::clear_nomination(&self.client, p).await;
        }
        let Some((last, rest)) = victims.split_last() else {
            return ok;
        };
        let results = futures::future::join_all(
            rest.iter()
                .map(|v| self.preempt_one(preemptor, v, scheduler_name, node)),
        )
        .await;
        if results.iter().all(|r| *r) {
            ok &= self
                .preempt_one(preemptor, last, scheduler_name, node)
                .await;
        } else {
            ok = false;
        }
        ok
    }

    async fn preempt_one(
        &self,
        preemptor: &PodRef,
        victim: &PodRef,
        scheduler_name: &str,
        node: &str,
    ) -> bool {
        match status::preempt_victim(&self.client, victim, scheduler_name).await {
            VictimOutcome::Preempted => {
                let note = format!("Preempted by pod {} on node {node}", preemptor.uid);
                self.recorder
                    .record(EventSpec {
                        controller: scheduler_name,
                        regarding: victim,
                        related: Some(preemptor),
                        type_: EventType::Normal,
                        reason: events::REASON_PREEMPTED,
                        action: events::ACTION_PREEMPTING,
                        note: &note,
                    })
                    .await;
                true
            }
            VictimOutcome::Gone => true,
            VictimOutcome::Failed => false,
        }
    }

    #[allow(clippy::too_many_arguments)] // the Failure action's parts plus its ticket
    async fn report_failure(
        &self,
        pod: &PodRef,
        scheduler_name: &str,
        reason: &str,
        message: &str,
        condition: Option<&PodCondition>,
        nomination: &Nomination,
        ticket: u64,
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
        let write =
            status::report_failure(&self.client, pod, reason, message, condition, nomination);
        self.status_order.write_if_latest(pod, ticket, write).await;
    }

    /// Ends the attempt of a pod whose binding cycle failed, as upstream's
    /// `handleBindingCycleError`: forget the assumption (and its volumes' assumed
    /// claimRefs/selected nodes, and its claims' assumed allocations and reservations), then
    /// the scheduling loop's failure handler takes the pod with `message`
    /// ([`handle_binding_failure`]). Returns its FailedScheduling report; `None` when the pod
    /// is gone.
    fn fail_binding(
        &self,
        queued: QueuedPodInfo,
        node: &str,
        attempt: &Attempt,
        prebind: Prebind<'_>,
        message: String,
    ) -> Option<Action> {
        let key = queued.pod.key().clone();
        let mut st = self.shared.lock();
        if let Some(v) = prebind.volumes {
            st.cache.forget_pod_volumes(v);
        }
        if let Some(c) = prebind.claims {
            st.cache.dra_mut().forget_claim_writes(c);
        }
        let _ = st.cache.forget_pod(&key);
        // With PreBind work, `execute` nominated the pod to the node first.
        let prebind_node = prebind.has_work().then_some(node);
        let handled = handle_binding_failure(&mut st, queued, prebind_node, message, attempt);
        drop(st);
        self.shared.notify();
        handled.report
    }

    /// Sends the failure handler's report, in its pod's order (`ticket`).
    async fn report(&self, report: Action, ticket: u64) {
        if let Action::Failure {
            pod,
            scheduler_name,
            reason,
            message,
            condition,
            nomination,
        } = report
        {
            self.report_failure(
                &pod,
                &scheduler_name,
                reason,
                &message,
                condition.as_ref(),
                &nomination,
                ticket,
            )
            .await;
        }
    }

    /// A PreBind write failed: the attempt ends, and a pod that still exists is told why.
    async fn prebind_failed(
        &self,
        pod: &PodRef,
        node: &str,
        attempt: &Attempt,
        queued: QueuedPodInfo,
        prebind: Prebind<'_>,
        message: String,
    ) {
        // Before the requeue, which may start the pod's next attempt.
        let ticket = self.status_order.take(pod);
        if let Some(report) = self.fail_binding(queued, node, attempt, prebind, message) {
            self.report(report, ticket).await;
        }
    }

    /// Whether a pod of `pod`'s group other than `pod` is placed (assumed or bound): a
    /// PodGroup's claim is then left allocated and reserved for the group when `pod`'s
    /// binding fails (upstream unreserves it only for the group's last scheduled pod).
    pub(crate) fn other_members_placed(&self, pod: &PodInfo) -> bool {
        let Some(key) = pod.pod_group.as_deref() else {
            return false;
        };
        let st = self.shared.lock();
        let placed =
            scheduler_core::schedule_group::scheduled_members(&st.groups.read(), key, &st.cache);
        // The pod itself is still assumed while its binding is under way.
        placed.len() > usize::from(st.cache.get_pod(pod.key()).is_some())
    }

    /// The Scheduled event of a bound pod. Upstream's binding never waits for its events
    /// (client-go's broadcaster writes them from goroutines of their own); here the
    /// binding's API slot goes to the next binding first, so the event no longer doubles
    /// the time a binding holds a slot. The wait is bounded: once
    /// [`SCHEDULED_EVENTS_PENDING`] events are unwritten, the binding keeps its slot until
    /// one is (nothing is dropped, memory stays bounded).
    async fn scheduled_event(&self, e: ScheduledEvent) {
        let Ok(_pending) = self.scheduled_events.pending.acquire().await else {
            return;
        };
        drop(e.slot);
        let Ok(_writing) = self.scheduled_events.writing.acquire().await else {
            return;
        };
        let note = format!(
            "Successfully assigned {}/{} to {}",
            e.pod.namespace, e.pod.name, e.node
        );
        Box::pin(self.recorder.record(EventSpec {
            controller: &e.scheduler_name,
            regarding: &e.pod,
            related: None,
            type_: EventType::Normal,
            reason: events::REASON_SCHEDULED,
            action: events::ACTION_BINDING,
            note: &note,
        }))
        .await;
    }

    /// Returns whether the pod was bound.
    async fn bind(
        &self,
        pod: &PodRef,
        node: &str,
        attempt: &Attempt,
        queued: QueuedPodInfo,
        prebind: Prebind<'_>,
    ) -> bool {
        let scheduler_name = &attempt.scheduler_name;
        let volumes = prebind.volumes;
        let key = PodKey::new(&pod.namespace, &pod.name);
        let m = &self.shared.metrics;
        // VolumeBinding's PreBind (upstream BindPodVolumes): bind/annotate, then wait for
        // the PV controller to bind every claim. Timed for every pod, as upstream times the
        // PreBind point even when no plugin has anything to do.
        let t = Instant::now();
        if let Some(v) = volumes {
            let timeout = self
                .bind_timeouts
                .get(scheduler_name)
                .copied()
                .unwrap_or(DEFAULT_BIND_TIMEOUT);
            if let Err(message) = Box::pin(bind_pod_volumes(
                &self.client,
                &self.shared,
                &key,
                node,
                v,
                timeout,
                self.closing.subscribe(),
            ))
            .await
            {
                tracing::warn!(%pod, %node, %message, "binding volumes failed");
                m.extension_point("PreBind", "Error", scheduler_name, t.elapsed());
                Box::pin(self.prebind_failed(pod, node, attempt, queued, prebind, message)).await;
                return false;
            }
        }
        // DynamicResources' PreBind: allocation and reservedFor into each claim's status.
        let mut written = Vec::new();
        if let Some(c) = prebind.claims {
            let stamp = self.shared.lock().cache.dra().binding_conditions();
            let keep_group = || self.other_members_placed(&queued.pod);
            match Box::pin(write_claims(
                &self.client,
                &self.shared,
                c,
                stamp,
                &keep_group,
            ))
            .await
            {
                Ok(w) => {
                    // Written: the informer's copy at least this new ends each assumption.
                    let mut st = self.shared.lock();
                    for d in &w {
                        let dra = st.cache.dra_mut();
                        match &d.created {
                            Some(name) => dra.confirm_created_claim(
                                &d.write.namespace,
                                &d.write.name,
                                name,
                                &d.resource_version,
                            ),
                            None => dra.confirm_claim_write(
                                &d.write.namespace,
                                &d.write.name,
                                &d.resource_version,
                            ),
                        }
                    }
                    drop(st);
                    written = w;
                }
                Err(message) => {
                    tracing::warn!(%pod, %node, %message, "writing resource claims failed");
                    m.extension_point("PreBind", "Error", scheduler_name, t.elapsed());
                    Box::pin(self.prebind_failed(pod, node, attempt, queued, prebind, message))
                        .await;
                    return false;
                }
            }
        }
        if let Some(wait) = prebind.wait
            && let Err(message) = Box::pin(self.wait_for_binding_conditions(
                pod,
                node,
                scheduler_name,
                wait,
                &mut written,
                &queued.pod,
            ))
            .await
        {
            tracing::warn!(%pod, %node, %message, "device binding conditions not met");
            m.extension_point("PreBind", "Error", scheduler_name, t.elapsed());
            Box::pin(self.prebind_failed(pod, node, attempt, queued, prebind, message)).await;
            return false;
        }
        m.extension_point("PreBind", "Success", scheduler_name, t.elapsed());
        let t = Instant::now();
        // Upstream's extendersBinding: an interested binder extender binds instead of the
        // Bind plugins (DefaultBinder's POST).
        let binder = self.extenders.iter().find(|e| {
            let c = scheduler_core::framework::Extender::config(e.as_ref());
            !c.bind_verb.is_empty() && scheduler_core::framework::is_interested(c, &queued.pod)
        });
        let result = match binder {
            Some(e) => e.bind(&queued.pod, node).await.map_err(BindError::Extender),
            None => bind(&self.client, pod, node).await,
        };
        if result.is_err() {
            let keep_group = self.other_members_placed(&queued.pod);
            Box::pin(undo_claims(&self.client, &written, keep_group)).await;
        }
        let status = if result.is_ok() { "Success" } else { "Error" };
        m.extension_point("Bind", status, scheduler_name, t.elapsed());
        match result {
            Ok(()) => {
                {
                    let mut st = self.shared.lock();
                    st.cache.finish_binding(&key);
                    st.queue.done(&queued.pod);
                }
                self.shared.notify();
                true
            }
            Err(BindError::Gone(e)) => {
                // Deleted or bound elsewhere: the informer's update/delete drops it from the
                // queue; if it was re-created unassigned, it is retried after backoff.
                // Nobody is told: the pod is gone, or bound by someone else.
                tracing::info!(%pod, %node, error = %e, "pod gone or bound elsewhere; dropping");
                self.fail_binding(queued, node, attempt, prebind, e.to_string());
                false
            }
            Err(BindError::Extender(e)) => {
                tracing::warn!(%pod, %node, error = %e, "binding by the extender failed");
                let ticket = self.status_order.take(pod);
                let message = format!("binding rejected: {e}");
                if let Some(report) = self.fail_binding(queued, node, attempt, prebind, message) {
                    Box::pin(self.report(report, ticket)).await;
                }
                false
            }
            Err(BindError::Failed(e)) => {
                tracing::warn!(%pod, %node, error = %e, "binding failed");
                // Before the requeue, which may start the pod's next attempt.
                let ticket = self.status_order.take(pod);
                let message = format!("binding rejected: {e}");
                if let Some(report) = self.fail_binding(queued, node, attempt, prebind, message) {
                    Box::pin(self.report(report, ticket)).await;
                }
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn pod(name: &str) -> PodRef {
        PodRef {
            namespace: "ns".into(),
            name: name.into(),
            uid: String::new(),
        }
    }

    /// Two failure reports of one pod: the older one, running last, writes nothing; another
    /// pod's report is not held back by them.
    #[tokio::test]
    async fn only_the_newest_failure_report_of_a_pod_writes() {
        let order = StatusOrder::default();
        let writes = AtomicUsize::new(0);
        let (p, q) = (pod("p"), pod("q"));
        let older = order.take(&p);
        let newer = order.take(&p);
        let other = order.take(&q);
        let count = || async {
            writes.fetch_add(1, Ordering::SeqCst);
        };
        order.write_if_latest(&p, newer, count()).await;
        assert_eq!(writes.load(Ordering::SeqCst), 1);
        order.write_if_latest(&p, older, count()).await;
        assert_eq!(
            writes.load(Ordering::SeqCst),
            1,
            "the older report is dropped"
        );
        order.write_if_latest(&q, other, count()).await;
        assert_eq!(writes.load(Ordering::SeqCst), 2);
        // Done: nothing is kept per pod once its newest report has written.
        assert!(order.latest.lock().unwrap().is_empty());
    }
}
