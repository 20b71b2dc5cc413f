//! VolumeZone (upstream `volumezone`): a pod whose bound volumes carry zone/region labels
//! only fits nodes in one of those zones/regions.

use crate::framework::Signing;
use crate::plugins::helper::sign;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::cache::Snapshot;
use crate::framework::{ActionType, ClusterEvent, EventObjects, EventResource, QueueingHint};
use crate::framework::{
    CycleState, FilterPlugin, Plugin, PluginPoints, PreFilterPlugin, PreFilterResult, Status,
};
use crate::plugin_points;
use crate::types::{NodeInfo, PodInfo};

use super::names::VOLUME_ZONE;
use super::volume_restrictions::pvc_not_found;

pub const ERR_REASON_CONFLICT: &str = "node(s) had no available volume zone";

const BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
const BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";
/// Upstream's order.
const TOPOLOGY_LABELS: [&str; 4] = [BETA_ZONE, BETA_REGION, ZONE, REGION];

pub struct VolumeZone;

/// One volume's allowed values for one topology label.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PvTopology {
    key: &'static str,
    values: BTreeSet<String>,
}

#[derive(Clone, Debug, Default)]
struct PreFilterState {
    topologies: Vec<PvTopology>,
}

impl Plugin for VolumeZone {
    /// Signature for opportunistic batching (upstream `SignPod`).
    fn sign_pod(&self, pod: &PodInfo) -> Option<Signing> {
        sign::with(vec![sign::volumes(pod)])
    }
    fn name(&self) -> &'static str {
        VOLUME_ZONE
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_filter, filter)
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            // A new WaitForFirstConsumer class lets PreFilter pass over unbound claims
            // (a class's binding mode is immutable: updates are not registered).
            ClusterEvent::new(EventResource::StorageClass, ActionType::ADD),
            // New or relabelled nodes may be in the volume's zone: no hint, as upstream.
            ClusterEvent::new(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
            ),
            ClusterEvent::new(
                EventResource::PersistentVolumeClaim,
                ActionType::ADD | ActionType::UPDATE,
            ),
            ClusterEvent::new(
                EventResource::PersistentVolume,
                ActionType::ADD | ActionType::UPDATE,
            ),
        ]
    }

    /// Upstream's hints: a class helps only if it is WaitForFirstConsumer, a claim only if
    /// the pod names it, a volume when it is new or its zone/region labels changed.
    fn queueing_hint(
        &self,
        pod: &PodInfo,
        _event: &ClusterEvent,
        objects: &EventObjects<'_>,
    ) -> QueueingHint {
        let helps = match objects {
            EventObjects::StorageClass { new, .. } => {
                new.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer")
            }
            EventObjects::Pvc { new } => {
                new.metadata.namespace.as_deref() == Some(pod.namespace())
                    && pod
                        .pvc_names
                        .iter()
                        .any(|c| new.metadata.name.as_deref() == Some(c.as_str()))
            }
            EventObjects::Pv { old: None, .. } => true,
            EventObjects::Pv {
                old: Some(old),
                new,
            } => {
                labels_topology(old.metadata.labels.as_ref())
                    != labels_topology(new.metadata.labels.as_ref())
            }
            _ => true,
        };
        if helps {
            QueueingHint::Queue
        } else {
            QueueingHint::QueueSkip
        }
    }
}

/// A volume's zone/region constraints from its labels (upstream `getPVTopologies`; labels
/// that do not parse are left out, as there).
fn labels_topology(labels: Option<&BTreeMap<String, String>>) -> Vec<PvTopology> {
    let Some(labels) = labels else {
        return Vec::new();
    };
    TOPOLOGY_LABELS
        .into_iter()
        .filter_map(|key| {
            let values = zones_to_set(labels.get(key)?)?;
            Some(PvTopology { key, values })
        })
        .collect()
}

/// Upstream `LabelZonesToSet`: values joined with `__`, each trimmed, none empty (else the
/// label is ignored).
fn zones_to_set(value: &str) -> Option<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for z in value.split("__") {
        let z = z.trim();
        if z.is_empty() {
            return None;
        }
        out.insert(z.to_string());
    }
    Some(out)
}

fn to_ga_label(key: &str) -> &str {
    match key {
        BETA_ZONE => ZONE,
        BETA_REGION => REGION,
        other => other,
    }
}

