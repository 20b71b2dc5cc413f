//! Scheduling views of storage objects (PersistentVolumeClaim, PersistentVolume,
//! StorageClass, CSINode, CSIDriver, CSIStorageCapacity, VolumeAttachment) and of the volumes
//! a pod uses, plus the copy-on-write store the cache and snapshots share.
//!
//! Everything is parsed once per object change: quantities become bytes, node affinity and
//! claim selectors are compiled, and API defaults the server would apply (volumeBindingMode
//! Immediate, volumeMode Filesystem) are filled in, so plugins never parse in a cycle.
//!
//! `in_tree` translates in-tree volume sources to their CSI drivers; `store` holds
//! [`VolumeObjects`].

mod in_tree;
mod store;

use super::labels::LabelSet;
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::storage::v1 as storage;

use super::label_selector::LabelSelector;
use super::node_selector::NodeSelector;
use super::quantity::parse_k8s_quantity;
use in_tree::{inline_in_tree_source, pv_in_tree_source};

pub use in_tree::{
    AWS_EBS_PLUGIN, AZURE_DISK_PLUGIN, CINDER_PLUGIN, DiskVolume, GCE_PD_PLUGIN, InTreeVolume,
    PORTWORX_PLUGIN, migrated_csi_driver,
};
pub use store::VolumeObjects;

/// Set by the scheduler on a claim it wants provisioned on a node.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// Set by the PV controller once a claim is fully bound.
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// Deprecated class annotation; takes precedence over `storageClassName` on claims and volumes.
pub const ANN_BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
/// Provisioner name meaning "no dynamic provisioning" (local volumes).
pub const NOT_SUPPORTED_PROVISIONER: &str = "kubernetes.io/no-provisioner";
pub const READ_WRITE_ONCE_POD: &str = "ReadWriteOncePod";
/// CSINode annotation: comma-separated in-tree plugins the node runs through CSI.
pub const ANN_MIGRATED_PLUGINS: &str = "storage.alpha.kubernetes.io/migrated-plugins";

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
    /// Whether `spec.resources.requests.storage` is set at all: a claim without a request
    /// skips the storage-capacity check.
    pub has_storage_request: bool,
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
        let request = spec
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"));
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
            requested_storage: storage_bytes(request).unwrap_or(0),
            has_storage_request: request.is_some(),
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
    /// The source of an in-tree volume whose plugin can be migrated to CSI.
    pub in_tree: Option<InTreeVolume>,
    /// With `in_tree`: the required node affinity as its CSI driver's volume has it
    /// (csi-translation-lib), checked on nodes that migrated the plugin; `Err` when the
    /// volume cannot be translated.
    pub csi_node_affinity: Option<Result<Option<NodeSelector>, String>>,
    pub deleting: bool,
    pub block_mode: bool,
    pub attributes_class: String,
}

