//! PodTopologySpread's queueing hints (upstream `isSchedulableAfterPodChange` and
//! `isSchedulableAfterNodeChange`).

use super::PodTopologySpread;
use crate::framework::{ActionType, ClusterEvent, EventObjects, QueueingHint};
use crate::types::{NodeInclusionPolicy, NodeInfo, PodInfo, SpreadConstraint, WhenUnsatisfiable};

fn queue_if(yes: bool) -> QueueingHint {
    if yes {
        QueueingHint::Queue
    } else {
        QueueingHint::QueueSkip
    }
}

/// A pod takes part in `target`'s spreading if it is the target itself, or bound in the
/// target's namespace.
fn involved(other: &PodInfo, target: &PodInfo) -> bool {
    other.uid == target.uid
        || (other.node_name.is_some() && other.namespace() == target.namespace())
}

fn node_matches(node: &NodeInfo, constraints: &[SpreadConstraint]) -> bool {
    constraints
        .iter()
        .all(|c| node.labels.contains_key(&c.topology_key))
}

impl PodTopologySpread {
    /// The pod's `DoNotSchedule` constraints; `None` when they cannot be known here: a
    /// selector that did not compile, or defaults whose selector comes from the workloads
    /// in the snapshot (the hint then queues).
    fn hard_constraints(&self, pod: &PodInfo) -> Option<Vec<SpreadConstraint>> {
        let hard = |c: &&SpreadConstraint| c.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule;
        if !pod.spread.constraints.is_empty() {
            let out: Vec<_> = pod
                .spread
                .constraints
                .iter()
                .filter(hard)
                .cloned()
                .collect();
            return out
                .iter()
                .all(|c| c.selector_error.is_none())
                .then_some(out);
        }
        if self.default_constraints.iter().any(|c| hard(&c)) {
            return None;
        }
        Some(Vec::new())
    }

