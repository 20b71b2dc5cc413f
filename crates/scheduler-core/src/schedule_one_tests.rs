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
