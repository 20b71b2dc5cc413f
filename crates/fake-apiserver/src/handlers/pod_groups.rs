//! `scheduling.k8s.io/v1beta1` PodGroups as upstream's registry strategy and validation
//! treat them (1.37): status is dropped on create, `disruptionMode` defaults to
//! `{single: {}}`, `schedulingPolicy` is exactly one of `basic` and `gang` with
//! `gang.minCount >= 1`, at most one topology constraint, `resourceClaims` (at most 4, each
//! a unique DNS label with exactly one of a claim and a template; `resourceClaimStatuses`
//! naming spec entries, on the status subresource too), and on update only `gang.minCount`
//! may change. Invalid objects get 422 `Invalid`, worded as the server's.
//! scheduler-plugins' PodGroups are a CRD without such rules and pass unchanged.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::status;
use crate::store::Resource;

/// A PodGroup's status written through the status subresource: its
/// `resourceClaimStatuses` must name entries of the spec. The error is the 422 answer.
pub(super) fn check_status(obj: &Value) -> Result<(), Box<Response>> {
    let errors = claim_statuses_errors(
        &obj["spec"]["resourceClaims"],
        &obj["status"]["resourceClaimStatuses"],
    );
    if errors.is_empty() {
        return Ok(());
    }
    Err(Box::new(invalid(obj, errors)))
}

fn invalid(obj: &Value, errors: Vec<String>) -> Response {
    invalid_kind("PodGroup", obj, errors)
}

pub(super) fn invalid_kind(kind: &str, obj: &Value, mut errors: Vec<String>) -> Response {
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let detail = if errors.len() == 1 {
        errors.remove(0)
    } else {
        format!("[{}]", errors.join(", "))
    };
    status(
        StatusCode::UNPROCESSABLE_ENTITY,
        "Invalid",
        format!("{kind}.scheduling.k8s.io {name:?} is invalid: {detail}"),
    )
}

/// Defaults and validates a PodGroup about to be written (`old`: the stored one, for an
/// update); the error is the 422 answer.
pub(super) fn prepare(
    r: &Resource,
    old: Option<&Value>,
    obj: &mut Value,
) -> Result<(), Box<Response>> {
    if r.collection == "compositepodgroups" {
        return super::composite_pod_groups::prepare(old, obj);
    }
    if r.collection != "podgroups" {
        return Ok(());
    }
    if old.is_none()
        && let Some(o) = obj.as_object_mut()
    {
        o.remove("status");
    }
    if obj["spec"].is_object() && obj["spec"]["disruptionMode"].is_null() {
        obj["spec"]["disruptionMode"] = json!({"single": {}});
    }
    let mut errors = validate(obj);
    if let Some(old) = old {
        errors.extend(validate_update(old, obj));
    }
    if errors.is_empty() {
        return Ok(());
    }
    Err(Box::new(invalid(obj, errors)))
}

fn validate(obj: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let policy = &obj["spec"]["schedulingPolicy"];
    let (basic, gang) = (&policy["basic"], &policy["gang"]);
    match (basic.is_null(), gang.is_null()) {
        (true, true) => errors.push(
            "spec.schedulingPolicy: Required value: must specify one of: `basic`, `gang`".into(),
        ),
        (false, false) => errors.push(
            "spec.schedulingPolicy: Invalid value: \"{basic, gang}\": must specify exactly one of: `basic`, `gang`"
                .into(),
        ),
        (true, false) => match gang["minCount"].as_i64() {
            None => errors.push("spec.schedulingPolicy.gang.minCount: Required value".into()),
            Some(n) if n < 1 => errors.push(format!(
                "spec.schedulingPolicy.gang.minCount: Invalid value: {n}: must be greater than or equal to 1"
            )),
            Some(_) => {}
        },
        (false, true) => {}
    }
    errors.extend(parent_errors(&obj["spec"]));
    errors.extend(resource_claims_errors(&obj["spec"]["resourceClaims"]));
    errors.extend(claim_statuses_errors(
        &obj["spec"]["resourceClaims"],
        &obj["status"]["resourceClaimStatuses"],
    ));
    errors.extend(topology_errors(&obj["spec"]));
    errors
}

