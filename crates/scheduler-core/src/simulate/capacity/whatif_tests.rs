//! Drain, compression and nodes to add, on small hand-made dumps whose answers can be
//! worked out by hand.

use super::add_nodes::{AddNodesReport, add_nodes, read_node_template};
use super::compression::compress;
use super::drain::{DrainReport, NodeChoice, WhatIfError, drain, parse_selector};
use crate::simulate::{ClusterObjects, PodResult, load_str};

const CONFIG: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
";

fn loaded() -> crate::config::Loaded {
    crate::config::load_str(CONFIG, "config.yaml").unwrap()
}

fn node(name: &str, cpu: &str, labels: &str) -> String {
    format!(
        "---
apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}{labels}}}}}
status: {{allocatable: {{cpu: '{cpu}', memory: 8Gi, pods: '110'}}}}
"
    )
}

/// A running, ready pod on `node` (none: pending) owned by `owner` (`Kind/name`, or
/// empty for none).
fn pod(name: &str, node: &str, cpu: &str, labels: &str, owner: &str) -> String {
    let node_name = if node.is_empty() {
        String::new()
    } else {
        format!("  nodeName: {node}\n")
    };
    let owner = match owner.split_once('/') {
        Some((kind, n)) => format!(
            ", ownerReferences: [{{apiVersion: apps/v1, kind: {kind}, name: {n}, uid: u-{n}, controller: true}}]"
        ),
        None => String::new(),
    };
    let status = if node.is_empty() {
        String::new()
    } else {
        "status: {phase: Running, conditions: [{type: Ready, status: 'True'}]}\n".to_string()
    };
    format!(
        "---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, labels: {{{labels}}}{owner}}}
spec:
{node_name}  containers: [{{name: c, image: img, resources: {{requests: {{cpu: '{cpu}', memory: 128Mi}}}}}}]
{status}"
    )
}

/// n1, n2, n3 (2 CPU each). n1 runs web-a (1 CPU) and a DaemonSet pod; n2 runs web-b
/// (1 CPU) and big (900m); n3 runs filler (1 CPU), so 1 CPU is free there. The budget
/// web-pdb keeps 2 of the 2 web pods: it allows no disruption.
fn drain_dump() -> ClusterObjects {
    let mut text = String::new();
    for n in ["n1", "n2", "n3"] {
        text += &node(n, "2", "");
    }
    text += &pod("web-a", "n1", "1", "app: web", "ReplicaSet/web");
    text += &pod("agent-n1", "n1", "100m", "app: agent", "DaemonSet/agent");
    text += &pod("web-b", "n2", "1", "app: web", "ReplicaSet/web");
    text += &pod("big", "n2", "900m", "app: big", "ReplicaSet/big");
    text += &pod("filler", "n3", "1", "app: filler", "ReplicaSet/filler");
    text += "---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web-pdb, namespace: default}
spec: {minAvailable: 2, selector: {matchLabels: {app: web}}}
";
    load_str(&text, "dump.yaml").unwrap()
}

fn drain_of(objects: &ClusterObjects, choice: NodeChoice) -> DrainReport {
    drain(objects, &loaded(), 1, &choice, &[]).unwrap()
}

fn names(v: &[&str]) -> NodeChoice {
    NodeChoice::Names(v.iter().map(|s| s.to_string()).collect())
}