    pub(super) fn hint(
        &self,
        pod: &PodInfo,
        event: &ClusterEvent,
        objects: &EventObjects<'_>,
    ) -> QueueingHint {
        match objects {
            EventObjects::Pod { old, new } => {
                let outside = |p: &Option<&PodInfo>| p.is_some_and(|p| !involved(p, pod));
                if outside(old) || outside(new) {
                    return QueueingHint::QueueSkip;
                }
                let Some(constraints) = self.hard_constraints(pod) else {
                    return QueueingHint::Queue;
                };
                let selects =
                    |p: &PodInfo| constraints.iter().any(|c| c.selector.matches(&p.labels));
                match (old, new) {
                    (Some(o), Some(n)) => {
                        let honors_taints = constraints
                            .iter()
                            .any(|c| c.node_taints_policy == NodeInclusionPolicy::Honor);
                        if n.uid == pod.uid && o.tolerations != n.tolerations && honors_taints {
                            return QueueingHint::Queue;
                        }
                        if o.labels == n.labels {
                            return QueueingHint::QueueSkip;
                        }
                        queue_if(constraints.iter().any(|c| {
                            c.selector.matches(&o.labels) != c.selector.matches(&n.labels)
                        }))
                    }
                    (None, Some(n)) => queue_if(selects(n)),
                    (Some(o), None) => queue_if(selects(o)),
                    (None, None) => QueueingHint::Queue,
                }
            }
            EventObjects::Node { old, new } => {
                let Some(constraints) = self.hard_constraints(pod) else {
                    return QueueingHint::Queue;
                };
                let new_matches = node_matches(new, &constraints);
                match old {
                    Some(o) => {
                        if node_matches(o, &constraints) != new_matches {
                            return QueueingHint::Queue;
                        }
                        let key_changed = constraints.iter().any(|c| {
                            o.labels.get(&c.topology_key) != new.labels.get(&c.topology_key)
                        });
                        let taints_changed =
                            o.taints != new.taints || o.unschedulable != new.unschedulable;
                        queue_if(new_matches && (key_changed || taints_changed))
                    }
                    // An added node helps only if it carries every topology key.
                    None if event.action == ActionType::ADD => queue_if(new_matches),
                    // An update whose old node is not known: it may have lost a key.
                    None => QueueingHint::Queue,
                }
            }
            _ => QueueingHint::Queue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{PodTopologySpreadArgs, PodTopologySpreadConstraintsDefaulting};
    use crate::framework::EventResource;
    use crate::framework::QueueingHint::{Queue, QueueSkip};
    use k8s_openapi::api::core::v1 as k8s;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

    fn plugin() -> PodTopologySpread {
        PodTopologySpread::new(&PodTopologySpreadArgs {
            default_constraints: Vec::new(),
            defaulting_type: PodTopologySpreadConstraintsDefaulting::System,
        })
    }

    /// A constraint over `key` selecting pods that have label `foo`.
    fn hard(key: &str, honor_taints: bool) -> k8s::TopologySpreadConstraint {
        k8s::TopologySpreadConstraint {
            max_skew: 1,
            topology_key: key.into(),
            when_unsatisfiable: "DoNotSchedule".into(),
            label_selector: Some(meta::LabelSelector {
                match_expressions: Some(vec![meta::LabelSelectorRequirement {
                    key: "foo".into(),
                    operator: "Exists".into(),
                    values: None,
                }]),
                ..Default::default()
            }),
            node_taints_policy: honor_taints.then(|| "Honor".to_string()),
            ..Default::default()
        }
    }

    fn target(keys: &[&str], honor_taints: bool) -> PodInfo {
        let cs: Vec<_> = keys.iter().map(|k| hard(k, honor_taints)).collect();
        PodInfo::test("ns", "target")
            .uid("target-uid")
            .edit(|p| p.spec.get_or_insert_default().topology_spread_constraints = Some(cs))
            .build()
    }

    fn bound(ns: &str, labels: &[(&str, &str)]) -> PodInfo {
        let mut b = PodInfo::test(ns, "other").uid("other-uid").node("n1");
        for (k, v) in labels {
            b = b.label(k, v);
        }
        b.build()
    }

    /// Upstream's `Test_isSchedulableAfterPodChange` table, in our words.
    #[test]
    fn pod_events() {
        let pl = plugin();
        let ev = ClusterEvent::new(EventResource::Pod, ActionType::ADD);
        let t = target(&["zone"], false);
        let with_foo = bound("ns", &[("foo", "")]);
        let with_bar = bound("ns", &[("bar", "")]);
        let unbound = PodInfo::test("ns", "other").label("foo", "").build();
        let cases: Vec<(&str, Option<&PodInfo>, Option<&PodInfo>, QueueingHint)> = vec![
            (
                "an unscheduled pod added: skip",
                None,
                Some(&unbound),
                QueueSkip,
            ),
            (
                "a matching bound pod added: queue",
                None,
                Some(&with_foo),
                Queue,
            ),
            (
                "a non-matching bound pod added: skip",
                None,
                Some(&with_bar),
                QueueSkip,
            ),
            (
                "a matching pod deleted: queue",
                Some(&with_foo),
                None,
                Queue,
            ),
            (
                "a non-matching pod deleted: skip",
                Some(&with_bar),
                None,
                QueueSkip,
            ),
            (
                "relabelled into the selector: queue",
                Some(&with_bar),
                Some(&with_foo),
                Queue,
            ),
            (
                "relabelled out of the selector: queue",
                Some(&with_foo),
                Some(&with_bar),
                Queue,
            ),
            (
                "labels unchanged: skip",
                Some(&with_foo),
                Some(&with_foo),
                QueueSkip,
            ),
        ];
        for (name, old, new, want) in cases {
            assert_eq!(
                pl.hint(&t, &ev, &EventObjects::Pod { old, new }),
                want,
                "{name}"
            );
        }
        // Relabelled but the selector's answer is the same.
        let foo_and_bar = bound("ns", &[("foo", ""), ("bar", "")]);
        let objects = EventObjects::Pod {
            old: Some(&with_foo),
            new: Some(&foo_and_bar),
        };
        assert_eq!(pl.hint(&t, &ev, &objects), QueueSkip);
        // Another namespace takes no part.
        let elsewhere = bound("other-ns", &[("foo", "")]);
        let objects = EventObjects::Pod {
            old: None,
            new: Some(&elsewhere),
        };
        assert_eq!(pl.hint(&t, &ev, &objects), QueueSkip);
        // The target itself got a toleration: queue only when a constraint honours taints.
        for (honor, want) in [(true, Queue), (false, QueueSkip)] {
            let t = target(&["zone"], honor);
            let tolerating = PodInfo::test("ns", "target")
                .uid("target-uid")
                .toleration("k", "Exists", "", "NoSchedule")
                .edit(|p| {
                    p.spec.get_or_insert_default().topology_spread_constraints =
                        Some(vec![hard("zone", honor)])
                })
                .build();
            let objects = EventObjects::Pod {
                old: Some(&t),
                new: Some(&tolerating),
            };
            assert_eq!(pl.hint(&t, &ev, &objects), want, "honor {honor}");
        }
    }

    /// Upstream's `Test_isSchedulableAfterNodeChange` table, in our words.
    #[test]
    fn node_events() {
        let pl = plugin();
        let add = ClusterEvent::new(EventResource::Node, ActionType::ADD);
        let label = ClusterEvent::new(EventResource::Node, ActionType::UPDATE_NODE_LABEL);
        let taint = ClusterEvent::new(EventResource::Node, ActionType::UPDATE_NODE_TAINT);
        let t = target(&["zone", "node"], false);
        let full = NodeInfo::test("n")
            .label("zone", "z1")
            .label("node", "n")
            .build();
        let other_zone = NodeInfo::test("n")
            .label("zone", "z2")
            .label("node", "n")
            .build();
        let partial = NodeInfo::test("n").label("zone", "z1").build();
        let unrelated = NodeInfo::test("n")
            .label("zone", "z1")
            .label("node", "n")
            .label("foo", "bar")
            .build();
        let tainted = NodeInfo::test("n")
            .label("zone", "z1")
            .label("node", "n")
            .taint("k", "v", "NoSchedule")
            .build();
        let node = |old, new| EventObjects::Node { old, new };
        let cases: Vec<(&str, &ClusterEvent, EventObjects, QueueingHint)> = vec![
            (
                "a node with every key added: queue",
                &add,
                node(None, &full),
                Queue,
            ),
            (
                "a node missing a key added: skip",
                &add,
                node(None, &partial),
                QueueSkip,
            ),
            (
                "a key's value changed: queue",
                &label,
                node(Some(&full), &other_zone),
                Queue,
            ),
            (
                "a key added: queue",
                &label,
                node(Some(&partial), &full),
                Queue,
            ),
            (
                "a key removed: queue",
                &label,
                node(Some(&full), &partial),
                Queue,
            ),
            (
                "an unrelated label: skip",
                &label,
                node(Some(&full), &unrelated),
                QueueSkip,
            ),
            (
                "a matching node tainted: queue",
                &taint,
                node(Some(&full), &tainted),
                Queue,
            ),
            (
                "an update, old unknown: queue",
                &label,
                node(None, &partial),
                Queue,
            ),
        ];
        for (name, ev, objects, want) in cases {
            assert_eq!(pl.hint(&t, ev, &objects), want, "{name}");
        }
        // Deletions carry no objects here: queue.
        let delete = ClusterEvent::new(EventResource::Node, ActionType::DELETE);
        assert_eq!(pl.hint(&t, &delete, &EventObjects::None), Queue);
    }

    /// Hard default constraints take their selector from the cluster's workloads, which the
    /// hint cannot see: it queues.
    #[test]
    fn hard_defaults_always_queue() {
        let pl = PodTopologySpread::new(&PodTopologySpreadArgs {
            default_constraints: vec![k8s::TopologySpreadConstraint {
                max_skew: 1,
                topology_key: "zone".into(),
                when_unsatisfiable: "DoNotSchedule".into(),
                ..Default::default()
            }],
            defaulting_type: PodTopologySpreadConstraintsDefaulting::List,
        });
        let p = PodInfo::test("ns", "p").build();
        let other = bound("ns", &[("bar", "")]);
        let ev = ClusterEvent::new(EventResource::Pod, ActionType::ADD);
        let objects = EventObjects::Pod {
            old: None,
            new: Some(&other),
        };
        assert_eq!(pl.hint(&p, &ev, &objects), Queue);
    }
}
