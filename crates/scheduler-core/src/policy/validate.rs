//! Validation of a SchedulingPolicy: every problem, each naming its field.

use super::{
    API_VERSION, AffinityRules, ExpressionRule, KIND, NodeSelectorRules, SchedulingPolicy,
    TolerationRule,
};

const TOLERATION_OPERATORS: [&str; 2] = ["Equal", "Exists"];
const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
const NODE_OPERATORS: [&str; 6] = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];

/// Every problem with `p`; empty when valid.
pub fn validate(p: &SchedulingPolicy) -> Vec<String> {
    let mut e = Vec::new();
    if p.api_version != API_VERSION {
        e.push(format!(
            "apiVersion: {:?} is not {API_VERSION:?}",
            p.api_version
        ));
    }
    if p.kind != KIND {
        e.push(format!("kind: {:?} is not {KIND:?}", p.kind));
    }
    if p.name().is_empty() {
        e.push("metadata.name: must be set".to_string());
    }
    if p.metadata
        .namespace
        .as_deref()
        .is_some_and(|n| !n.is_empty())
    {
        e.push("metadata.namespace: SchedulingPolicy is cluster-scoped".to_string());
    }
    let s = &p.spec;

    // required: no empty forms (an empty required list is not a valid syntax).
    let r = &s.required;
    non_empty_names(&mut e, "spec.required.schedulerNames", &r.scheduler_names);
    non_empty_names(
        &mut e,
        "spec.required.priorityClassNames",
        &r.priority_class_names,
    );
    if let Some(ns) = &r.node_selectors {
        if ns.is_empty() {
            e.push("spec.required.nodeSelectors: must not be empty".to_string());
        }
        for (k, vs) in ns {
            no_empty_strings(&mut e, &format!("spec.required.nodeSelectors[{k}]"), vs);
        }
    }
    if let Some(a) = &r.affinities {
        if a.is_any() {
            e.push("spec.required.affinities: must not be empty".to_string());
        }
        affinity_rules(&mut e, "spec.required.affinities", a);
    }

    // allowed.
    let a = &s.allowed;
    if let Some(n) = &a.scheduler_names {
        no_empty_strings(&mut e, "spec.allowed.schedulerNames", n);
    }
    if let Some(n) = &a.priority_class_names {
        no_empty_strings(&mut e, "spec.allowed.priorityClassNames", n);
    }
    if let Some(ns) = &a.node_selectors {
        for (k, vs) in ns {
            no_empty_strings(&mut e, &format!("spec.allowed.nodeSelectors[{k}]"), vs);
        }
    }
    if let Some(ts) = &a.tolerations {
        for (i, t) in ts.iter().enumerate() {
            toleration_rule(&mut e, &format!("spec.allowed.tolerations[{i}]"), t);
        }
    }
    if let Some(af) = &a.affinities {
        affinity_rules(&mut e, "spec.allowed.affinities", af);
    }

    // default: must itself satisfy `required`.
    let d = &s.defaults;
    if let (Some(n), Some(req)) = (&d.scheduler_name, &r.scheduler_names)
        && !req.contains(n)
    {
        e.push(format!(
            "spec.default.schedulerName: {n:?} is not one of spec.required.schedulerNames {req:?}"
        ));
    }
    if let (Some(n), Some(req)) = (&d.priority_class_name, &r.priority_class_names)
        && !req.contains(n)
    {
        e.push(format!(
            "spec.default.priorityClassName: {n:?} is not one of spec.required.priorityClassNames {req:?}"
        ));
    }
    if let (Some(ns), Some(req)) = (&d.node_selector, &r.node_selectors) {
        for (k, v) in ns {
            if let Some(vs) = req.get(k)
                && !vs.is_empty()
                && !vs.contains(v)
            {
                e.push(format!(
                    "spec.default.nodeSelector[{k}]: {v:?} is not one of spec.required.nodeSelectors[{k}] {vs:?}"
                ));
            }
        }
    }
    if let Some(ts) = &d.tolerations {
        if ts.is_empty() {
            e.push("spec.default.tolerations: must not be empty".to_string());
        }
        for (i, t) in ts.iter().enumerate() {
            let f = format!("spec.default.tolerations[{i}]");
            let op = t.operator.as_deref().unwrap_or("Equal");
            if !TOLERATION_OPERATORS.contains(&op) {
                e.push(format!(
                    "{f}.operator: {op:?} is not one of {TOLERATION_OPERATORS:?}"
                ));
            }
            if let Some(eff) = &t.effect
                && !EFFECTS.contains(&eff.as_str())
            {
                e.push(format!("{f}.effect: {eff:?} is not one of {EFFECTS:?}"));
            }
            if t.value.is_some() && t.values.is_some() {
                e.push(format!("{f}: set value or values, not both"));
            }
            let has_value = t.value.is_some() || t.values.as_ref().is_some_and(|v| !v.is_empty());
            if op == "Exists" && has_value {
                e.push(format!("{f}: operator Exists takes no value"));
            }
            if op == "Exists" && t.key.as_deref().unwrap_or("").is_empty() && t.effect.is_none() {
                // Legal in Kubernetes (tolerates everything) but never a sane default.
                e.push(format!(
                    "{f}: a default toleration must name a key or an effect"
                ));
            }
            if op == "Equal" && t.key.as_deref().unwrap_or("").is_empty() {
                e.push(format!("{f}.key: operator Equal needs a key"));
            }
            if t.values.as_ref().is_some_and(Vec::is_empty) {
                e.push(format!("{f}.values: must not be empty"));
            }
        }
    }
    e
}

