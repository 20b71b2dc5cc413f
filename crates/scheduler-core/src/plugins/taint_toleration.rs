//! TaintToleration: NoSchedule and NoExecute taints must be tolerated (Filter); among the
//! feasible nodes, fewer untolerated PreferNoSchedule taints score higher (Score).

use crate::framework::Signing;
use crate::plugins::helper::sign;
use std::sync::Arc;

use crate::cache::Snapshot;
use crate::framework::{ActionType, ClusterEvent, EventObjects, EventResource, QueueingHint};
use crate::framework::{
    CycleState, FilterPlugin, MAX_NODE_SCORE, NodeScore, Plugin, PluginPoints, PreScorePlugin,
    ScorePlugin, Status,
};
use crate::framework::{FeasibleNodes, FeasibleSummaries};
use crate::plugin_points;
use crate::plugins::helper::hint_if_node_now_passes;
use crate::types::{
    NodeInfo, PodInfo, SummaryRule, Taint, TaintEffect, Toleration, find_untolerated_taint,
    tolerations_tolerate_taint,
};

use super::helper::{default_normalize_score, default_normalize_values};
use super::names::TAINT_TOLERATION;

/// The Filter reason. Upstream stopped naming the taint (key and value may be sensitive and
/// end up in pod status) and only logs it; so do we, at trace level.
pub const ERR_REASON_UNTOLERATED: &str = "node(s) had untolerated taint(s)";

pub struct TaintToleration;

impl Plugin for TaintToleration {
    /// Signature for opportunistic batching (upstream `SignPod`).
    fn sign_pod(&self, pod: &PodInfo) -> Option<Signing> {
        sign::with(vec![sign::tolerations(pod)])
    }
    fn name(&self) -> &'static str {
        TAINT_TOLERATION
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => filter, pre_score, score)
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_TAINT,
            ),
            ClusterEvent::new(EventResource::Pod, ActionType::UPDATE_POD_TOLERATION),
        ]
    }

    /// Upstream's node hint: only a node whose NoSchedule/NoExecute taints the pod now
    /// tolerates (and did not before the update) may help. A pod with a RuntimeClass is
    /// always queued: its class may add tolerations this view lacks.
    fn queueing_hint(
        &self,
        pod: &PodInfo,
        _event: &ClusterEvent,
        objects: &EventObjects<'_>,
    ) -> QueueingHint {
        if pod.runtime_class_name.is_some() {
            return QueueingHint::Queue;
        }
        hint_if_node_now_passes(objects, |n| {
            find_untolerated_taint(&n.taints, &pod.tolerations, is_do_not_schedule).is_none()
        })
    }
}

/// The taints Filter cares about: those that keep pods off the node.
pub fn is_do_not_schedule(taint: &Taint) -> bool {
    matches!(
        taint.effect,
        TaintEffect::NoSchedule | TaintEffect::NoExecute
    )
}

impl FilterPlugin for TaintToleration {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        match find_untolerated_taint(&node.taints, &pod.tolerations, is_do_not_schedule) {
            None => Status::success(),
            Some(taint) => {
                tracing::trace!(
                    pod = %pod.key(),
                    node = %node.name,
                    taint = %taint,
                    "node had an untolerated taint"
                );
                Status::unresolvable(ERR_REASON_UNTOLERATED)
            }
        }
    }

    /// A node without taints has none to tolerate.
    fn summary_rule(&self, _state: &CycleState, _pod: &PodInfo) -> Option<SummaryRule> {
        Some(SummaryRule {
            untainted: true,
            ..SummaryRule::ANY
        })
    }
}

/// The pod's tolerations that can tolerate a PreferNoSchedule taint: those for that effect
/// and those without an effect (which match every effect).
#[derive(Clone, Debug)]
struct PreferNoScheduleTolerations(Vec<Toleration>);

impl PreScorePlugin for TaintToleration {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: FeasibleNodes<'_>,
        _snapshot: &Snapshot,
    ) -> Status {
        let tolerations = pod
            .tolerations
            .iter()
            .filter(|t| matches!(t.effect, None | Some(TaintEffect::PreferNoSchedule)))
            .cloned()
            .collect();
        state.write(PreferNoScheduleTolerations(tolerations));
        Status::success()
    }
}

