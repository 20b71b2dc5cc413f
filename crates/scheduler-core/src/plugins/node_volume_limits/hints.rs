//! NodeVolumeLimits' queueing hints (upstream `nodevolumelimits/csi.go`): which events can
//! free an attach slot or let the pod's volumes be counted at all.

use crate::framework::{EventObjects, QueueingHint};
use crate::types::{CsiNodeInfo, PodInfo};

fn queue_if(helps: bool) -> QueueingHint {
    if helps {
        QueueingHint::Queue
    } else {
        QueueingHint::QueueSkip
    }
}

/// The hint for `objects` about `pod`, which NodeVolumeLimits rejected. Events without
/// objects, and kinds upstream gives no hint for (a CSINode added), queue.
pub(super) fn hint(pod: &PodInfo, objects: &EventObjects<'_>) -> QueueingHint {
    match objects {
        EventObjects::CsiNode {
            old: Some(old),
            new,
        } => queue_if(limits_may_have_grown(
            &CsiNodeInfo::from_csi_node(old),
            &CsiNodeInfo::from_csi_node(new),
        )),
        EventObjects::Pod {
            old: Some(deleted),
            new: None,
        } => queue_if(deleted_pod_held_volumes(deleted)),
        EventObjects::Pvc { new } => queue_if(
            new.metadata.namespace.as_deref() == Some(pod.namespace())
                && new
                    .metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| uses_claim(pod, n)),
        ),
        EventObjects::VolumeAttachmentGone { va, claim } => {
            let claim_helps = match (claim, &va.pv_name) {
                (Some((ns, name)), _) => *ns == pod.namespace() && uses_claim(pod, name),
                // The volume's claim is unknown here: any claim of the pod may be it.
                (None, Some(_)) => !pod.volumes.claims.is_empty(),
                (None, None) => false,
            };
            let inline_helps = pod.volumes.in_tree.iter().any(|t| t.driver == va.attacher);
            queue_if(claim_helps || inline_helps)
        }
        _ => QueueingHint::Queue,
    }
}

/// Whether `pod` uses the claim `name` (a `persistentVolumeClaim` volume, or the claim of a
/// generic ephemeral volume).
fn uses_claim(pod: &PodInfo, name: &str) -> bool {
    pod.volumes.claims.iter().any(|c| c.name == name)
}

/// Upstream `isSchedulableAfterPodDeleted`: only a bound pod with a claim, an ephemeral
/// volume or a migratable in-tree volume held attach slots.
fn deleted_pod_held_volumes(deleted: &PodInfo) -> bool {
    deleted.node_name.as_deref().is_some_and(|n| !n.is_empty())
        && !(deleted.volumes.claims.is_empty() && deleted.volumes.in_tree.is_empty())
}