fn non_empty_names(e: &mut Vec<String>, field: &str, v: &Option<Vec<String>>) {
    if let Some(v) = v {
        if v.is_empty() {
            e.push(format!("{field}: must not be empty"));
        }
        no_empty_strings(e, field, v);
    }
}

fn no_empty_strings(e: &mut Vec<String>, field: &str, v: &[String]) {
    if let Some(i) = v.iter().position(String::is_empty) {
        e.push(format!("{field}[{i}]: must not be the empty string"));
    }
}

fn one_of(e: &mut Vec<String>, field: &str, v: &Option<Vec<String>>, known: &[&str]) {
    for x in v.iter().flatten() {
        if !known.contains(&x.as_str()) {
            e.push(format!("{field}: {x:?} is not one of {known:?}"));
        }
    }
}

fn toleration_rule(e: &mut Vec<String>, field: &str, t: &TolerationRule) {
    one_of(
        e,
        &format!("{field}.operators"),
        &t.operators,
        &TOLERATION_OPERATORS,
    );
    one_of(e, &format!("{field}.effects"), &t.effects, &EFFECTS);
}

fn affinity_rules(e: &mut Vec<String>, field: &str, a: &AffinityRules) {
    if let Some(n) = &a.node_affinities {
        for (kind, r) in [
            (
                "requiredDuringSchedulingIgnoredDuringExecution",
                &n.required_during_scheduling_ignored_during_execution,
            ),
            (
                "preferredDuringSchedulingIgnoredDuringExecution",
                &n.preferred_during_scheduling_ignored_during_execution,
            ),
        ] {
            if let Some(r) = r {
                node_selector_rules(e, &format!("{field}.nodeAffinities.{kind}"), r);
            }
        }
    }
}

fn node_selector_rules(e: &mut Vec<String>, field: &str, r: &NodeSelectorRules) {
    for (i, t) in r.node_selector_terms.iter().flatten().enumerate() {
        for (list, rules) in [
            ("matchExpressions", &t.match_expressions),
            ("matchFields", &t.match_fields),
        ] {
            for (j, x) in rules.iter().flatten().enumerate() {
                expression_rule(e, &format!("{field}.nodeSelectorTerms[{i}].{list}[{j}]"), x);
            }
        }
    }
}

fn expression_rule(e: &mut Vec<String>, field: &str, x: &ExpressionRule) {
    one_of(
        e,
        &format!("{field}.operators"),
        &x.operators,
        &NODE_OPERATORS,
    );
    if x.keys.is_none() {
        e.push(format!("{field}.keys: must be set (`[]` for any key)"));
    }
    if x.operators.is_none() {
        e.push(format!(
            "{field}.operators: must be set (`[]` for any operator)"
        ));
    }
}
