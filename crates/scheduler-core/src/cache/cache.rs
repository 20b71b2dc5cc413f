//! The scheduler's view of bound and assumed pods per node (upstream `backend/cache`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
};

use super::node_tree::{NodeTree, zone_key_of};
use super::snapshot::{NamespaceLabels, Snapshot};
use super::workload_selectors::{WorkloadSelector, WorkloadSelectors};
use crate::types::{
    CsiDriverInfo, CsiNodeInfo, CsiStorageCapacityInfo, NodeInfo, PdbInfo, PodInfo, PodKey,
    PodVolumes, PvInfo, PvcInfo, RuntimeClassInfo, StorageClassInfo, VolumeAttachmentInfo,
    VolumeObjects, WorkloadKind,
};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    #[error("node {0} is not found in the scheduler cache")]
    NodeNotFound(String),
    #[error("pod {0} is not found in the scheduler cache")]
    PodNotFound(PodKey),
    #[error("pod {0} has no node name, only bound or assumed pods are cached")]
    PodNotBound(PodKey),
    #[error("pod {0} is already in the cache, so it cannot be assumed")]
    AlreadyInCache(PodKey),
    #[error("pod {0} was already in added state")]
    AlreadyAdded(PodKey),
    #[error("assumed pod {0} should not be updated before its add event")]
    PodAssumed(PodKey),
    #[error("pod {0} was not assumed, so it cannot be forgotten")]
    NotAssumed(PodKey),
    #[error(
        "pod {pod} is cached on node {cached} but the update puts it on {new}: cache is corrupted"
    )]
    NodeMismatch {
        pod: PodKey,
        cached: String,
        new: String,
    },
}

#[derive(Debug, Clone)]
struct PodState {
    pod: Arc<PodInfo>,
    node: String,
    assumed: bool,
    binding_finished: bool,
}

/// What one [`Cache::update_snapshot`] call did, for metrics and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnapshotUpdate {
    /// Node entries whose `Arc` was replaced or added.
    pub changed_nodes: usize,
    /// The ordered node list was rebuilt because nodes were added or removed.
    pub rebuilt_node_list: bool,
}

/// A consistent copy of the cache contents for debugging and tests.
#[derive(Debug, Clone, Default)]
pub struct CacheDump {
    pub nodes: BTreeMap<String, Arc<NodeInfo>>,
    /// Pod -> node it is (assumed to be) on.
    pub pods: BTreeMap<PodKey, String>,
    pub assumed_pods: BTreeSet<PodKey>,
}

#[derive(Debug, Default)]
pub struct Cache {
    /// Every node name that has a Node object or pods; placeholders have `node == None`.
    nodes: foldhash::HashMap<String, Arc<NodeInfo>>,
    /// Current generation -> node name for each entry of `nodes`; lets a snapshot find the
    /// nodes that changed since it was taken without scanning all of them.
    by_generation: BTreeMap<u64, String>,
    pods: foldhash::HashMap<PodKey, PodState>,
    tree: NodeTree,
    /// Image name -> number of known nodes that have it. Copy-on-write, shared with snapshots.
    image_nodes: Arc<HashMap<String, usize>>,
    runtime_classes: Arc<HashMap<String, Arc<RuntimeClassInfo>>>,
    /// Namespace labels, for namespaceSelector in pod affinity terms.
    namespaces: NamespaceLabels,
    /// Workload selectors for default topology spreading; copy-on-write, shared with snapshots.
    workloads: Arc<WorkloadSelectors>,
    /// Sorted by (namespace, name). Copy-on-write: snapshots share it until a PDB changes.
    pdbs: Arc<Vec<Arc<PdbInfo>>>,
    /// PVCs, PVs, StorageClasses, CSINodes, CSIDrivers, CSIStorageCapacities and
    /// VolumeAttachments; each map copy-on-write, shared with snapshots.
    volumes: VolumeObjects,
    /// What the informer last said about volumes and claims VolumeBinding's decisions were
    /// assumed on, so a failed binding can be rolled back (upstream's assume cache). An
    /// informer event for the object supersedes the assumption and drops its entry.
    assumed_pvs: HashMap<String, Arc<PvInfo>>,
    assumed_pvcs: HashMap<String, Arc<PvcInfo>>,
    /// Whether the API server serves resource.k8s.io/v1 (DRA), from the controller's
    /// discovery at startup. False until told: claims are then never treated as allocatable.
    dra_api_served: bool,
    /// ResourceClaims, ResourceSlices, DeviceClasses; each map copy-on-write, shared with
    /// snapshots.
    dra: crate::types::dra::DraObjects,
}

