//! Cache event handling and incremental snapshots.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use scheduler_core::cache::{Cache, CacheError, Snapshot};
use scheduler_core::types::*;

fn node(name: &str) -> Node {
    NodeInfo::test(name)
        .cpu("4")
        .memory("8Gi")
        .pods(110)
        .build_node()
}

fn zoned(name: &str, zone: &str) -> Node {
    NodeInfo::test(name)
        .cpu("4")
        .label("topology.kubernetes.io/zone", zone)
        .build_node()
}

fn pod(name: &str, node: &str, cpu: &str) -> Arc<PodInfo> {
    Arc::new(PodInfo::test("ns", name).cpu(cpu).node(node).build())
}

fn key(name: &str) -> PodKey {
    PodKey::new("ns", name)
}

fn names(s: &Snapshot) -> Vec<&str> {
    s.node_infos().iter().map(|n| n.name.as_str()).collect()
}

#[test]
fn add_update_remove_node() {
    let mut c = Cache::new();
    c.add_node(&node("n1"));
    c.add_node(&node("n2"));
    assert_eq!(c.node_count(), 2);
    let s = c.snapshot();
    assert_eq!(s.num_nodes(), 2);
    assert_eq!(s.get("n1").unwrap().allocatable.milli_cpu, 4000);

    c.update_node(&NodeInfo::test("n1").cpu("8").label("a", "b").build_node());
    let s = c.snapshot();
    assert_eq!(s.get("n1").unwrap().allocatable.milli_cpu, 8000);
    assert_eq!(
        s.get("n1").unwrap().labels.get("a").map(String::as_str),
        Some("b")
    );

    c.remove_node("n1").unwrap();
    assert_eq!(c.node_count(), 1);
    assert!(c.node_info("n1").is_none(), "no pods left, entry dropped");
    assert_eq!(
        c.remove_node("n1"),
        Err(CacheError::NodeNotFound("n1".into()))
    );
    let s = c.snapshot();
    assert_eq!(names(&s), ["n2"]);
    assert!(s.get("n1").is_none());
}

#[test]
fn update_of_unknown_node_adds_it() {
    let mut c = Cache::new();
    c.update_node(&node("n1"));
    assert_eq!(c.node_count(), 1);
    c.add_node(&node("n1"));
    assert_eq!(c.node_count(), 1, "re-adding does not duplicate");
}

#[test]
fn pods_are_aggregated_per_node() {
    let mut c = Cache::new();
    c.add_node(&node("n1"));
    c.add_pod(pod("a", "n1", "1")).unwrap();
    c.add_pod(pod("b", "n1", "500m")).unwrap();
    assert_eq!(c.pod_count(), 2);
    assert_eq!(
        c.add_pod(pod("a", "n1", "1")),
        Err(CacheError::AlreadyAdded(key("a")))
    );
    assert_eq!(c.node_info("n1").unwrap().requested.milli_cpu, 1500);

    c.update_pod(&key("a"), pod("a", "n1", "2")).unwrap();
    assert_eq!(c.node_info("n1").unwrap().requested.milli_cpu, 2500);
    assert!(matches!(
        c.update_pod(&key("a"), pod("a", "n2", "2")),
        Err(CacheError::NodeMismatch { .. })
    ));
    assert_eq!(
        c.update_pod(&key("zz"), pod("zz", "n1", "1")),
        Err(CacheError::PodNotFound(key("zz")))
    );

    let removed = c.remove_pod(&key("b")).unwrap();
    assert_eq!(removed.requests.milli_cpu, 500);
    assert_eq!(c.node_info("n1").unwrap().requested.milli_cpu, 2000);
    assert_eq!(
        c.remove_pod(&key("b")).err(),
        Some(CacheError::PodNotFound(key("b")))
    );
    let unbound = Arc::new(PodInfo::test("ns", "u").build());
    assert_eq!(c.add_pod(unbound), Err(CacheError::PodNotBound(key("u"))));
}

