//! Evaluation of a pod against a (merged) policy: every violation, in field order.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1 as k8s;

use super::defaulting::expand_default_tolerations;
use super::{
    AffinityRules, DEFAULT_SCHEDULER, ExpressionRule, NodeSelectorRules, PodAffinityRules,
    PolicySpec, TermRules, TolerationRule,
};
use crate::types::PodInfo;
use crate::types::taint::TolerationOperator;

/// The outcome of evaluating a pod: every violation, in field order. Empty: allowed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    pub violations: Vec<String>,
}

impl Verdict {
    pub fn is_allowed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// A toleration as the policy sees it: unset strings are empty, the operator is `Equal`
/// or `Exists` (unset is `Equal`), an empty effect means every effect.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TolerationView {
    pub key: String,
    pub operator: String,
    pub value: String,
    pub effect: String,
    pub toleration_seconds: Option<i64>,
}

impl TolerationView {
    pub fn from_k8s(t: &k8s::Toleration) -> Self {
        TolerationView {
            key: t.key.clone().unwrap_or_default(),
            operator: match t.operator.as_deref() {
                None | Some("") => "Equal".to_string(),
                Some(o) => o.to_string(),
            },
            value: t.value.clone().unwrap_or_default(),
            effect: t.effect.clone().unwrap_or_default(),
            toleration_seconds: t.toleration_seconds,
        }
    }

    /// Tolerations the API server's DefaultTolerationSeconds admission plugin adds to every
    /// pod (`node.kubernetes.io/not-ready` / `unreachable`, Exists, NoExecute, with seconds).
    /// No policy could ever deny them, so they are not evaluated.
    pub fn is_api_server_default(&self) -> bool {
        matches!(
            self.key.as_str(),
            "node.kubernetes.io/not-ready" | "node.kubernetes.io/unreachable"
        ) && self.operator == "Exists"
            && self.value.is_empty()
            && self.effect == "NoExecute"
            && self.toleration_seconds.is_some()
    }
}

impl fmt::Display for TolerationView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = if self.key.is_empty() {
            "any key".to_string()
        } else {
            format!("key {:?}", self.key)
        };
        write!(f, "({key} {}", self.operator)?;
        if self.operator != "Exists" {
            write!(f, " {:?}", self.value)?;
        }
        if self.effect.is_empty() {
            write!(f, ", any effect)")
        } else {
            write!(f, ", effect {})", self.effect)
        }
    }
}

/// The scheduling fields of a pod that a policy governs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodFields {
    /// Unset or empty: the default scheduler.
    pub scheduler_name: Option<String>,
    pub priority_class_name: Option<String>,
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<TolerationView>,
    pub affinity: Option<k8s::Affinity>,
}

impl PodFields {
    pub fn from_pod(pod: &k8s::Pod) -> Self {
        let Some(s) = &pod.spec else {
            return Self::default();
        };
        PodFields {
            scheduler_name: s.scheduler_name.clone().filter(|n| !n.is_empty()),
            priority_class_name: s.priority_class_name.clone().filter(|n| !n.is_empty()),
            node_selector: s.node_selector.clone().unwrap_or_default(),
            tolerations: s
                .tolerations
                .iter()
                .flatten()
                .map(TolerationView::from_k8s)
                .collect(),
            affinity: s.affinity.clone(),
        }
    }

    pub fn from_info(pod: &PodInfo) -> Self {
        PodFields {
            scheduler_name: Some(pod.scheduler_name.clone()).filter(|n| !n.is_empty()),
            priority_class_name: pod.priority_class_name.clone().filter(|n| !n.is_empty()),
            node_selector: pod.node_selector.to_btree(),
            tolerations: pod
                .tolerations
                .iter()
                .map(|t| TolerationView {
                    key: t.key.to_string(),
                    operator: match &t.operator {
                        TolerationOperator::Equal => "Equal".to_string(),
                        TolerationOperator::Exists => "Exists".to_string(),
                        TolerationOperator::Other(o) => o.clone(),
                    },
                    value: t.value.to_string(),
                    effect: t
                        .effect
                        .as_ref()
                        .map(|e| e.as_str().to_string())
                        .unwrap_or_default(),
                    toleration_seconds: t.toleration_seconds,
                })
                .collect(),
            affinity: pod.affinity.as_deref().cloned(),
        }
    }
}

