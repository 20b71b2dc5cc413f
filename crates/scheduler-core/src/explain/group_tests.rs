//! "Why is my gang pending?": the group section of an explanation, filled by the group
//! cycle that decides, on the live path (`explain_pod`) and in `simulate --explain`.

use super::group::{DomainResult, GroupPolicyName, GroupResult, MemberResult};
use super::*;
use crate::plugins::gang_scheduling::WAITING_FOR_MIN_COUNT;
use crate::simulate::{ClusterObjects, explain_pod, load_str, run_explained};

/// `n` 8-GPU nodes named `prefix-i`, labelled with zone `zone` when given.
fn nodes(prefix: &str, n: usize, zone: Option<&str>) -> String {
    let labels = zone
        .map(|z| format!(", labels: {{topology.kubernetes.io/zone: {z}}}"))
        .unwrap_or_default();
    (0..n)
        .map(|i| {
            format!(
                "---\napiVersion: v1\nkind: Node\nmetadata: {{name: {prefix}-{i}{labels}}}\nstatus:\n  allocatable: {{cpu: '64', memory: 256Gi, pods: '110', nvidia.com/gpu: '8'}}\n"
            )
        })
        .collect()
}

fn pod_group(name: &str, min_count: u32, topology: bool) -> String {
    let constraint = if topology {
        "\n  schedulingConstraints: {topology: [{key: topology.kubernetes.io/zone}]}"
    } else {
        ""
    };
    format!(
        "---\napiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {{name: {name}, namespace: ml}}\nspec:\n  schedulingPolicy: {{gang: {{minCount: {min_count}}}}}{constraint}\n"
    )
}

/// A pod of `group` asking for 8 GPUs and 8 cpus.
fn member(name: &str, group: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: ml}}\nspec:\n  schedulingGroup: {{podGroupName: {group}}}\n  containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: '8', cpu: '8'}}}}}}]\n"
    )
}

fn objects(text: &str) -> ClusterObjects {
    load_str(text, "gang.yaml").unwrap()
}

fn explain(objects: &ClusterObjects, pod: &str) -> Explanation {
    let loaded = crate::config::from_flags(None, None).unwrap();
    explain_pod(objects, &loaded, pod, 1)
        .unwrap_or_else(|e| panic!("{pod}: {e}"))
        .explanation
}

/// The explanation `simulate --explain` gives `pod`.
fn simulated(objects: &ClusterObjects, pod: &str) -> Explanation {
    let loaded = crate::config::from_flags(None, None).unwrap();
    run_explained(objects, &loaded, 1, &|k| k == pod)
        .unwrap()
        .outcomes
        .into_iter()
        .find(|o| o.pod == pod)
        .and_then(|o| o.explanation)
        .unwrap_or_else(|| panic!("{pod} not explained"))
}

/// Three 8-GPU pods of a gang of minCount 3, two free nodes.
fn gang_of_three_on_two_nodes() -> ClusterObjects {
    let mut text = nodes("gpu", 2, None);
    text.push_str(&pod_group("train", 3, false));
    for i in 0..3 {
        text.push_str(&member(&format!("train-{i}"), "train"));
    }
    objects(&text)
}

