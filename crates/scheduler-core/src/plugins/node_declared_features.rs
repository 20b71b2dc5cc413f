//! NodeDeclaredFeatures (upstream `nodedeclaredfeatures`, GA in 1.37): a pod whose spec
//! needs a node feature (`types::declared_features`: RestartAllContainers restart rules,
//! host networking in a user namespace, bind mount options) fits only nodes whose
//! `status.declaredFeatures` lists every such feature.
//!
//! Older clusters: kubelets before 1.35 (or with the gate off) declare nothing, and their
//! kube-scheduler has no such filter. When no node of the snapshot declares any feature, the
//! plugin stands aside, as that scheduler did, instead of refusing every node.

use crate::framework::Signing;
use crate::plugins::helper::sign;
use std::sync::Arc;

use crate::cache::Snapshot;
use crate::framework::{
    ActionType, ClusterEvent, CycleState, EventObjects, EventResource, FilterPlugin, Plugin,
    PluginPoints, PreFilterPlugin, PreFilterResult, QueueingHint, Status,
};
use crate::plugin_points;
use crate::types::{NodeInfo, PodInfo};

use super::names::NODE_DECLARED_FEATURES;

/// Upstream `errReasonUnsatisfiedRequirements`.
pub const ERR_REASON: &str = "node(s) didn't match Pod's required features";

pub struct NodeDeclaredFeatures;

/// The pod's requirements, written by PreFilter.
#[derive(Clone, Debug)]
struct Required(Vec<&'static str>);

impl Plugin for NodeDeclaredFeatures {
    /// Signature for opportunistic batching (upstream `SignPod`).
    fn sign_pod(&self, pod: &PodInfo) -> Option<Signing> {
        sign::with(vec![(
            "v1.Pod.Spec.RequiredFeatures()",
            format!("{:?}", pod.required_node_features),
        )])
    }
    fn name(&self) -> &'static str {
        NODE_DECLARED_FEATURES
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_filter, filter)
    }
    /// A node added or declaring other features may now fit. (Upstream also registers the
    /// pod's own update, hinting Queue only when the pod's requirements changed; the fields
    /// they come from are immutable, so that hint never queues and is left out here.)
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::new(
            EventResource::Node,
            ActionType::ADD | ActionType::UPDATE_NODE_DECLARED_FEATURE,
        )]
    }

    /// Upstream `isSchedulableAfterNodeChange`: an update that leaves the declared features
    /// as they were (in order) cannot help; a new node, or an update without the old view, may.
    fn queueing_hint(
        &self,
        _pod: &PodInfo,
        _event: &ClusterEvent,
        objects: &EventObjects<'_>,
    ) -> QueueingHint {
        match objects {
            EventObjects::Node {
                old: Some(old),
                new,
            } if old.declared_features == new.declared_features => QueueingHint::QueueSkip,
            _ => QueueingHint::Queue,
        }
    }
}

impl PreFilterPlugin for NodeDeclaredFeatures {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        if pod.required_node_features.is_empty() {
            return (None, Status::skip());
        }
        let cluster_declares = snapshot
            .node_infos()
            .iter()
            .any(|n| !n.declared_features.is_empty());
        if !cluster_declares {
            return (None, Status::skip());
        }
        state.write(Required(pod.required_node_features.clone()));
        (None, Status::success())
    }
}

/// Whether `node` declares every feature in `required`.
pub fn declares_all(required: &[&str], node: &NodeInfo) -> bool {
    required
        .iter()
        .all(|r| node.declared_features.iter().any(|d| d == r))
}

