//! Scheduling views of storage objects (PersistentVolumeClaim, PersistentVolume,
//! StorageClass, CSINode) and of the volumes a pod uses, plus the copy-on-write store the
//! cache and snapshots share.
//!
//! Everything is parsed once per object change: quantities become bytes, node affinity and
//! claim selectors are compiled, and API defaults the server would apply (volumeBindingMode
//! Immediate, volumeMode Filesystem) are filled in, so plugins never parse in a cycle.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::storage::v1 as storage;

use super::label_selector::LabelSelector;
use super::quantity::parse_k8s_quantity;
use super::selector::NodeSelector;

/// Set by the scheduler on a claim it wants provisioned on a node.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// Set by the PV controller once a claim is fully bound.
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// Deprecated class annotation; takes precedence over `storageClassName` on claims and volumes.
pub const ANN_BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
/// Provisioner name meaning "no dynamic provisioning" (local volumes).
pub const NOT_SUPPORTED_PROVISIONER: &str = "kubernetes.io/no-provisioner";
pub const READ_WRITE_ONCE_POD: &str = "ReadWriteOncePod";

/// `namespace/name` of a claim.
pub fn claim_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

fn storage_bytes(
    q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
) -> Option<i64> {
    q.and_then(|q| parse_k8s_quantity(q).ok())
        .map(|q| q.value())
}

fn class_of(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    spec: Option<&String>,
) -> String {
    if let Some(c) = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANN_BETA_STORAGE_CLASS))
    {
        return c.clone();
    }
    spec.cloned().unwrap_or_default()
}

/// Scheduling view of a PersistentVolumeClaim.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PvcInfo {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// `status.phase`: Pending, Bound or Lost ("" when unset).
    pub phase: String,
    /// `spec.volumeName`, `None` when empty.
    pub volume_name: Option<String>,
    /// The beta annotation if set, else `spec.storageClassName`, else "".
    pub storage_class: String,
    pub access_modes: Vec<String>,
    /// `spec.resources.requests.storage` in bytes (0 when absent).
    pub requested_storage: i64,
    /// Compiled `spec.selector`; `Err` holds the reason a selector is invalid.
    pub selector: Option<Result<LabelSelector, String>>,
    /// `volume.kubernetes.io/selected-node` annotation.
    pub selected_node: Option<String>,
    /// `pv.kubernetes.io/bind-completed` annotation present.
    pub bind_completed: bool,
    pub deleting: bool,
    /// UID of the controlling owner (generic ephemeral volumes are owned by their pod).
    pub controller_uid: Option<String>,
    /// `spec.volumeMode == Block` (default Filesystem).
    pub block_mode: bool,
    /// `spec.volumeAttributesClassName` ("" when unset).
    pub attributes_class: String,
}

impl PvcInfo {
    pub fn from_pvc(pvc: &k8s::PersistentVolumeClaim) -> Self {
        let meta = &pvc.metadata;
        let spec = pvc.spec.clone().unwrap_or_default();
        let ann = meta.annotations.as_ref();
        PvcInfo {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            phase: pvc
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default(),
            volume_name: spec.volume_name.clone().filter(|v| !v.is_empty()),
            storage_class: class_of(meta, spec.storage_class_name.as_ref()),
            access_modes: spec.access_modes.clone().unwrap_or_default(),
            requested_storage: storage_bytes(
                spec.resources
                    .as_ref()
                    .and_then(|r| r.requests.as_ref())
                    .and_then(|r| r.get("storage")),
            )
            .unwrap_or(0),
            selector: spec
                .selector
                .as_ref()
                .map(|s| LabelSelector::from_k8s(Some(s))),
            selected_node: ann.and_then(|a| a.get(ANN_SELECTED_NODE)).cloned(),
            bind_completed: ann.is_some_and(|a| a.contains_key(ANN_BIND_COMPLETED)),
            deleting: meta.deletion_timestamp.is_some(),
            controller_uid: meta
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true))
                .map(|o| o.uid.clone()),
            block_mode: spec.volume_mode.as_deref() == Some("Block"),
            attributes_class: spec
                .volume_attributes_class_name
                .clone()
                .unwrap_or_default(),
        }
    }

    pub fn key(&self) -> String {
        claim_key(&self.namespace, &self.name)
    }

    pub fn has_access_mode(&self, mode: &str) -> bool {
        self.access_modes.iter().any(|m| m == mode)
    }
}

