//! NodeResourcesBalancedAllocation: favours nodes whose configured resources would be used in
//! similar proportions with the pod placed there (upstream `noderesources/balanced_allocation.go`).
//!
//! Unlike NodeResourcesFit it scores with the real requests (no 100m / 200Mi defaults), and
//! PreScore skips pods that request none of the configured resources, so best-effort pods do
//! not all pile onto the node that happens to look most balanced.

use crate::framework::Signing;
use crate::plugins::helper::sign;
use std::sync::Arc;

use crate::cache::Snapshot;
use crate::config::{NodeResourcesBalancedAllocationArgs, PluginArgs};
use crate::framework::{
    CycleState, FeasibleNodes, FeasibleSummaries, Plugin, PluginPoints, PreScorePlugin,
    ScorePlugin, Status,
};
use crate::plugin_points;
use crate::types::{NodeInfo, PodInfo};

use super::names::NODE_RESOURCES_BALANCED_ALLOCATION;
use super::resource_allocation::{ResourceAllocationScorer, Strategy};

/// The pod's requests of the configured resources, written by PreScore.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PreScoreState {
    pod_requests: Vec<i64>,
}

#[derive(Debug, PartialEq, Eq)]
pub struct NodeResourcesBalancedAllocation {
    scorer: ResourceAllocationScorer,
}

impl NodeResourcesBalancedAllocation {
    /// Builds the plugin from defaulted args; `None` means upstream's defaults (cpu and memory).
    pub fn new(args: Option<&PluginArgs>) -> Result<Self, String> {
        let owned;
        let args: &NodeResourcesBalancedAllocationArgs = match args {
            Some(PluginArgs::NodeResourcesBalancedAllocation(a)) => a,
            Some(other) => {
                return Err(format!(
                    "want args to be of type NodeResourcesBalancedAllocationArgs, got {}",
                    other.kind()
                ));
            }
            None => {
                owned = match crate::config::default_args_for(NODE_RESOURCES_BALANCED_ALLOCATION) {
                    Some(PluginArgs::NodeResourcesBalancedAllocation(a)) => a,
                    _ => NodeResourcesBalancedAllocationArgs::default(),
                };
                &owned
            }
        };
        Ok(NodeResourcesBalancedAllocation {
            scorer: ResourceAllocationScorer::new(&args.resources, true, Strategy::Balanced),
        })
    }

    pub fn factory(args: Option<&PluginArgs>) -> Result<Arc<dyn Plugin>, String> {
        Ok(Arc::new(Self::new(args)?))
    }
}

impl Plugin for NodeResourcesBalancedAllocation {
    /// Signature for opportunistic batching (upstream `SignPod`).
    fn sign_pod(&self, pod: &PodInfo) -> Option<Signing> {
        sign::with(vec![sign::resources(pod)])
    }
    fn name(&self) -> &'static str {
        NODE_RESOURCES_BALANCED_ALLOCATION
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_score, score)
    }
}

impl PreScorePlugin for NodeResourcesBalancedAllocation {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: FeasibleNodes<'_>,
        _snapshot: &Snapshot,
    ) -> Status {
        let pod_requests = self.scorer.pod_requests(pod);
        if ResourceAllocationScorer::is_best_effort(&pod_requests) {
            return Status::skip();
        }
        state.write(PreScoreState { pod_requests });
        Status::success()
    }
}

impl ScorePlugin for NodeResourcesBalancedAllocation {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let mut out = [0];
        self.score_nodes_in(state, pod, [node], &mut out)?;
        Ok(out[0])
    }

    fn score_nodes(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: FeasibleNodes<'_>,
        out: &mut [i64],
    ) -> Result<(), Status> {
        self.score_nodes_in(state, pod, nodes.iter(), out)
    }

    fn score_summarized(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: FeasibleNodes<'_>,
        summaries: FeasibleSummaries<'_>,
        out: &mut [i64],
    ) -> Result<(), Status> {
        match state.read::<PreScoreState>() {
            Some(s) => self
                .scorer
                .score_summarized(&s.pod_requests, nodes, summaries, out),
            None => self.score_nodes(state, pod, nodes, out),
        }
    }
}

