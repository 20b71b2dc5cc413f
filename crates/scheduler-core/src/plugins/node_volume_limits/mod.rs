//! NodeVolumeLimits (upstream `nodevolumelimits`, the CSI limits): a node whose CSINode
//! reports an attach limit for a driver takes no more of that driver's volumes than the limit,
//! counting each volume (`driver/handle`) once however many pods on the node use it.
//!
//! Counted, as upstream: claims (bound ones through their volume, unbound ones through
//! their class's provisioner), generic ephemeral volumes, and in-tree volumes (inline or
//! behind a claim) of the plugins whose CSI migration the scheduler honours, translated to
//! their CSI driver and handle when the node's CSINode lists the plugin as migrated.
//!
//! Limits come from the CSINode, else from the node's `attachable-volumes-csi-<driver>`
//! allocatable. VolumeAttachments on the node count too (since upstream 1.32), so a volume
//! still detaching from a deleted pod keeps its slot.
//!
//! VolumeLimitScaling (upstream beta, on by default since 1.37): a pod needing a driver
//! whose CSIDriver sets `preventPodSchedulingIfMissing: true` does not go to a node whose
//! CSINode does not list that driver (or that has no CSINode yet), so a node that is still
//! starting its CSI plugin is not filled with pods it cannot mount. Clusters older than 1.35
//! never set the field, so nothing changes there.

use crate::framework::Signing;
use crate::plugins::helper::sign;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::cache::Snapshot;
use crate::framework::{ActionType, ClusterEvent, EventObjects, EventResource, QueueingHint};
use crate::framework::{
    CycleState, FilterPlugin, Plugin, PluginPoints, PreFilterPlugin, PreFilterResult, Status,
};
use crate::plugin_points;
use crate::types::volume::migrated_csi_driver;
use crate::types::{CsiNodeInfo, NodeInfo, PodClaim, PodInfo, VolumeObjects};

use super::names::NODE_VOLUME_LIMITS;

mod hints;

pub const ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED: &str = "node(s) exceed max volume count";

/// Upstream's message for a driver that opted into `preventPodSchedulingIfMissing` and is not
/// registered on the node.
pub fn driver_not_installed(driver: &str) -> String {
    format!("{driver} CSI driver is not installed on the node")
}

/// Prefix of the handle given to a not-yet-provisioned claim, so it never equals a real
/// volume handle (upstream uses a random prefix per plugin instance).
const UNBOUND_HANDLE_PREFIX: &str = "ferrosched-unbound";

/// Node allocatable names carrying a CSI driver's attach limit. (Upstream hashes driver names
/// too long for a resource name; such keys are not recognised here.)
const CSI_ATTACH_LIMIT_PREFIX: &str = "attachable-volumes-csi-";

pub struct NodeVolumeLimits;

/// Unique volume name (`driver/handle`) -> driver.
type Attachable = HashMap<String, String>;

#[derive(Clone, Debug)]
struct PreFilterState {
    volumes: VolumeObjects,
}

impl Plugin for NodeVolumeLimits {
    /// Signature for opportunistic batching (upstream `SignPod`).
    fn sign_pod(&self, pod: &PodInfo) -> Option<Signing> {
        sign::with(vec![sign::volumes(pod)])
    }
    fn name(&self) -> &'static str {
        NODE_VOLUME_LIMITS
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_filter, filter)
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            // Limits rise with CSINode changes; attachments free up when pods go away.
            ClusterEvent::new(EventResource::CSINode, ActionType::ADD | ActionType::UPDATE),
            ClusterEvent::new(EventResource::Pod, ActionType::DELETE),
            ClusterEvent::new(EventResource::PersistentVolumeClaim, ActionType::ADD),
            ClusterEvent::new(EventResource::VolumeAttachment, ActionType::DELETE),
            // A driver may drop `preventPodSchedulingIfMissing` (ferrosched's own: no hint).
            ClusterEvent::new(
                EventResource::CSIDriver,
                ActionType::ADD | ActionType::UPDATE,
            ),
        ]
    }

    fn queueing_hint(
        &self,
        pod: &PodInfo,
        _event: &ClusterEvent,
        objects: &EventObjects<'_>,
    ) -> QueueingHint {
        hints::hint(pod, objects)
    }
}