/// `spec.claimRef` of a volume.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// Scheduling view of a PersistentVolume.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PvInfo {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// `status.phase`: Pending, Available, Bound, Released, Failed ("" when unset).
    pub phase: String,
    pub claim_ref: Option<ClaimRef>,
    pub storage_class: String,
    /// `spec.capacity.storage` in bytes (0 when absent).
    pub capacity: i64,
    pub access_modes: Vec<String>,
    /// Compiled `spec.nodeAffinity.required`.
    pub node_affinity: Option<NodeSelector>,
    /// `(driver, volumeHandle)` of a CSI volume.
    pub csi: Option<(String, String)>,
    pub deleting: bool,
    pub block_mode: bool,
    pub attributes_class: String,
}

impl PvInfo {
    pub fn from_pv(pv: &k8s::PersistentVolume) -> Self {
        let meta = &pv.metadata;
        let spec = pv.spec.clone().unwrap_or_default();
        PvInfo {
            name: meta.name.clone().unwrap_or_default(),
            labels: meta.labels.clone().unwrap_or_default(),
            phase: pv
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default(),
            claim_ref: spec.claim_ref.as_ref().map(|c| ClaimRef {
                namespace: c.namespace.clone().unwrap_or_default(),
                name: c.name.clone().unwrap_or_default(),
                uid: c.uid.clone().unwrap_or_default(),
            }),
            storage_class: class_of(meta, spec.storage_class_name.as_ref()),
            capacity: storage_bytes(spec.capacity.as_ref().and_then(|c| c.get("storage")))
                .unwrap_or(0),
            access_modes: spec.access_modes.clone().unwrap_or_default(),
            node_affinity: spec
                .node_affinity
                .as_ref()
                .and_then(|a| a.required.as_ref())
                .map(NodeSelector::from_k8s),
            csi: spec
                .csi
                .as_ref()
                .map(|c| (c.driver.clone(), c.volume_handle.clone())),
            deleting: meta.deletion_timestamp.is_some(),
            block_mode: spec.volume_mode.as_deref() == Some("Block"),
            attributes_class: spec
                .volume_attributes_class_name
                .clone()
                .unwrap_or_default(),
        }
    }

    /// Upstream `CheckNodeAffinity`: no required affinity matches every node. The node is
    /// matched by labels only (field selectors see an empty node name, as upstream).
    pub fn node_affinity_matches(&self, node_labels: &BTreeMap<String, String>) -> bool {
        self.node_affinity
            .as_ref()
            .is_none_or(|s| s.matches("", node_labels))
    }

    /// Upstream `IsVolumeBoundToClaim`.
    pub fn is_bound_to(&self, pvc: &PvcInfo) -> bool {
        self.claim_ref.as_ref().is_some_and(|c| {
            c.name == pvc.name
                && c.namespace == pvc.namespace
                && (c.uid.is_empty() || c.uid == pvc.uid)
        })
    }

    /// Node names a local volume is pinned to through `kubernetes.io/hostname In (...)`
    /// (upstream `GetLocalPersistentVolumeNodeNames`); empty when it is not pinned.
    pub fn local_node_names(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let Some(sel) = &self.node_affinity else {
            return out;
        };
        for term in &sel.terms {
            let mut nodes: Option<Vec<String>> = None;
            for r in &term.labels {
                if r.key != "kubernetes.io/hostname" {
                    continue;
                }
                let super::selector::LabelOperator::In(values) = &r.op else {
                    continue;
                };
                nodes = Some(match nodes {
                    None => values.clone(),
                    Some(prev) => prev.into_iter().filter(|v| values.contains(v)).collect(),
                });
            }
            for n in nodes.into_iter().flatten() {
                if !out.contains(&n) {
                    out.push(n);
                }
            }
        }
        out.sort();
        out
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum VolumeBindingMode {
    /// The API default.
    #[default]
    Immediate,
    WaitForFirstConsumer,
}

/// One `allowedTopologies` term: every `(key, values)` must match (`key In values`).
pub type TopologyTerm = Vec<(String, Vec<String>)>;

/// Scheduling view of a StorageClass.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StorageClassInfo {
    pub name: String,
    pub provisioner: String,
    pub binding_mode: VolumeBindingMode,
    pub allowed_topologies: Vec<TopologyTerm>,
}

impl StorageClassInfo {
    pub fn from_storage_class(sc: &storage::StorageClass) -> Self {
        StorageClassInfo {
            name: sc.metadata.name.clone().unwrap_or_default(),
            provisioner: sc.provisioner.clone(),
            binding_mode: match sc.volume_binding_mode.as_deref() {
                Some("WaitForFirstConsumer") => VolumeBindingMode::WaitForFirstConsumer,
                _ => VolumeBindingMode::Immediate,
            },
            allowed_topologies: sc
                .allowed_topologies
                .iter()
                .flatten()
                .map(|t| {
                    t.match_label_expressions
                        .iter()
                        .flatten()
                        .map(|e| (e.key.clone(), e.values.clone()))
                        .collect()
                })
                .collect(),
        }
    }