#[test]
fn drain_of_two_nodes_reports_what_moves_what_does_not_and_the_budget_it_breaks() {
    let r = drain_of(&drain_dump(), names(&["n2", "n1"]));
    assert_eq!(r.nodes, ["n1", "n2"]);
    let evicted: Vec<(&str, &str)> = r
        .evicted
        .iter()
        .map(|e| (e.pod.as_str(), e.from.as_str()))
        .collect();
    assert_eq!(
        evicted,
        [
            ("default/web-a", "n1"),
            ("default/web-b", "n2"),
            ("default/big", "n2")
        ]
    );
    // The DaemonSet pod stays on its node.
    assert_eq!(r.staying.len(), 1);
    assert_eq!(
        (r.staying[0].pod.as_str(), r.staying[0].reason.as_str()),
        ("default/agent-n1", "DaemonSet")
    );
    // n3's free CPU takes the first web pod; the rest fit nowhere.
    let result = |pod: &str| &r.evicted.iter().find(|e| e.pod == pod).unwrap().result;
    assert_eq!(
        result("default/web-a"),
        &PodResult::Scheduled {
            node: "n3".into(),
            preempted: vec![]
        }
    );
    for pod in ["default/web-b", "default/big"] {
        assert_eq!(
            result(pod),
            &PodResult::Unschedulable {
                message: "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) were unschedulable. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling..".into()
            },
            "{pod}"
        );
    }
    assert_eq!((r.placed, r.not_placed), (1, 2));
    assert!(r.preempted.is_empty());
    assert_eq!(r.pdb_violations.len(), 1, "{:?}", r.pdb_violations);
    let v = &r.pdb_violations[0];
    assert_eq!(v.pdb, "default/web-pdb");
    assert_eq!(v.budget, "minAvailable: 2");
    assert_eq!(
        (
            v.expected_pods,
            v.current_healthy,
            v.desired_healthy,
            v.disruptions_allowed
        ),
        (2, 2, 2, 0)
    );
    assert_eq!(v.evicted, ["default/web-a", "default/web-b"]);
    assert_eq!(v.exceeding, v.evicted);
}

#[test]
fn drain_of_one_node_within_its_budget_violates_nothing() {
    let mut objects = drain_dump();
    // minAvailable 1 of 2 healthy: one web pod may go.
    objects.pdbs[0].spec.as_mut().unwrap().min_available =
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1));
    let r = drain_of(&objects, names(&["n1"]));
    assert_eq!(r.evicted.len(), 1);
    assert_eq!(r.placed, 1);
    assert!(r.pdb_violations.is_empty(), "{:?}", r.pdb_violations);
    // Both web pods go: one over the budget.
    let r = drain_of(&objects, names(&["n1", "n2"]));
    assert_eq!(r.pdb_violations[0].disruptions_allowed, 1);
    assert_eq!(r.pdb_violations[0].exceeding, ["default/web-b"]);
}

#[test]
fn percentages_count_the_controllers_replicas_and_round_up() {
    let mut text = node("n1", "8", "") + &node("n2", "8", "");
    for (i, n) in ["n1", "n1", "n2"].iter().enumerate() {
        text += &pod(&format!("db-{i}"), n, "1", "app: db", "StatefulSet/db");
    }
    text += "---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: default}
spec: {replicas: 4, selector: {matchLabels: {app: db}}, template: {metadata: {labels: {app: db}}, spec: {containers: [{name: c, image: i}]}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: db, namespace: default}
spec: {maxUnavailable: 30%, selector: {matchLabels: {app: db}}}
";
    let objects = load_str(&text, "dump.yaml").unwrap();
    // 4 expected (the StatefulSet's replicas), 30% of 4 rounded up is 2 unavailable, so 2
    // must stay healthy; 3 are: 1 disruption allowed, and n1 evicts 2.
    let r = drain_of(&objects, names(&["n1"]));
    let v = &r.pdb_violations[0];
    assert_eq!(v.budget, "maxUnavailable: 30%");
    assert_eq!(
        (
            v.expected_pods,
            v.current_healthy,
            v.desired_healthy,
            v.disruptions_allowed
        ),
        (4, 3, 2, 1)
    );
    assert_eq!(v.exceeding, ["default/db-1"]);
}

#[test]
fn unhealthy_pods_spend_no_budget_and_mirror_and_finished_pods_are_not_evicted() {
    let mut text = node("n1", "4", ", pool: a") + &node("n2", "4", ", pool: b");
    text += &pod("web-a", "n1", "1", "app: web", "ReplicaSet/web");
    text += &pod("web-b", "n2", "1", "app: web", "ReplicaSet/web");
    text += "---
apiVersion: v1
kind: Pod
metadata: {name: static-n1, namespace: kube-system, annotations: {kubernetes.io/config.mirror: abc}}
spec: {nodeName: n1, containers: [{name: c, image: i}]}
status: {phase: Running}
---
apiVersion: v1
kind: Pod
metadata: {name: done, namespace: default}
spec: {nodeName: n1, containers: [{name: c, image: i}]}
status: {phase: Succeeded}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web-pdb, namespace: default}
spec: {minAvailable: 2, selector: {matchLabels: {app: web}}}
";
    let mut objects = load_str(&text, "dump.yaml").unwrap();
    // web-a is not Ready: evicting it spends nothing.
    let web_a = objects
        .pods
        .iter_mut()
        .find(|p| p.metadata.name.as_deref() == Some("web-a"))
        .unwrap();
    web_a.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].status = "False".into();
    let r = drain_of(&objects, NodeChoice::Selector("pool=a".into()));
    assert_eq!(r.nodes, ["n1"]);
    let evicted: Vec<&str> = r.evicted.iter().map(|e| e.pod.as_str()).collect();
    assert_eq!(evicted, ["default/web-a"]);
    assert_eq!(r.staying[0].pod, "kube-system/static-n1");
    assert_eq!(r.staying[0].reason, "mirror pod");
    assert!(r.pdb_violations.is_empty(), "{:?}", r.pdb_violations);
    assert_eq!(
        r.evicted[0].result,
        PodResult::Scheduled {
            node: "n2".into(),
            preempted: vec![]
        }
    );
}

