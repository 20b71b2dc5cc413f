//! The defaulting a policy implies (its `default` section applied to the fields a pod
//! leaves unset, as JSON-patch operations) and the admission answer built from it.
//!
//! The webhook sees a pod after the API server's own defaulting and its built-in mutating
//! admission plugins (Priority, DefaultTolerationSeconds, RuntimeClass, ...), and after
//! any webhook's patch the server runs those plugins again. So "unset" means "unset by the
//! user", as far as the pod tells: `schedulerName: default-scheduler` (the server's
//! default), the DefaultTolerationSeconds tolerations and a priority class the server
//! named from the cluster's globalDefault class ([`ServerSet`]) do not count as set, and a
//! defaulted priority class also removes the `spec.priority` (and a server-set
//! `preemptionPolicy`) the Priority plugin derived from the old class, so that its second
//! run computes them from the new one instead of refusing the pod.

use k8s_openapi::api::core::v1 as k8s;
use serde::Serialize;
use serde_json::{Value, json};

use super::eval::{PodFields, TolerationView, Verdict, evaluate};
use super::{DEFAULT_SCHEDULER, DefaultToleration, PolicySpec};

/// One JSON-patch (RFC 6902) operation on the Pod, as a mutating webhook returns it.
/// `remove` operations carry no value (`Value::Null`, not serialized).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PatchOp {
    pub op: &'static str,
    pub path: String,
    #[serde(skip_serializing_if = "Value::is_null")]
    pub value: Value,
}

impl PatchOp {
    fn add(path: impl Into<String>, value: Value) -> Self {
        PatchOp {
            op: "add",
            path: path.into(),
            value,
        }
    }

    fn remove(path: impl Into<String>) -> Self {
        PatchOp {
            op: "remove",
            path: path.into(),
            value: Value::Null,
        }
    }
}

/// What the API server set on the pod before the webhook saw it that the pod alone cannot
/// tell: whether its priority class is the cluster's globalDefault one, which the Priority
/// admission plugin names on pods that name none.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerSet {
    pub global_default_class: Option<GlobalDefaultClass>,
}

/// The PriorityClass marked `globalDefault: true`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GlobalDefaultClass {
    pub name: String,
    /// The class's `preemptionPolicy`, which the Priority plugin copied onto the pod.
    pub preemption_policy: Option<String>,
}

impl ServerSet {
    /// Whether `name` is the class the server named by default.
    fn is_default_class(&self, name: &str) -> bool {
        self.global_default_class
            .as_ref()
            .is_some_and(|c| c.name == name)
    }
}

/// A toleration the DefaultTolerationSeconds admission plugin adds to every pod.
fn is_server_toleration(t: &k8s::Toleration) -> bool {
    TolerationView::from_k8s(t).is_api_server_default()
}

/// Default tolerations as Kubernetes tolerations: `values` gives one toleration per value.
pub fn expand_default_tolerations(ts: &[DefaultToleration]) -> Vec<k8s::Toleration> {
    let mut out = Vec::new();
    for t in ts {
        let values: Vec<Option<String>> = match (&t.values, &t.value) {
            (Some(vs), _) if !vs.is_empty() => vs.iter().cloned().map(Some).collect(),
            (_, v) => vec![v.clone()],
        };
        for value in values {
            out.push(k8s::Toleration {
                key: t.key.clone(),
                operator: t.operator.clone(),
                value,
                effect: t.effect.clone(),
                toleration_seconds: t.toleration_seconds,
            });
        }
    }
    out
}

/// The pod after defaulting, and the JSON patch that produces it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Defaulted {
    pub pod: k8s::Pod,
    pub patch: Vec<PatchOp>,
}

/// Escapes a JSON-pointer reference token (RFC 6901).
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

fn to_value<T: Serialize>(x: &T) -> Value {
    serde_json::to_value(x).expect("k8s types serialize")
}

/// Applies the policy's `default` section to the fields the pod leaves unset:
/// schedulerName, priorityClassName, each missing nodeSelector key, tolerations (when the
/// pod has none of its own), and each missing kind of affinity. Nothing known about the
/// server's defaults: [`apply_defaults_after`] with an empty [`ServerSet`].
pub fn apply_defaults(pod: &k8s::Pod, p: &PolicySpec) -> Defaulted {
    apply_defaults_after(pod, p, &ServerSet::default())
}

