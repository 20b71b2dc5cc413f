//! A pod as the scheduling queue holds it.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::types::PodInfo;

/// A pod waiting to be scheduled, with the bookkeeping QueueSort and backoff need.
#[derive(Clone, Debug)]
pub struct QueuedPodInfo {
    pub pod: Arc<PodInfo>,
    /// When the pod was (re)added to the active queue, in the queue clock's nanoseconds.
    pub timestamp: u64,
    /// Scheduling attempts so far; drives the backoff.
    pub attempts: u32,
    /// When the first attempt started, for the e2e latency metric.
    pub initial_attempt_timestamp: Option<u64>,
    /// Plugins that rejected the pod last time, so only events they care about requeue it.
    pub unschedulable_plugins: BTreeSet<&'static str>,
    /// Plugins that returned Pending last time; an event they registered requeues the pod
    /// without waiting for its backoff.
    pub pending_plugins: BTreeSet<&'static str>,
    /// The PreEnqueue plugin keeping the pod out of the active queue, if any.
    pub gating_plugin: Option<&'static str>,
}

impl QueuedPodInfo {
    pub fn new(pod: Arc<PodInfo>, timestamp: u64) -> Self {
        QueuedPodInfo {
            pod,
            timestamp,
            attempts: 0,
            initial_attempt_timestamp: None,
            unschedulable_plugins: BTreeSet::new(),
            pending_plugins: BTreeSet::new(),
            gating_plugin: None,
        }
    }

    /// Whether a PreEnqueue plugin keeps the pod out of the active queue.
    pub fn gated(&self) -> bool {
        self.gating_plugin.is_some()
    }

    /// The plugins whose events may make the pod schedulable: the plugins that rejected it
    /// last time, plus the gating plugin while gated. As upstream, a pod gated after an
    /// attempt (DefaultPreemption while its victims go) keeps the plugins that rejected that
    /// attempt, so the victims' deletion still moves it.
    pub fn rejector_plugins(&self) -> BTreeSet<&'static str> {
        let mut set: BTreeSet<&'static str> = self
            .unschedulable_plugins
            .union(&self.pending_plugins)
            .copied()
            .collect();
        set.extend(self.gating_plugin);
        set
    }
}