#[test]
fn unknown_nodes_and_bad_selectors_are_errors_naming_them() {
    let objects = drain_dump();
    let e = drain(&objects, &loaded(), 1, &names(&["n1", "nope"]), &[]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "--drain: no node named nope in the dump; its nodes are: n1, n2, n3"
    );
    let e = drain(
        &objects,
        &loaded(),
        1,
        &NodeChoice::Selector("pool in (a".into()),
        &[],
    )
    .unwrap_err();
    assert!(
        matches!(&e, WhatIfError::BadSelector { message, .. } if message.contains("parentheses")),
        "{e}"
    );
    let e = drain(
        &objects,
        &loaded(),
        1,
        &NodeChoice::Selector("pool=z".into()),
        &[],
    )
    .unwrap_err();
    assert!(matches!(e, WhatIfError::NoNodeMatches(_)), "{e}");
}

#[test]
fn selectors_read_as_kubectl_reads_them() {
    let s = parse_selector("a=1, b!=2,c in (x, y),d notin (z),e,!f,g==3").unwrap();
    let got: Vec<(String, String, Vec<String>)> = s
        .match_expressions
        .unwrap()
        .into_iter()
        .map(|e| (e.key, e.operator, e.values.unwrap_or_default()))
        .collect();
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        got,
        [
            ("a".into(), "In".into(), v(&["1"])),
            ("b".into(), "NotIn".into(), v(&["2"])),
            ("c".into(), "In".into(), v(&["x", "y"])),
            ("d".into(), "NotIn".into(), v(&["z"])),
            ("e".into(), "Exists".into(), v(&[])),
            ("f".into(), "DoesNotExist".into(), v(&[])),
            ("g".into(), "In".into(), v(&["3"])),
        ]
    );
    assert!(parse_selector("").is_err());
    assert!(parse_selector("a=1,,b").is_err());
    assert!(parse_selector("a b").is_err());
}

/// a (4 CPU, 500m used), b (4 CPU, 1 used), c (4 CPU, 3500m used); s runs a static pod,
/// k is annotated scale-down-disabled, u runs a pod without a controller.
fn compression_dump() -> ClusterObjects {
    let mut text = node("a", "4", "") + &node("b", "4", "") + &node("c", "4", "");
    text += &(node("s", "1", "") + &node("u", "1", ""));
    text += "---
apiVersion: v1
kind: Node
metadata: {name: k, labels: {kubernetes.io/hostname: k}, annotations: {cluster-autoscaler.kubernetes.io/scale-down-disabled: 'true'}}
status: {allocatable: {cpu: '1', memory: 8Gi, pods: '110'}}
---
apiVersion: v1
kind: Pod
metadata: {name: static-s, namespace: kube-system, annotations: {kubernetes.io/config.mirror: x}}
spec: {nodeName: s, containers: [{name: c, image: i, resources: {requests: {cpu: '1'}}}]}
status: {phase: Running}
";
    text += &pod("on-a", "a", "500m", "app: a", "ReplicaSet/a");
    text += &pod("agent-a", "a", "100m", "app: agent", "DaemonSet/agent");
    text += &pod("on-b", "b", "1", "app: b", "ReplicaSet/b");
    text += &pod("on-c", "c", "3500m", "app: c", "ReplicaSet/c");
    text += &pod("bare", "u", "1", "app: bare", "");
    text += &pod("on-k", "k", "1", "app: k", "ReplicaSet/k");
    load_str(&text, "dump.yaml").unwrap()
}