/// The ephemeral-volume ownership rule (upstream `ephemeral.VolumeIsForPod`).
pub(crate) fn ephemeral_owner_error(pod: &PodInfo, claim: &str) -> String {
    format!(
        "PVC {}/{claim} was not created for pod {}/{} (pod is not owner)",
        pod.namespace(),
        pod.namespace(),
        pod.name()
    )
}

/// Why a pod's volumes could not be collected.
enum CollectError {
    /// A claim of the new pod does not exist: it cannot run anywhere until it does.
    ClaimNotFound(String),
    Other(String),
}

impl CollectError {
    fn into_status(self) -> Status {
        match self {
            CollectError::ClaimNotFound(m) => Status::unresolvable(m),
            CollectError::Other(m) => Status::error(m),
        }
    }
}

/// Upstream `getCSIDriverInfoFromSC`: an unbound claim counts against its class's
/// provisioner (translated when it is a migrated in-tree plugin) under a handle unique to
/// the claim.
fn driver_info_from_class(
    vols: &VolumeObjects,
    pvc: &crate::types::PvcInfo,
    csi_node: Option<&CsiNodeInfo>,
) -> Option<(String, String)> {
    if pvc.storage_class.is_empty() {
        return None;
    }
    let class = vols.storage_class(&pvc.storage_class)?;
    let handle = format!("{UNBOUND_HANDLE_PREFIX}-{}/{}", pvc.namespace, pvc.name);
    let driver = match migrated_csi_driver(&class.provisioner) {
        Some(driver) => {
            if !csi_node.is_some_and(|n| n.is_migrated(&class.provisioner)) {
                return None;
            }
            driver.to_string()
        }
        None => class.provisioner.clone(),
    };
    Some((driver, handle))
}

/// Upstream `filterAttachableVolumes`: collects the attachable volumes of `pod` on a node
/// whose CSINode is `csi_node` into `out` (unique name -> driver). For the pod being
/// scheduled (`new_pod`) a missing claim is an error; for pods already on the node it is not
/// counted.
fn attachable_volumes(
    vols: &VolumeObjects,
    csi_node: Option<&CsiNodeInfo>,
    pod: &PodInfo,
    new_pod: bool,
    out: &mut Attachable,
) -> Result<(), CollectError> {
    for t in &pod.volumes.in_tree {
        if csi_node.is_some_and(|n| n.is_migrated(t.plugin)) {
            out.insert(t.unique_name(), t.driver.to_string());
        }
    }
    for PodClaim { name, ephemeral } in &pod.volumes.claims {
        if name.is_empty() {
            return Err(CollectError::Other(
                "PersistentVolumeClaim had no name".into(),
            ));
        }
        let Some(pvc) = vols.pvc(pod.namespace(), name) else {
            if new_pod {
                return Err(CollectError::ClaimNotFound(format!(
                    "looking up PVC {}/{name}: persistentvolumeclaim {name:?} not found",
                    pod.namespace()
                )));
            }
            continue;
        };
        if *ephemeral && pvc.controller_uid.as_deref() != Some(pod.uid.as_str()) {
            return Err(CollectError::Other(ephemeral_owner_error(pod, name)));
        }
        // A missing volume (deleted, or a claim pre-bound to one not yet created) falls back
        // to the class.
        let info = match pvc.volume_name.as_deref().and_then(|n| vols.pv(n)) {
            Some(pv) => pv.csi_driver_info(csi_node),
            None => driver_info_from_class(vols, pvc, csi_node),
        };
        let Some((driver, handle)) = info.filter(|(d, h)| !d.is_empty() && !h.is_empty()) else {
            continue;
        };
        out.insert(format!("{driver}/{handle}"), driver);
    }
    Ok(())
}

