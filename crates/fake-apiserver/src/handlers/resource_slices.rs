//! What the API server checks of a ResourceSlice's consumable capacity (KEP-5075): a
//! capacity's `requestPolicy` needs `allowMultipleAllocations: true` on its device, sets
//! at most one of `validRange` and `validValues`, and then needs a `default` the policy
//! itself allows; every amount stays within the capacity's value, a range's `max` and
//! `default` lie on its step from `min`, and valid values are ascending, unique and at
//! most 10. Compatibility groups (KEP-5963): at most 2 per `consumesCounters` entry,
//! unique, each a DNS label.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use super::pod_groups::{LABEL_MSG, is_dns_label};
use super::status;
use crate::store::Resource;

/// Upstream `CapacityRequestPolicyDiscreteMaxOptions`.
const MAX_VALID_VALUES: usize = 10;

/// Validates a ResourceSlice about to be written; the error is the 422 answer.
pub(super) fn prepare(r: &Resource, obj: &Value) -> Result<(), Box<Response>> {
    if r.collection != "resourceslices" {
        return Ok(());
    }
    let mut errors = capacity_errors(obj);
    errors.extend(group_errors(obj));
    if errors.is_empty() {
        return Ok(());
    }
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    Err(Box::new(status(
        StatusCode::UNPROCESSABLE_ENTITY,
        "Invalid",
        format!(
            "ResourceSlice.resource.k8s.io {name:?} is invalid: {}",
            match errors.as_slice() {
                [one] => one.clone(),
                many => format!("[{}]", many.join(", ")),
            }
        ),
    )))
}