/// What a list in `allowed` (plus `default` and `required`) permits.
enum Allow<'a> {
    Any,
    Only(Vec<&'a str>),
}

impl<'a> Allow<'a> {
    fn of(allowed: &'a Option<Vec<String>>, extra: impl IntoIterator<Item = &'a String>) -> Self {
        match allowed {
            Some(l) if l.is_empty() => Allow::Any,
            _ => {
                let mut v: Vec<&str> = allowed.iter().flatten().map(String::as_str).collect();
                for x in extra {
                    if !v.contains(&x.as_str()) {
                        v.push(x);
                    }
                }
                Allow::Only(v)
            }
        }
    }
    fn permits(&self, x: &str) -> bool {
        match self {
            Allow::Any => true,
            Allow::Only(v) => v.contains(&x),
        }
    }
}

impl fmt::Display for Allow<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Allow::Any => write!(f, "any"),
            Allow::Only(v) if v.is_empty() => write!(f, "none"),
            Allow::Only(v) => write!(f, "{v:?}"),
        }
    }
}

const NODE_REQ: &str = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution";
const NODE_PREF: &str =
    "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution";

/// Evaluates a pod against a merged policy, returning every violation. Nothing is defaulted
/// here: evaluate the result of [`apply_defaults`] for admission.
pub fn evaluate(pod: &PodFields, p: &PolicySpec) -> Verdict {
    let mut v = Vec::new();
    let (req, alw, def) = (&p.required, &p.allowed, &p.defaults);

    // schedulerName: always has a value (unset is the default scheduler).
    let name = pod.scheduler_name.as_deref().unwrap_or(DEFAULT_SCHEDULER);
    if let Some(r) = &req.scheduler_names {
        if !r.iter().any(|x| x == name) {
            v.push(format!(
                "spec.schedulerName {name:?} is not allowed; required: one of {r:?}"
            ));
        }
    } else {
        let a = Allow::of(&alw.scheduler_names, def.scheduler_name.iter());
        if !a.permits(name) {
            v.push(format!(
                "spec.schedulerName {name:?} is not allowed; allowed: {a}"
            ));
        }
    }

    // priorityClassName.
    match (&req.priority_class_names, &pod.priority_class_name) {
        (Some(r), None) => v.push(format!("spec.priorityClassName is required: one of {r:?}")),
        (Some(r), Some(n)) if !r.contains(n) => v.push(format!(
            "spec.priorityClassName {n:?} is not allowed; required: one of {r:?}"
        )),
        (Some(_), Some(_)) | (None, None) => {}
        (None, Some(n)) => {
            let a = Allow::of(&alw.priority_class_names, def.priority_class_name.iter());
            if !a.permits(n) {
                v.push(format!(
                    "spec.priorityClassName {n:?} is not allowed; allowed: {a}"
                ));
            }
        }
    }

    // nodeSelector.
    let empty = BTreeMap::new();
    let req_ns = req.node_selectors.as_ref().unwrap_or(&empty);
    for (k, vals) in req_ns {
        match pod.node_selector.get(k) {
            None if vals.is_empty() => {
                v.push(format!("spec.nodeSelector[{k}] is required: any value"))
            }
            None => v.push(format!(
                "spec.nodeSelector[{k}] is required: one of {vals:?}"
            )),
            Some(x) if !vals.is_empty() && !vals.contains(x) => v.push(format!(
                "spec.nodeSelector[{k}] {x:?} is not allowed; required: one of {vals:?}"
            )),
            Some(_) => {}
        }
    }
    let empty_def = BTreeMap::new();
    let def_ns = def.node_selector.as_ref().unwrap_or(&empty_def);
    for (k, x) in &pod.node_selector {
        if req_ns.contains_key(k) || def_ns.get(k) == Some(x) {
            continue;
        }
        match &alw.node_selectors {
            Some(m) if m.is_empty() => {}
            Some(m) if m.contains_key(k) => {
                let vals = &m[k];
                if !vals.is_empty() && !vals.contains(x) {
                    let mut allowed: Vec<&String> = vals.iter().collect();
                    allowed.extend(def_ns.get(k));
                    v.push(format!(
                        "spec.nodeSelector[{k}] {x:?} is not allowed; allowed values: {allowed:?}"
                    ));
                }
            }
            _ => v.push(format!("spec.nodeSelector[{k}] is not allowed")),
        }
    }

    // tolerations.
    let defaults = expand_default_tolerations(def.tolerations.as_deref().unwrap_or(&[]));
    let default_views: Vec<TolerationView> =
        defaults.iter().map(TolerationView::from_k8s).collect();
    for (i, t) in pod.tolerations.iter().enumerate() {
        if t.is_api_server_default() || default_views.contains(t) {
            continue;
        }
        let ok = match &alw.tolerations {
            None => false,
            Some(rules) => rules.is_empty() || rules.iter().any(|r| toleration_matches(r, t)),
        };
        if !ok {
            v.push(format!("spec.tolerations[{i}] {t} is not allowed"));
        }
    }

    affinity_violations(&mut v, pod.affinity.as_ref(), p);
    Verdict { violations: v }
}

