//! The one piece of shared state: scheduler-core's cache, the pending queue and the
//! nominated pods, behind a `std::sync::Mutex`. Informers write to it (briefly, per event),
//! the scheduling thread reads a snapshot from it, binding tasks confirm or undo assumptions.
//!
//! Which pod goes where follows upstream's event handlers: an unassigned, non-terminal pod
//! whose schedulerName is one of our profiles goes to the queue; an assigned, non-terminal
//! pod goes to the cache; everything else is dropped from both.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod, PodCondition};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use scheduler_core::cache::Cache;
use scheduler_core::framework::{NominatedPods, ProfileRegistry};
use scheduler_core::types::{PodInfo, PodKey};

use crate::queue::PendingQueue;

pub struct State {
    pub cache: Cache,
    pub queue: PendingQueue,
    pub nominated: NominatedPods,
    /// Informers that finished their first list.
    pub synced: usize,
    pub shutting_down: bool,
}

/// The state plus the condition variable the scheduling thread sleeps on.
pub struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    pub profiles: Arc<ProfileRegistry>,
}

impl Shared {
    pub fn new(queue: PendingQueue, profiles: Arc<ProfileRegistry>) -> Self {
        Shared {
            state: Mutex::new(State {
                cache: Cache::new(),
                queue,
                nominated: NominatedPods::new(),
                synced: 0,
                shutting_down: false,
            }),
            wake: Condvar::new(),
            profiles,
        }
    }

    /// Locks the state. A panic while holding the lock is a bug we do not try to survive
    /// quietly, but the data is still consistent enough to shut down, so poisoning is ignored.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes the scheduling thread (new pods, cluster events, shutdown).
    pub fn notify(&self) {
        self.wake.notify_all();
    }

    pub fn wait_timeout<'a>(
        &self,
        guard: MutexGuard<'a, State>,
        timeout: std::time::Duration,
    ) -> MutexGuard<'a, State> {
        match self.wake.wait_timeout(guard, timeout) {
            Ok((g, _)) => g,
            Err(e) => e.into_inner().0,
        }
    }

    pub fn shutdown(&self) {
        self.lock().shutting_down = true;
        self.notify();
    }
}

pub fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// Upstream's isPodUpdated: ignores status, resourceVersion, generation, managedFields and
/// finalizers.
pub fn spec_or_metadata_changed(old: &Pod, new: &Pod) -> bool {
    if old.spec != new.spec {
        return true;
    }
    let strip = |p: &Pod| {
        let mut m = p.metadata.clone();
        m.resource_version = None;
        m.generation = None;
        m.managed_fields = None;
        m.finalizers = None;
        m
    };
    strip(old) != strip(new)
}

pub fn scheduled_condition(pod: &Pod) -> Option<PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .cloned()
}

impl State {
    pub fn on_pod(&mut self, profiles: &ProfileRegistry, old: Option<&Pod>, pod: &Pod) {
        let now = Instant::now();
        let info = Arc::new(PodInfo::from_pod(pod));
        let key = info.key().clone();
        if let Some(old) = old {
            // Same name, new object (deleted and re-created between two lists).
            if old.metadata.uid != pod.metadata.uid {
                self.on_pod_delete(old);
            }
        }
        if info.node_name.is_some() {
            self.queue.remove(&key);
            self.nominated.remove(&key);
            if is_terminal(pod) {
                if self.cache.get_pod(&key).is_some() {
                    let _ = self.cache.remove_pod(&key);
                    self.queue.move_all(now);
                }
            } else {
                // A new pod elsewhere or changed labels can satisfy (anti-)affinity and
                // spreading; kubelet status updates of running pods cannot, and retrying on
                // each would flood the API with FailedScheduling events.
                let labels_changed = old.is_some_and(|o| o.metadata.labels != pod.metadata.labels);
                if self.upsert_assigned(info) || labels_changed {
                    self.queue.move_all(now);
                }
            }
            return;
        }
        // Unassigned. If the cache still holds it (assumed, then the binding failed or it
        // was re-created), the queue and binder sort that out; nothing to add here.
        let fw = profiles.for_scheduler_name(&info.scheduler_name);
        if self.cache.is_assumed(&key) {
            // Our binding for it succeeded or is in flight; a stale unassigned update must
            // not queue it again.
            return;
        }
        let Some(fw) = fw.filter(|_| !is_terminal(pod)) else {
            self.queue.remove(&key);
            self.nominated.remove(&key);
            return;
        };
        match info.nominated_node_name.as_deref() {
            Some(node) => self.nominated.add(Arc::clone(&info), node),
            None => self.nominated.remove(&key),
        }
        let gated = !fw.run_pre_enqueue(&info).is_success();
        let changed = old.is_none_or(|o| spec_or_metadata_changed(o, pod));
        self.queue
            .add_or_update(info, scheduled_condition(pod), gated, changed, now);
    }