#[test]
fn pod_on_unknown_node_waits_on_a_placeholder() {
    let mut c = Cache::new();
    c.add_pod(pod("a", "ghost", "1")).unwrap();
    assert_eq!(c.node_count(), 0);
    let placeholder = c.node_info("ghost").unwrap();
    assert!(!placeholder.has_node());
    assert_eq!(placeholder.requested.milli_cpu, 1000);
    assert_eq!(
        c.snapshot().num_nodes(),
        0,
        "placeholders are not schedulable nodes"
    );

    c.add_node(&node("ghost"));
    let s = c.snapshot();
    assert_eq!(s.num_nodes(), 1);
    assert_eq!(s.get("ghost").unwrap().requested.milli_cpu, 1000);
    assert_eq!(s.get("ghost").unwrap().pods.len(), 1);

    // Node deleted before its pods: the entry survives until the last pod goes.
    c.remove_node("ghost").unwrap();
    assert_eq!(c.node_count(), 0);
    assert!(c.node_info("ghost").is_some());
    assert_eq!(c.snapshot().num_nodes(), 0);
    c.remove_pod(&key("a")).unwrap();
    assert!(c.node_info("ghost").is_none());
    assert!(c.dump().nodes.is_empty());
}

#[test]
fn assume_forget_and_confirm() {
    let mut c = Cache::new();
    c.add_node(&node("n1"));
    c.add_node(&node("n2"));
    let p = Arc::new(PodInfo::test("ns", "p").cpu("1").build());

    c.assume_pod(p.clone(), "n1").unwrap();
    assert!(c.is_assumed(&key("p")));
    assert_eq!(
        c.get_pod(&key("p")).unwrap().node_name.as_deref(),
        Some("n1")
    );
    assert_eq!(
        c.node_info("n1").unwrap().requested.milli_cpu,
        1000,
        "assumed pods count"
    );
    assert_eq!(
        c.assume_pod(p.clone(), "n2"),
        Err(CacheError::AlreadyInCache(key("p")))
    );
    assert!(matches!(
        c.update_pod(&key("p"), pod("p", "n1", "1")),
        Err(CacheError::PodAssumed(_))
    ));
    assert!(c.finish_binding(&key("p")));
    assert!(c.is_binding_finished(&key("p")));

    // Bind failed.
    c.forget_pod(&key("p")).unwrap();
    assert_eq!(c.pod_count(), 0);
    assert_eq!(c.node_info("n1").unwrap().requested.milli_cpu, 0);
    assert_eq!(
        c.forget_pod(&key("p")).err(),
        Some(CacheError::PodNotFound(key("p")))
    );

    // Bind succeeded: the informer's add confirms the assumed pod.
    c.assume_pod(p.clone(), "n1").unwrap();
    c.add_pod(pod("p", "n1", "1")).unwrap();
    assert!(!c.is_assumed(&key("p")));
    assert!(!c.finish_binding(&key("p")));
    assert_eq!(
        c.node_info("n1").unwrap().requested.milli_cpu,
        1000,
        "not counted twice"
    );
    assert_eq!(
        c.forget_pod(&key("p")).err(),
        Some(CacheError::NotAssumed(key("p")))
    );
    assert!(c.dump().assumed_pods.is_empty());

    // Confirmed on another node than assumed: it moves.
    c.remove_pod(&key("p")).unwrap();
    c.assume_pod(p, "n1").unwrap();
    assert_eq!(c.dump().assumed_pods.len(), 1);
    c.add_pod(pod("p", "n2", "1")).unwrap();
    assert_eq!(c.node_info("n1").unwrap().requested.milli_cpu, 0);
    assert_eq!(c.node_info("n2").unwrap().requested.milli_cpu, 1000);
    assert_eq!(c.dump().pods.get(&key("p")).map(String::as_str), Some("n2"));
}