fn field_ok(list: &Option<Vec<String>>, x: &str) -> bool {
    match list {
        None => x.is_empty(),
        Some(l) => l.is_empty() || l.iter().any(|y| y == x),
    }
}

fn toleration_matches(r: &TolerationRule, t: &TolerationView) -> bool {
    let op_ok = match &r.operators {
        None => t.operator == "Equal",
        Some(l) => l.is_empty() || l.contains(&t.operator),
    };
    field_ok(&r.keys, &t.key)
        && op_ok
        && field_ok(&r.values, &t.value)
        && field_ok(&r.effects, &t.effect)
}

fn expression_matches(r: &ExpressionRule, e: &k8s::NodeSelectorRequirement) -> bool {
    let any_or = |l: &Option<Vec<String>>, x: &str| {
        l.as_ref()
            .is_some_and(|l| l.is_empty() || l.iter().any(|y| y == x))
    };
    let values = e.values.as_deref().unwrap_or(&[]);
    let values_ok = match &r.values {
        None => values.is_empty(),
        Some(l) => l.is_empty() || values.iter().all(|x| l.contains(x)),
    };
    any_or(&r.keys, &e.key) && any_or(&r.operators, &e.operator) && values_ok
}

fn describe(e: &k8s::NodeSelectorRequirement) -> String {
    match e.values.as_deref() {
        Some(vs) if !vs.is_empty() => format!("(key {:?} {} {vs:?})", e.key, e.operator),
        _ => format!("(key {:?} {})", e.key, e.operator),
    }
}

fn describe_rule(t: &TermRules) -> String {
    let list = |l: &Option<Vec<String>>| match l {
        None => "none".to_string(),
        Some(l) if l.is_empty() => "any".to_string(),
        Some(l) => format!("{l:?}"),
    };
    let parts: Vec<String> = t
        .match_expressions
        .iter()
        .flatten()
        .chain(t.match_fields.iter().flatten())
        .map(|r| {
            format!(
                "(keys {} operators {} values {})",
                list(&r.keys),
                list(&r.operators),
                list(&r.values)
            )
        })
        .collect();
    format!("[{}]", parts.join(" "))
}

fn term_lists(t: &k8s::NodeSelectorTerm) -> [(&'static str, &[k8s::NodeSelectorRequirement]); 2] {
    [
        (
            "matchExpressions",
            t.match_expressions.as_deref().unwrap_or(&[]),
        ),
        ("matchFields", t.match_fields.as_deref().unwrap_or(&[])),
    ]
}

fn rule_lists(t: &TermRules) -> [(&'static str, &[ExpressionRule]); 2] {
    [
        (
            "matchExpressions",
            t.match_expressions.as_deref().unwrap_or(&[]),
        ),
        ("matchFields", t.match_fields.as_deref().unwrap_or(&[])),
    ]
}

/// A pod term satisfies a required term rule when each of the rule's expression rules is
/// matched by one of the pod term's requirements (of the same list).
fn term_satisfies(t: &k8s::NodeSelectorTerm, rule: &TermRules) -> bool {
    term_lists(t)
        .iter()
        .zip(rule_lists(rule))
        .all(|((_, reqs), (_, rules))| {
            rules
                .iter()
                .all(|r| reqs.iter().any(|e| expression_matches(r, e)))
        })
}

/// The policy's stance on one kind of constraint (e.g. required node affinity).
struct Coverage<'a> {
    /// Every term of this kind is allowed.
    any: bool,
    /// Term rules whose expressions allow individual requirements (allowed + required).
    rules: Vec<&'a TermRules>,
}

fn node_coverage<'a>(rules: &[Option<&'a NodeSelectorRules>], any_kind: bool) -> Coverage<'a> {
    let mut c = Coverage {
        any: any_kind,
        rules: Vec::new(),
    };
    for r in rules.iter().flatten() {
        if r.is_any() {
            c.any = true;
        }
        c.rules.extend(r.node_selector_terms.iter().flatten());
    }
    c
}

