//! Upstream's `fit_test.go`, `least_allocated_test.go`, `most_allocated_test.go` and
//! `requested_to_capacity_ratio_test.go` scenarios, rewritten as tables over the builders.

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::config::{
    RequestedToCapacityRatioParam, ResourceSpec, ScoringStrategy, UtilizationShapePoint,
};
use crate::types::{NodeBuilder, PodBuilder};

const EXT_A: &str = "example.com/aaa";
const EXT_B: &str = "example.com/bbb";
const K8S_IO_A: &str = "kubernetes.io/something";
const K8S_IO_B: &str = "subdomain.kubernetes.io/something";
const HUGEPAGES: &str = "hugepages-2Mi";

fn fit(args: NodeResourcesFitArgs) -> NodeResourcesFit {
    NodeResourcesFit::new(Some(&PluginArgs::NodeResourcesFit(args))).unwrap()
}

// ---------------------------------------------------------------------------------------
// Filter
// ---------------------------------------------------------------------------------------

/// Upstream's filter node: 10m cpu, 20 bytes memory, 32 pods, 5 of `example.com/aaa`,
/// 20 bytes ephemeral storage, 5 bytes of 2Mi hugepages.
fn filter_node() -> NodeBuilder {
    NodeInfo::test("node")
        .cpu("10m")
        .memory("20")
        .pods(32)
        .allocatable(EXT_A, "5")
        .allocatable("ephemeral-storage", "20")
        .allocatable(HUGEPAGES, "5")
}

/// `node` with one pod already using `used`.
fn with_usage(node: NodeBuilder, used: &[(&str, &str)]) -> NodeInfo {
    let mut n = node.build();
    let mut p = PodInfo::test("default", "existing");
    for (k, v) in used {
        p = p.request(k, v);
    }
    n.add_pod(Arc::new(p.build()));
    n
}

/// A pod whose first container requests `reqs`.
fn pod(reqs: &[(&str, &str)]) -> PodBuilder {
    let mut p = PodInfo::test("default", "pod");
    for (k, v) in reqs {
        p = p.request(k, v);
    }
    p
}

fn cpu_mem(cpu: &str, mem: &str) -> PodBuilder {
    pod(&[("cpu", cpu), ("memory", mem)])
}

use crate::framework::Code::{Success, Unschedulable as U, UnschedulableAndUnresolvable as UU};

struct FilterCase {
    name: &'static str,
    pod: PodInfo,
    node: NodeInfo,
    ignored: &'static [&'static str],
    ignored_groups: &'static [&'static str],
    want: (Code, &'static [&'static str]),
}

fn filter_case(
    name: &'static str,
    pod: PodBuilder,
    node: NodeInfo,
    want: (Code, &'static [&'static str]),
) -> FilterCase {
    FilterCase {
        name,
        pod: pod.build(),
        node,
        ignored: &[],
        ignored_groups: &[],
        want,
    }
}

const FITS: (Code, &[&str]) = (Success, &[]);

fn run_filter(pl: &NodeResourcesFit, pod: &PodInfo, node: &NodeInfo) -> Status {
    let mut state = CycleState::new();
    let snapshot = Snapshot::from_node_infos(vec![node.clone()]);
    let (result, s) = pl.pre_filter(&mut state, pod, &snapshot);
    assert!(result.is_none() && s.is_success(), "PreFilter: {s}");
    pl.filter(&state, pod, node)
}

