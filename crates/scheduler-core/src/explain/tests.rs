use std::sync::Arc;

use super::*;
use crate::cache::{Cache, Snapshot};
use crate::framework::{NominatedPods, ProfileRegistry, Registry};
use crate::schedule_one::{Decision, SchedulingAlgorithm, schedule_one, schedule_one_explained};
use crate::simulate::{ClusterObjects, load_str};
use crate::types::PodInfo;

/// A random cluster: nodes of several sizes and zones, some tainted, some cordoned, some
/// labelled; running low-priority pods; pending pods asking for a mix of everything.
fn generated(seed: u64, nodes: usize, pods: usize) -> String {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut docs = Vec::new();
    for i in 0..nodes {
        let zone = ["a", "b", "c"][rng.usize(..3)];
        let cpu = [2, 4, 8][rng.usize(..3)];
        let disk = if rng.bool() { ", disktype: ssd" } else { "" };
        let taint = match rng.usize(..6) {
            0 => "taints: [{key: gpu, value: present, effect: NoSchedule}]",
            1 => "taints: [{key: spot, effect: NoExecute}]",
            _ => "taints: []",
        };
        let cordon = if rng.usize(..10) == 0 {
            ", unschedulable: true"
        } else {
            ""
        };
        docs.push(format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: n{i}, labels: {{topology.kubernetes.io/zone: {zone}, kubernetes.io/hostname: n{i}{disk}}}}}\nspec: {{{taint}{cordon}}}\nstatus: {{allocatable: {{cpu: '{cpu}', memory: 8Gi, pods: '6'}}}}"
        ));
        for j in 0..rng.usize(..3) {
            docs.push(format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: run-{i}-{j}, namespace: d, labels: {{app: r}}}}\nspec: {{nodeName: n{i}, priority: 0, containers: [{{name: c, image: img, resources: {{requests: {{cpu: 900m, memory: 1Gi}}}}}}]}}"
            ));
        }
    }
    for i in 0..pods {
        let cpu = [100, 500, 1500, 3000, 9000][rng.usize(..5)];
        let prio = [0, 100, 1000][rng.usize(..3)];
        let mut extra = String::new();
        if rng.usize(..4) == 0 {
            extra.push_str(", tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]");
        }
        match rng.usize(..10) {
            0 | 1 => extra.push_str(", nodeSelector: {disktype: ssd}"),
            2 => extra.push_str(", nodeSelector: {disktype: nvme}"),
            _ => {}
        }
        if rng.usize(..4) == 0 {
            extra.push_str(", topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: s}}}]");
        }
        docs.push(format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}, namespace: d, labels: {{app: s}}}}\nspec: {{priority: {prio}{extra}, containers: [{{name: c, image: img, resources: {{requests: {{cpu: {cpu}m, memory: 512Mi}}}}}}]}}"
        ));
    }
    docs.join("\n---\n")
}

fn cache_of(objects: &ClusterObjects) -> (Cache, Vec<Arc<PodInfo>>) {
    let mut cache = Cache::new();
    objects.nodes.iter().for_each(|n| cache.add_node(n));
    let mut pending = Vec::new();
    for p in &objects.pods {
        let p = Arc::new(PodInfo::from_pod(p));
        if p.node_name.is_some() {
            cache.add_pod(p).unwrap();
        } else {
            pending.push(p);
        }
    }
    (cache, pending)
}

