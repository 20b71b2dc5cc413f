//! simulate's unit tests: the built-in case study, the report, and the equivalence with the
//! framework run by hand.

use super::*;

fn run_case_study() -> Report {
    let (objects, loaded) = case_study();
    run(&objects, &loaded, 1).unwrap()
}

#[test]
fn case_study_puts_gpu_pods_on_gpu_nodes_and_others_elsewhere() {
    let r = run_case_study();
    for i in 1..=6 {
        let node = r
            .node_of(&format!("default/web-{i}"))
            .unwrap_or_else(|| panic!("web-{i}: {:?}", r.outcome_of(&format!("default/web-{i}"))));
        assert!(
            node.starts_with("cpu-") && node != "cpu-8" && node != "cpu-9",
            "web-{i} on {node}"
        );
    }
    for i in 1..=4 {
        let node = r
            .node_of(&format!("ml/train-{i}"))
            .unwrap_or_else(|| panic!("train-{i}: {:?}", r.outcome_of(&format!("ml/train-{i}"))));
        assert!(node.starts_with("gpu-"), "train-{i} on {node}");
    }
    for i in 1..=2 {
        let node = r.node_of(&format!("sandbox/untrusted-{i}")).unwrap();
        assert!(
            node == "cpu-8" || node == "cpu-9",
            "untrusted-{i} on {node}"
        );
    }
    // Batch pods use the bin-packing profile and pack onto one node.
    let batch: Vec<_> = (1..=3)
        .map(|i| r.node_of(&format!("batch/batch-{i}")).unwrap().to_string())
        .collect();
    assert!(batch.iter().all(|n| n == &batch[0]), "{batch:?}");
    assert!(
        r.outcomes
            .iter()
            .filter(|o| o.pod.starts_with("batch/batch-"))
            .all(|o| o.profile.as_deref() == Some("bin-packing"))
    );
}

#[test]
fn case_study_explains_every_pod_that_did_not_land() {
    let r = run_case_study();
    match r.outcome_of("ml/train-huge").unwrap() {
            PodResult::Unschedulable { message } => assert!(
                // The gVisor nodes' taint is checked before the RuntimeClass filter (default
                // plugin order), so those 2 nodes report the taint.
                message.starts_with(
                    "0/15 nodes are available: 2 node(s) had untolerated taint(s), 6 Insufficient nvidia.com/gpu, 7 node(s) didn't match RuntimeClass."
                ),
                "{message}"
            ),
            other => panic!("{other:?}"),
        }
    assert_eq!(
            r.outcome_of("sandbox/kata-job"),
            Some(&PodResult::Unschedulable {
                message: "0/15 nodes are available: runtimeclass \"kata\" not found. preemption: 0/15 nodes are available: 15 Preemption is not helpful for scheduling..".into()
            })
        );
    assert!(
        matches!(
            r.outcome_of("batch/waiting-for-quota"),
            Some(PodResult::Gated { .. })
        ),
        "{:?}",
        r.outcome_of("batch/waiting-for-quota")
    );
    assert!(matches!(
        r.outcome_of("batch/other-scheduler"),
        Some(PodResult::Ignored { .. })
    ));
    // Bound pods are not outcomes; they show up in node usage.
    assert!(r.outcome_of("monitoring/metrics-agent").is_none());
    let gpu1 = r.nodes.iter().find(|n| n.node == "gpu-1").unwrap();
    assert!(gpu1.extended["nvidia.com/gpu"].0 >= 2);
}

/// The DRA pod's claim is made from its template, and it gets an L4 GPU (only gpu-6 has
/// them) through the allocator.
#[test]
fn case_study_dra_pod_gets_an_l4_from_its_template() {
    let r = run_case_study();
    assert_eq!(r.node_of("ml/infer-dra"), Some("gpu-6"));
    let o = r.outcomes.iter().find(|o| o.pod == "ml/infer-dra").unwrap();
    assert_eq!(o.devices.len(), 1, "{:?}", o.devices);
    let d = &o.devices[0];
    assert_eq!(d.claim, "ml/infer-dra-gpu-sim");
    assert_eq!(d.request, "gpu");
    assert_eq!(
        (d.driver.as_str(), d.pool.as_str()),
        ("gpu.example.com", "gpu-6")
    );
    assert!(d.device.starts_with("gpu-"), "{d:?}");
    assert!(!d.shared);
    assert_eq!(
        d.to_string(),
        format!(
            "ml/infer-dra-gpu-sim gpu: gpu.example.com/gpu-6/{}",
            d.device
        )
    );
    // Pods without claims list no devices.
    assert!(
        r.outcomes
            .iter()
            .filter(|o| o.pod != "ml/infer-dra")
            .all(|o| o.devices.is_empty())
    );
}