impl PvInfo {
    pub fn from_pv(pv: &k8s::PersistentVolume) -> Self {
        let meta = &pv.metadata;
        let spec = pv.spec.clone().unwrap_or_default();
        let in_tree = pv_in_tree_source(meta, &spec);
        let required = spec
            .node_affinity
            .as_ref()
            .and_then(|a| a.required.as_ref());
        let csi_node_affinity = in_tree.as_ref().map(|t| {
            crate::plugins::volume_binding::csi_translation::translate_required_affinity(
                t.plugin,
                meta.labels.as_ref().unwrap_or(&BTreeMap::new()),
                required,
                spec.aws_elastic_block_store
                    .as_ref()
                    .map(|s| s.volume_id.as_str()),
            )
            .map(|sel| sel.as_ref().map(NodeSelector::from_k8s))
        });
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
            in_tree,
            csi_node_affinity,
            deleting: meta.deletion_timestamp.is_some(),
            block_mode: spec.volume_mode.as_deref() == Some("Block"),
            attributes_class: spec
                .volume_attributes_class_name
                .clone()
                .unwrap_or_default(),
        }
    }

    /// The volume's `(driver, handle)` as attach limits count it on a node whose CSINode
    /// is `csi_node`: its CSI source, or its in-tree source when the node runs that plugin
    /// through CSI (upstream `getCSIDriverInfo`).
    pub fn csi_driver_info(&self, csi_node: Option<&CsiNodeInfo>) -> Option<(String, String)> {
        if let Some(csi) = &self.csi {
            return Some(csi.clone());
        }
        let t = self.in_tree.as_ref()?;
        csi_node
            .is_some_and(|n| n.is_migrated(t.plugin))
            .then(|| (t.driver.to_string(), t.handle.clone()))
    }

    /// Upstream `CheckNodeAffinity`: no required affinity matches every node. The node is
    /// matched by labels only (field selectors see an empty node name, as upstream).
    pub fn node_affinity_matches<L: LabelSet + ?Sized>(&self, node_labels: &L) -> bool {
        self.node_affinity
            .as_ref()
            .is_none_or(|s| s.matches_labels("", node_labels))
    }

    /// Upstream's bound-volume check (`tryTranslatePVToCSI`, then `CheckNodeAffinity`): on a
    /// node whose CSINode (`csi_node`) lists the volume's in-tree plugin as migrated, the
    /// translated affinity; elsewhere the volume's own. `Err` when translation fails.
    pub fn node_affinity_matches_on<L: LabelSet + ?Sized>(
        &self,
        node_labels: &L,
        csi_node: Option<&CsiNodeInfo>,
    ) -> Result<bool, String> {
        let migrated = self
            .in_tree
            .as_ref()
            .is_some_and(|t| csi_node.is_some_and(|n| n.is_migrated(t.plugin)));
        match (&self.csi_node_affinity, migrated) {
            (Some(translated), true) => match translated {
                Ok(sel) => Ok(sel
                    .as_ref()
                    .is_none_or(|s| s.matches_labels("", node_labels))),
                Err(e) => Err(e.clone()),
            },
            _ => Ok(self.node_affinity_matches(node_labels)),
        }
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
                let super::node_selector::LabelOperator::In(values) = &r.op else {
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
    pub fn allows_node<L: LabelSet + ?Sized>(&self, labels: &L) -> bool {
        if self.allowed_topologies.is_empty() {
            return true;
        }
        self.allowed_topologies.iter().any(|term| {
            !term.is_empty()
                && term.iter().all(|(k, vals)| {
                    !vals.is_empty() && labels.label(k).is_some_and(|v| vals.iter().any(|x| x == v))
                })
        })
    }

    pub fn wait_for_first_consumer(&self) -> bool {
        self.binding_mode == VolumeBindingMode::WaitForFirstConsumer
    }
}

/// Scheduling view of a CSINode: driver -> attachable volume limit (`None`: no limit), and
/// the in-tree plugins the node has migrated to CSI.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsiNodeInfo {
    pub name: String,
    pub drivers: BTreeMap<String, Option<i64>>,
    pub migrated_plugins: BTreeSet<String>,
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
            migrated_plugins: n
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANN_MIGRATED_PLUGINS))
                .map(|v| {
                    v.split(',')
                        .filter(|p| !p.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// Upstream `isCSIMigrationOn`: the plugin is one whose migration the scheduler honours
    /// and the node lists it as migrated.
    pub fn is_migrated(&self, plugin: &str) -> bool {
        migrated_csi_driver(plugin).is_some() && self.migrated_plugins.contains(plugin)
    }

    /// Drivers that report an attach limit.
    pub fn limits(&self) -> impl Iterator<Item = (&str, i64)> {
        self.drivers
            .iter()
            .filter_map(|(d, c)| c.map(|c| (d.as_str(), c)))
    }
}

/// Scheduling view of a CSIDriver: whether it opts into storage-capacity tracking and
/// whether pods needing it must stay off nodes that have not registered it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsiDriverInfo {
    pub name: String,
    /// `spec.storageCapacity` (unset means false).
    pub storage_capacity: bool,
    /// `spec.preventPodSchedulingIfMissing` (1.35+, unset means false; an older server never
    /// sets it): NodeVolumeLimits refuses nodes whose CSINode does not list the driver.
    pub prevent_scheduling_if_missing: bool,
}

impl CsiDriverInfo {
    pub fn from_csi_driver(d: &storage::CSIDriver) -> Self {
        CsiDriverInfo {
            name: d.metadata.name.clone().unwrap_or_default(),
            storage_capacity: d.spec.storage_capacity.unwrap_or(false),
            prevent_scheduling_if_missing: d
                .spec
                .prevent_pod_scheduling_if_missing
                .unwrap_or(false),
        }
    }
}

/// Scheduling view of a CSIStorageCapacity: free space of one class in one topology segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiStorageCapacityInfo {
    pub namespace: String,
    pub name: String,
    pub storage_class: String,
    /// Compiled `nodeTopology`; absent or invalid selects no node.
    pub node_topology: LabelSelector,
    /// `capacity` in bytes.
    pub capacity: Option<i64>,
    /// `maximumVolumeSize` in bytes.
    pub maximum_volume_size: Option<i64>,
}