#[test]
fn filter_like_upstream() {
    let used = |cpu: &str, mem: &str| with_usage(filter_node(), &[("cpu", cpu), ("memory", mem)]);
    let ins_a: &[&str] = &["Insufficient example.com/aaa"];
    let mut cases = vec![
        filter_case(
            "no resources requested always fits",
            pod(&[]),
            used("10m", "20"),
            FITS,
        ),
        filter_case(
            "too many resources fails",
            cpu_mem("1m", "1"),
            used("10m", "20"),
            (U, &[INSUFFICIENT_CPU, INSUFFICIENT_MEMORY]),
        ),
        filter_case(
            "too many resources fails due to init container cpu",
            cpu_mem("1m", "1").init_container(&[("cpu", "3m"), ("memory", "1")]),
            used("8m", "19"),
            (U, &[INSUFFICIENT_CPU]),
        ),
        filter_case(
            "too many resources fails due to highest init container cpu",
            cpu_mem("1m", "1")
                .init_container(&[("cpu", "3m"), ("memory", "1")])
                .init_container(&[("cpu", "2m"), ("memory", "1")]),
            used("8m", "19"),
            (U, &[INSUFFICIENT_CPU]),
        ),
        filter_case(
            "too many resources fails due to init container memory",
            cpu_mem("1m", "1").init_container(&[("cpu", "1m"), ("memory", "3")]),
            used("9m", "19"),
            (U, &[INSUFFICIENT_MEMORY]),
        ),
        filter_case(
            "init container fits because it's the max, not sum, of containers and init containers",
            cpu_mem("1m", "1")
                .init_container(&[("cpu", "1m"), ("memory", "1")])
                .init_container(&[("cpu", "1m"), ("memory", "1")]),
            used("9m", "19"),
            FITS,
        ),
        filter_case(
            "sidecars run beside the containers, so they add up",
            cpu_mem("1m", "1").sidecar(&[("cpu", "2m"), ("memory", "1")]),
            used("8m", "5"),
            (U, &[INSUFFICIENT_CPU]),
        ),
        filter_case(
            "both resources fit",
            cpu_mem("1m", "1"),
            used("5m", "5"),
            FITS,
        ),
        filter_case(
            "one resource memory fits",
            cpu_mem("2m", "1"),
            used("9m", "5"),
            (U, &[INSUFFICIENT_CPU]),
        ),
        filter_case(
            "one resource cpu fits",
            cpu_mem("1m", "2"),
            used("5m", "19"),
            (U, &[INSUFFICIENT_MEMORY]),
        ),
        filter_case(
            "equal edge case",
            cpu_mem("5m", "1"),
            used("5m", "19"),
            FITS,
        ),
        filter_case(
            "equal edge case for init container",
            cpu_mem("4m", "1").init_container(&[("cpu", "5m"), ("memory", "1")]),
            used("5m", "19"),
            FITS,
        ),
        filter_case(
            "extended resource fits",
            pod(&[(EXT_A, "1")]),
            with_usage(filter_node(), &[]),
            FITS,
        ),
        filter_case(
            "extended resource fits for init container",
            pod(&[]).init_container(&[(EXT_A, "1")]),
            with_usage(filter_node(), &[]),
            FITS,
        ),
        filter_case(
            "extended resource capacity enforced (more than the node has: unresolvable)",
            pod(&[("cpu", "1m"), ("memory", "1"), (EXT_A, "10")]),
            with_usage(filter_node(), &[]),
            (UU, ins_a),
        ),
        filter_case(
            "extended resource capacity enforced for init container",
            pod(&[]).init_container(&[("cpu", "1m"), ("memory", "1"), (EXT_A, "10")]),
            with_usage(filter_node(), &[]),
            (UU, ins_a),
        ),
        filter_case(
            "extended resource allocatable enforced",
            pod(&[("cpu", "1m"), ("memory", "1"), (EXT_A, "1")]),
            with_usage(filter_node(), &[(EXT_A, "5")]),
            (U, ins_a),
        ),
        filter_case(
            "extended resource allocatable enforced for multiple containers",
            pod(&[(EXT_A, "3")]).container(&[(EXT_A, "3")]),
            with_usage(filter_node(), &[(EXT_A, "2")]),
            (UU, ins_a),
        ),
        filter_case(
            "extended resource allocatable admits multiple init containers",
            pod(&[])
                .init_container(&[(EXT_A, "3")])
                .init_container(&[(EXT_A, "3")]),
            with_usage(filter_node(), &[(EXT_A, "2")]),
            FITS,
        ),
        filter_case(
            "extended resource allocatable enforced for multiple init containers",
            pod(&[])
                .init_container(&[(EXT_A, "6")])
                .init_container(&[(EXT_A, "3")]),
            with_usage(filter_node(), &[(EXT_A, "2")]),
            (UU, ins_a),
        ),
        filter_case(
            "extended resource allocatable enforced for unknown resource",
            pod(&[(EXT_B, "1")]),
            with_usage(filter_node(), &[]),
            (UU, &["Insufficient example.com/bbb"]),
        ),
        filter_case(
            "kubernetes.io resource capacity enforced",
            pod(&[(K8S_IO_A, "10")]),
            with_usage(filter_node(), &[]),
            (UU, &["Insufficient kubernetes.io/something"]),
        ),
        filter_case(
            "subdomain kubernetes.io resource capacity enforced",
            pod(&[(K8S_IO_B, "10")]),
            with_usage(filter_node(), &[]),
            (UU, &["Insufficient subdomain.kubernetes.io/something"]),
        ),
        filter_case(
            "hugepages resource capacity enforced",
            pod(&[(HUGEPAGES, "10")]),
            with_usage(filter_node(), &[]),
            (UU, &["Insufficient hugepages-2Mi"]),
        ),
        filter_case(
            "hugepages resource allocatable enforced for multiple containers",
            pod(&[(HUGEPAGES, "3")]).container(&[(HUGEPAGES, "3")]),
            with_usage(filter_node(), &[(HUGEPAGES, "2")]),
            (UU, &["Insufficient hugepages-2Mi"]),
        ),
        filter_case(
            "hugepages allocatable enforced, resolvable",
            pod(&[(HUGEPAGES, "4")]),
            with_usage(filter_node(), &[(HUGEPAGES, "2")]),
            (U, &["Insufficient hugepages-2Mi"]),
        ),
        filter_case(
            "skip checking resources requested with a zero quantity",
            pod(&[("cpu", "1m"), ("memory", "1"), (EXT_B, "0")]),
            used("5m", "5"),
            FITS,
        ),
        filter_case(
            "zero requests are not checked even on an over-committed node",
            pod(&[("cpu", "0"), (EXT_A, "0")]),
            with_usage(filter_node(), &[("cpu", "11m"), (EXT_A, "6")]),
            FITS,
        ),
        filter_case(
            "requests + overhead fit",
            cpu_mem("1m", "1")
                .overhead("cpu", "3m")
                .overhead("memory", "13"),
            used("5m", "5"),
            FITS,
        ),
        filter_case(
            "requests + overhead do not fit for memory",
            cpu_mem("1m", "1")
                .overhead("cpu", "1m")
                .overhead("memory", "15"),
            used("5m", "5"),
            (U, &[INSUFFICIENT_MEMORY]),
        ),
        filter_case(
            "ephemeral storage over the node's total is unresolvable",
            pod(&[("ephemeral-storage", "25")]),
            with_usage(filter_node(), &[]),
            (UU, &[INSUFFICIENT_EPHEMERAL_STORAGE]),
        ),
        filter_case(
            "ephemeral storage fits",
            pod(&[("ephemeral-storage", "10")]),
            with_usage(filter_node(), &[]),
            FITS,
        ),
        filter_case(
            "ephemeral storage used by others",
            pod(&[("ephemeral-storage", "10")]),
            with_usage(filter_node(), &[("ephemeral-storage", "15")]),
            (U, &[INSUFFICIENT_EPHEMERAL_STORAGE]),
        ),
        filter_case(
            "even a pod requesting nothing needs a free pod slot",
            pod(&[]),
            with_usage(filter_node().pods(1), &[]),
            (U, &[TOO_MANY_PODS]),
        ),
        filter_case(
            "too many pods and a resolvable cpu shortage stay Unschedulable",
            cpu_mem("6m", "1"),
            with_usage(filter_node().pods(1), &[("cpu", "5m")]),
            (U, &[TOO_MANY_PODS, INSUFFICIENT_CPU]),
        ),
        filter_case(
            "every missing resource is reported, in upstream's order",
            pod(&[
                ("cpu", "20m"),
                ("memory", "1"),
                ("ephemeral-storage", "25"),
                (HUGEPAGES, "6"),
                (EXT_A, "6"),
            ]),
            with_usage(filter_node().pods(1), &[]),
            (
                UU,
                &[
                    TOO_MANY_PODS,
                    INSUFFICIENT_CPU,
                    INSUFFICIENT_EPHEMERAL_STORAGE,
                    "Insufficient example.com/aaa",
                    "Insufficient hugepages-2Mi",
                ],
            ),
        ),
        filter_case(
            "a node without a pods allocatable fits no pod",
            pod(&[]),
            NodeInfo::test("bare").cpu("1").build(),
            (U, &[TOO_MANY_PODS]),
        ),
    ];

    // Ignored resources and groups apply to extended resources only.
    let mut ignored = |name: &'static str,
                       reqs: &[(&str, &str)],
                       ig: &'static [&'static str],
                       groups: &'static [&'static str],
                       want: (Code, &'static [&'static str])| {
        let mut c = filter_case(name, pod(reqs), with_usage(filter_node(), &[]), want);
        c.ignored = ig;
        c.ignored_groups = groups;
        cases.push(c);
    };
    ignored(
        "skip checking ignored extended resource",
        &[("cpu", "1m"), ("memory", "1"), (EXT_B, "1")],
        &[EXT_B],
        &[],
        FITS,
    );
    ignored(
        "skip checking ignored extended resource via resource groups",
        &[("cpu", "1m"), ("memory", "1"), (EXT_B, "1")],
        &[],
        &["example.com"],
        FITS,
    );
    ignored(
        "other groups are still checked",
        &[(EXT_B, "1")],
        &[],
        &["example.org", "example"],
        (UU, &["Insufficient example.com/bbb"]),
    );
    ignored(
        "kubernetes.io resources are never ignored",
        &[(K8S_IO_A, "10")],
        &[K8S_IO_A],
        &["kubernetes.io"],
        (UU, &["Insufficient kubernetes.io/something"]),
    );
    ignored(
        "hugepages are never ignored",
        &[(HUGEPAGES, "10")],
        &[HUGEPAGES],
        &[],
        (UU, &["Insufficient hugepages-2Mi"]),
    );
    ignored(
        "ignoring does not touch cpu",
        &[("cpu", "20m"), (EXT_B, "1")],
        &[EXT_B, "cpu"],
        &[],
        (UU, &[INSUFFICIENT_CPU]),
    );

    for c in cases {
        let pl = fit(NodeResourcesFitArgs {
            ignored_resources: c.ignored.iter().map(|s| s.to_string()).collect(),
            ignored_resource_groups: c.ignored_groups.iter().map(|s| s.to_string()).collect(),
            scoring_strategy: None,
        });
        let got = run_filter(&pl, &c.pod, &c.node);
        let want_reasons: Vec<String> = c.want.1.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            (
                got.code(),
                got.reasons()
                    .iter()
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>()
            ),
            (c.want.0, want_reasons),
            "{}",
            c.name
        );
    }
}

