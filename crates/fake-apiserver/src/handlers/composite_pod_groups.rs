//! `scheduling.k8s.io/v1alpha3` CompositePodGroups as upstream's registry treats them (1.37
//! alpha): status dropped on create, `disruptionMode` defaulted to `{single: {}}`,
//! `workloadRef` required, `schedulingPolicy` exactly one of `basic` and `gang` with
//! `gang.minGroupCount >= 1`, a parent name that is a `k8s-long-name`, at most one topology
//! constraint, and the whole spec immutable. Invalid objects get 422 `Invalid`.

use axum::response::Response;
use serde_json::{Value, json};

use super::pod_groups::{invalid_kind, parent_errors, topology_errors};

pub(super) fn prepare(old: Option<&Value>, obj: &mut Value) -> Result<(), Box<Response>> {
    if old.is_none()
        && let Some(o) = obj.as_object_mut()
    {
        o.remove("status");
    }
    if obj["spec"].is_object() && obj["spec"]["disruptionMode"].is_null() {
        obj["spec"]["disruptionMode"] = json!({"single": {}});
    }
    let mut errors = validate(&obj["spec"]);
    if let Some(old) = old
        && old["spec"] != obj["spec"]
    {
        errors.push("spec: Invalid value: field is immutable".to_string());
    }
    if errors.is_empty() {
        return Ok(());
    }
    Err(Box::new(invalid_kind("CompositePodGroup", obj, errors)))
}

fn validate(spec: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let w = &spec["workloadRef"];
    if w.is_null() {
        errors.push("spec.workloadRef: Required value".to_string());
    } else {
        for f in ["workloadName", "templateName"] {
            if w[f].as_str().is_none_or(str::is_empty) {
                errors.push(format!("spec.workloadRef.{f}: Required value"));
            }
        }
    }
    let policy = &spec["schedulingPolicy"];
    match (policy["basic"].is_null(), policy["gang"].is_null()) {
        (true, true) => errors.push(
            "spec.schedulingPolicy: Required value: must specify one of: `basic`, `gang`".into(),
        ),
        (false, false) => errors.push(
            "spec.schedulingPolicy: Invalid value: \"{basic, gang}\": must specify exactly one of: `basic`, `gang`"
                .into(),
        ),
        (true, false) => match policy["gang"]["minGroupCount"].as_i64() {
            None => errors.push("spec.schedulingPolicy.gang.minGroupCount: Required value".into()),
            Some(n) if n < 1 => errors.push(format!(
                "spec.schedulingPolicy.gang.minGroupCount: Invalid value: {n}: must be greater than or equal to 1"
            )),
            Some(_) => {}
        },
        (false, true) => {}
    }
    errors.extend(parent_errors(spec));
    errors.extend(topology_errors(spec));
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpg(spec: Value) -> Value {
        json!({"metadata": {"name": "job", "namespace": "ml"}, "spec": spec,
               "status": {"conditions": []}})
    }

    fn refused(r: Result<(), Box<Response>>) -> bool {
        r.is_err_and(|resp| resp.status() == axum::http::StatusCode::UNPROCESSABLE_ENTITY)
    }

    #[test]
    fn a_valid_group_is_defaulted_and_its_status_dropped() {
        let mut obj = cpg(json!({
            "workloadRef": {"workloadName": "w", "templateName": "t"},
            "schedulingPolicy": {"gang": {"minGroupCount": 2}}
        }));
        prepare(None, &mut obj).unwrap();
        assert_eq!(obj["spec"]["disruptionMode"], json!({"single": {}}));
        assert!(obj.get("status").is_none());
        // The spec cannot change afterwards.
        let old = obj.clone();
        obj["spec"]["schedulingPolicy"]["gang"]["minGroupCount"] = json!(1);
        assert!(refused(prepare(Some(&old), &mut obj)));
    }

    #[test]
    fn invalid_groups_are_refused() {
        for spec in [
            json!({"schedulingPolicy": {"basic": {}}}),
            json!({"workloadRef": {"workloadName": "w", "templateName": "t"}}),
            json!({"workloadRef": {"workloadName": "w", "templateName": "t"},
                   "schedulingPolicy": {"gang": {"minGroupCount": 0}}}),
            json!({"workloadRef": {"workloadName": "w", "templateName": "t"},
                   "schedulingPolicy": {"basic": {}}, "parentCompositePodGroupName": "Not_A_Name"}),
        ] {
            let mut obj = cpg(spec.clone());
            assert!(refused(prepare(None, &mut obj)), "{spec}");
        }
    }
}
