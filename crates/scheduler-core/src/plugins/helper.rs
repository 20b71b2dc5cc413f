//! Small helpers shared by several in-tree plugins (upstream: `plugins/helper`).

use crate::framework::{CycleState, EventObjects, NodeScore, QueueingHint, StateData, Status};
use crate::types::{NodeInfo, PodInfo};

/// PreFilter state that follows pods hypothetically added to or removed from a node
/// (nominated pods, preemption victims): upstream's PreFilterExtensions.
pub(crate) trait PodDelta: StateData {
    /// Accounts for `other` being added (`delta` 1) to or removed (`delta` -1) from `node`.
    fn update_with_pod(&mut self, incoming: &PodInfo, other: &PodInfo, node: &NodeInfo, delta: i64);
}

/// Applies a pod delta to the plugin's state; `missing` is the plugin's error when its
/// PreFilter state is absent.
pub(crate) fn apply_pod_delta<S: PodDelta>(
    state: &mut CycleState,
    incoming: &PodInfo,
    other: &PodInfo,
    node: &NodeInfo,
    delta: i64,
    missing: fn() -> Status,
) -> Status {
    match state.read_mut::<S>() {
        Some(s) => {
            s.update_with_pod(incoming, other, node, delta);
            Status::success()
        }
        None => missing(),
    }
}

/// Rescales raw scores from `0..=max(scores)` onto `0..=max_priority` with integer
/// arithmetic, as upstream's `DefaultNormalizeScore` does. With `reverse`, a high raw score
/// becomes a low final one. When every raw score is zero, the scores stay zero, or all become
/// `max_priority` when reversed. Raw scores are assumed non-negative.
pub fn default_normalize_score(max_priority: i64, reverse: bool, scores: &mut [NodeScore]) {
    let highest = scores.iter().map(|s| s.score).max().unwrap_or(0).max(0);
    for s in scores.iter_mut() {
        s.score = normalized(max_priority, reverse, highest, s.score);
    }
}

/// [`default_normalize_score`] on the scores alone (no node names needed).
pub fn default_normalize_values(max_priority: i64, reverse: bool, scores: &mut [i64]) {
    let highest = scores.iter().copied().max().unwrap_or(0).max(0);
    for s in scores.iter_mut() {
        *s = normalized(max_priority, reverse, highest, *s);
    }
}

/// One score of [`default_normalize_score`], given the highest raw score (at least 0).
#[inline]
fn normalized(max_priority: i64, reverse: bool, highest: i64, score: i64) -> i64 {
    match (highest, reverse) {
        (0, true) => max_priority,
        (0, false) => score,
        (_, true) => max_priority - max_priority * score / highest,
        (_, false) => max_priority * score / highest,
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use crate::cache::Snapshot;
    use crate::framework::{CycleState, FilterPlugin, NodeScore, PreFilterPlugin, Status};
    use crate::types::PodInfo;

    /// Runs `plugin`'s PreFilter, then its Filter on every snapshot node. A PreFilter that
    /// does not succeed (rejection or Skip) is returned alone.
    pub fn pre_filter_then_filter<P: PreFilterPlugin + FilterPlugin>(
        plugin: &P,
        pod: &PodInfo,
        snap: &Snapshot,
    ) -> Vec<Status> {
        let mut state = CycleState::new();
        let (_, s) = plugin.pre_filter(&mut state, pod, snap);
        if !s.is_success() {
            return vec![s];
        }
        snap.node_infos()
            .iter()
            .map(|n| plugin.filter(&state, pod, n))
            .collect()
    }

    pub fn scores<'a>(raw: &[(&'a str, i64)]) -> Vec<NodeScore<'a>> {
        raw.iter()
            .map(|(n, s)| NodeScore { name: n, score: *s })
            .collect()
    }

    pub fn values(scores: &[NodeScore]) -> Vec<i64> {
        scores.iter().map(|s| s.score).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{scores, values};
    use super::*;

    #[test]
    fn normalizes_like_upstream() {
        // (raw, reverse, want)
        let cases: Vec<(Vec<i64>, bool, Vec<i64>)> = vec![
            (vec![10, 20, 30], false, vec![33, 66, 100]),
            (vec![10, 20, 30], true, vec![67, 34, 0]),
            (vec![0, 0, 0], false, vec![0, 0, 0]),
            (vec![0, 0, 0], true, vec![100, 100, 100]),
            (vec![2, 11, 4], false, vec![18, 100, 36]),
            (vec![1, 0, 3], true, vec![67, 100, 0]),
            (vec![], true, vec![]),
        ];
        for (raw, reverse, want) in cases {
            let named: Vec<(&str, i64)> = raw.iter().map(|s| ("n", *s)).collect();
            let mut s = scores(&named);
            default_normalize_score(100, reverse, &mut s);
            assert_eq!(values(&s), want, "raw {raw:?} reverse {reverse}");
        }
    }
}

/// The node-event queueing hint several Filter plugins share: only a node that passes
/// `passes` now and did not before the update (a new node had no before) can help a pod the
/// plugin rejected. Any other event is queued.
pub(crate) fn hint_if_node_now_passes(
    objects: &EventObjects<'_>,
    passes: impl Fn(&NodeInfo) -> bool,
) -> QueueingHint {
    let EventObjects::Node { old, new } = objects else {
        return QueueingHint::Queue;
    };
    if !passes(new) || old.is_some_and(&passes) {
        QueueingHint::QueueSkip
    } else {
        QueueingHint::Queue
    }
}

/// Signature fragments several plugins share (upstream's signer names as keys), for
/// opportunistic batching.
pub(crate) mod sign {
    use crate::framework::{SignFragment, Signing};
    use crate::types::PodInfo;

    pub fn with(fragments: Vec<SignFragment>) -> Option<Signing> {
        Some(Signing::Fragments(fragments))
    }

    pub fn tolerations(pod: &PodInfo) -> SignFragment {
        ("v1.Pod.Spec.Tolerations", format!("{:?}", pod.tolerations))
    }

    /// Requests as the resource plugins count them (pod-level, overhead, non-zero defaults).
    pub fn resources(pod: &PodInfo) -> SignFragment {
        (
            "v1.Pod.Spec.ContainerRequestsAndOverheads()",
            format!("{:?} {:?}", pod.requests, pod.non_zero_requests),
        )
    }

    /// Volume sources, with the namespace their claims live in.
    pub fn volumes(pod: &PodInfo) -> SignFragment {
        (
            "v1.Pod.Spec.Volumes.NonSyntheticSources()",
            format!("{}/{:?}", pod.namespace(), pod.volumes),
        )
    }
}