impl NodeResourcesBalancedAllocation {
    fn score_nodes_in<'a>(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: impl IntoIterator<Item = &'a NodeInfo>,
        out: &mut [i64],
    ) -> Result<(), Status> {
        if let Some(s) = state.read::<PreScoreState>() {
            return self.scorer.score_nodes(&s.pod_requests, nodes, out);
        }
        // Without PreScore (upstream tolerates that): compute here, best-effort scores 0.
        let pod_requests = self.scorer.pod_requests(pod);
        if ResourceAllocationScorer::is_best_effort(&pod_requests) {
            out.fill(0);
            return Ok(());
        }
        self.scorer.score_nodes(&pod_requests, nodes, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ResourceSpec;
    use crate::types::NodeBuilder;

    fn plugin(resources: &[(&str, i64)]) -> NodeResourcesBalancedAllocation {
        let args =
            PluginArgs::NodeResourcesBalancedAllocation(NodeResourcesBalancedAllocationArgs {
                resources: resources
                    .iter()
                    .map(|(n, w)| ResourceSpec::new(n, *w))
                    .collect(),
            });
        NodeResourcesBalancedAllocation::new(Some(&args)).unwrap()
    }

    /// Upstream's `makeNode(name, milliCPU, memory, extended)`: allocatable cpu in milli,
    /// memory in bytes, plus extended resources.
    fn node(name: &str, milli_cpu: i64, memory: i64, extended: &[(&str, i64)]) -> NodeBuilder {
        let mut b = NodeInfo::test(name)
            .cpu(&format!("{milli_cpu}m"))
            .memory(&memory.to_string())
            .pods(110);
        for (n, q) in extended {
            b = b.allocatable(n, &q.to_string());
        }
        b
    }

    /// Two containers: 1000m/2000 and 2000m/3000 (upstream's `cpuAndMemory`).
    fn cpu_and_memory(name: &str) -> PodInfo {
        PodInfo::test("default", name)
            .cpu("1000m")
            .memory("2000")
            .container(&[("cpu", "2000m"), ("memory", "3000")])
            .build()
    }

    /// Two containers: 1000m and 2000m cpu, explicit zero memory (upstream's `cpuOnly`).
    fn cpu_only(name: &str) -> PodInfo {
        PodInfo::test("default", name)
            .cpu("1000m")
            .memory("0")
            .container(&[("cpu", "2000m"), ("memory", "0")])
            .build()
    }

    /// `cpuAndMemory` plus 3 GPUs in the second container.
    fn cpu_memory_gpu(name: &str) -> PodInfo {
        PodInfo::test("default", name)
            .cpu("1000m")
            .memory("2000")
            .container(&[
                ("cpu", "2000m"),
                ("memory", "3000"),
                ("nvidia.com/gpu", "3"),
            ])
            .build()
    }

    fn with_pods(n: NodeBuilder, pods: Vec<PodInfo>) -> NodeInfo {
        let mut n = n.build();
        for p in pods {
            n.add_pod(Arc::new(p));
        }
        n
    }

    const CPU_MEM: &[(&str, i64)] = &[("cpu", 1), ("memory", 1)];
    const CPU_MEM_GPU: &[(&str, i64)] = &[("cpu", 1), ("memory", 1), ("nvidia.com/gpu", 1)];

    struct Case {
        name: &'static str,
        resources: &'static [(&'static str, i64)],
        pod: PodInfo,
        nodes: Vec<NodeInfo>,
        run_pre_score: bool,
        want: Vec<i64>,
    }

    #[test]
    fn scores_like_upstream() {
        let cases = vec![
            Case {
                // cpu 3000/4000 = .75, memory 5000/10000 = .5: std .125 -> 87; node2 even -> 100.
                name: "nothing scheduled, resources requested, differently sized nodes",
                resources: CPU_MEM,
                pod: cpu_and_memory("p"),
                nodes: vec![
                    node("node1", 4000, 10000, &[]).build(),
                    node("node2", 6000, 10000, &[]).build(),
                ],
                run_pre_score: true,
                want: vec![87, 100],
            },
            Case {
                // node1: cpu 6000/10000 = .6, memory 5000/20000 = .25 -> 82;
                // node2: .6 and 10000/20000 = .5 -> 95.
                name: "resources requested, pods scheduled with resources",
                resources: CPU_MEM,
                pod: cpu_and_memory("p"),
                nodes: vec![
                    with_pods(node("node1", 10000, 20000, &[]), vec![cpu_only("a")]),
                    with_pods(node("node2", 10000, 20000, &[]), vec![cpu_and_memory("b")]),
                ],
                run_pre_score: true,
                want: vec![82, 95],
            },
            Case {
                name: "resources requested, pods scheduled with resources, differently sized nodes",
                resources: CPU_MEM,
                pod: cpu_and_memory("p"),
                nodes: vec![
                    with_pods(node("node1", 10000, 20000, &[]), vec![cpu_only("a")]),
                    with_pods(node("node2", 10000, 50000, &[]), vec![cpu_and_memory("b")]),
                ],
                run_pre_score: true,
                want: vec![82, 80],
            },
            Case {
                // node1: cpu 1, memory 0 -> 50; node2: cpu 1, memory .5 -> 75.
                name: "requested resources at node capacity",
                resources: CPU_MEM,
                pod: cpu_only("p"),
                nodes: vec![
                    with_pods(node("node1", 6000, 10000, &[]), vec![cpu_only("a")]),
                    with_pods(node("node2", 6000, 10000, &[]), vec![cpu_and_memory("b")]),
                ],
                run_pre_score: true,
                want: vec![50, 75],
            },
            Case {
                // Three fractions, full standard deviation: node1 gpu 4/8 -> 70, node2 1/8 -> 65.
                name: "include scalar resource on a node for balanced resource allocation",
                resources: CPU_MEM_GPU,
                pod: PodInfo::test("default", "p")
                    .memory("0")
                    .request("nvidia.com/gpu", "1")
                    .build(),
                nodes: vec![
                    with_pods(
                        node("node1", 3500, 40000, &[("nvidia.com/gpu", 8)]),
                        vec![cpu_memory_gpu("a")],
                    ),
                    with_pods(
                        node("node2", 3500, 40000, &[("nvidia.com/gpu", 8)]),
                        vec![cpu_and_memory("b")],
                    ),
                ],
                run_pre_score: true,
                want: vec![70, 65],
            },
            Case {
                // The pod asks for no GPU: the GPU is left out on both nodes (3000/3500 vs
                // 5000/40000 -> 63), whether the node has GPUs or not.
                name: "node without the scalar resource should skip the scalar resource",
                resources: CPU_MEM_GPU,
                pod: cpu_and_memory("p"),
                nodes: vec![
                    node("node1", 3500, 40000, &[("nvidia.com/gpu", 8)]).build(),
                    node("node2", 3500, 40000, &[]).build(),
                ],
                run_pre_score: true,
                want: vec![63, 63],
            },
            Case {
                name: "resources requested, pods scheduled with resources if PreScore not called",
                resources: CPU_MEM,
                pod: cpu_and_memory("p"),
                nodes: vec![
                    with_pods(node("node1", 10000, 20000, &[]), vec![cpu_only("a")]),
                    with_pods(node("node2", 10000, 20000, &[]), vec![cpu_and_memory("b")]),
                ],
                run_pre_score: false,
                want: vec![82, 95],
            },
            Case {
                // cpu 1, memory .32: |1 - .32| / 2 gives 66 where the general formula's
                // rounding would give 65; upstream special-cases two resources.
                name: "two resources use half their difference",
                resources: CPU_MEM,
                pod: PodInfo::test("default", "p").cpu("1").memory("32").build(),
                nodes: vec![node("node1", 1000, 100, &[]).build()],
                run_pre_score: true,
                want: vec![66],
            },
            Case {
                // Real requests, not the non-zero defaults: a pod without a memory request
                // adds nothing to memory (cpu 500m+0 of 1000m vs memory 0+512Mi of 1Gi is
                // perfectly balanced). With the 200Mi default it would not be.
                name: "balanced uses real requests, not the non-zero defaults",
                resources: CPU_MEM,
                pod: PodInfo::test("default", "p").cpu("500m").build(),
                nodes: vec![with_pods(
                    node("node1", 1000, 1 << 30, &[]),
                    vec![PodInfo::test("default", "a").memory("512Mi").build()],
                )],
                run_pre_score: true,
                want: vec![100],
            },
        ];
        for c in cases {
            let pl = plugin(c.resources);
            let mut state = CycleState::new();
            let snapshot = Snapshot::from_node_infos(c.nodes.clone());
            if c.run_pre_score {
                let nodes = snapshot.node_infos().to_vec();
                let s = pl.pre_score(&mut state, &c.pod, (&nodes).into(), &snapshot);
                assert!(s.is_success(), "{}: {s}", c.name);
            }
            let got: Vec<i64> = c
                .nodes
                .iter()
                .map(|n| pl.score(&state, &c.pod, n).unwrap())
                .collect();
            assert_eq!(got, c.want, "{}", c.name);
        }
    }

    #[test]
    fn best_effort_pods_are_skipped() {
        let pl = plugin(CPU_MEM);
        // A container without requests: non-zero defaults do not count here.
        let pod = PodInfo::test("default", "be").build();
        let n = node("node1", 4000, 10000, &[]).build();
        let snapshot = Snapshot::from_node_infos(vec![n.clone()]);
        let mut state = CycleState::new();
        let s = pl.pre_score(&mut state, &pod, snapshot.node_infos().into(), &snapshot);
        assert!(s.is_skip(), "{s}");
        // Called without PreScore, Score gives best-effort pods 0.
        assert_eq!(pl.score(&CycleState::new(), &pod, &n), Ok(0));
        // A pod requesting only a resource that is not configured is best-effort too.
        let gpu_only = PodInfo::test("default", "g")
            .request("nvidia.com/gpu", "1")
            .build();
        assert!(
            pl.pre_score(
                &mut state,
                &gpu_only,
                snapshot.node_infos().into(),
                &snapshot
            )
            .is_skip()
        );
    }

    #[test]
    fn factory_defaults_and_wrong_args() {
        let pl = NodeResourcesBalancedAllocation::new(None).unwrap();
        assert_eq!(pl, plugin(CPU_MEM));
        let wrong = PluginArgs::NodeResourcesFit(Default::default());
        assert!(NodeResourcesBalancedAllocation::new(Some(&wrong)).is_err());
    }
}