#[test]
fn snapshot_copies_only_changed_nodes() {
    let mut c = Cache::new();
    for i in 0..4 {
        c.add_node(&node(&format!("n{i}")));
    }
    let mut s = Snapshot::new();
    let u = c.update_snapshot(&mut s);
    assert_eq!((u.changed_nodes, u.rebuilt_node_list), (4, true));
    let before: Vec<Arc<NodeInfo>> = s.node_infos().to_vec();
    let order = names(&s).join(",");

    c.add_pod(pod("a", "n2", "1")).unwrap();
    let u = c.update_snapshot(&mut s);
    assert_eq!((u.changed_nodes, u.rebuilt_node_list), (1, false));
    assert_eq!(
        names(&s).join(","),
        order,
        "order stable without adds/removes"
    );
    for (old, new) in before.iter().zip(s.node_infos()) {
        if new.name == "n2" {
            assert!(!Arc::ptr_eq(old, new));
            assert_eq!(new.requested.milli_cpu, 1000);
            assert_eq!(
                old.requested.milli_cpu, 0,
                "the old snapshot entry is untouched"
            );
        } else {
            assert!(Arc::ptr_eq(old, new), "{} was copied", new.name);
        }
    }
    assert!(Arc::ptr_eq(
        s.get("n2").unwrap(),
        &s.node_infos()[names(&s).iter().position(|n| *n == "n2").unwrap()]
    ));

    // Nothing changed: nothing copied.
    let g = s.generation();
    let u = c.update_snapshot(&mut s);
    assert_eq!(u.changed_nodes, 0);
    assert_eq!(s.generation(), g);

    // A second, older snapshot still catches up on everything it missed.
    let mut old = Snapshot::new();
    c.update_snapshot(&mut old);
    c.add_pod(pod("b", "n0", "1")).unwrap();
    c.add_pod(pod("c", "n1", "1")).unwrap();
    assert_eq!(c.update_snapshot(&mut s).changed_nodes, 2);
    assert_eq!(c.update_snapshot(&mut old).changed_nodes, 2);
    assert_eq!(old.get("n1").unwrap().requested.milli_cpu, 1000);
}

#[test]
fn snapshot_handles_added_and_removed_nodes() {
    let mut c = Cache::new();
    c.add_node(&node("n1"));
    c.add_node(&node("n2"));
    let mut s = c.snapshot();
    let n1 = s.get("n1").unwrap().clone();

    c.remove_node("n2").unwrap();
    let u = c.update_snapshot(&mut s);
    assert!(u.rebuilt_node_list);
    assert_eq!(names(&s), ["n1"]);
    assert!(s.get("n2").is_none());
    assert!(
        Arc::ptr_eq(s.get("n1").unwrap(), &n1),
        "rebuild reuses unchanged nodes"
    );

    // Remove one and add another between two updates: same count, still detected.
    c.remove_node("n1").unwrap();
    c.add_node(&node("n3"));
    c.update_snapshot(&mut s);
    assert_eq!(names(&s), ["n3"]);
    assert!(s.get("n1").is_none());

    // Removing a node that still has pods also drops it from the snapshot.
    c.add_pod(pod("a", "n3", "1")).unwrap();
    c.update_snapshot(&mut s);
    c.remove_node("n3").unwrap();
    c.update_snapshot(&mut s);
    assert_eq!(s.num_nodes(), 0);
    // And it comes back with its pods when the node reappears.
    c.add_node(&node("n3"));
    c.update_snapshot(&mut s);
    assert_eq!(s.get("n3").unwrap().requested.milli_cpu, 1000);
}

#[test]
fn snapshot_orders_nodes_round_robin_across_zones() {
    let mut c = Cache::new();
    for (n, z) in [
        ("a1", "a"),
        ("a2", "a"),
        ("b1", "b"),
        ("a3", "a"),
        ("b2", "b"),
        ("c1", "c"),
    ] {
        c.add_node(&zoned(n, z));
    }
    let mut s = c.snapshot();
    assert_eq!(names(&s), ["a1", "b1", "c1", "a2", "b2", "a3"]);
    // Moving a node to another zone is honoured at the next rebuild.
    c.update_node(&zoned("a1", "c"));
    c.add_node(&zoned("d1", "d"));
    c.update_snapshot(&mut s);
    assert_eq!(names(&s), ["a2", "b1", "c1", "d1", "a3", "b2", "a1"]);
}

