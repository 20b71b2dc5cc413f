//! Test objects as JSON: [`NodeBuilder`] and [`PodBuilder`] for the scenarios' fake nodes
//! and pods, and the JSON merge they are built with.

use serde_json::{Value, json};

/// RFC 3339 now, whole seconds (what Kubernetes writes in conditions).
pub fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// JSON merge of `patch` into `target` (maps merge recursively, everything else replaces).
pub fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                merge(t.entry(k).or_insert(Value::Null), v);
            }
        }
        (t, p) => *t = p,
    }
}

fn push(v: &mut Value, item: Value) {
    if !v.is_array() {
        *v = json!([]);
    }
    v.as_array_mut().unwrap().push(item);
}

/// A kwok-like Node under construction (see [`Env::node`]).
#[derive(Clone, Debug)]
pub struct NodeBuilder(pub Value);

impl NodeBuilder {
    pub fn cpu(mut self, cpu: &str) -> Self {
        self.0["status"]["capacity"]["cpu"] = json!(cpu);
        self.0["status"]["allocatable"]["cpu"] = json!(cpu);
        self
    }
    pub fn memory(mut self, memory: &str) -> Self {
        self.0["status"]["capacity"]["memory"] = json!(memory);
        self.0["status"]["allocatable"]["memory"] = json!(memory);
        self
    }
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.0["metadata"]["labels"][key] = json!(value);
        self
    }
    pub fn zone(self, zone: &str) -> Self {
        self.label("topology.kubernetes.io/zone", zone)
    }
    pub fn annotate(mut self, key: &str, value: &str) -> Self {
        self.0["metadata"]["annotations"][key] = json!(value);
        self
    }
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        push(
            &mut self.0["spec"]["taints"],
            json!({"key": key, "value": value, "effect": effect}),
        );
        self
    }
}

/// A Pod under construction (see [`Env::pod`]).
#[derive(Clone, Debug)]
pub struct PodBuilder(pub Value);

impl PodBuilder {
    pub fn cpu(mut self, cpu: &str) -> Self {
        self.0["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!(cpu);
        self
    }
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.0["metadata"]["labels"][key] = json!(value);
        self
    }
    /// A full scheduler name (see [`Env::profile`]).
    pub fn scheduler(mut self, name: &str) -> Self {
        self.0["spec"]["schedulerName"] = json!(name);
        self
    }
    /// priorityClassName plus the matching spec.priority: the Priority admission plugin
    /// (a real server's, and the fake server's) fills it in and accepts an equal value.
    pub fn priority(mut self, class: &str, value: i32) -> Self {
        self.0["spec"]["priorityClassName"] = json!(class);
        self.0["spec"]["priority"] = json!(value);
        self
    }
    pub fn toleration(mut self, key: &str, value: &str, effect: &str) -> Self {
        push(
            &mut self.0["spec"]["tolerations"],
            json!({"key": key, "operator": "Equal", "value": value, "effect": effect}),
        );
        self
    }
    pub fn runtime_class(mut self, class: &str) -> Self {
        self.0["spec"]["runtimeClassName"] = json!(class);
        self
    }
    /// Already bound (created with spec.nodeName, bypassing any scheduler).
    pub fn on_node(mut self, node: &str) -> Self {
        self.0["spec"]["nodeName"] = json!(node);
        self
    }
    pub fn affinity(mut self, affinity: Value) -> Self {
        self.0["spec"]["affinity"] = affinity;
        self
    }
    /// Mounts the claim `claim` as a volume of the same name.
    pub fn claim(mut self, claim: &str) -> Self {
        push(
            &mut self.0["spec"]["volumes"],
            json!({"name": claim, "persistentVolumeClaim": {"claimName": claim}}),
        );
        self
    }
    pub fn merge(mut self, patch: Value) -> Self {
        merge(&mut self.0, patch);
        self
    }
}