/// Upstream `getNodeVolumeAttachmentInfo`: the node's VolumeAttachments of CSI
/// PersistentVolumes, by unique name (`attacher/volumeHandle`) -> attacher.
fn node_attachments<'a>(vols: &'a VolumeObjects, node: &str) -> HashMap<String, &'a str> {
    let mut out = HashMap::new();
    for va in vols.volume_attachments(node) {
        if va.attacher.is_empty() {
            continue;
        }
        let Some(pv) = va.pv_name.as_deref().and_then(|n| vols.pv(n)) else {
            continue;
        };
        let Some((_, handle)) = &pv.csi else {
            continue;
        };
        out.insert(format!("{}/{handle}", va.attacher), va.attacher.as_str());
    }
    out
}

impl PreFilterPlugin for NodeVolumeLimits {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        // Only claims, ephemeral volumes and migratable in-tree volumes can count.
        if pod.volumes.claims.is_empty() && pod.volumes.in_tree.is_empty() {
            return (None, Status::skip());
        }
        state.write(PreFilterState {
            volumes: snapshot.volumes().clone(),
        });
        (None, Status::success())
    }
}

impl FilterPlugin for NodeVolumeLimits {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<PreFilterState>() else {
            return Status::error("reading NodeVolumeLimits PreFilter state: not found");
        };
        let csi_node = s.volumes.csi_node(&node.name).map(|n| &**n);
        let mut new_volumes = Attachable::new();
        if let Err(e) = attachable_volumes(&s.volumes, csi_node, pod, true, &mut new_volumes) {
            return e.into_status();
        }
        if new_volumes.is_empty() {
            return Status::success();
        }
        // VolumeLimitScaling: drivers that must be registered on the node first. Sorted so
        // the message does not depend on map order when several are missing.
        let mut missing: Vec<&str> = new_volumes
            .values()
            .map(String::as_str)
            .filter(|driver| {
                s.volumes
                    .csi_driver(driver)
                    .is_some_and(|d| d.prevent_scheduling_if_missing)
                    && !csi_node.is_some_and(|n| n.drivers.contains_key(*driver))
            })
            .collect();
        missing.sort_unstable();
        if let Some(driver) = missing.first() {
            return Status::unschedulable(driver_not_installed(driver));
        }
        // Limits the Node object still advertises as `attachable-volumes-csi-<driver>`
        // allocatable, overridden by the CSINode's.
        let mut limits: BTreeMap<&str, i64> = node
            .allocatable
            .scalar
            .iter()
            .filter_map(|(name, v)| {
                name.strip_prefix(CSI_ATTACH_LIMIT_PREFIX)
                    .map(|driver| (driver, *v))
            })
            .collect();
        if let Some(csi_node) = csi_node {
            limits.extend(csi_node.limits());
        }
        if limits.is_empty() {
            return Status::success();
        }
        let mut attached = Attachable::new();
        for p in &node.pods {
            if let Err(e) = attachable_volumes(&s.volumes, csi_node, p, false, &mut attached) {
                return e.into_status();
            }
        }
        let mut attached_count: HashMap<&str, i64> = HashMap::new();
        for driver in attached.values() {
            *attached_count.entry(driver).or_default() += 1;
        }
        // Volumes still attached (or detaching) that no pod on the node uses any more hold
        // their slot too. As upstream, a new pod's volume is only matched against the pods'
        // volumes, not against these.
        for (unique, driver) in node_attachments(&s.volumes, &node.name) {
            if !attached.contains_key(&unique) {
                *attached_count.entry(driver).or_default() += 1;
            }
        }
        let mut new_count: BTreeMap<&str, i64> = BTreeMap::new();
        for (unique, driver) in &new_volumes {
            // A volume already used on the node takes no new slot.
            if !attached.contains_key(unique) {
                *new_count.entry(driver).or_default() += 1;
            }
        }
        for (driver, count) in new_count {
            if let Some(&limit) = limits.get(driver) {
                let current = attached_count.get(driver).copied().unwrap_or(0);
                if current + count > limit {
                    return Status::unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED);
                }
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests;