/// Runs every pending pod twice from the same state, once plain and once explained, and
/// checks that the explanation describes exactly the decision.
fn check_cluster(seed: u64, nodes: usize, pods: usize, pct: i32) -> (usize, usize, usize) {
    let objects = load_str(&generated(seed, nodes, pods), "gen.yaml").unwrap();
    let loaded = crate::config::from_flags(None, None).unwrap();
    let profiles = ProfileRegistry::new(&loaded.profiles, &Registry::in_tree()).unwrap();
    let fw = profiles.for_scheduler_name("").unwrap();
    let (mut cache, pending) = cache_of(&objects);
    let mut plain = SchedulingAlgorithm::new(pct, seed);
    let mut explained = SchedulingAlgorithm::new(pct, seed);
    let mut snap = Snapshot::new();
    let nominated = NominatedPods::new();
    let (mut scheduled, mut failed, mut skipped) = (0, 0, 0);
    for pod in &pending {
        cache.update_snapshot(&mut snap);
        let a = schedule_one(fw, &mut plain, pod, &snap, &nominated);
        let mut e = Explanation::new("", "");
        let b = schedule_one_explained(fw, &mut explained, pod, &snap, &nominated, &mut e);
        assert_eq!(e.nodes.len(), snap.num_nodes());
        assert_eq!(e.pod, pod.key().to_string());
        match (a, b) {
            (
                Decision::Bind { node, result, .. },
                Decision::Bind {
                    node: node_b,
                    pod: placed,
                    ..
                },
            ) => {
                assert_eq!(node, node_b, "{}", pod.key());
                assert_eq!(e.outcome, Outcome::Scheduled);
                assert_eq!(e.node.as_deref(), Some(node.as_str()));
                assert_eq!(e.selection.as_ref().unwrap().chosen, node);
                // The explanation's scores are the decision's, node by node, plugin by plugin.
                let used = result.breakdowns(&snap);
                assert_eq!(e.scores.len(), used.len());
                for (mine, theirs) in e.scores.iter().zip(&used) {
                    assert_eq!(mine.node, theirs.name);
                    assert_eq!(mine.total, theirs.total);
                    let weighted: Vec<(&str, i64)> = mine
                        .plugins
                        .iter()
                        .map(|p| (p.plugin.as_str(), p.weighted))
                        .collect();
                    assert_eq!(weighted, theirs.scores);
                    for p in &mine.plugins {
                        assert_eq!(p.weighted, p.normalized * p.weight, "{p:?}");
                        assert!((0..=100).contains(&p.normalized), "{p:?}");
                    }
                    assert_eq!(
                        mine.plugins.iter().map(|p| p.weighted).sum::<i64>(),
                        mine.total
                    );
                }
                let feasible = e
                    .nodes
                    .iter()
                    .filter(|n| n.verdict == Verdict::Feasible)
                    .count();
                assert_eq!(feasible, result.feasible_nodes);
                skipped += e
                    .nodes
                    .iter()
                    .filter(|n| matches!(n.verdict, Verdict::Skipped { .. }))
                    .count();
                if let Some(sel) = &e.selection
                    && let (Some(t), Some(r)) = (sel.chosen_total, sel.runner_up_total)
                {
                    assert!(t >= r);
                    assert_eq!(sel.margin, Some(t - r));
                    assert_eq!(sel.tied.is_empty(), t > r);
                }
                cache.assume_pod(placed, &node).unwrap();
                scheduled += 1;
            }
            (
                Decision::Unschedulable { message, .. },
                Decision::Unschedulable { message: m2, .. },
            ) => {
                assert_eq!(message, m2);
                assert_eq!(e.message.as_deref(), Some(message.as_str()));
                // The per-node reasons, counted, are the FailedScheduling message.
                assert_eq!(e.reasons_message(), message, "{}", pod.key());
                assert!(!e.hints.is_empty(), "{}: no hint", pod.key());
                let pre = e.preemption.as_ref().expect("DefaultPreemption runs");
                if pre.not_eligible.is_none() {
                    assert_eq!(pre.nodes.len(), snap.num_nodes());
                }
                failed += 1;
            }
            (a, b) => panic!("{}: {a:?} vs {b:?}", pod.key()),
        }
    }
    (scheduled, failed, skipped)
}

#[test]
fn explanations_match_the_decisions_over_generated_clusters() {
    let (mut s, mut f) = (0, 0);
    for seed in 1..=6 {
        let (a, b, _) = check_cluster(seed, 12 + seed as usize * 3, 40, 0);
        s += a;
        f += b;
    }
    assert!(s > 50 && f > 20, "scheduled {s}, failed {f}");
}

#[test]
fn nodes_past_percentage_of_nodes_to_score_are_named_skipped() {
    // 300 nodes at 10%: filtering stops after 100 feasible nodes.
    let (s, _, skipped) = check_cluster(99, 300, 5, 10);
    assert!(s > 0 && skipped > 0, "scheduled {s}, skipped {skipped}");
}

fn case_study_explained(pod: &str) -> Explanation {
    let report = crate::simulate::run_explained(
        &crate::simulate::case_study().0,
        &crate::simulate::case_study().1,
        1,
        &|key| key == pod,
    )
    .unwrap();
    report
        .outcomes
        .into_iter()
        .find(|o| o.pod == pod)
        .and_then(|o| o.explanation)
        .expect("explained")
}

#[test]
fn train_huge_gets_every_nodes_reason_and_what_would_change() {
    let e = case_study_explained("ml/train-huge");
    assert_eq!(e.outcome, Outcome::Unschedulable);
    assert_eq!(e.nodes.len(), 15);
    assert!(
        e.nodes
            .iter()
            .all(|n| matches!(n.verdict, Verdict::Rejected(_)))
    );
    assert_eq!(e.reasons_message(), e.message.clone().unwrap());
    let texts: Vec<&str> = e.hints.iter().map(|h| h.text.as_str()).collect();
    assert!(
        texts.contains(
            &"the pod asks for more nvidia.com/gpu than 6 nodes have allocatable in total"
        ),
        "{texts:?}"
    );
    assert!(
        texts.iter().any(|t| t.contains("if the pod tolerated")),
        "{texts:?}"
    );
    let p = e.preemption.unwrap();
    assert!(
        p.nodes
            .iter()
            .all(|n| matches!(n.outcome, PreemptionOutcome::NotHelpful { .. })),
        "{p:?}"
    );
}