impl CsiStorageCapacityInfo {
    pub fn from_csi_storage_capacity(c: &storage::CSIStorageCapacity) -> Self {
        CsiStorageCapacityInfo {
            namespace: c.metadata.namespace.clone().unwrap_or_default(),
            name: c.metadata.name.clone().unwrap_or_default(),
            storage_class: c.storage_class_name.clone(),
            node_topology: LabelSelector::compile(c.node_topology.as_ref(), &mut Vec::new()),
            capacity: storage_bytes(c.capacity.as_ref()),
            maximum_volume_size: storage_bytes(c.maximum_volume_size.as_ref()),
        }
    }

    pub fn key(&self) -> String {
        claim_key(&self.namespace, &self.name)
    }

    /// The largest volume it can hold: `maximumVolumeSize` when set (more precise), else
    /// `capacity`.
    pub fn volume_limit(&self) -> Option<i64> {
        self.maximum_volume_size.or(self.capacity)
    }

    /// Upstream `capacitySufficient`.
    pub fn fits(&self, bytes: i64) -> bool {
        self.volume_limit().is_some_and(|l| l >= bytes)
    }

    /// Upstream `nodeHasAccess`: only matching by node labels.
    pub fn node_has_access<L: LabelSet + ?Sized>(&self, labels: &L) -> bool {
        self.node_topology.matches(labels)
    }
}

/// Scheduling view of a VolumeAttachment: a PV a CSI driver attached (or is attaching or
/// detaching) on a node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeAttachmentInfo {
    pub name: String,
    /// `spec.attacher`: the CSI driver.
    pub attacher: String,
    pub node_name: String,
    /// `spec.source.persistentVolumeName` (inline volumes have none).
    pub pv_name: Option<String>,
}

impl VolumeAttachmentInfo {
    pub fn from_volume_attachment(va: &storage::VolumeAttachment) -> Self {
        VolumeAttachmentInfo {
            name: va.metadata.name.clone().unwrap_or_default(),
            attacher: va.spec.attacher.clone(),
            node_name: va.spec.node_name.clone(),
            pv_name: va.spec.source.persistent_volume_name.clone(),
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
    /// Inline in-tree volumes whose plugin can be migrated to CSI (attach limits).
    pub in_tree: Vec<InTreeVolume>,
}

impl super::rare::RareEmpty for PodVolumeSources {
    fn empty() -> &'static Self {
        static EMPTY: PodVolumeSources = PodVolumeSources {
            claims: Vec::new(),
            disks: Vec::new(),
            in_tree: Vec::new(),
        };
        &EMPTY
    }
    fn is_empty_value(&self) -> bool {
        self.claims.is_empty() && self.disks.is_empty() && self.in_tree.is_empty()
    }
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
            } else if let Some(t) = inline_in_tree_source(v) {
                out.in_tree.push(t);
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
        self.claims.is_empty() && self.disks.is_empty() && self.in_tree.is_empty()
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
    fn bound_in_tree_volume_counts_as_csi_only_where_migrated() {
        let pv: k8s::PersistentVolume = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pv"},
            "spec": {"awsElasticBlockStore": {"volumeID": "aws://z/vol-1"}}
        }))
        .unwrap();
        let pv = PvInfo::from_pv(&pv);
        let csi_node: storage::CSINode = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n", "annotations": {
                ANN_MIGRATED_PLUGINS: "kubernetes.io/gce-pd,kubernetes.io/aws-ebs"}},
            "spec": {"drivers": []}
        }))
        .unwrap();
        let migrated = CsiNodeInfo::from_csi_node(&csi_node);
        assert_eq!(
            pv.csi_driver_info(Some(&migrated)),
            Some(("ebs.csi.aws.com".to_string(), "vol-1".to_string()))
        );
        assert_eq!(pv.csi_driver_info(Some(&CsiNodeInfo::default())), None);
        assert_eq!(pv.csi_driver_info(None), None);
    }
}