#[test]
fn gvisor_overhead_is_counted_on_the_node() {
    let r = run_case_study();
    let sandbox_cpu: i64 = r
        .nodes
        .iter()
        .filter(|n| n.node == "cpu-8" || n.node == "cpu-9")
        .map(|n| n.cpu_milli)
        .sum();
    // Two pods of 500m each plus 250m RuntimeClass overhead each.
    assert_eq!(sandbox_cpu, 1500);
}

#[test]
fn the_same_seed_gives_the_same_report() {
    let (objects, loaded) = case_study();
    let r = run(&objects, &loaded, 1).unwrap();
    let again = run(&objects, &loaded, 1).unwrap();
    assert_eq!(r, again, "same seed, same result");
    assert_eq!(r.scheduled(), 6 + 4 + 2 + 3 + 1);
}

/// Two full nodes; the one whose lowest-priority pod is covered by an exhausted budget is
/// spared although evicting there would otherwise be cheapest.
const PREEMPTION_CLUSTER: &str = r#"
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 10
---
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: '2', memory: 4Gi, pods: '10'}}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
status: {allocatable: {cpu: '2', memory: 4Gi, pods: '10'}}
---
apiVersion: v1
kind: Pod
metadata: {name: filler-a, namespace: default}
spec:
  nodeName: n1
  priorityClassName: low
  containers: [{name: c, image: x, resources: {requests: {cpu: 1500m}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: filler-b, namespace: default, labels: {app: protected}}
spec:
  nodeName: n2
  priority: 5
  containers: [{name: c, image: x, resources: {requests: {cpu: 1500m}}}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: protected, namespace: default}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: protected}}
status: {disruptionsAllowed: 0, currentHealthy: 1, desiredHealthy: 1, expectedPods: 1}
---
apiVersion: v1
kind: Pod
metadata: {name: urgent, namespace: default}
spec:
  priorityClassName: high
  containers: [{name: c, image: x, resources: {requests: {cpu: '1'}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: polite, namespace: default}
spec:
  priorityClassName: high
  preemptionPolicy: Never
  containers: [{name: c, image: x, resources: {requests: {cpu: 1900m}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: small, namespace: default}
spec:
  priorityClassName: low
  containers: [{name: c, image: x, resources: {requests: {cpu: 500m}}}]
"#;

#[test]
fn a_high_priority_pod_preempts_and_is_retried_on_its_nominated_node() {
    let objects = load_str(PREEMPTION_CLUSTER, "preempt.yaml").unwrap();
    let loaded = crate::config::load_str(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
        "c.yaml",
    )
    .unwrap();
    let registry = Registry::in_tree();
    let r = run_with_registry(&objects, &loaded, &registry, 1).unwrap();
    assert_eq!(
        r.outcome_of("default/urgent"),
        Some(&PodResult::Scheduled {
            node: "n1".into(),
            preempted: vec!["default/filler-a".into()],
        })
    );
    assert_eq!(
            r.outcome_of("default/polite"),
            Some(&PodResult::Unschedulable {
                message: "0/2 nodes are available: 2 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never..".into()
            })
        );
    // The victim is gone from the cache and its room went to the preemptor.
    assert!(r.node_of("default/small").is_some());
    let n1 = r.nodes.iter().find(|n| n.node == "n1").unwrap();
    let n2 = r.nodes.iter().find(|n| n.node == "n2").unwrap();
    assert_eq!(n1.cpu_milli + n2.cpu_milli, 1000 + 1500 + 500);
    assert_eq!(n2.pods + n1.pods, 3, "filler-b, urgent and small");
    assert_eq!(
        r,
        run_with_registry(&objects, &loaded, &registry, 1).unwrap()
    );
}

#[test]
fn unknown_priority_class_is_rejected_like_admission() {
    let text = "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: '1', memory: 1Gi, pods: '10'}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: d}\nspec: {priorityClassName: nope, containers: [{name: c, image: x}]}\n";
    let objects = load_str(text, "t.yaml").unwrap();
    let loaded = crate::config::load_str(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
        "c.yaml",
    )
    .unwrap();
    let r = run(&objects, &loaded, 1).unwrap();
    assert_eq!(
        r.outcome_of("d/p"),
        Some(&PodResult::Rejected {
            reason: "no PriorityClass with name nope was found".into()
        })
    );
}

/// Two StatefulSet replicas, each with a WaitForFirstConsumer claim; the only volumes
/// are local ones on n2 and n3 (n1 has the most room but no volume, n2 more than n3). Each
/// replica lands where a volume lives, and the second does not take the volume the first
/// was given (it would prefer roomier n2 if that volume still looked available).
const STATEFUL_CLUSTER: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}
status: {allocatable: {cpu: "6", memory: 12Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: n3, labels: {kubernetes.io/hostname: n3}}
status: {allocatable: {cpu: "2", memory: 4Gi, pods: "110"}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local-storage}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: local-n2}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: local-storage
  local: {path: /mnt/disks/a}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [n2]}]
status: {phase: Available}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: local-n3}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: local-storage
  local: {path: /mnt/disks/a}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [n3]}]
