//! Trees of groups in `simulate` (CompositePodGroup, 1.37 alpha): the root is scheduled as
//! one, each level needs `minGroupCount` of its children, and nothing of a tree is bound
//! unless its root's quorum is met.

use super::*;

/// `n` free 8-GPU nodes, two per zone.
fn nodes(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "---\napiVersion: v1\nkind: Node\nmetadata: {{name: gpu-{i}, labels: {{topology.kubernetes.io/zone: z{}}}}}\nstatus:\n  allocatable: {{cpu: '64', memory: 512Gi, pods: '110', nvidia.com/gpu: '8'}}\n",
                i / 2
            )
        })
        .collect()
}

/// A CompositePodGroup; `policy` is `gang: {minGroupCount: N}` or `basic: {}`.
fn composite(name: &str, parent: Option<&str>, policy: &str, extra: &str) -> String {
    let parent = parent
        .map(|p| format!("  parentCompositePodGroupName: {p}\n"))
        .unwrap_or_default();
    format!(
        "---\napiVersion: scheduling.k8s.io/v1alpha3\nkind: CompositePodGroup\nmetadata: {{name: {name}, namespace: ml}}\nspec:\n{parent}  workloadRef: {{workloadName: train, templateName: {name}}}\n  schedulingPolicy: {{{policy}}}\n{extra}"
    )
}

/// A gang PodGroup of `pods` 8-GPU pods (minCount `min`) under `parent`.
fn leaf(name: &str, parent: &str, min: u32, pods: usize) -> String {
    let mut s = format!(
        "---\napiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {{name: {name}, namespace: ml}}\nspec:\n  parentCompositePodGroupName: {parent}\n  schedulingPolicy: {{gang: {{minCount: {min}}}}}\n"
    );
    for i in 0..pods {
        s.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}-{i}, namespace: ml}}\nspec:\n  schedulingGroup: {{podGroupName: {name}}}\n  containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: '8'}}}}}}]\n"
        ));
    }
    s
}

use super::gang_tests::{message, preempted, simulate};

fn bound(r: &Report, pods: &[&str]) -> Vec<bool> {
    pods.iter()
        .map(|p| r.node_of(&format!("ml/{p}")).is_some())
        .collect()
}

/// Two slices of two pods each, both needed (`minGroupCount: 2`).
fn two_slices(n: usize, min_group_count: u32) -> String {
    let mut text = nodes(n);
    text.push_str(&composite(
        "job",
        None,
        &format!("gang: {{minGroupCount: {min_group_count}}}"),
        "",
    ));
    text.push_str(&leaf("a", "job", 2, 2));
    text.push_str(&leaf("b", "job", 2, 2));
    text
}

#[test]
fn a_tree_short_of_room_for_its_quorum_binds_nothing() {
    // Three nodes for two slices of two: slice a fits, b cannot, and the job needs both.
    let r = simulate(&two_slices(3, 2));
    assert_eq!(r.scheduled(), 0, "{:?}", r.outcomes);
    assert!(
        message(&r, "ml/a-0").contains(
            "composite pod group \"job\": minCount (2) cannot be satisfied: 1 scheduled, 0 remaining"
        ),
        "{}",
        message(&r, "ml/a-0")
    );
    // Four nodes: all four.
    let r = simulate(&two_slices(4, 2));
    assert_eq!(bound(&r, &["a-0", "a-1", "b-0", "b-1"]), [true; 4]);
}

#[test]
fn a_tree_that_needs_one_child_binds_the_slice_that_fits() {
    let r = simulate(&two_slices(3, 1));
    assert_eq!(
        bound(&r, &["a-0", "a-1", "b-0", "b-1"]),
        [true, true, false, false]
    );
    // b's own gang failed: its pods keep their gang's reason, not the tree's.
    assert!(
        message(&r, "ml/b-0").contains("nodes are available")
            || message(&r, "ml/b-1").contains("nodes are available"),
        "{:?}",
        r.outcomes
    );
}