impl FilterPlugin for NodeDeclaredFeatures {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(Required(required)) = state.read::<Required>() else {
            return Status::error(format!(
                "{NODE_DECLARED_FEATURES}: the pod's feature requirements are missing from the cycle state (PreFilter did not run)"
            ));
        };
        if declares_all(required, node) {
            Status::success()
        } else {
            // No eviction can give a node a feature: preemption must not try.
            Status::unresolvable(ERR_REASON)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::types::declared_features::*;

    fn node(name: &str, declared: &[&str]) -> NodeInfo {
        let declared: Vec<String> = declared.iter().map(|s| s.to_string()).collect();
        NodeInfo::test(name)
            .edit(|n| {
                n.status
                    .get_or_insert_with(Default::default)
                    .declared_features = (!declared.is_empty()).then_some(declared);
            })
            .build()
    }

    fn needing_restart_all() -> PodInfo {
        PodInfo::test("ns", "p")
            .edit(|p| {
                let spec = p.spec.get_or_insert_with(Default::default);
                spec.containers.push(k8s_openapi::api::core::v1::Container {
                    name: "app".into(),
                    restart_policy_rules: Some(vec![
                        k8s_openapi::api::core::v1::ContainerRestartRule {
                            action: "RestartAllContainers".into(),
                            ..Default::default()
                        },
                    ]),
                    ..Default::default()
                });
            })
            .build()
    }

    /// PreFilter, then Filter on every node of the snapshot (success where skipped).
    fn run(pod: &PodInfo, nodes: Vec<NodeInfo>) -> (Status, Vec<Status>) {
        let snap = Snapshot::from_node_infos(nodes);
        let mut state = CycleState::new();
        let (result, pre) = NodeDeclaredFeatures.pre_filter(&mut state, pod, &snap);
        assert!(result.is_none());
        let filters = snap
            .node_infos()
            .iter()
            .map(|n| {
                if pre.is_skip() {
                    Status::success()
                } else {
                    NodeDeclaredFeatures.filter(&state, pod, n)
                }
            })
            .collect();
        (pre, filters)
    }

    /// Upstream's table: matching, superset and missing features.
    #[test]
    fn pod_needing_a_feature_fits_only_nodes_declaring_it() {
        let pod = needing_restart_all();
        assert_eq!(
            pod.required_node_features,
            [RESTART_ALL_CONTAINERS_ON_CONTAINER_EXITS]
        );
        let (pre, got) = run(
            &pod,
            vec![
                node("exact", &[RESTART_ALL_CONTAINERS_ON_CONTAINER_EXITS]),
                node(
                    "superset",
                    &[
                        RESTART_ALL_CONTAINERS_ON_CONTAINER_EXITS,
                        VOLUME_BIND_MOUNT_OPTIONS,
                    ],
                ),
                node("other", &[VOLUME_BIND_MOUNT_OPTIONS]),
                node("none", &[]),
            ],
        );
        assert!(pre.is_success());
        assert!(got[0].is_success());
        assert!(got[1].is_success());
        for s in &got[2..] {
            assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
            assert_eq!(s.message(), ERR_REASON);
        }
    }

    #[test]
    fn pods_without_requirements_skip() {
        let (pre, _) = run(
            &PodInfo::test("ns", "plain").build(),
            vec![node("n", &[VOLUME_BIND_MOUNT_OPTIONS])],
        );
        assert!(pre.is_skip());
    }

    /// A cluster whose kubelets declare nothing (before 1.35, or the gate off): the old
    /// scheduler had no such filter, so the pod is not refused on that ground.
    #[test]
    fn clusters_without_declared_features_are_not_filtered() {
        let (pre, got) = run(&needing_restart_all(), vec![node("a", &[]), node("b", &[])]);
        assert!(pre.is_skip());
        assert!(got.iter().all(Status::is_success));
    }

    /// A kubelet declaring a new feature is an update of its own kind; heartbeats are not.
    #[test]
    fn declared_features_updates_are_classified() {
        use crate::framework::node_update_actions;
        let with = |features: Option<Vec<String>>| {
            let mut n = k8s_openapi::api::core::v1::Node::default();
            n.status
                .get_or_insert_with(Default::default)
                .declared_features = features;
            n
        };
        let old = with(None);
        let new = with(Some(vec![VOLUME_BIND_MOUNT_OPTIONS.to_string()]));
        assert_eq!(
            node_update_actions(&old, &new),
            ActionType::UPDATE_NODE_DECLARED_FEATURE
        );
        assert_eq!(node_update_actions(&new, &new.clone()), ActionType::NONE);
        let mut seen = NodeInfo::test("n").build();
        seen.set_node(&new);
        assert_eq!(seen.declared_features, [VOLUME_BIND_MOUNT_OPTIONS]);
        seen.remove_node();
        assert!(seen.declared_features.is_empty());
    }

    #[test]
    fn declared_feature_changes_and_new_nodes_requeue() {
        let events = NodeDeclaredFeatures.events_to_register();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].resource, EventResource::Node);
        assert!(events[0].action.contains(ActionType::ADD));
        assert!(
            events[0]
                .action
                .contains(ActionType::UPDATE_NODE_DECLARED_FEATURE)
        );
        assert!(!events[0].action.intersects(ActionType::UPDATE_NODE_LABEL));
    }

    /// Upstream's TestIsSchedulableAfterNodeChange, in our words.
    #[test]
    fn queueing_hint_on_node_changes() {
        let pod = needing_restart_all();
        let ev = ClusterEvent::new(
            EventResource::Node,
            ActionType::UPDATE_NODE_DECLARED_FEATURE,
        );
        let hint = |old: Option<&NodeInfo>, new: &NodeInfo| {
            NodeDeclaredFeatures.queueing_hint(&pod, &ev, &EventObjects::Node { old, new })
        };
        let none = node("n", &[]);
        let a = node("n", &["A"]);
        let ab = node("n", &["A", "B"]);
        let ba = node("n", &["B", "A"]);
        assert_eq!(hint(None, &a), QueueingHint::Queue, "node added");
        assert_eq!(
            hint(Some(&none), &a),
            QueueingHint::Queue,
            "feature declared"
        );
        assert_eq!(hint(Some(&a), &ab), QueueingHint::Queue, "feature added");
        assert_eq!(hint(Some(&ab), &a), QueueingHint::Queue, "feature removed");
        assert_eq!(hint(Some(&ab), &ba), QueueingHint::Queue, "order changed");
        assert_eq!(
            hint(Some(&ab), &ab.clone()),
            QueueingHint::QueueSkip,
            "unchanged"
        );
        assert_eq!(
            NodeDeclaredFeatures.queueing_hint(&pod, &ev, &EventObjects::None),
            QueueingHint::Queue
        );
    }
}