status: {phase: Available}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data-db-0, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: local-storage
  resources: {requests: {storage: 5Gi}}
status: {phase: Pending}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data-db-1, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: local-storage
  resources: {requests: {storage: 5Gi}}
status: {phase: Pending}
---
apiVersion: v1
kind: Pod
metadata: {name: db-0, namespace: default, labels: {app: db}}
spec:
  containers: [{name: db, image: postgres, resources: {requests: {cpu: 500m}}}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data-db-0}}]
---
apiVersion: v1
kind: Pod
metadata: {name: db-1, namespace: default, labels: {app: db}}
spec:
  containers: [{name: db, image: postgres, resources: {requests: {cpu: 500m}}}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data-db-1}}]
---
apiVersion: v1
kind: Pod
metadata: {name: db-2, namespace: default, labels: {app: db}}
spec:
  containers: [{name: db, image: postgres, resources: {requests: {cpu: 500m}}}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data-db-2}}]
"#;

#[test]
fn stateful_pods_follow_their_local_volumes() {
    let objects = load_str(STATEFUL_CLUSTER, "sts.yaml").unwrap();
    assert_eq!(
        (
            objects.pvs.len(),
            objects.pvcs.len(),
            objects.storage_classes.len()
        ),
        (2, 2, 1)
    );
    let loaded = crate::config::load_str(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
        "c.yaml",
    )
    .unwrap();
    let r = run(&objects, &loaded, 1).unwrap();
    assert_eq!(r.node_of("default/db-0"), Some("n2"));
    assert_eq!(r.node_of("default/db-1"), Some("n3"));
    assert_eq!(
            r.outcome_of("default/db-2"),
            Some(&PodResult::Unschedulable {
                message: "0/3 nodes are available: persistentvolumeclaim \"data-db-2\" not found. \
                          preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."
                    .into()
            })
        );
}

/// Two zones; the CSI driver reports capacity for its class only in zone b, 20Gi there
/// but volumes of at most 8Gi.
const CAPACITY_CLUSTER: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: in-a, labels: {topology.kubernetes.io/zone: a}}
status: {allocatable: {cpu: '4', memory: 8Gi, pods: '10'}}
---
apiVersion: v1
kind: Node
metadata: {name: in-b, labels: {topology.kubernetes.io/zone: b}}
status: {allocatable: {cpu: '4', memory: 8Gi, pods: '10'}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: lvm}
provisioner: lvm.csi.example.com
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: lvm.csi.example.com}
spec: {storageCapacity: true}
---
apiVersion: storage.k8s.io/v1
kind: CSIStorageCapacity
metadata: {name: lvm-b, namespace: kube-system}
storageClassName: lvm
nodeTopology: {matchLabels: {topology.kubernetes.io/zone: b}}
capacity: 20Gi
maximumVolumeSize: 8Gi
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: small, namespace: default}
spec: {accessModes: [ReadWriteOnce], storageClassName: lvm, resources: {requests: {storage: 5Gi}}}
status: {phase: Pending}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: big, namespace: default}
spec: {accessModes: [ReadWriteOnce], storageClassName: lvm, resources: {requests: {storage: 10Gi}}}
status: {phase: Pending}
---
apiVersion: v1
kind: Pod
metadata: {name: fits, namespace: default}
spec:
  containers: [{name: c, image: i}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: small}}]
