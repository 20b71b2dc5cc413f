//! The one piece of shared state: scheduler-core's cache and its [`SchedulingQueue`] (which
//! also holds the nominated pods), behind a `std::sync::Mutex`. Informers write to it (briefly, per event),
//! the scheduling thread reads a snapshot from it, binding tasks confirm or undo assumptions.
//!
//! Which pod goes where follows upstream's event handlers: an unassigned, non-terminal pod
//! whose schedulerName is one of our profiles goes to the queue; an assigned, non-terminal
//! pod goes to the cache; everything else is dropped from both. Each change is also turned
//! into the [`ClusterEvent`]s upstream's handlers fire, and the queue moves exactly the
//! unschedulable pods whose rejecting plugins registered for them.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, PodCondition,
};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
};
use scheduler_core::cache::{Cache, WorkloadEntry};
use scheduler_core::framework::{
    ActionType, ClusterEvent, EventObjects, EventResource, NodeFingerprint, ProfileRegistry,
    pod_update_events,
};
use scheduler_core::plugins::names::GANG_SCHEDULING;
use scheduler_core::pod_group_manager::PodGroupManager;
use scheduler_core::queue::{Clock, QueueKind, SchedulingQueue};
use scheduler_core::types::{PodInfo, PodKey, VolumeAttachmentInfo};

use crate::binding::podref::PodRef;
use crate::serving::explain::ExplainStore;
use crate::serving::metrics::Metrics;

pub(crate) struct State {
    pub(crate) cache: Cache,
    pub(crate) queue: SchedulingQueue,
    /// The PodScheduled condition of each pending pod of ours as last seen, so a failure
    /// that changes nothing needs no status patch.
    pub(crate) conditions: HashMap<PodKey, PodCondition>,
    /// Informers that finished their first list.
    pub(crate) synced: usize,
    /// resourceVersion of each claim and volume as the informer last reported it (keys from
    /// [`crate::binding::volumes::pvc_version_key`] / [`crate::binding::volumes::pv_version_key`]), so the
    /// binding cycle can tell its own writes from older copies.
    pub(crate) volume_versions: HashMap<String, u64>,
    pub(crate) shutting_down: bool,
    /// `run --explain`'s kept explanations (disabled unless asked for).
    pub(crate) explain: ExplainStore,
    /// PodGroups and their members (shared with GangScheduling, which reads it at
    /// PreEnqueue); written only under this state's lock.
    pub(crate) groups: Arc<PodGroupManager>,
    /// Pods to report as unschedulable although no attempt ran: a pod naming a PodGroup of
    /// an API the cluster does not serve waits for good, and only the scheduler knows why.
    /// The scheduling loop sends them (so only a leader writes).
    pub(crate) gate_reports: Vec<GateReport>,
}

/// A FailedScheduling report for a pod PreEnqueue keeps out.
pub(crate) struct GateReport {
    pub(crate) pod: PodRef,
    pub(crate) key: PodKey,
    pub(crate) scheduler_name: String,
    pub(crate) message: String,
}

/// The state plus the condition variable the scheduling thread sleeps on.
pub(crate) struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    pub(crate) profiles: Arc<ProfileRegistry>,
    /// The queue's clock, for latencies measured from queue timestamps.
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) metrics: Metrics,
    /// Leadership, for /healthz.
    pub(crate) leader: crate::leader::Health,
    /// The body of /configz: the effective, defaulted config (set once by `run`).
    pub(crate) configz: String,
    /// The body of /flagz: the command line's flags (set once by `run`).
    pub(crate) flagz: String,
    /// When `run` started, for /statusz.
    pub(crate) started: std::time::SystemTime,
}

impl Shared {
    pub(crate) fn new(
        queue: SchedulingQueue,
        clock: Arc<dyn Clock>,
        profiles: Arc<ProfileRegistry>,
        groups: Arc<PodGroupManager>,
    ) -> Self {
        Shared {
            state: Mutex::new(State {
                cache: Cache::new(),
                queue,
                conditions: HashMap::new(),
                synced: 0,
                volume_versions: HashMap::new(),
                shutting_down: false,
                explain: ExplainStore::default(),
                groups,
                gate_reports: Vec::new(),
            }),
            wake: Condvar::new(),
            profiles,
            clock,
            metrics: Metrics::new(),
            leader: crate::leader::Health::default(),
            configz: String::new(),
            flagz: String::new(),
            started: std::time::SystemTime::now(),
        }
    }