#[test]
fn filter_without_pre_filter_is_an_error() {
    let pl = fit(NodeResourcesFitArgs::default());
    let s = pl.filter(
        &CycleState::new(),
        &pod(&[]).build(),
        &filter_node().build(),
    );
    assert_eq!(s.code(), Code::Error);
    assert_eq!(
        s.message(),
        "error reading \"PreFilterNodeResourcesFit\" from cycleState: not found"
    );
}

#[test]
fn fits_reports_amounts() {
    let node = with_usage(filter_node(), &[("cpu", "10m"), ("memory", "20")]);
    let got = fits(&cpu_mem("1m", "21").build(), &node);
    assert_eq!(
        got,
        vec![
            InsufficientResource {
                resource_name: "cpu".into(),
                reason: INSUFFICIENT_CPU.into(),
                requested: 1,
                used: 10,
                capacity: 10,
                unresolvable: false,
            },
            InsufficientResource {
                resource_name: "memory".into(),
                reason: INSUFFICIENT_MEMORY.into(),
                requested: 21,
                used: 20,
                capacity: 20,
                unresolvable: true,
            },
        ]
    );
    let full = with_usage(filter_node().pods(1), &[]);
    assert_eq!(fits(&pod(&[]).build(), &full)[0].resource_name, "pods");
}

