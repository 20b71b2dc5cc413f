//! Two configs on one hand-made dump: LeastAllocated spreads, MostAllocated packs.

use super::*;
use crate::simulate::load_str;

/// Three 4-CPU nodes; n1 already runs a 2-CPU pod; two 1-CPU pods are pending.
const DUMP: &str = "
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}
status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}
---
apiVersion: v1
kind: Node
metadata: {name: n3, labels: {kubernetes.io/hostname: n3}}
status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}
---
apiVersion: v1
kind: Pod
metadata: {name: running, namespace: default}
spec:
  nodeName: n1
  containers: [{name: c, image: img, resources: {requests: {cpu: '2', memory: 2Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: default}
spec:
  containers: [{name: c, image: img, resources: {requests: {cpu: '1', memory: 1Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: default}
spec:
  containers: [{name: c, image: img, resources: {requests: {cpu: '1', memory: 1Gi}}}]
";

const DEFAULT: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
";

const PACKING: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    score:
      disabled: [{name: NodeResourcesBalancedAllocation}]
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{name: cpu, weight: 1}, {name: memory, weight: 1}]
";

const TEMPLATE: &str = "
apiVersion: v1
kind: Pod
metadata: {name: big}
spec:
  containers: [{name: c, image: img, resources: {requests: {cpu: '3', memory: 1Gi}}}]
";

fn compare_with(template: Option<&PodTemplate>, max: Option<usize>) -> Comparison {
    let objects = load_str(DUMP, "dump.yaml").unwrap();
    let spread = crate::config::load_str(DEFAULT, "default.yaml").unwrap();
    let pack = crate::config::load_str(PACKING, "packing.yaml").unwrap();
    let sides = [
        Side {
            name: "default.yaml".into(),
            loaded: &spread,
        },
        Side {
            name: "packing.yaml".into(),
            loaded: &pack,
        },
    ];
    compare(&objects, sides, 1, template, max, &[]).unwrap()
}

#[test]
fn least_allocated_spreads_and_most_allocated_packs() {
    let c = compare_with(None, None);
    let [first, second] = [&c.configs[0], &c.configs[1]];
    assert_eq!((first.scheduled, first.pending), (2, 2));
    assert_eq!((second.scheduled, second.pending), (2, 2));
    // Packing puts both next to the running pod, leaving two nodes empty.
    assert_eq!(second.placements["default/a"], "n1");
    assert_eq!(second.placements["default/b"], "n1");
    assert_eq!(second.empty_nodes, ["n2", "n3"]);
    // Spreading gives each empty node one pod.
    let mut spread: Vec<&str> = ["default/a", "default/b"]
        .iter()
        .map(|p| first.placements[*p].as_str())
        .collect();
    spread.sort_unstable();
    assert_eq!(spread, ["n2", "n3"]);
    assert!(first.empty_nodes.is_empty(), "{:?}", first.empty_nodes);
    // Both pods moved, none placed by one config only.
    assert_eq!(c.moved.len(), 2, "{:?}", c.moved);
    assert!(c.moved.iter().all(|m| m.second == "n1" && m.first != "n1"));
    assert_eq!(c.same_node, 0);
    assert!(c.placed_only_by_first.is_empty() && c.placed_only_by_second.is_empty());
    // Usage side by side: n1 holds 4 CPUs under packing, 2 under spreading.
    let n1 = |r: &ConfigRun| r.nodes.iter().find(|n| n.node == "n1").unwrap().cpu_milli;
    assert_eq!((n1(first), n1(second)), (2000, 4000));
    // The reference pod is a pending one (both ask the same; the first name wins).
    assert_eq!(c.reference_pod.as_ref().unwrap().pod, "default/a");
}

#[test]
fn with_a_template_copies_are_compared_and_fragmentation_uses_it() {
    let t = capacity::read_template(TEMPLATE, "big.yaml").unwrap();
    let c = compare_with(Some(&t), None);
    let [first, second] = [&c.configs[0], &c.configs[1]];
    // Spread: free CPU 2/3/3 after the pending pods, so no 3-CPU copy fits on n1:
    // one on n2, one on n3. Packed: free 0/4/4, one copy on each of n2 and n3 too.
    assert_eq!(first.copies.as_ref().unwrap().placed, 2);
    assert_eq!(second.copies.as_ref().unwrap().placed, 2);
    assert_eq!(
        c.reference_pod,
        Some(ReferencePod {
            pod: "default/big".into(),
            cpu_milli: 3000,
            memory: 1 << 30,
        })
    );
    // After the copies: spread leaves 2 + 0 + 0 free CPUs (n1 cannot take a copy: all of
    // its free CPU is stranded); packed leaves 0 + 1 + 1, stranded too.
    let f1 = first.fragmentation.as_ref().unwrap();
    assert_eq!((f1.free_cpu_milli, f1.stranded_cpu_milli), (2000, 2000));
    assert_eq!(f1.cpu_percent, 100.0);
    let f2 = second.fragmentation.as_ref().unwrap();
    assert_eq!((f2.free_cpu_milli, f2.stranded_cpu_milli), (2000, 2000));
    // The copies are listed as placements: big-0 and big-1 under both.
    assert!(first.placements.contains_key("default/big-0"));
    assert!(second.placements.contains_key("default/big-1"));
}

#[test]
fn fragmentation_counts_free_capacity_where_the_reference_pod_no_longer_fits() {
    let node = |name: &str, cpu: i64, cpu_alloc: i64, pods: i64| NodeUsage {
        node: name.into(),
        pods,
        max_pods: 10,
        cpu_milli: cpu,
        cpu_allocatable_milli: cpu_alloc,
        memory: 0,
        memory_allocatable: 4 << 30,
        extended: BTreeMap::new(),
    };
    let r = ReferencePod {
        pod: "ns/p".into(),
        cpu_milli: 1000,
        memory: 1 << 30,
    };
    // 500m free on a (stranded), 3000m on b (fits), 2000m on c whose pod slots are full.
    let nodes = [
        node("a", 3500, 4000, 1),
        node("b", 1000, 4000, 1),
        node("c", 2000, 4000, 10),
    ];
    let f = fragmentation(&nodes, &r);
    assert_eq!(f.free_cpu_milli, 5500);
    assert_eq!(f.stranded_cpu_milli, 2500);
    assert_eq!(f.cpu_percent, 45.5);
    assert_eq!(f.nodes_fitting, 1);
    // Memory: 4Gi free on each, two of the three nodes stranded.
    assert_eq!(f.memory_percent, 66.7);
}

#[test]
fn a_failing_config_is_named_in_the_error() {
    let objects = load_str(DUMP, "dump.yaml").unwrap();
    let spread = crate::config::load_str(DEFAULT, "default.yaml").unwrap();
    let t = capacity::read_template(
        &TEMPLATE.replace("spec:\n", "spec:\n  schedulerName: other\n"),
        "big.yaml",
    )
    .unwrap();
    let sides = [
        Side {
            name: "default.yaml".into(),
            loaded: &spread,
        },
        Side {
            name: "second.yaml".into(),
            loaded: &spread,
        },
    ];
    let e = compare(&objects, sides, 1, Some(&t), None, &[]).unwrap_err();
    assert_eq!(e.config, "default.yaml");
    assert!(e.to_string().contains("spec.schedulerName"), "{e}");
}
