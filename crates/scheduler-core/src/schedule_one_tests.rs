//! Unit tests of `schedule_one`.

use super::*;

#[test]
fn adaptive_percentage_matches_upstream() {
    // Small clusters: every node.
    assert_eq!(num_feasible_nodes_to_find(0, 10), 10);
    assert_eq!(num_feasible_nodes_to_find(0, 99), 99);
    // 100..: at least 100.
    assert_eq!(num_feasible_nodes_to_find(0, 100), 100);
    assert_eq!(num_feasible_nodes_to_find(0, 150), 100);
    // 500 nodes: 50 - 4 = 46%.
    assert_eq!(num_feasible_nodes_to_find(0, 500), 230);
    // 1000 nodes: 42%.
    assert_eq!(num_feasible_nodes_to_find(0, 1000), 420);
    // 5000 nodes: 50 - 40 = 10%.
    assert_eq!(num_feasible_nodes_to_find(0, 5000), 500);
    // 6000 nodes: 50 - 48 = 2% -> floor 5%.
    assert_eq!(num_feasible_nodes_to_find(0, 6000), 300);
    // Explicit percentage, floored at 100 nodes.
    assert_eq!(num_feasible_nodes_to_find(100, 5000), 5000);
    assert_eq!(num_feasible_nodes_to_find(1, 5000), 100);
    assert_eq!(num_feasible_nodes_to_find(30, 1000), 300);
}

#[test]
fn tie_breaker_is_roughly_uniform() {
    let mut t = TieBreaker::new(42);
    let mut counts = [0u32; 4];
    for _ in 0..40_000 {
        counts[t.below(4) as usize] += 1;
    }
    for c in counts {
        assert!((9_000..11_000).contains(&c), "{counts:?}");
    }
}

/// The default profile with the in-tree plugins.
fn default_framework() -> Framework {
    let loaded = crate::config::from_flags(None, None).unwrap();
    Framework::new(&loaded.profiles[0], &crate::framework::Registry::in_tree()).unwrap()
}

#[test]
fn scored_nodes_are_positions_in_the_snapshot_in_visiting_order() {
    // 400 nodes, every third cordoned: Filter rejects those, and at 400 nodes the adaptive
    // percentage (50 - 3 = 47%) asks for 188 feasible nodes, so each attempt stops early.
    let nodes: Vec<NodeInfo> = (0..400)
        .map(|i| {
            let b = NodeInfo::test(&format!("n{i:03}"))
                .cpu("4")
                .memory("8Gi")
                .pods(110);
            if i % 3 == 0 { b.unschedulable() } else { b }.build()
        })
        .collect();
    let snap = Snapshot::from_node_infos(nodes);
    let fw = default_framework();
    let mut alg = SchedulingAlgorithm::new(0, 3);
    let pod = PodInfo::test("ns", "p").cpu("100m").build();
    let mut seen = 0;
    for attempt in 0..3 {
        let start = alg.next_start_node_index();
        let mut state = CycleState::new();
        let r = alg
            .schedule_pod(&fw, &mut state, &pod, &snap, &NominatedPods::new())
            .unwrap();
        let FeasibleSet::Positions(positions) = &r.scored_nodes else {
            panic!("attempt {attempt}: scored nodes kept as nodes, not positions");
        };
        assert_eq!(positions.len(), 188, "attempt {attempt}");
        assert_eq!(r.feasible_nodes, 188);
        // In the order visited: from the rotating start, wrapping around, cordoned skipped.
        let expected: Vec<usize> = (0..snap.num_nodes())
            .map(|i| (start + i) % snap.num_nodes())
            .filter(|&j| !snap.node_infos()[j].unschedulable)
            .take(188)
            .collect();
        assert_eq!(positions, &expected, "attempt {attempt}");
        // The view reads those very nodes, and the breakdowns are theirs.
        let names: Vec<&str> = r.scored(&snap).iter().map(|n| n.name.as_str()).collect();
        let breakdowns = r.breakdowns(&snap);
        assert_eq!(breakdowns.len(), names.len());
        for ((b, name), &j) in breakdowns.iter().zip(&names).zip(positions) {
            assert_eq!(b.name, *name);
            assert_eq!(snap.node_infos()[j].name, *name);
        }
        assert!(names.contains(&r.suggested_host.as_str()));
        assert!(r.breakdown(&snap, &r.suggested_host).is_some());
        assert!(
            r.breakdown(&snap, "n000").is_none(),
            "a cordoned node is never scored"
        );
        // The next attempt starts past the nodes this one looked at.
        seen += r.evaluated_nodes;
        assert_eq!(alg.next_start_node_index(), seen % snap.num_nodes());
    }
}

#[test]
fn recycled_results_change_no_decision() {
    // Two schedulers with the same seed place the same pods on the same cluster; one hands
    // every result back (its next cycle fills the old vectors), the other never does. Pods
    // of different sizes, nodes filling up and some cordoned: every result must be equal.
    let mut cache = Cache::new();
    for i in 0..300 {
        let b = NodeInfo::test(&format!("n{i:03}"))
            .cpu(&format!("{}", 2 + i % 5))
            .memory(&format!("{}Gi", 4 + i % 7))
            .pods(110);
        let b = if i % 11 == 0 { b.unschedulable() } else { b };
        cache.add_node(&b.build_node());
    }
    let fw = default_framework();
    let mut recycling = SchedulingAlgorithm::new(0, 9);
    let mut plain = SchedulingAlgorithm::new(0, 9);
    let mut snap = Snapshot::new();
    let nominated = NominatedPods::new();
    for i in 0..120 {
        cache.update_snapshot(&mut snap);
        let pod = PodInfo::test("ns", &format!("p{i}"))
            .uid(&format!("uid-{i}"))
            .cpu(&format!("{}m", 100 + 150 * (i % 9)))
            .memory(&format!("{}Mi", 128 + 256 * (i % 5)))
            .build();
        let mut s1 = CycleState::new();
        let mut s2 = CycleState::new();
        let a = recycling.schedule_pod(&fw, &mut s1, &pod, &snap, &nominated);
        let b = plain.schedule_pod(&fw, &mut s2, &pod, &snap, &nominated);
        let (a, b) = match (a, b) {
            (Ok(a), Ok(b)) => (a, b),
            (a, b) => panic!("pod {i}: {a:?} vs {b:?}"),
        };
        assert_eq!(a.suggested_host, b.suggested_host, "pod {i}");
        assert_eq!(a.scores, b.scores, "pod {i}");
        assert_eq!(a.breakdowns(&snap), b.breakdowns(&snap), "pod {i}");
        assert!(a.scores.totals.len() > 1, "pod {i}: scored");
        cache
            .assume_pod(Arc::new(pod), &a.suggested_host)
            .expect("assume");
        recycling.recycle(a);
    }
}