#[test]
fn compression_takes_the_emptiest_nodes_until_a_pod_has_nowhere_to_go() {
    let r = compress(&compression_dump(), &loaded(), 1, &[]).unwrap();
    let order: Vec<&str> = r.candidates.iter().map(|c| c.node.as_str()).collect();
    assert_eq!(order, ["a", "b", "c"]);
    assert_eq!(
        (r.candidates[0].cpu_percent, r.candidates[2].cpu_percent),
        (15, 87)
    );
    let kept: Vec<(&str, &str)> = r
        .kept
        .iter()
        .map(|k| (k.node.as_str(), k.reason.as_str()))
        .collect();
    assert_eq!(
        kept,
        [
            ("s", "runs the static (mirror) pod kube-system/static-s"),
            (
                "u",
                "default/bare has no controller: nothing would recreate it elsewhere"
            ),
            (
                "k",
                "annotated cluster-autoscaler.kubernetes.io/scale-down-disabled: \"true\""
            ),
        ]
    );
    // a's 500m pod moves (the DaemonSet pod goes with a); then b's 1 CPU pod has only c's
    // 500m left.
    assert_eq!(r.removable, ["a"]);
    assert_eq!(r.moves.len(), 1);
    assert_eq!(r.moves[0].pod, "default/on-a");
    assert!(matches!(r.moves[0].result, PodResult::Scheduled { .. }));
    let stop = r.stopped_by.unwrap();
    assert_eq!(stop.node, "b");
    assert_eq!(stop.not_placed.len(), 1, "{stop:?}");
    assert_eq!(stop.not_placed[0].pod, "default/on-b");
    assert!(
        stop.not_placed[0]
            .message
            .starts_with("0/4 nodes are available: "),
        "{}",
        stop.not_placed[0].message
    );
}

#[test]
fn compression_stops_at_a_node_whose_drain_breaks_a_budget() {
    let mut objects = compression_dump();
    let pdb = "---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: keep-a, namespace: default}
spec: {maxUnavailable: 0, selector: {matchLabels: {app: a}}}
";
    objects.extend(load_str(pdb, "pdb.yaml").unwrap());
    let r = compress(&objects, &loaded(), 1, &[]).unwrap();
    assert!(r.removable.is_empty());
    let stop = r.stopped_by.unwrap();
    assert_eq!(stop.node, "a");
    assert!(stop.not_placed.is_empty());
    assert_eq!(stop.pdb_violations[0].pdb, "default/keep-a");
    assert_eq!(stop.pdb_violations[0].exceeding, ["default/on-a"]);
}