/// A CSINode update helps when some driver's attach limit rose or was lifted, a driver
/// registered (VolumeLimitScaling: a pod refused for a missing driver may now fit), or the
/// migrated plugins changed (which volumes count).
fn limits_may_have_grown(old: &CsiNodeInfo, new: &CsiNodeInfo) -> bool {
    new.migrated_plugins != old.migrated_plugins
        || new
            .drivers
            .iter()
            .any(|(driver, limit)| match (old.drivers.get(driver), limit) {
                (None, _) => true,
                (Some(None), _) => false,
                (Some(Some(_)), None) => true,
                (Some(Some(before)), Some(now)) => now > before,
            })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::{ActionType, ClusterEvent, EventResource, Plugin};
    use crate::plugins::node_volume_limits::NodeVolumeLimits;
    use crate::types::VolumeAttachmentInfo;
    use k8s_openapi::api::core::v1 as k8s;
    use k8s_openapi::api::storage::v1 as storage;

    fn ask(pod: &PodInfo, objects: &EventObjects<'_>) -> QueueingHint {
        // Through the plugin, as the queue asks.
        let ev = ClusterEvent::new(EventResource::Pod, ActionType::DELETE);
        NodeVolumeLimits.queueing_hint(pod, &ev, objects)
    }

    /// `pod` with one more inline volume.
    fn with_volume(
        pod: crate::types::testing::PodBuilder,
        volume: k8s::Volume,
    ) -> crate::types::testing::PodBuilder {
        pod.edit(|p| {
            p.spec
                .get_or_insert_with(Default::default)
                .volumes
                .get_or_insert_with(Vec::new)
                .push(volume)
        })
    }

    fn ebs_inline(pod: crate::types::testing::PodBuilder) -> crate::types::testing::PodBuilder {
        let ebs = k8s::AWSElasticBlockStoreVolumeSource {
            volume_id: "test".into(),
            ..Default::default()
        };
        with_volume(
            pod,
            k8s::Volume {
                name: "ebs".into(),
                aws_elastic_block_store: Some(ebs),
                ..Default::default()
            },
        )
    }

    fn gce_inline(pod: crate::types::testing::PodBuilder) -> crate::types::testing::PodBuilder {
        let gce = k8s::GCEPersistentDiskVolumeSource {
            pd_name: "test".into(),
            ..Default::default()
        };
        with_volume(
            pod,
            k8s::Volume {
                name: "gce".into(),
                gce_persistent_disk: Some(gce),
                ..Default::default()
            },
        )
    }

    fn ephemeral(pod: crate::types::testing::PodBuilder) -> crate::types::testing::PodBuilder {
        with_volume(
            pod,
            k8s::Volume {
                name: "ephemeral".into(),
                ephemeral: Some(Default::default()),
                ..Default::default()
            },
        )
    }

    /// Upstream's TestCSILimitsDeletedPodQHint, in our words.
    #[test]
    fn deleted_pod_helps_only_if_it_was_bound_with_countable_volumes() {
        let pod = PodInfo::test("ns", "p").pvc("c").build();
        let gone = |p: &PodInfo| {
            ask(
                &pod,
                &EventObjects::Pod {
                    old: Some(p),
                    new: None,
                },
            )
        };
        let cases = [
            (
                "bound pod with a claim",
                PodInfo::test("ns", "d").pvc("x").node("n").build(),
                QueueingHint::Queue,
            ),
            (
                "bound pod with an ephemeral volume",
                ephemeral(PodInfo::test("ns", "d")).node("n").build(),
                QueueingHint::Queue,
            ),
            (
                "bound pod with a migratable inline volume",
                ebs_inline(PodInfo::test("ns", "d")).node("n").build(),
                QueueingHint::Queue,
            ),
            (
                "bound pod without volumes",
                PodInfo::test("ns", "d").node("n").build(),
                QueueingHint::QueueSkip,
            ),
            (
                "pod that was never scheduled",
                PodInfo::test("ns", "d").pvc("x").build(),
                QueueingHint::QueueSkip,
            ),
        ];
        for (name, deleted, want) in cases {
            assert_eq!(gone(&deleted), want, "{name}");
        }
    }

    /// Upstream's TestCSILimitsAddedPVCQHint, in our words.
    #[test]
    fn added_claim_helps_only_if_the_pod_uses_it() {
        use crate::types::testing::volumes::pvc;
        let hint =
            |pod: &PodInfo, c: &k8s::PersistentVolumeClaim| ask(pod, &EventObjects::Pvc { new: c });
        let plain = PodInfo::test("ns1", "pod1").build();
        let with_claim = PodInfo::test("ns1", "pod1").pvc("pvc1").build();
        let with_ephemeral = ephemeral(PodInfo::test("ns1", "pod1")).build();
        assert_eq!(
            hint(&plain, &pvc("ns2", "pvc1").api()),
            QueueingHint::QueueSkip,
            "other namespace"
        );
        assert_eq!(
            hint(&with_claim, &pvc("ns1", "pvc1").api()),
            QueueingHint::Queue
        );
        assert_eq!(
            hint(&with_ephemeral, &pvc("ns1", "pod1-ephemeral").api()),
            QueueingHint::Queue,
            "the ephemeral volume's claim"
        );
        assert_eq!(
            hint(&with_claim, &pvc("ns1", "pvc2").api()),
            QueueingHint::QueueSkip
        );
        assert_eq!(
            hint(&plain, &pvc("ns1", "pvc2").api()),
            QueueingHint::QueueSkip
        );
    }

    /// Upstream's TestCSILimitsDeletedVolumeAttachmentQHint, in our words.
    #[test]
    fn deleted_attachment_helps_the_pods_of_its_claim_or_driver() {
        let va = |attacher: &str, pv: Option<&str>| VolumeAttachmentInfo {
            name: "volumeattachment1".into(),
            attacher: attacher.into(),
            node_name: "fake-node".into(),
            pv_name: pv.map(str::to_string),
        };
        let hint = |pod: &PodInfo, va: &VolumeAttachmentInfo, claim| {
            ask(pod, &EventObjects::VolumeAttachmentGone { va, claim })
        };
        let with_claim = PodInfo::test("ns1", "p").pvc("pvc1").build();
        let pv_va = va("test.storage.gke.io", Some("pv1"));
        let inline_va = va("ebs.csi.aws.com", None);
        assert_eq!(
            hint(&with_claim, &pv_va, Some(("ns1", "pvc1"))),
            QueueingHint::Queue,
            "the claim's volume was detached"
        );
        assert_eq!(
            hint(&with_claim, &pv_va, Some(("ns1", "other"))),
            QueueingHint::QueueSkip
        );
        assert_eq!(
            hint(&with_claim, &pv_va, Some(("ns2", "pvc1"))),
            QueueingHint::QueueSkip
        );
        assert_eq!(
            hint(&with_claim, &pv_va, None),
            QueueingHint::Queue,
            "unknown claim: queue"
        );
        let ebs = ebs_inline(PodInfo::test("ns1", "p")).build();
        let gce = gce_inline(PodInfo::test("ns1", "p")).build();
        assert_eq!(hint(&ebs, &inline_va, None), QueueingHint::Queue);
        assert_eq!(hint(&gce, &inline_va, None), QueueingHint::QueueSkip);
        let ebs_and_claim = ebs_inline(PodInfo::test("ns1", "p").pvc("pvc1")).build();
        assert_eq!(hint(&ebs_and_claim, &inline_va, None), QueueingHint::Queue);
        assert_eq!(
            hint(&ebs_and_claim, &pv_va, Some(("ns1", "pvc1"))),
            QueueingHint::Queue
        );
        let plain = PodInfo::test("ns1", "p").build();
        assert_eq!(
            hint(&plain, &pv_va, Some(("ns1", "pvc1"))),
            QueueingHint::QueueSkip
        );
    }

    fn csi_node_api(drivers: &[(&str, Option<i32>)]) -> storage::CSINode {
        storage::CSINode {
            metadata: Default::default(),
            spec: storage::CSINodeSpec {
                drivers: drivers
                    .iter()
                    .map(|(d, n)| storage::CSINodeDriver {
                        name: d.to_string(),
                        node_id: "n".into(),
                        allocatable: n.map(|c| storage::VolumeNodeResources { count: Some(c) }),
                        ..Default::default()
                    })
                    .collect(),
            },
            ..Default::default()
        }
    }

    #[test]
    fn csi_node_update_helps_when_a_limit_grows_or_a_driver_registers() {
        let pod = PodInfo::test("ns", "p").pvc("c").build();
        let hint = |old: &storage::CSINode, new: &storage::CSINode| {
            ask(
                &pod,
                &EventObjects::CsiNode {
                    old: Some(old),
                    new,
                },
            )
        };
        let two = csi_node_api(&[("d", Some(2))]);
        let cases = [
            (
                "limit raised",
                csi_node_api(&[("d", Some(3))]),
                QueueingHint::Queue,
            ),
            (
                "limit lifted",
                csi_node_api(&[("d", None)]),
                QueueingHint::Queue,
            ),
            (
                "driver registered",
                csi_node_api(&[("d", Some(2)), ("e", Some(1))]),
                QueueingHint::Queue,
            ),
            (
                "unchanged",
                csi_node_api(&[("d", Some(2))]),
                QueueingHint::QueueSkip,
            ),
            (
                "limit lowered",
                csi_node_api(&[("d", Some(1))]),
                QueueingHint::QueueSkip,
            ),
            ("driver gone", csi_node_api(&[]), QueueingHint::QueueSkip),
        ];
        for (name, new, want) in cases {
            assert_eq!(hint(&two, &new), want, "{name}");
        }
        // A new CSINode always may help (no hint upstream).
        assert_eq!(
            ask(
                &pod,
                &EventObjects::CsiNode {
                    old: None,
                    new: &two
                }
            ),
            QueueingHint::Queue
        );
    }
}
