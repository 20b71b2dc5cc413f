//! NodeVolumeLimits (upstream `nodevolumelimits`, the CSI limits): a node whose CSINode
//! reports an attach limit for a driver takes no more of that driver's volumes than the limit,
//! counting each volume once however many pods on the node use it.
//!
//! Limits come from the CSINode, else from the node's `attachable-volumes-csi-<driver>`
//! allocatable. Not covered: in-tree volumes migrated to CSI (counted upstream only when the node's CSINode
//! lists the plugin as migrated) and VolumeAttachments of volumes no pod on the node uses.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::cache::Snapshot;
use crate::framework::{ActionType, ClusterEvent, EventResource};
use crate::framework::{
    CycleState, FilterPlugin, Plugin, PluginPoints, PreFilterPlugin, PreFilterResult, Status,
};
use crate::plugin_points;
use crate::types::{NodeInfo, PodClaim, PodInfo, VolumeObjects};

use super::names::NODE_VOLUME_LIMITS;

pub const ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED: &str = "node(s) exceed max volume count";

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
    /// The pod's own attachable volumes, or the status every node gets when a claim of the
    /// pod cannot be resolved.
    new_volumes: Result<Attachable, Status>,
}

impl Plugin for NodeVolumeLimits {
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

/// Collects the attachable CSI volumes of `pod` into `out`. For the pod being scheduled
/// (`new_pod`) a missing claim is an error; for pods already on the node it is not counted.
fn attachable_volumes(
    vols: &VolumeObjects,
    pod: &PodInfo,
    new_pod: bool,
    out: &mut Attachable,
) -> Result<(), Status> {
    for PodClaim { name, ephemeral } in &pod.volumes.claims {
        if name.is_empty() {
            return Err(Status::error("PersistentVolumeClaim had no name"));
        }
        let Some(pvc) = vols.pvc(pod.namespace(), name) else {
            if new_pod {
                return Err(Status::unresolvable(format!(
                    "looking up PVC {}/{name}: persistentvolumeclaim {name:?} not found",
                    pod.namespace()
                )));
            }
            continue;
        };
        if *ephemeral && pvc.controller_uid.as_deref() != Some(pod.uid.as_str()) {
            return Err(Status::error(ephemeral_owner_error(pod, name)));
        }
        let from_class = || -> Option<(String, String)> {
            let class = vols.storage_class(&pvc.storage_class)?;
            Some((
                class.provisioner.clone(),
                format!("{UNBOUND_HANDLE_PREFIX}-{}/{}", pvc.namespace, pvc.name),
            ))
        };
        let info = match &pvc.volume_name {
            Some(pv_name) => match vols.pv(pv_name) {
                Some(pv) => pv.csi.clone(),
                None => from_class(),
            },
            None => from_class(),
        };
        let Some((driver, handle)) = info.filter(|(d, h)| !d.is_empty() && !h.is_empty()) else {
            continue;
        };
        out.insert(format!("{driver}/{handle}"), driver);
    }
    Ok(())
}

impl PreFilterPlugin for NodeVolumeLimits {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        if pod.volumes.claims.is_empty() {
            return (None, Status::skip());
        }
        let volumes = snapshot.volumes().clone();
        let mut new = Attachable::new();
        let new_volumes = attachable_volumes(&volumes, pod, true, &mut new).map(|()| new);
        state.write(PreFilterState {
            volumes,
            new_volumes,
        });
        (None, Status::success())
    }
}

impl FilterPlugin for NodeVolumeLimits {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<PreFilterState>() else {
            return Status::error("reading NodeVolumeLimits PreFilter state: not found");
        };
        let new_volumes = match &s.new_volumes {
            Ok(v) if v.is_empty() => return Status::success(),
            Ok(v) => v,
            Err(status) => return status.clone(),
        };
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
        if let Some(csi_node) = s.volumes.csi_node(&node.name) {
            limits.extend(csi_node.limits());
        }
        if limits.is_empty() {
            return Status::success();
        }
        let mut attached = Attachable::new();
        for p in &node.pods {
            if let Err(status) = attachable_volumes(&s.volumes, p, false, &mut attached) {
                return status;
            }
        }
        let mut attached_count: HashMap<&str, i64> = HashMap::new();
        for driver in attached.values() {
            *attached_count.entry(driver).or_default() += 1;
        }
        let mut new_count: BTreeMap<&str, i64> = BTreeMap::new();
        for (unique, driver) in new_volumes {
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
    use crate::types::testing::volumes::{csi_node, pv, pvc, sc, store};

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
}
