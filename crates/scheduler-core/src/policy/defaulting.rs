//! The defaulting a policy implies (its `default` section applied to the fields a pod
//! leaves unset, as JSON-patch operations) and the admission answer built from it.

use k8s_openapi::api::core::v1 as k8s;
use serde::Serialize;
use serde_json::{Value, json};

use super::eval::{PodFields, Verdict, evaluate};
use super::{DefaultToleration, PolicySpec};

/// One JSON-patch (RFC 6902) operation on the Pod, as a mutating webhook returns it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PatchOp {
    pub op: &'static str,
    pub path: String,
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
/// pod has none), and each missing kind of affinity.
pub fn apply_defaults(pod: &k8s::Pod, p: &PolicySpec) -> Defaulted {
    let d = &p.defaults;
    let mut pod = pod.clone();
    let mut patch = Vec::new();
    if pod.spec.is_none() && !d.is_empty() {
        patch.push(PatchOp::add("/spec", json!({})));
    }
    let s = pod.spec.get_or_insert_with(Default::default);
    if let Some(n) = &d.scheduler_name
        && s.scheduler_name.as_deref().unwrap_or("").is_empty()
    {
        s.scheduler_name = Some(n.clone());
        patch.push(PatchOp::add("/spec/schedulerName", json!(n)));
    }
    if let Some(n) = &d.priority_class_name
        && s.priority_class_name.as_deref().unwrap_or("").is_empty()
    {
        s.priority_class_name = Some(n.clone());
        patch.push(PatchOp::add("/spec/priorityClassName", json!(n)));
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
    if let Some(ts) = d.tolerations.as_ref().filter(|t| !t.is_empty())
        && s.tolerations.as_ref().is_none_or(Vec::is_empty)
    {
        let ts = expand_default_tolerations(ts);
        patch.push(PatchOp::add("/spec/tolerations", to_value(&ts)));
        s.tolerations = Some(ts);
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
    let d = apply_defaults(pod, p);
    Admission {
        verdict: evaluate(&PodFields::from_pod(&d.pod), p),
        patch: d.patch,
    }
}
