//! The scheduling queue (upstream: `backend/queue/scheduling_queue.go`, `PriorityQueue`).
//!
//! Three places a pending pod can be, never two at once:
//!
//! * **activeQ**: ready to be tried, ordered by the profiles' QueueSort (FIFO among equals).
//! * **backoffQ**: failed recently and waits out `initial * 2^(attempts-1)` (capped at the
//!   max backoff) before going back to activeQ ([`SchedulingQueue::flush_backoff_completed`]).
//!   Two heaps, as upstream's `backoffQueue`: pods that plugins rejected, and pods whose
//!   attempt ended in an error (no rejecting or pending plugin: a plugin error, a failed
//!   binding, an API error). When activeQ is empty, [`SchedulingQueue::pop`] takes the head
//!   of the first heap (upstream's `SchedulerPopFromBackoffQ`, on by default since 1.33);
//!   errored pods always wait out their backoff, so a persistent error cannot turn into a
//!   tight retry loop.
//! * **unschedulable pool**: rejected by plugins; waits for a cluster event one of those
//!   plugins registered ([`SchedulingQueue::move_all_to_active_or_backoff`]) or for
//!   [`SchedulingQueue::flush_unschedulable_left_over`] after 5 minutes. Pods a PreEnqueue
//!   plugin keeps out (scheduling gates) wait here too, marked gated.
//!
//! A popped pod is *in flight* until [`SchedulingQueue::done`]. Events that arrive meanwhile
//! are recorded; when the attempt fails, [`SchedulingQueue::add_unschedulable_if_not_present`]
//! checks them against the plugins that rejected the pod, so an event that raced with the
//! attempt sends the pod to backoffQ instead of the pool (upstream's in-flight events with
//! queueing hints; `moveRequestCycle` without them).
//!
//! Queueing hints are simplified: a registered event that matches is taken as "Queue".
//! Upstream's per-plugin hint functions can further skip events that cannot help (e.g. a
//! node added that is too small); here such pods are retried and rejected again.
//!
//! The queue does not own frameworks: PreEnqueue, QueueSort and the plugins' events come
//! through [`QueueProfiles`], which [`ProfileRegistry`] implements. Time comes from a
//! [`Clock`], so tests drive it with [`FakeClock`].
//!
//! Files follow upstream's: this one has `SchedulingQueue` itself (adding, updating,
//! deleting and requeueing pods); `active`, `backoff` and `unschedulable` the sub-queues;
//! `clock` the clocks. The nominations are `framework::NominatedPods`, which filters read.

mod active;
mod backoff;
mod clock;
mod heap;
mod preempting;
#[cfg(test)]
mod tests;
mod unschedulable;

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::framework::{
    ClusterEvent, Diagnosis, EventObjects, EventResource, NominatedPods, PluginEvents,
    ProfileRegistry, QueuedPodInfo, QueueingHint, Status, pod_update_events,
};
use crate::types::{PodInfo, PodKey};
use active::active_less;
use backoff::backoff_less;
use clock::nanos;
use heap::KeyedHeap;

pub use clock::{Clock, FakeClock, SystemClock};
pub use preempting::WAITING_FOR_PREEMPTION_MSG;

/// Upstream `DefaultPodMaxInUnschedulablePodsDuration`.
pub const DEFAULT_MAX_IN_UNSCHEDULABLE_PODS: Duration = Duration::from_secs(5 * 60);

/// What the queue needs from the profiles, without owning them.
pub trait QueueProfiles: Send + Sync {
    /// Runs the PreEnqueue plugins of the pod's profile; a failure names the plugin.
    fn pre_enqueue(&self, pod: &PodInfo) -> Status;
    /// The shared QueueSort order: `a` before `b`.
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool;
    /// Plugin -> events of the profile named `scheduler_name` (empty means default).
    fn plugin_events(&self, scheduler_name: &str) -> Option<&PluginEvents>;
    /// Whether any plugin of any profile registered an event matching `event`.
    fn event_of_interest(&self, event: &ClusterEvent) -> bool;
    /// `plugin`'s queueing hint (profile `scheduler_name`) for `event` about `pod`.
    fn queueing_hint(
        &self,
        _scheduler_name: &str,
        _plugin: &str,
        _pod: &PodInfo,
        _event: &ClusterEvent,
        _objects: &EventObjects<'_>,
    ) -> QueueingHint {
        QueueingHint::Queue
    }
}

