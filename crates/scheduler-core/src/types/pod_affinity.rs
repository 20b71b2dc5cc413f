//! Pod affinity and anti-affinity terms, compiled once per pod change (upstream
//! `framework.AffinityTerm` / `WeightedAffinityTerm` built by `NewPodInfo`).
//!
//! Semantics kept from upstream:
//! - a term's namespaces are its `namespaces` list, or the pod's own namespace when the list is
//!   empty *and* there is no `namespaceSelector`;
//! - a missing `namespaceSelector` selects no namespace, an empty one selects every namespace;
//! - when any term of one list (required affinity, required anti-affinity, preferred affinity,
//!   preferred anti-affinity) fails to compile, upstream drops that whole list and refuses to
//!   schedule the pod; the view does the same and records the error in
//!   [`PodAffinityTerms::parse_error`] and the pod's `problems`.
//!
//! `matchLabelKeys` / `mismatchLabelKeys` are merged into the label selector by the API server
//! when a pod is created (not by kube-scheduler). Pods read from a cluster already carry the
//! merged requirement; for pods that never went through an API server (hand-written manifests,
//! tests) the view performs the same merge, skipping keys the selector already constrains with
//! the same operator, so an already-merged pod is never merged twice.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

use super::label_selector::LabelSelector;
use super::labels::LabelSet;
use crate::k8s_names::{is_label_value, is_qualified_name};

/// Labels of a namespace that is not known: upstream treats it as an empty label set.
static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

/// One compiled `PodAffinityTerm`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AffinityTerm {
    pub selector: LabelSelector,
    /// Explicit namespaces (deduplicated); the owning pod's namespace when neither
    /// `namespaces` nor `namespaceSelector` is set.
    pub namespaces: Vec<String>,
    /// [`LabelSelector::Nothing`] when the term has no namespace selector.
    pub namespace_selector: LabelSelector,
    pub topology_key: String,
}

impl AffinityTerm {
    /// Whether `namespace` is listed by name in the term.
    #[inline]
    pub fn lists_namespace(&self, namespace: &str) -> bool {
        self.namespaces.iter().any(|n| n == namespace)
    }

    /// Upstream `AffinityTerm.Matches`: the pod's namespace is listed or its labels
    /// (`ns_labels`, `None` for an unknown namespace) satisfy the namespace selector, and
    /// the pod's labels satisfy the term's selector. The cheap namespace test runs first.
    #[inline]
    pub fn matches<L: LabelSet + ?Sized>(
        &self,
        namespace: &str,
        labels: &L,
        ns_labels: Option<&BTreeMap<String, String>>,
    ) -> bool {
        let in_scope = self.lists_namespace(namespace)
            || (!self.namespace_selector.is_nothing()
                && self
                    .namespace_selector
                    .matches(ns_labels.unwrap_or(&NO_LABELS)));
        in_scope && self.selector.matches(labels)
    }
}

/// A preferred term with its weight (1..=100 after API validation; 0 is kept as upstream does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightedAffinityTerm {
    pub term: AffinityTerm,
    pub weight: i32,
}

/// Every pod (anti-)affinity term of a pod, compiled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodAffinityTerms {
    pub required_affinity: Vec<AffinityTerm>,
    pub required_anti_affinity: Vec<AffinityTerm>,
    pub preferred_affinity: Vec<WeightedAffinityTerm>,
    pub preferred_anti_affinity: Vec<WeightedAffinityTerm>,
    /// Why one or more lists were dropped; a pod with this set cannot be scheduled (upstream
    /// rejects it in InterPodAffinity PreFilter with "parsing pod: ...").
    pub parse_error: Option<String>,
}

impl super::rare::RareEmpty for PodAffinityTerms {
    fn empty() -> &'static Self {
        static EMPTY: PodAffinityTerms = PodAffinityTerms {
            required_affinity: Vec::new(),
            required_anti_affinity: Vec::new(),
            preferred_affinity: Vec::new(),
            preferred_anti_affinity: Vec::new(),
            parse_error: None,
        };
        &EMPTY
    }
    fn is_empty_value(&self) -> bool {
        self == Self::empty()
    }
}

