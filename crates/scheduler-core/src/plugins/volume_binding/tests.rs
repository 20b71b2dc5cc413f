//! VolumeBinding's unit tests: static binding, provisioning and capacity per node.

use super::*;
use crate::config::{UtilizationShapePoint, VolumeBindingArgs};
use crate::framework::Code;
use crate::types::testing::volumes::{capacity, csi_driver, pv, pvc, sc, store};

const ZONE: &str = "topology.kubernetes.io/zone";

fn nodes() -> Vec<NodeInfo> {
    vec![
        NodeInfo::test("a")
            .label(ZONE, "za")
            .label("kubernetes.io/hostname", "a")
            .build(),
        NodeInfo::test("b")
            .label(ZONE, "zb")
            .label("kubernetes.io/hostname", "b")
            .build(),
    ]
}

struct Run {
    pre: (Option<PreFilterResult>, Status),
    state: CycleState,
    statuses: Vec<Status>,
}

fn run_with(pl: &VolumeBinding, pod: &PodInfo, vols: VolumeObjects) -> Run {
    let snap = Snapshot::from_node_infos(nodes()).with_volumes(vols);
    let mut state = CycleState::new();
    let pre = pl.pre_filter(&mut state, pod, &snap);
    let statuses = if pre.1.is_success() {
        snap.node_infos()
            .iter()
            .map(|n| pl.filter(&state, pod, n))
            .collect()
    } else {
        Vec::new()
    };
    Run {
        pre,
        state,
        statuses,
    }
}

fn run(pod: &PodInfo, vols: VolumeObjects) -> Run {
    run_with(&VolumeBinding::new(None).unwrap(), pod, vols)
}

fn reserved(r: &mut Run, node: &str) -> Option<PodVolumes> {
    let pod = PodInfo::test("ns", "p").build();
    let pl = VolumeBinding::new(None).unwrap();
    assert!(pl.reserve(&mut r.state, &pod, node).is_success());
    assert!(pl.pre_bind(&r.state, &pod, node).is_success());
    decided_bindings(&r.state).cloned()
}

fn wffc_classes() -> Vec<crate::types::StorageClassInfo> {
    vec![
        sc("local", NOT_SUPPORTED_PROVISIONER, true, &[]),
        sc("zonal", "csi.example.com", true, &[(ZONE, &["za"])]),
        sc("anywhere", "csi.example.com", true, &[]),
        sc("fast", "csi.example.com", false, &[]),
    ]
}

#[test]
fn pods_without_claims_skip_and_reserve_nothing() {
    let mut r = run(&PodInfo::test("ns", "p").build(), VolumeObjects::new());
    assert!(r.pre.1.is_skip());
    assert_eq!(reserved(&mut r, "a"), None);
}

