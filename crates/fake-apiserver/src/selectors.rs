//! Field and label selectors, and the [`Filter`] a LIST or WATCH asks for (namespace plus
//! both selectors), evaluated against an object's JSON.

use serde_json::Value;

/// A field selector of `path=value` / `path!=value` terms joined by commas (dotted paths
/// such as `status.phase`; a missing field reads as "").
#[derive(Clone, Debug, Default)]
pub(crate) struct FieldSelector(Vec<(Vec<String>, bool, String)>);

impl FieldSelector {
    pub(crate) fn parse(s: Option<&String>) -> Self {
        let terms = s
            .map(|s| s.split(',').filter(|t| !t.is_empty()).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .map(|t| {
                let (path, eq, value) = match t.split_once("!=") {
                    Some((p, v)) => (p, false, v),
                    None => {
                        let (p, v) = t.split_once('=').expect("field selector term");
                        (p.trim_end_matches('='), true, v)
                    }
                };
                let path = path.split('.').map(str::to_string).collect();
                (path, eq, value.to_string())
            })
            .collect();
        FieldSelector(terms)
    }

    pub(crate) fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, eq, value)| {
            let field = path
                .iter()
                .try_fold(obj, |v, k| v.get(k))
                .and_then(Value::as_str)
                .unwrap_or("");
            (field == value) == *eq
        })
    }
}

/// One term of a label selector.
#[derive(Clone, Debug)]
enum LabelTerm {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
}

/// A label selector of `k=v`, `k==v`, `k!=v`, `k`, `!k` terms joined by commas (no set
/// expressions: nothing here sends them).
#[derive(Clone, Debug, Default)]
pub(crate) struct LabelSelector(Vec<LabelTerm>);

impl LabelSelector {
    pub(crate) fn parse(s: Option<&String>) -> Self {
        let terms = s
            .map(|s| s.split(',').filter(|t| !t.is_empty()).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .map(|t| {
                if let Some((k, v)) = t.split_once("!=") {
                    LabelTerm::NotEquals(k.to_string(), v.to_string())
                } else if let Some((k, v)) = t.split_once('=') {
                    LabelTerm::Equals(k.to_string(), v.trim_start_matches('=').to_string())
                } else if let Some(k) = t.strip_prefix('!') {
                    LabelTerm::NotExists(k.to_string())
                } else {
                    LabelTerm::Exists(t.to_string())
                }
            })
            .collect();
        LabelSelector(terms)
    }

    pub(crate) fn matches(&self, obj: &Value) -> bool {
        let labels = &obj["metadata"]["labels"];
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|t| match t {
            LabelTerm::Equals(k, v) => get(k) == Some(v.as_str()),
            LabelTerm::NotEquals(k, v) => get(k) != Some(v.as_str()),
            LabelTerm::Exists(k) => get(k).is_some(),
            LabelTerm::NotExists(k) => get(k).is_none(),
        })
    }
}

/// What a watcher or lister asked for: namespace, field and label selectors.
#[derive(Clone, Debug, Default)]
pub(crate) struct Filter {
    pub(crate) namespace: Option<String>,
    pub(crate) fields: FieldSelector,
    pub(crate) labels: LabelSelector,
}

impl Filter {
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| obj["metadata"]["namespace"].as_str() == Some(ns))
            && self.fields.matches(obj)
            && self.labels.matches(obj)
    }
}
