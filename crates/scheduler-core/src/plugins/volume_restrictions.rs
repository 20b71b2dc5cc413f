//! VolumeRestrictions (upstream `volumerestrictions`): in-tree disks that cannot be shared
//! on a node (GCE PD, AWS EBS, iSCSI, RBD) and ReadWriteOncePod claims already in use
//! anywhere in the cluster.

use crate::framework::Signing;
use crate::plugins::helper::sign;
use std::collections::BTreeSet;
use std::sync::Arc;

use crate::cache::Snapshot;
use crate::framework::{ActionType, ClusterEvent, EventObjects, EventResource, QueueingHint};
use crate::framework::{
    CycleState, FilterPlugin, Plugin, PluginPoints, PreFilterPlugin, PreFilterResult, Status,
};
use crate::plugin_points;
use crate::types::NodeInfo;
use crate::types::PodInfo;
use crate::types::volume::{READ_WRITE_ONCE_POD, claim_key};

use super::names::VOLUME_RESTRICTIONS;

pub const ERR_REASON_DISK_CONFLICT: &str = "node(s) had no available disk";
pub const ERR_REASON_RWOP_CONFLICT: &str =
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode";

pub struct VolumeRestrictions;

#[derive(Clone, Debug, Default)]
struct PreFilterState {
    /// Names of the pod's ReadWriteOncePod claims (in the pod's namespace).
    rwop_claims: BTreeSet<String>,
    /// How many of those claims scheduled pods use (a claim counts once however many pods
    /// use it); nominated pods and preemption victims then move it by their own uses.
    conflicting_refs: i64,
}

impl PreFilterState {
    /// Uses of the pod's RWOP claims by `other`. Like upstream, only the claim name is
    /// compared here, not the namespace.
    fn refs_of(&self, other: &PodInfo) -> i64 {
        other
            .pvc_names
            .iter()
            .filter(|c| self.rwop_claims.contains(*c))
            .count() as i64
    }
}

impl Plugin for VolumeRestrictions {
    /// Signature for opportunistic batching (upstream `SignPod`).
    fn sign_pod(&self, pod: &PodInfo) -> Option<Signing> {
        sign::with(vec![sign::volumes(pod)])
    }
    fn name(&self) -> &'static str {
        VOLUME_RESTRICTIONS
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_filter, filter)
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            // Deleting a pod releases its disks and ReadWriteOncePod claims (pod volumes
            // are immutable, so pod updates cannot help).
            ClusterEvent::new(EventResource::Pod, ActionType::DELETE),
            // Any new node may help: no hint, as upstream.
            ClusterEvent::new(EventResource::Node, ActionType::ADD),
            // PreFilter needs the claims to exist to read their access modes.
            ClusterEvent::new(EventResource::PersistentVolumeClaim, ActionType::ADD),
        ]
    }

    /// Upstream's hints: a deleted pod helps only in the pod's namespace and when it held
    /// one of the pod's disks or used one of its claims; a new claim only when the pod names it.
    fn queueing_hint(
        &self,
        pod: &PodInfo,
        _event: &ClusterEvent,
        objects: &EventObjects<'_>,
    ) -> QueueingHint {
        match objects {
            EventObjects::Pod {
                old: Some(deleted),
                new: None,
            } => queue_if(deleted_pod_may_help(pod, deleted)),
            EventObjects::Pvc { new } => queue_if(
                new.metadata.namespace.as_deref() == Some(pod.namespace())
                    && pod
                        .pvc_names
                        .iter()
                        .any(|c| new.metadata.name.as_deref() == Some(c.as_str())),
            ),
            _ => QueueingHint::Queue,
        }
    }
}

fn queue_if(helps: bool) -> QueueingHint {
    if helps {
        QueueingHint::Queue
    } else {
        QueueingHint::QueueSkip
    }
}

/// Upstream `isSchedulableAfterPodDeleted`: like upstream, a pod of another namespace is
/// never taken to help, and claims are compared by name only (their access mode is not read).
fn deleted_pod_may_help(pod: &PodInfo, deleted: &PodInfo) -> bool {
    if deleted.namespace() != pod.namespace() {
        return false;
    }
    let disk_conflict = pod
        .volumes
        .disks
        .iter()
        .any(|d| deleted.volumes.disks.iter().any(|e| d.conflicts_with(e)));
    disk_conflict || deleted.pvc_names.iter().any(|c| pod.pvc_names.contains(c))
}

/// Upstream's NotFound text for a missing claim.
pub(crate) fn pvc_not_found(name: &str) -> String {
    format!("persistentvolumeclaim {name:?} not found")
}