/// [`apply_defaults`] on a pod the API server has defaulted and admitted so far (see the
/// module doc): what the server filled in counts as unset.
pub fn apply_defaults_after(pod: &k8s::Pod, p: &PolicySpec, server: &ServerSet) -> Defaulted {
    let d = &p.defaults;
    let mut pod = pod.clone();
    let mut patch = Vec::new();
    if pod.spec.is_none() && !d.is_empty() {
        patch.push(PatchOp::add("/spec", json!({})));
    }
    let s = pod.spec.get_or_insert_with(Default::default);
    // The server defaults an unset schedulerName before webhooks run.
    if let Some(n) = &d.scheduler_name
        && matches!(
            s.scheduler_name.as_deref(),
            None | Some("" | DEFAULT_SCHEDULER)
        )
        && s.scheduler_name.as_deref() != Some(n.as_str())
    {
        s.scheduler_name = Some(n.clone());
        patch.push(PatchOp::add("/spec/schedulerName", json!(n)));
    }
    if let Some(n) = &d.priority_class_name {
        let current = s.priority_class_name.clone().unwrap_or_default();
        let by_server = server.is_default_class(&current);
        if (current.is_empty() || by_server) && current != *n {
            s.priority_class_name = Some(n.clone());
            patch.push(PatchOp::add("/spec/priorityClassName", json!(n)));
            // The Priority plugin derived spec.priority from the old (or no) class; left in
            // place, its second run refuses the pod for a value that disagrees with the new
            // class. Removed, it computes it.
            if s.priority.take().is_some() {
                patch.push(PatchOp::remove("/spec/priority"));
            }
            // Likewise the preemptionPolicy it copied from the globalDefault class.
            if by_server
                && s.preemption_policy.is_some()
                && s.preemption_policy
                    == server
                        .global_default_class
                        .as_ref()
                        .and_then(|c| c.preemption_policy.clone())
            {
                s.preemption_policy = None;
                patch.push(PatchOp::remove("/spec/preemptionPolicy"));
            }
        }
    }
    if let Some(ns) = d.node_selector.as_ref().filter(|m| !m.is_empty()) {
        match &mut s.node_selector {
            Some(m) if !m.is_empty() => {
                for (k, x) in ns {
                    if !m.contains_key(k) {
                        m.insert(k.clone(), x.clone());
                        patch.push(PatchOp::add(
                            format!("/spec/nodeSelector/{}", escape(k)),
                            json!(x),
                        ));
                    }
                }
            }
            _ => {
                s.node_selector = Some(ns.clone());
                patch.push(PatchOp::add("/spec/nodeSelector", to_value(ns)));
            }
        }
    }
    // The tolerations DefaultTolerationSeconds added are not the pod's own: with only those,
    // the defaults are appended after them (replacing the list would drop them, and the
    // plugin's second run would add them back anyway).
    if let Some(ts) = d.tolerations.as_ref().filter(|t| !t.is_empty())
        && s.tolerations.iter().flatten().all(is_server_toleration)
    {
        let have = s.tolerations.get_or_insert_with(Vec::new);
        let add: Vec<k8s::Toleration> = expand_default_tolerations(ts)
            .into_iter()
            .filter(|t| !have.contains(t))
            .collect();
        if have.is_empty() {
            patch.push(PatchOp::add("/spec/tolerations", to_value(&add)));
        } else {
            for t in &add {
                patch.push(PatchOp::add("/spec/tolerations/-", to_value(t)));
            }
        }
        have.extend(add);
    }
    if let Some(da) = &d.affinity {
        match &mut s.affinity {
            None => {
                s.affinity = Some(da.clone());
                patch.push(PatchOp::add("/spec/affinity", to_value(da)));
            }
            Some(a) => {
                if a.node_affinity.is_none()
                    && let Some(x) = &da.node_affinity
                {
                    a.node_affinity = Some(x.clone());
                    patch.push(PatchOp::add("/spec/affinity/nodeAffinity", to_value(x)));
                }
                if a.pod_affinity.is_none()
                    && let Some(x) = &da.pod_affinity
                {
                    a.pod_affinity = Some(x.clone());
                    patch.push(PatchOp::add("/spec/affinity/podAffinity", to_value(x)));
                }
                if a.pod_anti_affinity.is_none()
                    && let Some(x) = &da.pod_anti_affinity
                {
                    a.pod_anti_affinity = Some(x.clone());
                    patch.push(PatchOp::add("/spec/affinity/podAntiAffinity", to_value(x)));
                }
            }
        }
    }
    Defaulted { pod, patch }
}

/// What the future mutating webhook answers: the defaulting patch and the verdict on the
/// defaulted pod.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Admission {
    pub patch: Vec<PatchOp>,
    pub verdict: Verdict,
}

pub fn admit(pod: &k8s::Pod, p: &PolicySpec) -> Admission {
    admit_after(pod, p, &ServerSet::default())
}

/// [`admit`] on a pod the API server has defaulted and admitted so far.
pub fn admit_after(pod: &k8s::Pod, p: &PolicySpec, server: &ServerSet) -> Admission {
    let d = apply_defaults_after(pod, p, server);
    Admission {
        verdict: evaluate(&PodFields::from_pod(&d.pod), p),
        patch: d.patch,
    }
}

#[cfg(test)]
mod tests {
    //! Defaults on pods as the webhook sees them on a real API server: schedulerName
    //! defaulted, `spec.priority` resolved, DefaultTolerationSeconds' tolerations added and
    //! a RuntimeClass's nodeSelector merged before any webhook runs.

    use serde_json::json;

    use super::*;
    use crate::policy::parse;

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
}
