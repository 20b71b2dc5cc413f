//! The scheduling view of a PodDisruptionBudget: which pods it covers and how many more of
//! them may be disrupted. Preemption prefers victims whose eviction keeps every budget.

use std::collections::BTreeSet;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use super::label_selector::LabelSelector;
use super::pod::PodInfo;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PdbInfo {
    pub namespace: String,
    pub name: String,
    /// Compiled `spec.selector`. A missing, empty or invalid selector covers no pod (unlike
    /// pod affinity, where an empty selector means every pod).
    pub selector: LabelSelector,
    /// `status.disruptionsAllowed`.
    pub disruptions_allowed: i32,
    /// Names in `status.disruptedPods`: evictions the API server already counted.
    pub disrupted_pods: BTreeSet<String>,
    /// Malformed input found while converting.
    pub problems: Vec<String>,
}

impl PdbInfo {
    pub fn from_pdb(pdb: &PodDisruptionBudget) -> Self {
        let mut problems = Vec::new();
        let raw = pdb.spec.as_ref().and_then(|s| s.selector.as_ref());
        let selector = match LabelSelector::compile(raw, &mut problems) {
            // Upstream skips budgets whose selector has no requirements at all.
            s if s.is_everything() => LabelSelector::Nothing,
            s => s,
        };
        let status = pdb.status.as_ref();
        PdbInfo {
            namespace: pdb.metadata.namespace.clone().unwrap_or_default(),
            name: pdb.metadata.name.clone().unwrap_or_default(),
            selector,
            disruptions_allowed: status.and_then(|s| s.disruptions_allowed).unwrap_or(0),
            disrupted_pods: status
                .and_then(|s| s.disrupted_pods.as_ref())
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default(),
            problems,
        }
    }

    /// `(namespace, name)`, the budget's identity.
    pub fn key(&self) -> (&str, &str) {
        (&self.namespace, &self.name)
    }

    /// Whether evicting `pod` spends this budget: same namespace, the selector matches the
    /// pod's labels (a pod without labels is never covered) and the API server has not
    /// already recorded the pod as disrupted.
    pub fn covers(&self, pod: &PodInfo) -> bool {
        self.namespace == pod.namespace()
            && covers_labels(&self.selector, &pod.labels)
            && !self.disrupted_pods.contains(pod.name())
    }
}

fn covers_labels(selector: &LabelSelector, labels: &super::labels::Labels) -> bool {
    !labels.is_empty() && selector.matches(labels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::policy::v1::{PodDisruptionBudgetSpec, PodDisruptionBudgetStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

    fn pdb(
        ns: &str,
        selector: Option<meta::LabelSelector>,
        allowed: i32,
        disrupted: &[&str],
    ) -> PodDisruptionBudget {
        PodDisruptionBudget {
            metadata: meta::ObjectMeta {
                namespace: Some(ns.into()),
                name: Some("budget".into()),
                ..Default::default()
            },
            spec: Some(PodDisruptionBudgetSpec {
                selector,
                ..Default::default()
            }),
            status: Some(PodDisruptionBudgetStatus {
                disruptions_allowed: Some(allowed),
                disrupted_pods: Some(
                    disrupted
                        .iter()
                        .map(|n| {
                            (
                                n.to_string(),
                                meta::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
                            )
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
        }
    }

    fn app(v: &str) -> Option<meta::LabelSelector> {
        Some(meta::LabelSelector {
            match_labels: Some([("app".to_string(), v.to_string())].into()),
            ..Default::default()
        })
    }

    #[test]
    fn covers_matching_pods_in_its_namespace_only() {
        let info = PdbInfo::from_pdb(&pdb("shop", app("web"), 1, &[]));
        assert_eq!(info.key(), ("shop", "budget"));
        assert_eq!(info.disruptions_allowed, 1);
        let web = PodInfo::test("shop", "w1").label("app", "web").build();
        assert!(info.covers(&web));
        let elsewhere = PodInfo::test("other", "w1").label("app", "web").build();
        assert!(!info.covers(&elsewhere));
        let db = PodInfo::test("shop", "d1").label("app", "db").build();
        assert!(!info.covers(&db));
    }

    #[test]
    fn empty_missing_and_invalid_selectors_cover_nothing() {
        let pod = PodInfo::test("ns", "p").label("app", "web").build();
        let empty = PdbInfo::from_pdb(&pdb("ns", Some(meta::LabelSelector::default()), 0, &[]));
        assert!(!empty.covers(&pod));
        assert!(!PdbInfo::from_pdb(&pdb("ns", None, 0, &[])).covers(&pod));
        let invalid = PdbInfo::from_pdb(&pdb(
            "ns",
            Some(meta::LabelSelector {
                match_expressions: Some(vec![meta::LabelSelectorRequirement {
                    key: "app".into(),
                    operator: "In".into(),
                    values: None,
                }]),
                ..Default::default()
            }),
            0,
            &[],
        ));
        assert!(!invalid.covers(&pod));
        assert_eq!(invalid.problems.len(), 1);
    }

    #[test]
    fn unlabelled_and_already_disrupted_pods_are_not_covered() {
        let not_app = Some(meta::LabelSelector {
            match_expressions: Some(vec![meta::LabelSelectorRequirement {
                key: "app".into(),
                operator: "DoesNotExist".into(),
                values: None,
            }]),
            ..Default::default()
        });
        let info = PdbInfo::from_pdb(&pdb("ns", not_app, 0, &[]));
        assert!(!info.covers(&PodInfo::test("ns", "bare").build()));
        assert!(info.covers(&PodInfo::test("ns", "x").label("tier", "a").build()));

        let info = PdbInfo::from_pdb(&pdb("ns", app("web"), 0, &["gone"]));
        assert!(!info.covers(&PodInfo::test("ns", "gone").label("app", "web").build()));
        assert!(info.covers(&PodInfo::test("ns", "kept").label("app", "web").build()));
    }
}
