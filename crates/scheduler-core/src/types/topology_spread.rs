//! Topology spread constraints compiled once per pod change (PodTopologySpread plugin).
//!
//! Upstream compiles `spec.topologySpreadConstraints` on every scheduling attempt; here the
//! pod's own constraints are compiled when its view is built, with `matchLabelKeys` already
//! merged into the selector, and the plugin only picks the ones for the action it needs.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as k8s;

use super::label_selector::LabelSelector;

/// `kubernetes.io/hostname`: spreading over nodes, scored per node.
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
/// `topology.kubernetes.io/zone`.
pub const LABEL_TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";

/// `whenUnsatisfiable`. A value other than the two known ones takes part in neither
/// filtering nor scoring, as upstream compares the string for equality.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhenUnsatisfiable {
    DoNotSchedule,
    ScheduleAnyway,
    Unknown,
}

impl WhenUnsatisfiable {
    pub fn parse(s: &str) -> Self {
        match s {
            "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
            "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
            _ => WhenUnsatisfiable::Unknown,
        }
    }
}

/// `nodeAffinityPolicy` / `nodeTaintsPolicy`. Only `Honor` turns the check on; any other
/// value set explicitly behaves like `Ignore`, as upstream only tests for `Honor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeInclusionPolicy {
    Honor,
    Ignore,
}

impl NodeInclusionPolicy {
    fn parse(value: Option<&str>, default: NodeInclusionPolicy) -> Self {
        match value {
            None => default,
            Some("Honor") => NodeInclusionPolicy::Honor,
            Some(_) => NodeInclusionPolicy::Ignore,
        }
    }
}

/// One compiled constraint.
#[derive(Clone, Debug, PartialEq)]
pub struct SpreadConstraint {
    pub max_skew: i32,
    pub topology_key: String,
    /// `labelSelector` with `matchLabelKeys` merged in (pod constraints only). A missing
    /// selector selects nothing; an invalid one too, and `selector_error` says why.
    pub selector: LabelSelector,
    /// Why `labelSelector` did not compile; upstream fails the attempt with this error
    /// when the constraint is needed.
    pub selector_error: Option<String>,
    /// `minDomains`, 1 when unset.
    pub min_domains: i32,
    /// Honor by default: only nodes matching the pod's nodeSelector/required affinity count.
    pub node_affinity_policy: NodeInclusionPolicy,
    /// Ignore by default: tainted nodes count unless the policy is Honor.
    pub node_taints_policy: NodeInclusionPolicy,
    pub when_unsatisfiable: WhenUnsatisfiable,
}

impl SpreadConstraint {
    /// Compiles an API constraint. With `pod_labels`, each `matchLabelKeys` key the pod
    /// carries adds `key in (value)` to the selector (a missing selector stays empty of
    /// matches, as upstream keeps a "nothing" selector as is).
    pub fn compile(
        c: &k8s::TopologySpreadConstraint,
        pod_labels: Option<&BTreeMap<String, String>>,
    ) -> Self {
        let (mut selector, selector_error) =
            match LabelSelector::from_k8s(c.label_selector.as_ref()) {
                Ok(s) => (s, None),
                Err(e) => (LabelSelector::Nothing, Some(e)),
            };
        if let Some(labels) = pod_labels {
            for key in c.match_label_keys.iter().flatten() {
                if let Some(value) = labels.get(key) {
                    selector.add_requirement(key, value, true);
                }
            }
        }
        SpreadConstraint {
            max_skew: c.max_skew,
            topology_key: c.topology_key.clone(),
            selector,
            selector_error,
            min_domains: c.min_domains.unwrap_or(1),
            node_affinity_policy: NodeInclusionPolicy::parse(
                c.node_affinity_policy.as_deref(),
                NodeInclusionPolicy::Honor,
            ),
            node_taints_policy: NodeInclusionPolicy::parse(
                c.node_taints_policy.as_deref(),
                NodeInclusionPolicy::Ignore,
            ),
            when_unsatisfiable: WhenUnsatisfiable::parse(&c.when_unsatisfiable),
        }
    }

    pub fn is_hostname(&self) -> bool {
        self.topology_key == LABEL_HOSTNAME
    }
}

/// The workload kinds whose selectors feed the default spreading selector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorkloadKind {
    Service,
    ReplicationController,
    ReplicaSet,
    StatefulSet,
}

impl WorkloadKind {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Service => "Service",
            WorkloadKind::ReplicationController => "ReplicationController",
            WorkloadKind::ReplicaSet => "ReplicaSet",
            WorkloadKind::StatefulSet => "StatefulSet",
        }
    }
}

/// The pod's controller, when it is one of the kinds default spreading looks up
/// (`v1` ReplicationController, `apps/v1` ReplicaSet or StatefulSet).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpreadController {
    pub kind: WorkloadKind,
    pub name: String,
}

/// What PodTopologySpread needs from a pod, compiled with its view.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodSpreadInfo {
    /// Every `spec.topologySpreadConstraints` entry, in order, whatever its action.
    pub constraints: Vec<SpreadConstraint>,
    /// The controlling owner, if a kind that default constraints look up.
    pub controller: Option<SpreadController>,
}

impl super::rare::RareEmpty for PodSpreadInfo {
    fn empty() -> &'static Self {
        static EMPTY: PodSpreadInfo = PodSpreadInfo {
            constraints: Vec::new(),
            controller: None,
        };
        &EMPTY
    }
    fn is_empty_value(&self) -> bool {
        self.constraints.is_empty() && self.controller.is_none()
    }
}