#[test]
fn image_spread_is_counted_per_node() {
    let mut c = Cache::new();
    let with_images = |name: &str, imgs: &[&str]| {
        imgs.iter()
            .fold(NodeInfo::test(name), |b, i| b.image(i, 1000))
            .build_node()
    };
    c.add_node(&with_images("n1", &["nginx:1", "redis:7"]));
    c.add_node(&with_images("n2", &["nginx:1"]));
    let mut s = c.snapshot();
    assert_eq!(
        (
            s.image_num_nodes("nginx:1"),
            s.image_num_nodes("redis:7"),
            s.image_num_nodes("x")
        ),
        (2, 1, 0)
    );

    c.update_node(&with_images("n2", &["redis:7"]));
    c.update_snapshot(&mut s);
    assert_eq!(
        (s.image_num_nodes("nginx:1"), s.image_num_nodes("redis:7")),
        (1, 2)
    );
    c.remove_node("n1").unwrap();
    let old = s.clone();
    c.update_snapshot(&mut s);
    assert_eq!(
        (s.image_num_nodes("nginx:1"), s.image_num_nodes("redis:7")),
        (0, 1)
    );
    assert_eq!(
        old.image_num_nodes("nginx:1"),
        1,
        "older snapshots keep their counts"
    );
    assert_eq!(c.image_num_nodes("redis:7"), 1);
}

#[test]
fn runtime_classes_reach_the_snapshot() {
    let rc = |name: &str, handler: &str| RuntimeClass {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        handler: handler.into(),
        ..Default::default()
    };
    let mut c = Cache::new();
    c.add_runtime_class(&rc("kata", "kata-qemu"));
    let mut s = c.snapshot();
    assert_eq!(s.runtime_class("kata").unwrap().handler, "kata-qemu");
    c.update_runtime_class(&rc("kata", "kata-fc"));
    assert_eq!(
        s.runtime_class("kata").unwrap().handler,
        "kata-qemu",
        "snapshot is isolated"
    );
    c.update_snapshot(&mut s);
    assert_eq!(s.runtime_class("kata").unwrap().handler, "kata-fc");
    assert!(c.remove_runtime_class("kata"));
    assert!(!c.remove_runtime_class("kata"));
    c.update_snapshot(&mut s);
    assert!(s.runtime_class("kata").is_none());
}

#[test]
fn snapshot_affinity_lists_follow_pods() {
    use k8s_openapi::api::core::v1 as k8s;
    let affinity = k8s::Affinity {
        pod_affinity: Some(Default::default()),
        ..Default::default()
    };
    let mut c = Cache::new();
    c.add_node(&node("n1"));
    c.add_node(&node("n2"));
    let mut s = c.snapshot();
    assert_eq!(s.have_pods_with_affinity().count(), 0);
    c.add_pod(Arc::new(
        PodInfo::test("ns", "a")
            .node("n2")
            .affinity(affinity)
            .build(),
    ))
    .unwrap();
    c.update_snapshot(&mut s);
    let with: Vec<&str> = s
        .have_pods_with_affinity()
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(with, ["n2"]);
    assert_eq!(s.have_pods_with_required_anti_affinity().count(), 0);
    c.remove_pod(&key("a")).unwrap();
    c.update_snapshot(&mut s);
    assert_eq!(s.have_pods_with_affinity().count(), 0);
}

#[test]
fn snapshot_from_node_infos_for_plugin_tests() {
    let s = Snapshot::from_node_infos([
        NodeInfo::test("x").image("img:1", 5).build(),
        NodeInfo::test("y").image("img:1", 5).build(),
    ]);
    assert_eq!(names(&s), ["x", "y"]);
    assert_eq!(s.image_num_nodes("img:1"), 2);
    assert!(s.get("y").is_some());
}

