//! Server-side pod defaulting that matters to scheduling, and the DefaultTolerationSeconds
//! plugin.

use serde_json::{Value, json};

/// What `--default-not-ready-toleration-seconds` and `--default-unreachable-...` default to.
pub(crate) const DEFAULT_TOLERATION_SECONDS: i64 = 300;
pub(crate) const NOT_READY: &str = "node.kubernetes.io/not-ready";
pub(crate) const UNREACHABLE: &str = "node.kubernetes.io/unreachable";

/// The API server's defaulting of a pod's scheduling fields: an unset or empty
/// `schedulerName` is `default-scheduler`.
pub(super) fn server_defaults(pod: &mut Value) {
    if !pod["spec"].is_object() {
        pod["spec"] = json!({});
    }
    if pod["spec"]["schedulerName"]
        .as_str()
        .is_none_or(str::is_empty)
    {
        pod["spec"]["schedulerName"] = json!("default-scheduler");
    }
}

/// DefaultTolerationSeconds: unless a toleration already covers the taint (its key, or any
/// key; NoExecute or any effect), the pod tolerates `not-ready` and `unreachable`
/// (Exists, NoExecute) for 300 s, appended to its list.
pub(super) fn default_toleration_seconds(pod: &mut Value) {
    let covers = |taint: &str, t: &Value| {
        let key = t["key"].as_str().unwrap_or("");
        let effect = t["effect"].as_str().unwrap_or("");
        (key == taint || key.is_empty()) && (effect == "NoExecute" || effect.is_empty())
    };
    let list = pod["spec"]["tolerations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut add = Vec::new();
    for taint in [NOT_READY, UNREACHABLE] {
        if !list.iter().any(|t| covers(taint, t)) {
            add.push(
                json!({"key": taint, "operator": "Exists", "effect": "NoExecute",
                            "tolerationSeconds": DEFAULT_TOLERATION_SECONDS}),
            );
        }
    }
    if add.is_empty() {
        return;
    }
    let mut list = list;
    list.extend(add);
    pod["spec"]["tolerations"] = Value::Array(list);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tolerations(pod: &Value) -> Vec<(String, String)> {
        pod["spec"]["tolerations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                (
                    t["key"].as_str().unwrap_or("").to_string(),
                    t["effect"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn adds_both_tolerations_after_the_pods_own() {
        let mut pod = json!({"spec": {"tolerations": [{"key": "a", "operator": "Exists"}]}});
        default_toleration_seconds(&mut pod);
        assert_eq!(
            tolerations(&pod),
            [
                ("a".into(), "".into()),
                (NOT_READY.into(), "NoExecute".into()),
                (UNREACHABLE.into(), "NoExecute".into())
            ]
        );
        assert_eq!(pod["spec"]["tolerations"][1]["tolerationSeconds"], 300);
        // Running again (reinvocation) changes nothing.
        let before = pod.clone();
        default_toleration_seconds(&mut pod);
        assert_eq!(pod, before);
    }

    #[test]
    fn a_toleration_covering_the_taint_is_enough() {
        // Any key, any effect: tolerates both.
        let mut pod = json!({"spec": {"tolerations": [{"operator": "Exists"}]}});
        default_toleration_seconds(&mut pod);
        assert_eq!(tolerations(&pod).len(), 1);
        // The not-ready key with any effect: only unreachable is added.
        let mut pod = json!({"spec": {"tolerations": [{"key": NOT_READY, "operator": "Exists"}]}});
        default_toleration_seconds(&mut pod);
        assert_eq!(
            tolerations(&pod),
            [
                (NOT_READY.into(), "".into()),
                (UNREACHABLE.into(), "NoExecute".into())
            ]
        );
        // NoSchedule does not cover NoExecute.
        let mut pod = json!({"spec": {"tolerations": [{"key": NOT_READY, "operator": "Exists", "effect": "NoSchedule"}]}});
        default_toleration_seconds(&mut pod);
        assert_eq!(tolerations(&pod).len(), 3);
    }

    #[test]
    fn scheduler_name_defaults_when_unset_or_empty() {
        for spec in [json!({}), json!({"schedulerName": ""})] {
            let mut pod = json!({"spec": spec});
            server_defaults(&mut pod);
            assert_eq!(pod["spec"]["schedulerName"], "default-scheduler");
        }
        let mut pod = json!({"spec": {"schedulerName": "mine"}});
        server_defaults(&mut pod);
        assert_eq!(pod["spec"]["schedulerName"], "mine");
    }
}