impl Cache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Nodes whose Node object is known.
    pub fn node_count(&self) -> usize {
        self.tree.num_nodes()
    }

    /// Bound and assumed pods.
    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// Pods assumed on a node whose binding has not come back from the informer yet.
    pub fn assumed_pod_count(&self) -> usize {
        self.pods.values().filter(|s| s.assumed).count()
    }

    pub fn node_info(&self, name: &str) -> Option<&Arc<NodeInfo>> {
        self.nodes.get(name)
    }

    pub fn get_pod(&self, key: &PodKey) -> Option<&Arc<PodInfo>> {
        self.pods.get(key).map(|s| &s.pod)
    }

    pub fn is_assumed(&self, key: &PodKey) -> bool {
        self.pods.get(key).is_some_and(|s| s.assumed)
    }

    pub fn image_num_nodes(&self, image: &str) -> usize {
        self.image_nodes.get(image).copied().unwrap_or(0)
    }

    // ---- nodes ----

    pub fn add_node(&mut self, node: &Node) {
        self.upsert_node(Arc::new(node.clone()));
    }

    pub fn update_node(&mut self, node: &Node) {
        self.upsert_node(Arc::new(node.clone()));
    }

    /// Add and update are the same operation: an update for an unseen node adds it, and an add
    /// for a known one refreshes it (informer resyncs do both).
    pub fn upsert_node(&mut self, node: Arc<Node>) {
        let name = node.metadata.name.clone().unwrap_or_default();
        self.ensure_entry(&name);
        let (old_zone, old_images) = self
            .mutate_node(&name, |n| {
                let old_zone = n.has_node().then(|| zone_key_of(&n.labels));
                let old_images = std::mem::take(&mut n.images);
                n.set_node_arc(node);
                (old_zone, old_images)
            })
            .expect("entry was just ensured");
        let info = &self.nodes[&name];
        let new_zone = zone_key_of(&info.labels);
        if old_zone.as_deref() != Some(new_zone.as_str()) {
            if let Some(z) = &old_zone {
                self.tree.remove(z, &name);
            }
            self.tree.add(&new_zone, &name);
        }
        // Heartbeats rarely change images: only touch the shared map when the set differs.
        let same_images = old_images.len() == info.images.len()
            && old_images.keys().all(|k| info.images.contains_key(k));
        if !same_images {
            let counts = Arc::make_mut(&mut self.image_nodes);
            for img in old_images.keys().filter(|k| !info.images.contains_key(k)) {
                decrement(counts, img);
            }
            for img in info.images.keys().filter(|k| !old_images.contains_key(k)) {
                *counts.entry(img.clone()).or_insert(0) += 1;
            }
        }
    }

    /// Forgets the Node object. Pods still bound to it keep the entry alive as a placeholder
    /// (upstream does the same) until their delete events arrive.
    pub fn remove_node(&mut self, name: &str) -> Result<(), CacheError> {
        let info = self.nodes.get(name).filter(|n| n.has_node());
        let Some(info) = info else {
            return Err(CacheError::NodeNotFound(name.to_string()));
        };
        let zone = zone_key_of(&info.labels);
        let images: Vec<String> = info.images.keys().cloned().collect();
        let has_pods = !info.pods.is_empty();
        self.tree.remove(&zone, name);
        if !images.is_empty() {
            let counts = Arc::make_mut(&mut self.image_nodes);
            for img in &images {
                decrement(counts, img);
            }
        }
        if has_pods {
            self.mutate_node(name, NodeInfo::remove_node);
        } else {
            self.drop_entry(name);
        }
        Ok(())
    }

    // ---- pods ----

    /// A bound pod seen by the informer. Confirms it if it was assumed (possibly moving it to
    /// the node it was really bound to).
    pub fn add_pod(&mut self, pod: Arc<PodInfo>) -> Result<(), CacheError> {
        let key = pod.key.clone();
        let Some(node) = pod.node_name.clone() else {
            return Err(CacheError::PodNotBound(key));
        };
        match self.pods.get(&key) {
            Some(state) if state.assumed => {
                let old_node = state.node.clone();
                if old_node != node {
                    tracing::info!(pod = %key, assumed = %old_node, actual = %node, "pod was added to a different node than it was assumed");
                }
                self.detach_pod(&old_node, &key);
            }
            Some(_) => return Err(CacheError::AlreadyAdded(key)),
            None => {}
        }
        self.attach_pod(&node, pod.clone());
        self.pods.insert(
            key,
            PodState {
                pod,
                node,
                assumed: false,
                binding_finished: false,
            },
        );
        Ok(())
    }

    pub fn update_pod(&mut self, old_key: &PodKey, pod: Arc<PodInfo>) -> Result<(), CacheError> {
        let state = self
            .pods
            .get(old_key)
            .ok_or_else(|| CacheError::PodNotFound(old_key.clone()))?;
        if state.assumed {
            return Err(CacheError::PodAssumed(old_key.clone()));
        }
        let Some(node) = pod.node_name.clone() else {
            return Err(CacheError::PodNotBound(pod.key.clone()));
        };
        if state.node != node {
            return Err(CacheError::NodeMismatch {
                pod: old_key.clone(),
                cached: state.node.clone(),
                new: node,
            });
        }
        // One node edit instead of remove + add keeps a placeholder from being dropped and
        // re-created in between.
        let key = pod.key.clone();
        let new = pod.clone();
        self.mutate_node(&node, |n| {
            n.remove_pod(old_key);
            n.add_pod(new);
        });
        self.pods.remove(old_key);
        self.pods.insert(
            key,
            PodState {
                pod,
                node,
                assumed: false,
                binding_finished: false,
            },
        );
        Ok(())
    }

    /// Removes a bound or assumed pod.
    pub fn remove_pod(&mut self, key: &PodKey) -> Result<Arc<PodInfo>, CacheError> {
        let state = self
            .pods
            .remove(key)
            .ok_or_else(|| CacheError::PodNotFound(key.clone()))?;
        self.detach_pod(&state.node, key);
        Ok(state.pod)
    }

    /// Reserves `node` for a pod that is being bound; it counts as placed from now on.
    pub fn assume_pod(&mut self, pod: Arc<PodInfo>, node: &str) -> Result<(), CacheError> {
        if self.pods.contains_key(&pod.key) {
            return Err(CacheError::AlreadyInCache(pod.key.clone()));
        }
        let pod = if pod.node_name.as_deref() == Some(node) {
            pod
        } else {
            Arc::new(pod.with_node_name(node))
        };
        self.attach_pod(node, pod.clone());
        self.pods.insert(
            pod.key.clone(),
            PodState {
                pod,
                node: node.to_string(),
                assumed: true,
                binding_finished: false,
            },
        );
        Ok(())
    }

    /// Marks an assumed pod's binding as sent. Returns false for pods that are not assumed.
    /// (Upstream only uses this to start assumed-pod expiry, which is disabled.)
    pub fn finish_binding(&mut self, key: &PodKey) -> bool {
        match self.pods.get_mut(key) {
            Some(s) if s.assumed => {
                s.binding_finished = true;
                true
            }
            _ => false,
        }
    }

    pub fn is_binding_finished(&self, key: &PodKey) -> bool {
        self.pods.get(key).is_some_and(|s| s.binding_finished)
    }

    /// Undoes [`Self::assume_pod`] after a failed bind.
    pub fn forget_pod(&mut self, key: &PodKey) -> Result<Arc<PodInfo>, CacheError> {
        match self.pods.get(key) {
            None => Err(CacheError::PodNotFound(key.clone())),
            Some(s) if !s.assumed => Err(CacheError::NotAssumed(key.clone())),
            Some(_) => self.remove_pod(key),
        }
    }

    // ---- dynamic resources ----

    /// Records whether the API server serves resource.k8s.io/v1 (controller discovery).
    pub fn set_dra_api_served(&mut self, served: bool) {
        self.dra_api_served = served;
    }

    /// ResourceClaims, ResourceSlices and DeviceClasses as the informers last reported them
    /// (with this scheduler's assumed writes).
    pub fn dra(&self) -> &crate::types::dra::DraObjects {
        &self.dra
    }

    /// ResourceClaims, ResourceSlices and DeviceClasses, to add, update or remove.
    pub fn dra_mut(&mut self) -> &mut crate::types::dra::DraObjects {
        &mut self.dra
    }

    // ---- runtime classes ----

    pub fn add_runtime_class(&mut self, rc: &RuntimeClass) {
        let info = RuntimeClassInfo::from_runtime_class(rc);
        Arc::make_mut(&mut self.runtime_classes).insert(info.name.clone(), Arc::new(info));
    }

    pub fn update_runtime_class(&mut self, rc: &RuntimeClass) {
        self.add_runtime_class(rc);
    }

    pub fn remove_runtime_class(&mut self, name: &str) -> bool {
        if !self.runtime_classes.contains_key(name) {
            return false;
        }
        Arc::make_mut(&mut self.runtime_classes).remove(name);
        true
    }

    pub fn runtime_class(&self, name: &str) -> Option<&Arc<RuntimeClassInfo>> {
        self.runtime_classes.get(name)
    }

    // ---- namespaces ----

    /// Records a namespace's labels (only labels matter for scheduling).
    pub fn add_namespace(&mut self, ns: &Namespace) {
        let name = ns.metadata.name.clone().unwrap_or_default();
        let labels = ns.metadata.labels.clone().unwrap_or_default();
        if self.namespaces.get(&name).is_some_and(|l| **l == labels) {
            return;
        }
        Arc::make_mut(&mut self.namespaces).insert(name, Arc::new(labels));
    }

    pub fn update_namespace(&mut self, ns: &Namespace) {
        self.add_namespace(ns);
    }

    pub fn remove_namespace(&mut self, name: &str) -> bool {
        if !self.namespaces.contains_key(name) {
            return false;
        }
        Arc::make_mut(&mut self.namespaces).remove(name);
        true
    }

    pub fn namespace_labels(&self, name: &str) -> Option<&BTreeMap<String, String>> {
        self.namespaces.get(name).map(|l| &**l)
    }

    // ---- workload selectors (default topology spreading) ----

    /// Records a Service/RC/ReplicaSet/StatefulSet selector (see `cache::workload_selectors`
    /// for the helpers that turn API objects into arguments). Unchanged selectors copy nothing.
    pub fn upsert_workload_selector(
        &mut self,
        kind: WorkloadKind,
        namespace: &str,
        name: &str,
        selector: WorkloadSelector,
    ) {
        if self.workloads.get(kind, namespace, name) != Some(&selector) {
            Arc::make_mut(&mut self.workloads).upsert(kind, namespace, name, selector);
        }
    }

    pub fn remove_workload_selector(
        &mut self,
        kind: WorkloadKind,
        namespace: &str,
        name: &str,
    ) -> bool {
        if self.workloads.get(kind, namespace, name).is_none() {
            return false;
        }
        Arc::make_mut(&mut self.workloads).remove(kind, namespace, name)
    }

    pub fn workload_selectors(&self) -> &WorkloadSelectors {
        &self.workloads
    }

    // ---- pod disruption budgets ----

    /// Adds or replaces the budget (informer adds and updates are the same operation).
    pub fn add_pdb(&mut self, pdb: &PodDisruptionBudget) {
        let info = PdbInfo::from_pdb(pdb);
        let list = Arc::make_mut(&mut self.pdbs);
        match list.binary_search_by(|p| p.key().cmp(&info.key())) {
            Ok(i) => list[i] = Arc::new(info),
            Err(i) => list.insert(i, Arc::new(info)),
        }
    }

    pub fn update_pdb(&mut self, pdb: &PodDisruptionBudget) {
        self.add_pdb(pdb);
    }

    /// Returns false when the budget was not known.
    pub fn remove_pdb(&mut self, namespace: &str, name: &str) -> bool {
        let Ok(i) = self
            .pdbs
            .binary_search_by(|p| p.key().cmp(&(namespace, name)))
        else {
            return false;
        };
        Arc::make_mut(&mut self.pdbs).remove(i);
        true
    }

    pub fn pdbs(&self) -> &[Arc<PdbInfo>] {
        &self.pdbs
    }

    // ---- storage: claims, volumes, classes, CSINodes, CSIDrivers, capacities ----

    /// Adds or replaces a claim. Unchanged objects (resyncs) copy nothing.
    pub fn add_pvc(&mut self, pvc: &PersistentVolumeClaim) {
        let info = PvcInfo::from_pvc(pvc);
        self.assumed_pvcs.remove(&info.key());
        self.volumes.put_pvc(info);
    }
    pub fn update_pvc(&mut self, pvc: &PersistentVolumeClaim) {
        self.add_pvc(pvc);
    }
    /// Returns false when the claim was not known.
    pub fn remove_pvc(&mut self, namespace: &str, name: &str) -> bool {
        self.assumed_pvcs
            .remove(&crate::types::volume::claim_key(namespace, name));
        self.volumes.delete_pvc(namespace, name)
    }

    pub fn add_pv(&mut self, pv: &PersistentVolume) {
        let info = PvInfo::from_pv(pv);
        self.assumed_pvs.remove(&info.name);
        self.volumes.put_pv(info);
    }
    pub fn update_pv(&mut self, pv: &PersistentVolume) {
        self.add_pv(pv);
    }
    pub fn remove_pv(&mut self, name: &str) -> bool {
        self.assumed_pvs.remove(name);
        self.volumes.delete_pv(name)
    }

    pub fn add_storage_class(&mut self, sc: &StorageClass) {
        self.volumes
            .put_storage_class(StorageClassInfo::from_storage_class(sc));
    }
    pub fn update_storage_class(&mut self, sc: &StorageClass) {
        self.add_storage_class(sc);
    }
    pub fn remove_storage_class(&mut self, name: &str) -> bool {
        self.volumes.delete_storage_class(name)
    }

    pub fn add_csi_node(&mut self, n: &CSINode) {
        self.volumes.put_csi_node(CsiNodeInfo::from_csi_node(n));
    }
    pub fn update_csi_node(&mut self, n: &CSINode) {
        self.add_csi_node(n);
    }
    pub fn remove_csi_node(&mut self, name: &str) -> bool {
        self.volumes.delete_csi_node(name)
    }

    pub fn add_csi_driver(&mut self, d: &CSIDriver) {
        self.volumes
            .put_csi_driver(CsiDriverInfo::from_csi_driver(d));
    }
    pub fn update_csi_driver(&mut self, d: &CSIDriver) {
        self.add_csi_driver(d);
    }
    pub fn remove_csi_driver(&mut self, name: &str) -> bool {
        self.volumes.delete_csi_driver(name)
    }

    pub fn add_storage_capacity(&mut self, c: &CSIStorageCapacity) {
        self.volumes
            .put_storage_capacity(CsiStorageCapacityInfo::from_csi_storage_capacity(c));
    }
    pub fn update_storage_capacity(&mut self, c: &CSIStorageCapacity) {
        self.add_storage_capacity(c);
    }
    pub fn remove_storage_capacity(&mut self, namespace: &str, name: &str) -> bool {
        self.volumes.delete_storage_capacity(namespace, name)
    }

    pub fn add_volume_attachment(&mut self, va: &VolumeAttachment) {
        self.volumes
            .put_volume_attachment(VolumeAttachmentInfo::from_volume_attachment(va));
    }
    pub fn update_volume_attachment(&mut self, va: &VolumeAttachment) {
        self.add_volume_attachment(va);
    }
    pub fn remove_volume_attachment(&mut self, va: &VolumeAttachment) -> bool {
        self.volumes.delete_volume_attachment(
            &va.spec.node_name,
            va.metadata.name.as_deref().unwrap_or_default(),
        )
    }

    /// Marks VolumeBinding's decision for a pod assumed on `node` (see
    /// [`VolumeObjects::assume_pod_volumes`]) until the informer reports the objects again or
    /// [`Self::forget_pod_volumes`] rolls it back.
    pub fn assume_pod_volumes(&mut self, decided: &PodVolumes, node: &str) {
        for b in &decided.static_bindings {
            if let Some(pv) = self.volumes.pv(&b.pv) {
                self.assumed_pvs
                    .entry(b.pv.clone())
                    .or_insert_with(|| pv.clone());
            }
        }
        for (ns, name) in &decided.dynamic_provisions {
            if let Some(pvc) = self.volumes.pvc(ns, name) {
                self.assumed_pvcs
                    .entry(crate::types::volume::claim_key(ns, name))
                    .or_insert_with(|| pvc.clone());
            }
        }
        self.volumes.assume_pod_volumes(decided, node);
    }

    /// Undoes [`Self::assume_pod_volumes`] after a failed binding: each volume and claim goes
    /// back to what the informer last reported (upstream `RevertAssumedPodVolumes`).
    pub fn forget_pod_volumes(&mut self, decided: &PodVolumes) {
        for b in &decided.static_bindings {
            if let Some(orig) = self.assumed_pvs.remove(&b.pv) {
                self.volumes.put_pv((*orig).clone());
            }
        }
        for (ns, name) in &decided.dynamic_provisions {
            let key = crate::types::volume::claim_key(ns, name);
            if let Some(orig) = self.assumed_pvcs.remove(&key) {
                self.volumes.put_pvc((*orig).clone());
            }
        }
    }

    pub fn volumes(&self) -> &VolumeObjects {
        &self.volumes
    }

    // ---- snapshot ----

    /// Brings `snapshot` up to date, replacing only nodes that changed since its generation.
    pub fn update_snapshot(&self, snapshot: &mut Snapshot) -> SnapshotUpdate {
        let mut out = SnapshotUpdate::default();
        let mut rebuild = false;
        let mut affinity_changed = false;
        for name in self
            .by_generation
            .range(snapshot.generation + 1..)
            .map(|(_, n)| n)
        {
            let info = &self.nodes[name];
            if !info.has_node() {
                continue;
            }
            out.changed_nodes += 1;
            match snapshot.position(name) {
                Some(i) => {
                    let old = &snapshot.node_infos[i];
                    affinity_changed |= old.pods_with_affinity().is_empty()
                        != info.pods_with_affinity().is_empty()
                        || old.pods_with_required_anti_affinity().is_empty()
                            != info.pods_with_required_anti_affinity().is_empty();
                    snapshot.set_node(i, info.clone());
                }
                None => rebuild = true,
            }
        }
        if let Some((&g, _)) = self.by_generation.last_key_value() {
            snapshot.generation = snapshot.generation.max(g);
        }
        // A removed node leaves the snapshot with more entries than the tree.
        if rebuild || snapshot.node_infos.len() != self.tree.num_nodes() {
            snapshot.set_nodes(
                self.tree
                    .list()
                    .into_iter()
                    .map(|n| self.nodes[n].clone())
                    .collect(),
            );
            out.rebuilt_node_list = true;
            affinity_changed = true;
        }
        if affinity_changed {
            snapshot.rebuild_affinity_lists();
        }
        snapshot.image_num_nodes = self.image_nodes.clone();
        snapshot.runtime_classes = self.runtime_classes.clone();
        if !Arc::ptr_eq(&snapshot.namespaces, &self.namespaces) {
            snapshot.namespaces = self.namespaces.clone();
        }
        snapshot.workloads = self.workloads.clone();
        snapshot.pdbs = self.pdbs.clone();
        snapshot.volumes.sync_from(&self.volumes);
        snapshot.dra_api_served = self.dra_api_served;
        snapshot.dra.sync_from(&self.dra);
        out
    }

    /// A fresh snapshot of the whole cache.
    pub fn snapshot(&self) -> Snapshot {
        let mut s = Snapshot::new();
        self.update_snapshot(&mut s);
        s
    }

    pub fn dump(&self) -> CacheDump {
        CacheDump {
            nodes: self
                .nodes
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            pods: self
                .pods
                .iter()
                .map(|(k, s)| (k.clone(), s.node.clone()))
                .collect(),
            assumed_pods: self
                .pods
                .iter()
                .filter(|(_, s)| s.assumed)
                .map(|(k, _)| k.clone())
                .collect(),
        }
    }

    // ---- internals ----

    fn ensure_entry(&mut self, name: &str) {
        if !self.nodes.contains_key(name) {
            let info = NodeInfo::new(name);
            self.by_generation.insert(info.generation, name.to_string());
            self.nodes.insert(name.to_string(), Arc::new(info));
        }
    }

    fn drop_entry(&mut self, name: &str) {
        if let Some(info) = self.nodes.remove(name) {
            self.by_generation.remove(&info.generation);
        }
    }

    /// Edits a node copy-on-write and keeps the generation index in step.
    fn mutate_node<R>(&mut self, name: &str, f: impl FnOnce(&mut NodeInfo) -> R) -> Option<R> {
        let arc = self.nodes.get_mut(name)?;
        let old_gen = arc.generation;
        let info = Arc::make_mut(arc);
        let r = f(info);
        let new_gen = info.generation;
        if new_gen != old_gen {
            self.by_generation.remove(&old_gen);
            self.by_generation.insert(new_gen, name.to_string());
        }
        Some(r)
    }

    fn attach_pod(&mut self, node: &str, pod: Arc<PodInfo>) {
        self.ensure_entry(node);
        self.mutate_node(node, |n| n.add_pod(pod));
    }

    fn detach_pod(&mut self, node: &str, key: &PodKey) {
        self.mutate_node(node, |n| n.remove_pod(key));
        if self
            .nodes
            .get(node)
            .is_some_and(|n| !n.has_node() && n.pods.is_empty())
        {
            self.drop_entry(node);
        }
    }
}

fn decrement(counts: &mut HashMap<String, usize>, img: &str) {
    if let Some(c) = counts.get_mut(img) {
        *c -= 1;
        if *c == 0 {
            counts.remove(img);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::NodeInfo;

    /// The zone tree relies on the cache adding a node only when it enters a zone: updates,
    /// zone moves and re-adds after a delete must keep every node listed once.
    #[test]
    fn each_known_node_is_in_the_zone_tree_once() {
        let node = |name: &str, zone: &str| {
            NodeInfo::test(name)
                .label("topology.kubernetes.io/zone", zone)
                .build_node()
        };
        let mut cache = Cache::new();
        cache.add_node(&node("n1", "a"));
        cache.add_node(&node("n2", "b"));
        cache.update_node(&node("n1", "a"));
        cache.add_node(&node("n1", "a"));
        cache.update_node(&node("n2", "c"));
        cache.remove_node("n1").unwrap();
        cache.add_node(&node("n1", "b"));
        assert_eq!(cache.node_count(), 2);
        let mut listed = cache.tree.list();
        listed.sort_unstable();
        assert_eq!(listed, ["n1", "n2"]);
    }
}