/// 5,000 nodes and 30,000 pods; one pod changes; the next snapshot update replaces exactly
/// that pod's node and shares every other NodeInfo with the previous snapshot.
#[test]
fn large_cluster_snapshot_touches_one_node() {
    const NODES: usize = 5_000;
    const PODS: usize = 30_000;
    let mut c = Cache::new();
    for i in 0..NODES {
        c.add_node(&zoned(&format!("node-{i}"), &format!("zone-{}", i % 3)));
    }
    for i in 0..PODS {
        c.add_pod(pod(
            &format!("p{i}"),
            &format!("node-{}", i % NODES),
            "100m",
        ))
        .unwrap();
    }
    let mut s = c.snapshot();
    assert_eq!(s.num_nodes(), NODES);
    let before: Vec<Arc<NodeInfo>> = s.node_infos().to_vec();

    c.update_pod(&key("p7"), pod("p7", "node-7", "200m"))
        .unwrap();
    let u = c.update_snapshot(&mut s);
    assert_eq!((u.changed_nodes, u.rebuilt_node_list), (1, false));
    let changed: Vec<&str> = before
        .iter()
        .zip(s.node_infos())
        .filter(|(a, b)| !Arc::ptr_eq(a, b))
        .map(|(_, b)| b.name.as_str())
        .collect();
    assert_eq!(changed, ["node-7"]);
    assert_eq!(s.get("node-7").unwrap().requested.milli_cpu, 5 * 100 + 200);
    assert_eq!(c.pod_count(), PODS);
}