impl PodAffinityTerms {
    /// Compiles the pod's `spec.affinity.podAffinity` / `podAntiAffinity`, pushing compile
    /// errors to `problems`.
    pub fn from_pod(pod: &k8s::Pod, problems: &mut Vec<String>) -> Self {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let labels = pod.metadata.labels.as_ref().unwrap_or(&NO_LABELS);
        let affinity = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
        let mut out = PodAffinityTerms::default();
        let Some(affinity) = affinity else {
            return out;
        };
        let mut errors: Vec<String> = Vec::new();
        let ctx = Ctx { namespace, labels };
        if let Some(pa) = &affinity.pod_affinity {
            out.required_affinity = ctx.required(
                pa.required_during_scheduling_ignored_during_execution
                    .as_deref(),
                "requiredAffinityTerms",
                &mut errors,
            );
            out.preferred_affinity = ctx.preferred(
                pa.preferred_during_scheduling_ignored_during_execution
                    .as_deref(),
                "preferredAffinityTerms",
                &mut errors,
            );
        }
        if let Some(paa) = &affinity.pod_anti_affinity {
            out.required_anti_affinity = ctx.required(
                paa.required_during_scheduling_ignored_during_execution
                    .as_deref(),
                "requiredAntiAffinityTerms",
                &mut errors,
            );
            out.preferred_anti_affinity = ctx.preferred(
                paa.preferred_during_scheduling_ignored_during_execution
                    .as_deref(),
                "preferredAntiAffinityTerms",
                &mut errors,
            );
        }
        if !errors.is_empty() {
            problems.extend(errors.iter().map(|e| format!("pod affinity: {e}")));
            out.parse_error = Some(errors.join(", "));
        }
        out
    }

    /// No term at all.
    pub fn is_empty(&self) -> bool {
        self.required_affinity.is_empty()
            && self.required_anti_affinity.is_empty()
            && self.preferred_affinity.is_empty()
            && self.preferred_anti_affinity.is_empty()
    }

    /// The pod has preferred affinity or anti-affinity terms (upstream `hasConstraints` in
    /// PreScore).
    pub fn has_preferred(&self) -> bool {
        !self.preferred_affinity.is_empty() || !self.preferred_anti_affinity.is_empty()
    }
}

/// What compiling a term needs to know about its pod.
struct Ctx<'a> {
    namespace: &'a str,
    labels: &'a BTreeMap<String, String>,
}

impl Ctx<'_> {
    /// All terms of one list, or none of them if any fails (upstream `GetAffinityTerms`).
    fn required(
        &self,
        terms: Option<&[k8s::PodAffinityTerm]>,
        list: &str,
        errors: &mut Vec<String>,
    ) -> Vec<AffinityTerm> {
        let mut out = Vec::new();
        for (i, t) in terms.unwrap_or_default().iter().enumerate() {
            match self.term(t) {
                Ok(c) => out.push(c),
                Err(e) => {
                    errors.push(format!("{list}[{i}]: {e}"));
                    return Vec::new();
                }
            }
        }
        out
    }

    fn preferred(
        &self,
        terms: Option<&[k8s::WeightedPodAffinityTerm]>,
        list: &str,
        errors: &mut Vec<String>,
    ) -> Vec<WeightedAffinityTerm> {
        let mut out = Vec::new();
        for (i, t) in terms.unwrap_or_default().iter().enumerate() {
            match self.term(&t.pod_affinity_term) {
                Ok(term) => out.push(WeightedAffinityTerm {
                    term,
                    weight: t.weight,
                }),
                Err(e) => {
                    errors.push(format!("{list}[{i}]: {e}"));
                    return Vec::new();
                }
            }
        }
        out
    }

    fn term(&self, t: &k8s::PodAffinityTerm) -> Result<AffinityTerm, String> {
        validate_selector(t.label_selector.as_ref()).map_err(|e| format!("labelSelector: {e}"))?;
        let mut selector = LabelSelector::from_k8s(t.label_selector.as_ref())
            .map_err(|e| format!("labelSelector: {e}"))?;
        if let Some(sel) = &t.label_selector {
            self.merge_label_keys(&mut selector, sel, t.match_label_keys.as_deref(), true);
            self.merge_label_keys(&mut selector, sel, t.mismatch_label_keys.as_deref(), false);
        }
        validate_selector(t.namespace_selector.as_ref())
            .map_err(|e| format!("namespaceSelector: {e}"))?;
        let namespace_selector = LabelSelector::from_k8s(t.namespace_selector.as_ref())
            .map_err(|e| format!("namespaceSelector: {e}"))?;
        let listed = t.namespaces.as_deref().unwrap_or_default();
        let mut namespaces: Vec<String> = Vec::with_capacity(listed.len().max(1));
        if listed.is_empty() && t.namespace_selector.is_none() {
            namespaces.push(self.namespace.to_string());
        } else {
            for n in listed {
                if !namespaces.contains(n) {
                    namespaces.push(n.clone());
                }
            }
        }
        Ok(AffinityTerm {
            selector,
            namespaces,
            namespace_selector,
            topology_key: t.topology_key.clone(),
        })
    }

    /// The API server's matchLabelKeys (`key in (value)`) / mismatchLabelKeys
    /// (`key notin (value)`) merge; keys missing from the pod's labels are ignored, and keys
    /// the selector already constrains with the same operator were merged before.
    fn merge_label_keys(
        &self,
        selector: &mut LabelSelector,
        original: &meta::LabelSelector,
        keys: Option<&[String]>,
        equal: bool,
    ) {
        let op = if equal { "In" } else { "NotIn" };
        for key in keys.unwrap_or_default() {
            let Some(value) = self.labels.get(key) else {
                continue;
            };
            let merged_before = original
                .match_expressions
                .iter()
                .flatten()
                .any(|e| e.key == *key && e.operator == op);
            if !merged_before {
                selector.add_requirement(key, value, equal);
            }
        }
    }
}