#[test]
fn a_placed_pod_has_its_score_table() {
    let e = case_study_explained("default/web-1");
    assert_eq!(e.outcome, Outcome::Scheduled);
    let sel = e.selection.as_ref().unwrap();
    assert_eq!(Some(sel.chosen.as_str()), e.node.as_deref());
    assert!(!e.score_plugins.is_empty());
    let chosen = e.scores_of(&sel.chosen).unwrap();
    assert_eq!(Some(chosen.total), sel.chosen_total);
    assert!(e.scores.iter().all(|s| s.total <= chosen.total));
}

#[test]
fn a_resource_shortfall_is_named_with_the_amount() {
    let node = |n: &str| {
        format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: {n}}}\nstatus: {{allocatable: {{cpu: '2', memory: 4Gi, pods: '10'}}}}"
        )
    };
    let pod = |name: &str, node: &str, cpu: &str, extra: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: d}}\nspec: {{{node}containers: [{{name: c, image: i, resources: {{requests: {{cpu: {cpu}}}}}}}]{extra}}}"
        )
    };
    let yaml = [
        node("a"),
        node("b"),
        node("c"),
        pod("run-a", "nodeName: a, ", "1000m", ""),
        pod("run-b", "nodeName: b, ", "1000m", ""),
        pod("run-c", "nodeName: c, ", "1500m", ""),
        pod("ssd", "", "100m", ", nodeSelector: {disktype: ssd}"),
        pod("cpu", "", "1200m", ""),
        pod("huge", "", "3", ""),
    ]
    .join("\n---\n");
    let objects = load_str(&yaml, "t.yaml").unwrap();
    let loaded = crate::config::from_flags(None, None).unwrap();
    let r = crate::simulate::run_explained(&objects, &loaded, 1, &|_| true).unwrap();
    let hints = |pod: &str| -> Vec<String> {
        let o = r.outcomes.iter().find(|o| o.pod == pod).unwrap();
        o.explanation
            .as_ref()
            .unwrap()
            .hints
            .iter()
            .map(|h| h.text.clone())
            .collect()
    };
    assert_eq!(hints("d/ssd"), vec!["no node has label disktype=ssd"]);
    assert_eq!(
        hints("d/cpu"),
        vec!["2 nodes would fit with 200m less cpu (3 with 700m less)"]
    );
    assert_eq!(
        hints("d/huge"),
        vec!["the pod asks for more cpu than 3 nodes have allocatable in total"]
    );
}

#[test]
fn tolerating_the_one_taint_is_suggested() {
    let yaml = "apiVersion: v1\nkind: Node\nmetadata: {name: g1}\nspec: {taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]}\nstatus: {allocatable: {cpu: '2', memory: 4Gi, pods: '10'}}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: g2}\nspec: {taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}, {key: spot, effect: NoExecute}]}\nstatus: {allocatable: {cpu: '2', memory: 4Gi, pods: '10'}}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: c1}\nspec: {unschedulable: true}\nstatus: {allocatable: {cpu: '2', memory: 4Gi, pods: '10'}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: d}\nspec: {containers: [{name: c, image: i}]}\n";
    let objects = load_str(yaml, "t.yaml").unwrap();
    let loaded = crate::config::from_flags(None, None).unwrap();
    let r = crate::simulate::run_explained(&objects, &loaded, 1, &|_| true).unwrap();
    let e = r.outcomes[0].explanation.as_ref().unwrap();
    let texts: Vec<&str> = e.hints.iter().map(|h| h.text.as_str()).collect();
    assert_eq!(
        texts,
        vec![
            "1 node if the pod tolerated nvidia.com/gpu=present:NoSchedule",
            "1 node has more than one untolerated taint",
            "1 node if uncordoned (spec.unschedulable), or if the pod tolerated node.kubernetes.io/unschedulable:NoSchedule",
        ]
    );
}