impl PreFilterPlugin for VolumeRestrictions {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let mut rwop_claims = BTreeSet::new();
        for claim in &pod.pvc_names {
            let Some(pvc) = snapshot.volumes().pvc(pod.namespace(), claim) else {
                return (None, Status::unresolvable(pvc_not_found(claim)));
            };
            if pvc.has_access_mode(READ_WRITE_ONCE_POD) {
                rwop_claims.insert(claim.clone());
            }
        }
        let conflicting_refs = rwop_claims
            .iter()
            .filter(|c| {
                let key = claim_key(pod.namespace(), c);
                snapshot
                    .node_infos()
                    .iter()
                    .any(|n| n.pvc_ref_count(&key).is_some())
            })
            .count() as i64;
        // Upstream skips when there are no disks to check and no claim is in use yet; then
        // nominated pods are not counted either.
        if pod.volumes.disks.is_empty() && conflicting_refs == 0 {
            return (None, Status::skip());
        }
        state.write(PreFilterState {
            rwop_claims,
            conflicting_refs,
        });
        (None, Status::success())
    }

    fn has_extensions(&self) -> bool {
        true
    }

    fn add_pod(
        &self,
        state: &mut CycleState,
        _pod: &PodInfo,
        to_add: &Arc<PodInfo>,
        _node: &NodeInfo,
    ) -> Status {
        match state.read_mut::<PreFilterState>() {
            Some(s) => {
                s.conflicting_refs += s.refs_of(to_add);
                Status::success()
            }
            None => missing_state(),
        }
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        _pod: &PodInfo,
        to_remove: &Arc<PodInfo>,
        _node: &NodeInfo,
    ) -> Status {
        match state.read_mut::<PreFilterState>() {
            Some(s) => {
                s.conflicting_refs -= s.refs_of(to_remove);
                Status::success()
            }
            None => missing_state(),
        }
    }
}

fn missing_state() -> Status {
    Status::error("reading VolumeRestrictions PreFilter state: not found")
}

