//! VolumeBinding's queueing hints (upstream `isSchedulableAfter...Change` for claims,
//! classes, CSINodes, CSIDrivers and CSIStorageCapacities).

use crate::framework::{EventObjects, QueueingHint};
use crate::types::volume::ANN_MIGRATED_PLUGINS;
use crate::types::{CsiStorageCapacityInfo, PodInfo};

fn queue_if(yes: bool) -> QueueingHint {
    if yes {
        QueueingHint::Queue
    } else {
        QueueingHint::QueueSkip
    }
}

pub(super) fn hint(pod: &PodInfo, objects: &EventObjects<'_>) -> QueueingHint {
    match objects {
        // A claim the pod uses (by name, or its generic ephemeral claim) was created or
        // changed.
        EventObjects::Pvc { new } => queue_if(
            new.metadata.namespace.as_deref().unwrap_or_default() == pod.namespace()
                && new
                    .metadata
                    .name
                    .as_deref()
                    .is_some_and(|name| pod.volumes.claims.iter().any(|c| c.name == name)),
        ),
        // A new class, or allowed topologies changed (the binding mode cannot change).
        EventObjects::StorageClass { old, new } => {
            queue_if(old.is_none_or(|o| o.allowed_topologies != new.allowed_topologies))
        }
        EventObjects::CsiNode { old, new } => {
            let migrated = |n: &k8s_openapi::api::storage::v1::CSINode| {
                n.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(ANN_MIGRATED_PLUGINS).cloned())
            };
            queue_if(old.is_none_or(|o| migrated(o) != migrated(new)))
        }
        // Only a driver that stopped asking for capacity checks can help. Upstream also
        // requires the pod to have an inline CSI volume of that driver; the pod view does
        // not keep inline CSI drivers, so any pod is queued then (a superset).
        EventObjects::CsiDriver { old, new } => {
            let checks = |d: &k8s_openapi::api::storage::v1::CSIDriver| {
                d.spec.storage_capacity == Some(true)
            };
            queue_if(old.is_none_or(|o| checks(o) && !checks(new)))
        }
        // New capacity reported, or the largest volume it admits grew.
        EventObjects::StorageCapacity { old, new } => {
            let limit = |c| CsiStorageCapacityInfo::from_csi_storage_capacity(c).volume_limit();
            queue_if(old.is_none_or(|o| match (limit(o), limit(new)) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some(o), Some(n)) => n > o,
            }))
        }
        _ => QueueingHint::Queue,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::QueueingHint::{Queue, QueueSkip};
    use crate::types::testing::volumes as volume;
    use k8s_openapi::api::core::v1 as k8s;
    use k8s_openapi::api::storage::v1 as storage;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn pod_with_claims() -> PodInfo {
        PodInfo::test("ns", "pod-a")
            .pvc("pvc-a")
            .edit(|p| {
                p.spec
                    .get_or_insert_default()
                    .volumes
                    .get_or_insert_default()
                    .push(k8s::Volume {
                        name: "scratch".into(),
                        ephemeral: Some(Default::default()),
                        ..Default::default()
                    })
            })
            .build()
    }

    /// Upstream's `TestIsSchedulableAfterPersistentVolumeClaimChange`, in our words.
    #[test]
    fn claims() {
        let pod = pod_with_claims();
        for (ns, name, want) in [
            ("ns", "pvc-a", Queue),
            ("ns", "pod-a-scratch", Queue),
            ("ns", "pvc-b", QueueSkip),
            ("other", "pvc-a", QueueSkip),
        ] {
            let pvc = volume::pvc(ns, name).api();
            assert_eq!(
                hint(&pod, &EventObjects::Pvc { new: &pvc }),
                want,
                "{ns}/{name}"
            );
        }
    }

    fn class(zones: &[&str]) -> storage::StorageClass {
        storage::StorageClass {
            metadata: meta("sc"),
            provisioner: "p".into(),
            allowed_topologies: (!zones.is_empty()).then(|| {
                vec![k8s::TopologySelectorTerm {
                    match_label_expressions: Some(vec![k8s::TopologySelectorLabelRequirement {
                        key: "zone".into(),
                        values: zones.iter().map(|z| z.to_string()).collect(),
                    }]),
                }]
            }),
            ..Default::default()
        }
    }

    fn meta(name: &str) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            ..Default::default()
        }
    }

    /// Upstream's `TestIsSchedulableAfterStorageClassChange`, in our words.
    #[test]
    fn storage_classes() {
        let pod = pod_with_claims();
        let (a, ab) = (class(&["a"]), class(&["a", "b"]));
        let sc = |old, new| EventObjects::StorageClass { old, new };
        assert_eq!(hint(&pod, &sc(None, &a)), Queue, "created");
        assert_eq!(hint(&pod, &sc(Some(&a), &ab)), Queue, "topologies changed");
        let mut relabelled = a.clone();
        relabelled.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
        assert_eq!(
            hint(&pod, &sc(Some(&a), &relabelled)),
            QueueSkip,
            "other change"
        );
    }

    /// Upstream's `TestIsSchedulableAfterCSINodeChange`, in our words.
    #[test]
    fn csi_nodes() {
        let pod = pod_with_claims();
        let node = |migrated: Option<&str>| storage::CSINode {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("n".into()),
                annotations: migrated
                    .map(|m| [(ANN_MIGRATED_PLUGINS.to_string(), m.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let (none, gce, both) = (
            node(None),
            node(Some("kubernetes.io/gce-pd")),
            node(Some("kubernetes.io/gce-pd,kubernetes.io/aws-ebs")),
        );
        let ev = |old, new| EventObjects::CsiNode { old, new };
        assert_eq!(hint(&pod, &ev(None, &none)), Queue, "created");
        assert_eq!(
            hint(&pod, &ev(Some(&none), &gce)),
            Queue,
            "annotation added"
        );
        assert_eq!(
            hint(&pod, &ev(Some(&gce), &both)),
            Queue,
            "annotation changed"
        );
        let mut relabelled = gce.clone();
        relabelled.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
        assert_eq!(
            hint(&pod, &ev(Some(&gce), &relabelled)),
            QueueSkip,
            "other change"
        );
    }

    /// Upstream's `TestIsSchedulableAfterCSIDriverChange`, in our words.
    #[test]
    fn csi_drivers() {
        let pod = pod_with_claims();
        let on = volume::csi_driver_api("d", Some(true));
        let off = volume::csi_driver_api("d", Some(false));
        let unset = volume::csi_driver_api("d", None);
        let ev = |old, new| EventObjects::CsiDriver { old, new };
        assert_eq!(hint(&pod, &ev(Some(&on), &off)), Queue, "capacity disabled");
        assert_eq!(hint(&pod, &ev(Some(&on), &unset)), Queue, "capacity unset");
        assert_eq!(
            hint(&pod, &ev(Some(&off), &on)),
            QueueSkip,
            "capacity enabled"
        );
        assert_eq!(hint(&pod, &ev(Some(&on), &on)), QueueSkip, "unchanged");
    }

    /// Upstream's `TestIsSchedulableAfterCSIStorageCapacityChange`, in our words.
    #[test]
    fn storage_capacities() {
        let pod = pod_with_claims();
        let cap = |capacity: Option<&str>, max: Option<&str>| storage::CSIStorageCapacity {
            metadata: meta("cap"),
            storage_class_name: "sc".into(),
            capacity: capacity.map(|q| Quantity(q.into())),
            maximum_volume_size: max.map(|q| Quantity(q.into())),
            ..Default::default()
        };
        let ev = |old, new| EventObjects::StorageCapacity { old, new };
        let small = cap(Some("10Gi"), None);
        let big = cap(Some("20Gi"), None);
        assert_eq!(hint(&pod, &ev(None, &small)), Queue, "created");
        assert_eq!(hint(&pod, &ev(Some(&small), &big)), Queue, "capacity grew");
        assert_eq!(
            hint(&pod, &ev(Some(&big), &small)),
            QueueSkip,
            "capacity shrank"
        );
        // maximumVolumeSize, when set, is the limit.
        let max_small = cap(Some("20Gi"), Some("5Gi"));
        let max_big = cap(Some("10Gi"), Some("8Gi"));
        assert_eq!(
            hint(&pod, &ev(Some(&max_small), &max_big)),
            Queue,
            "max grew"
        );
        assert_eq!(
            hint(&pod, &ev(Some(&max_big), &max_small)),
            QueueSkip,
            "max shrank"
        );
        let nothing = cap(None, None);
        assert_eq!(
            hint(&pod, &ev(Some(&small), &nothing)),
            QueueSkip,
            "limit gone"
        );
        assert_eq!(
            hint(&pod, &ev(Some(&nothing), &small)),
            Queue,
            "limit appeared"
        );
    }
}
