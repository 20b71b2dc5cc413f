//! Node selectors compiled once from the API types, matched per node.
//!
//! Semantics follow upstream `nodeaffinity` (lazy-error selector): terms are ORed, a term's
//! label and field requirements are ANDed, a term without requirements matches nothing, and a
//! term that failed to compile matches nothing while the other terms still count.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as k8s;

use super::labels::LabelSet;
use crate::k8s_names::{is_label_value, is_qualified_name};

/// The only field a node selector may use.
pub const FIELD_METADATA_NAME: &str = "metadata.name";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelOperator {
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    Gt(i64),
    Lt(i64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelRequirement {
    pub key: String,
    pub op: LabelOperator,
}

impl LabelRequirement {
    pub fn matches<L: LabelSet + ?Sized>(&self, labels: &L) -> bool {
        let value = labels.label(&self.key);
        match &self.op {
            LabelOperator::In(vals) => value.is_some_and(|v| vals.iter().any(|x| x == v)),
            LabelOperator::NotIn(vals) => value.is_none_or(|v| !vals.iter().any(|x| x == v)),
            LabelOperator::Exists => value.is_some(),
            LabelOperator::DoesNotExist => value.is_none(),
            LabelOperator::Gt(n) => value
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            LabelOperator::Lt(n) => value
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        }
    }
}

/// `metadata.name` equal (In) or not equal (NotIn) to `value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    pub equal: bool,
    pub value: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeSelectorTerm {
    pub labels: Vec<LabelRequirement>,
    pub fields: Vec<FieldRequirement>,
    /// Compile errors; a term with any never matches.
    pub errors: Vec<String>,
}

impl NodeSelectorTerm {
    pub fn from_k8s(term: &k8s::NodeSelectorTerm) -> Self {
        let mut t = NodeSelectorTerm::default();
        for (i, req) in term.match_expressions.iter().flatten().enumerate() {
            match compile_label_requirement(req) {
                Ok(r) => t.labels.push(r),
                Err(e) => t.errors.push(format!("matchExpressions[{i}]: {e}")),
            }
        }
        for (i, req) in term.match_fields.iter().flatten().enumerate() {
            match compile_field_requirement(req) {
                Ok(r) => t.fields.push(r),
                Err(e) => t.errors.push(format!("matchFields[{i}]: {e}")),
            }
        }
        t
    }

    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }

    pub fn matches<L: LabelSet + ?Sized>(&self, node_name: &str, labels: &L) -> bool {
        if !self.errors.is_empty() || (self.labels.is_empty() && self.fields.is_empty()) {
            return false;
        }
        self.labels.iter().all(|r| r.matches(labels))
            && self
                .fields
                .iter()
                .all(|f| (f.value == node_name) == f.equal)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeSelector {
    pub terms: Vec<NodeSelectorTerm>,
}

impl NodeSelector {
    pub fn from_k8s(sel: &k8s::NodeSelector) -> Self {
        NodeSelector {
            terms: sel
                .node_selector_terms
                .iter()
                .map(NodeSelectorTerm::from_k8s)
                .collect(),
        }
    }

    /// Compile errors of every term, prefixed with the term index.
    pub fn problems(&self) -> Vec<String> {
        self.terms
            .iter()
            .enumerate()
            .flat_map(|(i, t)| {
                t.errors
                    .iter()
                    .map(move |e| format!("nodeSelectorTerms[{i}].{e}"))
            })
            .collect()
    }

    pub fn matches(&self, node_name: &str, labels: &BTreeMap<String, String>) -> bool {
        self.matches_labels(node_name, labels)
    }

    /// [`Self::matches`] for any label set (the views' [`super::labels::Labels`]).
    pub fn matches_labels<L: LabelSet + ?Sized>(&self, node_name: &str, labels: &L) -> bool {
        self.terms.iter().any(|t| t.matches(node_name, labels))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreferredSchedulingTerm {
    pub weight: i32,
    pub term: NodeSelectorTerm,
}

fn compile_label_requirement(
    req: &k8s::NodeSelectorRequirement,
) -> Result<LabelRequirement, String> {
    let values = req.values.clone().unwrap_or_default();
    let mut errs = Vec::new();
    if !is_qualified_name(&req.key) {
        errs.push(format!("invalid label key {:?}", req.key));
    }
    let op = match req.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => {
            errs.push("values must be non-empty for In and NotIn".to_string());
            None
        }
        "In" => Some(LabelOperator::In(values.clone())),
        "NotIn" => Some(LabelOperator::NotIn(values.clone())),
        "Exists" | "DoesNotExist" if !values.is_empty() => {
            errs.push("values must be empty for Exists and DoesNotExist".to_string());
            None
        }
        "Exists" => Some(LabelOperator::Exists),
        "DoesNotExist" => Some(LabelOperator::DoesNotExist),
        op @ ("Gt" | "Lt") => match values.as_slice() {
            [v] => match v.parse::<i64>() {
                Ok(n) if op == "Gt" => Some(LabelOperator::Gt(n)),
                Ok(n) => Some(LabelOperator::Lt(n)),
                Err(_) => {
                    errs.push(format!("value {v:?} must be an integer for Gt and Lt"));
                    None
                }
            },
            _ => {
                errs.push("exactly one value is required for Gt and Lt".to_string());
                None
            }
        },
        other => {
            errs.push(format!("{other:?} is not a valid label selector operator"));
            None
        }
    };
    for v in &values {
        if !is_label_value(v) {
            errs.push(format!("invalid label value {v:?}"));
        }
    }
    match op {
        Some(op) if errs.is_empty() => Ok(LabelRequirement {
            key: req.key.clone(),
            op,
        }),
        _ => Err(errs.join("; ")),
    }
}

fn compile_field_requirement(
    req: &k8s::NodeSelectorRequirement,
) -> Result<FieldRequirement, String> {
    if req.key != FIELD_METADATA_NAME {
        return Err(format!(
            "unsupported field {:?}, only {FIELD_METADATA_NAME} is",
            req.key
        ));
    }
    let equal = match req.operator.as_str() {
        "In" => true,
        "NotIn" => false,
        other => return Err(format!("unsupported field selector operator {other:?}")),
    };
    match req.values.as_deref() {
        Some([v]) => Ok(FieldRequirement {
            equal,
            value: v.clone(),
        }),
        _ => Err("field selector values must have exactly one element".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: &str, op: &str, values: &[&str]) -> k8s::NodeSelectorRequirement {
        k8s::NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: if values.is_empty() {
                None
            } else {
                Some(values.iter().map(|v| v.to_string()).collect())
            },
        }
    }

    fn term(
        exprs: Vec<k8s::NodeSelectorRequirement>,
        fields: Vec<k8s::NodeSelectorRequirement>,
    ) -> k8s::NodeSelectorTerm {
        k8s::NodeSelectorTerm {
            match_expressions: if exprs.is_empty() { None } else { Some(exprs) },
            match_fields: if fields.is_empty() {
                None
            } else {
                Some(fields)
            },
        }
    }

    fn labels(items: &[(&str, &str)]) -> BTreeMap<String, String> {
        items
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn sel(terms: Vec<k8s::NodeSelectorTerm>) -> NodeSelector {
        NodeSelector::from_k8s(&k8s::NodeSelector {
            node_selector_terms: terms,
        })
    }

    #[test]
    fn operators() {
        let l = labels(&[("zone", "a"), ("gen", "5"), ("weird", "x5")]);
        let cases: Vec<(&str, k8s::NodeSelectorRequirement, bool)> = vec![
            ("in hit", req("zone", "In", &["a", "b"]), true),
            ("in miss", req("zone", "In", &["b"]), false),
            ("in absent key", req("nope", "In", &["a"]), false),
            ("notin hit", req("zone", "NotIn", &["b"]), true),
            ("notin miss", req("zone", "NotIn", &["a"]), false),
            ("notin absent key", req("nope", "NotIn", &["a"]), true),
            ("exists", req("zone", "Exists", &[]), true),
            ("exists absent", req("nope", "Exists", &[]), false),
            ("doesnotexist", req("nope", "DoesNotExist", &[]), true),
            (
                "doesnotexist present",
                req("zone", "DoesNotExist", &[]),
                false,
            ),
            ("gt true", req("gen", "Gt", &["4"]), true),
            ("gt equal", req("gen", "Gt", &["5"]), false),
            ("lt true", req("gen", "Lt", &["6"]), true),
            ("lt false", req("gen", "Lt", &["5"]), false),
            ("gt absent", req("nope", "Gt", &["1"]), false),
            (
                "gt unparsable label value",
                req("weird", "Gt", &["1"]),
                false,
            ),
            (
                "gt non-integer operand is invalid",
                req("gen", "Gt", &["1.5"]),
                false,
            ),
            (
                "gt two values invalid",
                req("gen", "Gt", &["1", "2"]),
                false,
            ),
            ("bad operator", req("zone", "Equals", &["a"]), false),
            ("in without values invalid", req("zone", "In", &[]), false),
            (
                "exists with values invalid",
                req("zone", "Exists", &["a"]),
                false,
            ),
            ("invalid key", req("bad key", "Exists", &[]), false),
        ];
        for (name, r, want) in cases {
            let s = sel(vec![term(vec![r], vec![])]);
            assert_eq!(s.matches("n1", &l), want, "{name}");
        }
    }

    #[test]
    fn invalid_requirements_are_reported() {
        let s = sel(vec![
            term(vec![req("gen", "Gt", &["x"])], vec![]),
            term(vec![req("a", "Foo", &[])], vec![]),
        ]);
        assert_eq!(s.problems().len(), 2, "{:?}", s.problems());
    }

    #[test]
    fn match_fields_and_term_logic() {
        let l = labels(&[("zone", "a")]);
        let by_name =
            |op: &str, v: &str| sel(vec![term(vec![], vec![req("metadata.name", op, &[v])])]);
        assert!(by_name("In", "n1").matches("n1", &l));
        assert!(!by_name("In", "n1").matches("n2", &l));
        assert!(by_name("NotIn", "n1").matches("n2", &l));
        assert!(!by_name("NotIn", "n1").matches("n1", &l));
        // Unsupported field key or operator: term is invalid.
        assert!(
            !sel(vec![term(vec![], vec![req("metadata.uid", "In", &["n1"])])]).matches("n1", &l)
        );
        assert!(
            !sel(vec![term(
                vec![],
                vec![req("metadata.name", "Exists", &[])]
            )])
            .matches("n1", &l)
        );
        assert!(
            !sel(vec![term(
                vec![],
                vec![req("metadata.name", "In", &["n1", "n2"])]
            )])
            .matches("n1", &l)
        );
        // Expressions and fields in one term are ANDed.
        let both = sel(vec![term(
            vec![req("zone", "In", &["a"])],
            vec![req("metadata.name", "In", &["n1"])],
        )]);
        assert!(both.matches("n1", &l));
        assert!(!both.matches("n2", &l));
        // Terms are ORed; an empty term matches nothing; no terms match nothing.
        assert!(!sel(vec![term(vec![], vec![])]).matches("n1", &l));
        assert!(!sel(vec![]).matches("n1", &l));
        let or = sel(vec![
            term(vec![], vec![]),
            term(vec![req("zone", "In", &["a"])], vec![]),
        ]);
        assert!(or.matches("n1", &l));
        // A broken term does not poison a valid one (lazy-error semantics).
        let mixed = sel(vec![
            term(vec![req("zone", "Bad", &[])], vec![]),
            term(vec![req("zone", "Exists", &[])], vec![]),
        ]);
        assert!(mixed.matches("n1", &l));
    }
}
