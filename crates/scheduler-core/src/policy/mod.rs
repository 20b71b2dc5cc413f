//! SchedulingPolicy: an admin policy over the scheduling fields of pods
//! (`schedulerName`, `priorityClassName`, `nodeSelector`, `tolerations`, `affinity`), after
//! the upstream "Scheduling Policy" design proposal, in ferrosched's own API group
//! [`API_VERSION`].
//!
//! Pure code only: the types ([`SchedulingPolicy`]), their validation ([`validate`]),
//! the merge of every policy a pod's service account may `use` ([`merge`], the proposal's
//! Option 1), the evaluation of a pod against the merged policy ([`evaluate`], returning
//! every violation) and the defaulting it implies ([`apply_defaults`], as JSON-patch
//! operations). Which policies a service account may use (RBAC `use` verb) is an input: a
//! list of policy names. See `docs/scheduling-policy.md`.

mod defaulting;
#[cfg(test)]
mod defaulting_tests;
mod eval;
mod merge;
#[cfg(test)]
mod tests;
mod validate;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

pub use defaulting::{
    Admission, Defaulted, GlobalDefaultClass, PatchOp, ServerSet, admit, admit_after,
    apply_defaults, apply_defaults_after, expand_default_tolerations,
};
pub use eval::{PodFields, TolerationView, Verdict, evaluate};
pub use merge::{MergeStrategy, effective_policy, merge, merge_with};
pub use validate::validate;

/// The API group of the SchedulingPolicy custom resource.
pub const GROUP: &str = "scheduling.ferrosched.io";
/// `apiVersion` of a SchedulingPolicy.
pub const API_VERSION: &str = "scheduling.ferrosched.io/v1alpha1";
pub const KIND: &str = "SchedulingPolicy";
/// What an unset `spec.schedulerName` means (the API server's default).
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// A cluster-scoped SchedulingPolicy object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SchedulingPolicy {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: PolicySpec,
}

impl SchedulingPolicy {
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }
}

/// `spec`: three sections, each optional; an absent section is the same as an empty one.
/// A field absent from every section allows nothing (deny-all-but).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicySpec {
    #[serde(default, skip_serializing_if = "Required::is_empty")]
    pub required: Required,
    #[serde(default, skip_serializing_if = "Allowed::is_empty")]
    pub allowed: Allowed,
    #[serde(
        rename = "default",
        default,
        skip_serializing_if = "Defaults::is_empty"
    )]
    pub defaults: Defaults,
}

/// `spec.required`: what pods must use. Whatever is required is also allowed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Required {
    /// The pod's scheduler must be one of these. Never empty.
    #[serde(
        default,
        alias = "SchedulerNames",
        skip_serializing_if = "Option::is_none"
    )]
    pub scheduler_names: Option<Vec<String>>,
    /// The pod's priority class must be one of these. Never empty. The proposal's spelling
    /// `priorityClasseNames` is accepted.
    #[serde(
        default,
        alias = "priorityClasseNames",
        skip_serializing_if = "Option::is_none"
    )]
    pub priority_class_names: Option<Vec<String>>,
    /// Each key must be in the pod's nodeSelector with one of the values (`[]`: any value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selectors: Option<BTreeMap<String, Vec<String>>>,
    /// Affinities the pod must have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinities: Option<AffinityRules>,
}

impl Required {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// `spec.allowed`: what pods may use. `[]` / `{}` means anything of that kind.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Allowed {
    #[serde(
        default,
        alias = "SchedulerNames",
        skip_serializing_if = "Option::is_none"
    )]
    pub scheduler_names: Option<Vec<String>>,
    #[serde(
        default,
        alias = "priorityClasseNames",
        skip_serializing_if = "Option::is_none"
    )]
    pub priority_class_names: Option<Vec<String>>,
    /// `{}`: any key, any value; otherwise only the listed keys, a key's `[]`: any value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selectors: Option<BTreeMap<String, Vec<String>>>,
    /// A pod toleration is allowed when one rule matches it; `[]`: every toleration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<TolerationRule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinities: Option<AffinityRules>,
}

impl Allowed {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// `spec.default`: set on pods that leave the field unset. A default value is also allowed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Defaults {
    #[serde(
        default,
        alias = "SchedulerName",
        skip_serializing_if = "Option::is_none"
    )]
    pub scheduler_name: Option<String>,
    #[serde(
        default,
        alias = "priorityClasseName",
        skip_serializing_if = "Option::is_none"
    )]
    pub priority_class_name: Option<String>,
    /// Added key by key: each key the pod's nodeSelector lacks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Appended when the pod has no toleration of its own (the API server's
    /// DefaultTolerationSeconds ones do not count). Never empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<DefaultToleration>>,
    /// A Kubernetes `Affinity`; each of nodeAffinity, podAffinity, podAntiAffinity is added
    /// when the pod lacks it. A match expression may use the proposal's one-element
    /// `keys: [k]` / `operators: [op]` for `key` / `operator`.
    #[serde(
        default,
        deserialize_with = "de_default_affinity",
        skip_serializing_if = "Option::is_none"
    )]
    pub affinity: Option<k8s::Affinity>,
}

impl Defaults {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// A coarse or fine rule over tolerations. Each list: absent means the pod's toleration must
/// leave that field unset (operator: the default `Equal`), `[]` means any value, otherwise
/// the toleration's field must be one of the listed values.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TolerationRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operators: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effects: Option<Vec<String>>,
}

