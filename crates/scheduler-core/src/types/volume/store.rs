//! The copy-on-write store of storage objects the cache and snapshots share.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::{
    ClaimRef, CsiDriverInfo, CsiNodeInfo, CsiStorageCapacityInfo, PodVolumes, PvInfo, PvcInfo,
    StorageClassInfo, VolumeAttachmentInfo, claim_key,
};

/// Claims, volumes, classes, CSINodes, CSIDrivers, CSIStorageCapacities and
/// VolumeAttachments, each map copy-on-write: the cache edits its own
/// copy with `Arc::make_mut` and snapshots share the maps until one changes.
#[derive(Debug, Clone, Default)]
pub struct VolumeObjects {
    /// Keyed by `namespace/name`.
    pub(crate) pvcs: Arc<HashMap<String, Arc<PvcInfo>>>,
    /// Sorted by name, so matching a claim to the smallest volume breaks ties the same way
    /// every time.
    pub(crate) pvs: Arc<BTreeMap<String, Arc<PvInfo>>>,
    pub(crate) classes: Arc<HashMap<String, Arc<StorageClassInfo>>>,
    pub(crate) csi_nodes: Arc<HashMap<String, Arc<CsiNodeInfo>>>,
    pub(crate) csi_drivers: Arc<HashMap<String, Arc<CsiDriverInfo>>>,
    /// Keyed by `namespace/name`.
    pub(crate) capacities: Arc<BTreeMap<String, Arc<CsiStorageCapacityInfo>>>,
    /// Node name -> its VolumeAttachments by name (attach limits look them up per node).
    pub(crate) attachments: Arc<HashMap<String, BTreeMap<String, Arc<VolumeAttachmentInfo>>>>,
}

impl VolumeObjects {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn pvc(&self, namespace: &str, name: &str) -> Option<&Arc<PvcInfo>> {
        self.pvcs.get(&claim_key(namespace, name))
    }
    pub fn pv(&self, name: &str) -> Option<&Arc<PvInfo>> {
        self.pvs.get(name)
    }
    pub fn storage_class(&self, name: &str) -> Option<&Arc<StorageClassInfo>> {
        self.classes.get(name)
    }
    pub fn csi_node(&self, name: &str) -> Option<&Arc<CsiNodeInfo>> {
        self.csi_nodes.get(name)
    }
    pub fn csi_driver(&self, name: &str) -> Option<&Arc<CsiDriverInfo>> {
        self.csi_drivers.get(name)
    }
    /// Every CSIStorageCapacity, by namespace and name.
    pub fn storage_capacities(&self) -> impl Iterator<Item = &Arc<CsiStorageCapacityInfo>> {
        self.capacities.values()
    }
    /// The VolumeAttachments of one node, by name.
    pub fn volume_attachments(
        &self,
        node: &str,
    ) -> impl Iterator<Item = &Arc<VolumeAttachmentInfo>> {
        self.attachments
            .get(node)
            .into_iter()
            .flat_map(|m| m.values())
    }
    /// Every volume, by name.
    pub fn pvs(&self) -> impl Iterator<Item = &Arc<PvInfo>> {
        self.pvs.values()
    }

    /// Inserts or replaces; returns false (and copies nothing) when it was unchanged.
    pub fn put_pvc(&mut self, info: PvcInfo) -> bool {
        let key = info.key();
        if self.pvcs.get(&key).is_some_and(|o| **o == info) {
            return false;
        }
        Arc::make_mut(&mut self.pvcs).insert(key, Arc::new(info));
        true
    }
    pub fn delete_pvc(&mut self, namespace: &str, name: &str) -> bool {
        let key = claim_key(namespace, name);
        if !self.pvcs.contains_key(&key) {
            return false;
        }
        Arc::make_mut(&mut self.pvcs).remove(&key);
        true
    }
    pub fn put_pv(&mut self, info: PvInfo) -> bool {
        if self.pvs.get(&info.name).is_some_and(|o| **o == info) {
            return false;
        }
        Arc::make_mut(&mut self.pvs).insert(info.name.clone(), Arc::new(info));
        true
    }
    pub fn delete_pv(&mut self, name: &str) -> bool {
        if !self.pvs.contains_key(name) {
            return false;
        }
        Arc::make_mut(&mut self.pvs).remove(name);
        true
    }
    pub fn put_storage_class(&mut self, info: StorageClassInfo) -> bool {
        if self.classes.get(&info.name).is_some_and(|o| **o == info) {
            return false;
        }
        Arc::make_mut(&mut self.classes).insert(info.name.clone(), Arc::new(info));
        true
    }
    pub fn delete_storage_class(&mut self, name: &str) -> bool {
        if !self.classes.contains_key(name) {
            return false;
        }
        Arc::make_mut(&mut self.classes).remove(name);
        true
    }
    pub fn put_csi_node(&mut self, info: CsiNodeInfo) -> bool {
        if self.csi_nodes.get(&info.name).is_some_and(|o| **o == info) {
            return false;
        }
        Arc::make_mut(&mut self.csi_nodes).insert(info.name.clone(), Arc::new(info));
        true
    }
    pub fn delete_csi_node(&mut self, name: &str) -> bool {
        if !self.csi_nodes.contains_key(name) {
            return false;
        }
        Arc::make_mut(&mut self.csi_nodes).remove(name);
        true
    }

