//! Defaults on pods as the webhook sees them on a real API server: schedulerName
//! defaulted, `spec.priority` resolved, DefaultTolerationSeconds' tolerations added and
//! a RuntimeClass's nodeSelector merged before any webhook runs.

use serde_json::json;

use k8s_openapi::api::core::v1 as k8s;

use super::*;

fn policy(default: &str) -> PolicySpec {
    let text = format!(
        "apiVersion: scheduling.ferrosched.io/v1alpha1\nkind: SchedulingPolicy\nmetadata:\n  name: p\nspec:\n  allowed:\n    schedulerNames: []\n    tolerations: []\n  default:\n{}",
        default
            .lines()
            .map(|l| format!("    {l}\n"))
            .collect::<String>()
    );
    parse(&text)
        .unwrap_or_else(|e| panic!("{e:?}"))
        .remove(0)
        .spec
}

fn pod(spec: serde_json::Value) -> k8s::Pod {
    serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
}

fn server_tolerations() -> serde_json::Value {
    json!([
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    ])
}

fn patch(d: &Defaulted) -> serde_json::Value {
    serde_json::to_value(&d.patch).unwrap()
}

#[test]
fn tolerations_are_appended_after_the_servers_defaults() {
    let p = policy(
        "tolerations: [{key: dedicated, operator: Equal, value: team-a, effect: NoSchedule}]",
    );
    let d = apply_defaults(&pod(json!({"tolerations": server_tolerations()})), &p);
    assert_eq!(
        patch(&d),
        json!([{"op": "add", "path": "/spec/tolerations/-", "value":
            {"key": "dedicated", "operator": "Equal", "value": "team-a", "effect": "NoSchedule"}}])
    );
    let ts = d.pod.spec.unwrap().tolerations.unwrap();
    assert_eq!(ts.len(), 3, "the server's two are kept: {ts:?}");
    assert_eq!(ts[2].key.as_deref(), Some("dedicated"));
}

#[test]
fn tolerations_of_the_pods_own_count_as_set() {
    let p = policy(
        "tolerations: [{key: dedicated, operator: Equal, value: team-a, effect: NoSchedule}]",
    );
    let mut ts = server_tolerations();
    ts.as_array_mut()
        .unwrap()
        .push(json!({"key": "gpu", "operator": "Exists"}));
    let d = apply_defaults(&pod(json!({"tolerations": ts})), &p);
    assert!(d.patch.is_empty(), "{:?}", d.patch);
}

