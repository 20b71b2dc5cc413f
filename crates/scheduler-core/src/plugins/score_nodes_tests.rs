//! Score plugins score a run of nodes at once (`ScorePlugin::score_nodes`, or
//! `score_summarized` from the snapshot's node summaries) on unsampled cycles and one node
//! at a time (`score`, timed) on sampled ones: all must give the same table, for every
//! strategy of the resource scorers.

use std::sync::Arc;

use crate::cache::Snapshot;
use crate::config;
use crate::framework::{
    CycleState, FeasibleNodes, FeasibleSummaries, Framework, NodeScore, Registry, ScoreTable,
};
use crate::types::{NodeInfo, PodInfo};

const MB: i64 = 1024 * 1024;

fn framework(plugin_config: &str) -> Framework {
    let text = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
{plugin_config}"
    );
    let loaded = config::load_str(&text, "test").expect("valid config");
    Framework::new(&loaded.profiles[0], &Registry::in_tree()).expect("builds")
}

/// Nodes of different sizes, loads, taints and images.
fn nodes() -> Vec<NodeInfo> {
    (0..40)
        .map(|i| {
            let mut b = NodeInfo::test(&format!("n{i:02}"))
                .cpu(&format!("{}", 2 + i % 7))
                .memory(&format!("{}Gi", 4 + (i * 5) % 29))
                .pods(110);
            if i % 3 == 0 {
                b = b.taint("spot", "yes", "PreferNoSchedule");
            }
            if i % 4 == 1 {
                b = b.image("registry/app:v1", (100 + 37 * i) * MB);
            }
            if i % 5 == 2 {
                b = b.allocatable("example.com/gpu", &format!("{}", 1 + i % 4));
            }
            if i % 3 == 1 {
                b = b.allocatable("ephemeral-storage", &format!("{}Gi", 10 + i));
            }
            let mut node = b.build();
            for j in 0..i % 5 {
                let running = PodInfo::test("ns", &format!("run-{i}-{j}"))
                    .container(&[("cpu", "300m"), ("memory", "700Mi")])
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
        PodInfo::test("ns", "sized")
            .container(&[("cpu", "500m"), ("memory", "1Gi")])
            .image("registry/app:v1")
            .build(),
        PodInfo::test("ns", "tolerant")
            .container(&[("cpu", "1"), ("memory", "256Mi")])
            .toleration("spot", "Equal", "yes", "PreferNoSchedule")
            .build(),
        // Best effort: BalancedAllocation skips it, Fit scores the non-zero defaults.
        PodInfo::test("ns", "best-effort").build(),
        PodInfo::test("ns", "storage")
            .container(&[
                ("cpu", "300m"),
                ("memory", "128Mi"),
                ("ephemeral-storage", "3Gi"),
            ])
            .build(),
        // A scalar resource: scored by the strategy that lists it, read from the nodes.
        PodInfo::test("ns", "gpu")
            .container(&[
                ("cpu", "200m"),
                ("memory", "512Mi"),
                ("example.com/gpu", "1"),
            ])
            .build(),
    ]
}

/// How the framework hands the nodes to the Score plugins.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Scoring {
    /// `score` per node, timed (a sampled cycle).
    OneByOne,
    /// `score_nodes` over the run.
    Runs,
    /// `score_summarized` over the run, with the snapshot's summaries.
    Summarized,
}

fn table(fw: &Framework, pod: &PodInfo, snapshot: &Snapshot, scoring: Scoring) -> ScoreTable {
    table_at(fw, pod, snapshot, scoring, None)
}

/// [`table`] of the nodes at `positions` in the snapshot (in that order), as a cycle scores
/// its feasible nodes; every node when `None`.
fn table_at(
    fw: &Framework,
    pod: &PodInfo,
    snapshot: &Snapshot,
    scoring: Scoring,
    positions: Option<&[usize]>,
) -> ScoreTable {
    let mut state = CycleState::new();
    if scoring == Scoring::OneByOne {
        state.set_plugin_timer(Some(Arc::new(fw.plugin_timer(true))));
    }
    let (_, status, _) = fw.run_pre_filter(&mut state, pod, snapshot);
    assert!(status.is_success(), "{status:?}");
    let (nodes, summaries) = match positions {
        None => (
            FeasibleNodes::from(snapshot.node_infos()),
            FeasibleSummaries::from(snapshot.summaries()),
        ),
        Some(p) => (
            FeasibleNodes::at(snapshot.node_infos(), p),
            FeasibleSummaries::at(snapshot.summaries(), p),
        ),
    };
    let status = fw.run_pre_score(&mut state, pod, nodes, snapshot);
    assert!(status.is_success(), "{status:?}");
    let summaries = (scoring == Scoring::Summarized).then_some(summaries);
    fw.run_score(&state, pod, nodes, summaries, false, None)
        .expect("scores")
}

#[test]
fn scoring_runs_of_nodes_gives_each_nodes_own_score() {
    let strategies = [
        "",
        "  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{name: cpu, weight: 2}, {name: memory, weight: 1}]
",
        "  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: RequestedToCapacityRatio
        resources: [{name: cpu, weight: 3}, {name: memory, weight: 1}]
        requestedToCapacityRatio:
          shape: [{utilization: 0, score: 10}, {utilization: 60, score: 2}, {utilization: 100, score: 0}]
",
        "  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: LeastAllocated
        resources: [{name: cpu, weight: 1}, {name: memory, weight: 1}, {name: example.com/gpu, weight: 5}]
  - name: NodeResourcesBalancedAllocation
    args:
      resources: [{name: cpu, weight: 1}, {name: memory, weight: 1}, {name: example.com/gpu, weight: 1}]
",
        // Three resources in another order, ephemeral storage among them (only some nodes
        // have it).
        "  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: LeastAllocated
        resources: [{name: memory, weight: 2}, {name: ephemeral-storage, weight: 3}, {name: cpu, weight: 1}]
  - name: NodeResourcesBalancedAllocation
    args:
      resources: [{name: cpu, weight: 1}, {name: ephemeral-storage, weight: 1}, {name: memory, weight: 1}]
",
    ];
    let snapshot = Snapshot::from_node_infos(nodes());
    for plugin_config in strategies {
        let fw = framework(plugin_config);
        for pod in pods() {
            let runs = table(&fw, &pod, &snapshot, Scoring::Runs);
            let one_by_one = table(&fw, &pod, &snapshot, Scoring::OneByOne);
            let summarized = table(&fw, &pod, &snapshot, Scoring::Summarized);
            assert_eq!(runs, one_by_one, "{plugin_config} {}", pod.name());
            assert_eq!(summarized, one_by_one, "{plugin_config} {}", pod.name());
            // Feasible nodes as positions in the snapshot, out of order and with gaps, as
            // a cycle that started mid-list and skipped rejected nodes scores them: the
            // summaries read by position give each node its own score.
            let picked: Vec<usize> = (0..snapshot.num_nodes())
                .map(|i| (i * 7 + 13) % snapshot.num_nodes())
                .filter(|j| j % 4 != 3)
                .collect();
            let at = |scoring| table_at(&fw, &pod, &snapshot, scoring, Some(&picked));
            let by_position = at(Scoring::Summarized);
            assert_eq!(by_position, at(Scoring::OneByOne), "{plugin_config}");
            assert_eq!(by_position, at(Scoring::Runs), "{plugin_config}");
            // Each node's total is the one it had in the whole list.
            for (k, &j) in picked.iter().enumerate() {
                assert_eq!(
                    by_position.totals[k], one_by_one.totals[j],
                    "{plugin_config}"
                );
            }
            // The scores differ between nodes, so the comparison covers real values.
            let distinct: std::collections::BTreeSet<_> = runs.totals.iter().collect();
            assert!(
                distinct.len() > 2,
                "{plugin_config} {}: {runs:?}",
                pod.name()
            );
        }
    }
}

/// The framework normalizes only the plugins that declare it (`has_score_extensions`), and
/// without node names for those that can (`normalize_score_values`): every in-tree Score
/// plugin that does not declare it must leave scores as they are, and a normalization
/// without names must give what the one with names gives.
#[test]
fn normalization_is_declared_and_without_names_the_same() {
    let pod = PodInfo::test("ns", "p").build();
    let cases: [&[i64]; 3] = [&[0, 7, 250, 3, 1000], &[0, 0, 0], &[5, 5, 40]];
    let (mut plain, mut extended, mut nameless) = (0, 0, 0);
    for (name, factory) in crate::plugins::in_tree_factories() {
        let Ok(plugin) = factory(None) else { continue };
        let Some(score) = plugin.points().score else {
            continue;
        };
        let state = CycleState::new();
        for raw in cases {
            let names: Vec<String> = (0..raw.len()).map(|i| format!("n{i}")).collect();
            let mut list: Vec<NodeScore> = (names.iter().zip(raw))
                .map(|(n, &score)| NodeScore { name: n, score })
                .collect();
            let status = score.normalize_scores(&state, &pod, &mut list);
            let after: Vec<i64> = list.iter().map(|s| s.score).collect();
            if !score.has_score_extensions() {
                assert!(status.is_success(), "{name}: {status:?}");
                assert_eq!(after, raw, "{name} normalizes without declaring it");
            }
            let mut values = raw.to_vec();
            if let Some(s) = score.normalize_score_values(&state, &pod, &mut values) {
                assert!(score.has_score_extensions(), "{name}");
                assert_eq!((&s, &values), (&status, &after), "{name} {raw:?}");
            }
        }
        if !score.has_score_extensions() {
            plain += 1;
        } else if score
            .normalize_score_values(&state, &pod, &mut [1, 2])
            .is_some()
        {
            nameless += 1;
        } else {
            extended += 1;
        }
    }
    // Fit, BalancedAllocation and ImageLocality need none; TaintToleration, NodeAffinity
    // and DynamicResources normalize without names; spreading and inter-pod affinity read
    // them.
    assert!(
        plain >= 3 && nameless == 3 && extended >= 2,
        "{plain} {nameless} {extended}"
    );
}