    /// Upstream `MatchTopologySelectorTerms`: no terms allow every node; an empty term or
    /// one with an empty value list matches nothing.
    pub fn allows_node(&self, labels: &BTreeMap<String, String>) -> bool {
        if self.allowed_topologies.is_empty() {
            return true;
        }
        self.allowed_topologies.iter().any(|term| {
            !term.is_empty()
                && term.iter().all(|(k, vals)| {
                    !vals.is_empty() && labels.get(k).is_some_and(|v| vals.contains(v))
                })
        })
    }

    pub fn wait_for_first_consumer(&self) -> bool {
        self.binding_mode == VolumeBindingMode::WaitForFirstConsumer
    }
}

/// Scheduling view of a CSINode: driver -> attachable volume limit (`None`: no limit).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsiNodeInfo {
    pub name: String,
    pub drivers: BTreeMap<String, Option<i64>>,
}

impl CsiNodeInfo {
    pub fn from_csi_node(n: &storage::CSINode) -> Self {
        CsiNodeInfo {
            name: n.metadata.name.clone().unwrap_or_default(),
            drivers: n
                .spec
                .drivers
                .iter()
                .map(|d| {
                    (
                        d.name.clone(),
                        d.allocatable.as_ref().and_then(|a| a.count).map(i64::from),
                    )
                })
                .collect(),
        }
    }

    /// Drivers that report an attach limit.
    pub fn limits(&self) -> impl Iterator<Item = (&str, i64)> {
        self.drivers
            .iter()
            .filter_map(|(d, c)| c.map(|c| (d.as_str(), c)))
    }
}

/// An in-tree volume that VolumeRestrictions checks for disk conflicts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiskVolume {
    GcePd {
        name: String,
        read_only: bool,
    },
    AwsEbs {
        volume_id: String,
    },
    Iscsi {
        iqn: String,
        read_only: bool,
    },
    Rbd {
        monitors: Vec<String>,
        pool: String,
        image: String,
        read_only: bool,
    },
}

impl DiskVolume {
    /// Upstream `isVolumeConflict` for one pair of volumes.
    pub fn conflicts_with(&self, other: &DiskVolume) -> bool {
        use DiskVolume::*;
        match (self, other) {
            (
                GcePd { name, read_only },
                GcePd {
                    name: n2,
                    read_only: r2,
                },
            ) => name == n2 && !(*read_only && *r2),
            (AwsEbs { volume_id }, AwsEbs { volume_id: v2 }) => volume_id == v2,
            (
                Iscsi { iqn, read_only },
                Iscsi {
                    iqn: i2,
                    read_only: r2,
                },
            ) => iqn == i2 && !(*read_only && *r2),
            (
                Rbd {
                    monitors,
                    pool,
                    image,
                    read_only,
                },
                Rbd {
                    monitors: m2,
                    pool: p2,
                    image: i2,
                    read_only: r2,
                },
            ) => {
                monitors.iter().any(|m| m2.contains(m))
                    && pool == p2
                    && image == i2
                    && !(*read_only && *r2)
            }
            _ => false,
        }
    }
}

/// A claim a pod uses: a `persistentVolumeClaim` volume or a generic ephemeral volume
/// (whose claim is named `<pod>-<volume>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodClaim {
    pub name: String,
    pub ephemeral: bool,
}

/// The volumes of a pod the volume plugins look at, in spec order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodVolumeSources {
    pub claims: Vec<PodClaim>,
    pub disks: Vec<DiskVolume>,
}

