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
