//! The Priority admission plugin on pods: `spec.priority` (and `preemptionPolicy`) come
//! from the pod's PriorityClass, or the globalDefault class when it names none; a pod that
//! brings a value of its own that disagrees is refused.

use serde_json::{Value, json};

use super::{Operation, Refusal, Request, forbidden, objects_of};
use crate::store::Inner;

/// The classes every real API server creates at start, resolved when not stored.
const SYSTEM_CLASSES: [(&str, i64); 2] = [
    ("system-node-critical", 2_000_001_000),
    ("system-cluster-critical", 2_000_000_000),
];
/// What a PriorityClass without `preemptionPolicy` is defaulted to.
const PREEMPT_LOWER_PRIORITY: &str = "PreemptLowerPriority";

/// (name, value, preemptionPolicy) of a stored class.
type Class = (String, i64, String);

fn read(c: &Value) -> Class {
    (
        c["metadata"]["name"].as_str().unwrap_or("").to_string(),
        c["value"].as_i64().unwrap_or(0),
        c["preemptionPolicy"]
            .as_str()
            .unwrap_or(PREEMPT_LOWER_PRIORITY)
            .to_string(),
    )
}

fn class(inner: &Inner, name: &str) -> Option<Class> {
    if let Some(c) = inner.get("priorityclasses", "", name) {
        return Some(read(&c));
    }
    SYSTEM_CLASSES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(n, v)| (n.to_string(), *v, PREEMPT_LOWER_PRIORITY.to_string()))
}

/// The globalDefault class; with several (a race upstream tolerates), the lowest value.
fn global_default(inner: &Inner) -> Option<Class> {
    objects_of(inner, "priorityclasses")
        .iter()
        .filter(|v| v["globalDefault"] == true)
        .map(read)
        .min_by_key(|(_, value, _)| *value)
}

pub(super) fn admit(inner: &Inner, req: &Request, pod: &mut Value) -> Result<(), Refusal> {
    let spec = &mut pod["spec"];
    if req.operation == Operation::Update {
        // Set on create; an update that leaves them out keeps them.
        if let Some(old) = req.old {
            for field in ["priority", "preemptionPolicy"] {
                if spec[field].is_null() && !old["spec"][field].is_null() {
                    spec[field] = old["spec"][field].clone();
                }
            }
        }
        return Ok(());
    }
    let named = spec["priorityClassName"].as_str().unwrap_or("").to_string();
    let (priority, preemption) = if named.is_empty() {
        match global_default(inner) {
            Some((name, value, policy)) => {
                spec["priorityClassName"] = json!(name);
                (value, Some(policy))
            }
            None => (0, None),
        }
    } else {
        match class(inner, &named) {
            Some((_, value, policy)) => (value, Some(policy)),
            None => {
                return Err(forbidden(
                    pod,
                    format!("no PriorityClass with name {named} was found"),
                ));
            }
        }
    };
    if let Some(given) = pod["spec"]["priority"].as_i64()
        && given != priority
    {
        return Err(forbidden(
            pod,
            format!(
                "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
            ),
        ));
    }
    pod["spec"]["priority"] = json!(priority);
    if let Some(policy) = preemption {
        if let Some(given) = pod["spec"]["preemptionPolicy"].as_str()
            && given != policy
        {
            return Err(forbidden(
                pod,
                format!(
                    "the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"
                ),
            ));
        }
        pod["spec"]["preemptionPolicy"] = json!(policy);
    }
    Ok(())
}
