//! RuntimeClass: the scheduler-side predicate from the RuntimeClass scheduling KEP.
//!
//! Admission normally copies a RuntimeClass's `scheduling.nodeSelector` and tolerations
//! and its `overhead.podFixed` into the pod. This plugin makes placement right even for pods
//! that skipped admission (created before the class, or with the admission plugin off):
//!
//! * [`resolve`] runs before the cycle and returns the pod as admission would have left it:
//!   the class's tolerations added (duplicates merged) and its overhead added when the pod
//!   has no `spec.overhead` yet. Every plugin then sees the effective pod; TaintToleration
//!   honours the class's tolerations and NodeResourcesFit counts the overhead.
//! * PreFilter rejects pods whose class does not exist (unresolvable until it is created;
//!   the queue retries the pod on RuntimeClass events).
//! * Filter requires the node to carry every label of the class's `scheduling.nodeSelector`.

use crate::framework::Signing;
use crate::plugins::helper::sign;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::cache::Snapshot;
use crate::framework::{ActionType, ClusterEvent, EventResource};
use crate::framework::{
    CycleState, FilterPlugin, Plugin, PluginPoints, PreFilterPlugin, PreFilterResult, Status,
};
use crate::plugin_points;
use crate::types::{NodeInfo, PodInfo};

use super::names::RUNTIME_CLASS;

/// Filter failure: the node lacks a label the class's nodeSelector requires.
pub const ERR_REASON_NODE_MISMATCH: &str = "node(s) didn't match RuntimeClass";

/// PreFilter failure: the pod names a class the cluster does not have.
pub fn err_not_found(name: &str) -> String {
    format!("runtimeclass {name:?} not found")
}

pub struct RuntimeClass;

/// The class's node selector, resolved once per cycle.
#[derive(Clone)]
struct RequiredLabels(BTreeMap<String, String>);

impl Plugin for RuntimeClass {
    /// Signature for opportunistic batching (upstream `SignPod`).
    fn sign_pod(&self, pod: &PodInfo) -> Option<Signing> {
        sign::with(vec![(
            "v1.Pod.Spec.RuntimeClassName",
            format!("{:?}", pod.runtime_class_name),
        )])
    }
    fn name(&self) -> &'static str {
        RUNTIME_CLASS
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_filter, filter)
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            // A class that appears (or changes its nodeSelector) may admit the pod.
            ClusterEvent::new(
                EventResource::RuntimeClass,
                ActionType::ADD | ActionType::UPDATE,
            ),
            ClusterEvent::new(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
            ),
        ]
    }
}

impl PreFilterPlugin for RuntimeClass {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let Some(name) = pod.runtime_class_name.as_deref() else {
            return (None, Status::skip());
        };
        let Some(class) = snapshot.runtime_class(name) else {
            return (None, Status::unresolvable(err_not_found(name)));
        };
        if class.node_selector.is_empty() {
            return (None, Status::skip());
        }
        state.write(RequiredLabels(class.node_selector.clone()));
        (None, Status::success())
    }
}

impl FilterPlugin for RuntimeClass {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(RequiredLabels(required)) = state.read::<RequiredLabels>() else {
            return Status::error("RuntimeClass PreFilter state missing");
        };
        if required.iter().all(|(k, v)| node.labels.get(k) == Some(v)) {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON_NODE_MISMATCH)
        }
    }
}