/// A default toleration: `values` expands into one toleration per value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DefaultToleration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

/// `affinities` in `required` and `allowed`. With none of the three kinds set (`{}`) it
/// covers every affinity; otherwise a kind that is absent is not covered.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AffinityRules {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_affinities: Option<NodeAffinityRules>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_affinities: Option<PodAffinityRules>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_anti_affinities: Option<PodAffinityRules>,
}

impl AffinityRules {
    /// `{}`: every kind.
    pub fn is_any(&self) -> bool {
        *self == Self::default()
    }
}

/// Node affinity rules. `{}`: every node affinity, required and preferred; otherwise only
/// the listed constraint kinds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeAffinityRules {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_during_scheduling_ignored_during_execution: Option<NodeSelectorRules>,
    /// Rules over the `preference` term of each preferred scheduling term.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_during_scheduling_ignored_during_execution: Option<NodeSelectorRules>,
}

impl NodeAffinityRules {
    pub fn is_any(&self) -> bool {
        *self == Self::default()
    }
}

/// `nodeSelectorTerms` of rules; absent or `[]`: any term.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeSelectorRules {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector_terms: Option<Vec<TermRules>>,
}

impl NodeSelectorRules {
    pub fn is_any(&self) -> bool {
        self.node_selector_terms.as_ref().is_none_or(Vec::is_empty)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TermRules {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_expressions: Option<Vec<ExpressionRule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_fields: Option<Vec<ExpressionRule>>,
}

/// Matches a node selector requirement whose key is one of `keys`, operator one of
/// `operators` and every value one of `values` (any combination). Each list: `[]` is any;
/// absent `values` means the requirement has no values (`Exists`, `DoesNotExist`); absent
/// `keys` / `operators` match nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExpressionRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operators: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

/// Pod (anti-)affinity rules, coarse: `{}` is every term; otherwise the constraint kinds
/// listed (each as `{}`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodAffinityRules {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_during_scheduling_ignored_during_execution: Option<AnyTerms>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_during_scheduling_ignored_during_execution: Option<AnyTerms>,
}

impl PodAffinityRules {
    pub fn is_any(&self) -> bool {
        *self == Self::default()
    }
}

/// `{}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnyTerms {}

/// Reads `default.affinity` as a Kubernetes `Affinity`, first rewriting the proposal's
/// one-element `keys` / `operators` in node selector requirements into `key` / `operator`.
fn de_default_affinity<'de, D: Deserializer<'de>>(d: D) -> Result<Option<k8s::Affinity>, D::Error> {
    let mut v = Option::<Value>::deserialize(d)?;
    let Some(v) = v.as_mut() else {
        return Ok(None);
    };
    normalize_affinity(v).map_err(serde::de::Error::custom)?;
    serde_json::from_value(v.clone())
        .map(Some)
        .map_err(serde::de::Error::custom)
}

fn normalize_affinity(v: &mut Value) -> Result<(), String> {
    let Some(na) = v.get_mut("nodeAffinity") else {
        return Ok(());
    };
    if let Some(Value::Array(ts)) = na
        .get_mut("requiredDuringSchedulingIgnoredDuringExecution")
        .and_then(|r| r.get_mut("nodeSelectorTerms"))
    {
        for t in ts.iter_mut() {
            normalize_term(t)?;
        }
    }
    if let Some(Value::Array(ps)) = na.get_mut("preferredDuringSchedulingIgnoredDuringExecution") {
        for t in ps.iter_mut().filter_map(|p| p.get_mut("preference")) {
            normalize_term(t)?;
        }
    }
    Ok(())
}

fn normalize_term(t: &mut Value) -> Result<(), String> {
    for list in ["matchExpressions", "matchFields"] {
        let Some(Value::Array(es)) = t.get_mut(list) else {
            continue;
        };
        for e in es.iter_mut() {
            let Value::Object(m) = e else { continue };
            for (plural, singular) in [("keys", "key"), ("operators", "operator")] {
                let Some(p) = m.remove(plural) else { continue };
                match p {
                    Value::Array(mut a) if a.len() == 1 && !m.contains_key(singular) => {
                        m.insert(singular.to_string(), a.remove(0));
                    }
                    _ => {
                        return Err(format!(
                            "{list}: a default requirement needs `{singular}` or a one-element `{plural}`"
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Parses one or more SchedulingPolicy documents (YAML or JSON) and validates each.
/// Errors name the document index and the field.
pub fn parse(text: &str) -> Result<Vec<SchedulingPolicy>, Vec<String>> {
    let mut options = serde_saphyr::Options::default();
    options.strict_booleans = true;
    let docs: Vec<Value> = serde_saphyr::from_str_multiple_with_options(text, options)
        .map_err(|e| vec![format!("invalid YAML: {e}")])?;
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (i, doc) in docs.into_iter().enumerate() {
        if doc.is_null() {
            continue;
        }
        match serde_path_to_error::deserialize::<_, SchedulingPolicy>(doc) {
            Ok(p) => {
                let errs = validate(&p);
                if errs.is_empty() {
                    out.push(p);
                } else {
                    errors.extend(errs.into_iter().map(|e| format!("document {i}: {e}")));
                }
            }
            Err(e) => {
                let path = e.path().to_string();
                errors.push(format!("document {i}: {path}: {}", e.into_inner()));
            }
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}