/// `spec.parentCompositePodGroupName` (CompositePodGroup, 1.37 alpha; this server runs
/// with the gate on): a `k8s-long-name` when set.
pub(super) fn parent_errors(spec: &Value) -> Vec<String> {
    match &spec["parentCompositePodGroupName"] {
        Value::Null => Vec::new(),
        Value::String(p) if is_dns_subdomain(p) => Vec::new(),
        other => vec![format!(
            "spec.parentCompositePodGroupName: Invalid value: {other}: {SUBDOMAIN_MSG}"
        )],
    }
}

/// At most one topology constraint, each with a key (PodGroups and CompositePodGroups).
pub(super) fn topology_errors(spec: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    if let Some(topology) = spec["schedulingConstraints"]["topology"].as_array() {
        if topology.len() > 1 {
            errors.push(format!(
                "spec.schedulingConstraints.topology: Too many: {}: must have at most 1 items",
                topology.len()
            ));
        }
        for (i, t) in topology.iter().enumerate() {
            if t["key"].as_str().is_none_or(str::is_empty) {
                errors.push(format!(
                    "spec.schedulingConstraints.topology[{i}].key: Required value"
                ));
            }
        }
    }
    errors
}

/// Upstream `MaxPodGroupResourceClaims`.
const MAX_RESOURCE_CLAIMS: usize = 4;

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters (`k8s-short-name`).
pub(super) fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    let ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.len() <= 63
        && ok(&b[0])
        && ok(&b[b.len() - 1])
        && b.iter().all(|c| ok(c) || *c == b'-')
}

/// Dot-separated DNS labels, at most 253 characters (`k8s-long-name`).
pub(super) fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

pub(super) const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// `spec.resourceClaims` (DRAWorkloadResourceClaims): at most 4 entries, each named by a
/// unique DNS label, with exactly one of `resourceClaimName` and
/// `resourceClaimTemplateName`.
fn resource_claims_errors(claims: &Value) -> Vec<String> {
    let path = "spec.resourceClaims";
    let Some(items) = claims.as_array() else {
        return Vec::new();
    };
    let mut errors = Vec::new();
    if items.len() > MAX_RESOURCE_CLAIMS {
        errors.push(format!(
            "{path}: Too many: {}: must have at most {MAX_RESOURCE_CLAIMS} items",
            items.len()
        ));
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, c) in items.iter().enumerate() {
        let at = format!("{path}[{i}]");
        match c["name"].as_str().filter(|n| !n.is_empty()) {
            None => errors.push(format!("{at}.name: Required value")),
            Some(n) if !is_dns_label(n) => {
                errors.push(format!("{at}.name: Invalid value: {n:?}: {LABEL_MSG}"));
            }
            Some(n) if seen.contains(&n) => {
                errors.push(format!("{at}.name: Duplicate value: {n:?}"));
            }
            Some(n) => seen.push(n),
        }
        let set: Vec<(&str, &str)> = ["resourceClaimName", "resourceClaimTemplateName"]
            .into_iter()
            .filter_map(|f| c[f].as_str().map(|v| (f, v)))
            .collect();
        match set.as_slice() {
            [] => errors.push(format!(
                "{at}: Required value: must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"
            )),
            [(field, value)] if !is_dns_subdomain(value) => {
                errors.push(format!("{at}.{field}: Invalid value: {value:?}: {SUBDOMAIN_MSG}"));
            }
            [_] => {}
            _ => errors.push(format!(
                "{at}: Invalid value: \"{{resourceClaimName, resourceClaimTemplateName}}\": must specify exactly one of: `resourceClaimName`, `resourceClaimTemplateName`"
            )),
        }
    }
    errors
}

/// `status.resourceClaimStatuses`: at most 4, each naming a spec entry once.
fn claim_statuses_errors(claims: &Value, statuses: &Value) -> Vec<String> {
    let path = "status.resourceClaimStatuses";
    let Some(items) = statuses.as_array() else {
        return Vec::new();
    };
    let mut errors = Vec::new();
    if items.len() > MAX_RESOURCE_CLAIMS {
        errors.push(format!(
            "{path}: Too many: {}: must have at most {MAX_RESOURCE_CLAIMS} items",
            items.len()
        ));
    }
    let in_spec = |n: &str| {
        claims
            .as_array()
            .is_some_and(|a| a.iter().any(|c| c["name"].as_str() == Some(n)))
    };
    let mut seen: Vec<&str> = Vec::new();
    for (i, st) in items.iter().enumerate() {
        let at = format!("{path}[{i}]");
        match st["name"].as_str().filter(|n| !n.is_empty()) {
            None => errors.push(format!("{at}.name: Required value")),
            Some(n) if seen.contains(&n) => {
                errors.push(format!("{at}.name: Duplicate value: {n:?}"));
            }
            Some(n) => {
                if !in_spec(n) {
                    errors.push(format!(
                        "{at}.name: Invalid value: {n:?}: must match the name of an entry in `spec.resourceClaims`"
                    ));
                }
                seen.push(n);
            }
        }
        if let Some(v) = st["resourceClaimName"].as_str()
            && !is_dns_subdomain(v)
        {
            errors.push(format!(
                "{at}.resourceClaimName: Invalid value: {v:?}: {SUBDOMAIN_MSG}"
            ));
        }
    }
    errors
}