// ---------------------------------------------------------------------------------------
// Score
// ---------------------------------------------------------------------------------------

/// Upstream's `st.MakePod().Obj()`: a pod without containers, so it has no requests and
/// no non-zero defaults either (the builders always add a container).
fn bare_pod(name: &str) -> PodInfo {
    PodInfo::from_pod(&k8s::Pod {
        metadata: ObjectMeta {
            namespace: Some("default".into()),
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(k8s::PodSpec::default()),
        status: None,
    })
}

/// A node with cpu and memory allocatable as upstream's `Capacity(...)` strings, plus extras.
fn score_node(name: &str, cpu: &str, memory: &str, extra: &[(&str, &str)]) -> NodeBuilder {
    let mut n = NodeInfo::test(name).pods(110);
    if !cpu.is_empty() {
        n = n.cpu(cpu);
    }
    if !memory.is_empty() {
        n = n.memory(memory);
    }
    for (k, v) in extra {
        n = n.allocatable(k, v);
    }
    n
}

fn place(node: NodeBuilder, pods: Vec<PodInfo>) -> NodeInfo {
    let mut n = node.build();
    for p in pods {
        n.add_pod(Arc::new(p));
    }
    n
}

/// Upstream's two-container request: 1000+2000 cpu, 2000+3000 memory.
fn two_containers() -> PodInfo {
    cpu_mem("1000", "2000")
        .container(&[("cpu", "2000"), ("memory", "3000")])
        .build()
}

fn existing(name: &str, cpu: &str, mem: &str) -> PodInfo {
    PodInfo::test("default", name).cpu(cpu).memory(mem).build()
}

fn specs(resources: &[(&str, i64)]) -> Vec<ResourceSpec> {
    resources
        .iter()
        .map(|(n, w)| ResourceSpec::new(n, *w))
        .collect()
}

fn scoring(
    type_: ScoringStrategyType,
    resources: &[(&str, i64)],
    shape: &[(i32, i32)],
) -> NodeResourcesFit {
    fit(NodeResourcesFitArgs {
        scoring_strategy: Some(ScoringStrategy {
            type_,
            resources: specs(resources),
            requested_to_capacity_ratio: (!shape.is_empty()).then(|| {
                RequestedToCapacityRatioParam {
                    shape: shape
                        .iter()
                        .map(|&(utilization, score)| UtilizationShapePoint { utilization, score })
                        .collect(),
                }
            }),
        }),
        ..Default::default()
    })
}

struct ScoreCase {
    name: &'static str,
    resources: &'static [(&'static str, i64)],
    pod: PodInfo,
    nodes: Vec<NodeInfo>,
    want: Vec<i64>,
}

const CPU_MEM: &[(&str, i64)] = &[("cpu", 1), ("memory", 1)];
const EXT: &str = "abc.com/xyz";
const CPU_MEM_EXT: &[(&str, i64)] = &[("cpu", 1), ("memory", 1), (EXT, 1)];

fn run_scores(pl: &NodeResourcesFit, c: &ScoreCase) {
    let snapshot = Snapshot::from_node_infos(c.nodes.clone());
    let mut state = CycleState::new();
    let s = pl.pre_score(&mut state, &c.pod, snapshot.node_infos().into(), &snapshot);
    assert!(s.is_success(), "{}: PreScore {s}", c.name);
    let got: Vec<i64> = snapshot
        .node_infos()
        .iter()
        .map(|n| pl.score(&state, &c.pod, n).unwrap())
        .collect();
    assert_eq!(got, c.want, "{}", c.name);
    // Score without PreScore (upstream allows it) must agree.
    let fallback: Vec<i64> = c
        .nodes
        .iter()
        .map(|n| pl.score(&CycleState::new(), &c.pod, n).unwrap())
        .collect();
    assert_eq!(fallback, c.want, "{} (without PreScore)", c.name);
}