#[test]
fn preemption_names_victims_and_why_other_candidates_lost() {
    // Three full nodes; the victims on n1 matter least, n2's are more important, n3 has
    // nothing the preemptor may evict.
    let node = |n: &str| {
        format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: {n}}}\nstatus: {{allocatable: {{cpu: '1', memory: 4Gi, pods: '10'}}}}"
        )
    };
    let running = |name: &str, node: &str, prio: i32| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: d}}\nspec: {{nodeName: {node}, priority: {prio}, containers: [{{name: c, image: i, resources: {{requests: {{cpu: '1'}}}}}}]}}"
        )
    };
    let yaml = [
        node("n1"),
        node("n2"),
        node("n3"),
        running("low", "n1", 1),
        running("mid", "n2", 5),
        running("top", "n3", 100),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: d}\nspec: {priority: 10, containers: [{name: c, image: i, resources: {requests: {cpu: 500m}}}]}".to_string(),
    ]
    .join("\n---\n");
    let objects = load_str(&yaml, "t.yaml").unwrap();
    let loaded = crate::config::from_flags(None, None).unwrap();
    let profiles = ProfileRegistry::new(&loaded.profiles, &Registry::in_tree()).unwrap();
    let fw = profiles.for_scheduler_name("").unwrap();
    let (cache, pending) = cache_of(&objects);
    let mut snap = Snapshot::new();
    cache.update_snapshot(&mut snap);
    let mut alg = SchedulingAlgorithm::new(0, 1);
    let mut e = Explanation::new("", "");
    let d = schedule_one_explained(
        fw,
        &mut alg,
        &pending[0],
        &snap,
        &NominatedPods::new(),
        &mut e,
    );
    let Decision::Unschedulable {
        nomination,
        message,
        ..
    } = d
    else {
        panic!("{d:?}")
    };
    assert_eq!(
        nomination.unwrap().nominated_node_name.as_deref(),
        Some("n1")
    );
    assert_eq!(e.reasons_message(), message);
    let p = e.preemption.unwrap();
    assert_eq!(p.nominated_node.as_deref(), Some("n1"));
    let outcome = |n: &str| {
        p.nodes
            .iter()
            .find(|x| x.node == n)
            .unwrap()
            .outcome
            .clone()
    };
    assert_eq!(
        outcome("n1"),
        PreemptionOutcome::Candidate {
            victims: vec![Victim {
                pod: "d/low".into(),
                priority: 1
            }],
            pdb_violations: 0,
            chosen: true,
            why_not_chosen: None,
        }
    );
    assert_eq!(
        outcome("n2"),
        PreemptionOutcome::Candidate {
            victims: vec![Victim {
                pod: "d/mid".into(),
                priority: 5
            }],
            pdb_violations: 0,
            chosen: false,
            why_not_chosen: Some("a higher-priority top victim than n1".into()),
        }
    );
    assert_eq!(
        outcome("n3"),
        PreemptionOutcome::NoCandidate {
            reason: crate::plugins::default_preemption::NO_VICTIMS_MSG.into()
        }
    );
    let text = render::render(
        &{
            let mut e2 = Explanation::new("d/p", "default-scheduler");
            e2.preemption = Some(p.clone());
            e2
        },
        20,
    );
    assert!(
        text.contains("  n2: evict d/mid (priority 5); 0 PDB violation(s); not chosen: a higher-priority top victim than n1"),
        "{text}"
    );
}

/// The simulator's annotations carry the same numbers as the explanation, in its shape:
/// node -> plugin -> string.
#[test]
fn simulator_annotations_show_the_explanations_scores_and_filters() {
    use super::simulator::*;
    let e = case_study_explained("default/web-1");
    let a = simulator_annotations(&e);
    assert_eq!(a.get(SELECTED_NODE), e.node.as_ref());
    let parse = |k: &str| -> serde_json::Value { serde_json::from_str(&a[k]).unwrap() };
    let (score, fin, filter) = (
        parse(SCORE_RESULT),
        parse(FINAL_SCORE_RESULT),
        parse(FILTER_RESULT),
    );
    for n in &e.scores {
        for p in &n.plugins {
            assert_eq!(score[&n.node][&p.plugin], p.raw.to_string());
            assert_eq!(fin[&n.node][&p.plugin], p.weighted.to_string());
        }
    }
    assert_eq!(score.as_object().unwrap().len(), e.scores.len());
    for n in &e.nodes {
        match &n.verdict {
            Verdict::Feasible => {
                assert!(
                    e.filter_plugins
                        .iter()
                        .all(|p| filter[&n.node][p] == PASSED)
                );
            }
            Verdict::Rejected(r) => {
                let p = r.plugin.as_deref().unwrap();
                assert_eq!(filter[&n.node][p], r.reasons.join(", "));
                let at = e.filter_plugins.iter().position(|f| f == p).unwrap();
                assert_eq!(filter[&n.node].as_object().unwrap().len(), at + 1);
            }
            Verdict::Skipped { .. } => assert!(filter.get(&n.node).is_none()),
        }
    }
    // An unschedulable pod: no selected node, every node's rejection.
    let e = case_study_explained("ml/train-huge");
    let a = simulator_annotations(&e);
    assert!(!a.contains_key(SELECTED_NODE));
    let filter: serde_json::Value = serde_json::from_str(&a[FILTER_RESULT]).unwrap();
    assert_eq!(filter.as_object().unwrap().len(), 15);
}
