//! NodeUnschedulable: a cordoned node (`spec.unschedulable`) takes only pods that tolerate
//! the `node.kubernetes.io/unschedulable:NoSchedule` taint.

use crate::framework::Signing;
use crate::plugins::helper::sign;
use std::sync::{Arc, LazyLock};

use crate::framework::{ActionType, ClusterEvent, EventObjects, EventResource, QueueingHint};
use crate::framework::{CycleState, FilterPlugin, Plugin, PluginPoints, Status};
use crate::plugin_points;
use crate::plugins::helper::hint_if_node_now_passes;
use crate::types::{
    NodeInfo, PodInfo, SummaryRule, Taint, TaintEffect, tolerations_tolerate_taint,
};

use super::names::NODE_UNSCHEDULABLE;

/// Upstream `ErrReasonUnschedulable`.
pub const ERR_REASON_UNSCHEDULABLE: &str = "node(s) were unschedulable";
/// The taint key the node lifecycle controller uses for cordoned nodes.
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// The taint a pod must tolerate to land on a cordoned node, built once.
static UNSCHEDULABLE_TAINT: LazyLock<Taint> =
    LazyLock::new(|| Taint::new(TAINT_NODE_UNSCHEDULABLE, "", TaintEffect::NoSchedule));

pub struct NodeUnschedulable;

impl Plugin for NodeUnschedulable {
    /// Signature for opportunistic batching (upstream `SignPod`).
    fn sign_pod(&self, pod: &PodInfo) -> Option<Signing> {
        sign::with(vec![sign::tolerations(pod)])
    }
    fn name(&self) -> &'static str {
        NODE_UNSCHEDULABLE
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => filter)
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

    /// Upstream's node hint: only a node the pod may now use (schedulable, or the pod
    /// tolerates the unschedulable taint) that it could not use before helps.
    fn queueing_hint(
        &self,
        pod: &PodInfo,
        _event: &ClusterEvent,
        objects: &EventObjects<'_>,
    ) -> QueueingHint {
        hint_if_node_now_passes(objects, |n| {
            !n.unschedulable || tolerations_tolerate_taint(&pod.tolerations, &UNSCHEDULABLE_TAINT)
        })
    }
}

impl FilterPlugin for NodeUnschedulable {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if !node.unschedulable || tolerations_tolerate_taint(&pod.tolerations, &UNSCHEDULABLE_TAINT)
        {
            return Status::success();
        }
        Status::unresolvable(ERR_REASON_UNSCHEDULABLE)
    }

    /// Nodes not cordoned pass (cordoned ones are filtered: the pod may tolerate it).
    fn summary_rule(&self, _state: &CycleState, _pod: &PodInfo) -> Option<SummaryRule> {
        Some(SummaryRule {
            schedulable: true,
            ..SummaryRule::ANY
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;

    #[test]
    fn cordoned_nodes_need_the_unschedulable_toleration() {
        let cordoned = || NodeInfo::test("n").unschedulable();
        // (name, pod, node, rejected)
        let cases = vec![
            (
                "schedulable node, no toleration",
                PodInfo::test("ns", "p").build(),
                NodeInfo::test("n").build(),
                false,
            ),
            (
                "cordoned node, no toleration",
                PodInfo::test("ns", "p").build(),
                cordoned().build(),
                true,
            ),
            (
                "cordoned node, Exists toleration for the key",
                PodInfo::test("ns", "p")
                    .toleration(TAINT_NODE_UNSCHEDULABLE, "Exists", "", "NoSchedule")
                    .build(),
                cordoned().build(),
                false,
            ),
            (
                "cordoned node, toleration without effect",
                PodInfo::test("ns", "p")
                    .toleration(TAINT_NODE_UNSCHEDULABLE, "Exists", "", "")
                    .build(),
                cordoned().build(),
                false,
            ),
            (
                "cordoned node, tolerate-everything toleration",
                PodInfo::test("ns", "p")
                    .toleration("", "Exists", "", "")
                    .build(),
                cordoned().build(),
                false,
            ),
            (
                "cordoned node, toleration for another effect",
                PodInfo::test("ns", "p")
                    .toleration(TAINT_NODE_UNSCHEDULABLE, "Exists", "", "NoExecute")
                    .build(),
                cordoned().build(),
                true,
            ),
            (
                "cordoned node, Equal toleration with a value the taint lacks",
                PodInfo::test("ns", "p")
                    .toleration(TAINT_NODE_UNSCHEDULABLE, "Equal", "yes", "NoSchedule")
                    .build(),
                cordoned().build(),
                true,
            ),
            (
                "cordoned node, toleration for another key",
                PodInfo::test("ns", "p")
                    .toleration("other", "Exists", "", "NoSchedule")
                    .build(),
                cordoned().build(),
                true,
            ),
        ];
        for (name, pod, node, rejected) in cases {
            let s = NodeUnschedulable.filter(&CycleState::new(), &pod, &node);
            if rejected {
                assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{name}");
                assert_eq!(s.reasons(), [ERR_REASON_UNSCHEDULABLE], "{name}");
            } else {
                assert!(s.is_success(), "{name}: {s}");
            }
        }
    }

    /// Upstream's `TestIsSchedulableAfterNodeChange` for NodeUnschedulable.
    #[test]
    fn queueing_hint_on_node_changes() {
        use crate::framework::{EventObjects, QueueingHint::*};
        let pod = PodInfo::test("ns", "p").build();
        let ev = ClusterEvent::new(EventResource::Node, ActionType::ADD);
        let cordoned = NodeInfo::test("n").unschedulable().build();
        let open = NodeInfo::test("n").build();
        let hint = |p: &PodInfo, old, new| {
            NodeUnschedulable.queueing_hint(p, &ev, &EventObjects::Node { old, new })
        };
        assert_eq!(hint(&pod, None, &open), Queue);
        assert_eq!(hint(&pod, None, &cordoned), QueueSkip);
        assert_eq!(hint(&pod, Some(&cordoned), &open), Queue, "uncordoned");
        assert_eq!(
            hint(&pod, Some(&open), &open),
            QueueSkip,
            "was usable already"
        );
        let tolerant = PodInfo::test("ns", "t")
            .toleration(
                "node.kubernetes.io/unschedulable",
                "Exists",
                "",
                "NoSchedule",
            )
            .build();
        assert_eq!(hint(&tolerant, None, &cordoned), Queue);
    }
}