impl QueueProfiles for ProfileRegistry {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        match self.for_scheduler_name(&pod.scheduler_name) {
            Some(fw) => fw.run_pre_enqueue(pod),
            None => Status::success(),
        }
    }

    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        // Profiles agree on QueueSort (validated when the registry is built).
        match self.iter().next() {
            Some((_, fw)) => fw.queue_sort_less(a, b),
            None => false,
        }
    }

    fn plugin_events(&self, scheduler_name: &str) -> Option<&PluginEvents> {
        self.for_scheduler_name(scheduler_name)
            .map(|fw| fw.events_to_register())
    }

    fn queueing_hint(
        &self,
        scheduler_name: &str,
        plugin: &str,
        pod: &PodInfo,
        event: &ClusterEvent,
        objects: &EventObjects<'_>,
    ) -> QueueingHint {
        self.for_scheduler_name(scheduler_name)
            .map_or(QueueingHint::Queue, |fw| {
                fw.queueing_hint(plugin, pod, event, objects)
            })
    }

    fn event_of_interest(&self, event: &ClusterEvent) -> bool {
        event.is_wildcard()
            || self.iter().any(|(_, fw)| {
                fw.events_to_register()
                    .iter()
                    .any(|(registered, _)| registered.matches(event))
            })
    }
}

impl<T: QueueProfiles + ?Sized> QueueProfiles for Arc<T> {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        (**self).pre_enqueue(pod)
    }
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        (**self).less(a, b)
    }
    fn plugin_events(&self, scheduler_name: &str) -> Option<&PluginEvents> {
        (**self).plugin_events(scheduler_name)
    }
    fn event_of_interest(&self, event: &ClusterEvent) -> bool {
        (**self).event_of_interest(event)
    }
    fn queueing_hint(
        &self,
        scheduler_name: &str,
        plugin: &str,
        pod: &PodInfo,
        event: &ClusterEvent,
        objects: &EventObjects<'_>,
    ) -> QueueingHint {
        (**self).queueing_hint(scheduler_name, plugin, pod, event, objects)
    }
}

/// Backoff and pool limits (from `podInitialBackoffSeconds`/`podMaxBackoffSeconds`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// How long a pod may wait in the unschedulable pool before it is retried anyway.
    pub max_in_unschedulable_pods: Duration,
    /// When activeQ is empty, pop the head of backoffQ (upstream `SchedulerPopFromBackoffQ`).
    /// Only rejected pods are popped early, never those in the error backoffQ.
    pub pop_from_backoff: bool,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(10),
            max_in_unschedulable_pods: DEFAULT_MAX_IN_UNSCHEDULABLE_PODS,
            pop_from_backoff: true,
        }
    }
}

impl QueueConfig {
    pub fn from_config(cfg: &crate::config::KubeSchedulerConfiguration) -> Self {
        let secs = |s: i64| Duration::from_secs(u64::try_from(s).unwrap_or(0));
        QueueConfig {
            initial_backoff: secs(cfg.pod_initial_backoff_seconds),
            max_backoff: secs(cfg.pod_max_backoff_seconds),
            ..QueueConfig::default()
        }
    }

    /// `initial * 2^(attempts-1)`, capped at the max; no backoff before the first attempt.
    pub fn backoff_duration(&self, attempts: u32) -> Duration {
        if attempts == 0 {
            return Duration::ZERO;
        }
        let mut d = self.initial_backoff;
        for _ in 1..attempts {
            if d > self.max_backoff.saturating_sub(d) {
                return self.max_backoff;
            }
            d += d;
        }
        d.min(self.max_backoff)
    }
}

/// Which sub-queue a pod is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QueueKind {
    Active,
    Backoff,
    Unschedulable,
    /// In the unschedulable pool because a PreEnqueue plugin keeps it out.
    Gated,
}

