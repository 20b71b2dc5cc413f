//! The pod and node informers when extenders are configured: each object decoded as JSON
//! once, its text (without `metadata.managedFields`) kept in the extenders' side store
//! ([`ApiObjects`]) and its lean form handed to the usual handler. Without extenders the
//! informers decode the lean forms directly and this module is not used.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use scheduler_core::framework::NodeFingerprint;
use scheduler_core::types::PodInfo;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::handlers::{Handler, Nodes, Pods};
use super::lean::Lean;
use crate::extender::objects::ApiObjects;
use crate::state::{Shared, State};

/// A `K` with the JSON text it was decoded from, less `metadata.managedFields`.
#[derive(Clone)]
pub(crate) struct Raw<K> {
    pub(crate) obj: K,
    pub(crate) json: Arc<str>,
}

impl<K: fmt::Debug> fmt::Debug for Raw<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.obj.fmt(f)
    }
}

impl<'de, K: DeserializeOwned> Deserialize<'de> for Raw<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut v = Value::deserialize(d)?;
        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
        let obj = K::deserialize(&v).map_err(D::Error::custom)?;
        Ok(Raw {
            obj,
            json: v.to_string().into(),
        })
    }
}

impl<K: k8s_openapi::Resource> k8s_openapi::Resource for Raw<K> {
    const API_VERSION: &'static str = K::API_VERSION;
    const GROUP: &'static str = K::GROUP;
    const KIND: &'static str = K::KIND;
    const VERSION: &'static str = K::VERSION;
    const URL_PATH_SEGMENT: &'static str = K::URL_PATH_SEGMENT;
    type Scope = K::Scope;
}

impl<K: k8s_openapi::Metadata<Ty = ObjectMeta>> k8s_openapi::Metadata for Raw<K> {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        self.obj.metadata()
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        self.obj.metadata_mut()
    }
}

/// Pods, keeping a pending pod's object for the extenders.
pub(super) struct RawPods(pub(super) Arc<ApiObjects>);

impl Handler<Raw<Lean<Pod>>> for RawPods {
    type View = Arc<PodInfo>;
    fn apply(
        &self,
        shared: &Shared,
        old: Option<&Arc<PodInfo>>,
        new: Raw<Lean<Pod>>,
    ) -> Arc<PodInfo> {
        let pod = &new.obj.0;
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let spec = pod.spec.as_ref();
        let pending = spec.is_some_and(|s| {
            s.node_name.as_deref().unwrap_or_default().is_empty()
                && shared
                    .profiles
                    .for_scheduler_name(s.scheduler_name.as_deref().unwrap_or_default())
                    .is_some()
        });
        // Kept before the pod can reach the queue, so its first cycle finds it.
        self.0.pod_changed(uid, pending, new.json);
        Pods.apply(shared, old, new.obj)
    }
    fn delete(&self, shared: &Shared, st: &mut State, key: &str, old: &Arc<PodInfo>) {
        self.0.pod_deleted(&old.uid);
        Pods.delete(shared, st, key, old);
    }
    fn view(&self, obj: Raw<Lean<Pod>>) -> Arc<PodInfo> {
        Pods.view(obj.obj)
    }
    fn event_label(
        &self,
        kind: &str,
        old: Option<&Arc<PodInfo>>,
        new: Option<&Arc<PodInfo>>,
    ) -> Option<String> {
        Pods.event_label(kind, old, new)
    }
}

/// Nodes, keeping each node's object for the extenders.
pub(super) struct RawNodes(pub(super) Arc<ApiObjects>);

impl Handler<Raw<Lean<Node>>> for RawNodes {
    type View = NodeFingerprint;
    fn apply(
        &self,
        shared: &Shared,
        old: Option<&NodeFingerprint>,
        new: Raw<Lean<Node>>,
    ) -> NodeFingerprint {
        let name = new.obj.0.metadata.name.clone().unwrap_or_default();
        self.0.node_changed(&name, new.json);
        Nodes.apply(shared, old, new.obj)
    }
    fn delete(&self, shared: &Shared, st: &mut State, name: &str, old: &NodeFingerprint) {
        self.0.node_deleted(name);
        Nodes.delete(shared, st, name, old);
    }
    fn view(&self, obj: Raw<Lean<Node>>) -> NodeFingerprint {
        Nodes.view(obj.obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_keeps_everything_but_managed_fields() {
        let text = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"d",
            "uid":"u","annotations":{"team":"blue"},"managedFields":[{"manager":"kubectl"}]},
            "spec":{"containers":[{"name":"c","image":"img","args":["x"]}],
            "tolerations":[{"key":"k","operator":"Exists"}]}}"#;
        let raw: Raw<Lean<Pod>> = serde_json::from_str(text).unwrap();
        let json: Value = serde_json::from_str(&raw.json).unwrap();
        assert!(json["metadata"].get("managedFields").is_none());
        assert_eq!(json["metadata"]["annotations"]["team"], "blue");
        assert_eq!(json["spec"]["containers"][0]["args"][0], "x");
        assert_eq!(raw.obj.0.metadata.name.as_deref(), Some("p"));
        assert!(raw.obj.0.metadata.managed_fields.is_none());
    }
}