---
apiVersion: v1
kind: Pod
metadata: {name: too-big, namespace: default}
spec:
  containers: [{name: c, image: i}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: big}}]
"#;

#[test]
fn provisioning_follows_reported_storage_capacity() {
    let objects = load_str(CAPACITY_CLUSTER, "cap.yaml").unwrap();
    let loaded = crate::config::from_flags(None, None).unwrap();
    let r = run(&objects, &loaded, 1).unwrap();
    assert_eq!(r.node_of("default/fits"), Some("in-b"));
    let Some(PodResult::Unschedulable { message }) = r.outcome_of("default/too-big") else {
        panic!("{:?}", r.outcome_of("default/too-big"));
    };
    assert!(
        message.starts_with("0/2 nodes are available: 2 node(s) did not have enough free storage."),
        "{message}"
    );
}

mod equivalence {
    //! simulate's placements must be exactly what the framework decides when the same pods
    //! are fed to it by hand in queue order.
    use super::*;
    use crate::cache::Cache;
    use crate::framework::{ProfileRegistry, Registry};

    fn cluster() -> String {
        let mut docs = Vec::new();
        for i in 0..12 {
            let zone = ["a", "b", "c"][i % 3];
            let cpu = 2 + (i % 4) * 2;
            docs.push(format!(
                "apiVersion: v1\nkind: Node\nmetadata: {{name: n{i}, labels: {{topology.kubernetes.io/zone: {zone}, kubernetes.io/hostname: n{i}}}}}\nstatus: {{allocatable: {{cpu: '{cpu}', memory: 16Gi, pods: '20'}}}}"
            ));
        }
        for i in 0..40 {
            let cpu = [100, 250, 500, 1000][i % 4];
            let prio = [0, 10, 100][i % 3];
            let spread = if i % 5 == 0 {
                ", topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: s}}}]"
            } else {
                ""
            };
            docs.push(format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}, namespace: d, labels: {{app: s}}}}\nspec: {{priority: {prio}{spread}, containers: [{{name: c, image: img, resources: {{requests: {{cpu: {cpu}m, memory: 256Mi}}}}}}]}}"
            ));
        }
        docs.join("\n---\n")
    }

    #[test]
    fn simulate_places_every_pod_where_the_framework_decides() {
        let objects = load_str(&cluster(), "gen.yaml").unwrap();
        let loaded = crate::config::from_flags(None, None).unwrap();
        let report = run(&objects, &loaded, 9).unwrap();

        // By hand: same cache, same frameworks, same seed, pods in QueueSort order.
        let profiles = ProfileRegistry::new(&loaded.profiles, &Registry::in_tree()).unwrap();
        let fw = profiles.for_scheduler_name("").unwrap();
        let mut cache = Cache::new();
        objects.nodes.iter().for_each(|n| cache.add_node(n));
        let mut pods: Vec<Arc<PodInfo>> = objects
            .pods
            .iter()
            .map(|p| Arc::new(PodInfo::from_pod(p)))
            .collect();
        pods.sort_by_key(|p| std::cmp::Reverse(p.priority)); // stable: file order within a priority
        let mut alg = SchedulingAlgorithm::new(0, 9);
        let mut snap = Snapshot::new();
        let mut placed = 0;
        for pod in &pods {
            cache.update_snapshot(&mut snap);
            let expected = match schedule_one(fw, &mut alg, pod, &snap, &NominatedPods::new()) {
                Decision::Bind { node, pod, .. } => {
                    cache.assume_pod(pod, &node).unwrap();
                    placed += 1;
                    Some(node)
                }
                _ => None,
            };
            assert_eq!(
                report.node_of(&pod.key().to_string()).map(str::to_string),
                expected,
                "{}",
                pod.key()
            );
        }
        assert!(
            placed > 20,
            "the scenario should place most pods, placed {placed}"
        );
        assert_eq!(report.scheduled(), placed);
    }
}

mod dump_fidelity {
    use super::*;

    fn explained(yaml: &str, pod: &str) -> (Report, crate::explain::Explanation) {
        let objects = load_str(yaml, "t.yaml").unwrap();
        let loaded = crate::config::from_flags(None, None).unwrap();
        let r = run_explained(&objects, &loaded, 3, &|k| k == pod).unwrap();
        let e = r
            .outcomes
            .iter()
            .find(|o| o.pod == pod)
            .and_then(|o| o.explanation.clone())
            .unwrap();
        (r, e)
    }