fn pdb(
    ns: &str,
    name: &str,
    app: &str,
    allowed: i32,
) -> k8s_openapi::api::policy::v1::PodDisruptionBudget {
    use k8s_openapi::api::policy::v1::{PodDisruptionBudgetSpec, PodDisruptionBudgetStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    k8s_openapi::api::policy::v1::PodDisruptionBudget {
        metadata: ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            selector: Some(LabelSelector {
                match_labels: Some([("app".to_string(), app.to_string())].into()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: Some(PodDisruptionBudgetStatus {
            disruptions_allowed: Some(allowed),
            ..Default::default()
        }),
    }
}

#[test]
fn pdbs_are_kept_sorted_and_shared_with_snapshots_until_they_change() {
    let mut c = Cache::new();
    c.add_pdb(&pdb("b", "web", "web", 1));
    c.add_pdb(&pdb("a", "db", "db", 0));
    let mut s = c.snapshot();
    let keys = |s: &Snapshot| -> Vec<(String, String, i32)> {
        s.pdbs()
            .iter()
            .map(|p| (p.namespace.clone(), p.name.clone(), p.disruptions_allowed))
            .collect()
    };
    assert_eq!(
        keys(&s),
        [("a".into(), "db".into(), 0), ("b".into(), "web".into(), 1)]
    );

    // No PDB change: the snapshot keeps the very same list.
    let before = s.pdbs().as_ptr();
    c.add_node(&node("n1"));
    c.update_snapshot(&mut s);
    assert_eq!(s.pdbs().as_ptr(), before);

    // An update replaces the entry; the old snapshot keeps its copy.
    let old = c.snapshot();
    c.update_pdb(&pdb("b", "web", "web", 0));
    c.update_snapshot(&mut s);
    assert_eq!(keys(&s)[1].2, 0);
    assert_eq!(keys(&old)[1].2, 1);

    assert!(c.remove_pdb("a", "db"));
    assert!(!c.remove_pdb("a", "db"));
    c.update_snapshot(&mut s);
    assert_eq!(keys(&s), [("b".into(), "web".into(), 0)]);
    assert_eq!(c.pdbs().len(), 1);
}

#[test]
fn storage_objects_are_copy_on_write_and_shared_with_snapshots() {
    use scheduler_core::types::testing::volumes::{pv, pvc, storage_class_api};

    let mut cache = Cache::new();
    cache.add_pvc(&pvc("ns", "c").class("local").request("1Gi").api());
    cache.add_pv(&pv("v", "local", "5Gi").local_on("n1").api());
    cache.add_storage_class(&storage_class_api(
        "local",
        "kubernetes.io/no-provisioner",
        true,
        &[],
    ));
    let mut snap = Snapshot::new();
    cache.update_snapshot(&mut snap);
    let before = snap.clone();
    assert_eq!(
        snap.volumes().pvc("ns", "c").unwrap().requested_storage,
        1 << 30
    );
    assert!(
        snap.volumes()
            .storage_class("local")
            .unwrap()
            .wait_for_first_consumer()
    );

    // A resync with identical objects copies nothing.
    cache.update_pvc(&pvc("ns", "c").class("local").request("1Gi").api());
    cache.update_snapshot(&mut snap);
    assert!(snap.volumes().shares_all(before.volumes()));

    // A change is seen by the next snapshot only; the old one keeps its view.
    cache.update_pv(&pv("v", "local", "7Gi").local_on("n1").api());
    cache.update_snapshot(&mut snap);
    assert!(!snap.volumes().shares_all(before.volumes()));
    assert_eq!(snap.volumes().pv("v").unwrap().capacity, 7 << 30);
    assert_eq!(before.volumes().pv("v").unwrap().capacity, 5 << 30);

    // Assumed decisions: the volume is claimed and the claim gets its node.
    cache.assume_pod_volumes(
        &PodVolumes {
            static_bindings: vec![StaticBinding {
                pv: "v".into(),
                pvc_namespace: "ns".into(),
                pvc_name: "c".into(),
                storage_class: "local".into(),
                requested: 1 << 30,
                capacity: 7 << 30,
            }],
            dynamic_provisions: vec![("ns".into(), "c".into())],
        },
        "n1",
    );
    let claim = cache.volumes().pv("v").unwrap().claim_ref.clone().unwrap();
    assert_eq!((claim.namespace.as_str(), claim.name.as_str()), ("ns", "c"));
    assert_eq!(claim.uid, "uid-ns-c");
    assert_eq!(
        cache
            .volumes()
            .pvc("ns", "c")
            .unwrap()
            .selected_node
            .as_deref(),
        Some("n1")
    );

    // A failed binding rolls both back to what the informer said.
    let decided = PodVolumes {
        static_bindings: vec![StaticBinding {
            pv: "v".into(),
            pvc_namespace: "ns".into(),
            pvc_name: "c".into(),
            storage_class: "local".into(),
            requested: 1 << 30,
            capacity: 7 << 30,
        }],
        dynamic_provisions: vec![("ns".into(), "c".into())],
    };
    cache.forget_pod_volumes(&decided);
    assert!(cache.volumes().pv("v").unwrap().claim_ref.is_none());
    assert!(
        cache
            .volumes()
            .pvc("ns", "c")
            .unwrap()
            .selected_node
            .is_none()
    );
    // Once the informer reports the objects, a later rollback has nothing to restore.
    cache.assume_pod_volumes(&decided, "n1");
    cache.update_pv(
        &pv("v", "local", "7Gi")
            .local_on("n1")
            .claim("ns", "c")
            .api(),
    );
    cache.forget_pod_volumes(&decided);
    assert!(cache.volumes().pv("v").unwrap().claim_ref.is_some());
    assert!(
        cache
            .volumes()
            .pvc("ns", "c")
            .unwrap()
            .selected_node
            .is_none()
    );

    assert!(cache.remove_pv("v"));
    assert!(!cache.remove_pv("v"));
    assert!(cache.remove_pvc("ns", "c"));
    assert!(cache.remove_storage_class("local"));
    cache.update_snapshot(&mut snap);
    assert!(snap.volumes().pv("v").is_none());
}