/// Cases shared by LeastAllocated and MostAllocated: (name, resources, pod, nodes).
type SharedCase = (
    &'static str,
    &'static [(&'static str, i64)],
    PodInfo,
    Vec<NodeInfo>,
);

fn shared_score_cases() -> Vec<SharedCase> {
    let n = score_node;
    vec![
        (
            "nothing scheduled, nothing requested",
            CPU_MEM,
            bare_pod("p"),
            vec![
                n("node1", "4000", "10000", &[]).build(),
                n("node2", "4000", "10000", &[]).build(),
            ],
        ),
        (
            "nothing scheduled, resources requested, differently sized nodes",
            CPU_MEM,
            two_containers(),
            vec![
                n("node1", "4000", "10000", &[]).build(),
                n("node2", "6000", "10000", &[]).build(),
            ],
        ),
        (
            "no resources requested, pods scheduled with resources",
            CPU_MEM,
            bare_pod("p"),
            vec![
                place(
                    n("node1", "10000", "20000", &[]),
                    vec![existing("a", "3000", "0"), existing("b", "3000", "0")],
                ),
                place(
                    n("node2", "10000", "20000", &[]),
                    vec![existing("c", "3000", "0"), existing("d", "3000", "5000")],
                ),
            ],
        ),
        (
            "resources requested, pods scheduled with resources",
            CPU_MEM,
            two_containers(),
            vec![
                place(
                    n("node1", "10000", "20000", &[]),
                    vec![existing("a", "3000", "0")],
                ),
                place(
                    n("node2", "10000", "20000", &[]),
                    vec![existing("b", "3000", "5000")],
                ),
            ],
        ),
        (
            "resources requested, pods scheduled with resources, differently sized nodes",
            CPU_MEM,
            two_containers(),
            vec![
                place(
                    n("node1", "10000", "20000", &[]),
                    vec![existing("a", "3000", "0")],
                ),
                place(
                    n("node2", "10000", "50000", &[]),
                    vec![existing("b", "3000", "5000")],
                ),
            ],
        ),
        (
            "requested resources exceed node capacity",
            CPU_MEM,
            cpu_mem("3000", "0").build(),
            vec![
                place(
                    n("node1", "4000", "10000", &[]),
                    vec![existing("a", "3000", "0")],
                ),
                place(
                    n("node2", "4000", "10000", &[]),
                    vec![existing("b", "3000", "5000")],
                ),
            ],
        ),
        (
            "zero node resources, pods scheduled with resources",
            CPU_MEM,
            bare_pod("p"),
            vec![
                place(n("node1", "", "", &[]), vec![existing("a", "3000", "0")]),
                place(n("node2", "", "", &[]), vec![existing("b", "3000", "5000")]),
            ],
        ),
        (
            "different weights on cpu and memory, differently sized nodes",
            &[("memory", 2), ("cpu", 1)],
            two_containers(),
            vec![
                n("node1", "4000", "10000", &[]).build(),
                n("node2", "6000", "10000", &[]).build(),
            ],
        ),
        (
            "bypass extended resource if the pod does not request it",
            CPU_MEM_EXT,
            two_containers(),
            vec![
                n("node1", "6000", "10000", &[]).build(),
                n("node2", "6000", "10000", &[(EXT, "4")]).build(),
            ],
        ),
        (
            "honor extended resource if the pod requests it",
            CPU_MEM_EXT,
            pod(&[("cpu", "3000"), ("memory", "5000"), (EXT, "2")]).build(),
            vec![
                n("node1", "6000", "10000", &[(EXT, "4")]).build(),
                n("node2", "6000", "10000", &[(EXT, "10")]).build(),
            ],
        ),
        (
            "a requested resource the node does not have is skipped",
            &[(EXT, 2), ("cpu", 1), ("memory", 1)],
            pod(&[("cpu", "3000"), ("memory", "4000"), (EXT, "1")]).build(),
            vec![
                n("node1", "6000", "10000", &[]).build(),
                n("node2", "6000", "10000", &[(EXT, "0")]).build(),
            ],
        ),
        (
            // No requests at all: the 100m / 200Mi defaults are what gets scored.
            "containers without requests count the non-zero defaults",
            CPU_MEM,
            PodInfo::test("default", "p").build(),
            vec![n("node1", "1", "1Gi", &[]).build()],
        ),
        (
            // The defaults of pods already there can push usage past allocatable.
            "non-zero defaults may exceed allocatable",
            CPU_MEM,
            PodInfo::test("default", "p").build(),
            vec![place(
                n("node1", "100m", "100Mi", &[]),
                vec![
                    PodInfo::test("default", "a").build(),
                    PodInfo::test("default", "b").build(),
                ],
            )],
        ),
        (
            // Ephemeral storage has no default and uses real requests.
            "ephemeral storage",
            &[("ephemeral-storage", 1)],
            pod(&[("ephemeral-storage", "25")]).build(),
            vec![place(
                n("node1", "1", "1Gi", &[("ephemeral-storage", "100")]),
                vec![pod(&[("ephemeral-storage", "50")]).build()],
            )],
        ),
    ]
}