/// A quantity in nano-units (decimal or binary suffix; no exponent form). None: not one.
pub(super) fn nanos(v: &Value) -> Option<i128> {
    let s = v.as_str()?;
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let mult: i128 = match suffix {
        "n" => 1,
        "u" => 1_000,
        "m" => 1_000_000,
        "" => 1_000_000_000,
        "k" => 1_000_000_000_000,
        "M" => 1_000_000_000_000_000,
        "G" => 1_000_000_000_000_000_000,
        "T" => 1_000_000_000_000_000_000_000,
        "P" => 1_000_000_000_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000_000_000_000,
        "Ki" => 1_000_000_000 << 10,
        "Mi" => 1_000_000_000 << 20,
        "Gi" => 1_000_000_000 << 30,
        "Ti" => 1_000_000_000 << 40,
        "Pi" => 1_000_000_000 << 50,
        "Ei" => 1_000_000_000 << 60,
        _ => return None,
    };
    let (neg, num) = match num.strip_prefix('-') {
        Some(n) => (true, n),
        None => (false, num.strip_prefix('+').unwrap_or(num)),
    };
    let (whole, frac) = num.split_once('.').unwrap_or((num, ""));
    if (whole.is_empty() && frac.is_empty())
        || !whole
            .bytes()
            .chain(frac.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let mut v: i128 = whole.parse::<i128>().unwrap_or(0).checked_mul(mult)?;
    let mut scale = mult;
    for d in frac.bytes() {
        scale /= 10;
        v = v.checked_add(i128::from(d - b'0') * scale)?;
    }
    Some(if neg { -v } else { v })
}

/// Upstream `ResourceSliceMaxCompatibilityGroups` (the 1.37 API: "at most 2").
const MAX_COMPATIBILITY_GROUPS: usize = 2;

fn group_errors(obj: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let devices = obj["spec"]["devices"].as_array().into_iter().flatten();
    for (i, d) in devices.enumerate() {
        let consumes = d["consumesCounters"].as_array().into_iter().flatten();
        for (j, c) in consumes.enumerate() {
            let Some(groups) = c["compatibilityGroups"].as_array() else {
                continue;
            };
            let path = format!("spec.devices[{i}].consumesCounters[{j}].compatibilityGroups");
            if groups.len() > MAX_COMPATIBILITY_GROUPS {
                errors.push(format!(
                    "{path}: Too many: {}: must have at most {MAX_COMPATIBILITY_GROUPS} items",
                    groups.len()
                ));
            }
            for (k, g) in groups.iter().enumerate() {
                let name = g.as_str().unwrap_or_default();
                if !is_dns_label(name) {
                    errors.push(format!("{path}[{k}]: Invalid value: {g}: {LABEL_MSG}"));
                } else if groups[..k].contains(g) {
                    errors.push(format!("{path}[{k}]: Duplicate value: {g}"));
                }
            }
        }
    }
    errors
}

fn capacity_errors(obj: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    for (i, d) in obj["spec"]["devices"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let multiple = d["allowMultipleAllocations"].as_bool() == Some(true);
        for (name, cap) in d["capacity"].as_object().into_iter().flatten() {
            let path = format!("spec.devices[{i}].capacity[{name}]");
            let Some(value) = nanos(&cap["value"]) else {
                errors.push(format!(
                    "{path}.value: Invalid value: {}: must be a quantity",
                    cap["value"]
                ));
                continue;
            };
            let policy = &cap["requestPolicy"];
            if policy.is_null() {
                continue;
            }
            let path = format!("{path}.requestPolicy");
            if !multiple {
                errors.push(format!(
                    "{path}: Forbidden: only allowed when the device sets allowMultipleAllocations: true"
                ));
                continue;
            }
            policy_errors(&path, policy, value, &mut errors);
        }
    }
    errors
}

fn policy_errors(path: &str, p: &Value, value: i128, errors: &mut Vec<String>) {
    let amount = |field: &str, v: &Value, errors: &mut Vec<String>| -> Option<i128> {
        if v.is_null() {
            return None;
        }
        match nanos(v) {
            Some(n) if n < 0 => {
                errors.push(format!(
                    "{path}.{field}: Invalid value: {v}: must not be negative"
                ));
                None
            }
            Some(n) if n > value => {
                errors.push(format!(
                    "{path}.{field}: Invalid value: {v}: must not exceed the capacity's value"
                ));
                None
            }
            Some(n) => Some(n),
            None => {
                errors.push(format!(
                    "{path}.{field}: Invalid value: {v}: must be a quantity"
                ));
                None
            }
        }
    };
    let default = amount("default", &p["default"], errors);
    let range = &p["validRange"];
    let values = p["validValues"].as_array();
    if !range.is_null() && values.is_some_and(|v| !v.is_empty()) {
        errors.push(format!(
            "{path}: Invalid value: must not set both validRange and validValues"
        ));
        return;
    }
    if !range.is_null() {
        if p["default"].is_null() {
            errors.push(format!(
                "{path}.default: Required value: a validRange needs a default"
            ));
        }
        let rp = format!("{path}.validRange");
        let min = if range["min"].is_null() {
            errors.push(format!("{rp}.min: Required value"));
            None
        } else {
            amount("validRange.min", &range["min"], errors)
        };
        let max = amount("validRange.max", &range["max"], errors);
        let step = amount("validRange.step", &range["step"], errors);
        if let (Some(min), Some(max)) = (min, max)
            && min > max
        {
            errors.push(format!(
                "{rp}.max: Invalid value: {}: must not be below min",
                range["max"]
            ));
        }
        if let (Some(d), Some(min)) = (default, min)
            && (d < min || max.is_some_and(|m| d > m))
        {
            errors.push(format!(
                "{path}.default: Invalid value: {}: must lie within validRange",
                p["default"]
            ));
        }
        if let (Some(step), Some(min)) = (step, min) {
            if step <= 0 {
                errors.push(format!(
                    "{rp}.step: Invalid value: {}: must be positive",
                    range["step"]
                ));
            } else {
                if min + step > value {
                    errors.push(format!(
                        "{rp}.step: Invalid value: {}: min + step must not exceed the capacity's value",
                        range["step"]
                    ));
                }
                for (field, v, raw) in [
                    ("default", default, &p["default"]),
                    ("validRange.max", max, &range["max"]),
                ] {
                    if let Some(v) = v
                        && (v - min) % step != 0
                    {
                        errors.push(format!(
                            "{path}.{field}: Invalid value: {raw}: must be min plus a multiple of step"
                        ));
                    }
                }
            }
        }
    } else if let Some(values) = values.filter(|v| !v.is_empty()) {
        if p["default"].is_null() {
            errors.push(format!(
                "{path}.default: Required value: validValues need a default"
            ));
        }
        if values.len() > MAX_VALID_VALUES {
            errors.push(format!(
                "{path}.validValues: Too many: {}: must have at most {MAX_VALID_VALUES} items",
                values.len()
            ));
        }
        let mut last: Option<i128> = None;
        let mut parsed = Vec::new();
        for (j, v) in values.iter().enumerate() {
            if let Some(n) = amount(&format!("validValues[{j}]"), v, errors) {
                if last.is_some_and(|l| n <= l) {
                    errors.push(format!(
                        "{path}.validValues[{j}]: Invalid value: {v}: must be ascending without duplicates"
                    ));
                }
                last = Some(n);
                parsed.push(n);
            }
        }
        if let Some(d) = default
            && !parsed.contains(&d)
        {
            errors.push(format!(
                "{path}.default: Invalid value: {}: must be one of validValues",
                p["default"]
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn slice(multiple: bool, policy: Value) -> Value {
        json!({"spec": {"devices": [{
            "name": "nic-0",
            "allowMultipleAllocations": multiple,
            "capacity": {"bandwidth": {"value": "10G", "requestPolicy": policy}}
        }]}})
    }

    #[test]
    fn compatibility_groups_are_checked_like_the_registry() {
        let with = |groups: Value| {
            json!({"spec": {"devices": [{"name": "mig-0", "consumesCounters": [
                {"counterSet": "gpu-0", "counters": {"sm": {"value": "1"}},
                 "compatibilityGroups": groups}]}]}})
        };
        assert_eq!(
            group_errors(&with(json!(["mig", "mps"]))),
            Vec::<String>::new()
        );
        assert_eq!(group_errors(&with(json!([]))), Vec::<String>::new());
        let p = "spec.devices[0].consumesCounters[0].compatibilityGroups";
        assert_eq!(
            group_errors(&with(json!(["a", "b", "c"]))),
            [format!("{p}: Too many: 3: must have at most 2 items")]
        );
        assert_eq!(
            group_errors(&with(json!(["mig", "mig"]))),
            [format!("{p}[1]: Duplicate value: \"mig\"")]
        );
        let bad = group_errors(&with(json!(["MIG"])));
        assert_eq!(bad.len(), 1);
        assert!(
            bad[0].starts_with(&format!(
                "{p}[0]: Invalid value: \"MIG\": a lowercase RFC 1123 label"
            )),
            "{bad:?}"
        );
    }

    #[test]
    fn quantities_parse_to_nano_units() {
        assert_eq!(nanos(&json!("1")), Some(1_000_000_000));
        assert_eq!(nanos(&json!("1.5k")), Some(1_500_000_000_000));
        assert_eq!(nanos(&json!("1Ki")), Some(1024 * 1_000_000_000));
        assert_eq!(nanos(&json!("100m")), Some(100_000_000));
        assert_eq!(nanos(&json!("lots")), None);
    }

    #[test]
    fn request_policies_are_checked_like_the_registry() {
        let ok = slice(
            true,
            json!({"default": "2G", "validRange": {"min": "1G", "max": "8G", "step": "1G"}}),
        );
        assert_eq!(capacity_errors(&ok), Vec::<String>::new());
        let values = slice(
            true,
            json!({"default": "4G", "validValues": ["1G", "4G", "8G"]}),
        );
        assert_eq!(capacity_errors(&values), Vec::<String>::new());

        let p = "spec.devices[0].capacity[bandwidth].requestPolicy";
        assert_eq!(
            capacity_errors(&slice(false, json!({"default": "1G"}))),
            [format!(
                "{p}: Forbidden: only allowed when the device sets allowMultipleAllocations: true"
            )]
        );
        assert_eq!(
            capacity_errors(&slice(true, json!({"validRange": {"min": "1G"}}))),
            [format!(
                "{p}.default: Required value: a validRange needs a default"
            )]
        );
        assert_eq!(
            capacity_errors(&slice(
                true,
                json!({"default": "2500M", "validRange": {"min": "1G", "step": "1G"}})
            )),
            [format!(
                "{p}.default: Invalid value: \"2500M\": must be min plus a multiple of step"
            )]
        );
        assert_eq!(
            capacity_errors(&slice(
                true,
                json!({"default": "4G", "validValues": ["4G", "1G"]})
            )),
            [format!(
                "{p}.validValues[1]: Invalid value: \"1G\": must be ascending without duplicates"
            )]
        );
        assert_eq!(
            capacity_errors(&slice(
                true,
                json!({"default": "3G", "validValues": ["1G", "4G"]})
            )),
            [format!(
                "{p}.default: Invalid value: \"3G\": must be one of validValues"
            )]
        );
        assert_eq!(
            capacity_errors(&slice(true, json!({"default": "20G"}))),
            [format!(
                "{p}.default: Invalid value: \"20G\": must not exceed the capacity's value"
            )]
        );
    }
}