    /// Locks the state. A panic while holding the lock is a bug we do not try to survive
    /// quietly, but the data is still consistent enough to shut down, so poisoning is ignored.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes the scheduling thread (new pods, cluster events, shutdown).
    pub(crate) fn notify(&self) {
        self.wake.notify_all();
    }

    pub(crate) fn wait_timeout<'a>(
        &self,
        guard: MutexGuard<'a, State>,
        timeout: std::time::Duration,
    ) -> MutexGuard<'a, State> {
        match self.wake.wait_timeout(guard, timeout) {
            Ok((g, _)) => g,
            Err(e) => e.into_inner().0,
        }
    }

    pub(crate) fn shutdown(&self) {
        self.lock().shutting_down = true;
        self.notify();
    }
}

/// A resourceVersion as a number (0 when absent or not numeric).
fn resource_version(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> u64 {
    m.resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

pub(crate) fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

pub(crate) fn scheduled_condition(pod: &Pod) -> Option<PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .cloned()
}

impl State {
    /// Upstream `MoveAllToActiveOrBackoffQueue` for one event.
    pub(crate) fn fire(&mut self, resource: EventResource, action: ActionType) {
        self.queue
            .move_all_to_active_or_backoff(ClusterEvent::new(resource, action), None);
    }

    /// A pod added or changed; returns its PodInfo (tests: the pod informer builds the
    /// view before taking the lock and calls [`Self::apply_pod`]).
    #[cfg(test)]
    pub(crate) fn on_pod(
        &mut self,
        profiles: &ProfileRegistry,
        old: Option<&Arc<PodInfo>>,
        pod: &Pod,
    ) -> Arc<PodInfo> {
        let info = Arc::new(PodInfo::from_pod(pod));
        self.apply_pod(profiles, old, pod, &info);
        info
    }

    /// A pod added or changed, `info` its view (`old` is what the informer kept of the
    /// previous version).
    pub(crate) fn apply_pod(
        &mut self,
        profiles: &ProfileRegistry,
        old: Option<&Arc<PodInfo>>,
        pod: &Pod,
        info: &Arc<PodInfo>,
    ) {
        let key = info.key().clone();
        let mut old = old;
        if let Some(o) = old {
            // Same name, new object (deleted and re-created between two lists).
            if o.uid != info.uid {
                self.on_pod_delete(o);
                old = None;
            }
        }
        self.track_group_member(old.map(|o| &**o), info, is_terminal(pod));
        if info.node_name.is_some() {
            // Upstream: leaving the unscheduled-pod handler is a delete from the queue.
            self.queue.delete(&key);
            self.conditions.remove(&key);
            self.explain.remove(&key);
            if is_terminal(pod) {
                if let Some(gone) = self.cache.get_pod(&key).cloned() {
                    let _ = self.cache.remove_pod(&key);
                    self.fire_pod_gone(&gone);
                }
                return;
            }
            let was_assigned = old.as_ref().is_some_and(|o| o.node_name.is_some());
            self.upsert_assigned(Arc::clone(info));
            match old {
                // Upstream updatePodInCache: the classified update events.
                Some(o) if was_assigned => {
                    let objects = EventObjects::Pod {
                        old: Some(o),
                        new: Some(info),
                    };
                    for event in pod_update_events(o, info) {
                        self.queue.move_all_with_objects(event, &objects, None);
                    }
                }
                // Upstream addPodToCache (including our own binding coming back); the
                // hints of InterPodAffinity and PodTopologySpread look at the pod.
                _ => {
                    let objects = EventObjects::Pod {
                        old: None,
                        new: Some(info),
                    };
                    let event = ClusterEvent::new(EventResource::AssignedPod, ActionType::ADD);
                    self.queue.move_all_with_objects(event, &objects, None);
                }
            }
            return;
        }
        // Unassigned. Our binding for it succeeded or is in flight: a stale unassigned
        // update must not queue it again.
        if self.cache.is_assumed(&key) {
            return;
        }
        let ours = profiles.for_scheduler_name(&info.scheduler_name).is_some();
        if !ours || is_terminal(pod) {
            self.queue.delete(&key);
            self.conditions.remove(&key);
            return;
        }
        match scheduled_condition(pod) {
            Some(c) => self.conditions.insert(key.clone(), c),
            None => self.conditions.remove(&key),
        };
        let kind = match old {
            Some(o) if o.node_name.is_none() => self.queue.update(Some(o), Arc::clone(info)),
            _ => self.queue.add(Arc::clone(info)),
        };
        if kind == Some(QueueKind::Gated) {
            self.report_unserved_group(profiles, info);
        }
    }

    /// A pod GangScheduling keeps out because the cluster does not serve its group's API is
    /// reported once (its PodScheduled condition then carries the reason): nothing else
    /// would ever tell the user. Waits for a quorum or a group still to be created are
    /// normal while a workload's pods are created, and stay quiet, as upstream's.
    fn report_unserved_group(&mut self, profiles: &ProfileRegistry, info: &PodInfo) {
        let Some(group) = info.pod_group.as_deref() else {
            return;
        };
        if self.groups.read().is_served(group.api) {
            return;
        }
        let (Some(fw), Some(q)) = (
            profiles.for_scheduler_name(&info.scheduler_name),
            self.queue.get(info.key()),
        ) else {
            return;
        };
        if q.gating_plugin != Some(GANG_SCHEDULING) {
            return;
        }
        let message = fw.run_pre_enqueue(info).message();
        let key = info.key().clone();
        if self
            .conditions
            .get(&key)
            .is_some_and(|c| c.message.as_deref() == Some(message.as_str()))
        {
            return;
        }
        self.gate_reports.push(GateReport {
            pod: PodRef::of(info),
            key,
            scheduler_name: fw.profile_name().to_string(),
            message,
        });
    }

    /// Adds or updates a bound pod in the cache.
    fn upsert_assigned(&mut self, info: Arc<PodInfo>) {
        let key = info.key().clone();
        let result = match self.cache.get_pod(&key) {
            Some(_) if self.cache.is_assumed(&key) => self.cache.add_pod(info),
            Some(_) => match self.cache.update_pod(&key, Arc::clone(&info)) {
                Ok(()) => Ok(()),
                Err(_) => {
                    let _ = self.cache.remove_pod(&key);
                    self.cache.add_pod(info)
                }
            },
            None => self.cache.add_pod(info),
        };
        if let Err(e) = result {
            tracing::warn!(pod = %key, error = %e, "cache rejected an assigned pod");
        }
    }

    /// Keeps the PodGroup members current. A new pending member may complete its gang's
    /// quorum: upstream's `UnscheduledPod` add event, fired only for pods of a group (no
    /// other plugin registers it), so the siblings GangScheduling keeps out are looked at.
    fn track_group_member(&mut self, old: Option<&PodInfo>, info: &Arc<PodInfo>, terminal: bool) {
        if old.is_some_and(|o| o.pod_group.is_some() && (terminal || o.pod_group != info.pod_group))
        {
            self.groups.write().remove_pod(old.expect("checked"));
        }
        if info.pod_group.is_none() || terminal {
            return;
        }
        self.groups.write().add_pod(info);
        if old.is_none() && info.node_name.is_none() {
            let objects = EventObjects::Pod {
                old: None,
                new: Some(info),
            };
            let event = ClusterEvent::new(EventResource::UnscheduledPod, ActionType::ADD);
            self.queue.move_all_with_objects(event, &objects, None);
        }
    }

    pub(crate) fn on_pod_delete(&mut self, pod: &PodInfo) {
        if pod.pod_group.is_some() {
            self.groups.write().remove_pod(pod);
        }
        let key = pod.key();
        self.queue.delete(key);
        self.conditions.remove(key);
        self.explain.remove(key);
        if let Some(gone) = self.cache.get_pod(key).cloned() {
            let _ = self.cache.remove_pod(key);
            self.fire_pod_gone(&gone);
        }
    }

    /// A bound pod left: the queueing hints see which pod it was.
    fn fire_pod_gone(&mut self, gone: &PodInfo) {
        let objects = EventObjects::Pod {
            old: Some(gone),
            new: None,
        };
        let event = ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE);
        self.queue.move_all_with_objects(event, &objects, None);
    }

    /// A node added or changed; `old`/`new` fingerprint what update classification
    /// compares (the informer keeps only the fingerprint). The node moves into the cache.
    pub(crate) fn on_node(
        &mut self,
        old: Option<&NodeFingerprint>,
        node: Node,
        new: &NodeFingerprint,
    ) {
        // The informer keeps only a fingerprint; the cache's view before this update is the
        // old node the hints compare with (upstream passes both objects).
        let name = node.metadata.name.clone().unwrap_or_default();
        // Only for updates that fire events: heartbeats keep the cache's view unshared.
        let before = old
            .filter(|o| !o.actions_to(new).is_empty())
            .and_then(|_| self.cache.node_info(&name))
            .filter(|n| n.has_node())
            .cloned();
        self.cache.upsert_node(Arc::new(node));
        let info = self.cache.node_info(&name).cloned();
        let objects = match &info {
            Some(new) => EventObjects::Node {
                old: before.as_deref(),
                new,
            },
            None => EventObjects::None,
        };
        match old {
            None => {
                let event = ClusterEvent::new(EventResource::Node, ActionType::ADD);
                self.queue.move_all_with_objects(event, &objects, None);
            }
            // Heartbeats (condition timestamps) classify as nothing and fire nothing.
            Some(o) => {
                for event in o.events_to(new) {
                    self.queue.move_all_with_objects(event, &objects, None);
                }
            }
        }
    }

    pub(crate) fn on_node_delete(&mut self, name: &str) {
        if let Err(e) = self.cache.remove_node(name) {
            tracing::debug!(node = name, error = %e, "node delete");
        }
        self.fire(EventResource::Node, ActionType::DELETE);
    }

    pub(crate) fn on_runtime_class(&mut self, old: Option<&RuntimeClass>, rc: &RuntimeClass) {
        self.cache.update_runtime_class(rc);
        match old {
            None => self.fire(EventResource::RuntimeClass, ActionType::ADD),
            Some(o)
                if o.handler != rc.handler
                    || o.overhead != rc.overhead
                    || o.scheduling != rc.scheduling =>
            {
                self.fire(EventResource::RuntimeClass, ActionType::UPDATE)
            }
            Some(_) => {}
        }
    }

    pub(crate) fn on_runtime_class_delete(&mut self, rc: &RuntimeClass) {
        self.cache
            .remove_runtime_class(rc.metadata.name.as_deref().unwrap_or_default());
        self.fire(EventResource::RuntimeClass, ActionType::DELETE);
    }

    pub(crate) fn on_pdb(&mut self, old: Option<&PodDisruptionBudget>, pdb: &PodDisruptionBudget) {
        self.cache.update_pdb(pdb);
        let action = if old.is_some() {
            ActionType::UPDATE
        } else {
            ActionType::ADD
        };
        self.fire(EventResource::PodDisruptionBudget, action);
    }

    pub(crate) fn on_pdb_delete(&mut self, pdb: &PodDisruptionBudget) {
        self.cache.remove_pdb(
            pdb.metadata.namespace.as_deref().unwrap_or_default(),
            pdb.metadata.name.as_deref().unwrap_or_default(),
        );
        self.fire(EventResource::PodDisruptionBudget, ActionType::DELETE);
    }

    pub(crate) fn on_namespace(&mut self, old: Option<&Namespace>, ns: &Namespace) {
        self.cache.update_namespace(ns);
        match old {
            None => self.fire(EventResource::Namespace, ActionType::ADD),
            // Only labels matter to scheduling (namespaceSelector in pod affinity).
            Some(o) if o.metadata.labels != ns.metadata.labels => {
                self.fire(EventResource::Namespace, ActionType::UPDATE)
            }
            Some(_) => {}
        }
    }

    pub(crate) fn on_namespace_delete(&mut self, ns: &Namespace) {
        self.cache
            .remove_namespace(ns.metadata.name.as_deref().unwrap_or_default());
        self.fire(EventResource::Namespace, ActionType::DELETE);
    }

    /// Fires Add for a new object, Update for a changed one; an unchanged relist fires
    /// nothing (the same object listed again cannot help a waiting pod).
    fn fire_add_or_update<K: PartialEq>(
        &mut self,
        resource: EventResource,
        old: Option<&K>,
        new: &K,
    ) {
        self.fire_add_or_update_with(resource, old, new, &EventObjects::None);
    }

    /// As [`Self::fire_add_or_update`], with the objects the queueing hints look at.
    fn fire_add_or_update_with<K: PartialEq>(
        &mut self,
        resource: EventResource,
        old: Option<&K>,
        new: &K,
        objects: &EventObjects<'_>,
    ) {
        let action = match old {
            None => ActionType::ADD,
            Some(o) if o != new => ActionType::UPDATE,
            Some(_) => return,
        };
        self.queue
            .move_all_with_objects(ClusterEvent::new(resource, action), objects, None);
    }

    /// Claims: VolumeBinding (unbound Immediate claims, WaitForFirstConsumer claims to
    /// match or provision), VolumeRestrictions (ReadWriteOncePod), VolumeZone and
    /// NodeVolumeLimits read them. An update also ends a claim's assumed state.
    pub(crate) fn on_pvc(
        &mut self,
        old: Option<&PersistentVolumeClaim>,
        pvc: &PersistentVolumeClaim,
    ) {
        self.cache.update_pvc(pvc);
        let m = &pvc.metadata;
        self.volume_versions.insert(
            crate::binding::volumes::pvc_version_key(
                m.namespace.as_deref().unwrap_or_default(),
                m.name.as_deref().unwrap_or_default(),
            ),
            resource_version(m),
        );
        let objects = EventObjects::Pvc { new: pvc };
        self.fire_add_or_update_with(EventResource::PersistentVolumeClaim, old, pvc, &objects);
    }

    pub(crate) fn on_pvc_delete(&mut self, pvc: &PersistentVolumeClaim) {
        self.volume_versions
            .remove(&crate::binding::volumes::pvc_version_key(
                pvc.metadata.namespace.as_deref().unwrap_or_default(),
                pvc.metadata.name.as_deref().unwrap_or_default(),
            ));
        self.cache.remove_pvc(
            pvc.metadata.namespace.as_deref().unwrap_or_default(),
            pvc.metadata.name.as_deref().unwrap_or_default(),
        );
        self.fire(EventResource::PersistentVolumeClaim, ActionType::DELETE);
    }

    pub(crate) fn on_pv(&mut self, old: Option<&PersistentVolume>, pv: &PersistentVolume) {
        self.cache.update_pv(pv);
        self.volume_versions.insert(
            crate::binding::volumes::pv_version_key(
                pv.metadata.name.as_deref().unwrap_or_default(),
            ),
            resource_version(&pv.metadata),
        );
        let objects = EventObjects::Pv { old, new: pv };
        self.fire_add_or_update_with(EventResource::PersistentVolume, old, pv, &objects);
    }

    pub(crate) fn on_pv_delete(&mut self, pv: &PersistentVolume) {
        self.volume_versions
            .remove(&crate::binding::volumes::pv_version_key(
                pv.metadata.name.as_deref().unwrap_or_default(),
            ));
        self.cache
            .remove_pv(pv.metadata.name.as_deref().unwrap_or_default());
        self.fire(EventResource::PersistentVolume, ActionType::DELETE);
    }

    pub(crate) fn on_storage_class(&mut self, old: Option<&StorageClass>, sc: &StorageClass) {
        self.cache.update_storage_class(sc);
        let objects = EventObjects::StorageClass { old, new: sc };
        self.fire_add_or_update_with(EventResource::StorageClass, old, sc, &objects);
    }

    pub(crate) fn on_storage_class_delete(&mut self, sc: &StorageClass) {
        self.cache
            .remove_storage_class(sc.metadata.name.as_deref().unwrap_or_default());
        self.fire(EventResource::StorageClass, ActionType::DELETE);
    }

    pub(crate) fn on_csi_node(&mut self, old: Option<&CSINode>, n: &CSINode) {
        self.cache.update_csi_node(n);
        let objects = EventObjects::CsiNode { old, new: n };
        self.fire_add_or_update_with(EventResource::CSINode, old, n, &objects);
    }

    pub(crate) fn on_csi_node_delete(&mut self, n: &CSINode) {
        self.cache
            .remove_csi_node(n.metadata.name.as_deref().unwrap_or_default());
        self.fire(EventResource::CSINode, ActionType::DELETE);
    }

    /// A Service/RC/ReplicaSet/StatefulSet added or changed: its selector feeds
    /// PodTopologySpread's system default constraints. No event is fired: upstream's
    /// PodTopologySpread registers none for these kinds (pod and node events only).
    pub(crate) fn on_workload(&mut self, e: WorkloadEntry) {
        self.cache
            .upsert_workload_selector(e.kind, &e.namespace, &e.name, e.selector);
    }

    pub(crate) fn on_workload_delete(&mut self, e: &WorkloadEntry) {
        self.cache
            .remove_workload_selector(e.kind, &e.namespace, &e.name);
    }

    /// VolumeAttachments: NodeVolumeLimits counts volumes attached to a node; one going
    /// away frees an attach slot.
    pub(crate) fn on_volume_attachment(
        &mut self,
        old: Option<&VolumeAttachment>,
        va: &VolumeAttachment,
    ) {
        self.cache.update_volume_attachment(va);
        self.fire_add_or_update(EventResource::VolumeAttachment, old, va);
    }

    pub(crate) fn on_volume_attachment_delete(&mut self, va: &VolumeAttachment) {
        self.cache.remove_volume_attachment(va);
        // NodeVolumeLimits' hint asks which claim the detached volume belonged to.
        let info = VolumeAttachmentInfo::from_volume_attachment(va);
        let claim_ref = info
            .pv_name
            .as_deref()
            .and_then(|pv| self.cache.volumes().pv(pv))
            .and_then(|pv| pv.claim_ref.clone());
        let objects = EventObjects::VolumeAttachmentGone {
            va: &info,
            claim: claim_ref
                .as_ref()
                .map(|c| (c.namespace.as_str(), c.name.as_str())),
        };
        let event = ClusterEvent::new(EventResource::VolumeAttachment, ActionType::DELETE);
        self.queue.move_all_with_objects(event, &objects, None);
    }

    /// CSIDrivers: whether a provisioner opts into VolumeBinding's storage-capacity check.
    pub(crate) fn on_csi_driver(&mut self, old: Option<&CSIDriver>, d: &CSIDriver) {
        self.cache.update_csi_driver(d);
        let objects = EventObjects::CsiDriver { old, new: d };
        self.fire_add_or_update_with(EventResource::CSIDriver, old, d, &objects);
    }

    /// ResourceClaims (DRA): kept as views in the cache (the informer's copy ends an
    /// assumed allocation); their events retry pods DynamicResources refused.
    pub(crate) fn on_resource_claim(&mut self, old: Option<&ResourceClaim>, c: &ResourceClaim) {
        self.cache.dra_mut().update_claim(c);
        let action = match old {
            None => ActionType::ADD,
            Some(o) if o != c => ActionType::UPDATE,
            Some(_) => return,
        };
        // DynamicResources' hint resolves the pod's claims as the cache now holds them.
        let objects = EventObjects::ResourceClaim {
            old,
            new: c,
            claims: self.cache.dra(),
        };
        let event = ClusterEvent::new(EventResource::ResourceClaim, action);
        self.queue.move_all_with_objects(event, &objects, None);
    }

    pub(crate) fn on_resource_claim_delete(&mut self, c: &ResourceClaim) {
        self.cache.dra_mut().remove_claim(
            c.metadata.namespace.as_deref().unwrap_or_default(),
            c.metadata.name.as_deref().unwrap_or_default(),
        );
        self.fire(EventResource::ResourceClaim, ActionType::DELETE);
    }

    /// ResourceSlices (DRA): the devices drivers publish, per pool and generation.
    pub(crate) fn on_resource_slice(&mut self, old: Option<&ResourceSlice>, s: &ResourceSlice) {
        self.cache.dra_mut().update_slice(s);
        self.fire_add_or_update(EventResource::ResourceSlice, old, s);
    }

    pub(crate) fn on_resource_slice_delete(&mut self, s: &ResourceSlice) {
        self.cache
            .dra_mut()
            .remove_slice(s.metadata.name.as_deref().unwrap_or_default());
        self.fire(EventResource::ResourceSlice, ActionType::DELETE);
    }

    /// DeviceClasses (DRA): the selectors and configs requests get by naming a class.
    pub(crate) fn on_device_class(&mut self, old: Option<&DeviceClass>, c: &DeviceClass) {
        self.cache.dra_mut().update_class(c);
        self.fire_add_or_update(EventResource::DeviceClass, old, c);
    }

    pub(crate) fn on_device_class_delete(&mut self, c: &DeviceClass) {
        self.cache
            .dra_mut()
            .remove_class(c.metadata.name.as_deref().unwrap_or_default());
        self.fire(EventResource::DeviceClass, ActionType::DELETE);
    }

    pub(crate) fn on_csi_driver_delete(&mut self, d: &CSIDriver) {
        self.cache
            .remove_csi_driver(d.metadata.name.as_deref().unwrap_or_default());
        self.fire(EventResource::CSIDriver, ActionType::DELETE);
    }

    /// CSIStorageCapacities: free storage per class and topology segment, for
    /// VolumeBinding's capacity check of claims to provision.
    pub(crate) fn on_storage_capacity(
        &mut self,
        old: Option<&CSIStorageCapacity>,
        c: &CSIStorageCapacity,
    ) {
        self.cache.update_storage_capacity(c);
        let objects = EventObjects::StorageCapacity { old, new: c };
        self.fire_add_or_update_with(EventResource::CSIStorageCapacity, old, c, &objects);
    }

    pub(crate) fn on_storage_capacity_delete(&mut self, c: &CSIStorageCapacity) {
        self.cache.remove_storage_capacity(
            c.metadata.namespace.as_deref().unwrap_or_default(),
            c.metadata.name.as_deref().unwrap_or_default(),
        );
        self.fire(EventResource::CSIStorageCapacity, ActionType::DELETE);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use scheduler_core::cache::Snapshot;
    use scheduler_core::framework::Registry;
    use scheduler_core::queue::{FakeClock, QueueConfig, QueueKind, QueueProfiles};
    use scheduler_core::schedule_one::{Decision, SchedulingAlgorithm, schedule_one};
    use serde_json::json;

    /// Controller state over the default profile, with a fake clock.
    pub(crate) fn default_profile_state() -> (Shared, Arc<ProfileRegistry>, FakeClock) {
        let loaded = scheduler_core::config::load_str(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
            "t.yaml",
        )
        .unwrap();
        let groups = Arc::new(PodGroupManager::new());
        let mut registry = Registry::in_tree();
        scheduler_core::plugins::register_group_plugins(&mut registry, Arc::clone(&groups));
        let profiles = Arc::new(ProfileRegistry::new(&loaded.profiles, &registry).unwrap());
        let clock = FakeClock::new();
        let queue = SchedulingQueue::new(
            QueueConfig::default(),
            Arc::new(clock.clone()),
            Arc::clone(&profiles) as Arc<dyn QueueProfiles>,
        );
        let shared = Shared::new(
            queue,
            Arc::new(clock.clone()),
            Arc::clone(&profiles),
            groups,
        );
        (shared, profiles, clock)
    }

    /// Pops the next pod, schedules it on the cache as it is, expects `plugin` among those
    /// that rejected it, and parks it as unschedulable.
    pub(crate) fn park_rejected(st: &mut State, profiles: &ProfileRegistry, plugin: &str) {
        let q = st.queue.pop().unwrap();
        let cycle = st.queue.scheduling_cycle();
        let mut snapshot = Snapshot::new();
        st.cache.update_snapshot(&mut snapshot);
        let fw = profiles.for_scheduler_name("default-scheduler").unwrap();
        let mut alg = SchedulingAlgorithm::new(0, 1);
        let nominated = st.queue.nominated_pods().clone();
        let Decision::Unschedulable { diagnosis, .. } =
            schedule_one(fw, &mut alg, &q.pod, &snapshot, &nominated)
        else {
            panic!("expected {plugin} to reject the pod everywhere");
        };
        let diagnosis = diagnosis.expect("plugins rejected it");
        assert!(diagnosis.unschedulable_plugins.contains(plugin));
        st.queue
            .add_unschedulable_if_not_present(q, Some(&diagnosis), cycle)
            .unwrap();
    }

    fn node(name: &str, cpu: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
        }))
        .unwrap()
    }

    /// The queue moves an unschedulable pod only on events its rejecting plugin registered:
    /// NodeResourcesFit cares about nodes added (and pods deleted), not RuntimeClasses,
    /// PDBs or node heartbeats.
    #[test]
    fn a_pod_rejected_by_node_resources_fit_moves_only_on_events_that_can_help() {
        let (shared, profiles, clock) = default_profile_state();
        let mut st = shared.lock();
        let fp = |n: &Node| NodeFingerprint::of(n);
        st.on_node(None, node("small", "1"), &fp(&node("small", "1")));
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "huge", "namespace": "default", "uid": "u1"},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": "3"}}}]},
        }))
        .unwrap();
        st.on_pod(&profiles, None, &pod);
        let key = PodKey::of(&pod);
        assert_eq!(st.queue.queue_of(&key), Some(QueueKind::Active));

        park_rejected(&mut st, &profiles, "NodeResourcesFit");
        assert_eq!(st.queue.queue_of(&key), Some(QueueKind::Unschedulable));

        // Unrelated events leave it where it is.
        let rc: RuntimeClass =
            serde_json::from_value(json!({"metadata": {"name": "gvisor"}, "handler": "runsc"}))
                .unwrap();
        st.on_runtime_class(None, &rc);
        let pdb: PodDisruptionBudget = serde_json::from_value(
            json!({"metadata": {"name": "p", "namespace": "default"}, "spec": {}}),
        )
        .unwrap();
        st.on_pdb(None, &pdb);
        let mut heartbeat = node("small", "1");
        heartbeat.metadata.resource_version = Some("2".into());
        // A heartbeat: only timestamps and the resourceVersion change.
        heartbeat.status.as_mut().unwrap().conditions = Some(vec![
            serde_json::from_value(json!({"type": "Ready", "status": "True",
                "lastHeartbeatTime": "2026-01-01T00:00:10Z"}))
            .unwrap(),
        ]);
        let before = {
            let mut n = node("small", "1");
            n.status.as_mut().unwrap().conditions = Some(vec![
                serde_json::from_value(json!({"type": "Ready", "status": "True",
                    "lastHeartbeatTime": "2026-01-01T00:00:00Z"}))
                .unwrap(),
            ]);
            n
        };
        st.on_node(Some(&fp(&before)), heartbeat.clone(), &fp(&heartbeat));
        assert_eq!(st.queue.queue_of(&key), Some(QueueKind::Unschedulable));

        // A node added may fit it: retried (after its backoff).
        st.on_node(None, node("big", "8"), &fp(&node("big", "8")));
        assert_eq!(st.queue.queue_of(&key), Some(QueueKind::Backoff));
        clock.advance(std::time::Duration::from_secs(2));
        assert_eq!(st.queue.flush_backoff_completed(), 1);
        assert_eq!(st.queue.queue_of(&key), Some(QueueKind::Active));
    }

    /// Workload informers feed the cache's selectors, from which PodTopologySpread's system
    /// default constraints take a pod's selector.
    fn labelled(name: &str, cpu: &str, labels: serde_json::Value) -> Node {
        let mut n = node(name, cpu);
        n.metadata.labels = serde_json::from_value(labels).unwrap();
        n
    }

    /// Node updates are judged with the node before and after, as upstream's hints: a
    /// relabelled node the pod's selector already matched cannot help it (NodeAffinity
    /// skips), a node that starts matching can.
    #[test]
    fn node_updates_are_judged_with_the_old_node() {
        let (shared, profiles, clock) = default_profile_state();
        let mut st = shared.lock();
        let fp = |n: &Node| NodeFingerprint::of(n);
        let gpu = labelled("gpu", "1", json!({"pool": "gpu"}));
        let plain = node("plain", "8");
        st.on_node(None, gpu.clone(), &fp(&gpu));
        st.on_node(None, plain.clone(), &fp(&plain));
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u1"},
            "spec": {"nodeSelector": {"pool": "gpu"}, "containers": [{"name": "c",
                "image": "i", "resources": {"requests": {"cpu": "2"}}}]},
        }))
        .unwrap();
        st.on_pod(&profiles, None, &pod);
        let key = PodKey::of(&pod);
        park_rejected(&mut st, &profiles, "NodeAffinity");
        clock.advance(std::time::Duration::from_secs(2));

        // The gpu node gets another label: it matched before and matches now.
        let relabelled = labelled("gpu", "1", json!({"pool": "gpu", "rack": "r1"}));
        st.on_node(Some(&fp(&gpu)), relabelled.clone(), &fp(&relabelled));
        assert_eq!(st.queue.queue_of(&key), Some(QueueKind::Unschedulable));
        // The big node joins the pool: it did not match before.
        let joined = labelled("plain", "8", json!({"pool": "gpu"}));
        st.on_node(Some(&fp(&plain)), joined.clone(), &fp(&joined));
        assert_eq!(st.queue.queue_of(&key), Some(QueueKind::Active));
    }

    #[test]
    fn workload_selectors_follow_informer_events() {
        use scheduler_core::cache::workload_selectors::{replica_set_entry, service_entry};
        let loaded = scheduler_core::config::from_flags(None, None).unwrap();
        let profiles =
            Arc::new(ProfileRegistry::new(&loaded.profiles, &Registry::in_tree()).unwrap());
        let clock = FakeClock::new();
        let queue = SchedulingQueue::new(
            QueueConfig::default(),
            Arc::new(clock.clone()),
            Arc::clone(&profiles) as Arc<dyn QueueProfiles>,
        );
        let shared = Shared::new(queue, Arc::new(clock), profiles, Arc::default());
        let mut st = shared.lock();
        let pod = PodInfo::from_pod(
            &serde_json::from_value(json!({
                "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            }))
            .unwrap(),
        );
        assert_eq!(st.cache.workload_selectors().default_selector(&pod), None);
        let svc = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"app": "web"}},
        }))
        .unwrap();
        st.on_workload(service_entry(&svc));
        let rs = serde_json::from_value(json!({
            "metadata": {"name": "web-abc", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
        }))
        .unwrap();
        st.on_workload(replica_set_entry(&rs));
        assert_eq!(st.cache.workload_selectors().len(), 2);
        assert!(
            st.cache
                .workload_selectors()
                .default_selector(&pod)
                .is_some()
        );
        st.on_workload_delete(&service_entry(&svc));
        st.on_workload_delete(&replica_set_entry(&rs));
        assert_eq!(st.cache.workload_selectors().default_selector(&pod), None);
    }
}