/// Two budgets whose selectors both match `app: web` (one by `app`, one by `tier`).
const TWO_BUDGETS: &str = "---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: by-app, namespace: default}
spec: {maxUnavailable: 5, selector: {matchLabels: {app: web}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: by-tier, namespace: default}
spec: {maxUnavailable: 5, selector: {matchLabels: {tier: front}}}
";

#[test]
fn a_pod_two_budgets_cover_is_not_evictable_and_spends_no_budget() {
    let mut text = node("n1", "4", "") + &node("n2", "4", "");
    text += &pod(
        "web-a",
        "n1",
        "1",
        "app: web, tier: front",
        "ReplicaSet/web",
    );
    text += &pod("only-app", "n1", "1", "app: web", "ReplicaSet/web");
    // Pending pods are deleted without looking at budgets: evictable.
    text += &pod(
        "fresh",
        "n1",
        "1",
        "app: web, tier: front",
        "ReplicaSet/web",
    )
    .replace("phase: Running", "phase: Pending");
    text += TWO_BUDGETS;
    // An empty selector covers nothing for the eviction API: no third budget here.
    text += "---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: everything, namespace: default}
spec: {maxUnavailable: 5, selector: {}}
";
    let objects = load_str(&text, "dump.yaml").unwrap();
    let r = drain_of(&objects, names(&["n1"]));
    assert_eq!(r.not_evictable.len(), 1, "{:?}", r.not_evictable);
    let n = &r.not_evictable[0];
    assert_eq!((n.pod.as_str(), n.node.as_str()), ("default/web-a", "n1"));
    assert_eq!(n.pdbs, ["default/by-app", "default/by-tier"]);
    assert!(
        n.reason.contains("default/by-app, default/by-tier") && n.reason.contains("HTTP 500"),
        "{}",
        n.reason
    );
    let evicted: Vec<&str> = r.evicted.iter().map(|e| e.pod.as_str()).collect();
    assert_eq!(evicted, ["default/only-app", "default/fresh"]);
    assert!(
        !r.pdb_violations
            .iter()
            .any(|v| v.evicted.contains(&"default/web-a".to_string())),
        "{:?}",
        r.pdb_violations
    );
    // It stays on its cordoned node: n2 gets only the evicted ones.
    let on_n2 = r.usage.after.iter().find(|u| u.node == "n2").unwrap();
    assert_eq!(on_n2.cpu_milli, 2000);
    let on_n1 = r.usage.after.iter().find(|u| u.node == "n1").unwrap();
    assert_eq!(on_n1.cpu_milli, 1000);
}

#[test]
fn compression_keeps_a_node_whose_pod_two_budgets_cover() {
    let mut objects = compression_dump();
    // on-a gets a second label that a second budget selects; safe-to-evict cannot help.
    let on_a = objects
        .pods
        .iter_mut()
        .find(|p| p.metadata.name.as_deref() == Some("on-a"))
        .unwrap();
    on_a.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("tier".into(), "front".into());
    on_a.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(super::compression::SAFE_TO_EVICT.into(), "true".into());
    objects.extend(load_str(&TWO_BUDGETS.replace("app: web", "app: a"), "pdb.yaml").unwrap());
    let r = compress(&objects, &loaded(), 1, &[]).unwrap();
    let a = r.kept.iter().find(|k| k.node == "a").expect("a is kept");
    assert!(
        a.reason
            .starts_with("default/on-a cannot be evicted: covered by 2 PodDisruptionBudgets (default/by-app, default/by-tier)"),
        "{}",
        a.reason
    );
    assert!(r.candidates.iter().all(|c| c.node != "a"));
    assert!(!r.removable.contains(&"a".to_string()));
}

const TEMPLATE: &str = "
apiVersion: v1
kind: Node
metadata: {name: pool, labels: {kubernetes.io/hostname: pool, zone: z1}}
status: {allocatable: {cpu: '2', memory: 8Gi, pods: '110'}}
";

/// n1 (1 CPU) and five pending 1-CPU pods: n1 takes one, four are left, and a 2-CPU
/// template node takes two: exactly two nodes are needed.
fn pending_dump(extra: &str) -> ClusterObjects {
    let mut text = node("n1", "1", "");
    for i in 0..5 {
        text += &pod(&format!("p{i}"), "", "1", "app: p", "ReplicaSet/p");
    }
    text += extra;
    load_str(&text, "dump.yaml").unwrap()
}

fn nodes_for(objects: &ClusterObjects, count: Option<usize>, max: usize) -> AddNodesReport {
    let t = read_node_template(TEMPLATE, "node.yaml").unwrap();
    add_nodes(objects, &loaded(), 1, &t, count, max, &[]).unwrap()
}

#[test]
fn the_smallest_count_places_every_pod_and_one_fewer_does_not() {
    let objects = pending_dump("");
    let r = nodes_for(&objects, None, 1000);
    assert_eq!(r.nodes_added, 2);
    assert!(r.all_placed);
    assert_eq!((r.pending, r.placed), (5, 5));
    let fewer = r.one_fewer.clone().unwrap();
    assert_eq!((fewer.nodes, fewer.left_over), (1, 2));
    let per_node: Vec<(&str, usize)> = r
        .new_nodes
        .iter()
        .map(|n| (n.node.as_str(), n.pods))
        .collect();
    assert_eq!(per_node, [("pool-0", 2), ("pool-1", 2)]);
    // Checked independently: with --count 1 two pods are left over, with 2 none.
    let one = nodes_for(&objects, Some(1), 1000);
    assert!(!one.all_placed);
    assert_eq!(one.left_over.len(), 2);
    assert!(
        one.left_over[0].reason.contains("Insufficient cpu"),
        "{:?}",
        one.left_over
    );
    assert!(nodes_for(&objects, Some(2), 1000).all_placed);
    // The search tried 0, 1, 2 (doubling stopped at 2).
    let tried: Vec<usize> = r.tried.iter().map(|t| t.nodes).collect();
    assert_eq!(tried, [0, 1, 2]);
}

#[test]
fn the_search_bisects_after_doubling() {
    // Eleven pending pods: n1 takes one, ten need five nodes; 8 places all, 4 does not.
    let mut text = node("n1", "1", "");
    for i in 0..11 {
        text += &pod(&format!("p{i}"), "", "1", "app: p", "ReplicaSet/p");
    }
    let objects = load_str(&text, "dump.yaml").unwrap();
    let r = nodes_for(&objects, None, 1000);
    assert_eq!(r.nodes_added, 5);
    assert_eq!(r.one_fewer.as_ref().map(|t| t.left_over), Some(2));
    let tried: Vec<usize> = r.tried.iter().map(|t| t.nodes).collect();
    assert_eq!(tried, [0, 1, 2, 4, 8, 6, 5]);
}

#[test]
fn a_pod_no_copy_can_take_is_left_over_at_the_cap_with_why() {
    let ssd = "---
apiVersion: v1
kind: Pod
metadata: {name: wants-ssd, namespace: default}
spec:
  nodeSelector: {disk: ssd}
  containers: [{name: c, image: img, resources: {requests: {cpu: 100m}}}]
";
    let r = nodes_for(&pending_dump(ssd), None, 8);
    assert!(!r.all_placed);
    assert_eq!(r.nodes_added, 8);
    assert!(r.one_fewer.is_none());
    assert_eq!(r.left_over.len(), 1, "{:?}", r.left_over);
    assert_eq!(r.left_over[0].pod, "default/wants-ssd");
    assert_eq!(
        r.left_over[0].reason,
        "0/9 nodes are available: 9 node(s) didn't match Pod's node affinity/selector. preemption: 0/9 nodes are available: 9 Preemption is not helpful for scheduling.."
    );
}

#[test]
fn node_templates_are_checked() {
    let e = read_node_template(
        "apiVersion: v1\nkind: Node\nmetadata: {name: x}\n",
        "n.yaml",
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("n.yaml: node template: status.allocatable: missing"),
        "{e}"
    );
    let two = format!(
        "{TEMPLATE}---{}",
        TEMPLATE.replace("name: pool,", "name: other,")
    );
    let e = read_node_template(&two, "n.yaml").unwrap_err();
    assert!(e.to_string().contains("2 Node(s)"), "{e}");
    let cordoned = TEMPLATE.replace("status:", "spec: {unschedulable: true}\nstatus:");
    let e = read_node_template(&cordoned, "n.yaml").unwrap_err();
    assert_eq!(
        e.to_string(),
        "n.yaml: node template: spec.unschedulable: true: the copies would be cordoned and take no pod; remove spec.unschedulable from the template"
    );
    let t = read_node_template(TEMPLATE, "n.yaml").unwrap();
    let copies = super::add_nodes::node_copies(&t, 2, &pending_dump(""));
    let labels = copies[1].metadata.labels.as_ref().unwrap();
    assert_eq!(copies[1].metadata.name.as_deref(), Some("pool-1"));
    assert_eq!(labels["kubernetes.io/hostname"], "pool-1");
    assert_eq!(labels["zone"], "z1");
}

#[test]
fn a_budget_that_expects_no_pod_allows_no_disruption() {
    // Two pods without a controller: maxUnavailable counts controllers' replicas, so it
    // expects none and allows nothing; a budget with neither field allows nothing either.
    // (Each pod has one budget: a pod two budgets cover cannot be evicted at all.)
    let mut text = node("n1", "4", "") + &node("n2", "4", "");
    text += &pod("solo-a", "n1", "1", "app: solo-a", "");
    text += &pod("solo-b", "n1", "1", "app: solo-b", "");
    text += "---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: half, namespace: default}
spec: {maxUnavailable: 50%, selector: {matchLabels: {app: solo-a}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: bare, namespace: default}
spec: {selector: {matchLabels: {app: solo-b}}}
";
    let objects = load_str(&text, "dump.yaml").unwrap();
    let r = drain_of(&objects, names(&["n1"]));
    let got: Vec<(&str, &str, i32, i32)> = r
        .pdb_violations
        .iter()
        .map(|v| {
            (
                v.pdb.as_str(),
                v.budget.as_str(),
                v.expected_pods,
                v.disruptions_allowed,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("default/half", "maxUnavailable: 50%", 0, 0),
            (
                "default/bare",
                "neither minAvailable nor maxUnavailable",
                0,
                0
            ),
        ]
    );
    // Both are evicted with a note: nothing recreates them.
    assert!(
        r.evicted
            .iter()
            .all(|e| e.notes[0].starts_with("no controller"))
    );
}

#[test]
fn compression_doubles_then_bisects_and_checks_one_more_fails() {
    // s0..s6 (4 CPU, 1 used each) and big (16 CPU, 10 used). Without s0..s5 their six
    // pods fit (6 CPU free on big, 3 on s6); without s6 too, seven pods need 7 CPU and
    // only big's 6 are left.
    let mut text = node("big", "16", "");
    text += &pod("on-big", "big", "10", "app: big", "ReplicaSet/big");
    for i in 0..7 {
        text += &node(&format!("s{i}"), "4", "");
        text += &pod(
            &format!("on-s{i}"),
            &format!("s{i}"),
            "1",
            "app: s",
            "ReplicaSet/s",
        );
    }
    let objects = load_str(&text, "dump.yaml").unwrap();
    let r = compress(&objects, &loaded(), 1, &[]).unwrap();
    assert_eq!(r.removable, ["s0", "s1", "s2", "s3", "s4", "s5"]);
    assert_eq!(r.moves.len(), 6);
    let stop = r.stopped_by.unwrap();
    assert_eq!(stop.node, "s6");
    assert_eq!(stop.not_placed.len(), 1, "{stop:?}");
    let tried: Vec<(usize, bool)> = r.tried.iter().map(|t| (t.nodes, t.ok)).collect();
    assert_eq!(
        tried,
        [
            (1, true),
            (2, true),
            (4, true),
            (8, false),
            (6, true),
            (7, false)
        ]
    );
}

/// n1 and n2 (one GPU each, `gpu-0` in pools n1 and n2). `train` runs on n1 with a claim
/// made from a template and allocated n1's GPU, reserved only for it.
fn gpu_dump(extra: &str) -> ClusterObjects {
    let mut text = node("n1", "4", "") + &node("n2", "4", "");
    for n in ["n1", "n2"] {
        text += &format!(
            "---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: {n}-gpus}}
spec:
  driver: gpu.example.com
  nodeName: {n}
  pool: {{name: {n}, generation: 1, resourceSliceCount: 1}}
  devices: [{{name: gpu-0}}]
"
        );
    }
    text += r#"---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: default}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: train-gpu-x1
  namespace: default
  uid: uid-claim
  ownerReferences: [{apiVersion: v1, kind: Pod, name: train, uid: uid-train, controller: true}]
  annotations: {resource.kubernetes.io/pod-claim-name: gpu}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu}}]
status:
  allocation:
    devices:
      results: [{request: gpu, driver: gpu.example.com, pool: n1, device: gpu-0}]
    nodeSelector:
      nodeSelectorTerms:
      - matchFields: [{key: metadata.name, operator: In, values: [n1]}]
  reservedFor: [{resource: pods, name: train, uid: uid-train}]
---
apiVersion: v1
kind: Pod
metadata:
  name: train
  namespace: default
  uid: uid-train
  ownerReferences: [{apiVersion: batch/v1, kind: Job, name: train, uid: uid-job, controller: true}]
spec:
  nodeName: n1
  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
  containers: [{name: c, image: i}]
status:
  phase: Running
  resourceClaimStatuses: [{name: gpu, resourceClaimName: train-gpu-x1}]
"#;
    text += extra;
    load_str(&text, "dump.yaml").unwrap_or_else(|e| panic!("{e:?}"))
}