#[test]
fn a_server_toleration_with_other_seconds_or_effect_is_the_pods_own() {
    let p = policy("tolerations: [{key: dedicated, operator: Exists, effect: NoSchedule}]");
    // No tolerationSeconds: DefaultTolerationSeconds always sets them, so the user wrote it.
    let d = apply_defaults(
        &pod(
            json!({"tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}]}),
        ),
        &p,
    );
    assert!(d.patch.is_empty(), "{:?}", d.patch);
}

#[test]
fn tolerations_without_any_still_replace_the_empty_list() {
    let p = policy("tolerations: [{key: dedicated, operator: Exists, effect: NoSchedule}]");
    let d = apply_defaults(&pod(json!({"tolerations": []})), &p);
    assert_eq!(
        patch(&d),
        json!([{"op": "add", "path": "/spec/tolerations", "value":
            [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]}])
    );
}

#[test]
fn a_defaulted_priority_class_removes_the_priority_the_server_computed() {
    let p = policy("priorityClassName: gold");
    // Priority admission set 0 (no class, no globalDefault class) before the webhook.
    let d = apply_defaults(&pod(json!({"priority": 0})), &p);
    assert_eq!(
        patch(&d),
        json!([
            {"op": "add", "path": "/spec/priorityClassName", "value": "gold"},
            {"op": "remove", "path": "/spec/priority"},
        ])
    );
    let s = d.pod.spec.unwrap();
    assert_eq!(s.priority, None);
    assert_eq!(s.priority_class_name.as_deref(), Some("gold"));
}

#[test]
fn a_pods_own_preemption_policy_is_kept_without_a_global_default_class() {
    let p = policy("priorityClassName: gold");
    let d = apply_defaults(
        &pod(json!({"priority": 0, "preemptionPolicy": "Never"})),
        &p,
    );
    assert!(!patch(&d).to_string().contains("preemptionPolicy"));
    assert_eq!(
        d.pod.spec.unwrap().preemption_policy.as_deref(),
        Some("Never")
    );
}

#[test]
fn the_global_default_class_counts_as_unset() {
    let p = policy("priorityClassName: gold");
    let server = ServerSet {
        global_default_class: Some(GlobalDefaultClass {
            name: "cluster-default".into(),
            preemption_policy: Some("PreemptLowerPriority".into()),
        }),
    };
    let spec = json!({"priorityClassName": "cluster-default", "priority": 100,
                      "preemptionPolicy": "PreemptLowerPriority"});
    let d = apply_defaults_after(&pod(spec.clone()), &p, &server);
    assert_eq!(
        patch(&d),
        json!([
            {"op": "add", "path": "/spec/priorityClassName", "value": "gold"},
            {"op": "remove", "path": "/spec/priority"},
            {"op": "remove", "path": "/spec/preemptionPolicy"},
        ])
    );
    // Without knowing the class is the globalDefault one, the pod named it itself.
    assert!(apply_defaults(&pod(spec), &p).patch.is_empty());
    // Another class the pod names is its own choice.
    let d = apply_defaults_after(
        &pod(json!({"priorityClassName": "silver", "priority": 5})),
        &p,
        &server,
    );
    assert!(d.patch.is_empty());
}

#[test]
fn a_preemption_policy_other_than_the_default_classes_is_the_pods_own() {
    let p = policy("priorityClassName: gold");
    let server = ServerSet {
        global_default_class: Some(GlobalDefaultClass {
            name: "cluster-default".into(),
            preemption_policy: Some("PreemptLowerPriority".into()),
        }),
    };
    // The Priority plugin would have refused a disagreeing value, so this cannot come
    // from the server; kept (the plugin's second run judges it against gold).
    let d = apply_defaults_after(
        &pod(
            json!({"priorityClassName": "cluster-default", "priority": 100, "preemptionPolicy": "Never"}),
        ),
        &p,
        &server,
    );
    assert_eq!(
        d.pod.spec.unwrap().preemption_policy.as_deref(),
        Some("Never")
    );
}

#[test]
fn the_servers_scheduler_name_counts_as_unset() {
    let p = policy("schedulerName: batch");
    let d = apply_defaults(&pod(json!({"schedulerName": "default-scheduler"})), &p);
    assert_eq!(
        patch(&d),
        json!([{"op": "add", "path": "/spec/schedulerName", "value": "batch"}])
    );
    assert!(
        apply_defaults(&pod(json!({"schedulerName": "other"})), &p)
            .patch
            .is_empty()
    );
    let p = policy("schedulerName: default-scheduler");
    assert!(
        apply_defaults(&pod(json!({"schedulerName": "default-scheduler"})), &p)
            .patch
            .is_empty()
    );
}

#[test]
fn node_selector_keys_are_added_to_what_a_runtime_class_merged() {
    let p = policy("nodeSelector: {kubernetes.io/arch: amd64, sandbox: gvisor}");
    // RuntimeClass admission merged the class's `sandbox: kata` before the webhook.
    let d = apply_defaults(&pod(json!({"nodeSelector": {"sandbox": "kata"}})), &p);
    assert_eq!(
        patch(&d),
        json!([{"op": "add", "path": "/spec/nodeSelector/kubernetes.io~1arch", "value": "amd64"}])
    );
    assert_eq!(
        d.pod.spec.unwrap().node_selector.unwrap()["sandbox"],
        "kata",
        "what the server merged wins"
    );
}

#[test]
fn affinity_kinds_are_added_as_before_the_server_sets_none() {
    let p = policy(
        "affinity:\n  podAntiAffinity:\n    preferredDuringSchedulingIgnoredDuringExecution:\n    - weight: 1\n      podAffinityTerm: {topologyKey: kubernetes.io/hostname}",
    );
    let d = apply_defaults(
        &pod(
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Exists"}]}]}}}}),
        ),
        &p,
    );
    assert_eq!(d.patch.len(), 1);
    assert_eq!(d.patch[0].path, "/spec/affinity/podAntiAffinity");
}