#[test]
fn least_allocated_scores_like_upstream() {
    let want: Vec<Vec<i64>> = vec![
        vec![100, 100],
        // cpu (4000-3000)/4000 = 25, memory 50 -> 37; node2 50, 50 -> 50.
        vec![37, 50],
        // node1 cpu 40, memory 100 -> 70; node2 cpu 40, memory 75 -> 57.
        vec![70, 57],
        vec![57, 45],
        vec![57, 60],
        // cpu over capacity scores 0: node1 (0+100)/2, node2 (0+50)/2.
        vec![50, 25],
        vec![0, 0],
        // (25*1 + 50*2)/3 = 41, (50+100)/3 = 50.
        vec![41, 50],
        vec![50, 50],
        // The extended resource: node1 2/4 -> 50, node2 8/10 free -> 80.
        vec![50, 60],
        // cpu 50, memory 60 on both nodes.
        vec![55, 55],
        // cpu (1000-100)/1000 = 90, memory (1Gi-200Mi)/1Gi = 80 -> 85.
        vec![85],
        vec![0],
        vec![25],
    ];
    let cases = shared_score_cases();
    assert_eq!(cases.len(), want.len());
    for ((name, resources, pod, nodes), want) in cases.into_iter().zip(want) {
        let c = ScoreCase {
            name,
            resources,
            pod,
            nodes,
            want,
        };
        run_scores(
            &scoring(ScoringStrategyType::LeastAllocated, c.resources, &[]),
            &c,
        );
    }
}

#[test]
fn most_allocated_scores_like_upstream() {
    let want: Vec<Vec<i64>> = vec![
        vec![0, 0],
        // cpu 75, memory 50 -> 62; 50, 50 -> 50.
        vec![62, 50],
        // node1 cpu 60, memory 0 -> 30; node2 60, 25 -> 42.
        vec![30, 42],
        vec![42, 55],
        // node2 memory 10000/50000 = 20 -> (60+20)/2.
        vec![42, 40],
        // cpu over capacity counts as full: (100+0)/2, (100+50)/2.
        vec![50, 75],
        vec![0, 0],
        // (75*1 + 50*2)/3 = 58, (50+100)/3 = 50.
        vec![58, 50],
        vec![50, 50],
        // node1 (50+50+50)/3, node2 (50+50+20)/3.
        vec![50, 40],
        // cpu 50, memory 40.
        vec![45, 45],
        // cpu 100/1000 = 10, memory 200Mi/1Gi = 19 -> 14.
        vec![14],
        // Defaults beyond allocatable are capped at full.
        vec![100],
        vec![75],
    ];
    let cases = shared_score_cases();
    assert_eq!(cases.len(), want.len());
    for ((name, resources, pod, nodes), want) in cases.into_iter().zip(want) {
        let c = ScoreCase {
            name,
            resources,
            pod,
            nodes,
            want,
        };
        run_scores(
            &scoring(ScoringStrategyType::MostAllocated, c.resources, &[]),
            &c,
        );
    }
}