/// The key and value checks `metav1.LabelSelectorAsSelector` makes that
/// [`LabelSelector::from_k8s`] leaves out.
fn validate_selector(sel: Option<&meta::LabelSelector>) -> Result<(), String> {
    let Some(sel) = sel else { return Ok(()) };
    for (k, v) in sel.match_labels.iter().flatten() {
        if !is_qualified_name(k) {
            return Err(format!("key {k:?}: invalid label key"));
        }
        if !is_label_value(v) {
            return Err(format!("key {k:?}: invalid label value {v:?}"));
        }
    }
    for e in sel.match_expressions.iter().flatten() {
        if !is_qualified_name(&e.key) {
            return Err(format!("key {:?}: invalid label key", e.key));
        }
        if let Some(bad) = e.values.iter().flatten().find(|v| !is_label_value(v)) {
            return Err(format!("key {:?}: invalid label value {bad:?}", e.key));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::PodInfo;

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn sel(kv: &[(&str, &str)]) -> meta::LabelSelector {
        meta::LabelSelector {
            match_labels: Some(labels(kv)),
            match_expressions: None,
        }
    }

    fn required(term: k8s::PodAffinityTerm) -> k8s::Affinity {
        k8s::Affinity {
            pod_affinity: Some(k8s::PodAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![term]),
                preferred_during_scheduling_ignored_during_execution: None,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn default_namespace_is_the_pods_own_unless_a_selector_is_set() {
        let t = k8s::PodAffinityTerm {
            label_selector: Some(sel(&[("app", "db")])),
            topology_key: "zone".into(),
            ..Default::default()
        };
        let p = PodInfo::test("team-a", "p")
            .affinity(required(t.clone()))
            .build();
        let term = &p.affinity_terms.required_affinity[0];
        assert_eq!(term.namespaces, vec!["team-a".to_string()]);
        assert!(term.namespace_selector.is_nothing());
        assert!(term.matches("team-a", &labels(&[("app", "db")]), None));
        assert!(!term.matches("team-b", &labels(&[("app", "db")]), None));

        let with_selector = k8s::PodAffinityTerm {
            namespace_selector: Some(meta::LabelSelector::default()),
            ..t
        };
        let p = PodInfo::test("team-a", "p")
            .affinity(required(with_selector))
            .build();
        let term = &p.affinity_terms.required_affinity[0];
        assert!(term.namespaces.is_empty());
        assert!(
            term.matches("anything", &labels(&[("app", "db")]), None),
            "an empty namespace selector selects every namespace"
        );
    }

    #[test]
    fn one_bad_term_drops_its_whole_list_and_is_reported() {
        let good = k8s::PodAffinityTerm {
            label_selector: Some(sel(&[("app", "db")])),
            topology_key: "zone".into(),
            ..Default::default()
        };
        let bad = k8s::PodAffinityTerm {
            label_selector: Some(meta::LabelSelector {
                match_expressions: Some(vec![meta::LabelSelectorRequirement {
                    key: "app".into(),
                    operator: "In".into(),
                    values: None,
                }]),
                ..Default::default()
            }),
            topology_key: "zone".into(),
            ..Default::default()
        };
        let aff = k8s::Affinity {
            pod_anti_affinity: Some(k8s::PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![good.clone(), bad]),
                preferred_during_scheduling_ignored_during_execution: Some(vec![
                    k8s::WeightedPodAffinityTerm {
                        weight: 5,
                        pod_affinity_term: good,
                    },
                ]),
            }),
            ..Default::default()
        };
        let p = PodInfo::test("ns", "p").affinity(aff).build();
        assert!(p.affinity_terms.required_anti_affinity.is_empty());
        assert_eq!(p.affinity_terms.preferred_anti_affinity.len(), 1);
        let err = p.affinity_terms.parse_error.as_deref().unwrap();
        assert!(err.starts_with("requiredAntiAffinityTerms[1]"), "{err}");
        assert!(
            p.problems.iter().any(|e| e.contains("values set")),
            "{:?}",
            p.problems
        );

        let bad_key = k8s::PodAffinityTerm {
            label_selector: Some(sel(&[("not a key", "x")])),
            ..Default::default()
        };
        let p = PodInfo::test("ns", "p").affinity(required(bad_key)).build();
        assert!(p.affinity_terms.parse_error.is_some());
    }

    #[test]
    fn match_label_keys_are_merged_once() {
        let t = k8s::PodAffinityTerm {
            label_selector: Some(sel(&[("app", "web")])),
            match_label_keys: Some(vec!["rev".into(), "absent".into()]),
            mismatch_label_keys: Some(vec!["tenant".into()]),
            topology_key: "zone".into(),
            ..Default::default()
        };
        let p = PodInfo::test("ns", "p")
            .label("rev", "r1")
            .label("tenant", "t1")
            .affinity(required(t.clone()))
            .build();
        let term = &p.affinity_terms.required_affinity[0];
        let m = |kv: &[(&str, &str)]| term.matches("ns", &labels(kv), None);
        assert!(m(&[("app", "web"), ("rev", "r1"), ("tenant", "t2")]));
        assert!(!m(&[("app", "web"), ("rev", "r2"), ("tenant", "t2")]));
        assert!(!m(&[("app", "web"), ("rev", "r1"), ("tenant", "t1")]));
        // "absent" is not a label of the pod: no requirement is added for it.
        assert!(m(&[("app", "web"), ("rev", "r1")]));

        // A pod the API server already merged (and whose label changed later) keeps the
        // requirement it was created with.
        let mut merged = t;
        merged.label_selector.as_mut().unwrap().match_expressions =
            Some(vec![meta::LabelSelectorRequirement {
                key: "rev".into(),
                operator: "In".into(),
                values: Some(vec!["r0".into()]),
            }]);
        let p = PodInfo::test("ns", "p")
            .label("rev", "r1")
            .affinity(required(merged))
            .build();
        let term = &p.affinity_terms.required_affinity[0];
        assert!(term.matches("ns", &labels(&[("app", "web"), ("rev", "r0")]), None));
        assert!(!term.matches("ns", &labels(&[("app", "web"), ("rev", "r1")]), None));
    }

    #[test]
    fn nil_label_selector_selects_nothing_even_with_match_label_keys() {
        let t = k8s::PodAffinityTerm {
            match_label_keys: Some(vec!["rev".into()]),
            topology_key: "zone".into(),
            ..Default::default()
        };
        let p = PodInfo::test("ns", "p")
            .label("rev", "1")
            .affinity(required(t))
            .build();
        let term = &p.affinity_terms.required_affinity[0];
        assert!(!term.matches("ns", &labels(&[("rev", "1")]), None));
    }
}
