//! InterPodAffinity end to end: cache -> snapshot -> framework -> schedule_one.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use scheduler_core::cache::{Cache, Snapshot};
use scheduler_core::config::ExpandedProfile;
use scheduler_core::framework::{ExtensionPoint, Framework, NominatedPods, Registry};
use scheduler_core::plugins::names;
use scheduler_core::schedule_one::{Decision, SchedulingAlgorithm, schedule_one};
use scheduler_core::types::{NodeInfo, PodInfo};

const ZONE: &str = "topology.kubernetes.io/zone";
const HOST: &str = "kubernetes.io/hostname";

fn framework() -> Framework {
    let mut spec = ExpandedProfile {
        scheduler_name: "default-scheduler".into(),
        ..ExpandedProfile::default()
    };
    let ipa = vec![names::INTER_POD_AFFINITY.to_string()];
    spec.points
        .insert(ExtensionPoint::QueueSort, vec![names::PRIORITY_SORT.into()]);
    spec.points
        .insert(ExtensionPoint::Bind, vec![names::DEFAULT_BINDER.into()]);
    for p in [
        ExtensionPoint::PreFilter,
        ExtensionPoint::Filter,
        ExtensionPoint::PreScore,
        ExtensionPoint::Score,
    ] {
        spec.points.insert(p, ipa.clone());
    }
    spec.score_weights = vec![(names::INTER_POD_AFFINITY.into(), 2)];
    Framework::new(&spec, &Registry::in_tree()).unwrap()
}

fn anti_affinity(topology: &str, app: &str) -> k8s::Affinity {
    k8s::Affinity {
        pod_anti_affinity: Some(k8s::PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![k8s::PodAffinityTerm {
                label_selector: Some(meta::LabelSelector {
                    match_labels: Some([("app".to_string(), app.to_string())].into()),
                    match_expressions: None,
                }),
                topology_key: topology.to_string(),
                ..Default::default()
            }]),
            preferred_during_scheduling_ignored_during_execution: None,
        }),
        ..Default::default()
    }
}

fn replica(i: usize, topology: &str) -> Arc<PodInfo> {
    Arc::new(
        PodInfo::test("default", &format!("web-{i}"))
            .label("app", "web")
            .affinity(anti_affinity(topology, "web"))
            .build(),
    )
}

fn zoned_cache(zones: usize, per_zone: usize) -> Cache {
    let mut c = Cache::new();
    for z in 0..zones {
        for n in 0..per_zone {
            let name = format!("z{z}-n{n}");
            c.add_node(
                &NodeInfo::test(&name)
                    .label(ZONE, &format!("z{z}"))
                    .label(HOST, &name)
                    .build_node(),
            );
        }
    }
    c
}

fn zone_of(node: &str) -> &str {
    node.split('-').next().unwrap()
}

/// The seed scenario: replicas with required anti-affinity on the zone spread one per zone,
/// and the replica that finds every zone taken gets upstream's message.
#[test]
fn replicas_spread_across_zones_until_none_is_free() {
    let fw = framework();
    let mut cache = zoned_cache(3, 2);
    let mut snapshot = Snapshot::new();
    let mut alg = SchedulingAlgorithm::new(0, 7);
    let mut zones = Vec::new();
    for i in 0..3 {
        cache.update_snapshot(&mut snapshot);
        let pod = replica(i, ZONE);
        match schedule_one(&fw, &mut alg, &pod, &snapshot, &NominatedPods::new()) {
            Decision::Bind { node, .. } => {
                zones.push(zone_of(&node).to_string());
                cache.assume_pod(pod, &node).unwrap();
            }
            other => panic!("replica {i}: {other:?}"),
        }
    }
    zones.sort();
    assert_eq!(zones, ["z0", "z1", "z2"]);

    cache.update_snapshot(&mut snapshot);
    match schedule_one(
        &fw,
        &mut alg,
        &replica(3, ZONE),
        &snapshot,
        &NominatedPods::new(),
    ) {
        Decision::Unschedulable {
            message,
            resolvable,
            ..
        } => {
            assert_eq!(
                message,
                "0/6 nodes are available: 6 node(s) didn't match pod anti-affinity rules."
            );
            assert!(resolvable, "anti-affinity rejections are Unschedulable");
        }
        other => panic!("{other:?}"),
    }
}

/// A pod nominated to a zone (by an earlier preemption) counts there for pods of equal or
/// lower priority, through AddPod.
#[test]
fn nominated_replicas_block_their_zone() {
    let fw = framework();
    let cache = zoned_cache(2, 1);
    let snapshot = cache.snapshot();
    let mut nominated = NominatedPods::new();
    nominated.add(replica(0, ZONE), "z0-n0");
    let mut alg = SchedulingAlgorithm::new(0, 1);
    for attempt in 0..5 {
        match schedule_one(&fw, &mut alg, &replica(1, ZONE), &snapshot, &nominated) {
            Decision::Bind { node, .. } => assert_eq!(node, "z1-n0", "attempt {attempt}"),
            other => panic!("{other:?}"),
        }
    }
}