fn pv_topologies(pod: &PodInfo, snapshot: &Snapshot) -> Result<Vec<PvTopology>, Status> {
    let vols = snapshot.volumes();
    let mut out = Vec::new();
    // Only `persistentVolumeClaim` volumes: upstream leaves generic ephemeral ones out.
    for claim in &pod.pvc_names {
        if claim.is_empty() {
            return Err(Status::unresolvable("PersistentVolumeClaim had no name"));
        }
        let Some(pvc) = vols.pvc(pod.namespace(), claim) else {
            return Err(Status::unresolvable(pvc_not_found(claim)));
        };
        let Some(pv_name) = &pvc.volume_name else {
            if pvc.storage_class.is_empty() {
                return Err(Status::unresolvable(
                    "PersistentVolumeClaim had no pv name and storageClass name",
                ));
            }
            let Some(class) = vols.storage_class(&pvc.storage_class) else {
                return Err(Status::unresolvable(format!(
                    "storageclass.storage.k8s.io {:?} not found",
                    pvc.storage_class
                )));
            };
            if class.wait_for_first_consumer() {
                // Unbound delayed-binding claims are VolumeBinding's business.
                continue;
            }
            return Err(Status::unresolvable("PersistentVolume had no name"));
        };
        let Some(pv) = vols.pv(pv_name) else {
            return Err(Status::unresolvable(format!(
                "persistentvolume {pv_name:?} not found"
            )));
        };
        out.extend(labels_topology(Some(&pv.labels)));
    }
    Ok(out)
}

impl PreFilterPlugin for VolumeZone {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        match pv_topologies(pod, snapshot) {
            Err(s) => (None, s),
            Ok(t) if t.is_empty() => (None, Status::skip()),
            Ok(topologies) => {
                state.write(PreFilterState { topologies });
                (None, Status::success())
            }
        }
    }
}