fn node_terms(
    v: &mut Vec<String>,
    field: &str,
    terms: &[&k8s::NodeSelectorTerm],
    c: &Coverage,
    defaults: &[&k8s::NodeSelectorTerm],
) {
    if terms.is_empty() || c.any {
        return;
    }
    if c.rules.is_empty() && defaults.is_empty() {
        v.push(format!("{field} is not allowed"));
        return;
    }
    for (i, t) in terms.iter().enumerate() {
        if defaults.contains(t) {
            continue;
        }
        for (list, reqs) in term_lists(t) {
            for (j, e) in reqs.iter().enumerate() {
                let ok = c.rules.iter().any(|r| {
                    rule_lists(r)
                        .iter()
                        .any(|(l, rs)| *l == list && rs.iter().any(|r| expression_matches(r, e)))
                });
                if !ok {
                    v.push(format!(
                        "{field}.nodeSelectorTerms[{i}].{list}[{j}] {} is not allowed",
                        describe(e)
                    ));
                }
            }
        }
    }
}

fn required_terms(
    v: &mut Vec<String>,
    field: &str,
    terms: &[&k8s::NodeSelectorTerm],
    r: &NodeSelectorRules,
) {
    if terms.is_empty() {
        v.push(format!("{field} is required"));
        return;
    }
    let Some(rules) = r.node_selector_terms.as_ref().filter(|t| !t.is_empty()) else {
        return;
    };
    for (i, t) in terms.iter().enumerate() {
        if !rules.iter().any(|r| term_satisfies(t, r)) {
            let want: Vec<String> = rules.iter().map(describe_rule).collect();
            v.push(format!(
                "{field}.nodeSelectorTerms[{i}] matches none of the required terms: {}",
                want.join(" or ")
            ));
        }
    }
}