#[test]
fn requested_to_capacity_ratio_scores_like_upstream() {
    type Shape = &'static [(i32, i32)];
    const LEAST: Shape = &[(0, 10), (100, 0)];
    const MOST: Shape = &[(0, 0), (100, 1)];
    const FOO: &str = "intel.com/foo";
    const BAR: &str = "intel.com/bar";
    let n = score_node;
    // Upstream's makeNode: 4000m cpu, 10000Mi memory and the given extended resources.
    let ext_node = |name: &str, foo: &str, bar: &str| {
        let mut extra = vec![(FOO, foo)];
        if !bar.is_empty() {
            extra.push((BAR, bar));
        }
        n(name, "4000m", "10000Mi", &extra)
    };
    let cases: Vec<(ScoreCase, Shape)> = vec![
        (
            ScoreCase {
                name: "nothing scheduled, nothing requested",
                resources: CPU_MEM,
                pod: bare_pod("p"),
                nodes: vec![
                    place(
                        n("node1", "4000", "10000", &[]),
                        vec![bare_pod("a"), bare_pod("b")],
                    ),
                    n("node2", "4000", "10000", &[]).build(),
                ],
                want: vec![100, 100],
            },
            LEAST,
        ),
        (
            ScoreCase {
                // node1: cpu 75% -> 25, memory 50% -> 50, rounded mean 37.5 -> 38.
                name: "nothing scheduled, resources requested, differently sized nodes",
                resources: CPU_MEM,
                pod: two_containers(),
                nodes: vec![
                    place(
                        n("node1", "4000", "10000", &[]),
                        vec![bare_pod("a"), bare_pod("b")],
                    ),
                    n("node2", "6000", "10000", &[]).build(),
                ],
                want: vec![38, 50],
            },
            LEAST,
        ),
        (
            ScoreCase {
                name: "no resources requested, pods scheduled with resources",
                resources: CPU_MEM,
                pod: bare_pod("p"),
                nodes: vec![
                    place(
                        n("node1", "4000", "10000", &[]),
                        vec![existing("a", "3000", "5000")],
                    ),
                    place(
                        n("node2", "6000", "10000", &[]),
                        vec![existing("b", "3000", "5000")],
                    ),
                ],
                want: vec![38, 50],
            },
            LEAST,
        ),
        (
            ScoreCase {
                name: "single extended resource, nothing requested",
                resources: &[(FOO, 1)],
                pod: bare_pod("p"),
                nodes: vec![
                    ext_node("node1", "8", "").build(),
                    ext_node("node2", "4", "").build(),
                ],
                want: vec![0, 0],
            },
            MOST,
        ),
        (
            ScoreCase {
                // 2/8 = 25% -> 2, 2/4 = 50% -> 5 (shape scores are scaled by 10).
                name: "single extended resource requested",
                resources: &[(FOO, 1)],
                pod: pod(&[(FOO, "2")]).build(),
                nodes: vec![
                    ext_node("node1", "8", "").build(),
                    ext_node("node2", "4", "").build(),
                ],
                want: vec![2, 5],
            },
            MOST,
        ),
        (
            ScoreCase {
                name: "single extended resource, node with existing pod",
                resources: &[(FOO, 1)],
                pod: pod(&[(FOO, "2")]).build(),
                nodes: vec![
                    ext_node("node1", "8", "").build(),
                    place(ext_node("node2", "4", ""), vec![pod(&[(FOO, "2")]).build()]),
                ],
                want: vec![2, 10],
            },
            MOST,
        ),
        (
            ScoreCase {
                name: "single extended resource, more requested",
                resources: &[(FOO, 1)],
                pod: pod(&[(FOO, "4")]).build(),
                nodes: vec![
                    ext_node("node1", "8", "").build(),
                    ext_node("node2", "4", "").build(),
                ],
                want: vec![5, 10],
            },
            MOST,
        ),
        (
            ScoreCase {
                name: "multiple extended resources, nothing requested",
                resources: &[(FOO, 3), (BAR, 5)],
                pod: bare_pod("p"),
                nodes: vec![
                    ext_node("node1", "8", "4").build(),
                    ext_node("node2", "4", "8").build(),
                ],
                want: vec![0, 0],
            },
            MOST,
        ),
        (
            ScoreCase {
                // node1 (2*3 + 5*5)/8 = 3.875 -> 4; node2 (5*3 + 2*5)/8 = 3.125 -> 3.
                name: "multiple extended resources requested",
                resources: &[(FOO, 3), (BAR, 5)],
                pod: pod(&[(FOO, "2"), (BAR, "2")]).build(),
                nodes: vec![
                    ext_node("node1", "8", "4").build(),
                    ext_node("node2", "4", "8").build(),
                ],
                want: vec![4, 3],
            },
            MOST,
        ),
        (
            ScoreCase {
                // node2: foo over capacity -> 10, bar 4/8 -> 5: (30 + 25)/8 = 6.875 -> 7.
                name: "multiple extended resources, node with existing pod",
                resources: &[(FOO, 3), (BAR, 5)],
                pod: pod(&[(FOO, "2"), (BAR, "2")]).build(),
                nodes: vec![
                    ext_node("node1", "8", "4").build(),
                    place(
                        ext_node("node2", "4", "8"),
                        vec![pod(&[(FOO, "4"), (BAR, "2")]).build()],
                    ),
                ],
                want: vec![4, 7],
            },
            MOST,
        ),
        (
            ScoreCase {
                name: "multiple extended resources, more requested",
                resources: &[(FOO, 3), (BAR, 5)],
                pod: pod(&[(FOO, "4"), (BAR, "2")]).build(),
                nodes: vec![
                    ext_node("node1", "8", "4").build(),
                    ext_node("node2", "4", "8").build(),
                ],
                want: vec![5, 5],
            },
            MOST,
        ),
        (
            ScoreCase {
                // cpu 75% -> 75, memory 60% -> 60: 67.5 rounds half away from zero to 68.
                name: "mean rounds half up",
                resources: CPU_MEM,
                pod: cpu_mem("3", "6Gi").build(),
                nodes: vec![n("node1", "4", "10Gi", &[]).build()],
                want: vec![68],
            },
            &[(0, 0), (100, 10)],
        ),
        (
            ScoreCase {
                // Resources scoring 0 leave the weight sum too: cpu 50% -> 50, memory 0% -> 0.
                name: "zero scores do not dilute the mean",
                resources: CPU_MEM,
                pod: cpu_mem("2", "0").build(),
                nodes: vec![n("node1", "4", "10Gi", &[]).build()],
                want: vec![50],
            },
            &[(0, 0), (100, 10)],
        ),
        (
            ScoreCase {
                // Three points: 25% -> 50 on both for node1; node2 cpu 75% -> 75,
                // memory 7Gi/8Gi = 87% -> 100 - 50*37/50 = 63: (75+63)/2 = 69.
                name: "three-point shape",
                resources: CPU_MEM,
                pod: cpu_mem("1", "2Gi").build(),
                nodes: vec![
                    n("node1", "4", "8Gi", &[]).build(),
                    place(n("node2", "4", "8Gi", &[]), vec![existing("a", "2", "5Gi")]),
                ],
                want: vec![50, 69],
            },
            &[(0, 0), (50, 10), (100, 5)],
        ),
    ];
    for (c, shape) in cases {
        run_scores(
            &scoring(
                ScoringStrategyType::RequestedToCapacityRatio,
                c.resources,
                shape,
            ),
            &c,
        );
    }
}