impl FilterPlugin for VolumeZone {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<PreFilterState>() else {
            return Status::error("reading VolumeZone PreFilter state: not found");
        };
        if !TOPOLOGY_LABELS.iter().any(|k| node.labels.contains_key(k)) {
            return Status::success();
        }
        for t in &s.topologies {
            let value = node
                .labels
                .get(t.key)
                .or_else(|| node.labels.get(to_ga_label(t.key)));
            if !value.is_some_and(|v| t.values.contains(v)) {
                return Status::unresolvable(ERR_REASON_CONFLICT);
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::types::VolumeObjects;
    use crate::types::testing::volumes::{pv, pvc, sc, store};

    fn run(pod: &PodInfo, nodes: Vec<NodeInfo>, vols: VolumeObjects) -> Vec<Status> {
        let snap = Snapshot::from_node_infos(nodes).with_volumes(vols);
        crate::plugins::helper::testing::pre_filter_then_filter(&VolumeZone, pod, &snap)
    }

    fn nodes() -> Vec<NodeInfo> {
        vec![
            NodeInfo::test("in-a").label(ZONE, "a").build(),
            NodeInfo::test("in-b").label(ZONE, "b").build(),
            NodeInfo::test("beta-a").label(BETA_ZONE, "a").build(),
            NodeInfo::test("no-labels").build(),
        ]
    }

    #[test]
    fn zonal_volume_only_fits_its_zone() {
        let vols = store(
            vec![pvc("ns", "c").bound("zonal").build()],
            vec![pv("zonal", "", "1Gi").label(ZONE, "a__c").build()],
            vec![],
        );
        let pod = PodInfo::test("ns", "p").pvc("c").build();
        let got = run(&pod, nodes(), vols);
        assert!(got[0].is_success());
        assert_eq!(got[1].code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(got[1].message(), ERR_REASON_CONFLICT);
        // Node without the GA label but with the beta one: the GA key is looked up as is.
        assert_eq!(got[2].code(), Code::UnschedulableAndUnresolvable);
        // Nodes without any topology label fit.
        assert!(got[3].is_success());
    }

    #[test]
    fn beta_volume_label_matches_ga_node_label() {
        let vols = store(
            vec![pvc("ns", "c").bound("old").build()],
            vec![pv("old", "", "1Gi").label(BETA_ZONE, "b").build()],
            vec![],
        );
        let pod = PodInfo::test("ns", "p").pvc("c").build();
        let got = run(&pod, nodes(), vols);
        assert_eq!(
            got.iter().map(Status::is_success).collect::<Vec<_>>(),
            vec![false, true, false, true]
        );
    }

    #[test]
    fn unbound_claims_by_binding_mode() {
        let vols = store(
            vec![
                pvc("ns", "wait").class("wffc").build(),
                pvc("ns", "now").class("imm").build(),
                pvc("ns", "none").build(),
            ],
            vec![],
            vec![
                sc("wffc", "csi.example.com", true, &[]),
                sc("imm", "csi.example.com", false, &[]),
            ],
        );
        let pod = PodInfo::test("ns", "p").pvc("wait").build();
        let snap = Snapshot::from_node_infos(nodes()).with_volumes(vols.clone());
        let (_, s) = VolumeZone.pre_filter(&mut CycleState::new(), &pod, &snap);
        assert!(s.is_skip());
        let pod = PodInfo::test("ns", "p").pvc("now").build();
        let s = &run(&pod, nodes(), vols.clone())[0];
        assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(s.message(), "PersistentVolume had no name");
        // Generic ephemeral volumes are not looked at (their claim does not even exist here).
        let pod = PodInfo::test("ns", "p")
            .edit(|p| {
                p.spec.get_or_insert_with(Default::default).volumes =
                    Some(vec![k8s_openapi::api::core::v1::Volume {
                        name: "scratch".into(),
                        ephemeral: Some(Default::default()),
                        ..Default::default()
                    }])
            })
            .build();
        let snap = Snapshot::from_node_infos(nodes()).with_volumes(vols.clone());
        let (_, s) = VolumeZone.pre_filter(&mut CycleState::new(), &pod, &snap);
        assert!(s.is_skip());
        let pod = PodInfo::test("ns", "p").pvc("none").build();
        let s = &run(&pod, nodes(), vols)[0];
        assert_eq!(
            s.message(),
            "PersistentVolumeClaim had no pv name and storageClass name"
        );
    }

    /// Upstream's TestIsSchedulableAfterStorageClassAdded, in our words.
    #[test]
    fn queueing_hint_on_storage_class_added() {
        use crate::types::testing::volumes::storage_class_api;
        let ev = ClusterEvent::new(EventResource::StorageClass, ActionType::ADD);
        let pod = PodInfo::test("ns", "p").pvc("c").build();
        let hint = |sc: &k8s_openapi::api::storage::v1::StorageClass| {
            VolumeZone.queueing_hint(
                &pod,
                &ev,
                &EventObjects::StorageClass { old: None, new: sc },
            )
        };
        let mut no_mode = storage_class_api("sc", "csi.example.com", false, &[]);
        no_mode.volume_binding_mode = None;
        assert_eq!(hint(&no_mode), QueueingHint::QueueSkip);
        let immediate = storage_class_api("sc", "csi.example.com", false, &[]);
        assert_eq!(hint(&immediate), QueueingHint::QueueSkip);
        let wait = storage_class_api("sc", "csi.example.com", true, &[]);
        assert_eq!(hint(&wait), QueueingHint::Queue);
    }

    /// Upstream's TestIsSchedulableAfterPersistentVolumeChange, in our words.
    #[test]
    fn queueing_hint_on_volume_change() {
        let ev = ClusterEvent::new(EventResource::PersistentVolume, ActionType::UPDATE);
        let pod = PodInfo::test("ns", "p").pvc("c").build();
        let hint = |old: Option<&k8s_openapi::api::core::v1::PersistentVolume>,
                    new: &k8s_openapi::api::core::v1::PersistentVolume| {
            VolumeZone.queueing_hint(&pod, &ev, &EventObjects::Pv { old, new })
        };
        let west_b = pv("v", "", "1Gi").label(BETA_ZONE, "us-west1-b").0;
        let west_c = pv("v", "", "1Gi").label(BETA_ZONE, "us-west1-c").0;
        let region = pv("v", "", "1Gi")
            .label(BETA_ZONE, "us-west1-b")
            .label(REGION, "us-west1")
            .0;
        let other_label = pv("v", "", "1Gi")
            .label(BETA_ZONE, "us-west1-b")
            .label("team", "a")
            .0;
        let unparsable = pv("v", "", "1Gi")
            .label(BETA_ZONE, "us-west1-b")
            .label(ZONE, "a____b")
            .0;
        assert_eq!(hint(None, &west_b), QueueingHint::Queue, "new volume");
        assert_eq!(
            hint(Some(&west_b), &west_c),
            QueueingHint::Queue,
            "zone changed"
        );
        assert_eq!(
            hint(Some(&west_b), &region),
            QueueingHint::Queue,
            "region added"
        );
        assert_eq!(
            hint(Some(&west_b), &west_b.clone()),
            QueueingHint::QueueSkip,
            "no change"
        );
        assert_eq!(
            hint(Some(&west_b), &other_label),
            QueueingHint::QueueSkip,
            "other label"
        );
        assert_eq!(
            hint(Some(&west_b), &unparsable),
            QueueingHint::QueueSkip,
            "ignored label"
        );
    }

    /// Upstream's TestIsSchedulableAfterPersistentVolumeClaimChange, in our words.
    #[test]
    fn queueing_hint_on_claim_change() {
        let ev = ClusterEvent::new(EventResource::PersistentVolumeClaim, ActionType::UPDATE);
        let pod = PodInfo::test("ns", "p").pvc("c").build();
        let hint = |c: &k8s_openapi::api::core::v1::PersistentVolumeClaim| {
            VolumeZone.queueing_hint(&pod, &ev, &EventObjects::Pvc { new: c })
        };
        assert_eq!(hint(&pvc("ns", "c").bound("v").api()), QueueingHint::Queue);
        assert_eq!(hint(&pvc("other", "c").api()), QueueingHint::QueueSkip);
        assert_eq!(hint(&pvc("ns", "unrelated").api()), QueueingHint::QueueSkip);
        assert_eq!(
            VolumeZone.queueing_hint(&pod, &ev, &EventObjects::None),
            QueueingHint::Queue
        );
    }
}