fn affinity_violations(v: &mut Vec<String>, a: Option<&k8s::Affinity>, p: &PolicySpec) {
    let na = a.and_then(|a| a.node_affinity.as_ref());
    let req_terms: Vec<&k8s::NodeSelectorTerm> = na
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|s| s.node_selector_terms.iter().collect())
        .unwrap_or_default();
    let pref_terms: Vec<&k8s::NodeSelectorTerm> = na
        .and_then(|n| {
            n.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|s| s.iter().map(|p| &p.preference).collect())
        .unwrap_or_default();
    let pa = a.and_then(|a| a.pod_affinity.as_ref());
    let paa = a.and_then(|a| a.pod_anti_affinity.as_ref());
    let pod_counts = |x: Option<&k8s::PodAffinity>| {
        x.map_or((0, 0), |x| {
            (
                x.required_during_scheduling_ignored_during_execution
                    .as_ref()
                    .map_or(0, Vec::len),
                x.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
                    .map_or(0, Vec::len),
            )
        })
    };
    let anti_counts = |x: Option<&k8s::PodAntiAffinity>| {
        x.map_or((0, 0), |x| {
            (
                x.required_during_scheduling_ignored_during_execution
                    .as_ref()
                    .map_or(0, Vec::len),
                x.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
                    .map_or(0, Vec::len),
            )
        })
    };
    let (pa_req, pa_pref) = pod_counts(pa);
    let (paa_req, paa_pref) = anti_counts(paa);

    // required.
    if let Some(r) = &p.required.affinities {
        if let Some(n) = &r.node_affinities {
            if n.is_any() {
                if req_terms.is_empty() && pref_terms.is_empty() {
                    v.push("spec.affinity.nodeAffinity is required".to_string());
                }
            } else {
                if let Some(rr) = &n.required_during_scheduling_ignored_during_execution {
                    required_terms(v, NODE_REQ, &req_terms, rr);
                }
                if let Some(rr) = &n.preferred_during_scheduling_ignored_during_execution {
                    required_terms(v, NODE_PREF, &pref_terms, rr);
                }
            }
        }
        for (kind, rules, (nreq, npref)) in [
            ("podAffinity", &r.pod_affinities, (pa_req, pa_pref)),
            (
                "podAntiAffinity",
                &r.pod_anti_affinities,
                (paa_req, paa_pref),
            ),
        ] {
            let Some(rules) = rules else { continue };
            if rules.is_any() {
                if nreq + npref == 0 {
                    v.push(format!("spec.affinity.{kind} is required"));
                }
                continue;
            }
            if rules
                .required_during_scheduling_ignored_during_execution
                .is_some()
                && nreq == 0
            {
                v.push(format!(
                    "spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution is required"
                ));
            }
            if rules
                .preferred_during_scheduling_ignored_during_execution
                .is_some()
                && npref == 0
            {
                v.push(format!(
                    "spec.affinity.{kind}.preferredDuringSchedulingIgnoredDuringExecution is required"
                ));
            }
        }
    }

    // allowed (required and default imply allowed).
    let alw = p.allowed.affinities.as_ref();
    let req = p.required.affinities.as_ref();
    if alw.is_some_and(AffinityRules::is_any) {
        return;
    }
    fn node_rules(a: Option<&AffinityRules>) -> Option<&super::NodeAffinityRules> {
        a.and_then(|a| a.node_affinities.as_ref())
    }
    let any_node = [node_rules(alw), node_rules(req)]
        .iter()
        .flatten()
        .any(|n| n.is_any());
    let def = p.defaults.affinity.as_ref();
    let def_na = def.and_then(|d| d.node_affinity.as_ref());
    let def_req: Vec<&k8s::NodeSelectorTerm> = def_na
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|s| s.node_selector_terms.iter().collect())
        .unwrap_or_default();
    let def_pref: Vec<&k8s::NodeSelectorTerm> = def_na
        .and_then(|n| {
            n.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|s| s.iter().map(|p| &p.preference).collect())
        .unwrap_or_default();
    let c = node_coverage(
        &[node_rules(alw), node_rules(req)].map(|n| {
            n.and_then(|n| {
                n.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
        }),
        any_node,
    );
    node_terms(v, NODE_REQ, &req_terms, &c, &def_req);
    let c = node_coverage(
        &[node_rules(alw), node_rules(req)].map(|n| {
            n.and_then(|n| {
                n.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })
        }),
        any_node,
    );
    node_terms(v, NODE_PREF, &pref_terms, &c, &def_pref);

    let pod_rules = |a: Option<&'_ AffinityRules>, anti: bool| -> Option<PodAffinityRules> {
        a.and_then(|a| {
            if anti {
                a.pod_anti_affinities.clone()
            } else {
                a.pod_affinities.clone()
            }
        })
    };
    let def_pa_equal = def.and_then(|d| d.pod_affinity.as_ref()).is_some()
        && def.map(|d| &d.pod_affinity) == a.map(|a| &a.pod_affinity);
    let def_paa_equal = def.and_then(|d| d.pod_anti_affinity.as_ref()).is_some()
        && def.map(|d| &d.pod_anti_affinity) == a.map(|a| &a.pod_anti_affinity);
    for (kind, anti, (nreq, npref), is_default) in [
        ("podAffinity", false, (pa_req, pa_pref), def_pa_equal),
        ("podAntiAffinity", true, (paa_req, paa_pref), def_paa_equal),
    ] {
        if is_default {
            continue;
        }
        let rules = [pod_rules(alw, anti), pod_rules(req, anti)];
        let any = rules.iter().flatten().any(PodAffinityRules::is_any);
        let req_ok = any
            || rules.iter().flatten().any(|r| {
                r.required_during_scheduling_ignored_during_execution
                    .is_some()
            });
        let pref_ok = any
            || rules.iter().flatten().any(|r| {
                r.preferred_during_scheduling_ignored_during_execution
                    .is_some()
            });
        if nreq > 0 && !req_ok {
            v.push(format!(
                "spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution is not allowed"
            ));
        }
        if npref > 0 && !pref_ok {
            v.push(format!(
                "spec.affinity.{kind}.preferredDuringSchedulingIgnoredDuringExecution is not allowed"
            ));
        }
    }
}