    fn score(e: &crate::explain::Explanation, node: &str, plugin: &str) -> i64 {
        e.scores_of(node)
            .unwrap()
            .plugins
            .iter()
            .find(|p| p.plugin == plugin)
            .unwrap()
            .normalized
    }

    const NODES: &str = "apiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: {kubernetes.io/hostname: n1, topology.kubernetes.io/zone: a}}\nstatus: {allocatable: {cpu: '4', memory: 8Gi, pods: '20'}}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n2, labels: {kubernetes.io/hostname: n2, topology.kubernetes.io/zone: b}}\nstatus: {allocatable: {cpu: '4', memory: 8Gi, pods: '20'}}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n3, labels: {kubernetes.io/hostname: n3, topology.kubernetes.io/zone: c}}\nstatus: {allocatable: {cpu: '4', memory: 8Gi, pods: '20'}}\n";

    #[test]
    fn namespaces_absent_from_the_dump_carry_their_name_label() {
        let yaml = format!(
            "{NODES}---\napiVersion: v1\nkind: Pod\nmetadata: {{name: db, namespace: default, labels: {{app: db}}}}\nspec: {{nodeName: n2, containers: [{{name: c, image: i}}]}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {{name: web, namespace: web}}\nspec:\n  containers: [{{name: c, image: i}}]\n  affinity:\n    podAffinity:\n      preferredDuringSchedulingIgnoredDuringExecution:\n      - weight: 100\n        podAffinityTerm:\n          labelSelector: {{matchLabels: {{app: db}}}}\n          namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: default}}}}\n          topologyKey: kubernetes.io/hostname\n"
        );
        let (r, e) = explained(&yaml, "web/web");
        assert_eq!(r.node_of("web/web"), Some("n2"));
        assert_eq!(score(&e, "n2", "InterPodAffinity"), 100);
        assert_eq!(score(&e, "n1", "InterPodAffinity"), 0);
    }

    #[test]
    fn services_in_the_dump_drive_default_spreading() {
        let pods = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: w1, namespace: d, labels: {app: w}}\nspec: {nodeName: n1, containers: [{name: c, image: i}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: w2, namespace: d, labels: {app: w}}\nspec: {nodeName: n2, containers: [{name: c, image: i}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: new, namespace: d, labels: {app: w}}\nspec: {containers: [{name: c, image: i}]}\n";
        let service = "---\napiVersion: v1\nkind: Service\nmetadata: {name: w, namespace: d}\nspec: {selector: {app: w}}\n";
        let (r, e) = explained(&format!("{NODES}{pods}{service}"), "d/new");
        assert!(r.skipped_kinds.is_empty(), "{:?}", r.skipped_kinds);
        assert_eq!(r.node_of("d/new"), Some("n3"));
        assert!(score(&e, "n3", "PodTopologySpread") > score(&e, "n1", "PodTopologySpread"));
        // Without the Service nothing selects the pods: default spreading has no constraint
        // and PodTopologySpread does not score at all.
        let (_, e) = explained(&format!("{NODES}{pods}"), "d/new");
        assert!(
            !e.score_plugins
                .iter()
                .any(|p| p.name == "PodTopologySpread"),
            "{:?}",
            e.score_plugins
        );
    }

    #[test]
    fn what_a_pod_needs_and_the_dump_lacks_is_named() {
        let yaml = format!(
            "{NODES}---\napiVersion: v1\nkind: Pod\nmetadata: {{name: postgres-0, namespace: db}}\nspec:\n  containers: [{{name: c, image: i}}]\n  volumes: [{{name: data, persistentVolumeClaim: {{claimName: data-postgres-0}}}}]\n"
        );
        let objects = load_str(&yaml, "t.yaml").unwrap();
        let loaded = crate::config::from_flags(None, None).unwrap();
        let r = run(&objects, &loaded, 1).unwrap();
        let o = r
            .outcomes
            .iter()
            .find(|o| o.pod == "db/postgres-0")
            .unwrap();
        assert!(matches!(o.result, PodResult::Unschedulable { .. }), "{o:?}");
        assert_eq!(
            o.missing_from_dump,
            vec!["PersistentVolumeClaim db/data-postgres-0 (dump persistentvolumeclaims)"]
        );
    }
}
