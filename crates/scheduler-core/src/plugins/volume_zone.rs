//! VolumeZone (upstream `volumezone`): a pod whose bound volumes carry zone/region labels
//! only fits nodes in one of those zones/regions.

use crate::framework::Signing;
use crate::plugins::helper::sign;
use std::collections::BTreeSet;
use std::sync::Arc;

use crate::cache::Snapshot;
use crate::framework::{ActionType, ClusterEvent, EventResource};
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
            // New or relabelled nodes, and bound volumes or claims changing, can fix a zone mismatch.
            ClusterEvent::new(EventResource::StorageClass, ActionType::ADD),
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
        for key in TOPOLOGY_LABELS {
            if let Some(values) = pv.labels.get(key).and_then(|v| zones_to_set(v)) {
                out.push(PvTopology { key, values });
            }
        }
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
}
