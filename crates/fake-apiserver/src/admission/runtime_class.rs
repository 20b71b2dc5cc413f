//! The RuntimeClass admission plugin on pod CREATE: a pod naming a class that does not
//! exist is refused; otherwise the class's overhead is set and its scheduling
//! constraints (nodeSelector, tolerations) are merged into the pod.

use serde_json::{Map, Value};

use super::{Refusal, forbidden};
use crate::store::Inner;

/// The class a pod names, if it names one; refused when it does not exist.
fn class_of(inner: &Inner, pod: &Value) -> Result<Option<Value>, Refusal> {
    let Some(name) = pod["spec"]["runtimeClassName"].as_str() else {
        return Ok(None);
    };
    match inner.get("runtimeclasses", "", name) {
        Some(c) => Ok(Some(c)),
        None => Err(forbidden(
            pod,
            format!("pod rejected: RuntimeClass {name:?} not found"),
        )),
    }
}

const OVERHEAD_MISMATCH: &str =
    "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead";

pub(super) fn admit(inner: &Inner, pod: &mut Value) -> Result<(), Refusal> {
    let Some(class) = class_of(inner, pod)? else {
        return Ok(());
    };
    let fixed = &class["overhead"]["podFixed"];
    if !fixed.is_null() {
        let own = &pod["spec"]["overhead"];
        if !own.is_null() && own != fixed {
            return Err(forbidden(pod, OVERHEAD_MISMATCH.into()));
        }
        pod["spec"]["overhead"] = fixed.clone();
    }
    let scheduling = &class["scheduling"];
    if scheduling.is_null() {
        return Ok(());
    }
    if let Some(selector) = scheduling["nodeSelector"].as_object() {
        let mut merged: Map<String, Value> = pod["spec"]["nodeSelector"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for (k, v) in selector {
            if let Some(own) = merged.get(k)
                && own != v
            {
                return Err(forbidden(
                    pod,
                    format!(
                        "conflict: runtimeClass.scheduling.nodeSelector[{k}] = {}; pod.spec.nodeSelector[{k}] = {}",
                        v.as_str().unwrap_or(""),
                        own.as_str().unwrap_or("")
                    ),
                ));
            }
            merged.insert(k.clone(), v.clone());
        }
        pod["spec"]["nodeSelector"] = Value::Object(merged);
    }
    let own: Vec<Value> = pod["spec"]["tolerations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let theirs: Vec<Value> = scheduling["tolerations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !theirs.is_empty() {
        pod["spec"]["tolerations"] = Value::Array(merge_tolerations(own, theirs));
    }
    Ok(())
}

/// The validating half: the pod's overhead must be the class's (or absent without one).
pub(super) fn validate(inner: &Inner, pod: &Value) -> Result<(), Refusal> {
    let class = class_of(inner, pod)?;
    let fixed = class.as_ref().map(|c| &c["overhead"]["podFixed"]);
    let own = &pod["spec"]["overhead"];
    match fixed {
        Some(fixed) if !fixed.is_null() && own != fixed => {
            return Err(forbidden(pod, OVERHEAD_MISMATCH.into()));
        }
        Some(fixed) if !fixed.is_null() => {}
        _ if !own.is_null() => {
            return Err(forbidden(
                pod,
                "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"
                    .into(),
            ));
        }
        _ => {}
    }
    Ok(())
}

fn field<'a>(t: &'a Value, name: &str) -> &'a str {
    t[name].as_str().unwrap_or("")
}

/// Whether toleration `a` tolerates everything `b` does (upstream's `isSuperset`).
fn tolerates_all_of(a: &Value, b: &Value) -> bool {
    if a == b {
        return true;
    }
    let a_op = match field(a, "operator") {
        "" => "Equal",
        op => op,
    };
    let b_op = match field(b, "operator") {
        "" => "Equal",
        op => op,
    };
    // An empty key with Exists matches every key.
    if field(a, "key") != field(b, "key") && !(field(a, "key").is_empty() && a_op == "Exists") {
        return false;
    }
    // An empty effect matches every effect.
    if field(a, "effect") != field(b, "effect") && !field(a, "effect").is_empty() {
        return false;
    }
    if field(a, "effect") == "NoExecute"
        && let Some(limit) = a["tolerationSeconds"].as_i64()
        && b["tolerationSeconds"].as_i64().is_none_or(|s| s > limit)
    {
        return false;
    }
    match a_op {
        "Equal" => b_op == "Equal" && field(a, "value") == field(b, "value"),
        "Exists" => true,
        _ => false,
    }
}

/// The pod's tolerations then the class's, each one dropped when another in the list
/// tolerates all it does (the first of two equal ones is kept).
fn merge_tolerations(own: Vec<Value>, theirs: Vec<Value>) -> Vec<Value> {
    let all: Vec<Value> = own.into_iter().chain(theirs).collect();
    let mut merged: Vec<Value> = Vec::new();
    for (i, t) in all.iter().enumerate() {
        let redundant = merged.iter().any(|m| tolerates_all_of(m, t))
            || all[i + 1..]
                .iter()
                .any(|later| later != t && tolerates_all_of(later, t));
        if !redundant {
            merged.push(t.clone());
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn merge_keeps_one_of_equal_tolerations_and_drops_covered_ones() {
        let own = vec![
            json!({"key": "a", "operator": "Equal", "value": "1", "effect": "NoSchedule"}),
            json!({"key": "b", "operator": "Exists"}),
        ];
        let theirs = vec![
            json!({"key": "a", "operator": "Equal", "value": "1", "effect": "NoSchedule"}),
            json!({"key": "b", "operator": "Exists", "effect": "NoSchedule"}),
            json!({"key": "c", "operator": "Exists", "effect": "NoSchedule"}),
        ];
        assert_eq!(
            merge_tolerations(own, theirs),
            vec![
                json!({"key": "a", "operator": "Equal", "value": "1", "effect": "NoSchedule"}),
                json!({"key": "b", "operator": "Exists"}),
                json!({"key": "c", "operator": "Exists", "effect": "NoSchedule"}),
            ]
        );
    }

    #[test]
    fn a_shorter_toleration_seconds_does_not_cover_a_longer_one() {
        let short = json!({"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10});
        let long = json!({"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60});
        assert!(!tolerates_all_of(&short, &long));
        assert!(tolerates_all_of(&long, &short));
        assert_eq!(
            merge_tolerations(vec![short.clone()], vec![long.clone()]),
            vec![long]
        );
        // Any key: covers everything of that effect.
        let any = json!({"operator": "Exists", "effect": "NoSchedule"});
        assert!(tolerates_all_of(
            &any,
            &json!({"key": "x", "value": "y", "effect": "NoSchedule"})
        ));
        assert!(!tolerates_all_of(
            &any,
            &json!({"key": "x", "effect": "NoExecute"})
        ));
    }
}