/// How many PreferNoSchedule taints of the node none of `tolerations` tolerates.
pub fn count_intolerable_prefer_no_schedule(taints: &[Taint], tolerations: &[Toleration]) -> i64 {
    taints
        .iter()
        .filter(|t| t.effect == TaintEffect::PreferNoSchedule)
        .filter(|t| !tolerations_tolerate_taint(tolerations, t))
        .count() as i64
}

fn prefer_no_schedule_tolerations(state: &CycleState) -> Result<&[Toleration], Status> {
    match state.read::<PreferNoScheduleTolerations>() {
        Some(PreferNoScheduleTolerations(t)) => Ok(t),
        None => Err(Status::error(format!(
            "{TAINT_TOLERATION}: PreScore state missing from the cycle state"
        ))),
    }
}

impl ScorePlugin for TaintToleration {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let tolerations = prefer_no_schedule_tolerations(state)?;
        Ok(count_intolerable_prefer_no_schedule(
            &node.taints,
            tolerations,
        ))
    }

    fn score_nodes(
        &self,
        state: &CycleState,
        _pod: &PodInfo,
        nodes: FeasibleNodes<'_>,
        out: &mut [i64],
    ) -> Result<(), Status> {
        let tolerations = prefer_no_schedule_tolerations(state)?;
        for (slot, node) in out.iter_mut().zip(nodes) {
            *slot = count_intolerable_prefer_no_schedule(&node.taints, tolerations);
        }
        Ok(())
    }

    /// Nodes without taints score 0 without being read.
    fn score_summarized(
        &self,
        state: &CycleState,
        _pod: &PodInfo,
        nodes: FeasibleNodes<'_>,
        summaries: FeasibleSummaries<'_>,
        out: &mut [i64],
    ) -> Result<(), Status> {
        let tolerations = prefer_no_schedule_tolerations(state)?;
        for ((slot, node), summary) in out.iter_mut().zip(nodes).zip(summaries) {
            *slot = if summary.has_taints {
                count_intolerable_prefer_no_schedule(&node.taints, tolerations)
            } else {
                0
            };
        }
        Ok(())
    }

    fn has_score_extensions(&self) -> bool {
        true
    }

    fn normalize_score_values(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        scores: &mut [i64],
    ) -> Option<Status> {
        default_normalize_values(MAX_NODE_SCORE, true, scores);
        Some(Status::success())
    }

    /// More intolerable taints mean a lower score: normalised and reversed.
    fn normalize_scores(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        scores: &mut [NodeScore],
    ) -> Status {
        default_normalize_score(MAX_NODE_SCORE, true, scores);
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::plugins::helper::testing::values;
    use crate::types::PodBuilder;

    /// (key, operator, value, effect); empty strings leave the field unset.
    type Tol = (&'static str, &'static str, &'static str, &'static str);
    /// (key, value, effect)
    type Tnt = (&'static str, &'static str, &'static str);

    fn pod(tolerations: &[Tol]) -> PodInfo {
        tolerations
            .iter()
            .fold(PodInfo::test("ns", "p"), |b: PodBuilder, (k, op, v, e)| {
                b.toleration(k, op, v, e)
            })
            .build()
    }

    fn node(name: &str, taints: &[Tnt]) -> NodeInfo {
        taints
            .iter()
            .fold(NodeInfo::test(name), |b, (k, v, e)| b.taint(k, v, e))
            .build()
    }

    #[test]
    fn filter_requires_tolerating_no_schedule_and_no_execute() {
        // (name, tolerations, taints, fits)
        let cases: Vec<(&str, Vec<Tol>, Vec<Tnt>, bool)> = vec![
            ("no taints", vec![], vec![], true),
            (
                "NoSchedule taint, no toleration",
                vec![],
                vec![("dedicated", "user1", "NoSchedule")],
                false,
            ),
            (
                "NoExecute taint, no toleration",
                vec![],
                vec![("dedicated", "user1", "NoExecute")],
                false,
            ),
            (
                "PreferNoSchedule taint is not a filter concern",
                vec![],
                vec![("dedicated", "user1", "PreferNoSchedule")],
                true,
            ),
            (
                "Equal toleration with the same value",
                vec![("dedicated", "Equal", "user1", "NoSchedule")],
                vec![("dedicated", "user1", "NoSchedule")],
                true,
            ),
            (
                "Equal toleration with another value",
                vec![("dedicated", "Equal", "user2", "NoSchedule")],
                vec![("dedicated", "user1", "NoSchedule")],
                false,
            ),
            (
                "empty operator means Equal",
                vec![("foo", "", "bar", "NoSchedule")],
                vec![("foo", "bar", "NoSchedule")],
                true,
            ),
            (
                "Exists toleration ignores the value",
                vec![("foo", "Exists", "", "NoSchedule")],
                vec![("foo", "bar", "NoSchedule")],
                true,
            ),
            (
                "toleration for another effect",
                vec![("foo", "Exists", "", "NoSchedule")],
                vec![("foo", "bar", "NoExecute")],
                false,
            ),
            (
                "toleration without effect matches every effect",
                vec![("foo", "Exists", "", "")],
                vec![("foo", "bar", "NoExecute"), ("foo", "baz", "NoSchedule")],
                true,
            ),
            (
                "empty key with Exists tolerates every taint",
                vec![("", "Exists", "", "")],
                vec![("a", "1", "NoSchedule"), ("b", "", "NoExecute")],
                true,
            ),
            (
                "empty key with Exists and an effect tolerates only that effect",
                vec![("", "Exists", "", "NoSchedule")],
                vec![("a", "1", "NoSchedule"), ("b", "", "NoExecute")],
                false,
            ),
            (
                "one of two taints untolerated",
                vec![("foo", "Equal", "bar", "NoSchedule")],
                vec![("foo", "bar", "NoSchedule"), ("foo", "baz", "NoSchedule")],
                false,
            ),
            (
                "unknown operator tolerates nothing",
                vec![("foo", "Gt", "bar", "NoSchedule")],
                vec![("foo", "bar", "NoSchedule")],
                false,
            ),
        ];
        for (name, tols, taints, fits) in cases {
            let s = TaintToleration.filter(&CycleState::new(), &pod(&tols), &node("n", &taints));
            if fits {
                assert!(s.is_success(), "{name}: {s}");
            } else {
                assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{name}");
                assert_eq!(s.reasons(), [ERR_REASON_UNTOLERATED], "{name}");
            }
        }
    }

    fn scores(pod: &PodInfo, nodes: &[NodeInfo]) -> Vec<i64> {
        let mut state = CycleState::new();
        let arcs: Vec<Arc<NodeInfo>> = nodes.iter().cloned().map(Arc::new).collect();
        assert!(
            TaintToleration
                .pre_score(&mut state, pod, (&arcs).into(), &Snapshot::new())
                .is_success()
        );
        let mut out: Vec<NodeScore> = nodes
            .iter()
            .map(|n| NodeScore {
                name: &n.name,
                score: TaintToleration.score(&state, pod, n).unwrap(),
            })
            .collect();
        assert!(
            TaintToleration
                .normalize_scores(&state, pod, &mut out)
                .is_success()
        );
        values(&out)
    }

    #[test]
    fn fewer_intolerable_prefer_no_schedule_taints_score_higher() {
        // (name, tolerations, taints per node, want)
        type ScoreCase = (&'static str, Vec<Tol>, Vec<Vec<Tnt>>, Vec<i64>);
        let cases: Vec<ScoreCase> = vec![
            (
                "tolerated taints do not count",
                vec![
                    ("foo", "Equal", "bar", "PreferNoSchedule"),
                    ("cpu-type", "Equal", "arm64", "PreferNoSchedule"),
                ],
                vec![
                    vec![],
                    vec![("foo", "bar", "PreferNoSchedule")],
                    vec![
                        ("foo", "blah", "PreferNoSchedule"),
                        ("cpu-type", "arm64", "PreferNoSchedule"),
                    ],
                ],
                vec![100, 100, 0],
            ),
            (
                "no tolerations: more taints, lower score",
                vec![],
                vec![
                    vec![],
                    vec![("cpu-type", "arm64", "PreferNoSchedule")],
                    vec![
                        ("cpu-type", "arm64", "PreferNoSchedule"),
                        ("disk-type", "ssd", "PreferNoSchedule"),
                    ],
                ],
                vec![100, 50, 0],
            ),
            (
                "only PreferNoSchedule taints count",
                vec![("cpu-type", "Equal", "arm64", "NoSchedule")],
                vec![
                    vec![],
                    vec![("cpu-type", "arm64", "NoSchedule")],
                    vec![("cpu-type", "arm64", "PreferNoSchedule")],
                ],
                vec![100, 100, 0],
            ),
            (
                "NoSchedule tolerations do not tolerate PreferNoSchedule taints",
                vec![("foo", "Exists", "", "NoSchedule")],
                vec![vec![], vec![("foo", "bar", "PreferNoSchedule")]],
                vec![100, 0],
            ),
            (
                "tolerations without effect count",
                vec![("foo", "Exists", "", "")],
                vec![
                    vec![("foo", "bar", "PreferNoSchedule")],
                    vec![("baz", "bar", "PreferNoSchedule")],
                ],
                vec![100, 0],
            ),
            (
                "empty-key Exists toleration tolerates everything",
                vec![("", "Exists", "", "")],
                vec![vec![("a", "", "PreferNoSchedule")], vec![]],
                vec![100, 100],
            ),
            (
                "no node has intolerable taints: all get the maximum",
                vec![],
                vec![vec![], vec![("x", "", "NoSchedule")]],
                vec![100, 100],
            ),
            (
                "integer rounding as upstream: 1 of 3 -> 100 - 33",
                vec![],
                vec![
                    vec![("a", "", "PreferNoSchedule")],
                    vec![
                        ("a", "", "PreferNoSchedule"),
                        ("b", "", "PreferNoSchedule"),
                        ("c", "", "PreferNoSchedule"),
                    ],
                ],
                vec![67, 0],
            ),
        ];
        for (name, tols, node_taints, want) in cases {
            let nodes: Vec<NodeInfo> = node_taints
                .iter()
                .enumerate()
                .map(|(i, t)| node(&format!("n{i}"), t))
                .collect();
            assert_eq!(scores(&pod(&tols), &nodes), want, "{name}");
        }
    }

    #[test]
    fn score_without_pre_score_is_an_error() {
        let err = TaintToleration
            .score(&CycleState::new(), &pod(&[]), &node("n", &[]))
            .unwrap_err();
        assert_eq!(err.code(), Code::Error);
    }

    /// Upstream's `Test_isSchedulableAfterNodeChange` for TaintToleration.
    #[test]
    fn queueing_hint_on_node_changes() {
        use crate::framework::{EventObjects, QueueingHint::*};
        let pod = PodInfo::test("ns", "p")
            .toleration("dedicated", "Equal", "batch", "NoSchedule")
            .build();
        let ev = ClusterEvent::new(EventResource::Node, ActionType::ADD);
        let batch = NodeInfo::test("n")
            .taint("dedicated", "batch", "NoSchedule")
            .build();
        let web = NodeInfo::test("n")
            .taint("dedicated", "web", "NoSchedule")
            .build();
        let hint =
            |old, new| TaintToleration.queueing_hint(&pod, &ev, &EventObjects::Node { old, new });
        assert_eq!(hint(None, &batch), Queue);
        assert_eq!(hint(None, &web), QueueSkip);
        assert_eq!(hint(Some(&web), &batch), Queue);
        assert_eq!(hint(Some(&batch), &batch), QueueSkip);
        let mut with_class = PodInfo::test("ns", "q").build();
        with_class.runtime_class_name = Some("gvisor".into());
        let objects = EventObjects::Node {
            old: None,
            new: &web,
        };
        assert_eq!(
            TaintToleration.queueing_hint(&with_class, &ev, &objects),
            Queue
        );
    }
}