/// What put a pod into a sub-queue, for `scheduler_queue_incoming_pods_total`'s `event`
/// label (upstream's event strings).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IncomingEvent {
    /// A failed attempt requeued the pod.
    ScheduleAttemptFailure,
    /// The pod's backoff expired.
    BackoffComplete,
    /// The pod itself was added or updated, or a cluster event moved it out of the pool.
    Cluster(ClusterEvent),
    /// Moved on purpose (upstream's `ForceActivate`): its preemption failed or finished.
    ForceActivate,
}

impl IncomingEvent {
    pub fn label(&self) -> String {
        match self {
            IncomingEvent::ScheduleAttemptFailure => "ScheduleAttemptFailure".into(),
            IncomingEvent::BackoffComplete => "BackoffComplete".into(),
            IncomingEvent::Cluster(e) => e.label(),
            IncomingEvent::ForceActivate => "ForceActivate".into(),
        }
    }
}

const FORCE_ACTIVATE: IncomingEvent = IncomingEvent::ForceActivate;
const POD_ADD: IncomingEvent = IncomingEvent::Cluster(ClusterEvent::new(
    EventResource::UnscheduledPod,
    crate::framework::ActionType::ADD,
));
const POD_UPDATE: IncomingEvent = IncomingEvent::Cluster(ClusterEvent::new(
    EventResource::UnscheduledPod,
    crate::framework::ActionType::UPDATE,
));

/// Counts the queue keeps for metrics, updated with a few integer operations per pod move
/// and read at scrape time ([`SchedulingQueue::counters`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueCounters {
    /// Pods added to activeQ, backoffQ or the unschedulable pool (gated pods count as
    /// [`QueueKind::Unschedulable`]), by what moved them (`scheduler_queue_incoming_pods_total`).
    /// A pod that stays in the pool (an event that cannot help it) is not counted again.
    pub incoming: BTreeMap<(QueueKind, IncomingEvent), u64>,
    /// Waiting pods per profile (the pod's schedulerName) and rejecting plugin: the plugins
    /// that rejected the last attempt (unschedulable and pending ones), or the PreEnqueue
    /// plugin gating the pod (`scheduler_unschedulable_pods`). A pod counts from its
    /// rejection until it is popped again or deleted. Entries that drop to 0 stay.
    pub unschedulable: BTreeMap<String, BTreeMap<&'static str, i64>>,
}

impl QueueCounters {
    fn incoming(&mut self, kind: QueueKind, event: IncomingEvent) {
        let kind = match kind {
            QueueKind::Gated => QueueKind::Unschedulable,
            k => k,
        };
        *self.incoming.entry((kind, event)).or_default() += 1;
    }

    /// Adds `delta` for each plugin holding `info` back.
    fn rejectors(&mut self, info: &QueuedPodInfo, delta: i64) {
        let gating = info.gating_plugin.is_some();
        if !gating && info.unschedulable_plugins.is_empty() && info.pending_plugins.is_empty() {
            return;
        }
        let profile = info.pod.scheduler_name.as_str();
        let plugins = match self.unschedulable.get_mut(profile) {
            Some(p) => p,
            None => self.unschedulable.entry(profile.to_string()).or_default(),
        };
        let mut add = |plugin| *plugins.entry(plugin).or_default() += delta;
        match info.gating_plugin {
            Some(p) => add(p),
            None => {
                info.unschedulable_plugins.iter().for_each(|&p| add(p));
                info.pending_plugins
                    .iter()
                    .filter(|p| !info.unschedulable_plugins.contains(*p))
                    .for_each(|&p| add(p));
            }
        }
    }
}

/// Pending pods per sub-queue, for the `scheduler_pending_pods` metric.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PendingCounts {
    pub active: usize,
    pub backoff: usize,
    /// Not counting gated pods.
    pub unschedulable: usize,
    pub gated: usize,
}

impl fmt::Display for PendingCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "activeQ:{}; backoffQ:{}; unschedulablePods:{}; gated:{}",
            self.active, self.backoff, self.unschedulable, self.gated
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    #[error("pod {0} is already present in the {1:?} queue")]
    AlreadyPresent(PodKey, QueueKind),
    /// The pod was deleted while it was being scheduled; it is not requeued.
    #[error("pod {0} was deleted during its scheduling attempt")]
    Deleted(PodKey),
}