impl PodVolumeSources {
    pub fn from_pod(pod: &k8s::Pod) -> Self {
        let mut out = PodVolumeSources::default();
        let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
        let Some(volumes) = pod.spec.as_ref().and_then(|s| s.volumes.as_ref()) else {
            return out;
        };
        for v in volumes {
            if let Some(c) = &v.persistent_volume_claim {
                out.claims.push(PodClaim {
                    name: c.claim_name.clone(),
                    ephemeral: false,
                });
            } else if v.ephemeral.is_some() {
                out.claims.push(PodClaim {
                    name: format!("{pod_name}-{}", v.name),
                    ephemeral: true,
                });
            }
            if let Some(d) = &v.gce_persistent_disk {
                out.disks.push(DiskVolume::GcePd {
                    name: d.pd_name.clone(),
                    read_only: d.read_only.unwrap_or(false),
                });
            }
            if let Some(d) = &v.aws_elastic_block_store {
                out.disks.push(DiskVolume::AwsEbs {
                    volume_id: d.volume_id.clone(),
                });
            }
            if let Some(d) = &v.iscsi {
                out.disks.push(DiskVolume::Iscsi {
                    iqn: d.iqn.clone(),
                    read_only: d.read_only.unwrap_or(false),
                });
            }
            if let Some(d) = &v.rbd {
                out.disks.push(DiskVolume::Rbd {
                    monitors: d.monitors.clone(),
                    pool: d.pool.clone().unwrap_or_else(|| "rbd".to_string()),
                    image: d.image.clone(),
                    read_only: d.read_only.unwrap_or(false),
                });
            }
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.claims.is_empty() && self.disks.is_empty()
    }
}

/// A claim to bind to an existing volume, decided by VolumeBinding for the chosen node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticBinding {
    pub pv: String,
    pub pvc_namespace: String,
    pub pvc_name: String,
    /// The volume's class and sizes, for storage-capacity scoring.
    pub storage_class: String,
    pub requested: i64,
    pub capacity: i64,
}

/// What VolumeBinding decided for one node (upstream `PodVolumes`): volumes to bind to
/// claims, and claims to provision there (they get the selected-node annotation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodVolumes {
    pub static_bindings: Vec<StaticBinding>,
    /// `(namespace, name)` of claims to provision dynamically on the node.
    pub dynamic_provisions: Vec<(String, String)>,
}

impl PodVolumes {
    pub fn is_empty(&self) -> bool {
        self.static_bindings.is_empty() && self.dynamic_provisions.is_empty()
    }
}

/// Claims, volumes, classes and CSINodes, each map copy-on-write: the cache edits its own
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
    }

    /// Whether every map is shared with `other` (nothing to copy).
    pub fn shares_all(&self, other: &VolumeObjects) -> bool {
        Arc::ptr_eq(&self.pvcs, &other.pvcs)
            && Arc::ptr_eq(&self.pvs, &other.pvs)
            && Arc::ptr_eq(&self.classes, &other.classes)
            && Arc::ptr_eq(&self.csi_nodes, &other.csi_nodes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_node_names_follow_hostname_in_terms() {
        let pv: k8s::PersistentVolume = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pv"},
            "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["a", "b"]},
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["b", "c"]}]},
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z"]}]},
                {"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["d"]}]}
            ]}}}
        }))
        .unwrap();
        assert_eq!(PvInfo::from_pv(&pv).local_node_names(), vec!["b", "d"]);
    }

    #[test]
    fn allowed_topologies_match_like_upstream() {
        let mut sc = StorageClassInfo::default();
        let labels: BTreeMap<String, String> = [("zone".to_string(), "a".to_string())]
            .into_iter()
            .collect();
        assert!(sc.allows_node(&labels));
        sc.allowed_topologies = vec![vec![("zone".into(), vec!["b".into()])]];
        assert!(!sc.allows_node(&labels));
        sc.allowed_topologies
            .push(vec![("zone".into(), vec!["a".into()])]);
        assert!(sc.allows_node(&labels));
        sc.allowed_topologies = vec![vec![]];
        assert!(!sc.allows_node(&labels));
    }

    #[test]
    fn disk_conflicts_need_a_writer() {
        let ro = DiskVolume::GcePd {
            name: "d".into(),
            read_only: true,
        };
        let rw = DiskVolume::GcePd {
            name: "d".into(),
            read_only: false,
        };
        assert!(!ro.conflicts_with(&ro));
        assert!(rw.conflicts_with(&ro));
        let ebs = DiskVolume::AwsEbs {
            volume_id: "v".into(),
        };
        assert!(ebs.conflicts_with(&ebs));
        assert!(!ebs.conflicts_with(&rw));
    }
}