#[test]
fn pods_wait_for_the_whole_tree_and_for_missing_parents() {
    let mut text = nodes(4);
    text.push_str(&composite("job", None, "gang: {minGroupCount: 2}", ""));
    text.push_str(&leaf("a", "job", 2, 2));
    // b wants two pods and has one: the job's quorum cannot be met yet.
    text.push_str(&leaf("b", "job", 2, 1));
    // c names a parent that does not exist.
    text.push_str(&leaf("c", "nowhere", 1, 1));
    let r = simulate(&text);
    assert_eq!(r.scheduled(), 0);
    assert_eq!(
        message(&r, "ml/a-0"),
        "waiting for composite pod group \"job\" tree to meet quorum"
    );
    assert_eq!(
        message(&r, "ml/c-0"),
        "failed to build hierarchy snapshot: composite pod group object not found in state for ml/nowhere"
    );
}

#[test]
fn levels_nest_and_each_counts_its_own_children() {
    // job (both children) -> [slice (one child) -> [a, b], c]; four nodes.
    let mut text = nodes(4);
    text.push_str(&composite("job", None, "gang: {minGroupCount: 2}", ""));
    text.push_str(&composite("slice", Some("job"), "basic: {}", ""));
    text.push_str(&leaf("a", "slice", 2, 2));
    text.push_str(&leaf("b", "slice", 2, 2));
    text.push_str(&leaf("c", "job", 2, 2));
    let r = simulate(&text);
    // Children in name order: c first (job's), then the slice, whose a fits and b does
    // not; the slice needs one, so the job has its two.
    assert_eq!(
        bound(&r, &["a-0", "a-1", "b-0", "b-1", "c-0", "c-1"]),
        [true, true, false, false, true, true],
        "{:?}",
        r.outcomes
    );
}

/// A holder of all 8 GPUs of `node`, of higher priority than anything here.
fn holder(node: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: holder-{node}, namespace: ml}}\nspec:\n  nodeName: {node}\n  priority: 1000\n  containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: '8'}}}}}}]\n"
    )
}

/// A job of two one-pod slices that must share a zone (two nodes per zone).
fn zonal_job(busy: &[&str]) -> Report {
    let mut text = nodes(4);
    for b in busy {
        text.push_str(&holder(b));
    }
    text.push_str(&composite(
        "job",
        None,
        "gang: {minGroupCount: 2}",
        "  schedulingConstraints: {topology: [{key: topology.kubernetes.io/zone}]}\n",
    ));
    text.push_str(&leaf("a", "job", 1, 1));
    text.push_str(&leaf("b", "job", 1, 1));
    simulate(&text)
}

#[test]
fn a_topology_constrained_tree_lands_in_one_domain() {
    // gpu-1 (zone z0) is busy: only z1 holds both slices (unconstrained, one would take
    // gpu-0).
    let r = zonal_job(&["gpu-1"]);
    let mut placed = vec![r.node_of("ml/a-0"), r.node_of("ml/b-0")];
    placed.sort();
    assert_eq!(placed, [Some("gpu-2"), Some("gpu-3")], "{:?}", r.outcomes);
    // One free node per zone: no placement holds the job, nothing is bound.
    let r = zonal_job(&["gpu-0", "gpu-2"]);
    assert_eq!(r.scheduled(), 0);
    let m = message(&r, "ml/a-0");
    assert!(
        m.contains(
            "0/2 placements are available, first placement status: minCount (2) cannot be satisfied"
        ),
        "{m}"
    );
}

#[test]
fn composite_groups_of_another_version_are_refused_by_name() {
    let text = composite("job", None, "basic: {}", "").replace("v1alpha3", "v1beta1");
    let errors = load_str(&text, "tree.yaml").unwrap_err();
    assert!(
        errors[0].message.starts_with(
            "CompositePodGroup ml/job: apiVersion \"scheduling.k8s.io/v1beta1\" is not supported"
        ),
        "{errors:?}"
    );
}

