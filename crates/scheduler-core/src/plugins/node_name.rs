//! NodeName: a pod that already names its node (`spec.nodeName`) but is still pending can
//! only go there.

use crate::framework::Signing;
use crate::plugins::helper::sign;
use std::sync::Arc;

use crate::framework::{ActionType, ClusterEvent, EventResource};
use crate::framework::{CycleState, FilterPlugin, Plugin, PluginPoints, Status};
use crate::plugin_points;
use crate::types::{NodeInfo, PodInfo, SummaryRule};

use super::names::NODE_NAME;

/// Upstream `ErrReason`.
pub const ERR_REASON: &str = "node(s) didn't match the requested node name";

pub struct NodeName;

impl Plugin for NodeName {
    /// Signature for opportunistic batching (upstream `SignPod`).
    fn sign_pod(&self, pod: &PodInfo) -> Option<Signing> {
        sign::with(vec![(
            "v1.Pod.Spec.NodeName",
            format!("{:?}", pod.node_name),
        )])
    }
    fn name(&self) -> &'static str {
        NODE_NAME
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => filter)
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::new(EventResource::Node, ActionType::ADD)]
    }
}

/// Whether the pod may run on `node` as far as `spec.nodeName` is concerned.
pub fn fits(pod: &PodInfo, node: &NodeInfo) -> bool {
    pod.node_name.as_deref().is_none_or(|n| n == node.name)
}

impl FilterPlugin for NodeName {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if fits(pod, node) {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON)
        }
    }

    /// A pod that names no node fits every node.
    fn summary_rule(&self, _state: &CycleState, pod: &PodInfo) -> Option<SummaryRule> {
        pod.node_name.is_none().then_some(SummaryRule::ANY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;

    #[test]
    fn only_the_named_node_fits() {
        // (name, pod node name, node, fits)
        let cases = [
            ("no node name", None, "foo", true),
            ("same name", Some("foo"), "foo", true),
            ("different name", Some("bar"), "foo", false),
            ("prefix is not enough", Some("fo"), "foo", false),
        ];
        for (name, pod_node, node, want) in cases {
            let mut b = PodInfo::test("ns", "p");
            if let Some(n) = pod_node {
                b = b.node(n);
            }
            let pod = b.build();
            let node = NodeInfo::test(node).build();
            let s = NodeName.filter(&CycleState::new(), &pod, &node);
            if want {
                assert!(s.is_success(), "{name}: {s}");
            } else {
                assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{name}");
                assert_eq!(s.reasons(), [ERR_REASON], "{name}");
            }
        }
    }
}
