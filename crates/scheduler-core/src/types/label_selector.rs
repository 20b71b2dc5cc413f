//! `metav1.LabelSelector` compiled once (pod affinity terms, topology spread constraints,
//! PodDisruptionBudgets, namespace selectors).
//!
//! Upstream semantics (`LabelSelectorAsSelector`): a missing selector selects nothing, an
//! empty one selects everything; matchLabels and matchExpressions are ANDed. An invalid
//! selector selects nothing and records why.

#[cfg(test)]
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

use super::labels::LabelSet;
use super::node_selector::{LabelOperator, LabelRequirement};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelSelector {
    /// Selects nothing (selector absent or invalid).
    Nothing,
    /// All requirements must hold; an empty list selects everything.
    Requirements(Vec<LabelRequirement>),
}

impl LabelSelector {
    pub fn everything() -> Self {
        LabelSelector::Requirements(Vec::new())
    }

    /// Compiles an optional API selector; `None` selects nothing, as upstream.
    pub fn from_k8s(sel: Option<&meta::LabelSelector>) -> Result<Self, String> {
        let Some(sel) = sel else {
            return Ok(LabelSelector::Nothing);
        };
        let mut reqs = Vec::new();
        for (k, v) in sel.match_labels.iter().flatten() {
            reqs.push(LabelRequirement {
                key: k.clone(),
                op: LabelOperator::In(vec![v.clone()]),
            });
        }
        for e in sel.match_expressions.iter().flatten() {
            let values = e.values.clone().unwrap_or_default();
            let op = match e.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(format!(
                        "key {:?}: for 'in', 'notin' operators, values set can't be empty",
                        e.key
                    ));
                }
                "In" => LabelOperator::In(values),
                "NotIn" => LabelOperator::NotIn(values),
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err(format!(
                        "key {:?}: values set must be empty for exists and does not exist",
                        e.key
                    ));
                }
                "Exists" => LabelOperator::Exists,
                "DoesNotExist" => LabelOperator::DoesNotExist,
                other => {
                    return Err(format!(
                        "key {:?}: {other:?} is not a valid label selector operator",
                        e.key
                    ));
                }
            };
            reqs.push(LabelRequirement {
                key: e.key.clone(),
                op,
            });
        }
        Ok(LabelSelector::Requirements(reqs))
    }

    /// Like [`from_k8s`](Self::from_k8s) but never fails: an invalid selector selects
    /// nothing and the reason is pushed to `problems`.
    pub fn compile(sel: Option<&meta::LabelSelector>, problems: &mut Vec<String>) -> Self {
        Self::from_k8s(sel).unwrap_or_else(|e| {
            problems.push(format!("invalid label selector: {e}"));
            LabelSelector::Nothing
        })
    }

    /// Adds `key in (value)` (matchLabelKeys) or `key notin (value)` (mismatchLabelKeys).
    pub fn add_requirement(&mut self, key: &str, value: &str, equal: bool) {
        if let LabelSelector::Requirements(reqs) = self {
            let vals = vec![value.to_string()];
            let op = if equal {
                LabelOperator::In(vals)
            } else {
                LabelOperator::NotIn(vals)
            };
            reqs.push(LabelRequirement {
                key: key.to_string(),
                op,
            });
        }
    }

    pub fn matches<L: LabelSet + ?Sized>(&self, labels: &L) -> bool {
        match self {
            LabelSelector::Nothing => false,
            LabelSelector::Requirements(reqs) => reqs.iter().all(|r| r.matches(labels)),
        }
    }

    pub fn is_nothing(&self) -> bool {
        matches!(self, LabelSelector::Nothing)
    }

    pub fn is_everything(&self) -> bool {
        matches!(self, LabelSelector::Requirements(r) if r.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> meta::LabelSelectorRequirement {
        meta::LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn missing_selects_nothing_and_empty_selects_everything() {
        let l = labels(&[("app", "web")]);
        assert!(!LabelSelector::from_k8s(None).unwrap().matches(&l));
        assert!(
            LabelSelector::from_k8s(Some(&meta::LabelSelector::default()))
                .unwrap()
                .matches(&l)
        );
        assert!(
            LabelSelector::from_k8s(Some(&meta::LabelSelector::default()))
                .unwrap()
                .matches(&labels(&[]))
        );
    }

    #[test]
    fn match_labels_and_expressions_are_anded() {
        let sel = meta::LabelSelector {
            match_labels: Some([("app".to_string(), "web".to_string())].into()),
            match_expressions: Some(vec![
                expr("tier", "In", &["front", "edge"]),
                expr("canary", "DoesNotExist", &[]),
                expr("zone", "NotIn", &["z9"]),
                expr("team", "Exists", &[]),
            ]),
        };
        let s = LabelSelector::from_k8s(Some(&sel)).unwrap();
        assert!(s.matches(&labels(&[("app", "web"), ("tier", "edge"), ("team", "a")])));
        assert!(
            !s.matches(&labels(&[("app", "web"), ("tier", "edge")])),
            "team must exist"
        );
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "back"), ("team", "a")])));
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("tier", "edge"),
            ("team", "a"),
            ("canary", "")
        ])));
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("tier", "edge"),
            ("team", "a"),
            ("zone", "z9")
        ])));
        assert!(!s.matches(&labels(&[("app", "db"), ("tier", "edge"), ("team", "a")])));
    }

    #[test]
    fn invalid_selectors_select_nothing_and_say_why() {
        let bad = meta::LabelSelector {
            match_expressions: Some(vec![expr("a", "In", &[])]),
            ..Default::default()
        };
        let mut problems = Vec::new();
        let s = LabelSelector::compile(Some(&bad), &mut problems);
        assert!(s.is_nothing());
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].contains("values set can't be empty"),
            "{problems:?}"
        );
        let bad_op = meta::LabelSelector {
            match_expressions: Some(vec![expr("a", "Gt", &["1"])]),
            ..Default::default()
        };
        assert!(LabelSelector::from_k8s(Some(&bad_op)).is_err());
    }

    #[test]
    fn match_label_keys_add_requirements() {
        let mut s = LabelSelector::everything();
        s.add_requirement("pod-template-hash", "abc", true);
        s.add_requirement("tenant", "x", false);
        assert!(s.matches(&labels(&[("pod-template-hash", "abc"), ("tenant", "y")])));
        assert!(!s.matches(&labels(&[("pod-template-hash", "abd")])));
        assert!(!s.matches(&labels(&[("pod-template-hash", "abc"), ("tenant", "x")])));
    }
}
