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
use crate::framework::{ActionType, ClusterEvent, EventResource};
use crate::framework::{
    CycleState, FilterPlugin, Plugin, PluginPoints, PreFilterPlugin, PreFilterResult, Status,
};
use crate::plugin_points;
use crate::types::volume::migrated_csi_driver;
use crate::types::{CsiNodeInfo, NodeInfo, PodClaim, PodInfo, VolumeObjects};

use super::names::NODE_VOLUME_LIMITS;

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
            // A driver may drop `preventPodSchedulingIfMissing`.
            ClusterEvent::new(
                EventResource::CSIDriver,
                ActionType::ADD | ActionType::UPDATE,
            ),
        ]
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
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::types::VolumeAttachmentInfo;
    use crate::types::testing::volumes::{csi_node, csi_node_migrated, pv, pvc, sc, store};
    use crate::types::volume::{AWS_EBS_PLUGIN, GCE_PD_PLUGIN};

    const DRIVER: &str = "ebs.csi.aws.com";

    fn vols() -> VolumeObjects {
        let mut v = store(
            vec![
                pvc("ns", "c1").bound("pv1").build(),
                pvc("ns", "c2").bound("pv2").build(),
                pvc("ns", "c3").bound("pv3").build(),
                pvc("ns", "late").class("wffc").build(),
            ],
            vec![
                pv("pv1", "", "1Gi").csi(DRIVER, "h1").build(),
                pv("pv2", "", "1Gi").csi(DRIVER, "h2").build(),
                pv("pv3", "", "1Gi").csi("other.csi", "h3").build(),
            ],
            vec![sc("wffc", DRIVER, true, &[])],
        );
        v.put_csi_node(csi_node(
            "limited",
            &[(DRIVER, Some(2)), ("other.csi", None)],
        ));
        v.put_csi_node(csi_node("roomy", &[(DRIVER, Some(3))]));
        v
    }

    fn node(name: &str, pods: &[PodInfo]) -> NodeInfo {
        let mut n = NodeInfo::test(name).build();
        for p in pods {
            n.add_pod(Arc::new(p.with_node_name(name)));
        }
        n
    }

    fn run(pod: &PodInfo, nodes: Vec<NodeInfo>) -> Vec<Status> {
        let snap = Snapshot::from_node_infos(nodes).with_volumes(vols());
        crate::plugins::helper::testing::pre_filter_then_filter(&NodeVolumeLimits, pod, &snap)
    }

    #[test]
    fn attach_limit_reached_rejects_only_that_node() {
        let existing = PodInfo::test("ns", "e").pvc("c1").pvc("c2").build();
        let nodes = || {
            vec![
                node("limited", std::slice::from_ref(&existing)),
                node("roomy", std::slice::from_ref(&existing)),
                node("no-csinode", std::slice::from_ref(&existing)),
            ]
        };
        // A not-yet-provisioned claim counts against its class's provisioner.
        let pod = PodInfo::test("ns", "p").pvc("late").build();
        let got = run(&pod, nodes());
        assert_eq!(got[0].code(), Code::Unschedulable);
        assert_eq!(got[0].message(), ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED);
        assert!(got[1].is_success());
        assert!(got[2].is_success());
        // Without a CSINode, an allocatable limit on the Node object applies.
        let legacy = {
            let mut n = NodeInfo::test("legacy")
                .allocatable("attachable-volumes-csi-ebs.csi.aws.com", "2")
                .build();
            n.add_pod(Arc::new(existing.with_node_name("legacy")));
            n
        };
        let got = run(&pod, vec![legacy]);
        assert_eq!(got[0].message(), ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED);
        // A volume already attached on the node is not counted again.
        let pod = PodInfo::test("ns", "q").pvc("c1").build();
        assert!(run(&pod, nodes()).iter().all(Status::is_success));
        // Another driver without a limit is never constrained.
        let pod = PodInfo::test("ns", "r").pvc("c3").build();
        assert!(run(&pod, nodes()).iter().all(Status::is_success));
    }

    #[test]
    fn missing_claim_of_the_new_pod_is_unresolvable() {
        let pod = PodInfo::test("ns", "p").pvc("gone").build();
        let got = run(&pod, vec![node("limited", &[])]);
        assert_eq!(got[0].code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(
            got[0].message(),
            "looking up PVC ns/gone: persistentvolumeclaim \"gone\" not found"
        );
    }
    /// Claims of in-tree EBS volumes, a GCE PD one, an unbound one of the in-tree EBS
    /// provisioner, and two claims whose CSI volumes share one handle.
    fn migration_vols() -> VolumeObjects {
        let mut v = store(
            vec![
                pvc("ns", "ebs1").bound("ebs-pv1").build(),
                pvc("ns", "ebs2").bound("ebs-pv2").build(),
                pvc("ns", "pd").bound("pd-pv").build(),
                pvc("ns", "intree-late").class("gp2").build(),
                pvc("ns", "shared-a").bound("shared-a").build(),
                pvc("ns", "shared-b").bound("shared-b").build(),
            ],
            vec![
                // Zone-qualified and bare IDs name the same kind of handle.
                pv("ebs-pv1", "", "1Gi")
                    .aws_ebs("aws://us-east-1a/vol-1")
                    .build(),
                pv("ebs-pv2", "", "1Gi").aws_ebs("vol-2").build(),
                pv("pd-pv", "", "1Gi").gce_pd("disk").build(),
                pv("shared-a", "", "1Gi").csi(DRIVER, "same").build(),
                pv("shared-b", "", "1Gi").csi(DRIVER, "same").build(),
            ],
            vec![sc("gp2", AWS_EBS_PLUGIN, true, &[])],
        );
        v.put_csi_node(csi_node_migrated(
            "migrated",
            &[(DRIVER, Some(2))],
            &[AWS_EBS_PLUGIN, GCE_PD_PLUGIN],
        ));
        v.put_csi_node(csi_node("not-migrated", &[(DRIVER, Some(2))]));
        v
    }

    fn run_on(pod: &PodInfo, nodes: Vec<NodeInfo>, vols: VolumeObjects) -> Vec<Status> {
        let snap = Snapshot::from_node_infos(nodes).with_volumes(vols);
        crate::plugins::helper::testing::pre_filter_then_filter(&NodeVolumeLimits, pod, &snap)
    }

    fn inline_ebs(pod: crate::types::PodBuilder, volume_id: &str) -> PodInfo {
        pod.edit(|api| {
            api.spec
                .get_or_insert_with(Default::default)
                .volumes
                .get_or_insert_with(Vec::new)
                .push(k8s_openapi::api::core::v1::Volume {
                    name: format!("inline-{}", volume_id.len()),
                    aws_elastic_block_store: Some(
                        k8s_openapi::api::core::v1::AWSElasticBlockStoreVolumeSource {
                            volume_id: volume_id.into(),
                            ..Default::default()
                        },
                    ),
                    ..Default::default()
                })
        })
        .build()
    }

    #[test]
    fn migrated_in_tree_volumes_count_against_their_csi_driver() {
        let existing = PodInfo::test("ns", "e").pvc("ebs1").pvc("ebs2").build();
        let nodes = || {
            vec![
                node("migrated", std::slice::from_ref(&existing)),
                node("not-migrated", std::slice::from_ref(&existing)),
            ]
        };
        // On the migrated node the two EBS volumes fill the limit of 2; elsewhere in-tree
        // volumes are not the CSI driver's and nothing counts.
        let pod = PodInfo::test("ns", "p").pvc("intree-late").build();
        let got = run_on(&pod, nodes(), migration_vols());
        assert_eq!(got[0].message(), ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED);
        assert!(got[1].is_success(), "{:?}", got[1]);
        // An inline EBS volume is translated too, and the same volume as a claim's takes no
        // new slot.
        let pod = inline_ebs(PodInfo::test("ns", "q"), "vol-3");
        let got = run_on(&pod, nodes(), migration_vols());
        assert_eq!(got[0].message(), ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED);
        assert!(got[1].is_success());
        let pod = inline_ebs(PodInfo::test("ns", "r"), "aws://us-east-1a/vol-1");
        assert!(
            run_on(&pod, nodes(), migration_vols())
                .iter()
                .all(Status::is_success)
        );
        // A GCE PD volume counts against the PD driver, which has no limit here.
        let pod = PodInfo::test("ns", "s").pvc("pd").build();
        assert!(
            run_on(&pod, nodes(), migration_vols())
                .iter()
                .all(Status::is_success)
        );
    }

    #[test]
    fn volumes_sharing_a_handle_are_counted_once() {
        // Two claims, two volumes, one CSI handle: one slot of the limit of 2.
        let existing = PodInfo::test("ns", "e").pvc("shared-a").build();
        let pod = PodInfo::test("ns", "p").pvc("shared-b").pvc("ebs1").build();
        let got = run_on(
            &pod,
            vec![node("migrated", std::slice::from_ref(&existing))],
            migration_vols(),
        );
        assert!(got[0].is_success(), "{:?}", got[0]);
        // One more distinct volume is one too many.
        let pod = PodInfo::test("ns", "p")
            .pvc("shared-b")
            .pvc("ebs1")
            .pvc("ebs2")
            .build();
        let got = run_on(
            &pod,
            vec![node("migrated", std::slice::from_ref(&existing))],
            migration_vols(),
        );
        assert_eq!(got[0].message(), ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED);
    }

    #[test]
    fn pods_without_countable_volumes_skip() {
        let snap = Snapshot::from_node_infos(vec![node("migrated", &[])]).with_volumes(vols());
        let mut state = CycleState::new();
        let pod = PodInfo::test("ns", "p").build();
        assert!(
            NodeVolumeLimits
                .pre_filter(&mut state, &pod, &snap)
                .1
                .is_skip()
        );
        let pod = inline_ebs(PodInfo::test("ns", "p"), "vol-9");
        assert!(
            NodeVolumeLimits
                .pre_filter(&mut state, &pod, &snap)
                .1
                .is_success()
        );
    }
    fn attachment(
        name: &str,
        node: &str,
        attacher: &str,
        pv: Option<&str>,
    ) -> VolumeAttachmentInfo {
        VolumeAttachmentInfo {
            name: name.into(),
            attacher: attacher.into(),
            node_name: node.into(),
            pv_name: pv.map(str::to_string),
        }
    }

    #[test]
    fn volume_attachments_hold_slots_of_volumes_no_pod_uses() {
        let mut v = vols();
        // pv1 is still attached to "limited" though no pod uses it; pv2's attachment is
        // shared with a pod there; others do not count (no PV, no CSI PV, another node).
        v.put_volume_attachment(attachment("va1", "limited", DRIVER, Some("pv1")));
        v.put_volume_attachment(attachment("va1-again", "limited", DRIVER, Some("pv1")));
        v.put_volume_attachment(attachment("va2", "limited", DRIVER, Some("pv2")));
        v.put_volume_attachment(attachment("inline", "limited", DRIVER, None));
        v.put_volume_attachment(attachment("gone", "limited", DRIVER, Some("nope")));
        v.put_volume_attachment(attachment("elsewhere", "roomy", DRIVER, Some("pv1")));
        let existing = PodInfo::test("ns", "e").pvc("c2").build();
        let pod = PodInfo::test("ns", "p").pvc("late").build();
        // limited: pv2 (pod) + pv1 (attachment) = 2, the limit: no room for a third.
        let got = run_on(
            &pod,
            vec![
                node("limited", std::slice::from_ref(&existing)),
                node("roomy", std::slice::from_ref(&existing)),
            ],
            v.clone(),
        );
        assert_eq!(got[0].message(), ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED);
        assert!(got[1].is_success());
        // Once the attachment is gone, the slot is free again.
        assert!(v.delete_volume_attachment("limited", "va1"));
        assert!(v.delete_volume_attachment("limited", "va1-again"));
        let got = run_on(&pod, vec![node("limited", &[existing])], v);
        assert!(got[0].is_success(), "{:?}", got[0]);
    }

    /// The driver's CSIDriver with `preventPodSchedulingIfMissing` as given (`None`: unset).
    fn prevent_if_missing(name: &str, prevent: Option<bool>) -> crate::types::CsiDriverInfo {
        let mut api = crate::types::testing::volumes::csi_driver_api(name, None);
        api.spec.prevent_pod_scheduling_if_missing = prevent;
        crate::types::CsiDriverInfo::from_csi_driver(&api)
    }

    #[test]
    fn a_driver_that_must_be_registered_keeps_pods_off_nodes_without_it() {
        let nodes = || {
            vec![
                node("limited", &[]),    // lists other.csi (no limit)
                node("roomy", &[]),      // lists only ebs
                node("no-csinode", &[]), // no CSINode yet
            ]
        };
        // pv3 is other.csi's.
        let pod = PodInfo::test("ns", "p").pvc("c3").build();
        let want = driver_not_installed("other.csi");
        assert_eq!(want, "other.csi CSI driver is not installed on the node");
        let mut v = vols();
        v.put_csi_driver(prevent_if_missing("other.csi", Some(true)));
        let got = run_on(&pod, nodes(), v);
        assert!(got[0].is_success(), "{:?}", got[0]);
        for s in &got[1..] {
            assert_eq!(s.code(), Code::Unschedulable);
            assert_eq!(s.message(), want);
        }
        // Opted out, unset, or no CSIDriver object at all: the node is not refused.
        for driver in [
            Some(prevent_if_missing("other.csi", Some(false))),
            Some(prevent_if_missing("other.csi", None)),
            None,
        ] {
            let mut v = vols();
            if let Some(d) = driver {
                v.put_csi_driver(d);
            }
            assert!(run_on(&pod, nodes(), v).iter().all(Status::is_success));
        }
        // Only pods that need the driver are concerned.
        let mut v = vols();
        v.put_csi_driver(prevent_if_missing("other.csi", Some(true)));
        let ebs = PodInfo::test("ns", "p").pvc("c1").build();
        assert!(run_on(&ebs, nodes(), v).iter().all(Status::is_success));
    }

    #[test]
    fn a_registered_driver_still_has_its_limit_checked() {
        let mut v = vols();
        v.put_csi_driver(prevent_if_missing(DRIVER, Some(true)));
        let existing = PodInfo::test("ns", "e").pvc("c1").pvc("c2").build();
        let pod = PodInfo::test("ns", "p").pvc("late").build();
        let got = run_on(
            &pod,
            vec![
                node("limited", std::slice::from_ref(&existing)),
                node("roomy", std::slice::from_ref(&existing)),
            ],
            v,
        );
        assert_eq!(got[0].message(), ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED);
        assert!(got[1].is_success(), "{:?}", got[1]);
    }
}