#[test]
fn a_drained_pod_with_its_own_claim_gets_a_gpu_where_it_lands() {
    let r = drain_of(&gpu_dump(""), names(&["n1"]));
    let e = &r.evicted[0];
    assert_eq!(e.pod, "default/train");
    assert_eq!(
        e.result,
        PodResult::Scheduled {
            node: "n2".into(),
            preempted: vec![]
        },
        "{e:?}"
    );
    // The claim was deallocated with n1's GPU and allocated again on n2's.
    assert_eq!(e.devices.len(), 1, "{e:?}");
    assert_eq!(
        (e.devices[0].pool.as_str(), e.devices[0].device.as_str()),
        ("n2", "gpu-0")
    );
    assert_eq!(e.devices[0].claim, "default/train-gpu-x1");
    assert!(e.notes.is_empty(), "{:?}", e.notes);
    // With n2's GPU taken by another pod, it fits nowhere (n1 is cordoned).
    let busy = drain_of(
        &gpu_dump(
            r#"---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: other-gpu, namespace: default, uid: uid-other}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu}}]
status:
  allocation:
    devices:
      results: [{request: gpu, driver: gpu.example.com, pool: n2, device: gpu-0}]
    nodeSelector:
      nodeSelectorTerms:
      - matchFields: [{key: metadata.name, operator: In, values: [n2]}]
  reservedFor: [{resource: pods, name: other, uid: uid-other-pod}]
---
apiVersion: v1
kind: Pod
metadata: {name: other, namespace: default, uid: uid-other-pod}
spec:
  nodeName: n2
  resourceClaims: [{name: gpu, resourceClaimName: other-gpu}]
  containers: [{name: c, image: i}]
status: {phase: Running}
"#,
        ),
        names(&["n1"]),
    );
    let PodResult::Unschedulable { message } = &busy.evicted[0].result else {
        panic!("{:?}", busy.evicted[0]);
    };
    assert!(
        message.starts_with("0/2 nodes are available: "),
        "{message}"
    );
    assert!(message.contains("cannot allocate all claims"), "{message}");
}