#[test]
fn a_gang_short_of_nodes_says_who_fit_where_and_that_min_count_blocked_it() {
    let objects = gang_of_three_on_two_nodes();
    let blocked = "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining";
    for e in [
        explain(&objects, "ml/train-2"),
        simulated(&objects, "ml/train-2"),
    ] {
        let g = e
            .group
            .as_ref()
            .expect("a gang member is explained by its group");
        assert_eq!(g.pod_group, "ml/train");
        assert_eq!(g.api, "podgroups.scheduling.k8s.io");
        assert_eq!(g.api_version.as_deref(), Some("scheduling.k8s.io/v1beta1"));
        assert_eq!(g.policy, Some(GroupPolicyName::Gang));
        assert_eq!(g.min_count, Some(3));
        assert_eq!((g.pods.queued, g.pods.scheduled, g.pods.total), (3, 0, 3));
        assert_eq!(g.outcome, GroupResult::Unschedulable);
        assert_eq!(g.message.as_deref(), Some(blocked));
        // Which fitted where, which did not.
        let members: Vec<(&str, MemberResult, Option<&str>)> = g
            .members
            .iter()
            .map(|m| (m.pod.as_str(), m.result, m.node.as_deref()))
            .collect();
        assert_eq!(
            members,
            [
                ("ml/train-0", MemberResult::Fitted, Some("gpu-0")),
                ("ml/train-1", MemberResult::Fitted, Some("gpu-1")),
                ("ml/train-2", MemberResult::Unschedulable, None),
            ]
        );
        let own = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.";
        assert_eq!(g.members[2].message.as_deref(), Some(own));
        assert_eq!(
            g.members[0].message.as_deref(),
            Some(format!("pod group \"train\": {blocked}").as_str())
        );
        // The explained member's own cycle, as it ran in the group's: every node full.
        assert_eq!(e.outcome, Outcome::Unschedulable);
        assert_eq!(e.message.as_deref(), Some(own));
        assert_eq!(e.reasons_message(), own);
        assert_eq!(e.nodes.len(), 2);
        assert!(
            e.nodes
                .iter()
                .all(|n| matches!(n.verdict, Verdict::Rejected(_)))
        );
    }

    // A member that fitted: its node and scores, yet unschedulable with the gang's reason.
    let e = explain(&objects, "ml/train-1");
    assert_eq!(e.outcome, Outcome::Unschedulable);
    assert_eq!(e.node, None);
    assert_eq!(
        e.message.as_deref(),
        Some(format!("pod group \"train\": {blocked}").as_str())
    );
    assert_eq!(
        e.selection.as_ref().map(|s| s.chosen.as_str()),
        Some("gpu-1")
    );
    // gpu-0 holds train-0 while train-1 is tried.
    assert!(matches!(e.verdict("gpu-0"), Some(Verdict::Rejected(_))));
    assert!(e.hints.is_empty() && e.after_filter_rejection.is_none());

    let table = render::render(&e, 20);
    assert!(
        table.starts_with(
            "Pod group ml/train (PodGroup scheduling.k8s.io/v1beta1, gang, minCount 3): unschedulable\n  minCount (3) cannot be satisfied: 2 scheduled, 0 remaining\n  Pods: 3 tried in this cycle, 0 placed before, 3 in all.\n"
        ),
        "{table}"
    );
    let row = |pod: &str| {
        table
            .lines()
            .find(|l| l.trim_start().starts_with(pod))
            .unwrap_or_else(|| panic!("no row for {pod}:\n{table}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(
        row("ml/train-0 ").starts_with("ml/train-0 fitted gpu-0"),
        "{table}"
    );
    assert_eq!(
        row("ml/train-2 "),
        "ml/train-2 unschedulable - 0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    );
    assert!(
        table.contains("\nml/train-1 (profile default-scheduler): unschedulable\n"),
        "{table}"
    );
    assert!(table.contains("Chosen: gpu-1"), "{table}");

    // JSON carries the section under `group`.
    let v = serde_json::to_value(&e).unwrap();
    assert_eq!(v["group"]["outcome"], "unschedulable");
    assert_eq!(v["group"]["minCount"], 3);
    assert_eq!(v["group"]["pods"]["total"], 3);
    assert_eq!(v["group"]["members"][0]["result"], "fitted");
    assert_eq!(v["group"]["members"][2]["result"], "unschedulable");
}

#[test]
fn a_gang_that_fits_names_each_members_node() {
    let mut text = nodes("gpu", 3, None);
    text.push_str(&pod_group("train", 3, false));
    for i in 0..3 {
        text.push_str(&member(&format!("train-{i}"), "train"));
    }
    let objects = objects(&text);
    for e in [
        explain(&objects, "ml/train-0"),
        simulated(&objects, "ml/train-0"),
    ] {
        let g = e.group.as_ref().unwrap();
        assert_eq!(g.outcome, GroupResult::Placed);
        assert_eq!(g.message, None);
        assert!(
            g.members.iter().all(|m| m.result == MemberResult::Placed
                && m.node.is_some()
                && m.message.is_none())
        );
        assert_eq!(e.outcome, Outcome::Scheduled);
        assert_eq!(e.node, g.members[0].node);
    }
}

#[test]
fn a_gang_short_of_quorum_waits_with_upstreams_message() {
    let mut text = nodes("gpu", 6, None);
    text.push_str(&pod_group("short", 3, false));
    text.push_str(&member("short-0", "short"));
    text.push_str(&member("orphan", "nowhere"));
    let objects = objects(&text);
    for e in [
        explain(&objects, "ml/short-0"),
        simulated(&objects, "ml/short-0"),
    ] {
        assert_eq!(e.outcome, Outcome::Unschedulable);
        assert_eq!(e.message.as_deref(), Some(WAITING_FOR_MIN_COUNT));
        assert!(e.nodes.is_empty(), "no cycle ran");
        assert_eq!(e.num_all_nodes, 6);
        let g = e.group.as_ref().unwrap();
        assert_eq!(g.outcome, GroupResult::Waiting);
        assert_eq!(g.message.as_deref(), Some(WAITING_FOR_MIN_COUNT));
        assert_eq!(g.min_count, Some(3));
        assert_eq!((g.pods.queued, g.pods.scheduled, g.pods.total), (0, 0, 1));
        assert!(g.members.is_empty());
        let table = render::render(&e, 20);
        assert!(
            table.starts_with(
                "Pod group ml/short (PodGroup scheduling.k8s.io/v1beta1, gang, minCount 3): waiting at PreEnqueue\n  waiting for minCount pods from a gang to appear in scheduling queue\n"
            ),
            "{table}"
        );
        assert!(
            table.contains("No node was evaluated for this pod: it waits at PreEnqueue"),
            "{table}"
        );
    }
    // No PodGroup at all: upstream's message, and nothing known of the group.
    let e = explain(&objects, "ml/orphan");
    let g = e.group.unwrap();
    assert_eq!(
        g.message.as_deref(),
        Some("waiting for pod's pod group \"nowhere\" to appear in scheduling queue")
    );
    assert_eq!((g.policy, g.min_count, g.api_version), (None, None, None));
}

/// Zones a (2 nodes), b (3) and c (4); a gang of three with a zone constraint.
fn zoned_gang(zones: &[(&str, usize)]) -> ClusterObjects {
    let mut text = String::new();
    for (zone, n) in zones {
        text.push_str(&nodes(zone, *n, Some(zone)));
    }
    text.push_str(&pod_group("zonal", 3, true));
    for i in 0..3 {
        text.push_str(&member(&format!("zonal-{i}"), "zonal"));
    }
    objects(&text)
}

#[test]
fn a_topology_constrained_gang_lists_each_domain_and_why() {
    let objects = zoned_gang(&[("a", 2), ("b", 3), ("c", 4)]);
    for e in [
        explain(&objects, "ml/zonal-0"),
        simulated(&objects, "ml/zonal-0"),
    ] {
        let g = e.group.as_ref().unwrap();
        assert_eq!(
            g.topology_key.as_deref(),
            Some("topology.kubernetes.io/zone")
        );
        assert_eq!(g.outcome, GroupResult::Placed);
        let domains: Vec<(&str, usize, usize, DomainResult)> = g
            .domains
            .iter()
            .map(|d| (d.domain.as_str(), d.nodes, d.placed, d.result))
            .collect();
        assert_eq!(
            domains,
            [
                (
                    "topology.kubernetes.io/zone=a",
                    2,
                    2,
                    DomainResult::Rejected
                ),
                (
                    "topology.kubernetes.io/zone=b",
                    3,
                    3,
                    DomainResult::Feasible
                ),
                ("topology.kubernetes.io/zone=c", 4, 3, DomainResult::Chosen),
            ]
        );
        assert_eq!(
            g.domains[0].reason.as_deref(),
            Some("minCount (3) cannot be satisfied: 2 scheduled, 0 remaining")
        );
        assert_eq!(g.domains[0].score, None);
        // Both hold the gang (PodGroupPodsCount 100 each); c has more cpu left (24 of 256
        // cpus asked: 90, against 24 of 192 in b: 87; memory nearly free in both, the
        // scorer counting upstream's 200Mi default for pods that ask none).
        let parts: Vec<(&str, i64)> = g.domains[2]
            .scores
            .iter()
            .map(|p| (p.plugin.as_str(), p.score))
            .collect();
        assert_eq!(
            (parts, g.domains[2].score),
            (
                vec![("NodeResourcesFit", 94), ("PodGroupPodsCount", 100)],
                Some(194)
            )
        );
        assert_eq!(g.domains[1].score, Some(193));
        assert_eq!(
            g.domains[1].reason.as_deref(),
            Some("score 193 is lower than topology.kubernetes.io/zone=c's 194")
        );
        assert!(g.domains.iter().all(|d| !d.pinned));
        // Every member in c; the member's own cycle looked at c's nodes only.
        assert!(
            g.members
                .iter()
                .all(|m| m.node.as_deref().is_some_and(|n| n.starts_with("c-")))
        );
        assert_eq!(e.outcome, Outcome::Scheduled);
        for n in &e.nodes {
            match &n.verdict {
                Verdict::Skipped { reason } => {
                    assert!(!n.node.starts_with("c-"), "{n:?}");
                    assert_eq!(
                        reason,
                        &format!("{SKIPPED_PLACEMENT} (topology.kubernetes.io/zone=c)")
                    );
                }
                _ => assert!(n.node.starts_with("c-"), "{n:?}"),
            }
        }
        let table = render::render(&e, 20);
        let row = |d: &str| {
            table
                .lines()
                .find(|l| l.trim_start().starts_with(d))
                .unwrap_or_else(|| panic!("no row for {d}:\n{table}"))
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            row("topology.kubernetes.io/zone=c "),
            "topology.kubernetes.io/zone=c 4 3 chosen 194 (NodeResourcesFit 94 + PodGroupPodsCount 100)"
        );
        assert_eq!(
            row("topology.kubernetes.io/zone=a "),
            "topology.kubernetes.io/zone=a 2 2 rejected - minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"
        );
    }
}

#[test]
fn a_topology_constrained_gang_with_no_domain_big_enough_says_so_per_domain() {
    let objects = zoned_gang(&[("a", 2), ("b", 2)]);
    let e = explain(&objects, "ml/zonal-2");
    let g = e.group.as_ref().unwrap();
    let first = "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining";
    assert_eq!(g.outcome, GroupResult::Unschedulable);
    assert_eq!(
        g.message,
        Some(format!(
            "0/2 placements are available, first placement status: {first}"
        ))
    );
    assert!(
        g.domains
            .iter()
            .all(|d| d.result == DomainResult::Rejected && d.reason.as_deref() == Some(first))
    );
    // The members as the first domain's evaluation left them (upstream's first status).
    assert_eq!(g.members[0].node.as_deref(), Some("a-0"));
    assert_eq!(g.members[2].result, MemberResult::Unschedulable);
    // The third member's own message counts only the domain's nodes, and so does the
    // explanation rebuilt from its verdicts.
    let own = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.";
    assert_eq!(e.message.as_deref(), Some(own));
    assert_eq!(e.reasons_message(), own);
    assert_eq!(e.num_all_nodes, 4);
}

#[test]
fn members_already_placed_pin_the_domain() {
    let mut text = nodes("a", 2, Some("a"));
    text.push_str(&nodes("b", 3, Some("b")));
    text.push_str(&pod_group("zonal", 2, true));
    text.push_str(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: zonal-0, namespace: ml}\nspec:\n  nodeName: a-0\n  schedulingGroup: {podGroupName: zonal}\n  containers: [{name: c, resources: {requests: {nvidia.com/gpu: '8'}}}]\n",
    );
    text.push_str(&member("zonal-1", "zonal"));
    let e = explain(&objects(&text), "ml/zonal-1");
    let g = e.group.unwrap();
    assert_eq!((g.pods.queued, g.pods.scheduled, g.pods.total), (1, 1, 2));
    assert_eq!(g.domains.len(), 1);
    assert_eq!(g.domains[0].domain, "topology.kubernetes.io/zone=a");
    assert!(g.domains[0].pinned);
    assert_eq!(g.members[0].node.as_deref(), Some("a-1"));
}

#[test]
fn a_basic_group_is_explained_pod_by_pod_and_a_pod_without_one_unchanged() {
    let mut text = nodes("gpu", 1, None);
    text.push_str(
        "---\napiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: loose, namespace: ml}\nspec:\n  schedulingPolicy: {basic: {}}\n",
    );
    text.push_str(&member("loose-0", "loose"));
    text.push_str(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: alone, namespace: ml}\nspec:\n  containers: [{name: c, resources: {requests: {cpu: '1'}}}]\n",
    );
    let objects = objects(&text);
    let e = explain(&objects, "ml/loose-0");
    assert_eq!(e.outcome, Outcome::Scheduled);
    let g = e.group.as_ref().unwrap();
    assert_eq!(g.outcome, GroupResult::PodByPod);
    assert_eq!(g.policy, Some(GroupPolicyName::Basic));
    assert_eq!(
        g.message.as_deref(),
        Some("basic policy: the group's pods are scheduled one by one")
    );
    assert_eq!(simulated(&objects, "ml/loose-0").group, e.group);

    let e = explain(&objects, "ml/alone");
    assert_eq!(e.group, None);
    assert!(render::render(&e, 20).starts_with("ml/alone (profile default-scheduler)"));
    let v = serde_json::to_value(&e).unwrap();
    assert!(v.get("group").is_none(), "{v}");
}