/// Required affinity to pods that exist nowhere is unresolvable.
#[test]
fn unmatched_affinity_is_unresolvable() {
    let fw = framework();
    let snapshot = zoned_cache(2, 1).snapshot();
    let pod = PodInfo::test("default", "p")
        .affinity(k8s::Affinity {
            pod_affinity: Some(k8s::PodAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![
                    k8s::PodAffinityTerm {
                        label_selector: Some(meta::LabelSelector {
                            match_labels: Some([("app".to_string(), "db".to_string())].into()),
                            match_expressions: None,
                        }),
                        topology_key: ZONE.into(),
                        ..Default::default()
                    },
                ]),
                preferred_during_scheduling_ignored_during_execution: None,
            }),
            ..Default::default()
        })
        .build();
    let pod = Arc::new(pod);
    let mut alg = SchedulingAlgorithm::new(0, 1);
    match schedule_one(&fw, &mut alg, &pod, &snapshot, &NominatedPods::new()) {
        Decision::Unschedulable {
            message,
            resolvable,
            ..
        } => {
            assert_eq!(
                message,
                "0/2 nodes are available: 2 node(s) didn't match pod affinity rules."
            );
            assert!(!resolvable);
        }
        other => panic!("{other:?}"),
    }
}

/// Timing probe for the benchmark target (5,000 nodes, thousands of existing replicas with
/// required anti-affinity on the hostname). Run with
/// `cargo test --release -p scheduler-core --test inter_pod_affinity -- --ignored --nocapture`.
#[test]
#[ignore]
fn probe_hostname_anti_affinity_throughput() {
    let fw = framework();
    let mut cache = Cache::new();
    for i in 0..5000 {
        let name = format!("node-{i:05}");
        cache.add_node(
            &NodeInfo::test(&name)
                .label(HOST, &name)
                .label(ZONE, &format!("z{}", i % 3))
                .build_node(),
        );
    }
    let mut snapshot = Snapshot::new();
    let mut alg = SchedulingAlgorithm::new(0, 3);
    let mut scheduled = 0usize;
    let start = Instant::now();
    let mut last = start;
    for i in 0..4000 {
        cache.update_snapshot(&mut snapshot);
        let pod = replica(i, HOST);
        match schedule_one(&fw, &mut alg, &pod, &snapshot, &NominatedPods::new()) {
            Decision::Bind { node, .. } => {
                cache.assume_pod(pod, &node).unwrap();
                scheduled += 1;
            }
            other => panic!("{other:?}"),
        }
        if (i + 1) % 1000 == 0 {
            let now = Instant::now();
            println!(
                "pods {}..{}: {:.0} pods/s",
                i - 999,
                i + 1,
                1000.0 / (now - last).as_secs_f64()
            );
            last = now;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{scheduled} pods in {secs:.2}s = {:.0} pods/s",
        scheduled as f64 / secs
    );
}

/// Where the time of one cycle goes with 5,000 nodes and 4,000 replicas already placed.
#[test]
#[ignore]
fn probe_cycle_breakdown() {
    use scheduler_core::framework::CycleState;
    let fw = framework();
    let mut cache = Cache::new();
    for i in 0..5000 {
        let name = format!("node-{i:05}");
        cache.add_node(
            &NodeInfo::test(&name)
                .label(HOST, &name)
                .label(ZONE, &format!("z{}", i % 3))
                .build_node(),
        );
        if i < 4000 {
            let pod = replica(i, HOST);
            cache.assume_pod(pod, &name).unwrap();
        }
    }
    let snapshot = cache.snapshot();
    let pod = replica(99_999, HOST);
    let rounds = 200u32;
    let (mut pre, mut filt, mut score, mut whole) = (0.0, 0.0, 0.0, 0.0);
    let mut alg = SchedulingAlgorithm::new(0, 3);
    for _ in 0..rounds {
        let t = Instant::now();
        let mut state = CycleState::new();
        let (_, s, _) = fw.run_pre_filter(&mut state, &pod, &snapshot);
        assert!(s.is_success());
        let t1 = Instant::now();
        let feasible: Vec<_> = snapshot
            .node_infos()
            .iter()
            .filter(|n| fw.run_filter(&state, &pod, n).is_success())
            .cloned()
            .collect();
        let t2 = Instant::now();
        assert!(
            fw.run_pre_score(&mut state, &pod, &feasible[..500], &snapshot)
                .is_success()
        );
        fw.run_score(&state, &pod, &feasible[..500], false).unwrap();
        let t3 = Instant::now();
        let d = schedule_one(&fw, &mut alg, &pod, &snapshot, &NominatedPods::new());
        assert!(matches!(d, Decision::Bind { .. }));
        let t4 = Instant::now();
        pre += (t1 - t).as_secs_f64();
        filt += (t2 - t1).as_secs_f64();
        score += (t3 - t2).as_secs_f64();
        whole += (t4 - t3).as_secs_f64();
    }
    let t = Instant::now();
    let mut hits = 0usize;
    for _ in 0..rounds {
        for n in snapshot.node_infos() {
            for p in &n.pods {
                if p.namespace() == "default"
                    && p.labels.get("app").map(String::as_str) == Some("web")
                {
                    hits += n.labels.get(HOST).map_or(0, |v| v.len());
                }
            }
        }
    }
    let base = t.elapsed().as_secs_f64();
    assert!(hits > 0);
    let us = |x: f64| x * 1e6 / f64::from(rounds);
    println!("baseline walk over all pods: {:.0}us", us(base));
    println!(
        "per cycle: pre_filter {:.0}us, filter(all 5000 nodes) {:.0}us, pre_score+score(500) {:.0}us, schedule_one {:.0}us",
        us(pre),
        us(filt),
        us(score),
        us(whole)
    );
}
