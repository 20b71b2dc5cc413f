//! Filter plugins' rules on a node's summary (`FilterPlugin::summary_rule`) must never
//! admit a node their `filter` rejects, and the framework must give the same status per node
//! with the summaries as without them, for pods and nodes of every kind the summarised
//! plugins look at: cordoned, tainted, full (pods, cpu, memory), extended resources.

use std::sync::Arc;

use crate::cache::Snapshot;
use crate::config;
use crate::framework::{CycleState, Framework, Registry};
use crate::types::{NodeInfo, PodInfo};

fn framework() -> Framework {
    let text = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
";
    let loaded = config::load_str(text, "test").expect("valid config");
    Framework::new(&loaded.profiles[0], &Registry::in_tree()).expect("builds")
}

fn nodes() -> Vec<NodeInfo> {
    (0..60)
        .map(|i| {
            let mut b = NodeInfo::test(&format!("n{i:02}"))
                .cpu(&format!("{}", 1 + i % 5))
                .memory(&format!("{}Gi", 1 + (i * 7) % 9))
                .pods(2 + i % 4);
            if i % 7 == 3 {
                b = b.unschedulable();
            }
            if i % 5 == 1 {
                b = b.taint("dedicated", "db", "NoSchedule");
            }
            if i % 6 == 2 {
                b = b.taint("spot", "yes", "PreferNoSchedule");
            }
            if i % 4 == 0 {
                b = b.allocatable("example.com/gpu", &format!("{}", i % 3));
            }
            if i % 9 == 4 {
                b = b.allocatable("ephemeral-storage", "10Gi");
            }
            let mut node = b.build();
            for j in 0..i % 4 {
                let running = PodInfo::test("ns", &format!("run-{i}-{j}"))
                    .container(&[("cpu", "700m"), ("memory", "900Mi")])
                    .node(&node.name)
                    .build();
                node.add_pod(Arc::new(running));
            }
            node
        })
        .collect()
}

fn pods() -> Vec<PodInfo> {
    vec![
        PodInfo::test("ns", "small")
            .container(&[("cpu", "100m"), ("memory", "500Mi")])
            .build(),
        PodInfo::test("ns", "big")
            .container(&[("cpu", "2500m"), ("memory", "5Gi")])
            .build(),
        PodInfo::test("ns", "best-effort").build(),
        PodInfo::test("ns", "storage")
            .container(&[("cpu", "100m"), ("ephemeral-storage", "5Gi")])
            .build(),
        PodInfo::test("ns", "gpu")
            .container(&[("cpu", "100m"), ("example.com/gpu", "1")])
            .build(),
        PodInfo::test("ns", "tolerant")
            .container(&[("cpu", "100m")])
            .toleration("dedicated", "Equal", "db", "NoSchedule")
            .toleration(
                "node.kubernetes.io/unschedulable",
                "Exists",
                "",
                "NoSchedule",
            )
            .build(),
        PodInfo::test("ns", "named").node("n07").build(),
    ]
}

#[test]
fn filtering_with_summaries_gives_every_nodes_own_status() {
    let fw = framework();
    let snapshot = Snapshot::from_node_infos(nodes());
    for pod in pods() {
        let mut state = CycleState::new();
        let (_, status, _) = fw.run_pre_filter(&mut state, &pod, &snapshot);
        assert!(status.is_success(), "{}: {status:?}", pod.name());
        let rules = fw.summary_filter(&state, &pod);
        let (mut passed, mut rejected, mut admitted) = (0, 0, 0);
        for (node, summary) in snapshot.node_infos().iter().zip(snapshot.summaries()) {
            let plain = fw.run_filter(&state, &pod, node);
            let summarized = fw.run_filter_summarized(&state, &pod, node, Some((summary, &rules)));
            assert_eq!(summarized, plain, "{} on {}", pod.name(), node.name);
            // The joined rule (checked before any plugin) admits only nodes that pass.
            if rules.admits(summary) {
                assert!(
                    plain.is_success(),
                    "{} on {}: {plain:?}",
                    pod.name(),
                    node.name
                );
                admitted += 1;
            }
            if plain.is_success() {
                passed += 1;
            } else {
                rejected += 1;
            }
        }
        // Both outcomes occur for every pod, so the comparison covers both.
        assert!(
            passed > 0 && rejected > 0,
            "{}: {passed}/{rejected}",
            pod.name()
        );
        // The joined rule answers for plain pods; a pod naming a node or asking for an
        // extended resource has a plugin without a rule, so every node is filtered.
        let joined = !matches!(pod.name(), "named" | "gpu");
        assert_eq!(admitted > 0, joined, "{}: {admitted} admitted", pod.name());
    }
}