/// The pod as RuntimeClass admission would have left it, or `None` when nothing changes
/// (no class, class unknown, or nothing to add).
pub fn resolve(pod: &PodInfo, snapshot: &Snapshot) -> Option<PodInfo> {
    let class = snapshot.runtime_class(pod.runtime_class_name.as_deref()?)?;
    let needs_tolerations = class
        .tolerations
        .iter()
        .any(|t| !pod.tolerations.contains(t));
    let needs_overhead = !pod.has_overhead && class.overhead.as_ref().is_some_and(|o| !o.is_zero());
    if !needs_tolerations && !needs_overhead {
        return None;
    }
    let mut p = if needs_tolerations {
        pod.with_extra_tolerations(&class.tolerations)
    } else {
        pod.clone()
    };
    if let (true, Some(o)) = (needs_overhead, class.overhead.as_ref()) {
        p = p.with_overhead(o);
    }
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{RuntimeClassInfo, Toleration};
    use k8s_openapi::api::node::v1 as node_v1;

    fn class(
        name: &str,
        selector: &[(&str, &str)],
        tolerations: &[(&str, &str)],
        overhead_cpu: Option<&str>,
    ) -> node_v1::RuntimeClass {
        use k8s_openapi::api::core::v1 as core;
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        node_v1::RuntimeClass {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            handler: name.into(),
            overhead: overhead_cpu.map(|c| node_v1::Overhead {
                pod_fixed: Some([("cpu".to_string(), Quantity(c.into()))].into()),
            }),
            scheduling: Some(node_v1::Scheduling {
                node_selector: Some(
                    selector
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                tolerations: Some(
                    tolerations
                        .iter()
                        .map(|(k, e)| core::Toleration {
                            key: Some(k.to_string()),
                            operator: Some("Exists".into()),
                            effect: Some(e.to_string()),
                            ..Default::default()
                        })
                        .collect(),
                ),
            }),
        }
    }

    fn snapshot_with(classes: &[node_v1::RuntimeClass], nodes: Vec<NodeInfo>) -> Snapshot {
        Snapshot::from_node_infos(nodes)
            .with_runtime_classes(classes.iter().map(RuntimeClassInfo::from_runtime_class))
    }

    #[test]
    fn pods_without_a_class_skip_the_plugin() {
        let snap = snapshot_with(&[], vec![]);
        let mut state = CycleState::new();
        let (_, s) = RuntimeClass.pre_filter(&mut state, &PodInfo::test("ns", "p").build(), &snap);
        assert!(s.is_skip());
    }

    #[test]
    fn a_missing_class_is_unresolvable_with_its_name() {
        let snap = snapshot_with(&[], vec![]);
        let mut state = CycleState::new();
        let pod = PodInfo::test("ns", "p").runtime_class("kata").build();
        let (_, s) = RuntimeClass.pre_filter(&mut state, &pod, &snap);
        assert_eq!(s, Status::unresolvable("runtimeclass \"kata\" not found"));
    }

    #[test]
    fn node_selector_must_match_every_label() {
        let rc = class(
            "gvisor",
            &[("sandbox", "gvisor"), ("os", "linux")],
            &[],
            None,
        );
        let snap = snapshot_with(&[rc], vec![]);
        let pod = PodInfo::test("ns", "p").runtime_class("gvisor").build();
        let mut state = CycleState::new();
        let (_, s) = RuntimeClass.pre_filter(&mut state, &pod, &snap);
        assert!(s.is_success());
        let good = NodeInfo::test("a")
            .label("sandbox", "gvisor")
            .label("os", "linux")
            .build();
        let partial = NodeInfo::test("b").label("sandbox", "gvisor").build();
        let other = NodeInfo::test("c")
            .label("sandbox", "kata")
            .label("os", "linux")
            .build();
        assert!(RuntimeClass.filter(&state, &pod, &good).is_success());
        for n in [partial, other] {
            assert_eq!(
                RuntimeClass.filter(&state, &pod, &n),
                Status::unresolvable(ERR_REASON_NODE_MISMATCH)
            );
        }
    }

    #[test]
    fn a_class_without_node_selector_filters_nothing() {
        let snap = snapshot_with(&[class("runc", &[], &[], None)], vec![]);
        let pod = PodInfo::test("ns", "p").runtime_class("runc").build();
        let (_, s) = RuntimeClass.pre_filter(&mut CycleState::new(), &pod, &snap);
        assert!(s.is_skip());
    }

    #[test]
    fn resolve_adds_tolerations_once_and_overhead_only_when_missing() {
        let rc = class("kata", &[], &[("sandbox", "NoSchedule")], Some("250m"));
        let snap = snapshot_with(&[rc], vec![]);
        let pod = PodInfo::test("ns", "p")
            .runtime_class("kata")
            .cpu("1")
            .build();
        let r = resolve(&pod, &snap).expect("changes");
        assert_eq!(r.requests.milli_cpu, 1250);
        assert_eq!(
            r.tolerations,
            vec![Toleration::exists(
                "sandbox",
                Some(crate::types::TaintEffect::NoSchedule)
            )]
        );
        // Already resolved (e.g. by admission): nothing to add.
        assert!(resolve(&r, &snap).is_none());
        // Overhead already set by admission: counted once.
        let admitted = PodInfo::test("ns", "q")
            .runtime_class("kata")
            .cpu("1")
            .overhead("cpu", "250m")
            .build();
        let r2 = resolve(&admitted, &snap).expect("tolerations still added");
        assert_eq!(r2.requests.milli_cpu, 1250);
        // No class, unknown class: untouched.
        assert!(resolve(&PodInfo::test("ns", "x").build(), &snap).is_none());
        assert!(
            resolve(
                &PodInfo::test("ns", "y").runtime_class("nope").build(),
                &snap
            )
            .is_none()
        );
    }
}