#[test]
fn score_without_resources_is_an_error() {
    let pl = scoring(ScoringStrategyType::LeastAllocated, &[], &[]);
    let n = score_node("node1", "4000", "10000", &[]).build();
    let err = pl
        .score(&CycleState::new(), &two_containers(), &n)
        .unwrap_err();
    assert_eq!(err.code(), Code::Error);
    assert_eq!(
        err.message(),
        crate::plugins::resource_allocation::RESOURCES_NOT_FOUND
    );
}

#[test]
fn factory_defaults_and_errors() {
    // No args: LeastAllocated on cpu and memory, nothing ignored.
    let pl = NodeResourcesFit::new(None).unwrap();
    assert_eq!(pl.scorer.strategy(), &Strategy::LeastAllocated);
    assert_eq!(
        pl.scorer,
        scoring(ScoringStrategyType::LeastAllocated, CPU_MEM, &[]).scorer
    );
    assert!(pl.ignored_resources.is_empty() && pl.ignored_resource_groups.is_empty());
    // Args without a strategy get the default one too.
    let no_strategy = fit(NodeResourcesFitArgs::default());
    assert_eq!(no_strategy.scorer, pl.scorer);

    let wrong = PluginArgs::NodeResourcesBalancedAllocation(Default::default());
    assert!(NodeResourcesFit::new(Some(&wrong)).is_err());
    let no_shape = PluginArgs::NodeResourcesFit(NodeResourcesFitArgs {
        scoring_strategy: Some(ScoringStrategy {
            type_: ScoringStrategyType::RequestedToCapacityRatio,
            resources: specs(CPU_MEM),
            requested_to_capacity_ratio: None,
        }),
        ..Default::default()
    });
    assert!(NodeResourcesFit::new(Some(&no_shape)).is_err());
}

/// Upstream's hint cases (`TestIsSchedulableAfterNodeChange`, `...AfterPodEvent`).
#[test]
fn queueing_hints() {
    use crate::framework::{EventObjects, QueueingHint::*};
    let pl = fit(NodeResourcesFitArgs::default());
    let pod = PodInfo::test("ns", "p").cpu("2").build();
    let ev = ClusterEvent::new(EventResource::Node, ActionType::ADD);
    let hint = |o: &EventObjects<'_>| pl.queueing_hint(&pod, &ev, o);
    let small = NodeInfo::test("s").cpu("1").memory("1Gi").pods(10).build();
    let big = NodeInfo::test("b").cpu("4").memory("1Gi").pods(10).build();
    let no_slots = NodeInfo::test("z").cpu("4").memory("1Gi").pods(0).build();
    assert_eq!(
        hint(&EventObjects::Node {
            old: None,
            new: &small
        }),
        QueueSkip
    );
    assert_eq!(
        hint(&EventObjects::Node {
            old: None,
            new: &big
        }),
        Queue
    );
    assert_eq!(
        hint(&EventObjects::Node {
            old: None,
            new: &no_slots
        }),
        QueueSkip
    );

    let bound = |cpu: &str, mem: &str| {
        let mut p = PodInfo::test("ns", "o").cpu(cpu).memory(mem).build();
        p.node_name = Some("b".into());
        p
    };
    let pending = PodInfo::test("ns", "o").cpu("2").build();
    let deleted = |p| EventObjects::Pod {
        old: Some(p),
        new: None,
    };
    assert_eq!(hint(&deleted(&pending)), QueueSkip);
    assert_eq!(hint(&deleted(&bound("1", "1Gi"))), Queue);
    // Scale-down: only giving back a resource the pod asks for helps.
    let (before, cpu_down, mem_down) = (bound("2", "2Gi"), bound("1", "2Gi"), bound("2", "1Gi"));
    let changed = |o, n| EventObjects::Pod {
        old: Some(o),
        new: Some(n),
    };
    assert_eq!(hint(&changed(&before, &cpu_down)), Queue);
    assert_eq!(hint(&changed(&before, &mem_down)), QueueSkip);
    assert_eq!(hint(&EventObjects::None), Queue);
}