    pub fn put_csi_driver(&mut self, info: CsiDriverInfo) -> bool {
        if self
            .csi_drivers
            .get(&info.name)
            .is_some_and(|o| **o == info)
        {
            return false;
        }
        Arc::make_mut(&mut self.csi_drivers).insert(info.name.clone(), Arc::new(info));
        true
    }
    pub fn delete_csi_driver(&mut self, name: &str) -> bool {
        if !self.csi_drivers.contains_key(name) {
            return false;
        }
        Arc::make_mut(&mut self.csi_drivers).remove(name);
        true
    }
    pub fn put_storage_capacity(&mut self, info: CsiStorageCapacityInfo) -> bool {
        let key = info.key();
        if self.capacities.get(&key).is_some_and(|o| **o == info) {
            return false;
        }
        Arc::make_mut(&mut self.capacities).insert(key, Arc::new(info));
        true
    }
    pub fn delete_storage_capacity(&mut self, namespace: &str, name: &str) -> bool {
        let key = claim_key(namespace, name);
        if !self.capacities.contains_key(&key) {
            return false;
        }
        Arc::make_mut(&mut self.capacities).remove(&key);
        true
    }

    /// Inserts or replaces (by name; `spec.nodeName` is immutable).
    pub fn put_volume_attachment(&mut self, info: VolumeAttachmentInfo) -> bool {
        let same = self
            .attachments
            .get(&info.node_name)
            .and_then(|m| m.get(&info.name))
            .is_some_and(|o| **o == info);
        if same {
            return false;
        }
        Arc::make_mut(&mut self.attachments)
            .entry(info.node_name.clone())
            .or_default()
            .insert(info.name.clone(), Arc::new(info));
        true
    }
    pub fn delete_volume_attachment(&mut self, node: &str, name: &str) -> bool {
        if !self
            .attachments
            .get(node)
            .is_some_and(|m| m.contains_key(name))
        {
            return false;
        }
        let all = Arc::make_mut(&mut self.attachments);
        if let Some(m) = all.get_mut(node) {
            m.remove(name);
            if m.is_empty() {
                all.remove(node);
            }
        }
        true
    }

    /// Records a decision as if the API updates were done (upstream `AssumePodVolumes`):
    /// each chosen volume gets a claimRef to its claim, each claim to provision gets the
    /// selected-node annotation. Later cycles then neither reuse the volume nor move the claim.
    pub fn assume_pod_volumes(&mut self, decided: &PodVolumes, node: &str) {
        for b in &decided.static_bindings {
            let uid = self
                .pvc(&b.pvc_namespace, &b.pvc_name)
                .map(|c| c.uid.clone())
                .unwrap_or_default();
            if let Some(pv) = self.pv(&b.pv) {
                let mut pv = (**pv).clone();
                pv.claim_ref = Some(ClaimRef {
                    namespace: b.pvc_namespace.clone(),
                    name: b.pvc_name.clone(),
                    uid,
                });
                self.put_pv(pv);
            }
        }
        for (ns, name) in &decided.dynamic_provisions {
            if let Some(pvc) = self.pvc(ns, name) {
                let mut pvc = (**pvc).clone();
                pvc.selected_node = Some(node.to_string());
                self.put_pvc(pvc);
            }
        }
    }

    /// Shares every map of `other` that differs from ours (pointer comparison only).
    pub(crate) fn sync_from(&mut self, other: &VolumeObjects) {
        if !Arc::ptr_eq(&self.pvcs, &other.pvcs) {
            self.pvcs = other.pvcs.clone();
        }
        if !Arc::ptr_eq(&self.pvs, &other.pvs) {
            self.pvs = other.pvs.clone();
        }
        if !Arc::ptr_eq(&self.classes, &other.classes) {
            self.classes = other.classes.clone();
        }
        if !Arc::ptr_eq(&self.csi_nodes, &other.csi_nodes) {
            self.csi_nodes = other.csi_nodes.clone();
        }
        if !Arc::ptr_eq(&self.csi_drivers, &other.csi_drivers) {
            self.csi_drivers = other.csi_drivers.clone();
        }
        if !Arc::ptr_eq(&self.capacities, &other.capacities) {
            self.capacities = other.capacities.clone();
        }
        if !Arc::ptr_eq(&self.attachments, &other.attachments) {
            self.attachments = other.attachments.clone();
        }
    }

    /// Whether every map is shared with `other` (nothing to copy).
    pub fn shares_all(&self, other: &VolumeObjects) -> bool {
        Arc::ptr_eq(&self.pvcs, &other.pvcs)
            && Arc::ptr_eq(&self.pvs, &other.pvs)
            && Arc::ptr_eq(&self.classes, &other.classes)
            && Arc::ptr_eq(&self.csi_nodes, &other.csi_nodes)
            && Arc::ptr_eq(&self.csi_drivers, &other.csi_drivers)
            && Arc::ptr_eq(&self.capacities, &other.capacities)
            && Arc::ptr_eq(&self.attachments, &other.attachments)
    }
}