impl FilterPlugin for VolumeRestrictions {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        for disk in &pod.volumes.disks {
            let conflict = node
                .pods
                .iter()
                .any(|p| p.volumes.disks.iter().any(|d| disk.conflicts_with(d)));
            if conflict {
                return Status::unschedulable(ERR_REASON_DISK_CONFLICT);
            }
        }
        let Some(s) = state.read::<PreFilterState>() else {
            return missing_state();
        };
        if s.conflicting_refs > 0 {
            return Status::unschedulable(ERR_REASON_RWOP_CONFLICT);
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::types::testing::volumes::{pvc, store};
    use crate::types::{NodeInfo, VolumeObjects};

    fn run(pod: &PodInfo, nodes: Vec<NodeInfo>, vols: VolumeObjects) -> Vec<Status> {
        let snap = Snapshot::from_node_infos(nodes).with_volumes(vols);
        crate::plugins::helper::testing::pre_filter_then_filter(&VolumeRestrictions, pod, &snap)
    }

    fn node_with(name: &str, pods: Vec<PodInfo>) -> NodeInfo {
        let mut n = NodeInfo::test(name).build();
        for p in pods {
            n.add_pod(Arc::new(p.with_node_name(name)));
        }
        n
    }

    #[test]
    fn pods_without_volumes_skip() {
        let pod = PodInfo::test("ns", "p").build();
        let snap = Snapshot::from_node_infos(vec![]);
        let (_, s) = VolumeRestrictions.pre_filter(&mut CycleState::new(), &pod, &snap);
        assert!(s.is_skip());
    }

    #[test]
    fn read_write_once_pod_claims_conflict_cluster_wide() {
        let vols = store(
            vec![
                pvc("ns", "rwop").mode("ReadWriteOncePod").build(),
                pvc("ns", "rwo").mode("ReadWriteOnce").build(),
            ],
            vec![],
            vec![],
        );
        let user = PodInfo::test("ns", "user").pvc("rwop").pvc("rwo").build();
        let nodes = || vec![node_with("a", vec![user.clone()]), node_with("b", vec![])];
        // The RWOP claim is in use on node a: every node is rejected, preemption may help.
        let pod = PodInfo::test("ns", "p").pvc("rwop").build();
        for s in run(&pod, nodes(), vols.clone()) {
            assert_eq!(s.code(), Code::Unschedulable);
            assert_eq!(s.message(), ERR_REASON_RWOP_CONFLICT);
        }
        // A ReadWriteOnce claim is not restricted here: the plugin skips.
        let pod = PodInfo::test("ns", "q").pvc("rwo").build();
        let snap = Snapshot::from_node_infos(nodes()).with_volumes(vols.clone());
        let (_, s) = VolumeRestrictions.pre_filter(&mut CycleState::new(), &pod, &snap);
        assert!(s.is_skip());
        // So is an RWOP claim nobody uses yet.
        let pod = PodInfo::test("ns", "p").pvc("rwop").build();
        let snap =
            Snapshot::from_node_infos(vec![node_with("b", vec![])]).with_volumes(vols.clone());
        let (_, s) = VolumeRestrictions.pre_filter(&mut CycleState::new(), &pod, &snap);
        assert!(s.is_skip());
        // Removing the user (a preemption victim) clears the conflict.
        let pod = PodInfo::test("ns", "p").pvc("rwop").build();
        let snap = Snapshot::from_node_infos(nodes()).with_volumes(vols);
        let mut state = CycleState::new();
        VolumeRestrictions.pre_filter(&mut state, &pod, &snap);
        let a = snap.get("a").unwrap().clone();
        let victim = a.pods[0].clone();
        assert!(
            VolumeRestrictions
                .remove_pod(&mut state, &pod, &victim, &a)
                .is_success()
        );
        assert!(VolumeRestrictions.filter(&state, &pod, &a).is_success());
    }

    #[test]
    fn missing_claim_is_unresolvable() {
        let pod = PodInfo::test("ns", "p").pvc("nope").build();
        let s = &run(&pod, vec![node_with("a", vec![])], VolumeObjects::new())[0];
        assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(s.message(), "persistentvolumeclaim \"nope\" not found");
    }

    #[test]
    fn read_write_disks_conflict_on_the_same_node_only() {
        let gce = |name: &str, pd: &str, ro: bool| gce_pod("ns", name, pd, ro);
        let nodes = || {
            vec![
                node_with("a", vec![gce("e", "disk", false)]),
                node_with("b", vec![]),
            ]
        };
        let got = run(&gce("p", "disk", true), nodes(), VolumeObjects::new());
        assert_eq!(got[0].code(), Code::Unschedulable);
        assert_eq!(got[0].message(), ERR_REASON_DISK_CONFLICT);
        assert!(got[1].is_success());
        let got = run(&gce("p", "other", false), nodes(), VolumeObjects::new());
        assert!(got.iter().all(Status::is_success));
    }

    fn gce_pod(ns: &str, name: &str, pd: &str, read_only: bool) -> PodInfo {
        PodInfo::test(ns, name)
            .edit(|p| {
                p.spec.get_or_insert_with(Default::default).volumes =
                    Some(vec![k8s_openapi::api::core::v1::Volume {
                        name: "d".into(),
                        gce_persistent_disk: Some(
                            k8s_openapi::api::core::v1::GCEPersistentDiskVolumeSource {
                                pd_name: pd.into(),
                                read_only: Some(read_only),
                                ..Default::default()
                            },
                        ),
                        ..Default::default()
                    }])
            })
            .build()
    }

    /// Upstream's TestIsSchedulableAfterPodDeleted, in our words.
    #[test]
    fn queueing_hint_on_pod_deletion() {
        let ev = ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE);
        let hint = |pod: &PodInfo, deleted: &PodInfo| {
            VolumeRestrictions.queueing_hint(
                pod,
                &ev,
                &EventObjects::Pod {
                    old: Some(deleted),
                    new: None,
                },
            )
        };
        let pod = gce_pod("ns", "p", "disk", false);
        let cases = [
            (
                "deleted pod held the same disk",
                gce_pod("ns", "d", "disk", false),
                QueueingHint::Queue,
            ),
            (
                "deleted pod held another disk",
                gce_pod("ns", "d", "other", false),
                QueueingHint::QueueSkip,
            ),
            (
                "deleted pod in another namespace",
                gce_pod("other", "d", "disk", false),
                QueueingHint::QueueSkip,
            ),
            (
                "deleted pod without volumes",
                PodInfo::test("ns", "d").build(),
                QueueingHint::QueueSkip,
            ),
        ];
        for (name, deleted, want) in cases {
            assert_eq!(hint(&pod, &deleted), want, "{name}");
        }
        // Both read-only: the disk never conflicted, its owner going away changes nothing.
        assert_eq!(
            hint(
                &gce_pod("ns", "p", "disk", true),
                &gce_pod("ns", "d", "disk", true)
            ),
            QueueingHint::QueueSkip
        );
        // A claim the pod uses (ReadWriteOncePod conflicts) was released.
        let claimer = PodInfo::test("ns", "p").pvc("rwop").build();
        let user = PodInfo::test("ns", "u").pvc("rwop").build();
        assert_eq!(hint(&claimer, &user), QueueingHint::Queue);
        let other_user = PodInfo::test("ns", "u").pvc("else").build();
        assert_eq!(hint(&claimer, &other_user), QueueingHint::QueueSkip);
        // Without the objects the hint queues.
        assert_eq!(
            VolumeRestrictions.queueing_hint(&claimer, &ev, &EventObjects::None),
            QueueingHint::Queue
        );
    }

    /// Upstream's TestIsSchedulableAfterPersistentVolumeClaimAdded, in our words.
    #[test]
    fn queueing_hint_on_claim_added() {
        let ev = ClusterEvent::new(EventResource::PersistentVolumeClaim, ActionType::ADD);
        let pod = PodInfo::test("ns", "p").pvc("claim").build();
        let hint = |c: &k8s_openapi::api::core::v1::PersistentVolumeClaim| {
            VolumeRestrictions.queueing_hint(&pod, &ev, &EventObjects::Pvc { new: c })
        };
        assert_eq!(hint(&pvc("ns", "claim").api()), QueueingHint::Queue);
        assert_eq!(hint(&pvc("other", "claim").api()), QueueingHint::QueueSkip);
        assert_eq!(hint(&pvc("ns", "unrelated").api()), QueueingHint::QueueSkip);
        assert!(
            !VolumeRestrictions
                .events_to_register()
                .iter()
                .any(|e| e.resource == EventResource::PersistentVolumeClaim
                    && e.action.intersects(ActionType::UPDATE)),
            "claim updates cannot change an access mode: not registered, as upstream"
        );
    }
}
