//! NodeVolumeLimits tests.
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
fn attachment(name: &str, node: &str, attacher: &str, pv: Option<&str>) -> VolumeAttachmentInfo {
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