/// Every spec field but `schedulingPolicy.gang.minCount` is immutable.
pub(super) fn validate_update(old: &Value, new: &Value) -> Vec<String> {
    let without_min_count = |spec: &Value| {
        let mut s = spec.clone();
        if let Some(g) = s["schedulingPolicy"]["gang"].as_object_mut() {
            g.remove("minCount");
        }
        s
    };
    let (o, n) = (&old["spec"], &new["spec"]);
    let mut errors = Vec::new();
    let keys: std::collections::BTreeSet<&String> = o
        .as_object()
        .into_iter()
        .chain(n.as_object())
        .flat_map(|m| m.keys())
        .collect();
    let (o, n) = (without_min_count(o), without_min_count(n));
    for k in keys {
        if o[k.as_str()] != n[k.as_str()] {
            errors.push(format!(
                "spec.{k}: Invalid value: {}: field is immutable",
                n[k.as_str()]
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::resource;

    fn group(spec: Value) -> Value {
        json!({"metadata": {"name": "train", "namespace": "ml"}, "spec": spec, "status": {"conditions": []}})
    }

    #[allow(clippy::boxed_local)] // what prepare returns
    fn message(r: Box<Response>) -> String {
        let r = *r;
        let body =
            futures::executor::block_on(axum::body::to_bytes(r.into_body(), 1 << 20)).unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["reason"], "Invalid");
        v["message"].as_str().unwrap().to_string()
    }

    #[test]
    fn creation_defaults_and_validates_like_the_registry() {
        let r = resource("podgroups");
        let mut ok = group(json!({"schedulingPolicy": {"gang": {"minCount": 3}}}));
        prepare(r, None, &mut ok).unwrap();
        assert_eq!(ok["spec"]["disruptionMode"], json!({"single": {}}));
        assert!(ok.get("status").is_none(), "status is dropped on create");

        let mut zero = group(json!({"schedulingPolicy": {"gang": {"minCount": 0}}}));
        assert_eq!(
            message(prepare(r, None, &mut zero).unwrap_err()),
            "PodGroup.scheduling.k8s.io \"train\" is invalid: spec.schedulingPolicy.gang.minCount: Invalid value: 0: must be greater than or equal to 1"
        );
        let mut none = group(json!({}));
        assert!(message(prepare(r, None, &mut none).unwrap_err()).contains("Required value"));
        let mut both = group(json!({"schedulingPolicy": {"basic": {}, "gang": {"minCount": 1}}}));
        assert!(message(prepare(r, None, &mut both).unwrap_err()).contains("exactly one of"));
        let mut two_keys = group(json!({"schedulingPolicy": {"basic": {}},
            "schedulingConstraints": {"topology": [{"key": "a"}, {"key": "b"}]}}));
        assert!(message(prepare(r, None, &mut two_keys).unwrap_err()).contains("at most 1"));
    }

    #[test]
    fn only_min_count_may_change() {
        let r = resource("podgroups");
        let mut old = group(json!({"schedulingPolicy": {"gang": {"minCount": 3}}}));
        prepare(r, None, &mut old).unwrap();
        let mut lowered = old.clone();
        lowered["spec"]["schedulingPolicy"]["gang"]["minCount"] = json!(2);
        prepare(r, Some(&old), &mut lowered).unwrap();

        let mut to_basic = old.clone();
        to_basic["spec"]["schedulingPolicy"] = json!({"basic": {}});
        let m = message(prepare(r, Some(&old), &mut to_basic).unwrap_err());
        assert!(m.contains("spec.schedulingPolicy: Invalid value"), "{m}");
        assert!(m.ends_with("field is immutable"), "{m}");
    }

    #[test]
    fn resource_claims_are_validated_and_immutable() {
        let r = resource("podgroups");
        let basic =
            |claims: Value| json!({"schedulingPolicy": {"basic": {}}, "resourceClaims": claims});
        let mut ok = group(basic(json!([
            {"name": "shared", "resourceClaimName": "nvlink"},
            {"name": "gpus", "resourceClaimTemplateName": "gpu"}
        ])));
        prepare(r, None, &mut ok).unwrap();
        assert_eq!(
            ok["spec"]["resourceClaims"][1]["resourceClaimTemplateName"],
            "gpu"
        );

        let five: Vec<Value> = (0..5)
            .map(|i| json!({"name": format!("c{i}"), "resourceClaimName": "x"}))
            .collect();
        let mut too_many = group(basic(json!(five)));
        assert_eq!(
            message(prepare(r, None, &mut too_many).unwrap_err()),
            "PodGroup.scheduling.k8s.io \"train\" is invalid: spec.resourceClaims: Too many: 5: must have at most 4 items"
        );
        let mut neither = group(basic(json!([{"name": "a"}])));
        assert!(
            message(prepare(r, None, &mut neither).unwrap_err())
                .ends_with("spec.resourceClaims[0]: Required value: must specify one of: `resourceClaimName`, `resourceClaimTemplateName`")
        );
        let mut both = group(basic(
            json!([{"name": "a", "resourceClaimName": "x", "resourceClaimTemplateName": "t"}]),
        ));
        assert!(
            message(prepare(r, None, &mut both).unwrap_err())
                .contains("must specify exactly one of")
        );
        let mut dup = group(basic(json!([
            {"name": "a", "resourceClaimName": "x"}, {"name": "a", "resourceClaimName": "y"}
        ])));
        assert!(
            message(prepare(r, None, &mut dup).unwrap_err())
                .ends_with("spec.resourceClaims[1].name: Duplicate value: \"a\"")
        );
        let mut bad_name = group(basic(json!([{"name": "A_B", "resourceClaimName": "x"}])));
        assert!(
            message(prepare(r, None, &mut bad_name).unwrap_err()).contains(
                "spec.resourceClaims[0].name: Invalid value: \"A_B\": a lowercase RFC 1123 label"
            )
        );

        // The whole list is immutable.
        let mut changed = ok.clone();
        changed["spec"]["resourceClaims"][0]["resourceClaimName"] = json!("other");
        let m = message(prepare(r, Some(&ok), &mut changed).unwrap_err());
        assert!(m.contains("spec.resourceClaims: Invalid value"), "{m}");
        assert!(m.ends_with("field is immutable"), "{m}");
        let mut added = group(json!({"schedulingPolicy": {"basic": {}}}));
        prepare(r, None, &mut added).unwrap();
        let mut with_claims = added.clone();
        with_claims["spec"]["resourceClaims"] = json!([{"name": "a", "resourceClaimName": "x"}]);
        assert!(
            message(prepare(r, Some(&added), &mut with_claims).unwrap_err())
                .ends_with("field is immutable")
        );
    }

    #[test]
    fn claim_statuses_must_name_spec_entries() {
        let r = resource("podgroups");
        let mut g = group(json!({"schedulingPolicy": {"basic": {}},
            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "gpu"}]}));
        prepare(r, None, &mut g).unwrap();
        g["status"] = json!({"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "train-gpus-x"}]});
        check_status(&g).unwrap();
        g["status"] =
            json!({"resourceClaimStatuses": [{"name": "other", "resourceClaimName": "c"}]});
        assert_eq!(
            message(check_status(&g).unwrap_err()),
            "PodGroup.scheduling.k8s.io \"train\" is invalid: status.resourceClaimStatuses[0].name: Invalid value: \"other\": must match the name of an entry in `spec.resourceClaims`"
        );
    }

    #[test]
    fn coscheduling_groups_pass_unchanged() {
        let r = resource(crate::store::COSCHEDULING_POD_GROUPS);
        let mut g = json!({"metadata": {"name": "tf"}, "spec": {"minMember": 0}});
        let before = g.clone();
        prepare(r, None, &mut g).unwrap();
        assert_eq!(g, before);
    }
}