#[test]
fn bound_volume_node_affinity_must_match() {
    let vols = store(
        vec![pvc("ns", "data").bound("zonal-pv").build()],
        vec![
            pv("zonal-pv", "", "1Gi")
                .node_affinity(ZONE, &["za"])
                .claim("ns", "data")
                .build(),
        ],
        vec![],
    );
    let pod = PodInfo::test("ns", "p").pvc("data").build();
    let mut r = run(&pod, vols);
    assert!(r.pre.1.is_success());
    // No hostname terms: no node list from PreFilter.
    assert_eq!(r.pre.0, None);
    assert!(r.statuses[0].is_success());
    assert_eq!(r.statuses[1].code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(r.statuses[1].message(), ERR_REASON_NODE_CONFLICT);
    // Everything was bound already: nothing for the controller to do.
    assert_eq!(reserved(&mut r, "a"), None);
}

#[test]
fn bound_local_volume_narrows_nodes_and_missing_volume_is_reported() {
    let vols = store(
        vec![
            pvc("ns", "local").bound("local-pv").build(),
            pvc("ns", "lost").bound("gone").build(),
        ],
        vec![pv("local-pv", "local", "1Gi").local_on("b").build()],
        vec![],
    );
    let pod = PodInfo::test("ns", "p").pvc("local").build();
    let r = run(&pod, vols.clone());
    assert_eq!(r.pre.0, Some(PreFilterResult::nodes(["b".to_string()])));
    let pod = PodInfo::test("ns", "p").pvc("lost").build();
    let r = run(&pod, vols);
    assert_eq!(r.statuses[0].message(), ERR_REASON_PV_NOT_EXIST);
    assert_eq!(r.statuses[0].code(), Code::UnschedulableAndUnresolvable);
}

#[test]
fn unbound_immediate_claims_are_unresolvable() {
    let vols = store(
        vec![
            pvc("ns", "now").class("fast").build(),
            pvc("ns", "unknown-class").class("nope").build(),
            pvc("ns", "prebound").class("local").prebound("x").build(),
        ],
        vec![],
        wffc_classes(),
    );
    for claim in ["now", "unknown-class", "prebound"] {
        let pod = PodInfo::test("ns", "p").pvc(claim).build();
        let s = run(&pod, vols.clone()).pre.1;
        assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{claim}");
        assert_eq!(s.message(), ERR_UNBOUND_IMMEDIATE, "{claim}");
    }
}

#[test]
fn missing_claims_are_unresolvable_with_upstream_messages() {
    let pod = PodInfo::test("ns", "p").pvc("gone").build();
    let s = run(&pod, VolumeObjects::new()).pre.1;
    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(s.message(), "persistentvolumeclaim \"gone\" not found");
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
    let s = run(&pod, VolumeObjects::new()).pre.1;
    assert_eq!(
        s.message(),
        "waiting for ephemeral volume controller to create the persistentvolumeclaim \"p-scratch\""
    );
}

#[test]
fn wait_for_first_consumer_matches_a_local_volume_on_one_node_only() {
    let vols = store(
        vec![
            pvc("ns", "data")
                .class("local")
                .mode("ReadWriteOnce")
                .request("5Gi")
                .build(),
        ],
        vec![
            pv("on-a", "local", "10Gi")
                .mode("ReadWriteOnce")
                .local_on("a")
                .build(),
            pv("too-small-on-b", "local", "1Gi")
                .mode("ReadWriteOnce")
                .local_on("b")
                .build(),
        ],
        wffc_classes(),
    );
    let pod = PodInfo::test("ns", "p").pvc("data").build();
    let mut r = run(&pod, vols);
    assert!(r.statuses[0].is_success());
    // b has only a too-small volume and the class cannot provision.
    assert_eq!(r.statuses[1].code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(r.statuses[1].message(), ERR_REASON_BIND_CONFLICT);
    let decided = reserved(&mut r, "a").unwrap();
    assert_eq!(decided.static_bindings.len(), 1);
    assert_eq!(decided.static_bindings[0].pv, "on-a");
    assert_eq!(decided_claims(&decided), vec!["ns/data"]);
    assert!(decided.dynamic_provisions.is_empty());
    // Unreserve forgets the decision.
    let pod = PodInfo::test("ns", "p").build();
    VolumeBinding::new(None)
        .unwrap()
        .unreserve(&mut r.state, &pod, "a");
    assert_eq!(decided_bindings(&r.state), None);
}

#[test]
fn smallest_fitting_volume_wins_and_is_not_reused() {
    let vols = store(
        vec![
            pvc("ns", "big").class("local").request("3Gi").build(),
            pvc("ns", "small").class("local").request("1Gi").build(),
        ],
        vec![
            pv("pv-5", "local", "5Gi").local_on("a").build(),
            pv("pv-2", "local", "2Gi").local_on("a").build(),
            pv("pv-1", "local", "1Gi").local_on("a").build(),
            pv("taken", "local", "1Gi").claim("other", "c").build(),
            pv("wrong-class", "", "1Gi").build(),
        ],
        wffc_classes(),
    );
    let pod = PodInfo::test("ns", "p").pvc("big").pvc("small").build();
    let mut r = run(&pod, vols);
    assert!(r.statuses[0].is_success());
    let decided = reserved(&mut r, "a").unwrap();
    let pairs: Vec<(&str, &str)> = decided
        .static_bindings
        .iter()
        .map(|b| (b.pvc_name.as_str(), b.pv.as_str()))
        .collect();
    assert_eq!(pairs, vec![("small", "pv-1"), ("big", "pv-5")]);
}

#[test]
fn dynamic_provisioning_follows_allowed_topologies() {
    let vols = store(
        vec![
            pvc("ns", "z").class("zonal").request("1Gi").build(),
            pvc("ns", "any").class("anywhere").build(),
        ],
        vec![],
        wffc_classes(),
    );
    let pod = PodInfo::test("ns", "p").pvc("z").build();
    let mut r = run(&pod, vols.clone());
    assert!(r.statuses[0].is_success());
    assert_eq!(r.statuses[1].message(), ERR_REASON_BIND_CONFLICT);
    let decided = reserved(&mut r, "a").unwrap();
    assert_eq!(
        decided.dynamic_provisions,
        vec![("ns".to_string(), "z".to_string())]
    );
    let pod = PodInfo::test("ns", "p").pvc("any").build();
    assert!(run(&pod, vols).statuses.iter().all(Status::is_success));
}

#[test]
fn claim_with_selected_node_only_fits_that_node() {
    let vols = store(
        vec![pvc("ns", "c").class("anywhere").selected_node("b").build()],
        vec![],
        wffc_classes(),
    );
    let pod = PodInfo::test("ns", "p").pvc("c").build();
    let r = run(&pod, vols);
    assert_eq!(r.statuses[0].message(), ERR_REASON_BIND_CONFLICT);
    assert!(r.statuses[1].is_success());
}

#[test]
fn capacity_scoring_only_with_a_shape() {
    let vols = store(
        vec![pvc("ns", "c").class("local").request("5Gi").build()],
        vec![
            pv("half-full", "local", "10Gi").local_on("a").build(),
            pv("exact", "local", "5Gi").local_on("b").build(),
        ],
        wffc_classes(),
    );
    let pod = PodInfo::test("ns", "p").pvc("c").build();
    let no_shape = VolumeBinding::new(None).unwrap();
    let mut r = run_with(&no_shape, &pod, vols.clone());
    assert!(
        no_shape
            .pre_score(&mut r.state, &pod, Default::default(), &Snapshot::new())
            .is_skip()
    );

    let args = PluginArgs::VolumeBinding(VolumeBindingArgs {
        bind_timeout_seconds: 600,
        shape: vec![
            UtilizationShapePoint {
                utilization: 0,
                score: 0,
            },
            UtilizationShapePoint {
                utilization: 100,
                score: 10,
            },
        ],
    });
    let pl = VolumeBinding::new(Some(&args)).unwrap();
    let mut r = run_with(&pl, &pod, vols);
    assert!(
        pl.pre_score(&mut r.state, &pod, Default::default(), &Snapshot::new())
            .is_success()
    );
    let scores: Vec<i64> = nodes()
        .iter()
        .map(|n| pl.score(&r.state, &pod, n).unwrap())
        .collect();
    assert_eq!(scores, vec![50, 100]);

    // Only dynamic provisioning, by a driver that reports no capacity: nothing to rate, so
    // every node gets 0.
    let vols = store(
        vec![pvc("ns", "any").class("anywhere").request("1Gi").build()],
        vec![],
        wffc_classes(),
    );
    let pod = PodInfo::test("ns", "p").pvc("any").build();
    let mut r = run_with(&pl, &pod, vols);
    assert!(
        pl.pre_score(&mut r.state, &pod, Default::default(), &Snapshot::new())
            .is_success()
    );
    assert!(nodes().iter().all(|n| pl.score(&r.state, &pod, n) == Ok(0)));
}
/// A pod without claims scores 0 everywhere, so with a shape the plugin skips PreScore
/// (and Score) for it, while a pod with a claim is still scored.
#[test]
fn a_pod_without_claims_skips_capacity_scoring() {
    let pl = default_shape_plugin();
    let vols = store(
        vec![pvc("ns", "c").class("local").request("5Gi").build()],
        vec![pv("half-full", "local", "10Gi").local_on("a").build()],
        wffc_classes(),
    );
    let plain = PodInfo::test("ns", "plain").build();
    let mut r = run_with(&pl, &plain, vols.clone());
    assert!(
        pl.pre_score(&mut r.state, &plain, Default::default(), &Snapshot::new())
            .is_skip()
    );
    let claiming = PodInfo::test("ns", "p").pvc("c").build();
    let mut r = run_with(&pl, &claiming, vols);
    assert!(
        pl.pre_score(
            &mut r.state,
            &claiming,
            Default::default(),
            &Snapshot::new()
        )
        .is_success()
    );
}

fn default_shape_plugin() -> VolumeBinding {
    let args = PluginArgs::VolumeBinding(VolumeBindingArgs {
        bind_timeout_seconds: 600,
        shape: crate::config::default_volume_binding_shape(),
    });
    VolumeBinding::new(Some(&args)).unwrap()
}

/// StorageCapacityScoring (upstream's dynamic-provisioning score cases): with the default
/// shape the node whose reported capacity stays emptiest wins; a pod that also binds an
/// existing volume is scored by that volume only.
#[test]
fn dynamic_provisioning_is_scored_by_reported_capacity() {
    let za: &[(&str, &str)] = &[(ZONE, "za")];
    let zb: &[(&str, &str)] = &[(ZONE, "zb")];
    let vols = capacity_store(
        Some(Some(true)),
        vec![
            capacity("a", "anywhere", Some(za), Some("50Gi"), None),
            capacity("b", "anywhere", Some(zb), Some("10Gi"), None),
        ],
    );
    let pl = default_shape_plugin();
    let pod = PodInfo::test("ns", "p").pvc("data").build();
    let mut r = run_with(&pl, &pod, vols.clone());
    assert!(r.statuses.iter().all(Status::is_success));
    assert!(
        pl.pre_score(&mut r.state, &pod, Default::default(), &Snapshot::new())
            .is_success()
    );
    let scores: Vec<i64> = nodes()
        .iter()
        .map(|n| pl.score(&r.state, &pod, n).unwrap())
        .collect();
    // 5Gi of 50Gi is 10% used -> 90; 5Gi of 10Gi is 50% -> 50.
    assert_eq!(scores, vec![90, 50]);

    // Only maximumVolumeSize reported: admitted, but no capacity to rate by.
    let vols_max_only = capacity_store(
        Some(Some(true)),
        vec![capacity("any", "anywhere", Some(&[]), None, Some("10Gi"))],
    );
    let r = run_with(&pl, &pod, vols_max_only);
    assert!(r.statuses.iter().all(Status::is_success));
    assert!(nodes().iter().all(|n| pl.score(&r.state, &pod, n) == Ok(0)));

    // A static binding on node a: only it is rated there (5Gi claim on a 20Gi volume,
    // 25% -> 75), the provisioned claim is not.
    let mut vols = vols;
    vols.put_pvc(
        pvc("ns", "local-claim")
            .class("local")
            .request("5Gi")
            .build(),
    );
    vols.put_pv(pv("local-a", "local", "20Gi").local_on("a").build());
    let pod = PodInfo::test("ns", "p")
        .pvc("data")
        .pvc("local-claim")
        .build();
    let r = run_with(&pl, &pod, vols);
    assert!(r.statuses[0].is_success(), "{:?}", r.statuses[0]);
    assert_eq!(pl.score(&r.state, &pod, &nodes()[0]), Ok(75));
}

/// The "anywhere" class (provisioner csi.example.com) with the given CSIDriver and
/// capacities, and a 5Gi claim of it.
fn capacity_store(
    driver: Option<Option<bool>>,
    capacities: Vec<crate::types::CsiStorageCapacityInfo>,
) -> VolumeObjects {
    let mut v = store(
        vec![
            pvc("ns", "data").class("anywhere").request("5Gi").build(),
            pvc("ns", "no-request").class("anywhere").build(),
        ],
        vec![],
        wffc_classes(),
    );
    if let Some(storage_capacity) = driver {
        v.put_csi_driver(csi_driver("csi.example.com", storage_capacity));
    }
    for c in capacities {
        v.put_storage_capacity(c);
    }
    v
}

fn capacity_statuses(vols: VolumeObjects, claim: &str) -> Vec<Status> {
    let pod = PodInfo::test("ns", "p").pvc(claim).build();
    run(&pod, vols).statuses
}

fn not_enough_space(s: &Status) -> bool {
    s.code() == Code::UnschedulableAndUnresolvable && s.reasons() == [ERR_REASON_NOT_ENOUGH_SPACE]
}

#[test]
fn capacity_in_the_node_topology_must_hold_the_request() {
    let za: &[(&str, &str)] = &[(ZONE, "za")];
    let zb: &[(&str, &str)] = &[(ZONE, "zb")];
    let vols = capacity_store(
        Some(Some(true)),
        vec![
            capacity("a-big", "anywhere", Some(za), Some("10Gi"), None),
            capacity("b-small", "anywhere", Some(zb), Some("4Gi"), None),
            // Plenty of room, but for another class.
            capacity("b-other", "local", Some(zb), Some("100Gi"), None),
        ],
    );
    let got = capacity_statuses(vols, "data");
    assert!(got[0].is_success(), "{:?}", got[0]);
    assert!(not_enough_space(&got[1]), "{:?}", got[1]);
}

#[test]
fn maximum_volume_size_is_preferred_over_capacity() {
    let za: &[(&str, &str)] = &[(ZONE, "za")];
    let zb: &[(&str, &str)] = &[(ZONE, "zb")];
    let vols = capacity_store(
        Some(Some(true)),
        vec![
            // Lots free in total, but no single volume over 1Gi.
            capacity("a", "anywhere", Some(za), Some("100Gi"), Some("1Gi")),
            // Little reported as capacity, yet a 5Gi volume fits.
            capacity("b", "anywhere", Some(zb), Some("1Gi"), Some("5Gi")),
        ],
    );
    let got = capacity_statuses(vols, "data");
    assert!(not_enough_space(&got[0]), "{:?}", got[0]);
    assert!(got[1].is_success(), "{:?}", got[1]);
}

#[test]
fn capacity_without_matching_topology_or_size_does_not_count() {
    let elsewhere: &[(&str, &str)] = &[(ZONE, "zc")];
    let vols = capacity_store(
        Some(Some(true)),
        vec![
            capacity("elsewhere", "anywhere", Some(elsewhere), Some("10Gi"), None),
            // No nodeTopology: reachable from no node.
            capacity("nowhere", "anywhere", None, Some("10Gi"), None),
            // Neither size set.
            capacity("unknown", "anywhere", Some(&[]), None, None),
        ],
    );
    let got = capacity_statuses(vols.clone(), "data");
    assert!(got.iter().all(not_enough_space), "{got:?}");
    // A claim without a storage request is never checked.
    assert!(
        capacity_statuses(vols, "no-request")
            .iter()
            .all(Status::is_success)
    );
}

#[test]
fn capacity_is_only_checked_for_drivers_that_opt_in() {
    // No CSIDriver object, storageCapacity unset, storageCapacity false: no check even
    // though no capacity is reported anywhere.
    for driver in [None, Some(None), Some(Some(false))] {
        let got = capacity_statuses(capacity_store(driver, vec![]), "data");
        assert!(got.iter().all(Status::is_success), "{driver:?}: {got:?}");
    }
    let got = capacity_statuses(capacity_store(Some(Some(true)), vec![]), "data");
    assert!(got.iter().all(not_enough_space), "{got:?}");
}

#[test]
fn not_enough_space_comes_with_other_reasons_in_upstream_order() {
    // A bound volume pinned to zone za plus a claim to provision with no capacity:
    // node b has both a node conflict and too little storage.
    let mut vols = capacity_store(Some(Some(true)), vec![]);
    vols.put_pvc(pvc("ns", "pinned").bound("zonal-pv").build());
    vols.put_pv(
        pv("zonal-pv", "", "1Gi")
            .node_affinity(ZONE, &["za"])
            .claim("ns", "pinned")
            .build(),
    );
    let pod = PodInfo::test("ns", "p").pvc("pinned").pvc("data").build();
    let got = run(&pod, vols).statuses;
    assert_eq!(got[0].reasons(), [ERR_REASON_NOT_ENOUGH_SPACE]);
    assert_eq!(
        got[1].reasons(),
        [ERR_REASON_NODE_CONFLICT, ERR_REASON_NOT_ENOUGH_SPACE]
    );
}

#[test]
fn capacity_and_driver_changes_requeue_pods() {
    let events = VolumeBinding::new(None).unwrap().events_to_register();
    // Upstream registers CSIDriver updates only (a driver's capacity check being turned off).
    for (r, action) in [
        (EventResource::CSIDriver, ActionType::UPDATE),
        (
            EventResource::CSIStorageCapacity,
            ActionType::ADD | ActionType::UPDATE,
        ),
    ] {
        assert!(
            events.iter().any(|e| e.resource == r && e.action == action),
            "{r:?}"
        );
    }
}

/// Filter statuses of `pod` on `nodes` with `vols`.
fn statuses_on(pod: &PodInfo, nodes: Vec<NodeInfo>, vols: VolumeObjects) -> Vec<Status> {
    let pl = VolumeBinding::new(None).unwrap();
    let snap = Snapshot::from_node_infos(nodes).with_volumes(vols);
    let mut state = CycleState::new();
    let pre = pl.pre_filter(&mut state, pod, &snap);
    assert!(pre.1.is_success(), "{:?}", pre.1);
    snap.node_infos()
        .iter()
        .map(|n| pl.filter(&state, pod, n))
        .collect()
}

#[test]
fn a_bound_in_tree_ebs_volume_is_checked_as_its_csi_volume_where_migrated() {
    use crate::types::testing::volumes::{csi_node, csi_node_migrated};
    use crate::types::volume::AWS_EBS_PLUGIN;
    const BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
    const EBS_ZONE: &str = "topology.ebs.csi.aws.com/zone";
    // The volume was made when nodes carried the beta zone label; the nodes now carry only
    // the EBS driver's topology label (node "old" still has the beta one).
    let vols = |migrated_on: &[&str]| {
        let mut v = store(
            vec![pvc("ns", "data").bound("ebs-pv").build()],
            vec![
                pv("ebs-pv", "", "1Gi")
                    .aws_ebs("aws://us-east-1a/vol-0123")
                    .node_affinity(BETA_ZONE, &["us-east-1a"])
                    .claim("ns", "data")
                    .build(),
            ],
            vec![],
        );
        for n in ["csi-a", "csi-b", "old"] {
            v.put_csi_node(if migrated_on.contains(&n) {
                csi_node_migrated(n, &[("ebs.csi.aws.com", None)], &[AWS_EBS_PLUGIN])
            } else {
                csi_node(n, &[("ebs.csi.aws.com", None)])
            });
        }
        v
    };
    let nodes = || {
        vec![
            NodeInfo::test("csi-a")
                .label(EBS_ZONE, "us-east-1a")
                .build(),
            NodeInfo::test("csi-b")
                .label(EBS_ZONE, "us-east-1b")
                .build(),
            NodeInfo::test("old").label(BETA_ZONE, "us-east-1a").build(),
        ]
    };
    let pod = PodInfo::test("ns", "p").pvc("data").build();
    let ok = |s: &Status| s.is_success();
    let conflict = |s: &Status| s.message() == ERR_REASON_NODE_CONFLICT;

    // Migrated everywhere: the zone is read from the driver's key.
    let got = statuses_on(&pod, nodes(), vols(&["csi-a", "csi-b", "old"]));
    assert!(ok(&got[0]), "{got:?}");
    assert!(conflict(&got[1]), "{got:?}");
    assert!(conflict(&got[2]), "{got:?}");

    // Not migrated anywhere: the affinity is checked as written.
    let got = statuses_on(&pod, nodes(), vols(&[]));
    assert!(conflict(&got[0]), "{got:?}");
    assert!(conflict(&got[1]), "{got:?}");
    assert!(ok(&got[2]), "{got:?}");

    // A node without a CSINode is never migrated.
    let mut v = vols(&["csi-a", "csi-b", "old"]);
    v.delete_csi_node("csi-a");
    let got = statuses_on(&pod, nodes(), v);
    assert!(conflict(&got[0]), "{got:?}");
}

#[test]
fn an_untranslatable_in_tree_volume_is_an_error_on_migrated_nodes_only() {
    use crate::types::testing::volumes::csi_node_migrated;
    use crate::types::volume::AWS_EBS_PLUGIN;
    let mut vols = store(
        vec![pvc("ns", "data").bound("ebs-pv").build()],
        vec![
            pv("ebs-pv", "", "1Gi")
                .aws_ebs("aws://za/not-a-volume-id")
                .claim("ns", "data")
                .build(),
        ],
        vec![],
    );
    vols.put_csi_node(csi_node_migrated("a", &[], &[AWS_EBS_PLUGIN]));
    let pod = PodInfo::test("ns", "p").pvc("data").build();
    let got = run(&pod, vols).statuses;
    assert_eq!(got[0].code(), Code::Error);
    assert!(
        got[0].message().contains("could not translate pv"),
        "{got:?}"
    );
    assert!(got[1].is_success(), "{got:?}");
}