#[test]
fn a_claim_shared_with_a_pod_that_stays_pins_the_drained_pod_and_says_so() {
    // `train` and the DaemonSet pod `monitor` (which stays) share `train-gpu-x1`.
    let mut objects = gpu_dump(
        r#"---
apiVersion: v1
kind: Pod
metadata:
  name: monitor
  namespace: default
  uid: uid-monitor
  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: monitor, uid: uid-ds, controller: true}]
spec:
  nodeName: n1
  resourceClaims: [{name: gpu, resourceClaimName: train-gpu-x1}]
  containers: [{name: c, image: i}]
status: {phase: Running}
"#,
    );
    let claim = objects.resource_claims[0].status.as_mut().unwrap();
    claim.reserved_for.as_mut().unwrap().push(
        k8s_openapi::api::resource::v1::ResourceClaimConsumerReference {
            resource: "pods".into(),
            name: "monitor".into(),
            uid: "uid-monitor".into(),
            api_group: None,
        },
    );
    let r = drain_of(&objects, names(&["n1"]));
    let e = r.evicted.iter().find(|e| e.pod == "default/train").unwrap();
    let PodResult::Unschedulable { message } = &e.result else {
        panic!("{e:?}");
    };
    assert!(
        message.starts_with("0/2 nodes are available: "),
        "{message}"
    );
    assert_eq!(
        e.notes,
        [
            "shares ResourceClaim default/train-gpu-x1 with pods monitor, which stay: its devices stay allocated on node n1, so the pod can only go where they are reachable"
        ]
    );
}
