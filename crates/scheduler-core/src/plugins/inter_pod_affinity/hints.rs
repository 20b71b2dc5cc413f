//! InterPodAffinity's queueing hints (upstream `isSchedulableAfterPodChange` and
//! `isSchedulableAfterNodeChange`): which pod and node events can help a pod the plugin
//! rejected.

use crate::framework::{EventObjects, QueueingHint};
use crate::types::{AffinityTerm, PodInfo};

/// Whether `other` matches every term (namespace and selector). No terms: no match, as a pod
/// without affinity cannot be helped by a pod that matches "all" of nothing.
fn matches_all(terms: &[AffinityTerm], other: &PodInfo) -> bool {
    !terms.is_empty()
        && terms
            .iter()
            .all(|t| t.matches(other.namespace(), &other.labels, None))
}

/// The hint for `pod` on `objects`.
pub(super) fn hint(pod: &PodInfo, objects: &EventObjects<'_>) -> QueueingHint {
    if pod.affinity_terms.parse_error.is_some() {
        return QueueingHint::Queue;
    }
    let terms = &pod.affinity_terms.required_affinity;
    let anti = &pod.affinity_terms.required_anti_affinity;
    let skip_unless = |queue: bool| {
        if queue {
            QueueingHint::Queue
        } else {
            QueueingHint::QueueSkip
        }
    };
    match objects {
        EventObjects::Pod { old, new } => {
            // An unbound pod takes no part in affinity: neither added, changed nor gone.
            let unbound = |p: &Option<&PodInfo>| p.is_some_and(|p| p.node_name.is_none());
            if unbound(old) || unbound(new) {
                return QueueingHint::QueueSkip;
            }
            match (old, new) {
                // Relabelled: it now matches the affinity, or no longer the anti-affinity.
                (Some(o), Some(n)) => skip_unless(
                    (!matches_all(terms, o) && matches_all(terms, n))
                        || (matches_all(anti, o) && !matches_all(anti, n)),
                ),
                // Added: it can satisfy the affinity.
                (None, Some(n)) => skip_unless(matches_all(terms, n)),
                // Gone: it may have been the one the anti-affinity kept away.
                (Some(o), None) => skip_unless(matches_all(anti, o)),
                (None, None) => QueueingHint::Queue,
            }
        }
        // A node carrying a topology key of some term may open a domain.
        EventObjects::Node { new, .. } => skip_unless(
            terms
                .iter()
                .chain(anti.iter())
                .any(|t| new.labels.contains_key(&t.topology_key)),
        ),
        _ => QueueingHint::Queue,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::QueueingHint::{Queue, QueueSkip};
    use crate::types::NodeInfo;
    use k8s_openapi::api::core::v1 as k8s;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

    /// A pod whose required (anti-)affinity selects `service=securityscan` per zone.
    fn affinity_pod(anti: bool) -> PodInfo {
        let term = k8s::PodAffinityTerm {
            label_selector: Some(meta::LabelSelector {
                match_labels: Some([("service".to_string(), "securityscan".to_string())].into()),
                match_expressions: None,
            }),
            topology_key: "zone".to_string(),
            ..Default::default()
        };
        let affinity = if anti {
            k8s::Affinity {
                pod_anti_affinity: Some(k8s::PodAntiAffinity {
                    required_during_scheduling_ignored_during_execution: Some(vec![term]),
                    ..Default::default()
                }),
                ..Default::default()
            }
        } else {
            k8s::Affinity {
                pod_affinity: Some(k8s::PodAffinity {
                    required_during_scheduling_ignored_during_execution: Some(vec![term]),
                    ..Default::default()
                }),
                ..Default::default()
            }
        };
        PodInfo::test("ns", "target").affinity(affinity).build()
    }

    fn bound(labels: &[(&str, &str)]) -> PodInfo {
        let mut b = PodInfo::test("ns", "other").node("n1");
        for (k, v) in labels {
            b = b.label(k, v);
        }
        b.build()
    }

    fn unbound(labels: &[(&str, &str)]) -> PodInfo {
        let mut b = PodInfo::test("ns", "other");
        for (k, v) in labels {
            b = b.label(k, v);
        }
        b.build()
    }

    /// Upstream's `Test_isSchedulableAfterPodChange` table, in our words.
    #[test]
    fn pod_events() {
        let aff = affinity_pod(false);
        let anti = affinity_pod(true);
        let matching = bound(&[("service", "securityscan")]);
        let other = bound(&[("aaa", "a")]);
        let pod = |old: Option<&PodInfo>, new: Option<&PodInfo>| (old.cloned(), new.cloned());
        // (name, target, (old, new), want)
        type Case<'a> = (
            &'a str,
            &'a PodInfo,
            (Option<PodInfo>, Option<PodInfo>),
            QueueingHint,
        );
        let cases: Vec<Case> = vec![
            (
                "an unscheduled pod added: skip",
                &aff,
                pod(None, Some(&unbound(&[("service", "securityscan")]))),
                QueueSkip,
            ),
            (
                "a bound pod added that matches the affinity: queue",
                &aff,
                pod(None, Some(&matching)),
                Queue,
            ),
            (
                "a bound pod added that does not match: skip",
                &aff,
                pod(None, Some(&other)),
                QueueSkip,
            ),
            (
                "a pod relabelled to match the affinity: queue",
                &aff,
                pod(Some(&other), Some(&matching)),
                Queue,
            ),
            (
                "a pod relabelled, still not matching: skip",
                &aff,
                pod(Some(&other), Some(&bound(&[("bbb", "b")]))),
                QueueSkip,
            ),
            (
                "a pod relabelled out of the anti-affinity: queue",
                &anti,
                pod(Some(&matching), Some(&other)),
                Queue,
            ),
            (
                "a pod relabelled into the anti-affinity: skip",
                &anti,
                pod(Some(&other), Some(&matching)),
                QueueSkip,
            ),
            (
                "a pod matching the anti-affinity deleted: queue",
                &anti,
                pod(Some(&matching), None),
                Queue,
            ),
            (
                "a pod not matching the anti-affinity deleted: skip",
                &anti,
                pod(Some(&other), None),
                QueueSkip,
            ),
            (
                "a pod matching the affinity deleted (no anti-affinity): skip",
                &aff,
                pod(Some(&matching), None),
                QueueSkip,
            ),
            (
                "a bound pod added, target has only anti-affinity: skip",
                &anti,
                pod(None, Some(&matching)),
                QueueSkip,
            ),
        ];
        for (name, target, (old, new), want) in cases {
            let objects = EventObjects::Pod {
                old: old.as_ref(),
                new: new.as_ref(),
            };
            assert_eq!(hint(target, &objects), want, "{name}");
        }
        // Another namespace: the term (own namespace only) does not match.
        let elsewhere = PodInfo::test("other-ns", "p")
            .node("n1")
            .label("service", "securityscan")
            .build();
        let objects = EventObjects::Pod {
            old: None,
            new: Some(&elsewhere),
        };
        assert_eq!(hint(&aff, &objects), QueueSkip);
    }

    /// Upstream's `Test_isSchedulableAfterNodeChange` table, in our words.
    #[test]
    fn node_events() {
        let with_zone = NodeInfo::test("n").label("zone", "zone1").build();
        let without = NodeInfo::test("n").label("aaa", "a").build();
        for (target, node, want) in [
            (affinity_pod(false), &with_zone, Queue),
            (affinity_pod(false), &without, QueueSkip),
            (affinity_pod(true), &with_zone, Queue),
            (affinity_pod(true), &without, QueueSkip),
        ] {
            let objects = EventObjects::Node {
                old: None,
                new: node,
            };
            assert_eq!(hint(&target, &objects), want, "{:?}", node.labels);
        }
        // No objects at hand: always queue.
        assert_eq!(hint(&affinity_pod(false), &EventObjects::None), Queue);
    }
}