/// A low-priority job of two one-pod slices runs on both nodes; a high-priority gang of one
/// needs a node. In `all` mode on the job, the whole tree goes; in `single`, one pod.
#[test]
fn preemption_takes_a_whole_tree_whose_root_is_disrupted_as_one() {
    let dump = |mode: &str| {
        let mut text = nodes(2);
        text.push_str(&composite(
            "batch",
            None,
            "gang: {minGroupCount: 1}",
            &format!("  disruptionMode: {{{mode}: {{}}}}\n"),
        ));
        for i in 0..2 {
            text.push_str(&format!(
                "---\napiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {{name: s{i}, namespace: ml}}\nspec:\n  parentCompositePodGroupName: batch\n  priority: 10\n  schedulingPolicy: {{gang: {{minCount: 1}}}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {{name: s{i}-0, namespace: ml}}\nspec:\n  nodeName: gpu-{i}\n  priority: 10\n  schedulingGroup: {{podGroupName: s{i}}}\n  containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: '8'}}}}}}]\n"
            ));
        }
        text.push_str("---\napiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: urgent, namespace: ml}\nspec:\n  priority: 100\n  schedulingPolicy: {gang: {minCount: 1}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: urgent-0, namespace: ml}\nspec:\n  priority: 100\n  schedulingGroup: {podGroupName: urgent}\n  containers: [{name: c, resources: {requests: {nvidia.com/gpu: '8'}}}]\n");
        simulate(&text)
    };
    let all = dump("all");
    assert!(all.node_of("ml/urgent-0").is_some(), "{:?}", all.outcomes);
    assert_eq!(preempted(&all), ["ml/s0-0", "ml/s1-0"]);
    let single = dump("single");
    assert!(single.node_of("ml/urgent-0").is_some());
    assert_eq!(preempted(&single).len(), 1, "{:?}", preempted(&single));
}

/// Three nodes, each held by a low-priority pod; a high-priority job of two one-pod slices
/// (both needed) preempts for the whole tree: two victims, both slices placed.
#[test]
fn a_tree_preempts_for_its_root_quorum() {
    let mut text = nodes(3);
    for i in 0..3 {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: low-{i}, namespace: ml}}\nspec:\n  nodeName: gpu-{i}\n  priority: 1\n  containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: '8'}}}}}}]\n"
        ));
    }
    text.push_str(&composite(
        "job",
        None,
        "gang: {minGroupCount: 2}",
        "  priority: 100\n",
    ));
    for s in ["a", "b"] {
        // The groups' priority is the root's (a tree of mixed priorities is refused).
        text.push_str(
            &leaf(s, "job", 1, 1)
                .replace("  schedulingGroup:", "  priority: 100\n  schedulingGroup:")
                .replace(
                    "  schedulingPolicy:",
                    "  priority: 100\n  schedulingPolicy:",
                ),
        );
    }
    let r = simulate(&text);
    assert_eq!(bound(&r, &["a-0", "b-0"]), [true, true], "{:?}", r.outcomes);
    let victims = preempted(&r);
    assert_eq!(victims.len(), 2, "{victims:?}");
}

/// A tree whose groups disagree on priority is not tried, with upstream's error.
#[test]
fn a_tree_with_mixed_priorities_is_refused_as_upstream() {
    let mut text = nodes(4);
    text.push_str(&composite(
        "job",
        None,
        "gang: {minGroupCount: 1}",
        "  priority: 5\n",
    ));
    text.push_str(&leaf("a", "job", 1, 1));
    let r = simulate(&text);
    assert_eq!(r.scheduled(), 0);
    assert_eq!(
        message(&r, "ml/a-0"),
        "all pod groups in a hierarchy should have the same priority as the root pod group's priority, got 5 (ml/job) and 0 (ml/a)"
    );
}