/// How an event affects an unschedulable pod (upstream `queueingStrategy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Strategy {
    Skip,
    AfterBackoff,
    Immediately,
}

#[derive(Clone, Debug)]
struct Entry {
    info: QueuedPodInfo,
    /// Insertion order, so pods QueueSort ranks equal come out first-in first-out.
    seq: u64,
}

#[derive(Clone, Debug)]
struct InFlight {
    /// Events recorded at this cycle or later arrived during the attempt.
    cycle: u64,
    /// The pod as last updated while in flight; requeued in this version.
    latest: Option<Arc<PodInfo>>,
    deleted: bool,
}

#[derive(Clone, Debug)]
struct RecordedEvent {
    cycle: u64,
    event: ClusterEvent,
    /// Updates of an in-flight pod itself concern only that pod.
    only_for: Option<PodKey>,
}

/// The scheduling queue. Not thread-safe by itself: the controller wraps it in a lock and
/// a condition variable for blocking pops.
pub struct SchedulingQueue {
    config: QueueConfig,
    clock: Arc<dyn Clock>,
    profiles: Arc<dyn QueueProfiles>,
    active: KeyedHeap<Entry>,
    /// Rejected by plugins; may be popped early when activeQ is empty.
    backoff: KeyedHeap<Entry>,
    /// Failed with an error; never popped before its backoff expires (upstream
    /// `podErrorBackoffQ`).
    error_backoff: KeyedHeap<Entry>,
    unschedulable: BTreeMap<PodKey, QueuedPodInfo>,
    /// Attempts under way, by pod key and UID: a pod deleted and recreated under the same
    /// name during its attempt is another pod.
    in_flight: foldhash::HashMap<(PodKey, String), InFlight>,
    /// The UID of the in-flight, not deleted, incarnation of each key.
    in_flight_by_key: foldhash::HashMap<PodKey, String>,
    in_flight_events: Vec<RecordedEvent>,
    scheduling_cycle: u64,
    seq: u64,
    nominator: NominatedPods,
    counters: QueueCounters,
    /// UIDs of pods whose victims are being deleted (`preempting.rs`).
    preempting: HashSet<String>,
}

impl fmt::Debug for SchedulingQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchedulingQueue")
            .field("pending", &self.pending_pods())
            .field("in_flight", &self.in_flight.len())
            .field("scheduling_cycle", &self.scheduling_cycle)
            .finish_non_exhaustive()
    }
}

impl SchedulingQueue {
    pub fn new(
        config: QueueConfig,
        clock: Arc<dyn Clock>,
        profiles: Arc<dyn QueueProfiles>,
    ) -> Self {
        SchedulingQueue {
            config,
            clock,
            profiles,
            active: KeyedHeap::default(),
            backoff: KeyedHeap::default(),
            error_backoff: KeyedHeap::default(),
            unschedulable: BTreeMap::new(),
            in_flight: Default::default(),
            in_flight_by_key: Default::default(),
            in_flight_events: Vec::new(),
            scheduling_cycle: 0,
            seq: 0,
            nominator: NominatedPods::new(),
            counters: QueueCounters::default(),
            preempting: HashSet::new(),
        }
    }

    pub fn config(&self) -> &QueueConfig {
        &self.config
    }

