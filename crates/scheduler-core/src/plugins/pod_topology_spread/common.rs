//! What filtering and scoring share (upstream `common.go`): which nodes count for a
//! constraint, how matching pods are counted, and the per-node fold that counts them.

use std::sync::Arc;

use rayon::prelude::*;
// Maps keyed by topology values are hashed millions of times a second and the keys are not
// attacker-chosen in a way that matters here, so Fx hashing instead of SipHash.
use rustc_hash::FxHashMap;

use crate::framework::Status;
use crate::types::{
    LabelSelector, NodeInclusionPolicy, NodeInfo, PodInfo, SpreadConstraint, TaintEffect,
    find_untolerated_taint,
};

/// Below this many nodes the counting loop runs on the calling thread.
const PARALLEL_NODES: usize = 512;
/// Smallest chunk of nodes one rayon task counts, so partial maps stay few.
const MIN_NODES_PER_TASK: usize = 256;

pub(super) fn has_all_topology_keys(node: &NodeInfo, constraints: &[SpreadConstraint]) -> bool {
    constraints
        .iter()
        .all(|c| node.labels.contains_key(&c.topology_key))
}

/// The pod's nodeSelector and required node affinity, as upstream `GetRequiredNodeAffinity`.
fn matches_required_node_affinity(pod: &PodInfo, node: &NodeInfo) -> bool {
    pod.node_selector.is_subset_of(&node.labels)
        && pod
            .required_node_affinity
            .as_ref()
            .is_none_or(|a| a.matches_labels(&node.name, &node.labels))
}

fn has_untolerated_hard_taint(pod: &PodInfo, node: &NodeInfo) -> bool {
    find_untolerated_taint(&node.taints, &pod.tolerations, |t| {
        matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute)
    })
    .is_some()
}

/// Evaluates a node's inclusion for each constraint, computing the affinity and taint
/// checks at most once per node and only when some constraint honours them.
pub(super) struct Inclusion<'a> {
    pod: &'a PodInfo,
    node: &'a NodeInfo,
    affinity: Option<bool>,
    taints: Option<bool>,
}

impl<'a> Inclusion<'a> {
    pub(super) fn new(pod: &'a PodInfo, node: &'a NodeInfo) -> Self {
        Inclusion {
            pod,
            node,
            affinity: None,
            taints: None,
        }
    }

    pub(super) fn includes(&mut self, c: &SpreadConstraint) -> bool {
        if c.node_affinity_policy == NodeInclusionPolicy::Honor
            && !*self
                .affinity
                .get_or_insert_with(|| matches_required_node_affinity(self.pod, self.node))
        {
            return false;
        }
        if c.node_taints_policy == NodeInclusionPolicy::Honor
            && *self
                .taints
                .get_or_insert_with(|| has_untolerated_hard_taint(self.pod, self.node))
        {
            return false;
        }
        true
    }
}

/// Pods on a node that count for a constraint: same namespace, not terminating, labels
/// selected. Like upstream (through v1.37), a selector with no requirements at all
/// (`labelSelector: {}`) counts no existing pods, and a missing one none either.
pub(super) fn count_matching(
    pods: &[Arc<PodInfo>],
    selector: &LabelSelector,
    namespace: &str,
) -> i64 {
    if selector.is_nothing() || selector.is_everything() {
        return 0;
    }
    pods.iter()
        .filter(|p| !p.is_terminating && p.namespace() == namespace && selector.matches(&p.labels))
        .count() as i64
}

pub(super) type DomainCounts<'n> = Vec<FxHashMap<&'n str, i64>>;

/// Folds `visit` over the nodes into one map per constraint, on rayon for large clusters.
/// Keys borrow the nodes' label values, so the loop allocates only when a map grows.
pub(super) fn fold_nodes<'n, F>(
    nodes: &'n [Arc<NodeInfo>],
    width: usize,
    visit: F,
) -> DomainCounts<'n>
where
    F: Fn(&'n NodeInfo, &mut DomainCounts<'n>) + Sync,
{
    let empty = || vec![FxHashMap::default(); width];
    if nodes.len() < PARALLEL_NODES {
        let mut acc = empty();
        for n in nodes {
            visit(n, &mut acc);
        }
        return acc;
    }
    nodes
        .par_iter()
        .with_min_len(MIN_NODES_PER_TASK)
        .fold(empty, |mut acc, n| {
            visit(n, &mut acc);
            acc
        })
        .reduce(empty, |mut a, b| {
            for (into, from) in a.iter_mut().zip(b) {
                if into.len() < from.len() {
                    let small = std::mem::replace(into, from);
                    for (k, v) in small {
                        *into.entry(k).or_insert(0) += v;
                    }
                } else {
                    for (k, v) in from {
                        *into.entry(k).or_insert(0) += v;
                    }
                }
            }
            a
        })
}

pub(super) fn missing_state(key: &str) -> Status {
    Status::error(format!("reading {key:?} from cycleState: not found"))
}
