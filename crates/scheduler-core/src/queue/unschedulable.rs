//! The unschedulable pool (upstream `unschedulable_pods.go`): pods plugins rejected (or a
//! PreEnqueue plugin gates), waiting for a cluster event that may help them or for the
//! pool's time limit, and the rule deciding which events move them.

use std::collections::BTreeSet;

use super::clock::nanos;
use super::{IncomingEvent, QueueKind, RecordedEvent, SchedulingQueue, Strategy};
use crate::framework::{ClusterEvent, EventObjects, QueuedPodInfo, QueueingHint};
use crate::types::{PodInfo, PodKey};

impl SchedulingQueue {
    /// A cluster event happened: moves every unschedulable pod it may help (and that passes
    /// `pre_check`) to activeQ or backoffQ. Returns how many pods left the pool.
    pub fn move_all_to_active_or_backoff(
        &mut self,
        event: ClusterEvent,
        pre_check: Option<&dyn Fn(&PodInfo) -> bool>,
    ) -> usize {
        self.move_all_with_objects(event, &EventObjects::None, pre_check)
    }

    /// As [`Self::move_all_to_active_or_backoff`], with the objects the event is about, so
    /// the rejecting plugins' queueing hints can leave pods the event cannot help.
    pub fn move_all_with_objects(
        &mut self,
        event: ClusterEvent,
        objects: &EventObjects<'_>,
        pre_check: Option<&dyn Fn(&PodInfo) -> bool>,
    ) -> usize {
        if !self.profiles.event_of_interest(&event) {
            return 0;
        }
        let keys: Vec<PodKey> = self
            .unschedulable
            .iter()
            .filter(|(_, i)| pre_check.is_none_or(|f| f(&i.pod)))
            .map(|(k, _)| k.clone())
            .collect();
        self.move_pods(keys, event, objects)
    }

    fn move_pods(
        &mut self,
        keys: Vec<PodKey>,
        event: ClusterEvent,
        objects: &EventObjects<'_>,
    ) -> usize {
        let mut moved = 0;
        for key in keys {
            let Some(info) = self.unschedulable.get(&key) else {
                continue;
            };
            let strategy = self.worth_requeuing(info, &event, objects);
            if strategy == Strategy::Skip {
                continue;
            }
            let info = self.unschedulable.remove(&key).expect("present");
            self.counters.rejectors(&info, -1);
            let kind = self.requeue(info, strategy);
            if !matches!(kind, QueueKind::Unschedulable | QueueKind::Gated) {
                self.counters.incoming(kind, IncomingEvent::Cluster(event));
                moved += 1;
            }
        }
        if !self.in_flight.is_empty() {
            self.in_flight_events.push(RecordedEvent {
                cycle: self.scheduling_cycle,
                event,
                only_for: None,
            });
        }
        moved
    }

    /// Retries pods that waited in the unschedulable pool longer than the limit (upstream
    /// runs this every 30 seconds). Returns how many left the pool.
    pub fn flush_unschedulable_left_over(&mut self) -> usize {
        let now = self.now();
        let limit = nanos(self.config.max_in_unschedulable_pods);
        let keys: Vec<PodKey> = self
            .unschedulable
            .iter()
            .filter(|(_, i)| now.saturating_sub(i.timestamp) > limit)
            .map(|(k, _)| k.clone())
            .collect();
        if keys.is_empty() {
            return 0;
        }
        self.move_pods(
            keys,
            ClusterEvent::UNSCHEDULABLE_TIMEOUT,
            &EventObjects::None,
        )
    }

    /// Puts a pod (in no sub-queue) into the unschedulable pool.
    pub(super) fn insert_unschedulable(&mut self, info: QueuedPodInfo) {
        self.counters.rejectors(&info, 1);
        if let Some(old) = self.unschedulable.insert(info.pod.key().clone(), info) {
            self.counters.rejectors(&old, -1);
        }
    }

    /// Upstream `isPodWorthRequeuing`: the pod moves if a plugin that rejected it registered
    /// the event and its queueing hint answers `Queue`.
    pub(super) fn worth_requeuing(
        &self,
        info: &QueuedPodInfo,
        event: &ClusterEvent,
        objects: &EventObjects<'_>,
    ) -> Strategy {
        let rejectors: BTreeSet<&'static str> = info.rejector_plugins();
        if rejectors.is_empty() || event.is_wildcard() {
            return Strategy::AfterBackoff;
        }
        let Some(events) = self.profiles.plugin_events(&info.pod.scheduler_name) else {
            return Strategy::AfterBackoff;
        };
        let mut strategy = Strategy::Skip;
        for plugin in events.interested(event, &rejectors) {
            let hint = self.profiles.queueing_hint(
                &info.pod.scheduler_name,
                plugin,
                &info.pod,
                event,
                objects,
            );
            if hint == QueueingHint::QueueSkip {
                continue;
            }
            if info.gating_plugin.is_none() && info.pending_plugins.contains(plugin) {
                return Strategy::Immediately;
            }
            strategy = Strategy::AfterBackoff;
        }
        strategy
    }
}