    fn now(&self) -> u64 {
        nanos(self.clock.now())
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Counts for the incoming-pods and unschedulable-pods metrics.
    pub fn counters(&self) -> &QueueCounters {
        &self.counters
    }

    /// The number of pods popped so far; the cycle of the last popped pod.
    pub fn scheduling_cycle(&self) -> u64 {
        self.scheduling_cycle
    }

    /// Where the pod is waiting, if it is.
    pub fn queue_of(&self, key: &PodKey) -> Option<QueueKind> {
        if self.active.contains(key) {
            Some(QueueKind::Active)
        } else if self.backoff.contains(key) || self.error_backoff.contains(key) {
            Some(QueueKind::Backoff)
        } else {
            self.unschedulable.get(key).map(|i| {
                if i.gated() {
                    QueueKind::Gated
                } else {
                    QueueKind::Unschedulable
                }
            })
        }
    }

    /// The queued entry of a waiting pod.
    pub fn get(&self, key: &PodKey) -> Option<&QueuedPodInfo> {
        self.active
            .get(key)
            .or_else(|| self.backoff.get(key))
            .or_else(|| self.error_backoff.get(key))
            .map(|e| &e.info)
            .or_else(|| self.unschedulable.get(key))
    }

    /// A new unscheduled pod (informer add): PreEnqueue decides activeQ or the gated pool.
    /// A pod already waiting is replaced (attempts reset); one being scheduled is handled
    /// as an update of the in-flight pod (`None`).
    pub fn add(&mut self, pod: Arc<PodInfo>) -> Option<QueueKind> {
        let key = pod.key().clone();
        if self.is_in_flight(&key) {
            return self.update(None, pod);
        }
        self.remove_waiting(&key);
        Some(self.enqueue_new(pod, POD_ADD))
    }

    /// A pod the queue did not hold: PreEnqueue, then activeQ (nominated if it carries a
    /// nominatedNodeName) or the gated pool.
    fn enqueue_new(&mut self, pod: Arc<PodInfo>, event: IncomingEvent) -> QueueKind {
        let info = QueuedPodInfo::new(Arc::clone(&pod), self.now());
        let kind = self.move_to_active(info, true);
        self.counters.incoming(kind, event);
        if kind == QueueKind::Active {
            self.add_nominated(&pod, None);
        }
        kind
    }

    /// An unscheduled pod changed (informer update). `old` is the previous version when known.
    pub fn update(&mut self, old: Option<&PodInfo>, new: Arc<PodInfo>) -> Option<QueueKind> {
        let key = new.key().clone();
        let events = match old {
            Some(old) => pod_update_events(old, &new),
            None => vec![ClusterEvent::new(
                EventResource::UnscheduledPod,
                crate::framework::ActionType::UPDATE_OTHER,
            )],
        };

        // Being scheduled: remember the new version and its events; the attempt's outcome
        // decides where it goes.
        if let Some(f) = self.in_flight_of(&key) {
            f.latest = Some(Arc::clone(&new));
            let cycle = self.scheduling_cycle;
            for event in events {
                self.in_flight_events.push(RecordedEvent {
                    cycle,
                    event,
                    only_for: Some(key.clone()),
                });
            }
            return None;
        }

        let profiles = &*self.profiles;
        let replace = |e: &mut Entry| e.info.pod = Arc::clone(&new);
        if self.active.update(&key, &active_less(profiles), replace) {
            self.update_nominated(old, &new);
            return Some(QueueKind::Active);
        }
        let in_backoff = [&mut self.backoff, &mut self.error_backoff]
            .into_iter()
            .any(|heap| {
                let replace = |e: &mut Entry| e.info.pod = Arc::clone(&new);
                heap.update(&key, &backoff_less(&self.config, profiles), replace)
            });
        if in_backoff {
            self.update_nominated(old, &new);
            return Some(QueueKind::Backoff);
        }

        if let Some(mut info) = self.unschedulable.remove(&key) {
            self.counters.rejectors(&info, -1);
            info.pod = Arc::clone(&new);
            self.update_nominated(old, &new);
            // The first event that decides the strategy labels the move.
            let (strategy, event) = events.iter().fold((Strategy::Skip, None), |best, e| {
                let s = self.worth_requeuing(&info, e, &EventObjects::None);
                if best.1.is_none() || s > best.0 {
                    (s, Some(*e))
                } else {
                    best
                }
            });
            let kind = self.requeue(info, strategy);
            if !matches!(kind, QueueKind::Unschedulable | QueueKind::Gated) {
                let event = event.map_or(POD_UPDATE, IncomingEvent::Cluster);
                self.counters.incoming(kind, event);
            }
            return Some(kind);
        }

        // Not known yet (e.g. the add was missed): treat as new.
        Some(self.enqueue_new(new, POD_UPDATE))
    }

    /// The pod is gone (deleted, or bound by someone else). Returns whether it was waiting.
    pub fn delete(&mut self, key: &PodKey) -> bool {
        self.nominator.remove(key);
        if let Some(uid) = self.get(key).map(|i| i.pod.uid.clone()) {
            self.preempting.remove(&uid);
        }
        if let Some(f) = self.in_flight_of(key) {
            f.deleted = true;
            self.in_flight_by_key.remove(key);
        }
        self.remove_waiting(key).is_some()
    }

    /// Puts a pod whose attempt failed back. `diagnosis` is `None` for an error (the pod
    /// then always goes through backoff); otherwise its unschedulable/pending plugins decide
    /// which events may help. If a matching event arrived during the attempt (since
    /// `scheduling_cycle`), the pod goes to backoffQ (or activeQ once backed off), else to
    /// the unschedulable pool. Always ends the attempt ([`done`](Self::done)).
    ///
    /// The pod's nomination is reset to its own `nominatedNodeName`; a caller that just
    /// nominated it through preemption calls [`add_nominated`](Self::add_nominated) after
    /// this, as upstream's failure handler does.
    pub fn add_unschedulable_if_not_present(
        &mut self,
        mut info: QueuedPodInfo,
        diagnosis: Option<&Diagnosis>,
        scheduling_cycle: u64,
    ) -> Result<QueueKind, QueueError> {
        let popped = Arc::clone(&info.pod);
        let result = self.requeue_failed(&mut info, diagnosis, scheduling_cycle);
        self.done(&popped);
        result
    }

    fn requeue_failed(
        &mut self,
        info: &mut QueuedPodInfo,
        diagnosis: Option<&Diagnosis>,
        scheduling_cycle: u64,
    ) -> Result<QueueKind, QueueError> {
        let key = info.pod.key().clone();
        if let Some(f) = self.in_flight.get(&(key.clone(), info.pod.uid.clone())) {
            if f.deleted {
                return Err(QueueError::Deleted(key));
            }
            if let Some(latest) = &f.latest {
                info.pod = Arc::clone(latest);
            }
        }
        if let Some(kind) = self.queue_of(&key) {
            return Err(QueueError::AlreadyPresent(key, kind));
        }
        match diagnosis {
            Some(d) => {
                info.unschedulable_plugins = d.unschedulable_plugins.clone();
                info.pending_plugins = d.pending_plugins.clone();
            }
            None => {
                info.unschedulable_plugins.clear();
                info.pending_plugins.clear();
            }
        }
        info.gating_plugin = None;
        info.timestamp = self.now();

        let strategy = if info.rejector_plugins().is_empty() {
            Strategy::AfterBackoff
        } else {
            self.in_flight_events
                .iter()
                .filter(|e| e.cycle >= scheduling_cycle)
                .filter(|e| e.only_for.as_ref().is_none_or(|k| *k == key))
                .map(|e| self.worth_requeuing(info, &e.event, &EventObjects::None))
                .max()
                .unwrap_or(Strategy::Skip)
        };
        let pod = Arc::clone(&info.pod);
        let kind = self.requeue(info.clone(), strategy);
        self.counters
            .incoming(kind, IncomingEvent::ScheduleAttemptFailure);
        self.add_nominated(&pod, None);
        Ok(kind)
    }

    /// Pending pods per sub-queue (in-flight pods are not pending).
    pub fn pending_pods(&self) -> PendingCounts {
        let gated = self.unschedulable.values().filter(|i| i.gated()).count();
        PendingCounts {
            active: self.active.len(),
            backoff: self.backoff.len() + self.error_backoff.len(),
            unschedulable: self.unschedulable.len() - gated,
            gated,
        }
    }

    /// Every waiting pod and where it waits.
    pub fn pending_pods_list(&self) -> Vec<(Arc<PodInfo>, QueueKind)> {
        let mut v: Vec<(Arc<PodInfo>, QueueKind)> = self
            .active
            .iter()
            .map(|e| (Arc::clone(&e.info.pod), QueueKind::Active))
            .chain(
                self.backoff
                    .iter()
                    .chain(self.error_backoff.iter())
                    .map(|e| (Arc::clone(&e.info.pod), QueueKind::Backoff)),
            )
            .collect();
        v.extend(self.unschedulable.values().map(|i| {
            let kind = if i.gated() {
                QueueKind::Gated
            } else {
                QueueKind::Unschedulable
            };
            (Arc::clone(&i.pod), kind)
        }));
        v
    }

    // ---- nominator ----

    /// Pods nominated to nodes, for filters and preemption.
    pub fn nominated_pods(&self) -> &NominatedPods {
        &self.nominator
    }

    /// Records a nomination (upstream `AddNominatedPod` with override mode): `node` wins
    /// over the pod's own `nominatedNodeName`; with neither, any nomination is dropped.
    /// Bound pods are never nominated.
    pub fn add_nominated(&mut self, pod: &Arc<PodInfo>, node: Option<&str>) {
        self.nominator.remove(pod.key());
        if pod.node_name.as_deref().is_some_and(|n| !n.is_empty()) {
            return;
        }
        let node = node
            .map(str::to_string)
            .or_else(|| pod.nominated_node_name.clone())
            .filter(|n| !n.is_empty());
        if let Some(node) = node {
            self.nominator.add(Arc::clone(pod), &node);
        }
    }

    pub fn delete_nominated_if_exists(&mut self, key: &PodKey) {
        self.nominator.remove(key);
    }

    /// Re-points the nomination at the new pod version. An update that neither had nor has
    /// a nominatedNodeName keeps a nomination made in memory (it may not be persisted yet).
    fn update_nominated(&mut self, old: Option<&PodInfo>, new: &Arc<PodInfo>) {
        let neither = old.is_none_or(|o| o.nominated_node_name.is_none())
            && new.nominated_node_name.is_none();
        let keep = if neither {
            self.nominator.node_of(new.key()).map(str::to_string)
        } else {
            None
        };
        self.add_nominated(new, keep.as_deref());
    }

    // ---- internals ----

    /// Removes a waiting pod from whichever sub-queue holds it.
    fn remove_waiting(&mut self, key: &PodKey) -> Option<QueuedPodInfo> {
        let info = self.take_waiting(key)?;
        self.counters.rejectors(&info, -1);
        Some(info)
    }

    fn take_waiting(&mut self, key: &PodKey) -> Option<QueuedPodInfo> {
        let profiles = &*self.profiles;
        if let Some(e) = self.active.remove(key, &active_less(profiles)) {
            return Some(e.info);
        }
        for heap in [&mut self.backoff, &mut self.error_backoff] {
            if let Some(e) = heap.remove(key, &backoff_less(&self.config, profiles)) {
                return Some(e.info);
            }
        }
        self.unschedulable.remove(key)
    }

    /// Runs PreEnqueue; true if the pod may proceed. Records the gating plugin otherwise.
    fn pass_pre_enqueue(&self, info: &mut QueuedPodInfo) -> bool {
        let status = self.profiles.pre_enqueue(&info.pod);
        if !status.is_success() {
            info.gating_plugin = Some(status.plugin().unwrap_or("PreEnqueue"));
            false
        } else if self.preempting.contains(&info.pod.uid) {
            // DefaultPreemption's PreEnqueue: its victims are still being deleted.
            info.gating_plugin = Some(crate::plugins::names::DEFAULT_PREEMPTION);
            false
        } else {
            info.gating_plugin = None;
            true
        }
    }

    /// Upstream `requeuePodWithQueueingStrategy`. The pod must not be in any sub-queue.
    fn requeue(&mut self, info: QueuedPodInfo, strategy: Strategy) -> QueueKind {
        match strategy {
            Strategy::Skip => {
                let kind = if info.gated() {
                    QueueKind::Gated
                } else {
                    QueueKind::Unschedulable
                };
                self.insert_unschedulable(info);
                kind
            }
            Strategy::AfterBackoff if self.is_backing_off(&info) => self.move_to_backoff(info),
            _ => self.move_to_active(info, true),
        }
    }
}