    /// Adds or updates a bound pod; true when it is new to the cache (not just confirming
    /// our own assumption or refreshing a known pod).
    fn upsert_assigned(&mut self, info: Arc<PodInfo>) -> bool {
        let key = info.key().clone();
        let mut new = false;
        let result = match self.cache.get_pod(&key) {
            Some(_) if self.cache.is_assumed(&key) => self.cache.add_pod(info),
            Some(_) => match self.cache.update_pod(&key, Arc::clone(&info)) {
                Ok(()) => Ok(()),
                Err(_) => {
                    let _ = self.cache.remove_pod(&key);
                    self.cache.add_pod(info)
                }
            },
            None => {
                new = true;
                self.cache.add_pod(info)
            }
        };
        if let Err(e) = result {
            tracing::warn!(pod = %key, error = %e, "cache rejected an assigned pod");
        }
        new
    }

    pub fn on_pod_delete(&mut self, pod: &Pod) {
        let key = PodKey::of(pod);
        self.queue.remove(&key);
        self.nominated.remove(&key);
        if self.cache.get_pod(&key).is_some() {
            let _ = self.cache.remove_pod(&key);
            self.queue.move_all(Instant::now());
        }
    }

    pub fn on_node(&mut self, old: Option<&Node>, node: &Node) {
        self.cache.update_node(node);
        let relevant = match old {
            None => true,
            // Heartbeats change only status.conditions timestamps and the like.
            Some(o) => {
                o.spec != node.spec
                    || o.metadata.labels != node.metadata.labels
                    || o.status.as_ref().map(|s| &s.allocatable)
                        != node.status.as_ref().map(|s| &s.allocatable)
                    || o.status.as_ref().map(|s| &s.images)
                        != node.status.as_ref().map(|s| &s.images)
            }
        };
        if relevant {
            self.queue.move_all(Instant::now());
        }
    }

    pub fn on_node_delete(&mut self, node: &Node) {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        if let Err(e) = self.cache.remove_node(name) {
            tracing::debug!(node = name, error = %e, "node delete");
        }
    }

    pub fn on_runtime_class(&mut self, rc: &RuntimeClass) {
        self.cache.update_runtime_class(rc);
        self.queue.move_all(Instant::now());
    }

    pub fn on_runtime_class_delete(&mut self, rc: &RuntimeClass) {
        self.cache
            .remove_runtime_class(rc.metadata.name.as_deref().unwrap_or_default());
    }

    pub fn on_pdb(&mut self, pdb: &PodDisruptionBudget) {
        self.cache.update_pdb(pdb);
    }

    pub fn on_pdb_delete(&mut self, pdb: &PodDisruptionBudget) {
        self.cache.remove_pdb(
            pdb.metadata.namespace.as_deref().unwrap_or_default(),
            pdb.metadata.name.as_deref().unwrap_or_default(),
        );
    }

    pub fn on_namespace(&mut self, ns: &Namespace) {
        self.cache.update_namespace(ns);
        self.queue.move_all(Instant::now());
    }

    pub fn on_namespace_delete(&mut self, ns: &Namespace) {
        self.cache
            .remove_namespace(ns.metadata.name.as_deref().unwrap_or_default());
    }
}