impl PodSpreadInfo {
    /// Compiles the pod's constraints; invalid selectors are reported in `problems`.
    pub fn from_pod(pod: &k8s::Pod, problems: &mut Vec<String>) -> Self {
        let empty = BTreeMap::new();
        let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
        let constraints: Vec<SpreadConstraint> = pod
            .spec
            .iter()
            .flat_map(|s| s.topology_spread_constraints.iter().flatten())
            .map(|c| SpreadConstraint::compile(c, Some(labels)))
            .collect();
        for (i, c) in constraints.iter().enumerate() {
            if let Some(e) = &c.selector_error {
                problems.push(format!("topologySpreadConstraints[{i}].labelSelector: {e}"));
            }
        }
        let controller = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .and_then(|o| {
                let kind = match (o.api_version.as_str(), o.kind.as_str()) {
                    ("v1", "ReplicationController") => WorkloadKind::ReplicationController,
                    ("apps/v1", "ReplicaSet") => WorkloadKind::ReplicaSet,
                    ("apps/v1", "StatefulSet") => WorkloadKind::StatefulSet,
                    _ => return None,
                };
                Some(SpreadController {
                    kind,
                    name: o.name.clone(),
                })
            });
        PodSpreadInfo {
            constraints,
            controller,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::PodInfo;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn raw(key: &str, when: &str) -> k8s::TopologySpreadConstraint {
        k8s::TopologySpreadConstraint {
            max_skew: 2,
            topology_key: key.into(),
            when_unsatisfiable: when.into(),
            label_selector: Some(meta::LabelSelector {
                match_labels: Some(labels(&[("app", "web")])),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn defaults_for_unset_fields() {
        let c = SpreadConstraint::compile(&raw("zone", "DoNotSchedule"), None);
        assert_eq!(c.min_domains, 1);
        assert_eq!(c.node_affinity_policy, NodeInclusionPolicy::Honor);
        assert_eq!(c.node_taints_policy, NodeInclusionPolicy::Ignore);
        assert_eq!(c.when_unsatisfiable, WhenUnsatisfiable::DoNotSchedule);
        assert!(c.selector_error.is_none());
        let mut r = raw("zone", "Whatever");
        r.min_domains = Some(3);
        r.node_affinity_policy = Some("Ignore".into());
        r.node_taints_policy = Some("Honor".into());
        let c = SpreadConstraint::compile(&r, None);
        assert_eq!(c.min_domains, 3);
        assert_eq!(c.node_affinity_policy, NodeInclusionPolicy::Ignore);
        assert_eq!(c.node_taints_policy, NodeInclusionPolicy::Honor);
        assert_eq!(c.when_unsatisfiable, WhenUnsatisfiable::Unknown);
    }

    #[test]
    fn match_label_keys_narrow_the_selector_to_the_pods_values() {
        let mut r = raw("zone", "DoNotSchedule");
        r.match_label_keys = Some(vec!["pod-template-hash".into(), "absent".into()]);
        let pod_labels = labels(&[("app", "web"), ("pod-template-hash", "v1")]);
        let c = SpreadConstraint::compile(&r, Some(&pod_labels));
        assert!(c.selector.matches(&pod_labels));
        assert!(
            !c.selector
                .matches(&labels(&[("app", "web"), ("pod-template-hash", "v2")]))
        );
        assert!(!c.selector.matches(&labels(&[("app", "web")])));
        // A missing selector still selects nothing.
        r.label_selector = None;
        let c = SpreadConstraint::compile(&r, Some(&pod_labels));
        assert!(!c.selector.matches(&pod_labels));
    }

    #[test]
    fn pod_view_compiles_constraints_and_controller() {
        let bad = k8s::TopologySpreadConstraint {
            label_selector: Some(meta::LabelSelector {
                match_expressions: Some(vec![meta::LabelSelectorRequirement {
                    key: "a".into(),
                    operator: "In".into(),
                    values: Some(vec![]),
                }]),
                ..Default::default()
            }),
            ..raw("zone", "ScheduleAnyway")
        };
        let pod = PodInfo::test("ns", "p")
            .label("app", "web")
            .edit(|p| {
                p.spec.as_mut().unwrap().topology_spread_constraints =
                    Some(vec![raw("zone", "DoNotSchedule"), bad]);
                p.metadata.owner_references = Some(vec![
                    meta::OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: "ReplicaSet".into(),
                        name: "not-controller".into(),
                        ..Default::default()
                    },
                    meta::OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: "StatefulSet".into(),
                        name: "db".into(),
                        controller: Some(true),
                        ..Default::default()
                    },
                ]);
            })
            .build();
        assert_eq!(pod.spread.constraints.len(), 2);
        assert!(pod.spread.constraints[1].selector_error.is_some());
        assert!(
            pod.problems
                .iter()
                .any(|p| p.starts_with("topologySpreadConstraints[1].labelSelector")),
            "{:?}",
            pod.problems
        );
        assert_eq!(
            pod.spread.controller,
            Some(SpreadController {
                kind: WorkloadKind::StatefulSet,
                name: "db".into()
            })
        );
        let job_owned = PodInfo::test("ns", "j")
            .edit(|p| {
                p.metadata.owner_references = Some(vec![meta::OwnerReference {
                    api_version: "batch/v1".into(),
                    kind: "Job".into(),
                    name: "j".into(),
                    controller: Some(true),
                    ..Default::default()
                }]);
            })
            .build();
        assert_eq!(job_owned.spread.controller, None);
    }
}
